//! What a host capability is: one unit that owns its slice of the WIT contract, its per-actor
//! state, its host-wide service, its linker wiring, the imports it grants, and its hooks into
//! the lives of the host and of each actor. In the spirit of Spin's factors.
//!
//! A capability is a type implementing [`Capability`]; the value is its host-wide service (built
//! once from the host's configuration), and [`Capability::State`] is what it keeps per actor
//! instance, inside the actor's wasmtime store. Its WIT `Host` traits are implemented on
//! [`Call`], the view an import call gets: the calling actor's [`ActorCore`], the capability's
//! state for that actor, and the service. [`capabilities!`] composes the units into the host's
//! set: a struct of services, a struct of per-actor states, the projections between them, and
//! one loop per hook. Adding a capability is its unit, its WIT slice and one line in that list.

use std::marker::PhantomData;
use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::actor::core::ActorCore;
use crate::actor::step::{Commit, Step};
use crate::address::Address;
use crate::caps::persistence::history::History;
use crate::config::HostConfig;
use crate::error::HostError;
use crate::guestlog::GuestLog;
use crate::kernel::{Kernel, Undelivered};
use crate::message::{Envelope, Receipt};
use crate::storage::Database;

/// What a capability's service is built from.
pub(crate) struct Env<'a> {
    pub(crate) config: &'a HostConfig,
    /// The host's database, if it has one.
    pub(crate) database: Option<&'a Arc<Database>>,
    /// Where guest log lines go.
    pub(crate) guest_log: &'a Arc<GuestLog>,
    /// Set for a replay's sandbox: the history it recovers from. Nothing may leave it.
    pub(crate) replay: Option<&'a Arc<History>>,
}

/// An import a module may be granted beyond the defaults (a manifest's `grant = [...]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The grant's name, as a manifest spells it (`wasi:http`).
    pub(crate) name: &'static str,
    /// The imports it opens, by prefix (`wasi:http/`).
    pub(crate) imports: &'static str,
}

