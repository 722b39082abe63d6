//! `compile`: what the shared function cache (`HostConfig::function_cache`) saves when a host
//! compiles several Python and JavaScript modules, which embed the same interpreter. In one
//! run, with no compiled-module cache on disk: each module deployed on a host with the function
//! cache off, then each on hosts with it on. The first module of a language fills the cache
//! (unless an earlier workload of this process did); the others find the interpreter there.

use std::time::Instant;

use anyhow::anyhow;
use mote_host::{FunctionCache, HostConfig};

use super::{Args, examples, system_with};

/// The modules compiled, by language: distinct components on one interpreter each.
const MODULES: [(&str, &[&str]); 2] = [
    ("python", &["py_journal", "py_ticker", "py_entity"]),
    ("js", &["js_journal", "js_ticker", "js_entity"]),
];

/// Seconds to deploy (compile) example `name` on a fresh host, with the function cache on
/// (`shared`) or off.
fn compile_once(args: &Args, name: &str, shared: bool) -> anyhow::Result<f64> {
    let mut config = HostConfig::new();
    config.function_cache(shared);
    deploy_seconds(args, config, name, &[])
}

/// Seconds to deploy example `name` with `grants` on a fresh host configured by `config`,
/// with no compiled-module cache.
pub(super) fn deploy_seconds(
    args: &Args,
    config: HostConfig,
    name: &str,
    grants: &[String],
) -> anyhow::Result<f64> {
    let path = examples::path(name).ok_or_else(|| anyhow!("no example actors built"))?;
    let bytes = std::fs::read(path)?;
    let system = system_with(args, config, &[])?;
    let start = Instant::now();
    system.deploy_granted(name, "0", &bytes, grants)?;
    Ok(start.elapsed().as_secs_f64())
}

/// The workload.
pub(super) async fn compile(args: &Args) -> anyhow::Result<()> {
    for (language, modules) in MODULES {
        let mut alone = Vec::new();
        for name in modules {
            alone.push(compile_once(args, name, false)?);
        }
        let before = FunctionCache::process().stats();
        let mut shared = Vec::new();
        for name in modules {
            shared.push(compile_once(args, name, true)?);
        }
        let after = FunctionCache::process().stats();
        // The first module may fill the cache; the rest show what sharing saves.
        let rest = |t: &[f64]| t[1..].iter().sum::<f64>() / (t.len() - 1) as f64;
        println!(
            "RESULT runtime=mote workload=compile language={language} modules={} \
             alone_first_s={:.2} shared_first_s={:.2} alone_rest_s={:.2} shared_rest_s={:.2} \
             rest_ratio={:.2} hits={} misses={} cache_mib={:.1}",
            modules.len(),
            alone[0],
            shared[0],
            rest(&alone),
            rest(&shared),
            rest(&alone) / rest(&shared),
            after.hits - before.hits,
            after.misses - before.misses,
            after.bytes as f64 / f64::from(1 << 20),
        );
    }
    Ok(())
}
