//! Quotas: the bounds the host keeps on what one actor may hold or ask for through its imports,
//! so that nothing an actor does costs the host more than its quotas allow. Each quota has a
//! documented default, is set per host ([`HostConfig::quotas`](crate::HostConfig::quotas) or a
//! manifest's `[quotas]`), and a refusal names it: a typed error the guest sees, a counter the
//! operator sees ([`Refusals`]).
//!
//! Invariants:
//! - A refusal changes nothing: the call that was refused left no timer, subscription, ask or
//!   reminder behind.
//! - Every refusal of an actor is counted once, by its kind, for the life of its incarnation
//!   (restarts and upgrades keep counting).

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One kind of bound; what a refusal names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Quota {
    /// Timers pending at once.
    Timers,
    /// A periodic timer or reminder shorter than the minimum period.
    TimerPeriod,
    /// Reminders pending at once.
    Reminders,
    /// Topics subscribed at once.
    Subscriptions,
    /// Groups joined at once.
    Groups,
    /// Asks awaiting their reply at once.
    Asks,
    /// An ask deadline past the maximum.
    AskDeadline,
    /// Live descendants (a spawn at any ancestor's bound).
    Descendants,
    /// Incarnations watched at once.
    Watches,
    /// A spawn's init past the message size limit.
    InitSize,
    /// Aliases held at once.
    Aliases,
    /// Messages (or bytes of them) held in the stash at once.
    Stash,
    /// A name, path, topic, group or kind past the maximum length.
    NameLength,
    /// A message kind starting `mote.` (not a quota, but refused and counted the same way).
    ReservedKind,
    /// A persistence id in another owner's scope (likewise).
    NotOwned,
    /// Log lines past the log budget (dropped, not refused: the guest is not told).
    Log,
    /// HTTP call-outs in flight or uncollected at once.
    Callouts,
    /// A call-out timeout past the maximum.
    CalloutTimeout,
    /// A call-out response body past the maximum (the outcome is `too-large`).
    CalloutBody,
}

impl Quota {
    /// Every kind, in counter order.
    pub const ALL: [Quota; 19] = [
        Quota::Timers,
        Quota::TimerPeriod,
        Quota::Reminders,
        Quota::Subscriptions,
        Quota::Groups,
        Quota::Asks,
        Quota::AskDeadline,
        Quota::Descendants,
        Quota::Watches,
        Quota::InitSize,
        Quota::Aliases,
        Quota::Stash,
        Quota::NameLength,
        Quota::ReservedKind,
        Quota::NotOwned,
        Quota::Log,
        Quota::Callouts,
        Quota::CalloutTimeout,
        Quota::CalloutBody,
    ];

