//! What the crash tests of the logged stores (eFIND, FAST) share: the
//! acknowledgement oracle and the one-line summary of a campaign.
//!
//! **Acknowledgements** are derived in the test harness from what the store
//! returned to its caller, never from a counter the store keeps about itself.
//! Every index operation (insert, delete, update) is one store operation,
//! acknowledged per the durability mode once its call returns `Ok` (its
//! `commit_op` succeeded):
//! - [`Durability::Sync`]: the operation itself;
//! - [`Durability::Group`] with `ops = N`: the log syncs whenever `N`
//!   commits are unsynced, so once a call returns at most `N - 1` committed
//!   operations are not durable yet — every operation but the newest `N - 1`
//!   is acknowledged (a sync on time, or forced by a flush, makes more
//!   durable; this count is the floor the mode guarantees);
//! - [`Durability::None`]: nothing until a checkpoint returns `Ok`, after
//!   which every completed operation is.
//!
//! The store's own claim ([`NodeStore::durable_op`], what `build
//! --ack-every` prints) is read too, for two checks: it may never fall below
//! the guarantee (a store that under-reports is caught here, where a harness
//! reading only the claim would pass), and what it claims must survive the
//! crash as well ([`AckOracle::acknowledged`] is the larger of the two).
use super::efind::{EfindConfig, EfindStore};
use super::fast::{FastConfig, FastStore};
use super::log::LogPlacement;
use super::placement::Placement;
use super::{LoggedStore, NodeStore, OpId, StoreOpen};
use crate::storage::faulty::{FaultPlan, FaultyDevice};
use crate::storage::mem::MemDevice;
use crate::storage::{PageDevice, PageId};
use crate::geom::Rect;
use crate::index::{Predicate, RTree};
use crate::store::log::{Durability, LogReader, RecordKind};
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The two stores with a log, for tests written once for both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoggedKind {
    Efind,
    Fast,
}

impl LoggedKind {
    /// Both kinds.
    pub(crate) const BOTH: [LoggedKind; 2] = [LoggedKind::Efind, LoggedKind::Fast];

    /// The configurations of both stores with `buffer_bytes` of memory,
    /// payloads in the leaves as `with_payload` says and a log of
    /// `log_capacity` bytes, the rest their defaults.
    pub(crate) fn configs(
        buffer_bytes: usize,
        with_payload: bool,
        log_capacity: u64,
    ) -> (EfindConfig, FastConfig) {
        let efind = EfindConfig {
            buffer_bytes,
            with_payload,
            log_capacity,
            ..EfindConfig::default()
        };
        let fast = FastConfig {
            buffer_bytes,
            with_payload,
            log_capacity,
            ..FastConfig::default()
        };
        (efind, fast)
    }

    /// The store on `dev` as `how` says, its log at `log`, configured by
    /// `efind` or `fast` (the one of its kind).
    pub(crate) fn store(
        self,
        how: StoreOpen,
        dev: Arc<dyn PageDevice>,
        log: LogPlacement,
        efind: EfindConfig,
        fast: FastConfig,
    ) -> Result<Box<dyn NodeStore>> {
        let none = Placement::None;
        Ok(match self {
            LoggedKind::Efind => Box::new(EfindStore::opened(how, dev, log, efind, none)?),
            LoggedKind::Fast => Box::new(FastStore::opened(how, dev, log, fast, none)?),
        })
    }
}

/// Every page of `dev`, to check that a read-only open wrote nothing.
pub(crate) fn device_bytes(dev: &dyn PageDevice) -> Vec<u8> {
    let ids: Vec<PageId> = (0..dev.capacity()).collect();
    let mut buf = vec![0u8; ids.len() * dev.page_size()];
    dev.read_batch(&ids, &mut buf).unwrap();
    buf
}

