//! `mote demo`: deploys the example actors and shows ping-pong, a small tree, supervision,
//! durable entities, a hot swap and a built-in pattern (the throttle) at work.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use mote_host::{ActorSystem, EntityOptions, HostConfig, Probe};
use mote_test_programs as examples;
use serde::{Deserialize, Serialize};

/// Mirror of the example protocol's `Report` (postcard is positional, so the shape must match).
#[derive(Deserialize)]
struct Report {
    from: String,
    label: String,
    value: u64,
}

/// Mirror of the example protocol's `Relay`.
#[derive(Serialize)]
enum Relay {
    Broadcast(u64),
    Collect,
}

/// Mirror of the first variant of the example protocol's `Crash`.
#[derive(Serialize)]
enum Crash {
    Panic,
}

/// Mirror of the example protocol's `Counter`.
#[derive(Serialize, Deserialize)]
enum Counter {
    Add(u64),
    Get,
    Value(u64),
}

/// Mirror of the example protocol's `Entity`.
#[derive(Serialize)]
enum Entity {
    Add(u64),
    Get,
}

/// Mirror of the example protocol's `EntityValue`.
#[derive(Deserialize)]
struct EntityValue {
    id: String,
    total: u64,
    activations: u64,
}

/// Mirror of the example protocol's `Versioned`.
#[derive(Serialize)]
#[allow(dead_code)]
enum Versioned {
    Add { stream: u32, n: u32 },
    Get,
    Crash,
}

/// Mirror of the example protocol's `VersionedState`.
#[derive(Deserialize)]
#[allow(dead_code)]
struct VersionedState {
    version: u32,
    count: u64,
    sum: u64,
    last: Vec<(u32, u32)>,
    out_of_order: u64,
    migrated_from: String,
}

const WAIT: Duration = Duration::from_secs(10);

async fn next_report(probe: &mut Probe) -> anyhow::Result<Report> {
    let envelope = probe
        .recv_timeout(WAIT)
        .await
        .ok_or_else(|| anyhow!("no report within {WAIT:?}"))?;
    let report: Report = postcard::from_bytes(&envelope.body).context("malformed report")?;
    println!(
        "  report from {}: {} = {}",
        report.from, report.label, report.value
    );
    Ok(report)
}

fn print_tree(system: &ActorSystem) {
    for info in system.tree() {
        let depth = info.address.path.depth();
        println!(
            "  {:indent$}{} (#{}, {})",
            "",
            info.address.path.name(),
            info.address.incarnation,
            info.module.as_deref().unwrap_or("probe"),
            indent = depth * 2
        );
    }
}

