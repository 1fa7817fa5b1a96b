//! Tests of the unlogged mode (`unlogged.rs`): what it writes to the log,
//! when the store enters it, and crashes at random page writes of a batch
//! run in it (into an empty tree and, for the before-images, into a tree
//! already checkpointed), which must recover the checkpoint before the
//! batch or the one after it, never a part of the batch.
//!
//! `GEOFLASH_CRASH_CASES` sets the crash cases (a quarter of it per tree
//! kind, [`crate::testenv::crash_cases`]).
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{create_on, open_on};
use super::*;
use crate::testenv::crash_cases;
use crate::geom::Rect;
use crate::index::{IndexKind, RTree, SplitKind, TreeParams};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::store::crash_harness::{crash_in_restart, crash_plan, tree_state, unwrap_faulty, State};
use crate::store::log::LogFormat;

const PAGE: usize = 1024;
const DEV_PAGES: u64 = 4096;


fn rect(i: u64, rng: &mut ChaCha8Rng) -> Rect {
    let x = f64::from(rng.gen_range(0..400u32)) * 0.25 + (i % 7) as f64 * 0.01;
    let y = f64::from(rng.gen_range(0..400u32)) * 0.25;
    Rect::new(x, y, x + 0.5, y + 0.25).unwrap()
}

fn bits(r: &Rect) -> [u64; 4] {
    r.to_bits()
}

fn params(kind: IndexKind) -> TreeParams {
    TreeParams::new(kind, 8).with_split(SplitKind::Quadratic)
}

/// A configuration whose write buffer overflows every few operations (so
/// that pages are flushed during the batch) with the default log format
/// and durability.
fn config(buffer: usize) -> EfindConfig {
    let base = EfindConfig {
        buffer_bytes: buffer,
        ..EfindConfig::default()
    };
    EfindConfig {
        log_capacity: base.min_log_capacity(PAGE) * 4,
        ..base
    }
}

fn memory_device() -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap())
}

/// Log records appended and log pages written by `n` insertions into an
/// empty, checkpointed tree, unlogged or not, and the node pages flushed
/// meanwhile; then the tree is checkpointed, reopened and checked.
fn load(unlogged: bool, n: u64) -> (u64, u64, u64) {
    let dev = memory_device();
    let cfg = config(4096);
    let mut t = RTree::create(
        create_on(dev.clone(), cfg).unwrap(),
        params(IndexKind::RStar),
    )
    .unwrap();
    t.store_mut().checkpoint().unwrap();
    assert!(t.store_mut().begin_unlogged().unwrap());
    if !unlogged {
        // The logged twin: leave the mode at once (a checkpoint ends it).
        t.store_mut().checkpoint().unwrap();
    }
    let before = t.store().stats();
    let mut rng = ChaCha8Rng::seed_from_u64(n);
    let mut expect = State::new();
    for i in 1..=n {
        let r = rect(i, &mut rng);
        t.insert(i, r).unwrap();
        expect.insert(i, bits(&r));
    }
    let after = t.store().stats();
    t.store_mut().checkpoint().unwrap();
    assert!(!t.store().is_unlogged(), "the checkpoint ends the mode");
    drop(t);
    let t = RTree::open(open_on(dev, cfg).unwrap(), params(IndexKind::RStar)).unwrap();
    t.check().unwrap();
    assert_eq!(tree_state(&t), expect);
    (
        after.log_records - before.log_records,
        after.log_pages_written - before.log_pages_written,
        after.flushed_nodes - before.flushed_nodes,
    )
}

#[test]
fn an_unlogged_load_writes_no_log_record_per_operation() {
    let n = 2000;
    let (records, log_pages, flushed) = load(true, n);
    // Pages left memory during the load (the budget is 4 KiB)...
    assert!(flushed > 100, "{flushed} nodes flushed");
    // ... with nothing in the log (an empty tree has no page: the root is
    // made in the batch, above the horizon; at most a before-image).
    assert!(records <= 1, "{records} log records for {n} insertions");
    assert!(log_pages <= 4, "{log_pages} log pages for {n} insertions");
    // The same load logged: a record per changed page of every group.
    let (records, log_pages, _) = load(false, n);
    assert!(records > 100, "{records} log records logged");
    assert!(log_pages > 20, "{log_pages} log pages logged");
}

#[test]
fn the_mode_needs_a_clean_store_and_a_log_that_protects_flushes() {
    let mut s = create_on(memory_device(), config(4096)).unwrap();
    // A created store has not been checkpointed through `checkpoint` yet.
    s.checkpoint().unwrap();
    let mut t = RTree::create(s, params(IndexKind::RTree)).unwrap();
    t.insert(1, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()).unwrap();
    // An operation since the checkpoint: not clean.
    assert!(!t.store_mut().begin_unlogged().unwrap());
    t.store_mut().checkpoint().unwrap();
    assert!(t.store_mut().begin_unlogged().unwrap());
    // A commit has no log to sync: the caller checkpoints.
    let durable = t.store().durable_op();
    t.insert(2, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()).unwrap();
    assert!(!t.store_mut().sync_committed().unwrap());
    assert_eq!(
        t.store().durable_op(),
        durable,
        "nothing durable before the checkpoint"
    );
    t.store_mut().checkpoint().unwrap();
    assert!(!t.store().is_unlogged());
    assert_eq!(t.store().durable_op(), t.store().last_op());
    // The papers' settings keep their log: per-change format, durability none.
    for cfg in [
        EfindConfig {
            log_format: LogFormat::PerChange,
            ..config(4096)
        },
        EfindConfig {
            durability: Durability::None,
            ..config(4096)
        },
    ] {
        let mut t = RTree::create(
            create_on(memory_device(), cfg).unwrap(),
            params(IndexKind::RTree),
        )
        .unwrap();
        t.store_mut().checkpoint().unwrap();
        assert!(!t.store_mut().begin_unlogged().unwrap(), "{cfg:?}");
    }
}

