//! Unlogged bulk loads ([`crate::store::bulk`]) on every store with a
//! device (plain, eFIND, FAST), written once for the three:
//! - answers of bulk-loaded trees (STR, Hilbert packing, the bounded-memory
//!   external load; R-tree, R*-tree, Hilbert R-tree) equal a brute-force scan,
//!   after a reopen too, and the trees stay updatable;
//! - the device counters of a bulk load: no log record, no log page, at most
//!   three syncs (two), every node page written once in large batches, and
//!   the next open of a logged store replays nothing;
//! - crashes at random page writes (unsynced writes kept, dropped or torn)
//!   and at random syncs during the load and its publication: the store
//!   reopens holding the empty tree or the whole new one, never a part.
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use crate::testenv::{crash_cases, proptest_cases};
use crate::geom::{HilbertDomain, Rect};
use crate::index::{
    BulkMethod, ExternalBulkConfig, IndexKind, Predicate, RTree, SplitKind, TreeParams,
};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::storage::{IoCounters, PageDevice};
use crate::store::crash_harness::{crash_in_restart, unwrap_faulty, CrashSummary, LoggedKind};
use crate::store::efind::EfindConfig;
use crate::store::log::LogPlacement;
use crate::store::{FastConfig, NodeStore, PlainConfig, PlainStore, StoreOpen};
use crate::{Error, Result};

const PAGE: usize = 1024;
const DEV_PAGES: u64 = 16384;
/// Log bytes of the logged stores: small (a logged bulk load would have to
/// compact it), yet large enough for the records of one delete that
/// condenses a tree of tiny nodes (M = 4) and reinserts its orphans: one
/// such delete in a Hilbert R-tree of 1,573 entries logs 979 KB, and the
/// tests go up to 2,500 entries (an operation must fit in the log).
const LOG_BYTES: u64 = 4 << 20;

type Store = Box<dyn NodeStore>;
type Tree = RTree<Store>;

/// The stores with a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Efind,
    Fast,
}

const KINDS: [Kind; 3] = [Kind::Plain, Kind::Efind, Kind::Fast];

impl Kind {
    fn plain(wp: bool) -> PlainConfig {
        PlainConfig {
            buffer_bytes: 32 << 10,
            with_payload: wp,
            ..PlainConfig::default()
        }
    }

    fn efind(wp: bool) -> EfindConfig {
        LoggedKind::configs(32 << 10, wp, LOG_BYTES).0
    }

    fn fast(wp: bool) -> FastConfig {
        LoggedKind::configs(32 << 10, wp, LOG_BYTES).1
    }

    /// Where the logged stores' log goes (the same placement for both):
    /// the tail of `dev`, or all of `log`.
    fn placement(dev: &Arc<dyn PageDevice>, log: Option<Arc<dyn PageDevice>>) -> LogPlacement {
        match log {
            Some(l) => LogPlacement::whole(l),
            None => LogPlacement::tail_of(dev, Self::fast(false).log_pages(PAGE).unwrap()).unwrap(),
        }
    }

    /// The store on `dev` as `how` says (a read-only open of a logged
    /// store refuses a log with anything to replay), its log (logged
    /// stores) on `log` or in `dev`'s last pages.
    fn store(
        self,
        how: StoreOpen,
        dev: Arc<dyn PageDevice>,
        log: Option<Arc<dyn PageDevice>>,
        wp: bool,
    ) -> Result<Store> {
        let place = || Self::placement(&dev, log);
        Ok(match self {
            Kind::Plain if how == StoreOpen::Create => {
                Box::new(PlainStore::create(dev, Self::plain(wp))?)
            }
            Kind::Plain => Box::new(PlainStore::open(dev, Self::plain(wp))?),
            Kind::Efind => LoggedKind::Efind.store(how, dev.clone(), place(), Self::efind(wp), Self::fast(wp))?,
            Kind::Fast => LoggedKind::Fast.store(how, dev.clone(), place(), Self::efind(wp), Self::fast(wp))?,
        })
    }
}

