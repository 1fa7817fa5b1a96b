//! The device of an index directory, created or reopened from the
//! manifest's spec: a file, a flash simulator whose state is saved as an
//! image at each checkpoint, or a `hybrid:` device of two such tiers whose
//! placement map is kept in `tiers.map` (see [`crate::storage::tier_map`]),
//! so that a hybrid index reopens with every page on the tier it was on.
//! Devices that live only in their process (memory, the disk model, hybrids
//! with such a tier) can be created but not reopened.
use std::path::Path;
use std::sync::Arc;

use super::factory::{DEVICE_IMAGE_FILE, PAGES_FILE};
use super::images::Load;
use crate::manifest::Access;
use crate::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use crate::storage::flashsim::FlashSim;
use crate::storage::hybrid::{HybridDevice, MapOpen, MapSaves};
use crate::storage::spec::{fast_tier_path, DeviceSpec};
use crate::storage::tier_map::TierMapStore;
use crate::storage::PageDevice;
use crate::{Error, Result};

/// File of a hybrid device's placement map inside an index directory.
pub const TIER_MAP_FILE: &str = "tiers.map";

/// File of the saved state of a simulated fast tier (the slow tier's, or a
/// simulated device's, is `device.img`).
pub const FAST_DEVICE_IMAGE_FILE: &str = "device.fast.img";

/// Page size of the map file (independent of the index's page size).
const MAP_PAGE_SIZE: usize = 4096;

/// A flash simulator of the device and the file its state is saved to.
pub(super) struct SavedSim {
    /// The simulator.
    pub sim: Arc<FlashSim>,
    /// Its image's file name in the index directory.
    pub file: &'static str,
}

/// The state of a device that a checkpoint saves beside the store's own
/// (`images.rs`): the simulators' images and, for a hybrid with a
/// simulated tier, its placement map, which must name the slots those
/// images hold ([`MapSaves::WithOwner`]).
#[derive(Default)]
pub(super) struct Images {
    /// The simulators behind the device.
    pub sims: Vec<SavedSim>,
    /// The hybrid device whose map is saved with the images.
    pub map: Option<Arc<HybridDevice>>,
}

/// A device and the state of it a checkpoint saves.
pub(super) type OpenedDevice = (Arc<dyn PageDevice>, Images);

impl Images {
    /// The state of one simulator.
    fn of(sim: SavedSim) -> Self {
        Images {
            sims: vec![sim],
            map: None,
        }
    }

    /// Whether a checkpoint saves anything beside the store.
    pub fn is_empty(&self) -> bool {
        self.sims.is_empty()
    }
}

/// Whether a tier keeps its contents across processes in an index directory.
fn persists(spec: &DeviceSpec) -> bool {
    matches!(spec, DeviceSpec::File { .. } | DeviceSpec::FlashSim { .. })
}

/// Whether an index on `spec` reopens in a later process (files and flash
/// simulators, and hybrids of them).
pub(super) fn outlives_process(spec: &DeviceSpec) -> bool {
    match spec {
        DeviceSpec::Hybrid { fast, slow, .. } => persists(fast) && persists(slow),
        other => persists(other),
    }
}

/// The error for `path`, a file of an existing index (`what`), that is
/// gone: damage (exit code 1 in the command line), never a reason to
/// create an empty file in its place.
pub(super) fn missing_file(path: &Path, what: &str) -> Error {
    Error::Corrupt {
        file: Some(path.to_path_buf()),
        page: None,
        reason: format!(
            "{what} is missing (deleted or moved?): the index cannot be opened without it and nothing was created in its place; restore the file, or rebuild the index"
        ),
    }
}

/// Opens a file device with a spec's settings.
fn file_device(
    path: &Path,
    direct: bool,
    engine: IoEngine,
    capacity: Option<u64>,
    page_size: usize,
    read_only: bool,
) -> Result<Arc<dyn PageDevice>> {
    let opts = FileDeviceOptions {
        direct,
        engine,
        capacity_pages: capacity.map_or(0, |c| c / page_size as u64),
        read_only,
    };
    Ok(Arc::new(FileDevice::open(path, page_size, opts)?))
}

