//! Typed errors of the host library. Causes from wasmtime, redb and the OS are kept as
//! [`source`](std::error::Error::source)s; the CLI adds context with `anyhow` and prints the
//! chain on one line.

use std::path::PathBuf;

/// A cause from a library whose errors are not one concrete type (wasmtime's).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error and its causes on one line, `outer: inner: innermost`, skipping a cause whose text
/// the line already holds. For the places where an error must become text: a guest's error
/// string, a supervision reason, a log field.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = e.source();
    }
    line
}

/// Why the database could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    /// The file could not be opened as a database (missing directory, corrupt, not redb, locked).
    #[error("cannot open database {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why, as redb or the OS put it.
        #[source]
        source: redb::DatabaseError,
    },
    /// The file is a redb database, but not one Mote wrote.
    #[error("database {} is not a Mote store (it has no Mote metadata)", path.display())]
    Foreign {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a newer Mote with a layout this one does not know.
    #[error(
        "database {} has schema version {found}; this Mote understands up to version \
         {supported}: upgrade Mote",
        path.display()
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A read or write failed.
    #[error("database operation failed")]
    Storage(#[source] redb::Error),
    /// A stored record could not be decoded: the file is damaged.
    #[error("damaged record in table {table}")]
    Damaged {
        /// The table.
        table: &'static str,
        /// What was wrong with it.
        #[source]
        source: postcard::Error,
    },
    /// The database has been closed (the host is shutting down).
    #[error("the database is closed")]
    Closed,
}

/// A bad actor name or path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// A name breaks the naming rules.
    #[error("invalid actor name {0:?}: {1}")]
    InvalidName(String, String),
    /// A name inside a path breaks the naming rules.
    #[error("invalid actor path {0:?}: {1}")]
    InvalidPath(String, String),
    /// An absolute path was expected.
    #[error("actor path {0:?} is not absolute (it must start with /user or /system)")]
    NotAbsolute(String),
    /// The path does not start at `/user` or `/system`.
    #[error("actor path {0:?} does not start with /user or /system")]
    UnknownRoot(String),
    /// A relative path climbs above a root.
    #[error("relative path {0:?} climbs above the root")]
    AboveRoot(String),
    /// The operation needs an actor path, not a root.
    #[error("{0:?} is a root, not an actor")]
    IsRoot(String),
}

impl AddressError {
    /// Re-labels a name error as an error of the whole path it appeared in.
    pub(crate) fn in_path(self, path: &str) -> Self {
        match self {
            AddressError::InvalidName(name, why) => {
                AddressError::InvalidPath(path.to_owned(), format!("segment {name:?}: {why}"))
            }
            other => other,
        }
    }
}

