//! Crashes of a FOR-tree checkpoint written in parts: a flush of more than
//! the tree's part size (in production [`FLUSH_PART_BYTES`], 8 MiB) is
//! written in several store operations, and on the plain store the
//! rollback journal must return whatever they wrote to the last
//! acknowledged checkpoint. The crash campaigns' budgets never reach
//! 8 MiB, so here the part size is lowered to a few pages
//! ([`Fortree::set_flush_part_bytes`]) and a tree of a few thousand boxes
//! is crashed at every sync of a checkpoint written in dozens of parts,
//! and at random page writes of it (unsynced writes kept, dropped or
//! torn). After recovery the tree answers exactly as at the last
//! acknowledged checkpoint (or, for a crash inside the journal's commit,
//! as at the one under way).
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::tests::rects;
use super::*;
use crate::index::query::Predicate;
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::journal::{journal_capacity, JournalOpen, JournaledDevice};
use crate::storage::mem::MemDevice;
use crate::storage::{DeviceExt, DeviceGeometry, PageDevice};
use crate::store::{PlainConfig, PlainStore};
use crate::testenv::crash_cases;

/// Page size: M = 24 without payload, so a few thousand boxes make some
/// 200 nodes.
const PS: usize = 1024;
/// Node pages of the device (the rest is the journal).
const NODE_PAGES: u64 = 1024;
/// The part size of the test: each part holds about seven nodes.
const PART_BYTES: usize = 16 * 1024;
/// Boxes of the first checkpoint.
const FIRST: u64 = 3000;
/// Boxes inserted, and deleted, after it.
const CHANGED: u64 = 600;

/// Pages `first .. first + pages` of another device (the node pages and
/// the journal on one crashing device, which loses their unsynced writes
/// together), counting the write batches sent to it.
struct Region {
    dev: Arc<dyn PageDevice>,
    first: PageId,
    pages: u64,
    batches: Arc<AtomicU64>,
}

impl Region {
    /// The ids of `pages` on the device below.
    fn ids(&self, pages: &[PageId]) -> Vec<PageId> {
        pages.iter().map(|p| p + self.first).collect()
    }
}

impl PageDevice for Region {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(PS, self.pages)
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        self.geometry().check_batch(pages, buf.len())?;
        self.dev.read_batch(&self.ids(pages), buf)
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        self.geometry().check_batch(pages, data.len())?;
        self.dev.write_batch(&self.ids(pages), data)?;
        self.batches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        self.dev.sync()
    }
    fn trim(&self, pages: &[PageId]) -> Result<()> {
        self.dev.trim(&self.ids(pages))
    }
    fn describe(&self) -> String {
        format!("region {}+{}", self.first, self.pages)
    }
}

/// A region counts nothing of its own.
impl DeviceExt for Region {}

/// Every page of the device: the node pages, then their journal.
fn capacity() -> u64 {
    NODE_PAGES + journal_capacity(NODE_PAGES, PS)
}

/// The journaled device over `dev` (its node pages and its journal, the
/// node region counting its write batches in `batches`), opened for
/// writing: what the last session left uncommitted is rolled back.
fn journaled(dev: Arc<dyn PageDevice>, batches: &Arc<AtomicU64>) -> Result<Arc<JournaledDevice>> {
    let nodes = Region {
        dev: dev.clone(),
        first: 0,
        pages: NODE_PAGES,
        batches: batches.clone(),
    };
    let journal = Region {
        dev,
        first: NODE_PAGES,
        pages: capacity() - NODE_PAGES,
        batches: Arc::new(AtomicU64::new(0)),
    };
    let open = JournalOpen::Write { fresh_horizon: 0 };
    let (jdev, _) = JournaledDevice::open(Arc::new(nodes), Arc::new(journal), open)?;
    Ok(Arc::new(jdev))
}

/// The plain store without buffer, as an index directory gives the FOR-tree.
fn plain_config() -> PlainConfig {
    PlainConfig {
        buffer_bytes: 0,
        ..PlainConfig::default()
    }
}

/// A buffer that holds every change between the checkpoints, so that the
/// second checkpoint's flush writes them all.
fn config() -> FortreeConfig {
    FortreeConfig {
        buffer_bytes: 4 << 20,
        ..FortreeConfig::for_page_size(PS).unwrap()
    }
}

/// The records by id, each rectangle bit for bit.
type State = BTreeMap<u64, [u64; 4]>;

