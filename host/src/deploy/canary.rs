//! The canary stage of a whole-module upgrade: a few actors move to the new version first and
//! are watched; the rest follow only if those did no worse than the actors still on the old
//! version over the same time.
//!
//! ```text
//! actors of the module not on the version yet, by path
//!   ├─ the first `actors` (the canaries): upgraded ──> watched for `watch` ──> judged
//!   └─ the others: left on their version while watched (the comparison group)
//! passed:      the others are upgraded as without a canary
//! rolled back: each canary is upgraded back to the version it ran; the others are not touched
//! ```
//!
//! Invariants:
//! - The canaries are the same for the same actors: the first by path among those the upgrade
//!   moves. Actors already on the version are neither canaries nor compared.
//! - Both groups are measured over one window from one instant: each actor's count at the end
//!   minus its count at the start. A count belongs to one incarnation and only grows (see
//!   `stats`), so an actor that stops in the window counts what it did until it stopped.
//! - The rule is [`Canary::worse`], a pure function of the counts, applied to failures and to
//!   restarts on their own: the canaries are worse if, together, they count more than
//!   `allowance` and their rate per actor is more than `factor` times the old group's. With no
//!   actor left on the old version, the old rate is zero.
//! - If any canary cannot be upgraded, there is no watch: the stage rolls back at once.
//! - A rolled-back stage never makes the version current and never touches the other actors.
//!
//! This file holds the rule and the watch; `upgrade` runs the stage with them.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::actor::mailbox::ActorRef;
use crate::progress::Tracker;

/// A canary stage: how many actors go first, how long they are watched, and how much worse
/// than the old version they may do (see [`Canary::worse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Canary {
    /// Actors upgraded first: the first by path among those not on the version yet.
    pub actors: usize,
    /// How long they are watched before the rest follow.
    pub watch: Duration,
    /// Their failures (and restarts) per actor may reach this many times the old version's
    /// (default 2).
    pub factor: u32,
    /// However few the old version had, the canaries together may fail (and restart) this
    /// many times (default 1).
    pub allowance: u64,
}

impl Canary {
    /// `actors` canaries watched for `watch`, with the default factor (2) and allowance (1).
    pub fn new(actors: usize, watch: Duration) -> Canary {
        Canary {
            actors,
            watch,
            factor: 2,
            allowance: 1,
        }
    }

    /// Whether the canaries did worse: `canary` events over `canaries` actors against `old`
    /// events over `olds` actors in the same window. Worse means more than `allowance` events
    /// in all and a rate per actor above `factor` times the old one (zero with no old actor).
    pub fn worse(&self, canary: u64, canaries: usize, old: u64, olds: usize) -> bool {
        if canary <= self.allowance {
            return false;
        }
        // canary / canaries > factor * old / olds, in integers.
        let wide = |n: usize| u128::try_from(n).unwrap_or(u128::MAX);
        u128::from(canary).saturating_mul(wide(olds.max(1)))
            > (u128::from(self.factor) * u128::from(old)).saturating_mul(wide(canaries.max(1)))
    }
}

/// Failures and restarts of one group of actors over the watch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CanaryFigures {
    /// Actors in the group.
    pub actors: usize,
    /// Their failures, together.
    pub failures: u64,
    /// Their restarts, together.
    pub restarts: u64,
}

/// Why a canary stage rolled back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RollbackReason {
    /// This many canaries could not be upgraded (the report's `failed` says why).
    UpgradeFailed {
        /// How many.
        failed: usize,
    },
    /// The canaries failed more than the rule allows.
    MoreFailures,
    /// The canaries were restarted more than the rule allows.
    MoreRestarts,
}

/// How a canary stage ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CanaryOutcome {
    /// The canaries did no worse: the rest were upgraded.
    Passed,
    /// The canaries were moved back and the upgrade stopped.
    RolledBack(RollbackReason),
}

/// What a canary stage found and did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CanaryVerdict {
    /// The canaries' paths.
    pub canaries: Vec<String>,
    /// How long they were watched (zero if the stage rolled back before the watch).
    pub watched: Duration,
    /// The canaries' failures and restarts over the watch.
    pub canary: CanaryFigures,
    /// Those of the actors left on the old version, over the same time.
    pub old: CanaryFigures,
    /// The rule they were judged by.
    pub rule: Canary,
    /// Passed, or rolled back and why.
    pub outcome: CanaryOutcome,
    /// Canaries moved back to the version they ran.
    pub rolled_back: Vec<String>,
    /// Canaries that could not be moved back, with why (they still run the new version, or
    /// they stopped).
    pub stuck: Vec<(String, String)>,
    /// Actors left on their old version without being tried, because the stage rolled back.
    pub untouched: usize,
}

