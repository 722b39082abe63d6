//! `mote:actor/inbox`: the import a guest pulls its next message through, inside a call of
//! `packed-receive` that lent it the lane (see `actor::pull`, whose invariants it keeps). It is
//! the host's own receive path, not a capability: every module may import it.
//!
//! `reply-next` is a reply and `next` in one call: the reply goes to the sender of the message
//! being handled through the same checks and the same send as `host.tell` to that address (so
//! a guest gains nothing it could not do with `tell`), and a refused reply hands nothing over.

use wasmtime::component::{HasSelf, Linker};

use super::cell::seal;
use super::core::{ActorCore, body_size};
use super::pull::Pull;
use crate::caps::{ActorState, Caps, States};
use crate::message::Envelope;
use crate::sandbox::bindings::WitSendError;
use crate::sandbox::bindings::pulled::mote::actor::inbox;
use crate::sandbox::packed::pack;
use crate::trace;

/// Adds `inbox` to the host's linker.
pub(crate) fn link(linker: &mut Linker<ActorState>) -> wasmtime::Result<()> {
    inbox::add_to_linker::<_, HasSelf<ActorState>>(linker, |state| state)
}

impl inbox::Host for ActorState {
    async fn next(&mut self) -> Option<Vec<u8>> {
        let ActorState { core, caps, set } = self;
        let mut pull = core.pull.take()?;
        let next = hand_over(&mut pull, core, caps, set).await;
        core.pull = Some(pull);
        next
    }

    async fn send_bounds(&mut self) -> (u64, u32, u32) {
        let core = &self.core;
        let quotas = core.quotas();
        let narrow = |bytes: usize| u32::try_from(bytes).unwrap_or(u32::MAX);
        (
            core.kernel.config.max_message_bytes as u64,
            narrow(quotas.max_name_bytes),
            narrow(quotas.max_path_bytes),
        )
    }

    async fn reply_next(
        &mut self,
        kind: String,
        body: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, WitSendError> {
        reply(&mut self.core, kind, body)?;
        self.core.stats.replied_with_next.bump();
        Ok(self.next().await)
    }
}

/// Sends `kind` and `body` to the sender of the message being handled, as `host.tell` to that
/// address would: the same checks, counted the same way.
fn reply(core: &mut ActorCore, kind: String, body: Vec<u8>) -> Result<(), WitSendError> {
    // Taken out for the send and put back: the sender stays the message's.
    let Some(to) = core.current_sender.take() else {
        return Err(WitSendError::InvalidPath(
            "the message being handled has no sender to reply to".to_string(),
        ));
    };
    let sent = core.tell(to.path.as_str(), to.incarnation, kind, body);
    core.current_sender = Some(to);
    Ok(sent?)
}

/// Closes the message being handled and hands over the next one, packed, if the host may.
async fn hand_over(
    pull: &mut Pull,
    core: &mut ActorCore,
    states: &mut States,
    caps: &Caps,
) -> Option<Vec<u8>> {
    if !pull.open()
        || core.rejected.is_some()
        || core.kept
        || core.stop_requested
        || core.step.holds()
        || caps.holds(states)
    {
        return None;
    }
    if let Some(sealed) = seal(caps, core, states, None) {
        // Not expected (only a journal writes, and a journaled step holds): the cell waits
        // for the write after the call.
        pull.close_with(sealed);
        return None;
    }
    let mut envelope = pull.linger().await?;
    core.stats.received.bump();
    core.stats.pulled.bump();
    core.meter.begin_call();
    let span = trace::handling(&core.me, &core.module, &mut envelope);
    core.trace = envelope.trace();
    let Envelope {
        sender, kind, body, ..
    } = envelope;
    let mut packed = Vec::new();
    pack(sender.as_ref(), &kind, &body, true, &mut packed);
    core.current_sender = sender;
    core.current_bytes = Some(body_size(body.len()));
    pull.handling(span, kind, body);
    Some(packed)
}
