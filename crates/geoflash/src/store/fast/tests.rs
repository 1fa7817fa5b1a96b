//! FastStore tests: RetrieveNode, flushing, the log protocol, and oracle
//! property tests of the R-tree family on `FastStore` with small buffers and
//! small logs (constant flushing and compaction). The operation generator
//! and the oracle runner are generic over the store (`run_oracle`) and are
//! shared with the crash tests.
use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::cache::PolicyKind;
use crate::geom::{HilbertDomain, Rect};
use crate::index::tests::{ids, rect_strategy};
use crate::index::{IndexKind, Predicate, RTree, SplitKind, TreeParams};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::store::plain::{PlainConfig, PlainStore};

pub(crate) const PAGE: usize = 512;

pub(crate) fn r(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
    Rect::new(x0, y0, x1, y1).unwrap()
}

/// The three trees of the R-tree family under test.
pub(crate) const KINDS: [IndexKind; 3] = [IndexKind::RTree, IndexKind::RStar, IndexKind::Hilbert];

/// Tree parameters for `kind` on `page`-byte pages (R-tree: quadratic split).
pub(crate) fn params(kind: IndexKind, page: usize) -> TreeParams {
    match kind {
        IndexKind::Hilbert => {
            let max = crate::page::max_entries(page, true);
            TreeParams::new(kind, max)
                .with_hilbert_domain(HilbertDomain::new(r(0.0, 0.0, 25.0, 25.0), 8).unwrap())
        }
        IndexKind::RTree => TreeParams::for_page(kind, page)
            .unwrap()
            .with_split(SplitKind::Quadratic),
        _ => TreeParams::for_page(kind, page).unwrap(),
    }
}

pub(crate) fn ids_in<S: NodeStore>(t: &RTree<S>, w: Rect) -> BTreeSet<u64> {
    ids(&t.query(w, Predicate::Intersects).unwrap())
}

/// Everything in the tree.
pub(crate) fn all_ids<S: NodeStore>(t: &RTree<S>) -> BTreeSet<u64> {
    ids_in(t, r(-100.0, -100.0, 100.0, 100.0))
}

/// Builds the same R-tree of 6000 small rectangles, inserted in a scattered
/// order, on a plain store with a 64 KiB LRU node buffer and on `other`
/// (named `name` in messages), checkpoints both, and checks that `other`
/// wrote fewer node pages than the plain store and holds the same objects.
/// Returns `other`'s tree.
pub(crate) fn assert_fewer_writes_than_plain<S: NodeStore>(
    name: &str,
    page: usize,
    p: TreeParams,
    other: S,
) -> RTree<S> {
    let pcfg = PlainConfig {
        buffer_bytes: 64 * 1024,
        policy: PolicyKind::Lru,
        with_payload: false,
    };
    let mut a = RTree::create(PlainStore::create_in_memory(page, pcfg).unwrap(), p).unwrap();
    let mut b = RTree::create(other, p).unwrap();
    for i in 0..6000u64 {
        let x = ((i * 7919) % 1000) as f64 / 40.0;
        let y = ((i * 104_729) % 997) as f64 / 40.0;
        let rect = r(x, y, x + 0.1, y + 0.1);
        a.insert(i + 1, rect).unwrap();
        b.insert(i + 1, rect).unwrap();
    }
    a.store_mut().checkpoint().unwrap();
    b.store_mut().checkpoint().unwrap();
    let (sa, sb) = (a.store().stats(), b.store().stats());
    println!("plain: {sa:?}\n{name}: {sb:?}");
    assert!(sb.node_writes < sa.node_writes, "plain {sa:?} {name} {sb:?}");
    assert_eq!(all_ids(&a), all_ids(&b));
    b
}

/// Inserts `n` small squares along the diagonal (keys from `first_key`)
/// into `t` and checks that the store flushed more than five times and
/// that each flush was one write batch on `nodes`, the node device (whose
/// counters were `before` when the inserts began), together writing
/// exactly the store's node writes. Returns the store's counters.
pub(crate) fn assert_one_batch_per_flush<S: NodeStore>(
    t: &mut RTree<S>,
    nodes: &dyn PageDevice,
    before: crate::storage::IoCounters,
    n: u64,
    first_key: u64,
) -> crate::store::StoreStats {
    for i in 0..n {
        let x = ((i * 7919) % 100) as f64 / 5.0;
        t.insert(first_key + i, r(x, x, x + 1.0, x + 1.0)).unwrap();
    }
    let st = t.store().stats();
    assert!(st.flushes > 5, "{st:?}");
    let io = nodes.stats().io;
    assert_eq!(io.write_batches, before.write_batches + st.flushes);
    assert_eq!(io.pages_written, before.pages_written + st.node_writes);
    st
}