/// A module could not be loaded, compiled or checked against the `mote:actor` world.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The file could not be read.
    #[error("cannot read module file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The path is not a regular file (a directory, a device, a pipe...).
    #[error("module file {path} is not a regular file")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than the host reads.
    #[error("module file {path} has {size} bytes, more than the limit of {limit}")]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The host's limit (`HostConfig::max_module_bytes`).
        limit: u64,
    },
    /// The bytes are not WebAssembly at all.
    #[error("module {name:?} is not a WebAssembly file (no `\\0asm` header)")]
    NotWasm {
        /// The module name.
        name: String,
    },
    /// The bytes are a core module; Mote runs components.
    #[error(
        "module {name:?} is a core WebAssembly module, not a component: build it for \
         wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule {
        /// The module name.
        name: String,
    },
    /// Compilation failed (malformed or unsupported component).
    #[error("module {name:?} failed to compile")]
    Compile {
        /// The module name.
        name: String,
        /// The compiler's error.
        #[source]
        source: BoxError,
    },
    /// The component does not implement the `mote:actor` world.
    #[error("module {name:?} does not implement the mote:actor@0.2.0 world: {reason}")]
    WrongWorld {
        /// The module name.
        name: String,
        /// What is missing or mismatched.
        reason: String,
        /// The linker's error, when it found the mismatch.
        #[source]
        source: Option<BoxError>,
    },
    /// That name and version are already deployed with other bytes.
    #[error(
        "module {name:?} version {version:?} is already deployed with other bytes; deploy them \
         under a new version"
    )]
    VersionTaken {
        /// The module name.
        name: String,
        /// The version.
        version: String,
    },
    /// The module name or version breaks the naming rules.
    #[error("invalid {0}: use 1-64 characters from A-Z a-z 0-9 _ - . (not starting with .)")]
    InvalidName(String),
    /// A grant that no capability of this host can give.
    #[error("unknown grant {grant:?} (grantable: {})", grantable.join(", "))]
    UnknownGrant {
        /// The grant asked for.
        grant: String,
        /// What can be granted.
        grantable: Vec<String>,
    },
    /// The component was built against an incompatible version of the `mote:actor` contract.
    #[error(
        "module {name:?} was built against mote:actor@{found} (`{item}`), but this host provides \
         mote:actor@{host}: rebuild it against mote:actor@{host}"
    )]
    ContractVersion {
        /// The module name.
        name: String,
        /// The contract version the component names.
        found: String,
        /// The contract version of this host.
        host: String,
        /// The import or export that names it.
        item: String,
    },
    /// The component imports an interface this host does not grant to actors.
    #[error(
        "module {name:?} imports `{import}`, which is not granted to actors: they get mote:actor \
         and WASI clocks, random and stdio (no files, no network, no wasi:http)"
    )]
    NotGranted {
        /// The module name.
        name: String,
        /// The import.
        import: String,
    },
    /// No such module, or no such version of it.
    #[error("no module {name:?}{} is deployed", version.as_deref().map(|v| format!(" version {v:?}")).unwrap_or_default())]
    Unknown {
        /// The module name.
        name: String,
        /// The version asked for.
        version: Option<String>,
    },
    /// Its actors were to hibernate, but its current version has snapshots off.
    #[error(
        "module {name:?} has snapshots off: its actors cannot hibernate (deploy it with snapshot = true)"
    )]
    NoSnapshots {
        /// The module name.
        name: String,
    },
    /// Actors still run the module version that was to be removed.
    #[error(
        "module {name:?} version {version:?} still runs {actors} actor(s); stop or upgrade them first"
    )]
    InUse {
        /// The module name.
        name: String,
        /// The version.
        version: String,
        /// How many live actors run it.
        actors: usize,
    },
    /// The module registry in the database could not be updated.
    #[error("cannot record the module in the database")]
    Database(#[source] DatabaseError),
    /// The module was deployed with snapshots on, but its component has a shape whose core
    /// state images cannot reach.
    #[error("module {name:?} cannot be deployed with snapshots on")]
    Snapshots {
        /// The module name.
        name: String,
        /// What the instrumentation refused.
        #[source]
        source: crate::sandbox::instrument::InstrumentError,
    },
}

/// A spawn was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The name or path is invalid.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// A live sibling already has this name.
    #[error("an actor already lives at {0}")]
    NameTaken(String),
    /// No module of that name is deployed.
    #[error("no module named {0:?} is deployed")]
    UnknownModule(String),
    /// The system is shutting down.
    #[error("the actor system is shutting down")]
    ShuttingDown,
    /// No live node of the cluster has this name (or this host is in no cluster).
    #[error("no live node named {0:?} in the cluster")]
    UnknownNode(String),
    /// It was asked to hibernate, but its module was not deployed with snapshots on.
    #[error(
        "module {0:?} has snapshots off: its actors cannot hibernate (deploy it with snapshot = true)"
    )]
    NoSnapshots(String),
}

/// A message could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The target path is invalid.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The target's mailbox is at capacity; the message was not queued.
    #[error("mailbox of {path} is full")]
    MailboxFull {
        /// The target.
        path: String,
    },
    /// The link to the node that owns the target is backed up; the message was not queued.
    #[error("the link to the node of {path} is full")]
    Unreachable {
        /// The target.
        path: String,
    },
    /// The message body is larger than the host's limit.
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Body size in bytes.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
}

/// `ActorSystem::shutdown` reached its timeout with actors still alive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shutdown timed out; {} still running: {}", .alive.len(), listed(.alive))]
pub struct ShutdownTimedOut {
    /// The paths of the actors still alive at the deadline.
    pub alive: Vec<String>,
}

/// The first ten of `paths`, and how many more: a host of a million actors would name every one.
fn listed(paths: &[String]) -> String {
    let mut out = paths[..paths.len().min(10)].join(", ");
    if paths.len() > 10 {
        out.push_str(&format!(" and {} more", paths.len() - 10));
    }
    out
}

