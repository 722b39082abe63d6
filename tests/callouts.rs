//! HTTP call-outs: a request an actor starts and whose outcome comes back later as a message,
//! while the actor goes on handling others. Each test runs the `fetcher` example against a
//! loopback HTTP server of its own that holds its responses until the test releases them.

use std::sync::Arc;
use std::time::Duration;

use mote_example_protocol::{Fetch, Fetched};
use mote_host::{ActorSystem, HostConfig, Quota, Quotas};
use mote_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

/// How the test server answers.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: Vec<u8>,
    /// Whether to send `content-length` (else the body ends when the connection closes).
    length: bool,
    /// Whether to wait for [`Server::release`] before answering.
    hold: bool,
}

impl Reply {
    fn held(status: u16, body: &[u8]) -> Reply {
        Reply {
            status,
            body: body.to_vec(),
            length: true,
            hold: true,
        }
    }

    fn now(status: u16, body: &[u8]) -> Reply {
        Reply {
            hold: false,
            ..Reply::held(status, body)
        }
    }
}

/// A loopback HTTP/1.1 server: each request's head is reported, then answered with `Reply`;
/// a held request whose client hangs up is reported as `closed`.
struct Server {
    url: String,
    requests: mpsc::UnboundedReceiver<String>,
    gate: Arc<Semaphore>,
}

impl Server {
    async fn start(reply: Reply) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, requests) = mpsc::unbounded_channel();
        let gate = Arc::new(Semaphore::new(0));
        let held = gate.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (tx, gate, reply) = (tx.clone(), held.clone(), reply.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                    if reply.hold {
                        tokio::select! {
                            permit = gate.acquire() => match permit {
                                Ok(permit) => permit.forget(),
                                Err(_) => return,
                            },
                            // The client gave up (its call-out was aborted or timed out).
                            _ = stream.read(&mut buf) => {
                                let _ = tx.send("closed".to_owned());
                                return;
                            }
                        }
                    }
                    let mut response = format!("HTTP/1.1 {} X\r\nx-test: yes\r\n", reply.status);
                    if reply.length {
                        response.push_str(&format!("content-length: {}\r\n", reply.body.len()));
                    }
                    response.push_str("connection: close\r\n\r\n");
                    let mut bytes = response.into_bytes();
                    bytes.extend_from_slice(&reply.body);
                    let _ = stream.write_all(&bytes).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Server {
            url,
            requests,
            gate,
        }
    }

    /// The head of the next request, or a panic after [`DEADLINE`].
    async fn next_request(&mut self) -> String {
        tokio::time::timeout(DEADLINE, self.requests.recv())
            .await
            .expect("a request within the deadline")
            .expect("the server runs")
    }

    /// Lets `n` held requests be answered.
    fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }
}

/// A system with the fetcher deployed as `fetcher`, granted `wasi:http`, and as `plain`, not.
fn system(config: HostConfig) -> ActorSystem {
    let system = system_configured(config, &[]);
    let bytes = std::fs::read(mote_test_programs::path("fetcher").unwrap()).unwrap();
    system
        .deploy_granted("fetcher", "0", &bytes, &["wasi:http".to_owned()])
        .unwrap();
    system.deploy("plain", &bytes).unwrap();
    system
}

fn quotas(quotas: Quotas) -> HostConfig {
    let mut config = HostConfig::new();
    config.quotas(quotas);
    config
}

/// A fetcher at `/user/f` reporting outcomes to a probe.
fn fetcher(system: &ActorSystem, module: &str) -> mote_host::Probe {
    let probe = system.probe("outcomes").unwrap();
    system
        .spawn("f", module, probe.address().path.as_str().as_bytes())
        .unwrap();
    probe
}

async fn get(system: &ActorSystem, url: &str, timeout_ms: u64) -> Fetched {
    let get = Fetch::Get {
        url: url.to_owned(),
        timeout_ms,
    };
    ask_as(system, "/user/f", &get).await
}

fn started(reply: Fetched) -> u64 {
    match reply {
        Fetched::Started(id) => id,
        other => panic!("not started: {other:?}"),
    }
}

