//! The simulators' images of an index directory, saved together at each
//! checkpoint.
//!
//! A simulated device keeps its state in memory and reaches the directory
//! only when its image is saved: `device.img`, and `device.fast.img` too
//! for a hybrid of two simulators. One image is saved atomically by itself
//! (written beside, synced, renamed). Two must change together: a crash
//! between their saves used to leave one tier at the new checkpoint and the
//! other at the old one, and the index could not be read again ("node page
//! 28 carries LSN 1317, newer than the recovered log's end").
//!
//! So two images are saved in two phases: each is first saved whole as
//! `<image>.next` (written beside as `<image>.next.tmp`, synced, renamed:
//! a `.next` is never torn), in the order of the device's tiers, the slow
//! tier's `device.img.next` last; then each `.next` replaces its image, in
//! the same order, the directory synced after each rename. A
//! `device.img.next` therefore means every new image was written: an open
//! completes the renames (a writer) or reads the `.next` images (a reader,
//! which writes nothing); an image that then fails to load is an error
//! naming it, and nothing is dropped. Otherwise the save never finished
//! its first phase, and its `.next` files are dropped (a writer) or
//! ignored (a reader): every old image stands. A save that fails after its
//! first phase (a rename, a sync) is rolled forward by the next open,
//! like a checkpoint whose outcome the caller could not learn.
//!
//! Not covered: the hybrid device's placement map (`tiers.map`) is saved
//! at every sync, the images only at checkpoints (see `docs/reliability.md`,
//! "Not promised yet").
use std::path::{Path, PathBuf};

use super::devices::SavedSim;
use super::factory::DEVICE_IMAGE_FILE;
use crate::manifest::Access;
use crate::{Error, Result};

/// Suffix of an image written by the first phase of a save.
const NEXT: &str = ".next";

/// `dir/<image>.next`.
fn next_path(dir: &Path, image: &str) -> PathBuf {
    dir.join(format!("{image}{NEXT}"))
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source: e,
    }
}

/// Saves the images of `sims` in `dir` (see the [module docs](self)).
pub(super) fn save(dir: &Path, sims: &[SavedSim]) -> Result<()> {
    match sims {
        [] => Ok(()),
        [one] => one.sim.save(&dir.join(one.file)),
        many => {
            // What an earlier save that failed part-way left.
            settle(dir, Access::Write)?;
            for s in many {
                s.sim.save(&next_path(dir, s.file))?;
            }
            for s in many {
                let (next, path) = (next_path(dir, s.file), dir.join(s.file));
                std::fs::rename(&next, &path).map_err(|e| io_error(&path, e))?;
                // In order: the slow tier's rename never lands before the fast one's.
                sync_dir(dir)?;
            }
            Ok(())
        }
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(|e| io_error(dir, e))?;
    d.sync_all().map_err(|e| io_error(dir, e))
}

/// Whether a save's first phase finished (see the [module docs](self)):
/// `device.img.next`, the last image it writes (whole, or not there), is
/// there.
fn first_phase_done(dir: &Path) -> bool {
    next_path(dir, DEVICE_IMAGE_FILE).is_file()
}

/// The `.next` images in `dir`.
fn pending(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_error(dir, e))? {
        let path = entry.map_err(|e| io_error(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("device.") && name.ends_with(&format!(".img{NEXT}")) {
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
    if first_phase_done(dir) {
        // The slow tier's image last, as the save renames them.
        let mut order = next;
        order.sort_by_key(|p| p.ends_with(format!("{DEVICE_IMAGE_FILE}{NEXT}")));
        for n in order {
            let name = n.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let path = dir.join(name.trim_end_matches(NEXT));
            std::fs::rename(&n, &path).map_err(|e| io_error(&path, e))?;
            sync_dir(dir)?;
        }
        Ok(())
    } else {
        for n in next {
            std::fs::remove_file(&n).map_err(|e| io_error(&n, e))?;
        }
        sync_dir(dir)
    }
}

/// The file to load `image` from in `dir`: its `.next` when a save
/// finished its first phase and a crash came before it was renamed (what
/// a writer's [`settle`] would rename), else the image itself.
pub(super) fn image_to_load(dir: &Path, image: &str) -> PathBuf {
    let next = next_path(dir, image);
    if next.is_file() && first_phase_done(dir) {
        next
    } else {
        dir.join(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_dir::devices::FAST_DEVICE_IMAGE_FILE;
    use crate::storage::flashsim::FlashSim;
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
            save(dir, &saved(1)).unwrap();
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
        save(dir, &saved(1)).unwrap();
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
        save(dir, &three).unwrap();
        assert_eq!(marks(dir), [(Some(3), Some(3)); 2]);
    }
}
