//! Deployment: the module registry (versions, content hashes, contract and grant checks, the
//! exports the host calls, type-checked once, the compiled cache, records in the database), hot
//! swap of running actors (with an optional canary stage), and the manifest of `mote run`.

pub(crate) mod cache;
pub(crate) mod canary;
pub(crate) mod checks;
pub(crate) mod exports;
pub(crate) mod manifest;
pub(crate) mod modules;
pub(crate) mod records;
pub(crate) mod upgrade;
