//! The cluster workload: two nodes, `a` and `b`, of one cluster in this process, joined to a
//! nats-server with JetStream of their own on loopback (`mote_tests::nats`, which installs the
//! server into the project's Python venv when it is missing). Every figure that crosses the
//! nodes is printed beside the same workload on one node, measured in the same run:
//!
//! - ping-pong: the `pingpong` pair with ping on `a` and pong on `b`, against a pair both on
//!   `a`: msgs/s and their ratio;
//! - round trip: asks from outside `a` to a pong on `b` and to one on `a`, in alternating
//!   blocks: median and p99 of each, beside the floor under them: the round trip of a bare
//!   message between two NATS clients of this process, one echoing the other;
//! - fan-out: one sender on `a` (a probe, as in w3) to 1,000 counters on `b`, against 1,000
//!   counters on `a`: msgs/s and their ratio.
//!
//! Each node has `--threads` scheduler workers; both nodes, their NATS tasks and nats-server
//! share this machine's cores, and the network is loopback: a figure here is the host's cost
//! of crossing, not a network's.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use futures_util::StreamExt;
use mote_example_protocol::{Counter, PingPong, Report};
use mote_guest::Message;
use mote_host::{ActorSystem, CLUSTER_TOPIC, ClusterConfig, HostConfig, Probe};
use mote_tests::nats::NatsServer;

use super::{Args, encode, system_with};

/// How long setting the cluster up (joins, claims reaching the other node) may take.
const SETUP: Duration = Duration::from_secs(30);
/// Asks timed to each pong (and round trips of the NATS floor), after as many to warm up.
const ASKS: usize = 5_000;
/// How long one ask, or the next report of a game or the fan-out, may take: far beyond their
/// figures, so that a message lost on the way fails the run instead of stalling it.
const STALL: Duration = Duration::from_secs(60);
/// Asks in a row to one pong before the other's turn: a worker idle through the other's
/// round trip parks, and its wake-up is no part of a local ask's figure.
const BLOCK: usize = 500;
/// Receivers of the fan-out, and messages to each.
const FAN_OUT: (usize, u64) = (1_000, 1_000);

/// Runs the three comparisons and prints a `RESULT` line for each.
pub(super) async fn cluster(args: &Args) -> anyhow::Result<()> {
    let nats = NatsServer::start(&[]);
    let a = node(args, &nats, "a").await?;
    let mut events = a.subscribe(CLUSTER_TOPIC)?;
    let b = node(args, &nats, "b").await?;
    // a hears b's first beat, and tells its node-up event: from then on each knows the other.
    let deadline = Instant::now() + SETUP;
    while a.cluster_nodes().len() < 2 {
        events
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .await
            .ok_or_else(|| anyhow!("node a never heard node b"))?;
    }
    let mut probe = a.probe("bench")?;
    let figures = async {
        ping_pong(args, &nats.url, &a, &b, &mut probe).await?;
        fan_out(&a, &b, &mut probe).await
    }
    .await;
    drop(probe);
    b.shutdown().await.ok();
    a.shutdown().await.ok();
    figures
}

/// A system with the bench's options and the modules of this workload, joined as `name`.
async fn node(args: &Args, nats: &NatsServer, name: &str) -> anyhow::Result<ActorSystem> {
    let system = system_with(args, HostConfig::new(), &["pingpong", "counter"])?;
    let mut config = ClusterConfig::new(nats.url.clone(), name);
    // The fan-out's sender outruns the link: its whole burst waits in the link's queue, as on
    // one node it waits in the mailboxes, instead of overflowing into dead letters.
    let (actors, per_actor) = FAN_OUT;
    config.link_capacity = config.link_capacity.max(actors * (per_actor as usize + 1));
    system
        .join_cluster(config)
        .await
        .map_err(|e| anyhow!("node {name} joins: {}", mote_host::chain(&e)))?;
    Ok(system)
}

