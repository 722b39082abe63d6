//! The same workloads in Erlang/OTP (`bench/peers/peers.erl`), run in this session so that
//! Mote's figures can be read as ratios against Erlang's.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use super::Args;

/// The figure compared for each workload, as Erlang's script names it.
const KEYS: &[(&str, &str)] = &[
    ("w1", "msgs_per_sec"),
    ("w2", "spawn_plus_msg_per_sec"),
    ("w3", "msgs_per_sec"),
    ("ring", "msgs_per_sec"),
    ("chain", "msgs_per_sec"),
    ("forkjoin", "msgs_per_sec"),
    ("big", "msgs_per_sec"),
];

/// Runs every workload in Erlang with as many schedulers as Mote has workers; prints its
/// results and, for each of Mote's `headline` figures, the ratio.
pub(super) fn erlang(args: &Args, headline: &[(&str, f64)]) -> anyhow::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/peers.erl");
    let dir = std::env::temp_dir().join(format!("mote-bench-erlang-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let compiled = Command::new("erlc")
        .arg("-o")
        .arg(&dir)
        .arg(&script)
        .status();
    match compiled {
        Ok(status) if status.success() => {}
        Ok(status) => bail!("erlc {} failed: {status}", script.display()),
        Err(e) => {
            bail!("cannot run erlc ({e}): install Erlang/OTP with `apt-get install -y erlang-nox`")
        }
    }
    for (workload, key) in KEYS {
        let output = Command::new("erl")
            .arg("+S")
            .arg(args.threads.to_string())
            .arg("-noshell")
            .arg("-pa")
            .arg(&dir)
            .arg("-eval")
            .arg(format!("peers:run({workload}), init:stop()."))
            .output()
            .context("running erl")?;
        let text = String::from_utf8_lossy(&output.stdout);
        let Some(line) = text
            .lines()
            .find(|l| l.starts_with("RESULT runtime=erlang"))
        else {
            bail!(
                "erl printed no result for {workload}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        println!("{line} schedulers={}", args.threads);
        let erlang =
            figure(line, key).with_context(|| format!("no {key} in Erlang's {workload} result"))?;
        if let Some((_, mote)) = headline.iter().find(|(w, _)| w == workload) {
            println!(
                "RESULT workload={workload} ratio_mote_to_erlang={:.3}",
                mote / erlang
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// The value of `key=` in a `RESULT` line.
fn figure(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}
