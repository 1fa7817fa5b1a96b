//! The record map at the edges of its protocol (`records.rs`, and the
//! Python package's own-log protocol): a store checkpoint that returns an
//! error when its superblock switch (the checkpoint's durable point) may
//! already be durable; and an index whose map keeps its own log
//! (`pyrecords.log`: the plain store, and eFIND and FAST indexes whose
//! store's log predates the map's frames) recovered by another caller (the
//! command line's `recover`) before the front end opens it.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::factory::{make, open_log_device, Site, StoreOpen};
use super::*;
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::index::tests::hits_by_id;
use crate::index::RTree;
use crate::manifest::Access;
use crate::metrics::PhaseTimes;
use crate::records::Records;
use crate::storage::spec::DeviceSpec;
use crate::storage::{DeviceExt, DeviceGeometry, PageDevice, PageId};
use crate::store::log::RecoveryMode;
use crate::{Error, Result};

/// The rectangle of entry `i`.
fn rect(i: u64) -> Rect {
    let (x, y) = ((i % 97) as f64, (i / 97 % 97) as f64);
    Rect::from_valid(x, y, x + 0.5, y + 0.5)
}

/// What a test expects: record key → (user id, rectangle, object).
type Oracle = BTreeMap<u64, (i64, Rect, Option<Vec<u8>>)>;

/// The object of user id `id` (one for every third id).
fn object(id: i64) -> Option<Vec<u8>> {
    (id % 3 == 0).then(|| vec![id as u8; 5])
}

/// The tree's entries (key, rectangle), ascending key.
fn entries(index: &Index) -> Vec<(u64, Rect)> {
    let all = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    hits_by_id(&index.query(all, Predicate::Intersects).unwrap())
}

/// Checks that `index` (tree and map) holds exactly `oracle`.
fn check(index: &Index, oracle: &Oracle, what: &str) {
    let want: Vec<(u64, Rect)> = oracle.iter().map(|(&k, (_, r, _))| (k, *r)).collect();
    assert_eq!(entries(index), want, "{what}: the tree's entries");
    let map = index.records();
    assert_eq!(map.live(), Some(oracle.len() as u64), "{what}: live ids");
    for (&k, (id, _, obj)) in oracle {
        assert_eq!(map.id(k).ok(), Some(*id), "{what}: id of key {k}");
        assert_eq!(map.obj(k), obj.as_deref(), "{what}: object of key {k}");
    }
}

/// A new index in `dir` on `store` with its record map in the store's log,
/// holding user ids `ids` (inserted in order), closed.
fn created_with_map_in_log(dir: &Path, store: &str, ids: impl Iterator<Item = i64>) -> Oracle {
    let base = [("store", store), ("page_size", "1024"), ("buffer", "8MiB")];
    let opts = super::tests::spec_options(base.iter())
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
    let mut index = Index::create(dir, &opts).unwrap();
    assert!(
        index.log_records_in_store(Records::new()).unwrap(),
        "{store}"
    );
    let mut oracle = Oracle::new();
    for (i, id) in ids.enumerate() {
        let key = index
            .insert_logged_record(id, rect(i as u64), object(id))
            .unwrap();
        oracle.insert(key, (id, rect(i as u64), object(id)));
    }
    index.close().unwrap();
    oracle
}

/// The log device of a test: every call reaches the file beneath until the
/// armed call fails (the `at`-th write, sync or trim after
/// [`Tripwire::arm`]), and from then on every call fails, as a device that
/// failed does. With `crash` the writes and trims since the last sync are
/// undone when it fails (a power loss at the failure: the file keeps what
/// was synced); without, they stay (the process goes on, or exits, and the
/// kernel writes them).
pub(super) struct Tripwire {
    inner: Arc<dyn PageDevice>,
    crash: bool,
    state: Mutex<Trip>,
}

#[derive(Default)]
struct Trip {
    /// Calls let through before the one that fails (`None`: not armed).
    left: Option<u64>,
    failed: bool,
    /// Pages changed since the last sync with their contents before.
    undo: Vec<(PageId, Vec<u8>)>,
}

