//! How the kernel's spawns become running actors, and how delivery reaches the capabilities:
//! the [`Extensions`] this layer plugs into the kernel.

use std::sync::Arc;

use super::cell::CellSpec;
use super::mailbox::Capacity;
use crate::caps::Caps;
use crate::deploy::modules::Modules;
use crate::error::SpawnError;
use crate::kernel::spawn::SpawnRequest;
use crate::kernel::{Extensions, Kernel, Spawned, Undelivered};
use crate::message::{Envelope, Receipt};
use crate::sandbox::engine::EpochTicker;
use crate::sched::Scheduler;

/// The actor layer, as the kernel sees it.
pub(crate) struct Launcher {
    caps: Arc<Caps>,
    modules: Arc<Modules>,
    /// Where cells run.
    scheduler: Scheduler,
    /// Kept as long as the kernel: actors outlive the system handle until they stop, and a
    /// guest in an endless loop must still be preempted.
    _ticker: Option<EpochTicker>,
}

impl Launcher {
    /// Launches actors of `modules` with `caps` on `scheduler`; `ticker` preempts their guests.
    pub(crate) fn new(
        caps: Arc<Caps>,
        modules: Arc<Modules>,
        scheduler: Scheduler,
        ticker: Option<EpochTicker>,
    ) -> Self {
        Launcher {
            caps,
            modules,
            scheduler,
            _ticker: ticker,
        }
    }
}

impl Extensions for Launcher {
    fn launch(&self, kernel: &Arc<Kernel>, request: SpawnRequest) -> Result<Spawned, SpawnError> {
        let SpawnRequest {
            path,
            module,
            init,
            parent,
            limits,
            passivate_after,
            reservation,
            incarnation,
        } = request;
        let module = self
            .modules
            .get(&module)
            .ok_or(SpawnError::UnknownModule(module))?;
        let labels = (module.name.clone(), module.version.clone());
        let capacity = Capacity {
            messages: limits.mailbox_capacity,
            bytes: limits.mailbox_bytes,
        };
        let (actor, mailbox) = kernel.claim(path, Some(labels), capacity, incarnation)?;
        tracing::debug!(actor = %actor.address, module = %module.name, "spawned");
        let task = CellSpec {
            kernel: kernel.clone(),
            scheduler: self.scheduler.clone(),
            caps: self.caps.clone(),
            modules: self.modules.clone(),
            me: actor.clone(),
            parent,
            module,
            init,
            mailbox,
            limits,
            passivate_after,
            reservation,
        };
        Ok(Spawned {
            actor,
            task: Box::new(task),
        })
    }

    fn backlog(&self, kernel: &Arc<Kernel>, path: &str) -> Vec<Envelope> {
        self.caps.backlog(kernel, path)
    }

    fn return_backlog(&self, path: &str, messages: Vec<Envelope>) {
        self.caps.return_backlog(path, messages);
    }

    fn unclaimed(
        &self,
        kernel: &Arc<Kernel>,
        path: &str,
        envelope: Envelope,
    ) -> Result<Option<Undelivered>, Envelope> {
        self.caps.unclaimed(kernel, path, envelope)
    }

    fn settle(&self, receipt: Receipt) {
        self.caps.settle(receipt);
    }

    fn acknowledge(&self, receipt: Receipt) -> Option<crate::actor::step::Commit> {
        self.caps.acknowledge(receipt)
    }

    fn undeliverable(&self, receipt: Receipt) {
        self.caps.undeliverable(receipt);
    }

    fn export_receipt(&self, receipt: Receipt) -> Option<Vec<u8>> {
        self.caps.export_receipt(receipt)
    }

    fn import_receipt(&self, token: &[u8]) -> Option<Receipt> {
        self.caps.import_receipt(token)
    }

    fn dead_letter(&self, kernel: &Arc<Kernel>, envelope: &Envelope, target: &str) {
        self.caps.dead_letter(kernel, envelope, target);
    }

    fn closed(&self) {
        self.caps.closed();
    }
}
