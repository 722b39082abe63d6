//! Versioned counter, version 1: the first of three versions of one counter, for the hot swap
//! tests (with `versioned-v2` and `versioned-v3`). Its behaviour is
//! [`mote_example_protocol::VersionedCounter`] with `VERSION` 1.

mote_guest::export_actor!(mote_example_protocol::VersionedCounter<1>);
