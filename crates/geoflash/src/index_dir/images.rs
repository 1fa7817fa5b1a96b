//! The simulators' images of an index directory, saved together at each
//! checkpoint with the placement map of a hybrid device.
//!
//! A simulated device keeps its state in memory and reaches the directory
//! only when its image is saved: `device.img`, and `device.fast.img` too
//! for a hybrid of two simulators. One image is saved atomically by itself
//! (written beside, synced, renamed). Two must change together: a crash
//! between their saves used to leave one tier at the new checkpoint and the
//! other at the old one, and the index could not be read again ("node page
//! 28 carries LSN 1317, newer than the recovered log's end"). So must a
//! hybrid's placement map (`tiers.map`) and the images of its simulated
//! tiers: the map names the fast slots pages live in, and a map saved at a
//! sync after the last checkpoint named slots whose contents the images
//! did not hold (a hybrid with a simulated tier therefore saves its map
//! only here, [`MapSaves::WithOwner`](crate::storage::hybrid::MapSaves)).
//!
//! So a save of more than one file goes in two phases: each file is first
//! saved whole as `<file>.next` (written beside as `<file>.next.tmp`,
//! synced, renamed: a `.next` is never torn), the images in the order of
//! the device's tiers and then the last file, the *marker*: the map
//! `tiers.map.next` when the device has one, else the slow tier's
//! `device.img.next`. Then each `.next` replaces its file, in the same
//! order, the directory synced after each rename. A marker therefore means
//! every new file was written: an open completes the renames (a writer)
//! or reads the `.next` files (a reader, which writes nothing); a file that
//! then fails to load is an error naming it, and nothing is dropped.
//! Otherwise the save never finished its first phase, and its `.next`
//! files are dropped (a writer) or ignored (a reader): every old file
//! stands. A save that fails after its first phase (a rename, a sync) is
//! rolled forward by the next open, like a checkpoint whose outcome the
//! caller could not learn. (A hybrid directory whose save a build before
//! the map joined it interrupted holds no map marker: its `.next` images
//! are dropped, the checkpoint before that save.)
use std::path::{Path, PathBuf};

use super::devices::{map_device, Images, TIER_MAP_FILE};
use super::factory::DEVICE_IMAGE_FILE;
use crate::manifest::Access;
use crate::storage::hybrid::{MapOpen, MapToSave};
use crate::storage::tier_map::TierMapStore;
use crate::{Error, Result};

/// Suffix of a file written by the first phase of a save.
const NEXT: &str = ".next";

/// `dir/<file>.next`.
fn next_path(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!("{file}{NEXT}"))
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source: e,
    }
}

/// Saves the images of `images` in `dir`, with the map of its hybrid
/// device (see the [module docs](self)).
pub(super) fn save(dir: &Path, images: &Images) -> Result<()> {
    let map = match &images.map {
        Some(h) => h.map_to_save()?,
        None => None,
    };
    match (images.sims.as_slice(), &map) {
        ([], None) => Ok(()),
        ([one], None) => one.sim.save(&dir.join(one.file)),
        (sims, _) => {
            // What an earlier save that failed part-way left.
            settle(dir, Access::Write)?;
            let mut files = Vec::with_capacity(sims.len() + 1);
            for s in sims {
                s.sim.save(&next_path(dir, s.file))?;
                files.push(s.file);
            }
            if let Some(m) = &map {
                save_map(dir, m)?;
                files.push(TIER_MAP_FILE);
            }
            for file in files {
                let (next, path) = (next_path(dir, file), dir.join(file));
                std::fs::rename(&next, &path).map_err(|e| io_error(&path, e))?;
                // In order: the marker's rename never lands before the others'.
                sync_dir(dir)?;
            }
            match (&images.map, &map) {
                (Some(h), Some(m)) => h.map_saved(m),
                _ => Ok(()),
            }
        }
    }
}

/// Writes `map` whole as `dir/tiers.map.next` (beside as `.tmp`, synced,
/// renamed).
fn save_map(dir: &Path, map: &MapToSave) -> Result<()> {
    let next = next_path(dir, TIER_MAP_FILE);
    let mut tmp = next.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(&tmp, e)),
        _ => {}
    }
    let device = map_device(&tmp, map.geometry.fast_limit, MapOpen::Create, false)?;
    // Both copies written and synced (`TierMapStore::save`).
    TierMapStore::new(device, map.geometry)?.save(map.generation, &map.slots)?;
    std::fs::rename(&tmp, &next).map_err(|e| io_error(&next, e))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(|e| io_error(dir, e))?;
    d.sync_all().map_err(|e| io_error(dir, e))
}

/// The marker of a save that finished its first phase in `dir` (see the
/// [module docs](self)), when there is one: the map's `.next` in a hybrid's
/// directory, else the slow tier's image's.
fn marker(dir: &Path) -> Option<PathBuf> {
    let file = if dir.join(TIER_MAP_FILE).is_file() {
        TIER_MAP_FILE
    } else {
        DEVICE_IMAGE_FILE
    };
    Some(next_path(dir, file)).filter(|p| p.is_file())
}

