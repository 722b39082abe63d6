//! A mailbox lane: an unbounded queue with many senders and one receiver, under one lock.
//!
//! A tokio channel allocates its first block of 32 slots when it is made (some 3-5 KiB for a
//! lane of messages) and pads its halves to cache lines; most actors hold a handful of
//! messages at a time, or none. A lane holds a `VecDeque` that grows only when messages come,
//! and its receiver's waker, under a lock that is never held across anything but a push or a
//! pop. Its first buffer has room for one message: a `VecDeque` keeps the room of its busiest
//! moment (four messages at least, some 400 bytes of user messages) for the actor's life, and
//! an actor that takes its messages one at a time never needs more.
//!
//! Invariants (tested below):
//! - Messages come out in the order they went in (per lane; one lock orders every push).
//! - A send to a closed lane (closed by its receiver, or the receiver dropped) gives the message
//!   back; what was queued before closing can still be taken.
//! - The receiver learns that every sender is gone (`Disconnected`, `None`) only once the
//!   lane is empty.
//! - A waiting receiver is woken by every send and by the last sender's drop; no wake is lost,
//!   because the waker is stored and taken under the same lock that orders the queue.
//! - A peer (the end a pulled receive takes through) takes only the oldest message, in the same
//!   order, and its drop leaves the lane open.
//! - A lane that never held two messages at once holds room for one.
//! - Finding a lane empty takes no lock: `queued` mirrors the queue's length, written under the
//!   lock at every push and pop. A receiver that reads 0 saw a moment when nothing was queued,
//!   as it would have under the lock; one that reads more takes the lock to take it. Waiting
//!   always takes the lock, so a send is never missed by a waiter.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

/// Why nothing was taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryRecvError {
    /// Nothing queued now.
    Empty,
    /// Nothing queued, and no sender is left.
    Disconnected,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    senders: AtomicUsize,
    /// The queue's length as of its last push or pop (see the invariants).
    queued: AtomicUsize,
}

struct State<T> {
    queue: VecDeque<T>,
    closed: bool,
    waker: Option<Waker>,
}

impl<T> State<T> {
    /// Has `waker` woken by the next send (a clone only if a different task waits now).
    fn wait(&mut self, waker: &Waker) {
        match &mut self.waker {
            Some(stored) if stored.will_wake(waker) => {}
            slot => *slot = Some(waker.clone()),
        }
    }
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether nothing was queued at the last push or pop, read without the lock.
    fn seems_empty(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }

    /// Records the queue's length after a push or pop, under the lock.
    fn count(&self, state: &State<T>) {
        self.queued.store(state.queue.len(), Ordering::Release);
    }
}

/// A sending handle; clones share the lane.
pub(crate) struct LaneSender<T> {
    shared: Arc<Shared<T>>,
}

/// The one receiving handle.
pub(crate) struct LaneReceiver<T> {
    shared: Arc<Shared<T>>,
    /// Whether it closed the lane (only it does).
    closed: bool,
}

/// A new, empty, open lane.
pub(crate) fn lane<T>() -> (LaneSender<T>, LaneReceiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            closed: false,
            waker: None,
        }),
        senders: AtomicUsize::new(1),
        queued: AtomicUsize::new(0),
    });
    (
        LaneSender {
            shared: shared.clone(),
        },
        LaneReceiver {
            shared,
            closed: false,
        },
    )
}

