//! The incremental flush index against the scan it replaces (the oracle):
//! random sequences of create, modify, delete, removal, flush and batch
//! flushes, under every policy, with and without temporal control, choose
//! the same units in the same order.
use std::collections::VecDeque;

use crate::page_id::IdSet;

use proptest::prelude::*;

use super::super::flush::{choose_by_scan, choose_indexed, FlushPolicy};
use super::super::write_buffer::{Status, WriteBuffer};
use super::super::{EfindConfig, TemporalControl};
use crate::geom::Rect;
use crate::page::Entry;
use crate::storage::PageId;
use crate::store::EntryChange;

#[derive(Debug, Clone)]
enum Op {
    Create(PageId, u16, Vec<(u64, u8)>),
    Modify(PageId, u16, Vec<(u64, Option<u8>)>),
    Delete(PageId, u16),
    Remove(PageId),
    Flush,
    Batch(usize),
}

/// Rectangle number `r`: one in eight is a point (no area).
fn rect(r: u8) -> Rect {
    let x = f64::from(r % 16) / 16.0;
    let y = f64::from(r / 16) / 16.0;
    let w = if r.is_multiple_of(8) {
        0.0
    } else {
        f64::from(r % 5 + 1) / 20.0
    };
    Rect::new(x, y, x + w, y + w * 0.5).unwrap()
}

fn entry(key: u64, r: u8) -> Entry {
    Entry {
        key,
        rect: rect(r),
        payload: 0,
    }
}

fn op(pages: PageId) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..pages, 0u16..3, prop::collection::vec((0u64..20, any::<u8>()), 0..5))
            .prop_map(|(p, l, e)| Op::Create(p, l, e)),
        6 => (0..pages, 0u16..3, prop::collection::vec((0u64..20, prop::option::weighted(0.8, any::<u8>())), 1..4))
            .prop_map(|(p, l, c)| Op::Modify(p, l, c)),
        1 => (0..pages, 0u16..3).prop_map(|(p, l)| Op::Delete(p, l)),
        1 => (0..pages).prop_map(Op::Remove),
        2 => Just(Op::Flush),
        1 => (1usize..5).prop_map(Op::Batch),
    ]
}

fn policy() -> impl Strategy<Value = FlushPolicy> {
    prop_oneof![
        Just(FlushPolicy::M),
        Just(FlushPolicy::Mh),
        Just(FlushPolicy::Mha),
        Just(FlushPolicy::Mhao),
    ]
}

fn config() -> impl Strategy<Value = EfindConfig> {
    (
        policy(),
        1u8..=100,
        1usize..=10,
        prop::option::of((1usize..12, 0u64..6, 1u64..40)),
    )
        .prop_map(|(policy, flush_percent, flush_unit, tc)| EfindConfig {
            policy,
            flush_percent,
            flush_unit,
            temporal_control: tc.map(|(wq, seq, extra)| TemporalControl {
                rq_capacity: 4,
                wq_capacity: wq,
                seq_distance: seq,
                stride_distance: seq + extra,
            }),
            ..EfindConfig::default()
        })
}

/// Removes the written pages as `write_pages` does and records them in WQ.
fn write(wb: &mut WriteBuffer, wq: &mut VecDeque<PageId>, cfg: &EfindConfig, ids: &[PageId]) {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    for &id in &ids {
        if let (Some(tc), Some(row)) = (cfg.temporal_control, wb.get(id)) {
            if row.status() != Status::Del {
                wq.push_back(id);
                while wq.len() > tc.wq_capacity {
                    wq.pop_front();
                }
            }
        }
    }
    for id in ids {
        wb.remove(id);
    }
}

