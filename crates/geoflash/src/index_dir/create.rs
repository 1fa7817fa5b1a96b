//! Creating an [`Index`]: empty, filled by a closure, or bulk-loaded (in
//! memory, or with bounded memory), in a directory always atomically
//! through a staging directory; and the one place that makes the manifest,
//! device, log and store of a new index.
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::devices::{create_device, Images};
use super::factory::{make, open_log_device, Site, StoreOpen};
use super::options::IndexOptions;
use super::Index;
use crate::config::{StoreSpec, StructureConfig, StructureSpec};
use crate::geom::Rect;
use crate::index::bulk::BulkWatch;
use crate::index::xbr::BulkOptions;
use crate::index::{BulkMethod, ExternalBulkConfig, ExternalBulkReport, RTree, TreeParams};
use crate::manifest::{Access, DirLock, Manifest, MANIFEST_VERSION};
use crate::metrics::{Phase, PhaseTimes};
use crate::staging::Staging;
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::store::log::RecoveryMode;
use crate::store::NodeStore;
use crate::{Error, Result};

/// What a build does with its index when the process asked its builds to
/// stop ([`crate::engine::request_stop`], the command line's Ctrl-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnStop {
    /// Abandons its staging directory: nothing is published.
    Abandon,
    /// Publishes what its fill returned `Ok` with.
    Publish,
}

impl Index {
    /// Creates a new, empty index in `dir` (created if missing; it must not hold an index yet).
    /// Created atomically, as [`Index::build`] creates.
    pub fn create(dir: &Path, opts: &IndexOptions) -> Result<Index> {
        Index::build(dir, opts, |_| Ok::<(), Error>(())).map(|(index, ())| index)
    }

    /// Whether an index on `device` can be reopened by a later process from
    /// its directory: `false` for devices that live only in this process
    /// (`mem:`, `hddsim:`, a `hybrid:` with such a tier), whose index in a
    /// directory no later command can open (front ends refuse to build one
    /// there).
    pub fn device_outlives_process(device: &DeviceSpec) -> bool {
        super::devices::outlives_process(device)
    }

    /// Refuses `dir` as the directory of a new index unless it is absent
    /// or an empty directory, with the error [`Index::build`] would give:
    /// callers that read a large input first check the target before.
    pub fn check_new_dir(dir: &Path) -> Result<()> {
        crate::staging::check_target(dir)
    }

    /// A new, empty index with no directory (any device but a plain `file`;
    /// it lives in this process).
    pub fn create_temporary(opts: &IndexOptions) -> Result<Index> {
        Index::create_in(None, opts, RTree::create)
    }

    /// A new index in `dir` (or in this process only, for `None`) holding
    /// `items`, built bottom-up by `method` at fill factor `fill` in (0, 1],
    /// each page written once. Created atomically (see [`Index::build`]):
    /// in a process that asks its builds to stop
    /// ([`crate::engine::request_stop`], the command line's Ctrl-C) the
    /// load stops at its next node, or before or after its next sort, and
    /// publishes nothing ([`Error::Interrupted`]).
    pub fn bulk_load(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        Index::bulk_load_with_progress(dir, opts, items, method, fill, &|_, _| {})
    }

    /// [`Index::bulk_load`], telling `progress` how far the writing of the
    /// tree is: the nodes stored so far and the tree's total (each a page),
    /// every 64 nodes and after the last one (the R-tree family; the
    /// xBR+-tree's own load tells nothing).
    pub fn bulk_load_with_progress(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
        progress: &dyn Fn(u64, u64),
    ) -> Result<Index> {
        let watch = BulkWatch::new(stop_of(dir), progress);
        Index::bulk_load_watched(dir, opts, items, method, fill, watch)
    }

    /// [`Index::bulk_load`], stopped and followed by `watch` (in a
    /// directory, [`stop_of`] is the process's stop request).
    pub(super) fn bulk_load_watched(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
        watch: BulkWatch<'_>,
    ) -> Result<Index> {
        opts.structure.check_bulk_load()?;
        Index::staged_or_temporary(dir, opts, |at| {
            Index::bulk_load_at(at, None, opts, items, method, fill, watch)
        })
        .map_err(|e| stopped_in(dir, e))
    }

