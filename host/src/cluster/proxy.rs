//! Stand-ins for children spawned on other nodes (`spawn-on`). The parent's node keeps, at the
//! child's path, a mailbox whose every message and signal goes to the child's node; the child
//! there has the parent's address as its parent, so its failures and its end come back as
//! signals. To the parent, a child elsewhere is a child like any other: it stops it, decides
//! its failures, watches it and waits for it when it stops itself.
//!
//! Invariants:
//! - A stand-in has the child's path and incarnation (chosen here, used there), so one address
//!   names the child on every node.
//! - A stand-in ends exactly once: when the child's end is signalled, or when its node goes
//!   down; only in the second case does it tell the parent (the child's node told it in the
//!   first).
//! - The child's path is free here before its parent hears that it ended, as for a child on
//!   this node: a parent that then looks up or respawns the path does not find the stand-in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::wire::{self, Frame, Signal};
use crate::actor::mailbox::{Mailbox, SystemMsg, UpgradeOutcome, UserMsg};
use crate::address::Address;
use crate::kernel::Kernel;
use crate::kernel::deadletters::DeadLetterReason;
use crate::kernel::spawn::Reservation;

/// What a stand-in needs of its node.
pub(crate) trait Through: Send + Sync + 'static {
    /// The node's name.
    fn node(&self) -> &str;
    /// The kernel, while it lives.
    fn kernel(&self) -> Option<Arc<Kernel>>;
    /// Queues a frame for `node`; false if it cannot go.
    fn send(&self, node: &str, frame: Frame) -> bool;
    /// A local watcher watches `child` on `node`.
    fn watch_through(&self, node: &str, watcher: &Address, child: &Address);
    /// A local watcher no longer watches `child` on `node`.
    fn unwatch_through(&self, node: &str, watcher: &Address, child: &Address);
    /// Forwards a user message (or poison pill) to `child` on `node`.
    fn forward_user(&self, node: &str, child: &Address, msg: UserMsg);
}

/// How a stand-in ends.
pub(crate) enum End {
    /// The child's node signalled that it terminated.
    Terminated,
    /// The child's node is down.
    NodeDown,
}

/// One stand-in: the child's node, and how to end it.
struct StandIn {
    node: String,
    child: Address,
    end: oneshot::Sender<End>,
}

/// The stand-ins of this node, by the child's path.
#[derive(Default)]
pub(crate) struct Proxies {
    by_path: Mutex<HashMap<String, StandIn>>,
}

impl Proxies {
    /// Records a stand-in for `child` on `node`; the receiver tells its task how it ends.
    pub(crate) fn add(&self, node: &str, child: &Address) -> oneshot::Receiver<End> {
        let (end, ended) = oneshot::channel();
        self.lock().insert(
            child.path.to_string(),
            StandIn {
                node: node.to_owned(),
                child: child.clone(),
                end,
            },
        );
        ended
    }

    /// Ends the stand-in of `child`, if it is that incarnation's; true if it did.
    pub(crate) fn end(&self, child: &Address, how: End) -> bool {
        let mut proxies = self.lock();
        if proxies
            .get(child.path.as_str())
            .is_some_and(|s| s.child.incarnation == child.incarnation)
            && let Some(stand_in) = proxies.remove(child.path.as_str())
        {
            let _ = stand_in.end.send(how);
            return true;
        }
        false
    }

    /// Ends every stand-in of a child on `node`, which is down.
    pub(crate) fn node_down(&self, node: &str) {
        let mut proxies = self.lock();
        let gone: Vec<String> = proxies
            .iter()
            .filter(|(_, s)| s.node == node)
            .map(|(path, _)| path.clone())
            .collect();
        for path in gone {
            if let Some(stand_in) = proxies.remove(&path) {
                let _ = stand_in.end.send(End::NodeDown);
            }
        }
    }

