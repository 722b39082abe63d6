//! Idle actors' fiber stacks (`host/src/sandbox/parking.rs`): a store keeps the fiber stack of
//! its calls for its whole life, so the host gives the pages of an idle actor's stack back.
//! The actor must not notice: it serves on with its state, and a call that is running or
//! preempted never loses its stack.

use std::time::Duration;

use mote_example_protocol::{Clock, ClockReading, Counter};
use mote_host::HostConfig;
use mote_tests::{
    ask_as, burn_rounds, next, next_as, system_configured, tell, tell_from, wait_until,
};

fn metric(system: &mote_host::ActorSystem, series: &str) -> f64 {
    let metrics = system.metrics(&mote_host::MetricsQuery::default());
    let prefix = format!("{series} ");
    let line = metrics.lines().find(|l| l.starts_with(&prefix));
    line.and_then(|l| l[prefix.len()..].parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_actors_give_their_stacks_back_and_serve_on_with_their_state() {
    let mut config = HostConfig::new();
    config.release_idle_stacks(Some(Duration::from_millis(10)));
    let system = system_configured(config, &["counter", "py_orders"]);
    let n = 20u64;
    for i in 0..n {
        system.spawn(&format!("c{i}"), "counter", b"").unwrap();
        tell(&system, &format!("/user/c{i}"), &Counter::Add(i));
    }
    // A Python actor runs on the copy-on-write engine, whose stacks are the same arena's.
    let mut probe = system.probe("p").unwrap();
    system.spawn("orders", "py_orders", b"/system/p").unwrap();
    let order = |id: u32, amount: u32| {
        format!(r#"{{"id":{id},"customer":"ann","amount":{amount}}}"#).into_bytes()
    };
    system.tell("/user/orders", "order", order(1, 5)).unwrap();
    for i in 0..n {
        let value: Counter = ask_as(&system, &format!("/user/c{i}"), &Counter::Get).await;
        assert_eq!(value, Counter::Value(i));
    }
    assert!(
        String::from_utf8(next(&mut probe).await.body)
            .unwrap()
            .contains(r#""total":5"#)
    );
    // Every actor made calls, on one stack each; idle, each gives its stack back.
    let actors = n as usize + 1;
    wait_until(|| system.stack_stats().releases >= actors as u64).await;
    let stats = system.stack_stats();
    assert_eq!(stats.live, actors, "{stats:?}");
    assert_eq!(metric(&system, "mote_fiber_stacks"), actors as f64);
    // The counter moves on if a sweep comes between the reads: it lies between them.
    let shown = metric(&system, "mote_fiber_stack_releases_total");
    let after = system.stack_stats().releases;
    assert!(
        (stats.releases as f64..=after as f64).contains(&shown),
        "{shown} releases shown, {stats:?} then {after}"
    );
    // They serve on from where they were: their state is in their linear memory.
    for i in 0..n {
        tell(&system, &format!("/user/c{i}"), &Counter::Add(100));
        let value: Counter = ask_as(&system, &format!("/user/c{i}"), &Counter::Get).await;
        assert_eq!(value, Counter::Value(i + 100));
    }
    system.tell("/user/orders", "order", order(2, 7)).unwrap();
    assert!(
        String::from_utf8(next(&mut probe).await.body)
            .unwrap()
            .contains(r#""total":12"#)
    );
    // Idle again, they give their stacks back again.
    wait_until(|| system.stack_stats().releases >= stats.releases + actors as u64).await;
    assert_eq!(system.stack_stats().live, actors);
    system.shutdown().await.unwrap();
    assert_eq!(
        system.stack_stats().live,
        0,
        "every store gave its stack back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_or_preempted_call_keeps_its_stack() {
    let mut config = HostConfig::new();
    // A sweep every millisecond, and a call preempted every tick of 1 ms.
    config
        .release_idle_stacks(Some(Duration::from_millis(1)))
        .epoch_tick(Duration::from_millis(1))
        .cpu_deadline(Duration::from_secs(30))
        .workers(2);
    let clocks = 6;
    let system = system_configured(config, &["clock"]);
    for c in 0..clocks {
        system.spawn(&format!("clock{c}"), "clock", b"").unwrap();
    }
    // Calibrate busy work of about 200 ms.
    let rounds = burn_rounds(&system, "/user/clock0", Duration::from_millis(200)).await;
    let mut probe = system.probe("p").unwrap();
    for c in 0..clocks {
        tell_from(&probe, &format!("/user/clock{c}"), &Clock::Read);
    }
    for _ in 0..clocks {
        next_as::<ClockReading>(&mut probe).await;
    }
    // Each has a stack now; idle, each gives it back.
    wait_until(|| system.stack_stats().releases >= clocks).await;
    let before = system.stack_stats().releases;
    // Six calls on two workers, each preempted every millisecond: a preempted call waits for
    // its turn for several sweeps, suspended on its stack, and keeps it all the while.
    for c in 0..clocks {
        tell_from(&probe, &format!("/user/clock{c}"), &Clock::Burn(rounds));
    }
    let mut work = Vec::new();
    for _ in 0..clocks {
        let reading: ClockReading = next_as(&mut probe).await;
        assert!(!reading.restarted, "{reading:?}");
        work.push(reading.work);
    }
    // The same work every time: no frame of it was lost to a release.
    assert!(work.iter().all(|w| *w == work[0]), "{work:?}");
    // Never mid-call: at most once per idle stretch, and each clock had two since `before`
    // (the one after its `Read`, if a sweep came late to it, and the one after its call),
    // against hundreds of preemptions each.
    let released = system.stack_stats().releases - before;
    assert!(released <= 2 * clocks, "{released} releases");
    system.shutdown().await.unwrap();
}