    /// The name used in counters, `mote tree` and the docs.
    pub fn name(self) -> &'static str {
        match self {
            Quota::Timers => "timers",
            Quota::TimerPeriod => "timer-period",
            Quota::Reminders => "reminders",
            Quota::Subscriptions => "subscriptions",
            Quota::Groups => "groups",
            Quota::Asks => "asks",
            Quota::AskDeadline => "ask-deadline",
            Quota::Descendants => "descendants",
            Quota::Watches => "watches",
            Quota::InitSize => "init-size",
            Quota::Aliases => "aliases",
            Quota::Stash => "stash",
            Quota::NameLength => "name-length",
            Quota::ReservedKind => "reserved-kind",
            Quota::NotOwned => "not-owned",
            Quota::Log => "log",
            Quota::Callouts => "callouts",
            Quota::CalloutTimeout => "callout-timeout",
            Quota::CalloutBody => "callout-body",
        }
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kinds of messages starting with this are the host's own: guests cannot send them.
pub const RESERVED_KIND_PREFIX: &str = "mote.";

/// The bounds of one actor. [`Quotas::default`] gives the documented defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quotas {
    /// Timers an actor may have pending at once (default 1,000).
    pub timers: usize,
    /// The shortest period of a periodic timer or reminder (default 10 ms).
    pub min_timer_period: Duration,
    /// Reminders an actor may have pending at once (default 1,000).
    pub reminders: usize,
    /// Topics an actor may subscribe to at once (default 1,000).
    pub subscriptions: usize,
    /// Groups an actor may belong to at once (default 1,000).
    pub groups: usize,
    /// Asks an actor may have awaiting a reply at once (default 1,000).
    pub asks: usize,
    /// The longest ask deadline (default 5 minutes).
    pub max_ask_deadline: Duration,
    /// The longest name, topic, group or kind, in bytes (default 256).
    pub max_name_bytes: usize,
    /// The longest actor path, in bytes (default 1,024): this bounds the depth of a tree too.
    pub max_path_bytes: usize,
    /// Log lines an actor may write per second, on average (default 100).
    pub log_lines_per_second: u32,
    /// Log lines an actor may write in one burst (default 200).
    pub log_burst: u32,
    /// The longest log line kept, in bytes (default 1,024): a longer one is cut.
    pub log_line_bytes: usize,
    /// Incarnations an actor may watch at once (default 1,000).
    pub watches: usize,
    /// Aliases an actor may hold at once (default 16).
    pub aliases: usize,
    /// Messages an actor may hold in its stash at once (default 10,000).
    pub stash: usize,
    /// Bytes of message bodies an actor may hold in its stash at once (default 32 MiB).
    pub stash_bytes: usize,
    /// Live descendants an actor may have at once: children, their children and so on
    /// (default 10,000). A spawn past it, at any ancestor, is refused.
    pub descendants: usize,
    /// HTTP call-outs an actor may have at once, in flight or with an outcome not yet taken
    /// (default 64).
    pub callouts: usize,
    /// The longest timeout of a call-out (default 60 s); a request's 0 means this.
    pub max_callout_timeout: Duration,
    /// The largest call-out response body, in bytes (default 4 MiB); past it the outcome is
    /// `too-large`.
    pub max_callout_response_bytes: usize,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            timers: 1_000,
            min_timer_period: Duration::from_millis(10),
            reminders: 1_000,
            subscriptions: 1_000,
            groups: 1_000,
            asks: 1_000,
            max_ask_deadline: Duration::from_secs(300),
            max_name_bytes: 256,
            max_path_bytes: 1024,
            log_lines_per_second: 100,
            log_burst: 200,
            log_line_bytes: 1024,
            watches: 1_000,
            aliases: 16,
            stash: 10_000,
            stash_bytes: 32 << 20,
            descendants: 10_000,
            callouts: 64,
            max_callout_timeout: Duration::from_secs(60),
            max_callout_response_bytes: 4 << 20,
        }
    }
}

impl Quotas {
    /// These quotas, none above `parent`'s.
    pub(crate) fn capped_at(&self, parent: &Quotas) -> Quotas {
        Quotas {
            timers: self.timers.min(parent.timers),
            min_timer_period: self.min_timer_period.max(parent.min_timer_period),
            reminders: self.reminders.min(parent.reminders),
            subscriptions: self.subscriptions.min(parent.subscriptions),
            groups: self.groups.min(parent.groups),
            asks: self.asks.min(parent.asks),
            max_ask_deadline: self.max_ask_deadline.min(parent.max_ask_deadline),
            max_name_bytes: self.max_name_bytes.min(parent.max_name_bytes),
            max_path_bytes: self.max_path_bytes.min(parent.max_path_bytes),
            log_lines_per_second: self.log_lines_per_second.min(parent.log_lines_per_second),
            log_burst: self.log_burst.min(parent.log_burst),
            log_line_bytes: self.log_line_bytes.min(parent.log_line_bytes),
            watches: self.watches.min(parent.watches),
            aliases: self.aliases.min(parent.aliases),
            stash: self.stash.min(parent.stash),
            stash_bytes: self.stash_bytes.min(parent.stash_bytes),
            descendants: self.descendants.min(parent.descendants),
            callouts: self.callouts.min(parent.callouts),
            max_callout_timeout: self.max_callout_timeout.min(parent.max_callout_timeout),
            max_callout_response_bytes: self
                .max_callout_response_bytes
                .min(parent.max_callout_response_bytes),
        }
    }

