//! What compaction and restart read and write, in memory bounded by a
//! constant rather than by the log.
//!
//! Both read the live region, keep the records that survive
//! ([`super::survival`]) and write them to the other region. The first
//! pass ([`first_pass`]) reads the region once through a
//! [`RecordCursor`] and learns what decides survival; it keeps the
//! decoded records too while they take at most [`HELD_BYTES`] (all of
//! them for the papers' per-change format: [`held_bytes`]), so that a log
//! of that size is read once, as before. A longer log is read again by
//! each later pass, one record at a time: the survivors are then counted
//! (their encoded bytes must fit a region before anything is written) and
//! written by a [`RegionEncoder`] that encodes them one at a time, so that
//! the memory of a compaction is the first pass's maps, the entry
//! dictionaries and one write batch, whatever the log holds.
use std::borrow::Cow;
use std::cell::Cell;

use crate::Result;

use super::cursor::{reread, RecordCursor};
use super::entry_refs::EntryMemo;
use super::kept::{self, KeptRecords};
use super::record::{Framing, HeaderDeltas, Record, RecordKind};
use super::recovery::{FlushRule, Recovered};
use super::superblock::{Base, Superblock};
use super::survival::Survival;
use super::{LogFormat, LogLayout, PayloadCodec, SharedDevice};

/// Decoded bytes of a live region that compaction and restart hold in
/// memory (the records' vector and their payloads, as allocated: see
/// [`Held`]); a longer region is read again for each pass instead.
pub(crate) const HELD_BYTES: usize = 16 << 20;

/// What the first pass of a log of `format` holds: [`HELD_BYTES`], or
/// for the papers' per-change format the whole region, as the papers'
/// scan does (the seed workloads that reproduce them pin that format, and
/// their log I/O stays the papers'). Tests may lower it, for one thread
/// ([`hold_at_most`]) or for the process (`GEOFLASH_LOG_HELD_BYTES`, so
/// that the crash campaigns can run with every region streamed).
pub(crate) fn held_bytes(format: LogFormat) -> usize {
    #[cfg(test)]
    {
        if let Some(n) = HELD_OVERRIDE.with(std::cell::Cell::get) {
            return n;
        }
        if let Some(n) = std::env::var("GEOFLASH_LOG_HELD_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            return n;
        }
    }
    match format {
        LogFormat::PerChange => usize::MAX,
        LogFormat::FirstImage | LogFormat::Compact => HELD_BYTES,
    }
}

