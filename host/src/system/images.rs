//! Snapshots and restores of single actors by their sandbox image (see `actor::image`): the
//! API `mote snapshot` and `mote restore` call.

use crate::actor::image::ActorImage;
use crate::actor::mailbox::SystemMsg;
use crate::address::ActorPath;
use crate::error::{AddressError, SpawnError};
use crate::kernel::spawn::{Limits, Restore, SpawnOptions, SpawnRequest};
use crate::sandbox::image::ImageError;
use crate::{ActorSystem, Address};

/// Why an actor could not be captured or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// No live actor at that path on this host.
    #[error("no live actor at {0} on this host")]
    NoActor(String),
    /// The actor or its image cannot be used (see [`ImageError`]).
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The restored actor could not be spawned.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The actor stopped before answering.
    #[error("the actor at {0} stopped before it was captured")]
    Stopped(String),
}

/// How much of an image is what: its size, and the memory pages it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageInfo {
    /// The whole image, in bytes.
    pub bytes: usize,
    /// The memory pages it holds, uncompressed and compressed.
    pub pages_raw: u64,
    /// The same, compressed.
    pub pages_compressed: u64,
}

impl ActorSystem {
    /// Captures the live actor at `path` as an image between two of its messages (after the
    /// one it is handling). Its module must be deployed with the `snapshot` grant; an actor
    /// holding what an image cannot keep (children, asks in flight, aliases, a stash,
    /// WASI resources, a journal) is refused with the reason. The actor runs on unchanged.
    pub async fn snapshot(&self, path: &str) -> Result<Vec<u8>, SnapshotError> {
        let actor = self
            .kernel
            .registry
            .get(path)
            .ok_or_else(|| SnapshotError::NoActor(path.to_owned()))?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        actor.signal(SystemMsg::Snapshot(answer));
        Ok(answered
            .await
            .map_err(|_| SnapshotError::Stopped(path.to_owned()))??)
    }

    /// What an image holds, read from its bytes (checked as on restore).
    pub fn image_info(image: &[u8]) -> Result<ImageInfo, SnapshotError> {
        let decoded = ActorImage::decode(image)?;
        let (pages_raw, pages_compressed) = decoded.core.page_bytes();
        Ok(ImageInfo {
            bytes: image.len(),
            pages_raw,
            pages_compressed,
        })
    }

    /// Restores an image as a new top-level actor at `path` (by default where it was taken,
    /// which must then be free): a fresh instance of the module version it was taken from,
    /// with its memory, globals and bookkeeping, and no `start`. Returns once it runs; a
    /// damaged image or one whose module version is not deployed as it was is refused.
    pub async fn restore(
        &self,
        image: &[u8],
        path: Option<&str>,
        options: SpawnOptions,
    ) -> Result<Address, SnapshotError> {
        let image = ActorImage::decode(image)?;
        let at = path.unwrap_or(&image.path);
        let path = ActorPath::parse(at).map_err(SpawnError::from)?;
        if path.parent().is_none_or(|p| p.as_str() != crate::USER_ROOT) && !self.is_entity(at) {
            return Err(SpawnError::from(AddressError::InvalidPath(
                at.to_owned(),
                "an image is restored as a top-level actor (/user/<name>) or an entity".into(),
            ))
            .into());
        }
        // Where it was taken it continues as the same incarnation: senders need not know.
        let incarnation = (at == image.path).then_some(image.incarnation);
        let (answer, restored) = tokio::sync::oneshot::channel();
        let actor = self.kernel.spawn_top_level(SpawnRequest {
            path,
            module: image.module.clone(),
            init: Vec::new(),
            parent: None,
            limits: Limits::of(&self.kernel.config, &options),
            passivate_after: None,
            hibernate_after: options.hibernate_after,
            reservation: None,
            incarnation,
            restore: Restore::Image {
                image: Box::new(image),
                answer,
            },
        })?;
        match restored.await {
            Ok(Ok(())) => Ok(actor.address),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(SnapshotError::Stopped(actor.address.path.to_string())),
        }
    }

    fn is_entity(&self, path: &str) -> bool {
        self.caps.persistence.entities.is_entity(path)
    }
}
