//! Crash tests of the eFIND store on `FaultyDevice`: seeded random operation
//! sequences (inserts, deletes, updates — half of them small moves, done in
//! place by the R-tree and R*-tree — checkpoints) on the R-tree
//! (quadratic split), the R*-tree and the Hilbert R-tree, with small buffers
//! and a small log so that flushes, compactions, forced flushes and temporal
//! control all happen; crashes at seeded random page writes (unsynced writes
//! kept, dropped or torn — mid-flush torn pages included) or during a sync,
//! and for some cases a second crash during restart itself. After recovery
//! the tree must pass its structural checks and hold exactly the state after
//! a prefix of the operations that includes every acknowledged one (an
//! oracle replays the sequence; the harness derives what was acknowledged
//! from the calls that returned, [`AckOracle`]).
//!
//! `GEOFLASH_CRASH_CASES` sets the number of cases per tree kind (default 200,
//! [`crate::testenv::crash_cases`]; `make test-long` runs 10,000 per kind);
//! each campaign prints a [`CrashSummary`] line.
use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{create_on, open_on};
use super::*;
use crate::testenv::crash_cases;
use crate::geom::{HilbertDomain, Rect};
use crate::index::{IndexKind, RTree, SplitKind, TreeParams};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::store::crash_harness::{
    batch_switch, check_op_frames, crash_in_restart, crash_plan, device_bytes, discard_op_frame,
    stage_op_frame, tree_state, unwrap_faulty, AckOracle, CrashSummary, State,
};
use crate::store::log::LogFormat;

const PAGE: usize = 1024;
const DEV_PAGES: u64 = 4096;

#[derive(Debug, Clone, Copy)]
enum Op {
    Insert(u64, Rect),
    Delete(u64, Rect),
    Update(u64, Rect, Rect),
    Checkpoint,
}

fn rect(rng: &mut ChaCha8Rng) -> Rect {
    let x = f64::from(rng.gen_range(0..200u32)) * 0.25;
    let y = f64::from(rng.gen_range(0..200u32)) * 0.25;
    let w = f64::from(rng.gen_range(0..8u32)) * 0.25;
    let h = f64::from(rng.gen_range(0..8u32)) * 0.25;
    Rect::new(x, y, x + w, y + h).unwrap()
}

/// A random script: inserts, deletes and updates of live objects, and a few checkpoints.
fn script(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut live: Vec<(u64, Rect)> = Vec::new();
    let mut next = 1u64;
    let mut ops = Vec::with_capacity(len);
    while ops.len() < len {
        let roll = rng.gen_range(0..100u32);
        if roll < 2 {
            ops.push(Op::Checkpoint);
        } else if roll < 62 || live.is_empty() {
            let r = rect(&mut rng);
            live.push((next, r));
            ops.push(Op::Insert(next, r));
            next += 1;
        } else if roll < 85 {
            let i = rng.gen_range(0..live.len());
            let (id, r) = live.swap_remove(i);
            ops.push(Op::Delete(id, r));
        } else {
            let i = rng.gen_range(0..live.len());
            let (id, old) = live[i];
            // Half the updates are small moves, mostly inside the leaf's
            // rectangle: the R-tree's update in place (one leaf modify).
            let new = if rng.gen_bool(0.5) {
                let dx = f64::from(rng.gen_range(0..3u32)) * 0.25 - 0.25;
                let dy = f64::from(rng.gen_range(0..3u32)) * 0.25 - 0.25;
                let (x, y) = ((old.min_x() + dx).max(0.0), (old.min_y() + dy).max(0.0));
                Rect::new(
                    x,
                    y,
                    x + old.max_x() - old.min_x(),
                    y + old.max_y() - old.min_y(),
                )
                .unwrap()
            } else {
                rect(&mut rng)
            };
            live[i].1 = new;
            ops.push(Op::Update(id, old, new));
        }
    }
    ops
}


fn bits(r: &Rect) -> [u64; 4] {
    r.to_bits()
}