/// Claims `path` for `owner` and waits until `from` sends what is addressed there to `owner`.
///
/// A claim reaches the other nodes through a key-value watch, a moment after it is made. A
/// message to the path, where no actor lives yet, becomes a dead letter on the node that
/// routed it: on `owner` once `from` knows the claim, on `from` before.
async fn claim_and_route(
    from: &ActorSystem,
    owner: &ActorSystem,
    path: &str,
) -> anyhow::Result<()> {
    owner
        .claim(path)
        .await
        .map_err(|e| anyhow!("claiming {path}: {}", mote_host::chain(&e)))?;
    let mut here = from.subscribe_dead_letters();
    let mut there = owner.subscribe_dead_letters();
    let deadline = tokio::time::Instant::now() + SETUP;
    loop {
        from.tell(path, "mote-bench.route", Vec::new())?;
        let routed = tokio::time::timeout_at(deadline, async {
            loop {
                tokio::select! {
                    Ok(letter) = there.recv() => if letter.target == path { return true },
                    Ok(letter) = here.recv() => if letter.target == path { return false },
                }
            }
        })
        .await
        .with_context(|| format!("{path} never routed to its node"))?;
        if routed {
            return Ok(());
        }
        // The claim has not arrived: give the watch a moment before the next try.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The round trip of an ask to a pong on each node, then ping-pong on one node and across.
async fn ping_pong(
    args: &Args,
    nats_url: &str,
    a: &ActorSystem,
    b: &ActorSystem,
    probe: &mut Probe,
) -> anyhow::Result<()> {
    let report_to = format!("pong /system/nodes/a{}", probe.address().path);
    claim_and_route(a, b, "/user/pong").await?;
    claim_and_route(b, a, "/user/ping").await?;
    b.spawn("pong", "pingpong", report_to.as_bytes())?;
    a.spawn("lpong", "pingpong", b"pong /system/bench")?;

    // Round trips first: the games end with their pongs stopping.
    let ping = encode(&PingPong::Ping(0))?;
    let mut local = Vec::with_capacity(ASKS);
    let mut remote = Vec::with_capacity(ASKS);
    for block in 0..2 * ASKS / BLOCK {
        for (path, samples) in [("/user/lpong", &mut local), ("/user/pong", &mut remote)] {
            for _ in 0..BLOCK {
                let start = Instant::now();
                a.ask(path, PingPong::KIND, ping.clone(), STALL)
                    .await
                    .with_context(|| format!("ask {path}"))?;
                if block >= ASKS / BLOCK {
                    samples.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    let (local_median, local_p99) = percentiles(&mut local);
    let (remote_median, remote_p99) = percentiles(&mut remote);
    let (floor_median, floor_p99) = nats_round_trips(nats_url).await?;
    println!(
        "RESULT runtime=mote workload=cluster_ask asks={ASKS} local_median_us={local_median:.1} \
         local_p99_us={local_p99:.1} cross_node_median_us={remote_median:.1} \
         cross_node_p99_us={remote_p99:.1} ratio_median_cross_to_local={:.2} \
         nats_floor_median_us={floor_median:.1} nats_floor_p99_us={floor_p99:.1}",
        remote_median / local_median
    );

    // Each game long enough to last a second or more.
    let (local_n, remote_n) = (args.messages, args.cluster_messages);
    let local = game(a, probe, "lping", "/user/lpong", local_n).await?;
    let remote = game(a, probe, "ping", "/user/pong", remote_n).await?;
    let (local_rate, remote_rate) = (f64::from(local_n) / local, f64::from(remote_n) / remote);
    println!(
        "RESULT runtime=mote workload=cluster_pingpong local_messages={local_n} \
         cross_node_messages={remote_n} local_msgs_per_sec={local_rate:.0} \
         cross_node_msgs_per_sec={remote_rate:.0} ratio_cross_to_local={:.4} \
         cross_node_round_trip_us={:.1}",
        remote_rate / local_rate,
        2.0 / remote_rate * 1e6
    );
    Ok(())
}

/// Seconds for `messages` ping-pong messages between a new ping on `a` and the pong at `pong`.
async fn game(
    a: &ActorSystem,
    probe: &mut Probe,
    ping: &str,
    pong: &str,
    messages: u32,
) -> anyhow::Result<f64> {
    let rounds = messages / 2;
    let init = format!("ping {pong} {rounds} /system/bench");
    let start = Instant::now();
    a.spawn(ping, "pingpong", init.as_bytes())?;
    // The ping reports after its last pong, the pong when it is told Done.
    let mut pongs = None;
    for _ in 0..2 {
        let r: Report = recv_within(probe).await?;
        if r.label == "pongs" {
            pongs = Some((r.value, start.elapsed().as_secs_f64()));
        }
    }
    match pongs {
        Some((n, seconds)) if n == u64::from(rounds) => Ok(seconds),
        other => bail!("{ping} counted {other:?} pongs, expected {rounds}"),
    }
}

/// One sender on `a` to counters on `a`, then to as many on `b`.
async fn fan_out(a: &ActorSystem, b: &ActorSystem, probe: &mut Probe) -> anyhow::Result<()> {
    let (actors, per_actor) = FAN_OUT;
    let local: Vec<String> = (0..actors).map(|i| format!("/user/l{i}")).collect();
    let remote: Vec<String> = (0..actors).map(|i| format!("/user/s{i}")).collect();
    for path in &remote {
        b.claim(path)
            .await
            .map_err(|e| anyhow!("claiming {path}: {}", mote_host::chain(&e)))?;
    }
    // Claims arrive in the order they were made: once the last routes, all do.
    let last = remote.last().ok_or_else(|| anyhow!("no receivers"))?;
    claim_and_route(a, b, last).await?;
    for (l, r) in local.iter().zip(&remote) {
        a.spawn(l, "counter", b"")?;
        b.spawn(r, "counter", b"")?;
    }
    let lost = || a.dead_letter_count() + b.dead_letter_count();
    let before = lost();
    let dead = || format!("{} dead letters on the nodes", lost() - before);
    let local_secs = send_all(probe, &local, per_actor)
        .await
        .with_context(dead)?;
    let remote_secs = send_all(probe, &remote, per_actor)
        .await
        .with_context(dead)?;
    if lost() > before {
        bail!(
            "{} messages of the fan-out became dead letters",
            lost() - before
        );
    }
    let messages = actors as u64 * per_actor;
    let (local_rate, remote_rate) = (messages as f64 / local_secs, messages as f64 / remote_secs);
    println!(
        "RESULT runtime=mote workload=cluster_fanout actors={actors} messages={messages} \
         local_msgs_per_sec={local_rate:.0} cross_node_msgs_per_sec={remote_rate:.0} \
         ratio_cross_to_local={:.3}",
        remote_rate / local_rate
    );
    Ok(())
}

/// Seconds for `per_actor` adds to each of `paths`, each counter then asked for its total.
async fn send_all(probe: &mut Probe, paths: &[String], per_actor: u64) -> anyhow::Result<f64> {
    let add = encode(&Counter::Add(1))?;
    let get = encode(&Counter::Get)?;
    let start = Instant::now();
    for _ in 0..per_actor {
        for path in paths {
            probe.tell(path, Counter::KIND, add.clone())?;
        }
    }
    for path in paths {
        probe.tell(path, Counter::KIND, get.clone())?;
    }
    for _ in paths {
        match recv_within::<Counter>(probe).await? {
            Counter::Value(v) if v == per_actor => {}
            other => bail!("a counter counted {other:?}, expected Value({per_actor})"),
        }
    }
    Ok(start.elapsed().as_secs_f64())
}

/// The median and p99 round trip, in µs, of a message from one NATS client of this process to
/// another that publishes it back: what any cross-node round trip costs at least here.
async fn nats_round_trips(url: &str) -> anyhow::Result<(f64, f64)> {
    let connect = || async {
        async_nats::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))
    };
    let (asker, echo) = (connect().await?, connect().await?);
    let mut pings = echo.subscribe("bench.ping").await?;
    let mut pongs = asker.subscribe("bench.pong").await?;
    let echoing = tokio::spawn(async move {
        while let Some(message) = pings.next().await {
            if echo.publish("bench.pong", message.payload).await.is_err() {
                break;
            }
        }
    });
    let timed = async {
        // The echo's subscription reaches the server on its own connection: until it has, a
        // ping finds no subscriber and is gone. Each ping carries its number, and only the
        // pong of the same number ends its round.
        let mut seq = 0u64;
        let mut round_trip = async |wait: Duration| -> anyhow::Result<Option<Duration>> {
            seq += 1;
            let start = Instant::now();
            asker
                .publish("bench.ping", seq.to_le_bytes().to_vec().into())
                .await?;
            let deadline = tokio::time::Instant::now() + wait;
            while let Ok(Some(pong)) = tokio::time::timeout_at(deadline, pongs.next()).await {
                if pong.payload.as_ref() == seq.to_le_bytes() {
                    return Ok(Some(start.elapsed()));
                }
            }
            Ok(None)
        };
        let ready = tokio::time::Instant::now() + SETUP;
        while round_trip(Duration::from_millis(50)).await?.is_none() {
            if tokio::time::Instant::now() > ready {
                bail!("the NATS echo never answered");
            }
        }
        let mut samples = Vec::with_capacity(ASKS);
        for round in 0..2 * ASKS {
            let taken = round_trip(STALL)
                .await?
                .ok_or_else(|| anyhow!("a NATS round trip took over {STALL:?}"))?;
            if round >= ASKS {
                samples.push(taken.as_secs_f64() * 1e6);
            }
        }
        Ok(percentiles(&mut samples))
    }
    .await;
    echoing.abort();
    timed
}

/// The next message of `probe`, decoded, within [`STALL`].
async fn recv_within<M: Message>(probe: &mut Probe) -> anyhow::Result<M> {
    let envelope = probe
        .recv_timeout(STALL)
        .await
        .ok_or_else(|| anyhow!("nothing reached {} for {STALL:?}", probe.address()))?;
    mote_guest::decode(&envelope.kind, &envelope.body).map_err(|e| anyhow!("{e}"))
}

/// The median and the 99th percentile of `samples`.
fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize];
    (at(0.5), at(0.99))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_median_and_p99_are_read_from_the_sorted_samples() {
        let mut samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(super::percentiles(&mut samples), (50.0, 99.0));
    }
}
