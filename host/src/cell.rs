//! The actor cell: the task that owns one actor's instance and mailbox and runs its lifecycle.
//!
//! Lifecycle: instantiate -> `start(init)` -> handle messages one at a time -> terminate.
//! Terminating stops every child first and waits for each to report back, then calls `stopping`,
//! releases the path, hands queued messages to dead letters and tells the parent.
//!
//! Until supervision lands, a failure (trap, error from `receive`, failed `start`) stops the actor
//! with `StopReason::Failure`, and its children with `StopReason::ParentFailure`. A trapped instance
//! cannot be entered again, so its `stopping` hook is skipped.

use std::sync::Arc;

use tokio::sync::mpsc::error::TryRecvError;
use tracing::Instrument;

use crate::address::Address;
use crate::deadletters::DeadLetterReason;
use crate::instance::{ActorInstance, ActorState, Failure};
use crate::mailbox::{ActorRef, Mailbox, SystemMsg, UserMsg};
use crate::message::StopReason;
use crate::module::Module;
use crate::system::Shared;

/// Everything a new cell needs to run.
pub(crate) struct CellSpec {
    pub(crate) shared: Arc<Shared>,
    pub(crate) me: ActorRef,
    pub(crate) parent: Option<Address>,
    pub(crate) module: Arc<Module>,
    pub(crate) init: Vec<u8>,
    pub(crate) mailbox: Mailbox,
}

/// Spawns the cell's task on the system's runtime.
pub(crate) fn spawn(spec: CellSpec) {
    let span = tracing::info_span!("actor", path = %spec.me.address.path);
    let runtime = spec.shared.runtime.clone();
    runtime.spawn(run(spec).instrument(span));
}

async fn run(spec: CellSpec) {
    let CellSpec {
        shared,
        me,
        parent,
        module,
        init,
        mut mailbox,
    } = spec;
    let state = ActorState::new(shared.clone(), me.address.clone(), parent.clone());
    let (instance, reason) = match ActorInstance::new(&module, state).await {
        Err(failure) => (None, fail(&failure, "instantiate")),
        Ok(mut instance) => {
            let reason = match instance.start(&init).await {
                Err(failure) => fail(&failure, "start"),
                Ok(()) if instance.state().stop_requested => StopReason::Normal,
                Ok(()) => serve(&shared, &mut instance, &mut mailbox).await,
            };
            (Some(instance), reason)
        }
    };
    terminate(&shared, &me, parent, instance, &mut mailbox, reason).await;
}

fn fail(failure: &Failure, hook: &str) -> StopReason {
    tracing::error!(%failure, hook, "actor failed; stopping it and its children");
    StopReason::Failure(failure.to_string())
}

/// Handles messages until something stops the actor; returns why.
async fn serve(shared: &Shared, instance: &mut ActorInstance, mailbox: &mut Mailbox) -> StopReason {
    let throughput = shared.config.throughput;
    loop {
        let mut handled = 0;
        while handled < throughput {
            if let Some(reason) = drain_system(instance, mailbox) {
                return reason;
            }
            let msg = match mailbox.user.try_recv() {
                Ok(msg) => msg,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return StopReason::Normal,
            };
            if let Some(reason) = handle_user(instance, msg).await {
                return reason;
            }
            handled += 1;
        }
        if handled == throughput {
            // Fairness: let other actors run before draining the next batch.
            tokio::task::yield_now().await;
            continue;
        }
        tokio::select! {
            biased;
            Some(sys) = mailbox.system.recv() => {
                if let Some(reason) = handle_system(instance, sys) {
                    return reason;
                }
            }
            msg = mailbox.user.recv() => match msg {
                Some(msg) => {
                    if let Some(reason) = handle_user(instance, msg).await {
                        return reason;
                    }
                }
                None => return StopReason::Normal,
            },
        }
    }
}

fn drain_system(instance: &mut ActorInstance, mailbox: &mut Mailbox) -> Option<StopReason> {
    while let Ok(sys) = mailbox.system.try_recv() {
        if let Some(reason) = handle_system(instance, sys) {
            return Some(reason);
        }
    }
    None
}

fn handle_system(instance: &mut ActorInstance, msg: SystemMsg) -> Option<StopReason> {
    match msg {
        SystemMsg::Stop(reason) => Some(reason),
        SystemMsg::ChildTerminated(child) => {
            let children = &mut instance.state().children;
            if children
                .get(child.path.name())
                .is_some_and(|c| c.address.incarnation == child.incarnation)
            {
                children.remove(child.path.name());
            }
            None
        }
    }
}

async fn handle_user(instance: &mut ActorInstance, msg: UserMsg) -> Option<StopReason> {
    let envelope = match msg {
        UserMsg::Message(envelope) => envelope,
        UserMsg::PoisonPill => return Some(StopReason::Normal),
    };
    if let Err(failure) = instance.receive(envelope).await {
        return Some(fail(&failure, "receive"));
    }
    instance
        .state()
        .stop_requested
        .then_some(StopReason::Normal)
}

/// Stops the children, runs `stopping`, releases the path and reports to the parent.
async fn terminate(
    shared: &Shared,
    me: &ActorRef,
    parent: Option<Address>,
    mut instance: Option<ActorInstance>,
    mailbox: &mut Mailbox,
    reason: StopReason,
) {
    if let Some(instance) = instance.as_mut() {
        instance.state().stopping = true;
        let children: Vec<ActorRef> = instance.state().children.values().cloned().collect();
        let child_reason = reason.for_children();
        for child in &children {
            child.signal(SystemMsg::Stop(child_reason.clone()));
        }
        while !instance.state().children.is_empty() {
            match mailbox.system.recv().await {
                Some(SystemMsg::ChildTerminated(child)) => {
                    instance.state().children.remove(child.path.name());
                }
                Some(SystemMsg::Stop(_)) => {}
                None => break,
            }
        }
        if !instance.poisoned
            && let Err(failure) = instance.stopping(&reason).await
        {
            tracing::warn!(%failure, "stopping hook failed");
        }
    }
    shared.registry.remove(&me.address);
    mailbox.user.close();
    while let Ok(msg) = mailbox.user.try_recv() {
        if let UserMsg::Message(envelope) = msg {
            shared
                .dead_letters
                .post(envelope, me.address.to_string(), DeadLetterReason::Stopped);
        }
    }
    tracing::debug!(%reason, "actor terminated");
    drop(instance);
    me.lifeline.mark_terminated();
    shared.child_terminated(parent.as_ref(), &me.address);
}
