//! The dashboard's feed: supervision decisions and dead letters as they happen, the recent ones
//! kept for a page that opens later, and each page's stream of server-sent events.
//!
//! Invariants:
//! - One task reads the host's subscriptions; pages read the feed, so a slow page never holds
//!   the host back (it skips what it fell behind on, and is told how many).
//! - Dead letters reach the feed at most [`FEED_PER_SECOND`](super::FEED_PER_SECOND) a second;
//!   past that they are counted, and one item a second says how many were left out.
//! - Supervision decisions are never rate-limited: each one is a failure an operator wants to
//!   see. At most [`KEEP`] are kept.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::sse::Event;
use futures_util::Stream;
use mote_host::ActorSystem;
use serde::Serialize;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::{FEED_PER_SECOND, Shared, snapshot};
use crate::progress::ProgressView;

/// Recent supervision decisions kept.
pub(crate) const KEEP: usize = 256;

/// One thing that happened.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum FeedItem {
    /// A supervision decision on a failed actor.
    Supervision {
        path: String,
        incarnation: u64,
        kind: String,
        error: String,
        directive: String,
    },
    /// A message that could not be delivered.
    DeadLetter {
        target: String,
        kind: String,
        sender: Option<String>,
        reason: String,
    },
    /// Dead letters left out of the feed past its rate.
    Skipped { dead_letters: u64 },
    /// Long work (a compile, an upgrade, a recovery) that ended.
    Finished(ProgressView),
}

/// The feed of one dashboard.
pub(crate) struct Feed {
    tx: broadcast::Sender<FeedItem>,
    recent: Arc<Mutex<VecDeque<FeedItem>>>,
}

impl Feed {
    /// Starts reading `system`'s supervision decisions and dead letters.
    pub(crate) fn start(system: &ActorSystem) -> Feed {
        let (tx, _) = broadcast::channel(1024);
        let recent = Arc::new(Mutex::new(VecDeque::with_capacity(KEEP)));
        let mut decisions = system.subscribe_supervision();
        let mut dead = system.subscribe_dead_letters();
        let mut progress = system.subscribe_progress();
        let (out, kept) = (tx.clone(), recent.clone());
        tokio::spawn(async move {
            let mut window = tokio::time::interval(Duration::from_secs(1));
            let (mut this_second, mut skipped) = (0usize, 0u64);
            loop {
                let item = tokio::select! {
                    decision = decisions.recv() => match decision {
                        Ok(d) => FeedItem::Supervision {
                            path: d.child.path.to_string(),
                            incarnation: d.child.incarnation,
                            kind: d.kind.name().to_owned(),
                            error: d.error,
                            directive: format!("{:?}", d.directive).to_lowercase(),
                        },
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return,
                    },
                    letter = dead.recv() => match letter {
                        Err(RecvError::Closed) => return,
                        Err(RecvError::Lagged(n)) => {
                            skipped += n;
                            continue;
                        }
                        Ok(_) if this_second >= FEED_PER_SECOND => {
                            skipped += 1;
                            continue;
                        }
                        Ok(letter) => {
                            this_second += 1;
                            FeedItem::DeadLetter {
                                target: letter.target,
                                kind: letter.envelope.kind,
                                sender: letter.envelope.sender.map(|s| s.to_string()),
                                reason: letter.reason.name().to_owned(),
                            }
                        }
                    },
                    update = progress.recv() => match update {
                        Ok(p) if p.outcome.is_some() => FeedItem::Finished(ProgressView::from(&p)),
                        Ok(_) | Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => return,
                    },
                    _ = window.tick() => {
                        this_second = 0;
                        if skipped == 0 {
                            continue;
                        }
                        FeedItem::Skipped { dead_letters: std::mem::take(&mut skipped) }
                    }
                };
                if matches!(item, FeedItem::Supervision { .. }) {
                    let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                    if kept.len() == KEEP {
                        kept.pop_front();
                    }
                    kept.push_back(item.clone());
                }
                let _ = out.send(item);
            }
        });
        Feed { tx, recent }
    }

    /// The kept supervision decisions about the actor at `path`, oldest first.
    pub(crate) fn failures_of(&self, path: &str) -> Vec<FeedItem> {
        let kept = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .filter(|i| matches!(i, FeedItem::Supervision { path: p, .. } if p == path))
            .cloned()
            .collect()
    }

    /// A page's events: the kept decisions first, then a `state` every `every` and each
    /// feed item as it comes.
    pub(crate) fn stream(
        &self,
        shared: Arc<Shared>,
        every: Duration,
    ) -> impl Stream<Item = Result<Event, Infallible>> + use<> {
        let backlog: VecDeque<FeedItem> = self
            .recent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let page = Page {
            rx: self.tx.subscribe(),
            tick: tokio::time::interval(every),
            backlog,
            shared,
        };
        futures_util::stream::unfold(page, |mut page| async move {
            let event = page.next().await;
            Some((Ok(event), page))
        })
    }
}

/// One page's position in the feed.
struct Page {
    rx: broadcast::Receiver<FeedItem>,
    tick: tokio::time::Interval,
    backlog: VecDeque<FeedItem>,
    shared: Arc<Shared>,
}

impl Page {
    async fn next(&mut self) -> Event {
        if let Some(item) = self.backlog.pop_front() {
            return item_event(&item);
        }
        loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    let state = snapshot(&self.shared);
                    return json_event("state", &state);
                }
                item = self.rx.recv() => match item {
                    Ok(item) => return item_event(&item),
                    Err(RecvError::Lagged(n)) => {
                        return item_event(&FeedItem::Skipped { dead_letters: n });
                    }
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        }
    }
}

fn item_event(item: &FeedItem) -> Event {
    let name = match item {
        FeedItem::Supervision { .. } => "supervision",
        FeedItem::DeadLetter { .. } | FeedItem::Skipped { .. } => "deadletter",
        FeedItem::Finished(_) => "finished",
    };
    json_event(name, item)
}

fn json_event(name: &str, value: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
}
