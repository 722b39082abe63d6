//! Supervision and isolation limits: every failure source is contained and handed to the
//! parent's strategy; resume, restart, stop, escalate, all-for-one, restart intensity, the root
//! policy, death watch, stop reasons, stash and bounded mailboxes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mote_example_protocol::{Clock, ClockReading, Crash, Gate, Relay, Report, Watch};
use mote_host::{
    AskError, DeadLetterReason, Directive, FailureKind, HostConfig, SendError, SpawnOptions,
    Strategy,
};
use mote_tests::*;

/// A supervisor at /user/sup with `children` crasher children reporting to /system/p.
fn supervised(config: HostConfig, mode: &str, children: u32) -> mote_host::ActorSystem {
    let system = system_configured(
        config,
        &[
            "supervisor",
            "crasher",
            "pingpong",
            "watcher",
            "gate",
            "counter",
            "sequence",
        ],
    );
    let init = format!("{mode} 3 60000 {children} crasher /system/p");
    system.spawn("sup", "supervisor", init.as_bytes()).unwrap();
    system
}

/// Waits until the supervisor at /user/sup has started and its `children` answer: the request
/// queues in its mailbox, which survives restarts, so this also waits out a restart.
async fn wait_children(
    system: &mote_host::ActorSystem,
    probe: &mut mote_host::Probe,
    children: u32,
) {
    tell(system, "/user/sup", &Relay::Broadcast(7));
    let mut answered = Vec::new();
    for _ in 0..children {
        answered.push(report_labelled(probe, "echo").await.from);
    }
    answered.sort();
    let expected: Vec<String> = (0..children).map(|i| format!("/user/sup/c{i}")).collect();
    assert_eq!(answered, expected);
}

/// Proof of life: the crasher at `path` answers an echo.
async fn echo(probe: &mut mote_host::Probe, path: &str, n: u32) {
    tell_from(probe, path, &Crash::Echo(n));
    loop {
        let envelope = next(probe).await;
        if envelope.kind == "Crash" {
            assert_eq!(
                mote_guest::decode::<Crash>(&envelope.kind, &envelope.body).unwrap(),
                Crash::Echo(n)
            );
            return;
        }
    }
}