#[cfg(test)]
thread_local! {
    static HELD_OVERRIDE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with [`held_bytes`] at `n` on this thread.
#[cfg(test)]
pub(crate) fn hold_at_most<T>(n: usize, f: impl FnOnce() -> T) -> T {
    let before = HELD_OVERRIDE.with(|c| c.replace(Some(n)));
    let out = f();
    HELD_OVERRIDE.with(|c| c.set(before));
    out
}

/// Bytes of the memo of entries a [`RegionEncoder`] remembers: a bound on
/// a rewrite's memory whatever the number of entries its region names
/// (and half as much again while its map grows into its last size). 8 MiB:
/// at 16 MiB the compaction of a 16 MiB update stream peaked 6–9 MB higher
/// (its map growing beside the reader's), for the same bytes written
/// (`docs/benchmarks.md`, "Compaction and restart in bounded memory").
const MEMO_BYTES: usize = 8 << 20;

/// The records the first pass holds, and the memory they take as
/// allocated: the vector's capacity and each payload's (a resolved
/// payload reserves room for whole entries). Counting lengths instead, a
/// held region of "16 MiB" took 30 MB: a vector grown to twice its records
/// and records of 56 bytes counted as 64 beside payloads counted short.
struct Held {
    records: Vec<Record>,
    payload_bytes: usize,
    /// At most this many bytes.
    limit: usize,
}

impl Held {
    /// Keeps `rec` if the records, its payload and the vector as a push
    /// would grow it fit the limit; false (and nothing kept) otherwise.
    fn keep(&mut self, rec: Record) -> bool {
        let payload_bytes = self.payload_bytes.saturating_add(rec.payload.capacity());
        let slots = match self.records.len() == self.records.capacity() {
            // `Vec::push` grows a full vector to twice its capacity (at
            // least 4): counted before it does.
            true => (self.records.capacity() * 2).max(4),
            false => self.records.capacity(),
        };
        let bytes = slots
            .saturating_mul(std::mem::size_of::<Record>())
            .saturating_add(payload_bytes);
        if bytes > self.limit {
            return false;
        }
        self.payload_bytes = payload_bytes;
        self.records.push(rec);
        true
    }
}

/// The live region as the first pass left it.
pub(crate) enum Region {
    /// Its records, oldest first (the region fit [`HELD_BYTES`]).
    Held(Vec<Record>),
    /// Too long to hold: each pass reads it again.
    Streamed,
}

/// What the first pass found besides the records.
pub(crate) struct FirstPass {
    /// What decides survival.
    pub survival: Survival,
    /// The records, when held.
    pub region: Region,
    /// Valid pages of the region (its next free position).
    pub pages: u64,
    /// A record was cut short at the end of the stream.
    pub torn_tail: bool,
    /// Pages read.
    pub pages_read: u64,
}

/// Reads the live region of `sb` (on `layout` as the superblock lays it
/// out) once (damage before the tail is an
/// error), learning what decides survival under `rule` and keeping the
/// records while they take at most `held_bytes`.
pub(crate) fn first_pass(
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    rule: FlushRule,
    held_bytes: usize,
) -> Result<FirstPass> {
    let mut cursor = RecordCursor::new(dev, layout, sb, false);
    let mut survival = Survival::new(rule);
    let mut held = Some(Held {
        records: Vec::new(),
        payload_bytes: 0,
        limit: held_bytes,
    });
    while let Some(rec) = cursor.next_record()? {
        survival.learn(&rec);
        if held.as_mut().is_some_and(|h| !h.keep(rec)) {
            held = None;
        }
    }
    if cursor.rebuilt() > 0 {
        let (region, rebuilt) = (sb.live, cursor.rebuilt());
        tracing::warn!(
            "log region {region}: {rebuilt} damaged page(s) rebuilt from their batch's seal page"
        );
    }
    Ok(FirstPass {
        survival,
        region: held.map_or(Region::Streamed, |h| Region::Held(h.records)),
        pages: cursor.valid_pages(),
        torn_tail: cursor.torn_tail,
        pages_read: cursor.pages_read(),
    })
}

impl FirstPass {
    /// The region's records oldest first, for a later pass: the held ones,
    /// or the region read again (its pages read are added to `pages_read`).
    /// `dev`, `layout` and `sb` must be those of the first pass.
    pub fn records<'a>(
        &'a self,
        dev: &'a SharedDevice,
        layout: &'a LogLayout,
        sb: &'a Superblock,
        pages_read: &'a Cell<u64>,
    ) -> Box<dyn Iterator<Item = Result<Cow<'a, Record>>> + 'a> {
        match &self.region {
            Region::Held(records) => Box::new(records.iter().map(|r| Ok(Cow::Borrowed(r)))),
            Region::Streamed => Box::new(
                reread(dev, layout, sb, |n| pages_read.set(pages_read.get() + n))
                    .map(|r| r.map(Cow::Owned)),
            ),
        }
    }
}

