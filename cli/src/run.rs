//! `mote run <manifest>`: deploy, spawn, run until Ctrl-C or until all top-level actors stop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use mote_host::{
    ActorSystem, ClusterConfig, ClusterError, EntityOptions, HostConfig, Manifest, ModuleSource,
    StorageBackend, StoreConfig,
};

/// How `--cluster` joins: what the command line gave, over the manifest's `[cluster]`.
pub(crate) struct Join {
    /// The NATS URL (`None`: the manifest's).
    pub(crate) url: Option<String>,
    /// This node's name.
    pub(crate) node: Option<String>,
    /// The cluster's name.
    pub(crate) name: Option<String>,
    /// A NATS token.
    pub(crate) token: Option<String>,
}

impl Join {
    /// The cluster configuration from these arguments and the manifest.
    fn config(self, manifest: &Manifest) -> anyhow::Result<ClusterConfig> {
        let spec = manifest.cluster.clone().unwrap_or_default();
        let url = self.url.or(spec.url).context(
            "--cluster needs a NATS URL (`--cluster nats://127.0.0.1:4222`, or `url` in the manifest's [cluster])",
        )?;
        let node = self
            .node
            .context("--cluster needs this node's name: --node <name>")?;
        let mut config = ClusterConfig::new(url, node);
        if let Some(name) = self.name.or(spec.name) {
            config.name = name;
        }
        config.token = self.token.or(spec.token);
        config.credentials = spec.credentials;
        if let Some(heartbeat) = spec.heartbeat {
            config.heartbeat = heartbeat;
        }
        if let Some(timeout) = spec.failure_timeout {
            config.failure_timeout = timeout;
        }
        Ok(config)
    }
}

/// The JetStream store `[storage] backend = "jetstream"` names, if it does: its URL is the
/// manifest's or the cluster's, and it lives in the cluster's namespace, as the cluster's node,
/// with the cluster's credentials; a silent node's leases last the cluster's failure timeout.
fn jetstream_store(
    manifest: &Manifest,
    cluster: Option<&ClusterConfig>,
) -> anyhow::Result<Option<StoreConfig>> {
    let StorageBackend::JetStream { url, shards, lease } = &manifest.backend else {
        return Ok(None);
    };
    let url = url.clone().or(cluster.map(|c| c.url.clone())).context(
        "[storage] backend = \"jetstream\" needs a NATS URL: `url` in [storage], or --cluster",
    )?;
    let node = cluster.map_or("local", |c| c.node.as_str());
    let mut store = StoreConfig::new(url, node);
    if let Some(cluster) = cluster {
        store.name = cluster.name.clone();
        store.token = cluster.token.clone();
        store.credentials = cluster.credentials.clone();
        store.lease = cluster.failure_timeout;
    }
    if let Some(shards) = shards {
        store.shards = *shards;
    }
    if let Some(lease) = lease {
        store.lease = *lease;
    }
    Ok(Some(store))
}

/// Where the dashboard listens, and its token.
pub(crate) struct Http {
    pub(crate) addr: SocketAddr,
    pub(crate) token: Option<String>,
}

