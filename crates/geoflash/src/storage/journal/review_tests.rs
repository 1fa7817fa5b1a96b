//! Review of the rollback journal (durability and damage): tests of what
//! the module's promises say, on memory devices and, for the journal's
//! place in an index directory, on files.
//!
//! - The node pages and the journal on two devices that lose their
//!   unsynced writes at the same crash (as `pages.dat` and `journal.dat`
//!   do), crashes at any write or sync of either, during recovery too: a
//!   reader and the writer's recovery give exactly a commit.
//! - Tests whose comment begins "Defect" show defects the review found
//!   (see each one's comment); each failed on the code before its fix.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{config, page, params, read, script, state_of, write_open, Op, State, PS};
use super::*;
use crate::geom::Rect;
use crate::index::{Predicate, RTree};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::storage::{DeviceExt, DeviceGeometry, PageDevice, PageId};
use crate::store::plain::PlainStore;
use crate::store::NodeStore;
use crate::testenv::crash_cases;

const NODE_PAGES: u64 = 3000;
const JOURNAL_PAGES: u64 = 3000;

/// A device that counts its syncs and, when it or its partner crashed,
/// crashes the other one too: two files of one machine that lose their
/// unsynced writes at the same power failure.
struct Linked {
    me: Arc<FaultyDevice<MemDevice>>,
    other: Arc<FaultyDevice<MemDevice>>,
    syncs: Arc<AtomicU64>,
}

impl Linked {
    fn guard<T>(&self, f: impl FnOnce() -> crate::Result<T>) -> crate::Result<T> {
        if self.other.is_crashed() {
            self.me.crash_now()?;
        }
        let r = f();
        if self.me.is_crashed() {
            self.other.crash_now()?;
        }
        r
    }
}

impl PageDevice for Linked {
    fn geometry(&self) -> DeviceGeometry {
        self.me.geometry()
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> crate::Result<()> {
        self.guard(|| self.me.read_batch(pages, buf))
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> crate::Result<()> {
        self.guard(|| self.me.write_batch(pages, data))
    }
    fn sync(&self) -> crate::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.guard(|| self.me.sync())
    }
    fn trim(&self, pages: &[PageId]) -> crate::Result<()> {
        self.guard(|| self.me.trim(pages))
    }
    fn describe(&self) -> String {
        format!("linked({})", self.me.describe())
    }
}

/// Counts nothing of its own.
impl DeviceExt for Linked {}

/// The node device and the journal device of one "machine": two faulty
/// memory devices with their plans, linked.
struct Machine {
    nodes: Arc<FaultyDevice<MemDevice>>,
    journal: Arc<FaultyDevice<MemDevice>>,
    node_syncs: Arc<AtomicU64>,
    journal_syncs: Arc<AtomicU64>,
}

impl Machine {
    fn new(
        nodes: MemDevice,
        journal: MemDevice,
        node_plan: FaultPlan,
        journal_plan: FaultPlan,
    ) -> Machine {
        Machine {
            nodes: Arc::new(FaultyDevice::new(nodes, node_plan)),
            journal: Arc::new(FaultyDevice::new(journal, journal_plan)),
            node_syncs: Arc::new(AtomicU64::new(0)),
            journal_syncs: Arc::new(AtomicU64::new(0)),
        }
    }

    fn fresh(node_plan: FaultPlan, journal_plan: FaultPlan) -> Machine {
        Machine::new(
            MemDevice::new(PS, NODE_PAGES).unwrap(),
            MemDevice::new(PS, JOURNAL_PAGES).unwrap(),
            node_plan,
            journal_plan,
        )
    }

    /// The two linked devices (nodes, journal).
    fn devices(&self) -> (Arc<dyn PageDevice>, Arc<dyn PageDevice>) {
        let nodes = Linked {
            me: self.nodes.clone(),
            other: self.journal.clone(),
            syncs: self.node_syncs.clone(),
        };
        let journal = Linked {
            me: self.journal.clone(),
            other: self.nodes.clone(),
            syncs: self.journal_syncs.clone(),
        };
        (Arc::new(nodes), Arc::new(journal))
    }