    /// Refuses `text` (a kind, topic, group or name) past the length bound.
    pub(crate) fn check_name(&self, text: &str) -> Result<(), Quota> {
        if text.len() > self.max_name_bytes {
            return Err(Quota::NameLength);
        }
        Ok(())
    }

    /// `line` cut to the longest log line kept, on a character boundary, marked if cut.
    pub(crate) fn log_line<'a>(&self, line: &'a str) -> std::borrow::Cow<'a, str> {
        if line.len() <= self.log_line_bytes {
            return line.into();
        }
        let end = line.floor_char_boundary(self.log_line_bytes);
        format!("{} [cut: {} bytes]", &line[..end], line.len()).into()
    }

    /// Refuses a path past the length bound.
    pub(crate) fn check_path(&self, path: &str) -> Result<(), Quota> {
        if path.len() > self.max_path_bytes {
            return Err(Quota::NameLength);
        }
        Ok(())
    }

    /// Refuses a guest's message kind: too long, or the host's own.
    pub(crate) fn check_kind(&self, kind: &str) -> Result<(), Quota> {
        self.check_name(kind)?;
        if kind.starts_with(RESERVED_KIND_PREFIX) {
            return Err(Quota::ReservedKind);
        }
        Ok(())
    }

    /// Refuses a period under the minimum (a zero period means "once" and passes).
    pub(crate) fn check_period(&self, period: Option<Duration>) -> Result<(), Quota> {
        match period {
            Some(p) if !p.is_zero() && p < self.min_timer_period => Err(Quota::TimerPeriod),
            _ => Ok(()),
        }
    }
}

/// How often an actor whose log lines are being dropped is told about in the log.
const DROP_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// What an actor was refused, by kind, and its log budget: counted from its spawn on, across
/// restarts and upgrades.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    counts: [AtomicU64; Quota::ALL.len()],
    log: Mutex<Option<LogBudget>>,
}

/// The log budget's bucket, and the drops not yet reported.
#[derive(Debug)]
struct LogBudget {
    bucket: Bucket,
    unreported: u64,
    reported: Instant,
}

impl Refusals {
    /// Counts one refusal of `quota` and gives it back (for `?` chains).
    pub(crate) fn count(&self, quota: Quota) -> Quota {
        self.add(quota, 1);
        quota
    }

