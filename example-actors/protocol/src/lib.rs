//! Message types spoken by the example actors, shared with the host's tests and benchmarks.
//!
//! Each type's wire kind is its bare name (see [`mote_guest::message!`]) and its body is
//! postcard-encoded, but for the echo-worker's ([`Square`], [`GetValue`]...), which are JSON.
//! Actor init bytes are UTF-8 words, split by [`init_words`] and parsed by [`init_arg`] and
//! [`init_opt`]; [`report`] sends a [`Report`] to an observer. `Ledger`,
//! `Journal`, `Entity` and `Remind` are spoken by the persistent actors; `Versioned` by the
//! versioned counters of the hot swap tests, which carry a [`VersionedCore`] across upgrades.

use core::fmt::Display;
use core::str::FromStr;

use mote_guest::{Context, Error, Result};
use serde::{Deserialize, Serialize};

/// The ping-pong game (Dust §2.8): `Ping(n)` is answered by `Pong(n)`; `Done` ends the game.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum PingPong {
    /// Round `n` from the pinger.
    Ping(u32),
    /// The ponger's answer to `Ping(n)`.
    Pong(u32),
    /// The game is over.
    Done,
}

/// The Savina-style workloads (thread ring, chain, fork-join, big mesh) of `mote-bench`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Savina {
    /// A token with this many hops left (ring and chain).
    Token(u64),
    /// To be answered with `Pong` (fork-join and big).
    Ping,
    /// The answer to a `Ping`.
    Pong,
    /// Big mesh: begin sending pings.
    Start,
}

/// A counter: `Add` to it, `Get` it and receive its `Value`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Counter {
    /// Adds to the count.
    Add(u64),
    /// Asks for a `Value` reply.
    Get,
    /// The count, in answer to `Get`.
    Value(u64),
}

/// Message `n` of numbered stream `stream`, for checking delivery order.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Seq {
    /// The stream this message belongs to.
    pub stream: u32,
    /// Its position in the stream, from 0.
    pub n: u32,
}

/// A measurement an actor reports to an observer: `label` = `value`, from actor path `from`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Report {
    /// The reporting actor's path.
    pub from: String,
    /// What is reported.
    pub label: String,
    /// The reported value.
    pub value: u64,
}

/// Ways to make the crasher actor misbehave (or, for `Echo`, behave).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Crash {
    /// Panics (a trap, as guests abort on panic).
    Panic,
    /// Executes the `unreachable` instruction.
    Unreachable,
    /// Returns this error from `receive`.
    Fail(String),
    /// Replies `Echo(n)`: proof of life.
    Echo(u32),
    /// Loops forever.
    Spin,
    /// Allocates and keeps this many MiB.
    Alloc(u32),
    /// Recurses this deep with a large stack frame.
    Recurse(u32),
    /// Adds one to the crasher's count and replies `Echo(count)`: shows whether state survived.
    Bump,
    /// Allocates and keeps this many MiB, every byte written with pseudo-random data (state
    /// that neither a zero page nor compression shrinks).
    Fill(u32),
    /// Replies `Echo(n)`, then sends `Echo(n + 1)` to the sender as a plain tell: the two must
    /// arrive in that order.
    ReplyThenTell(u32),
    /// Replies `Echo(n)`, then panics.
    ReplyThenPanic(u32),
    /// Replies `Echo(n)`, then returns an error.
    ReplyThenFail(u32),
}

/// Orders for the relay actor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Relay {
    /// Sends `Counter::Add(k)` to every child.
    Broadcast(u64),
    /// Collects every child's count and reports the sum.
    Collect,
}

/// Orders for the watcher actor: watch or stop watching an incarnation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Watch {
    /// Watch the incarnation `incarnation` at `path`.
    Watch {
        /// Its actor path.
        path: String,
        /// Its incarnation id.
        incarnation: u64,
    },
    /// Stop watching the incarnation `incarnation` at `path`.
    Unwatch {
        /// Its actor path.
        path: String,
        /// Its incarnation id.
        incarnation: u64,
    },
}

