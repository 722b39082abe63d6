//! Images of actors passivated as images (`snapshot = true` entities), in an object store of
//! the namespace (`mote-<ns>-passivated`, by path), so that an entity passivated on one node
//! wakes with its in-memory state on any node. Objects, not key-value entries: an image can
//! exceed a NATS message.
//!
//! Invariants:
//! - An image is stored whole before `put_image` returns (the object store writes its
//!   description after every chunk), and `take_image` removes what it returns.
//! - Taking is a read and a delete, not one transaction: at most one activation of an entity
//!   runs in a cluster (its lease), so no two takes of one path race.
//! - Images are bytes here: they are checked when decoded, never here.

use async_nats::jetstream::object_store;
use tokio::io::AsyncReadExt;

use super::{JetStreamError, Log};

impl Log {
    /// Stores the image of the actor at `path`, replacing any before it.
    pub(crate) async fn put_image(&self, path: &str, image: &[u8]) -> Result<(), JetStreamError> {
        let mut reader = image;
        self.inner
            .images
            .put(path, &mut reader)
            .await
            .map(|_| ())
            .map_err(|e| JetStreamError::failed("storing an image", e))
    }

    /// Takes the image stored for `path`, if any: reads it, then deletes it.
    pub(crate) async fn take_image(&self, path: &str) -> Result<Option<Vec<u8>>, JetStreamError> {
        let mut object = match self.inner.images.get(path).await {
            Ok(object) => object,
            Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(JetStreamError::failed("reading an image", e)),
        };
        let mut bytes = Vec::new();
        object
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| JetStreamError::failed("reading an image", e))?;
        self.inner
            .images
            .delete(path)
            .await
            .map_err(|e| JetStreamError::failed("deleting a taken image", e))?;
        Ok(Some(bytes))
    }
}

/// Opens (or creates) the namespace's object store of passivated images.
pub(super) async fn open(
    js: &async_nats::jetstream::Context,
    name: String,
    replicas: usize,
) -> Result<object_store::ObjectStore, JetStreamError> {
    match js.get_object_store(&name).await {
        Ok(store) => Ok(store),
        Err(_) => js
            .create_object_store(object_store::Config {
                bucket: name,
                description: Some("Mote: images of passivated actors, by path".to_owned()),
                num_replicas: replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| JetStreamError::failed("opening the image store", e)),
    }
}
