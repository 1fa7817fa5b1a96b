//! The survivors of a log in two forward passes, holding no record.
//!
//! [`recover_with`](super::recover_with) states the rules as the papers do,
//! newest first. A forward pass cannot know, at a record, whether a later
//! COMMIT, FLUSH or complete page record will make it obsolete; what it
//! needs to know is small, though, and [`Survival`] gathers it in a first
//! pass: per page, the newest FLUSH covering it and the newest complete
//! record (NEW or PAGE_IMAGE) of a committed operation; the newest
//! committed META; the operations whose records have no later COMMIT; the
//! newest COMMIT; everything since the newest CHECKPOINT only. A second
//! pass ([`Survivors`]) then judges each record as it comes, in the same
//! order, so that a compaction or a restart reads a log of any length with
//! memory for one record, the pages it touches and the open operations.
//!
//! The rules, forward (`r` a record after the newest CHECKPOINT, of page
//! `p` and operation `o`):
//! - `r` of an operation is *incomplete* when no COMMIT of `o` follows it;
//! - a NEW, MOD, DEL or PAGE_IMAGE survives when no FLUSH covering `p`
//!   follows it (under [`FlushRule::KeepFromImage`], FLUSH records of a
//!   page with a complete record of a committed operation count for
//!   nothing) and no complete record of `p` of a committed operation
//!   follows it that survives;
//! - the newest META of a committed operation survives, and no other;
//! - CLIENT survives with its operation; FLUSH never;
//! - a COMMIT survives when a record of its operation survived, or when it
//!   is the newest COMMIT.
//!
//! A store never reuses an operation id, and the rules agree with the
//! newest-first scan on every such log (the oracle test). On a log with
//! records of an operation after its COMMIT, which only damage could
//! produce, the two may keep different COMMITs and, under
//! [`FlushRule::KeepFromImage`], count such records' images differently.
use std::collections::{HashMap, HashSet};

use crate::storage::PageId;
use crate::store::OpId;

use super::record::{Record, RecordKind};
use super::recovery::{FlushRule, Recovered};
use super::{Lsn, NO_OP};

/// An operation whose COMMIT has not been seen (yet) in the first pass.
#[derive(Debug, Default)]
struct Open {
    /// Its complete page records: (page, LSN).
    complete: Vec<(PageId, Lsn)>,
    /// Its newest META.
    meta: Option<Lsn>,
    /// The LSN of its first record since its last COMMIT.
    first: Lsn,
    /// The LSN of its newest record.
    last: Lsn,
}

/// What the first pass learns. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Survival {
    rule: FlushRule,
    /// The newest CHECKPOINT (records before it are obsolete).
    checkpoint: Option<Lsn>,
    /// Per page: the newest FLUSH covering it.
    flushed: HashMap<PageId, Lsn>,
    /// Per page: the newest complete record of a committed operation (or of none).
    complete: HashMap<PageId, Lsn>,
    /// The newest META of a committed operation (or of none).
    meta: Option<Lsn>,
    /// Operations with records after their newest COMMIT.
    open: HashMap<OpId, Open>,
    /// The newest COMMIT: its LSN and operation.
    newest_commit: Option<(Lsn, OpId)>,
    scanned: u64,
    last_lsn: Lsn,
    max_op: OpId,
}

impl Survival {
    /// An empty first pass under `rule`.
    pub fn new(rule: FlushRule) -> Survival {
        Survival {
            rule,
            checkpoint: None,
            flushed: HashMap::new(),
            complete: HashMap::new(),
            meta: None,
            open: HashMap::new(),
            newest_commit: None,
            scanned: 0,
            last_lsn: 0,
            max_op: NO_OP,
        }
    }