/// How an actor instance comes to be, for the state a capability gives it.
pub(crate) enum Origin<'a, S> {
    /// The first instance of a new incarnation.
    Spawned,
    /// A fresh instance after a failure: the old one's state, and why.
    Restarted { old: S, cause: &'a str },
    /// A new version of the module (hot swap) beside the old instance, which keeps running
    /// if the new one does not take over.
    Upgraded { old: &'a S },
}

/// One host capability. The value is its host-wide service.
///
/// Every hook has a default that does nothing, so a unit implements what it needs.
pub(crate) trait Capability: Send + Sync + Sized + 'static {
    /// What the capability keeps per actor instance.
    type State: Send + 'static;

    /// WIT imports (by prefix) every module may use through this capability.
    const IMPORTS: &'static [&'static str] = &[];
    /// Imports a module gets through this capability only when granted.
    const GRANTS: &'static [Grant] = &[];

    /// Builds the service.
    fn new(env: &Env<'_>) -> Result<Self, HostError>;

    /// Adds the capability's WIT interfaces to the host's linker.
    fn link<K: Provides<Self>>(linker: &mut Linker<ActorState<K>>) -> wasmtime::Result<()>;

    /// The state of a new actor instance.
    fn state(&self, actor: &ActorCore, origin: Origin<'_, Self::State>) -> Self::State;

    // The host's life.

    /// The kernel exists: start background work (a timer driver, say).
    fn started(&self, _kernel: &Arc<Kernel>) {}

    /// The host shuts down gracefully, after every actor stopped: finish durable work.
    fn shutdown(&self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The kernel is gone: end background work.
    fn closed(&self) {}

    /// A scrape of the host's metrics: register what this capability counts (pending timers,
    /// asks, commits...), with the values of now, under the `mote_` prefix.
    fn metrics(&self, _registry: &mut prometheus_client::registry::Registry) {}

    // An actor's life.

    /// The actor's instance failed and is being taken down for a restart.
    fn restarting(&self, _actor: &Address, _state: &mut Self::State) {}

    /// The actor has terminated for good; `state` is its last instance's, if it had one.
    fn stopped(&self, _kernel: &Arc<Kernel>, _actor: &Address, _state: Option<&mut Self::State>) {}

    /// A durable message is about to reach the actor's guest: false if the actor has already
    /// consumed it (a duplicate: it is acknowledged again and dropped).
    fn fresh(&self, _state: &mut Self::State, _receipt: Receipt) -> bool {
        true
    }

    /// A host message (kind `mote.*`) for the actor: false drops it before the guest sees it.
    fn admit(&self, _state: &mut Self::State, _envelope: &Envelope) -> bool {
        true
    }

    /// A message this capability hands the actor before the next one of its mailbox, if any.
    fn next(&self, _state: &mut Self::State) -> Option<Envelope> {
        None
    }

    /// The call handling `envelope` returned and set it aside (`ActorCore::keep`): the
    /// capability that keeps it takes it; `Err` gives it back.
    fn keep(&self, _state: &mut Self::State, envelope: Envelope) -> Result<(), Envelope> {
        Err(envelope)
    }

    /// Whether the capability holds messages for the actor (then it is not idle).
    fn holds(&self, _state: &Self::State) -> bool {
        false
    }

    // An actor's steps (see `actor::step`).

    /// A call returned: the write that must be durable before the step's effects are
    /// released, if this capability journals the actor. It may take `consumed`, the durable
    /// messages the call handled, to acknowledge them in that write.
    fn seal(
        &self,
        _state: &mut Self::State,
        _step: &mut Step,
        _consumed: &mut Vec<Receipt>,
    ) -> Option<Commit> {
        None
    }

    /// A durable message's `receipt` is about to be handed to `actor`'s guest: a capability may
    /// take it to acknowledge it before the guest sees the message, with a write the cell
    /// awaits first (at-most-once delivery). If that write fails, the guest does not see it.
    fn deliver(
        &self,
        _state: &mut Self::State,
        _actor: &ActorCore,
        _receipt: &mut Option<Receipt>,
    ) -> Option<Commit> {
        None
    }

    /// The durable write that acknowledges `receipt` now, from the capability that keeps
    /// durable messages (`None` from the others, or without a database).
    fn acknowledge(&self, _receipt: Receipt) -> Option<Commit> {
        None
    }

    /// A call failed: whatever it prepared is dropped.
    fn abandon(&self, _state: &mut Self::State) {}

    // Delivery (see `kernel::Extensions`).

    /// Messages waiting for a new actor at `path`.
    fn backlog(&self, _kernel: &Arc<Kernel>, _path: &str, _into: &mut Vec<Envelope>) {}

    /// Takes back a backlog whose spawn lost the path.
    fn return_backlog(&self, _path: &str, _messages: &mut Vec<Envelope>) {}

    /// A message no live actor takes at `path`: `Err` gives it back.
    fn unclaimed(
        &self,
        _kernel: &Arc<Kernel>,
        _path: &str,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        Err(envelope)
    }

    /// A durable message was consumed without a journaled step, or dropped.
    fn settle(&self, _receipt: Receipt) {}

    /// A durable message became a dead letter for good: by default it is settled (dropped).
    fn undeliverable(&self, receipt: Receipt) {
        self.settle(receipt);
    }

    /// A durable message leaves for another node: its receipt as a token that node takes over
    /// (`None` from the others, or from a store that cannot hand receipts on).
    fn export_receipt(&self, _receipt: Receipt) -> Option<Vec<u8>> {
        None
    }

    /// The receipt here of a durable message that came from another node with `token`.
    fn import_receipt(&self, _token: &[u8]) -> Option<Receipt> {
        None
    }

    /// A message became a dead letter.
    fn dead_letter(&self, _kernel: &Arc<Kernel>, _envelope: &Envelope, _target: &str) {}

    // Images (see `actor::image`).

    /// The actor is captured as an image between two calls: what this capability must keep to
    /// carry on after a restore (empty: nothing), or why the actor cannot be captured now.
    fn capture(&self, _actor: &ActorCore, _state: &Self::State) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }

    /// The actor is about to hibernate: its instance is dropped and later rebuilt from an image
    /// of its core state, while this state stays as it is. Err says why it cannot be now
    /// (something of it lives in the instance itself).
    fn hibernate(&self, _actor: &ActorCore, _state: &Self::State) -> Result<(), String> {
        Ok(())
    }

    /// The state of an instance restored from an image, and what it takes up again (topics,
    /// say): `image` is what [`Capability::capture`] kept, untrusted.
    fn restore(&self, actor: &ActorCore, image: &[u8]) -> Result<Self::State, String> {
        match image {
            [] => Ok(self.state(actor, Origin::Spawned)),
            _ => Err("the image holds bookkeeping this capability never keeps".into()),
        }
    }
}

/// A set of capabilities: what the host's store data is built from.
pub(crate) trait CapabilitySet: Send + Sync + Sized + 'static {
    /// The per-actor states of every capability in the set.
    type States: Send + 'static;
}

