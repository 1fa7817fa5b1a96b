//! The factory of an index's parts: the names of its files (`pages.dat`,
//! `log.dat`, `device.img`), the separate log device of a logged store on a
//! `file` device, and [`make`], the one place that turns a verified
//! structure ([`StructureConfig`]) and a store ([`StoreSpec`]) into the
//! structure on a device, at creation and at every opening.
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::{StoreSpec, StructureConfig};
use crate::index::fortree::Fortree;
use crate::index::xbr::XbrTree;
use crate::index::{IndexKind, RTree, TreeParams};
use crate::manifest::{Access, Manifest};
use crate::metrics::{Phase, PhaseTimes, Stopwatch};
use crate::spatial::SpatialIndex;
use crate::storage::file::{FileDevice, FileDeviceOptions};
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::store::efind::{EfindConfig, EfindStore, RestartReport};
use crate::store::fast::{FastConfig, FastStore};
use crate::store::log::{LogPlacement, RecoveryMode};
use crate::store::mem::MemStore;
use crate::store::placement::Placement;
use crate::store::plain::{PlainConfig, PlainStore};
pub use crate::store::StoreOpen;
use crate::store::{LoggedStore, NodeStore};
use crate::{Error, Result};

/// File of node pages inside an index directory.
pub const PAGES_FILE: &str = "pages.dat";

/// File of the eFIND log inside an index directory (file devices).
pub const LOG_FILE: &str = "log.dat";

/// File of the saved flash-simulator state inside an index directory.
pub const DEVICE_IMAGE_FILE: &str = "device.img";

/// A tree of the R-tree family made on a store from its parameters:
/// [`RTree::create`], [`RTree::open`] or a bulk load.
pub(super) type TreeMaker<'a> =
    Box<dyn FnOnce(Box<dyn NodeStore>, TreeParams) -> Result<RTree<Box<dyn NodeStore>>> + 'a>;

/// Where and how [`make`] makes a structure.
pub(super) struct Site {
    /// The device of the structure's pages.
    pub device: Arc<dyn PageDevice>,
    /// The log's own device (`log.dat`), else the log is a region of `device`.
    pub log_device: Option<Arc<dyn PageDevice>>,
    /// Created, or opened for reading or writing.
    pub how: StoreOpen,
    /// What a logged store's restart does with damage before its log's tail.
    pub recovery: RecoveryMode,
}

/// The structure `structure` names with its node store `store` on `site`
/// (a grid file has no node store: it is made on the device), and what the
/// store's restart did (stores with a log opened for writing). A tree of
/// the R-tree family is made by `tree` (created, opened or bulk-loaded);
/// the other structures are created or opened as `site.how` says. The
/// restart is timed as recovery, the making of a tree as index work.
pub(super) fn make(
    structure: &StructureConfig,
    store: &StoreSpec,
    site: Site,
    tree: TreeMaker<'_>,
    times: &mut PhaseTimes,
) -> Result<(Box<dyn SpatialIndex>, Option<RestartReport>)> {
    let create = site.how == StoreOpen::Create;
    let with_payload = match structure {
        StructureConfig::Grid(g) if create => return Ok((g.create(site.device)?, None)),
        // A reader never writes, also where H-Grid re-tags hot pages.
        StructureConfig::Grid(g) if site.how == StoreOpen::Read => {
            return Ok((g.open_read_only(site.device)?, None))
        }
        StructureConfig::Grid(g) => return Ok((g.open(site.device)?, None)),
        StructureConfig::Tree(p) => p.kind == IndexKind::Hilbert,
        StructureConfig::Fortree(_) => false,
        StructureConfig::Xbr(_) => true,
    };
    let device = site.device.clone();
    let watch = Stopwatch::start(device.sim_clock_ns());
    let (nodes, restart) = make_store(&site, store, with_payload)?;
    if restart.is_some() {
        watch.stop(Phase::Recovery, device.sim_clock_ns(), times);
    }
    let made: Box<dyn SpatialIndex> = match *structure {
        StructureConfig::Tree(params) => {
            let watch = Stopwatch::start(device.sim_clock_ns());
            let t = tree(nodes, params)?;
            if create {
                // A bulk load builds the whole tree here: index work.
                watch.stop(Phase::Index, device.sim_clock_ns(), times);
            }
            Box::new(t)
        }
        StructureConfig::Fortree(c) if create => Box::new(Mutex::new(Fortree::create(nodes, c)?)),
        StructureConfig::Fortree(c) => Box::new(Mutex::new(Fortree::open(nodes, c)?)),
        StructureConfig::Xbr(c) if create => Box::new(XbrTree::create(nodes, c)?),
        StructureConfig::Xbr(c) => Box::new(XbrTree::open(nodes, c)?),
        StructureConfig::Grid(_) => {
            return Err(Error::invalid("a grid file has no node store"));
        }
    };
    Ok((made, restart))
}

