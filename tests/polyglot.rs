//! Actors in other languages on the same WIT contract: a Python actor (componentize-py, the
//! `mote_actor` helper library) keeps state, answers queries, forwards messages, and its
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