    fn crashed(&self) -> bool {
        self.nodes.is_crashed() || self.journal.is_crashed()
    }

    /// The durable media after a power failure now (or the crash that hit).
    fn power_off(self) -> (MemDevice, MemDevice) {
        self.nodes.crash_now().unwrap();
        self.journal.crash_now().unwrap();
        let unwrap = |d: Arc<FaultyDevice<MemDevice>>| match Arc::try_unwrap(d) {
            Ok(d) => d.into_inner(),
            Err(_) => panic!("a device is still held"),
        };
        (unwrap(self.nodes), unwrap(self.journal))
    }
}

/// Runs `ops` on a new journaled plain store over `nodes` and `journal`
/// until the first error: the state of the last acknowledged commit and
/// that of the commit under way when one failed.
fn run(
    nodes: Arc<dyn PageDevice>,
    journal: Arc<dyn PageDevice>,
    ops: &[Op],
) -> (State, Option<State>) {
    let mut acked = State::new();
    let mut state = State::new();
    let Ok((jdev, _)) = JournaledDevice::open(nodes, journal, write_open()) else {
        return (acked, None);
    };
    let jdev = Arc::new(jdev);
    let created = PlainStore::create(jdev.clone(), config())
        .and_then(|s| RTree::create(s, params()))
        .and_then(|mut t| {
            t.store_mut().checkpoint()?;
            jdev.commit()?;
            Ok(t)
        });
    let Ok(mut t) = created else {
        return (acked, None);
    };
    for op in ops {
        let r = match op {
            Op::Insert(id, r) => {
                state.insert(*id, r.to_bits());
                t.insert(*id, *r)
            }
            Op::Delete(id, r) => {
                state.remove(id);
                t.delete(*id, *r)
            }
            Op::Commit => t.store_mut().checkpoint().and_then(|()| jdev.commit()),
        };
        match (r, op) {
            (Ok(()), Op::Commit) => acked = state.clone(),
            (Ok(()), _) => {}
            (Err(_), Op::Commit) => return (acked, Some(state)),
            (Err(_), _) => return (acked, None),
        }
    }
    (acked, None)
}

/// The tree a journal opened `how` over `nodes` and `journal` gives
/// (`None`: no store, as before the first commit), checked.
fn recovered(
    nodes: Arc<dyn PageDevice>,
    journal: Arc<dyn PageDevice>,
    how: JournalOpen,
) -> crate::Result<Option<State>> {
    let (jdev, _) = JournaledDevice::open(nodes, journal, how)?;
    let store = match PlainStore::open(Arc::new(jdev), config()) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    let t = RTree::open(store, params())?;
    t.check()?;
    Ok(Some(state_of(&t)))
}

/// One crash plan for a campaign's case: a crash at a write or a sync of
/// the node device or of the journal (`writes` and `syncs` of each, from
/// a run without faults).
fn plans(case: u64, seed: u64, writes: (u64, u64), syncs: (u64, u64)) -> (FaultPlan, FaultPlan) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let at_sync = case % 3 == 2;
    let on_journal = rng.gen_bool(0.5);
    let (w, s) = if on_journal {
        (writes.1, syncs.1)
    } else {
        (writes.0, syncs.0)
    };
    let crashing = if at_sync {
        FaultPlan::none()
            .with_seed(seed)
            .crash_at_sync(rng.gen_range(1..=s.max(1)))
    } else {
        FaultPlan::random_crash(seed, w.max(1))
    };
    let quiet = FaultPlan::none().with_seed(seed ^ 0xabcd);
    if on_journal {
        (quiet, crashing)
    } else {
        (crashing, quiet)
    }
}