/// What a checkpointed tree answers: its records (a query of the whole
/// plane, no id twice), and its size, root, height and ONT.
#[derive(Debug, Clone, PartialEq)]
struct Answers {
    records: State,
    shape: (u64, Option<PageId>, u16, BTreeMap<PageId, OntEntry>),
}

/// The answers of `t`, after its own check of every invariant.
fn answers<S: NodeStore>(t: &mut Fortree<S>) -> Result<Answers> {
    t.check()?;
    let all = Rect::new(-1e9, -1e9, 1e9, 1e9)?;
    let hits = t.query(all, Predicate::Intersects)?.hits;
    let n = hits.len();
    let records: State = hits.iter().map(|h| (h.id, h.rect.to_bits())).collect();
    assert_eq!(records.len(), n, "an object appears twice in the tree");
    let shape = (t.len(), t.root(), t.height(), t.ont().clone());
    Ok(Answers { records, shape })
}

/// The first checkpoint on a new device: [`FIRST`] boxes, written in
/// parts of [`PART_BYTES`]. Returns the device and the tree's answers.
fn first_checkpoint() -> (MemDevice, Answers) {
    let dev = Arc::new(MemDevice::new(PS, capacity()).unwrap());
    let jdev = journaled(dev.clone(), &Arc::new(AtomicU64::new(0))).unwrap();
    let store = PlainStore::create(jdev.clone(), plain_config()).unwrap();
    let mut t = Fortree::create(store, config()).unwrap();
    t.set_flush_part_bytes(PART_BYTES);
    for (id, rect) in rects(FIRST, 21) {
        t.insert(id, rect).unwrap();
    }
    t.checkpoint().unwrap();
    jdev.commit().unwrap();
    let a = answers(&mut t).unwrap();
    drop((t, jdev));
    match Arc::try_unwrap(dev) {
        Ok(d) => (d, a),
        Err(_) => panic!("the device is still held"),
    }
}

/// How far a run of the second session got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// It failed before the checkpoint (reopening, inserting, deleting).
    Ops,
    /// The FOR-tree's checkpoint failed (its flush in parts, its head
    /// page, the store's checkpoint): nothing of it was committed.
    Checkpoint,
    /// The journal's commit failed: the checkpoint stands or not.
    Commit,
    /// Everything returned `Ok`: the second checkpoint is acknowledged.
    Done,
}

/// What the device saw of a run's checkpoint (the tree's and the journal's
/// commit): its syncs, page writes and node write batches, each before and
/// after it.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    syncs: (u64, u64),
    writes: (u64, u64),
    batches: (u64, u64),
}

/// The second session on `dev`: reopens the tree (rolling back what the
/// last session left), deletes every fifth box of the first checkpoint,
/// inserts [`CHANGED`] new ones, and checkpoints in parts of
/// [`PART_BYTES`]. Returns how far it got, the device's counts around the
/// checkpoint, and the node write batches sent before it stopped.
fn second_session(dev: &Arc<FaultyDevice<MemDevice>>) -> (Reached, Window, u64) {
    let batches = Arc::new(AtomicU64::new(0));
    let sent = || batches.load(Ordering::Relaxed);
    let mut w = Window::default();
    let opened = journaled(dev.clone(), &batches).and_then(|jdev| {
        let store = PlainStore::open(jdev.clone(), plain_config())?;
        Ok((jdev, Fortree::open(store, config())?))
    });
    let Ok((jdev, mut t)) = opened else {
        return (Reached::Ops, w, sent());
    };
    t.set_flush_part_bytes(PART_BYTES);
    let mut changed = || -> Result<()> {
        for (id, rect) in rects(FIRST, 21).into_iter().step_by(5) {
            t.delete(id, rect)?;
        }
        for (id, rect) in rects(CHANGED, 22) {
            t.insert(id + (1 << 32), rect)?;
        }
        Ok(())
    };
    if changed().is_err() {
        return (Reached::Ops, w, sent());
    }
    let io = || dev.stats().io;
    (w.syncs.0, w.writes.0, w.batches.0) = (io().syncs, dev.writes_seen(), sent());
    let reached = if t.checkpoint().is_err() {
        Reached::Checkpoint
    } else if jdev.commit().is_err() {
        Reached::Commit
    } else {
        Reached::Done
    };
    (w.syncs.1, w.writes.1, w.batches.1) = (io().syncs, dev.writes_seen(), sent());
    (reached, w, sent())
}

