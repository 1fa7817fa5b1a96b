//! [`RestartReport`]: what restart did when a store with a log (eFIND or
//! FAST) was opened, in one shape for both, so the command line's
//! `recover` and the workbench's crash step print the same fields.
use serde::{Deserialize, Serialize};

use super::{Record, RecordKind, Recovered};
use crate::store::OpId;

/// What restart did when a store was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartReport {
    /// Records found in the log.
    pub records_scanned: u64,
    /// Surviving records (checkpoint and COMMITs included).
    pub records_kept: u64,
    /// NEW / MOD / DEL / META records replayed into the store's buffer.
    pub changes_replayed: u64,
    /// Committed operations with replayed records.
    pub ops_replayed: u64,
    /// Operations dropped because their COMMIT was not durable.
    pub incomplete_ops: u64,
    /// Records dropped as obsolete (flushed, superseded, before the checkpoint).
    pub obsolete_records: u64,
    /// Pages written back from their page images (torn-write repair).
    pub pages_restored: u64,
    /// The log ended in a torn record (normal after a crash).
    pub torn_tail: bool,
    /// The newest committed operation in the log.
    pub last_committed_op: Option<OpId>,
    /// Pages (nodes) buffered after replay.
    pub buffered_pages: u64,
    /// Whether the allocator was rebuilt from the reachable pages.
    pub allocator_rebuilt: bool,
    /// Free pages after restart.
    pub free_pages: u64,
    /// Records in the tree after restart.
    pub records_in_tree: u64,
    /// Log pages dropped from a corrupt tail
    /// ([`RecoveryMode::TolerateCorruptTail`](super::RecoveryMode); 0 otherwise).
    #[serde(default)]
    pub corrupt_pages_dropped: u64,
    /// Whole records known to be dropped with them.
    #[serde(default)]
    pub corrupt_records_dropped: u64,
}

impl RestartReport {
    /// The fields the log's restart decides (what it scanned, kept and
    /// dropped); the store fills in what replay did.
    pub(crate) fn from_recovered(rec: &Recovered) -> Self {
        RestartReport {
            records_scanned: rec.scanned,
            records_kept: rec.records.count(),
            ops_replayed: rec.committed_ops.len() as u64,
            incomplete_ops: rec.incomplete_ops.len() as u64,
            obsolete_records: rec.obsolete,
            torn_tail: rec.torn_tail,
            last_committed_op: rec.last_committed_op,
            ..RestartReport::default()
        }
    }

    /// Notes what `repair_corrupt_tail` dropped.
    pub fn add_tail_repair(&mut self, r: &super::TailRepair) {
        self.corrupt_pages_dropped += r.pages_dropped;
        self.corrupt_records_dropped += r.records_dropped;
    }

    /// True when restart had something to do (replay or repair).
    pub fn recovered_anything(&self) -> bool {
        self.changes_replayed > 0
            || self.pages_restored > 0
            || self.incomplete_ops > 0
            || self.corrupt_pages_dropped > 0
    }
}

/// Whether a surviving record must be replayed into a store's buffer
/// (anything but CHECKPOINT, COMMIT and FLUSH): a read-only open refuses a
/// log holding one, since it cannot replay without writing.
pub fn needs_replay(r: &Record) -> bool {
    r.kind.is_page_change() || r.kind == RecordKind::Meta
}
