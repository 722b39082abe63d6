//! The `clock` capability: an actor reads how long ago it was spawned and how much time its
//! own calls have run; both keep counting across a restart.

use std::time::Duration;

use mote_example_protocol::{Clock, ClockReading};
use mote_tests::{ask_as, next_as, system_with, tell_from};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_reads_its_age_and_the_cpu_time_of_its_own_calls() {
    let system = system_with(&["clock"]);
    system.spawn("clock", "clock", b"").unwrap();
    let first: ClockReading = ask_as(&system, "/user/clock", &Clock::Read).await;
    assert!(!first.restarted);
    assert!(first.cpu_ns > 0, "starting and reading took some time");
    assert!(first.cpu_ns <= first.since_start_ns, "{first:?}");

    // Busy work is charged to the actor.
    let burnt: ClockReading = ask_as(&system, "/user/clock", &Clock::Burn(20_000_000)).await;
    assert!(burnt.cpu_ns > first.cpu_ns, "{first:?} then {burnt:?}");
    assert!(burnt.since_start_ns > first.since_start_ns);
    assert!(burnt.cpu_ns <= burnt.since_start_ns, "{burnt:?}");

    // Idle time is not: half a second waiting for a timer costs two short calls.
    let idle = Duration::from_millis(500);
    let mut probe = system.probe("reader").unwrap();
    tell_from(
        &probe,
        "/user/clock",
        &Clock::ReadAfter(idle.as_millis() as u64),
    );
    let later: ClockReading = next_as(&mut probe).await;
    let aged = Duration::from_nanos(later.since_start_ns - burnt.since_start_ns);
    let ran = Duration::from_nanos(later.cpu_ns - burnt.cpu_ns);
    assert!(aged >= idle, "the timer waited {aged:?}");
    assert!(ran < idle / 2, "{ran:?} charged for {aged:?} mostly idle");

    // A restart keeps counting: the incarnation's clock, not the instance's.
    tell_from(&probe, "/user/clock", &Clock::Crash);
    let restarted: ClockReading = loop {
        let reading: ClockReading = ask_as(&system, "/user/clock", &Clock::Read).await;
        if reading.restarted {
            break reading;
        }
    };
    assert!(restarted.since_start_ns >= later.since_start_ns);
    assert!(restarted.cpu_ns >= later.cpu_ns);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_module_that_can_read_the_clock_is_metered() {
    // Measuring costs two clock reads a guest call: a module that does not import `clock`
    // cannot tell, so its actors do not pay.
    let system = system_with(&["clock", "counter"]);
    let metered = |name: &str| {
        system
            .module_list()
            .into_iter()
            .find(|m| m.name == name)
            .map(|m| m.metered)
    };
    assert_eq!(metered("clock"), Some(true));
    assert_eq!(metered("counter"), Some(false));
}
