//! Actors in other languages on the same WIT contract: a Python actor (componentize-py, the
//! `mote` SDK) keeps state, answers queries, forwards messages, and its
//! exceptions are supervised failures like a Rust actor's.

use mote_host::{Directive, Envelope};
use mote_tests::*;

fn json(text: &str) -> Vec<u8> {
    text.as_bytes().to_vec()
}

fn body(envelope: &Envelope) -> String {
    String::from_utf8(envelope.body.clone()).expect("JSON bodies are UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_actor_keeps_state_answers_queries_and_forwards() {
    let system = system_with(&["py_orders"]);
    let mut probe = system.probe("p").unwrap();
    system.spawn("orders", "py_orders", b"/system/p").unwrap();
    for (id, customer, amount) in [(1, "ann", 5), (2, "bob", 7), (3, "ann", 10)] {
        let order = format!(r#"{{"id":{id},"customer":"{customer}","amount":{amount}}}"#);
        system.tell("/user/orders", "order", json(&order)).unwrap();
    }
    let mut forwarded = Vec::new();
    for _ in 0..3 {
        let envelope = next(&mut probe).await;
        assert_eq!(envelope.kind, "order");
        assert_eq!(
            envelope.sender.as_ref().unwrap().path.as_str(),
            "/user/orders"
        );
        forwarded.push(body(&envelope));
    }
    assert_eq!(
        forwarded,
        vec![
            r#"{"id":1,"customer":"ann","amount":5,"total":5}"#,
            r#"{"id":2,"customer":"bob","amount":7,"total":7}"#,
            r#"{"id":3,"customer":"ann","amount":10,"total":15}"#,
        ]
    );
    let reply = system
        .ask("/user/orders", "totals", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(reply.kind, "totals");
    assert_eq!(body(&reply), r#"{"count":3,"totals":{"ann":15,"bob":7}}"#);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_exception_is_a_supervised_failure() {
    let system = system_with(&["py_orders"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("orders", "py_orders", b"").unwrap();
    let order = json(r#"{"id":1,"customer":"ann","amount":5}"#);
    system.tell("/user/orders", "order", order).unwrap();
    system.tell("/user/orders", "fail", Vec::new()).unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/orders");
    assert_eq!(decision.directive, Directive::Restart);
    assert!(
        decision
            .error
            .contains("RuntimeError: py_orders was asked to fail"),
        "{}",
        decision.error
    );
    // Restarted: a fresh instance, serving again (its in-memory state is gone).
    let reply = system
        .ask("/user/orders", "totals", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(body(&reply), r#"{"count":0,"totals":{}}"#);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_importing_wasi_http_is_refused_naming_the_import() {
    let system = system_with(&[]);
    let component = wat::parse_str(
        r#"(component
            (import "wasi:http/outgoing-handler@0.2.3" (instance))
        )"#,
    )
    .unwrap();
    let text = system
        .deploy("fetcher", &component)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("wasi:http/outgoing-handler@0.2.3") && text.contains("not granted"),
        "{text}"
    );
}

/// The next four reports of the order-desk sink: (total, gold, via-js, order id).
async fn sunk(probe: &mut mote_host::Probe) -> (u64, u64, u64, u64) {
    let mut values = Vec::new();
    for label in ["total", "gold", "via-js", "order"] {
        let report = next_report(probe).await;
        assert_eq!(report.label, label, "{report:?}");
        values.push(report.value);
    }
    (values[0], values[1], values[2], values[3])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_python_and_javascript_actors_form_one_supervised_pipeline() {
    let system = system_with(&["order_desk", "py_orders", "js_events"]);
    let mut probe = system.probe("p").unwrap();
    let mut decisions = system.subscribe_supervision();
    // Rust source -> Python (running totals) -> JS (tiers) -> Rust sink -> probe.
    system
        .spawn("sink", "order_desk", b"sink /system/p")
        .unwrap();
    system
        .spawn("js", "js_events", b"orders-in /user/sink")
        .unwrap();
    system.spawn("py", "py_orders", b"/user/js").unwrap();
    system
        .spawn("src", "order_desk", b"source /user/py 6")
        .unwrap();
    // Orders 1..=6 alternate bob (odd) and ann (even), amount 3 * id.
    let expected = [
        (3, 0, 1),
        (6, 0, 2),
        (12, 1, 3),
        (18, 1, 4),
        (27, 1, 5),
        (36, 1, 6),
    ];
    for (total, gold, id) in expected {
        assert_eq!(sunk(&mut probe).await, (total, gold, 1, id));
    }
    // The JS actor also transforms what is published to its topic.
    let published = br#"{"id":100,"customer":"cy","amount":4,"total":4}"#.to_vec();
    assert_eq!(system.publish("orders-in", "order", published), 1);
    assert_eq!(sunk(&mut probe).await, (4, 0, 1, 100));

    // A raising Python actor and a throwing JS actor are supervised failures, then serve again.
    system.tell("/user/py", "fail", Vec::new()).unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/py");
    assert_eq!(decision.directive, Directive::Restart);
    assert!(
        decision.error.contains("RuntimeError"),
        "{}",
        decision.error
    );
    system.tell("/user/js", "throw", Vec::new()).unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.child.path.as_str(), "/user/js");
    assert_eq!(decision.directive, Directive::Restart);
    assert!(
        decision
            .error
            .contains("Error: js_events was asked to throw"),
        "{}",
        decision.error
    );
    let order = br#"{"id":7,"customer":"ann","amount":11}"#.to_vec();
    system.tell("/user/py", "order", order).unwrap();
    // The restarted Python actor starts its totals afresh.
    assert_eq!(sunk(&mut probe).await, (11, 1, 1, 7));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_of_a_few_kilobytes_counts_answers_and_fails_like_the_others() {
    let size = std::fs::metadata(mote_test_programs::path("c_counter").unwrap())
        .unwrap()
        .len();
    assert!(size < 64 * 1024, "the C component is {size} bytes");
    let system = system_with(&["c_counter"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("c", "c_counter", b"").unwrap();
    system.tell("/user/c", "add", json("5")).unwrap();
    system.tell("/user/c", "add", json("37")).unwrap();
    let reply = system
        .ask("/user/c", "get", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        (reply.kind.as_str(), body(&reply).as_str()),
        ("total", "42")
    );
    system.tell("/user/c", "fail", Vec::new()).unwrap();
    let decision = next_decision(&mut decisions).await;
    assert_eq!(decision.directive, Directive::Restart);
    assert!(
        decision.error.contains("c_counter was asked to fail"),
        "{}",
        decision.error
    );
    let reply = system
        .ask("/user/c", "get", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(body(&reply), "0", "a fresh instance after the restart");
    system.shutdown().await.unwrap();
}

/// Serves one HTTP request on a loopback port with `body`; returns the URL.
fn serve_once(body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/greeting", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_http_is_refused_unless_granted_and_works_when_granted() {
    let system = system_with(&[]);
    let path = mote_test_programs::path("js_http_fetch").unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let err = system.deploy("fetch", &bytes).unwrap_err().to_string();
    assert!(
        err.contains("imports `wasi:http/") && err.contains("not granted"),
        "{err}"
    );
    let grants = vec!["wasi:http".to_owned()];
    system
        .deploy_granted("fetch", "0", &bytes, &grants)
        .unwrap();
    let info = system.module_list();
    assert_eq!(info[0].grants, grants);
    system.spawn("f", "fetch", b"").unwrap();
    let url = serve_once("hello from the host side");
    let request = format!(r#"{{"url":"{url}"}}"#).into_bytes();
    let reply = system
        .ask("/user/f", "fetch", request, DEADLINE)
        .await
        .unwrap();
    assert_eq!(reply.kind, "fetched");
    assert_eq!(
        body(&reply),
        r#"{"status":200,"body":"hello from the host side"}"#
    );
    // Only `wasi:http` can be granted.
    let bad = system.deploy_granted("x", "0", &bytes, &["wasi:sockets".to_owned()]);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("grantable: wasi:http")
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_actors_reject_malformed_bodies_without_failing() {
    let system = system_with(&["py_orders", "js_events"]);
    let mut letters = system.subscribe_dead_letters();
    let mut decisions = system.subscribe_supervision();
    let py = system.spawn("py", "py_orders", b"").unwrap();
    let js = system.spawn("js", "js_events", b"").unwrap();
    let order = json(r#"{"id":1,"customer":"ann","amount":5}"#);
    system.tell("/user/py", "order", order.clone()).unwrap();
    system.tell("/user/js", "order", order).unwrap();
    for i in 0..100u32 {
        for to in ["/user/py", "/user/js"] {
            let garbage = format!("{{not json {i}").into_bytes();
            system.tell(to, "order", garbage).unwrap();
        }
    }
    let mut rejected = 0;
    while rejected < 200 {
        let letter = tokio::time::timeout(DEADLINE, letters.recv())
            .await
            .expect("a dead letter per malformed body")
            .unwrap();
        assert_eq!(letter.reason, mote_host::DeadLetterReason::Rejected);
        rejected += 1;
    }
    let totals = system
        .ask("/user/py", "totals", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(body(&totals), r#"{"count":1,"totals":{"ann":5}}"#);
    let stats = system
        .ask("/user/js", "stats", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(body(&stats), r#"{"transformed":1}"#);
    assert_eq!(system.lookup("/user/py"), Some(py), "the same incarnation");
    assert_eq!(system.lookup("/user/js"), Some(js), "the same incarnation");
    assert!(decisions.try_recv().is_err(), "no failure was reported");
}