/// Messages for the gate actor, which holds items back while closed.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Gate {
    /// Opens the gate, letting the held items through first.
    Open,
    /// Closes the gate.
    Close,
    /// An item, reported when it passes the open gate.
    Item(u32),
    /// Traps: the gate restarts, closed, with its stash as it was.
    Fail,
    /// Takes the oldest stashed message of this kind out of order and reports its body's
    /// first byte as `took` (`none` if there is none).
    Take(String),
    /// Reports the first byte of the oldest stashed message of this kind as `peeked`, leaving
    /// it stashed (`none` if there is none).
    Peek(String),
    /// Reports how many messages the stash holds, as `stashed`.
    Stashed,
}

/// The lanes actors: a parent (`boss`) that pauses its worker and sends it urgent messages,
/// and the worker, which reports each `Work(n)` it handles as `work` = `n`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Lane {
    /// Worker: reports `work` = `n`.
    Work(u32),
    /// Boss: deactivates its worker; reports `paused` = 1 (0 if refused).
    Pause,
    /// Boss: activates its worker; reports `resumed` = 1 (0 if refused).
    Resume,
    /// Boss: sends `Work(n)` to its worker on the urgent lane.
    Urgent(u32),
    /// Boss: tries to deactivate the actor at this path; reports `paused` = 1 (0 if refused).
    PauseOther(String),
}

/// Orders for the ticker actor, and the `Fired` message its timers deliver.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Timer {
    /// Fires `Fired { tag }` at the ticker once, after `delay_ms`.
    Once {
        /// Milliseconds before it fires.
        delay_ms: u64,
        /// Names the timer and its `Fired` message.
        tag: u32,
    },
    /// Fires `Fired { tag }` at the ticker every `period_ms`, the first after one period.
    Every {
        /// Milliseconds between firings.
        period_ms: u64,
        /// Names the timer and its `Fired` messages.
        tag: u32,
    },
    /// Cancels the timer `tag`.
    Cancel {
        /// The timer to cancel.
        tag: u32,
    },
    /// A timer `tag` fired.
    Fired {
        /// The timer that fired.
        tag: u32,
    },
    /// Sends a `tick` report to the sender every `period_ms`, the first after one period.
    EveryToSender {
        /// Milliseconds between reports.
        period_ms: u64,
        /// Names the timer; the value of its reports.
        tag: u32,
    },
    /// Sends `Fired { tag }` to the sender once, after `delay_ms` (a late reply to an ask).
    ReplyAfter {
        /// Milliseconds before the reply.
        delay_ms: u64,
        /// Names the timer and its `Fired` reply.
        tag: u32,
    },
}

/// Orders for the asker actor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Asking {
    /// Asks the incarnation `incarnation` at `path`, with a deadline of `timeout_ms`: a counter
    /// for its value (`get`), else a ticker for a reply after three times the deadline.
    Ask {
        /// The asked actor's path.
        path: String,
        /// The asked actor's incarnation.
        incarnation: u64,
        /// Milliseconds to wait for the reply.
        timeout_ms: u64,
        /// `Counter::Get` if true, else `Timer::ReplyAfter`.
        get: bool,
    },
}

/// The ledger chain of the crash test: a source sends `Inc` to a relay, which counts and
/// sends `Count(n)` to a sink; `Next` drives the source. Every mode answers `Query` with a
/// [`LedgerState`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Ledger {
    /// The source's step to itself: send one more `Inc`.
    Next,
    /// One increment, from the source to the relay.
    Inc,
    /// The relay's count after an increment, to the sink.
    Count(u64),
    /// Asks for a `LedgerState` reply.
    Query,
    /// A stasher takes everything it has stashed now, without waiting for a full batch.
    Flush,
}

/// A ledger actor's state, in answer to `Ledger::Query` (a source's `count` is what it sent).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct LedgerState {
    /// The last count seen (sent, for a source).
    pub count: u64,
    /// The sum of the counts taken.
    pub sum: u64,
    /// Counts received again (at most the last count seen).
    pub dups: u64,
    /// Counts that skipped at least one number.
    pub gaps: u64,
}

