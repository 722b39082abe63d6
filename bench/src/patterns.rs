//! `patterns`: what a built-in pattern component costs on the path of a message, against the
//! same messages sent straight to their target, in the same run:
//! - a relay hop: N adds through a `throttle` whose rate never binds, then the counter's
//!   value asked through it, against the same N adds and ask sent to the counter;
//! - a pipeline stage: N inputs through pipelines of one and of three `stage` actors (each
//!   stage an ask and its reply), against the same N sent straight to one stage, which
//!   replies to the sender: the per-hop cost of a stage;
//! - the size of each component `mote` embeds.

use std::time::Instant;

use anyhow::bail;
use mote_example_protocol::Counter;
use mote_guest::Message;
use mote_guest::patterns::pipeline::{self, Stage};
use mote_guest::patterns::{init, throttle};
use mote_host::{ActorSystem, HostConfig, Probe};

use super::{Args, WAIT, encode, system_with};

/// Messages per measurement.
const MESSAGES: u64 = 20_000;

/// Inputs a pipeline may hold at once in the measurement (below its `max_in_flight`).
const WINDOW: u64 = 500;

/// A system with the counter and stage examples and the named pattern components deployed.
fn with_patterns(args: &Args, patterns: &[&str]) -> anyhow::Result<ActorSystem> {
    let system = system_with(args, HostConfig::new(), &["counter", "stage"])?;
    for name in patterns {
        let Some(bytes) = mote_patterns::component(name) else {
            bail!("this build embeds no pattern component {name}");
        };
        system.deploy(name, bytes)?;
    }
    Ok(system)
}

/// Seconds for `MESSAGES` adds sent to `to` and the counter's value asked through it, which
/// must then be `round` times `MESSAGES` (the counter keeps counting from round to round).
async fn adds_then_get(system: &ActorSystem, to: &str, round: u64) -> anyhow::Result<f64> {
    let add = encode(&Counter::Add(1))?;
    let start = Instant::now();
    for _ in 0..MESSAGES {
        loop {
            match system.tell(to, Counter::KIND, add.clone()) {
                Ok(()) => break,
                Err(mote_host::SendError::MailboxFull { .. }) => tokio::task::yield_now().await,
                Err(e) => return Err(e.into()),
            }
        }
    }
    let reply = system
        .ask(to, Counter::KIND, encode(&Counter::Get)?, WAIT)
        .await?;
    let secs = start.elapsed().as_secs_f64();
    match mote_guest::decode::<Counter>(&reply.kind, &reply.body) {
        Ok(Counter::Value(n)) if n == round * MESSAGES => Ok(secs),
        other => bail!(
            "the counter answered {other:?}, expected Value({})",
            round * MESSAGES
        ),
    }
}

/// Seconds for `MESSAGES` inputs `{"value": n}` sent to `to` by `probe`, at most `WINDOW`
/// outstanding, until as many outputs reached `probe` (told back by a stage, or a pipeline's
/// sink).
async fn inputs_through(probe: &mut Probe, to: &str) -> anyhow::Result<f64> {
    let start = Instant::now();
    let (mut sent, mut received) = (0u64, 0u64);
    while received < MESSAGES {
        while sent < MESSAGES && sent - received < WINDOW {
            let input = format!("{{\"value\": {sent}}}").into_bytes();
            probe.tell(to, "number", input)?;
            sent += 1;
        }
        if probe.recv_timeout(WAIT).await.is_none() {
            bail!("no output from {to} after {received} of {MESSAGES}");
        }
        received += 1;
    }
    Ok(start.elapsed().as_secs_f64())
}

pub(crate) async fn patterns(args: &Args) -> anyhow::Result<()> {
    let system = with_patterns(args, &["throttle", "pipeline"])?;
    system.spawn("direct", "counter", b"")?;
    system.spawn("behind", "counter", b"")?;
    let unbound = throttle::Config {
        target: "/user/behind".into(),
        rate: u32::MAX,
        per_ms: 1,
        burst: None,
        queue: 10_000,
    };
    system.spawn("relay", throttle::MODULE, &init(&unbound))?;
    // Warm both paths, then measure them alternately.
    adds_then_get(&system, "/user/direct", 1).await?;
    adds_then_get(&system, "/user/relay", 1).await?;
    let (mut direct, mut relayed) = (f64::MAX, f64::MAX);
    for round in 2..5 {
        direct = direct.min(adds_then_get(&system, "/user/direct", round).await?);
        relayed = relayed.min(adds_then_get(&system, "/user/relay", round).await?);
    }
    let per_message = |secs: f64| secs / MESSAGES as f64 * 1e6;
    println!(
        "RESULT runtime=mote workload=patterns path=direct messages={MESSAGES} us_per_msg={:.2}",
        per_message(direct)
    );
    println!(
        "RESULT runtime=mote workload=patterns path=throttle messages={MESSAGES} us_per_msg={:.2} \
         hop_us={:.2} ratio={:.2}",
        per_message(relayed),
        per_message(relayed - direct),
        relayed / direct
    );
    // A pipeline's stage hop, against a stage asked directly.
    let mut out = system.probe("out")?;
    system.spawn("stage", "stage", b"")?;
    for (name, stages) in [("p1", 1), ("p3", 3)] {
        let config = pipeline::Config {
            sink: Some("/system/out".into()),
            ..pipeline::Config::of((0..stages).map(|_| Stage::json("stage", serde_json::json!({}))))
        };
        system.spawn(name, pipeline::MODULE, &init(&config))?;
    }
    for to in ["/user/stage", "/user/p1", "/user/p3"] {
        inputs_through(&mut out, to).await?;
    }
    let (mut direct, mut one, mut three) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..3 {
        direct = direct.min(inputs_through(&mut out, "/user/stage").await?);
        one = one.min(inputs_through(&mut out, "/user/p1").await?);
        three = three.min(inputs_through(&mut out, "/user/p3").await?);
    }
    let hop = (three - one) / 2.0;
    println!(
        "RESULT runtime=mote workload=patterns path=stage-direct messages={MESSAGES} us_per_msg={:.2}",
        per_message(direct)
    );
    println!(
        "RESULT runtime=mote workload=patterns path=pipeline-1 messages={MESSAGES} us_per_msg={:.2} ratio={:.2}",
        per_message(one),
        one / direct
    );
    println!(
        "RESULT runtime=mote workload=patterns path=pipeline-3 messages={MESSAGES} us_per_msg={:.2} \
         stage_hop_us={:.2} hop_ratio={:.2}",
        per_message(three),
        per_message(hop),
        hop / direct
    );
    for name in mote_patterns::names() {
        let size = mote_patterns::component(name).map_or(0, <[u8]>::len);
        println!(
            "RESULT runtime=mote workload=patterns component={name} bytes={size} kib={:.0}",
            size as f64 / 1024.0
        );
    }
    system.shutdown().await.ok();
    Ok(())
}
