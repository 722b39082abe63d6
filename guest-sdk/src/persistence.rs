//! Persistence: the [`Context`] methods wrapping the `persistence` imports of the WIT contract,
//! and [`Recovery`], an actor's durable state as it starts.
//!
//! The host keeps, per persistence id (the actor's path unless
//! [`Context::set_persistence_id`] chose another), a snapshot, an event journal numbered
//! from 1, and reminders. An actor becomes persistent by calling [`Context::recover`] (or
//! [`Context::recover_snapshot`]), normally in `start`. From then on everything one hook
//! produces (snapshot, events, deletions, reminders and every message it sends) is committed
//! together when it returns, and only then released; if the commit fails the actor fails and
//! its supervisor restarts it from the last commit.
//!
//! Snapshots and events are any serde types, postcard-encoded (whatever the message types' body
//! encoding). A snapshot
//! covers every event up to the `seq` [`Context::save_snapshot`] returns, so recovery is the
//! snapshot, then the later events in order: [`Recovery::fold`] does both, [`Recovery::events`]
//! reads the events one by one, fetched lazily in pages of [`REPLAY_PAGE`].
//!
//! [`Context::remind`] is a durable timer to the actor itself: unlike
//! [`Context::schedule_self`] it survives a restart of the host (it arrives late then, never
//! lost) and needs [`Context::recover`] first.
//!
//! An event-sourced counter that snapshots every 100 events and drops the events it covers:
//!
//! ```no_run
//! use mote_guest::{Actor, Context, Result};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! pub enum Counter {
//!     Add(u64),
//!     Get,
//!     Value(u64),
//! }
//! mote_guest::message!(Counter);
//!
//! struct Total(u64);
//!
//! impl Actor for Total {
//!     type Msg = Counter;
//!
//!     fn start(ctx: &mut Context, _init: &[u8]) -> Result<Self> {
//!         // The snapshot is a `u64`, each event a `u64` to add.
//!         let total = ctx.recover::<u64, u64>()?.fold(|| 0, |total, k| *total += k)?;
//!         Ok(Self(total))
//!     }
//!
//!     fn receive(&mut self, ctx: &mut Context, msg: Counter) -> Result<()> {
//!         match msg {
//!             Counter::Add(k) => {
//!                 let seq = ctx.persist(&k)?;
//!                 self.0 += k;
//!                 if seq % 100 == 0 {
//!                     let covered = ctx.save_snapshot(&self.0)?;
//!                     ctx.delete_events(covered)?;
//!                 }
//!             }
//!             Counter::Get => ctx.reply(&Counter::Value(self.0))?,
//!             Counter::Value(_) => {}
//!         }
//!         Ok(())
//!     }
//! }
//!
//! mote_guest::export_actor!(Total);
//! # fn main() {}
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;
use std::collections::VecDeque;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::mote::actor::persistence::{self, Event, PersistError};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::message::{Message, encode};
use crate::timers::millis;

/// How many events [`Events`] asks the host for at a time.
pub const REPLAY_PAGE: u32 = 1024;

/// The host call that reads a page of events: `replay(after, max)`.
type Fetch = fn(u64, u32) -> core::result::Result<Vec<Event>, PersistError>;

impl Context {
    /// The key of this actor's durable state: its path unless [`Context::set_persistence_id`]
    /// chose another.
    pub fn persistence_id(&self) -> String {
        crate::outbox::flush();
        persistence::persistence_id()
    }

    /// Chooses another persistence id, stable across restarts; only before [`Context::recover`].
    pub fn set_persistence_id(&self, id: &str) -> Result<()> {
        crate::outbox::flush();
        persistence::set_persistence_id(id)
            .map_err(|e| Error::persist(format_args!("cannot set persistence id `{id}`"), e))
    }

    /// Makes this actor persistent and returns its durable state: the latest snapshot decoded
    /// as `S`, and the later events, decoded as `E` as they are read.
    pub fn recover<S: DeserializeOwned, E: DeserializeOwned>(&self) -> Result<Recovery<S, E>> {
        crate::outbox::flush();
        let snapshot = persistence::recover().map_err(|e| Error::persist("cannot recover", e))?;
        let (seq, state) = match snapshot {
            Some(snapshot) => {
                let state = from_bytes(&snapshot.state)
                    .map_err(|e| e.context(format_args!("snapshot at seq {}", snapshot.seq)))?;
                (snapshot.seq, Some(state))
            }
            None => (0, None),
        };
        Ok(Recovery {
            snapshot: state,
            snapshot_seq: seq,
            events: Events::new(seq, persistence::replay),
        })
    }

    /// Like [`Context::recover`] for an actor that keeps no events: the latest snapshot only
    /// (events, if any, are not read).
    pub fn recover_snapshot<S: DeserializeOwned>(&self) -> Result<Option<S>> {
        Ok(self.recover::<S, ()>()?.snapshot)
    }