/// A set that contains the capability `C`.
pub(crate) trait Provides<C: Capability>: CapabilitySet {
    /// `C`'s state within the per-actor states.
    fn state(states: &mut Self::States) -> &mut C::State;
    /// `C`'s service.
    fn unit(&self) -> &C;
}

/// The store data of one actor instance.
pub(crate) struct ActorState<K: CapabilitySet> {
    /// What every capability sees.
    pub(crate) core: ActorCore,
    /// Each capability's state.
    pub(crate) caps: K::States,
    /// The services.
    pub(crate) set: Arc<K>,
}

impl<K: CapabilitySet> ActorState<K> {
    /// The view an import of `C` gets.
    pub(crate) fn call<C: Capability>(&mut self) -> Call<'_, C>
    where
        K: Provides<C>,
    {
        Call {
            actor: &mut self.core,
            state: K::state(&mut self.caps),
            cap: self.set.unit(),
        }
    }
}

/// What an import call of capability `C` works with.
pub(crate) struct Call<'a, C: Capability> {
    /// The calling actor.
    pub(crate) actor: &'a mut ActorCore,
    /// `C`'s state for it.
    pub(crate) state: &'a mut C::State,
    /// `C`'s service.
    pub(crate) cap: &'a C,
}

/// The [`HasData`] of capability `C`'s imports: they are implemented on [`Call`].
pub(crate) struct HasCall<C>(PhantomData<C>);

impl<C: Capability> HasData for HasCall<C> {
    type Data<'a> = Call<'a, C>;
}