/// One step of a random workload.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Insert(Rect),
    Delete(usize),
    Update(usize, Rect),
    Query(Rect),
}

pub(crate) fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => rect_strategy().prop_map(Op::Insert),
        3 => any::<usize>().prop_map(Op::Delete),
        1 => (any::<usize>(), rect_strategy()).prop_map(|(i, r)| Op::Update(i, r)),
        1 => rect_strategy().prop_map(Op::Query),
    ]
}

/// A deterministic workload of `n` steps (inserts, deletes, updates).
pub(crate) fn build_ops(n: u64, salt: u64) -> Vec<Op> {
    (0..n)
        .map(|i| {
            let j = i.wrapping_mul(31).wrapping_add(salt.wrapping_mul(7));
            let x = ((j * 7919) % 40) as f64 * 0.5;
            let y = ((j * 104_729) % 37) as f64 * 0.5;
            let rect = r(x, y, x + (j % 4) as f64 * 0.5, y + (j % 3) as f64 * 0.5);
            match i % 9 {
                4 | 7 => Op::Delete((j * 13) as usize),
                8 => Op::Update((j * 17) as usize, rect),
                _ => Op::Insert(rect),
            }
        })
        .collect()
}

/// The brute-force oracle: the live records, and the next id to insert.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Oracle {
    pub(crate) items: Vec<(u64, Rect)>,
    pub(crate) next: u64,
}

