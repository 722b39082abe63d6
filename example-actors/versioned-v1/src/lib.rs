//! Versioned counter, version 1: the first of three versions of one counter, for the hot swap
//! tests (with `versioned-v2` and `versioned-v3`).
//!
//! Init: none (ignored). `Add { stream, n }` counts `n` on `stream` (see
//! [`VersionedCore::add`]); `Get` replies a `VersionedState` with `version: 1` to its sender;
//! `Crash` panics. In a hot swap it saves its [`VersionedCore`], and `migrate` takes one from
//! any version (so a rollback from version 2 or 3 keeps the counts), remembering that version
//! as `migrated_from`.

use mote_example_protocol::{Versioned, VersionedCore};
use mote_guest::{Actor, Context, Result};

/// This module's version, as reported by `Get`.
const VERSION: u32 = 1;

/// The counts, and the version this instance was migrated from (empty if it started afresh).
struct Counter {
    core: VersionedCore,
    migrated_from: String,
}

impl Actor for Counter {
    type Msg = Versioned;

    fn start(_ctx: &mut Context, _init: &[u8]) -> Result<Self> {
        Ok(Self {
            core: VersionedCore::default(),
            migrated_from: String::new(),
        })
    }

    fn receive(&mut self, ctx: &mut Context, msg: Versioned) -> Result<()> {
        match msg {
            Versioned::Add { stream, n } => self.core.add(stream, n),
            Versioned::Get if ctx.sender().is_some() => {
                ctx.reply(&self.core.state(VERSION, &self.migrated_from))?;
            }
            Versioned::Get => ctx.debug("ignoring a Get without a sender"),
            Versioned::Crash => panic!("versioned v{VERSION}: crash requested"),
        }
        Ok(())
    }

    fn save_state(&self) -> Result<Option<Vec<u8>>> {
        mote_guest::state(&self.core)
    }

    fn migrate(ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
        let core: VersionedCore = mote_guest::from_state(state)?;
        ctx.info(&format!(
            "v{VERSION}: migrated from `{from_version}` at count {}",
            core.count
        ));
        Ok(Self {
            core,
            migrated_from: from_version.to_string(),
        })
    }
}

mote_guest::export_actor!(Counter);