/// The data operations done before each checkpoint of `ops`, and 0: the
/// prefixes after which the front end's frames start over.
fn checkpoint_bounds(ops: &[Op]) -> Vec<usize> {
    let mut done = 0;
    let mut out = vec![0];
    for op in ops {
        match op {
            Op::Checkpoint => out.push(done),
            _ => done += 1,
        }
    }
    out
}

/// The oracle's state after each prefix of the data operations (checkpoints
/// excluded): `states[k]` after the first `k`.
fn prefix_states(ops: &[Op]) -> Vec<State> {
    let mut s = State::new();
    let mut out = vec![s.clone()];
    for op in ops {
        match op {
            Op::Insert(id, r) => {
                s.insert(*id, bits(r));
            }
            Op::Delete(id, _) => {
                s.remove(id);
            }
            Op::Update(id, _, new) => {
                s.insert(*id, bits(new));
            }
            Op::Checkpoint => continue,
        }
        out.push(s.clone());
    }
    out
}

fn params(kind: IndexKind) -> TreeParams {
    let p = TreeParams::new(kind, 8).with_split(SplitKind::Quadratic);
    if kind == IndexKind::Hilbert {
        p.with_hilbert_domain(
            HilbertDomain::new(Rect::new(0.0, 0.0, 52.0, 52.0).unwrap(), 10).unwrap(),
        )
    } else {
        p
    }
}

fn config(kind: IndexKind, case: u64) -> EfindConfig {
    let tc = TemporalControl {
        rq_capacity: 4,
        wq_capacity: 3,
        seq_distance: 2,
        stride_distance: 6,
    };
    let base = EfindConfig {
        buffer_bytes: 2500 + 500 * (case % 4) as usize,
        flush_unit: 1 + (case % 3) as usize,
        policy: [FlushPolicy::Mh, FlushPolicy::M, FlushPolicy::Mha][(case % 3) as usize],
        temporal_control: Some(tc),
        with_payload: kind == IndexKind::Hilbert,
        durability: match case % 5 {
            // A batch (`Index::batch` with `BatchDurability::AtEnd`): the
            // run switches from `sync` to this mode and back (see `run`).
            2 if case % 10 == 7 => Durability::UNBOUNDED_GROUP,
            4 => Durability::Group {
                ops: 3,
                millis: 1_000_000,
            },
            // Larger groups: the compact format logs each as one set of
            // net page changes.
            3 => Durability::Group {
                ops: 8,
                millis: 1_000_000,
            },
            _ => Durability::Sync,
        },
        ..EfindConfig::default()
    };
    // The three log formats; some first-image and compact cases with a
    // larger log, whose long epochs flush pages again after their image
    // (torn writes of pages whose image is older than their last flush).
    let format = match case % 7 {
        0 | 1 => LogFormat::PerChange,
        2 | 3 => LogFormat::FirstImage,
        _ => LogFormat::Compact,
    };
    let longer = if format.first_image() && case % 6 == 5 {
        6
    } else {
        1
    };
    EfindConfig {
        log_capacity: base.min_log_capacity(PAGE) * longer,
        log_format: format,
        ..base
    }
}

/// What a run did before it stopped.
struct Outcome {
    /// Data operations acknowledged (durable when their call returned or later).
    acked: usize,
    /// Data operations attempted (the last one may have been cut by the crash).
    attempted: usize,
    /// The error that stopped the run, if any.
    err: Option<Error>,
}