impl CanaryVerdict {
    /// Whether the canaries passed and the rest were upgraded.
    pub fn passed(&self) -> bool {
        self.outcome == CanaryOutcome::Passed
    }
}

impl fmt::Display for CanaryVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (c, o) = (&self.canary, &self.old);
        let rate = |n: u64, actors: usize| n as f64 / actors.max(1) as f64;
        let count = |n: u64, what: &str| plural(n, what, &format!("{what}s"));
        match self.outcome {
            CanaryOutcome::Passed => write!(
                f,
                "canary passed: {} watched for {:.1?}: {} and {}, against {} and {} of {} on the old version",
                count(c.actors as u64, "actor"),
                self.watched,
                count(c.failures, "failure"),
                count(c.restarts, "restart"),
                count(o.failures, "failure"),
                count(o.restarts, "restart"),
                count(o.actors as u64, "actor"),
            ),
            CanaryOutcome::RolledBack(RollbackReason::UpgradeFailed { failed }) => write!(
                f,
                "canary rolled back: {failed} of {} could not be upgraded",
                plural(c.actors as u64, "canary", "canaries"),
            ),
            CanaryOutcome::RolledBack(reason) => {
                let (what, n, old) = match reason {
                    RollbackReason::MoreRestarts => ("restart", c.restarts, o.restarts),
                    _ => ("failure", c.failures, o.failures),
                };
                write!(
                    f,
                    "canary rolled back: {} had {} in {:.1?} ({:.2} per actor) against {} of {} on the old version ({:.2} per actor); allowed: at most {} in all or {}x the old rate per actor",
                    count(c.actors as u64, "actor"),
                    count(n, what),
                    self.watched,
                    rate(n, c.actors),
                    count(old, what),
                    count(o.actors as u64, "actor"),
                    rate(old, o.actors),
                    self.rule.allowance,
                    self.rule.factor,
                )
            }
        }
    }
}

/// `n` and the word for one or many.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Judges the canaries' figures against the old group's by `rule`.
pub(crate) fn judge(rule: &Canary, canary: &CanaryFigures, old: &CanaryFigures) -> CanaryOutcome {
    let worse = |c: u64, o: u64| rule.worse(c, canary.actors, o, old.actors);
    if worse(canary.failures, old.failures) {
        CanaryOutcome::RolledBack(RollbackReason::MoreFailures)
    } else if worse(canary.restarts, old.restarts) {
        CanaryOutcome::RolledBack(RollbackReason::MoreRestarts)
    } else {
        CanaryOutcome::Passed
    }
}

/// What a watch counted.
pub(crate) struct Watched {
    /// The canaries' figures.
    pub(crate) canary: CanaryFigures,
    /// The old group's figures.
    pub(crate) old: CanaryFigures,
    /// The time actually watched.
    pub(crate) time: Duration,
    /// The watch's progress report, to be finished with the verdict.
    pub(crate) tracker: Tracker,
}

/// Counts the failures and restarts of both groups over `window`, reporting each second on
/// the tracker `begin` starts once the counts at the start are taken (so whatever happens
/// after the report that the watch began is counted).
pub(crate) async fn watch(
    canaries: &[ActorRef],
    old: &[ActorRef],
    window: Duration,
    begin: impl FnOnce() -> Tracker,
) -> Watched {
    let began = Instant::now();
    let (canaries_before, old_before) = (totals(canaries), totals(old));
    let mut tracker = begin();
    // A window too long to add is as good as forever (30 years).
    let end = (began.checked_add(window)).unwrap_or(began + Duration::from_secs(30 * 365 * 86_400));
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        tokio::time::sleep_until(end.min(now + Duration::from_secs(1))).await;
        tracker.advance(began.elapsed().as_secs());
    }
    let figures = |group: &[ActorRef], (failures, restarts): (u64, u64)| {
        let (f, r) = totals(group);
        CanaryFigures {
            actors: group.len(),
            failures: f.saturating_sub(failures),
            restarts: r.saturating_sub(restarts),
        }
    };
    Watched {
        canary: figures(canaries, canaries_before),
        old: figures(old, old_before),
        time: began.elapsed(),
        tracker,
    }
}

