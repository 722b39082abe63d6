//! The urgent lane and deactivate/activate (issue "actor verbs"): a parent pauses its worker,
//! messages queue in order, urgent ones go first once it is activated again; only a parent may
//! pause an actor, and a paused actor can still be stopped.

use mote_example_protocol::{Lane, Report};
use mote_tests::{next_report, system_with, tell, terminated, wait_until};

/// The next report, which must carry `label`.
async fn expect(probe: &mut mote_host::Probe, label: &str) -> Report {
    let report = next_report(probe).await;
    assert_eq!(report.label, label, "{report:?}");
    report
}

/// Messages queued at `path` now.
fn depth(system: &mote_host::ActorSystem, path: &str) -> Option<usize> {
    system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == path)
        .map(|a| a.mailbox_depth)
}

const WORKER: &str = "/user/boss/worker";

/// A boss and its worker, live, and the probe they report to.
async fn boss() -> (mote_host::ActorSystem, mote_host::Probe) {
    let system = system_with(&["lanes"]);
    let probe = system.probe("p").unwrap();
    system.spawn("boss", "lanes", b"boss /system/p").unwrap();
    wait_until(|| depth(&system, WORKER).is_some()).await;
    (system, probe)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deactivated_child_handles_nothing_and_then_everything_in_order() {
    let (system, mut probe) = boss().await;
    tell(&system, "/user/boss", &Lane::Pause);
    assert_eq!(expect(&mut probe, "paused").await.value, 1);
    for n in 0..200 {
        tell(&system, WORKER, &Lane::Work(n));
    }
    // Deactivated before the first of them was sent: all of them wait.
    assert_eq!(depth(&system, WORKER), Some(200));
    tell(&system, "/user/boss", &Lane::Resume);
    assert_eq!(expect(&mut probe, "resumed").await.value, 1);
    for n in 0..200 {
        assert_eq!(expect(&mut probe, "work").await.value, n);
    }
    // Deactivated again, it can still be stopped: host signals get through.
    tell(&system, "/user/boss", &Lane::Pause);
    assert_eq!(expect(&mut probe, "paused").await.value, 1);
    tell(&system, WORKER, &Lane::Work(7));
    let worker = system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == WORKER)
        .map(|a| a.address)
        .expect("the worker lives");
    assert!(system.stop(WORKER));
    terminated(&system, &worker).await;
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_parent_can_deactivate_an_actor() {
    let (system, mut probe) = boss().await;
    system.spawn("other", "lanes", b"worker /system/p").unwrap();
    for path in ["/user/other", "/user/boss", "/user/nobody"] {
        tell(&system, "/user/boss", &Lane::PauseOther(path.into()));
        assert_eq!(expect(&mut probe, "paused").await.value, 0, "{path}");
    }
    tell(&system, "/user/other", &Lane::Work(1));
    assert_eq!(expect(&mut probe, "work").await.value, 1, "not paused");
    tell(&system, "/user/boss", &Lane::PauseOther(WORKER.into()));
    assert_eq!(expect(&mut probe, "paused").await.value, 1, "its own child");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urgent_messages_overtake_a_full_queue_of_ordinary_ones_without_starving_them() {
    let (system, mut probe) = boss().await;
    tell(&system, "/user/boss", &Lane::Pause);
    assert_eq!(expect(&mut probe, "paused").await.value, 1);
    // 1,000 ordinary messages from outside and 50 urgent ones from the boss, interleaved.
    for n in 0..1000 {
        tell(&system, WORKER, &Lane::Work(n));
        if n % 20 == 0 {
            tell(&system, "/user/boss", &Lane::Urgent(10_000 + n / 20));
        }
    }
    tell(&system, "/user/boss", &Lane::Resume);
    assert_eq!(expect(&mut probe, "resumed").await.value, 1);
    let mut handled = Vec::new();
    for _ in 0..1050 {
        handled.push(expect(&mut probe, "work").await.value);
    }
    let (urgent, ordinary): (Vec<usize>, Vec<usize>) =
        (0..handled.len()).partition(|&i| handled[i] >= 10_000);
    let values = |at: &[usize]| at.iter().map(|&i| handled[i]).collect::<Vec<u64>>();
    assert_eq!(values(&urgent), (10_000..10_050).collect::<Vec<u64>>());
    assert_eq!(values(&ordinary), (0..1000).collect::<Vec<u64>>());
    // The urgent lane first, except one ordinary message after each run of 16 urgent ones:
    // a flood of urgent messages cannot starve the ordinary lane.
    assert_eq!(urgent.last(), Some(&52), "{:?}", &handled[..60]);
    assert_eq!(ordinary[..3], [16, 33, 50]);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_urgent_message_wakes_an_idle_actor() {
    let (system, mut probe) = boss().await;
    // The worker waits for messages; only urgent ones come.
    for n in 0..3 {
        tell(&system, "/user/boss", &Lane::Urgent(n));
        assert_eq!(expect(&mut probe, "work").await.value, u64::from(n));
    }
    system.shutdown().await.unwrap();
}