    /// Replaces the snapshot with `state`, as of the latest event; returns that event's seq
    /// (0 if there is none), which the snapshot covers.
    pub fn save_snapshot<S: Serialize>(&self, state: &S) -> Result<u64> {
        let bytes = to_bytes(state, "snapshot")?;
        crate::outbox::flush();
        persistence::save_snapshot(&bytes).map_err(|e| Error::persist("cannot save a snapshot", e))
    }

    /// Appends an event to the journal; returns its seq (numbered from 1).
    pub fn persist<E: Serialize>(&self, event: &E) -> Result<u64> {
        let bytes = to_bytes(event, "event")?;
        crate::outbox::flush();
        persistence::persist(&bytes).map_err(|e| Error::persist("cannot persist an event", e))
    }

    /// Deletes the events up to and including `through` (typically after a snapshot covers them).
    pub fn delete_events(&self, through: u64) -> Result<()> {
        crate::outbox::flush();
        persistence::delete_events(through)
            .map_err(|e| Error::persist(format_args!("cannot delete events through {through}"), e))
    }

    /// Deletes the snapshot, every event and every reminder of this persistence id.
    pub fn delete_state(&self) -> Result<()> {
        crate::outbox::flush();
        persistence::delete_state().map_err(|e| Error::persist("cannot delete the state", e))
    }

    /// True while the host is shutting down: the time to save what must survive.
    pub fn in_shutdown(&self) -> bool {
        crate::outbox::flush();
        persistence::in_shutdown()
    }

    /// Sends `msg` to this actor after `delay`, then every `period` if one is given, even
    /// across host restarts; returns the reminder's id for [`Context::cancel_reminder`].
    pub fn remind<M: Message>(
        &self,
        msg: &M,
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64> {
        self.remind_raw(M::KIND, &encode(msg)?, delay, period)
    }

    /// Like [`Context::remind`], with an already encoded body of the given kind.
    pub fn remind_raw(
        &self,
        kind: &str,
        body: &[u8],
        delay: Duration,
        period: Option<Duration>,
    ) -> Result<u64> {
        crate::outbox::flush();
        persistence::remind(kind, body, millis(delay), period.map(millis))
            .map_err(|e| Error::persist(format_args!("cannot set a reminder `{kind}`"), e))
    }

    /// Cancels a reminder of this actor; false if unknown or already fired (one-shot).
    pub fn cancel_reminder(&self, id: u64) -> bool {
        crate::outbox::flush();
        persistence::cancel_reminder(id)
    }
}

/// An actor's durable state as [`Context::recover`] found it: the latest snapshot and the
/// events after it.
pub struct Recovery<S, E> {
    /// The latest snapshot, if one was saved.
    pub snapshot: Option<S>,
    /// The seq of the last event the snapshot covers (0 without a snapshot).
    pub snapshot_seq: u64,
    /// The events after the snapshot, in order, read as they are iterated.
    pub events: Events<E>,
}

impl<S, E: DeserializeOwned> Recovery<S, E> {
    /// Rebuilds the state: the snapshot (or `init()` without one), then `apply` for each later
    /// event in order; the first event that cannot be read is an error.
    pub fn fold(self, init: impl FnOnce() -> S, mut apply: impl FnMut(&mut S, E)) -> Result<S> {
        let mut state = self.snapshot.unwrap_or_else(init);
        for event in self.events {
            let (_, event) = event?;
            apply(&mut state, event);
        }
        Ok(state)
    }
}

impl<S, E> fmt::Debug for Recovery<S, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recovery")
            .field("snapshot", &self.snapshot.as_ref().map(|_| ".."))
            .field("snapshot_seq", &self.snapshot_seq)
            .field("events", &self.events)
            .finish()
    }
}

/// The journaled events after a seq, as `(seq, event)` in order, read from the host a page
/// ([`REPLAY_PAGE`] events) at a time. After an error it yields nothing more.
pub struct Events<E> {
    /// The seq of the last event yielded (at first, the seq they follow).
    after: u64,
    /// Fetched events not yet yielded.
    page: VecDeque<Event>,
    /// Whether the host has no more events (or an error ended the iteration).
    done: bool,
    fetch: Fetch,
    decoded: PhantomData<fn() -> E>,
}

impl<E> Events<E> {
    /// The events after `after`, read with `fetch`.
    fn new(after: u64, fetch: Fetch) -> Self {
        Self {
            after,
            page: VecDeque::new(),
            done: false,
            fetch,
            decoded: PhantomData,
        }
    }

    /// The seq of the last event yielded, or the seq the events follow if none was yet.
    pub fn last_seq(&self) -> u64 {
        self.after
    }
}

