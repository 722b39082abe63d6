//! `service-manager`: a bounded pool of one-shot workers, one spawned per request, that
//! replies as itself (the schema is `mote_guest::patterns::service_manager`).
//!
//! Dust's ServiceManagerActor: "each time it receives a message it looks to see if it has a
//! spare slot: if it does it creates a child and hands off the message to it, while watching
//! the child. If not the message is queued." The worker processes the message, replies (so
//! that "it looks as though the Service Manager processed the message") and is done; its
//! termination opens the slot for the next queued message.
//!
//! How: a request (any kind but `service-manager.*`) gets a fresh child `w<n>` from the
//! configured module, watched, and is told to it with the manager as sender, so the worker's
//! reply (its first message to the manager; it must come from the worker itself, a message
//! from anyone else is a new request) comes back here. The manager sends that reply,
//! kind and body untouched, to the requester from itself, and stops the worker. The slot
//! opens when the worker has terminated (the watch), so at most `max_workers` workers are
//! alive at any moment. Requests past the slots wait in the host-kept stash, in arrival
//! order (so they survive a restart of the manager); past `queue` waiting, a request is a
//! dead letter (`rejected`). A worker that fails (per `strategy`), stops without replying,
//! or does not reply within `worker_timeout_ms` (a timer per request) costs its requester a
//! `service-manager.failed` reply.
//!
//! Invariants: at most `max_workers` workers alive, at most `queue` requests waiting; every
//! request taken on gets exactly one answer (the worker's reply or `failed`) unless it has no
//! sender, or the manager escalates while it runs; requests start in arrival order.

use std::collections::HashMap;
use std::time::Duration;

use mote_guest::patterns::{config, service_manager::*};
use mote_guest::{
    Actor, Address, Context, Directive, Envelope, Error, Failure, Message, Result, Strategy,
    decode, encode,
};

/// The prefix of the manager's own kinds.
const CONTROL: &str = "service-manager.";

/// One request in the hands of a worker.
struct Job {
    /// Who gets the answer (`None`: nobody, the request had no sender).
    requester: Option<Address>,
    /// The request, kept to hand it again to a restarted worker (`restart` only).
    kind: String,
    body: Vec<u8>,
    /// The worker's deadline timer.
    timer: Option<u64>,
    /// Restarts so far.
    restarts: u32,
}

/// A live worker (spawned, not yet terminated).
struct Worker {
    address: Address,
    /// Its request, until answered one way or the other.
    job: Option<Job>,
}

struct Manager {
    config: Config,
    /// Live workers, by path.
    workers: HashMap<String, Worker>,
    next: u64,
    served: u64,
    failed: u64,
    refused: u64,
    peak: u32,
}

/// The sender's problem: the message is rejected (a dead letter), the manager goes on.
fn malformed(why: impl core::fmt::Display) -> Error {
    Error::msg(format!("service-manager: {why}")).into_malformed()
}

