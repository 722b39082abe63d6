//! Behaviour switching (Akka's `become`/`unbecome`), as a hook asks for it through
//! [`Context`], and the requests a hook makes of the stash (see [`stash`](crate::stash)).
//!
//! A [`Behavior`] is a plain function of the actor type that handles its `Msg` in place of
//! [`Actor::receive`]. [`Context`] is not generic, so [`Context::become_`] stores the behaviour
//! type-erased; the typed runtime recovers it once the hook has returned (a behaviour of another
//! actor type is an error). Every request takes effect only when the hook succeeds, so for the
//! next message.

use core::any::Any;
use core::fmt;

use crate::actor::Actor;
use crate::context::Context;
use crate::error::{Error, Result};

/// A behaviour: handles the actor's messages in place of [`Actor::receive`] while it is on top
/// of the behaviour stack.
pub type Behavior<A> = fn(&mut A, &mut Context, <A as Actor>::Msg) -> Result<()>;

/// A change to behaviours or stash requested during a hook, type-erased.
pub(crate) enum Request {
    /// Push a behaviour, a `Behavior<A>` boxed as `Any`.
    Become(Box<dyn Any>),
    /// Pop the top behaviour.
    Unbecome,
    /// Keep the message being handled for later.
    Stash,
    /// Handle every stashed message before any new one.
    UnstashAll,
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Become(_) => "Become(..)",
            Self::Unbecome => "Unbecome",
            Self::Stash => "Stash",
            Self::UnstashAll => "UnstashAll",
        })
    }
}

/// A [`Request`] typed for actor `A`.
pub(crate) enum Change<A: Actor> {
    /// Push this behaviour.
    Become(Behavior<A>),
    /// Pop the top behaviour, if any.
    Unbecome,
    /// Stash the message being handled.
    Stash,
    /// Release the stash ahead of any new message.
    UnstashAll,
}

impl<A: Actor> Change<A> {
    /// Types a request; an error if a behaviour belongs to another actor type.
    pub(crate) fn from_request(request: Request) -> Result<Self> {
        Ok(match request {
            Request::Become(behavior) => match behavior.downcast::<Behavior<A>>() {
                Ok(behavior) => Self::Become(*behavior),
                Err(_) => {
                    return Err(Error::msg(format!(
                        "become_: the behaviour is not a function of actor type `{}`",
                        core::any::type_name::<A>()
                    )));
                }
            },
            Request::Unbecome => Self::Unbecome,
            Request::Stash => Self::Stash,
            Request::UnstashAll => Self::UnstashAll,
        })
    }
}

impl Context {
    /// Handles the next messages of the actor's `Msg` type with `behavior` until it is popped:
    /// behaviours stack, each `become_` pushing one (write `ctx.become_(Self::open)`).
    pub fn become_<A: Actor>(&mut self, behavior: Behavior<A>) {
        self.requests.push(Request::Become(Box::new(behavior)));
    }

    /// Pops the current behaviour, back to the previous one or to [`Actor::receive`]; a no-op
    /// if none is pushed.
    pub fn unbecome(&mut self) {
        self.requests.push(Request::Unbecome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Envelope;
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    struct Tick;
    crate::message!(Tick);

    struct One;
    struct Two;

    impl Actor for One {
        type Msg = Tick;
        fn start(_: &mut Context, _: &[u8]) -> Result<Self> {
            Ok(Self)
        }
        fn receive(&mut self, _: &mut Context, _: Tick) -> Result<()> {
            Ok(())
        }
        fn unhandled(&mut self, _: &mut Context, _: Envelope) -> Result<()> {
            Ok(())
        }
    }

    impl Actor for Two {
        type Msg = Tick;
        fn start(_: &mut Context, _: &[u8]) -> Result<Self> {
            Ok(Self)
        }
        fn receive(&mut self, _: &mut Context, _: Tick) -> Result<()> {
            Ok(())
        }
    }

    impl One {
        fn other(&mut self, _: &mut Context, _: Tick) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn requests_are_recorded_in_call_order() {
        let mut ctx = Context::new();
        ctx.begin_message(None);
        ctx.stash();
        ctx.become_(One::other);
        ctx.unstash_all();
        ctx.unbecome();
        let recorded = format!("{:?}", ctx.take_requests());
        assert_eq!(recorded, "[Stash, Become(..), UnstashAll, Unbecome]");
        assert!(ctx.take_requests().is_empty());
    }

    #[test]
    fn behaviours_are_typed_back() {
        let mut ctx = Context::new();
        ctx.become_(One::other);
        let mut requests = ctx.take_requests();
        let typed = requests.pop().map(Change::<One>::from_request);
        assert!(matches!(typed, Some(Ok(Change::Become(_)))));
    }

    #[test]
    fn a_behaviour_of_another_actor_is_refused() {
        let mut ctx = Context::new();
        ctx.become_(One::other);
        let mut requests = ctx.take_requests();
        let error = requests
            .pop()
            .map(Change::<Two>::from_request)
            .and_then(|typed| typed.err())
            .map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.starts_with("become_: the behaviour is not")));
    }
}
