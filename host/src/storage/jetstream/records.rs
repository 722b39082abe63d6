//! An id's records (append, read, last, purge) and its checkpoint.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::kv;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, DirectGetErrorKind};
use futures_util::StreamExt as _;

use super::{AppendError, JetStreamError, Log};

/// How long a read waits for its next record before it checks whether any is left (the rest
/// may have been purged while it read).
const READ_STALL: Duration = Duration::from_secs(2);

/// How many times a checkpoint put retries when another put lands between its read and write.
const CHECKPOINT_ATTEMPTS: usize = 8;

impl Log {
    /// Appends one record to pid's subject. `expected_last` is the stream sequence of pid's
    /// last record as the writer knows it (0: pid has none); `msg_id` identifies the append
    /// in its shard's stream for two minutes, so it must name the id too. Returns the record's
    /// stream sequence; a retry with the same `msg_id` returns the first one's.
    pub(crate) async fn append(
        &self,
        pid: &str,
        expected_last: u64,
        msg_id: &str,
        record: Vec<u8>,
    ) -> Result<u64, AppendError> {
        let (subject, stream) = self.subject(pid)?;
        let len = record.len() as u64;
        let publish = PublishMessage::build()
            .payload(record.into())
            .message_id(msg_id)
            .expected_last_subject_sequence(expected_last);
        let acked = match self.inner.js.send_publish(subject.clone(), publish).await {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        let counters = &self.inner.counters;
        match acked {
            Ok(ack) if ack.duplicate => {
                counters.duplicates.fetch_add(1, Ordering::Relaxed);
                Ok(ack.sequence)
            }
            Ok(ack) => {
                counters.appends.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(len, Ordering::Relaxed);
                Ok(ack.sequence)
            }
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                // The server checks the tail before the message id: a retry whose first try
                // was written finds that record at the tail.
                if let Some(sequence) = written_last(stream, subject, msg_id).await? {
                    counters.duplicates.fetch_add(1, Ordering::Relaxed);
                    return Ok(sequence);
                }
                counters.conflicts.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(pid, expected_last, "append refused: stale tail");
                Err(AppendError::Conflict {
                    pid: pid.to_owned(),
                    expected: expected_last,
                })
            }
            Err(e) => Err(JetStreamError::failed("appending a record", e).into()),
        }
    }

    /// pid's records with stream sequence > `after`, in order, at most `max`.
    pub(crate) async fn read(
        &self,
        pid: &str,
        after: u64,
        max: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, JetStreamError> {
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        let mut records = self.records(pid, after).await?;
        while let Some(record) = records.next().await {
            out.push(record?);
            if out.len() == max {
                break;
            }
        }
        records.close().await;
        Ok(out)
    }

    /// pid's records with stream sequence > `after`, in order, one at a time: for histories
    /// too big to hold at once. Records appended while it reads may be included.
    pub(crate) async fn records(&self, pid: &str, after: u64) -> Result<Records, JetStreamError> {
        let (subject, stream) = self.subject(pid)?;
        self.read_subject(subject, stream, after).await
    }

    /// The messages of `subject` (in `stream`) after `after`, one at a time.
    pub(super) async fn read_subject(
        &self,
        subject: String,
        stream: &stream::Stream,
        after: u64,
    ) -> Result<Records, JetStreamError> {
        let name = format!(
            "{}-{}-read-{}",
            self.inner.node,
            self.inner.epoch,
            self.inner.reads.fetch_add(1, Ordering::Relaxed)
        );
        // An ordered consumer: ephemeral, unacknowledged, pulling batches of 500 and recreated
        // from the last sequence seen if a message goes missing.
        let consumer = stream
            .create_consumer(pull::OrderedConfig {
                name: Some(name.clone()),
                filter_subject: subject.clone(),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: after.saturating_add(1),
                },
                ..Default::default()
            })
            .await
            .map_err(|e| JetStreamError::failed("creating a read consumer", e))?;
        let mut records = Records {
            log: self.clone(),
            subject,
            stream: stream.clone(),
            consumer: name,
            messages: None,
            position: after,
        };
        if consumer.cached_info().num_pending == 0 {
            records.close().await;
            return Ok(records);
        }
        records.messages = Some(
            consumer
                .messages()
                .await
                .map_err(|e| JetStreamError::failed("reading records", e))?,
        );
        Ok(records)
    }