/// How a device is obtained.
#[derive(Clone, Copy)]
enum How<'a> {
    /// A new device, in the directory when there is one.
    Create(Option<&'a Path>),
    /// The device of the index in the directory, loading the files
    /// [`images::settle`](super::images::settle) said.
    Reopen(&'a Path, Access, Load),
}

/// The device a spec names for a new index in `dir` (or in this process
/// only, for `None`).
pub(super) fn create_device(
    spec: &DeviceSpec,
    page_size: usize,
    dir: Option<&Path>,
) -> Result<OpenedDevice> {
    device(
        spec,
        page_size,
        How::Create(dir),
        DEVICE_IMAGE_FILE,
        PAGES_FILE,
    )
}

/// The device of the index in `dir`, built on `spec`.
pub(super) fn reopen_device(
    spec: &DeviceSpec,
    page_size: usize,
    dir: &Path,
    access: Access,
    load: Load,
) -> Result<OpenedDevice> {
    device(
        spec,
        page_size,
        How::Reopen(dir, access, load),
        DEVICE_IMAGE_FILE,
        PAGES_FILE,
    )
}

/// The device of `spec` (a tier of a hybrid: `image` and `pages` name its
/// files in the directory).
fn device(
    spec: &DeviceSpec,
    page_size: usize,
    how: How<'_>,
    image: &'static str,
    pages: &str,
) -> Result<OpenedDevice> {
    match (spec, how) {
        (DeviceSpec::FlashSim { params }, How::Create(_)) => {
            let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let sim = Arc::new(FlashSim::from_params(&joined.join("&"), page_size)?);
            Ok((sim.clone(), Images::of(SavedSim { sim, file: image })))
        }
        (DeviceSpec::FlashSim { .. }, How::Reopen(dir, _, load)) => {
            let path = super::images::image_to_load(dir, image, load);
            if !path.is_file() {
                return Err(missing_file(
                    &path,
                    &format!("the simulator state of the index (built on {spec})"),
                ));
            }
            let sim = Arc::new(FlashSim::load(&path)?);
            Ok((sim.clone(), Images::of(SavedSim { sim, file: image })))
        }
        (
            DeviceSpec::File {
                path,
                direct,
                engine,
                capacity,
            },
            How::Reopen(dir, access, _),
        ) => {
            let path = path.clone().unwrap_or_else(|| dir.join(pages));
            // Opening for writing would create an empty file.
            if !path.exists() {
                return Err(missing_file(&path, "the page file of the index"));
            }
            let read_only = access == Access::Read;
            let dev = file_device(&path, *direct, *engine, *capacity, page_size, read_only)?;
            Ok((dev, Images::default()))
        }
        (
            DeviceSpec::Hybrid {
                fast,
                slow,
                fast_pages,
            },
            How::Create(Some(_)) | How::Reopen(..),
        ) if persists(fast) && persists(slow) => {
            let fast_pages_file = fast_tier_path(Path::new(pages));
            let fast_name = fast_pages_file.to_string_lossy();
            let (f, mut images) = device(fast, page_size, how, FAST_DEVICE_IMAGE_FILE, &fast_name)?;
            let (s, slow_images) = device(slow, page_size, how, image, pages)?;
            images.sims.extend(slow_images.sims);
            let mut h = HybridDevice::new(f, s)?;
            if let Some(n) = fast_pages {
                h = h.with_fast_pages(*n);
            }
            let (map_path, map_open, read_only) = match how {
                How::Create(dir) => (
                    dir.unwrap_or(Path::new("")).join(TIER_MAP_FILE),
                    MapOpen::Create,
                    false,
                ),
                // The map a save of the images left beside them (`images.rs`).
                How::Reopen(dir, access, load) => (
                    super::images::image_to_load(dir, TIER_MAP_FILE, load),
                    MapOpen::Open,
                    access == Access::Read,
                ),
            };
            let map = map_device(&map_path, h.fast_limit(), map_open, read_only)?;
            let h = h.with_map(map, map_open)?;
            if images.sims.is_empty() {
                return Ok((Arc::new(h), images));
            }
            let h = Arc::new(h.saving_map(MapSaves::WithOwner));
            images.map = Some(h.clone());
            Ok((h, images))
        }
        (_, How::Create(dir)) => {
            let default = dir.map(|d| d.join(pages));
            Ok((spec.open(page_size, default.as_deref())?, Images::default()))
        }
        (other, How::Reopen(dir, ..)) => Err(Error::invalid(format!(
            "the index in {} was built on device {other}, which lives only in its process in this version; rebuild it",
            dir.display()
        ))),
    }
}

/// The file holding a hybrid device's placement map (it must exist to reopen).
pub(super) fn map_device(
    path: &Path,
    fast_limit: u64,
    how: MapOpen,
    read_only: bool,
) -> Result<Arc<dyn PageDevice>> {
    if how == MapOpen::Open && !path.is_file() {
        return Err(missing_file(
            path,
            "the hybrid index's placement map (where the pages on the fast tier are)",
        ));
    }
    let pages = 2 * TierMapStore::region_pages(fast_limit, MAP_PAGE_SIZE);
    let opts = FileDeviceOptions {
        direct: false,
        capacity_pages: pages,
        read_only,
        ..FileDeviceOptions::default()
    };
    Ok(Arc::new(FileDevice::open(path, MAP_PAGE_SIZE, opts)?))
}