impl<E: DeserializeOwned> Iterator for Events<E> {
    type Item = Result<(u64, E)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.page.is_empty() && !self.done {
            match (self.fetch)(self.after, REPLAY_PAGE) {
                Ok(page) => {
                    self.done = page.len() < REPLAY_PAGE as usize;
                    self.page = page.into();
                }
                Err(e) => {
                    self.done = true;
                    let action = format_args!("cannot replay events after seq {}", self.after);
                    return Some(Err(Error::persist(action, e)));
                }
            }
        }
        let event = self.page.pop_front()?;
        if event.seq <= self.after {
            self.stop();
            let why = format!("event seq {} after seq {}", event.seq, self.after);
            return Some(Err(Error::msg(format!("replay out of order: {why}"))));
        }
        self.after = event.seq;
        match from_bytes(&event.data) {
            Ok(data) => Some(Ok((event.seq, data))),
            Err(e) => {
                self.stop();
                Some(Err(e.context(format_args!("event {}", event.seq))))
            }
        }
    }
}

impl<E> Events<E> {
    /// Ends the iteration.
    fn stop(&mut self) {
        self.done = true;
        self.page.clear();
    }
}

impl<E> fmt::Debug for Events<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("after", &self.after)
            .field("buffered", &self.page.len())
            .field("done", &self.done)
            .finish()
    }
}

/// Encodes a snapshot or event (`what`) with postcard.
fn to_bytes<T: Serialize>(value: &T, what: &str) -> Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| Error::msg(format!("cannot encode the {what}: {e}")))
}

/// Decodes a snapshot or event: an error if it is malformed or has trailing bytes.
fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(Error::msg(format!(
            "malformed: {} trailing bytes",
            rest.len()
        ))),
        Err(e) => Err(Error::msg(format!("malformed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events 1..=2_500 of value `seq * 10`, served like the host's `replay`.
    fn journal(after: u64, max: u32) -> core::result::Result<Vec<Event>, PersistError> {
        Ok((after + 1..=2_500)
            .take(max as usize)
            .map(|seq| Event {
                seq,
                data: postcard::to_allocvec(&(seq * 10)).unwrap_or_default(),
            })
            .collect())
    }

    fn failing(_: u64, _: u32) -> core::result::Result<Vec<Event>, PersistError> {
        Err(PersistError::Storage("disk gone".into()))
    }

    fn garbled(after: u64, _: u32) -> core::result::Result<Vec<Event>, PersistError> {
        let event = |seq, data: &[u8]| Event {
            seq,
            data: data.to_vec(),
        };
        Ok(if after == 0 {
            vec![event(1, &[7]), event(2, &[7, 7]), event(3, &[7])]
        } else {
            Vec::new()
        })
    }

    #[test]
    fn events_are_read_in_pages_until_a_short_one() -> Result<()> {
        let events = Events::<u64>::new(0, journal).collect::<Result<Vec<_>>>()?;
        assert_eq!(events.len(), 2_500);
        assert!(events.iter().all(|&(seq, value)| value == seq * 10));
        assert_eq!(events.first(), Some(&(1, 10)));
        assert_eq!(events.last(), Some(&(2_500, 25_000)));

        let mut events = Events::<u64>::new(2_000, journal);
        assert_eq!(events.last_seq(), 2_000);
        assert_eq!(events.next().transpose()?, Some((2_001, 20_010)));
        assert_eq!(events.last_seq(), 2_001);
        assert_eq!(events.count(), 499);
        Ok(())
    }

    #[test]
    fn fold_starts_from_the_snapshot() -> Result<()> {
        let recovery = Recovery {
            snapshot: Some(vec![0_u64]),
            snapshot_seq: 2_498,
            events: Events::<u64>::new(2_498, journal),
        };
        let state = recovery.fold(Vec::new, |values, value| values.push(value))?;
        assert_eq!(state, [0, 24_990, 25_000]);
        let recovery = Recovery {
            snapshot: None,
            snapshot_seq: 0,
            events: Events::<u64>::new(0, journal),
        };
        assert_eq!(recovery.fold(|| 1, |sum, value| *sum += value)?, 31_262_501);
        Ok(())
    }

    #[test]
    fn errors_end_the_events() {
        let mut events = Events::<u64>::new(5, failing);
        let error = events.next().and_then(Result::err).map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("cannot replay events after seq 5: storage failed: disk gone")
        );
        assert!(events.next().is_none());

        let mut events = Events::<u8>::new(0, garbled);
        assert_eq!(events.next().and_then(Result::ok), Some((1, 7)));
        let error = events.next().and_then(Result::err).map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("event 2: malformed: 1 trailing bytes")
        );
        assert!(events.next().is_none());
    }

    #[test]
    fn encoding_round_trips() -> Result<()> {
        let bytes = to_bytes(&(3_u64, String::from("x")), "event")?;
        assert_eq!(from_bytes::<(u64, String)>(&bytes)?, (3, "x".to_string()));
        assert!(from_bytes::<u64>(&[]).is_err());
        Ok(())
    }
}
