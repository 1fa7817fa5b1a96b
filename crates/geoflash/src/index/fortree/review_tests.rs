//! Review tests of the FOR-tree: the shared review driver
//! (`index::hilbert_review_tests::drive`: random insertions, deletions,
//! updates with good and stale hints, refusals, every query kind against a
//! brute-force oracle, degenerate data, ids sharing their low 32 bits or
//! at the provisional page ids) on random configurations (M from 3, m from
//! 1, buffers from none to large, merge-backs early or late, the original
//! counter), with the FOR-tree's check after every operation and, on a
//! plain store, checkpoints and reopenings that must give back the same
//! tree, overflow node table included.
//!
//! Cases: `GEOFLASH_PROPTEST_CASES` (default 64) seeds per test.
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::index::hilbert_review_tests::{drive, review_cases, Drive, Tally, SHAPES};
use crate::index::query::Predicate;
use crate::spatial::SpatialIndex;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::mem::MemStore;
use crate::store::{PlainConfig, PlainStore};

/// A random configuration: small M (deep trees, long chains), any m,
/// buffers from none to large, merge-backs after a few accesses or late.
fn config(rng: &mut ChaCha8Rng) -> FortreeConfig {
    let max = rng.gen_range(3..9usize);
    let base = FortreeConfig::new(max);
    FortreeConfig {
        min_entries: rng.gen_range(1..=max.div_ceil(2)),
        buffer_bytes: [0, 600, 3000, 1 << 20][rng.gen_range(0..4)],
        flush_unit: [1, 2, 5][rng.gen_range(0..3)],
        flush_fraction: [0.1, 0.5, 1.0][rng.gen_range(0..3)],
        write_read_ratio: [0.1, 0.5, 2.0, 10.0][rng.gen_range(0..4)],
        original_root_counter: rng.gen_ratio(1, 4),
        ..base
    }
}

/// The FOR-tree on `S` behind `dyn SpatialIndex`.
fn fortree_of<S: NodeStore + 'static>(
    idx: &dyn SpatialIndex,
) -> std::sync::MutexGuard<'_, Fortree<S>> {
    idx.as_any()
        .downcast_ref::<Mutex<Fortree<S>>>()
        .expect("a FOR-tree on the expected store")
        .lock()
        .unwrap()
}

/// The FOR-tree's check, with its buffer within budget; its record count.
fn check<S: NodeStore + 'static>(idx: &dyn SpatialIndex) -> Result<u64> {
    let mut t = fortree_of::<S>(idx);
    let rep = t.check()?;
    let budget = t.config().buffer_bytes;
    assert!(
        budget == 0 || t.buffered_bytes() <= budget,
        "buffer over budget: {} > {budget}",
        t.buffered_bytes()
    );
    assert_eq!(rep.records, t.len());
    Ok(rep.records)
}

/// What the FOR-tree cases reached, summed over the cases.
#[derive(Debug, Default)]
struct Reached {
    tally: Tally,
    overflow_nodes_created: u64,
    merge_backs: u64,
    condensed_units: u64,
    max_height: u16,
}

/// One case: a random FOR-tree on a memory store or on a plain store
/// (checkpointed and reopened in the middle), driven by seed `seed`.
fn fortree_case(seed: u64, reached: &mut Reached) {
    let shape = SHAPES[(seed % SHAPES.len() as u64) as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x464f_5254);
    let cfg = config(&mut rng);
    let ops = rng.gen_range(120..260);
    let insert_share = rng.gen_range(30..41);
    let note = |reached: &mut Reached, idx: &dyn SpatialIndex, heights: u16| {
        let st = match idx.as_any().downcast_ref::<Mutex<Fortree<MemStore>>>() {
            Some(t) => t.lock().unwrap().stats(),
            None => fortree_of::<PlainStore>(idx).stats(),
        };
        reached.overflow_nodes_created += st.overflow_nodes_created;
        reached.merge_backs += st.merge_backs;
        reached.condensed_units += st.condensed_units;
        reached.max_height = reached.max_height.max(heights);
    };
    if rng.gen_bool(0.4) {
        let t = Fortree::create(MemStore::new(), cfg).unwrap();
        let idx: Box<dyn SpatialIndex> = Box::new(Mutex::new(t));
        let peak = std::cell::Cell::new(0u16);
        let verify = |idx: &dyn SpatialIndex| {
            peak.set(peak.get().max(idx.height()));
            check::<MemStore>(idx)
        };
        let d = Drive {
            seed,
            shape,
            ops,
            insert_share,
            distinct_low_bits: false,
            verify: &verify,
            reopen: None,
        };
        let (idx, tally) = drive(idx, d);
        note(reached, &*idx, peak.get());
        add(&mut reached.tally, tally);
        return;
    }
    let page = 512;
    let pcfg = PlainConfig {
        buffer_bytes: 0,
        ..PlainConfig::default()
    };
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(page, 1 << 16).unwrap());
    let store = PlainStore::create(Arc::clone(&dev), pcfg).unwrap();
    let t = Fortree::create(store, cfg).unwrap();
    let idx: Box<dyn SpatialIndex> = Box::new(Mutex::new(t));
    let mut stats_before_reopen = FortreeStats::default();
    let mut reopen = |mut idx: Box<dyn SpatialIndex>| -> Box<dyn SpatialIndex> {
        idx.checkpoint().unwrap();
        let (ont, root, height, len, rep) = {
            let mut t = fortree_of::<PlainStore>(&*idx);
            let rep = t.check().unwrap();
            let s = t.stats();
            stats_before_reopen.overflow_nodes_created += s.overflow_nodes_created;
            stats_before_reopen.merge_backs += s.merge_backs;
            stats_before_reopen.condensed_units += s.condensed_units;
            (t.ont().clone(), t.root(), t.height(), t.len(), rep)
        };
        drop(idx);
        let store = PlainStore::open(Arc::clone(&dev), pcfg).unwrap();
        let mut t = Fortree::open(store, cfg).unwrap();
        assert_eq!(t.ont(), &ont, "seed {seed}: ONT after reopen");
        assert_eq!(
            (t.root(), t.height(), t.len()),
            (root, height, len),
            "seed {seed}"
        );
        assert_eq!(t.check().unwrap(), rep, "seed {seed}: check after reopen");
        Box::new(Mutex::new(t))
    };
    let peak = std::cell::Cell::new(0u16);
    let verify = |idx: &dyn SpatialIndex| {
        peak.set(peak.get().max(idx.height()));
        check::<PlainStore>(idx)
    };
    let d = Drive {
        seed,
        shape,
        ops,
        insert_share,
        distinct_low_bits: false,
        verify: &verify,
        reopen: Some(&mut reopen),
    };
    let (idx, tally) = drive(idx, d);
    note(reached, &*idx, peak.get());
    reached.overflow_nodes_created += stats_before_reopen.overflow_nodes_created;
    reached.merge_backs += stats_before_reopen.merge_backs;
    reached.condensed_units += stats_before_reopen.condensed_units;
    add(&mut reached.tally, tally);
}

