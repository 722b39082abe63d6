//! `mote replay <persistence-id>`: a durable actor's state at any event of its history, from
//! the database file, in a sandbox that releases nothing and never writes the file.

use std::path::PathBuf;

use anyhow::Context;
use mote_host::{Dropped, Recovered, Replay, ReplayOptions};

/// What to replay and what to ask.
pub(crate) struct Args {
    pub(crate) pid: String,
    pub(crate) until: Option<u64>,
    /// A message to ask the replayed actor: its kind and body.
    pub(crate) ask: Option<(String, Vec<u8>)>,
    pub(crate) db: PathBuf,
    /// A component file to run instead of the recorded module version.
    pub(crate) module: Option<PathBuf>,
    pub(crate) init: Option<Vec<u8>>,
}

pub(crate) async fn replay(args: Args) -> anyhow::Result<()> {
    let module = match &args.module {
        Some(path) => Some(
            std::fs::read(path)
                .with_context(|| format!("cannot read module file {}", path.display()))?,
        ),
        None => None,
    };
    let options = ReplayOptions {
        until: args.until,
        module,
        init: args.init,
        ..ReplayOptions::default()
    };
    let mut replay = Replay::open(&args.db, &args.pid, options).await?;
    print_recovered(replay.recovered());
    if let Some((kind, body)) = args.ask {
        match replay.ask(&kind, body).await? {
            Some(reply) => println!("reply kind={} {}", reply.kind, body_text(&reply.body)),
            None => println!("no reply"),
        }
    }
    let dropped = replay.dropped();
    if !dropped.is_empty() {
        println!("dropped, never released: {}", dropped_text(&dropped));
    }
    Ok(())
}

/// Two lines: what ran, and what it recovered from.
fn print_recovered(r: &Recovered) {
    let hash = r.hash.get(..16).unwrap_or(&r.hash);
    let derived = if r.recorded {
        ""
    } else {
        " (not recorded in the database: derived from the id)"
    };
    println!(
        "{}: {}@{} sha256:{hash} at {}{derived}",
        r.persistence_id, r.module, r.version, r.path
    );
    let from = match (r.snapshot, r.latest_snapshot) {
        (Some(seq), _) => format!("the snapshot at event {seq}"),
        (None, Some(later)) => format!("the first event (the snapshot at event {later} is later)"),
        (None, None) => "the first event".to_owned(),
    };
    let read = if r.recovered {
        let s = if r.events_read == 1 { "" } else { "s" };
        format!("{} event{s} read", r.events_read)
    } else {
        "the actor did not recover".to_owned()
    };
    println!(
        "recovered to event {} of {} from {from}; {read}",
        r.until, r.last
    );
}

/// `text="..."` if the body is printable UTF-8, else `hex=...`.
fn body_text(body: &[u8]) -> String {
    match super::control::printable(body) {
        Some(text) => format!("text={text:?}"),
        None => format!("hex={}", super::control::to_hex(body)),
    }
}

/// `1 send, 1 snapshot`: the kinds of effect dropped, with their counts.
fn dropped_text(d: &Dropped) -> String {
    let kinds = [
        (d.sends, "send", "sends"),
        (d.spawns, "spawn", "spawns"),
        (d.stops, "stop", "stops"),
        (d.other, "timer or HTTP request", "timers or HTTP requests"),
        (d.events, "event", "events"),
        (d.snapshots, "snapshot", "snapshots"),
        (d.deletions, "deletion", "deletions"),
        (d.reminders, "reminder change", "reminder changes"),
    ];
    kinds
        .iter()
        .filter(|(n, ..)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if *n == 1 { one } else { many }))
        .collect::<Vec<_>>()
        .join(", ")
}
