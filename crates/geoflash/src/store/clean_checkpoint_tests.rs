//! Clean checkpoints of the logged stores (eFIND and FAST), written once for
//! both: after a checkpoint (which a build, `Index::checkpoint`, `close` and
//! Ctrl-C all end with) the next open reads the log's two superblock slots
//! and at most two pages of its empty live region, and replays nothing; after
//! a crash that follows a checkpoint, restart reads only what the log received
//! since and recovers every acknowledged operation.
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::geom::Rect;
use crate::index::{IndexKind, Predicate, RTree, TreeParams};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::efind::{EfindConfig, EfindStore};
use crate::store::log::{Durability, LogPlacement};
use crate::store::{FastConfig, FastStore, NodeStore};
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

/// The two logged stores, each with its log on a device of its own.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Efind,
    Fast,
}

impl Kind {
    fn create(
        self,
        nodes: Arc<dyn PageDevice>,
        log: Arc<dyn PageDevice>,
        d: Durability,
    ) -> Result<Store> {
        // Both stores take the same placement: the whole log device.
        let log = LogPlacement::whole(log);
        Ok(match self {
            Kind::Efind => Box::new(EfindStore::create(nodes, log, self.efind(d))?),
            Kind::Fast => Box::new(FastStore::create(nodes, log, self.fast(d))?),
        })
    }

    fn open(
        self,
        nodes: Arc<dyn PageDevice>,
        log: Arc<dyn PageDevice>,
        d: Durability,
    ) -> Result<Store> {
        let log = LogPlacement::whole(log);
        Ok(match self {
            Kind::Efind => Box::new(EfindStore::open(nodes, log, self.efind(d))?),
            Kind::Fast => Box::new(FastStore::open(nodes, log, self.fast(d))?),
        })
    }

    fn open_read_only(self, nodes: Arc<dyn PageDevice>, log: Arc<dyn PageDevice>) -> Result<Store> {
        let d = Durability::default();
        let log = LogPlacement::whole(log);
        Ok(match self {
            Kind::Efind => Box::new(EfindStore::open_read_only(nodes, log, self.efind(d))?),
            Kind::Fast => Box::new(FastStore::open_read_only(nodes, log, self.fast(d))?),
        })
    }

    fn efind(self, durability: Durability) -> EfindConfig {
        EfindConfig {
            buffer_bytes: 64 << 10,
            durability,
            log_capacity: (LOG_PAGES / 2 - 2) * (PAGE as u64 - 40),
            ..EfindConfig::default()
        }
    }

    fn fast(self, durability: Durability) -> FastConfig {
        FastConfig {
            buffer_bytes: 64 << 10,
            durability,
            ..FastConfig::default()
        }
    }
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
    let everything = Rect::new(-1.0, -1.0, 2000.0, 2000.0).unwrap();
    t.query(everything, Predicate::Intersects)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.id)
        .collect()
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
        kind.create(nodes.clone(), log.clone(), d).unwrap(),
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
            kind.open_read_only(nodes.clone(), log.clone()).unwrap()
        } else {
            kind.open(nodes.clone(), log.clone(), d).unwrap()
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

#[test]
fn efind_open_after_checkpoint_reads_almost_nothing() {
    open_after_checkpoint_reads_almost_nothing(Kind::Efind);
}

#[test]
fn fast_open_after_checkpoint_reads_almost_nothing() {
    open_after_checkpoint_reads_almost_nothing(Kind::Fast);
}

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
        let store = kind
            .create(nodes.clone(), log.clone(), Durability::default())
            .unwrap();
        let mut t = RTree::create(store, params()).unwrap();
        for i in 0..OBJECTS / 2 {
            t.insert(i, rect(i)).unwrap();
        }
        t.store_mut().checkpoint().unwrap();
        drop(t);
        let mut t =
            RTree::open(kind.open(nodes.clone(), log.clone(), d).unwrap(), params()).unwrap();
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
        let store = kind.open(nodes, log.clone(), d).unwrap();
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

#[test]
fn efind_crash_after_checkpoint_recovers_everything_acknowledged() {
    crash_after_checkpoint_recovers_everything_acknowledged(Kind::Efind);
}

#[test]
fn fast_crash_after_checkpoint_recovers_everything_acknowledged() {
    crash_after_checkpoint_recovers_everything_acknowledged(Kind::Fast);
}
