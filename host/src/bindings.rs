//! Host-side bindings of the `mote:actor` world, generated from `wit/` at compile time.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "actor-world",
    exports: { default: async },
});

pub use mote::actor::types::{
    Address as WitAddress, Directive as WitDirective, LogLevel, Message as WitMessage,
    Scope as WitScope, SendError as WitSendError, SpawnError as WitSpawnError,
    SpawnOptions as WitSpawnOptions, StopReason as WitStopReason, Strategy as WitStrategy,
};
