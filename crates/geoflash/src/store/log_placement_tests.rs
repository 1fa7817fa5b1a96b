//! The one log placement API of the logged stores ([`LogPlacement`]): the
//! eFIND and FAST stores accept the same placements (the tail of the node
//! device, a separate log device), build them the same way from their
//! configurations, keep eFIND's earlier layout, and check the placement
//! given at open against the range recorded at creation; an eFIND store
//! with an automatic log capacity reopens (through [`Index::open`] too).
use std::sync::Arc;

use crate::geom::Rect;
use crate::index::{IndexKind, Predicate, RTree, TreeParams};
use crate::config::StoreSpec;
use crate::index_dir::{Index, IndexOptions};
use crate::manifest::Access;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::crash_harness::LoggedKind as Kind;
use crate::store::efind::{EfindConfig, EfindStore};
use crate::store::fast::FastConfig;
use crate::store::log::{cap_to_shared_device, LogLayout, LogPlacement};
use crate::store::{NodeStore, StoreOpen};
use crate::Result;

const PAGE: usize = 1024;
const NODE_PAGES: u64 = 1 << 15;
const LOG_BYTES: u64 = 256 << 10;

fn rect(i: u64) -> Rect {
    let x = (i * 7919 % 1000) as f64;
    let y = (i * 104_729 % 997) as f64;
    Rect::new(x, y, x + 3.0, y + 3.0).unwrap()
}

fn mem() -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(PAGE, NODE_PAGES).unwrap())
}

fn efind_cfg() -> EfindConfig {
    Kind::configs(16 << 10, false, LOG_BYTES).0
}

fn fast_cfg() -> FastConfig {
    Kind::configs(16 << 10, false, LOG_BYTES).1
}

/// Creates (`fresh`) or opens the store of `kind` on `dev` with its log at `log`.
fn store(
    kind: Kind,
    dev: &Arc<dyn PageDevice>,
    log: &LogPlacement,
    fresh: bool,
) -> Result<Box<dyn NodeStore>> {
    let how = StoreOpen::create_or_write(fresh);
    kind.store(how, dev.clone(), log.clone(), efind_cfg(), fast_cfg())
}

