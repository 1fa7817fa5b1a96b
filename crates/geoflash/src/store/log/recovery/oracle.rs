//! The papers' newest-first recovery, kept as the oracle of the forward
//! passes ([`super::recover_with`]).
use std::collections::HashSet;

use proptest::prelude::*;

use crate::storage::PageId;
use crate::store::OpId;

use super::super::record::{Record, RecordKind};
use super::super::{Lsn, NO_OP};
use super::{recover_with, FlushRule, Recovered};

/// Pages with a complete record (NEW or PAGE_IMAGE) that restart keeps:
/// after the newest CHECKPOINT, of no operation or of a committed one.
fn imaged_pages(records: &[Record]) -> HashSet<PageId> {
    let tail = records
        .iter()
        .rposition(|r| r.kind == RecordKind::Checkpoint)
        .map_or(records, |i| records.get(i..).unwrap_or(&[]));
    let committed: HashSet<OpId> = tail
        .iter()
        .filter(|r| r.kind == RecordKind::Commit)
        .map(|r| r.op)
        .collect();
    tail.iter()
        .filter(|r| matches!(r.kind, RecordKind::New | RecordKind::PageImage))
        .filter(|r| r.op == NO_OP || committed.contains(&r.op))
        .map(|r| r.page)
        .collect()
}

/// The survivors of `records` (oldest first) under `rule`, scanned newest
/// first as Algorithm 7 of eFIND and Algorithm 5 of FAST do.
fn newest_first(records: Vec<Record>, rule: FlushRule) -> Recovered {
    let mut out = Recovered {
        scanned: records.len() as u64,
        ..Recovered::default()
    };
    out.last_lsn = records.iter().map(|r| r.lsn).max().unwrap_or(0);
    out.max_op = records.iter().map(|r| r.op).max().unwrap_or(NO_OP);

    let mut flushed: HashSet<PageId> = HashSet::new();
    let mut complete: HashSet<PageId> = HashSet::new();
    let mut committed: HashSet<OpId> = HashSet::new();
    let mut ops_kept: HashSet<OpId> = HashSet::new();
    let mut incomplete: Vec<OpId> = Vec::new();
    let mut meta_kept = false;
    // Newest-first stack of survivors (COMMITs tentatively).
    let mut stack: Vec<Record> = Vec::new();
    let mut newest_commit: Option<Lsn> = None;
    let imaged = match rule {
        FlushRule::Obsolete => HashSet::new(),
        FlushRule::KeepFromImage => imaged_pages(&records),
    };

    let mut iter = records.into_iter().rev();
    for rec in iter.by_ref() {
        match rec.kind {
            RecordKind::Checkpoint => {
                stack.push(rec);
                break;
            }
            RecordKind::Flush => {
                match rec.flushed_pages() {
                    Ok(pages) => flushed.extend(pages.into_iter().filter(|p| !imaged.contains(p))),
                    Err(_) => {
                        // A FLUSH whose page list does not parse cannot make anything
                        // obsolete; keeping older records is the safe side.
                        tracing::warn!(
                            lsn = rec.lsn,
                            "FLUSH record with a malformed page list ignored"
                        );
                    }
                }
                out.obsolete += 1;
            }
            RecordKind::Commit => {
                committed.insert(rec.op);
                if newest_commit.is_none() {
                    newest_commit = Some(rec.lsn);
                    out.last_committed_op = Some(rec.op);
                }
                stack.push(rec);
            }
            RecordKind::Client => {
                // A front end's frames: kept with their operation, never
                // made obsolete by a FLUSH (they concern no page).
                if rec.op != NO_OP && !committed.contains(&rec.op) {
                    if !incomplete.contains(&rec.op) {
                        incomplete.push(rec.op);
                    }
                    out.incomplete += 1;
                    continue;
                }
                ops_kept.insert(rec.op);
                stack.push(rec);
            }
            RecordKind::Meta
            | RecordKind::New
            | RecordKind::Mod
            | RecordKind::Del
            | RecordKind::PageImage => {
                if rec.op != NO_OP && !committed.contains(&rec.op) {
                    if !incomplete.contains(&rec.op) {
                        incomplete.push(rec.op);
                    }
                    out.incomplete += 1;
                    continue;
                }
                let keep = if rec.kind == RecordKind::Meta {
                    !std::mem::replace(&mut meta_kept, true)
                } else {
                    !flushed.contains(&rec.page) && !complete.contains(&rec.page)
                };
                if !keep {
                    out.obsolete += 1;
                    continue;
                }
                if matches!(rec.kind, RecordKind::New | RecordKind::PageImage) {
                    complete.insert(rec.page);
                }
                ops_kept.insert(rec.op);
                stack.push(rec);
            }
        }
    }
    out.obsolete += iter.count() as u64;

    // Pop the stack: original order. Decide COMMITs now that all survivors are known.
    let mut kept = Vec::with_capacity(stack.len());
    while let Some(rec) = stack.pop() {
        if rec.kind == RecordKind::Commit {
            if ops_kept.contains(&rec.op) && rec.op != NO_OP {
                out.committed_ops.push(rec.op);
            } else if newest_commit != Some(rec.lsn) {
                out.obsolete += 1;
                continue;
            }
        }
        kept.push(rec);
    }
    incomplete.reverse();
    out.incomplete_ops = incomplete;
    out.records = crate::store::log::KeptRecords::held(kept);
    out
}

/// A log as a store writes one: operations of a few page records (of
/// every kind) ending in their COMMIT or abandoned, records of no
/// operation, FLUSH records (some malformed) and CHECKPOINTs, on a few
/// pages so that they meet; LSNs in order.
fn a_log(seed: u64, len: usize) -> Vec<Record> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let page_kinds = [
        RecordKind::New,
        RecordKind::Mod,
        RecordKind::Mod,
        RecordKind::Del,
        RecordKind::PageImage,
        RecordKind::Meta,
        RecordKind::Client,
    ];
    let mut out = Vec::new();
    let mut op: OpId = 0;
    while out.len() < len {
        match rng.gen_range(0..10) {
            0..=5 => {
                op += 1;
                for _ in 0..rng.gen_range(0..4) {
                    let kind = page_kinds[rng.gen_range(0..page_kinds.len())];
                    out.push(Record::new(kind, op, rng.gen_range(1..6), vec![1]));
                }
                if rng.gen_range(0..8) != 0 {
                    out.push(Record::commit(op));
                }
            }
            6 => {
                let kind = page_kinds[rng.gen_range(0..page_kinds.len())];
                out.push(Record::new(kind, NO_OP, rng.gen_range(1..6), vec![2]));
            }
            7 | 8 => {
                let pages: Vec<PageId> = (1..6).filter(|_| rng.gen_bool(0.4)).collect();
                let mut flush = Record::flush(&pages).unwrap_or_else(|_| Record::commit(op));
                if rng.gen_range(0..10) == 0 {
                    flush.payload.truncate(2);
                }
                out.push(flush);
            }
            _ => out.push(Record::new(RecordKind::Checkpoint, NO_OP, 0, vec![3])),
        }
    }
    for (i, r) in out.iter_mut().enumerate() {
        r.lsn = i as Lsn + 1;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn the_forward_passes_keep_what_the_newest_first_scan_keeps(seed in any::<u64>(), len in 0usize..120) {
        let records = a_log(seed, len);
        for rule in [FlushRule::Obsolete, FlushRule::KeepFromImage] {
            let want: Recovered = newest_first(records.clone(), rule);
            prop_assert_eq!(recover_with(records.clone(), rule), want, "rule {:?}", rule);
        }
    }
}