/// Runs `ops` on a fresh store on `dev` until the first error.
fn run(dev: Arc<dyn PageDevice>, kind: IndexKind, cfg: EfindConfig, ops: &[Op]) -> Outcome {
    let mut out = Outcome {
        acked: 0,
        attempted: 0,
        err: None,
    };
    let store = match create_on(dev, cfg) {
        Ok(s) => s,
        Err(e) => {
            out.err = Some(e);
            return out;
        }
    };
    let mut t = RTree::create(store, params(kind)).unwrap();
    if cfg.log_format == LogFormat::Compact && cfg.flush_unit == 2 {
        // Groups of more than 6 changes skip the memo of logged entries
        // (entry references): both paths, and the memo emptied between them.
        t.store_mut().set_memo_group_changes(6);
    }
    let mut acks = AckOracle::new(cfg.durability);
    for (i, op) in ops.iter().enumerate() {
        // A batch in the middle third of the run: `sync` before and after it.
        if let Some(mode) = batch_switch(cfg.durability, i, ops.len()) {
            if let Err(e) = t.store_mut().set_durability(mode) {
                out.err = Some(e);
                break;
            }
            acks.set_durability(mode);
        }
        if !matches!(op, Op::Checkpoint) {
            stage_op_frame(t.store_mut(), out.attempted + 1);
        }
        let r = match op {
            Op::Insert(id, r) => t.insert(*id, *r),
            Op::Delete(id, r) => t.delete(*id, *r),
            Op::Update(id, old, new) => t.update(*id, *old, *new),
            Op::Checkpoint => t.store_mut().checkpoint(),
        };
        discard_op_frame(t.store_mut());
        if !matches!(op, Op::Checkpoint) {
            out.attempted += 1;
        }
        if let Err(e) = r {
            out.err = Some(e);
            break;
        }
        let seen = match op {
            Op::Checkpoint => acks.checkpointed(t.store()),
            _ => acks.completed(t.store()),
        };
        seen.unwrap_or_else(|e| panic!("{kind:?} {cfg:?}: {e}"));
        out.acked = acks.acknowledged();
    }
    out
}

/// Coverage counters of a campaign.
#[derive(Debug, Default)]
struct Seen {
    pages_restored: u64,
    incomplete: u64,
    lost_unacked: u64,
    restart_crashes: u64,
    compactions: u64,
    forced_flushes: u64,
    crashed_in_run: u64,
    acknowledged: u64,
    /// Cases whose reader had changes to replay (and matched the writer).
    read_replays: u64,
}

fn campaign(kind: IndexKind) {
    let mut seen = Seen::default();
    for case in 0..crash_cases() {
        crash_case(kind, case, &mut seen);
    }
    CrashSummary {
        cases: crash_cases(),
        crashed_in_run: seen.crashed_in_run,
        crashed_in_restart: seen.restart_crashes,
        pages_restored: seen.pages_restored,
        acknowledged: seen.acknowledged,
    }
    .print(&format!("eFIND {kind:?}"));
    println!("eFIND {kind:?} coverage: {seen:?}");
    if crash_cases() >= 60 {
        assert!(
            seen.pages_restored > 0,
            "{kind:?}: no torn-page repair: {seen:?}"
        );
        assert!(seen.incomplete > 0 || seen.lost_unacked > 0, "{seen:?}");
        assert!(seen.restart_crashes > 0, "{seen:?}");
        assert!(seen.crashed_in_run > 0, "{seen:?}");
        assert!(seen.read_replays > 0, "no reader replayed a log: {seen:?}");
    }
}