/// Builds a small tree through `kind` with its log at `log`, checkpoints,
/// reopens with the same placement and compares.
fn build_and_reopen(kind: Kind, dev: &Arc<dyn PageDevice>, log: &LogPlacement) {
    let p = TreeParams::new(IndexKind::RStar, 20);
    let mut t = RTree::create(store(kind, dev, log, true).unwrap(), p).unwrap();
    for i in 0..400 {
        t.insert(i, rect(i)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    let report = t.check().unwrap();
    drop(t);
    let t = RTree::open(store(kind, dev, log, false).unwrap(), p).unwrap();
    assert_eq!(t.check().unwrap(), report, "{kind:?} {log:?}");
    let all = Rect::new(-1.0, -1.0, 2000.0, 2000.0).unwrap();
    assert_eq!(t.query(all, Predicate::Intersects).unwrap().hits.len(), 400);
}

#[test]
fn both_stores_accept_the_same_placements() {
    for kind in Kind::BOTH {
        // The tail of the node device.
        let dev = mem();
        let pages = LogLayout::pages_for_capacity(LOG_BYTES, PAGE).unwrap();
        build_and_reopen(kind, &dev, &LogPlacement::tail_of(&dev, pages).unwrap());
        // The first pages of a separate device, and all of one.
        let (dev, log_dev) = (mem(), mem());
        build_and_reopen(kind, &dev, &LogPlacement::head_of(log_dev, pages).unwrap());
        let (dev, log_dev) = (mem(), mem());
        build_and_reopen(kind, &dev, &LogPlacement::whole(log_dev));
    }
}

#[test]
fn both_configurations_build_the_same_placement() {
    let (dev, log_dev) = (mem(), mem());
    for log_device in [None, Some(log_dev)] {
        for capacity in [0, LOG_BYTES] {
            let e = EfindConfig {
                log_capacity: capacity,
                ..efind_cfg()
            };
            let f = FastConfig {
                log_capacity: capacity,
                ..fast_cfg()
            };
            let a = e.log_placement(&dev, log_device.clone()).unwrap();
            let b = f.log_placement(&dev, log_device.clone()).unwrap();
            assert_eq!((a.first_page, a.pages), (b.first_page, b.pages));
            assert_eq!(a.same_device(&dev), log_device.is_none());
        }
    }
}

#[test]
fn efind_placements_keep_the_earlier_layout() {
    // Earlier releases put an eFIND log at the end of the node device
    // (an automatic capacity capped to a quarter of it), or at page 0 of
    // the log device (never capped).
    let (dev, log_dev) = (mem(), mem());
    for capacity in [0, LOG_BYTES] {
        let cfg = EfindConfig {
            log_capacity: capacity,
            ..efind_cfg()
        };
        let shared = match capacity {
            0 => cap_to_shared_device(cfg.resolved_log_capacity(), NODE_PAGES * PAGE as u64),
            c => c,
        };
        let pages = LogLayout::pages_for_capacity(shared, PAGE).unwrap();
        let tail = cfg.log_placement(&dev, None).unwrap();
        assert_eq!((tail.first_page, tail.pages), (NODE_PAGES - pages, pages));
        let pages = LogLayout::pages_for_capacity(cfg.resolved_log_capacity(), PAGE).unwrap();
        let head = cfg.log_placement(&dev, Some(log_dev.clone())).unwrap();
        assert_eq!((head.first_page, head.pages), (0, pages));
    }
}

#[test]
fn efind_refuses_a_placement_other_than_the_recorded_one() {
    let dev = mem();
    let log = efind_cfg().log_placement(&dev, None).unwrap();
    drop(EfindStore::create(dev.clone(), log.clone(), efind_cfg()).unwrap());
    // Another range of the node device, named in the message with the recorded one.
    let other = LogPlacement::tail_of(&dev, log.pages + 2).unwrap();
    let e = EfindStore::open(dev.clone(), other.clone(), efind_cfg())
        .unwrap_err()
        .to_string();
    let want = format!(
        "the store's log is at pages {}..{} but pages {}..{} were given",
        log.first_page,
        log.end(),
        other.first_page,
        other.end()
    );
    assert!(e.contains(&want), "{e}");
    // A separate device for a log on the node device.
    let e = EfindStore::open(dev.clone(), LogPlacement::whole(mem()), efind_cfg())
        .unwrap_err()
        .to_string();
    assert!(e.contains("a separate log device was given"), "{e}");
    // The node device for a log on a separate device.
    let (dev, log_dev) = (mem(), mem());
    let log = efind_cfg().log_placement(&dev, Some(log_dev)).unwrap();
    drop(EfindStore::create(dev.clone(), log, efind_cfg()).unwrap());
    let tail = efind_cfg().log_placement(&dev, None).unwrap();
    let e = EfindStore::open(dev, tail, efind_cfg())
        .unwrap_err()
        .to_string();
    assert!(e.contains("open it with that device"), "{e}");
}

#[test]
fn efind_with_an_automatic_capacity_reopens_with_another_buffer() {
    // The automatic capacity follows the buffer: a store created with one
    // buffer reopens with another, keeping the log it was created with
    // (a device of 1 GiB: a quarter of it caps neither capacity).
    let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 20).unwrap());
    let auto = |buffer_bytes: usize| EfindConfig {
        buffer_bytes,
        log_capacity: 0,
        log_format: crate::store::log::LogFormat::FirstImage,
        ..EfindConfig::default()
    };
    let (small, large) = (auto(1 << 20), auto(16 << 20));
    let created = small.log_placement(&dev, None).unwrap();
    let opened = large.log_placement(&dev, None).unwrap();
    assert_ne!(created.pages, opened.pages, "the capacities must differ");
    let p = TreeParams::new(IndexKind::RTree, 20);
    let mut t = RTree::create(
        EfindStore::create(dev.clone(), created.clone(), small).unwrap(),
        p,
    )
    .unwrap();
    for i in 0..200 {
        t.insert(i, rect(i)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    drop(t);
    let s = EfindStore::open(dev.clone(), opened, large).unwrap();
    assert_eq!(s.log_range(), (created.first_page, created.pages));
    assert_eq!(RTree::open(s, p).unwrap().check().unwrap().records, 200);
    // An explicit capacity must name the recorded range.
    let explicit = EfindConfig {
        log_capacity: 16 << 20,
        ..large
    };
    let log = explicit.log_placement(&dev, None).unwrap();
    let e = EfindStore::open(dev, log, explicit)
        .unwrap_err()
        .to_string();
    assert!(e.contains("but pages"), "{e}");
}

#[test]
fn efind_index_with_an_automatic_capacity_reopens() {
    // `log.dat` on a file device, the device's last pages on simulated flash.
    for device in ["file?direct=false", "flashsim:preset=seed-tc58"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("idx");
        let opts = IndexOptions {
            page_size: PAGE,
            device: device.parse().unwrap(),
            store: StoreSpec::efind(
                16 << 10,
                EfindConfig {
                    log_capacity: 0,
                    ..EfindConfig::default()
                },
            ),
            ..IndexOptions::default()
        };
        let mut idx = Index::create(&path, &opts).unwrap();
        for i in 0..300 {
            idx.insert(i, rect(i)).unwrap();
        }
        idx.close().unwrap();
        assert_eq!(
            Index::open(&path, Access::Read).unwrap().len(),
            300,
            "{device}"
        );
        let mut idx = Index::open(&path, Access::Write).unwrap();
        idx.insert(300, rect(300)).unwrap();
        idx.close().unwrap();
        assert_eq!(
            Index::open(&path, Access::Read).unwrap().len(),
            301,
            "{device}"
        );
    }
}

/// Issue 44: a log device too small for the automatic log of a large
/// buffer is refused with a message about the buffer (how large one fits),
/// not about a log the user never sized; an explicit capacity keeps the
/// log's own message.
#[test]
fn an_automatic_log_too_large_for_its_device_blames_the_buffer() {
    let nodes = mem();
    let small: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PAGE, 1 << 15).unwrap());
    // 1 GiB of buffer, an automatic log (capacity 0).
    let (efind, fast) = Kind::configs(1 << 30, false, 0);
    for (kind, placement) in [
        ("efind", efind.log_placement(&nodes, Some(small.clone()))),
        ("fast", fast.log_placement(&nodes, Some(small.clone()))),
    ] {
        let m = placement.err().unwrap().to_string();
        assert!(
            m.contains("the buffer (memory budget) is too large"),
            "{kind}: {m}"
        );
        // The largest buffer it names does fit.
        let at_most: u64 = m
            .split("at most ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse().ok())
            .unwrap();
        let fits = EfindConfig {
            buffer_bytes: at_most as usize,
            log_capacity: 0,
            ..EfindConfig::default()
        };
        fits.log_placement(&nodes, Some(small.clone())).unwrap();
    }
    let explicit = EfindConfig {
        log_capacity: 1 << 30,
        ..EfindConfig::default()
    }
    .log_placement(&nodes, Some(small));
    let m = explicit.err().unwrap().to_string();
    assert!(m.contains("a log of 1073741824 bytes needs"), "{m}");
}
