//! Savina-style workloads, each with the same shape in `bench/peers/peers.erl`:
//!
//! - `ring`: 1,000 relays in a closed ring pass one token 1,000,000 hops (thread ring).
//! - `chain`: a line of 10,000 relays carries one message end to end, ten times in a row.
//! - `forkjoin`: 200 rounds of one ping to each of 1,000 echo actors, every ping answered
//!   before the next round (fork-join throughput, 400,000 messages).
//! - `big`: a mesh of 1,000 actors; each pings random others 200 times, one at a time, and
//!   every ping is answered (400,000 messages).
//!
//! Each returns its headline figure, messages (or hops) per second.

use std::time::Instant;

use anyhow::bail;
use mote_example_protocol::{Report, Savina};
use mote_guest::Message;

use super::{Args, encode, recv_as, system};

pub(super) async fn ring(args: &Args) -> anyhow::Result<f64> {
    let (actors, hops) = (1_000usize, args.hops);
    let system = system(args, &["savina"])?;
    let mut probe = system.probe("bench")?;
    for i in 0..actors {
        let init = format!("relay /user/ring-{} /system/bench", (i + 1) % actors);
        system.spawn(&format!("ring-{i}"), "savina", init.as_bytes())?;
    }
    let start = Instant::now();
    probe.tell("/user/ring-0", Savina::KIND, encode(&Savina::Token(hops))?)?;
    let report: Report = recv_as(&mut probe).await?;
    let secs = start.elapsed().as_secs_f64();
    if report.label != "token" {
        bail!("the ring reported {report:?}");
    }
    let rate = hops as f64 / secs;
    println!(
        "RESULT runtime=mote workload=ring actors={actors} hops={hops} seconds={secs:.6} msgs_per_sec={rate:.0}"
    );
    system.shutdown().await.ok();
    Ok(rate)
}

pub(super) async fn chain(args: &Args) -> anyhow::Result<f64> {
    let (actors, traversals) = (10_000u64, 10u64);
    let system = system(args, &["savina"])?;
    let mut probe = system.probe("bench")?;
    let spawning = Instant::now();
    for i in 0..actors {
        let next = match i + 1 {
            last if last == actors => "/system/bench".to_owned(),
            next => format!("/user/chain-{next}"),
        };
        system.spawn(
            &format!("chain-{i}"),
            "savina",
            format!("relay {next}").as_bytes(),
        )?;
    }
    let spawned = spawning.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..traversals {
        probe.tell(
            "/user/chain-0",
            Savina::KIND,
            encode(&Savina::Token(actors))?,
        )?;
        match recv_as::<Savina>(&mut probe).await? {
            Savina::Token(0) => {}
            other => bail!("the chain delivered {other:?}"),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let hops = actors * traversals;
    let rate = hops as f64 / secs;
    println!(
        "RESULT runtime=mote workload=chain actors={actors} traversals={traversals} spawn_seconds={spawned:.6} \
         seconds={secs:.6} us_per_traversal={:.0} msgs_per_sec={rate:.0}",
        secs * 1e6 / traversals as f64
    );
    system.shutdown().await.ok();
    Ok(rate)
}

pub(super) async fn fork_join(args: &Args) -> anyhow::Result<f64> {
    let (actors, rounds) = (1_000usize, 200u64);
    let system = system(args, &["savina"])?;
    let mut probe = system.probe("bench")?;
    let paths: Vec<String> = (0..actors).map(|i| format!("/user/echo-{i}")).collect();
    for i in 0..actors {
        system.spawn(&format!("echo-{i}"), "savina", b"echo")?;
    }
    let ping = encode(&Savina::Ping)?;
    let start = Instant::now();
    for _ in 0..rounds {
        for path in &paths {
            probe.tell(path, Savina::KIND, ping.clone())?;
        }
        for _ in 0..actors {
            match recv_as::<Savina>(&mut probe).await? {
                Savina::Pong => {}
                other => bail!("an echo answered {other:?}"),
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let messages = 2 * actors as u64 * rounds;
    let rate = messages as f64 / secs;
    println!(
        "RESULT runtime=mote workload=forkjoin actors={actors} rounds={rounds} messages={messages} \
         seconds={secs:.6} msgs_per_sec={rate:.0}"
    );
    system.shutdown().await.ok();
    Ok(rate)
}

pub(super) async fn big(args: &Args) -> anyhow::Result<f64> {
    let (actors, pings) = (1_000u64, 200u64);
    let system = system(args, &["savina"])?;
    let mut probe = system.probe("bench")?;
    for i in 0..actors {
        let init = format!("big {i} {actors} {pings} /system/bench");
        system.spawn(&format!("big-{i}"), "savina", init.as_bytes())?;
    }
    let start_msg = encode(&Savina::Start)?;
    let start = Instant::now();
    for i in 0..actors {
        probe.tell(&format!("/user/big-{i}"), Savina::KIND, start_msg.clone())?;
    }
    for _ in 0..actors {
        let report: Report = recv_as(&mut probe).await?;
        if report.label != "big" || report.value != pings {
            bail!("a mesh member reported {report:?}");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let messages = 2 * actors * pings;
    let rate = messages as f64 / secs;
    println!(
        "RESULT runtime=mote workload=big actors={actors} pings={pings} messages={messages} \
         seconds={secs:.6} msgs_per_sec={rate:.0}"
    );
    system.shutdown().await.ok();
    Ok(rate)
}