impl<T> LaneSender<T> {
    /// Queues `value`, or gives it back if the lane is closed.
    pub(crate) fn send(&self, value: T) -> Result<(), T> {
        let mut state = self.shared.lock();
        if state.closed {
            return Err(value);
        }
        if state.queue.capacity() == 0 {
            // Else the first push makes room for four; a burst grows it as before.
            state.queue.reserve_exact(1);
        }
        state.queue.push_back(value);
        self.shared.count(&state);
        let waker = state.waker.take();
        drop(state);
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Clone for LaneSender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.fetch_add(1, Ordering::Relaxed);
        LaneSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for LaneSender<T> {
    fn drop(&mut self) {
        if self.shared.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            let waker = self.shared.lock().waker.take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl<T> std::fmt::Debug for LaneSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneSender").finish_non_exhaustive()
    }
}

impl<T> LaneReceiver<T> {
    /// Takes the oldest message, if any.
    pub(crate) fn try_recv(&mut self) -> Result<T, TryRecvError> {
        if self.shared.seems_empty()
            && !self.closed
            && self.shared.senders.load(Ordering::Acquire) > 0
        {
            return Err(TryRecvError::Empty);
        }
        self.take(&mut self.shared.lock())
    }

    /// The oldest message, or why there is none, from the locked state.
    fn take(&self, state: &mut State<T>) -> Result<T, TryRecvError> {
        match state.queue.pop_front() {
            Some(value) => {
                self.shared.count(state);
                Ok(value)
            }
            None if state.closed || self.shared.senders.load(Ordering::Acquire) == 0 => {
                Err(TryRecvError::Disconnected)
            }
            None => Err(TryRecvError::Empty),
        }
    }

    /// Waits for the oldest message; `None` once the lane is empty and closed or sender-less.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| {
            let mut state = self.shared.lock();
            match self.take(&mut state) {
                Ok(value) => return Poll::Ready(Some(value)),
                Err(TryRecvError::Disconnected) => return Poll::Ready(None),
                Err(TryRecvError::Empty) => {}
            }
            state.wait(cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Gives back the queue's spare room: an empty lane then holds no buffer (a `VecDeque` keeps
    /// the room of its busiest moment).
    pub(crate) fn shrink(&mut self) {
        self.shared.lock().queue.shrink_to_fit();
    }

    /// The room the queue holds now, in messages.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.shared.lock().queue.capacity()
    }

    /// Refuses later sends; what is queued can still be taken.
    pub(crate) fn close(&mut self) {
        self.closed = true;
        self.shared.lock().closed = true;
    }
}

impl<T> LaneReceiver<T> {
    /// A second taking end for a pulled receive (see `actor::pull`), used only while this
    /// receiver's owner waits in the guest call that pulls: the two never take at once.
    pub(crate) fn peer(&self) -> LanePeer<T> {
        LanePeer {
            shared: self.shared.clone(),
        }
    }
}

/// A lane's taking end lent to a pulled receive: it takes the oldest message only if it
/// passes a test, and it closes nothing when dropped.
pub(crate) struct LanePeer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> LanePeer<T> {
    /// Takes the oldest message if there is one and `pass` accepts it; else leaves the lane as
    /// it was.
    pub(crate) fn take_if(&self, pass: impl FnOnce(&T) -> bool) -> Option<T> {
        if self.shared.seems_empty() {
            return None;
        }
        let mut state = self.shared.lock();
        match state.queue.front() {
            Some(value) if pass(value) => {
                let taken = state.queue.pop_front();
                self.shared.count(&state);
                taken
            }
            _ => None,
        }
    }

    /// Whether nothing is queued now.
    pub(crate) fn is_empty(&self) -> bool {
        self.shared.seems_empty()
    }

    /// Has `waker` woken by the next send (or the lane's close) if nothing is queued now, in
    /// the receiver's stead: true if it waits, false if something is queued (or the lane is
    /// closed) already.
    pub(crate) fn wait(&self, waker: &Waker) -> bool {
        if !self.shared.seems_empty() {
            return false;
        }
        let mut state = self.shared.lock();
        if !state.queue.is_empty() || state.closed {
            return false;
        }
        state.wait(waker);
        true
    }
}

impl<T> Drop for LaneReceiver<T> {
    fn drop(&mut self) {
        // Later sends fail; what was queued goes with the lane (after the lock is released,
        // so a message's own drop may send).
        let queued = {
            let mut state = self.shared.lock();
            state.closed = true;
            state.waker = None;
            let queued = std::mem::take(&mut state.queue);
            self.shared.count(&state);
            queued
        };
        drop(queued);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::{TryRecvError, lane};

    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn flag() -> (Arc<Flag>, Waker) {
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        (flag.clone(), Waker::from(flag))
    }

    #[test]
    fn messages_come_out_in_order_and_a_closed_lane_gives_sends_back() {
        let (tx, mut rx) = lane();
        for i in 0..100 {
            tx.send(i).unwrap();
        }
        rx.close();
        assert_eq!(tx.send(100), Err(100), "a closed lane takes nothing");
        let taken: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(taken, (0..100).collect::<Vec<_>>());
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn an_empty_lane_is_seen_empty_without_its_lock_and_a_queued_message_is_still_taken() {
        let (tx, mut rx) = lane::<u32>();
        let peer = rx.peer();
        let (done, finished) = std::sync::mpsc::channel();
        let shared = rx.shared.clone();
        {
            // Another thread holds the lock: a look that took it would not come back.
            let held = shared.lock();
            let looking = std::thread::spawn(move || {
                let empty = (rx.try_recv(), peer.is_empty(), peer.take_if(|_| true));
                done.send(()).unwrap();
                (rx, peer, empty)
            });
            finished
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("a look at an empty lane waited for its lock");
            let (mut rx, peer, empty) = looking.join().unwrap();
            assert_eq!(empty, (Err(TryRecvError::Empty), true, None));
            drop(held);
            tx.send(7).unwrap();
            assert!(!peer.is_empty());
            let (_, waker) = flag();
            assert!(!peer.wait(&waker), "a queued message is not waited for");
            assert_eq!(peer.take_if(|_| true), Some(7));
            assert!(peer.is_empty(), "taking the last message empties the lane");
            tx.send(8).unwrap();
            assert_eq!(rx.try_recv(), Ok(8));
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            rx.close();
            assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        }
    }

    #[test]
    fn a_lane_taken_one_message_at_a_time_holds_room_for_one() {
        let (tx, mut rx) = lane();
        assert_eq!(rx.capacity(), 0, "a new lane holds no buffer");
        for i in 0..10 {
            tx.send(i).unwrap();
            assert_eq!(rx.try_recv(), Ok(i));
        }
        assert_eq!(rx.capacity(), 1);
        for i in 0..10 {
            tx.send(i).unwrap();
        }
        assert!(rx.capacity() >= 10, "a burst grows it");
        let taken: Vec<i32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(taken, (0..10).collect::<Vec<_>>(), "in order");
        rx.shrink();
        tx.send(7).unwrap();
        assert_eq!(rx.capacity(), 1, "a shrunk lane starts again from one");
    }

    #[test]
    fn a_shrunk_lane_holds_no_room_beyond_its_messages_and_keeps_them() {
        let (tx, mut rx) = lane();
        for i in 0..100 {
            tx.send(i).unwrap();
        }
        while rx.try_recv().is_ok_and(|i| i < 97) {}
        assert!(rx.capacity() >= 100, "a drained queue keeps its room");
        rx.shrink();
        assert!(rx.capacity() < 100, "its room is given back");
        assert_eq!(
            std::iter::from_fn(|| rx.try_recv().ok()).collect::<Vec<_>>(),
            [98, 99]
        );
        rx.shrink();
        assert_eq!(rx.capacity(), 0, "an empty lane holds no buffer");
        tx.send(7).unwrap();
        assert_eq!(rx.try_recv(), Ok(7), "a shrunk lane takes messages again");
    }

    #[test]
    fn a_peer_takes_only_what_passes_in_order_and_closes_nothing() {
        let (tx, mut rx) = lane();
        let peer = rx.peer();
        assert!(peer.is_empty());
        for i in 0..4 {
            tx.send(i).unwrap();
        }
        assert_eq!(peer.take_if(|i| *i == 0), Some(0));
        assert_eq!(
            peer.take_if(|i| *i == 2),
            None,
            "only the oldest is looked at"
        );
        assert_eq!(peer.take_if(|_| true), Some(1));
        drop(peer);
        assert_eq!(tx.send(4), Ok(()), "a dropped peer closes nothing");
        assert_eq!(
            std::iter::from_fn(|| rx.try_recv().ok()).collect::<Vec<_>>(),
            [2, 3, 4]
        );
    }

    #[test]
    fn a_dropped_receiver_refuses_sends() {
        let (tx, rx) = lane();
        drop(rx);
        assert_eq!(tx.send(1), Err(1));
    }

    #[test]
    fn disconnected_only_when_empty_and_every_sender_is_gone() {
        let (tx, mut rx) = lane();
        let other = tx.clone();
        tx.send(1).unwrap();
        drop(tx);
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(
            rx.try_recv(),
            Err(TryRecvError::Empty),
            "a clone still sends"
        );
        other.send(2).unwrap();
        drop(other);
        assert_eq!(rx.try_recv(), Ok(2), "queued messages outlive the senders");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    }

    #[test]
    fn a_waiting_receiver_is_woken_by_a_send_and_by_the_last_sender_leaving() {
        let (tx, mut rx) = lane::<u8>();
        let (woken, waker) = flag();
        let mut cx = Context::from_waker(&waker);
        {
            let mut recv = Box::pin(rx.recv());
            assert_eq!(recv.as_mut().poll(&mut cx), Poll::Pending);
            tx.send(7).unwrap();
            assert!(woken.0.swap(false, Ordering::SeqCst), "a send wakes");
            assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        }
        let mut recv = Box::pin(rx.recv());
        assert_eq!(recv.as_mut().poll(&mut cx), Poll::Pending);
        drop(tx);
        assert!(
            woken.0.load(Ordering::SeqCst),
            "the last sender's drop wakes"
        );
        assert_eq!(recv.as_mut().poll(&mut cx), Poll::Ready(None));
    }

    #[test]
    fn sends_from_many_threads_all_arrive_in_each_senders_order() {
        let (tx, mut rx) = lane::<(usize, usize)>();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        tx.send((t, i)).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        for thread in threads {
            thread.join().unwrap();
        }
        let mut next = [0usize; 4];
        while let Ok((t, i)) = rx.try_recv() {
            assert_eq!(i, next[t], "sender {t} out of order");
            next[t] += 1;
        }
        assert_eq!(next, [10_000; 4]);
    }
}
