//! `mote top`: the busiest actors of a running host, refreshed in the terminal, for machines
//! without a browser. It reads the actor tree through the control socket twice an interval
//! apart, and ranks actors by the messages they handled in between.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::control::{self, Node, Request};

/// What `mote top` shows.
pub(crate) struct Options {
    /// Time between two samples (and frames).
    pub(crate) interval: Duration,
    /// How many actors a frame lists.
    pub(crate) rows: usize,
    /// Frames to print before exiting (`None`: until Ctrl-C).
    pub(crate) frames: Option<usize>,
}

/// One actor's line: its node and its rates over the last interval.
struct Line {
    node: Node,
    per_second: f64,
    cpu_share: f64,
}

pub(crate) async fn top(socket: &Path, options: Options) -> anyhow::Result<()> {
    let clear = std::io::stdout().is_terminal();
    let mut before = sample(socket).await?;
    let mut shown = 0;
    while options.frames.is_none_or(|n| shown < n) {
        tokio::time::sleep(options.interval).await;
        let now = sample(socket).await?;
        let frame = render(&before, &now, options.rows);
        let mut out = std::io::stdout().lock();
        if clear {
            // Home and clear: a plain refresh, no terminal library.
            write!(out, "\x1b[H\x1b[2J")?;
        }
        out.write_all(frame.as_bytes())?;
        out.flush()?;
        before = now;
        shown += 1;
    }
    Ok(())
}

/// The tree at one moment.
struct Sample {
    at: Instant,
    actors: Vec<Node>,
}

async fn sample(socket: &Path) -> anyhow::Result<Sample> {
    let response = control::request(socket, &Request::Tree).await?;
    Ok(Sample {
        at: Instant::now(),
        actors: response
            .actors
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.module.is_some())
            .collect(),
    })
}

/// A frame: a header and the `rows` busiest actors between `before` and `now`.
fn render(before: &Sample, now: &Sample, rows: usize) -> String {
    let seconds = now.at.duration_since(before.at).as_secs_f64().max(1e-3);
    let earlier: HashMap<(&str, u64), &Node> = before
        .actors
        .iter()
        .map(|n| ((n.path.as_str(), n.incarnation), n))
        .collect();
    let mut lines: Vec<Line> = now
        .actors
        .iter()
        .map(|n| {
            let (received, cpu) = earlier
                .get(&(n.path.as_str(), n.incarnation))
                .map_or((0, 0), |b| (b.received, b.cpu_ns));
            Line {
                per_second: n.received.saturating_sub(received) as f64 / seconds,
                cpu_share: n.cpu_ns.saturating_sub(cpu) as f64 / 1e9 / seconds,
                node: n.clone(),
            }
        })
        .collect();
    lines.sort_by(|a, b| {
        b.per_second
            .total_cmp(&a.per_second)
            .then(b.node.mailbox_depth.cmp(&a.node.mailbox_depth))
            .then(b.node.received.cmp(&a.node.received))
    });
    let total: f64 = lines.iter().map(|l| l.per_second).sum();
    let mut out = format!(
        "{} actors, {:.0} msg/s over {:.1} s\n{:<40} {:>10} {:>8} {:>12} {:>6} {:>8} {:>6} {:>10}\n",
        lines.len(),
        total,
        seconds,
        "ACTOR",
        "MSG/S",
        "MAILBOX",
        "RECEIVED",
        "FAIL",
        "RESTART",
        "CPU%",
        "MEMORY",
    );
    for line in lines.iter().take(rows) {
        let n = &line.node;
        out.push_str(&format!(
            "{:<40} {:>10.1} {:>8} {:>12} {:>6} {:>8} {:>6.1} {:>9}K\n",
            n.path,
            line.per_second,
            n.mailbox_depth,
            n.received,
            n.failures,
            n.restarts,
            line.cpu_share * 100.0,
            n.memory / 1024,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(path: &str, received: u64, mailbox: usize) -> Node {
        Node {
            path: path.into(),
            incarnation: 1,
            module: Some("m".into()),
            version: None,
            mailbox_depth: mailbox,
            mailbox_bytes: 0,
            refusals: Vec::new(),
            received,
            sent: 0,
            failures: 0,
            restarts: 0,
            committed: 0,
            hibernations: 0,
            memory: 65536,
            cpu_ns: 0,
        }
    }

    #[test]
    fn the_busiest_over_the_interval_come_first() {
        let at = Instant::now();
        let before = Sample {
            at,
            actors: vec![node("/user/old", 1_000_000, 0), node("/user/busy", 10, 0)],
        };
        let now = Sample {
            at: at + Duration::from_secs(2),
            actors: vec![
                node("/user/old", 1_000_000, 0),
                node("/user/busy", 410, 0),
                node("/user/new", 100, 7),
            ],
        };
        let frame = render(&before, &now, 2);
        let lines: Vec<&str> = frame.lines().collect();
        assert!(lines[0].starts_with("3 actors, 250 msg/s"), "{frame}");
        assert!(
            lines[2].starts_with("/user/busy") && lines[2].contains("200.0"),
            "{frame}"
        );
        assert!(
            lines[3].starts_with("/user/new") && lines[3].contains("50.0"),
            "{frame}"
        );
        assert_eq!(lines.len(), 4, "two rows: {frame}");
    }
}