    /// [`Index::bulk_load`] into `dir`, then `then` on the new index while
    /// it is still in its staging directory (`Index::dir` names that): what
    /// a front end keeps beside the tree (the Python package's id map) is
    /// written before the index is checkpointed and published, so a load
    /// whose `then` fails, or a process killed in it, publishes nothing
    /// (before, the index was published first and reopened without its
    /// map, answering with record keys for ids).
    pub fn bulk_load_then(
        dir: &Path,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
        then: impl FnOnce(&mut Index) -> Result<()>,
    ) -> Result<Index> {
        opts.structure.check_bulk_load()?;
        let watch = BulkWatch::stopped_by(stop_of(Some(dir)));
        Index::staged(dir, opts, |staging| {
            let mut index =
                Index::bulk_load_at(Some(staging), None, opts, items, method, fill, watch)?;
            then(&mut index)?;
            Ok((index, ()))
        })
        .map(|(index, ())| index)
        .map_err(|e| stopped_in(Some(dir), e))
    }

    /// A new, empty index with no directory on `device`, a device already
    /// open (a traced or wrapped one, say) instead of one made from
    /// `opts.device`; a store's log lives in a region of it. Created as
    /// [`Index::create_temporary`] creates (one checkpoint).
    pub fn create_on(device: Arc<dyn PageDevice>, opts: &IndexOptions) -> Result<Index> {
        Index::create_at(None, Some(device), opts, RTree::create)
    }

    /// [`Index::bulk_load`] into a new index with no directory on `device`
    /// (see [`Index::create_on`]).
    pub fn bulk_load_on(
        device: Arc<dyn PageDevice>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
    ) -> Result<Index> {
        opts.structure.check_bulk_load()?;
        Index::bulk_load_at(
            None,
            Some(device),
            opts,
            items,
            method,
            fill,
            BulkWatch::NONE,
        )
    }

    /// Runs `make` in a staging directory for `dir` and publishes the index
    /// it makes atomically ([`Index::staged`]); without a directory runs it
    /// as it is (the index lives in this process).
    fn staged_or_temporary(
        dir: Option<&Path>,
        opts: &IndexOptions,
        make: impl FnOnce(Option<&Path>) -> Result<Index>,
    ) -> Result<Index> {
        match dir {
            Some(dir) => Index::staged(dir, opts, |staging| make(Some(staging)).map(|i| (i, ())))
                .map(|(index, ())| index),
            None => make(None),
        }
    }

    /// [`Index::bulk_load`] with its files in `dir` as it is (no staging),
    /// on `device` when given (see [`Index::create_at`]), stopped and
    /// followed by `watch` (the R-tree family's loads).
    pub(super) fn bulk_load_at(
        dir: Option<&Path>,
        device: Option<Arc<dyn PageDevice>>,
        opts: &IndexOptions,
        items: Vec<(u64, Rect)>,
        method: BulkMethod,
        fill: f64,
        watch: BulkWatch<'_>,
    ) -> Result<Index> {
        let opts = opts.with_domain_of(items.iter().map(|(_, r)| r));
        if matches!(opts.structure, StructureSpec::Xbr(_)) {
            // The xBR+-tree's own bulk load (Z-order, write batches), into
            // the empty tree the directory is created with.
            // Every record a point before the index is created; then the
            // points as the load takes them, no list of them beside its
            // Z-ordered copy (24 bytes a point).
            for (id, r) in items.iter() {
                crate::spatial::as_point(*id, r)?;
            }
            let points = items
                .iter()
                .map(|&(id, r)| crate::spatial::as_point(id, &r).map(|p| (id, p)));
            let mut index = Index::create_at(dir, device, &opts, RTree::create)?;
            let watch = index.watch();
            let tree = index
                .tree
                .xbr_mut()
                .ok_or_else(|| Error::invalid("only an xBR+-tree takes points this way"))?;
            tree.load_each(points, BulkOptions::default())?;
            index.note(watch, Phase::Index);
            index.checkpoint()?;
            return Ok(index);
        }
        Index::create_at(dir, device, &opts, |store, params| {
            RTree::bulk_load_watched(store, params, items, method, fill, watch)
        })
    }