    /// Learns from `rec`, the next record (oldest first).
    pub fn learn(&mut self, rec: &Record) {
        self.scanned += 1;
        self.last_lsn = self.last_lsn.max(rec.lsn);
        self.max_op = self.max_op.max(rec.op);
        match rec.kind {
            RecordKind::Checkpoint => {
                // Nothing before it is needed.
                self.checkpoint = Some(rec.lsn);
                self.flushed.clear();
                self.complete.clear();
                self.meta = None;
                self.open.clear();
                self.newest_commit = None;
            }
            RecordKind::Flush => match rec.flushed_pages() {
                Ok(pages) => {
                    for p in pages {
                        self.flushed.insert(p, rec.lsn);
                    }
                }
                // A FLUSH whose page list does not parse cannot make anything
                // obsolete; keeping older records is the safe side.
                Err(_) => tracing::warn!(
                    lsn = rec.lsn,
                    "FLUSH record with a malformed page list ignored"
                ),
            },
            RecordKind::Commit => {
                self.newest_commit = Some((rec.lsn, rec.op));
                if let Some(open) = self.open.remove(&rec.op) {
                    for (page, lsn) in open.complete {
                        self.note_complete(page, lsn);
                    }
                    if open.meta.is_some() {
                        self.meta = self.meta.max(open.meta);
                    }
                }
            }
            RecordKind::Client
            | RecordKind::Meta
            | RecordKind::New
            | RecordKind::Mod
            | RecordKind::Del
            | RecordKind::PageImage => {
                let is_complete = matches!(rec.kind, RecordKind::New | RecordKind::PageImage);
                if rec.op == NO_OP {
                    if is_complete {
                        self.note_complete(rec.page, rec.lsn);
                    } else if rec.kind == RecordKind::Meta {
                        self.meta = Some(rec.lsn);
                    }
                    return;
                }
                let open = self.open.entry(rec.op).or_insert_with(|| Open {
                    first: rec.lsn,
                    ..Open::default()
                });
                open.last = rec.lsn;
                if is_complete {
                    open.complete.push((rec.page, rec.lsn));
                } else if rec.kind == RecordKind::Meta {
                    open.meta = Some(rec.lsn);
                }
            }
        }
    }

    /// The largest LSN learnt (0 before any record).
    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn
    }

    fn note_complete(&mut self, page: PageId, lsn: Lsn) {
        let newest = self.complete.entry(page).or_insert(lsn);
        *newest = (*newest).max(lsn);
    }

    /// Whether `rec` (not a COMMIT, CHECKPOINT or FLUSH) belongs to an
    /// operation no COMMIT follows.
    fn incomplete(&self, rec: &Record) -> bool {
        rec.op != NO_OP && self.open.get(&rec.op).is_some_and(|o| rec.lsn >= o.first)
    }

    /// Whether page record `rec` of a committed operation survives.
    fn page_record_survives(&self, rec: &Record) -> bool {
        let complete = self.complete.get(&rec.page).copied();
        let flushed = match self.rule {
            FlushRule::KeepFromImage if complete.is_some() => None,
            _ => self.flushed.get(&rec.page).copied(),
        };
        flushed.is_none_or(|f| rec.lsn > f) && complete.is_none_or(|c| rec.lsn >= c)
    }

    /// The second pass: judges the records again from the oldest.
    pub fn survivors(&self) -> Survivors<'_> {
        let mut incomplete_ops: Vec<(Lsn, OpId)> =
            self.open.iter().map(|(&op, o)| (o.last, op)).collect();
        incomplete_ops.sort_unstable();
        let out = Recovered {
            scanned: self.scanned,
            last_lsn: self.last_lsn,
            max_op: self.max_op,
            last_committed_op: self.newest_commit.map(|(_, op)| op),
            incomplete_ops: incomplete_ops.into_iter().map(|(_, op)| op).collect(),
            ..Recovered::default()
        };
        Survivors {
            pass: self,
            kept_ops: HashSet::new(),
            kept: 0,
            out,
        }
    }
}

/// The second pass. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Survivors<'a> {
    pass: &'a Survival,
    /// Operations with a surviving record whose COMMIT has not come yet.
    kept_ops: HashSet<OpId>,
    kept: u64,
    out: Recovered,
}

impl Survivors<'_> {
    /// Whether `rec`, the next record (oldest first, the same sequence as
    /// the first pass), survives.
    pub fn keep(&mut self, rec: &Record) -> bool {
        let pass = &self.pass;
        if pass.checkpoint.is_some_and(|c| rec.lsn < c) {
            return false;
        }
        let keep = match rec.kind {
            RecordKind::Checkpoint => true,
            RecordKind::Flush => false,
            RecordKind::Commit => {
                if rec.op != NO_OP && self.kept_ops.remove(&rec.op) {
                    self.out.committed_ops.push(rec.op);
                    true
                } else {
                    pass.newest_commit.is_some_and(|(lsn, _)| lsn == rec.lsn)
                }
            }
            _ if pass.incomplete(rec) => {
                self.out.incomplete += 1;
                return false;
            }
            RecordKind::Client => true,
            RecordKind::Meta => pass.meta == Some(rec.lsn),
            RecordKind::New | RecordKind::Mod | RecordKind::Del | RecordKind::PageImage => {
                pass.page_record_survives(rec)
            }
        };
        if keep {
            self.kept += 1;
            if rec.kind != RecordKind::Commit {
                self.kept_ops.insert(rec.op);
            }
        }
        keep
    }

    /// What was recovered, `records` left empty: the counts, the
    /// operations, the LSNs.
    pub fn finish(mut self) -> Recovered {
        self.out.obsolete = self.out.scanned - self.kept - self.out.incomplete;
        self.out
    }
}