pub(crate) async fn run(
    manifest: &Path,
    control: PathBuf,
    db: Option<PathBuf>,
    workers: Option<usize>,
    http: Option<Http>,
    join: Option<Join>,
) -> anyhow::Result<()> {
    if let Some(http) = &http {
        super::dashboard::check(http.addr, http.token.as_deref())?;
    }
    let manifest = Manifest::load(manifest)?;
    let cluster = join.map(|j| j.config(&manifest)).transpose()?;
    let mut config = HostConfig::new();
    // `mote top`, the dashboard and the metrics show every actor's CPU time (about 3% of a
    // ping-pong message, measured with mote-bench --metrics).
    config.meter_cpu(true);
    if let Some(workers) = workers {
        config.workers(workers);
    }
    let db = db
        .or(manifest.storage.clone())
        .unwrap_or_else(|| PathBuf::from(super::DEFAULT_DB));
    config.storage(&db);
    if let Some(quotas) = manifest.quotas {
        config.quotas(quotas);
    }
    for module in &manifest.legacy_owners {
        config.legacy_owner(module);
    }
    let store = jetstream_store(&manifest, cluster.as_ref())?;
    if let Some(store) = store.clone() {
        config.jetstream_storage(store);
    }
    let system = Arc::new(ActorSystem::new(config)?);
    if let Some(store) = &store {
        system
            .storage_ready()
            .await
            .with_context(|| format!("cannot open the JetStream store at {}", store.url))?;
    }
    let _bars = super::progress::show(&system);
    for module in &manifest.modules {
        match &module.source {
            ModuleSource::File(path) => {
                system.deploy_path(&module.name, &module.version, path, &module.grants)?;
            }
            ModuleSource::Builtin(builtin) => {
                let bytes = super::builtin::component(builtin)
                    .with_context(|| format!("module {}", module.name))?;
                system.deploy_granted(&module.name, &module.version, bytes, &module.grants)?;
            }
        }
    }
    for module in &manifest.modules {
        if let Some(after) = module.hibernate_after {
            system.hibernate_module(&module.name, Some(after))?;
        }
    }
    for entity in &manifest.entities {
        let options = EntityOptions {
            passivate_after: entity.passivate_after,
            ..EntityOptions::default()
        };
        let woken = system
            .register_entity(&entity.kind, &entity.module, options)
            .with_context(|| format!("cannot register entity kind {}", entity.kind))?;
        tracing::info!(kind = %entity.kind, woken, "entity kind registered");
    }
    if let Some(config) = cluster.clone() {
        let (node, url) = (config.node.clone(), config.url.clone());
        system
            .join_cluster(config)
            .await
            .with_context(|| format!("node {node} cannot join the cluster at {url}"))?;
    }
    let me = system.node().map(str::to_owned);
    for actor in &manifest.actors {
        if let (Some(node), Some(me)) = (&actor.node, &me)
            && node != me
        {
            tracing::info!(path = %actor.path, node, "runs on another node");
            continue;
        }
        if system.lookup(actor.path.as_str()).is_some() {
            // Restored at the join: a move to this node that its last run did not finish.
            tracing::info!(path = %actor.path, "runs here already, restored from a move");
            continue;
        }
        match system.claim(actor.path.as_str()).await {
            Ok(()) => {}
            Err(ClusterError::Claimed { node, .. }) => {
                tracing::info!(path = %actor.path, node, "runs on another node");
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot claim {}", actor.path)),
        }
        if let Some(strategy) = &actor.supervision {
            system.set_top_level_strategy(actor.path.as_str(), strategy.clone());
        }
        system
            .spawn_with(
                actor.path.as_str(),
                &actor.module,
                &actor.init,
                actor.limits,
            )
            .with_context(|| format!("cannot spawn {}", actor.path))?;
    }
    tracing::info!(actors = manifest.actors.len(), "running; Ctrl-C stops");
    let server = tokio::spawn(super::control::serve(system.clone(), control.clone()));
    let dashboard = match http {
        Some(http) => {
            let (bound, task) =
                super::dashboard::start(system.clone(), http.addr, http.token.clone()).await?;
            let token = http
                .token
                .map(|t| format!("?token={t}"))
                .unwrap_or_default();
            println!("dashboard: http://{bound}/{token}");
            println!("metrics:   http://{bound}/metrics");
            Some(task)
        }
        None => None,
    };
    // A node of a cluster serves the cluster (entities, remote sends) with no actor of its own.
    let all_stopped = async {
        match me {
            Some(_) => std::future::pending().await,
            None => system.user_actors_stopped().await,
        }
    };
    tokio::select! {
        _ = all_stopped => tracing::info!("all top-level actors stopped"),
        _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
        _ = terminated() => tracing::info!("SIGTERM: shutting down"),
    }
    server.abort();
    if let Some(dashboard) = dashboard {
        dashboard.abort();
    }
    let _ = std::fs::remove_file(&control);
    system.shutdown().await?;
    Ok(())
}

/// Resolves on SIGTERM (what `kill` and service managers send).
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