/// Questions for the finder actor; each is answered with `Found`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Find {
    /// Its live children.
    Children,
    /// The actor living at this path (absolute or relative to the finder).
    Resolve(String),
    /// Panics, for its supervisor to restart it.
    Crash,
    /// Takes an alias: answered with its path (incarnation 0), or nothing if refused.
    Alias(String),
}

/// Addresses as (path, incarnation), in the order the host gave them.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Found(pub Vec<(String, u64)>);

/// Orders for the event-sourced journal actor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Journal {
    /// Journals a value and appends it.
    Append(u64),
    /// Asks for a `JournalState` reply.
    Query,
    /// Deletes the journal's durable state and stops it.
    Forget,
    /// Panics, for its supervisor to restart it from the store.
    Crash,
    /// Journals `count` values `from, from + 1, ...` in one step (one commit).
    AppendRange {
        /// The first value.
        from: u64,
        /// How many values.
        count: u64,
    },
}

/// The journal's state, in answer to `Journal::Query`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct JournalState {
    /// The values appended, in order.
    pub values: Vec<u64>,
    /// Whether recovery started from a snapshot.
    pub recovered_from_snapshot: bool,
    /// How many events recovery replayed after the snapshot.
    pub replayed: u64,
}

/// Orders for the entity actor, a durable counter named by its entity id.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Entity {
    /// Adds to the total.
    Add(u64),
    /// Asks for an `EntityValue` reply.
    Get,
    /// Deletes the entity's durable state and stops it.
    Retire,
    /// Stops it, keeping its state for the next activation.
    Stop,
    /// Adds to the total after a busy wait of `ms` milliseconds (it logs when it begins): a
    /// step long enough for a test to pause its node in the middle of it.
    SlowAdd {
        /// What to add.
        k: u64,
        /// How long to be busy first.
        ms: u64,
    },
}

/// An entity's state, in answer to `Entity::Get`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct EntityValue {
    /// The entity id (its init bytes).
    pub id: String,
    /// The sum of its `Add`s.
    pub total: u64,
    /// How many times it started, this one included.
    pub activations: u64,
}

/// Orders for the reminder actor, and the `Fired` message its reminders deliver.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Remind {
    /// Sets a reminder that fires `Fired(tag)` once, after `delay_ms`.
    Arm {
        /// The value of its `Fired` message.
        tag: u64,
        /// Milliseconds before it fires.
        delay_ms: u64,
    },
    /// Sets a reminder that fires `Fired(tag)` every `period_ms`, the first after one period.
    ArmPeriodic {
        /// The value of its `Fired` messages.
        tag: u64,
        /// Milliseconds between firings.
        period_ms: u64,
    },
    /// Cancels the reminder with this id.
    Cancel(u64),
    /// A reminder with this tag fired.
    Fired(u64),
}

/// Orders for the clock actor, which reads the `clock` interface.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Clock {
    /// Asks for a `ClockReading` reply.
    Read,
    /// Does `rounds` rounds of busy work, then replies a `ClockReading`.
    Burn(u64),
    /// Replies a `ClockReading` after `delay_ms`, idle meanwhile (a timer wakes it).
    ReadAfter(u64),
    /// The timer of a `ReadAfter`.
    Due,
    /// Panics (to be restarted).
    Crash,
}

/// What the clock actor read, in nanoseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// Since the actor was spawned.
    pub since_start_ns: u64,
    /// Time its calls have run.
    pub cpu_ns: u64,
    /// Whether the instance that answered replaced a failed one.
    pub restarted: bool,
    /// The result of the busy work, so it cannot be optimised away.
    pub work: u64,
}

/// Orders for the versioned counters `versioned-v1`, `-v2` and `-v3`, the hot swap test
/// actors: each counts `Add`s on numbered streams, whose values should run 0, 1, 2, ...
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Versioned {
    /// Counts `n` on `stream`; out of order unless it is one more than the stream's last
    /// value (0 for a stream's first).
    Add {
        /// The stream.
        stream: u32,
        /// The value.
        n: u32,
    },
    /// Asks for a `VersionedState` reply.
    Get,
    /// Panics.
    Crash,
}

