//! The [`Actor`] trait that user code implements, and the [`export_actor!`](crate::export_actor!)
//! macro that exposes one as the component's `actor`, `supervisor` and `upgrade` exports.

use crate::bindings::mote::actor::types::{Address, Directive, StopReason};
use crate::callouts::{CalloutError, HttpResponse};
use crate::context::Context;
use crate::dead_letter::DeadLetter;
use crate::error::{Error, Result};
use crate::message::{Envelope, Message};
use crate::supervision::Failure;

/// An actor: state created by `start`, then one `receive` per message of its kind.
///
/// Host messages and ask replies take their own hooks: `terminated`, `dead_letter`,
/// `ask_timeout`, `http_response` and `answered` (which by default hands replies on to `receive`).
///
/// While a [`Behavior`](crate::Behavior) pushed by [`Context::become_`] is on top of the
/// behaviour stack, it handles `Self::Msg` instead of `receive`.
///
/// In a hot swap, `save_state` hands the state to the new version's `migrate`, which runs
/// instead of `start` (see [`upgrade`](crate::upgrade)).
pub trait Actor: Sized + 'static {
    /// The message type this actor expects; other kinds go to [`Actor::unhandled`].
    type Msg: Message;

    /// Creates the actor's state from its init bytes; an error fails the start.
    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self>;

    /// Handles one message of kind `Self::Msg`; an error is a failure of this actor.
    fn receive(&mut self, ctx: &mut Context, msg: Self::Msg) -> Result<()>;

    /// Decides what happens to `child`, which failed (how, and in words: `failure`); `None`
    /// (the default) defers to the [`Strategy`](crate::Strategy) set with
    /// [`Context::set_strategy`].
    fn supervise(
        &mut self,
        ctx: &mut Context,
        child: &Address,
        failure: &Failure,
    ) -> Option<Directive> {
        let _ = (ctx, child, failure);
        None
    }

    /// Handles the end of an incarnation watched with [`Context::watch`] (a message of kind
    /// [`TERMINATED`](crate::message::TERMINATED)); by default ignores it.
    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        let _ = (ctx, who);
        Ok(())
    }

    /// Handles a dead letter (a message of kind [`DEAD_LETTER`](crate::message::DEAD_LETTER),
    /// which arrives after [`Context::subscribe`] to
    /// [`DEAD_LETTERS_TOPIC`](crate::messaging::DEAD_LETTERS_TOPIC)); by default ignores it.
    fn dead_letter(&mut self, ctx: &mut Context, letter: DeadLetter) -> Result<()> {
        let _ = (ctx, letter);
        Ok(())
    }

    /// Handles the timeout of the ask `id` returned by [`Context::ask`] (a message of kind
    /// [`ASK_TIMEOUT`](crate::message::ASK_TIMEOUT)); by default ignores it.
    fn ask_timeout(&mut self, ctx: &mut Context, id: u64) -> Result<()> {
        let _ = (ctx, id);
        Ok(())
    }

    /// Handles the reply to the ask `id` returned by [`Context::ask`] (a message whose sender
    /// path starts with [`ASK_PREFIX`](crate::message::ASK_PREFIX)). By default it is handled
    /// like any other message: by the top behaviour or `receive` if its kind is `Self::Msg`,
    /// else by `unhandled`; `ctx.sender()` is the ask's address, whose incarnation is `id`.
    fn answered(&mut self, ctx: &mut Context, id: u64, reply: Envelope) -> Result<()> {
        let _ = (id, reply);
        ctx.handle_as_message = true;
        Ok(())
    }

    /// Handles the outcome of the HTTP call-out `id` returned by [`Context::http_request`]
    /// (announced by a message of kind [`HTTP_RESPONSE`](crate::message::HTTP_RESPONSE)): the
    /// response, read whole, or why there is none. By default ignores it.
    fn http_response(
        &mut self,
        ctx: &mut Context,
        id: u64,
        outcome: core::result::Result<HttpResponse, CalloutError>,
    ) -> Result<()> {
        let _ = (ctx, id, outcome);
        Ok(())
    }

    /// Handles a message of any other kind; by default logs a warning and ignores it.
    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        ctx.warn(&format!("unhandled message of kind `{}`", env.kind));
        Ok(())
    }

    /// Called once when the actor stops, after its children have stopped.
    fn stopping(&mut self, ctx: &mut Context, reason: StopReason) {
        let _ = (ctx, reason);
    }

    /// The state to hand to the next version of this module when the host upgrades the actor
    /// (see [`upgrade`](crate::upgrade)), typically [`crate::state`]`(&self.field)`.
    ///
    /// `Ok(None)`, the default, starts the new version afresh with `start`; `Ok(Some(bytes))`
    /// goes to its [`Actor::migrate`]. An error traps, which the host takes as a failure of this
    /// instance. It must not depend on changing `self`: if the new version refuses the state,
    /// this instance keeps running.
    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Creates the actor, instead of `start`, from the state the previous version's
    /// `save_state` returned, typically with [`crate::from_state`]; `from_version` is that
    /// module's version. An error refuses the upgrade: the old instance keeps running. The
    /// default refuses any state.
    fn migrate(ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
        let _ = (ctx, state);
        Err(Error::msg(format!(
            "this actor does not migrate state from version `{from_version}`"
        )))
    }
}