/// The level of every page image in the log at `pages` pages from `first`
/// on `dev` (what a restart writes back), from each image's page header.
pub(crate) fn logged_image_levels(
    dev: Arc<dyn PageDevice>,
    first: PageId,
    pages: u64,
    index_id: u128,
) -> BTreeMap<PageId, u16> {
    LogReader::open(dev, first, pages, index_id)
        .unwrap()
        .recover()
        .unwrap()
        .records
        .all()
        .into_iter()
        .filter(|r| r.kind == RecordKind::PageImage)
        .map(|r| {
            let header = crate::page::decode_header(&r.payload, Some(r.page)).unwrap();
            (r.page, header.level)
        })
        .collect()
}

/// The mode a crash-test run switches its store to before operation `i` of
/// `len` when it simulates a batch ([`crate::Index::batch`]): a store
/// configured with [`Durability::UNBOUNDED_GROUP`] runs `sync` from the
/// start, the unbounded group from `len / 3` and `sync` again from
/// `2 * len / 3`. `None` between the switches and for every other mode.
pub(crate) fn batch_switch(configured: Durability, i: usize, len: usize) -> Option<Durability> {
    if configured != Durability::UNBOUNDED_GROUP {
        return None;
    }
    if i == len / 3 {
        Some(Durability::UNBOUNDED_GROUP)
    } else if i == 0 || i == 2 * len / 3 {
        Some(Durability::Sync)
    } else {
        None
    }
}

/// The acknowledgement bookkeeping of one crash-test run.
#[derive(Debug, Clone)]
pub(crate) struct AckOracle {
    durability: Durability,
    /// Operations whose call returned `Ok`.
    done: usize,
    /// Operations acknowledged by the durability mode, from the results seen.
    guaranteed: usize,
    /// The most operations the store has claimed durable.
    claimed: usize,
    /// (the store's id of an operation, operations done once it completed), oldest first.
    ids: Vec<(OpId, usize)>,
}

impl AckOracle {
    /// Bookkeeping for a fresh store in mode `durability`.
    pub(crate) fn new(durability: Durability) -> AckOracle {
        AckOracle {
            durability,
            done: 0,
            guaranteed: 0,
            claimed: 0,
            ids: Vec::new(),
        }
    }

    /// The store switched to mode `durability` between operations (what
    /// [`crate::Index::batch`] does around a batch): the guarantees from
    /// now on are the new mode's.
    pub(crate) fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// An operation's call returned `Ok` on `store`. Errs when the store
    /// then claims fewer durable operations than its mode guarantees.
    pub(crate) fn completed<S: NodeStore + ?Sized>(&mut self, store: &S) -> Result<(), String> {
        self.done += 1;
        let floor = match self.durability {
            Durability::Sync => self.done,
            Durability::Group { ops, .. } => {
                let unsynced = usize::try_from(ops.max(1) - 1).unwrap_or(usize::MAX);
                self.done.saturating_sub(unsynced)
            }
            Durability::None => 0,
        };
        self.guaranteed = self.guaranteed.max(floor);
        if let Some(id) = store.last_committed_op() {
            self.ids.push((id, self.done));
        }
        self.read_claim(store)
    }

    /// A checkpoint returned `Ok` on `store`: every completed operation is
    /// acknowledged. Errs as [`completed`](Self::completed) does.
    pub(crate) fn checkpointed<S: NodeStore + ?Sized>(&mut self, store: &S) -> Result<(), String> {
        self.guaranteed = self.done;
        self.read_claim(store)
    }

    /// Reads the store's claim and compares it with the guarantee.
    fn read_claim<S: NodeStore + ?Sized>(&mut self, store: &S) -> Result<(), String> {
        let claim = store.durable_op().map_or(0, |d| {
            self.ids
                .iter()
                .filter(|(id, _)| *id <= d)
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0)
        });
        self.claimed = self.claimed.max(claim);
        if self.claimed < self.guaranteed {
            return Err(format!(
                "the store reports {} of {} operations durable (durable_op {:?}) where {:?} guarantees {}",
                self.claimed,
                self.done,
                store.durable_op(),
                self.durability,
                self.guaranteed
            ));
        }
        Ok(())
    }

    /// Operations whose call returned `Ok`.
    pub(crate) fn done(&self) -> usize {
        self.done
    }

    /// Operations that must survive a crash now: what the mode guarantees
    /// and whatever more the store has claimed.
    pub(crate) fn acknowledged(&self) -> usize {
        self.guaranteed.max(self.claimed)
    }
}

