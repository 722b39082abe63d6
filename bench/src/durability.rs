//! `durable`: the JetStream store (`[storage] backend = "jetstream"`) against the redb file, in
//! the same run, on a nats-server of its own with JetStream on this machine's disk:
//! - committed steps/s of 1,000 journal actors persisting one event per step: the redb file with
//!   group commit (one fsync for all the steps waiting), and JetStream, where the steps of
//!   different actors are appended concurrently (each its own acknowledged publish, pipelined on
//!   one connection);
//! - the recovery of one journal of 100,000 events written in steps of ten (10,000 records on
//!   JetStream): from the redb file, and from JetStream on a host that never ran it.

use std::time::Instant;

use anyhow::bail;
use mote_example_protocol::Journal;
use mote_guest::Message;
use mote_host::{HostConfig, StoreConfig};
use mote_tests::nats::NatsServer;

use super::{Args, encode, fresh_db, journal_state, steps_per_sec_with, system_with};

/// Journal actors committing at once, and steps each.
const ACTORS: usize = 1000;
const STEPS_EACH: u64 = 20;
/// The journal recovered, and the events per step that wrote it.
const EVENTS: u64 = 100_000;
const PER_STEP: u64 = 10;

/// A host that keeps persistent state in JetStream at `nats`, as node `node`.
fn jetstream(nats: &NatsServer, node: &str) -> HostConfig {
    let mut config = HostConfig::new();
    config.jetstream_storage(StoreConfig::new(nats.url.clone(), node));
    config
}

pub(crate) async fn durable(args: &Args) -> anyhow::Result<()> {
    let nats = NatsServer::start(&[]);
    let db = fresh_db(args, "durable-commit")?;
    let mut redb = HostConfig::new();
    redb.storage(&db);
    let (local, per_txn) = steps_per_sec_with(args, redb, ACTORS, STEPS_EACH).await?;
    let (remote, _) =
        steps_per_sec_with(args, jetstream(&nats, "bench"), ACTORS, STEPS_EACH).await?;
    println!(
        "RESULT runtime=mote workload=durable-commit redb_steps_per_sec={local:.0} \
         redb_steps_per_fsync={per_txn:.1} jetstream_steps_per_sec={remote:.0} \
         jetstream_vs_redb={:.2}",
        remote / local
    );
    let _ = std::fs::remove_file(&db);

    let db = fresh_db(args, "durable-recovery")?;
    let mut redb = HostConfig::new();
    redb.storage(&db);
    let from_redb = recover(args, redb.clone(), redb).await?;
    let from_jetstream =
        recover(args, jetstream(&nats, "writer"), jetstream(&nats, "reader")).await?;
    println!(
        "RESULT runtime=mote workload=durable-recovery events={EVENTS} records={} \
         redb_recovery_ms={:.1} jetstream_recovery_ms={:.1} jetstream_vs_redb={:.2}",
        EVENTS / PER_STEP,
        from_redb * 1e3,
        from_jetstream * 1e3,
        from_jetstream / from_redb
    );
    let _ = std::fs::remove_file(&db);
    Ok(())
}

/// Writes the journal on a host configured as `write`, then times its recovery (spawn to the
/// first answer) on a fresh host configured as `read`; seconds.
async fn recover(args: &Args, write: HostConfig, read: HostConfig) -> anyhow::Result<f64> {
    {
        let system = system_with(args, write, &["journal"])?;
        system.storage_ready().await?;
        system.spawn("j", "journal", b"0")?;
        for step in 0..EVENTS / PER_STEP {
            let range = Journal::AppendRange {
                from: step * PER_STEP,
                count: PER_STEP,
            };
            system.tell("/user/j", Journal::KIND, encode(&range)?)?;
            if step % 1000 == 999 {
                // Within the mailbox's bound.
                journal_state(&system).await?;
            }
        }
        let state = journal_state(&system).await?;
        if state.values.len() as u64 != EVENTS {
            bail!("the journal holds {} events", state.values.len());
        }
        system.shutdown().await.ok();
    }
    let system = system_with(args, read, &["journal"])?;
    system.storage_ready().await?;
    let start = Instant::now();
    system.spawn("j", "journal", b"0")?;
    let state = journal_state(&system).await?;
    let took = start.elapsed().as_secs_f64();
    if state.replayed != EVENTS {
        bail!("recovered {} events, not {EVENTS}", state.replayed);
    }
    system.shutdown().await.ok();
    Ok(took)
}
