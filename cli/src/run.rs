//! `mote run <manifest>`: deploy, spawn, run until Ctrl-C or until all top-level actors stop.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use mote_host::Manifest;
use mote_host::{ActorSystem, EntityOptions, HostConfig};

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
) -> anyhow::Result<()> {
    if let Some(http) = &http {
        super::dashboard::check(http.addr, http.token.as_deref())?;
    }
    let manifest = Manifest::load(manifest)?;
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
    let system = Arc::new(ActorSystem::new(config)?);
    let _bars = super::progress::show(&system);
    for module in &manifest.modules {
        system.deploy_path(&module.name, &module.version, &module.path, &module.grants)?;
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
    for actor in &manifest.actors {
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
    tokio::select! {
        _ = system.user_actors_stopped() => tracing::info!("all top-level actors stopped"),
        _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
        _ = terminated() => tracing::info!("SIGTERM: shutting down"),
    }
    server.abort();
    if let Some(dashboard) = dashboard {
        dashboard.abort();
    }
    let _ = std::fs::remove_file(&control);
    if let Err(alive) = system.shutdown().await {
        anyhow::bail!("shutdown timed out; still running: {}", alive.join(", "));
    }
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
