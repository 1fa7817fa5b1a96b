//! The payloads of the eFIND store's log records: the shared codec of
//! [`crate::store::log::payload`] (its META is the common part only, its
//! CHECKPOINT carries the free list).
//!
//! The store encodes and decodes with the codec of its log's format
//! ([`EfindStore::codec`], [`Recovered::payload_codec`](crate::store::log::Recovered::payload_codec)).
use crate::store::log::PayloadCodec;

pub use crate::store::log::{CheckpointState, MetaState};

use super::EfindStore;

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
