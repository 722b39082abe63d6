//! Versioned counter, version 4, the regression: for the canary tests (with `versioned-v1`
//! and `versioned-v2`). It takes any version's [`VersionedCore`] in `migrate` (so an upgrade
//! to it succeeds, and a rollback from it keeps the counts), answers `Get` with `version: 4`,
//! but fails every `Add` with an error: a version that only shows its bug under traffic.
//!
//! Init: none (ignored). `Crash` panics, as in the other versions.

use mote_example_protocol::{Versioned, VersionedCore};
use mote_guest::{Actor, Context, Error, Result};

/// This module's version, as reported by `Get`.
const VERSION: u32 = 4;

/// The counts it carries but never adds to.
struct Counter {
    core: VersionedCore,
    /// The version this instance was migrated from (empty if it started afresh).
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
            // The bug of this version: an error for every `Add`, which is a failure.
            Versioned::Add { stream, n } => {
                return Err(Error::msg(format!(
                    "versioned v{VERSION}: cannot add {n} to stream {stream} (deliberate bug)"
                )));
            }
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

    fn migrate(_ctx: &mut Context, from_version: &str, state: &[u8]) -> Result<Self> {
        Ok(Self {
            core: mote_guest::from_state(state)?,
            migrated_from: from_version.to_string(),
        })
    }
}

mote_guest::export_actor!(Counter);