/// The fetcher's refusals of `quota`.
fn refusals(system: &ActorSystem, quota: Quota) -> u64 {
    system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == "/user/f")
        .and_then(|a| a.refusals.into_iter().find(|(q, _)| *q == quota))
        .map_or(0, |(_, n)| n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_arrives_as_a_message_while_the_actor_answers_others() {
    let system = system(HostConfig::new());
    let mut outcomes = fetcher(&system, "fetcher");
    let mut server = Server::start(Reply::held(201, b"hello, actor")).await;
    let id = started(get(&system, &format!("{}/hello", server.url), 0).await);
    let head = server.next_request().await;
    assert!(head.starts_with("GET /hello HTTP/1.1\r\n"), "{head}");
    assert!(head.to_ascii_lowercase().contains("accept: */*"), "{head}");
    // The call-out is in flight (the server holds it): the actor keeps answering.
    for n in 0..20 {
        let pong: Fetched = ask_as(&system, "/user/f", &Fetch::Ping(n)).await;
        assert_eq!(pong, Fetched::Pong(n));
    }
    assert!(
        outcomes.recv_timeout(Duration::ZERO).await.is_none(),
        "no outcome before the response"
    );
    server.release(1);
    let outcome: Fetched = next_as(&mut outcomes).await;
    assert_eq!(
        outcome,
        Fetched::Response {
            id,
            status: 201,
            body: b"hello, actor".to_vec()
        }
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_outs_are_refused_to_a_module_not_granted_wasi_http() {
    let system = system(HostConfig::new());
    let _outcomes = fetcher(&system, "plain");
    let server = Server::start(Reply::now(200, b"")).await;
    let reply = get(&system, &server.url, 0).await;
    assert_eq!(reply, Fetched::Refused("CalloutError::NotGranted".into()));
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_call_outs_stop_at_the_quota_until_their_outcomes_are_taken() {
    let system = system(quotas(Quotas {
        callouts: 3,
        ..Quotas::default()
    }));
    let mut outcomes = fetcher(&system, "fetcher");
    let mut server = Server::start(Reply::held(200, b"ok")).await;
    let burst = Fetch::Burst {
        url: server.url.clone(),
        n: 5,
    };
    let reply: Fetched = ask_as(&system, "/user/f", &burst).await;
    assert_eq!(
        reply,
        Fetched::Burst {
            started: 3,
            refused: 2,
            why: "CalloutError::TooMany(3)".into()
        }
    );
    assert_eq!(refusals(&system, Quota::Callouts), 2);
    for _ in 0..3 {
        server.next_request().await;
    }
    server.release(3);
    for _ in 0..3 {
        let outcome: Fetched = next_as(&mut outcomes).await;
        assert!(
            matches!(outcome, Fetched::Response { status: 200, .. }),
            "{outcome:?}"
        );
    }
    // Taken outcomes free the quota.
    server.release(1);
    started(get(&system, &server.url, 0).await);
    let outcome: Fetched = next_as(&mut outcomes).await;
    assert!(matches!(outcome, Fetched::Response { .. }), "{outcome:?}");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_http_urls_and_bounded_timeouts_are_accepted() {
    let system = system(HostConfig::new());
    let _outcomes = fetcher(&system, "fetcher");
    for url in [
        "ftp://127.0.0.1/",
        "file:///etc/passwd",
        "/relative",
        "no url",
    ] {
        let reply = get(&system, url, 0).await;
        assert!(
            matches!(&reply, Fetched::Refused(why) if why.starts_with("CalloutError::InvalidUrl")),
            "{url}: {reply:?}"
        );
    }
    let reply = get(&system, "http://127.0.0.1:9/", 3_600_000).await;
    assert!(
        matches!(&reply, Fetched::Refused(why) if why.starts_with("CalloutError::InvalidRequest")),
        "{reply:?}"
    );
    assert_eq!(refusals(&system, Quota::CalloutTimeout), 1);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_or_a_timeout_is_an_error_message_not_a_failure() {
    let system = system(HostConfig::new());
    let mut outcomes = fetcher(&system, "fetcher");
    let incarnation = system.lookup("/user/f").unwrap().incarnation;
    // A port nobody listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let id = started(get(&system, &format!("http://{closed}/"), 0).await);
    match next_as::<Fetched>(&mut outcomes).await {
        Fetched::Failed { id: failed, error } => {
            assert_eq!(failed, id);
            assert!(error.starts_with("CalloutError::Failed("), "{error}");
        }
        other => panic!("{other:?}"),
    }
    // A server that never answers, within a short timeout.
    let mut server = Server::start(Reply::held(200, b"never")).await;
    let id = started(get(&system, &server.url, 200).await);
    server.next_request().await;
    assert_eq!(
        next_as::<Fetched>(&mut outcomes).await,
        Fetched::Failed {
            id,
            error: "CalloutError::Timeout".into()
        }
    );
    let pong: Fetched = ask_as(&system, "/user/f", &Fetch::Ping(7)).await;
    assert_eq!(pong, Fetched::Pong(7));
    assert_eq!(
        system.lookup("/user/f").unwrap().incarnation,
        incarnation,
        "the same actor, never failed"
    );
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_body_past_the_quota_is_too_large() {
    let system = system(quotas(Quotas {
        max_callout_response_bytes: 1024,
        ..Quotas::default()
    }));
    let mut outcomes = fetcher(&system, "fetcher");
    let big = vec![b'x'; 4096];
    // Announced by its content-length, then streamed without one.
    for length in [true, false] {
        let server = Server::start(Reply {
            length,
            ..Reply::now(200, &big)
        })
        .await;
        let id = started(get(&system, &server.url, 0).await);
        assert_eq!(
            next_as::<Fetched>(&mut outcomes).await,
            Fetched::Failed {
                id,
                error: "CalloutError::TooLarge(1024)".into()
            },
            "content-length sent: {length}"
        );
    }
    // At the bound exactly, it passes.
    let server = Server::start(Reply::now(200, &big[..1024])).await;
    let id = started(get(&system, &server.url, 0).await);
    assert_eq!(
        next_as::<Fetched>(&mut outcomes).await,
        Fetched::Response {
            id,
            status: 200,
            body: big[..1024].to_vec()
        }
    );
    assert_eq!(refusals(&system, Quota::CalloutBody), 2);
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_actor_s_call_outs_are_aborted_and_send_no_news() {
    let system = system(HostConfig::new());
    let mut letters = system.subscribe_dead_letters();
    let _outcomes = fetcher(&system, "fetcher");
    let mut server = Server::start(Reply::held(200, b"late")).await;
    started(get(&system, &server.url, 0).await);
    server.next_request().await;
    let f = system.lookup("/user/f").unwrap();
    assert!(system.stop("/user/f"));
    terminated(&system, &f).await;
    // The call-out died with its actor: the server sees the connection closed.
    assert_eq!(server.next_request().await, "closed");
    // And no `mote.http.response` was sent, not even as a dead letter: the first dead letter
    // is the marker sent now.
    system.tell("/user/f", "marker", Vec::new()).unwrap();
    let letter = tokio::time::timeout(DEADLINE, letters.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(letter.envelope.kind, "marker", "{letter:?}");
    system.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_aborts_the_call_outs_of_the_failed_instance() {
    let system = system(HostConfig::new());
    let mut outcomes = fetcher(&system, "fetcher");
    let mut decisions = system.subscribe_supervision();
    let mut server = Server::start(Reply::held(200, b"for the old instance")).await;
    started(get(&system, &server.url, 0).await);
    server.next_request().await;
    tell(&system, "/user/f", &Fetch::Crash);
    next_decision(&mut decisions).await;
    // The failed instance's call-out is aborted: the server sees the connection closed.
    assert_eq!(server.next_request().await, "closed");
    // The new instance works, and hears only of its own call-outs.
    let pong: Fetched = ask_as(&system, "/user/f", &Fetch::Ping(3)).await;
    assert_eq!(pong, Fetched::Pong(3));
    let id = started(get(&system, &server.url, 0).await);
    server.next_request().await;
    server.release(1);
    assert_eq!(
        next_as::<Fetched>(&mut outcomes).await,
        Fetched::Response {
            id,
            status: 200,
            body: b"for the old instance".to_vec()
        }
    );
    system.shutdown().await.unwrap();
}
