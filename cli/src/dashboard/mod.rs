//! The host's web dashboard and `/metrics`, served on `mote run --http <addr>`: the live actor
//! tree with each actor's figures, a feed of supervision decisions and dead letters, the
//! modules, and a form that sends a message. Its page, script and style are compiled into the
//! binary; nothing is fetched from elsewhere.
//!
//! Routes: `GET /` (the page), `GET /metrics` (OpenMetrics text; `?actor=<path>` repeatable,
//! `?top=<n>`), `GET /api/state`, `GET /api/actor?path=<path>`, `GET /api/events`
//! (server-sent events: `state` every second, `supervision`, `deadletter` and `finished` (long
//! work that ended) as they happen),
//! `POST /api/send` (`{"to","kind","text"|"hex"}`).
//!
//! Invariants:
//! - A bind to anything but loopback needs a token, and then every route needs it (header
//!   `Authorization: Bearer <token>` or query `token=<token>`), compared in constant time.
//! - What a page can make the host do is what `mote send` can: tell one message. Bodies are
//!   bounded by the host's message size limit; the request body by [`MAX_REQUEST_BYTES`].
//! - A state holds at most [`MAX_ACTORS`] actors (the busiest first beyond that), and the feed
//!   at most [`FEED_PER_SECOND`] dead letters a second per page, so 100k actors or a flood of
//!   dead letters cost a page a bounded amount.

mod feed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use mote_host::{ActorInfo, ActorSystem, MetricsQuery};
use serde::{Deserialize, Serialize};

use self::feed::Feed;
use crate::control::{ModuleNode, Node};
use crate::progress::ProgressView;

/// Actors a state lists at most.
pub(crate) const MAX_ACTORS: usize = 2_000;
/// Dead letters a page is sent at most each second; the rest are counted.
pub(crate) const FEED_PER_SECOND: usize = 20;
/// The largest request body (a send form: a 1 MiB body as hex, and some).
pub(crate) const MAX_REQUEST_BYTES: usize = 4 << 20;
/// How often a page gets a new state.
const STATE_EVERY: Duration = Duration::from_secs(1);

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// What the routes share.
struct Shared {
    system: Arc<ActorSystem>,
    token: Option<String>,
    feed: Feed,
    started: Instant,
}

/// Serves the dashboard on `addr` until the task is dropped; gives the address it bound (a
/// port of 0 picks a free one).
pub(crate) async fn start(
    system: Arc<ActorSystem>,
    addr: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    check(addr, token.as_deref())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let shared = Arc::new(Shared {
        feed: Feed::start(&system),
        system,
        token,
        started: Instant::now(),
    });
    let app = router(shared);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("dashboard server: {e}");
        }
    });
    Ok((bound, task))
}

/// Refuses a bind beyond loopback without a token (and an empty token).
pub(crate) fn check(addr: SocketAddr, token: Option<&str>) -> anyhow::Result<()> {
    if token.is_some_and(str::is_empty) {
        bail!("the dashboard's token is empty");
    }
    if !addr.ip().is_loopback() && token.is_none() {
        bail!(
            "the dashboard binds {addr}, which is not loopback: give it a token with --http-token \
             (or MOTE_HTTP_TOKEN), or bind 127.0.0.1"
        );
    }
    Ok(())
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/style.css",
            get(|| async { page(STYLE_CSS, "text/css; charset=utf-8") }),
        )
        .route("/metrics", get(metrics))
        .route("/api/state", get(state))
        .route("/api/actor", get(actor))
        .route("/api/events", get(events))
        .route("/api/send", post(send))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .layer(middleware::from_fn_with_state(shared.clone(), authorize))
        .with_state(shared)
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Lets a request through if the dashboard has no token or the request carries it.
async fn authorize(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(token) = &shared.token else {
        return next.run(request).await;
    };
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query = request.uri().query().unwrap_or_default();
    let in_query = url_params(query)
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v);
    let given = bearer.map(str::to_owned).or(in_query);
    match given {
        Some(given) if same(given.as_bytes(), token.as_bytes()) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            "a token is needed: ?token=<token>",
        )
            .into_response(),
    }
}