/// How many (saturating at `u32::MAX`).
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Manager {
    fn running(&self) -> u32 {
        count(self.workers.len())
    }

    /// The live worker that sent the message being handled, if one did.
    fn worker_of(&self, sender: Option<&Address>) -> Option<String> {
        let sender = sender?;
        self.workers
            .get(&sender.path)
            .filter(|w| w.address.incarnation == sender.incarnation)
            .map(|_| sender.path.clone())
    }

    /// Answers `job`'s requester with [`Failed`].
    fn fail(&mut self, ctx: &Context, job: Job, failure: &str, reason: String) {
        self.failed += 1;
        if let Some(timer) = job.timer {
            ctx.cancel_timer(timer);
        }
        if let Some(to) = &job.requester {
            let failed = Failed {
                failure: failure.to_string(),
                reason,
            };
            if let Err(e) = ctx.tell(to, &failed) {
                ctx.warn(&format!("service-manager: cannot answer {}: {e}", to.path));
            }
        }
    }

    /// Ends the request of worker `path` with [`Failed`] and stops the worker.
    fn fail_worker(&mut self, ctx: &Context, path: &str, failure: &str, reason: String) {
        let Some(worker) = self.workers.get_mut(path) else {
            return;
        };
        let address = worker.address.clone();
        if let Some(job) = worker.job.take() {
            self.fail(ctx, job, failure, reason);
        }
        ctx.stop(&address);
    }

    /// The worker at `path` replied: its reply goes to the requester from the manager.
    fn replied(&mut self, ctx: &Context, path: &str, kind: &str, body: &[u8]) {
        let Some(worker) = self.workers.get_mut(path) else {
            return;
        };
        let Some(job) = worker.job.take() else {
            // It said more than its one reply: nobody waits for it.
            return;
        };
        ctx.stop(&worker.address);
        self.served += 1;
        if let Some(timer) = job.timer {
            ctx.cancel_timer(timer);
        }
        if let Some(to) = &job.requester
            && let Err(e) = ctx.tell_raw(to, kind, body)
        {
            ctx.warn(&format!("service-manager: cannot answer {}: {e}", to.path));
        }
    }

    /// Hands a request to a fresh worker (a slot is free).
    fn dispatch(&mut self, ctx: &Context, requester: Option<Address>, kind: &str, body: &[u8]) {
        self.next += 1;
        let name = format!("w{}", self.next);
        let keep = self.config.strategy == WorkerStrategy::Restart;
        let job = Job {
            requester,
            kind: if keep {
                kind.to_string()
            } else {
                String::new()
            },
            body: if keep { body.to_vec() } else { Vec::new() },
            timer: None,
            restarts: 0,
        };
        let init = self.config.init.as_bytes();
        let address = match ctx.spawn(&name, &self.config.module, init) {
            Ok(address) => address,
            Err(e) => return self.fail(ctx, job, "spawn", e.message().to_string()),
        };
        if let Err(e) = ctx.watch(&address) {
            // Unwatched, its end would never open the slot: it does not start the request.
            ctx.stop(&address);
            return self.fail(ctx, job, "spawn", e.message().to_string());
        }
        let path = address.path.clone();
        self.workers.insert(
            path.clone(),
            Worker {
                address: address.clone(),
                job: Some(job),
            },
        );
        self.peak = self.peak.max(self.running());
        if let Err(e) = self.begin(ctx, &address, kind, body) {
            self.fail_worker(ctx, &path, "spawn", e.message().to_string());
        }
    }

    /// Starts the worker's deadline and hands it the request, with the manager as sender.
    fn begin(&mut self, ctx: &Context, worker: &Address, kind: &str, body: &[u8]) -> Result<()> {
        if self.config.worker_timeout_ms > 0 {
            let deadline = Duration::from_millis(self.config.worker_timeout_ms);
            let timeout = Timeout {
                worker: worker.path.clone(),
            };
            let timer = ctx.schedule_self(&timeout, deadline, None)?;
            if let Some(job) = self
                .workers
                .get_mut(&worker.path)
                .and_then(|w| w.job.as_mut())
            {
                job.timer = Some(timer);
            }
        }
        ctx.tell_raw(worker, kind, body)
    }

    /// Hands waiting requests to workers while slots are free.
    fn drain(&mut self, ctx: &Context) {
        while self.workers.len() < self.config.max_workers as usize {
            let Some(waiting) = ctx.take(None) else {
                break;
            };
            self.dispatch(ctx, waiting.sender, &waiting.kind, &waiting.body);
        }
    }

    /// A request: to a worker now if a slot is free and none waits, else it waits (or is
    /// refused past the queue).
    fn admit(&mut self, ctx: &mut Context, env: &Envelope) -> Result<()> {
        let waiting = ctx.stashed();
        if waiting == 0 && self.workers.len() < self.config.max_workers as usize {
            self.dispatch(ctx, ctx.sender().cloned(), &env.kind, &env.body);
            return Ok(());
        }
        if waiting >= self.config.queue {
            self.refused += 1;
            let queue = self.config.queue;
            return Err(malformed(format!("queue full ({queue} waiting)")));
        }
        ctx.stash();
        Ok(())
    }

    fn status(&self, ctx: &Context) -> Status {
        Status {
            running: self.running(),
            queued: ctx.stashed(),
            served: self.served,
            failed: self.failed,
            refused: self.refused,
            peak: self.peak,
        }
    }
}

impl Actor for Manager {
    type Msg = Timeout;