    /// The stream sequence of pid's last record (0 if it has none).
    #[cfg(test)]
    pub(crate) async fn last(&self, pid: &str) -> Result<u64, JetStreamError> {
        let (subject, stream) = self.subject(pid)?;
        last_on(stream, subject).await
    }
}

/// The stream sequence of the last message on `subject` (0 if it has none).
async fn last_on(stream: &stream::Stream, subject: String) -> Result<u64, JetStreamError> {
    match stream.direct_get_last_for_subject(subject).await {
        Ok(message) => Ok(message.sequence),
        Err(e) if e.kind() == DirectGetErrorKind::NotFound => Ok(0),
        Err(e) => Err(JetStreamError::failed("reading the last record", e)),
    }
}

impl Log {
    /// Removes pid's records with sequence < `below` (0: all of them).
    pub(crate) async fn purge(&self, pid: &str, below: u64) -> Result<(), JetStreamError> {
        let (subject, stream) = self.subject(pid)?;
        let purge = stream.purge().filter(subject);
        let purged = if below == 0 {
            purge.await
        } else {
            purge.sequence(below).await
        };
        let purged = purged.map_err(|e| JetStreamError::failed("purging records", e))?;
        tracing::debug!(pid, below, purged = purged.purged, "records purged");
        Ok(())
    }