/// The bulk loaders.
#[derive(Debug, Clone, Copy)]
enum Loader {
    Str,
    Hilbert,
    /// The bounded-memory Hilbert load.
    External,
    /// The bounded-memory STR load.
    ExternalStr,
}

const LOADERS: [Loader; 4] = [
    Loader::Str,
    Loader::Hilbert,
    Loader::External,
    Loader::ExternalStr,
];

fn params(kind: IndexKind, max: usize) -> TreeParams {
    match kind {
        IndexKind::Hilbert => TreeParams::new(kind, max).with_hilbert_domain(
            HilbertDomain::new(Rect::new(0.0, 0.0, 110.0, 110.0).unwrap(), 12).unwrap(),
        ),
        IndexKind::RTree => TreeParams::new(kind, max).with_split(SplitKind::Quadratic),
        _ => TreeParams::new(kind, max),
    }
}

/// Bulk-loads `data` into `store` with `loader`.
fn load(
    loader: Loader,
    store: Store,
    p: TreeParams,
    data: &[(u64, Rect)],
    fill: f64,
) -> Result<Tree> {
    match loader {
        Loader::Str => RTree::bulk_load(store, p, data.to_vec(), BulkMethod::Str, fill),
        Loader::Hilbert => RTree::bulk_load(store, p, data.to_vec(), BulkMethod::Hilbert, fill),
        Loader::External | Loader::ExternalStr => {
            let dir = tempfile::tempdir().map_err(|e| Error::invalid(e.to_string()))?;
            let config = ExternalBulkConfig {
                memory_budget: crate::index::external::MIN_MEMORY_BUDGET,
                temp_dir: dir.path().to_path_buf(),
            };
            let method = match loader {
                Loader::ExternalStr => BulkMethod::Str,
                _ => BulkMethod::Hilbert,
            };
            RTree::bulk_load_external(store, p, data.iter().copied(), method, fill, &config)
                .map(|(t, _)| t)
        }
    }
}

/// `n` rectangles in [0, 101]², ids unique and not in order.
fn items(n: u64, seed: u64) -> Vec<(u64, Rect)> {
    (0..n)
        .map(|i| {
            let h = (i ^ seed)
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .rotate_left(17)
                ^ seed;
            let x = (h % 10_007) as f64 / 100.0;
            let y = ((h >> 20) % 10_009) as f64 / 100.0;
            let w = ((h >> 40) % 9) as f64 / 10.0;
            (
                (i * 7 + 3) ^ 0x55,
                Rect::new(x, y, x + w, y + w / 3.0).unwrap(),
            )
        })
        .collect()
}

fn windows() -> Vec<Rect> {
    let mut w: Vec<Rect> = (0..10)
        .map(|i| {
            let x = f64::from(i * 9 % 90);
            let y = f64::from(i * 13 % 90);
            Rect::new(x, y, x + 2.0 + f64::from(i), y + 1.0 + f64::from(i) * 1.5).unwrap()
        })
        .collect();
    w.push(Rect::new(-1.0, -1.0, 200.0, 200.0).unwrap());
    w
}

fn answers(t: &Tree, w: Rect) -> Vec<u64> {
    t.query(w, Predicate::Intersects).unwrap().sorted_ids()
}

fn brute(data: &BTreeMap<u64, Rect>, w: &Rect) -> Vec<u64> {
    data.iter()
        .filter(|(_, r)| r.intersects(w))
        .map(|(&i, _)| i)
        .collect()
}

/// The tree passes its checks and answers every window like a scan of `data`.
fn check_against(t: &Tree, data: &BTreeMap<u64, Rect>, what: &str) {
    let rep = t
        .check()
        .unwrap_or_else(|e| panic!("{what}: structure: {e}"));
    assert_eq!(rep.records, data.len() as u64, "{what}");
    for w in windows() {
        assert_eq!(answers(t, w), brute(data, &w), "{what}: window {w:?}");
    }
}