pub(crate) async fn demo(db: &Path, http: Option<SocketAddr>) -> anyhow::Result<()> {
    if let Some(addr) = http {
        crate::dashboard::check(addr, None)?;
    }
    let mut config = HostConfig::new();
    config.storage(db);
    config.meter_cpu(http.is_some());
    let system = Arc::new(ActorSystem::new(config)?);
    let _bars = crate::progress::show(&system);
    println!("database: {}", db.display());
    let dashboard = match http {
        Some(addr) => {
            let (bound, task) = crate::dashboard::start(system.clone(), addr, None).await?;
            println!("dashboard: http://{bound}/");
            Some(task)
        }
        None => None,
    };
    for name in [
        "pingpong",
        "counter",
        "relay",
        "tree",
        "supervisor",
        "crasher",
        "entity",
    ] {
        let path = examples::path(name)
            .ok_or_else(|| anyhow!("this build of mote has no example actors"))?;
        system.deploy_file(name, &path)?;
        println!("deployed module {name} from {}", path.display());
    }
    let mut probe = system.probe("demo")?;

    println!("\n== ping-pong (Dust §2.8): /user/ping and /user/pong exchange 5 round trips");
    system.spawn("pong", "pingpong", b"pong /system/demo")?;
    system.spawn("ping", "pingpong", b"ping /user/pong 5 /system/demo")?;
    for _ in 0..2 {
        next_report(&mut probe).await?;
    }

    println!("\n== a parent that spawns three counters and relays to them");
    system.spawn("relay", "relay", b"3 counter /system/demo")?;
    system.tell(
        "/user/relay",
        "Relay",
        postcard::to_allocvec(&Relay::Broadcast(10))?,
    )?;
    system.tell(
        "/user/relay",
        "Relay",
        postcard::to_allocvec(&Relay::Collect)?,
    )?;
    let sum = next_report(&mut probe).await?;
    if sum.value != 30 {
        bail!(
            "expected the three counters to sum to 30, got {}",
            sum.value
        );
    }

    println!("\n== a tree of depth 2 and fan-out 2 under /user/tree");
    let tree = system.spawn("tree", "tree", b"2 2 /system/demo")?;
    wait_for_subtree(&system, "/user/tree", 7).await;
    println!("live actors:");
    print_tree(&system);

    println!("\nstopping /user/tree: children stop first, each runs its `stopping` hook");
    system.stop("/user/tree");
    for _ in 0..7 {
        next_report(&mut probe).await?;
    }
    system.terminated(&tree).await;

    println!(
        "\n== supervision: /user/sup restarts a child that panics (one-for-one, at most 3 in 10 s)"
    );
    system.spawn(
        "sup",
        "supervisor",
        b"one restart 3 10000 2 crasher /system/demo",
    )?;
    // Through the supervisor's mailbox: its children answer once it has started them.
    system.tell(
        "/user/sup",
        "Relay",
        postcard::to_allocvec(&Relay::Broadcast(1))?,
    )?;
    for _ in 0..2 {
        next_report(&mut probe).await?;
    }
    let mut decisions = system.subscribe_supervision();
    system.tell(
        "/user/sup/c0",
        "Crash",
        postcard::to_allocvec(&Crash::Panic)?,
    )?;
    let decision = decisions.recv().await?;
    println!(
        "  {} failed ({}); its supervisor decided: {:?}",
        decision.child, decision.error, decision.directive
    );
    while next_report(&mut probe).await?.label != "restarted" {}

    durable_entities(&system).await?;
    hot_swap(&system).await?;
    throttled(&system).await?;

    if dashboard.is_some() {
        println!("\nthe demo's actors keep running for the dashboard; Ctrl-C ends the demo");
        tokio::signal::ctrl_c().await?;
    }

    println!(
        "\nshutting down (dead letters seen: {})",
        system.dead_letter_count()
    );
    system.shutdown().await?;
    Ok(())
}

