//! The payloads of the eFIND store's log records: the shared codec of
//! [`crate::store::log::payload`] (its META is the common part only, its
//! CHECKPOINT carries the free list).
//!
//! The store encodes and decodes with the codec of its log's format
//! ([`EfindStore::codec`], [`Recovered::payload_codec`](crate::store::log::Recovered::payload_codec)).
//! The free functions below are the same codec in the
//! [fixed](PayloadEncoding::Fixed) encoding of the per-change and
//! first-image formats, kept under the names this module always had.
use crate::page::Entry;
use crate::store::log::{PayloadCodec, PayloadEncoding, Record};
use crate::store::EntryChange;
use crate::Result;

pub use crate::store::log::{CheckpointState, MetaState};

use super::EfindStore;

const FIXED: PayloadCodec = PayloadCodec::new(PayloadEncoding::Fixed);

impl EfindStore {
    /// The payload codec of the store's log (of the configured format while
    /// no log is open).
    pub(super) fn codec(&self) -> PayloadCodec {
        self.log
            .as_ref()
            .map_or(self.config.log_format, |l| l.format())
            .payload_codec()
    }
}

/// Payload of a NEW record (fixed encoding).
pub fn encode_new(level: u16, entries: &[Entry]) -> Vec<u8> {
    FIXED.encode_new(level, entries)
}

/// Payload of a MOD record (fixed encoding).
pub fn encode_mod(level: u16, changes: &[EntryChange]) -> Vec<u8> {
    FIXED.encode_mod(level, changes)
}

/// Payload of a DEL record (fixed encoding).
pub fn encode_del(level: u16) -> Vec<u8> {
    FIXED.encode_del(level)
}

/// Payload of a META record (fixed encoding).
pub fn encode_meta(m: &MetaState) -> Vec<u8> {
    FIXED.encode_meta(m)
}

/// Payload of a CHECKPOINT record (fixed encoding).
pub fn encode_checkpoint(c: &CheckpointState) -> Vec<u8> {
    FIXED.encode_checkpoint(c)
}

/// Decodes a NEW payload (fixed encoding): the level and the entries.
pub fn decode_new(rec: &Record) -> Result<(u16, Vec<Entry>)> {
    FIXED.decode_new(rec)
}

/// Decodes a MOD payload (fixed encoding): the level and the changes.
pub fn decode_mod(rec: &Record) -> Result<(u16, Vec<EntryChange>)> {
    FIXED.decode_mod(rec)
}

/// Decodes a DEL payload (fixed encoding): the level.
pub fn decode_del(rec: &Record) -> Result<u16> {
    FIXED.decode_del(rec)
}

/// Decodes a META payload (fixed encoding).
pub fn decode_meta(rec: &Record) -> Result<MetaState> {
    FIXED.decode_meta(rec)
}

/// Decodes a CHECKPOINT payload (fixed encoding).
pub fn decode_checkpoint(rec: &Record) -> Result<CheckpointState> {
    FIXED.decode_checkpoint(rec)
}
