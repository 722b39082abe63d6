//! `images`: what sandbox images cost and what they save, in one run:
//! - for a Rust counter, a Rust actor holding 10 MiB (sparse, then dense and incompressible),
//!   and a Python counter: the image's size
//!   and the time of a capture (`snapshot`) and of a restore into a new actor (`restore`,
//!   until it runs), medians;
//! - an ask that wakes a hibernating counter (Rust, then Python) against one to an awake
//!   counter of the same module;
//! - a restore of a counter that handled 10,000 messages against the recovery of a journal
//!   of 10,000 events by replay (no snapshot), each less an empty start;
//! - the cost of deploying with snapshots on (the instrumenting rewrite, and compiling the
//!   bigger component) against a plain deploy, with nothing cached;
//! - the cost of snapshots on the message path (the instrumented component: its shim's core
//!   instance and memory): 20,000 adds and a get to the counter deployed with and without
//!   `snapshot`.

use std::time::Instant;

use anyhow::{anyhow, bail};
use mote_example_protocol::{Crash, Versioned, VersionedState};
use mote_guest::Message;
use mote_host::{ActorSystem, HostConfig, SpawnOptions};

use super::compile::deploy_seconds;
use super::{Args, WAIT, encode, examples, journal_recovery, system_with};

/// Deploys example `file` as module `name` with snapshots on.
fn deploy_snapshots(system: &ActorSystem, name: &str, file: &str) -> anyhow::Result<()> {
    let path = examples::path(file).ok_or_else(|| anyhow!("no example actors built"))?;
    system.deploy_granted(name, "0", &std::fs::read(path)?, &["snapshot".to_owned()])?;
    Ok(())
}

/// What deploying with snapshots on costs: plain and snapshot deploys of a Rust and a Python
/// module, alternated (`rounds` of each), medians.
fn deploy_cost(args: &Args) -> anyhow::Result<()> {
    // Nothing shared between the deploys: each compiles all of its module.
    let uncached = || {
        let mut config = HostConfig::new();
        config.function_cache(false);
        config
    };
    let grant = ["snapshot".to_owned()];
    for (what, file, rounds) in [
        ("rust-counter", "versioned_v1", 5),
        ("python-counter", "py_versioned_v1", 2),
    ] {
        let (mut plain, mut snap) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            plain.push(deploy_seconds(args, uncached(), file, &[])?);
            snap.push(deploy_seconds(args, uncached(), file, &grant)?);
        }
        let (plain, snap) = (median_us(&mut plain) / 1e3, median_us(&mut snap) / 1e3);
        println!(
            "RESULT runtime=mote workload=images deploy actor={what} plain_ms={plain:.1} \
             snapshot_ms={snap:.1} ratio={:.2}",
            snap / plain
        );
    }
    Ok(())
}

/// The median of `samples`, in microseconds.
fn median_us(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2] * 1e6
}

/// Sends `Add { stream, n }` for n in `0..count` to `to`, encoded by `speak`, then asks for
/// the state, which must show at least `count` and nothing out of order.
async fn count_to(
    system: &ActorSystem,
    to: &str,
    stream: u32,
    count: u32,
    speak: &dyn Fn(&Versioned) -> anyhow::Result<Vec<u8>>,
    hear: &dyn Fn(&[u8]) -> anyhow::Result<VersionedState>,
) -> anyhow::Result<()> {
    for n in 0..count {
        let body = speak(&Versioned::Add { stream, n })?;
        loop {
            match system.tell(to, Versioned::KIND, body.clone()) {
                Ok(()) => break,
                Err(mote_host::SendError::MailboxFull { .. }) => tokio::task::yield_now().await,
                Err(e) => return Err(e.into()),
            }
        }
    }
    let reply = system
        .ask(to, Versioned::KIND, speak(&Versioned::Get)?, WAIT)
        .await?;
    let state = hear(&reply.body)?;
    if state.count < u64::from(count) || state.out_of_order != 0 {
        bail!(
            "{to} counted {} ({} out of order)",
            state.count,
            state.out_of_order
        );
    }
    Ok(())
}

/// One actor's image: its size, and the median capture and restore times of `rounds`.
async fn measure(
    system: &ActorSystem,
    what: &str,
    path: &str,
    rounds: usize,
) -> anyhow::Result<f64> {
    let (mut captures, mut restores) = (Vec::new(), Vec::new());
    let mut image = Vec::new();
    for round in 0..rounds {
        let start = Instant::now();
        image = system.snapshot(path).await?;
        captures.push(start.elapsed().as_secs_f64());
        let at = format!("/user/restored-{what}-{round}");
        let start = Instant::now();
        system
            .restore(&image, Some(&at), SpawnOptions::default())
            .await?;
        restores.push(start.elapsed().as_secs_f64());
        system.stop(&at);
    }
    let info = ActorSystem::image_info(&image)?;
    let restore_us = median_us(&mut restores);
    println!(
        "RESULT runtime=mote workload=images actor={what} image_bytes={} pages_raw={} \
         capture_us={:.0} restore_us={restore_us:.0}",
        info.bytes,
        info.pages_raw,
        median_us(&mut captures),
    );
    Ok(restore_us)
}

/// Spawns a holder (the crasher) at `/user/<name>` and has it allocate as `order` says;
/// returns once it holds the memory (the order does not answer: an `Echo` after it does).
async fn holding(system: &ActorSystem, name: &str, order: Crash) -> anyhow::Result<()> {
    let path = format!("/user/{name}");
    system.spawn(name, "holder", b"")?;
    system.tell(&path, Crash::KIND, encode(&order)?)?;
    system
        .ask(&path, Crash::KIND, encode(&Crash::Echo(1))?, WAIT)
        .await?;
    Ok(())
}

