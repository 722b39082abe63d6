//! Metrics: what `/metrics` serves, read the way Prometheus reads it. Counts match what the
//! actors did, per module sums survive stopped actors, per-actor series stay bounded, and the
//! capabilities' own series (timers, asks, commits) are there.

use std::collections::HashMap;

use mote_example_protocol::{Counter, Crash, Journal, JournalState, Timer};
use mote_host::{HostConfig, MetricsQuery};
use mote_tests::{TempDir, ask_as, durable_config, next, system_configured, tell};

/// The samples of an OpenMetrics text: `name{labels}` to value. Fails on a malformed line, so
/// the test also checks the exposition parses.
fn samples(text: &str) -> HashMap<String, f64> {
    assert!(
        text.ends_with("# EOF\n"),
        "an OpenMetrics text ends with # EOF"
    );
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("malformed sample {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("malformed value in {line:?}"));
        assert!(
            out.insert(series.to_owned(), value).is_none(),
            "{series} twice"
        );
    }
    out
}

fn value(samples: &HashMap<String, f64>, series: &str) -> f64 {
    *samples.get(series).unwrap_or_else(|| {
        let mut names: Vec<_> = samples.keys().collect();
        names.sort();
        panic!("no {series} in {names:#?}")
    })
}

fn scrape(system: &mote_host::ActorSystem) -> HashMap<String, f64> {
    samples(&system.metrics(&MetricsQuery::default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_follow_what_actors_did_and_survive_their_stop() {
    let mut config = HostConfig::new();
    config.meter_cpu(true);
    let system = system_configured(config, &["counter", "crasher"]);
    system.spawn("a", "counter", b"").unwrap();
    system.spawn("b", "counter", b"").unwrap();
    for _ in 0..40 {
        tell(&system, "/user/a", &Counter::Add(1));
    }
    for _ in 0..10 {
        tell(&system, "/user/b", &Counter::Add(1));
    }
    // The asks come after the adds in each mailbox, so both have handled everything.
    let a: Counter = ask_as(&system, "/user/a", &Counter::Get).await;
    let b: Counter = ask_as(&system, "/user/b", &Counter::Get).await;
    assert_eq!((a, b), (Counter::Value(40), Counter::Value(10)));

    let m = scrape(&system);
    let counter = "{module=\"counter\"}";
    assert_eq!(value(&m, &format!("mote_module_actors{counter}")), 2.0);
    assert_eq!(
        value(&m, &format!("mote_module_messages_received_total{counter}")),
        52.0,
        "40 + 10 adds and two asks"
    );
    assert_eq!(
        value(&m, &format!("mote_module_messages_sent_total{counter}")),
        2.0,
        "two replies"
    );
    assert!(value(&m, &format!("mote_module_memory_bytes{counter}")) >= 2.0 * 65536.0);
    assert!(value(&m, &format!("mote_module_cpu_seconds_total{counter}")) > 0.0);
    assert_eq!(value(&m, "mote_actors_live"), 2.0);
    assert_eq!(value(&m, "mote_spawns_total"), 2.0);
    assert_eq!(
        value(
            &m,
            "mote_actor_messages_received_total{actor=\"/user/a\",module=\"counter\"}"
        ),
        41.0
    );

    // A failure and its restart, by module and kind.
    system.spawn("c", "crasher", b"").unwrap();
    let mut decisions = system.subscribe_supervision();
    tell(&system, "/user/c", &Crash::Panic);
    let decision = tokio::time::timeout(mote_tests::DEADLINE, decisions.recv())
        .await
        .expect("a supervision decision")
        .unwrap();
    assert_eq!(decision.child.path.as_str(), "/user/c");
    // The restarted crasher answers: the restart has been counted.
    let mut probe = system.probe("p").unwrap();
    mote_tests::tell_from(&probe, "/user/c", &Crash::Echo(7));
    next(&mut probe).await;
    let m = scrape(&system);
    assert_eq!(
        value(&m, "mote_failures_total{module=\"crasher\",kind=\"trap\"}"),
        1.0
    );
    assert_eq!(
        value(&m, "mote_module_failures_total{module=\"crasher\"}"),
        1.0
    );
    assert_eq!(
        value(&m, "mote_module_restarts_total{module=\"crasher\"}"),
        1.0
    );

    // Dead letters by reason.
    system
        .tell("/user/nobody", "Counter", vec![0])
        .unwrap_or_default();
    let m = scrape(&system);
    assert_eq!(
        value(&m, "mote_dead_letters_total{reason=\"no-actor\"}"),
        1.0
    );

    // Stopping an actor takes nothing from its module's counters, only its gauges.
    let b = system.lookup("/user/b").unwrap();
    system.stop("/user/b");
    system.terminated(&b).await;
    let m = scrape(&system);
    assert_eq!(
        value(&m, &format!("mote_module_messages_received_total{counter}")),
        52.0
    );
    assert_eq!(value(&m, &format!("mote_module_actors{counter}")), 1.0);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_actor_series_are_the_busiest_or_those_asked_for() {
    let mut config = HostConfig::new();
    config.metrics_top(2);
    let system = system_configured(config, &["counter"]);
    for i in 0..20u64 {
        let name = format!("c{i}");
        system.spawn(&name, "counter", b"").unwrap();
        for _ in 0..i {
            tell(&system, &format!("/user/{name}"), &Counter::Add(1));
        }
    }
    for i in 0..20 {
        let _: Counter = ask_as(&system, &format!("/user/c{i}"), &Counter::Get).await;
    }
    let per_actor = |text: &str| -> Vec<String> {
        let mut actors: Vec<String> = samples(text)
            .into_keys()
            .filter(|k| k.starts_with("mote_actor_messages_received_total"))
            .collect();
        actors.sort();
        actors
    };
    let top = per_actor(&system.metrics(&MetricsQuery::default()));
    assert_eq!(
        top,
        [
            "mote_actor_messages_received_total{actor=\"/user/c18\",module=\"counter\"}",
            "mote_actor_messages_received_total{actor=\"/user/c19\",module=\"counter\"}",
        ],
        "the two busiest"
    );
    let asked = per_actor(&system.metrics(&MetricsQuery {
        actors: vec!["/user/c3".into(), "/user/none".into()],
        top: Some(0),
    }));
    assert_eq!(
        asked,
        ["mote_actor_messages_received_total{actor=\"/user/c3\",module=\"counter\"}"],
        "only the one named that lives"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_export_their_own_series() {
    let dir = TempDir::new("metrics-caps");
    let system = system_configured(durable_config(&dir.join("m.redb")), &["journal", "ticker"]);
    system.spawn("j", "journal", b"16").unwrap();
    for v in 0..5 {
        tell(&system, "/user/j", &Journal::Append(v));
    }
    let state: JournalState = ask_as(&system, "/user/j", &Journal::Query).await;
    assert_eq!(state.values, [0, 1, 2, 3, 4]);
    let m = scrape(&system);
    assert!(value(&m, "mote_commit_steps_total") >= 5.0);
    assert!(value(&m, "mote_fsyncs_total") >= 1.0);
    assert!(value(&m, "mote_commit_latency_seconds_count") >= 5.0);
    assert!(
        value(&m, "mote_module_steps_committed_total{module=\"journal\"}") >= 5.0,
        "each append is a committed step"
    );
    assert_eq!(value(&m, "mote_asks_pending"), 0.0);

    // A refusal is counted by quota, and stays counted after its actor stops: a 1 ms period
    // is below the minimum.
    system.spawn("fast", "ticker", b"/system/nobody").unwrap();
    let mut decisions = system.subscribe_supervision();
    tell(
        &system,
        "/user/fast",
        &Timer::Every {
            period_ms: 1,
            tag: 1,
        },
    );
    tokio::time::timeout(mote_tests::DEADLINE, decisions.recv())
        .await
        .expect("the refused ticker fails")
        .unwrap();
    let refused = "mote_refusals_total{quota=\"timer-period\"}";
    assert_eq!(value(&scrape(&system), refused), 1.0);
    let fast = system.lookup("/user/fast").unwrap();
    system.stop("/user/fast");
    system.terminated(&fast).await;
    assert_eq!(value(&scrape(&system), refused), 1.0, "kept after its stop");

    // A periodic timer is pending while its actor lives.
    system.spawn("t", "ticker", b"/system/nobody").unwrap();
    tell(
        &system,
        "/user/t",
        &Timer::Every {
            period_ms: 60_000,
            tag: 1,
        },
    );
    let deadline = std::time::Instant::now() + mote_tests::DEADLINE;
    while value(&scrape(&system), "mote_timers_pending") < 1.0 {
        assert!(std::time::Instant::now() < deadline, "no timer pending");
        tokio::task::yield_now().await;
    }
    system.shutdown().await.unwrap();
}
