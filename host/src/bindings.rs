//! Host-side bindings of the `mote:actor` world, generated from `wit/` at compile time.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "actor-world",
    exports: { default: async },
});

pub use mote::actor::types::{
    Address as WitAddress, LogLevel, Message as WitMessage, SendError as WitSendError,
    SpawnError as WitSpawnError, StopReason as WitStopReason,
};