/// The counts of one crash campaign, printed as one line on standard output
/// (`cargo test ... -- --nocapture` shows it; `docs/benchmarks.md` records
/// them per commit).
#[derive(Debug, Clone, Default)]
pub(crate) struct CrashSummary {
    /// Cases run.
    pub(crate) cases: u64,
    /// Cases whose run was cut by the crash (the others crash after the run).
    pub(crate) crashed_in_run: u64,
    /// Cases that crashed a second time, during the restart.
    pub(crate) crashed_in_restart: u64,
    /// Torn or dropped pages written back from their logged images at restart.
    pub(crate) pages_restored: u64,
    /// Acknowledged operations checked to survive, over all cases.
    pub(crate) acknowledged: u64,
}

impl CrashSummary {
    /// Prints the summary of campaign `name` (store and tree kind).
    pub(crate) fn print(&self, name: &str) {
        println!(
            "crash campaign {name}: {} cases, {} crashed in the run, {} crashed again in restart, \
             {} torn pages restored, {} acknowledged operations checked",
            self.cases,
            self.crashed_in_run,
            self.crashed_in_restart,
            self.pages_restored,
            self.acknowledged
        );
    }
}

/// Where one case of a crash campaign crashes, from the faultless run that
/// `counting` watched: every fourth case at one of that run's syncs, the
/// others at a random one of its page writes (torn as `seed` says).
pub(crate) fn crash_plan<D: PageDevice>(counting: &FaultyDevice<D>, case: u64, seed: u64) -> FaultPlan {
    if case % 4 == 3 {
        let syncs = counting.stats().io.syncs;
        FaultPlan::none()
            .crash_at_sync(1 + seed % syncs.max(1))
            .with_seed(seed)
    } else {
        FaultPlan::random_crash(seed, counting.writes_seen())
    }
}

/// Front-end frames in the crash campaigns (issue 43, item 1): each data
/// operation stages the frame of `k`, the number of data operations done
/// once it completes, with the store's client log (stores whose log holds
/// them), so that restart must hand back exactly the frames of the
/// operations it kept.
pub(crate) fn stage_op_frame(store: &mut dyn NodeStore, k: usize) {
    if let Some(c) = store.client_log() {
        c.stage(&(k as u64).to_le_bytes())
            .expect("an eight-byte frame fits any log");
    }
}

/// Drops what [`stage_op_frame`] staged and the operation did not commit.
pub(crate) fn discard_op_frame(store: &mut dyn NodeStore) {
    if let Some(c) = store.client_log() {
        c.discard_staged();
    }
}

/// Checks the frames restart handed back to a store with a client log
/// (nothing to check without one): the operations `k0 + 1 ..= k` for a
/// `k` among `recovered` (the prefixes the recovered tree matches) and a
/// `k0` among `bounds` (0 and the counts of data operations before each
/// checkpoint, which makes the frames before it obsolete).
pub(crate) fn check_op_frames(
    store: &mut dyn NodeStore,
    recovered: &[usize],
    bounds: &[usize],
) -> std::result::Result<(), String> {
    let Some(found) = store.client_log().and_then(|c| c.take_recovered()) else {
        return Ok(());
    };
    let ks: Vec<u64> = found
        .frames
        .iter()
        .map(|f| <[u8; 8]>::try_from(f.as_slice()).map(u64::from_le_bytes))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("a frame that no operation staged: {:?}", found.frames))?;
    let (k0, k) = match (ks.first(), ks.last()) {
        (Some(&a), Some(&b)) => ((a as usize).saturating_sub(1), b as usize),
        _ => {
            // No frame: the recovered prefix ends at a checkpoint.
            return if recovered.iter().any(|k| bounds.contains(k)) {
                Ok(())
            } else {
                Err(format!("no frame, but the recovered prefixes {recovered:?} end at no checkpoint of {bounds:?}"))
            };
        }
    };
    let consecutive = ks.windows(2).all(|w| w[1] == w[0] + 1);
    if consecutive && recovered.contains(&k) && bounds.contains(&k0) {
        Ok(())
    } else {
        Err(format!(
            "frames of operations {}..={k} (consecutive: {consecutive}) for recovered prefixes {recovered:?} and checkpoints after {bounds:?}",
            k0 + 1
        ))
    }
}

