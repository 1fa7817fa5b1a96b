//! Restart and compaction: the algorithm shared by eFIND (Algorithm 7) and
//! FAST (Algorithm 5).
//!
//! Both papers scan the log newest-first, collect the pages of FLUSH records,
//! push every other record whose page is not among them on a stack, and pop
//! the stack into the buffer and a new log, which restores the original order.
//! Recovery applies the same rules and adds what crash safety needs:
//!
//! - **Incomplete operations.** A record of an operation (`op != NO_OP`) whose
//!   COMMIT is not in the log (the newest-first scan meets the COMMIT before
//!   the operation's records) is dropped: the crash interrupted it or its
//!   commit was not durable. Their ids are reported.
//! - **FLUSH.** Records of a page older than a FLUSH covering the page are
//!   obsolete (the page on the device holds them). The FLUSH itself is dropped.
//! - **Complete contents.** A surviving NEW or PAGE_IMAGE holds the whole page,
//!   so older records of that page are obsolete too; the newest surviving META
//!   makes older META records obsolete.
//! - **CHECKPOINT.** Nothing older than the newest CHECKPOINT is needed; the
//!   CHECKPOINT record itself survives (it may carry the store's payload).
//! - **CLIENT.** A front end's frames survive with their operation (or
//!   always, without one) until the newest CHECKPOINT: no FLUSH and no
//!   complete page record makes them obsolete, so compaction keeps them.
//! - **COMMIT.** A COMMIT survives when a record of its operation survives, and
//!   the newest COMMIT always survives, so the newest committed operation is
//!   known after any number of compactions.
//!
//! **FLUSH under the first-image format** ([`FlushRule::KeepFromImage`],
//! restart of a [first-image](super::LogFormat::FirstImage) log). There a
//! page is imaged only at its first flush in a log epoch, later flushes
//! write it in place without an image, and the page device is synced only
//! before a compaction or a checkpoint, so a FLUSH in the live epoch does
//! not prove its pages durable and a torn page can only be rebuilt from its
//! image. Restart therefore ignores the FLUSH records of a page that has a
//! complete record (PAGE_IMAGE, or NEW: a page created in the epoch needs no
//! image) in the log: the newest complete record and every later record of
//! the page survive, and replaying them over the written-back image gives
//! the page's newest content whatever state the crash left it in. A page
//! without a complete record in the epoch was not flushed in it (its first
//! flush would have imaged it), so its FLUSH records are the ones of
//! earlier epochs, already applied by the compaction that ended them.
//! Compaction keeps [`FlushRule::Obsolete`]: the store syncs the page device
//! before it, which makes every FLUSH true, and images the pages again
//! after it (the new epoch holds no image of them).
//!
//! The rules are stated here as the papers scan, newest first (the test
//! oracle keeps that scan); compaction, restart and the read-only reader
//! apply them in two forward passes that hold no record (`survival`), and
//! read a long region again for each pass (`passes`).
//!
//! Compaction writes exactly the survivors; therefore recovering a compacted
//! log followed by more records gives the same survivors as recovering the
//! uncompacted log followed by the same records, provided compaction runs
//! between operations (the store contract: flushes and compactions happen
//! only there).
use crate::store::OpId;

use super::KeptRecords;
#[cfg(test)]
use super::record::Record;
#[cfg(test)]
use super::survival::Survival;
use super::{LogFormat, Lsn, PayloadCodec};

/// What restart recovered from a log.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(PartialEq))]
pub struct Recovered {
    /// Surviving records in their original order (original LSNs): replay
    /// them into the buffer. Held, or read again from the log at each walk
    /// when the log was too long to hold ([`KeptRecords`]).
    pub records: KeptRecords,
    /// Operations with surviving records, in commit order (every one has its COMMIT among `records`).
    pub committed_ops: Vec<OpId>,
    /// Operations dropped because their COMMIT is missing.
    pub incomplete_ops: Vec<OpId>,
    /// The newest committed operation in the log.
    pub last_committed_op: Option<OpId>,
    /// The largest operation id in the log, complete or not (new operations should start above it).
    pub max_op: OpId,
    /// The largest LSN in the log (0 if empty).
    pub last_lsn: Lsn,
    /// Records scanned.
    pub scanned: u64,
    /// Records dropped as obsolete (flushed, superseded, before a checkpoint, FLUSH records).
    pub obsolete: u64,
    /// Records dropped because their operation did not commit.
    pub incomplete: u64,
    /// The scan ended in a torn record (set by the log; `recover` itself leaves it false).
    pub torn_tail: bool,
    /// The log's format, which tells how its payloads are encoded (set by
    /// restart and the read-only reader; the test helpers leave the default).
    pub format: LogFormat,
}

impl Recovered {
    /// The codec of the records' payloads (from the log's format).
    pub fn payload_codec(&self) -> PayloadCodec {
        self.format.payload_codec()
    }
}

/// What a FLUSH record does to the older records of its pages. See the
/// [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushRule {
    /// They are obsolete (compaction; restart of a per-change log).
    Obsolete,
    /// They are obsolete unless the page has a complete record in the log,
    /// whose newest one and every later record survive (restart of a
    /// first-image log).
    KeepFromImage,
}

/// Computes the survivors of `records` (oldest first) with
/// [`FlushRule::Obsolete`]. See the [module docs](self).
#[cfg(test)]
pub fn recover(records: Vec<Record>) -> Recovered {
    recover_with(records, FlushRule::Obsolete)
}

/// Restart of a log of `format`: the survivors of `records` (oldest first)
/// under the format's [`FlushRule`], with the format noted.
#[cfg(test)]
pub fn recover_log(records: Vec<Record>, format: LogFormat) -> Recovered {
    let mut r = recover_with(records, format.restart_rule());
    r.format = format;
    r
}

/// Computes the survivors of `records` (oldest first) under `rule`, in
/// the two forward passes of [`Survival`]. See the [module docs](self).
#[cfg(test)]
pub fn recover_with(records: Vec<Record>, rule: FlushRule) -> Recovered {
    let mut pass = Survival::new(rule);
    for rec in &records {
        pass.learn(rec);
    }
    let mut survivors = pass.survivors();
    let kept: Vec<Record> = records
        .into_iter()
        .filter(|rec| survivors.keep(rec))
        .collect();
    let mut out = survivors.finish();
    out.records = KeptRecords::held(kept);
    out
}

#[cfg(test)]
mod oracle;