/// Building or running the host failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The wasmtime engine (or its linker) could not be configured.
    #[error("cannot create the wasm engine")]
    Engine(#[source] BoxError),
    /// `ActorSystem::new` was called outside a tokio runtime.
    #[error("an ActorSystem must be created inside a tokio runtime")]
    NoRuntime,
    /// A host thread (the epoch ticker, a scheduler worker) could not be started.
    #[error("cannot start a host thread")]
    Thread(#[from] std::io::Error),
    /// The database could not be opened.
    #[error(transparent)]
    Store(#[from] DatabaseError),
    /// The persistence store could not be opened.
    #[error("cannot open the persistence store")]
    Storage(#[source] BoxError),
}

/// A manifest could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{path}: cannot read manifest: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or has wrong fields.
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The TOML is well-formed but says something impossible.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A replay of a durable actor ([`crate::Replay`]) could not be made or answered.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A running host has the database open: redb lets no reader share a file with a writer.
    #[error(
        "database {} is in use by a running host: stop the host (Ctrl-C or SIGTERM) and replay \
         again, or replay a copy of the file made while no host had it open",
        path.display()
    )]
    InUse {
        /// The file.
        path: PathBuf,
    },
    /// The file was not closed cleanly (a crash); repairing it is a write a replay never makes.
    #[error(
        "database {} was not closed cleanly (its host stopped without a shutdown): start a host \
         on it once, which repairs it, stop it, then replay",
        path.display()
    )]
    Unclean {
        /// The file.
        path: PathBuf,
    },
    /// The file has an older layout that only a host (which writes) migrates.
    #[error(
        "database {} has schema version {found}: start a host on it once, which migrates it, \
         then replay",
        path.display()
    )]
    OldSchema {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
    },
    /// The database cannot be opened or read (missing, corrupt, not Mote's, newer).
    #[error(transparent)]
    Database(#[from] DatabaseError),
    /// No durable state is stored under this persistence id.
    #[error(
        "no durable state under persistence id {pid:?}{}",
        if known.is_empty() { " (the database holds none)".to_owned() }
        else { format!(" (ids there: {})", known.join(", ")) }
    )]
    UnknownId {
        /// The id asked for.
        pid: String,
        /// Some ids the database does hold, in order (at most ten).
        known: Vec<String>,
    },
    /// The event asked for is past the end of the journal.
    #[error("{pid:?} has events up to {last}; there is no event {until} to replay to")]
    BeyondJournal {
        /// The persistence id.
        pid: String,
        /// The event asked for.
        until: u64,
        /// Its latest event.
        last: u64,
    },
    /// The events needed to rebuild the state at `until` were deleted (a snapshot replaced
    /// them), and no snapshot at or before `until` is left.
    #[error(
        "the events of {pid:?} needed to replay to event {until} were deleted{}",
        match earliest {
            Some(seq) => format!(": its history can be replayed from event {seq} on"),
            None => ": no event of it can be replayed".to_owned(),
        }
    )]
    HistoryGone {
        /// The persistence id.
        pid: String,
        /// The event asked for.
        until: u64,
        /// The earliest event the state can be rebuilt at, if any.
        earliest: Option<u64>,
    },
    /// The database does not record which module writes this id, and the id does not say.
    #[error(
        "the database does not record which module writes {pid:?} (it was written before Mote \
         recorded owners): pass the component with --module FILE"
    )]
    NoModule {
        /// The persistence id.
        pid: String,
    },
    /// The module version that wrote the id is not in the database's module registry.
    #[error(
        "module {module:?} version {version:?}, which wrote {pid:?}, is not in the database's \
         registry: deploy it again, or pass the component with --module FILE"
    )]
    ModuleMissing {
        /// The persistence id.
        pid: String,
        /// The module name.
        module: String,
        /// The version.
        version: String,
    },
    /// The module could not be loaded into the sandbox.
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// The sandbox could not be built.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The recorded path of the actor is not a valid actor path.
    #[error(transparent)]
    Address(#[from] AddressError),
    /// The actor failed in the sandbox: its `start` (recovery included) or a `receive`.
    #[error("the replayed actor failed in {during}: {failure}")]
    Failed {
        /// `start` or `receive`.
        during: &'static str,
        /// The trap or the error it returned.
        failure: String,
    },
    /// The actor rejected the message (`reject`): its body does not decode, say.
    #[error("the replayed actor rejected the message: {reason}")]
    Rejected {
        /// Its reason.
        reason: String,
    },
    /// The actor trapped earlier: its instance cannot be entered again.
    #[error("the replayed actor trapped earlier; open the replay again")]
    Poisoned,
}

#[cfg(test)]
mod tests {
    use super::ShutdownTimedOut;

    #[test]
    fn a_timed_out_shutdown_names_the_first_ten_actors_and_counts_the_rest() {
        let paths = |n: usize| (0..n).map(|i| format!("/user/a{i}")).collect::<Vec<_>>();
        let few = ShutdownTimedOut { alive: paths(2) }.to_string();
        assert_eq!(
            few,
            "shutdown timed out; 2 still running: /user/a0, /user/a1"
        );
        let many = ShutdownTimedOut { alive: paths(25) }.to_string();
        assert!(many.starts_with("shutdown timed out; 25 still running: /user/a0, "));
        assert!(many.contains("/user/a9 and 15 more"), "{many}");
        assert!(!many.contains("/user/a10"), "{many}");
    }
}