    /// A new index in `dir` (or in this process only, for `None`) holding
    /// `items`, packed bottom-up by `method` with bounded memory: about
    /// `config.memory_budget` bytes of records, the rest in temporary files
    /// (`RTree::bulk_load_external`), so the input may be larger than
    /// memory. With a `dir` the temporary files go in the build's staging
    /// directory (`config.temp_dir` is not used), so that a killed load's
    /// files go with it (the next build of `dir` removes it); without one,
    /// in `config.temp_dir`. The first error among `items` stops the load
    /// (at its next sort run, merge or node) and is returned, and no index
    /// is left (the directory is created atomically, as [`Index::build`]
    /// creates); so does a stop request of the process, as in
    /// [`Index::bulk_load`]. The R-tree family and the xBR+-tree (whose
    /// records are points, sorted by address and written through the
    /// store's bulk load: the tree of its load in memory, node for node);
    /// a Hilbert R-tree and the xBR+-tree need their domain in `opts` (the
    /// manifest records it before the load). `method` and `fill` do not
    /// apply to the xBR+-tree.
    pub fn bulk_load_external<I>(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: I,
        method: BulkMethod,
        fill: f64,
        config: &ExternalBulkConfig,
    ) -> Result<(Index, ExternalBulkReport)>
    where
        I: IntoIterator<Item = Result<(u64, Rect)>>,
    {
        Index::bulk_load_external_with_progress(dir, opts, items, method, fill, config, &|_, _| {})
    }

