//! The control socket of a running `mote run`: a Unix socket on which `mote send`, `mote ask`
//! and `mote tree` talk to the host. One JSON object per line each way; bodies travel as hex.
//!
//! Requests: `{"op":"send","to":P,"kind":K,"body":HEX}`,
//! `{"op":"ask","to":P,"kind":K,"body":HEX,"timeout_ms":N}`, `{"op":"tree"}`,
//! `{"op":"deploy","path":FILE,"name":N,"version":V}`,
//! `{"op":"upgrade","target":PATH_OR_MODULE,"version":V,"concurrency":N,
//! "canary":{"actors":N,"watch_ms":MS}?}`, `{"op":"modules"}`,
//! `{"op":"undeploy","name":N,"version":V?}`, `{"op":"snapshot","path":P,"file":FILE}`,
//! `{"op":"restore","file":FILE,"at":P?}`.
//! Responses: `{"ok":true,...}` or `{"ok":false,"error":"..."}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use mote_host::{
    ActorInfo, ActorSystem, Canary, CanaryVerdict, MemoryStrategy, ModuleInfo, Progress,
    UpgradeOptions,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use crate::progress::{Bars, ProgressView};

/// The default socket path, in the current directory.
pub(crate) const DEFAULT_SOCKET: &str = "mote.sock";

/// A request to the host.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum Request {
    Send {
        to: String,
        kind: String,
        body: String,
    },
    Ask {
        to: String,
        kind: String,
        body: String,
        timeout_ms: u64,
    },
    Tree,
    DeployBuiltin {
        builtin: String,
        name: String,
        version: String,
    },
    Deploy {
        path: PathBuf,
        name: String,
        version: String,
        #[serde(default)]
        grants: Vec<String>,
    },
    Upgrade {
        target: String,
        version: String,
        concurrency: usize,
        /// Upgrade a few actors first and watch them (a module target only).
        #[serde(default)]
        canary: Option<CanaryRequest>,
    },
    Modules,
    Undeploy {
        name: String,
        version: Option<String>,
    },
    /// Capture the actor at `path` as an image into `file` (written by the host).
    Snapshot {
        path: String,
        file: PathBuf,
    },
    /// Restore the image in `file` (read by the host) as an actor at `at`, by default where
    /// it was taken.
    Restore {
        file: PathBuf,
        at: Option<String>,
    },
    /// Move the top-level actor at `path` of this node to the node `to`, live.
    Move {
        path: String,
        to: String,
    },
}

/// What a `snapshot` wrote, or a `restore` read.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct ImageSummary {
    /// The image file's size.
    pub(crate) bytes: usize,
    /// The memory pages it holds, uncompressed and compressed.
    pub(crate) pages_raw: u64,
    pub(crate) pages_compressed: u64,
    /// Where the restored actor lives (a `restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) actor: Option<String>,
}

/// The largest image file `restore` reads.
const MAX_IMAGE_BYTES: u64 = 1 << 30;

/// One module version in a `modules` response.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct ModuleNode {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) hash: String,
    pub(crate) current: bool,
    pub(crate) upgradable: bool,
    /// Whether its instances map a copy-on-write image of their initial memory.
    #[serde(default)]
    pub(crate) image: bool,
}

/// The canary stage an `upgrade` asks for (the host's default rule: see [`Canary::new`]).
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct CanaryRequest {
    /// How many actors go first.
    pub(crate) actors: usize,
    /// How long they are watched, in milliseconds.
    pub(crate) watch_ms: u64,
}

/// What an upgrade's canary stage did.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct CanarySummary {
    pub(crate) passed: bool,
    /// The verdict in words, with its figures and the rule (`canary passed: ...`).
    pub(crate) verdict: String,
    pub(crate) canaries: Vec<String>,
    /// Canaries moved back to their old version.
    pub(crate) rolled_back: Vec<String>,
    /// Canaries that could not be moved back, with why.
    pub(crate) stuck: Vec<(String, String)>,
    /// Actors not tried because the stage rolled back.
    pub(crate) untouched: usize,
}

impl From<CanaryVerdict> for CanarySummary {
    fn from(v: CanaryVerdict) -> Self {
        CanarySummary {
            passed: v.passed(),
            verdict: v.to_string(),
            canaries: v.canaries,
            rolled_back: v.rolled_back,
            stuck: v.stuck,
            untouched: v.untouched,
        }
    }
}