/// Bulk-loads, checkpoints, reopens read-only (nothing to replay) and for
/// writing, then changes the tree and reopens again: brute-force answers at
/// every step.
fn load_reopen_and_update(
    kind: Kind,
    loader: Loader,
    p: TreeParams,
    data: &[(u64, Rect)],
    fill: f64,
) {
    let what = format!(
        "{kind:?} {loader:?} {:?} M={} n={} fill={fill}",
        p.kind,
        p.max_entries,
        data.len()
    );
    let wp = p.kind == IndexKind::Hilbert;
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
    let mut oracle: BTreeMap<u64, Rect> = data.iter().copied().collect();
    let mut t = load(
        loader,
        kind.store(StoreOpen::Create, dev.clone(), None, wp)
            .unwrap(),
        p,
        data,
        fill,
    )
    .unwrap();
    check_against(&t, &oracle, &what);
    // What the index layer does after a load.
    t.store_mut().checkpoint().unwrap();
    drop(t);
    let t = RTree::open(
        kind.store(StoreOpen::Read, dev.clone(), None, wp).unwrap(),
        p,
    )
    .unwrap();
    check_against(&t, &oracle, &format!("{what}, read-only reopen"));
    drop(t);
    let mut t = RTree::open(
        kind.store(StoreOpen::Write, dev.clone(), None, wp).unwrap(),
        p,
    )
    .unwrap();
    check_against(&t, &oracle, &format!("{what}, reopen"));
    for (id, r) in data.iter().take(25) {
        t.delete(*id, *r).unwrap();
        oracle.remove(id);
    }
    for i in 0..8u64 {
        let r = Rect::new(i as f64, 50.0, i as f64 + 3.0, 52.0).unwrap();
        t.insert(1_000_000 + i, r).unwrap();
        oracle.insert(1_000_000 + i, r);
    }
    t.store_mut().checkpoint().unwrap();
    drop(t);
    let t = RTree::open(kind.store(StoreOpen::Write, dev, None, wp).unwrap(), p).unwrap();
    check_against(&t, &oracle, &format!("{what}, changed and reopened"));
}