fn add(total: &mut Tally, t: Tally) {
    total.ops += t.ops;
    total.refusals += t.refusals;
    total.reopens += t.reopens;
    total.peak_records = total.peak_records.max(t.peak_records);
}

#[test]
fn fortree_random_operations_agree_with_the_oracle() {
    let mut reached = Reached::default();
    for seed in 0..review_cases() {
        fortree_case(seed, &mut reached);
    }
    eprintln!("FOR-tree review: {} cases, {reached:?}", review_cases());
    // The cases reached what they are meant to test.
    assert!(reached.overflow_nodes_created > 0, "{reached:?}");
    assert!(reached.merge_backs > 0, "{reached:?}");
    assert!(reached.condensed_units > 0, "{reached:?}");
    assert!(reached.max_height >= 3, "{reached:?}");
    assert!(
        reached.tally.refusals > 0 && reached.tally.reopens > 0,
        "{reached:?}"
    );
}

/// Thousands of records in a deep tree (M = 3, merge-backs after few
/// reads, a buffer of a few nodes), with ids sharing their low 32 bits
/// and at the provisional page ids, then deleted in another order: the
/// check holds throughout, answers match, a checkpoint and reopen in the
/// middle keeps everything.
#[test]
fn fortree_deep_tree_survives_growth_and_emptying() {
    for original in [false, true] {
        let cfg = FortreeConfig {
            min_entries: 2,
            buffer_bytes: 2000,
            flush_unit: 2,
            write_read_ratio: 0.5,
            original_root_counter: original,
            ..FortreeConfig::new(3)
        };
        let pcfg = PlainConfig {
            buffer_bytes: 0,
            ..PlainConfig::default()
        };
        let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(512, 1 << 16).unwrap());
        let mut t =
            Fortree::create(PlainStore::create(Arc::clone(&dev), pcfg).unwrap(), cfg).unwrap();
        let mut items = Vec::new();
        for i in 0..1500u64 {
            let id = match i % 3 {
                0 => i << 32,
                1 => (1 << 62) + i,
                _ => u64::MAX - i,
            };
            let x = ((i * 7919) % 97) as f64;
            let y = ((i * 104_729) % 89) as f64;
            let rect = Rect::new(x, y, x + (i % 3) as f64, y).unwrap();
            t.insert(id, rect).unwrap();
            items.push((id, rect));
            if i % 97 == 0 {
                t.check().unwrap_or_else(|e| panic!("insert {i}: {e}"));
            }
        }
        let rep = t.check().unwrap();
        // The original counter piles everything into the root's chain (the
        // seeds' failure); the default grows the tree.
        assert!(original || rep.height >= 4, "{rep:?}");
        t.checkpoint().unwrap();
        let ont = t.ont().clone();
        drop(t);
        let mut t = Fortree::open(PlainStore::open(Arc::clone(&dev), pcfg).unwrap(), cfg).unwrap();
        assert_eq!(t.ont(), &ont);
        assert_eq!(t.check().unwrap(), rep);
        let all = t.query(Rect::world(), Predicate::Intersects).unwrap();
        assert_eq!(all.hits.len(), items.len());
        // Delete in a scattered order, checking as we go.
        let n = items.len();
        for j in 0..n {
            let (id, rect) = items[(j * 7) % n];
            t.delete(id, rect)
                .unwrap_or_else(|e| panic!("original {original}: delete {j}: {e}"));
            if j % 53 == 0 {
                let rep = t.check().unwrap_or_else(|e| panic!("delete {j}: {e}"));
                assert_eq!(rep.records, (n - j - 1) as u64);
            }
        }
        assert_eq!(t.check().unwrap().records, 0);
        assert_eq!(t.height(), 0);
        t.checkpoint().unwrap();
        let mut t = Fortree::open(PlainStore::open(dev, pcfg).unwrap(), cfg).unwrap();
        assert_eq!(t.check().unwrap().records, 0);
    }
}
