//! What a spawn asks for: where, of which module, with which init and limits.

use std::time::Duration;

use crate::address::{ActorPath, Address};
use crate::config::HostConfig;

/// Per-spawn limits; `None` takes the host's default from [`HostConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpawnOptions {
    /// Messages the mailbox holds before sends are refused.
    pub mailbox_capacity: Option<usize>,
    /// Bytes of linear memory the actor may grow to (at most the host's `memory_limit`).
    pub memory_limit: Option<usize>,
    /// CPU time one message may take.
    pub cpu_deadline: Option<Duration>,
}

/// The resource limits of one actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) mailbox_capacity: usize,
    pub(crate) memory: usize,
    pub(crate) cpu_deadline: Duration,
}

impl Limits {
    /// The limits of an actor spawned with `options`: the host's defaults where they say
    /// nothing, and never more memory than the host's limit.
    pub(crate) fn of(config: &HostConfig, options: &SpawnOptions) -> Limits {
        Limits {
            mailbox_capacity: options
                .mailbox_capacity
                .map_or(config.mailbox_capacity, |n| n.max(1)),
            memory: options
                .memory_limit
                .map_or(config.memory_limit, |m| m.min(config.memory_limit)),
            cpu_deadline: options.cpu_deadline.unwrap_or(config.cpu_deadline),
        }
    }
}

/// One spawn, as the kernel hands it to the layer that starts actors.
#[derive(Debug)]
pub(crate) struct SpawnRequest {
    /// Where the actor lives.
    pub(crate) path: ActorPath,
    /// The deployed module it runs (its current version).
    pub(crate) module: String,
    /// What its `start` gets.
    pub(crate) init: Vec<u8>,
    /// Its parent; `None` under the `/user` guardian.
    pub(crate) parent: Option<Address>,
    pub(crate) limits: Limits,
    /// An entity passivates after this long without a message.
    pub(crate) passivate_after: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_gets_the_defaults_and_never_more_memory_than_the_host_allows() {
        let mut config = HostConfig::new();
        config.memory_limit(1 << 20).mailbox_capacity(50);
        let defaults = Limits::of(&config, &SpawnOptions::default());
        assert_eq!(defaults.memory, 1 << 20);
        assert_eq!(defaults.mailbox_capacity, 50);
        let asked = SpawnOptions {
            mailbox_capacity: Some(0),
            memory_limit: Some(1 << 30),
            cpu_deadline: Some(Duration::from_millis(7)),
        };
        let limits = Limits::of(&config, &asked);
        assert_eq!(limits.memory, 1 << 20, "capped at the host's limit");
        assert_eq!(
            limits.mailbox_capacity, 1,
            "a mailbox holds at least one message"
        );
        assert_eq!(limits.cpu_deadline, Duration::from_millis(7));
    }
}