/// An ask that wakes a hibernating counter of `module` that handled `count` messages
/// (restore, then the call) against the same ask to an awake one (`awake_path`), medians of
/// 20.
async fn hibernation(
    system: &ActorSystem,
    (what, module, count, awake_path): (&str, &str, u32, &str),
    speak: &dyn Fn(&Versioned) -> anyhow::Result<Vec<u8>>,
    hear: &dyn Fn(&[u8]) -> anyhow::Result<VersionedState>,
) -> anyhow::Result<()> {
    let options = SpawnOptions {
        hibernate_after: Some(std::time::Duration::from_millis(5)),
        ..SpawnOptions::default()
    };
    let name = format!("sleepy-{what}");
    let path = format!("/user/{name}");
    let sleepy = system.spawn_with(&name, module, b"", options)?;
    count_to(system, &path, 0, count, speak, hear).await?;
    let naps = || {
        system
            .tree()
            .iter()
            .find(|a| a.address == sleepy)
            .map_or(0, |a| a.stats.hibernations)
    };
    let get = speak(&Versioned::Get)?;
    // Seconds of one `Get` asked of `path`, answered.
    let timed = async |path: &str| -> anyhow::Result<f64> {
        let start = Instant::now();
        let reply = system.ask(path, Versioned::KIND, get.clone(), WAIT).await?;
        hear(&reply.body)?;
        Ok(start.elapsed().as_secs_f64())
    };
    let (mut woken, mut awake) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let before = naps();
        let deadline = Instant::now() + WAIT;
        while naps() == before {
            if Instant::now() > deadline {
                bail!("{path} never hibernated");
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        woken.push(timed(&path).await?);
        awake.push(timed(awake_path).await?);
    }
    system.stop(&path);
    let (woken, awake) = (median_us(&mut woken), median_us(&mut awake));
    println!(
        "RESULT runtime=mote workload=images hibernation actor={what} woken_ask_us={woken:.0} \
         awake_ask_us={awake:.1} ratio={:.0}",
        woken / awake
    );
    Ok(())
}

/// See the module docs.
pub(crate) async fn images(args: &Args) -> anyhow::Result<()> {
    deploy_cost(args)?;
    let system = system_with(args, HostConfig::new(), &["versioned_v1"])?;
    deploy_snapshots(&system, "counter", "versioned_v1")?;
    deploy_snapshots(&system, "holder", "crasher")?;
    deploy_snapshots(&system, "py-counter", "py_versioned_v1")?;
    let postcard = |m: &Versioned| encode(m);
    let from_postcard = |b: &[u8]| {
        mote_guest::decode::<VersionedState>(VersionedState::KIND, b).map_err(|e| anyhow!("{e}"))
    };
    let json = |m: &Versioned| Ok(serde_json::to_vec(m)?);
    let from_json = |b: &[u8]| Ok(serde_json::from_slice::<VersionedState>(b)?);

    // The message path on either engine: the same counter, deployed without and with snapshots.
    let mut rates = Vec::new();
    for (name, path) in [("versioned_v1", "/user/plain"), ("counter", "/user/snap")] {
        system.spawn(path, name, b"")?;
        count_to(&system, path, 0, 1000, &postcard, &from_postcard).await?;
        let start = Instant::now();
        count_to(&system, path, 1, 20_000, &postcard, &from_postcard).await?;
        rates.push(start.elapsed().as_secs_f64());
        system.stop(path);
    }
    println!(
        "RESULT runtime=mote workload=images engine_cost messages=20000 plain_us_per_msg={:.2} \
         snapshot_us_per_msg={:.2} ratio={:.2}",
        rates[0] / 20_000.0 * 1e6,
        rates[1] / 20_000.0 * 1e6,
        rates[1] / rates[0]
    );

    system.spawn("c", "counter", b"")?;
    count_to(&system, "/user/c", 0, 10_000, &postcard, &from_postcard).await?;
    let counter_us = measure(&system, "rust-counter", "/user/c", 200).await?;

    holding(&system, "h", Crash::Alloc(10)).await?;
    measure(&system, "rust-10mib", "/user/h", 20).await?;

    // The same 10 MiB written densely with pseudo-random bytes: every page differs, and
    // nothing compresses.
    holding(&system, "dense", Crash::Fill(10)).await?;
    measure(&system, "rust-10mib-dense", "/user/dense", 10).await?;

    let rust = ("rust-counter", "counter", 10_000, "/user/c");
    hibernation(&system, rust, &postcard, &from_postcard).await?;

    system.spawn("p", "py-counter", b"")?;
    count_to(&system, "/user/p", 0, 1000, &json, &from_json).await?;
    measure(&system, "python-counter", "/user/p", 20).await?;
    let python = ("python-counter", "py-counter", 1000, "/user/p");
    hibernation(&system, python, &json, &from_json).await?;
    system.shutdown().await.ok();

    // Replay: a journal of 10,000 events recovered with no snapshot, less an empty start.
    let (full, base, replayed) = journal_recovery(args, "images-replay", 10_000).await?;
    let replay_us = (full - base).max(1e-9) * 1e6;
    println!(
        "RESULT runtime=mote workload=images replay events={replayed} replay_us={replay_us:.0} \
         image_restore_us={counter_us:.0} replay_over_restore={:.1}",
        replay_us / counter_us
    );
    Ok(())
}
