//! Durable storage: the redb file and the group committer that writes to it.
//!
//! Nothing here knows what is stored: the persistence capability and the module registry own
//! their tables and hand the committer their writes.

pub(crate) mod committer;
pub(crate) mod database;

pub use committer::CommitStats;
pub use database::{Database, DatabaseError, SCHEMA_VERSION};