    fn start(ctx: &mut Context, init: &[u8]) -> Result<Self> {
        let config: Config = config(MODULE, init)?;
        if config.max_workers == 0 {
            return Err(Error::msg(
                "service-manager: bad configuration: max_workers must be at least 1",
            ));
        }
        // The manager decides about every failure itself (`supervise`); the host's count of
        // restarts must not escalate before `max_restarts` does.
        let restarts = config.max_restarts.saturating_add(1);
        ctx.set_strategy(&Strategy::one_for_one(Directive::Stop).restarts(restarts, 3_600_000));
        let mut manager = Manager {
            config,
            workers: HashMap::new(),
            next: 0,
            served: 0,
            failed: 0,
            refused: 0,
            peak: 0,
        };
        // Requests queued before a restart still wait; the old workers were stopped with it.
        manager.drain(ctx);
        Ok(manager)
    }

    fn receive(&mut self, ctx: &mut Context, timeout: Timeout) -> Result<()> {
        if let Some(path) = self.worker_of(ctx.sender()) {
            // A worker's reply that happens to be of this kind.
            self.replied(ctx, &path, Timeout::KIND, &encode(&timeout)?);
            return Ok(());
        }
        let me = ctx.myself();
        if ctx.sender().is_some_and(|s| s.path == me.path)
            && self
                .workers
                .get(&timeout.worker)
                .is_some_and(|w| w.job.is_some())
        {
            let ms = self.config.worker_timeout_ms;
            let reason = format!("no reply within {ms} ms");
            self.fail_worker(ctx, &timeout.worker, "timeout", reason);
        }
        Ok(())
    }

    fn unhandled(&mut self, ctx: &mut Context, env: Envelope) -> Result<()> {
        if let Some(path) = self.worker_of(ctx.sender()) {
            self.replied(ctx, &path, &env.kind, &env.body);
            return Ok(());
        }
        let me = ctx.myself().path;
        if let Some(sender) = ctx.sender()
            && sender.path.starts_with(&me)
            && sender.path[me.len()..].starts_with('/')
        {
            // From a worker already gone: nobody waits for it.
            ctx.debug(&format!("dropping `{}` from {}", env.kind, sender.path));
            return Ok(());
        }
        if env.kind == GetStatus::KIND {
            decode::<GetStatus>(&env.kind, &env.body).map_err(Error::into_malformed)?;
            return ctx.reply(&self.status(ctx));
        }
        if env.kind.starts_with(CONTROL) {
            return Err(malformed(format!("unknown kind `{}`", env.kind)));
        }
        self.admit(ctx, &env)
    }

    fn terminated(&mut self, ctx: &mut Context, who: Address) -> Result<()> {
        if self
            .workers
            .get(&who.path)
            .is_some_and(|w| w.address.incarnation == who.incarnation)
            && let Some(worker) = self.workers.remove(&who.path)
        {
            if let Some(job) = worker.job {
                self.fail(
                    ctx,
                    job,
                    "stopped",
                    "the worker stopped without replying".into(),
                );
            }
            self.drain(ctx);
        }
        Ok(())
    }

    fn supervise(
        &mut self,
        ctx: &mut Context,
        child: &Address,
        failure: &Failure,
    ) -> Option<Directive> {
        let reason = format!("{}: {}", failure.kind.name(), failure.error);
        let Some(job) = self
            .workers
            .get_mut(&child.path)
            .and_then(|w| w.job.as_mut())
        else {
            return Some(Directive::Stop);
        };
        match self.config.strategy {
            WorkerStrategy::Restart if job.restarts < self.config.max_restarts => {
                job.restarts += 1;
                // The failed request was dropped: the fresh instance gets it again (the
                // restart keeps the mailbox).
                match ctx.tell_raw(child, &job.kind, &job.body) {
                    Ok(()) => return Some(Directive::Restart),
                    Err(e) => ctx.warn(&format!("service-manager: cannot retry: {e}")),
                }
            }
            WorkerStrategy::Escalate => {
                let job = self.workers.get_mut(&child.path)?.job.take()?;
                self.fail(ctx, job, failure.kind.name(), reason);
                return Some(Directive::Escalate);
            }
            _ => {}
        }
        let job = self.workers.get_mut(&child.path)?.job.take()?;
        self.fail(ctx, job, failure.kind.name(), reason);
        Some(Directive::Stop)
    }
}

mote_guest::export_actor!(Manager);