/// The memory device under `dev` once nothing else holds it (a store
/// still holding it is a test bug).
pub(crate) fn unwrap_faulty(dev: Arc<FaultyDevice<MemDevice>>) -> MemDevice {
    match Arc::try_unwrap(dev) {
        Ok(d) => d.into_inner(),
        Err(_) => panic!("the store still holds the device"),
    }
}

/// A restart that may crash too: opens a store with `open` on `durable`
/// under a crash at a random one of its first `max_writes` writes
/// (`seed`), and crashes the device after an open that finished. Returns
/// the device as the crash left it and the open's error, if any.
pub(crate) fn crash_in_restart<S>(
    durable: MemDevice,
    seed: u64,
    max_writes: u64,
    open: impl FnOnce(Arc<dyn PageDevice>) -> Result<S>,
) -> (MemDevice, Option<Error>) {
    let rdev = Arc::new(FaultyDevice::new(
        durable,
        FaultPlan::random_crash(seed, max_writes),
    ));
    let err = match open(rdev.clone()) {
        Ok(s) => {
            drop(s);
            rdev.crash_now().unwrap();
            None
        }
        Err(e) => Some(e),
    };
    (unwrap_faulty(rdev), err)
}

/// A tree's records by id, each rectangle bit for bit.
pub(crate) type State = BTreeMap<u64, [u64; 4]>;