/// Exports an [`Actor`] type as this component's `actor`, `supervisor`, `upgrade` and
/// `packed-receive` interfaces (world `sdk-actor-world`).
///
/// Use it once per crate, at the top level: `mote_guest::export_actor!(MyActor);`. The crate
/// needs no dependency but `mote-guest`.
#[macro_export]
macro_rules! export_actor {
    ($ty:ty) => {
        const _: () = {
            ::std::thread_local! {
                static MOTE_ACTOR_STATE: ::core::cell::RefCell<
                    ::core::option::Option<$crate::__private::Instance<$ty>>,
                > = const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }

            struct MoteActorExport;

            impl $crate::bindings::exports::mote::actor::actor::Guest for MoteActorExport {
                fn start(
                    init: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::start::<$ty>(&MOTE_ACTOR_STATE, &init)
                }

                fn receive(
                    msg: $crate::bindings::mote::actor::types::Message,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::receive::<$ty>(&MOTE_ACTOR_STATE, msg)
                }

                fn stopping(reason: $crate::StopReason) {
                    $crate::__private::stopping::<$ty>(&MOTE_ACTOR_STATE, reason)
                }
            }

            impl $crate::bindings::exports::mote::actor::packed_receive::Guest for MoteActorExport {
                fn receive(
                    msg: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::receive_packed::<$ty>(&MOTE_ACTOR_STATE, msg)
                }
            }

            impl $crate::bindings::exports::mote::actor::supervisor::Guest for MoteActorExport {
                fn supervise(
                    child: $crate::Address,
                    kind: $crate::FailureKind,
                    error: ::std::string::String,
                ) -> ::core::option::Option<$crate::Directive> {
                    let failure = $crate::Failure { kind, error };
                    $crate::__private::supervise::<$ty>(&MOTE_ACTOR_STATE, &child, &failure)
                }
            }

            impl $crate::bindings::exports::mote::actor::upgrade::Guest for MoteActorExport {
                fn save_state() -> ::core::option::Option<::std::vec::Vec<u8>> {
                    $crate::__private::save_state::<$ty>(&MOTE_ACTOR_STATE)
                }

                fn migrate(
                    from_version: ::std::string::String,
                    state: ::std::vec::Vec<u8>,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::__private::migrate::<$ty>(&MOTE_ACTOR_STATE, &from_version, &state)
                }
            }

    $crate::bindings::__export_world!(MoteActorExport with_types_in $crate::bindings);
        };
    };
}
