//! Guest log lines (the `host.log` import, and guest stdout and stderr through WASI) on their
//! way to the host's `tracing` subscriber, without ever making an actor wait for the log.
//!
//! ```text
//! actor (scheduler thread) ── offer ──> bounded queue ──> `mote-guest-log` thread ──> tracing event
//!                                │ full                     (target `mote::guest`, the guest's
//!                                v                           level, fields `actor` and `stream`)
//!                           dropped += 1
//! ```
//!
//! A slow or blocked log writer (a full pipe on stderr, say) then stalls only the log thread:
//! the queue fills, further lines are dropped and counted, and actors go on running.
//!
//! Invariants:
//! - An actor's thread never blocks on the log: it only tries to queue a line; a full queue (or
//!   one whose thread is gone) drops the line and counts it in [`GuestLog::dropped`].
//! - The queue holds at most its capacity in lines, each at most the log-line quota in bytes.
//! - Lines are emitted by one thread, in the order they were queued, at the level the guest gave.
//! - Lines still queued when the host exits may be lost: a graceful shutdown waits a bounded
//!   time for them ([`GuestLog::flush`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use tracing::Level;
use tracing::level_filters::LevelFilter;

use crate::address::ActorPath;

/// The target of guest log lines.
pub(crate) const TARGET: &str = "mote::guest";

/// One guest line on its way to the log.
struct Line {
    level: Level,
    actor: ActorPath,
    /// Where it came from: `log`, `stdout` or `stderr`.
    stream: &'static str,
    text: String,
}

/// The counters of the sink, shared with its thread.
#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    written: AtomicU64,
    dropped: AtomicU64,
}

/// The host-wide sink of guest log lines: a bounded queue and the thread that drains it.
pub(crate) struct GuestLog {
    tx: SyncSender<Line>,
    counters: Arc<Counters>,
}

impl GuestLog {
    /// Starts the log thread behind a queue of `capacity` lines.
    pub(crate) fn start(capacity: usize) -> Arc<GuestLog> {
        let (tx, rx) = mpsc::sync_channel::<Line>(capacity.max(1));
        let counters = Arc::new(Counters::default());
        let counted = counters.clone();
        let spawned = std::thread::Builder::new()
            .name("mote-guest-log".into())
            .spawn(move || {
                for line in rx {
                    emit(&line);
                    counted.written.fetch_add(1, Ordering::Release);
                }
            });
        if let Err(error) = spawned {
            // The receiver is gone with the closure: every line will be counted as dropped.
            tracing::error!(%error, "could not start the guest log thread; guest log lines will be dropped");
        }
        Arc::new(GuestLog { tx, counters })
    }

    /// Queues a line of the actor at `actor`, or drops and counts it if the queue is full.
    /// Never blocks. A line below the subscriber's most verbose level is not queued at all.
    pub(crate) fn offer(&self, level: Level, actor: &ActorPath, stream: &'static str, text: &str) {
        if level > LevelFilter::current() {
            return;
        }
        self.queue(Line {
            level,
            actor: actor.clone(),
            stream,
            text: text.to_owned(),
        });
    }

    /// Queues `line`, or drops and counts it.
    fn queue(&self, line: Line) {
        match self.tx.try_send(line) {
            Ok(()) => {
                self.counters.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Guest log lines dropped so far because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every line queued so far is written, at most `within`; false if some are
    /// still waiting then (the writer is slow or blocked).
    pub(crate) async fn flush(&self, within: Duration) -> bool {
        let target = self.counters.queued.load(Ordering::Relaxed);
        let deadline = Instant::now() + within;
        loop {
            if self.counters.written.load(Ordering::Acquire) >= target {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// Emits one line as a `tracing` event, on the log thread.
fn emit(line: &Line) {
    let Line {
        level,
        actor,
        stream,
        text,
    } = line;
    match *level {
        Level::TRACE => tracing::trace!(target: TARGET, actor = %actor, stream, "{text}"),
        Level::DEBUG => tracing::debug!(target: TARGET, actor = %actor, stream, "{text}"),
        Level::INFO => tracing::info!(target: TARGET, actor = %actor, stream, "{text}"),
        Level::WARN => tracing::warn!(target: TARGET, actor = %actor, stream, "{text}"),
        Level::ERROR => tracing::error!(target: TARGET, actor = %actor, stream, "{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(i: usize) -> Line {
        Line {
            level: Level::ERROR,
            actor: ActorPath::parse("/user/a").expect("a path"),
            stream: "log",
            text: format!("line {i}"),
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let (tx, rx) = mpsc::sync_channel::<Line>(2);
        let log = GuestLog {
            tx,
            counters: Arc::default(),
        };
        for i in 0..5 {
            log.queue(line(i));
        }
        assert_eq!(log.dropped(), 3, "two fit, three are dropped");
        let kept: Vec<String> = rx.try_iter().map(|l| l.text).collect();
        assert_eq!(kept, ["line 0", "line 1"], "the oldest are kept, in order");
    }

    #[test]
    fn a_sink_whose_thread_is_gone_counts_every_line_as_dropped() {
        let (tx, rx) = mpsc::sync_channel::<Line>(8);
        drop(rx);
        let log = GuestLog {
            tx,
            counters: Arc::default(),
        };
        log.queue(line(0));
        assert_eq!(log.dropped(), 1);
    }

    #[test]
    fn queued_lines_reach_the_thread_and_flush_waits_for_them() {
        let log = GuestLog::start(16);
        for i in 0..10 {
            log.queue(line(i));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        assert!(runtime.block_on(log.flush(Duration::from_secs(10))));
        assert_eq!(log.dropped(), 0);
        assert_eq!(log.counters.written.load(Ordering::Acquire), 10);
    }
}
