//! Versioned counter, version 3, the bad one: the last of three versions of one counter, for
//! the hot swap tests (with `versioned-v1` and `versioned-v2`).
//!
//! Init: none (ignored). Started afresh, it counts as versions 1 and 2 do (see
//! [`VersionedCore::add`]) and `Get` replies `version: 3`; `Crash` panics. It saves its
//! [`VersionedCore`] in a hot swap like the others, but its `migrate` panics: an upgrade to it
//! that carries state always fails, and the old instance keeps running.

use mote_example_protocol::{Versioned, VersionedCore};
use mote_guest::{Actor, Context, Result};

/// This module's version, as reported by `Get`.
const VERSION: u32 = 3;

/// The counts (never migrated: `migrated_from` is always empty).
struct Counter {
    core: VersionedCore,
}

impl Actor for Counter {
    type Msg = Versioned;

    fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
        Ok(Self {
            core: VersionedCore::default(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Versioned) -> Result<()> {
        match msg {
            Versioned::Add { stream, n } => self.core.add(stream, n),
            Versioned::Get if ctx.sender().is_some() => {
                ctx.reply(&self.core.state(VERSION, ""))?;
            }
            Versioned::Get => ctx.debug("ignoring a Get without a sender"),
            Versioned::Crash => panic!("versioned v{VERSION}: crash requested"),
        }
        Ok(())
    }

    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        mote_guest::state(&self.core)
    }

    /// The bug of this version: it traps on any state handed over.
    fn migrate(_ctx: &mut Context, from_version: &str, _state: &[u8]) -> Result<Self> {
        panic!("versioned v{VERSION}: cannot migrate from `{from_version}` (deliberate bug)")
    }
}

mote_guest::export_actor!(Counter);
