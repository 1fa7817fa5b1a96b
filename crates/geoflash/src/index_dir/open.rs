//! Opening the [`Index`] in a directory: the manifest read back and the
//! device, log and store reopened from it (a store with a log runs restart
//! when opened for writing), errors naming the page file.
use std::path::Path;
use std::sync::Mutex;

use super::devices::{missing_file, reopen_device};
use super::journal::Created;
use super::factory::{make, open_log_device, pages_file, Site, StoreOpen, LOG_FILE};
use super::Index;
use crate::config::StructureConfig;
use crate::index::RTree;
use crate::manifest::{Access, DirLock, Manifest};
use crate::metrics::PhaseTimes;
use crate::storage::spec::DeviceSpec;
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
        let mut manifest = Manifest::load(dir)?;
        // Before anything is opened or recovered: a heap the manifest names.
        super::objects::require_heap_file(dir, &manifest)?;
        let store = manifest.store;
        let spec = DeviceSpec::parse(&manifest.device)?;
        if matches!(spec, DeviceSpec::File { .. }) && !store.is_plain() {
            // The log of a logged store on a file device (opening it for
            // writing would create an empty one, losing its operations).
            let log = dir.join(LOG_FILE);
            if !log.exists() {
                return Err(missing_file(&log, "the log of the index"));
            }
        }
        // A structure that writes in place, or a hybrid of a file and a
        // simulator: its rollback journal brings the pages back to the last
        // checkpoint (see `journal`).
        let in_place = (matches!(manifest.structure, StructureConfig::Grid(_))
            || store.is_plain())
            && !store.in_place();
        let journaled = super::journal::needs_journal(&spec, in_place, store.in_place());
        // What a crash left of a checkpoint's save of the simulators'
        // images and a hybrid's map, committed with the journal (`images`).
        let journal_generation = match journaled {
            true => super::journal::committed_generation(dir, manifest.page_size)?,
            false => None,
        };
        let load = super::images::settle(dir, access, journal_generation)?;
        let (device, images) = reopen_device(&spec, manifest.page_size, dir, access, load)?;
        let (device, journal, rolled_back) = match journaled {
            true => match super::journal::open_journal(
                device.clone(),
                dir,
                access,
                Created::Before(manifest.journal),
            )? {
                Some(j) => (j.device, Some(j.journal), j.rollback.pages_restored),
                None => (device, None, 0),
            },
            false => (device, None, 0),
        };
        if journal.is_some() {
            super::journal::require_journal(dir, access, &mut manifest)?;
        }
        let log_device = open_log_device(&spec, &store, dir, manifest.page_size, access)?;
        let how = match access {
            Access::Read => StoreOpen::Read,
            Access::Write => StoreOpen::Write,
        };
        let mut times = PhaseTimes::default();
        // Opening a store with a log for writing runs its restart (recovery).
        let site = Site {
            device: device.clone(),
            log_device: log_device.clone(),
            how,
            recovery: mode,
        };
        let (tree, restart) = make(
            &manifest.structure,
            &store,
            site,
            Box::new(RTree::open),
            &mut times,
        )?;
        let mut index = Index {
            dir: Some(dir.to_path_buf()),
            manifest,
            tree,
            device,
            log_device,
            restart,
            journal,
            rolled_back,
            images,
            objects: None,
            access,
            _lock: Some(lock),
            built_in: None,
            times: Mutex::new(times),
            in_batch: false,
            operation_cpu_time: true,
            locator: Default::default(),
            checkpoints: super::checkpoints::CheckpointTimer::new(store.checkpoint_interval()),
            records: Default::default(),
            failure: None,
        };
        // The frames restart kept: the object heap's changes (on top of its
        // committed records) and a record map's whose changes are in the
        // store's log (on top of its snapshot).
        let mut found = index.tree.client_log().and_then(|c| c.take_recovered());
        let heap_frames = match found.as_mut() {
            Some(f) => {
                let (heap, map): (Vec<_>, Vec<_>) = std::mem::take(&mut f.frames)
                    .into_iter()
                    .partition(|fr| crate::objects::frame::is_heap_frame(fr));
                f.frames = map;
                heap
            }
            None => Vec::new(),
        };
        index.open_heap(heap_frames)?;
        index.open_logged_records(found)?;
        index.note_own_log_records();
        Ok(index)
    }
}
