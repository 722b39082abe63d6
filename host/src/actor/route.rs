//! A sender's route: the actor it sends to again and again, resolved once.
//!
//! A send by address finds its receiver in the registry: a lock every sender on every worker
//! writes, and a keyed hash of the path. An actor that sends twice in a row to one incarnation
//! (a reply partner, a collector, the next stage of a pipeline) keeps that receiver's handle,
//! and its next sends to it go straight into the receiver's mailbox.
//!
//! Invariants (tested below):
//! - A send through the route reaches exactly the actor the registry would give it: the
//!   route is taken only for the same path and the same non-zero incarnation it was resolved
//!   for, and it is resolved only where that path names that incarnation (not an alias).
//! - A receiver that left refuses the route's push (a stop closes its mailbox, a passivation
//!   seals it under the registry's write lock), and the message goes the registry's way after
//!   all: to dead letters, another node, or an entity that activates again. A message sent
//!   just as its receiver stops may become a dead letter either way.
//! - A full mailbox refuses it the same way, so the registry's way makes it a dead letter.
//! - Messages from one sender to one receiver keep their order: both ways push at once, in
//!   the order of the sends.
//! - A route costs its actor two words while unused; a sender to ever different receivers
//!   never resolves one (it would pay a lookup and a handle's clone a send).
//! - A route keeps at most one receiver's handle alive after that receiver stopped (its emptied
//!   lanes and counters, about a kilobyte), until its sender resolves another, sends to it
//!   again, or stops.

use super::mailbox::{ActorRef, Refused};
use crate::kernel::registry::Registry;
use crate::message::Envelope;

/// The receiver an actor sent to twice in a row, if it is still the same.
#[derive(Default)]
pub(crate) struct Route {
    /// The resolved receiver; boxed, so an actor without one pays a word.
    to: Option<Box<ActorRef>>,
    /// The incarnation of the last send the route did not take (0: none).
    missed: u64,
}

impl Route {
    /// Queues `envelope` for the incarnation `incarnation` at `path` through the route, or
    /// gives it back to be sent the registry's way.
    pub(crate) fn send(
        &mut self,
        registry: &Registry,
        path: &str,
        incarnation: u64,
        envelope: Envelope,
    ) -> Result<(), Envelope> {
        if incarnation == 0 {
            // Whoever lives at the path: the registry decides each time.
            return Err(envelope);
        }
        if !self
            .to
            .as_ref()
            .is_some_and(|to| names(to, path, incarnation))
        {
            if self.missed != incarnation {
                self.missed = incarnation;
                return Err(envelope);
            }
            // The second send in a row to this incarnation: resolve it.
            self.to = registry
                .get(path)
                .filter(|to| names(to, path, incarnation))
                .map(Box::new);
            self.missed = 0;
        }
        let Some(to) = &self.to else {
            return Err(envelope);
        };
        match to.tell(envelope) {
            Ok(()) => Ok(()),
            Err(Refused::Full(envelope)) => Err(envelope),
            Err(Refused::Closed(envelope)) => {
                self.to = None;
                Err(envelope)
            }
        }
    }
}

