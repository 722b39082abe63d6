//! The `mote` command line: parses arguments, sets up logging and a runtime, and hands over to a
//! subcommand. Errors are printed as one line with their cause chain.

mod demo;
mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// Mote: run actors compiled as WebAssembly components.
#[derive(Parser)]
#[command(name = "mote", version, about)]
struct Cli {
    /// Log filter (overrides RUST_LOG), e.g. `info` or `mote=debug`.
    #[arg(long, global = true)]
    log: Option<String>,
    /// Worker threads of the scheduler (default: one per core).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Deploy the modules and actors of a TOML manifest and run until Ctrl-C or until every
    /// top-level actor has stopped.
    Run {
        /// The manifest file.
        manifest: PathBuf,
    },
    /// Run the built-in demo: ping-pong and a small tree of actors, printing what happens.
    Demo,
}

/// Runs the CLI and turns any error into one line on stderr and exit code 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo shows each ball of the ping-pong, which the guests log at debug level.
    let default_filter = match cli.command {
        Command::Demo => "info,mote::guest=debug",
        Command::Run { .. } => "info",
    };
    let filter = cli
        .log
        .as_deref()
        .map(EnvFilter::new)
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new(default_filter));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = cli.threads {
        runtime.worker_threads(n.max(1));
    }
    let result = runtime.build().map_err(anyhow::Error::from).and_then(|rt| {
        rt.block_on(async {
            match cli.command {
                Command::Run { manifest } => run::run(&manifest).await,
                Command::Demo => demo::demo().await,
            }
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mote: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