/// Equal, in time that depends only on the lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `key=value` pairs of a query string, percent-decoded (repeated keys kept).
fn url_params(query: &str) -> Vec<(String, String)> {
    let uri = format!("/?{query}").parse().unwrap_or_default();
    Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

async fn metrics(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let mut query = MetricsQuery::default();
    for (key, value) in url_params(request.uri().query().unwrap_or_default()) {
        match key.as_str() {
            "actor" => query.actors.push(value),
            "top" => query.top = value.parse().ok(),
            _ => {}
        }
    }
    let text = shared.system.metrics(&query);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The host as a page shows it.
#[derive(Serialize, Debug)]
struct StateView {
    live: usize,
    dead_letters: u64,
    uptime_s: f64,
    /// The actors, as the control socket's `tree` gives them.
    actors: Vec<Node>,
    /// Actors left out past [`MAX_ACTORS`].
    truncated: usize,
    modules: Vec<ModuleNode>,
    /// Long work under way: compiles, rolling upgrades, recoveries.
    tasks: Vec<ProgressView>,
}

fn snapshot(shared: &Shared) -> StateView {
    let system = &shared.system;
    let mut tree: Vec<ActorInfo> = system
        .tree()
        .into_iter()
        .filter(|a| a.module.is_some())
        .collect();
    let truncated = tree.len().saturating_sub(MAX_ACTORS);
    if truncated > 0 {
        // Keep the busiest, then show them in tree order again.
        tree.sort_by_key(|a| std::cmp::Reverse(a.stats.received));
        tree.truncate(MAX_ACTORS);
        tree.sort_by(|a, b| a.address.path.cmp(&b.address.path));
    }
    StateView {
        live: system.live_actors(),
        dead_letters: system.dead_letter_count(),
        uptime_s: shared.started.elapsed().as_secs_f64(),
        actors: tree.into_iter().map(Node::from).collect(),
        truncated,
        tasks: system.progress().iter().map(ProgressView::from).collect(),
        modules: system
            .module_list()
            .into_iter()
            .map(ModuleNode::from)
            .collect(),
    }
}

async fn state(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(snapshot(&shared)).into_response()
}

#[derive(Deserialize)]
struct ActorQuery {
    path: String,
}

/// One actor, with its recent failures.
#[derive(Serialize)]
struct ActorDetail {
    actor: Node,
    failures: Vec<feed::FeedItem>,
}

async fn actor(State(shared): State<Arc<Shared>>, Query(q): Query<ActorQuery>) -> Response {
    let found = shared
        .system
        .tree()
        .into_iter()
        .find(|a| a.address.path.as_str() == q.path);
    match found {
        Some(info) => axum::Json(ActorDetail {
            actor: Node::from(info),
            failures: shared.feed.failures_of(&q.path),
        })
        .into_response(),
        None => (StatusCode::NOT_FOUND, format!("no actor at {}", q.path)).into_response(),
    }
}

async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let stream = shared.feed.stream(shared.clone(), STATE_EVERY);
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// A message a page sends.
#[derive(Deserialize, Debug)]
struct SendForm {
    to: String,
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    hex: Option<String>,
}

#[derive(Serialize)]
struct Outcome {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

async fn send(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let refuse = |status: StatusCode, error: String| {
        (
            status,
            axum::Json(Outcome {
                ok: false,
                error: Some(error),
            }),
        )
            .into_response()
    };
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        // A form post from another origin cannot set this content type without CORS.
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send JSON (content-type: application/json)".into(),
        );
    }
    let form: SendForm = match serde_json::from_slice(&body) {
        Ok(form) => form,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("bad request: {e}")),
    };
    let bytes = match (&form.hex, &form.text) {
        (Some(hex), _) => match mote_host::decode_hex(hex) {
            Some(bytes) => bytes,
            None => return refuse(StatusCode::BAD_REQUEST, format!("body is not hex: {hex:?}")),
        },
        (None, Some(text)) => text.clone().into_bytes(),
        (None, None) => Vec::new(),
    };
    match shared.system.tell(&form.to, &form.kind, bytes) {
        Ok(()) => axum::Json(Outcome {
            ok: true,
            error: None,
        })
        .into_response(),
        Err(e) => refuse(StatusCode::UNPROCESSABLE_ENTITY, mote_host::chain(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn query_pairs_are_decoded_and_repeatable() {
        assert_eq!(
            url_params("actor=%2Fuser%2Fa&actor=/user/b&top=3"),
            vec![
                ("actor".to_owned(), "/user/a".to_owned()),
                ("actor".to_owned(), "/user/b".to_owned()),
                ("top".to_owned(), "3".to_owned()),
            ]
        );
        assert!(url_params("").is_empty());
    }
}