/// A versioned counter's state, in answer to `Versioned::Get`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct VersionedState {
    /// The version of the module that answered (1, 2 or 3).
    pub version: u32,
    /// How many `Add`s were counted.
    pub count: u64,
    /// The sum of their values.
    pub sum: u64,
    /// The last value seen per stream, sorted by stream.
    pub last: Vec<(u32, u32)>,
    /// How many `Add`s were out of order.
    pub out_of_order: u64,
    /// The module version this instance was migrated from (empty if it started afresh).
    pub migrated_from: String,
}

/// The state every versioned counter saves in a hot swap and takes in `migrate` (postcard),
/// whatever the version: so any version can upgrade to, or roll back to, any other.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct VersionedCore {
    /// How many `Add`s were counted.
    pub count: u64,
    /// The sum of their values.
    pub sum: u64,
    /// The last value seen per stream, sorted by stream.
    pub last: Vec<(u32, u32)>,
    /// How many `Add`s were out of order.
    pub out_of_order: u64,
}

impl VersionedCore {
    /// Counts `n` on `stream`.
    pub fn add(&mut self, stream: u32, n: u32) {
        self.count += 1;
        self.sum += u64::from(n);
        match self.last.binary_search_by_key(&stream, |&(s, _)| s) {
            Ok(i) => {
                if n != self.last[i].1.wrapping_add(1) {
                    self.out_of_order += 1;
                }
                self.last[i].1 = n;
            }
            Err(i) => {
                if n != 0 {
                    self.out_of_order += 1;
                }
                self.last.insert(i, (stream, n));
            }
        }
    }

    /// The reply to `Get` from `version`, migrated from `migrated_from` (empty if none).
    pub fn state(&self, version: u32, migrated_from: &str) -> VersionedState {
        VersionedState {
            version,
            count: self.count,
            sum: self.sum,
            last: self.last.clone(),
            out_of_order: self.out_of_order,
            migrated_from: migrated_from.to_string(),
        }
    }
}

/// The fetcher's requests (HTTP call-outs), each answered with a [`Fetched`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Fetch {
    /// Starts a call-out `GET url` (timeout in ms, 0 for the host's maximum); answered at once
    /// with `Started(id)` or `Refused(why)`, the outcome goes to the fetcher's observer later.
    Get {
        /// The URL.
        url: String,
        /// The timeout, in ms.
        timeout_ms: u64,
    },
    /// Starts `n` call-outs of `url` at once; answered with `Burst`.
    Burst {
        /// The URL.
        url: String,
        /// How many.
        n: u32,
    },
    /// Answered with `Pong(n)` at once: the fetcher is responsive.
    Ping(u32),
    /// Panics, so that its supervisor restarts it.
    Crash,
}

/// What the fetcher answers, and what it tells its observer of an outcome.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub enum Fetched {
    /// A call-out started with this id.
    Started(u64),
    /// A call-out was refused (the host's error, debug-printed).
    Refused(String),
    /// Of a burst: how many started, how many were refused and the last refusal.
    Burst {
        /// Started.
        started: u32,
        /// Refused.
        refused: u32,
        /// The last refusal (debug-printed), empty if none.
        why: String,
    },
    /// The answer to `Ping(n)`.
    Pong(u32),
    /// Call-out `id` got a response.
    Response {
        /// The call-out id.
        id: u64,
        /// The status code.
        status: u16,
        /// The body.
        body: Vec<u8>,
    },
    /// Call-out `id` got no response (the host's error, debug-printed).
    Failed {
        /// The call-out id.
        id: u64,
        /// Why.
        error: String,
    },
}

/// Asks the echo-worker for the square of `n` (JSON, kind `square`); answered with
/// [`Squared`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Square {
    /// The number.
    pub n: i64,
}

/// The echo-worker's answer to [`Square`] (JSON, kind `squared`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Squared {
    /// The square.
    pub n: i64,
}

/// Asks the echo-worker for its value (JSON, kind `get-value`); answered with
/// [`WorkerValue`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct GetValue {}

/// The echo-worker's value, the number its init names (JSON, kind `value`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct WorkerValue {
    /// The value.
    pub value: i64,
}