/// One case of [`campaign`]: a faultless run, the same run crashing,
/// maybe a crash during restart, then recovery checked against the oracle
/// and further operations on the recovered store.
fn crash_case(kind: IndexKind, case: u64, seen: &mut Seen) {
    {
        let seed = case.wrapping_mul(0x9e37_79b9) ^ (kind as u64) << 40;
        let cfg = config(kind, case);
        let len = 60 + (case % 5) as usize * 20;
        let ops = script(seed, len);
        let states = prefix_states(&ops);
        // 1. Count the writes and syncs of a faultless run.
        let counting = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            FaultPlan::none(),
        ));
        let o = run(counting.clone(), kind, cfg, &ops);
        assert!(o.err.is_none(), "{kind:?} case {case}: {:?}", o.err);
        // 2. The same run, crashing.
        let plan = crash_plan(&counting, case, seed);
        let dev = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            plan.clone(),
        ));
        let o = run(dev.clone(), kind, cfg, &ops);
        match &o.err {
            None => dev.crash_now().unwrap(),
            Some(Error::Crashed(_)) => seen.crashed_in_run += 1,
            Some(e) => panic!("{kind:?} case {case} ({plan:?}): unexpected error {e}"),
        }
        let mut durable = unwrap_faulty(dev);
        // 3. Sometimes crash during restart too.
        if case % 3 == 1 {
            let (after, err) = crash_in_restart(durable, seed ^ 0xabc, 40, |d| open_on(d, cfg));
            match err {
                None => {}
                Some(Error::Crashed(_)) => seen.restart_crashes += 1,
                Some(_) if o.attempted == 0 => {}
                Some(e) => panic!("{kind:?} case {case}: restart before the crash: {e}"),
            }
            durable = after;
        }
        // 4. Recover and compare with the oracle; first a reader, which
        //    replays in memory and must see what the writer's restart will.
        let dev: Arc<dyn PageDevice> = Arc::new(durable);
        let image = device_bytes(&*dev);
        let read = cfg
            .log_placement(&dev, None)
            .and_then(|log| EfindStore::open_read_only(dev.clone(), log, cfg))
            .ok()
            .map(|s| tree_state(&RTree::open(s, params(kind)).unwrap()));
        assert!(
            device_bytes(&*dev) == image,
            "{kind:?} case {case}: a reader wrote the device"
        );
        let store = match open_on(dev.clone(), cfg) {
            Ok(s) => s,
            Err(e) => {
                // Only a crash during creation may leave no store at all.
                assert_eq!(o.acked, 0, "{kind:?} case {case} ({plan:?}): {e}");
                assert!(o.attempted <= 1, "{kind:?} case {case}: {e}");
                return;
            }
        };
        let report = store.restart_report().cloned().unwrap_or_default();
        // Restart leaves the log as an operation does: with room for the next.
        let fill = store.log.as_ref().map_or(0.0, Log::fill_ratio);
        assert!(
            fill <= 0.75 || store.wb.is_empty(),
            "{kind:?} case {case}: the log is {fill:.2} full after restart"
        );
        seen.pages_restored += report.pages_restored;
        seen.incomplete += report.incomplete_ops;
        let t = RTree::open(store, params(kind)).unwrap();
        let rep = t
            .check()
            .unwrap_or_else(|e| panic!("{kind:?} case {case} ({plan:?}): structure: {e}"));
        let got = tree_state(&t);
        assert_eq!(rep.records, got.len() as u64, "{kind:?} case {case}");
        assert_eq!(
            read.as_ref(),
            Some(&got),
            "{kind:?} case {case} ({plan:?}): the reader's replay"
        );
        seen.read_replays += u64::from(report.changes_replayed > 0);
        let hi = o.attempted.min(states.len() - 1);
        let k = (o.acked..=hi).find(|&k| states[k] == got).unwrap_or_else(|| {
            panic!(
                "{kind:?} case {case} ({plan:?}): recovered {} objects, no prefix of {}..={hi} operations matches (report {report:?})",
                got.len(),
                o.acked
            )
        });
        if k < o.attempted {
            seen.lost_unacked += 1;
        }
        // The front end's frames came back exactly with their operations.
        let mut t = t;
        let recovered: Vec<usize> = (o.acked..=hi).filter(|&k| states[k] == got).collect();
        check_op_frames(t.store_mut(), &recovered, &checkpoint_bounds(&ops))
            .unwrap_or_else(|e| panic!("{kind:?} case {case} ({plan:?}): {e}"));
        seen.acknowledged += o.acked as u64;
        // 5. The recovered store keeps working and survives a clean reopen.
        let mut expect = got;
        let extra = Rect::new(1.0, 1.0, 2.0, 2.0).unwrap();
        for i in 0..12u64 {
            t.insert(1_000_000 + i, extra).unwrap_or_else(|e| {
                panic!("{kind:?} case {case} ({cfg:?}): insert {i} after recovery: {e}")
            });
            expect.insert(1_000_000 + i, bits(&extra));
        }
        if let Some((&id, _)) = expect.iter().next() {
            let r = states[k]
                .get(&id)
                .map(|b| {
                    Rect::new(
                        f64::from_bits(b[0]),
                        f64::from_bits(b[1]),
                        f64::from_bits(b[2]),
                        f64::from_bits(b[3]),
                    )
                    .unwrap()
                })
                .unwrap_or(extra);
            t.delete(id, r).unwrap();
            expect.remove(&id);
        }
        let es = t.store().efind_stats();
        seen.compactions += es.compactions;
        seen.forced_flushes += es.forced_flushes;
        t.store_mut().checkpoint().unwrap();
        drop(t);
        let t = RTree::open(open_on(dev, cfg).unwrap(), params(kind)).unwrap();
        t.check().unwrap();
        assert_eq!(tree_state(&t), expect, "{kind:?} case {case}");
    }
}

