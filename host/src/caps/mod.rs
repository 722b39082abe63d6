//! The host's capabilities: everything an actor can ask of the host beyond its sandbox, each
//! one unit (see [`capability`]) owning its WIT slice, its per-actor state, its service, its
//! linking and grants, and its hooks. This list is the whole registration: a new capability is
//! its unit, its WIT interface, and one line here.

pub(crate) mod callouts;
pub(crate) mod capability;
pub(crate) mod clock;
pub(crate) mod delivery;
pub(crate) mod forwarding;
pub(crate) mod host;
pub(crate) mod lifecycle;
pub(crate) mod lookup;
pub(crate) mod messaging;
pub(crate) mod naming;
pub(crate) mod persistence;
pub(crate) mod priority;
pub(crate) mod stashing;
pub(crate) mod supervision;
pub(crate) mod timers;
pub(crate) mod wasi;

use capability::capabilities;

/// The store data of an actor instance of this host.
pub(crate) type ActorState = capability::ActorState<Caps>;

capabilities! {
    /// `mote:actor/host`: address, send, spawn, stop, log.
    host: host::Host,
    /// `mote:actor/supervision`: strategies, limits per child, death watch, restart cause.
    supervision: supervision::Supervision,
    /// `mote:actor/timers`: messages later, once or periodically.
    timers: timers::Timers,
    /// `mote:actor/messaging`: topics, groups, asks, and dead letters as a topic.
    messaging: messaging::Messaging,
    /// `mote:actor/persistence`: journals, snapshots, exactly-once messages, reminders, entities.
    persistence: persistence::Persistence,
    /// `mote:actor/clock`: an actor's age and the CPU time it used.
    clock: clock::Clock,
    /// `mote:actor/forwarding`: passing a message on with its original sender.
    forwarding: forwarding::Forwarding,
    /// `mote:actor/lookup`: an actor's children, and the address at a path.
    lookup: lookup::Lookup,
    /// `mote:actor/naming`: aliases, second names resolved like paths.
    naming: naming::Naming,
    /// `mote:actor/stash`: messages set aside by their actor, kept by the host.
    stash: stashing::Stashing,
    /// `mote:actor/callouts`: HTTP requests whose outcome comes back as a message.
    callouts: callouts::Callouts,
    /// `mote:actor/priority`: urgent messages, on the receiver's urgent lane.
    priority: priority::Priority,
    /// `mote:actor/lifecycle`: a parent deactivates and activates its children.
    lifecycle: lifecycle::Lifecycle,
    /// `mote:actor/delivery`: at-least-once or at-most-once for an actor's durable messages.
    delivery: delivery::Delivery,
    /// WASI: clocks, random, guest output into the log, and `wasi:http` when granted.
    wasi: wasi::Wasi,
}
