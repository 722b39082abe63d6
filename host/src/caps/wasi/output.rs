//! Guest stdout and stderr, written line by line to the host log with the actor's path,
//! through the guest log's queue (never waiting for the writer).
//!
//! The stream is a WASI output stream written in place, during the guest's call: wasmtime's
//! default adapter would hand every write to a tokio task and make the actor wait for it, two
//! thread hand-offs per line.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use crate::address::ActorPath;
use crate::guestlog::GuestLog;
use crate::quota::Quotas;
use crate::stats::ActorStats;

/// Guest stdout/stderr, written line by line to the host log.
pub(crate) struct GuestOutput {
    pub(crate) path: ActorPath,
    pub(crate) stream: &'static str,
    /// The actor's log budget, shared with `host.log`.
    pub(crate) budget: (Arc<ActorStats>, Quotas),
    /// Where the lines go.
    pub(crate) log: Arc<GuestLog>,
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl GuestOutput {
    fn logger(&self) -> LineLogger {
        LineLogger {
            path: self.path.clone(),
            stream: self.stream,
            line: Vec::new(),
            budget: self.budget.clone(),
            log: self.log.clone(),
        }
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.logger())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.logger())
    }
}

struct LineLogger {
    path: ActorPath,
    stream: &'static str,
    line: Vec<u8>,
    budget: (Arc<ActorStats>, Quotas),
    log: Arc<GuestLog>,
}

impl LineLogger {
    /// Takes bytes: every complete line is logged (or refused by the budget) now.
    fn take(&mut self, buf: &[u8]) {
        for &b in buf {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < 64 << 10 {
                self.line.push(b);
            }
        }
    }

    fn emit(&mut self) {
        let (stats, quotas) = &self.budget;
        if !stats.refusals.admit_log(quotas, &self.path) {
            self.line.clear();
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        let text = quotas.log_line(&text);
        self.log.offer(
            tracing::Level::INFO,
            &self.path,
            self.stream,
            text.trim_end(),
        );
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineLogger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.take(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Lines are logged whole; a partial line waits for its newline or for the drop.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Never full: lines beyond the budget or the queue are dropped and counted, not waited for.
const WRITABLE: usize = 64 << 10;

impl OutputStream for LineLogger {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.take(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITABLE)
    }
}

#[async_trait::async_trait]
impl Pollable for LineLogger {
    async fn ready(&mut self) {}
}

impl Drop for LineLogger {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}
