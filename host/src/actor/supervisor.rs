//! Supervision: a parent's strategy for its children's failures, its restart bookkeeping, and
//! the decision it reaches for one failure (OTP's restart intensity, Akka's directives).
//!
//! The decision is pure: given the strategy, the directive the parent's `supervise` export chose
//! (if any) and when the child last restarted, it returns what to do and after which delay.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How an actor failed: what its supervisor (and `subscribe_supervision`) is told beside the
/// text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum FailureKind {
    /// The guest trapped (a panic, `unreachable`, a bad memory access...).
    Trap,
    /// A hook returned an error.
    Error,
    /// It grew its linear memory past its limit.
    MemoryLimit,
    /// One call ran past its CPU deadline.
    CpuDeadline,
    /// It recursed past the stack limit.
    StackOverflow,
    /// Its module could not be instantiated.
    Instantiation,
    /// Its step could not be committed to the database.
    Commit,
    /// It escalated the failure of one of its children.
    Escalated,
}

impl FailureKind {
    /// Whether the instance can no longer be entered (it must be restarted, not resumed).
    pub fn is_trap(self) -> bool {
        !matches!(self, FailureKind::Error | FailureKind::Escalated)
    }

    /// The name used in logs and the WIT (`memory-limit`).
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Trap => "trap",
            FailureKind::Error => "error",
            FailureKind::MemoryLimit => "memory-limit",
            FailureKind::CpuDeadline => "cpu-deadline",
            FailureKind::StackOverflow => "stack-overflow",
            FailureKind::Instantiation => "instantiation",
            FailureKind::Commit => "commit",
            FailureKind::Escalated => "escalated",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a supervisor decides about a failed child.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Directive {
    /// Drop the failed message, keep the state (a trapped instance is restarted instead).
    Resume,
    /// A fresh instance at the same path, same incarnation, mailbox kept, children stopped.
    Restart,
    /// Stop the child with reason `failure`.
    Stop,
    /// Fail the supervisor itself with the child's error.
    Escalate,
}

/// Whether a directive applies to the failed child alone or to all its siblings too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Scope {
    /// Only the failed child.
    OneForOne,
    /// The failed child and all its siblings.
    AllForOne,
}

/// A parent's strategy for its children's failures.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Strategy {
    /// One-for-one or all-for-one.
    pub scope: Scope,
    /// The directive when the parent's `supervise` export is absent or returns none.
    pub directive: Directive,
    /// At most this many restarts of one child within `within`; one more escalates.
    pub max_restarts: u32,
    /// The restart-intensity window.
    pub within: Duration,
    /// The delay before the first restart in a window; it doubles per further restart.
    pub backoff_min: Duration,
    /// The longest delay before a restart.
    pub backoff_max: Duration,
}

impl Default for Strategy {
    /// One-for-one restart, at most 3 restarts in 10 s, backoff 10 ms doubling to 1 s.
    fn default() -> Self {
        Strategy {
            scope: Scope::OneForOne,
            directive: Directive::Restart,
            max_restarts: 3,
            within: Duration::from_secs(10),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_secs(1),
        }
    }
}

/// The outcome of one failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) directive: Directive,
    /// Wait this long before restarting (zero for other directives).
    pub(crate) delay: Duration,
}

/// A supervisor's strategy plus the restart history of its children, keyed by child name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Supervisor {
    pub(crate) strategy: Strategy,
    restarts: HashMap<String, VecDeque<Instant>>,
}

impl Supervisor {
    pub(crate) fn new(strategy: Strategy) -> Self {
        Supervisor {
            strategy,
            restarts: HashMap::new(),
        }
    }

    /// Decides about `child`'s failure; `chosen` is what the `supervise` export returned.
    pub(crate) fn decide(
        &mut self,
        child: &str,
        chosen: Option<Directive>,
        now: Instant,
    ) -> Decision {
        let directive = chosen.unwrap_or(self.strategy.directive);
        if directive != Directive::Restart {
            return Decision {
                directive,
                delay: Duration::ZERO,
            };
        }
        let window = self.strategy.within;
        let history = self.restarts.entry(child.to_owned()).or_default();
        while history
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            history.pop_front();
        }
        if history.len() >= self.strategy.max_restarts as usize {
            history.clear();
            return Decision {
                directive: Directive::Escalate,
                delay: Duration::ZERO,
            };
        }
        history.push_back(now);
        let doublings = (history.len() - 1).min(32) as u32;
        let delay = self
            .strategy
            .backoff_min
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.strategy.backoff_max);
        Decision { directive, delay }
    }

    /// Forgets a child that has terminated.
    pub(crate) fn forget(&mut self, child: &str) {
        self.restarts.remove(child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(max: u32) -> Strategy {
        Strategy {
            max_restarts: max,
            within: Duration::from_secs(1),
            backoff_min: Duration::from_millis(10),
            backoff_max: Duration::from_millis(25),
            ..Strategy::default()
        }
    }

    #[test]
    fn restart_intensity_escalates_after_max_restarts_in_the_window() {
        let mut s = Supervisor::new(strategy(2));
        let t0 = Instant::now();
        assert_eq!(s.decide("c", None, t0).directive, Directive::Restart);
        assert_eq!(s.decide("c", None, t0).directive, Directive::Restart);
        assert_eq!(s.decide("c", None, t0).directive, Directive::Escalate);
        // Another child has its own budget.
        assert_eq!(s.decide("d", None, t0).directive, Directive::Restart);
    }

    #[test]
    fn old_restarts_leave_the_window() {
        let mut s = Supervisor::new(strategy(1));
        let t0 = Instant::now();
        assert_eq!(s.decide("c", None, t0).directive, Directive::Restart);
        let later = t0 + Duration::from_secs(2);
        assert_eq!(s.decide("c", None, later).directive, Directive::Restart);
    }

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let mut s = Supervisor::new(strategy(10));
        let t0 = Instant::now();
        let delays: Vec<u128> = (0..4)
            .map(|_| s.decide("c", None, t0).delay.as_millis())
            .collect();
        assert_eq!(delays, vec![10, 20, 25, 25]);
    }

    #[test]
    fn the_export_overrides_the_strategy_directive() {
        let mut s = Supervisor::new(strategy(0));
        let t0 = Instant::now();
        assert_eq!(
            s.decide("c", Some(Directive::Resume), t0).directive,
            Directive::Resume
        );
        assert_eq!(
            s.decide("c", Some(Directive::Stop), t0).directive,
            Directive::Stop
        );
        // max_restarts 0: a restart escalates at once.
        assert_eq!(s.decide("c", None, t0).directive, Directive::Escalate);
    }
}