// The echo-worker speaks JSON, so that the pattern components (the reaper's reductions)
// can read its answers.
mote_guest::json_message!(
    Square = "square",
    Squared = "squared",
    GetValue = "get-value",
    WorkerValue = "value",
);

mote_guest::message!(
    PingPong,
    Savina,
    Counter,
    Seq,
    Report,
    Crash,
    Relay,
    Watch,
    Gate,
    Lane,
    Timer,
    Asking,
    Ledger,
    LedgerState,
    Journal,
    JournalState,
    Entity,
    EntityValue,
    Remind,
    Clock,
    ClockReading,
    Find,
    Found,
    Fetch,
    Fetched,
);

mote_guest::message!(Versioned, VersionedState);

/// Splits init bytes, UTF-8 text, into whitespace-separated words (invalid UTF-8 gives none).
pub fn init_words(init: &[u8]) -> Vec<&str> {
    std::str::from_utf8(init)
        .map(|text| text.split_whitespace().collect())
        .unwrap_or_default()
}

/// Parses the required init word at `index`, called `name` in errors.
pub fn init_arg<T>(words: &[&str], index: usize, name: &str) -> Result<T>
where
    T: FromStr,
    T::Err: Display,
{
    init_opt(words, index, name)?
        .ok_or_else(|| Error::msg(format!("missing init argument <{name}>")))
}

/// Parses the optional init word at `index` (`None` if absent), called `name` in errors.
pub fn init_opt<T>(words: &[&str], index: usize, name: &str) -> Result<Option<T>>
where
    T: FromStr,
    T::Err: Display,
{
    words
        .get(index)
        .map(|word| {
            word.parse()
                .map_err(|e| Error::msg(format!("bad init argument <{name}> `{word}`: {e}")))
        })
        .transpose()
}

/// Sends `Report { from: <this actor's path>, label, value }` to path `to`, if one is given.
pub fn report(ctx: &Context, to: Option<&str>, label: &str, value: u64) -> Result<()> {
    let Some(to) = to else { return Ok(()) };
    let report = Report {
        from: ctx.myself().path,
        label: label.to_string(),
        value,
    };
    ctx.tell_path(to, &report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_guest::Message;

    #[test]
    fn kinds_are_type_names() {
        assert_eq!(PingPong::KIND, "PingPong");
        assert_eq!(Report::KIND, "Report");
        assert_eq!(Watch::KIND, "Watch");
        assert_eq!(Gate::KIND, "Gate");
        assert_eq!(Timer::KIND, "Timer");
        assert_eq!(Asking::KIND, "Asking");
        assert_eq!(Ledger::KIND, "Ledger");
        assert_eq!(LedgerState::KIND, "LedgerState");
        assert_eq!(JournalState::KIND, "JournalState");
        assert_eq!(EntityValue::KIND, "EntityValue");
        assert_eq!(Remind::KIND, "Remind");
        assert_eq!(Versioned::KIND, "Versioned");
        assert_eq!(VersionedState::KIND, "VersionedState");
    }

    #[test]
    fn versioned_core_counts_streams_and_gaps() -> Result<()> {
        let mut core = VersionedCore::default();
        for (stream, n) in [(2, 0), (1, 0), (2, 1), (2, 3), (1, 1), (3, 5)] {
            core.add(stream, n);
        }
        let state = core.state(2, "1");
        let expected = VersionedState {
            version: 2,
            count: 6,
            sum: 10,
            last: vec![(1, 1), (2, 3), (3, 5)],
            out_of_order: 2,
            migrated_from: "1".to_string(),
        };
        assert_eq!(state, expected);
        let saved = mote_guest::state(&core)?.unwrap_or_default();
        assert_eq!(mote_guest::from_state::<VersionedCore>(&saved)?, core);
        let add = Versioned::Add { stream: 1, n: 2 };
        assert_eq!(mote_guest::encode(&add)?, [0, 1, 2]);
        assert_eq!(mote_guest::encode(&Versioned::Crash)?, [2]);
        Ok(())
    }

    #[test]
    fn appended_variants_keep_earlier_encodings() -> Result<()> {
        assert_eq!(mote_guest::encode(&Crash::Echo(7))?, [3, 7]);
        assert_eq!(mote_guest::encode(&Crash::Bump)?, [7]);
        let watch = Watch::Unwatch {
            path: "/a".to_string(),
            incarnation: 2,
        };
        assert_eq!(mote_guest::encode(&watch)?, [1, 2, b'/', b'a', 2]);
        assert_eq!(mote_guest::encode(&Gate::Item(5))?, [2, 5]);
        let once = Timer::Once {
            delay_ms: 300,
            tag: 1,
        };
        assert_eq!(mote_guest::encode(&once)?, [0, 0xac, 0x02, 1]);
        let late = Timer::ReplyAfter {
            delay_ms: 3,
            tag: 7,
        };
        assert_eq!(mote_guest::encode(&late)?, [5, 3, 7]);
        let ask = Asking::Ask {
            path: "/a".to_string(),
            incarnation: 2,
            timeout_ms: 50,
            get: true,
        };
        assert_eq!(mote_guest::encode(&ask)?, [0, 2, b'/', b'a', 2, 50, 1]);
        assert_eq!(mote_guest::encode(&Ledger::Count(5))?, [2, 5]);
        assert_eq!(mote_guest::encode(&Journal::Crash)?, [3]);
        assert_eq!(mote_guest::encode(&Entity::Stop)?, [3]);
        let arm = Remind::Arm {
            tag: 4,
            delay_ms: 10,
        };
        assert_eq!(mote_guest::encode(&arm)?, [0, 4, 10]);
        assert_eq!(mote_guest::encode(&Remind::Fired(9))?, [3, 9]);
        Ok(())
    }

    #[test]
    fn words() {
        assert_eq!(
            init_words(b" ping  /user/b 10\n"),
            ["ping", "/user/b", "10"]
        );
        assert!(init_words(&[0xff]).is_empty());
    }

    #[test]
    fn args() -> Result<()> {
        let words = init_words(b"ping /user/b 10");
        assert_eq!(init_arg::<u32>(&words, 2, "rounds")?, 10);
        assert_eq!(init_opt::<String>(&words, 3, "report")?, None);
        let missing = init_arg::<u32>(&words, 5, "x").err().map(|e| e.to_string());
        assert_eq!(missing.as_deref(), Some("missing init argument <x>"));
        let bad = init_arg::<u32>(&words, 1, "rounds")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            bad.as_deref(),
            Some("bad init argument <rounds> `/user/b`: invalid digit found in string")
        );
        Ok(())
    }
}