/// Whether `path` and `incarnation` name `to` itself: its own path (not an alias) and its
/// incarnation.
fn names(to: &ActorRef, path: &str, incarnation: u64) -> bool {
    to.address.incarnation == incarnation && to.address.path.as_str() == path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actor::mailbox::{Mailbox, UserMsg, test_mailbox};

    fn message(n: u8) -> Envelope {
        Envelope::new(None, "k", vec![n])
    }

    fn registered(registry: &Registry, path: &str, incarnation: u64) -> (ActorRef, Mailbox) {
        let (actor, mailbox) = test_mailbox(path, incarnation, 4);
        registry.insert(actor.clone()).unwrap();
        (actor, mailbox)
    }

    fn bodies(mailbox: &mut Mailbox) -> Vec<u8> {
        let mut got = Vec::new();
        while let Ok(UserMsg::Message(envelope)) = mailbox.try_next() {
            got.extend(envelope.body);
        }
        got
    }

    #[test]
    fn the_second_send_in_a_row_to_an_incarnation_resolves_it_and_later_ones_go_straight() {
        let registry = Registry::default();
        let (_b, mut mailbox) = registered(&registry, "/user/b", 7);
        let mut route = Route::default();
        assert!(route.send(&registry, "/user/b", 7, message(1)).is_err());
        assert!(route.to.is_none(), "one send resolves nothing");
        assert!(route.send(&registry, "/user/b", 7, message(2)).is_ok());
        // From here the registry is not asked: a fresh one does not know the path.
        let empty = Registry::default();
        assert!(route.send(&empty, "/user/b", 7, message(3)).is_ok());
        assert_eq!(bodies(&mut mailbox), vec![2, 3], "queued in order");
    }

    #[test]
    fn the_route_is_taken_for_its_own_path_and_incarnation_only() {
        let registry = Registry::default();
        let (_b, mut b_box) = registered(&registry, "/user/b", 7);
        let (_c, mut c_box) = registered(&registry, "/user/c", 8);
        let mut route = Route::default();
        for n in 0..2 {
            let _ = route.send(&registry, "/user/b", 7, message(n));
        }
        assert!(route.to.is_some());
        let wrong = [
            ("/user/c", 7),
            ("/user/b", 8),
            ("/user/b", 0),
            ("/user/bb", 7),
        ];
        for (path, incarnation) in wrong {
            assert!(
                route
                    .send(&registry, path, incarnation, message(9))
                    .is_err(),
                "{path} #{incarnation} is not the route's"
            );
        }
        assert_eq!(bodies(&mut b_box), vec![1]);
        assert!(bodies(&mut c_box).is_empty());
    }

    #[test]
    fn an_alias_or_a_stale_incarnation_is_never_resolved() {
        let registry = Registry::default();
        let (b, _mailbox) = registered(&registry, "/user/b", 7);
        registry
            .alias(crate::address::ActorPath::parse("/user/alias").unwrap(), b)
            .unwrap();
        let mut route = Route::default();
        for (path, incarnation) in [("/user/alias", 7), ("/user/b", 6)] {
            for n in 0..3 {
                assert!(
                    route
                        .send(&registry, path, incarnation, message(n))
                        .is_err()
                );
            }
            assert!(route.to.is_none(), "{path} #{incarnation}");
        }
    }

    #[test]
    fn a_receiver_that_left_or_is_full_gives_the_message_back() {
        let registry = Registry::default();
        let mut route = Route::default();
        // Full: the message comes back, the route stays.
        let (_b, mut mailbox) = registered(&registry, "/user/b", 7);
        for n in 0..5 {
            let sent = route.send(&registry, "/user/b", 7, message(n));
            assert_eq!(sent.is_ok(), (1..5).contains(&n), "send {n}");
        }
        assert!(
            route.send(&registry, "/user/b", 7, message(5)).is_err(),
            "full"
        );
        assert!(route.to.is_some());
        assert_eq!(bodies(&mut mailbox), vec![1, 2, 3, 4]);
        // Passivated: sealed, so the message goes back to the registry, which is free.
        assert!(registry.passivate(route.to.as_ref().unwrap()));
        let back = route.send(&registry, "/user/b", 7, message(6));
        assert!(back.is_err_and(|e| e.body == [6]));
        assert!(route.to.is_none(), "a receiver that left is forgotten");
        assert!(bodies(&mut mailbox).is_empty());
        // Stopped: its mailbox closed.
        let (_c, mut c_box) = registered(&registry, "/user/c", 8);
        for n in 0..2 {
            let _ = route.send(&registry, "/user/c", 8, message(n));
        }
        c_box.close_user();
        assert!(route.send(&registry, "/user/c", 8, message(2)).is_err());
        assert!(route.to.is_none());
    }
}