    /// [`Index::bulk_load_external`], telling `progress` how far the
    /// writing of the tree is, as [`Index::bulk_load_with_progress`] does.
    pub fn bulk_load_external_with_progress<I>(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: I,
        method: BulkMethod,
        fill: f64,
        config: &ExternalBulkConfig,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(Index, ExternalBulkReport)>
    where
        I: IntoIterator<Item = Result<(u64, Rect)>>,
    {
        Index::bulk_load_external_watched(
            dir,
            opts,
            items,
            method,
            fill,
            config,
            progress,
            stop_of(dir),
        )
    }

    /// [`Index::bulk_load_external_with_progress`], stopped by `stop` (and
    /// by the first error among `items`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bulk_load_external_watched<I>(
        dir: Option<&Path>,
        opts: &IndexOptions,
        items: I,
        method: BulkMethod,
        fill: f64,
        config: &ExternalBulkConfig,
        progress: &dyn Fn(u64, u64),
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<(Index, ExternalBulkReport)>
    where
        I: IntoIterator<Item = Result<(u64, Rect)>>,
    {
        let xbr = matches!(opts.structure, StructureSpec::Xbr(_));
        if !matches!(opts.structure, StructureSpec::Tree(_)) && !xbr {
            return Err(Error::invalid(
                "the bounded-memory bulk load builds the R-tree family (rtree, rstar, hilbert) \
                 and the xBR+-tree; build the FOR-tree and the grid files by insertion",
            ));
        }
        let failure: std::cell::Cell<Option<Error>> = std::cell::Cell::new(None);
        // A failed input stops the load as a stop request does (the input's
        // error is returned, not the load's).
        let failed = std::sync::atomic::AtomicBool::new(false);
        let records = items.into_iter().map_while(|r| match r {
            Ok(v) => Some(v),
            Err(e) => {
                failure.set(Some(e));
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                None
            }
        });
        let stop_load = || failed.load(std::sync::atomic::Ordering::Relaxed) || stop();
        let watch = BulkWatch::new(&stop_load, progress);
        let mut report = ExternalBulkReport::default();
        let make = |at: Option<&Path>| {
            let config = match at {
                Some(staging) => &ExternalBulkConfig {
                    temp_dir: staging.to_path_buf(),
                    ..config.clone()
                },
                None => config,
            };
            if xbr {
                let mut index = Index::create_in(at, opts, RTree::create)?;
                let loaded = Index::load_xbr_external(&mut index, records, config, watch);
                if let Some(e) = failure.take() {
                    return Err(e);
                }
                report = loaded.map_err(|e| stopped_in(dir, e))?;
                index.checkpoint()?;
                return Ok(index);
            }
            Index::create_in(at, opts, |store, params| {
                let loaded = RTree::bulk_load_external_watched(
                    store, params, records, method, fill, config, watch,
                );
                if let Some(e) = failure.take() {
                    return Err(e);
                }
                let (tree, r) = loaded.map_err(|e| stopped_in(dir, e))?;
                report = r;
                Ok(tree)
            })
        };
        let index = Index::staged_or_temporary(dir, opts, make)?;
        Ok((index, report))
    }

    /// The bounded-memory bulk load of the xBR+-tree into the new, empty
    /// `index`: the records as points (a box is an error naming its id),
    /// sorted by address through temporary files
    /// ([`XbrTree::load_external`](crate::index::xbr::XbrTree::load_external)).
    fn load_xbr_external(
        index: &mut Index,
        records: impl Iterator<Item = (u64, Rect)>,
        config: &ExternalBulkConfig,
        watch: BulkWatch<'_>,
    ) -> Result<ExternalBulkReport> {
        let points = records.map(|(id, r)| crate::spatial::as_point(id, &r).map(|p| (id, p)));
        let phase = index.watch();
        let tree = index
            .tree
            .xbr_mut()
            .ok_or_else(|| Error::invalid("only an xBR+-tree takes points this way"))?;
        let report = tree.load_external(points, BulkOptions::default(), config, watch)?;
        index.note(phase, Phase::Index);
        Ok(report)
    }

    /// A new index in `dir`, filled by `fill` (insertions, say), created
    /// atomically: everything happens in the staging directory beside `dir`
    /// (`.NAME.building`, see `crate::staging`), which is checkpointed and
    /// renamed onto `dir` once `fill` returns `Ok`. If anything fails the
    /// staging directory is removed (and the `file:PATH` device files the
    /// build created), so `dir` is left as it was: absent, or an empty
    /// directory. `dir` must not exist yet, or be an empty directory.
    ///
    /// A build in a process that asked its builds to stop
    /// ([`crate::engine::request_stop`], the command line's Ctrl-C) does not
    /// publish: it abandons the staging directory and returns
    /// [`Error::Interrupted`], whatever `fill` returned. A process killed
    /// inside `fill` leaves the staging
    /// directory, a consistent index that
    /// [`crate::staging::adopt_interrupted`] (`geoflash recover`) renames
    /// onto `dir`.
    pub fn build<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        fill: impl FnOnce(&mut Index) -> std::result::Result<T, E>,
    ) -> std::result::Result<(Index, T), E> {
        Index::build_with(dir, opts, OnStop::Abandon, fill)
    }

