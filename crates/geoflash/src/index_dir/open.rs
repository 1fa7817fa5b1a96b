//! Opening the [`Index`] in a directory: the manifest read back and the
//! device, log and store reopened from it (a store with a log runs restart
//! when opened for writing), errors naming the page file.
use std::path::Path;
use std::sync::Mutex;

use super::devices::{missing_file, reopen_device};
use super::factory::{make_store_payload, open_log_device, pages_file, StoreOpen, LOG_FILE};
use super::objects::open_objects;
use super::options::{StoreKind, StoreOptions};
use super::Index;
use crate::grid::{GridConfig, GridKind};
use crate::index::fortree::{Fortree, FortreeConfig};
use crate::index::xbr::{XbrConfig, XbrTree};
use crate::index::{IndexKind, RTree, TreeParams};
use crate::manifest::{Access, DirLock, Manifest};
use crate::metrics::{Phase, PhaseTimes, Stopwatch};
use crate::spatial::SpatialIndex;
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::store::log::RecoveryMode;
use crate::{Error, Result};

impl Index {
    /// Opens the index in `dir` for reading (shared) or writing (exclusive).
    /// `buffer` overrides the store's memory budget for this session.
    pub fn open(dir: &Path, access: Access) -> Result<Index> {
        Index::open_in_mode(dir, access, RecoveryMode::AbsoluteConsistency)
    }

    /// Opens the index in `dir` for writing, its store's restart handling
    /// damage before the log's tail as `mode` says (with
    /// [`RecoveryMode::TolerateCorruptTail`] the first damaged log page ends
    /// the log; the restart report counts what was dropped).
    pub fn open_recovering(dir: &Path, mode: RecoveryMode) -> Result<Index> {
        Index::open_in_mode(dir, Access::Write, mode)
    }

    fn open_in_mode(dir: &Path, access: Access, mode: RecoveryMode) -> Result<Index> {
        Index::open_unlocated(dir, access, mode).map_err(|e| match Manifest::load(dir) {
            Ok(m) => e.in_file(pages_file(dir, &m)),
            Err(_) => e,
        })
    }

    /// [`Index::open`] without naming the file in corruption errors.
    fn open_unlocated(dir: &Path, access: Access, mode: RecoveryMode) -> Result<Index> {
        if !dir.join(crate::manifest::MANIFEST_FILE).is_file() {
            return Err(Error::invalid(format!(
                "{} is not an index directory (no {}){}",
                dir.display(),
                crate::manifest::MANIFEST_FILE,
                crate::staging::interrupted_hint(dir).unwrap_or_default()
            )));
        }
        let lock = DirLock::acquire(dir, access)?;
        let manifest = Manifest::load(dir)?;
        let index_params = |what: &str| {
            Error::corrupt(
                None,
                format!("manifest {what} parameters: {}", manifest.index),
            )
        };
        let mut xbr: Option<XbrConfig> = None;
        let mut grid: Option<GridConfig> = None;
        let (params, fortree) = if GridKind::of(&manifest.kind).is_some() {
            let c: GridConfig = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("grid file"))?;
            grid = Some(c);
            (TreeParams::new(IndexKind::RTree, 3), None)
        } else if manifest.kind == "fortree" {
            let c: FortreeConfig = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("FOR-tree"))?;
            (TreeParams::new(IndexKind::RTree, c.max_entries), Some(c))
        } else if manifest.kind == "xbr" {
            let c: XbrConfig = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("xBR+-tree"))?;
            xbr = Some(c);
            (TreeParams::new(IndexKind::RTree, c.max_entries), None)
        } else {
            let p: TreeParams = serde_json::from_value(manifest.index.clone())
                .map_err(|_| index_params("index"))?;
            (p, None)
        };
        let mut store_opts: StoreOptions = serde_json::from_value(manifest.store.clone())
            .map_err(|e| Error::corrupt(None, format!("manifest store parameters: {e}")))?;
        store_opts.recovery = mode;
        let spec = DeviceSpec::parse(&manifest.device)?;
        if matches!(spec, DeviceSpec::File { .. }) && store_opts.kind != StoreKind::Plain {
            // The log of a logged store on a file device (opening it for
            // writing would create an empty one, losing its operations).
            let log = dir.join(LOG_FILE);
            if !log.exists() {
                return Err(missing_file(&log, "the log of the index"));
            }
        }
        let (device, sims) = reopen_device(&spec, manifest.page_size, dir, access)?;
        // A structure that writes in place: its rollback journal brings the
        // pages back to the last checkpoint (see `journal`).
        let in_place =
            (grid.is_some() || store_opts.kind == StoreKind::Plain) && !store_opts.in_place;
        let (device, journal, rolled_back) = match super::journal::needs_journal(&spec, in_place) {
            true => match super::journal::open_journal(device.clone(), dir, access, false)? {
                Some(j) => (j.device, Some(j.journal), j.rollback.pages_restored),
                None => (device, None, 0),
            },
            false => (device, None, 0),
        };
        let log_device = open_log_device(&spec, &store_opts, dir, manifest.page_size, access)?;
        let how = match access {
            Access::Read => StoreOpen::Read,
            Access::Write => StoreOpen::Write,
        };
        let mut times = PhaseTimes::default();
        let (tree, restart): (Box<dyn SpatialIndex>, _) = match grid {
            // A grid file has no node store: it reopens from its device.
            Some(g) => (g.open(device.clone())?, None),
            None => {
                // Opening a store with a log for writing runs its restart (recovery).
                let watch = Stopwatch::start(device.sim_clock_ns());
                let (store, restart) = make_store_payload(
                    device.clone(),
                    log_device.clone(),
                    &store_opts,
                    params.kind == IndexKind::Hilbert || xbr.is_some(),
                    how,
                )?;
                if restart.is_some() {
                    watch.stop(Phase::Recovery, device.sim_clock_ns(), &mut times);
                }
                let tree: Box<dyn SpatialIndex> = match (fortree, xbr) {
                    (Some(c), _) => Box::new(Mutex::new(Fortree::open(store, c)?)),
                    (None, Some(c)) => Box::new(XbrTree::open(store, c)?),
                    (None, None) => Box::new(RTree::open(store, params)?),
                };
                (tree, restart)
            }
        };
        Ok(Index {
            dir: Some(dir.to_path_buf()),
            manifest,
            tree,
            device,
            log_device,
            restart,
            journal,
            rolled_back,
            sims,
            objects: open_objects(dir, access)?,
            access,
            _lock: Some(lock),
            times: Mutex::new(times),
            in_batch: false,
            operation_cpu_time: true,
            locator: Default::default(),
        })
    }
}
