//! The factory of an index's parts: the names of its files (`pages.dat`,
//! `log.dat`, `device.img`), the device a spec names, the separate log
//! device of a logged store on a `file` device, and the node store the
//! store options name ([`make_store`] and its variants, the one place that
//! maps store options to a store).
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::options::{StoreKind, StoreOptions};
#[cfg(test)]
use crate::index::IndexKind;
use crate::manifest::{Access, Manifest};
use crate::storage::file::{FileDevice, FileDeviceOptions};
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::store::efind::{EfindConfig, EfindStore, RestartReport};
use crate::store::fast::{FastConfig, FastStore};
use crate::store::log::LogPlacement;
use crate::store::placement::Placement;
use crate::store::plain::{PlainConfig, PlainStore};
pub use crate::store::StoreOpen;
use crate::store::{LoggedStore, NodeStore};
use crate::Result;

/// File of node pages inside an index directory.
pub const PAGES_FILE: &str = "pages.dat";

/// File of the eFIND log inside an index directory (file devices).
pub const LOG_FILE: &str = "log.dat";

/// File of the saved flash-simulator state inside an index directory.
pub const DEVICE_IMAGE_FILE: &str = "device.img";

/// The node store `opts` name on `device`, with the log on `log_device`
/// when given (else in a region of `device`), also returning what restart
/// did (stores with a log).
#[cfg(test)]
pub fn make_store_with_log(
    device: Arc<dyn PageDevice>,
    log_device: Option<Arc<dyn PageDevice>>,
    opts: &StoreOptions,
    kind: IndexKind,
    how: StoreOpen,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    make_store_payload(device, log_device, opts, kind == IndexKind::Hilbert, how)
}

/// [`make_store_with_log`] for entries that carry a payload (`with_payload`:
/// the Hilbert R-tree, the xBR+-tree) or not.
pub fn make_store_payload(
    device: Arc<dyn PageDevice>,
    log_device: Option<Arc<dyn PageDevice>>,
    opts: &StoreOptions,
    with_payload: bool,
    how: StoreOpen,
) -> Result<(Box<dyn NodeStore>, Option<RestartReport>)> {
    let fresh = how == StoreOpen::Create;
    match opts.kind {
        StoreKind::Plain => {
            let cfg = PlainConfig {
                buffer_bytes: opts.buffer_bytes,
                policy: opts.policy,
                with_payload,
            };
            let store = if fresh {
                PlainStore::create(device, cfg)?
            } else {
                PlainStore::open(device, cfg)?
            };
            Ok((Box::new(store.with_placement(opts.placement)), None))
        }
        StoreKind::Efind => {
            let cfg = EfindConfig {
                buffer_bytes: opts.buffer_bytes,
                read_policy: opts.policy,
                with_payload,
                recovery: opts.recovery,
                ..opts.efind.unwrap_or_default()
            };
            // The log of both stores: `log.dat` from page 0 when given,
            // else the last pages of the node device.
            let log = cfg.log_placement(&device, log_device)?;
            logged::<EfindStore>(how, device, log, cfg, opts.placement)
        }
        StoreKind::Fast => {
            let cfg = FastConfig {
                buffer_bytes: opts.buffer_bytes,
                with_payload,
                recovery: opts.recovery,
                ..opts.fast.unwrap_or_default()
            };
            cfg.verify()?;
            let log = cfg.log_placement(&device, log_device)?;
            logged::<FastStore>(how, device, log, cfg, opts.placement)
        }
    }
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
    store: &StoreOptions,
    dir: &Path,
    page_size: usize,
    access: Access,
) -> Result<Option<Arc<dyn PageDevice>>> {
    let DeviceSpec::File { direct, engine, .. } = spec else {
        return Ok(None);
    };
    if store.kind == StoreKind::Plain {
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