/// Bumps the crasher's counter and returns the new count.
async fn bump(probe: &mut mote_host::Probe, path: &str) -> u32 {
    tell_from(probe, path, &Crash::Bump);
    loop {
        let envelope = next(probe).await;
        if envelope.kind == "Crash" {
            match mote_guest::decode::<Crash>(&envelope.kind, &envelope.body).unwrap() {
                Crash::Echo(n) => return n,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

async fn failure_is_supervised(config: HostConfig, crash: Crash, expect: &str, kind: FailureKind) {
    let system = supervised(config, "one restart", 2);
    let mut probe = system.probe("p").unwrap();
    let mut decisions = system.subscribe_supervision();
    wait_children(&system, &mut probe, 2).await;
    let before = system.lookup("/user/sup/c0").unwrap();
    tell(&system, "/user/sup/c0", &crash);
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child, before);
    assert_eq!(decision.directive, Directive::Restart);
    assert!(
        decision.error.contains(expect),
        "{expect:?} not in {:?}",
        decision.error
    );
    assert_eq!(decision.kind, kind, "the typed kind reaches subscribers");
    let seen = report_labelled(&mut probe, &format!("kind:{}", kind.name())).await;
    assert_eq!(seen.from, "/user/sup/c0", "and the parent's supervise hook");
    let restarted = report_labelled(&mut probe, "restarted").await;
    assert_eq!(restarted.from, "/user/sup/c0");
    // Same path, same incarnation; the sibling, the parent and the host are unaffected.
    assert_eq!(system.lookup("/user/sup/c0"), Some(before));
    echo(&mut probe, "/user/sup/c0", 1).await;
    echo(&mut probe, "/user/sup/c1", 2).await;
    assert!(system.lookup("/user/sup").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_a_supervised_failure() {
    failure_is_supervised(
        HostConfig::new(),
        Crash::Panic,
        "unreachable",
        FailureKind::Trap,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_trap_is_a_supervised_failure() {
    failure_is_supervised(
        HostConfig::new(),
        Crash::Unreachable,
        "unreachable",
        FailureKind::Trap,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_from_receive_is_a_supervised_failure() {
    failure_is_supervised(
        HostConfig::new(),
        Crash::Fail("bad input".into()),
        "error: bad input",
        FailureKind::Error,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_the_limit_and_is_a_supervised_failure() {
    let mut config = HostConfig::new();
    config.memory_limit(32 << 20);
    failure_is_supervised(
        config,
        Crash::Alloc(64),
        "memory limit",
        FailureKind::MemoryLimit,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_hits_the_cpu_deadline_and_is_a_supervised_failure() {
    let mut config = HostConfig::new();
    config.cpu_deadline(Duration::from_millis(300));
    failure_is_supervised(
        config,
        Crash::Spin,
        "cpu deadline",
        FailureKind::CpuDeadline,
    )
    .await;
}

/// Runs `f` with the calling thread allowed on `core` only (none: the first core it may use
/// now); the threads `f` starts keep that. Returns the core and what `f` returns.
fn on_one_core<T>(core: Option<usize>, f: impl FnOnce() -> T) -> (usize, T) {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: the sets are plain bitmaps of `size` bytes, read and written by the kernel.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size, &mut allowed), 0);
        let core = core.unwrap_or_else(|| {
            (0..libc::CPU_SETSIZE as usize)
                .find(|&cpu| libc::CPU_ISSET(cpu, &allowed))
                .expect("a core this thread may run on")
        });
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut one);
        assert_eq!(libc::sched_setaffinity(0, size, &one), 0);
        let out = f();
        assert_eq!(libc::sched_setaffinity(0, size, &allowed), 0);
        (core, out)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_charged_its_cpu_time_not_the_time_the_os_gave_its_core_to_others() {
    let deadline = Duration::from_millis(800);
    let mut config = HostConfig::new();
    config.cpu_deadline(deadline).workers(1);
    // The actor's one worker runs on one core.
    let (core, system) = on_one_core(None, || system_configured(config, &["clock"]));
    system.spawn("clock", "clock", b"").unwrap();
    // Busy work that takes about 0.6 of the deadline on that core, measured here.
    let rounds = burn_rounds(&system, "/user/clock", deadline.mul_f64(0.6)).await;
    // Five busy threads join it there: the worker gets about a sixth of the core (the OS
    // shares a core equally among the threads that want it), so the work takes several times
    // the deadline in wall-clock time (charged a slice a tick, it failed at 1.6 to 1.8 s).
    let stop = Arc::new(AtomicBool::new(false));
    let (_, busy) = on_one_core(Some(core), || {
        (0..5)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect::<Vec<_>>()
    });
    let mut probe = system.probe("reader").unwrap();
    let mut decisions = system.subscribe_supervision();
    let began = Instant::now();
    tell_from(&probe, "/user/clock", &Clock::Burn(rounds));
    let outcome = tokio::select! {
        reading = next_as::<ClockReading>(&mut probe) => Ok(reading),
        decision = next_decision(&mut decisions) => Err(decision),
    };
    let took = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in busy {
        thread.join().unwrap();
    }
    let reading = outcome.unwrap_or_else(|d| {
        panic!(
            "the call was failed after {took:?} of wall-clock time: {}",
            d.error
        )
    });
    assert!(!reading.restarted, "{reading:?}");
    assert!(
        took > deadline,
        "the busy threads did not hold the worker's core (the work took {took:?}), \
         so this did not test what it means to"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_overflows_the_stack_and_is_a_supervised_failure() {
    // Rust guests keep big frames on a shadow stack in linear memory: overflowing it is an
    // out-of-bounds access; small frames exhaust the native stack (`call stack exhausted`).
    failure_is_supervised(
        HostConfig::new(),
        Crash::Recurse(10_000_000),
        "out of bounds",
        FailureKind::Trap,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_stack_exhaustion_is_a_stack_overflow() {
    // The attacker recurses with small frames: the native stack runs out, not the shadow one.
    let system = system_with(&["attacker"]);
    let mut decisions = system.subscribe_supervision();
    system
        .spawn("deep", "attacker", b"recurse /system/none 100000000")
        .unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(
        decision.kind,
        FailureKind::StackOverflow,
        "{}",
        decision.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_is_supervised_by_the_guardian_then_stopped() {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        max_restarts: 2,
        backoff_min: Duration::from_millis(1),
        ..Strategy::default()
    });
    let system = system_configured(config, &["crasher"]);
    let mut decisions = system.subscribe_supervision();
    let actor = system.spawn("refuses", "crasher", b"fail-start").unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let d = next_decision(&mut decisions).await;
        assert!(d.error.contains("start refused"), "{}", d.error);
        seen.push(d.directive);
    }
    // Two restarts, then the intensity is exceeded and the guardian stops it.
    assert_eq!(
        seen,
        vec![Directive::Restart, Directive::Restart, Directive::Stop]
    );
    terminated(&system, &actor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_actor_is_preempted_and_others_keep_working() {
    let mut config = HostConfig::new();
    config.cpu_deadline(Duration::from_secs(20));
    let system = system_configured(config, &["crasher", "pingpong"]);
    let mut probe = system.probe("p").unwrap();
    // Two spinners: with two worker threads, without preemption nothing else would run.
    for name in ["spin1", "spin2"] {
        system.spawn(name, "crasher", b"").unwrap();
        tell(&system, &format!("/user/{name}"), &Crash::Spin);
    }
    system.spawn("pong", "pingpong", b"pong /system/p").unwrap();
    system
        .spawn("ping", "pingpong", b"ping /user/pong 200 /system/p")
        .unwrap();
    let r = report_labelled(&mut probe, "pongs").await;
    assert_eq!(r.value, 200);
    let spinning = system
        .tree()
        .iter()
        .filter(|i| i.address.path.as_str().starts_with("/user/spin"))
        .count();
    assert_eq!(spinning, 2, "the spinners are still alive, just preempted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervise_hook_decides_by_the_error() {
    scenarios::supervise_decides_by_error("supervisor", Speech::Postcard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_keeps_state() {
    let system = supervised(HostConfig::new(), "one resume", 1);
    let mut probe = system.probe("p").unwrap();
    wait_children(&system, &mut probe, 1).await;
    assert_eq!(bump(&mut probe, "/user/sup/c0").await, 1);
    assert_eq!(bump(&mut probe, "/user/sup/c0").await, 2);
    tell(&system, "/user/sup/c0", &Crash::Fail("oops".into()));
    assert_eq!(bump(&mut probe, "/user/sup/c0").await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resets_state_but_keeps_path_incarnation_and_queued_messages() {
    let system = supervised(HostConfig::new(), "one restart", 1);
    let mut probe = system.probe("p").unwrap();
    wait_children(&system, &mut probe, 1).await;
    let before = system.lookup("/user/sup/c0").unwrap();
    assert_eq!(bump(&mut probe, "/user/sup/c0").await, 1);
    assert_eq!(bump(&mut probe, "/user/sup/c0").await, 2);
    // The failing message is dropped; the three bumps queued behind it survive the restart.
    tell(&system, "/user/sup/c0", &Crash::Panic);
    for _ in 0..3 {
        tell_from(&probe, "/user/sup/c0", &Crash::Bump);
    }
    let mut counts = Vec::new();
    while counts.len() < 3 {
        let envelope = next(&mut probe).await;
        if envelope.kind == "Crash" {
            counts.push(mote_guest::decode::<Crash>(&envelope.kind, &envelope.body).unwrap());
        }
    }
    assert_eq!(counts, vec![Crash::Echo(1), Crash::Echo(2), Crash::Echo(3)]);
    assert_eq!(system.lookup("/user/sup/c0"), Some(before));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_for_one_restarts_every_sibling() {
    let system = supervised(HostConfig::new(), "all restart", 3);
    let mut probe = system.probe("p").unwrap();
    wait_children(&system, &mut probe, 3).await;
    tell(&system, "/user/sup/c1", &Crash::Fail("one for all".into()));
    let mut restarted = Vec::new();
    for _ in 0..3 {
        restarted.push(report_labelled(&mut probe, "restarted").await.from);
    }
    restarted.sort();
    assert_eq!(
        restarted,
        vec!["/user/sup/c0", "/user/sup/c1", "/user/sup/c2"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_directive_stops_the_child_with_reason_failure() {
    let system = supervised(HostConfig::new(), "one stop", 2);
    let mut probe = system.probe("p").unwrap();
    wait_children(&system, &mut probe, 2).await;
    let c0 = system.lookup("/user/sup/c0").unwrap();
    tell(&system, "/user/sup/c0", &Crash::Fail("enough".into()));
    let stopped = report_labelled(&mut probe, "stopped").await;
    assert_eq!(
        (stopped.from.as_str(), stopped.value),
        ("/user/sup/c0", STOP_FAILURE)
    );
    terminated(&system, &c0).await;
    echo(&mut probe, "/user/sup/c1", 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escalation_reaches_the_root_where_the_guardian_restarts_the_top_level_actor() {
    let system = supervised(HostConfig::new(), "one escalate", 2);
    let mut probe = system.probe("p").unwrap();
    let mut decisions = system.subscribe_supervision();
    wait_children(&system, &mut probe, 2).await;
    let old_c0 = system.lookup("/user/sup/c0").unwrap();
    tell(&system, "/user/sup/c0", &Crash::Fail("too hard".into()));
    let first = next_decision(&mut decisions).await;
    assert_eq!(
        (first.child.path.as_str(), first.directive),
        ("/user/sup/c0", Directive::Escalate)
    );
    let second = next_decision(&mut decisions).await;
    assert_eq!(second.child.path.as_str(), "/user/sup");
    assert_eq!(
        second.directive,
        Directive::Restart,
        "the documented root policy restarts"
    );
    assert!(second.error.contains("too hard"), "{}", second.error);
    // The restarted supervisor's children are new incarnations; the old ones stopped.
    terminated(&system, &old_c0).await;
    wait_children(&system, &mut probe, 2).await;
    assert_ne!(system.lookup("/user/sup/c0"), Some(old_c0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exceeding_restart_intensity_escalates() {
    let system = system_with(&["supervisor", "crasher"]);
    let mut probe = system.probe("p").unwrap();
    let mut decisions = system.subscribe_supervision();
    // At most 2 restarts in a minute.
    system
        .spawn(
            "sup",
            "supervisor",
            b"one restart 2 60000 1 crasher /system/p",
        )
        .unwrap();
    wait_children(&system, &mut probe, 1).await;
    let mut seen = Vec::new();
    for _ in 0..3 {
        tell(&system, "/user/sup/c0", &Crash::Fail("again".into()));
        let d = next_decision(&mut decisions).await;
        assert_eq!(d.child.path.as_str(), "/user/sup/c0");
        seen.push(d.directive);
        if d.directive == Directive::Restart {
            report_labelled(&mut probe, "restarted").await;
        }
    }
    assert_eq!(
        seen,
        vec![Directive::Restart, Directive::Restart, Directive::Escalate]
    );
    let up = next_decision(&mut decisions).await;
    assert_eq!(up.child.path.as_str(), "/user/sup");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_stops_a_top_level_actor_that_escalates_past_its_budget() {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        max_restarts: 0,
        ..Strategy::default()
    });
    let system = system_configured(config, &["crasher"]);
    let mut decisions = system.subscribe_supervision();
    let actor = system.spawn("c", "crasher", b"").unwrap();
    tell(&system, "/user/c", &Crash::Panic);
    assert_eq!(
        next_decision(&mut decisions).await.directive,
        Directive::Stop
    );
    terminated(&system, &actor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_yields_exactly_one_terminated_also_for_the_already_dead() {
    let system = system_with(&["watcher", "counter"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("w", "watcher", b"/system/p").unwrap();
    let a = system.spawn("a", "counter", b"").unwrap();
    let b = system.spawn("b", "counter", b"").unwrap();
    let watch = |addr: &mote_host::Address| Watch::Watch {
        path: addr.path.to_string(),
        incarnation: addr.incarnation,
    };
    // Watching twice still gives one Terminated.
    tell(&system, "/user/w", &watch(&a));
    tell(&system, "/user/w", &watch(&a));
    tell(&system, "/user/w", &watch(&b));
    tell(
        &system,
        "/user/w",
        &Watch::Unwatch {
            path: b.path.to_string(),
            incarnation: b.incarnation,
        },
    );
    system.stop("/user/a");
    terminated(&system, &a).await;
    let r = report_labelled(&mut probe, "terminated").await;
    assert_eq!((r.from.as_str(), r.value), ("/user/a", a.incarnation));
    system.stop("/user/b");
    terminated(&system, &b).await;
    // Watching an incarnation that is already dead: told at once, exactly once. (Watching it
    // again after that Terminated arrived is a new watch and is told again, as in Akka.)
    tell(&system, "/user/w", &watch(&a));
    let r = report_labelled(&mut probe, "terminated").await;
    assert_eq!((r.from.as_str(), r.value), ("/user/a", a.incarnation));
    // Nothing else arrives: not a second for a, none for the unwatched b.
    let c = system.spawn("c", "counter", b"").unwrap();
    tell(&system, "/user/w", &watch(&c));
    system.stop("/user/c");
    let r = report_labelled(&mut probe, "terminated").await;
    assert_eq!(r.from, "/user/c", "an extra Terminated arrived before c's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_hooks_see_the_reason() {
    let system = system_with(&["supervisor", "crasher"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("plain", "crasher", b"/system/p").unwrap();
    system.stop("/user/plain");
    let r = report_labelled(&mut probe, "stopped").await;
    assert_eq!((r.from.as_str(), r.value), ("/user/plain", STOP_NORMAL));

    // A supervisor stopped by its own failure takes its children down with parent-failure.
    system
        .spawn(
            "sup",
            "supervisor",
            b"one escalate 3 60000 1 crasher /system/p",
        )
        .unwrap();
    wait_children(&system, &mut probe, 1).await;
    system.spawn("late", "crasher", b"/system/p").unwrap();
    system.shutdown().await.unwrap();
    let mut reasons = Vec::new();
    while let Some(envelope) = probe.recv_timeout(Duration::ZERO).await {
        let r: Report = mote_guest::decode(&envelope.kind, &envelope.body).unwrap();
        if r.label == "stopped" {
            reasons.push((r.from, r.value));
        }
    }
    reasons.sort();
    assert_eq!(
        reasons,
        vec![
            ("/user/late".to_owned(), STOP_SHUTDOWN),
            ("/user/sup/c0".to_owned(), STOP_SHUTDOWN)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_failure_reaches_the_children_stopping_hooks() {
    let mut config = HostConfig::new();
    config.root_strategy(Strategy {
        directive: Directive::Stop,
        ..Strategy::default()
    });
    let system = system_configured(config, &["supervisor", "crasher"]);
    let mut probe = system.probe("p").unwrap();
    system
        .spawn(
            "sup",
            "supervisor",
            b"one escalate 3 60000 2 crasher /system/p",
        )
        .unwrap();
    wait_children(&system, &mut probe, 2).await;
    // c0 fails, the supervisor escalates, the guardian stops the supervisor: c1 stops with
    // parent-failure, and c0 (failed, waiting) too.
    tell(&system, "/user/sup/c0", &Crash::Fail("boom".into()));
    let mut reasons = Vec::new();
    for _ in 0..2 {
        let r = report_labelled(&mut probe, "stopped").await;
        reasons.push((r.from, r.value));
    }
    reasons.sort();
    assert_eq!(
        reasons,
        vec![
            ("/user/sup/c0".to_owned(), STOP_PARENT_FAILURE),
            ("/user/sup/c1".to_owned(), STOP_PARENT_FAILURE)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stash_and_unstash_keep_order_and_come_before_new_messages() {
    let system = system_with(&["gate"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("gate", "gate", b"/system/p").unwrap();
    for n in 0..50 {
        tell(&system, "/user/gate", &Gate::Item(n));
    }
    tell(&system, "/user/gate", &Gate::Open);
    for n in 50..100 {
        tell(&system, "/user/gate", &Gate::Item(n));
    }
    tell(&system, "/user/gate", &Gate::Close);
    tell(&system, "/user/gate", &Gate::Item(100));
    tell(&system, "/user/gate", &Gate::Item(101));
    tell(&system, "/user/gate", &Gate::Open);
    let mut items = Vec::new();
    for _ in 0..102 {
        let r = next_report(&mut probe).await;
        assert_eq!(r.label, "item");
        items.push(r.value);
    }
    assert_eq!(items, (0..102).collect::<Vec<u64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_mailbox_refuses_with_an_error_outside_and_dead_letters_inside() {
    let mut config = HostConfig::new();
    config.cpu_deadline(Duration::from_secs(20));
    let system = system_configured(config, &["crasher", "sequence"]);
    let mut letters = system.subscribe_dead_letters();
    let busy = system
        .spawn_with(
            "busy",
            "crasher",
            b"",
            SpawnOptions {
                mailbox_capacity: Some(5),
                ..Default::default()
            },
        )
        .unwrap();
    tell(&system, "/user/busy", &Crash::Spin);
    let depth = |system: &mote_host::ActorSystem| {
        let tree = system.tree();
        tree.iter()
            .find(|i| i.address == busy)
            .map(|i| i.mailbox_depth)
    };
    // Busy means the spin has left the mailbox and is running.
    wait_until(|| depth(&system) == Some(0)).await;
    // From outside: 5 queued, the rest refused with an error.
    let mut refused = 0;
    for n in 0..10 {
        let body = mote_guest::encode(&Crash::Echo(n)).unwrap();
        match system.tell("/user/busy", "Crash", body) {
            Ok(()) => {}
            Err(SendError::MailboxFull { path }) => {
                assert_eq!(path, busy.to_string());
                refused += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(refused, 5);
    // An ask from outside is refused the same way, at once rather than at its deadline.
    let body = mote_guest::encode(&Crash::Echo(99)).unwrap();
    let asked = tokio::time::timeout(
        DEADLINE,
        system.ask("/user/busy", "Crash", body, Duration::from_secs(3600)),
    )
    .await
    .expect("an ask to a full mailbox answers before its deadline");
    assert!(
        matches!(asked, Err(AskError::Send(SendError::MailboxFull { ref path })) if *path == busy.to_string()),
        "{asked:?}"
    );
    // From an actor: each refused message is a dead letter naming the reason, sender and target.
    let sender = system
        .spawn("flood", "sequence", b"send /user/busy 0 20")
        .unwrap();
    // The flood sends everything in its `start`, then stops itself.
    terminated(&system, &sender).await;
    let mut full = 0;
    while let Ok(dl) = letters.try_recv() {
        assert_eq!(dl.reason, DeadLetterReason::MailboxFull);
        assert_eq!(dl.envelope.sender.as_ref(), Some(&sender));
        assert_eq!(dl.target, busy.to_string());
        full += 1;
    }
    assert_eq!(full, 20);
    assert_eq!(depth(&system), Some(5));
}

/// Stop reasons as the crasher reports them in its `stopping` hook.
const STOP_NORMAL: u64 = 0;
const STOP_FAILURE: u64 = 1;
const STOP_PARENT_FAILURE: u64 = 2;
const STOP_SHUTDOWN: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_and_resolve_see_the_live_tree_after_a_restart() {
    use mote_example_protocol::{Find, Found};
    let system = system_with(&["finder", "counter"]);
    system.spawn("f", "finder", b"3").unwrap();
    let mut decisions = system.subscribe_supervision();
    let before: Found = ask_as(&system, "/user/f", &Find::Children).await;
    let paths: Vec<&str> = before.0.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/user/f/c0", "/user/f/c1", "/user/f/c2"]);
    tell(&system, "/user/f", &Find::Crash);
    assert_eq!(
        next_decision(&mut decisions).await.directive,
        Directive::Restart
    );
    let after: Found = ask_as(&system, "/user/f", &Find::Children).await;
    assert_eq!(after.0.len(), 3);
    for ((p0, i0), (p1, i1)) in before.0.iter().zip(&after.0) {
        assert_eq!(p0, p1, "the restarted parent spawned the same names");
        assert_ne!(i0, i1, "as new incarnations: the old children were stopped");
    }
    let c1 = &after.0[1];
    for path in ["c1", "/user/f/c1"] {
        let resolved: Found = ask_as(&system, "/user/f", &Find::Resolve(path.into())).await;
        assert_eq!(resolved.0, vec![c1.clone()], "{path}");
        assert_eq!(
            system.lookup("/user/f/c1").map(|a| a.incarnation),
            Some(c1.1),
            "the registry agrees"
        );
    }
    let sibling: Found = ask_as(&system, "/user/f", &Find::Resolve("../f".into())).await;
    assert_eq!(sibling.0.len(), 1, "itself, by a relative path");
    for nobody in ["/user/nobody", "c9", "not a path", &"x".repeat(5000)] {
        let none: Found = ask_as(&system, "/user/f", &Find::Resolve(nobody.to_owned())).await;
        assert!(none.0.is_empty(), "{nobody:.20}");
    }
}