/// The failures and restarts of `actors` so far, together.
fn totals(actors: &[ActorRef]) -> (u64, u64) {
    actors
        .iter()
        .filter_map(|a| a.stats.as_deref())
        .fold((0, 0), |(f, r), s| {
            (f + s.failures.get(), r + s.restarts.get())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(actors: usize, failures: u64, restarts: u64) -> CanaryFigures {
        CanaryFigures {
            actors,
            failures,
            restarts,
        }
    }

    #[test]
    fn canaries_within_the_allowance_pass_even_when_the_old_version_never_failed() {
        let rule = Canary::new(2, Duration::from_secs(1));
        assert!(!rule.worse(0, 2, 0, 8));
        assert!(!rule.worse(1, 2, 0, 8), "one failure in all is allowed");
        assert!(rule.worse(2, 2, 0, 8), "two are not, against none");
    }

    #[test]
    fn canaries_may_reach_factor_times_the_old_rate_per_actor_and_no_more() {
        let rule = Canary::new(2, Duration::from_secs(1));
        // Old: 8 failures over 8 actors (1 per actor); canaries may have 2 per actor.
        assert!(!rule.worse(4, 2, 8, 8));
        assert!(rule.worse(5, 2, 8, 8));
        // The same rates in smaller groups judge the same.
        assert!(!rule.worse(2, 1, 1, 1));
        assert!(rule.worse(3, 1, 1, 1));
        let strict = Canary {
            factor: 1,
            allowance: 0,
            ..rule
        };
        assert!(strict.worse(1, 1, 0, 3));
        assert!(!strict.worse(1, 3, 1, 3), "the same rate is no worse");
    }

    #[test]
    fn with_no_actor_left_on_the_old_version_only_the_allowance_counts() {
        let rule = Canary::new(4, Duration::from_secs(1));
        assert!(!rule.worse(1, 4, 0, 0));
        assert!(rule.worse(2, 4, 0, 0));
    }

    #[test]
    fn huge_counts_do_not_overflow_the_comparison() {
        let rule = Canary {
            factor: u32::MAX,
            ..Canary::new(1, Duration::ZERO)
        };
        assert!(!rule.worse(u64::MAX, usize::MAX, u64::MAX, usize::MAX));
        assert!(rule.worse(u64::MAX, 1, 0, usize::MAX));
    }

    #[test]
    fn failures_are_judged_before_restarts_and_each_on_its_own() {
        let rule = Canary::new(1, Duration::from_secs(1));
        let old = figures(3, 0, 0);
        assert_eq!(judge(&rule, &figures(1, 1, 1), &old), CanaryOutcome::Passed);
        assert_eq!(
            judge(&rule, &figures(1, 3, 3), &old),
            CanaryOutcome::RolledBack(RollbackReason::MoreFailures)
        );
        assert_eq!(
            judge(&rule, &figures(1, 0, 2), &old),
            CanaryOutcome::RolledBack(RollbackReason::MoreRestarts)
        );
    }

    #[test]
    fn the_verdict_line_gives_the_figures_and_the_rule() {
        let verdict = CanaryVerdict {
            canaries: vec!["/user/a".into()],
            watched: Duration::from_secs(3),
            canary: figures(1, 3, 0),
            old: figures(3, 0, 0),
            rule: Canary::new(1, Duration::from_secs(3)),
            outcome: CanaryOutcome::RolledBack(RollbackReason::MoreFailures),
            rolled_back: vec!["/user/a".into()],
            stuck: Vec::new(),
            untouched: 3,
        };
        assert_eq!(
            verdict.to_string(),
            "canary rolled back: 1 actor had 3 failures in 3.0s (3.00 per actor) against 0 failures of 3 actors on the old version (0.00 per actor); allowed: at most 1 in all or 2x the old rate per actor"
        );
        let passed = CanaryVerdict {
            canary: figures(1, 0, 0),
            outcome: CanaryOutcome::Passed,
            ..verdict.clone()
        };
        assert_eq!(
            passed.to_string(),
            "canary passed: 1 actor watched for 3.0s: 0 failures and 0 restarts, against 0 failures and 0 restarts of 3 actors on the old version"
        );
        let refused = CanaryVerdict {
            canary: figures(2, 0, 0),
            outcome: CanaryOutcome::RolledBack(RollbackReason::UpgradeFailed { failed: 1 }),
            ..verdict
        };
        assert_eq!(
            refused.to_string(),
            "canary rolled back: 1 of 2 canaries could not be upgraded"
        );
    }
}
