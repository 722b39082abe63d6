//! The deployment manifest (TOML) that `mote run` applies.
//!
//! ```toml
//! [[module]]
//! name = "pingpong"
//! path = "pingpong.wasm"     # relative to the manifest's folder
//! version = "1.0.0"          # optional (default "0"); the first listed version of a name is current
//! grant = ["wasi:http"]      # optional: beyond mote:actor and WASI clocks/random/stdio
//! snapshot = true            # optional: its actors can be captured as images, and its entities
//!                            # passivate as images (the same as grant = ["snapshot"])
//! hibernate_after_ms = 60000 # optional (with snapshot = true; one entry per name): every actor
//!                            # of the module, children included, hibernates idle this long
//!
//! [[module]]
//! builtin = "throttle"       # a component the embedder ships (`mote`: its patterns) instead
//! # name = "slow"            # of a path; the name defaults to the built-in's
//!
//! [[actor]]
//! path = "/user/ping"        # top-level actors only: children are spawned by their parents
//! module = "pingpong"
//! init = "ping /user/pong 3" # optional: UTF-8 text handed to `start` as bytes
//! # init_hex = "00ff"        # or raw bytes in hex (at most one of init / init_hex)
//! mailbox_capacity = 1000    # optional limits; the host's defaults otherwise
//! mailbox_bytes = 33554432
//! memory_limit = 16777216
//! cpu_deadline_ms = 1000
//! hibernate_after_ms = 60000 # optional (a module with snapshot = true): idle this long, the
//!                            # actor keeps an image instead of its instance until a message
//! [actor.supervision]        # optional: this actor's restart policy instead of the guardian's
//! directive = "restart"      # restart | resume | stop
//! max_restarts = 5
//! within_ms = 60000
//! backoff_min_ms = 10
//! backoff_max_ms = 1000
//!
//! [storage]
//! path = "state/mote.redb"   # optional: the database (default ./mote.redb; `--db` overrides)
//! legacy_owners = ["ledger"] # optional: modules that adopt the ids they name of a schema-1 file
//! backend = "redb"           # or "jetstream": persistent state in JetStream, on any node
//! url = "nats://127.0.0.1:4222" # jetstream: the server (default: the cluster's)
//! shards = 4                 # jetstream: streams the journal is spread over
//! lease_ms = 10000           # jetstream: how long a silent node keeps its writers' leases
//!
//! [quotas]                   # optional: every actor's bounds (see `Quotas`; defaults otherwise)
//! timers = 1000
//! min_timer_period_ms = 10
//! reminders = 1000
//! subscriptions = 1000
//! groups = 1000
//! asks = 1000
//! max_ask_deadline_ms = 300000
//! max_name_bytes = 256
//! max_path_bytes = 1024
//! log_lines_per_second = 100
//! log_burst = 200
//! log_line_bytes = 1024
//! watches = 1000
//! aliases = 16
//! stash = 10000
//! stash_bytes = 33554432
//! descendants = 10000
//! callouts = 64
//! max_callout_timeout_ms = 60000
//! max_callout_response_bytes = 4194304
//!
//! [[entity]]                 # virtual actors: /user/counters/<id> activates on a message
//! kind = "counters"
//! module = "entity"
//! passivate_after_ms = 30000 # optional: drop an entity idle this long (state is committed)
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::modules::DEFAULT_VERSION;
use crate::actor::supervisor::{Directive, Strategy};
use crate::address::ActorPath;
use crate::error::{ManifestError, ModuleError};
use crate::kernel::spawn::SpawnOptions;
use crate::quota::Quotas;

/// A parsed, checked manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Modules to deploy, in file order.
    pub modules: Vec<ModuleSpec>,
    /// Actors to spawn, in file order.
    pub actors: Vec<ActorSpec>,
    /// The database file, if the manifest names one (resolved against its folder).
    pub storage: Option<PathBuf>,
    /// Entity kinds to register, in file order.
    pub entities: Vec<EntitySpec>,
    /// Every actor's bounds, if the manifest sets any (the rest keep their defaults).
    pub quotas: Option<Quotas>,
    /// How to reach the cluster, if the manifest says.
    pub cluster: Option<ClusterSpec>,
    /// Modules trusted to adopt the ids they name of a schema-1 database
    /// ([`HostConfig::legacy_owner`](crate::HostConfig::legacy_owner)).
    pub legacy_owners: Vec<String>,
    /// Where persistent actors' state lives (`[storage] backend`).
    pub backend: Backend,
}

