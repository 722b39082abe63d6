//! Acknowledgements of an id's sends written by other nodes (`<id's subject>.acks`), and the
//! store-wide prefix of ids a node hands out.
//!
//! Invariants (tested in `tests`):
//! - An acknowledgement is stored before `acknowledge` returns, and a node's subscription
//!   hears every one published while it listens (a JetStream subject is also a core subject).
//! - A purge below a sequence removes only the acknowledgements stored before it: one stored
//!   after a writer read them is kept for the next.
//! - `next_prefix` never returns the same prefix twice in a namespace.

use std::sync::atomic::Ordering;

use base64::Engine as _;
use futures_util::StreamExt as _;

use super::{JetStreamError, Log};

/// The key of the prefix counter in the writers bucket (no token has a dot, so no lease has
/// this key).
const PREFIX_KEY: &str = "ids.prefix";

/// How many times a prefix allocation retries when another node's lands first.
const PREFIX_ATTEMPTS: usize = 64;

impl Log {
    /// Stores that `pid`'s send `n` was acknowledged.
    pub(crate) async fn acknowledge(&self, pid: &str, n: u64) -> Result<(), JetStreamError> {
        let (subject, _) = self.subject(pid)?;
        let ack = self
            .inner
            .js
            .publish(format!("{subject}.acks"), n.to_be_bytes().to_vec().into())
            .await
            .map_err(|e| JetStreamError::failed("publishing an acknowledgement", e))?;
        ack.await
            .map_err(|e| JetStreamError::failed("storing an acknowledgement", e))?;
        Ok(())
    }

    /// Every acknowledgement of `pid`'s sends stored so far: the send numbers, and the stream
    /// sequence of the last one (0 if none).
    pub(crate) async fn acknowledgements(
        &self,
        pid: &str,
    ) -> Result<(Vec<u64>, u64), JetStreamError> {
        let (subject, stream) = self.subject(pid)?;
        let mut acks = self
            .read_subject(format!("{subject}.acks"), stream, 0)
            .await?;
        let (mut out, mut last) = (Vec::new(), 0);
        while let Some(ack) = acks.next().await {
            let (sequence, bytes) = ack?;
            last = sequence;
            if let Some(n) = bytes.first_chunk::<8>() {
                out.push(u64::from_be_bytes(*n));
            }
        }
        Ok((out, last))
    }

    /// Removes the stored acknowledgements of `pid`'s sends whose stream sequence is below
    /// `below`: those its writer has recorded. One published later stays for the next writer;
    /// one published earlier but never recorded costs a resend, which its receiver drops and
    /// acknowledges again. Below 1 there is nothing to purge (and a JetStream purge with
    /// sequence 0 would take every one).
    pub(crate) async fn purge_acknowledgements(
        &self,
        pid: &str,
        below: u64,
    ) -> Result<(), JetStreamError> {
        if below <= 1 {
            return Ok(());
        }
        let (subject, stream) = self.subject(pid)?;
        stream
            .purge()
            .filter(format!("{subject}.acks"))
            .sequence(below)
            .await
            .map_err(|e| JetStreamError::failed("purging acknowledgements", e))?;
        Ok(())
    }

    /// Hears every acknowledgement published in the namespace from now on, as `(pid, n)`.
    pub(crate) async fn acknowledgements_heard(
        &self,
    ) -> Result<impl futures_util::Stream<Item = (String, u64)> + Send + use<>, JetStreamError>
    {
        let subject = format!("mote.{}.steps.*.*.acks", self.inner.names.name);
        let subscriber = self
            .inner
            .js
            .client()
            .subscribe(subject)
            .await
            .map_err(|e| JetStreamError::failed("subscribing to acknowledgements", e))?;
        Ok(subscriber.filter_map(|message| async move {
            let token = message.subject.as_str().split('.').nth(4)?;
            let pid = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())?;
            let n = message
                .payload
                .first_chunk::<8>()
                .map(|n| u64::from_be_bytes(*n))?;
            Some((pid, n))
        }))
    }

    /// A prefix for the ids this opening of the node hands out, never handed out before in
    /// the namespace (a counter in the writers bucket, raised by compare-and-set).
    pub(crate) async fn next_prefix(&self) -> Result<u64, JetStreamError> {
        let kv = &self.inner.writers;
        for _ in 0..PREFIX_ATTEMPTS {
            let entry = kv
                .entry(PREFIX_KEY)
                .await
                .map_err(|e| JetStreamError::failed("reading the id prefix", e))?;
            let (next, revision) = match entry {
                Some(entry) if entry.operation == async_nats::jetstream::kv::Operation::Put => {
                    let current = entry
                        .value
                        .first_chunk::<8>()
                        .map_or(0, |v| u64::from_be_bytes(*v));
                    (current + 1, Some(entry.revision))
                }
                _ => (1, None),
            };
            let value = next.to_be_bytes().to_vec().into();
            let written = match revision {
                Some(revision) => kv.update(PREFIX_KEY, value, revision).await.is_ok(),
                None => kv.create(PREFIX_KEY, value).await.is_ok(),
            };
            if written {
                self.inner.counters.prefixes.fetch_add(1, Ordering::Relaxed);
                return Ok(next);
            }
        }
        Err(JetStreamError::failed(
            "allocating an id prefix",
            "too many nodes raced for it",
        ))
    }
}