/// The case of the Hilbert campaign `make torture` found failing: the
/// restart left the log fuller than any state between operations (18,696
/// of 24,600 bytes, the write buffer holding the pages of its records),
/// and the third insert after it needed 4,297 bytes that no compaction
/// could free: `DeviceFull`, and the store refused every change after.
#[test]
fn a_recovered_store_makes_room_in_its_log() {
    crash_case(IndexKind::Hilbert, 4923, &mut Seen::default());
}

/// A failed operation is never durable and an acknowledged one always is
/// (durability `sync`), whatever write, sync or page allocation fails: the
/// flushes and log upkeep a commit leaves owed run when the next operation
/// begins, so their error fails that operation, which has changed nothing
/// yet; and the log reserves the room of its next writes then
/// (`Log::reserve_ahead`), so a full device never cuts a COMMIT's own write
/// short. `make torture`'s ENOSPC campaign found both: a flush after a
/// synced COMMIT ran out of space, or the write of the COMMIT's batch did,
/// the insert said it failed, and `recover` replayed it. Each case fails
/// the store at a seeded point of a faultless run's writes, syncs or
/// distinct pages (a full device writes short), then the power fails
/// (unsynced writes dropped) or, for a full device, the process exits
/// (every completed write kept), and recovery must give exactly the
/// operations that returned `Ok`. (A failed write or sync whose data
/// reached the device is the one case left ambiguous: only a power loss
/// decides it, see docs/reliability.md.)
#[test]
fn a_failed_operation_is_never_durable_and_an_acknowledged_one_always_is() {
    let mut failed_after_commits = 0;
    for kind in [IndexKind::RTree, IndexKind::RStar] {
        for case in 0..crash_cases() {
            let seed = case.wrapping_mul(0x51_7cc1_b727) ^ (kind as u64) << 40;
            let cfg = EfindConfig {
                durability: Durability::Sync,
                ..config(kind, case)
            };
            let ops = script(seed, 80);
            let states = prefix_states(&ops);
            let counting = Arc::new(FaultyDevice::new(
                MemDevice::new(PAGE, DEV_PAGES).unwrap(),
                FaultPlan::none(),
            ));
            assert!(run(counting.clone(), kind, cfg, &ops).err.is_none());
            let writes = counting.writes_seen();
            let syncs = counting.stats().io.syncs;
            let plan = FaultPlan {
                fail_write: (case % 4 == 0).then(|| 1 + seed % writes),
                fail_sync: (case % 4 == 1).then(|| 1 + seed % syncs),
                max_distinct_pages: (case % 4 >= 2).then(|| 1 + seed % writes),
                ..FaultPlan::none()
            };
            let dev = Arc::new(FaultyDevice::new(
                MemDevice::new(PAGE, DEV_PAGES).unwrap(),
                plan.clone(),
            ));
            let o = run(dev.clone(), kind, cfg, &ops);
            failed_after_commits += usize::from(o.err.is_some() && o.acked > 0);
            let dev: Arc<dyn PageDevice> = Arc::new(if case % 4 == 3 {
                let Ok(dev) = Arc::try_unwrap(dev) else {
                    panic!("the store still holds the device")
                };
                dev.into_inner_after_exit().unwrap()
            } else {
                unwrap_faulty(dev)
            });
            let Ok(store) = open_on(dev, cfg) else {
                assert_eq!(o.acked, 0, "{kind:?} case {case} ({plan:?}): {:?}", o.err);
                continue;
            };
            let got = tree_state(&RTree::open(store, params(kind)).unwrap());
            assert!(
                got == states[o.acked],
                "{kind:?} case {case} ({plan:?}): {} objects recovered, {} after the {} operations that returned Ok (error: {:?})",
                got.len(),
                states[o.acked].len(),
                o.acked,
                o.err
            );
        }
    }
    assert!(failed_after_commits > 0, "no run failed after a commit");
}