/// The `[storage] backend`: where persistent actors' state lives.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backend {
    /// The host's redb file (the default).
    #[default]
    Redb,
    /// JetStream, reached at `url` (the cluster's when `None`).
    JetStream {
        /// The NATS server.
        url: Option<String>,
        /// How many streams the journal is spread over.
        shards: Option<u32>,
        /// How long a silent node keeps its writers' leases.
        lease: Option<std::time::Duration>,
    },
}

/// One `[[entity]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntitySpec {
    /// The kind: entities live at `/user/<kind>/<id>`.
    pub kind: String,
    /// The module each entity runs.
    pub module: String,
    /// Passivate after this long idle.
    pub passivate_after: Option<std::time::Duration>,
}

/// One `[[module]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpec {
    /// The name actors refer to.
    pub name: String,
    /// The version (default [`DEFAULT_VERSION`]).
    pub version: String,
    /// What it is granted beyond the defaults (`wasi:http`).
    pub grants: Vec<String>,
    /// Where its component comes from.
    pub source: ModuleSource,
    /// How long every actor of the module idles before it hibernates
    /// ([`ActorSystem::hibernate_module`](crate::ActorSystem::hibernate_module)).
    pub hibernate_after: Option<std::time::Duration>,
}

/// Where a module's component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleSource {
    /// A `.wasm` file, resolved against the manifest's folder.
    File(PathBuf),
    /// A component the embedder ships under this name (the `mote` binary: its patterns).
    Builtin(String),
}

/// One `[[actor]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorSpec {
    /// Where it lives: `/user/<name>`.
    pub path: ActorPath,
    /// The module it runs.
    pub module: String,
    /// The bytes handed to `start`.
    pub init: Vec<u8>,
    /// Its limits.
    pub limits: SpawnOptions,
    /// Its own restart strategy, if it has one.
    pub supervision: Option<Strategy>,
    /// The node of a cluster that runs it (`None`: whichever node claims it first).
    pub node: Option<String>,
}

/// The `[cluster]` section: how `mote run --cluster` reaches the cluster, unless the command
/// line says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSpec {
    /// The NATS server, such as `nats://127.0.0.1:4222`.
    pub url: Option<String>,
    /// The cluster's name (every subject and bucket is under it).
    pub name: Option<String>,
    /// A NATS token.
    pub token: Option<String>,
    /// A NATS credentials file (resolved against the manifest's folder).
    pub credentials: Option<PathBuf>,
    /// How often a node beats.
    pub heartbeat: Option<std::time::Duration>,
    /// Silence after which a node is down.
    pub failure_timeout: Option<std::time::Duration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    module: Vec<RawModule>,
    #[serde(default)]
    actor: Vec<RawActor>,
    storage: Option<RawStorage>,
    #[serde(default)]
    entity: Vec<RawEntity>,
    quotas: Option<RawQuotas>,
    cluster: Option<RawCluster>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    url: Option<String>,
    name: Option<String>,
    token: Option<String>,
    credentials: Option<PathBuf>,
    heartbeat_ms: Option<u64>,
    failure_timeout_ms: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawQuotas {
    timers: Option<usize>,
    min_timer_period_ms: Option<u64>,
    reminders: Option<usize>,
    subscriptions: Option<usize>,
    groups: Option<usize>,
    asks: Option<usize>,
    max_ask_deadline_ms: Option<u64>,
    max_name_bytes: Option<usize>,
    max_path_bytes: Option<usize>,
    log_lines_per_second: Option<u32>,
    log_burst: Option<u32>,
    log_line_bytes: Option<usize>,
    watches: Option<usize>,
    aliases: Option<usize>,
    stash: Option<usize>,
    stash_bytes: Option<usize>,
    descendants: Option<usize>,
    callouts: Option<usize>,
    max_callout_timeout_ms: Option<u64>,
    max_callout_response_bytes: Option<usize>,
}

