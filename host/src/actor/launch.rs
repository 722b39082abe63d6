//! How the kernel's spawns become running actors, and how delivery reaches the capabilities:
//! the [`Extensions`] this layer plugs into the kernel.

use std::sync::Arc;

use super::cell::{CellSpec, Restoring};
use super::image::ActorImage;
use super::mailbox::Capacity;
use crate::caps::Caps;
use crate::deploy::modules::{Module, Modules};
use crate::error::SpawnError;
use crate::kernel::spawn::{Restore, SpawnRequest};
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

impl Launcher {
    /// The module version an image was taken from, if it is still deployed as it was.
    fn image_module(&self, image: &ActorImage) -> Option<Arc<Module>> {
        self.modules
            .get_version(&image.module, &image.version)
            .filter(|m| *m.hash == image.hash)
    }

    /// Takes the image stored for `path` when its actor was passivated, with the module
    /// version to restore it into. An image that cannot be read or whose version is gone is
    /// dropped, said in the log: the actor starts afresh.
    fn take_stored(&self, path: &str) -> Option<(Box<ActorImage>, Arc<Module>)> {
        let bytes = match self.caps.persistence.entities.images.take(path) {
            Ok(bytes) => bytes?,
            Err(e) => {
                tracing::error!(path, error = %crate::error::chain(&e), "a stored image could not be read");
                return None;
            }
        };
        let image = match ActorImage::decode(&bytes) {
            Ok(image) => image,
            Err(e) => {
                tracing::error!(path, error = %e, "a stored image is dropped: the actor starts afresh");
                return None;
            }
        };
        let Some(module) = self.image_module(&image) else {
            tracing::error!(path, module = %image.module, version = %image.version, "a stored image is dropped: its module version is no longer deployed");
            return None;
        };
        Some((Box::new(image), module))
    }
}

impl Extensions for Launcher {
    fn restorable(&self, image: &ActorImage) -> bool {
        self.image_module(image).is_some()
    }

    fn launch(&self, kernel: &Arc<Kernel>, request: SpawnRequest) -> Result<Spawned, SpawnError> {
        let SpawnRequest {
            path,
            module,
            init,
            parent,
            limits,
            passivate_after,
            hibernate_after,
            reservation,
            incarnation,
            restore,
        } = request;
        let (mut module, mut restoring, stored) = match restore {
            Restore::Image { image, answer } => {
                let module = self.image_module(&image).ok_or_else(|| {
                    SpawnError::UnknownModule(format!(
                        "{} version {} (as the image was taken)",
                        image.module, image.version
                    ))
                })?;
                let answer = Some(answer);
                (module, Some(Restoring { image, answer }), false)
            }
            other => {
                let module = self
                    .modules
                    .get(&module)
                    .ok_or(SpawnError::UnknownModule(module))?;
                (module, None, matches!(other, Restore::Stored))
            }
        };
        if hibernate_after.is_some() && module.images.is_none() {
            return Err(SpawnError::NoSnapshots(module.name.to_string()));
        }
        // Its module's setting, unless it has its own; an entity passivates instead.
        let hibernate_after = match hibernate_after {
            None if module.images.is_some() && passivate_after.is_none() => {
                self.modules.hibernation(&module.name)
            }
            own => own,
        };
        let labels = (module.name.clone(), module.version.clone());
        let capacity = Capacity {
            messages: limits.mailbox_capacity,
            bytes: limits.mailbox_bytes,
        };
        let (actor, mailbox) = kernel.claim(path, Some(labels), capacity, incarnation)?;
        // Only modules with snapshots on passivate as images: the others' activations never
        // look for one.
        if stored
            && module.images.is_some()
            && let Some((image, version)) = self.take_stored(&actor.address.path.to_string())
        {
            module = version;
            restoring = Some(Restoring {
                image,
                answer: None,
            });
        }
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
            hibernate_after,
            reservation,
            restoring,
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