tests_for!(campaign:
    crashes_recover_a_prefix_with_every_acknowledged_op_rtree => IndexKind::RTree,
    crashes_recover_a_prefix_with_every_acknowledged_op_rstar => IndexKind::RStar,
    crashes_recover_a_prefix_with_every_acknowledged_op_hilbert => IndexKind::Hilbert,
);

/// The R*-tree's campaign with every region of the log too long to hold:
/// compaction and restart read it again for each pass
/// (`store::log::passes`), and recover the same.
#[test]
fn crashes_recover_a_prefix_with_every_acknowledged_op_from_a_streamed_log() {
    crate::store::log::passes::hold_at_most(0, || campaign(IndexKind::RStar));
}

#[test]
fn the_faultless_script_compacts_and_forces_flushes() {
    // The configurations of the campaigns do exercise the log paths.
    let kind = IndexKind::RStar;
    let cfg = config(kind, 0);
    let dev = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
    let mut t = RTree::create(create_on(dev, cfg).unwrap(), params(kind)).unwrap();
    for op in script(7, 300) {
        match op {
            Op::Insert(id, r) => t.insert(id, r).unwrap(),
            Op::Delete(id, r) => t.delete(id, r).unwrap(),
            Op::Update(id, a, b) => t.update(id, a, b).unwrap(),
            Op::Checkpoint => t.store_mut().checkpoint().unwrap(),
        }
    }
    // The script's small moves take the R*-tree's update in place.
    assert!(t.counters().updates_in_place > 0, "{:?}", t.counters());
    let e = t.store().efind_stats();
    let l = t.store().log_stats();
    assert!(e.compactions > 0 && l.compactions > 0, "{e:?} {l:?}");
    assert!(e.page_images > 0, "{e:?}");
    assert!(t.store().stats().flushes > 0);
    assert!(e.temporal_control.write_choices() > 0, "{e:?}");
    // The store's counters carry the log and eFIND columns into the metrics record.
    let st = t.store().stats();
    assert_eq!((st.log_records, st.log_bytes), (l.records, l.bytes));
    assert_eq!((st.log_syncs, st.compactions), (l.syncs, e.compactions));
    assert_eq!(
        (st.page_images, st.temporal_control),
        (e.page_images, e.temporal_control)
    );
    let mut m = crate::metrics::Stats::new("build");
    m.absorb_store(&st);
    assert_eq!(
        (m.log_records, m.page_images, m.compactions),
        (l.records, e.page_images, e.compactions)
    );
    assert!(m.log_pages_written > 0 && m.log_syncs > 0);
}

/// Pages whose newest PAGE_IMAGE in the log is followed by at least two
/// FLUSH records covering them: flushed again in the epoch without an image.
fn reflushed_without_image(store: &EfindStore) -> Vec<PageId> {
    let (first, pages) = store.log_range();
    let reader = crate::store::log::LogReader::open(
        store.log_device().clone(),
        first,
        pages,
        store.index_id,
    )
    .unwrap();
    let mut flushes_after_image: BTreeMap<PageId, u32> = BTreeMap::new();
    for r in reader.oldest_first() {
        match r.kind {
            RecordKind::PageImage => {
                flushes_after_image.insert(r.page, 0);
            }
            RecordKind::Flush => {
                for p in r.flushed_pages().unwrap() {
                    if let Some(n) = flushes_after_image.get_mut(&p) {
                        *n += 1;
                    }
                }
            }
            _ => {}
        }
    }
    flushes_after_image
        .into_iter()
        .filter(|&(_, n)| n >= 2)
        .map(|(p, _)| p)
        .collect()
}