    /// Counts `n` refusals of `quota`.
    pub(crate) fn add(&self, quota: Quota, n: u64) {
        self.counts[quota as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Whether the actor at `path` may write one more log line under `quotas`' budget. A line
    /// past it is dropped and counted; while lines are dropped, one line a second says how many.
    pub(crate) fn admit_log(&self, quotas: &Quotas, path: &dyn fmt::Display) -> bool {
        let now = Instant::now();
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let budget = log.get_or_insert_with(|| LogBudget {
            bucket: Bucket::new(quotas.log_lines_per_second, quotas.log_burst),
            unreported: 0,
            reported: now,
        });
        let admitted = budget.bucket.take(now);
        if !admitted {
            budget.unreported += 1;
            self.add(Quota::Log, 1);
        }
        if budget.unreported > 0 && now.duration_since(budget.reported) >= DROP_REPORT_INTERVAL {
            let dropped = std::mem::take(&mut budget.unreported);
            budget.reported = now;
            tracing::warn!(target: "mote::guest", actor = %path, dropped, "log lines dropped past the actor's log budget");
        }
        admitted
    }

    /// The counts so far, by kind, without the zeros.
    pub(crate) fn snapshot(&self) -> Vec<(Quota, u64)> {
        Quota::ALL
            .iter()
            .map(|q| (*q, self.counts[*q as usize].load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Adds the counts so far to `sums`, by kind (in the order of [`Quota::ALL`]).
    pub(crate) fn add_to(&self, sums: &mut [u64; Quota::ALL.len()]) {
        for (sum, count) in sums.iter_mut().zip(&self.counts) {
            *sum += count.load(Ordering::Relaxed);
        }
    }

    /// Refusals of every kind together.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().map(|n| n.load(Ordering::Relaxed)).sum()
    }
}

/// A token bucket: `rate` tokens a second, at most `burst` saved up.
#[derive(Debug)]
pub(crate) struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket.
    pub(crate) fn new(rate: u32, burst: u32) -> Bucket {
        Bucket {
            tokens: f64::from(burst),
            rate: f64::from(rate),
            burst: f64::from(burst),
            last: Instant::now(),
        }
    }

    /// Takes a token if there is one, as of `now`.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_kinds_and_long_names_are_refused() {
        let quotas = Quotas::default();
        assert_eq!(
            quotas.check_kind("mote.terminated"),
            Err(Quota::ReservedKind)
        );
        assert_eq!(quotas.check_kind("Counter"), Ok(()));
        assert_eq!(
            quotas.check_kind("motel"),
            Ok(()),
            "only the `mote.` prefix is reserved"
        );
        let long = "k".repeat(quotas.max_name_bytes + 1);
        assert_eq!(quotas.check_kind(&long), Err(Quota::NameLength));
        assert_eq!(quotas.check_name(&long[1..]), Ok(()));
    }

    #[test]
    fn long_log_lines_are_cut_on_a_character_boundary() {
        let quotas = Quotas {
            log_line_bytes: 4,
            ..Quotas::default()
        };
        assert_eq!(quotas.log_line("abcd"), "abcd");
        assert_eq!(quotas.log_line("abcdé"), "abcd [cut: 6 bytes]");
        assert_eq!(
            quotas.log_line("abcé"),
            "abc [cut: 5 bytes]",
            "not inside the é"
        );
    }

    #[test]
    fn a_period_under_the_minimum_is_refused_and_once_is_not_a_period() {
        let quotas = Quotas::default();
        assert_eq!(
            quotas.check_period(Some(Duration::from_millis(1))),
            Err(Quota::TimerPeriod)
        );
        assert_eq!(quotas.check_period(Some(Duration::ZERO)), Ok(()));
        assert_eq!(quotas.check_period(None), Ok(()));
        assert_eq!(quotas.check_period(Some(quotas.min_timer_period)), Ok(()));
    }

    #[test]
    fn refusals_are_counted_by_kind() {
        let refusals = Refusals::default();
        refusals.count(Quota::Asks);
        refusals.add(Quota::Log, 5);
        refusals.count(Quota::Asks);
        assert_eq!(refusals.snapshot(), vec![(Quota::Asks, 2), (Quota::Log, 5)]);
    }

    #[test]
    fn log_lines_past_the_budget_are_dropped_and_counted() {
        let quotas = Quotas {
            log_lines_per_second: 1,
            log_burst: 10,
            ..Quotas::default()
        };
        let refusals = Refusals::default();
        let admitted = (0..1000)
            .filter(|_| refusals.admit_log(&quotas, &"/user/a"))
            .count();
        assert!((10..=11).contains(&admitted), "{admitted} lines admitted");
        assert_eq!(
            refusals.snapshot(),
            vec![(Quota::Log, 1000 - admitted as u64)]
        );
    }

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let mut bucket = Bucket::new(10, 3);
        let start = Instant::now();
        let burst = (0..10).filter(|_| bucket.take(start)).count();
        assert_eq!(burst, 3, "a full bucket gives its burst at once");
        assert!(
            !bucket.take(start + Duration::from_millis(50)),
            "half a token"
        );
        assert!(
            bucket.take(start + Duration::from_millis(100)),
            "one token a tenth"
        );
        let later = start + Duration::from_secs(60);
        let saved = (0..10).filter(|_| bucket.take(later)).count();
        assert_eq!(saved, 3, "never more than the burst is saved up");
    }
}