#[test]
fn bulk_loads_answer_like_brute_force_on_every_store_after_reopen() {
    for kind in KINDS {
        for loader in LOADERS {
            for (tree, max) in [
                (IndexKind::RStar, 12),
                (IndexKind::RTree, 8),
                (IndexKind::Hilbert, 10),
            ] {
                for n in [0u64, 1, 9, 700, 4000] {
                    load_reopen_and_update(
                        kind,
                        loader,
                        params(tree, max),
                        &items(n, n + max as u64),
                        1.0,
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(proptest_cases()))]
    #[test]
    fn bulk_loaded_trees_match_brute_force_after_reopen(
        n in 0u64..2500,
        seed in any::<u64>(),
        // M of a 1 KiB page: 24 entries, 20 with payloads (Hilbert).
        max in 4usize..21,
        fill in 0.5f64..=1.0,
        kind in 0usize..3,
        loader in 0usize..LOADERS.len(),
        tree in 0usize..3,
    ) {
        let tree = [IndexKind::RStar, IndexKind::RTree, IndexKind::Hilbert][tree];
        load_reopen_and_update(KINDS[kind], LOADERS[loader], params(tree, max), &items(n, seed), fill);
    }
}

/// What a bulk load of `n` records cost on `kind`, counted by the devices
/// (node device and log device) from after the store's creation to after
/// two checkpoints (what the index layer runs after a load).
#[derive(Debug)]
struct Cost {
    nodes: u64,
    node_device: IoCounters,
    log_device: IoCounters,
    log_records: u64,
    log_pages: u64,
    page_images: u64,
}

fn delta(a: IoCounters, b: IoCounters) -> IoCounters {
    IoCounters {
        pages_written: a.pages_written - b.pages_written,
        bytes_written: a.bytes_written - b.bytes_written,
        write_batches: a.write_batches - b.write_batches,
        syncs: a.syncs - b.syncs,
        pages_read: a.pages_read - b.pages_read,
        ..IoCounters::default()
    }
}

/// Bulk-loads `n` records on `kind` with `loader`, its log (logged stores)
/// on a device of its own; the cost and the two devices.
fn bulk_cost(
    kind: Kind,
    loader: Loader,
    n: u64,
) -> (Cost, Arc<dyn PageDevice>, Arc<dyn PageDevice>) {
    let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 16_384).unwrap());
    let log: Arc<dyn PageDevice> =
        Arc::new(MemDevice::new(PAGE, Kind::fast(false).log_pages(PAGE).unwrap()).unwrap());
    let store = kind
        .store(StoreOpen::Create, nodes.clone(), Some(log.clone()), false)
        .unwrap();
    let (n0, l0, s0) = (nodes.stats().io, log.stats().io, store.stats());
    let mut t = load(
        loader,
        store,
        params(IndexKind::RStar, 16),
        &items(n, 5),
        1.0,
    )
    .unwrap();
    t.store_mut().checkpoint().unwrap();
    t.store_mut().checkpoint().unwrap();
    let s = t.store().stats().since(&s0);
    let cost = Cost {
        nodes: s.nodes_created,
        node_device: delta(nodes.stats().io, n0),
        log_device: delta(log.stats().io, l0),
        log_records: s.log_records,
        log_pages: s.log_pages_written,
        page_images: s.page_images,
    };
    (cost, nodes, log)
}

#[test]
fn a_bulk_load_logs_nothing_syncs_twice_and_writes_each_page_once_in_batches() {
    // 30,000 records in nodes of 16: about 2,000 nodes, two 1 MiB batches of 1 KiB pages.
    let n = 30_000;
    let batch_pages = (super::bulk::BATCH_BYTES / PAGE) as u64;
    for kind in KINDS {
        for loader in LOADERS {
            let (c, nodes, log) = bulk_cost(kind, loader, n);
            let what = format!("{kind:?} {loader:?}: {c:?}");
            assert!(c.nodes > batch_pages, "{what}");
            // No log record but the publication's CHECKPOINT, which the
            // superblock carries: no log page.
            assert!(c.log_records <= 1, "{what}");
            assert_eq!((c.log_pages, c.page_images), (0, 0), "{what}");
            let syncs = c.node_device.syncs + c.log_device.syncs;
            assert!((1..=3).contains(&syncs), "{what}: {syncs} syncs");
            // Each node page once, plus the plain store's header page; the
            // logged stores write one superblock of their log and its mirror.
            let header = u64::from(kind == Kind::Plain);
            assert_eq!(c.node_device.pages_written, c.nodes + header, "{what}");
            assert!(c.log_device.pages_written <= 2, "{what}");
            assert!(
                c.node_device.write_batches <= c.nodes.div_ceil(batch_pages) + header,
                "{what}"
            );
            let bytes = c.node_device.bytes_written + c.log_device.bytes_written;
            assert!(
                bytes as f64 <= 1.05 * (c.nodes * PAGE as u64) as f64,
                "{what}"
            );
            // The next open reads the log's superblocks and at most two
            // pages of its empty region, and has nothing to replay (a
            // read-only open refuses a log that has).
            if kind != Kind::Plain {
                let before = log.stats().io.pages_read;
                let store = kind
                    .store(StoreOpen::Read, nodes.clone(), Some(log.clone()), false)
                    .unwrap();
                let read = log.stats().io.pages_read - before;
                assert!(read <= 4, "{what}: open read {read} log pages");
                let t = RTree::open(store, params(IndexKind::RStar, 16)).unwrap();
                assert_eq!(t.len(), n, "{what}");
            }
        }
    }
}

#[test]
fn a_failed_bulk_load_publishes_nothing_and_leaves_the_store_usable() {
    for kind in KINDS {
        let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, DEV_PAGES).unwrap());
        let p = params(IndexKind::RStar, 8);
        // A duplicate id far from the first: the external loader finds it
        // after its runs, the in-memory one before any node.
        let mut data = items(3000, 1);
        data.push((data[10].0, Rect::new(1.0, 1.0, 2.0, 2.0).unwrap()));
        let store = kind
            .store(StoreOpen::Create, dev.clone(), None, false)
            .unwrap();
        let next_before = dev.stats().io.pages_written;
        let err = load(Loader::External, store, p, &data, 1.0)
            .err()
            .expect("a duplicate id is refused");
        assert!(
            err.is_user_error() && err.to_string().contains("twice"),
            "{kind:?}: {err}"
        );
        // A loader that fails after writing nodes: the store takes them
        // back and publishes nothing.
        let mut store = kind
            .store(StoreOpen::Create, dev.clone(), None, false)
            .unwrap();
        let err = store
            .bulk_load(Box::new(|sink| {
                for i in 0..1500u64 {
                    let r = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
                    sink.node(
                        0,
                        &[crate::page::Entry {
                            key: i,
                            rect: r,
                            payload: 0,
                        }],
                    )?;
                }
                Err(Error::invalid("the loader gives up"))
            }))
            .unwrap_err();
        assert!(err.to_string().contains("gives up"), "{kind:?}: {err}");
        assert!(
            dev.stats().io.pages_written > next_before + 1000,
            "{kind:?}: nodes were written"
        );
        assert_eq!(store.meta(), crate::store::TreeMeta::default(), "{kind:?}");
        // The store is as before: the same load succeeds.
        let good = items(3000, 1);
        let t = load(Loader::Str, store, p, &good, 1.0).unwrap();
        check_against(
            &t,
            &good.iter().copied().collect(),
            &format!("{kind:?} after a failed load"),
        );
        drop(t);
        let t = RTree::open(kind.store(StoreOpen::Write, dev, None, false).unwrap(), p).unwrap();
        check_against(
            &t,
            &good.iter().copied().collect(),
            &format!("{kind:?} reopened"),
        );
        // A store holding a tree refuses a bulk load.
        let mut store = t.into_store();
        let err = store
            .bulk_load(Box::new(|_| Ok(crate::store::TreeMeta::default())))
            .unwrap_err();
        assert!(err.to_string().contains("already holds"), "{kind:?}: {err}");
    }
}