/// The survivors of the region of `first` (read again from `dev`,
/// `layout` and `sb` when it was not held) and what was recovered; the
/// pages read are added to `pages_read`. With `count`, each survivor is
/// also given to it as it is judged (a restart counts the bytes of the
/// region it will write in the same pass).
pub(crate) fn recover_region(
    first: FirstPass,
    dev: &SharedDevice,
    layout: &LogLayout,
    sb: &Superblock,
    pages_read: &Cell<u64>,
    mut count: Option<&mut RegionEncoder>,
) -> Result<Recovered> {
    let mut keep = first.survival.survivors();
    let mut sink = Vec::new();
    let mut kept = |rec: &Record| -> Result<bool> {
        if !keep.keep(rec) {
            return Ok(false);
        }
        if let Some(count) = count.as_deref_mut() {
            count.push(rec, &mut sink)?;
            sink.clear();
        }
        Ok(true)
    };
    match first.region {
        Region::Held(records) => {
            let mut survivors = Vec::new();
            for rec in records {
                if kept(&rec)? {
                    survivors.push(rec);
                }
            }
            let records = survivors;
            let mut out = keep.finish();
            out.records = KeptRecords::held(records);
            out.torn_tail = first.torn_tail;
            Ok(out)
        }
        Region::Streamed => {
            // The judging pass counts the survivors and the operations;
            // the records are read again when they are walked.
            let mut n = 0u64;
            for rec in reread(dev, layout, sb, |n| pages_read.set(pages_read.get() + n)) {
                n += u64::from(kept(&rec?)?);
            }
            let mut out = keep.finish();
            let region = kept::Region {
                dev: dev.clone(),
                layout: *layout,
                sb: sb.clone(),
            };
            out.records = KeptRecords::judged(region, first.survival, n);
            out.torn_tail = first.torn_tail;
            Ok(out)
        }
    }
}

/// How a new region encodes its records: the framing, and with entry
/// references the codec of their payloads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RegionFormat {
    /// The records' framing.
    pub framing: Framing,
    /// Logs with entry references: the payloads' codec.
    pub entry_refs: Option<PayloadCodec>,
    /// The log's page size (whether a CHECKPOINT fits the superblock).
    pub page_size: usize,
}

/// Encodes the survivors of a compaction or restart one at a time, as
/// the new region holds them: a leading CHECKPOINT whose payload fits the
/// superblock (and a lone COMMIT after it, when it is the only other
/// record: the newest operation, kept so that its id survives) becomes the
/// superblock's base; NEW and MOD payloads of logs with entry references
/// name the entries earlier survivors logged the same, as far as a memo of
/// [`MEMO_BYTES`] remembers them (a region with more entries writes some
/// in full again, as the log's own writer does past its memo).
pub(crate) struct RegionEncoder {
    format: RegionFormat,
    memo: EntryMemo,
    deltas: HeaderDeltas,
    /// The leading records that may become the base (at most two).
    head: Vec<Record>,
    /// Whether a record has gone to the stream.
    streaming: bool,
    base: Option<Base>,
    /// Records encoded into the stream.
    pub records: u64,
    /// Records given, the base's included.
    pub given: u64,
    /// Bytes encoded into the stream.
    pub bytes: u64,
}

impl RegionEncoder {
    /// An encoder of a fresh region of `format`.
    pub fn new(format: RegionFormat) -> Self {
        RegionEncoder {
            format,
            memo: EntryMemo::with_capacity_bytes(MEMO_BYTES),
            deltas: HeaderDeltas::default(),
            head: Vec::new(),
            streaming: false,
            base: None,
            records: 0,
            given: 0,
            bytes: 0,
        }
    }

    /// Encodes `rec`, the next survivor, appending its bytes to `out`
    /// (nothing while it may still belong to the base).
    pub fn push(&mut self, rec: &Record, out: &mut Vec<u8>) -> Result<()> {
        self.given += 1;
        if !self.streaming {
            let may_be_base = match self.head.as_slice() {
                [] => {
                    rec.kind == RecordKind::Checkpoint
                        && Base::fits(rec.payload.len(), self.format.page_size)
                }
                [_] => rec.kind == RecordKind::Commit,
                _ => false,
            };
            if may_be_base {
                self.head.push(rec.clone());
                return Ok(());
            }
            self.start_stream(out)?;
        }
        self.encode(rec, out)
    }