/// Entities: `/user/counters/<id>` activates on its first message, commits every step to the
/// database, passivates when idle and comes back with its state; totals survive a rerun.
async fn durable_entities(system: &ActorSystem) -> anyhow::Result<()> {
    println!(
        "\n== durable entities: /user/counters/<id> activate on demand, commit each step, passivate after 200 ms idle"
    );
    let options = EntityOptions {
        passivate_after: Some(Duration::from_millis(200)),
        ..EntityOptions::default()
    };
    system.register_entity("counters", "entity", options)?;
    let get = || async {
        let reply = system
            .ask(
                "/user/counters/alice",
                "Entity",
                postcard::to_allocvec(&Entity::Get)?,
                WAIT,
            )
            .await?;
        let value: EntityValue = postcard::from_bytes(&reply.body).context("malformed value")?;
        anyhow::Ok(value)
    };
    for n in [5, 7] {
        system.tell(
            "/user/counters/alice",
            "Entity",
            postcard::to_allocvec(&Entity::Add(n))?,
        )?;
    }
    let value = get().await?;
    println!(
        "  {}: total {} after {} activation(s) (run the demo again: the total carries over)",
        value.id, value.total, value.activations
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while system.lookup("/user/counters/alice").is_some() {
        if tokio::time::Instant::now() > deadline {
            bail!("alice did not passivate");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("  alice passivated: no instance left, state committed");
    let again = get().await?;
    println!(
        "  reactivated by the next message: total {}, activation {}",
        again.total, again.activations
    );
    if again.total != value.total {
        bail!(
            "reactivation lost state: {} before, {} after",
            value.total,
            again.total
        );
    }
    if let Some(stats) = system.commit_stats() {
        println!(
            "  committed {} steps in {} transactions",
            stats.steps, stats.transactions
        );
    }
    Ok(())
}

/// Hot swap: `/user/v` runs versioned@1, is upgraded live to 2 with its state while messages
/// flow, refuses a bad 3 (and keeps serving), and is rolled back to 1.
async fn hot_swap(system: &ActorSystem) -> anyhow::Result<()> {
    println!(
        "\n== hot swap: /user/v runs versioned@1; upgrade to 2 under load, refuse a bad 3, roll back"
    );
    for v in ["1", "2", "3"] {
        let path = examples::path(&format!("versioned_v{v}"))
            .ok_or_else(|| anyhow!("this build of mote has no example actors"))?;
        system.deploy_file_version("versioned", v, &path)?;
    }
    system.spawn("v", "versioned", b"")?;
    let feed = |from: u32, to: u32| -> anyhow::Result<()> {
        for n in from..to {
            let add = Versioned::Add { stream: 0, n };
            system.tell("/user/v", "Versioned", postcard::to_allocvec(&add)?)?;
        }
        Ok(())
    };
    let get = || async {
        let reply = system
            .ask(
                "/user/v",
                "Versioned",
                postcard::to_allocvec(&Versioned::Get)?,
                WAIT,
            )
            .await?;
        let state: VersionedState = postcard::from_bytes(&reply.body).context("bad state")?;
        anyhow::Ok(state)
    };
    feed(0, 500)?;
    let report = system.upgrade("/user/v", "2").await?;
    feed(500, 1000)?;
    let state = get().await?;
    println!(
        "  upgraded to 2 ({} us pause): version {}, {} messages counted, {} out of order, migrated from {:?}",
        report.upgraded.first().map_or(0, |u| u.pause.as_micros()),
        state.version,
        state.count,
        state.out_of_order,
        state.migrated_from
    );
    let bad = system.upgrade("/user/v", "3").await?;
    for (path, why) in &bad.failed {
        println!("  upgrade of {path} to 3 refused: {why}");
    }
    feed(1000, 1100)?;
    let state = get().await?;
    println!(
        "  still serving on version {}: {} messages",
        state.version, state.count
    );
    system.upgrade("/user/v", "1").await?;
    let state = get().await?;
    println!(
        "  rolled back to version {} with its state: {} messages, {} out of order",
        state.version, state.count, state.out_of_order
    );
    if state.count != 1100 || state.out_of_order != 0 {
        bail!("the hot swaps lost or reordered messages");
    }
    Ok(())
}

/// A pattern component `mote` ships: the built-in throttle in front of a counter.
async fn throttled(system: &ActorSystem) -> anyhow::Result<()> {
    println!(
        "\n== patterns: /user/slow, the built-in throttle, passes messages on to /user/total at 20 a second"
    );
    system.deploy("throttle", crate::builtin::component("throttle")?)?;
    system.spawn("total", "counter", b"")?;
    let config = serde_json::json!({"target": "/user/total", "rate": 20, "burst": 1});
    system.spawn("slow", "throttle", &serde_json::to_vec(&config)?)?;
    let began = std::time::Instant::now();
    for n in 1..=10 {
        system.tell(
            "/user/slow",
            "Counter",
            postcard::to_allocvec(&Counter::Add(n))?,
        )?;
    }
    // The ask waits its turn behind the adds; the counter answers the asker itself.
    let reply = system
        .ask(
            "/user/slow",
            "Counter",
            postcard::to_allocvec(&Counter::Get)?,
            WAIT,
        )
        .await?;
    let Counter::Value(total) = postcard::from_bytes(&reply.body).context("bad reply")? else {
        bail!("the counter answered something else than its value");
    };
    let from = reply.sender.map(|s| s.path.to_string()).unwrap_or_default();
    println!(
        "  10 adds and a get went through in {:.2} s, one at a time; {from} answered the ask itself: total {total}",
        began.elapsed().as_secs_f64()
    );
    if total != 55 {
        bail!("the throttle lost messages: total {total}, expected 55");
    }
    Ok(())
}

/// Waits (bounded) until `n` actors live at or below `root`, so the printed tree is complete.
async fn wait_for_subtree(system: &ActorSystem, root: &str, n: usize) {
    let count = || {
        system
            .tree()
            .iter()
            .filter(|i| i.address.path.as_str().starts_with(root))
            .count()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while count() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