/// The outcome of an `upgrade`.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct UpgradeSummary {
    pub(crate) module: String,
    pub(crate) version: String,
    pub(crate) upgraded: usize,
    pub(crate) migrated: usize,
    pub(crate) unchanged: usize,
    pub(crate) failed: Vec<(String, String)>,
    pub(crate) current: bool,
    pub(crate) max_pause_us: u64,
    /// What the canary stage did, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) canary: Option<CanarySummary>,
    /// In a cluster, each node's part: its name, its actors in the report, and why it did
    /// not do its part, if so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) nodes: Vec<(String, Vec<String>, Option<String>)>,
}

/// One actor in a `tree` response.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) struct Node {
    pub(crate) path: String,
    pub(crate) incarnation: u64,
    pub(crate) module: Option<String>,
    #[serde(default)]
    pub(crate) version: Option<String>,
    pub(crate) mailbox_depth: usize,
    /// Bytes of the bodies in its mailbox.
    #[serde(default)]
    pub(crate) mailbox_bytes: usize,
    /// What the actor was refused, by kind (`timers`, `log`, ...), only kinds with a count.
    #[serde(default)]
    pub(crate) refusals: Vec<(String, u64)>,
    /// Messages handed to it so far.
    #[serde(default)]
    pub(crate) received: u64,
    /// Messages it sent so far.
    #[serde(default)]
    pub(crate) sent: u64,
    /// Its failures and restarts so far.
    #[serde(default)]
    pub(crate) failures: u64,
    #[serde(default)]
    pub(crate) restarts: u64,
    /// Steps whose durable writes were committed.
    #[serde(default)]
    pub(crate) committed: u64,
    /// Times it hibernated (gave up its instance for an image while idle).
    #[serde(default)]
    pub(crate) hibernations: u64,
    /// Bytes of linear memory now.
    #[serde(default)]
    pub(crate) memory: u64,
    /// Nanoseconds its guest calls have run (measured when the host meters CPU time).
    #[serde(default)]
    pub(crate) cpu_ns: u64,
}

impl From<ActorInfo> for Node {
    fn from(i: ActorInfo) -> Self {
        Node {
            path: i.address.path.to_string(),
            incarnation: i.address.incarnation,
            module: i.module,
            version: i.version,
            mailbox_depth: i.mailbox_depth,
            mailbox_bytes: i.mailbox_bytes,
            refusals: i
                .refusals
                .iter()
                .map(|(q, n)| (q.name().to_owned(), *n))
                .collect(),
            received: i.stats.received,
            sent: i.stats.sent,
            failures: i.stats.failures,
            restarts: i.stats.restarts,
            committed: i.stats.committed,
            hibernations: i.stats.hibernations,
            memory: i.stats.memory_bytes,
            cpu_ns: u64::try_from(i.stats.cpu.as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

impl From<ModuleInfo> for ModuleNode {
    fn from(m: ModuleInfo) -> Self {
        ModuleNode {
            name: m.name,
            version: m.version,
            hash: m.hash,
            current: m.current,
            upgradable: m.upgradable,
            image: m.memory == MemoryStrategy::Image,
        }
    }
}

/// The reply to an `ask`.
#[derive(Serialize, Deserialize, Debug)]
pub(crate) struct Reply {
    pub(crate) sender: Option<String>,
    pub(crate) kind: String,
    pub(crate) body: String,
}

/// The host's answer.
#[derive(Serialize, Deserialize, Debug, Default)]
pub(crate) struct Response {
    pub(crate) ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reply: Option<Reply>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) actors: Option<Vec<Node>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) modules: Option<Vec<ModuleNode>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) upgrade: Option<UpgradeSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deployed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) image: Option<ImageSummary>,
    /// The address of an actor that moved (a `move`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) moved: Option<String>,
    /// Set on a line that reports long work while a `deploy` or `upgrade` runs; the answer
    /// follows on a line of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) progress: Option<ProgressView>,
}