/// Every record of `t` (a query over everything), checking that none
/// appears twice.
pub(crate) fn tree_state<S: NodeStore>(t: &RTree<S>) -> State {
    let all = Rect::new(-1e9, -1e9, 1e9, 1e9).unwrap();
    let hits = t.query(all, Predicate::Intersects).unwrap().hits;
    let n = hits.len();
    let s: State = hits.into_iter().map(|h| (h.id, h.rect.to_bits())).collect();
    assert_eq!(s.len(), n, "an object appears twice in the tree");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;
    use crate::index::{IndexKind, RTree, TreeParams};
    use crate::storage::mem::MemDevice;
    use crate::store::efind::tests::create_on;
    use crate::store::efind::{EfindConfig, EfindStore};
    use crate::store::{StoreStats, TreeMeta};
    use crate::Result;
    use std::sync::Arc;

    /// A store that claims no operation durable, whatever its log did: the
    /// shape of the defect the harness used to miss.
    struct UnderReporting<S>(S);

    impl<S: NodeStore> NodeStore for UnderReporting<S> {
        fn get(&self, id: u64) -> Result<Arc<crate::page::Node>> {
            self.0.get(id)
        }
        fn begin_op(&mut self) -> Result<OpId> {
            self.0.begin_op()
        }
        fn create(&mut self, level: u16, entries: Vec<crate::page::Entry>) -> Result<u64> {
            self.0.create(level, entries)
        }
        fn modify(
            &mut self,
            id: u64,
            level: u16,
            changes: &[super::super::EntryChange],
        ) -> Result<()> {
            self.0.modify(id, level, changes)
        }
        fn delete(&mut self, id: u64) -> Result<()> {
            self.0.delete(id)
        }
        fn set_meta(&mut self, meta: TreeMeta) -> Result<()> {
            self.0.set_meta(meta)
        }
        fn commit_op(&mut self, op: OpId) -> Result<()> {
            self.0.commit_op(op)
        }
        fn meta(&self) -> TreeMeta {
            self.0.meta()
        }
        fn checkpoint(&mut self) -> Result<()> {
            self.0.checkpoint()
        }
        fn stats(&self) -> StoreStats {
            self.0.stats()
        }
        fn restart_buffer_peak(&mut self) {
            self.0.restart_buffer_peak()
        }
        fn last_committed_op(&self) -> Option<OpId> {
            self.0.last_committed_op()
        }
        fn durable_op(&self) -> Option<OpId> {
            None
        }
    }

    fn group(ops: u32) -> Durability {
        Durability::Group {
            ops,
            millis: 1_000_000,
        }
    }

    /// Runs `n` inserts on `store` in an R-tree, feeding `acks`; the first complaint.
    fn run<S: NodeStore>(store: S, acks: &mut AckOracle, n: u64) -> Option<String> {
        let mut t = RTree::create(store, TreeParams::new(IndexKind::RTree, 8)).unwrap();
        for i in 0..n {
            let x = i as f64;
            t.insert(i + 1, Rect::new(x, x, x + 1.0, x + 1.0).unwrap())
                .unwrap();
            if let Err(e) = acks.completed(t.store()) {
                return Some(e);
            }
        }
        None
    }

    fn efind(durability: Durability) -> EfindStore {
        let dev = Arc::new(MemDevice::new(1024, 4096).unwrap());
        let base = EfindConfig {
            durability,
            ..EfindConfig::default()
        };
        let cfg = EfindConfig {
            log_capacity: base.min_log_capacity(1024),
            ..base
        };
        create_on(dev, cfg).unwrap()
    }

    #[test]
    fn the_guarantee_follows_the_durability_mode() {
        let mut a = AckOracle::new(Durability::Sync);
        assert_eq!(run(efind(Durability::Sync), &mut a, 5), None);
        assert_eq!(a.acknowledged(), 5);
        // Under Sync a silent store is caught at the first operation.
        let mut a = AckOracle::new(Durability::Sync);
        assert!(run(UnderReporting(efind(Durability::Sync)), &mut a, 1).is_some());
        let mut a = AckOracle::new(group(3));
        assert_eq!(run(efind(group(3)), &mut a, 7), None);
        assert_eq!(a.done(), 7);
        assert!(a.acknowledged() >= 5, "{a:?}");
        let mut a = AckOracle::new(Durability::None);
        assert_eq!(run(efind(Durability::None), &mut a, 4), None);
        assert_eq!(a.acknowledged(), 0);
    }

    /// Regression: the group-commit crash cases took the acknowledged count
    /// from the store under test, so a store claiming nothing durable passed
    /// with nothing to check. The harness now knows the mode's guarantee.
    #[test]
    fn a_store_under_reporting_its_group_commits_is_caught() {
        let mut honest = AckOracle::new(group(3));
        assert_eq!(run(efind(group(3)), &mut honest, 6), None);
        let mut a = AckOracle::new(group(3));
        let complaint = run(UnderReporting(efind(group(3))), &mut a, 6)
            .expect("an under-reporting store must be caught");
        assert!(complaint.contains("guarantees 1"), "{complaint}");
        // After a checkpoint everything is guaranteed.
        let mut a = AckOracle::new(Durability::None);
        let mut t = RTree::create(
            efind(Durability::None),
            TreeParams::new(IndexKind::RTree, 8),
        )
        .unwrap();
        t.insert(1, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()).unwrap();
        a.completed(t.store()).unwrap();
        t.store_mut().checkpoint().unwrap();
        a.checkpointed(t.store()).unwrap();
        assert_eq!(a.acknowledged(), 1);
    }
}
