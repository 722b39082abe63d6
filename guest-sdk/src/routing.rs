//! Which [`Actor`](crate::Actor) hook a message goes to, decided from its kind and sender
//! alone: plain Rust, so the decisions are testable natively.

use crate::bindings::mote::actor::types::Address;
use crate::dead_letter::DeadLetter;
use crate::message::{ASK_PREFIX, ASK_TIMEOUT, DEAD_LETTER, Envelope, HTTP_RESPONSE, TERMINATED};

/// Where one message goes.
#[derive(Debug, PartialEq)]
pub(crate) enum Route {
    /// `terminated`, for this incarnation.
    Terminated(Address),
    /// `dead_letter`, with the decoded letter.
    DeadLetter(DeadLetter),
    /// `ask_timeout`, for this ask id.
    AskTimeout(u64),
    /// `answered`, a reply to this ask id.
    Answer(u64),
    /// `http_response`, the outcome of this call-out id.
    HttpResponse(u64),
    /// The top behaviour or `receive`: the kind is the actor's `Msg`.
    Message,
    /// `unhandled`: any other kind.
    Unhandled,
    /// Nowhere: a host message that makes no sense, logged with this warning.
    Ignore(String),
}

/// Routes `env` for an actor whose message kind is `msg_kind`. Host kinds go first (a dead
/// letter's sender is the original one, whatever it is), then ask replies and timeouts by
/// their sender, then the actor's own kind.
pub(crate) fn route(env: &Envelope, msg_kind: &str) -> Route {
    let ask_id = ask_id(env.sender.as_ref());
    match env.kind.as_str() {
        TERMINATED => match &env.sender {
            Some(who) => Route::Terminated(who.clone()),
            None => Route::Ignore(format!(
                "ignoring a `{TERMINATED}` message without a sender"
            )),
        },
        DEAD_LETTER => match DeadLetter::decode(env.sender.clone(), &env.body) {
            Ok(letter) => Route::DeadLetter(letter),
            Err(e) => Route::Ignore(format!("ignoring a dead letter: {e}")),
        },
        ASK_TIMEOUT => match ask_id {
            Some(id) => Route::AskTimeout(id),
            None => Route::Ignore(format!("ignoring a `{ASK_TIMEOUT}` not from an ask")),
        },
        HTTP_RESPONSE => match (&env.sender, <[u8; 8]>::try_from(env.body.as_slice())) {
            (None, Ok(id)) => Route::HttpResponse(u64::from_le_bytes(id)),
            _ => Route::Ignore(format!("ignoring a malformed `{HTTP_RESPONSE}`")),
        },
        _ => match ask_id {
            Some(id) => Route::Answer(id),
            None if env.kind == msg_kind => Route::Message,
            None => Route::Unhandled,
        },
    }
}

/// The ask id if `sender` is an ask's address (`/system/ask/<id>`, incarnation = id).
pub(crate) fn ask_id(sender: Option<&Address>) -> Option<u64> {
    sender
        .filter(|s| s.path.starts_with(ASK_PREFIX))
        .map(|s| s.incarnation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(sender: Option<&str>, kind: &str, body: Vec<u8>) -> Envelope {
        Envelope {
            sender: sender.map(|path| Address {
                path: path.to_string(),
                incarnation: 42,
            }),
            kind: kind.to_string(),
            body,
        }
    }

    #[test]
    fn own_and_other_kinds() {
        assert_eq!(
            route(&env(Some("/user/a"), "Tick", vec![]), "Tick"),
            Route::Message
        );
        assert_eq!(route(&env(None, "Tick", vec![]), "Tick"), Route::Message);
        assert_eq!(route(&env(None, "Tock", vec![]), "Tick"), Route::Unhandled);
    }

    #[test]
    fn ask_replies_and_timeouts_go_by_sender() {
        let reply = env(Some("/system/ask/42"), "Tick", vec![1]);
        assert_eq!(route(&reply, "Tick"), Route::Answer(42));
        assert_eq!(route(&reply, "Other"), Route::Answer(42));
        let timeout = env(Some("/system/ask/42"), ASK_TIMEOUT, vec![]);
        assert_eq!(route(&timeout, "Tick"), Route::AskTimeout(42));
        let stray = env(Some("/user/a"), ASK_TIMEOUT, vec![]);
        assert!(matches!(route(&stray, "Tick"), Route::Ignore(_)));
        assert_eq!(ask_id(None), None);
    }

    #[test]
    fn host_kinds() {
        let terminated = env(Some("/user/w"), TERMINATED, vec![]);
        let who = terminated.sender.clone();
        assert_eq!(route(&terminated, "Tick").into_who(), who);
        let orphan = env(None, TERMINATED, vec![]);
        assert!(matches!(route(&orphan, "Tick"), Route::Ignore(_)));

        let letter = DeadLetter {
            sender: None,
            target: "/system/ask/7".to_string(),
            kind: "Tick".to_string(),
            body: vec![3],
        };
        let dead = env(None, DEAD_LETTER, letter.encode());
        assert_eq!(route(&dead, "Tick"), Route::DeadLetter(letter));
        let from_ask = env(Some("/system/ask/9"), DEAD_LETTER, vec![0, 0, 0]);
        assert!(matches!(route(&from_ask, "Tick"), Route::DeadLetter(_)));
        let malformed = env(None, DEAD_LETTER, vec![9]);
        assert_eq!(
            route(&malformed, "Tick"),
            Route::Ignore(
                "ignoring a dead letter: malformed `mote.deadletter` body: target of 9 bytes \
                 is truncated"
                    .to_string()
            )
        );
    }

    #[test]
    fn call_out_news_carries_its_id() {
        let news = env(None, HTTP_RESPONSE, 7u64.to_le_bytes().to_vec());
        assert_eq!(route(&news, "Tick"), Route::HttpResponse(7));
        let short = env(None, HTTP_RESPONSE, vec![7]);
        assert!(matches!(route(&short, "Tick"), Route::Ignore(_)));
        let forged = env(Some("/user/a"), HTTP_RESPONSE, 7u64.to_le_bytes().to_vec());
        assert!(matches!(route(&forged, "Tick"), Route::Ignore(_)));
    }

    impl Route {
        /// The incarnation of a `Terminated` route.
        fn into_who(self) -> Option<Address> {
            match self {
                Route::Terminated(who) => Some(who),
                _ => None,
            }
        }
    }
}
