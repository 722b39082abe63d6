//! `idle`: what an idle actor costs once it hibernates. w2's spawn and one message, for a
//! counter deployed with snapshots on and spawned with `hibernate_after`: each actor answers
//! its `Get`, then gives up its wasm instance for an image while it waits. Resident bytes per
//! sleeping actor, against w2's per awake one.
//!
//! Actors are spawned in batches, each batch asleep before the next starts, so that the awake
//! ones never hold more than a batch of instances (and their memory slots' address space): a
//! million sleeping actors need no more room for instances than ten thousand.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use mote_example_protocol::Counter;
use mote_guest::Message;
use mote_host::{ActorSystem, HostConfig, MetricsQuery, SpawnOptions};

use super::{Args, WAIT, encode, examples, recv_as, rss_bytes, system_with};

/// Actors awake at once, at most: one batch.
const BATCH: usize = 10_000;

/// Spawns `--actors` hibernating counters, each asked once; prints spawns/s and resident bytes
/// per sleeping actor.
pub(super) async fn idle(args: &Args) -> anyhow::Result<()> {
    let n = args.actors;
    let nap = Duration::from_millis(args.hibernate_after_ms);
    let system = system_with(args, HostConfig::new(), &[])?;
    let path = examples::path("counter").ok_or_else(|| anyhow!("no example actors built"))?;
    system.deploy_granted(
        "counter",
        "0",
        &std::fs::read(path)?,
        &["snapshot".to_owned()],
    )?;
    let mut probe = system.probe("bench")?;
    let get = encode(&Counter::Get)?;
    let options = SpawnOptions {
        hibernate_after: Some(nap),
        ..SpawnOptions::default()
    };
    let rss0 = rss_bytes();
    let start = Instant::now();
    let mut waiting = Duration::ZERO;
    for first in (0..n).step_by(BATCH) {
        let batch = first..(first + BATCH).min(n);
        for i in batch.clone() {
            let name = format!("a{i}");
            system
                .spawn_with(&name, "counter", b"", options)
                .with_context(|| format!("spawn #{i}"))?;
            probe.tell(&format!("/user/{name}"), Counter::KIND, get.clone())?;
        }
        for _ in batch {
            match recv_as::<Counter>(&mut probe).await? {
                Counter::Value(0) => {}
                other => bail!("a fresh counter answered {other:?}, expected Value(0)"),
            }
        }
        let answered = start.elapsed();
        all_asleep(&system).await?;
        waiting += start.elapsed() - answered;
    }
    let total = start.elapsed().as_secs_f64();
    let rss = rss_bytes().saturating_sub(rss0);
    let live = system.live_actors();
    if live < n {
        bail!("{} of {n} actors are gone", n - live);
    }
    println!(
        "RESULT runtime=mote workload=idle actors={n} hibernate_after_ms={} seconds={total:.3} \
         waiting_for_sleep_seconds={:.3} spawns_per_sec={:.0} rss_bytes_per_sleeping_actor={} \
         rss_total_mib={}",
        args.hibernate_after_ms,
        waiting.as_secs_f64(),
        n as f64 / total,
        rss / n.max(1) as u64,
        rss >> 20,
    );
    system.shutdown().await.ok();
    Ok(())
}

/// Waits until no actor of module `counter` holds an instance: the module's memory gauge
/// (which reads 0 for a sleeping actor) is 0. A scrape visits every actor, so it is taken at
/// most a fifth of the time, to leave the workers the cores.
async fn all_asleep(system: &ActorSystem) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let scraping = Instant::now();
        let awake = awake_bytes(system)?;
        if awake == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("actors still awake after {WAIT:?}: {awake} bytes of linear memory");
        }
        let pause = (scraping.elapsed() * 4).max(Duration::from_millis(20));
        tokio::time::sleep(pause).await;
    }
}

/// Linear memory held by awake counters, from the host's metrics.
fn awake_bytes(system: &ActorSystem) -> anyhow::Result<u64> {
    let metrics = system.metrics(&MetricsQuery {
        actors: Vec::new(),
        top: Some(0),
    });
    metrics
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("mote_module_memory_bytes{module=\"counter\"} ")?;
            rest.trim().parse().ok()
        })
        .ok_or_else(|| anyhow!("no memory gauge for module counter in the metrics"))
}