impl Oracle {
    /// Applies `op` to the tree and, when it succeeds, to the oracle.
    /// Returns whether the op changed something (queries and no-ops: false).
    pub(crate) fn apply<S: NodeStore>(&mut self, t: &mut RTree<S>, op: &Op) -> crate::Result<bool> {
        match op {
            Op::Insert(rect) => {
                let id = self.next + 1;
                t.insert(id, *rect)?;
                self.next = id;
                self.items.push((id, *rect));
                Ok(true)
            }
            Op::Delete(i) if !self.items.is_empty() => {
                let j = i % self.items.len();
                let (id, rect) = self.items[j];
                t.delete(id, rect)?;
                self.items.swap_remove(j);
                Ok(true)
            }
            Op::Update(i, new) if !self.items.is_empty() => {
                let j = i % self.items.len();
                let (id, old) = self.items[j];
                t.update(id, old, *new)?;
                self.items[j].1 = *new;
                Ok(true)
            }
            Op::Query(w) => {
                let want: BTreeSet<u64> = self
                    .items
                    .iter()
                    .filter(|(_, x)| x.intersects(w))
                    .map(|x| x.0)
                    .collect();
                assert_eq!(ids_in(t, *w), want, "query {w:?}");
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    pub(crate) fn ids(&self) -> BTreeSet<u64> {
        self.items.iter().map(|x| x.0).collect()
    }
}

/// Runs `ops` on `t` against the oracle, checking the structure after each.
pub(crate) fn run_oracle<S: NodeStore>(t: &mut RTree<S>, ops: &[Op]) -> Oracle {
    let mut o = Oracle::default();
    for op in ops {
        o.apply(t, op).unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let rep = t.check().unwrap_or_else(|e| panic!("after {op:?}: {e}"));
        assert_eq!(rep.records, o.items.len() as u64);
    }
    assert_eq!(all_ids(t), o.ids());
    o
}

/// A fresh in-memory device and the log placement in its last pages.
pub(crate) fn mem_device(cfg: &FastConfig) -> (Arc<MemDevice>, Arc<dyn PageDevice>, LogPlacement) {
    let mem = Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap());
    let dev: Arc<dyn PageDevice> = mem.clone();
    let log = LogPlacement::tail_of(&dev, cfg.log_pages(PAGE).unwrap()).unwrap();
    (mem, dev, log)
}

/// Small-buffer, small-log configurations: constant flushing and
/// compaction, every policy, units of 1, 2, 3 and 5 pages, every durability.
pub(crate) fn small_configs() -> Vec<FastConfig> {
    let d = FastConfig::default();
    vec![
        FastConfig {
            buffer_bytes: 1500,
            flush_unit: 2,
            policy: FastPolicy::Fast,
            log_capacity: 12 << 10,
            durability: Durability::Sync,
            ..d
        },
        FastConfig {
            buffer_bytes: 3000,
            flush_unit: 1,
            policy: FastPolicy::FastStar,
            log_capacity: 16 << 10,
            durability: Durability::Group {
                ops: 4,
                millis: 10_000,
            },
            ..d
        },
        FastConfig {
            buffer_bytes: 2500,
            flush_unit: 5,
            policy: FastPolicy::FlushAll,
            log_capacity: 10 << 10,
            durability: Durability::None,
            ..d
        },
        FastConfig {
            buffer_bytes: 4000,
            flush_unit: 3,
            policy: FastPolicy::Random,
            log_capacity: 12 << 10,
            durability: Durability::Sync,
            seed: 99,
            ..d
        },
    ]
}

pub(crate) fn with_kind(cfg: FastConfig, kind: IndexKind) -> FastConfig {
    FastConfig {
        with_payload: kind == IndexKind::Hilbert,
        ..cfg
    }
}

/// Runs `ops` against the oracle, then reopens (restart) after syncing the
/// log and again after a checkpoint; both must give the same tree. Returns
/// the stats before the reopen.
fn run(kind: IndexKind, cfg: FastConfig, ops: &[Op]) -> (StoreStats, FastStats) {
    let cfg = with_kind(cfg, kind);
    let (_mem, dev, log) = mem_device(&cfg);
    let p = params(kind, PAGE);
    let store = FastStore::create(dev.clone(), log.clone(), cfg).unwrap();
    let mut t = RTree::create(store, p).unwrap();
    let o = run_oracle(&mut t, ops);
    let stats = (t.store().stats(), t.store().fast_stats());
    // The newest commit's flushes are done when the next operation begins
    // (an empty one here): from then on the table is within its budget.
    let op = t.store_mut().begin_op().unwrap();
    assert!(
        t.store().table_bytes() <= cfg.buffer_bytes || t.store().buffered_nodes() == 0,
        "{kind:?} {cfg:?}: table over budget when an operation begins"
    );
    t.store_mut().commit_op(op).unwrap();
    let report = t.check().unwrap();
    t.store_mut().sync_log().unwrap();
    drop(t);
    // Restart from the log alone.
    let mut t = RTree::open(FastStore::open(dev.clone(), log.clone(), cfg).unwrap(), p).unwrap();
    assert_eq!(t.check().unwrap(), report, "{kind:?} {cfg:?} after restart");
    assert_eq!(all_ids(&t), o.ids());
    t.store_mut().checkpoint().unwrap();
    assert_eq!(t.store().buffered_nodes(), 0);
    drop(t);
    let t = RTree::open(FastStore::open(dev, log, cfg).unwrap(), p).unwrap();
    assert_eq!(t.check().unwrap(), report);
    assert_eq!(t.store().fast_stats().replayed_records, 0);
    assert_eq!(all_ids(&t), o.ids());
    stats
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn fast_store_agrees_with_the_oracle_and_survives_restart(
        ops in prop::collection::vec(op_strategy(), 1..200),
    ) {
        for kind in KINDS {
            for cfg in small_configs() {
                run(kind, cfg, &ops);
            }
        }
    }
}

#[test]
fn small_buffers_flush_compact_and_flush_in_emergency() {
    let ops = build_ops(700, 1);
    for kind in KINDS {
        for cfg in small_configs() {
            let (s, f) = run(kind, cfg, &ops);
            assert!(
                s.flushes > 0 && s.flushed_nodes > 0,
                "{kind:?} {cfg:?}: {s:?}"
            );
            if cfg.policy != FastPolicy::FlushAll && f.emergency_flushes == 0 {
                // A unit holds at most flush_unit pages.
                assert!(
                    s.flushed_nodes <= s.flushes * cfg.flush_unit as u64,
                    "{kind:?} {cfg:?}: {s:?}"
                );
            }
            assert!(s.compactions > 0, "{kind:?} {cfg:?}: no compaction {f:?}");
            assert!(s.log_records > 0 && s.log_bytes > 0);
            // Per-change: every flushed page has an image, except with
            // `none` (the papers' mode: no images, no syncs); first-image:
            // at most one per flushed page, at least one when any was flushed.
            if cfg.durability == Durability::None {
                assert_eq!(f.page_images, 0, "{cfg:?}: page images");
            } else if cfg.log_format == LogFormat::PerChange {
                assert_eq!(f.page_images, s.flushed_nodes, "{cfg:?}: page images");
            } else {
                assert!(f.page_images <= s.flushed_nodes, "{cfg:?}: page images");
                assert!(s.flushed_nodes == 0 || f.page_images > 0, "{cfg:?}");
            }
            assert_eq!(s.buffer_hits + s.buffer_misses, s.node_gets);
            assert!(s.peak_buffer_bytes > 0);
        }
    }
    // A log far too small for the buffer forces emergency flushes.
    let cfg = FastConfig {
        buffer_bytes: 1 << 20,
        log_capacity: 12 << 10,
        ..FastConfig::default()
    };
    let (s, f) = run(IndexKind::RStar, cfg, &ops);
    assert!(f.emergency_flushes > 0, "{s:?} {f:?}");
}

#[test]
fn retrieve_node_checks_the_table_before_the_device() {
    let cfg = FastConfig {
        buffer_bytes: 1 << 20,
        durability: Durability::None,
        ..FastConfig::default()
    };
    let (mem, dev, log) = mem_device(&cfg);
    let mut s = FastStore::create(dev, log, cfg).unwrap();
    let e = |k: u64, x: f64| Entry {
        key: k,
        rect: r(x, x, x + 1.0, x + 1.0),
        payload: 0,
    };
    let op = s.begin_op().unwrap();
    let a = s.create(0, vec![e(2, 0.0), e(1, 0.0)]).unwrap();
    let b = s.create(0, vec![e(3, 0.0)]).unwrap();
    s.commit_op(op).unwrap();
    let before = mem.stats().io;
    // NEW: answered from the table, no I/O.
    assert_eq!(s.get(a).unwrap().entries, vec![e(1, 0.0), e(2, 0.0)]);
    assert_eq!(mem.stats().io.pages_read, before.pages_read);
    s.checkpoint().unwrap();
    // MOD: the stored node with the list applied in arrival order.
    let op = s.begin_op().unwrap();
    s.modify(a, 0, &[EntryChange::Upsert(e(1, 5.0))]).unwrap();
    s.modify(
        a,
        0,
        &[EntryChange::Upsert(e(1, 7.0)), EntryChange::Remove(2)],
    )
    .unwrap();
    s.commit_op(op).unwrap();
    let reads = mem.stats().io.pages_read;
    assert_eq!(s.get(a).unwrap().entries, vec![e(1, 7.0)]);
    assert_eq!(mem.stats().io.pages_read, reads + 1);
    // No row: the device.
    assert_eq!(s.get(b).unwrap().entries, vec![e(3, 0.0)]);
    // DEL: an error.
    let op = s.begin_op().unwrap();
    s.delete(b).unwrap();
    s.commit_op(op).unwrap();
    assert!(s.get(b).is_err());
    // Misuse is refused.
    assert!(s.create(0, vec![]).is_err(), "outside an operation");
    let op = s.begin_op().unwrap();
    assert!(
        s.modify(a, 1, &[EntryChange::Remove(1)]).is_err(),
        "wrong level"
    );
    assert!(
        s.create(0, vec![e(1, 0.0), e(1, 1.0)]).is_err(),
        "duplicate key"
    );
    s.commit_op(op).unwrap();
}

#[test]
fn each_flush_is_one_batch_after_its_page_images() {
    let cfg = FastConfig {
        buffer_bytes: 2000,
        flush_unit: 3,
        policy: FastPolicy::Fast,
        durability: Durability::None,
        ..FastConfig::default()
    };
    // The log on its own device: the node device sees only node writes.
    let nodes = Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap());
    let logdev: Arc<dyn PageDevice> =
        Arc::new(MemDevice::new(PAGE, cfg.log_pages(PAGE).unwrap()).unwrap());
    let s = FastStore::create(nodes.clone(), LogPlacement::whole(logdev), cfg).unwrap();
    let before = nodes.stats().io;
    let mut t = RTree::create(s, params(IndexKind::RTree, PAGE)).unwrap();
    let st = assert_one_batch_per_flush(&mut t, &*nodes, before, 400, 1);
    assert_eq!(st.node_writes, st.flushed_nodes);
    assert!(t.store().log_stats().records > 400);
}

/// The compact format (the default) with a durable mode: a flush writes a
/// batch of units behind one log sync; operations are logged in groups
/// (far fewer records than the first-image format logs for the same
/// operations, one COMMIT per group); and a build from empty writes no
/// page image (a NEW record protects its page's flushes in the epoch).
/// Both formats build the same tree, which restarts from the log alone.
#[test]
fn compact_format_groups_operations_batches_flushes_and_images_no_new_page() {
    let build = |log_format| {
        let cfg = FastConfig {
            buffer_bytes: 32 << 10,
            flush_unit: 2,
            policy: FastPolicy::Fast,
            durability: Durability::UNBOUNDED_GROUP,
            log_capacity: 4 << 20,
            log_format,
            ..FastConfig::default()
        };
        let (_mem, dev, log) = mem_device(&cfg);
        let p = params(IndexKind::RStar, PAGE);
        let mut t =
            RTree::create(FastStore::create(dev.clone(), log.clone(), cfg).unwrap(), p).unwrap();
        for i in 0..1500u64 {
            let x = ((i * 7919) % 400) as f64 / 20.0;
            let y = ((i * 104_729) % 397) as f64 / 20.0;
            t.insert(i + 1, r(x, y, x + 0.1, y + 0.1)).unwrap();
        }
        let report = t.check().unwrap();
        let out = (
            t.store().stats(),
            t.store().fast_stats(),
            t.store().log_stats(),
            all_ids(&t),
        );
        t.store_mut().sync_log().unwrap();
        drop(t);
        let t = RTree::open(FastStore::open(dev, log, cfg).unwrap(), p).unwrap();
        assert_eq!(t.check().unwrap(), report, "{log_format:?} after restart");
        assert_eq!(all_ids(&t), out.3);
        out
    };
    let (fi, fi_fast, fi_log, fi_ids) = build(LogFormat::FirstImage);
    let (c, c_fast, c_log, c_ids) = build(LogFormat::Compact);
    assert_eq!(c_ids, fi_ids);
    for (st, fst) in [(&fi, &fi_fast), (&c, &c_fast)] {
        assert_eq!(fst.compactions, 0, "{st:?}");
        assert!(st.flushes > 20, "{st:?}");
        assert!(st.flushes >= 3 * st.log_syncs, "{st:?}");
        assert_eq!(st.page_images, 0, "{st:?}");
    }
    assert!(c_log.records * 3 < fi_log.records, "{c_log:?} {fi_log:?}");
}

#[test]
fn fast_and_plain_stores_build_the_same_tree() {
    for kind in KINDS {
        for cfg in small_configs() {
            // A log large enough for no emergency flush (a checkpoint, which
            // makes deleted pages reusable earlier than in the plain store).
            let cfg = with_kind(
                FastConfig {
                    log_capacity: 1 << 20,
                    ..cfg
                },
                kind,
            );
            let p = params(kind, PAGE);
            let pcfg = PlainConfig {
                buffer_bytes: 4096,
                policy: PolicyKind::Lru,
                with_payload: cfg.with_payload,
            };
            let mut a =
                RTree::create(PlainStore::create_in_memory(PAGE, pcfg).unwrap(), p).unwrap();
            let (_mem, dev, log) = mem_device(&cfg);
            let mut b = RTree::create(FastStore::create(dev.clone(), log.clone(), cfg).unwrap(), p)
                .unwrap();
            let ops = build_ops(500, 3);
            let oa = run_oracle(&mut a, &ops);
            let ob = run_oracle(&mut b, &ops);
            assert_eq!(oa, ob);
            a.store_mut().checkpoint().unwrap();
            b.store_mut().checkpoint().unwrap();
            assert_eq!(a.store().meta(), b.store().meta());
            let next = a.store().allocator().next_page();
            assert_eq!(next, b.store().allocator().next_page());
            drop(b);
            // Read back from the device after a restart: the logical pages are equal.
            let b = FastStore::open(dev, log, cfg).unwrap();
            let mut compared = 0;
            for id in 1..next {
                assert_eq!(
                    a.store().allocator().is_allocated(id),
                    b.allocator().is_allocated(id),
                    "{kind:?} page {id}"
                );
                if a.store().allocator().is_allocated(id) {
                    assert_eq!(
                        a.store().get(id).unwrap(),
                        b.get(id).unwrap(),
                        "{kind:?} page {id}"
                    );
                    compared += 1;
                }
            }
            assert!(compared > 10);
        }
    }
}

#[test]
fn fast_writes_far_fewer_pages_than_plain_with_the_same_memory() {
    let page = 4096;
    let fcfg = FastConfig {
        buffer_bytes: 64 * 1024,
        durability: Durability::None,
        ..FastConfig::default()
    };
    let fast = FastStore::create_in_memory(page, fcfg).unwrap();
    assert_fewer_writes_than_plain("fast", page, params(IndexKind::RTree, page), fast);
}

#[test]
fn bad_configurations_and_placements_are_refused() {
    let d = FastConfig::default();
    assert!(FastStore::create_in_memory(PAGE, FastConfig { flush_unit: 0, ..d }).is_err());
    let bad_group = FastConfig {
        durability: Durability::Group { ops: 0, millis: 1 },
        ..d
    };
    assert!(FastStore::create_in_memory(PAGE, bad_group).is_err());
    // A log too small for a flush's page images.
    let tiny = FastConfig {
        log_capacity: 1024,
        ..d
    };
    let err = FastStore::create_in_memory(PAGE, tiny).unwrap_err();
    assert!(err.to_string().contains("too small"), "{err}");
    // A log on the node device but not at its end.
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1000).unwrap());
    let mid = LogPlacement {
        device: dev.clone(),
        first_page: 100,
        pages: 100,
    };
    assert!(FastStore::create(dev.clone(), mid, d).is_err());
    // Opening with another log range or payload setting.
    let log = LogPlacement::tail_of(&dev, 100).unwrap();
    FastStore::create(dev.clone(), log.clone(), d).unwrap();
    let other = LogPlacement::tail_of(&dev, 50).unwrap();
    let err = FastStore::open(dev.clone(), other, d).unwrap_err();
    assert!(err.to_string().contains("log is at pages"), "{err}");
    let payload = FastConfig {
        with_payload: true,
        ..d
    };
    assert!(FastStore::open(dev.clone(), log.clone(), payload).is_err());
    assert!(FastStore::open(dev, log, d).is_ok());
    // A blank device is no store.
    let blank: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1000).unwrap());
    let log = LogPlacement::tail_of(&blank, 100).unwrap();
    assert!(FastStore::open(blank, log, d).is_err());
}