/// The node store `store` names on `site`'s devices, with the log on its
/// own device when given (else in a region of the node device), for
/// entries that carry a payload (`with_payload`: the Hilbert R-tree, the
/// xBR+-tree) or not, also returning what restart did (stores with a log).
pub(super) fn make_store(
    site: &Site,
    store: &StoreSpec,
    with_payload: bool,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    let (device, how) = (site.device.clone(), site.how);
    match *store {
        StoreSpec::Plain(s) => {
            let cfg = PlainConfig {
                buffer_bytes: s.buffer_bytes,
                policy: s.policy,
                with_payload,
            };
            let store = if how == StoreOpen::Create {
                PlainStore::create(device, cfg)?
            } else {
                PlainStore::open(device, cfg)?
            };
            Ok((Box::new(store.with_placement(s.placement)), None))
        }
        StoreSpec::Efind(s) => {
            let cfg = EfindConfig {
                buffer_bytes: s.buffer_bytes,
                read_policy: s.policy,
                with_payload,
                recovery: site.recovery,
                ..s.efind
            };
            // The log of both stores: `log.dat` from page 0 when given,
            // else the last pages of the node device.
            let log = cfg.log_placement(&device, site.log_device.clone())?;
            logged::<EfindStore>(how, device, log, cfg, s.placement)
        }
        StoreSpec::Memory(_) if how == StoreOpen::Create => {
            let store = MemStore::for_pages(device.page_size(), with_payload)?;
            Ok((Box::new(store), None))
        }
        StoreSpec::Memory(_) => Err(Error::invalid(
            "an index of the memory store lives in the process that made it: there is nothing to open",
        )),
        StoreSpec::Fast(s) => {
            let cfg = FastConfig {
                buffer_bytes: s.buffer_bytes,
                with_payload,
                recovery: site.recovery,
                ..s.fast
            };
            cfg.verify()?;
            let log = cfg.log_placement(&device, site.log_device.clone())?;
            logged::<FastStore>(how, device, log, cfg, s.placement)
        }
    }
}

/// [`make_store`] on `device` (and `log_device`) for a tree of `kind`, for
/// a test of a store through the index's factory.
#[cfg(test)]
pub fn make_store_with_log(
    device: Arc<dyn PageDevice>,
    log_device: Option<Arc<dyn PageDevice>>,
    store: &StoreSpec,
    kind: IndexKind,
    how: StoreOpen,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    let site = Site {
        device,
        log_device,
        how,
        recovery: RecoveryMode::AbsoluteConsistency,
    };
    make_store(&site, store, kind == IndexKind::Hilbert)
}

/// A logged store obtained as `how` says, and what its restart did.
fn logged<S: LoggedStore>(
    how: StoreOpen,
    device: Arc<dyn PageDevice>,
    log: LogPlacement,
    config: S::Config,
    placement: Placement,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    let store = S::opened(how, device, log, config, placement)?;
    let report = store.restart_report().cloned();
    Ok((Box::new(store), report))
}

/// The file holding the pages of the index in `dir`: `pages.dat`, the
/// path of a `file:PATH` device, `device.img` for a simulated one (or the
/// manifest's device spec as written, for devices without a file).
pub(super) fn pages_file(dir: &Path, manifest: &Manifest) -> PathBuf {
    match DeviceSpec::parse(&manifest.device) {
        Ok(DeviceSpec::File { path: Some(p), .. }) => p,
        Ok(DeviceSpec::File { path: None, .. }) => dir.join(PAGES_FILE),
        Ok(DeviceSpec::FlashSim { .. }) => dir.join(DEVICE_IMAGE_FILE),
        Ok(DeviceSpec::Hybrid { fast, slow, .. }) => {
            // The files of both tiers (a page may be on either).
            let tier = |spec: &DeviceSpec, image: &str, pages: &str| match spec {
                DeviceSpec::File { path: Some(p), .. } => p.display().to_string(),
                DeviceSpec::FlashSim { .. } => dir.join(image).display().to_string(),
                _ => dir.join(pages).display().to_string(),
            };
            let fast_pages = crate::storage::spec::fast_tier_path(Path::new(PAGES_FILE));
            // The placement map says which tier a page is read from.
            PathBuf::from(format!(
                "{} or {} (the fast and slow tiers of device {}, pages placed by {})",
                tier(&fast, super::devices::FAST_DEVICE_IMAGE_FILE, &fast_pages.to_string_lossy()),
                tier(&slow, DEVICE_IMAGE_FILE, PAGES_FILE),
                manifest.device,
                dir.join(super::devices::TIER_MAP_FILE).display()
            ))
        }
        _ => PathBuf::from(format!("{} (device {})", dir.display(), manifest.device)),
    }
}

/// The log device of an eFIND index on a `file` device: `log.dat` in `dir`
/// (same direct-I/O and engine settings). `None` for other stores and
/// devices, whose log (if any) is a region of the index device.
pub(super) fn open_log_device(
    spec: &DeviceSpec,
    store: &StoreSpec,
    dir: &Path,
    page_size: usize,
    access: Access,
) -> Result<Option<Arc<dyn PageDevice>>> {
    let DeviceSpec::File { direct, engine, .. } = spec else {
        return Ok(None);
    };
    if store.is_plain() {
        return Ok(None);
    }
    let path = dir.join(LOG_FILE);
    let opts = FileDeviceOptions {
        direct: *direct,
        engine: *engine,
        capacity_pages: 0,
        read_only: access == Access::Read,
    };
    Ok(Some(Arc::new(FileDevice::open(&path, page_size, opts)?)))
}