/// The node pages and the journal on two devices that lose their unsynced
/// writes together at a crash (at a random write or sync of either, kept,
/// dropped or torn), then a second crash at a random write or sync of the
/// writer's recovery: a reader before the recovery, the interrupted
/// recovery's reader and the recovery run again all give exactly the last
/// acknowledged commit or the one under way. (The crash campaign of
/// `tests.rs` keeps both on one device, whose every sync makes the other's
/// writes durable too.)
#[test]
fn two_files_crashing_together_and_an_interrupted_recovery_give_exactly_a_commit() {
    let mut rolled_back = 0u64;
    let mut recoveries_cut = 0u64;
    for case in 0..crash_cases() {
        let seed = case.wrapping_mul(0x9e37_79b9) ^ 0xfeed;
        let ops = script(seed, 150 + (case % 4) as usize * 50);
        let counting = Machine::fresh(FaultPlan::none(), FaultPlan::none());
        let (n, j) = counting.devices();
        run(n, j, &ops);
        let writes = (counting.nodes.writes_seen(), counting.journal.writes_seen());
        let syncs = (
            counting.node_syncs.load(Ordering::Relaxed),
            counting.journal_syncs.load(Ordering::Relaxed),
        );
        let (node_plan, journal_plan) = plans(case, seed, writes, syncs);
        let what = format!("case {case} (nodes {node_plan:?}, journal {journal_plan:?})");
        let machine = Machine::fresh(node_plan, journal_plan);
        let (n, j) = machine.devices();
        let (acked, in_flight) = run(n, j, &ops);
        let (nodes, journal) = machine.power_off();
        let fits = |got: &Option<State>| match got {
            None => acked.is_empty() && in_flight.is_none(),
            Some(s) => *s == acked || in_flight.as_ref() == Some(s),
        };
        // A reader first: it writes nothing and sees a commit.
        let before = (nodes.copied(), journal.copied());
        let read = recovered(
            Arc::new(nodes.copied()),
            Arc::new(journal.copied()),
            JournalOpen::Read,
        )
        .unwrap_or_else(|e| panic!("{what}: reader: {e}"));
        assert!(
            fits(&read),
            "{what}: the reader saw {:?} objects, the last commit held {}",
            read.map(|s| s.len()),
            acked.len()
        );
        // The writer's recovery, cut by a crash at a random write or sync.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1234);
        let cut = if rng.gen_bool(0.5) {
            FaultPlan::random_crash(seed ^ 7, 40)
        } else {
            FaultPlan::none()
                .with_seed(seed ^ 7)
                .crash_at_sync(rng.gen_range(1..=4))
        };
        let (np, jp) = if rng.gen_bool(0.5) {
            (cut, FaultPlan::none().with_seed(seed ^ 9))
        } else {
            (FaultPlan::none().with_seed(seed ^ 9), cut)
        };
        let again = Machine::new(before.0, before.1, np, jp);
        let (n, j) = again.devices();
        let first = JournaledDevice::open(n, j, write_open());
        if let Ok((_, r)) = &first {
            rolled_back += r.pages_restored;
        }
        drop(first);
        if again.crashed() {
            recoveries_cut += 1;
        }
        let (nodes, journal) = again.power_off();
        let cut_read = recovered(
            Arc::new(nodes.copied()),
            Arc::new(journal.copied()),
            JournalOpen::Read,
        )
        .unwrap_or_else(|e| panic!("{what}: reader after a cut recovery: {e}"));
        assert_eq!(cut_read, read, "{what}: a reader after a cut recovery");
        let written = recovered(Arc::new(nodes), Arc::new(journal), write_open())
            .unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
        assert_eq!(
            written, read,
            "{what}: the writer's recovery and the reader"
        );
    }
    println!(
        "two-file journal campaign: {} cases, {rolled_back} pages rolled back, {recoveries_cut} recoveries cut",
        crash_cases()
    );
    if crash_cases() >= 40 {
        assert!(rolled_back > 0 && recoveries_cut > 0, "nothing exercised");
    }
}