    /// The node of the stand-in whose child is `path` or an ancestor of it (its descendants
    /// live on that node too).
    pub(crate) fn node_of(&self, path: &str) -> Option<String> {
        let proxies = self.lock();
        if proxies.is_empty() {
            return None;
        }
        let mut at = path;
        loop {
            if let Some(s) = proxies.get(at) {
                return Some(s.node.clone());
            }
            at = &at[..at.rfind('/')?];
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StandIn>> {
        self.by_path.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs the stand-in of `child` on `node` for `parent`: forwards what it gets until it ends.
pub(crate) async fn stand_in<T: Through>(
    cluster: Arc<T>,
    node: String,
    parent: Address,
    child: Address,
    mut mailbox: Mailbox,
    mut ended: oneshot::Receiver<End>,
    _reservation: Option<Reservation>,
) {
    let me = cluster.node().to_owned();
    let target = wire::address(&child, &me);
    let how = loop {
        tokio::select! {
            biased;
            how = &mut ended => break how.unwrap_or(End::NodeDown),
            Some(msg) = mailbox.system.recv() => {
                let signal = match msg {
                    SystemMsg::Stop(reason) => Signal::Stop(reason),
                    SystemMsg::Directive { directive, delay, cause } => Signal::Directive {
                        directive,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        cause,
                    },
                    SystemMsg::Watch(watcher) => {
                        cluster.watch_through(&node, &watcher, &child);
                        continue;
                    }
                    SystemMsg::Unwatch(watcher) => {
                        cluster.unwatch_through(&node, &watcher, &child);
                        continue;
                    }
                    SystemMsg::Upgrade(request) => {
                        request.answer(UpgradeOutcome::Failed(format!(
                            "{child} runs on node {node}: upgrade it there"
                        )));
                        continue;
                    }
                    SystemMsg::Snapshot(answer) => {
                        let _ = answer.send(Err(crate::sandbox::image::ImageError::Uncapturable(
                            format!("{child} runs on node {node}: capture it there"),
                        )));
                        continue;
                    }
                    SystemMsg::Depart(departure) => {
                        let _ = departure.image.send(Err(crate::sandbox::image::ImageError::Uncapturable(
                            format!("{child} runs on node {node}: move it from there"),
                        )));
                        continue;
                    }
                    SystemMsg::Urgent => {
                        while let Ok(msg) = mailbox.try_next() {
                            cluster.forward_user(&node, &child, msg);
                        }
                        continue;
                    }
                    // A child elsewhere has no children here, and is not deactivated from
                    // here.
                    SystemMsg::ChildTerminated(_)
                    | SystemMsg::Failed { .. }
                    | SystemMsg::Deactivate
                    | SystemMsg::Activate => continue,
                };
                cluster.send(&node, Frame::Signal { to: target.clone(), signal });
            }
            Some(msg) = mailbox.user.recv() => {
                mailbox.took(&msg);
                cluster.forward_user(&node, &child, msg);
            }
        }
    };
    let Some(kernel) = cluster.kernel() else {
        return;
    };
    kernel.registry.remove(&child);
    mailbox.close_user();
    while let Ok(UserMsg::Message(envelope)) = mailbox.try_next() {
        kernel.dead_letter(envelope, child.to_string(), DeadLetterReason::NodeDown);
    }
    if let End::NodeDown = how {
        tracing::warn!(child = %child, node, "a child on a node that went down counts as terminated");
        kernel.child_terminated(Some(&parent), &child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::at;

    #[test]
    fn a_stand_in_covers_its_child_and_descendants_and_ends_once() {
        let proxies = Proxies::default();
        let child = at("/user/p/w", 7);
        let mut ended = proxies.add("b", &child);
        assert_eq!(proxies.node_of("/user/p/w").as_deref(), Some("b"));
        assert_eq!(proxies.node_of("/user/p/w/g/h").as_deref(), Some("b"));
        assert_eq!(proxies.node_of("/user/p"), None);
        assert_eq!(proxies.node_of("/user/p/wx"), None);
        assert!(!proxies.end(&at("/user/p/w", 8), End::Terminated));
        assert!(
            ended.try_recv().is_err(),
            "another incarnation does not end it"
        );
        proxies.node_down("b");
        assert!(matches!(ended.try_recv(), Ok(End::NodeDown)));
        assert_eq!(proxies.node_of("/user/p/w"), None);
        assert!(!proxies.end(&child, End::Terminated), "it ended once");
    }
}
