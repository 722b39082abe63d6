//! Probes: endpoints with an address through which code outside the system receives
//! messages (and replies), for tests and embedding programs.

use std::sync::Arc;
use std::time::Duration;

use super::outside::{from_outside, tell_outside};
use crate::actor::mailbox::{self, Mailbox, UserMsg};
use crate::address::{ActorPath, Address};
use crate::caps::Caps;
use crate::error::{SendError, SpawnError};
use crate::kernel::Kernel;
use crate::message::Envelope;

/// An external endpoint with an address, so actors can send (and reply) to code outside the
/// system. Created by [`crate::ActorSystem::probe`].
pub struct Probe {
    kernel: Arc<Kernel>,
    caps: Arc<Caps>,
    address: Address,
    mailbox: Mailbox,
}

impl Probe {
    /// Registers a probe at `path`.
    pub(crate) fn register(
        kernel: Arc<Kernel>,
        caps: Arc<Caps>,
        path: ActorPath,
    ) -> Result<Probe, SpawnError> {
        let address = Address {
            path,
            incarnation: kernel.next_incarnation(),
        };
        let (handle, mailbox) = mailbox::endpoint(address.clone());
        kernel
            .registry
            .insert(handle)
            .map_err(|taken| SpawnError::NameTaken(taken.address.path.to_string()))?;
        Ok(Probe {
            kernel,
            caps,
            address,
            mailbox,
        })
    }

    /// The probe's address (`/system/<name>`).
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Waits for the next message.
    pub async fn recv(&mut self) -> Option<Envelope> {
        loop {
            match self.mailbox.next().await? {
                UserMsg::Message(mut envelope) => {
                    // A probe keeps no durable state: what it takes is settled lazily.
                    self.kernel.settle(envelope.receipt.take());
                    return Some(envelope);
                }
                UserMsg::PoisonPill => continue,
            }
        }
    }

    /// Waits for the next message at most `timeout`.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Option<Envelope> {
        tokio::time::timeout(timeout, self.recv())
            .await
            .ok()
            .flatten()
    }

    /// Sends a message with this probe as the sender, so the receiver can reply.
    pub fn tell(&self, to: &str, kind: &str, body: Vec<u8>) -> Result<(), SendError> {
        tell_outside(&self.kernel, Some(self.address.clone()), to, kind, body)
    }

    /// Sends to the least-loaded member of `group`, with this probe as the sender.
    pub fn tell_group(&self, group: &str, kind: &str, body: Vec<u8>) -> bool {
        self.caps.messaging.tell_group(
            &self.kernel,
            group,
            from_outside(Some(self.address.clone()), kind, body),
        )
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.kernel.registry.remove(&self.address);
    }
}