impl RawQuotas {
    /// The defaults, with what the manifest sets.
    fn apply(self) -> Quotas {
        let d = Quotas::default();
        let ms = std::time::Duration::from_millis;
        Quotas {
            timers: self.timers.unwrap_or(d.timers),
            min_timer_period: self.min_timer_period_ms.map_or(d.min_timer_period, ms),
            reminders: self.reminders.unwrap_or(d.reminders),
            subscriptions: self.subscriptions.unwrap_or(d.subscriptions),
            groups: self.groups.unwrap_or(d.groups),
            asks: self.asks.unwrap_or(d.asks),
            max_ask_deadline: self.max_ask_deadline_ms.map_or(d.max_ask_deadline, ms),
            max_name_bytes: self.max_name_bytes.unwrap_or(d.max_name_bytes),
            max_path_bytes: self.max_path_bytes.unwrap_or(d.max_path_bytes),
            log_lines_per_second: self.log_lines_per_second.unwrap_or(d.log_lines_per_second),
            log_burst: self.log_burst.unwrap_or(d.log_burst),
            log_line_bytes: self.log_line_bytes.unwrap_or(d.log_line_bytes),
            watches: self.watches.unwrap_or(d.watches),
            aliases: self.aliases.unwrap_or(d.aliases),
            stash: self.stash.unwrap_or(d.stash),
            stash_bytes: self.stash_bytes.unwrap_or(d.stash_bytes),
            descendants: self.descendants.unwrap_or(d.descendants),
            callouts: self.callouts.unwrap_or(d.callouts),
            max_callout_timeout: self
                .max_callout_timeout_ms
                .map_or(d.max_callout_timeout, ms),
            max_callout_response_bytes: self
                .max_callout_response_bytes
                .unwrap_or(d.max_callout_response_bytes),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStorage {
    path: Option<PathBuf>,
    #[serde(default)]
    legacy_owners: Vec<String>,
    backend: Option<String>,
    url: Option<String>,
    shards: Option<u32>,
    lease_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntity {
    kind: String,
    module: String,
    passivate_after_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModule {
    name: Option<String>,
    path: Option<PathBuf>,
    builtin: Option<String>,
    version: Option<String>,
    #[serde(default)]
    grant: Vec<String>,
    #[serde(default)]
    snapshot: bool,
    hibernate_after_ms: Option<u64>,
}

/// A module entry once its source is known.
struct NamedModule {
    name: String,
    version: Option<String>,
    grant: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawActor {
    path: String,
    module: String,
    init: Option<String>,
    init_hex: Option<String>,
    mailbox_capacity: Option<usize>,
    mailbox_bytes: Option<usize>,
    memory_limit: Option<usize>,
    cpu_deadline_ms: Option<u64>,
    hibernate_after_ms: Option<u64>,
    supervision: Option<RawSupervision>,
    node: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSupervision {
    directive: Option<String>,
    max_restarts: Option<u32>,
    within_ms: Option<u64>,
    backoff_min_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
}

impl Manifest {
    /// Reads and checks a manifest file.
    pub fn load(file: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(file).map_err(|source| ManifestError::Read {
            path: file.to_owned(),
            source,
        })?;
        let base = file.parent().unwrap_or(Path::new("."));
        Self::parse(&text, file, base)
    }

    /// Parses manifest text; `file` names it in errors, `base` resolves module paths.
    pub fn parse(text: &str, file: &Path, base: &Path) -> Result<Self, ManifestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map_or((1, 1), |span| line_column(text, span.start));
            ManifestError::Syntax {
                path: file.to_owned(),
                line,
                column,
                message: e.message().trim().replace('\n', " "),
            }
        })?;
        let invalid = |message: String| ManifestError::Invalid {
            path: file.to_owned(),
            message,
        };
        let mut names = HashSet::new();
        let mut versions = HashSet::new();
        let mut hibernating = HashSet::new();
        let mut modules = Vec::new();
        for m in raw.module {
            let (name, source) = match (m.name, m.path, m.builtin) {
                (Some(name), Some(path), None) => (name, ModuleSource::File(base.join(path))),
                (name, None, Some(builtin)) => (
                    name.unwrap_or_else(|| builtin.clone()),
                    ModuleSource::Builtin(builtin),
                ),
                (name, Some(_), Some(_)) => {
                    return Err(invalid(format!(
                        "module {:?}: give a path or a builtin, not both",
                        name.unwrap_or_default()
                    )));
                }
                (None, Some(path), None) => {
                    return Err(invalid(format!("module at {path:?}: it needs a name")));
                }
                (name, None, None) => {
                    return Err(invalid(format!(
                        "module {:?}: it needs a path (a .wasm file) or a builtin",
                        name.unwrap_or_default()
                    )));
                }
            };
            if m.hibernate_after_ms.is_some() && !m.snapshot {
                return Err(invalid(format!(
                    "module {name:?}: hibernate_after_ms needs snapshot = true (a module hibernates through images)"
                )));
            }
            if m.hibernate_after_ms.is_some() && !hibernating.insert(name.clone()) {
                return Err(invalid(format!(
                    "module {name:?}: hibernate_after_ms is set on more than one of its entries"
                )));
            }
            let hibernate_after = m.hibernate_after_ms.map(std::time::Duration::from_millis);
            let mut grant = m.grant;
            if m.snapshot && !grant.iter().any(|g| g == super::checks::SNAPSHOT_GRANT) {
                grant.push(super::checks::SNAPSHOT_GRANT.to_owned());
            }
            let m = NamedModule {
                name,
                version: m.version,
                grant,
            };
            let version = m.version.unwrap_or_else(|| DEFAULT_VERSION.to_owned());
            if !versions.insert((m.name.clone(), version.clone())) {
                return Err(invalid(format!(
                    "module {:?} version {version:?} is declared twice",
                    m.name
                )));
            }
            names.insert(m.name.clone());
            if let Err(ModuleError::UnknownGrant { grant, grantable }) =
                super::checks::validate_grants(&m.grant)
            {
                return Err(invalid(format!(
                    "module {:?}: {grant:?} cannot be granted (grantable: {})",
                    m.name,
                    grantable.join(", ")
                )));
            }
            modules.push(ModuleSpec {
                name: m.name,
                grants: m.grant,
                version,
                source,
                hibernate_after,
            });
        }
        let mut paths = HashSet::new();
        let mut actors = Vec::new();
        for a in raw.actor {
            let path = ActorPath::parse(&a.path)
                .map_err(|e| invalid(format!("actor {:?}: {e}", a.path)))?;
            if path.depth() != 1 || !a.path.starts_with("/user/") {
                return Err(invalid(format!(
                    "actor {:?}: manifest actors live directly under /user (children are spawned by their parents)",
                    a.path
                )));
            }
            if !paths.insert(a.path.clone()) {
                return Err(invalid(format!("actor {:?} is declared twice", a.path)));
            }
            if !names.contains(&a.module) {
                return Err(invalid(format!(
                    "actor {:?} uses module {:?}, which no [[module]] declares",
                    a.path, a.module
                )));
            }
            let init = match (a.init, a.init_hex) {
                (Some(_), Some(_)) => {
                    return Err(invalid(format!(
                        "actor {:?}: give at most one of init and init_hex",
                        a.path
                    )));
                }
                (Some(text), None) => text.into_bytes(),
                (None, Some(hex)) => decode_hex(&hex)
                    .ok_or_else(|| invalid(format!("actor {:?}: init_hex is not hex", a.path)))?,
                (None, None) => Vec::new(),
            };
            let supervision = match a.supervision {
                Some(raw) => Some(
                    strategy(raw).map_err(|why| invalid(format!("actor {:?}: {why}", a.path)))?,
                ),
                None => None,
            };
            actors.push(ActorSpec {
                path,
                module: a.module,
                init,
                limits: SpawnOptions {
                    mailbox_capacity: a.mailbox_capacity,
                    mailbox_bytes: a.mailbox_bytes,
                    memory_limit: a.memory_limit,
                    cpu_deadline: a.cpu_deadline_ms.map(std::time::Duration::from_millis),
                    quotas: None,
                    hibernate_after: a.hibernate_after_ms.map(std::time::Duration::from_millis),
                },
                supervision,
                node: match a.node {
                    Some(node) if node_name(&node) => Some(node),
                    Some(node) => {
                        return Err(invalid(format!(
                            "actor {}: node {node:?} is not a node name (1-64 of A-Z a-z 0-9 _ -)",
                            a.path
                        )));
                    }
                    None => None,
                },
            });
        }
        let mut kinds = HashSet::new();
        let mut entities = Vec::new();
        for e in raw.entity {
            ActorPath::user_root()
                .child(&e.kind)
                .map_err(|err| invalid(format!("entity kind {:?}: {err}", e.kind)))?;
            if !kinds.insert(e.kind.clone()) {
                return Err(invalid(format!(
                    "entity kind {:?} is declared twice",
                    e.kind
                )));
            }
            if paths.contains(&format!("/user/{}", e.kind)) {
                return Err(invalid(format!(
                    "entity kind {:?} clashes with the actor /user/{}",
                    e.kind, e.kind
                )));
            }
            if !names.contains(&e.module) {
                return Err(invalid(format!(
                    "entity kind {:?} uses module {:?}, which no [[module]] declares",
                    e.kind, e.module
                )));
            }
            entities.push(EntitySpec {
                kind: e.kind,
                module: e.module,
                passivate_after: e.passivate_after_ms.map(std::time::Duration::from_millis),
            });
        }
        let backend = match raw.storage.as_ref() {
            None => Backend::Redb,
            Some(s) => match s.backend.as_deref() {
                None | Some("redb")
                    if s.url.is_none() && s.shards.is_none() && s.lease_ms.is_none() =>
                {
                    Backend::Redb
                }
                None | Some("redb") => {
                    return Err(invalid(
                        "[storage] url, shards and lease_ms belong to backend = \"jetstream\""
                            .into(),
                    ));
                }
                Some("jetstream") => {
                    if s.shards == Some(0) || s.lease_ms == Some(0) {
                        return Err(invalid(
                            "[storage] shards and lease_ms must be at least 1".into(),
                        ));
                    }
                    Backend::JetStream {
                        url: s.url.clone(),
                        shards: s.shards,
                        lease: s.lease_ms.map(std::time::Duration::from_millis),
                    }
                }
                Some(other) => {
                    return Err(invalid(format!(
                        "[storage] backend {other:?} is unknown: use \"redb\" or \"jetstream\""
                    )));
                }
            },
        };
        Ok(Manifest {
            backend,
            modules,
            actors,
            legacy_owners: raw
                .storage
                .as_ref()
                .map(|s| s.legacy_owners.clone())
                .unwrap_or_default(),
            storage: raw.storage.and_then(|s| s.path).map(|p| base.join(p)),
            entities,
            quotas: raw.quotas.map(RawQuotas::apply),
            cluster: raw.cluster.map(|c| ClusterSpec {
                url: c.url,
                name: c.name,
                token: c.token,
                credentials: c.credentials.map(|p| base.join(p)),
                heartbeat: c.heartbeat_ms.map(std::time::Duration::from_millis),
                failure_timeout: c.failure_timeout_ms.map(std::time::Duration::from_millis),
            }),
        })
    }
}

/// Whether `name` can name a node of a cluster.
fn node_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A top-level actor's own strategy from `[actor.supervision]`, over the defaults.
fn strategy(raw: RawSupervision) -> Result<Strategy, String> {
    use std::time::Duration;
    let mut s = Strategy::default();
    if let Some(d) = raw.directive {
        s.directive = match d.as_str() {
            "restart" => Directive::Restart,
            "resume" => Directive::Resume,
            "stop" => Directive::Stop,
            other => {
                return Err(format!(
                    "supervision directive {other:?} is not one of restart, resume, stop"
                ));
            }
        };
    }
    if let Some(n) = raw.max_restarts {
        s.max_restarts = n;
    }
    if let Some(ms) = raw.within_ms {
        s.within = Duration::from_millis(ms);
    }
    if let Some(ms) = raw.backoff_min_ms {
        s.backoff_min = Duration::from_millis(ms);
    }
    if let Some(ms) = raw.backoff_max_ms {
        s.backoff_max = Duration::from_millis(ms);
    }
    s.backoff_max = s.backoff_max.max(s.backoff_min);
    Ok(s)
}

fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Decodes hex digits (whitespace ignored); `None` if they are not hex.
pub fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let hex: String = hex.chars().filter(|c| !c.is_whitespace()).collect();
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("m.toml"), Path::new("/base"))
    }

    #[test]
    fn minimal_manifest_parses() {
        let m = parse(
            "[[module]]\nname = \"pingpong\"\npath = \"p.wasm\"\n\n[[actor]]\npath = \"/user/ping\"\nmodule = \"pingpong\"\ninit = \"pong\"\n",
        )
        .unwrap();
        assert_eq!(
            m.modules[0].source,
            ModuleSource::File(PathBuf::from("/base/p.wasm"))
        );
        assert_eq!(m.actors[0].path.as_str(), "/user/ping");
        assert_eq!(m.actors[0].init, b"pong");
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let err = parse("[[module]]\nname = \"a\"\npath = \n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("m.toml:3:"), "{err}");
        let err = parse("[[module]]\nname = \"a\"\npath = \"x\"\ncolour = 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("m.toml:4:") && err.contains("colour"),
            "{err}"
        );
    }

    #[test]
    fn a_builtin_module_is_named_after_it_and_excludes_a_path() {
        let m = parse("[[module]]\nbuiltin = \"throttle\"\n[[module]]\nname = \"slow\"\nbuiltin = \"throttle\"\nversion = \"2\"\n").unwrap();
        assert_eq!(m.modules[0].name, "throttle");
        assert_eq!(
            m.modules[0].source,
            ModuleSource::Builtin("throttle".into())
        );
        assert_eq!(
            (m.modules[1].name.as_str(), m.modules[1].version.as_str()),
            ("slow", "2")
        );
        let both = parse("[[module]]\nname = \"t\"\npath = \"t.wasm\"\nbuiltin = \"throttle\"\n");
        assert!(both.unwrap_err().to_string().contains("not both"));
        let neither = parse("[[module]]\nname = \"t\"\n");
        assert!(
            neither
                .unwrap_err()
                .to_string()
                .contains("a path (a .wasm file) or a builtin")
        );
        let nameless = parse("[[module]]\npath = \"t.wasm\"\n");
        assert!(nameless.unwrap_err().to_string().contains("needs a name"));
    }

    #[test]
    fn semantic_errors_are_reported() {
        let no_module = "[[actor]]\npath = \"/user/a\"\nmodule = \"nope\"\n";
        assert!(parse(no_module).unwrap_err().to_string().contains("nope"));
        let bad_path = "[[module]]\nname = \"m\"\npath = \"x\"\n[[actor]]\npath = \"/user/a b\"\nmodule = \"m\"\n";
        assert!(parse(bad_path).unwrap_err().to_string().contains("a b"));
        let nested = "[[module]]\nname = \"m\"\npath = \"x\"\n[[actor]]\npath = \"/user/a/b\"\nmodule = \"m\"\n";
        assert!(
            parse(nested)
                .unwrap_err()
                .to_string()
                .contains("directly under /user")
        );
    }

    #[test]
    fn versions_limits_and_supervision_parse() {
        let m = parse("[[module]]\nname = \"m\"\npath = \"a\"\nversion = \"1.0\"\n[[module]]\nname = \"m\"\npath = \"b\"\nversion = \"2.0\"\n[[actor]]\npath = \"/user/a\"\nmodule = \"m\"\nmailbox_capacity = 7\ncpu_deadline_ms = 50\nhibernate_after_ms = 250\n[actor.supervision]\ndirective = \"stop\"\nmax_restarts = 9\n").unwrap();
        assert_eq!(
            (m.modules[0].version.as_str(), m.modules[1].version.as_str()),
            ("1.0", "2.0")
        );
        let a = &m.actors[0];
        assert_eq!(a.limits.mailbox_capacity, Some(7));
        assert_eq!(
            a.limits.cpu_deadline,
            Some(std::time::Duration::from_millis(50))
        );
        assert_eq!(
            a.limits.hibernate_after,
            Some(std::time::Duration::from_millis(250))
        );
        let s = a.supervision.as_ref().unwrap();
        assert_eq!((s.directive, s.max_restarts), (Directive::Stop, 9));
        let granted =
            parse("[[module]]\nname = \"m\"\npath = \"a\"\ngrant = [\"wasi:http\"]\n").unwrap();
        assert_eq!(granted.modules[0].grants, vec!["wasi:http".to_owned()]);
        let sleepy =
            "[[module]]\nname = \"m\"\npath = \"a\"\nsnapshot = true\nhibernate_after_ms = 250\n";
        assert_eq!(
            parse(sleepy).unwrap().modules[0].hibernate_after,
            Some(std::time::Duration::from_millis(250))
        );
        let awake = parse("[[module]]\nname = \"m\"\npath = \"a\"\nhibernate_after_ms = 250\n");
        assert!(
            matches!(&awake, Err(ManifestError::Invalid { message, .. }) if message.contains("needs snapshot = true")),
            "{awake:?}"
        );
        let twice = format!(
            "{sleepy}[[module]]\nname = \"m\"\npath = \"b\"\nversion = \"2\"\nsnapshot = true\nhibernate_after_ms = 9\n"
        );
        assert!(
            matches!(&parse(&twice), Err(ManifestError::Invalid { message, .. }) if message.contains("more than one")),
            "{:?}",
            parse(&twice)
        );
        let snapshots = parse("[[module]]\nname = \"m\"\npath = \"a\"\nsnapshot = true\n").unwrap();
        assert_eq!(snapshots.modules[0].grants, vec!["snapshot".to_owned()]);
        let both =
            "[[module]]\nname = \"m\"\npath = \"a\"\nsnapshot = true\ngrant = [\"snapshot\"]\n";
        assert_eq!(
            parse(both).unwrap().modules[0].grants,
            vec!["snapshot".to_owned()]
        );
        let overreach = "[[module]]\nname = \"m\"\npath = \"a\"\ngrant = [\"wasi:sockets\"]\n";
        assert!(
            parse(overreach)
                .unwrap_err()
                .to_string()
                .contains("cannot be granted")
        );
        let twice =
            "[[module]]\nname = \"m\"\npath = \"a\"\n[[module]]\nname = \"m\"\npath = \"b\"\n";
        assert!(
            parse(twice)
                .unwrap_err()
                .to_string()
                .contains("declared twice")
        );
        let bad = "[[module]]\nname = \"m\"\npath = \"a\"\n[[actor]]\npath = \"/user/a\"\nmodule = \"m\"\n[actor.supervision]\ndirective = \"explode\"\n";
        assert!(parse(bad).unwrap_err().to_string().contains("explode"));
    }

    #[test]
    fn quotas_take_the_defaults_where_the_manifest_says_nothing() {
        let m = parse("[quotas]\ntimers = 5\nmin_timer_period_ms = 100\n").unwrap();
        let q = m.quotas.expect("a [quotas] table");
        assert_eq!(q.timers, 5);
        assert_eq!(q.min_timer_period, std::time::Duration::from_millis(100));
        assert_eq!(q.asks, Quotas::default().asks);
        assert_eq!(parse("").unwrap().quotas, None);
        assert!(
            parse("[quotas]\ntimerz = 5\n").is_err(),
            "unknown keys are refused"
        );
    }

    #[test]
    fn storage_and_entities_parse() {
        let m = parse("[storage]\npath = \"db/m.redb\"\n[[module]]\nname = \"m\"\npath = \"x\"\n[[entity]]\nkind = \"carts\"\nmodule = \"m\"\npassivate_after_ms = 250\n").unwrap();
        assert_eq!(m.storage, Some(PathBuf::from("/base/db/m.redb")));
        assert_eq!(m.entities[0].kind, "carts");
        assert_eq!(
            m.entities[0].passivate_after,
            Some(std::time::Duration::from_millis(250))
        );
        let unknown = "[[entity]]\nkind = \"carts\"\nmodule = \"nope\"\n";
        assert!(parse(unknown).unwrap_err().to_string().contains("nope"));
    }

    #[test]
    fn the_storage_backend_is_redb_unless_the_manifest_names_jetstream() {
        assert_eq!(parse("").unwrap().backend, Backend::Redb);
        let m = parse("[storage]\nbackend = \"jetstream\"\nurl = \"nats://h:4222\"\nshards = 2\nlease_ms = 3000\n").unwrap();
        assert_eq!(
            m.backend,
            Backend::JetStream {
                url: Some("nats://h:4222".into()),
                shards: Some(2),
                lease: Some(std::time::Duration::from_secs(3)),
            }
        );
        for (bad, says) in [
            ("[storage]\nbackend = \"postgres\"\n", "postgres"),
            ("[storage]\nurl = \"nats://h:4222\"\n", "jetstream"),
            (
                "[storage]\nbackend = \"jetstream\"\nshards = 0\n",
                "at least 1",
            ),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn init_hex_decodes() {
        let m = parse("[[module]]\nname = \"m\"\npath = \"x\"\n[[actor]]\npath = \"/user/a\"\nmodule = \"m\"\ninit_hex = \"00ff10\"\n").unwrap();
        assert_eq!(m.actors[0].init, vec![0, 0xff, 0x10]);
    }
}
