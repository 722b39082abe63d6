//! The `mote` command line: parses arguments, sets up logging and a runtime, and hands over to a
//! subcommand. Errors are printed as one line with their cause chain.

mod builtin;
mod control;
mod dashboard;
mod demo;
mod new;
mod progress;
mod replay;
mod run;
mod top;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

/// The database a host uses unless told otherwise: embedded redb in the current directory.
pub(crate) const DEFAULT_DB: &str = "mote.redb";

/// Mote: run actors compiled as WebAssembly components.
#[derive(Parser)]
#[command(name = "mote", version, about)]
struct Cli {
    /// Log filter (overrides RUST_LOG and -v), e.g. `info` or `mote=debug`.
    #[arg(long, global = true)]
    log: Option<String>,
    /// More log lines on stderr: -v for info, -vv for debug (guest lines included).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Worker threads of the scheduler (default: one per core).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

/// A node's name and cluster, for `mote run --cluster`.
#[derive(clap::Args)]
struct NodeArgs {
    /// This node's name in the cluster (A-Z a-z 0-9 _ -), unique among live nodes.
    #[arg(long)]
    node: Option<String>,
    /// The cluster's name: every subject and bucket is under it (default: the manifest's,
    /// else `mote`).
    #[arg(long)]
    cluster_name: Option<String>,
    /// The NATS token; default: the manifest's, else the MOTE_CLUSTER_TOKEN environment
    /// variable.
    #[arg(long)]
    cluster_token: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Deploy the modules and actors of a TOML manifest and run until Ctrl-C or until every
    /// top-level actor has stopped.
    Run {
        /// The manifest file.
        manifest: PathBuf,
        /// The control socket for `mote send/ask/tree`.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
        /// The database file (default: the manifest's [storage] path, else ./mote.redb).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Scheduler threads that run actors (default: one per core).
        #[arg(long)]
        workers: Option<usize>,
        /// Serve the dashboard and /metrics on this address, e.g. 127.0.0.1:9100 (port 0 picks
        /// a free one; the URL is printed).
        #[arg(long)]
        http: Option<std::net::SocketAddr>,
        /// The token the dashboard requires (needed to bind anything but loopback); default:
        /// the MOTE_HTTP_TOKEN environment variable.
        #[arg(long)]
        http_token: Option<String>,
        /// Export a span per handled message to this OTLP/HTTP collector, e.g.
        /// `http://127.0.0.1:4318/v1/traces` (the path is added if missing).
        #[arg(long, value_name = "ENDPOINT")]
        otlp: Option<String>,
        /// Join a cluster on this NATS server, e.g. `nats://127.0.0.1:4222` (no value: the
        /// manifest's [cluster] url); needs --node.
        #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
        cluster: Option<String>,
        #[command(flatten)]
        node: NodeArgs,
    },
    /// Send a message to an actor of a running host.
    Send {
        /// The target path, e.g. /user/counter.
        to: String,
        /// The message kind.
        kind: String,
        #[command(flatten)]
        body: Body,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Ask an actor of a running host and print its reply.
    Ask {
        /// The target path.
        to: String,
        /// The message kind.
        kind: String,
        #[command(flatten)]
        body: Body,
        /// How long to wait for the reply.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Print the live actor tree of a running host, with modules and mailbox depths; with
    /// --cluster, of every live node of the cluster.
    Tree {
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
        /// Ask every node of the cluster on this NATS server instead.
        #[arg(long, value_name = "URL")]
        cluster: Option<String>,
        /// The cluster's name.
        #[arg(long, default_value = "mote")]
        cluster_name: String,
        /// The NATS token; default: the MOTE_CLUSTER_TOKEN environment variable.
        #[arg(long)]
        cluster_token: Option<String>,
    },
    /// Show the busiest actors of a running host, refreshed in the terminal (Ctrl-C ends).
    Top {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Actors listed.
        #[arg(long, default_value_t = 20)]
        rows: usize,
        /// Print this many frames, then exit (default: until Ctrl-C).
        #[arg(long)]
        frames: Option<usize>,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Deploy a `.wasm` component to a running host as a module version, or a module `mote`
    /// ships (`--builtin throttle`, `--builtin patterns` for every pattern).
    Deploy {
        /// The component file.
        #[arg(required_unless_present = "builtin", conflicts_with = "builtin")]
        file: Option<PathBuf>,
        /// A built-in module instead of a file: a pattern's name, or `patterns` for all.
        #[arg(long)]
        builtin: Option<String>,
        /// The module name (a built-in's defaults to its own).
        #[arg(long, required_unless_present = "builtin")]
        name: Option<String>,
        /// The version.
        #[arg(long, default_value = mote_host::DEFAULT_VERSION)]
        version: String,
        /// Grant it more than the defaults (`wasi:http`); repeatable.
        #[arg(long = "grant")]
        grants: Vec<String>,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Upgrade an actor (a path) or every actor of a module (a name) of a running host to
    /// another deployed version, live; upgrading back to the old version rolls back.
    Upgrade {
        /// An actor path (`/user/counter`) or a module name (`counter`).
        target: String,
        /// The version to run.
        #[arg(long)]
        to: String,
        /// Actors upgraded at once.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Upgrade this many actors of the module first (the first by path) and watch them:
        /// if they fail or restart more than the old version, roll them back and stop.
        #[arg(long, value_name = "N")]
        canary: Option<usize>,
        /// How long the canaries are watched, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 30, requires = "canary")]
        canary_watch: u64,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// List the module versions deployed on a running host.
    Modules {
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Create an actor project that builds to a component: `mote new <name> --lang rust|python|js|c`.
    New {
        /// The project (and module) name.
        name: String,
        /// The language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
    },
    /// Remove a module version (or all versions) from a running host; refused while actors run it.
    Undeploy {
        /// The module name.
        name: String,
        /// Only this version.
        #[arg(long)]
        version: Option<String>,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Capture an actor of a running host as an image file (its module deployed with
    /// `snapshot = true`); the actor runs on.
    Snapshot {
        /// The actor's path.
        path: String,
        /// The image file to write.
        #[arg(long, short, default_value = "actor.img")]
        out: PathBuf,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Restore an image file as an actor of a running host, with the memory and state it was
    /// captured with (by default at the path it was taken from, which must be free).
    Restore {
        /// The image file.
        image: PathBuf,
        /// Where the restored actor lives (a top-level path or an entity's).
        #[arg(long)]
        at: Option<String>,
        /// The host's control socket.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Move a top-level actor of a running cluster node to another node, live: it continues
    /// there with its memory, mailbox and incarnation (its module deployed with
    /// `snapshot = true`); senders need not know.
    Move {
        /// The actor's path (`/user/<name>`), on the node behind `--control`.
        path: String,
        /// The node it moves to.
        #[arg(long)]
        to: String,
        /// The control socket of the node it runs on.
        #[arg(long, default_value = control::DEFAULT_SOCKET)]
        control: PathBuf,
    },
    /// Replay a durable actor from the database up to an event, in a sandbox that releases
    /// nothing and never writes the file, and print what it recovered (and its reply to --ask).
    /// A host that has the file open must be stopped first.
    Replay {
        /// Its persistence id, e.g. `counter:/user/c` (`<module>:<path>` by default).
        persistence_id: String,
        /// Recover up to this event (default: the latest).
        #[arg(long)]
        until: Option<u64>,
        /// Ask the replayed actor a message of this kind (body: --text or --hex).
        #[arg(long)]
        ask: Option<String>,
        #[command(flatten)]
        body: Body,
        /// The database file.
        #[arg(long, default_value = DEFAULT_DB)]
        db: PathBuf,
        /// Run this component instead of the module version the database records.
        #[arg(long)]
        module: Option<PathBuf>,
        /// Start the actor with this init (UTF-8) instead of the recorded one.
        #[arg(long, conflicts_with = "init_hex")]
        init: Option<String>,
        /// Start the actor with this init (hex) instead of the recorded one.
        #[arg(long)]
        init_hex: Option<String>,
    },
    /// Run the built-in demo: ping-pong, a small tree of actors and durable state, printing
    /// what happens.
    Demo {
        /// The database file.
        #[arg(long, default_value = DEFAULT_DB)]
        db: PathBuf,
        /// Also serve the dashboard on this address (e.g. 127.0.0.1:9100) and keep the demo's
        /// actors running until Ctrl-C.
        #[arg(long)]
        http: Option<std::net::SocketAddr>,
        /// Export a span per handled message to this OTLP/HTTP collector.
        #[arg(long, value_name = "ENDPOINT")]
        otlp: Option<String>,
    },
}

/// A message body given on the command line.
#[derive(clap::Args)]
struct Body {
    /// The body as hex bytes.
    #[arg(long, conflicts_with = "text")]
    hex: Option<String>,
    /// The body as UTF-8 text.
    #[arg(long)]
    text: Option<String>,
}

impl Body {
    fn hex(&self) -> anyhow::Result<String> {
        Ok(match (&self.hex, &self.text) {
            (Some(hex), _) => control::to_hex(&control::from_hex(hex)?),
            (None, Some(text)) => control::to_hex(text.as_bytes()),
            (None, None) => String::new(),
        })
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run {
            manifest,
            control,
            db,
            workers,
            http,
            http_token,
            otlp: _,
            cluster,
            node,
        } => {
            let http = http.map(|addr| run::Http {
                addr,
                token: http_token.or_else(|| std::env::var("MOTE_HTTP_TOKEN").ok()),
            });
            let join = cluster.map(|url| run::Join {
                url: Some(url).filter(|u| !u.is_empty()),
                node: node.node,
                name: node.cluster_name,
                token: node
                    .cluster_token
                    .or_else(|| std::env::var("MOTE_CLUSTER_TOKEN").ok()),
            });
            run::run(&manifest, control, db, workers, http, join).await
        }
        Command::Demo { db, http, otlp: _ } => demo::demo(&db, http).await,
        Command::Replay {
            persistence_id,
            until,
            ask,
            body,
            db,
            module,
            init,
            init_hex,
        } => {
            let ask = match ask {
                Some(kind) => Some((kind, control::from_hex(&body.hex()?)?)),
                None if body.hex.is_some() || body.text.is_some() => {
                    anyhow::bail!("--text and --hex give the body of --ask KIND")
                }
                None => None,
            };
            let init = match (init, init_hex) {
                (Some(text), _) => Some(text.into_bytes()),
                (None, Some(hex)) => Some(control::from_hex(&hex)?),
                (None, None) => None,
            };
            let args = replay::Args {
                pid: persistence_id,
                until,
                ask,
                db,
                module,
                init,
            };
            replay::replay(args).await
        }
        Command::New { name, lang } => new::new(&name, lang),
        Command::Send {
            to,
            kind,
            body,
            control,
        } => {
            let body = body.hex()?;
            control::request(&control, &control::Request::Send { to, kind, body })
                .await
                .map(drop)
        }
        Command::Ask {
            to,
            kind,
            body,
            timeout_ms,
            control,
        } => {
            let body = body.hex()?;
            let request = control::Request::Ask {
                to,
                kind,
                body,
                timeout_ms,
            };
            let response = control::request(&control, &request).await?;
            if let Some(reply) = response.reply {
                print_reply(&reply)?;
            }
            Ok(())
        }
        Command::Tree {
            cluster: Some(url),
            cluster_name,
            cluster_token,
            ..
        } => {
            let mut config = mote_host::ClusterConfig::new(url, "mote-cli");
            config.name = cluster_name;
            config.token = cluster_token.or_else(|| std::env::var("MOTE_CLUSTER_TOKEN").ok());
            let mut actors: Vec<(String, mote_host::RemoteActor)> =
                mote_host::cluster_tree(&config)
                    .await?
                    .into_iter()
                    .flat_map(|(node, actors)| actors.into_iter().map(move |a| (node.clone(), a)))
                    .collect();
            actors.sort_by(|a, b| a.1.path.cmp(&b.1.path));
            for (node, actor) in actors {
                let depth = actor.path.matches('/').count().saturating_sub(1);
                println!(
                    "{:indent$}{} #{} {} mailbox={} node={node}",
                    "",
                    actor.path,
                    actor.incarnation,
                    actor.module.as_deref().unwrap_or("-"),
                    actor.mailbox_depth,
                    indent = depth * 2
                );
            }
            Ok(())
        }
        Command::Tree { control, .. } => {
            let response = control::request(&control, &control::Request::Tree).await?;
            for node in response.actors.unwrap_or_default() {
                let depth = node.path.matches('/').count().saturating_sub(1);
                let refused: String = node
                    .refusals
                    .iter()
                    .map(|(kind, n)| format!(" refused:{kind}={n}"))
                    .collect();
                let naps = match node.hibernations {
                    0 => String::new(),
                    n => format!(" hibernations={n}"),
                };
                println!(
                    "{:indent$}{} #{} {} mailbox={}{naps}{refused}",
                    "",
                    node.path,
                    node.incarnation,
                    module_label(node.module.as_deref(), node.version.as_deref()),
                    node.mailbox_depth,
                    indent = depth * 2
                );
            }
            Ok(())
        }
        Command::Top {
            interval,
            rows,
            frames,
            control,
        } => {
            let interval = std::time::Duration::try_from_secs_f64(interval)
                .ok()
                .filter(|d| !d.is_zero())
                .context("--interval must be a positive number of seconds")?;
            top::top(
                &control,
                top::Options {
                    interval,
                    rows,
                    frames,
                },
            )
            .await
        }
        Command::Deploy {
            file,
            builtin,
            name,
            version,
            grants,
            control,
        } => {
            let mut requests = Vec::new();
            if let Some(builtin) = builtin {
                let found = builtin::resolve(&builtin)?;
                if found.len() > 1 && name.is_some() {
                    anyhow::bail!("--name names one module; `{builtin}` stands for several");
                }
                for (pattern, _) in found {
                    let name = name.clone().unwrap_or_else(|| pattern.to_owned());
                    let request = control::Request::DeployBuiltin {
                        builtin: pattern.to_owned(),
                        name: name.clone(),
                        version: version.clone(),
                    };
                    requests.push((name, request));
                }
            } else if let (Some(file), Some(name)) = (file, name) {
                let path = std::fs::canonicalize(&file)
                    .with_context(|| format!("cannot read module file {}", file.display()))?;
                let request = control::Request::Deploy {
                    path,
                    name: name.clone(),
                    version: version.clone(),
                    grants,
                };
                requests.push((name, request));
            }
            for (name, request) in requests {
                let response = control::request(&control, &request).await?;
                match response.deployed {
                    Some(true) => println!("deployed {name}@{version}"),
                    _ => println!("{name}@{version} was already deployed with these bytes"),
                }
            }
            Ok(())
        }
        Command::Upgrade {
            target,
            to,
            concurrency,
            canary,
            canary_watch,
            control,
        } => {
            let request = control::Request::Upgrade {
                target,
                version: to,
                concurrency,
                canary: canary.map(|actors| control::CanaryRequest {
                    actors,
                    watch_ms: canary_watch.saturating_mul(1000),
                }),
            };
            let response = control::request(&control, &request).await?;
            let Some(summary) = response.upgrade else {
                anyhow::bail!("the host sent no upgrade report");
            };
            println!(
                "{}@{}: {} upgraded ({} with their state), {} already on it, {} failed; longest pause {} us{}{}",
                summary.module,
                summary.version,
                summary.upgraded,
                summary.migrated,
                summary.unchanged,
                summary.failed.len(),
                summary.max_pause_us,
                if summary.current { "; now current" } else { "" },
                summary
                    .canary
                    .as_ref()
                    .map(|c| format!("; {}", c.verdict))
                    .unwrap_or_default(),
            );
            for (path, why) in &summary.failed {
                println!("  {path}: {why} (the old version keeps running)");
            }
            for (node, actors, trouble) in &summary.nodes {
                match trouble {
                    Some(why) => println!("  node {node}: {why}"),
                    None => println!("  node {node}: {} actor(s)", actors.len()),
                }
            }
            if let Some(canary) = &summary.canary {
                for (path, why) in &canary.stuck {
                    println!("  {path}: not rolled back: {why}");
                }
                if !canary.passed {
                    anyhow::bail!(
                        "the canary was rolled back: {} actor(s) back on their old version, {} not tried",
                        canary.rolled_back.len(),
                        canary.untouched
                    );
                }
            }
            if !summary.failed.is_empty() {
                anyhow::bail!("{} actor(s) kept their old version", summary.failed.len());
            }
            Ok(())
        }
        Command::Modules { control } => {
            let response = control::request(&control, &control::Request::Modules).await?;
            for m in response.modules.unwrap_or_default() {
                println!(
                    "{}@{} sha256:{}{}{}{}",
                    m.name,
                    m.version,
                    m.hash.get(..16).unwrap_or(&m.hash),
                    if m.current { " current" } else { "" },
                    if m.upgradable { " upgradable" } else { "" },
                    if m.image { " cow-image" } else { "" }
                );
            }
            Ok(())
        }
        Command::Undeploy {
            name,
            version,
            control,
        } => control::request(&control, &control::Request::Undeploy { name, version })
            .await
            .map(drop),
        Command::Snapshot { path, out, control } => {
            // The host writes the file: give it a path that means the same there.
            let file = std::path::absolute(&out)?;
            let request = control::Request::Snapshot {
                path: path.clone(),
                file: file.clone(),
            };
            let response = control::request(&control, &request).await?;
            if let Some(image) = response.image {
                println!(
                    "{path} captured into {}: {} bytes ({} bytes of memory pages, {} compressed)",
                    file.display(),
                    image.bytes,
                    image.pages_raw,
                    image.pages_compressed
                );
            }
            Ok(())
        }
        Command::Move { path, to, control } => {
            let request = control::Request::Move {
                path: path.clone(),
                to: to.clone(),
            };
            let response = control::request(&control, &request).await?;
            println!(
                "{} moved to node {to}",
                response.moved.as_deref().unwrap_or(&path)
            );
            Ok(())
        }
        Command::Restore { image, at, control } => {
            let file = std::path::absolute(&image)?;
            let request = control::Request::Restore { file, at };
            let response = control::request(&control, &request).await?;
            if let Some(summary) = response.image {
                println!(
                    "restored {} as {} ({} bytes)",
                    image.display(),
                    summary.actor.as_deref().unwrap_or("?"),
                    summary.bytes
                );
            }
            Ok(())
        }
    }
}

fn print_reply(reply: &control::Reply) -> anyhow::Result<()> {
    let bytes = control::from_hex(&reply.body)?;
    let text = control::printable(&bytes)
        .map(|t| format!(" text={t:?}"))
        .unwrap_or_default();
    println!(
        "reply from {} kind={} body={}{text}",
        reply.sender.as_deref().unwrap_or("-"),
        reply.kind,
        reply.body
    );
    Ok(())
}

/// How many log lines wait at most for stderr; past that, lines are dropped (and the writer
/// reports how many).
const LOG_QUEUE_LINES: usize = 16_384;

/// mimalloc: actors allocate on one worker and free on another, which it does faster than
/// glibc (the README's Measured has the same-run figures).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs the CLI and turns any error into one line on stderr and exit code 1.
fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo tells its story on stdout; its logs stay at warn unless asked for. A host run
    // by an operator logs what it does.
    let default_filter = match (cli.verbose, &cli.command) {
        (0, Command::Run { .. }) => "info",
        (0, _) => "warn",
        (1, _) => "info",
        _ => "debug,mote::guest=debug",
    };
    let filter = cli
        .log
        .as_deref()
        .map(EnvFilter::new)
        .or_else(|| {
            (cli.verbose == 0)
                .then(|| EnvFilter::try_from_default_env().ok())
                .flatten()
        })
        .unwrap_or_else(|| EnvFilter::new(default_filter));
    // The host's lines go through a bounded, lossy queue to a writer thread of their own, so a
    // slow or blocked stderr (a full pipe) never holds a scheduler thread; guest lines already
    // come from the host's guest log thread. The guard writes what is queued when main returns.
    let (writer, log_guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .thread_name("mote-log-writer")
        .finish(std::io::stderr());
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = cli.threads {
        runtime.worker_threads(n.max(1));
    }
    let result = runtime.build().map_err(anyhow::Error::from).and_then(|rt| {
        let endpoint = match &cli.command {
            Command::Run { otlp, .. } | Command::Demo { otlp, .. } => otlp.as_deref(),
            _ => None,
        };
        let logs = tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(writer);
        let exporter = match endpoint {
            // One global filter: a disabled callsite costs one check.
            None => {
                tracing_subscriber::registry()
                    .with(logs)
                    .with(filter)
                    .init();
                None
            }
            // Only the message spans go to the collector; `--log` filters the log lines alone.
            Some(endpoint) => {
                let (exporter, layer) = mote_otlp::Otlp::new(endpoint).start(rt.handle())?;
                tracing_subscriber::registry()
                    .with(logs.with_filter(filter))
                    .with(layer.with_filter(mote_otlp::message_spans()))
                    .init();
                Some(exporter)
            }
        };
        let result = rt.block_on(async { dispatch(cli.command).await });
        // While the runtime still runs: the exporter's last requests need it.
        if let Some(exporter) = exporter
            && let Err(error) = exporter.shutdown()
        {
            eprintln!("mote: warning: {}", mote_host::chain(&error));
        }
        result
    });
    drop(log_guard);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The cause chain on one line, each cause once.
            eprintln!("mote: error: {}", mote_host::chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// `module@version`, or `-` for a host endpoint.
fn module_label(module: Option<&str>, version: Option<&str>) -> String {
    match (module, version) {
        (Some(m), Some(v)) => format!("{m}@{v}"),
        (Some(m), None) => m.to_owned(),
        _ => "-".to_owned(),
    }
}
