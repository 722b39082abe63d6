//! Versioned counter, version 2: the second of three versions of one counter, for the hot swap
//! tests. It counts as version 1 does but `Get` replies `version: 2`
//! ([`mote_example_protocol::VersionedCounter`] with `VERSION` 2); its state is the same
//! [`mote_example_protocol::VersionedCore`], so it upgrades from and rolls back to any version.

mote_guest::export_actor!(mote_example_protocol::VersionedCounter<2>);