/// The tree recovered from `dev` after the crash: the journal rolled
/// back, the store and the tree reopened, checked and queried.
fn recovered(dev: Arc<FaultyDevice<MemDevice>>) -> Result<Answers> {
    if !dev.is_crashed() {
        dev.crash_now()?;
    }
    let mem = match Arc::try_unwrap(dev) {
        Ok(d) => d.into_inner(),
        Err(_) => panic!("the device is still held"),
    };
    let jdev = journaled(Arc::new(mem), &Arc::new(AtomicU64::new(0)))?;
    let store = PlainStore::open(jdev, plain_config())?;
    let mut t = Fortree::open(store, config())?;
    answers(&mut t)
}

/// A checkpoint of a FOR-tree written in parts (here dozens: a part size
/// of 16 KiB, some 200 changed nodes), crashed at each of its syncs and
/// at random page writes of it (`GEOFLASH_CRASH_CASES` of them, the
/// unsynced writes kept, dropped or torn): after the journal's rollback
/// the tree is exactly the first checkpoint's (its records bit for bit,
/// size, root, height and ONT, every invariant checked), unless the crash
/// fell in the journal's commit, which may have made the second one
/// durable, and exactly the second one's when every call returned `Ok`.
/// The crashes at syncs fall between parts: each part's before-images are
/// synced before its pages are written, so a crash at a sync leaves the
/// earlier parts on the device.
#[test]
fn a_fortree_checkpoint_in_parts_crashed_between_them_recovers_the_last_one() {
    let (base, first) = first_checkpoint();
    let dry = Arc::new(FaultyDevice::new(base.copied(), FaultPlan::none()));
    let (reached, w, _) = second_session(&dry);
    assert_eq!(reached, Reached::Done);
    let second = recovered(dry).unwrap();
    assert_ne!(second.records, first.records);
    // The tree's checkpoint sends its parts, its head page and the
    // store's header: without the lowered part size, three batches.
    let parts = w.batches.1 - w.batches.0 - 2;
    assert!(parts >= 10, "the checkpoint was written in {parts} parts");
    assert!(w.syncs.1 - w.syncs.0 >= parts, "syncs {:?}", w.syncs);
    let (mut between, mut in_commit, mut newer) = (0u64, 0u64, 0u64);
    let sync_cases =
        (w.syncs.0 + 1..=w.syncs.1).map(|s| FaultPlan::none().crash_at_sync(s).with_seed(s));
    let write_cases = (0..crash_cases()).map(|case| {
        let seed = case.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xf0e;
        let n = w.writes.0 + 1 + seed % (w.writes.1 - w.writes.0);
        FaultPlan::crash_after_writes(n).with_seed(seed)
    });
    for plan in sync_cases.chain(write_cases) {
        let dev = Arc::new(FaultyDevice::new(base.copied(), plan.clone()));
        let (reached, _, sent) = second_session(&dev);
        assert!(dev.is_crashed(), "{plan:?}: no crash in the checkpoint");
        let at_sync = plan.crash_at_sync.is_some();
        if at_sync && sent > w.batches.0 && sent < w.batches.0 + parts {
            between += 1;
        }
        let got = recovered(dev).unwrap_or_else(|e| panic!("{plan:?} ({reached:?}): {e}"));
        let want = match reached {
            Reached::Ops | Reached::Checkpoint => &first,
            Reached::Commit if got == second => {
                newer += 1;
                &second
            }
            Reached::Commit => &first,
            Reached::Done => &second,
        };
        in_commit += u64::from(reached == Reached::Commit);
        assert!(
            got == *want,
            "{plan:?} ({reached:?}): recovered {} records (size, root, height {:?}); \
             the checkpoint held {} ({:?})",
            got.records.len(),
            (got.shape.0, got.shape.1, got.shape.2),
            want.records.len(),
            (want.shape.0, want.shape.1, want.shape.2),
        );
    }
    println!(
        "crash campaign fortree checkpoint in parts: {parts} parts, {} syncs and {} random writes crashed, \
         {between} syncs between parts, {in_commit} in the journal's commit ({newer} of them kept it)",
        w.syncs.1 - w.syncs.0,
        crash_cases()
    );
    // Every part after the first that overwrites a committed page syncs
    // its before-images first (a part of new pages only needs none).
    assert!(
        between + 3 >= parts,
        "{between} crashes between {parts} parts"
    );
}