/// The longest request line the host reads (a 1 MiB body is 2 MiB of hex).
pub(crate) const MAX_LINE_BYTES: usize = 4 << 20;
/// Control connections served at once; one more is answered with an error and closed.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// Serves the control socket at `path` until the task is dropped; removes a stale socket first.
pub(crate) async fn serve(system: Arc<ActorSystem>, path: PathBuf) -> anyhow::Result<()> {
    if path.exists() {
        if UnixStream::connect(&path).await.is_ok() {
            bail!("another host already listens on {}", path.display());
        }
        std::fs::remove_file(&path)
            .with_context(|| format!("cannot remove stale socket {}", path.display()))?;
    }
    let listener = UnixListener::bind(&path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    tracing::info!(socket = %path.display(), "control socket ready");
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (mut stream, _) = listener.accept().await?;
        let Ok(place) = places.clone().try_acquire_owned() else {
            tokio::spawn(async move {
                let refusal = error_line(format!(
                    "too many control connections (at most {MAX_CONNECTIONS})"
                ));
                let _ = stream.write_all(refusal.as_bytes()).await;
            });
            continue;
        };
        let system = system.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(&system, stream).await {
                tracing::warn!("control connection: {e:#}");
            }
            drop(place);
        });
    }
}

/// A response line carrying only `error`.
fn error_line(error: String) -> String {
    let response = Response {
        error: Some(error),
        ..Response::default()
    };
    let mut text = serde_json::to_string(&response).unwrap_or_default();
    text.push('\n');
    text
}

async fn connection(system: &Arc<ActorSystem>, stream: UnixStream) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        if (&mut reader)
            .take(limit)
            .read_until(b'\n', &mut line)
            .await?
            == 0
        {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE_BYTES {
            // The rest of the line is never read: answer and close.
            let refusal = error_line(format!(
                "request line longer than {MAX_LINE_BYTES} bytes; connection closed"
            ));
            write.write_all(refusal.as_bytes()).await?;
            return Ok(());
        }
        let response = match serde_json::from_slice::<Request>(&line) {
            Ok(request) => {
                // Long work streams its progress ahead of the answer.
                let mut progress =
                    matches!(request, Request::Deploy { .. } | Request::Upgrade { .. })
                        .then(|| system.subscribe_progress());
                let handled = handle(system, request);
                tokio::pin!(handled);
                let answer = loop {
                    tokio::select! {
                        result = &mut handled => break result.unwrap_or_else(|e| Response {
                            error: Some(format!("{e:#}")),
                            ..Response::default()
                        }),
                        Some(update) = next_progress(&mut progress) => {
                            write_progress(&mut write, &update).await?;
                        }
                    }
                };
                // What was reported before the work returned goes ahead of the answer.
                while let Some(update) = progress.as_mut().and_then(|rx| rx.try_recv().ok()) {
                    write_progress(&mut write, &update).await?;
                }
                answer
            }
            Err(e) => Response {
                error: Some(format!("bad request: {e}")),
                ..Response::default()
            },
        };
        let mut text = serde_json::to_string(&response)?;
        text.push('\n');
        write.write_all(text.as_bytes()).await?;
    }
}

/// Writes one progress line.
async fn write_progress(
    write: &mut tokio::net::unix::OwnedWriteHalf,
    update: &Progress,
) -> anyhow::Result<()> {
    let line = Response {
        progress: Some(ProgressView::from(update)),
        ..Response::default()
    };
    let mut text = serde_json::to_string(&line)?;
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    Ok(())
}

/// The next progress update, if subscribed; pending forever otherwise (or once closed).
async fn next_progress(rx: &mut Option<Receiver<Progress>>) -> Option<Progress> {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(update) => return Some(update),
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return std::future::pending().await,
        }
    }
}