/// The `.next` files in `dir`.
fn pending(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let path = entry.map_err(|e| io_error(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let image = name.starts_with("device.") && name.ends_with(&format!(".img{NEXT}"));
        if image || name == format!("{TIER_MAP_FILE}{NEXT}") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Finishes or undoes what a save interrupted by a crash left in `dir`
/// (see the [module docs](self)); a reader (`Access::Read`) changes
/// nothing, and reads what [`image_to_load`] says.
pub(super) fn settle(dir: &Path, access: Access) -> Result<()> {
    let next = pending(dir)?;
    if next.is_empty() || access == Access::Read {
        return Ok(());
    }
    match marker(dir) {
        Some(marker) => {
            // The marker last, as the save renames them.
            let mut order = next;
            order.sort_by_key(|p| *p == marker);
            for n in order {
                let name = n.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let path = dir.join(name.trim_end_matches(NEXT));
                std::fs::rename(&n, &path).map_err(|e| io_error(&path, e))?;
                sync_dir(dir)?;
            }
            Ok(())
        }
        None => {
            for n in next {
                std::fs::remove_file(&n).map_err(|e| io_error(&n, e))?;
            }
            sync_dir(dir)
        }
    }
}

/// The file to load `file` (an image, or a hybrid's map) from in `dir`:
/// its `.next` when a save finished its first phase and a crash came
/// before it was renamed (what a writer's [`settle`] would rename), else
/// the file itself.
pub(super) fn image_to_load(dir: &Path, file: &str) -> PathBuf {
    let next = next_path(dir, file);
    if next.is_file() && marker(dir).is_some() {
        next
    } else {
        dir.join(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_dir::devices::{SavedSim, FAST_DEVICE_IMAGE_FILE};
    use crate::storage::flashsim::FlashSim;
    use crate::storage::PageDevice;
    use std::sync::Arc;

    fn sim(mark: u64) -> SavedSim {
        let sim = Arc::new(FlashSim::from_params("", 512).unwrap());
        sim.set_client_mark(mark);
        SavedSim { sim, file: "" }
    }

    fn saved(mark: u64) -> Vec<SavedSim> {
        let mut fast = sim(mark);
        fast.file = FAST_DEVICE_IMAGE_FILE;
        let mut slow = sim(mark);
        slow.file = DEVICE_IMAGE_FILE;
        vec![fast, slow]
    }

    /// What a checkpoint saves for `sims` (no hybrid's map).
    fn images(sims: Vec<SavedSim>) -> Images {
        Images { sims, map: None }
    }

    /// The marks of the images a reader loads, and then those a writer
    /// loads after settling.
    fn marks(dir: &Path) -> [(Option<u64>, Option<u64>); 2] {
        let load = |image| {
            FlashSim::load(&image_to_load(dir, image))
                .unwrap()
                .client_mark()
        };
        let read = (load(FAST_DEVICE_IMAGE_FILE), load(DEVICE_IMAGE_FILE));
        settle(dir, Access::Write).unwrap();
        assert!(pending(dir).unwrap().is_empty());
        let written = (load(FAST_DEVICE_IMAGE_FILE), load(DEVICE_IMAGE_FILE));
        [read, written]
    }

    /// A crash at every step of a save of two images leaves both old ones
    /// or both new ones, for readers and writers alike.
    #[test]
    fn a_crash_anywhere_in_a_save_of_two_images_leaves_both_old_or_both_new() {
        // Steps of a save of the images of mark 2 over those of mark 1:
        // the first `k` done, then a crash.
        for k in 0..=5 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            save(dir, &images(saved(1))).unwrap();
            let new = saved(2);
            let next = |s: &SavedSim| next_path(dir, s.file);
            let steps: Vec<Box<dyn Fn()>> = vec![
                Box::new(|| new[0].sim.save(&next(&new[0])).unwrap()),
                // The slow tier's image torn by the crash (before its rename).
                Box::new(|| {
                    let mut tmp = next(&new[1]).into_os_string();
                    tmp.push(".tmp");
                    std::fs::write(tmp, b"torn").unwrap();
                }),
                Box::new(|| new[1].sim.save(&next(&new[1])).unwrap()),
                Box::new(|| std::fs::rename(next(&new[0]), dir.join(new[0].file)).unwrap()),
                Box::new(|| std::fs::rename(next(&new[1]), dir.join(new[1].file)).unwrap()),
                Box::new(|| {}),
            ];
            for step in steps.iter().take(k) {
                step();
            }
            let want = if k >= 3 { Some(2) } else { Some(1) };
            assert_eq!(marks(dir), [(want, want); 2], "crash after {k} steps");
        }
    }

    /// Images of mark 1 in `dir`, then a save of mark 2 that stopped
    /// (failed or crashed) after its first phase and the fast image's rename.
    fn failed_after_the_fast_rename(dir: &Path) {
        save(dir, &images(saved(1))).unwrap();
        for s in &saved(2) {
            s.sim.save(&next_path(dir, s.file)).unwrap();
        }
        let fast = FAST_DEVICE_IMAGE_FILE;
        std::fs::rename(next_path(dir, fast), dir.join(fast)).unwrap();
    }

    /// A new image that fails to load once its save's first phase is done
    /// (damage, a read error) is an error at open, never dropped: dropping
    /// it would leave the tiers at two checkpoints for good.
    #[test]
    fn a_next_image_that_fails_to_load_is_an_error_never_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        failed_after_the_fast_rename(dir);
        let last = next_path(dir, DEVICE_IMAGE_FILE);
        let mut bytes = std::fs::read(&last).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(&last, &bytes).unwrap();
        // A reader is pointed at it, and a writer renames it: both then
        // fail to load it, naming the file.
        assert_eq!(image_to_load(dir, DEVICE_IMAGE_FILE), last);
        assert!(FlashSim::load(&last).is_err());
        settle(dir, Access::Write).unwrap();
        let e = FlashSim::load(&dir.join(DEVICE_IMAGE_FILE)).unwrap_err();
        assert!(e.to_string().contains(DEVICE_IMAGE_FILE), "{e}");
    }

    /// A save after one that failed part-way completes or drops its
    /// leftovers first, so that a `.next` of the failed save is never
    /// taken with one of the new save.
    #[test]
    fn a_save_after_a_failed_one_never_mixes_their_images() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        failed_after_the_fast_rename(dir);
        // The next save, whose fast image alone is written before a crash.
        let three = saved(3);
        settle(dir, Access::Write).unwrap();
        three[0].sim.save(&next_path(dir, three[0].file)).unwrap();
        assert_eq!(marks(dir), [(Some(2), Some(2)); 2]);
        save(dir, &images(three)).unwrap();
        assert_eq!(marks(dir), [(Some(3), Some(3)); 2]);
    }

    /// Pages 0..8 of a hybrid of two simulators, written as version
    /// `v`: each page filled with `v * 16 + page`.
    fn write_version(device: &dyn PageDevice, v: u8) {
        let ps = device.page_size();
        for p in 0..8u64 {
            device.write(p, &vec![v * 16 + p as u8; ps]).unwrap();
        }
    }

    /// The version each page of 0..8 reads as.
    fn versions(device: &dyn PageDevice) -> Vec<u8> {
        let mut buf = vec![0u8; device.page_size()];
        (0..8u64)
            .map(|p| {
                device.read(p, &mut buf).unwrap();
                buf[0].wrapping_sub(p as u8) / 16
            })
            .collect()
    }

    /// A hybrid of two simulators whose pages move between the tiers after
    /// a checkpoint, synced, then crashes before the next checkpoint, or
    /// in its save (after its first phase, or before the map's part of it):
    /// every page reads as of one checkpoint, for readers and writers.
    /// Before, the placement map was saved at the sync and named fast
    /// slots the images did not hold: the moved pages read what those
    /// slots held at the checkpoint.
    #[test]
    fn the_placement_map_of_a_hybrid_of_simulators_is_saved_with_its_images() {
        use crate::index_dir::devices::{create_device, reopen_device, TIER_MAP_FILE};
        use crate::storage::spec::DeviceSpec;
        use crate::storage::Tier;
        let spec: DeviceSpec = "hybrid:fast=(flashsim:)&slow=(flashsim:)".parse().unwrap();
        let files = [FAST_DEVICE_IMAGE_FILE, DEVICE_IMAGE_FILE, TIER_MAP_FILE];
        for crash in ["before the save", "after its first phase", "before the map's part"] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let (device, saved) = create_device(&spec, 512, Some(dir)).unwrap();
            device.hint_tier(&[0, 1, 2, 3], Tier::Fast).unwrap();
            write_version(device.as_ref(), 1);
            device.sync().unwrap();
            save(dir, &saved).unwrap();
            let old = tmp.path().join("old");
            std::fs::create_dir(&old).unwrap();
            for f in files {
                std::fs::copy(dir.join(f), old.join(f)).unwrap();
            }
            // Pages move both ways, each write synced.
            device.hint_tier(&[0, 1], Tier::Slow).unwrap();
            device.hint_tier(&[4, 5, 6], Tier::Fast).unwrap();
            write_version(device.as_ref(), 2);
            device.sync().unwrap();
            let want = if crash == "before the save" {
                1
            } else {
                save(dir, &saved).unwrap();
                for f in files {
                    std::fs::rename(dir.join(f), next_path(dir, f)).unwrap();
                    std::fs::copy(old.join(f), dir.join(f)).unwrap();
                }
                if crash == "after its first phase" {
                    2
                } else {
                    std::fs::remove_file(next_path(dir, TIER_MAP_FILE)).unwrap();
                    1
                }
            };
            drop((device, saved));
            for access in [Access::Read, Access::Write] {
                settle(dir, access).unwrap();
                let (device, _) = reopen_device(&spec, 512, dir, access).unwrap();
                assert_eq!(versions(device.as_ref()), vec![want; 8], "{crash}, {access:?}");
            }
            assert!(pending(dir).unwrap().is_empty(), "{crash}");
        }
    }
}