fn run(cfg: EfindConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut wb = WriteBuffer::new();
    let mut wq: VecDeque<PageId> = VecDeque::new();
    let mut flushes = 0;
    for op in ops {
        match op {
            Op::Create(p, l, es) => {
                let mut es: Vec<Entry> = es.into_iter().map(|(k, r)| entry(k, r)).collect();
                es.sort_by_key(|e| e.key);
                es.dedup_by_key(|e| e.key);
                wb.create(p, l, &es);
            }
            Op::Modify(p, l, cs) => {
                let cs: Vec<EntryChange> = cs
                    .into_iter()
                    .map(|(k, r)| match r {
                        Some(r) => EntryChange::Upsert(entry(k, r)),
                        None => EntryChange::Remove(k),
                    })
                    .collect();
                wb.modify(p, l, &cs);
            }
            Op::Delete(p, l) => wb.delete(p, l),
            Op::Remove(p) => {
                wb.remove(p);
            }
            Op::Flush => {
                let old = choose_by_scan(&wb, &IdSet::default(), &cfg, &wq);
                let new = choose_indexed(&mut wb, &cfg, &wq);
                prop_assert_eq!(&new, &old, "flush {}", flushes);
                flushes += 1;
                write(&mut wb, &mut wq, &cfg, &new.unit);
            }
            Op::Batch(units) => {
                let mut chosen = IdSet::default();
                let mut order = Vec::new();
                for _ in 0..units {
                    let old = choose_by_scan(&wb, &chosen, &cfg, &wq);
                    let new = choose_indexed(&mut wb, &cfg, &wq);
                    prop_assert_eq!(&new, &old, "batch at flush {}", flushes);
                    flushes += 1;
                    if new.unit.is_empty() {
                        break;
                    }
                    for &id in &new.unit {
                        wb.flush_index_mut().exclude(id);
                    }
                    chosen.extend(new.unit.iter().copied());
                    order.extend(new.unit);
                }
                wb.flush_index_mut().include_all();
                write(&mut wb, &mut wq, &cfg, &order);
            }
        }
    }
    // A final comparison over what is left.
    let old = choose_by_scan(&wb, &IdSet::default(), &cfg, &wq);
    prop_assert_eq!(choose_indexed(&mut wb, &cfg, &wq), old);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Same units, same order, same temporal-control outcomes as the scan.
    #[test]
    fn incremental_choice_equals_the_scan(
        cfg in config(),
        pages in prop_oneof![Just(12u64), Just(60u64), Just(400u64)],
        seed_ops in prop::collection::vec(op(400), 1..300),
    ) {
        let ops = seed_ops
            .into_iter()
            .map(|o| match o {
                Op::Create(p, l, e) => Op::Create(p % pages, l, e),
                Op::Modify(p, l, c) => Op::Modify(p % pages, l, c),
                Op::Delete(p, l) => Op::Delete(p % pages, l),
                Op::Remove(p) => Op::Remove(p % pages),
                o => o,
            })
            .collect();
        run(cfg, ops)?;
    }
}

/// A buffer of 5,000 pages: the index chooses as the scan, first after its
/// build and then after each change.
#[test]
fn a_large_buffer_is_ranked_as_the_scan_after_each_change() {
    let cfg = EfindConfig {
        temporal_control: None,
        flush_unit: 3,
        ..EfindConfig::default()
    };
    let mut wb = WriteBuffer::new();
    let wq = VecDeque::new();
    for p in 0..5000u64 {
        let changes: Vec<EntryChange> = (0..(p % 7 + 1))
            .map(|k| EntryChange::Upsert(entry(k, (p % 200) as u8)))
            .collect();
        wb.modify(p, (p % 3) as u16, &changes);
    }
    let old = choose_by_scan(&wb, &IdSet::default(), &cfg, &wq);
    let new = choose_indexed(&mut wb, &cfg, &wq);
    assert_eq!(new, old);
    assert_eq!(new.unit.len(), 3);
    // Touching pages keeps the index in step without a rebuild.
    for p in (0..5000u64).step_by(11) {
        wb.modify(p, 2, &[EntryChange::Remove(0)]);
        let old = choose_by_scan(&wb, &IdSet::default(), &cfg, &wq);
        assert_eq!(choose_indexed(&mut wb, &cfg, &wq), old, "after page {p}");
    }
}