    /// [`Index::build`] for a fill that acknowledges operations as it goes
    /// (the command line's `build --ack-every`): what `fill` returns `Ok`
    /// with is published also after a stop request (Ctrl-C), since the
    /// operations it acknowledged were promised durable.
    pub fn build_acknowledging<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        fill: impl FnOnce(&mut Index) -> std::result::Result<T, E>,
    ) -> std::result::Result<(Index, T), E> {
        Index::build_with(dir, opts, OnStop::Publish, fill)
    }

    fn build_with<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        on_stop: OnStop,
        fill: impl FnOnce(&mut Index) -> std::result::Result<T, E>,
    ) -> std::result::Result<(Index, T), E> {
        Index::staged_on_stop(dir, opts, on_stop, |staging| {
            let mut index = Index::create_in(Some(staging), opts, RTree::create)?;
            let t = fill(&mut index)?;
            Ok((index, t))
        })
    }

    /// Runs `make` on a new staging directory for `dir` and publishes what
    /// it returns (checkpointed, renamed onto `dir`); removes the staging
    /// directory if anything fails or the process asked its builds to
    /// stop. The one place where index directories are created.
    pub(super) fn staged<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        make: impl FnOnce(&Path) -> std::result::Result<(Index, T), E>,
    ) -> std::result::Result<(Index, T), E> {
        Index::staged_on_stop(dir, opts, OnStop::Abandon, make)
    }

    /// [`Index::staged`], publishing after a stop request as `on_stop` says.
    fn staged_on_stop<T, E: From<Error>>(
        dir: &Path,
        opts: &IndexOptions,
        on_stop: OnStop,
        make: impl FnOnce(&Path) -> std::result::Result<(Index, T), E>,
    ) -> std::result::Result<(Index, T), E> {
        refuse_memory_store(dir, &opts.store)?;
        let spec = opts.device.clone().with_absolute_paths()?;
        let staging = Staging::begin(dir, &spec)?;
        let abandon = || on_stop == OnStop::Abandon && crate::staging::stop_requested();
        let made = make(staging.dir()).and_then(|(mut index, t)| {
            if abandon() {
                return Err(interrupted(dir).into());
            }
            index.checkpoint()?;
            if abandon() {
                return Err(interrupted(dir).into());
            }
            staging.publish()?;
            index.built_in = Some(staging.dir().to_path_buf());
            index.dir = Some(dir.to_path_buf());
            if let Some(lock) = index._lock.as_mut() {
                lock.moved_to(dir);
            }
            if let Some(heap) = index.objects.as_mut() {
                heap.moved_to(dir);
            }
            Ok((index, t))
        });
        if made.is_err() {
            staging.abandon();
        }
        made
    }

    /// Creates the manifest, device and store in `dir` (a new staging
    /// directory, see [`Index::staged`]), and lets `build` make the tree.
    pub(super) fn create_in(
        dir: Option<&Path>,
        opts: &IndexOptions,
        build: impl FnOnce(Box<dyn NodeStore>, TreeParams) -> Result<RTree<Box<dyn NodeStore>>>,
    ) -> Result<Index> {
        Index::create_at(dir, None, opts, build)
    }

    /// [`Index::create_in`], on `device` when given (an index without a
    /// directory on a device already open) instead of one made from the spec.
    fn create_at(
        dir: Option<&Path>,
        device: Option<Arc<dyn PageDevice>>,
        opts: &IndexOptions,
        build: impl FnOnce(Box<dyn NodeStore>, TreeParams) -> Result<RTree<Box<dyn NodeStore>>>,
    ) -> Result<Index> {
        let structure = opts.resolve()?;
        let (mut store, auto_log) = new_store(opts, &structure)?;
        if let Some(dir) = dir {
            refuse_memory_store(dir, &store)?;
        }
        // Recorded absolute: the index opens from any directory.
        let spec = opts.device.clone().with_absolute_paths()?;
        let (lock, (device, images), log_device) = match (dir, device) {
            (None, Some(device)) => (None, (device, Images::default()), None),
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    "an index in a directory makes its own device from the spec",
                ))
            }
            (Some(dir), None) => {
                // A new, empty staging directory (nothing to clear).
                let lock = DirLock::acquire(dir, Access::Write)?;
                let log_device = open_log_device(&spec, &store, dir, opts.page_size, Access::Write)?;
                (Some(lock), create_device(&spec, opts.page_size, Some(dir))?, log_device)
            }
            (None, None) if matches!(spec, DeviceSpec::File { path: None, .. }) => {
                return Err(Error::invalid(
                    "an index without a directory needs a device other than plain \"file\" (e.g. mem:)",
                ))
            }
            (None, None) => (None, create_device(&spec, opts.page_size, None)?, None),
        };
        // A structure that writes in place gets a rollback journal on the
        // directory's file (see `journal`).
        let in_place = (matches!(structure, StructureConfig::Grid(_)) || store.is_plain())
            && !store.in_place();
        let (device, journal) = match dir {
            Some(dir) if super::journal::needs_journal(&spec, in_place, store.in_place()) => {
                match super::journal::open_journal(
                    device.clone(),
                    dir,
                    Access::Write,
                    super::journal::Created::Now,
                )? {
                    Some(j) => (j.device, Some(j.journal)),
                    None => (device, None),
                }
            }
            _ => (device, None),
        };
        if auto_log {
            size_automatic_log(&mut store, log_device.as_deref(), &*device, opts.page_size)?;
        }
        let manifest = Manifest {
            format_version: MANIFEST_VERSION,
            created_by: format!("geoflash {}", env!("CARGO_PKG_VERSION")),
            structure,
            page_size: opts.page_size,
            device: spec.to_string(),
            crs: opts.crs.clone(),
            store,
            journal: journal.is_some(),
            // Set when the heap is created (`objects.rs`).
            objects: false,
            objects_mark: None,
        };
        let mut times = PhaseTimes::default();
        let site = Site {
            device: device.clone(),
            log_device: log_device.clone(),
            how: StoreOpen::Create,
            recovery: RecoveryMode::default(),
        };
        let (tree, _) = make(&structure, &store, site, Box::new(build), &mut times)?;
        let mut index = Index {
            dir: dir.map(Path::to_path_buf),
            manifest,
            tree,
            device,
            log_device,
            restart: None,
            journal,
            rolled_back: 0,
            images,
            objects: None,
            access: Access::Write,
            _lock: lock,
            built_in: None,
            times: Mutex::new(times),
            in_batch: false,
            operation_cpu_time: true,
            locator: Default::default(),
            checkpoints: super::checkpoints::CheckpointTimer::new(store.checkpoint_interval()),
            records: Default::default(),
            failure: None,
        };
        index.checkpoint()?;
        // The manifest is written last: a directory without one holds no index.
        if let Some(dir) = dir {
            index.manifest.store(dir)?;
        }
        Ok(index)
    }
}