impl Tripwire {
    fn new(inner: Arc<dyn PageDevice>, crash: bool) -> Tripwire {
        Tripwire {
            inner,
            crash,
            state: Mutex::new(Trip::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Trip> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `at`-th call (1-based) from now that changes the device fails.
    pub(super) fn arm(&self, at: u64) {
        self.lock().left = Some(at - 1);
    }

    pub(super) fn tripped(&self) -> bool {
        self.lock().failed
    }

    /// One call that changes the device: an error when it is the one that
    /// fails (the unsynced changes undone first, with `crash`) or comes
    /// after it.
    fn step(&self, st: &mut Trip, what: &str) -> Result<()> {
        if st.failed {
            return Err(Error::InjectedFault(format!(
                "{what}: the device failed earlier"
            )));
        }
        match st.left {
            Some(0) => {
                st.failed = true;
                if self.crash {
                    for (page, old) in std::mem::take(&mut st.undo).into_iter().rev() {
                        self.inner.write(page, &old)?;
                    }
                    self.inner.sync()?;
                }
                Err(Error::InjectedFault(format!("{what} failed as planned")))
            }
            Some(n) => {
                st.left = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Keeps the contents of `pages` before a change, with `crash`.
    fn remember(&self, st: &mut Trip, pages: &[PageId]) -> Result<()> {
        if self.crash {
            for &page in pages {
                let mut old = vec![0u8; self.inner.page_size()];
                self.inner.read(page, &mut old)?;
                st.undo.push((page, old));
            }
        }
        Ok(())
    }
}

impl DeviceExt for Tripwire {}

impl PageDevice for Tripwire {
    fn geometry(&self) -> DeviceGeometry {
        self.inner.geometry()
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        if self.tripped() {
            return Err(Error::InjectedFault(
                "read: the device failed earlier".into(),
            ));
        }
        self.inner.read_batch(pages, buf)
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let mut st = self.lock();
        self.step(&mut st, "write")?;
        self.remember(&mut st, pages)?;
        self.inner.write_batch(pages, data)
    }

    fn sync(&self) -> Result<()> {
        let mut st = self.lock();
        self.step(&mut st, "sync")?;
        self.inner.sync()?;
        st.undo.clear();
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let mut st = self.lock();
        self.step(&mut st, "trim")?;
        self.remember(&mut st, pages)?;
        self.inner.trim(pages)
    }

    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        self.inner.reserve(pages)
    }

    fn describe(&self) -> String {
        format!("tripwire over {}", self.inner.describe())
    }
}

/// `index` (just opened for writing) with its store opened again over its
/// log file behind a [`Tripwire`] (`crash` as there), which is returned.
pub(super) fn behind_tripwire(index: &mut Index, dir: &Path, crash: bool) -> Arc<Tripwire> {
    let m = &index.manifest;
    let spec = DeviceSpec::parse(&m.device).unwrap();
    let file = open_log_device(&spec, &m.store, dir, m.page_size, Access::Write)
        .unwrap()
        .expect("a logged store on a file device keeps its log in log.dat");
    let trip = Arc::new(Tripwire::new(file, crash));
    let site = Site {
        device: index.device.clone(),
        log_device: Some(trip.clone()),
        how: StoreOpen::Write,
        recovery: RecoveryMode::AbsoluteConsistency,
    };
    let (tree, _) = make(
        &m.structure,
        &m.store,
        site,
        Box::new(RTree::open),
        &mut PhaseTimes::default(),
    )
    .unwrap();
    index.tree = tree;
    index.log_device = Some(trip.clone());
    trip
}

/// How one checkpoint with a failing log device ended.
enum Ending {
    /// The failure came after the checkpoint's last call to the device.
    NoFault,
    /// The checkpoint failed, and the index reopened as acknowledged.
    Failed,
}

/// One run: an index with its map in the store's log, a committed session
/// of inserts (with objects) and deletes, then a checkpoint whose `at`-th
/// write, sync or trim of the log fails (`crash`: see [`Tripwire`]),
/// then what a caller does after a failed checkpoint (`close()`, which
/// checkpoints again), then a crash: the index must reopen, for writing and
/// read-only, with every committed operation, ids and objects with the
/// tree's entries.
fn checkpoint_failing_at(store: &str, crash: bool, at: u64) -> Ending {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut oracle = created_with_map_in_log(dir, store, (0..40).map(|i| 7 * i - 100));
    let mut index = Index::open(dir, Access::Write).unwrap();
    let trip = behind_tripwire(&mut index, dir, crash);
    for i in 40..55u64 {
        let id = (i % 4) as i64 * 3;
        let key = index.insert_logged_record(id, rect(i), object(id)).unwrap();
        oracle.insert(key, (id, rect(i), object(id)));
    }
    for key in [3u64, 9, 41] {
        let (_, r, _) = oracle.remove(&key).unwrap();
        index.delete_logged_record(key, r).unwrap();
    }
    // Acknowledged: the commit made them durable.
    index.commit().unwrap();
    let what = format!(
        "{store}, {} at call {at} of the checkpoint",
        if crash { "crash" } else { "failure" }
    );
    trip.arm(at);
    let first = match index.checkpoint() {
        Ok(()) => {
            assert!(
                !trip.tripped(),
                "{what}: the checkpoint succeeded through a failed device"
            );
            drop(index);
            let index = Index::open(dir, Access::Write).unwrap();
            check(&index, &oracle, &format!("{what}: no fault"));
            return Ending::NoFault;
        }
        Err(e) => e.to_string(),
    };
    // The caller closes the index after the failure (a checkpoint again).
    let second = index.close().err().map(|e| e.to_string());
    for access in [Access::Read, Access::Write, Access::Read] {
        let index = Index::open(dir, access).unwrap_or_else(|e| {
            panic!(
                "{what}: the index does not open ({access:?}) after the failed checkpoint ({first}) and close ({second:?}): {e}"
            )
        });
        check(&index, &oracle, &format!("{what}, reopened {access:?}"));
    }
    Ending::Failed
}

/// A checkpoint of an index whose record map is in the store's log, whose
/// store checkpoint fails at any write, sync or trim of the log, before or
/// after its superblock switch is durable, with the writes since the last
/// sync kept or lost: the caller's `close()` after the failure and a crash
/// leave an index that reopens with every committed operation, the map's
/// ids and objects with the tree's entries.
///
/// Before, a failure after the switch was durable (the switch's mirror
/// write, or with the writes kept its sync) left the store naming the new
/// generation g while it still believed the old one current, so the next
/// checkpoint (the `close()`) wrote its snapshot of g + 1 over
/// `pyrecords.next.dat`, the only copy of g, and no open could read the
/// index again ("the store's newest checkpoint names record-map
/// generation g, but pyrecords.dat holds generation g - 1 and
/// pyrecords.next.dat holds generation g + 1").
#[test]
fn a_store_checkpoint_failing_after_its_switch_keeps_the_snapshot_it_names() {
    for store in ["efind", "fast"] {
        for crash in [false, true] {
            let mut failed = 0;
            for at in 1.. {
                match checkpoint_failing_at(store, crash, at) {
                    Ending::Failed => failed += 1,
                    Ending::NoFault => break,
                }
            }
            assert!(
                failed >= 3,
                "{store}: only {failed} calls of the checkpoint failed"
            );
            eprintln!(
                "{store}, writes since the last sync {}: a checkpoint failing at each of its {failed} log calls reopened as committed",
                if crash { "lost" } else { "kept" }
            );
        }
    }
}

/// Rewrites both superblocks of the store's log in `dir` (`log.dat`) from
/// version 11 to 7, as the builds before the map's frames in the store's
/// log wrote them (`store::log::superblock`: a log without CLIENT records
/// whose checkpoint names no generation is the same log; version 7 lays
/// its regions out one after the other, which changes nothing for a log
/// just checkpointed, whose live region is empty).
fn as_log_version_7(dir: &Path, page_size: usize) {
    let path = dir.join(super::factory::LOG_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    for page in bytes.chunks_exact_mut(page_size).take(2) {
        assert_eq!(
            (&page[..4], u16::from_le_bytes([page[4], page[5]])),
            (&b"GFLS"[..], 11)
        );
        page[4..6].copy_from_slice(&7u16.to_le_bytes());
        // The chunk of the interleaved regions (versions 10 and 11 only).
        page[14] = 0;
        page[8..12].fill(0);
        let crc = crc32c::crc32c(page);
        page[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&path, &bytes).unwrap();
}

/// A writer of the Python package's own-log protocol (`pyrecords.log`, as
/// `crates/geoflash-py/src/core.rs` keeps it for indexes whose store's log
/// takes no frames): the ADD before the tree's insert, the REMOVE after its
/// delete, a commit syncs that log and then the store's, a checkpoint syncs
/// it, checkpoints the index, then writes the next snapshot and a new log.
struct OwnLogWriter {
    index: Index,
    log: crate::records::log::RecordLog,
}

impl OwnLogWriter {
    /// Opens `dir` as the package does (the map read with its log).
    fn open(dir: &Path) -> OwnLogWriter {
        let mut index = Index::open(dir, Access::Write).unwrap();
        index.claim_records();
        assert!(!index.records_in_log());
        let (map, replay) = Records::load(dir).unwrap();
        let log = match &replay {
            Some(r) if r.generation == map.generation() => {
                crate::records::log::RecordLog::append_to(dir, r)
            }
            _ => crate::records::log::RecordLog::create(dir, map.generation()),
        }
        .unwrap();
        index.set_records(map);
        OwnLogWriter { index, log }
    }

    fn insert(&mut self, oracle: &mut Oracle, id: i64, r: Rect) -> u64 {
        let key = self.index.records_mut().add(id, object(id)).unwrap();
        self.log
            .append_add(key, id, self.index.records().obj(key))
            .unwrap();
        self.index.insert(key, r).unwrap();
        oracle.insert(key, (id, r, object(id)));
        key
    }

    fn delete(&mut self, oracle: &mut Oracle, key: u64) {
        let (_, r, _) = oracle.remove(&key).unwrap();
        self.index.delete(key, r).unwrap();
        self.log.append_remove(key).unwrap();
        self.index.records_mut().remove(key);
    }

    fn checkpoint(&mut self, dir: &Path) {
        self.log.sync().unwrap();
        self.index.checkpoint().unwrap();
        self.index.records_mut().save(dir).unwrap();
        self.log =
            crate::records::log::RecordLog::create(dir, self.index.records().generation()).unwrap();
    }
}

/// What the package's open of the index in `dir` finds: the index opened
/// for writing with its map (`Records::load`), and whether the open
/// reconciles the two (`Core::open`: the map's log holds changes or a torn
/// tail, restart recovered anything or the rollback journal undid pages,
/// or the tree's count is not the map's).
fn opened_as_the_package_does(dir: &Path) -> (Index, bool) {
    let mut index = Index::open(dir, Access::Write).unwrap();
    index.claim_records();
    assert!(!index.records_in_log());
    let (map, replay) = Records::load(dir).unwrap();
    index.set_records(map);
    let logged = replay
        .as_ref()
        .is_some_and(|r| !r.changes.is_empty() || r.torn > 0);
    let recovered = index
        .restart_report()
        .is_some_and(|r| r.recovered_anything())
        || index.rolled_back_pages() > 0;
    let counts = index.records().live() != Some(index.len());
    (index, logged || recovered || counts)
}

/// The keys of the tree the map does not know as live, and the live keys
/// of the map the tree does not hold.
fn disagreement(index: &Index) -> (Vec<u64>, Vec<u64>) {
    let tree: Vec<u64> = entries(index).into_iter().map(|(k, _)| k).collect();
    let map = index.records();
    let unknown = tree.iter().copied().filter(|&k| !map.is_live(k)).collect();
    let missing = map
        .live_keys()
        .filter(|k| tree.binary_search(k).is_err())
        .collect();
    (unknown, missing)
}

/// An eFIND index written before the record map's changes went to the
/// store's log (log superblock version 7, the map in `pyrecords.dat` and
/// `pyrecords.log`), whose writer lost power after the store's group commit
/// made a move durable (a delete and an insert) and before the map's log
/// was synced (so `pyrecords.log` lost the move's frames), recovered by
/// `geoflash recover` (the index opened for writing, verified,
/// checkpointed) before the Python package opens it: the package's open
/// must see that the map and the tree need reconciling (they disagree: the
/// tree holds the insert's key, which the map never logged, and no longer
/// the deleted key, which the map holds live), as it does when it opens the
/// index first (restart's replay tells it).
///
/// Before, `recover` used up the one sign the package's open had (the
/// counts are equal after a move, and the map's log is as the last
/// checkpoint left it): the open served a map that disagreed with its
/// tree, a query reaching the new entry failed ("record key … is in the
/// tree but not in the id map") and the deleted id stayed live.
#[test]
fn an_old_format_index_recovered_by_the_command_line_is_reconciled_by_the_package() {
    for recover_first in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let base = [
            ("store", "efind"),
            ("page_size", "1024"),
            ("buffer", "8MiB"),
        ];
        let opts = super::tests::spec_options(base.iter())
            .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter());
        let index = Index::create(dir, &opts).unwrap();
        // The package's create of an index whose store's log takes no frames.
        let mut map = Records::new();
        map.save(dir).unwrap();
        let mut index = index;
        index.set_records(map);
        let log =
            crate::records::log::RecordLog::create(dir, index.records().generation()).unwrap();
        let mut w = OwnLogWriter { index, log };
        let mut oracle = Oracle::new();
        for i in 0..60u64 {
            w.insert(&mut oracle, 5 * i as i64 - 40, rect(i));
        }
        w.checkpoint(dir);
        drop(w);
        as_log_version_7(dir, 1024);
        // A session of the package on it: a move, the store's group commit
        // making it durable, then a power loss before the map's log sync.
        let mut w = OwnLogWriter::open(dir);
        assert!(
            w.index.tree.client_log_ref().is_none(),
            "a log of version 7 takes no frames"
        );
        let synced = std::fs::metadata(dir.join(crate::records::log::LOG_FILE))
            .unwrap()
            .len();
        w.delete(&mut oracle, 17);
        let moved = w.insert(&mut oracle, 5 * 17 - 40, rect(1017));
        w.index.commit().unwrap();
        drop(w);
        let log = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(crate::records::log::LOG_FILE))
            .unwrap();
        log.set_len(synced).unwrap();
        drop(log);
        let what = if recover_first {
            "recovered by the command line first"
        } else {
            "opened by the package first"
        };
        if recover_first {
            // `geoflash recover`: open for writing (restart), verify, checkpoint.
            let mut index = Index::open_recovering(dir, RecoveryMode::AbsoluteConsistency).unwrap();
            assert!(
                index
                    .restart_report()
                    .is_some_and(|r| r.recovered_anything()),
                "restart replayed the move"
            );
            index.verify().unwrap();
            index.checkpoint().unwrap();
            index.close().unwrap();
        }
        let (index, reconciles) = opened_as_the_package_does(dir);
        let (unknown, missing) = disagreement(&index);
        assert_eq!(
            (unknown.clone(), missing.clone()),
            (vec![moved], vec![17]),
            "{what}: the tree holds the move"
        );
        assert!(
            reconciles,
            "{what}: the package's open would serve a map that disagrees with the tree (tree keys {unknown:?} \
             unknown to the map, live keys {missing:?} not in the tree) without reconciling them"
        );
    }
}