#[test]
fn a_device_error_makes_the_store_refuse_changes_until_reopened() {
    let cfg = FastConfig {
        buffer_bytes: 1500,
        flush_unit: 2,
        durability: Durability::Sync,
        log_capacity: 16 << 10,
        ..FastConfig::default()
    };
    let mem = Arc::new(MemDevice::new(PAGE, 1 << 12).unwrap());
    let dev: Arc<dyn PageDevice> = Arc::new(FaultyDevice::new(
        mem.clone(),
        FaultPlan::none().fail_write(40),
    ));
    let log = LogPlacement::tail_of(&dev, cfg.log_pages(PAGE).unwrap()).unwrap();
    let mut t = RTree::create(
        FastStore::create(dev, log, cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    let mut o = Oracle::default();
    let ops = build_ops(300, 5);
    let mut failed = None;
    for (i, op) in ops.iter().enumerate() {
        if let Err(e) = o.apply(&mut t, op) {
            failed = Some((i, e));
            break;
        }
    }
    let (i, e) = failed.expect("the injected fault surfaces");
    assert!(matches!(e, Error::InjectedFault(_)), "{e}");
    let _ = i;
    // The failing operation may have committed before its flush failed: a
    // fresh id avoids the duplicate check.
    let err = t
        .insert(1 << 40, r(1.0, 1.0, 2.0, 2.0))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("failed earlier") || err.contains("injected"),
        "{err}"
    );
    assert!(t.store_mut().checkpoint().is_err());
    drop(t);
    // Reopened on the durable image: restart gives a consistent tree.
    let dev: Arc<dyn PageDevice> = mem;
    let log = LogPlacement::tail_of(&dev, cfg.log_pages(PAGE).unwrap()).unwrap();
    let t = RTree::open(
        FastStore::open(dev, log, cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    t.check().unwrap();
}

#[test]
fn index_dir_makes_a_fast_store_that_reopens() {
    use crate::config::StoreSpec;
    use crate::index_dir::{make_store_with_log, StoreOpen};
    let opts = StoreSpec::fast(4096, FastConfig::default());
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 16).unwrap());
    let p = params(IndexKind::RStar, PAGE);
    let (s, _) = make_store_with_log(
        dev.clone(),
        None,
        &opts,
        IndexKind::RStar,
        StoreOpen::Create,
    )
    .unwrap();
    let mut t = RTree::create(s, p).unwrap();
    let o = run_oracle(&mut t, &build_ops(300, 9));
    assert!(t.store().durable_op().is_some());
    assert!(t.store().stats().flushes > 0);
    t.store_mut().checkpoint().unwrap();
    drop(t);
    let (s, _) = make_store_with_log(dev, None, &opts, IndexKind::RStar, StoreOpen::Write).unwrap();
    let t = RTree::open(s, p).unwrap();
    t.check().unwrap();
    assert_eq!(all_ids(&t), o.ids());
}

#[test]
fn a_commit_that_does_not_fit_the_log_flushes_the_nodes_it_did_not_change() {
    // A 6 KiB log: an operation of 7 full nodes fits only once the records
    // of the 3 nodes an earlier operation left buffered are gone (sizes of
    // the fixed framing).
    let cfg = FastConfig {
        buffer_bytes: 1 << 20,
        log_capacity: 6 << 10,
        log_format: LogFormat::FirstImage,
        durability: Durability::Sync,
        ..FastConfig::default()
    };
    let (_mem, dev, log) = mem_device(&cfg);
    let mut s = FastStore::create(dev.clone(), log.clone(), cfg).unwrap();
    let m = s.max_entries() as u64;
    let full = |base: u64| -> Vec<Entry> {
        (0..m)
            .map(|k| Entry {
                key: base + k,
                rect: r(k as f64, 0.0, k as f64 + 1.0, 1.0),
                payload: 0,
            })
            .collect()
    };
    let op = s.begin_op().unwrap();
    let a: Vec<PageId> = (0..3)
        .map(|i| s.create(0, full(100 * i)).unwrap())
        .collect();
    s.commit_op(op).unwrap();
    assert_eq!(s.buffered_nodes(), 3, "operation 1 stays buffered");
    assert_eq!(s.fast_stats().emergency_flushes, 0);
    let free = s.log.free_bytes();
    let op = s.begin_op().unwrap();
    let b: Vec<PageId> = (0..7)
        .map(|i| s.create(0, full(1000 + 100 * i)).unwrap())
        .collect();
    let staged: u64 = s
        .staged
        .records(op, s.codec())
        .iter()
        .map(|r| r.encoded_len() as u64)
        .sum();
    assert!(
        staged > free,
        "operation 2 ({staged} bytes) must not fit beside operation 1 ({free} bytes free)"
    );
    s.commit_op(op).unwrap();
    assert!(s.fast_stats().emergency_flushes >= 1);
    for (i, id) in a.iter().enumerate() {
        assert_eq!(s.get(*id).unwrap().entries, full(100 * i as u64));
    }
    drop(s);
    let s = FastStore::open(dev, log, cfg).unwrap();
    for (i, id) in a.iter().enumerate() {
        assert_eq!(s.get(*id).unwrap().entries, full(100 * i as u64));
    }
    for (i, id) in b.iter().enumerate() {
        assert_eq!(s.get(*id).unwrap().entries, full(1000 + 100 * i as u64));
    }
}

#[test]
fn small_logs_hold_every_operation() {
    // Logs of 6 and 8 KiB (a dozen page images): operations are logged
    // coalesced per page, restart leaves room for the next one, and a
    // commit that does not fit flushes the nodes it did not change.
    let ops = build_ops(300, 5);
    for kind in KINDS {
        for cfg in small_configs() {
            for log_capacity in [6 << 10, 8 << 10] {
                run(
                    kind,
                    FastConfig {
                        log_capacity,
                        ..cfg
                    },
                    &ops,
                );
            }
        }
    }
}

/// FAST's CHECKPOINT payload as builds before the shared payload codec
/// wrote it: last op, root flag `u8`, root, height, records, next page,
/// `u32` count, free pages.
fn legacy_checkpoint_bytes(c: &crate::store::log::CheckpointState) -> Vec<u8> {
    let mut b = c.last_op.to_le_bytes().to_vec();
    b.push(u8::from(c.meta.meta.root.is_some()));
    b.extend_from_slice(&c.meta.meta.root.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&c.meta.meta.height.to_le_bytes());
    b.extend_from_slice(&c.meta.meta.records.to_le_bytes());
    b.extend_from_slice(&c.meta.next_page.to_le_bytes());
    b.extend_from_slice(&(c.free.len() as u32).to_le_bytes());
    for p in &c.free {
        b.extend_from_slice(&p.to_le_bytes());
    }
    b
}

#[test]
fn a_log_written_before_the_shared_codec_opens_or_is_refused_clearly() {
    use crate::store::log::{
        payload_codec_version, LogLayout, LogReader, PayloadCodec, PayloadEncoding, RecordKind,
        PAYLOAD_CODEC_VERSION,
    };
    let cfg = FastConfig {
        durability: Durability::Sync,
        log_format: LogFormat::PerChange,
        log_capacity: 256 << 10,
        ..FastConfig::default()
    };
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 12).unwrap());
    let log = LogPlacement::tail_of(&dev, cfg.log_pages(PAGE).unwrap()).unwrap();
    let layout = LogLayout::new(log.first_page, log.pages, PAGE).unwrap();
    let mut t = RTree::create(
        FastStore::create(dev.clone(), log.clone(), cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    let mut o = Oracle::default();
    for op in &build_ops(300, 11) {
        o.apply(&mut t, op).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    let want = all_ids(&t);
    let (index_id, _) = FastStore::identity(dev.as_ref(), &log, &cfg).unwrap();
    drop(t);
    assert_eq!(
        payload_codec_version(dev.clone(), log.first_page, log.pages, index_id).unwrap(),
        PAYLOAD_CODEC_VERSION
    );
    // The clean log as an older build left it: codec version 0, the base
    // CHECKPOINT in FAST's old layout (with free pages, so the layout matters).
    let reader = LogReader::open(dev.clone(), log.first_page, log.pages, index_id).unwrap();
    let ck = reader
        .oldest_first()
        .find(|r| r.kind == RecordKind::Checkpoint)
        .unwrap()
        .clone();
    let state = PayloadCodec::new(PayloadEncoding::Fixed)
        .decode_checkpoint(&ck)
        .unwrap();
    assert!(state.meta.meta.root.is_some());
    crate::store::log::rewrite_as_codec_0(
        &dev,
        &layout,
        index_id,
        Some(legacy_checkpoint_bytes(&state)),
    )
    .unwrap();
    // Page 0 as such a build created it: the identity blob without the codec byte.
    let mut hdr = Header::read(&FORMAT, dev.as_ref()).unwrap();
    assert_eq!(hdr.user_meta.pop(), Some(PAYLOAD_CODEC_VERSION));
    hdr.write(&FORMAT, dev.as_ref()).unwrap();
    assert_eq!(
        payload_codec_version(dev.clone(), log.first_page, log.pages, index_id).unwrap(),
        0
    );
    let mut t = RTree::open(
        FastStore::open(dev.clone(), log.clone(), cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    t.check().unwrap();
    assert_eq!(all_ids(&t), want, "the old CHECKPOINT is read as it was");
    // Changes after it are written in the shared codec (version 1 in the
    // superblock): a crash now (no checkpoint; every commit is durable)
    // leaves MOD records that the next open reads with the new tags.
    for op in &build_ops(40, 12) {
        o.apply(&mut t, op).unwrap();
    }
    let want = all_ids(&t);
    drop(t);
    let t = RTree::open(
        FastStore::open(dev.clone(), log.clone(), cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    t.check().unwrap();
    assert_eq!(all_ids(&t), want);
    drop(t);
    // The same crashed log marked as written by an older build: its MOD
    // records could have the old tags, so opening it is refused, clearly,
    // and the log is left as it was (still version 0).
    let reader = LogReader::open(dev.clone(), log.first_page, log.pages, index_id).unwrap();
    assert!(reader.oldest_first().any(|r| r.kind == RecordKind::Mod));
    crate::store::log::rewrite_as_codec_0(&dev, &layout, index_id, None).unwrap();
    let err = FastStore::open(dev.clone(), log.clone(), cfg).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("payload codec") && msg.contains("MOD records"),
        "{msg}"
    );
    assert_eq!(
        payload_codec_version(dev.clone(), log.first_page, log.pages, index_id).unwrap(),
        0
    );
}

#[test]
fn a_corrupt_log_page_before_the_tail_is_refused_or_dropped_as_configured() {
    use crate::store::log::{LogReader, RecoveryMode};
    let cfg = FastConfig {
        durability: Durability::Sync,
        log_capacity: 256 << 10,
        ..FastConfig::default()
    };
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 12).unwrap());
    let log = LogPlacement::tail_of(&dev, cfg.log_pages(PAGE).unwrap()).unwrap();
    let mut t = RTree::create(
        FastStore::create(dev.clone(), log.clone(), cfg).unwrap(),
        params(IndexKind::RTree, PAGE),
    )
    .unwrap();
    t.store_mut().checkpoint().unwrap();
    // 200 inserts after the checkpoint, all in the buffer (nothing flushed)
    // and in the log, every one durable; then a crash.
    let n = 200u64;
    for k in 0..n {
        let x = (k % 20) as f64;
        t.insert(k, r(x, x, x + 1.0, x + 1.0)).unwrap();
    }
    let (index_id, _) = FastStore::identity(dev.as_ref(), &log, &cfg).unwrap();
    drop(t);
    // Damage a page in the middle of the log's live region.
    let reader = LogReader::open(dev.clone(), log.first_page, log.pages, index_id).unwrap();
    let (region, pages) = (reader.live_region(), reader.pages());
    assert!(pages > 4, "{pages} log pages");
    let bad = reader.layout().region_page(region, pages / 2);
    let mut buf = vec![0u8; PAGE];
    dev.read(bad, &mut buf).unwrap();
    buf[PAGE / 2] ^= 0x10;
    dev.write(bad, &buf).unwrap();
    // The default refuses it, naming the page.
    let err = FastStore::open(dev.clone(), log.clone(), cfg).unwrap_err();
    assert!(
        err.to_string().contains("before its tail") && err.to_string().contains(&bad.to_string()),
        "{err}"
    );
    // Tolerated: the operations before the damaged page are kept.
    let tolerant = FastConfig {
        recovery: RecoveryMode::TolerateCorruptTail,
        ..cfg
    };
    let store = FastStore::open(dev.clone(), log.clone(), tolerant).unwrap();
    let report = store.restart_report().unwrap().clone();
    assert!(report.corrupt_pages_dropped >= 1, "{report:?}");
    assert!(report.recovered_anything());
    let t = RTree::open(store, params(IndexKind::RTree, PAGE)).unwrap();
    t.check().unwrap();
    let ids = all_ids(&t);
    let kept = ids.len() as u64;
    assert!(kept > 0 && kept < n, "{kept} of {n} kept");
    assert_eq!(
        ids,
        (0..kept).collect::<BTreeSet<u64>>(),
        "a prefix of the inserts"
    );
    drop(t);
    // The repaired log opens under the default mode too.
    assert!(FastStore::open(dev, log, cfg).is_ok());
}