/// How a crashed bulk load reopened.
#[derive(Debug, Default)]
struct Outcomes {
    /// The empty tree (the load was not published).
    empty: u64,
    /// The whole new tree.
    complete: u64,
    /// The plain store's header page torn during the publication: the store
    /// refuses to open (page 0 corrupt), holding neither tree.
    torn_header: u64,
    crashed_in_load: u64,
    crashed_in_restart: u64,
}

/// Crashes a bulk load of `kind` at a seeded random page write or sync after
/// the store's creation (in the load, its batches, the sync of its pages or
/// the publication), sometimes crashes the restart too, and checks that the
/// store reopens with the empty tree or the whole new one.
fn crash_campaign(kind: Kind) {
    let mut seen = Outcomes::default();
    let cases = crash_cases();
    for case in 0..cases {
        let seed = case.wrapping_mul(0x9e37_79b9) ^ ((kind as u64) << 40);
        let loaders = LOADERS.len() as u64;
        let loader = LOADERS[(case % loaders) as usize];
        let tree = [IndexKind::RStar, IndexKind::RTree, IndexKind::Hilbert]
            [(case / loaders % 3) as usize];
        let p = params(tree, 8);
        let wp = tree == IndexKind::Hilbert;
        let data = items(200 + seed % 1300, seed);
        let oracle: BTreeMap<u64, Rect> = data.iter().copied().collect();
        let what = format!("{kind:?} case {case} {loader:?} {tree:?} n={}", data.len());
        // 1. The writes and syncs of a faultless run: creation, then the load.
        let counting = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            FaultPlan::none(),
        ));
        let store = kind
            .store(StoreOpen::Create, counting.clone(), None, wp)
            .unwrap();
        let (w0, s0) = (counting.writes_seen(), counting.stats().io.syncs);
        let mut t = load(loader, store, p, &data, 1.0).unwrap();
        t.store_mut().checkpoint().unwrap();
        let (w1, s1) = (counting.writes_seen(), counting.stats().io.syncs);
        drop(t);
        assert!(w1 > w0 && s1 > s0, "{what}");
        // 2. The same run, crashing after the creation.
        let plan = if case % 3 == 2 {
            FaultPlan::none()
                .crash_at_sync(s0 + 1 + seed % (s1 - s0))
                .with_seed(seed)
        } else {
            FaultPlan::crash_after_writes(w0 + 1 + seed % (w1 - w0)).with_seed(seed)
        };
        let dev = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, DEV_PAGES).unwrap(),
            plan.clone(),
        ));
        let store = kind
            .store(StoreOpen::Create, dev.clone(), None, wp)
            .unwrap();
        match load(loader, store, p, &data, 1.0).and_then(|mut t| t.store_mut().checkpoint()) {
            Ok(()) => dev.crash_now().unwrap(),
            Err(Error::Crashed(_)) => seen.crashed_in_load += 1,
            Err(e) => panic!("{what} ({plan:?}): unexpected error {e}"),
        }
        let mut durable = unwrap_faulty(dev);
        // 3. Sometimes crash during restart too (it writes to the log).
        if kind != Kind::Plain && case % 4 == 1 {
            let (after, err) = crash_in_restart(durable, seed ^ 0xabc, 8, |d| {
                kind.store(StoreOpen::Write, d, None, wp)
            });
            match err {
                None => {}
                Some(Error::Crashed(_)) => seen.crashed_in_restart += 1,
                Some(e) => panic!("{what}: restart: {e}"),
            }
            durable = after;
        }
        // 4. Reopen: the empty tree or the whole new one.
        let dev: Arc<dyn PageDevice> = Arc::new(durable);
        let store = match kind.store(StoreOpen::Write, dev.clone(), None, wp) {
            Ok(s) => s,
            Err(Error::Corrupt { page: Some(0), .. }) if kind == Kind::Plain => {
                seen.torn_header += 1;
                continue;
            }
            Err(e) => panic!("{what} ({plan:?}): reopen: {e}"),
        };
        let t = RTree::open(store, p).unwrap();
        if t.is_empty() {
            seen.empty += 1;
            assert_eq!(
                t.store().meta(),
                crate::store::TreeMeta::default(),
                "{what}"
            );
            check_against(&t, &BTreeMap::new(), &what);
            // The store takes the load again, over the pages of the lost one.
            let t = load(loader, t.into_store(), p, &data, 1.0).unwrap();
            check_against(&t, &oracle, &format!("{what}, loaded again"));
            drop(t);
            let t = RTree::open(kind.store(StoreOpen::Write, dev, None, wp).unwrap(), p).unwrap();
            check_against(&t, &oracle, &format!("{what}, loaded again and reopened"));
        } else {
            seen.complete += 1;
            check_against(&t, &oracle, &format!("{what} ({plan:?})"));
        }
    }
    CrashSummary {
        cases,
        crashed_in_run: seen.crashed_in_load,
        crashed_in_restart: seen.crashed_in_restart,
        pages_restored: 0,
        acknowledged: seen.complete,
    }
    .print(&format!("bulk load {kind:?}"));
    println!("bulk load {kind:?} outcomes: {seen:?}");
    if cases >= 30 {
        assert!(seen.empty > 0 && seen.complete > 0, "{kind:?}: {seen:?}");
        assert!(seen.crashed_in_load > 0, "{kind:?}: {seen:?}");
        if kind != Kind::Plain {
            assert!(seen.crashed_in_restart > 0, "{kind:?}: {seen:?}");
        }
    }
}

tests_for!(crash_campaign:
    crashed_plain_bulk_loads_leave_the_empty_tree_or_the_whole_new_one => Kind::Plain,
    crashed_efind_bulk_loads_leave_the_empty_tree_or_the_whole_new_one => Kind::Efind,
    crashed_fast_bulk_loads_leave_the_empty_tree_or_the_whole_new_one => Kind::Fast,
);
