//! `mote run <manifest>`: deploy, spawn, run until Ctrl-C or until all top-level actors stop.

use std::path::Path;

use anyhow::Context;
use mote_host::manifest::Manifest;
use mote_host::{ActorSystem, HostConfig};

pub(crate) async fn run(manifest: &Path) -> anyhow::Result<()> {
    let manifest = Manifest::load(manifest)?;
    let system = ActorSystem::new(HostConfig::new())?;
    for module in &manifest.modules {
        system.deploy_file(&module.name, &module.path)?;
    }
    for actor in &manifest.actors {
        system
            .spawn(actor.path.as_str(), &actor.module, &actor.init)
            .with_context(|| format!("cannot spawn {}", actor.path))?;
    }
    tracing::info!(actors = manifest.actors.len(), "running; Ctrl-C stops");
    tokio::select! {
        _ = system.user_actors_stopped() => tracing::info!("all top-level actors stopped"),
        _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C: shutting down"),
    }
    if let Err(alive) = system.shutdown().await {
        anyhow::bail!("shutdown timed out; still running: {}", alive.join(", "));
    }
    Ok(())
}