/// Composes capabilities into the host's set, one line each: `name: Type`.
macro_rules! capabilities {
    ($($(#[$doc:meta])* $field:ident: $unit:ty),* $(,)?) => {
        /// The host's capabilities: each one's service.
        pub(crate) struct Caps {
            $($(#[$doc])* pub(crate) $field: $unit,)*
        }

        /// Each capability's state for one actor instance.
        pub(crate) struct States {
            $($field: <$unit as $crate::caps::capability::Capability>::State,)*
        }

        impl $crate::caps::capability::CapabilitySet for Caps {
            type States = States;
        }

        $(
            impl $crate::caps::capability::Provides<$unit> for Caps {
                fn state(
                    states: &mut States,
                ) -> &mut <$unit as $crate::caps::capability::Capability>::State {
                    &mut states.$field
                }
                fn unit(&self) -> &$unit {
                    &self.$field
                }
            }
        )*

        #[allow(dead_code)]
        impl Caps {
            /// Builds every service.
            pub(crate) fn new(
                env: &$crate::caps::capability::Env<'_>,
            ) -> Result<Self, $crate::error::HostError> {
                use $crate::caps::capability::Capability as _;
                Ok(Caps { $($field: <$unit>::new(env)?,)* })
            }

            /// Adds every capability's interfaces to `linker`.
            pub(crate) fn link(
                linker: &mut wasmtime::component::Linker<ActorState>,
            ) -> wasmtime::Result<()> {
                use $crate::caps::capability::Capability as _;
                $(<$unit>::link::<Caps>(linker)?;)*
                Ok(())
            }

            /// Whether a module granted `grants` may import `import`; `Err` names what would
            /// grant it, if anything does.
            pub(crate) fn permits(import: &str, grants: &[String]) -> Result<(), Option<&'static str>> {
                use $crate::caps::capability::Capability;
                $(
                    if <$unit as Capability>::IMPORTS.iter().any(|p| import.starts_with(p)) {
                        return Ok(());
                    }
                    for grant in <$unit as Capability>::GRANTS {
                        if import.starts_with(grant.imports) {
                            return if grants.iter().any(|g| g == grant.name) {
                                Ok(())
                            } else {
                                Err(Some(grant.name))
                            };
                        }
                    }
                )*
                Err(None)
            }

            /// Every grant some capability can give.
            pub(crate) fn grantable() -> Vec<&'static str> {
                use $crate::caps::capability::Capability;
                let mut all = Vec::new();
                $(all.extend(<$unit as Capability>::GRANTS.iter().map(|g| g.name));)*
                all
            }

            /// The states of a new instance.
            pub(crate) fn states(
                &self,
                actor: &$crate::actor::core::ActorCore,
                origin: $crate::caps::capability::Origin<'_, States>,
            ) -> States {
                use $crate::caps::capability::{Capability as _, Origin};
                match origin {
                    Origin::Spawned => States {
                        $($field: self.$field.state(actor, Origin::Spawned),)*
                    },
                    Origin::Restarted { old, cause } => States {
                        $($field: self.$field.state(actor, Origin::Restarted { old: old.$field, cause }),)*
                    },
                    Origin::Upgraded { old } => States {
                        $($field: self.$field.state(actor, Origin::Upgraded { old: &old.$field }),)*
                    },
                }
            }

            /// Whether the actor can hibernate now, or why not (the first capability to object).
            pub(crate) fn hibernate(
                &self,
                actor: &$crate::actor::core::ActorCore,
                states: &States,
            ) -> Result<(), String> {
                use $crate::caps::capability::Capability as _;
                $(
                    self.$field.hibernate(actor, &states.$field)
                        .map_err(|why| format!("{}: {why}", stringify!($field)))?;
                )*
                Ok(())
            }

            /// What every capability keeps of an actor captured now, by capability name (those
            /// that keep nothing are left out), or why it cannot be captured.
            pub(crate) fn capture(
                &self,
                actor: &$crate::actor::core::ActorCore,
                states: &States,
            ) -> Result<Vec<(String, Vec<u8>)>, String> {
                use $crate::caps::capability::Capability as _;
                let mut kept = Vec::new();
                $(
                    let bytes = self.$field.capture(actor, &states.$field)
                        .map_err(|why| format!("{}: {why}", stringify!($field)))?;
                    if !bytes.is_empty() {
                        kept.push((stringify!($field).to_owned(), bytes));
                    }
                )*
                Ok(kept)
            }

            /// The states of an instance restored from `image`, each capability's from what it
            /// kept; bookkeeping of a capability this host lacks is refused.
            pub(crate) fn restore(
                &self,
                actor: &$crate::actor::core::ActorCore,
                image: &$crate::actor::image::ActorImage,
            ) -> Result<States, String> {
                use $crate::caps::capability::Capability as _;
                const NAMES: &[&str] = &[$(stringify!($field)),*];
                if let Some((name, _)) = image.caps.iter().find(|(n, _)| !NAMES.contains(&n.as_str())) {
                    return Err(format!("the image has bookkeeping of {name:?}, which this host lacks"));
                }
                Ok(States {
                    $($field: self.$field.restore(actor, image.cap(stringify!($field)))
                        .map_err(|why| format!("{}: {why}", stringify!($field)))?,)*
                })
            }

            /// Tells every capability that the kernel exists.
            pub(crate) fn started(&self, kernel: &std::sync::Arc<$crate::kernel::Kernel>) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.started(kernel);)*
            }

            /// Lets every capability finish its durable work.
            pub(crate) async fn shutdown(&self) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.shutdown().await;)*
            }

            /// Tells every capability that the kernel is gone.
            pub(crate) fn closed(&self) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.closed();)*
            }

            /// Lets every capability register its metrics for one scrape.
            pub(crate) fn metrics(&self, registry: &mut prometheus_client::registry::Registry) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.metrics(registry);)*
            }

            /// An actor's instance is taken down for a restart.
            pub(crate) fn restarting(&self, actor: &$crate::address::Address, states: &mut States) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.restarting(actor, &mut states.$field);)*
            }

            /// An actor terminated.
            pub(crate) fn stopped(
                &self,
                kernel: &std::sync::Arc<$crate::kernel::Kernel>,
                actor: &$crate::address::Address,
                mut states: Option<&mut States>,
            ) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.stopped(kernel, actor, states.as_mut().map(|s| &mut s.$field));)*
            }

            /// Whether the actor has not consumed this durable message yet.
            pub(crate) fn fresh(&self, states: &mut States, receipt: $crate::message::Receipt) -> bool {
                use $crate::caps::capability::Capability as _;
                $(self.$field.fresh(&mut states.$field, receipt) &&)* true
            }

            /// Whether the guest sees this host message.
            pub(crate) fn admit(&self, states: &mut States, envelope: &$crate::message::Envelope) -> bool {
                use $crate::caps::capability::Capability as _;
                $(self.$field.admit(&mut states.$field, envelope) &&)* true
            }

            /// The next message a capability hands the actor before its mailbox.
            pub(crate) fn next(&self, states: &mut States) -> Option<$crate::message::Envelope> {
                use $crate::caps::capability::Capability as _;
                $(
                    if let Some(envelope) = self.$field.next(&mut states.$field) {
                        return Some(envelope);
                    }
                )*
                None
            }

            /// Hands a message the actor set aside to the capability that keeps it; `Err`
            /// gives it back if none does.
            pub(crate) fn keep(
                &self,
                states: &mut States,
                envelope: $crate::message::Envelope,
            ) -> Result<(), $crate::message::Envelope> {
                use $crate::caps::capability::Capability as _;
                $(
                    let envelope = match self.$field.keep(&mut states.$field, envelope) {
                        Ok(()) => return Ok(()),
                        Err(envelope) => envelope,
                    };
                )*
                Err(envelope)
            }

            /// Whether some capability holds messages for the actor.
            pub(crate) fn holds(&self, states: &States) -> bool {
                use $crate::caps::capability::Capability as _;
                $(self.$field.holds(&states.$field) ||)* false
            }

            /// What must be durable before the step's effects are released: the commits of the
            /// capabilities that journal this actor, awaited one after the other (a store's
            /// write may be under way from when it is made: the JetStream store's is a task).
            /// Only persistence journals today.
            pub(crate) fn seal(
                &self,
                states: &mut States,
                step: &mut $crate::actor::step::Step,
                consumed: &mut Vec<$crate::message::Receipt>,
            ) -> Option<$crate::actor::step::Commit> {
                use $crate::caps::capability::Capability as _;
                let mut sealed: Option<$crate::actor::step::Commit> = None;
                $(
                    if let Some(commit) = self.$field.seal(&mut states.$field, step, consumed) {
                        sealed = Some(match sealed.take() {
                            None => commit,
                            Some(first) => Box::pin(async move {
                                first.await?;
                                commit.await
                            }),
                        });
                    }
                )*
                sealed
            }

            /// What must be durable before the guest sees a durable message: the write of the
            /// capability that took its receipt, if one did.
            pub(crate) fn deliver(
                &self,
                states: &mut States,
                actor: &$crate::actor::core::ActorCore,
                receipt: &mut Option<$crate::message::Receipt>,
            ) -> Option<$crate::actor::step::Commit> {
                use $crate::caps::capability::Capability as _;
                receipt.as_ref()?;
                $(
                    if let Some(commit) = self.$field.deliver(&mut states.$field, actor, receipt) {
                        return Some(commit);
                    }
                )*
                None
            }

            /// The durable write that acknowledges `receipt` now, if a capability keeps durable
            /// messages.
            pub(crate) fn acknowledge(
                &self,
                receipt: $crate::message::Receipt,
            ) -> Option<$crate::actor::step::Commit> {
                use $crate::caps::capability::Capability as _;
                $(
                    if let Some(commit) = self.$field.acknowledge(receipt) {
                        return Some(commit);
                    }
                )*
                None
            }

            /// A call failed.
            pub(crate) fn abandon(&self, states: &mut States) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.abandon(&mut states.$field);)*
            }

            /// What waits for a new actor at `path`.
            pub(crate) fn backlog(
                &self,
                kernel: &std::sync::Arc<$crate::kernel::Kernel>,
                path: &str,
            ) -> Vec<$crate::message::Envelope> {
                use $crate::caps::capability::Capability as _;
                let mut into = Vec::new();
                $(self.$field.backlog(kernel, path, &mut into);)*
                into
            }

            /// Takes a backlog back.
            pub(crate) fn return_backlog(&self, path: &str, mut messages: Vec<$crate::message::Envelope>) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.return_backlog(path, &mut messages);)*
            }

            /// Offers an unclaimed message to each capability in turn.
            pub(crate) fn unclaimed(
                &self,
                kernel: &std::sync::Arc<$crate::kernel::Kernel>,
                path: &str,
                envelope: $crate::message::Envelope,
            ) -> Result<Option<$crate::kernel::Undelivered>, $crate::message::Envelope> {
                use $crate::caps::capability::Capability as _;
                $(
                    let envelope = match self.$field.unclaimed(kernel, path, envelope) {
                        Ok(outcome) => return Ok(outcome),
                        Err(envelope) => envelope,
                    };
                )*
                Err(envelope)
            }

            /// Settles a durable receipt.
            pub(crate) fn settle(&self, receipt: $crate::message::Receipt) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.settle(receipt);)*
            }

            /// A durable message became a dead letter for good.
            pub(crate) fn undeliverable(&self, receipt: $crate::message::Receipt) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.undeliverable(receipt);)*
            }

            /// A durable message's receipt as a token another node takes over, if a capability
            /// can hand it on.
            pub(crate) fn export_receipt(&self, receipt: $crate::message::Receipt) -> Option<Vec<u8>> {
                use $crate::caps::capability::Capability as _;
                $(
                    if let Some(token) = self.$field.export_receipt(receipt) {
                        return Some(token);
                    }
                )*
                None
            }

            /// The receipt here of a durable message from another node.
            pub(crate) fn import_receipt(&self, token: &[u8]) -> Option<$crate::message::Receipt> {
                use $crate::caps::capability::Capability as _;
                $(
                    if let Some(receipt) = self.$field.import_receipt(token) {
                        return Some(receipt);
                    }
                )*
                None
            }

            /// A dead letter, for the capabilities that watch them.
            pub(crate) fn dead_letter(
                &self,
                kernel: &std::sync::Arc<$crate::kernel::Kernel>,
                envelope: &$crate::message::Envelope,
                target: &str,
            ) {
                use $crate::caps::capability::Capability as _;
                $(self.$field.dead_letter(kernel, envelope, target);)*
            }
        }
    };
}

pub(crate) use capabilities;