/// How far a run got.
#[derive(Debug, Default)]
struct Outcome {
    /// The checkpoint before the batch returned.
    before: bool,
    /// The checkpoint ending the batch returned.
    after: bool,
    err: Option<Error>,
}

/// Inserts `prefix` objects logged and checkpoints, then the rest of
/// `objects` in the unlogged mode and checkpoints, until the first error.
fn run(
    dev: Arc<dyn PageDevice>,
    kind: IndexKind,
    cfg: EfindConfig,
    objects: &[(u64, Rect)],
    prefix: usize,
) -> Outcome {
    let mut out = Outcome::default();
    let go = |out: &mut Outcome| -> Result<()> {
        let mut t = RTree::create(create_on(dev, cfg)?, params(kind))?;
        for &(id, r) in &objects[..prefix] {
            t.insert(id, r)?;
        }
        t.store_mut().checkpoint()?;
        out.before = true;
        assert!(
            t.store_mut().begin_unlogged()?,
            "a checkpointed store enters the mode"
        );
        for &(id, r) in &objects[prefix..] {
            t.insert(id, r)?;
        }
        t.store_mut().checkpoint()?;
        out.after = true;
        Ok(())
    };
    out.err = go(&mut out).err();
    out
}

fn campaign(kind: IndexKind) {
    let cases = (crash_cases() / 4).max(8);
    let (mut in_batch, mut restored, mut whole) = (0u64, 0u64, 0u64);
    // Crashes inside the batch that recovered the state after it (the
    // crash hit after the checkpoint's superblock switch).
    let mut switched = 0u64;
    for case in 0..cases {
        let seed = case.wrapping_mul(0x9e37_79b9) ^ (kind as u64) << 40;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = 150 + (case % 4) as usize * 50;
        let objects: Vec<(u64, Rect)> = (1..=n as u64).map(|i| (i, rect(i, &mut rng))).collect();
        // Half the cases load a new (empty) tree, the others add to a
        // checkpointed tree whose pages the batch rewrites.
        let prefix = if case % 2 == 0 {
            0
        } else {
            20 + (case % 5) as usize * 15
        };
        let states: [State; 2] = [
            objects[..prefix]
                .iter()
                .map(|(i, r)| (*i, bits(r)))
                .collect(),
            objects.iter().map(|(i, r)| (*i, bits(r))).collect(),
        ];
        let cfg = config(2000 + 700 * (case % 3) as usize);
        let counting = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            FaultPlan::none(),
        ));
        let o = run(counting.clone(), kind, cfg, &objects, prefix);
        assert!(o.err.is_none(), "{kind:?} case {case}: {:?}", o.err);
        let plan = crash_plan(&counting, case, seed);
        let dev = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            plan.clone(),
        ));
        let o = run(dev.clone(), kind, cfg, &objects, prefix);
        match &o.err {
            None => dev.crash_now().unwrap(),
            Some(Error::Crashed(_)) => {}
            Some(e) => panic!("{kind:?} case {case} ({plan:?}): unexpected error {e}"),
        }
        let mut durable = unwrap_faulty(dev);
        if case % 3 == 1 {
            // A second crash, during restart.
            let (after, err) = crash_in_restart(durable, seed ^ 0xabc, 20, |d| open_on(d, cfg));
            match err {
                None | Some(Error::Crashed(_)) => {}
                Some(_) if !o.before => {}
                Some(e) => panic!("{kind:?} case {case}: restart: {e}"),
            }
            durable = after;
        }
        let dev: Arc<dyn PageDevice> = Arc::new(durable);
        let store = match open_on(dev.clone(), cfg) {
            Ok(s) => s,
            Err(e) => {
                assert!(!o.before, "{kind:?} case {case} ({plan:?}): {e}");
                continue;
            }
        };
        let report = store.restart_report().cloned().unwrap_or_default();
        restored += report.pages_restored;
        let t = RTree::open(store, params(kind)).unwrap();
        t.check()
            .unwrap_or_else(|e| panic!("{kind:?} case {case} ({plan:?}): structure: {e}"));
        let got = tree_state(&t);
        if !o.before {
            // Crashed before the batch began: some prefix of the logged part.
            assert!(got.len() <= prefix, "{kind:?} case {case}");
            continue;
        }
        in_batch += u64::from(!o.after);
        if o.after {
            assert_eq!(
                got, states[1],
                "{kind:?} case {case} ({plan:?}): after the batch"
            );
            whole += 1;
        } else {
            switched += u64::from(got == states[1] && got != states[0]);
            assert!(
                got == states[0] || got == states[1],
                "{kind:?} case {case} ({plan:?}): {} objects recovered, neither the {prefix} before the batch nor the {n} after it (report {report:?})",
                got.len()
            );
        }
        // The recovered store keeps working, logged again.
        let mut t = t;
        t.insert(1_000_000, Rect::new(1.0, 1.0, 2.0, 2.0).unwrap())
            .unwrap();
        t.store_mut().checkpoint().unwrap();
    }
    println!(
        "unlogged crash campaign {kind:?}: {cases} cases, {in_batch} crashed inside the batch or its checkpoint ({switched} of them after its switch: the whole batch), {whole} after it, {restored} pages restored from before-images"
    );
    assert!(in_batch > 0, "no crash landed inside a batch");
}

tests_for!(campaign:
    a_crash_in_an_unlogged_batch_recovers_the_checkpoint_before_or_after_it_rtree => IndexKind::RTree,
    a_crash_in_an_unlogged_batch_recovers_the_checkpoint_before_or_after_it_rstar => IndexKind::RStar,
);