async fn handle(system: &Arc<ActorSystem>, request: Request) -> anyhow::Result<Response> {
    let mut response = Response {
        ok: true,
        ..Response::default()
    };
    match request {
        Request::Send { to, kind, body } => system.tell(&to, &kind, from_hex(&body)?)?,
        Request::Ask {
            to,
            kind,
            body,
            timeout_ms,
        } => {
            let timeout = Duration::from_millis(timeout_ms);
            let reply = system.ask(&to, &kind, from_hex(&body)?, timeout).await?;
            response.reply = Some(Reply {
                sender: reply.sender.map(|s| s.to_string()),
                kind: reply.kind,
                body: to_hex(&reply.body),
            });
        }
        Request::Tree => {
            response.actors = Some(system.tree().into_iter().map(Node::from).collect());
        }
        Request::Deploy {
            path,
            name,
            version,
            grants,
        } => {
            // A compile takes seconds for a big module: off the async threads.
            let system = system.clone();
            let deployed = tokio::task::spawn_blocking(move || {
                system.deploy_path(&name, &version, &path, &grants)
            })
            .await??;
            response.deployed = Some(deployed);
        }
        Request::DeployBuiltin {
            builtin,
            name,
            version,
        } => {
            let bytes = super::builtin::component(&builtin)?;
            let system = system.clone();
            let deployed = tokio::task::spawn_blocking(move || {
                system.deploy_granted(&name, &version, bytes, &[])
            })
            .await??;
            response.deployed = Some(deployed);
        }
        Request::Upgrade {
            target,
            version,
            concurrency,
            canary,
        } => {
            let options = UpgradeOptions {
                concurrency,
                canary: canary.map(|c| Canary::new(c.actors, Duration::from_millis(c.watch_ms))),
                ..UpgradeOptions::default()
            };
            let report = system
                .upgrade_with(&target, &version, options, None)
                .await?;
            response.upgrade = Some(UpgradeSummary {
                module: report.module,
                version: report.version,
                migrated: report.upgraded.iter().filter(|u| u.migrated).count(),
                max_pause_us: report
                    .upgraded
                    .iter()
                    .map(|u| u.pause.as_micros() as u64)
                    .max()
                    .unwrap_or(0),
                upgraded: report.upgraded.len(),
                unchanged: report.unchanged,
                failed: report.failed,
                current: report.current,
                canary: report.canary.map(CanarySummary::from),
                nodes: (report.nodes.into_iter())
                    .map(|n| (n.node, n.actors, n.error.map(|e| e.to_string())))
                    .collect(),
            });
        }
        Request::Modules => {
            response.modules = Some(
                system
                    .module_list()
                    .into_iter()
                    .map(ModuleNode::from)
                    .collect(),
            );
        }
        Request::Undeploy { name, version } => {
            system.remove_module(&name, version.as_deref())?;
        }
        Request::Snapshot { path, file } => {
            let image = system.snapshot(&path).await?;
            let info = ActorSystem::image_info(&image)?;
            std::fs::write(&file, &image)
                .with_context(|| format!("cannot write the image to {}", file.display()))?;
            response.image = Some(ImageSummary {
                bytes: info.bytes,
                pages_raw: info.pages_raw,
                pages_compressed: info.pages_compressed,
                actor: None,
            });
        }
        Request::Restore { file, at } => {
            let size = std::fs::metadata(&file)
                .with_context(|| format!("cannot read the image {}", file.display()))?
                .len();
            if size > MAX_IMAGE_BYTES {
                bail!(
                    "{} is {size} bytes, over the {MAX_IMAGE_BYTES} an image may have",
                    file.display()
                );
            }
            let image = std::fs::read(&file)
                .with_context(|| format!("cannot read the image {}", file.display()))?;
            let info = ActorSystem::image_info(&image)?;
            let address = system
                .restore(&image, at.as_deref(), mote_host::SpawnOptions::default())
                .await?;
            response.image = Some(ImageSummary {
                bytes: info.bytes,
                pages_raw: info.pages_raw,
                pages_compressed: info.pages_compressed,
                actor: Some(address.to_string()),
            });
        }
        Request::Move { path, to } => {
            let address = system.move_actor(&path, &to).await?;
            response.moved = Some(address.to_string());
        }
    }
    Ok(response)
}

/// Sends one request to the host listening at `path` and returns its successful response.
pub(crate) async fn request(path: &Path, request: &Request) -> anyhow::Result<Response> {
    let stream = UnixStream::connect(path).await.with_context(|| {
        format!(
            "no host listening on {} (start one with `mote run <manifest> --control {}`)",
            path.display(),
            path.display()
        )
    })?;
    let (read, mut write) = stream.into_split();
    let mut text = serde_json::to_string(request)?;
    text.push('\n');
    write.write_all(text.as_bytes()).await?;
    let mut lines = BufReader::new(read).lines();
    let mut bars: Option<Bars> = None;
    let response = loop {
        let line = lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow!("the host closed the connection"))?;
        let response: Response = serde_json::from_str(&line).context("malformed response")?;
        match &response.progress {
            Some(update) => bars.get_or_insert_with(Bars::stderr).update(update),
            None => break response,
        }
    };
    if !response.ok {
        bail!(
            "{}",
            response.error.unwrap_or_else(|| "request failed".into())
        );
    }
    Ok(response)
}

/// `bytes` as text, if they are UTF-8 without control characters.
pub(crate) fn printable(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes)
        .ok()
        .filter(|text| !text.chars().any(char::is_control))
}

/// Lower-case hex of `bytes`.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of a hex string (whitespace ignored).
pub(crate) fn from_hex(hex: &str) -> anyhow::Result<Vec<u8>> {
    mote_host::decode_hex(hex).ok_or_else(|| anyhow!("body is not hex: {hex:?}"))
}
