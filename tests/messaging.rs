//! Timers, pub/sub, dead-letter subscriptions, ask and groups, from actors and from outside.

use std::time::Duration;

use mote_example_protocol::{Asking, Counter, Crash, PingPong, Report, Seq, Timer};
use mote_guest::Message;
use mote_host::{AskError, HostConfig};
use mote_tests::*;

/// Everything that arrives at the probe within `quiet`.
async fn drain(probe: &mut mote_host::Probe, quiet: Duration) -> Vec<Report> {
    let mut got = Vec::new();
    while let Some(envelope) = probe.recv_timeout(quiet).await {
        if let Ok(r) = mote_guest::decode::<Report>(&envelope.kind, &envelope.body) {
            got.push(r);
        }
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_and_periodic_timers_fire_on_time_and_stop_when_cancelled() {
    scenarios::timers_fire_on_time_and_stop_when_cancelled("ticker", Speech::Postcard).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_timer_fires_after_its_actor_stopped() {
    let system = system_with(&["ticker"]);
    let mut probe = system.probe("p").unwrap();
    let ticker = system.spawn("t", "ticker", b"/system/p").unwrap();
    // A periodic timer aimed straight at the probe, not through the ticker's mailbox.
    tell_from(
        &probe,
        "/user/t",
        &Timer::EveryToSender {
            period_ms: 20,
            tag: 9,
        },
    );
    for _ in 0..3 {
        assert_eq!(report_labelled(&mut probe, "tick").await.value, 9);
    }
    system.stop("/user/t");
    terminated(&system, &ticker).await;
    drain(&mut probe, Duration::ZERO).await;
    let after = drain(&mut probe, Duration::from_millis(200)).await;
    assert!(after.is_empty(), "ticks after stop: {after:?}");
    assert_eq!(system.pending_timers(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_timers_fire_and_cancel() {
    let system = system_with(&[]);
    let mut probe = system.probe("p").unwrap();
    let body = mote_guest::encode(&Report {
        from: "x".into(),
        label: "timer".into(),
        value: 5,
    })
    .unwrap();
    system
        .schedule(
            "/system/p",
            Report::KIND,
            body.clone(),
            Duration::from_millis(10),
            None,
        )
        .unwrap();
    assert_eq!(report_labelled(&mut probe, "timer").await.value, 5);
    let id = system
        .schedule(
            "/system/p",
            Report::KIND,
            body,
            Duration::from_secs(60),
            None,
        )
        .unwrap();
    assert!(system.cancel_timer(id));
    assert!(!system.cancel_timer(id));
    assert_eq!(system.pending_timers(), 0);
}

/// Spawns `n` subscribers of `topic` and waits until each has started (and so subscribed).
async fn subscribers(
    system: &mote_host::ActorSystem,
    probe: &mut mote_host::Probe,
    topic: &str,
    n: usize,
) {
    for i in 0..n {
        system
            .spawn(
                &format!("s{i}"),
                "subscriber",
                format!("{topic} /system/p").as_bytes(),
            )
            .unwrap();
        tell_from(probe, &format!("/user/s{i}"), &Seq { stream: 0, n: 999 });
    }
    for _ in 0..n {
        let r = next_report(probe).await;
        assert_eq!((r.label.as_str(), r.value), ("/system/p", 999));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_sub_fans_out_in_order_with_the_publisher_as_sender() {
    let system = system_with(&["subscriber", "publisher"]);
    let mut probe = system.probe("p").unwrap();
    subscribers(&system, &mut probe, "news", 20).await;
    let mut outside = system.subscribe("news").unwrap();
    system
        .spawn("pub", "publisher", b"news 100 /system/p")
        .unwrap();
    let mut per_subscriber: std::collections::HashMap<String, Vec<u64>> = Default::default();
    let mut published = None;
    while per_subscriber.values().map(Vec::len).sum::<usize>() < 2000 || published.is_none() {
        let r = next_report(&mut probe).await;
        if r.label == "published" {
            published = Some(r.value);
            continue;
        }
        assert_eq!(r.label, "/user/pub", "the publisher is the sender");
        per_subscriber.entry(r.from).or_default().push(r.value);
    }
    // 20 actors plus the outside subscription.
    assert_eq!(published, Some(21 * 100));
    assert_eq!(per_subscriber.len(), 20);
    for (who, seen) in &per_subscriber {
        assert_eq!(seen, &(0..100).collect::<Vec<u64>>(), "{who} out of order");
    }
    for n in 0..100 {
        let envelope = next(&mut outside).await;
        assert_eq!(
            envelope.sender.as_ref().map(|s| s.path.as_str()),
            Some("/user/pub")
        );
        assert_eq!(
            mote_guest::decode::<Seq>(&envelope.kind, &envelope.body)
                .unwrap()
                .n,
            n
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_subscriber_is_removed() {
    let system = system_with(&["subscriber"]);
    let mut probe = system.probe("p").unwrap();
    subscribers(&system, &mut probe, "t", 3).await;
    let body = mote_guest::encode(&Seq { stream: 0, n: 1 }).unwrap();
    assert_eq!(system.publish("t", Seq::KIND, body.clone()), 3);
    let gone = system.lookup("/user/s1").unwrap();
    system.stop("/user/s1");
    terminated(&system, &gone).await;
    assert_eq!(system.publish("t", Seq::KIND, body.clone()), 2);
    let outside = system.subscribe("t").unwrap();
    assert_eq!(system.publish("t", Seq::KIND, body.clone()), 3);
    drop(outside);
    assert_eq!(system.publish("t", Seq::KIND, body), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_subscribers_see_sender_and_target() {
    let system = system_with(&["deadwatch", "pingpong"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("dw", "deadwatch", b"/system/p").unwrap();
    // Subscribed once its start has run: a publish to the topic then reaches it.
    wait_until(|| system.publish("/system/deadletters", "noop", Vec::new()) == 1).await;
    let lonely = system
        .spawn("lonely", "pingpong", b"ping /user/ghost 1")
        .unwrap();
    let r = next_report(&mut probe).await;
    assert_eq!(r.from, "/user/ghost");
    assert_eq!(r.label, lonely.path.as_str());
    assert_eq!(
        r.value,
        mote_guest::encode(&PingPong::Ping(1)).unwrap().len() as u64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_resolves_exactly_once_reply_first() {
    let system = system_with(&["asker", "counter"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("asker", "asker", b"/system/p").unwrap();
    let counter = system.spawn("c", "counter", b"42").unwrap();
    let ask = Asking::Ask {
        path: counter.path.to_string(),
        incarnation: counter.incarnation,
        timeout_ms: 300,
        get: true,
    };
    tell(&system, "/user/asker", &ask);
    assert_eq!(report_labelled(&mut probe, "answer").await.value, 42);
    // Well past the deadline: no timeout follows the answer.
    let after = drain(&mut probe, Duration::from_millis(900)).await;
    assert!(after.is_empty(), "{after:?}");
    assert_eq!(system.late_replies(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_resolves_exactly_once_timeout_first_and_the_late_reply_is_dropped() {
    let system = system_with(&["asker", "ticker"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("asker", "asker", b"/system/p").unwrap();
    let ticker = system.spawn("t", "ticker", b"/system/p").unwrap();
    // The ticker answers after 3x the timeout.
    let ask = Asking::Ask {
        path: ticker.path.to_string(),
        incarnation: ticker.incarnation,
        timeout_ms: 100,
        get: false,
    };
    tell(&system, "/user/asker", &ask);
    report_labelled(&mut probe, "timeout").await;
    wait_until(|| system.late_replies() == 1).await;
    let after = drain(&mut probe, Duration::from_millis(100)).await;
    assert!(after.iter().all(|r| r.label != "answer"), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_from_outside() {
    let system = system_with(&["counter", "ticker"]);
    system.spawn("c", "counter", b"7").unwrap();
    system.spawn("t", "ticker", b"/system/nobody").unwrap();
    let body = mote_guest::encode(&Counter::Get).unwrap();
    let reply = system
        .ask("/user/c", Counter::KIND, body, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        mote_guest::decode::<Counter>(&reply.kind, &reply.body).unwrap(),
        Counter::Value(7)
    );
    let late = mote_guest::encode(&Timer::ReplyAfter {
        delay_ms: 300,
        tag: 1,
    })
    .unwrap();
    let err = system
        .ask("/user/t", Timer::KIND, late, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(err, AskError::Timeout(Duration::from_millis(50)));
    wait_until(|| system.late_replies() == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_sends_pick_the_least_loaded_member_and_broadcast_reaches_all() {
    let mut config = HostConfig::new();
    config.cpu_deadline(Duration::from_secs(30));
    let system = system_configured(config, &["crasher"]);
    let mut probe = system.probe("p").unwrap();
    for name in ["a", "b", "c"] {
        system.spawn(name, "crasher", b"group:g").unwrap();
    }
    // All three joined once their starts ran.
    wait_until(|| system.broadcast_group("g", "noop", Vec::new()) == 3).await;
    let depth = |path: &str| {
        system
            .tree()
            .iter()
            .find(|i| i.address.path.as_str() == path)
            .map(|i| i.mailbox_depth)
    };
    // a and b are busy with a backlog; c is idle.
    for busy in ["/user/a", "/user/b"] {
        tell(&system, busy, &Crash::Spin);
        wait_until(|| depth(busy) == Some(0)).await;
        for _ in 0..10 {
            system.tell(busy, "noop", Vec::new()).unwrap();
        }
    }
    for _ in 0..5 {
        assert!(probe.tell_group("g", Crash::KIND, mote_guest::encode(&Crash::Bump).unwrap()));
    }
    for expected in 1..=5 {
        let envelope = next(&mut probe).await;
        assert_eq!(
            envelope.sender.as_ref().map(|s| s.path.as_str()),
            Some("/user/c")
        );
        assert_eq!(
            mote_guest::decode::<Crash>(&envelope.kind, &envelope.body).unwrap(),
            Crash::Echo(expected)
        );
    }
    assert_eq!(depth("/user/a"), Some(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_through_a_three_stage_chain_answers_an_outside_ask() {
    let system = system_with(&["forwarder"]);
    system.spawn("f3", "forwarder", b"3").unwrap();
    system.spawn("f2", "forwarder", b"2 /user/f3").unwrap();
    system.spawn("f1", "forwarder", b"1 ../f2").unwrap();
    let body = mote_guest::encode(&Counter::Get).unwrap();
    let reply = system
        .ask("/user/f1", Counter::KIND, body, DEADLINE)
        .await
        .expect("the last stage answers the asker");
    let value: Counter = mote_guest::decode(&reply.kind, &reply.body).unwrap();
    assert_eq!(value, Counter::Value(3));
    assert_eq!(
        reply.sender.expect("a sender").path.as_str(),
        "/user/f3",
        "the answer comes straight from the last stage"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_reaches_and_resolves_to_its_actor_until_it_stops() {
    use mote_example_protocol::{Find, Found};
    let system = system_with(&["finder", "counter"]);
    let f = system.spawn("f", "finder", b"0").unwrap();
    system.spawn("g", "finder", b"0").unwrap();
    let taken: Found = ask_as(&system, "/user/f", &Find::Alias("orders".into())).await;
    assert_eq!(taken.0, vec![("/system/alias/orders".to_owned(), 0)]);
    // Reached by its alias: the reply comes from the actor itself.
    let body = mote_guest::encode(&Find::Children).unwrap();
    let reply = system
        .ask("/system/alias/orders", Find::KIND, body, DEADLINE)
        .await
        .unwrap();
    assert_eq!(reply.sender.as_ref(), Some(&f));
    // Resolved like a path, to the actor's own address.
    let resolved: Found = ask_as(
        &system,
        "/user/g",
        &Find::Resolve("/system/alias/orders".into()),
    )
    .await;
    assert_eq!(resolved.0, vec![("/user/f".to_owned(), f.incarnation)]);
    // First come, first served; not listed as an actor of its own.
    let refused: Found = ask_as(&system, "/user/g", &Find::Alias("orders".into())).await;
    assert!(refused.0.is_empty());
    assert!(
        system
            .tree()
            .iter()
            .all(|a| !a.address.path.as_str().starts_with("/system/alias")),
        "aliases are not actors"
    );
    // Gone with its actor, and free again.
    assert!(system.stop("/user/f"));
    terminated(&system, &f).await;
    wait_until(|| system.lookup("/system/alias/orders").is_none()).await;
    let retaken: Found = ask_as(&system, "/user/g", &Find::Alias("orders".into())).await;
    assert_eq!(retaken.0.len(), 1);
}