/// Defect: a header slot of zeros stands for "never written" even when the
/// other slot's generation says it was (generation `g` lives in slot
/// `g % 2`, so a valid slot of generation 2 or more means both slots were
/// written). Zeros over the newer slot (a lost block, damage the other
/// tests count as such) open the older commit without an error: its older
/// horizon and client mark (the object heap's generation) stand for the
/// newer ones. The module promises the opposite ("the other slot, an older
/// commit, must not stand for the newer one"). A consequence: pages
/// committed between the two horizons are written without before-images,
/// and a crash then loses their committed content.
#[test]
fn a_zeroed_newer_header_slot_is_damage_not_the_older_commit() {
    let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 64).unwrap());
    let journal: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 64).unwrap());
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..4u64 {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap(); // generation 2, slot 0, horizon 4
    for p in 4..8u64 {
        dev.write(p, &page(2)).unwrap(); // above the horizon: no image
    }
    dev.set_client_mark(7);
    dev.commit().unwrap(); // generation 3, slot 1, horizon 8, mark 7
    drop(dev);
    journal.write(1, &page(0)).unwrap(); // the newer slot zeroed

    match JournaledDevice::open(nodes.clone(), journal.clone(), JournalOpen::Read) {
        Err(e) => assert!(e.to_string().contains("journal header"), "{e}"),
        Ok((ro, _)) => {
            let (generation, mark) = (ro.generation(), ro.client_mark());
            drop(ro);
            // A writer now: page 6 (committed at generation 3) is above the
            // horizon of generation 2, so its change is not journaled.
            let (w, _) =
                JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
            w.write(6, &page(9)).unwrap();
            w.sync().unwrap();
            drop(w); // a crash before the next commit
            let (w, r) = JournaledDevice::open(nodes.clone(), journal, write_open()).unwrap();
            let got = read(&w, 6)[0];
            panic!(
                "a zeroed slot of commit 3 opened without an error as commit {generation} (client mark \
                 {mark}, not 7); after a writer's uncommitted change of page 6 and a crash, the rollback \
                 restored {} pages and page 6 reads {got:#x}, not its committed 0x2",
                r.pages_restored
            );
        }
    }
}

/// The pairs of header slots a writer and its crashes leave open (nothing,
/// generation 1 alone in slot 1, two consecutive generations in their
/// slots), for reading and writing, at the newer generation; every other
/// pair is refused naming the journal's header: zeros beside a generation
/// of 2 or more (whichever slot they cover: the lost one may have been the
/// newer), a header in the other generation's slot (slot = generation % 2),
/// and generations that are not consecutive.
#[test]
fn header_slots_open_only_as_a_writer_and_its_crashes_leave_them() {
    let zeros = || page(0);
    let hdr = |g: u64| {
        let head = Head {
            generation: g,
            horizon: 4,
            client: g * 10,
            witnesses: Vec::new(),
        };
        encode_header(&head, PS)
    };
    let opens: Vec<(&str, Vec<u8>, Vec<u8>, u64)> = vec![
        ("a blank journal", zeros(), zeros(), 0),
        ("commit 1 alone", zeros(), hdr(1), 1),
        ("commits 2 and 1", hdr(2), hdr(1), 2),
        ("commits 2 and 3", hdr(2), hdr(3), 3),
        ("commits 4 and 3", hdr(4), hdr(3), 4),
    ];
    for (what, slot0, slot1, generation) in opens {
        for how in [JournalOpen::Read, write_open()] {
            let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 16).unwrap());
            let journal: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 16).unwrap());
            journal.write_batch(&[0, 1], &[slot0.clone(), slot1.clone()].concat()).unwrap();
            let (dev, _) = JournaledDevice::open(nodes, journal, how)
                .unwrap_or_else(|e| panic!("{what} ({how:?}): {e}"));
            let want = match (how, generation) {
                (JournalOpen::Write { .. }, 0) => 1, // created now
                _ => generation,
            };
            assert_eq!(dev.generation(), want, "{what} ({how:?})");
            assert_eq!(dev.client_mark(), generation * 10, "{what} ({how:?})");
        }
    }
    let refused: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("commit 2, slot 1 zeroed", hdr(2), zeros()),
        ("commit 3, slot 0 zeroed", zeros(), hdr(3)),
        ("commit 4, slot 1 zeroed", hdr(4), zeros()),
        ("commit 0 alone", hdr(0), zeros()),
        ("commit 1 in slot 0", hdr(1), zeros()),
        ("commits 3 and 2 in each other's slots", hdr(3), hdr(2)),
        ("commits 2 and 5", hdr(2), hdr(5)),
        ("commits 4 and 1", hdr(4), hdr(1)),
    ];
    for (what, slot0, slot1) in refused {
        for how in [JournalOpen::Read, write_open()] {
            let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 16).unwrap());
            let journal: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 16).unwrap());
            journal.write_batch(&[0, 1], &[slot0.clone(), slot1.clone()].concat()).unwrap();
            assert!(
                committed_generation(journal.as_ref()).is_err(),
                "{what}: committed_generation read it"
            );
            match JournaledDevice::open(nodes, journal, how) {
                Err(e) => assert!(e.to_string().contains("damaged journal header"), "{what}: {e}"),
                Ok((dev, _)) => panic!(
                    "{what} ({how:?}): opened as commit {} (client mark {})",
                    dev.generation(),
                    dev.client_mark()
                ),
            }
        }
    }
}

