//! The C SDK (`example-actors/c/mote.h`): the C ports of the Rust example actors, built on the
//! bindings wit-bindgen's C generator writes, speak the example protocol in JSON and pass the
//! scenarios their Rust, Python and JavaScript twins pass; `c_features` passes the features
//! scenario, and `c_extras` covers the rest of the contract (spawning with limits, pausing a
//! child, peeking into the stash, HTTP call-outs).

use mote_host::ActorSystem;
use mote_tests::*;

/// The text body of the reply to `kind` asked of `path`.
async fn ask_text(system: &ActorSystem, path: &str, kind: &str) -> String {
    let reply = system.ask(path, kind, Vec::new(), DEADLINE).await.unwrap();
    String::from_utf8(reply.body).unwrap()
}

/// The next message the probe receives, as (kind, text body).
async fn next_text(probe: &mut mote_host::Probe) -> (String, String) {
    let envelope = next(probe).await;
    (envelope.kind, String::from_utf8(envelope.body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_journal_recovers_after_a_host_restart() {
    scenarios::journal_recovers_after_a_host_restart("c_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_c_journal_recovers_its_committed_state() {
    scenarios::a_restarted_journal_recovers_its_committed_state("c_journal", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_timers_fire_on_time_and_stop_when_cancelled() {
    scenarios::timers_fire_on_time_and_stop_when_cancelled("c_ticker", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_supervise_hook_decides_by_the_error() {
    scenarios::supervise_decides_by_error("c_supervisor", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_is_upgraded_with_its_state_refused_by_a_bad_version_and_rolled_back() {
    scenarios::upgrade_keeps_state_refuses_a_bad_version_and_rolls_back(
        "c_versioned_v",
        Speech::Json,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passivated_c_entity_reactivates_with_its_state() {
    scenarios::a_passivated_entity_reactivates_with_its_state("c_entity", Speech::Json).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_entity_state_survives_a_host_restart_and_retire_deletes_it() {
    scenarios::entity_state_survives_a_host_restart_and_retire_deletes_it("c_entity", Speech::Json)
        .await;
}

/// `c_features` on the C SDK's helpers: asks, topics, groups, behaviours and the stash,
/// reminders, forwarding, the urgent lane, naming, delivery modes, lookup and the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_features_work_through_mote() {
    scenarios::features_work_through_mote("c_features").await;
}

/// `c_extras` granted `wasi:http`, the same bytes as `plain` (not granted), and `c_counter`.
fn extras_system() -> ActorSystem {
    let system = system_with(&["c_counter"]);
    let bytes = std::fs::read(mote_test_programs::path("c_extras").unwrap()).unwrap();
    system
        .deploy_granted("c_extras", "0", &bytes, &["wasi:http".to_owned()])
        .unwrap();
    system.deploy("plain", &bytes).unwrap();
    system
}

/// Messages queued at `path` now.
fn depth(system: &ActorSystem, path: &str) -> Option<usize> {
    system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == path)
        .map(|a| a.mailbox_depth)
}

/// Tells `kind` with a text body from outside.
fn tell_text(system: &ActorSystem, path: &str, kind: &str, body: &str) {
    system.tell(path, kind, body.as_bytes().to_vec()).unwrap();
}

/// `mote_spawn_with` gives the child its own mailbox bound; `mote_deactivate` pauses it (its
/// messages queue, up to that bound) and `mote_activate` lets it handle them. The parent sees
/// its child (`mote_children`), no parent of its own (`mote_parent`), its persistence id as
/// set; `mote_spawn_on` names a node this host does not know and is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_parent_spawns_with_limits_pauses_its_child_and_resumes_it() {
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "spawn", "2");
    assert_eq!(
        next_text(&mut probe).await,
        ("spawned".into(), "/user/x/w".into())
    );
    tell_text(&system, "/user/x", "pause", "");
    assert_eq!(next_text(&mut probe).await, ("paused".into(), "1".into()));
    tell_text(&system, "/user/x/w", "add", "5");
    tell_text(&system, "/user/x/w", "add", "6");
    // Paused before the adds were sent: both wait, and the mailbox of 2 refuses a third.
    assert_eq!(depth(&system, "/user/x/w"), Some(2));
    assert!(
        matches!(
            system.tell("/user/x/w", "add", b"7".to_vec()),
            Err(mote_host::SendError::MailboxFull { .. })
        ),
        "the child's own mailbox capacity"
    );
    tell_text(&system, "/user/x", "resume", "");
    assert_eq!(next_text(&mut probe).await, ("resumed".into(), "1".into()));
    // An ask now could find the mailbox still full (a dead letter): wait until it drains.
    wait_until(|| depth(&system, "/user/x/w") == Some(0)).await;
    assert_eq!(ask_text(&system, "/user/x/w", "get").await, "11");

    // A root under /user has no parent; the persistence id is scoped to the host's owner.
    tell_text(&system, "/user/x", "inspect", "");
    let (kind, text) = next_text(&mut probe).await;
    assert_eq!(kind, "inspected");
    let fields: Vec<&str> = text.split(' ').collect();
    assert_eq!(fields.len(), 4, "{text}");
    assert_eq!((fields[0], fields[1], fields[3]), ("-", "1", "1"), "{text}");
    let (scope, pid) = fields[2].split_once(':').expect("<scope>:<id>");
    assert_eq!(pid, "/user/x");
    tell_text(&system, "/user/x", "inspect", "mine");
    assert_eq!(
        next_text(&mut probe).await,
        ("inspected".into(), format!("- 1 {scope}:mine 1"))
    );

    tell_text(&system, "/user/x", "spawn-on", "elsewhere");
    let (kind, why) = next_text(&mut probe).await;
    assert_eq!(kind, "spawned-on");
    assert!(why.starts_with("instantiation failed"), "{why}");
    system.shutdown().await.unwrap();
}

/// `mote_peek` and `mote_take` find the oldest stashed message of a kind (or of any kind);
/// a peek leaves it in the stash, a take removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_peeks_into_and_takes_from_its_stash_by_kind() {
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "hold", "a");
    tell_text(&system, "/user/x", "keep", "b");
    tell_text(&system, "/user/x", "hold", "c");
    let steps = [
        ("peek", "keep", "peeked", "keep b 3"),
        ("peek", "", "peeked", "hold a 3"),
        ("take", "hold", "took", "hold a 2"),
        ("take", "hold", "took", "hold c 1"),
        ("take", "hold", "took", "none 1"),
        ("peek", "", "peeked", "keep b 1"),
        ("take", "", "took", "keep b 0"),
        ("peek", "", "peeked", "none 0"),
    ];
    for (kind, body, label, expected) in steps {
        tell_text(&system, "/user/x", kind, body);
        assert_eq!(
            next_text(&mut probe).await,
            (label.into(), expected.into()),
            "{kind} {body:?}"
        );
    }
    system.shutdown().await.unwrap();
}

/// `mote_http_request` starts a GET; `mote_is_http_response` recognises its outcome message,
/// `mote_http_response` takes the response once; a module without the grant is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_actor_makes_an_http_call_out_and_takes_its_response_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hi", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request ended early");
            head.extend_from_slice(&buf[..n]);
        }
        let response = "HTTP/1.1 200 OK\r\nx-test: yes\r\ncontent-length: 8\r\n\
                        connection: close\r\n\r\nhello, c";
        stream.write_all(response.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    let system = extras_system();
    let mut probe = system.probe("p").unwrap();
    system.spawn("x", "c_extras", b"/system/p").unwrap();
    tell_text(&system, "/user/x", "fetch", &url);
    let (kind, id) = next_text(&mut probe).await;
    assert_eq!(kind, "fetching", "{id}");
    assert_eq!(
        next_text(&mut probe).await,
        ("fetched".into(), format!("{id} 200 yes hello, c"))
    );
    assert_eq!(next_text(&mut probe).await, ("again".into(), "none".into()));
    let head = server.await.unwrap();
    assert!(head.starts_with("GET /hi HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-from: c\r\n"),
        "{head}"
    );

    system.spawn("y", "plain", b"/system/p").unwrap();
    tell_text(&system, "/user/y", "fetch", &url);
    assert_eq!(
        next_text(&mut probe).await,
        ("refused".into(), "not granted wasi:http".into())
    );
    system.shutdown().await.unwrap();
}
