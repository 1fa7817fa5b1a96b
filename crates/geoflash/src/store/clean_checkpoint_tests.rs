//! Clean checkpoints of the logged stores (eFIND and FAST), written once for
//! both: after a checkpoint (which a build, `Index::checkpoint`, `close` and
//! Ctrl-C all end with) the next open reads the log's two superblock slots
//! and at most two pages of its empty live region, and replays nothing; after
//! a crash that follows a checkpoint, restart reads only what the log received
//! since and recovers every acknowledged operation.
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::geom::Rect;
use crate::index::{IndexKind, RTree, TreeParams};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::crash_harness::LoggedKind as Kind;
use crate::store::efind::EfindConfig;
use crate::store::fast::tests::ids_in;
use crate::store::log::{Durability, LogPlacement};
use crate::store::{FastConfig, NodeStore, StoreOpen};
use crate::Result;

const PAGE: usize = 4096;
const NODE_PAGES: u64 = 4096;
/// Log pages: large enough that a build of [`OBJECTS`] objects leaves
/// hundreds of log pages between compactions.
const LOG_PAGES: u64 = 1024;
/// Superblock slots read by every open.
const SUPERBLOCK_READS: u64 = 2;
const OBJECTS: u64 = 3000;

type Store = Box<dyn NodeStore>;

/// The store of `kind` on `nodes` as `how` says, its log the whole of
/// `log` (a device of its own; both stores take the same placement).
fn open_store(
    kind: Kind,
    how: StoreOpen,
    nodes: Arc<dyn PageDevice>,
    log: Arc<dyn PageDevice>,
    durability: Durability,
) -> Result<Store> {
    let efind = EfindConfig {
        buffer_bytes: 64 << 10,
        durability,
        log_capacity: (LOG_PAGES / 2 - 2) * (PAGE as u64 - 40),
        ..EfindConfig::default()
    };
    let fast = FastConfig {
        buffer_bytes: 64 << 10,
        durability,
        ..FastConfig::default()
    };
    kind.store(how, nodes, LogPlacement::whole(log), efind, fast)
}

fn rect(i: u64) -> Rect {
    let x = (i * 7919 % 1000) as f64;
    let y = (i * 104_729 % 1000) as f64;
    Rect::new(x, y, x + 1.5, y + 2.5).unwrap()
}

fn params() -> TreeParams {
    TreeParams::new(IndexKind::RStar, 50)
}

fn all_ids(t: &RTree<Store>) -> BTreeSet<u64> {
    ids_in(t, Rect::new(-1.0, -1.0, 2000.0, 2000.0).unwrap())
}

fn devices() -> (Arc<dyn PageDevice>, Arc<dyn PageDevice>) {
    (
        Arc::new(MemDevice::new(PAGE, NODE_PAGES).unwrap()),
        Arc::new(MemDevice::new(PAGE, LOG_PAGES).unwrap()),
    )
}

/// Builds `OBJECTS` objects by insertion, checkpoints, and checks what each
/// later open (for writing, then read-only, then for writing again) reads
/// from the log device.
fn open_after_checkpoint_reads_almost_nothing(kind: Kind) {
    let (nodes, log) = devices();
    let d = Durability::default();
    let mut t = RTree::create(
        open_store(kind, StoreOpen::Create, nodes.clone(), log.clone(), d).unwrap(),
        params(),
    )
    .unwrap();
    for i in 0..OBJECTS {
        t.insert(i, rect(i)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    drop(t);
    let want: BTreeSet<u64> = (0..OBJECTS).collect();
    for read_only in [false, true, false] {
        let before = log.stats().io.pages_read;
        let store = if read_only {
            open_store(
                kind,
                StoreOpen::Read,
                nodes.clone(),
                log.clone(),
                Durability::default(),
            )
            .unwrap()
        } else {
            open_store(kind, StoreOpen::Write, nodes.clone(), log.clone(), d).unwrap()
        };
        let read = log.stats().io.pages_read - before;
        assert!(
            read <= SUPERBLOCK_READS + 2,
            "{kind:?} (read-only {read_only}): open read {read} log pages"
        );
        let t = RTree::open(store, params()).unwrap();
        assert_eq!(all_ids(&t), want, "{kind:?}");
        // A clean open leaves the log clean: close without a checkpoint.
    }
}

tests_for!(open_after_checkpoint_reads_almost_nothing:
    efind_open_after_checkpoint_reads_almost_nothing => Kind::Efind,
    fast_open_after_checkpoint_reads_almost_nothing => Kind::Fast,
);

/// Builds, checkpoints, then runs `extra` acknowledged inserts (durability
/// `sync`) and crashes both devices (unsynced writes kept, dropped or torn).
/// Restart must read no more than about the log pages written since the
/// checkpoint (the superblock, then batches doubling from one page, and one
/// probe past the end) and hold every object.
fn crash_after_checkpoint_recovers_everything_acknowledged(kind: Kind) {
    for seed in 0..4u64 {
        let nodes = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, NODE_PAGES).unwrap(),
            FaultPlan::none().with_seed(seed),
        ));
        let log = Arc::new(FaultyDevice::new(
            MemDevice::new(PAGE, LOG_PAGES).unwrap(),
            FaultPlan::none().with_seed(seed + 100),
        ));
        let d = Durability::Sync;
        let store = open_store(
            kind,
            StoreOpen::Create,
            nodes.clone(),
            log.clone(),
            Durability::default(),
        )
        .unwrap();
        let mut t = RTree::create(store, params()).unwrap();
        for i in 0..OBJECTS / 2 {
            t.insert(i, rect(i)).unwrap();
        }
        t.store_mut().checkpoint().unwrap();
        drop(t);
        let mut t = RTree::open(
            open_store(kind, StoreOpen::Write, nodes.clone(), log.clone(), d).unwrap(),
            params(),
        )
        .unwrap();
        let extra = 20 + seed * 5;
        let written_before = log.stats().io.pages_written;
        for i in OBJECTS / 2..OBJECTS / 2 + extra {
            t.insert(i, rect(i)).unwrap();
        }
        let written = log.stats().io.pages_written - written_before;
        nodes.crash_now().unwrap();
        log.crash_now().unwrap();
        drop(t);
        let nodes: Arc<dyn PageDevice> = Arc::new(Arc::into_inner(nodes).unwrap().into_inner());
        let log: Arc<dyn PageDevice> = Arc::new(Arc::into_inner(log).unwrap().into_inner());
        let before = log.stats().io.pages_read;
        let store = open_store(kind, StoreOpen::Write, nodes, log.clone(), d).unwrap();
        let read = log.stats().io.pages_read - before;
        // The scan reads in batches doubling from one page (so at most twice
        // what it needs) and probes one page past the end.
        assert!(
            read <= SUPERBLOCK_READS + 2 * (written + 1) + 1,
            "{kind:?} seed {seed}: restart read {read} log pages, {written} written since the checkpoint"
        );
        let t = RTree::open(store, params()).unwrap();
        let want: BTreeSet<u64> = (0..OBJECTS / 2 + extra).collect();
        assert_eq!(all_ids(&t), want, "{kind:?} seed {seed}");
        t.check().unwrap();
    }
}

tests_for!(crash_after_checkpoint_recovers_everything_acknowledged:
    efind_crash_after_checkpoint_recovers_everything_acknowledged => Kind::Efind,
    fast_crash_after_checkpoint_recovers_everything_acknowledged => Kind::Fast,
);