/// A crash at any sync of the journal (its header's at each commit, and
/// each batch's), with the unsynced writes kept, dropped or torn at
/// 512-byte sectors of 2 KiB pages: the journal opens, for reading and
/// writing, as the last acknowledged commit or the one under way, never
/// as damage. This is what keeps the header slots' rule (zeros beside a
/// generation of 2 or more are damage) from refusing a crash.
#[test]
fn a_crash_at_any_journal_sync_including_a_header_write_is_recovered_not_refused() {
    const BIG: usize = 2048;
    let fill = |k: u8| vec![k; BIG];
    let run = |dev: &JournaledDevice, acked: &mut Option<(u64, u8)>| -> crate::Result<()> {
        for k in 1..=6u8 {
            for p in 0..4u64 {
                dev.write(p, &fill(k))?; // from the second round, one batch each
            }
            dev.commit()?;
            *acked = Some((dev.generation(), k));
        }
        Ok(())
    };
    let total_syncs = {
        let journal = Arc::new(FaultyDevice::new(
            MemDevice::new(BIG, 64).unwrap(),
            FaultPlan::none(),
        ));
        let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(BIG, 16).unwrap());
        let (dev, _) = JournaledDevice::open(nodes, journal.clone(), write_open()).unwrap();
        run(&dev, &mut None).unwrap();
        journal.stats().io.syncs
    };
    assert!(total_syncs >= 20, "{total_syncs} journal syncs");
    let mut cases = 0;
    for n in 1..=total_syncs {
        for seed in 0..8u64 {
            let plan = FaultPlan::none().with_seed(seed).crash_at_sync(n);
            let journal = Arc::new(FaultyDevice::new(MemDevice::new(BIG, 64).unwrap(), plan));
            let nodes = Arc::new(MemDevice::new(BIG, 16).unwrap());
            let mut acked = None;
            if let Ok((dev, _)) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()) {
                let _ = run(&dev, &mut acked);
            }
            assert!(journal.is_crashed(), "sync {n}: no crash");
            let journal = match Arc::try_unwrap(journal) {
                Ok(j) => j.into_inner(),
                Err(_) => panic!("the journal is still held"),
            };
            let journal: Arc<dyn PageDevice> = Arc::new(journal);
            let what = format!("crash at journal sync {n} of {total_syncs}, seed {seed}");
            let nodes: Arc<dyn PageDevice> = nodes;
            let (ro, _) = JournaledDevice::open(nodes.clone(), journal.clone(), JournalOpen::Read)
                .unwrap_or_else(|e| panic!("{what}: reader: {e}"));
            let seen = ro.generation();
            if let Some((g, k)) = acked {
                assert!(seen == g || seen == g + 1, "{what}: read as commit {seen}, acked {g}");
                let mut buf = vec![0u8; BIG];
                for p in 0..4 {
                    ro.read(p, &mut buf).unwrap();
                    assert!(
                        buf == fill(k) || buf == fill(k + 1),
                        "{what}: page {p} reads {:#x}, commit {g} wrote {k:#x}",
                        buf[0]
                    );
                }
            }
            drop(ro);
            let (w, _) = JournaledDevice::open(nodes, journal, write_open())
                .unwrap_or_else(|e| panic!("{what}: writer: {e}"));
            assert!(w.generation() >= seen, "{what}: writer at {}", w.generation());
            cases += 1;
        }
    }
    println!("journal header crashes: {cases} cases");
}