    /// Ends the region: what is left of the head goes to the base or the
    /// stream. Returns the base.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<Option<Base>> {
        if !self.streaming {
            if let [ck, c] = self.head.as_slice() {
                self.base = Some(Base {
                    checkpoint_lsn: ck.lsn,
                    payload: ck.payload.clone(),
                    commit: Some((c.op, c.lsn)),
                });
                self.head.clear();
            }
            self.start_stream(out)?;
        }
        Ok(self.base.take())
    }

    /// The head is not a base with a commit: its CHECKPOINT (if any)
    /// becomes the base and the rest goes to the stream.
    fn start_stream(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.streaming = true;
        let head = std::mem::take(&mut self.head);
        let mut rest = head.iter();
        if let Some(ck) = head.first() {
            self.base = Some(Base {
                checkpoint_lsn: ck.lsn,
                payload: ck.payload.clone(),
                commit: None,
            });
            rest.next();
        }
        for rec in rest {
            self.encode(rec, out)?;
        }
        Ok(())
    }

    /// The header deltas after the last record encoded (the writer
    /// continues from them).
    pub fn deltas(&self) -> HeaderDeltas {
        self.deltas
    }

    fn encode(&mut self, rec: &Record, out: &mut Vec<u8>) -> Result<()> {
        let before = out.len();
        match self.format.entry_refs {
            Some(codec) => {
                let payload = match rec.kind {
                    RecordKind::New => {
                        let (level, entries) = codec.decode_new(rec)?;
                        Some(codec.encode_new_refs(level, &entries, Some(&mut self.memo)))
                    }
                    RecordKind::Mod => {
                        let (level, changes) = codec.decode_mod(rec)?;
                        Some(codec.encode_mod_refs(level, &changes, Some(&mut self.memo)))
                    }
                    _ => None,
                };
                match payload {
                    Some(payload) => {
                        let r = Record::at(rec.lsn, rec.kind, rec.op, rec.page, payload);
                        r.encode_compact_as(self.deltas.encode_next(&r), out)?;
                    }
                    None => rec.encode_compact_as(self.deltas.encode_next(rec), out)?,
                }
            }
            None => rec.encode_framed(self.format.framing, out)?,
        }
        self.records += 1;
        self.bytes += (out.len() - before) as u64;
        Ok(())
    }
}

#[cfg(test)]
mod held_tests {
    use super::*;

    /// The records the first pass holds take at most its limit as
    /// allocated (the vector's capacity, the payloads' capacities), and it
    /// holds as many as that allows: it counted lengths before, and a
    /// region of "16 MiB" took 30 MB.
    #[test]
    fn held_records_take_at_most_their_limit_as_allocated() {
        let limit = 256 << 10;
        let mut held = Held {
            records: Vec::new(),
            payload_bytes: 0,
            limit,
        };
        let allocated = |h: &Held| {
            h.records.capacity() * std::mem::size_of::<Record>()
                + h.records.iter().map(|r| r.payload.capacity()).sum::<usize>()
        };
        let mut kept = 0usize;
        loop {
            // A payload of 40 bytes in room reserved for 100, as resolved
            // payloads reserve room for whole entries.
            let mut payload = Vec::with_capacity(100);
            payload.resize(40, 7);
            if !held.keep(Record::new(RecordKind::Mod, 1, 1, payload)) {
                break;
            }
            kept += 1;
            assert!(allocated(&held) <= limit, "{} > {limit}", allocated(&held));
        }
        assert_eq!(held.records.len(), kept);
        // Within a vector's doubling of what fits.
        let per_record = std::mem::size_of::<Record>() + 100;
        assert!(kept * per_record * 2 >= limit / 2, "only {kept} records held");
    }
}