/// The store a new index of `opts` with structure `structure` records,
/// and whether its log's capacity is automatic (the user gave none). The
/// FOR-tree's and a grid file's buffers are their own (recorded in their
/// parameters), so their store keeps no budget; the manifest records every
/// eFIND and FAST parameter, durability and log size included (FAST's open
/// sizes its log from it; eFIND's automatic capacity, 0, is resolved by
/// `EfindConfig::log_placement` at creation and at open, the store's
/// identity page keeping the range it chose).
fn new_store(opts: &IndexOptions, structure: &StructureConfig) -> Result<(StoreSpec, bool)> {
    opts.store.verify(opts.page_size)?;
    let mut store = opts.store;
    if matches!(
        structure,
        StructureConfig::Fortree(_) | StructureConfig::Grid(_)
    ) {
        store.set_buffer_bytes(0);
    }
    let auto_log = store.log_capacity() == Some(0);
    if let StoreSpec::Fast(s) = &mut store {
        s.fast.buffer_bytes = s.buffer_bytes;
        s.fast.log_capacity = s.fast.resolved_log_capacity();
        s.fast.verify()?;
    }
    Ok((store, auto_log))
}

/// Sizes the automatic log of a new logged index in `store`. In its own
/// file (`log_device`) an automatic log starts at
/// [`MIN_FILE_LOG_CAPACITY`] and must fit the file (a log too large is the
/// buffer's doing, and the error says so); on the node device (`device`,
/// pages of `page_size` bytes) FAST's leaves room for the nodes, as
/// eFIND's does. The manifest keeps the size chosen.
fn size_automatic_log(
    store: &mut StoreSpec,
    log_device: Option<&dyn PageDevice>,
    device: &dyn PageDevice,
    page_size: usize,
) -> Result<()> {
    match (store, log_device) {
        (store, Some(ld)) => {
            floor_file_log(store);
            let capacity = match store {
                StoreSpec::Efind(s) => s.efind.resolved_log_capacity(),
                StoreSpec::Fast(s) => s.fast.resolved_log_capacity(),
                StoreSpec::Plain(_) | StoreSpec::Memory(_) => return Ok(()),
            };
            crate::store::log::placement::check_automatic_fits(capacity, ld)
        }
        (StoreSpec::Fast(s), None) => {
            s.fast.log_capacity = crate::store::log::cap_to_shared_device(
                s.fast.log_capacity,
                device.capacity().saturating_mul(page_size as u64),
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Refuses the memory store for an index in directory `dir`: its nodes
/// live in the process that makes them, so no later one could open it.
fn refuse_memory_store(dir: &Path, store: &StoreSpec) -> Result<()> {
    if matches!(store, StoreSpec::Memory(_)) {
        return Err(Error::invalid(format!(
            "the memory store keeps its nodes in this process only: the index in {} needs a store \
             with a device (plain, efind or fast); leave the directory out for an index in memory",
            dir.display()
        )));
    }
    Ok(())
}

/// What stops a bulk load of an index in `dir`: in a directory, the
/// process's request to stop its builds (its staging directory would be
/// abandoned anyway: the load stops early instead); without one, nothing.
pub(super) fn stop_of(dir: Option<&Path>) -> &'static (dyn Fn() -> bool + Sync) {
    fn never() -> bool {
        false
    }
    match dir {
        Some(_) => &crate::staging::stop_requested,
        None => &never,
    }
}

/// The error `e` of a bulk load of `dir`: a load stopped by the process's
/// stop request ([`stop_of`]) says what it left, as every build stopped
/// before it published says it.
pub(super) fn stopped_in(dir: Option<&Path>, e: Error) -> Error {
    match (dir, e) {
        (Some(dir), Error::Interrupted(_)) => interrupted(dir),
        (_, e) => e,
    }
}

/// The error of a build of `dir` stopped before it published.
fn interrupted(dir: &Path) -> Error {
    Error::Interrupted(format!(
        "no index published at {}: the build was stopped and its staging directory removed; {} is as it was",
        dir.display(),
        dir.display()
    ))
}

/// The least capacity of an automatic log of the first-image and compact
/// formats when the log has its own file (`log.dat`, which grows with what
/// the log holds: capacity not written costs no disk): 64 MiB. A compaction starts an epoch in which
/// every page is imaged again at its first flush, so a log smaller than the
/// pages a small buffer keeps flushing fills with images and compacts over
/// and over. At 512 KiB of memory, 200,000 rectangles (an 11 MB index)
/// wrote 36,948 log pages with the 10 MiB the buffer alone gives, and
/// 6,022 with 32 MiB (`docs/benchmarks.md`, "Builds as one batch",
/// session 14). The per-change format (the papers') keeps its 10 MiB.
pub const MIN_FILE_LOG_CAPACITY: u64 = 64 * 1024 * 1024;

/// Raises the automatic log capacity of the eFIND or FAST store in
/// `store` to at least [`MIN_FILE_LOG_CAPACITY`] for the first-image and
/// compact formats, and writes it down as the store's capacity, so that
/// the index reopens with it whatever buffer it is given.
fn floor_file_log(store: &mut StoreSpec) {
    use crate::store::log::LogFormat;
    match store {
        StoreSpec::Efind(s) if s.efind.log_format != LogFormat::PerChange => {
            s.efind.buffer_bytes = s.buffer_bytes;
            s.efind.log_capacity = s.efind.resolved_log_capacity().max(MIN_FILE_LOG_CAPACITY);
        }
        StoreSpec::Fast(s) if s.fast.log_format != LogFormat::PerChange => {
            s.fast.log_capacity = s.fast.log_capacity.max(MIN_FILE_LOG_CAPACITY);
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "bulk_stop_tests.rs"]
mod bulk_stop_tests;
