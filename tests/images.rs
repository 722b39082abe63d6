//! Copy-on-write memory images: modules with a big initial heap (the Python and JavaScript
//! interpreters) map it instead of copying it into every instance, small modules stay on the
//! arenas, and an instance on an image is as isolated and as bounded as one on the arena.

use mote_example_protocol::{Counter, Crash};
use mote_host::{FailureKind, HostConfig, MemoryStrategy};
use mote_tests::*;

fn strategy(system: &mote_host::ActorSystem, module: &str) -> Option<MemoryStrategy> {
    system
        .module_list()
        .into_iter()
        .find(|m| m.name == module)
        .map(|m| m.memory)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interpreters_get_images_and_small_modules_the_arena() {
    let system = system_with(&["py_orders", "js_events", "counter", "c_counter"]);
    assert_eq!(strategy(&system, "py_orders"), Some(MemoryStrategy::Image));
    assert_eq!(strategy(&system, "js_events"), Some(MemoryStrategy::Image));
    assert_eq!(strategy(&system, "counter"), Some(MemoryStrategy::Arena));
    assert_eq!(strategy(&system, "c_counter"), Some(MemoryStrategy::Arena));
    // Both kinds run side by side in one host.
    system.spawn("n", "counter", b"").unwrap();
    tell(&system, "/user/n", &Counter::Add(4));
    let value: Counter = ask_as(&system, "/user/n", &Counter::Get).await;
    assert_eq!(value, Counter::Value(4));
    system.spawn("js", "js_events", b"").unwrap();
    let stats = system
        .ask("/user/js", "stats", Vec::new(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(stats.kind, "stats");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_instance_writes_only_its_own_copy_of_the_image() {
    let system = system_with(&["py_orders"]);
    system.spawn("a", "py_orders", b"").unwrap();
    system.spawn("b", "py_orders", b"").unwrap();
    for id in 0..3 {
        let order = format!(r#"{{"id":{id},"customer":"ann","amount":5}}"#);
        system.tell("/user/a", "order", order.into_bytes()).unwrap();
    }
    let totals = |path: &'static str| {
        let system = &system;
        async move {
            let reply = system
                .ask(path, "totals", Vec::new(), DEADLINE)
                .await
                .unwrap();
            String::from_utf8(reply.body).unwrap()
        }
    };
    assert_eq!(
        totals("/user/a").await,
        r#"{"count":3,"totals":{"ann":15}}"#
    );
    assert_eq!(totals("/user/b").await, r#"{"count":0,"totals":{}}"#);
    // An instance made after others wrote starts from the pristine image.
    system.spawn("c", "py_orders", b"").unwrap();
    assert_eq!(totals("/user/c").await, r#"{"count":0,"totals":{}}"#);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_on_an_image_hits_the_limit_and_harms_no_neighbour() {
    let mut config = HostConfig::new();
    config.image_threshold(0).memory_limit(32 << 20);
    let system = system_configured(config, &["crasher"]);
    assert_eq!(strategy(&system, "crasher"), Some(MemoryStrategy::Image));
    let mut decisions = system.subscribe_supervision();
    system.spawn("a", "crasher", b"").unwrap();
    system.spawn("b", "crasher", b"").unwrap();
    for n in 1..=3 {
        let echo: Crash = ask_as(&system, "/user/a", &Crash::Bump).await;
        assert_eq!(echo, Crash::Echo(n));
    }
    let echo: Crash = ask_as(&system, "/user/b", &Crash::Bump).await;
    assert_eq!(echo, Crash::Echo(1), "b's state is its own");
    tell(&system, "/user/a", &Crash::Alloc(64));
    let decision = next_decision(&mut decisions).await;
    assert_eq!(
        decision.kind,
        FailureKind::MemoryLimit,
        "{}",
        decision.error
    );
    // The neighbour kept its state; the bomber restarted from the image, fresh.
    let echo: Crash = ask_as(&system, "/user/b", &Crash::Bump).await;
    assert_eq!(echo, Crash::Echo(2));
    let echo: Crash = ask_as(&system, "/user/a", &Crash::Bump).await;
    assert_eq!(echo, Crash::Echo(1));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_on_an_image_is_preempted_and_hits_the_cpu_deadline() {
    // The epoch ticker ticks the image engine too: without it this loop would never yield.
    let mut config = HostConfig::new();
    config
        .image_threshold(0)
        .cpu_deadline(std::time::Duration::from_millis(300));
    let system = system_configured(config, &["crasher"]);
    let mut decisions = system.subscribe_supervision();
    system.spawn("spin", "crasher", b"").unwrap();
    system.spawn("other", "crasher", b"").unwrap();
    tell(&system, "/user/spin", &Crash::Spin);
    // While it spins, its neighbour on the same engine answers.
    let echo: Crash = ask_as(&system, "/user/other", &Crash::Bump).await;
    assert_eq!(echo, Crash::Echo(1));
    let decision = next_decision(&mut decisions).await;
    assert_eq!(
        decision.kind,
        FailureKind::CpuDeadline,
        "{}",
        decision.error
    );
    system.shutdown().await.unwrap();
}