/// A journal device whose trims fail once asked to (as `fallocate`'s hole
/// punching can with `EIO`, or `ENOSPC` where splitting an extent needs a
/// block).
struct TrimFails {
    dev: Arc<dyn PageDevice>,
    fail: Mutex<bool>,
}

impl PageDevice for TrimFails {
    fn geometry(&self) -> DeviceGeometry {
        self.dev.geometry()
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> crate::Result<()> {
        self.dev.read_batch(pages, buf)
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> crate::Result<()> {
        self.dev.write_batch(pages, data)
    }
    fn sync(&self) -> crate::Result<()> {
        self.dev.sync()
    }
    fn trim(&self, pages: &[PageId]) -> crate::Result<()> {
        if *self.fail.lock().unwrap() {
            return Err(crate::Error::InjectedFault("hole punching refused".into()));
        }
        self.dev.trim(pages)
    }
    fn describe(&self) -> String {
        "trim fails".into()
    }
}

impl DeviceExt for TrimFails {}

/// Defect: `commit` trims the voided images after the new header is
/// durable ("best effort: the images are void already"), but a failed
/// trim is returned as the commit's error and makes the journal refuse
/// every later change. The caller is told the checkpoint failed (the
/// command line then reports the records of the previous checkpoint as
/// the durable ones) while the next open finds the new commit; and the
/// index refuses all further changes for a trim that did not matter.
#[test]
fn a_commit_whose_trim_of_void_images_fails_is_either_ok_or_not_durable() {
    let nodes: Arc<dyn PageDevice> = Arc::new(MemDevice::new(PS, 64).unwrap());
    let journal = Arc::new(TrimFails {
        dev: Arc::new(MemDevice::new(PS, 64).unwrap()),
        fail: Mutex::new(false),
    });
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..4u64 {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap();
    for p in 0..4u64 {
        dev.write(p, &page(2)).unwrap(); // journaled: images to void at the commit
    }
    *journal.fail.lock().unwrap() = true;
    let committed = dev.commit();
    let later = dev.write(10, &page(3));
    drop(dev);
    *journal.fail.lock().unwrap() = false;
    let (reopened, _) = JournaledDevice::open(nodes, journal, write_open()).unwrap();
    let state = read(&reopened, 0)[0];
    assert!(
        committed.is_ok() || state == 1,
        "the commit said {committed:?}, yet the next open finds its state (page 0 reads {state:#x}, \
         committed before: 0x1); a later write then said {later:?}"
    );
}

/// Defect (`index_dir::journal::open_journal`): the first writable open of
/// an index written before journals creates `journal.dat` and then writes
/// its first header with every page of `pages.dat` below the horizon. A
/// crash between the two leaves an empty (or zero) `journal.dat`, and the
/// next writable open takes it for the journal of a new index: horizon 0,
/// so nothing is journaled until the first commit, and a crash before it
/// leaves the pages the writer evicted in place as they were, not rolled
/// back to the checkpoint.
#[test]
fn a_blank_journal_left_by_a_crash_of_a_pre_journal_index_s_first_open_still_protects_it() {
    use crate::config::{StoreKind, StoreSpec};
    use crate::manifest::{Access, Manifest};
    use crate::{Index, IndexOptions};

    let rect = |i: u64| {
        let x = (i * 7919 % 1000) as f64;
        let y = (i * 104_729 % 997) as f64;
        Rect::new(x, y, x + 5.0, y + 5.0).unwrap()
    };
    let ids = |idx: &Index| -> crate::Result<Vec<u64>> {
        let all = Rect::new(-1e9, -1e9, 1e9, 1e9).unwrap();
        Ok(idx.query(all, Predicate::Intersects)?.sorted_ids())
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("legacy");
    let opts = IndexOptions {
        page_size: 1024,
        device: "file?direct=false".parse().unwrap(),
        store: StoreSpec::of_kind(StoreKind::Plain, 16 * 1024),
        ..IndexOptions::default()
    };
    let mut idx = Index::create(&path, &opts).unwrap();
    for i in 0..2000 {
        idx.insert(i, rect(i)).unwrap();
    }
    idx.close().unwrap();
    // An index written before journals, whose first writable open was
    // killed right after it created `journal.dat`.
    let mut manifest = Manifest::load(&path).unwrap();
    manifest.journal = false;
    manifest.store(&path).unwrap();
    std::fs::write(path.join("journal.dat"), b"").unwrap();

    let mut idx = Index::open(&path, Access::Write).unwrap();
    for i in 2000..4000 {
        idx.insert(i, rect(i)).unwrap(); // evicted in place (16 KiB buffer)
    }
    drop(idx); // a crash: no checkpoint
    let want: Vec<u64> = (0..2000).collect();
    let got = Index::open(&path, Access::Write).and_then(|idx| {
        idx.verify()?;
        ids(&idx)
    });
    match got {
        Ok(got) => assert_eq!(
            got.len(),
            want.len(),
            "recovered {} records, the checkpoint held 2000",
            got.len()
        ),
        Err(e) => panic!("the index after the crash: {e} (the checkpoint held 2000 records)"),
    }
}

/// The durable media of `machine` when its process ends without a power
/// failure (after an error): what the kernel holds reaches the files.
fn exit(machine: Machine) -> (MemDevice, MemDevice) {
    let unwrap = |d: Arc<FaultyDevice<MemDevice>>| match Arc::try_unwrap(d) {
        Ok(d) => d.into_inner_after_exit().unwrap(),
        Err(_) => panic!("a device is still held"),
    };
    (unwrap(machine.nodes), unwrap(machine.journal))
}

/// Partial failures of either file (`pages.dat` or `journal.dat`): a full
/// device at any number of distinct pages, a failed write or a failed
/// sync at any call, then the process ends (what the kernel holds reaches
/// the files) or the power fails: a reader and the writer's recovery give
/// exactly the last acknowledged commit, or the one whose commit returned
/// the error.
#[test]
fn full_devices_and_failed_writes_or_syncs_of_either_file_recover_exactly_a_commit() {
    let ops = script(0xe1, 260);
    let counting = Machine::fresh(FaultPlan::none(), FaultPlan::none());
    let (n, j) = counting.devices();
    run(n, j, &ops);
    let writes = [counting.nodes.writes_seen(), counting.journal.writes_seen()];
    let syncs = [
        counting.node_syncs.load(Ordering::Relaxed),
        counting.journal_syncs.load(Ordering::Relaxed),
    ];
    // Fault points per kind: a quarter of the crash cases (50 by default).
    let points = (crash_cases() / 4).max(1);
    let step = |total: u64| (total / points).max(1) as usize;
    let mut cases = 0;
    for on_journal in [false, true] {
        let k = usize::from(on_journal);
        let mut faults: Vec<FaultPlan> = Vec::new();
        for n in (1..=writes[k]).step_by(step(writes[k])) {
            faults.push(FaultPlan::none().max_distinct_pages(n));
            faults.push(FaultPlan::none().fail_write(n));
        }
        for n in (1..=syncs[k]).step_by(step(syncs[k])) {
            faults.push(FaultPlan::none().fail_sync(n));
        }
        for (i, fault) in faults.into_iter().enumerate() {
            for power_fails in [false, true] {
                cases += 1;
                let fault = fault.clone().with_seed(i as u64);
                let what = format!(
                    "{} {fault:?}, power fails: {power_fails}",
                    if on_journal { "journal" } else { "nodes" }
                );
                let (np, jp) = match on_journal {
                    true => (FaultPlan::none().with_seed(3), fault),
                    false => (fault, FaultPlan::none().with_seed(3)),
                };
                let machine = Machine::fresh(np, jp);
                let (n, j) = machine.devices();
                let (acked, in_flight) = run(n, j, &ops);
                let (nodes, journal) = if power_fails {
                    machine.power_off()
                } else {
                    exit(machine)
                };
                let fits = |got: &Option<State>| match got {
                    None => acked.is_empty() && in_flight.is_none(),
                    Some(s) => *s == acked || in_flight.as_ref() == Some(s),
                };
                let read = recovered(
                    Arc::new(nodes.copied()),
                    Arc::new(journal.copied()),
                    JournalOpen::Read,
                )
                .unwrap_or_else(|e| panic!("{what}: reader: {e}"));
                assert!(
                    fits(&read),
                    "{what}: the reader saw {:?} objects, the last commit held {}",
                    read.map(|s| s.len()),
                    acked.len()
                );
                let written = recovered(Arc::new(nodes), Arc::new(journal), write_open())
                    .unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
                assert_eq!(
                    written, read,
                    "{what}: the writer's recovery and the reader"
                );
            }
        }
    }
    println!("journal partial-failure campaign: {cases} cases");
}

/// The index-level face of [`a_zeroed_newer_header_slot_is_damage_not_the_older_commit`]:
/// a plain index with an object heap whose journal's newer header slot is
/// zeroed after two checkpoints. Refined queries (windows in the corners
/// of the objects' boxes that their triangles do not reach) must give the
/// exact answer or an error naming `journal.dat`: the older slot's client
/// mark names an older heap generation, and its objects' geometries are
/// dropped.
#[test]
fn a_zeroed_newer_journal_slot_under_an_index_with_objects_is_exact_or_names_the_journal() {
    use crate::config::{StoreKind, StoreSpec};
    use crate::manifest::Access;
    use crate::{Index, IndexOptions};
    use geo::polygon;

    let corner = |id: u64| ((id * 7 % 90) as f64, (id * 13 % 90) as f64);
    let shape = |id: u64| -> crate::objects::Geometry {
        let (x, y) = corner(id);
        polygon![(x: x, y: y), (x: x + 6.0, y: y + 1.0), (x: x + 1.0, y: y + 5.0), (x: x, y: y)]
            .into()
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("objects");
    let opts = IndexOptions {
        page_size: 1024,
        device: "file?direct=false".parse().unwrap(),
        store: StoreSpec::of_kind(StoreKind::Plain, 16 * 1024),
        ..IndexOptions::default()
    };
    let mut idx = Index::create(&path, &opts).unwrap();
    for id in 0..50 {
        idx.insert_object(id, &shape(id)).unwrap();
    }
    idx.checkpoint().unwrap();
    for id in 50..100 {
        idx.insert_object(id, &shape(id)).unwrap();
    }
    // One commit after the other, each naming its heap generation (a
    // `close` would commit once more with the same mark).
    idx.checkpoint().unwrap();
    drop(idx);
    let windows: Vec<Rect> = (0..100)
        .map(|id| {
            let (x, y) = corner(id);
            Rect::new(x + 5.4, y + 4.4, x + 5.6, y + 4.6).unwrap()
        })
        .chain([Rect::new(-1e9, -1e9, 1e9, 1e9).unwrap()])
        .collect();
    let answers = |idx: &Index| -> crate::Result<Vec<Vec<u64>>> {
        windows
            .iter()
            .map(|w| Ok(idx.query_refined(*w, Predicate::Intersects)?.sorted_ids()))
            .collect()
    };
    let want = answers(&Index::open(&path, Access::Read).unwrap()).unwrap();
    // Zeros over the slot of the newer generation (bytes 16..24 of a slot).
    let journal = path.join("journal.dat");
    let mut bytes = std::fs::read(&journal).unwrap();
    let generation = |b: &[u8], slot: usize| {
        u64::from_le_bytes(b[slot * 1024 + 16..slot * 1024 + 24].try_into().unwrap())
    };
    let newer = if generation(&bytes, 0) > generation(&bytes, 1) {
        0
    } else {
        1
    };
    bytes[newer * 1024..(newer + 1) * 1024].fill(0);
    std::fs::write(&journal, &bytes).unwrap();
    for access in [Access::Read, Access::Write] {
        match Index::open(&path, access).and_then(|idx| answers(&idx)) {
            Ok(got) => {
                let wrong = got.iter().zip(&want).filter(|(g, w)| g != w).count();
                assert_eq!(
                    wrong,
                    0,
                    "{access:?}: opened without an error, {wrong} of {} windows answered otherwise",
                    want.len()
                );
            }
            Err(e) => assert!(e.to_string().contains("journal.dat"), "{access:?}: {e}"),
        }
    }
}
