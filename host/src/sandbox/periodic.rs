//! A named background thread that does one piece of work every period until it is dropped.
//!
//! The epoch ticker and the stack sweeper are both this: a loop on its own thread, woken early
//! by its drop so that a host shuts down without waiting out a period.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A thread running `work` every period; it ends when dropped or when `work` returns false.
pub(crate) struct Periodic {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Periodic {
    /// Starts the thread `name`, which waits `period`, then runs `work`, again and again.
    pub(crate) fn start(
        name: &str,
        period: Duration,
        mut work: impl FnMut() -> bool + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                loop {
                    std::thread::park_timeout(period);
                    if flag.load(Ordering::Acquire) || !work() {
                        break;
                    }
                }
            })?;
        Ok(Periodic {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn it_works_every_period_until_dropped_and_a_drop_does_not_wait_out_the_period() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let fast = Periodic::start("test-fast", Duration::from_millis(1), move || {
            counted.fetch_add(1, Ordering::Relaxed);
            true
        })
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while runs.load(Ordering::Relaxed) < 3 {
            assert!(std::time::Instant::now() < deadline, "no work done");
            std::thread::yield_now();
        }
        drop(fast);
        let after = runs.load(Ordering::Relaxed);
        // An hour-long period: the drop wakes the thread, which leaves without working.
        let slow = Periodic::start("test-slow", Duration::from_secs(3600), || true).unwrap();
        let dropping = std::time::Instant::now();
        drop(slow);
        assert!(dropping.elapsed() < Duration::from_secs(60));
        assert_eq!(
            runs.load(Ordering::Relaxed),
            after,
            "no work after the drop"
        );
    }

    #[test]
    fn it_ends_when_its_work_says_so() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let once = Periodic::start("test-once", Duration::from_millis(1), move || {
            counted.fetch_add(1, Ordering::Relaxed) < 1
        })
        .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !once.thread.as_ref().unwrap().is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "the thread did not end"
            );
            std::thread::yield_now();
        }
        assert_eq!(runs.load(Ordering::Relaxed), 2);
    }
}