/// The first-image protection: a page written again in place after its
/// image (no image at that flush) and torn by it is rebuilt from the older
/// image and the records that followed, although a FLUSH record newer than
/// the image says the page was written. The log of the same run recovered
/// with the per-change rule drops that image (so this test would fail
/// without the first-image restart rule).
/// Small buffers flushed two nodes at a time, `Sync`, a log that keeps the
/// first image of each page changed in an epoch.
fn first_image_config() -> EfindConfig {
    EfindConfig {
        buffer_bytes: 3000,
        flush_unit: 2,
        durability: Durability::Sync,
        temporal_control: None,
        log_capacity: 1 << 20,
        log_format: LogFormat::FirstImage,
        ..EfindConfig::default()
    }
}

/// Restart on a hybrid device with a placement writes each page image of
/// the log back to the tier of its level, and the nodes flushed afterwards
/// go to theirs: the store runs on a one-tier device and is dropped
/// without a checkpoint (its log holds the images of the pages changed in
/// the epoch), then opens on a hybrid whose slow tier is that device and
/// whose fast tier is empty.
#[test]
fn restored_pages_are_hinted_by_their_level() {
    use crate::storage::hybrid::HybridDevice;
    use crate::storage::Tier;
    use crate::store::placement::Placement;
    let kind = IndexKind::RStar;
    let cfg = first_image_config();
    let placement = Placement::SHR_TREE;
    let mem = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
    let dev: Arc<dyn PageDevice> = mem.clone();
    let mut t = RTree::create(create_on(dev.clone(), cfg).unwrap(), params(kind)).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    for id in 1..=400u64 {
        t.insert(id, rect(&mut rng)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    for id in 401..=600u64 {
        t.insert(id, rect(&mut rng)).unwrap();
    }
    let (first, pages) = t.store().log_range();
    let index_id = t.store().index_id;
    drop(t);
    let images = crate::store::crash_harness::logged_image_levels(dev, first, pages, index_id);
    assert!(images.values().any(|&l| l > 0) && images.values().any(|&l| l == 0));
    let fast = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
    let hybrid: Arc<dyn PageDevice> = Arc::new(HybridDevice::new(fast, mem).unwrap());
    let log = cfg.log_placement(&hybrid, None).unwrap();
    let store = EfindStore::open_with_placement(hybrid.clone(), log, cfg, placement).unwrap();
    assert_eq!(store.placement(), placement);
    assert_eq!(
        store.restart_report().unwrap().pages_restored,
        images.len() as u64
    );
    for (&page, &level) in &images {
        assert_eq!(
            hybrid.page_tier(page),
            placement.tier(level),
            "page {page} at level {level}"
        );
    }
    // After more changes and a flush: no leaf on the fast tier, internal
    // nodes there (those restored or written since the restart; the others
    // stay on the slow tier of the fresh map).
    let mut t = RTree::open(store, params(kind)).unwrap();
    for id in 601..=700u64 {
        t.insert(id, rect(&mut rng)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    t.check().unwrap();
    let mut stack: Vec<PageId> = t.store().meta().root.into_iter().collect();
    let mut fast_nodes = 0;
    while let Some(p) = stack.pop() {
        let n = t.store().get(p).unwrap();
        if n.level > 0 {
            stack.extend(n.entries.iter().map(|e| e.key));
        }
        let tier = hybrid.page_tier(p);
        if n.level == 0 {
            assert_eq!(tier, Some(Tier::Slow), "leaf {p}");
        }
        fast_nodes += usize::from(tier == Some(Tier::Fast));
    }
    assert!(fast_nodes > 0);
}

#[test]
fn a_torn_page_imaged_at_an_earlier_flush_of_the_epoch_is_rebuilt() {
    let kind = IndexKind::RStar;
    let cfg = first_image_config();
    let mem = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
    let dev: Arc<dyn PageDevice> = mem.clone();
    let mut t = RTree::create(create_on(dev.clone(), cfg).unwrap(), params(kind)).unwrap();
    let mut expect = State::new();
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    // Pages created in an epoch have a NEW record and are never imaged in
    // it: build a tree, start a new epoch with a checkpoint, and change the
    // tree's existing pages in that epoch.
    for id in 1..=400u64 {
        let r = rect(&mut rng);
        t.insert(id, r).unwrap();
        expect.insert(id, bits(&r));
    }
    t.store_mut().checkpoint().unwrap();
    let compactions = t.store().log_stats().compactions;
    for id in 401..=600u64 {
        let r = rect(&mut rng);
        t.insert(id, r).unwrap();
        expect.insert(id, bits(&r));
    }
    let e = t.store().efind_stats();
    assert_eq!(
        t.store().log_stats().compactions,
        compactions,
        "one epoch: {e:?}"
    );
    let victims = reflushed_without_image(t.store());
    assert!(
        !victims.is_empty(),
        "no page was flushed twice after its image"
    );
    // Fewer images than page writes: the later flushes wrote none.
    assert!(e.page_images < t.store().stats().flushed_nodes, "{e:?}");
    // The per-change rule would drop the victims' images (their FLUSH is newer).
    let (first, pages) = t.store().log_range();
    let reader =
        crate::store::log::LogReader::open(dev.clone(), first, pages, t.store().index_id).unwrap();
    let old_rule = crate::store::log::recover(reader.into_records());
    for v in &victims {
        assert!(
            !old_rule
                .records
                .all()
                .iter()
                .any(|r| r.kind == RecordKind::PageImage && r.page == *v),
            "page {v}"
        );
    }
    drop(t);
    // Tear every victim: its first half as written, the rest garbage.
    for &v in &victims {
        let mut buf = vec![0u8; PAGE];
        mem.read(v, &mut buf).unwrap();
        for b in buf.iter_mut().skip(PAGE / 2) {
            *b = 0xA5;
        }
        mem.write(v, &buf).unwrap();
    }
    mem.sync().unwrap();
    let store = open_on(dev.clone(), cfg).unwrap();
    let report = store.restart_report().cloned().unwrap();
    assert!(
        report.pages_restored >= victims.len() as u64,
        "{report:?} {victims:?}"
    );
    let t = RTree::open(store, params(kind)).unwrap();
    t.check().unwrap();
    assert_eq!(tree_state(&t), expect);
}

/// Issue 44, item 7: with durability `none` a killed process loses the log's
/// buffered tail but every page it wrote stays (the kernel has it). Node
/// pages must not carry LSNs of records that were still buffered, or
/// restart takes the lost tail for lost durable records and refuses the
/// index. Each case runs a prefix of a script on an in-memory device,
/// drops the store without closing it (the kill), reopens, and expects the
/// state after some prefix of the operations run.
#[test]
fn a_killed_process_with_durability_none_recovers_by_itself() {
    let cases = crash_cases().min(120);
    for case in 0..cases {
        let kind = [IndexKind::RTree, IndexKind::RStar, IndexKind::Hilbert][(case % 3) as usize];
        let cfg = EfindConfig {
            durability: Durability::None,
            ..config(kind, case)
        };
        let seed = case.wrapping_mul(0x51_7cc1) ^ 0x77;
        let ops = script(seed, 80 + (case % 4) as usize * 40);
        let states = prefix_states(&ops);
        let stop = 1 + (seed as usize % ops.len());
        let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
        let mut t = RTree::create(create_on(dev.clone(), cfg).unwrap(), params(kind)).unwrap();
        let mut done = 0;
        for op in &ops[..stop] {
            match op {
                Op::Insert(id, r) => t.insert(*id, *r).unwrap(),
                Op::Delete(id, r) => t.delete(*id, *r).unwrap(),
                Op::Update(id, old, new) => t.update(*id, *old, *new).unwrap(),
                Op::Checkpoint => {
                    t.store_mut().checkpoint().unwrap();
                    continue;
                }
            }
            done += 1;
        }
        drop(t); // killed: nothing closed, the log's buffer is gone
        let store = open_on(dev, cfg)
            .unwrap_or_else(|e| panic!("{kind:?} case {case} ({cfg:?}), killed after {done}: {e}"));
        let t = RTree::open(store, params(kind)).unwrap();
        t.check()
            .unwrap_or_else(|e| panic!("{kind:?} case {case}: structure: {e}"));
        let got = tree_state(&t);
        assert!(
            states[..=done.min(states.len() - 1)].contains(&got),
            "{kind:?} case {case}: recovered {} objects, no prefix of {done} operations matches",
            got.len()
        );
    }
}
