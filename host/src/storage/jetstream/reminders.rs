//! An index of reminders for failover: per persistence id, its next reminder's due time and
//! path, so that a node can wake the actor of an id whose writer died before the reminder fired.
//! The id's records stay the truth; the index only says where to look, and a stale entry costs
//! one wake-up.
//!
//! Invariants (tested in `tests`):
//! - `due` lists exactly the entries put and not cleared since.
//! - `writer_alive` is true only while a node whose liveness lives holds the id's lease.

use base64::Engine as _;
use futures_util::StreamExt as _;

use super::writers::decode_holder;
use super::{JetStreamError, Log};

/// One id's next reminder, as the index has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Due {
    /// The persistence id.
    pub(crate) pid: String,
    /// When it is due, in ms since the Unix epoch.
    pub(crate) due_ms: u64,
    /// The path it fires to.
    pub(crate) path: String,
}

impl Log {
    /// Records that `pid`'s next reminder is due at `due_ms` and fires to `path`.
    pub(crate) async fn put_due(
        &self,
        pid: &str,
        due_ms: u64,
        path: &str,
    ) -> Result<(), JetStreamError> {
        let (key, _) = self.locate(pid)?;
        let mut value = due_ms.to_be_bytes().to_vec();
        value.extend_from_slice(path.as_bytes());
        self.inner
            .reminders
            .put(key, value.into())
            .await
            .map_err(|e| JetStreamError::failed("indexing a reminder", e))?;
        Ok(())
    }

    /// Records that `pid` has no reminder.
    pub(crate) async fn clear_due(&self, pid: &str) -> Result<(), JetStreamError> {
        let (key, _) = self.locate(pid)?;
        self.inner
            .reminders
            .purge(key)
            .await
            .map_err(|e| JetStreamError::failed("unindexing a reminder", e))
    }

    /// Every id's next reminder in the index.
    pub(crate) async fn due(&self) -> Result<Vec<Due>, JetStreamError> {
        let kv = &self.inner.reminders;
        let mut keys = kv
            .keys()
            .await
            .map_err(|e| JetStreamError::failed("listing reminders", e))?;
        let mut out = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.map_err(|e| JetStreamError::failed("listing reminders", e))?;
            let Some(value) = kv
                .get(&key)
                .await
                .map_err(|e| JetStreamError::failed("reading a reminder", e))?
            else {
                continue;
            };
            let pid = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(&key)
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            let (Some(pid), Some((due, path))) = (pid, value.split_first_chunk::<8>()) else {
                continue; // not an entry of ours
            };
            out.push(Due {
                pid,
                due_ms: u64::from_be_bytes(*due),
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        Ok(out)
    }

    /// Whether a live node holds `pid`'s writer lease.
    pub(crate) async fn writer_alive(&self, pid: &str) -> Result<bool, JetStreamError> {
        let (key, _) = self.locate(pid)?;
        let entry = self
            .inner
            .writers
            .entry(key.clone())
            .await
            .map_err(|e| JetStreamError::failed("reading a writer lease", e))?;
        match entry.filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put) {
            Some(entry) => self.is_alive(&decode_holder(&key, &entry.value)?).await,
            None => Ok(false),
        }
    }
}