    /// pid's checkpoint: the stream sequence it covers and its bytes.
    pub(crate) async fn checkpoint(
        &self,
        pid: &str,
    ) -> Result<Option<(u64, Vec<u8>)>, JetStreamError> {
        let (key, _) = self.locate(pid)?;
        let entry = self
            .inner
            .checkpoints
            .entry(key.clone())
            .await
            .map_err(|e| JetStreamError::failed("reading a checkpoint", e))?;
        match entry {
            Some(entry) if entry.operation == kv::Operation::Put => {
                decode_checkpoint(&key, &entry.value).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Stores pid's checkpoint covering its records up to `covered`, unless the stored one
    /// covers as much or more (a late writer cannot move it back). True if stored.
    pub(crate) async fn put_checkpoint(
        &self,
        pid: &str,
        covered: u64,
        bytes: Vec<u8>,
    ) -> Result<bool, JetStreamError> {
        let (key, _) = self.locate(pid)?;
        let mut value = Vec::with_capacity(8 + bytes.len());
        value.extend_from_slice(&covered.to_be_bytes());
        value.extend_from_slice(&bytes);
        let value = bytes::Bytes::from(value);
        let store = &self.inner.checkpoints;
        for _ in 0..CHECKPOINT_ATTEMPTS {
            let entry = store
                .entry(key.clone())
                .await
                .map_err(|e| JetStreamError::failed("reading a checkpoint", e))?;
            let written = match entry {
                Some(entry) if entry.operation == kv::Operation::Put => {
                    let (stored, _) = decode_checkpoint(&key, &entry.value)?;
                    if stored >= covered {
                        tracing::debug!(pid, covered, stored, "older checkpoint ignored");
                        return Ok(false);
                    }
                    store.update(&key, value.clone(), entry.revision).await
                }
                _ => store
                    .create(&key, value.clone())
                    .await
                    .map_err(|e| match e.kind() {
                        kv::CreateErrorKind::AlreadyExists => {
                            kv::UpdateError::new(kv::UpdateErrorKind::WrongLastRevision)
                        }
                        _ => kv::UpdateError::with_source(kv::UpdateErrorKind::Other, e),
                    }),
            };
            match written {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                Err(e) => return Err(JetStreamError::failed("writing a checkpoint", e)),
            }
        }
        Err(JetStreamError::failed(
            "writing a checkpoint",
            "other writers kept changing it",
        ))
    }
}

/// The sequence of the last record on `subject` if its message id is `msg_id`.
async fn written_last(
    stream: &stream::Stream,
    subject: String,
    msg_id: &str,
) -> Result<Option<u64>, JetStreamError> {
    match stream.direct_get_last_for_subject(subject).await {
        Ok(last) => Ok(last
            .headers
            .get(async_nats::header::NATS_MESSAGE_ID)
            .filter(|id| id.as_str() == msg_id)
            .map(|_| last.sequence)),
        Err(e) if e.kind() == DirectGetErrorKind::NotFound => Ok(None),
        Err(e) => Err(JetStreamError::failed("reading the last record", e)),
    }
}

/// A checkpoint value: the covered sequence (8 bytes, big-endian), then the bytes.
fn decode_checkpoint(key: &str, value: &[u8]) -> Result<(u64, Vec<u8>), JetStreamError> {
    let Some((covered, bytes)) = value.split_first_chunk::<8>() else {
        return Err(JetStreamError::Corrupt {
            what: "checkpoint",
            key: key.to_owned(),
            source: format!("{} bytes, under the 8 of its sequence", value.len()).into(),
        });
    };
    Ok((u64::from_be_bytes(*covered), bytes.to_vec()))
}

/// An id's records being read, oldest first: [`Log::records`].
pub(crate) struct Records {
    /// To ask for the id's last record when the reading stalls.
    log: Log,
    /// The subject read.
    subject: String,
    /// Its shard's stream.
    stream: stream::Stream,
    /// The read consumer's name, to delete it when done.
    consumer: String,
    /// `None` once every record is read.
    messages: Option<pull::Ordered>,
    /// The sequence of the last record given.
    position: u64,
}

impl Records {
    /// The next record (sequence, bytes), or `None` after the last one.
    pub(crate) async fn next(&mut self) -> Option<Result<(u64, Vec<u8>), JetStreamError>> {
        loop {
            let messages = self.messages.as_mut()?;
            let next = match tokio::time::timeout(READ_STALL, messages.next()).await {
                Ok(next) => next,
                // Nothing came: the rest may have been purged since the read began.
                Err(_) => match last_on(&self.stream, self.subject.clone()).await {
                    Ok(last) if last <= self.position => None,
                    Ok(_) => continue,
                    Err(e) => return self.fail(e).await,
                },
            };
            let message = match next {
                Some(Ok(message)) => message,
                Some(Err(e)) => {
                    return self
                        .fail(JetStreamError::failed("reading records", e))
                        .await;
                }
                None => {
                    self.close().await;
                    return None;
                }
            };
            let (sequence, pending) = match message.info() {
                Ok(info) => (info.stream_sequence, info.pending),
                Err(e) => {
                    let e = JetStreamError::failed("reading a record's sequence", e);
                    return self.fail(e).await;
                }
            };
            self.position = sequence;
            self.log.inner.counters.read.fetch_add(1, Ordering::Relaxed);
            if pending == 0 {
                self.close().await;
            }
            return Some(Ok((sequence, message.payload.to_vec())));
        }
    }

    /// Stops reading and deletes the consumer (dropped unclosed, the server deletes it after
    /// 30 s idle).
    pub(crate) async fn close(&mut self) {
        self.messages = None;
        if self.consumer.is_empty() {
            return;
        }
        let consumer = std::mem::take(&mut self.consumer);
        if let Err(e) = self.stream.delete_consumer(&consumer).await {
            // The ordered consumer may have been recreated under another name; it expires.
            tracing::debug!(consumer, error = %e, "read consumer not deleted");
        }
    }

    /// Stops reading after `error`, which it gives.
    async fn fail(
        &mut self,
        error: JetStreamError,
    ) -> Option<Result<(u64, Vec<u8>), JetStreamError>> {
        self.close().await;
        Some(Err(error))
    }
}
