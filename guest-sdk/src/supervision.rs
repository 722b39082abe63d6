//! Supervision and death watch: [`Strategy`] and [`SpawnOptions`] helpers and the [`Context`]
//! methods wrapping the `supervision` imports of the WIT contract.
//!
//! A parent sets its [`Strategy`] once (usually in `start`); when a child fails, the host asks
//! [`Actor::supervise`](crate::Actor::supervise) and falls back to the strategy's directive if
//! it answers `None`. A watched incarnation's end arrives as one message of kind
//! [`TERMINATED`](crate::message::TERMINATED), routed to
//! [`Actor::terminated`](crate::Actor::terminated).

use crate::bindings::mote::actor::supervision;
use crate::bindings::mote::actor::types::{
    Address, Directive, FailureKind, Scope, SpawnOptions, Strategy,
};
use crate::context::Context;
use crate::error::{Error, Result};

impl Strategy {
    /// Restarts of one child allowed within [`Strategy::DEFAULT_WITHIN_MS`] before escalating.
    pub const DEFAULT_MAX_RESTARTS: u32 = 3;
    /// The window, in milliseconds, over which restarts are counted.
    pub const DEFAULT_WITHIN_MS: u64 = 10_000;
    /// The first restart delay, in milliseconds.
    pub const DEFAULT_BACKOFF_MIN_MS: u64 = 10;
    /// The longest restart delay, in milliseconds.
    pub const DEFAULT_BACKOFF_MAX_MS: u64 = 1_000;

    /// A strategy of this scope and default directive, with the default limits and backoff.
    pub fn new(scope: Scope, directive: Directive) -> Self {
        Self {
            scope,
            directive,
            max_restarts: Self::DEFAULT_MAX_RESTARTS,
            within_ms: Self::DEFAULT_WITHIN_MS,
            backoff_min_ms: Self::DEFAULT_BACKOFF_MIN_MS,
            backoff_max_ms: Self::DEFAULT_BACKOFF_MAX_MS,
        }
    }

    /// The directive applies to the failed child alone.
    pub fn one_for_one(directive: Directive) -> Self {
        Self::new(Scope::OneForOne, directive)
    }

    /// The directive applies to the failed child and all its siblings.
    pub fn all_for_one(directive: Directive) -> Self {
        Self::new(Scope::AllForOne, directive)
    }

    /// At most `max` restarts of one child within `within_ms` milliseconds; one more escalates.
    #[must_use]
    pub fn restarts(self, max: u32, within_ms: u64) -> Self {
        Self {
            max_restarts: max,
            within_ms,
            ..self
        }
    }

    /// Restart delays from `min_ms`, doubling per restart in the window, up to `max_ms`.
    #[must_use]
    pub fn backoff(self, min_ms: u64, max_ms: u64) -> Self {
        Self {
            backoff_min_ms: min_ms,
            backoff_max_ms: max_ms,
            ..self
        }
    }
}

/// How a child failed, as its parent's [`Actor::supervise`](crate::Actor::supervise) sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// How: a trap, an error, the memory limit, the CPU deadline, the stack...
    pub kind: FailureKind,
    /// In words.
    pub error: String,
}

impl FailureKind {
    /// The kind's name in the WIT (`memory-limit`), as the host's logs print it too.
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

impl Default for SpawnOptions {
    /// Every limit left to the parent's own.
    fn default() -> Self {
        Self {
            mailbox_capacity: None,
            memory_limit: None,
            cpu_deadline_ms: None,
            mailbox_bytes: None,
            descendants: None,
        }
    }
}

impl Context {
    /// Sets how this actor supervises its children (the host default applies until then).
    pub fn set_strategy(&self, strategy: &Strategy) {
        crate::outbox::flush();
        supervision::set_strategy(*strategy);
    }

    /// Spawns a child like [`Context::spawn`], with per-child limits.
    pub fn spawn_with(
        &self,
        name: &str,
        module: &str,
        init: &[u8],
        options: &SpawnOptions,
    ) -> Result<Address> {
        crate::outbox::flush();
        supervision::spawn_with(name, module, init, *options)
            .map_err(|e| Error::spawn(name, module, e))
    }

    /// Spawns a child like [`Context::spawn_with`] on the node `node` of the host's cluster:
    /// its path is under this actor's and this actor supervises it across the network.
    /// Refused (`instantiation`) when no live node has that name.
    pub fn spawn_on(
        &self,
        node: &str,
        name: &str,
        module: &str,
        init: &[u8],
        options: &SpawnOptions,
    ) -> Result<Address> {
        crate::outbox::flush();
        supervision::spawn_on(node, name, module, init, *options)
            .map_err(|e| Error::spawn(name, module, e))
    }

    /// Watches an incarnation: one `mote.terminated` message reaches
    /// [`Actor::terminated`](crate::Actor::terminated) when it stops (at once if it has).
    /// Refused past this actor's quota of watches.
    pub fn watch(&self, target: &Address) -> Result<()> {
        crate::outbox::flush();
        supervision::watch(target)
            .map_err(|e| Error::refused(format_args!("cannot watch `{}`", target.path), e))
    }

    /// Stops watching an incarnation; a `mote.terminated` already queued still arrives.
    pub fn unwatch(&self, target: &Address) {
        crate::outbox::flush();
        supervision::unwatch(target);
    }

    /// Inside `start`: why this instance replaces a failed one (`None` on a first start).
    pub fn restart_cause(&self) -> Option<String> {
        crate::outbox::flush();
        supervision::restart_cause()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_defaults_and_setters() {
        let strategy = Strategy::one_for_one(Directive::Restart);
        assert_eq!(strategy.scope, Scope::OneForOne);
        assert_eq!(strategy.directive, Directive::Restart);
        assert_eq!((strategy.max_restarts, strategy.within_ms), (3, 10_000));
        assert_eq!(
            (strategy.backoff_min_ms, strategy.backoff_max_ms),
            (10, 1_000)
        );
        let strategy = Strategy::all_for_one(Directive::Stop)
            .restarts(5, 60_000)
            .backoff(0, 0);
        assert_eq!(strategy.scope, Scope::AllForOne);
        assert_eq!((strategy.max_restarts, strategy.within_ms), (5, 60_000));
        assert_eq!((strategy.backoff_min_ms, strategy.backoff_max_ms), (0, 0));
    }

    #[test]
    fn spawn_options_default_to_the_host() {
        let options = SpawnOptions::default();
        assert_eq!(options.mailbox_capacity, None);
        assert_eq!(options.memory_limit, None);
        assert_eq!(options.cpu_deadline_ms, None);
    }
}
