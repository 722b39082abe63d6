//! Host-side bindings of the `mote:actor` world, generated from `wit/` at compile time, and the
//! conversions between the host's types and the WIT ones.

use crate::actor::supervisor::{Directive, FailureKind};
use crate::address::Address;
use crate::message::StopReason;
use crate::quota::Quota;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "actor-world",
    exports: { default: async },
});

/// The `inbox` import (pulled receive), from a world of its own: it is the host's, not a
/// capability's, and only guests whose SDK pulls import it.
pub(crate) mod pulled {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "inbox-world",
        imports: { default: async },
        with: { "mote:actor/types": super::mote::actor::types },
    });
}

pub use mote::actor::types::{
    Address as WitAddress, Directive as WitDirective, FailureKind as WitFailureKind, LogLevel,
    Message as WitMessage, Quota as WitQuota, Scope as WitScope, SendError as WitSendError,
    SpawnError as WitSpawnError, SpawnOptions as WitSpawnOptions, StopReason as WitStopReason,
    Strategy as WitStrategy,
};

impl From<Quota> for WitQuota {
    fn from(quota: Quota) -> Self {
        match quota {
            Quota::Timers => WitQuota::Timers,
            Quota::TimerPeriod => WitQuota::TimerPeriod,
            Quota::Reminders => WitQuota::Reminders,
            Quota::Subscriptions => WitQuota::Subscriptions,
            Quota::Groups => WitQuota::Groups,
            Quota::Asks => WitQuota::Asks,
            Quota::AskDeadline => WitQuota::AskDeadline,
            Quota::Descendants => WitQuota::Descendants,
            Quota::Watches => WitQuota::Watches,
            Quota::InitSize => WitQuota::InitSize,
            Quota::Aliases => WitQuota::Aliases,
            // Refusals the guest is not told as a quota: a reserved kind has its own error
            // case, a full stash and call-outs have their interface's own error types, and a
            // dropped log line is not an error at all.
            Quota::NameLength
            | Quota::ReservedKind
            | Quota::NotOwned
            | Quota::Log
            | Quota::Stash
            | Quota::Callouts
            | Quota::CalloutTimeout
            | Quota::CalloutBody => WitQuota::NameLength,
        }
    }
}

impl From<Quota> for WitSendError {
    fn from(quota: Quota) -> Self {
        WitSendError::Quota(quota.into())
    }
}

/// An address as the guest sees it.
pub(crate) fn to_wit_address(address: Address) -> WitAddress {
    to_wit_address_of(&address)
}

/// An address as the guest sees it, from a borrowed one.
pub(crate) fn to_wit_address_of(address: &Address) -> WitAddress {
    WitAddress {
        path: address.path.as_str().to_owned(),
        incarnation: address.incarnation,
    }
}

/// A failure kind as the guest sees it.
pub(crate) fn to_wit_failure_kind(kind: FailureKind) -> WitFailureKind {
    match kind {
        FailureKind::Trap => WitFailureKind::Trap,
        FailureKind::Error => WitFailureKind::Error,
        FailureKind::MemoryLimit => WitFailureKind::MemoryLimit,
        FailureKind::CpuDeadline => WitFailureKind::CpuDeadline,
        FailureKind::StackOverflow => WitFailureKind::StackOverflow,
        FailureKind::Instantiation => WitFailureKind::Instantiation,
        FailureKind::Commit => WitFailureKind::Commit,
        FailureKind::Escalated => WitFailureKind::Escalated,
    }
}

/// A directive as the host reads it.
pub(crate) fn from_wit_directive(d: WitDirective) -> Directive {
    match d {
        WitDirective::Resume => Directive::Resume,
        WitDirective::Restart => Directive::Restart,
        WitDirective::Stop => Directive::Stop,
        WitDirective::Escalate => Directive::Escalate,
    }
}

/// A stop reason as the guest sees it.
pub(crate) fn to_wit_stop_reason(reason: &StopReason) -> WitStopReason {
    match reason {
        StopReason::Normal => WitStopReason::Normal,
        StopReason::Failure(e) => WitStopReason::Failure(e.clone()),
        StopReason::ParentFailure(e) => WitStopReason::ParentFailure(e.clone()),
        StopReason::Shutdown => WitStopReason::Shutdown,
    }
}