/// The versioned counter that `versioned-v1` and `versioned-v2` export, as `VERSION` 1 and 2
/// (`versioned-v3`, whose `migrate` fails, has its own).
///
/// `Add { stream, n }` counts (see [`VersionedCore::add`]); `Get` replies a [`VersionedState`]
/// with this `VERSION`; `Crash` panics. In a hot swap it saves its [`VersionedCore`], and
/// `migrate` takes one from any version (so a rollback keeps the counts), remembering that
/// version as `migrated_from`.
pub struct VersionedCounter<const VERSION: u32> {
    core: VersionedCore,
    /// The version this instance was migrated from (empty if it started afresh).
    migrated_from: String,
}

impl<const VERSION: u32> mote_guest::Actor for VersionedCounter<VERSION> {
    type Msg = Versioned;

    fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
        Ok(Self {
            core: VersionedCore::default(),
            migrated_from: String::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Versioned) -> Result<()> {
        match msg {
            Versioned::Add { stream, n } => self.core.add(stream, n),
            Versioned::Get if ctx.sender().is_some() => {
                ctx.reply(&self.core.state(VERSION, &self.migrated_from))?;
            }
            Versioned::Get => ctx.debug("ignoring a Get without a sender"),
            Versioned::Crash => panic!("versioned v{VERSION}: crash requested"),
        }
        Ok(())
    }

    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        mote_guest::state(&self.core)
    }

    fn migrate(ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
        let core: VersionedCore = mote_guest::from_state(state)?;
        ctx.info(&format!(
            "v{VERSION}: migrated from `{from_version}` at count {}",
            core.count
        ));
        Ok(Self {
            core,
            migrated_from: from_version.to_string(),
        })
    }
}
