//! The simulators' images of an index directory, saved together at each
//! checkpoint with the placement map of a hybrid device, and committed with
//! its rollback journal.
//!
//! A simulated device keeps its state in memory and reaches the directory
//! only when its image is saved: `device.img`, and `device.fast.img` too
//! for a hybrid of two simulators. One image is saved atomically by itself
//! (written beside, synced, renamed). Several files must change together:
//! - two images: a crash between their saves used to leave one tier at the
//!   new checkpoint and the other at the old one, and the index could not
//!   be read ("node page 28 carries LSN 1317, newer than the recovered
//!   log's end");
//! - a hybrid's placement map (`tiers.map`) and the images of its
//!   simulated tiers: the map names the fast slots pages live in, and a map
//!   saved at a sync after the last checkpoint named slots whose contents
//!   the images did not hold (a hybrid with a simulated tier therefore
//!   saves its map only here, [`MapSaves::WithOwner`](crate::storage::hybrid::MapSaves));
//! - the images and the rollback journal of a hybrid of a file and a
//!   simulator (`journal::needs_journal`): after a crash the journal rolls
//!   the file tier back to its last commit, which must be the images'
//!   checkpoint.
//!
//! So such a save goes in two phases. First each file is saved whole as
//! `<file>.next` (written beside as `<file>.next.tmp`, synced, renamed: a
//! `.next` is never torn), the map first, then the images in the order of
//! the device's tiers; then the **marker** `images.next` (written the same
//! way) names the journal generation that commits the save (0 without a
//! journal). The journal commits; then each `.next` replaces its file, the
//! directory synced after each rename, and the marker is removed last.
//!
//! The commit point is the journal's commit, or without a journal the
//! marker: an open finds the marker and a journal of that generation (or
//! none needed) and rolls the save forward (a writer renames what is left;
//! a reader loads the `.next` files and writes nothing; a file that then
//! fails to load is an error naming it, nothing is dropped). Otherwise the
//! save never reached its commit point: its `.next` files and marker are
//! dropped (a writer) or ignored (a reader), the old files stand, and the
//! journal rolls the file tier back to them. A save that fails after its
//! commit point is rolled forward by the next open or save, like a
//! checkpoint whose outcome the caller could not learn.
//!
//! Released builds before the map and the journal joined the save wrote
//! no marker: their `.next` images of a hybrid of two simulators are rolled
//! forward when `device.img.next`, their last, is there (their map, saved
//! at the checkpoint's sync, is the new images'), and dropped otherwise. A
//! save of this build always writes `tiers.map.next` before any image, so
//! without a marker it is never taken for one of theirs. (Commit a9c12f1,
//! on main for under an hour and in no release, wrote `tiers.map.next`
//! last as its marker; what a crash in its save left is not recognised.)
use std::path::{Path, PathBuf};

use super::devices::{map_device, Images, TIER_MAP_FILE};
use super::factory::DEVICE_IMAGE_FILE;
use crate::manifest::{sync_dir, write_atomic, Access};
use crate::storage::hybrid::{MapOpen, MapToSave};
use crate::storage::journal::JournaledDevice;
use crate::storage::tier_map::TierMapStore;
use crate::{Error, Result};

/// Suffix of a file written by the first phase of a save.
const NEXT: &str = ".next";

/// The marker of a save's first phase (see the [module docs](self)).
pub(super) const MARKER_FILE: &str = "images.next";

/// Magic of the marker, followed by the journal generation (`u64`) and a
/// CRC-32C of both (`u32`), little-endian.
const MARKER_MAGIC: &[u8; 8] = b"GFIMGNX1";

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

/// Which files an open loads after [`settle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Load {
    /// The files themselves.
    Current,
    /// The `.next` files where there are (a reader, when a save passed its
    /// commit point and a crash came before its renames).
    Next,
}

/// Saves the images of `images` in `dir`, with the map of its hybrid
/// device, and commits `journal` with them (see the [module docs](self)).
pub(super) fn save(
    dir: &Path,
    images: &Images,
    journal: Option<&JournaledDevice>,
) -> Result<()> {
    let map = match &images.map {
        Some(h) => h.map_to_save()?,
        None => None,
    };
    let sims = images.sims.as_slice();
    let files = sims.len() + usize::from(map.is_some());
    if files == 0 || (files == 1 && journal.is_none()) {
        if let Some(j) = journal {
            j.commit()?;
        }
        if let [one] = sims {
            one.sim.save(&dir.join(one.file))?;
        }
        return Ok(());
    }
    // A journal that failed (a commit whose header may have reached the
    // file) could make what an earlier save left read as uncommitted: only
    // the next open, reading the journal from the file, decides.
    if let Some(j) = journal {
        j.refuse_if_failed()?;
    }
    // What an earlier save that failed part-way left.
    settle(dir, Access::Write, journal.map(JournaledDevice::generation))?;
    let mut order = Vec::with_capacity(files);
    if let Some(m) = &map {
        save_map(dir, m)?;
        order.push(TIER_MAP_FILE);
        test_stop(Step::Map)?;
    }
    for s in sims {
        s.sim.save(&next_path(dir, s.file))?;
        order.push(s.file);
    }
    write_marker(dir, journal.map_or(0, |j| j.generation() + 1))?;
    test_stop(Step::Marker)?;
    if let Some(j) = journal {
        j.commit()?;
    }
    test_stop(Step::Commit)?;
    for file in order {
        let (next, path) = (next_path(dir, file), dir.join(file));
        std::fs::rename(&next, &path).map_err(|e| io_error(&path, e))?;
        sync_dir(dir)?;
        test_stop(Step::Rename)?;
    }
    remove(&dir.join(MARKER_FILE))?;
    sync_dir(dir)?;
    match (&images.map, &map) {
        (Some(h), Some(m)) => h.map_saved(m),
        _ => Ok(()),
    }
}

/// Steps of a save a test may stop it after (`STOP_AFTER`), as a crash
/// there would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// The map's `.next` written (the first file of the first phase).
    Map,
    /// The marker written (the first phase done).
    Marker,
    /// The journal committed (or, without one, the step after the marker).
    Commit,
    /// The first rename of the second phase.
    Rename,
}

#[cfg(test)]
thread_local! {
    /// The step after which this thread's next save stops with an error.
    pub(super) static STOP_AFTER: std::cell::Cell<Option<Step>> = const { std::cell::Cell::new(None) };
}

/// Stops a save after `step` when a test asked for it.
#[cfg(test)]
fn test_stop(step: Step) -> Result<()> {
    if STOP_AFTER.with(|s| s.get()) == Some(step) {
        STOP_AFTER.with(|s| s.set(None));
        return Err(Error::invalid(format!("a test stopped the save after {step:?}")));
    }
    Ok(())
}

#[cfg(not(test))]
#[inline(always)]
fn test_stop(_: Step) -> Result<()> {
    Ok(())
}

/// Writes `map` whole as `dir/tiers.map.next`: beside as `.tmp` (a fresh
/// file: both copies written and synced by `TierMapStore::save`), renamed,
/// the directory synced.
fn save_map(dir: &Path, map: &MapToSave) -> Result<()> {
    let next = next_path(dir, TIER_MAP_FILE);
    let tmp = dir.join(format!("{TIER_MAP_FILE}{NEXT}.tmp"));
    remove(&tmp)?;
    let device = map_device(&tmp, map.geometry.fast_limit, MapOpen::Create, false)?;
    TierMapStore::new(device, map.geometry)?.save(map.generation, &map.slots)?;
    std::fs::rename(&tmp, &next).map_err(|e| io_error(&next, e))?;
    sync_dir(dir)
}

/// Writes the marker naming journal generation `generation` (0: none).
fn write_marker(dir: &Path, generation: u64) -> Result<()> {
    let mut bytes = MARKER_MAGIC.to_vec();
    bytes.extend_from_slice(&generation.to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(&bytes).to_le_bytes());
    write_atomic(dir, MARKER_FILE, &bytes)
}

/// The journal generation the marker `path` names; damage is an error
/// naming it (the save may have passed its commit point).
fn read_marker(path: &Path) -> Result<u64> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let valid = bytes.len() == 20
        && bytes[..8] == MARKER_MAGIC[..]
        && bytes[16..20] == crc32c::crc32c(&bytes[..16]).to_le_bytes();
    if !valid {
        return Err(Error::corrupt(
            None,
            "damaged marker of a checkpoint's save of the simulators' images: whether the save \
             committed cannot be told; restore the index from a backup",
        )
        .in_file(path));
    }
    Ok(u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default()))
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(path, e)),
        _ => Ok(()),
    }
}

/// The `.next` files in `dir` (images and map), sorted.
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

/// Whether what a save left in `dir` passed its commit point (see the
/// [module docs](self)), given the generation of the directory's journal's
/// last commit (`None`: no journal).
fn committed(dir: &Path, journal: Option<u64>) -> Result<bool> {
    let marker = dir.join(MARKER_FILE);
    if marker.is_file() {
        let needs = read_marker(&marker)?;
        check_journal_reached(dir, needs, journal)?;
        return Ok(needs == 0 || journal.is_some_and(|g| g >= needs));
    }
    // No marker: a save of this build before its commit point, or one of
    // a build before the marker, committed once its last image was written.
    Ok(!next_path(dir, TIER_MAP_FILE).is_file() && next_path(dir, DEVICE_IMAGE_FILE).is_file())
}

/// Refuses a journal older than the marker of a save: the marker names the
/// journal generation `needs` that commits the save (0: none), written
/// when the journal's last commit was the one before, and the journal
/// only moves forward, so a journal whose last commit (`journal`; `None`:
/// no `journal.dat`, `Some(0)`: none) is older than `needs - 1` is not the
/// index's (an older copy of it, restored from a backup or copied from an
/// earlier generation), and the save, maybe committed, must not be
/// dropped by it: an error naming `journal.dat`, before anything changes.
fn check_journal_reached(dir: &Path, needs: u64, journal: Option<u64>) -> Result<()> {
    let reached = journal.unwrap_or(0);
    if needs == 0 || reached.saturating_add(1) >= needs {
        return Ok(());
    }
    let held = match journal {
        None => "is missing".to_string(),
        Some(0) => "holds no commit".to_string(),
        Some(g) => format!("holds commit {g}"),
    };
    Err(Error::corrupt(
        None,
        format!(
            "{MARKER_FILE} names commit {needs} of the rollback journal, written once the journal had reached \
             commit {}, but the journal {held}: it is older than the simulators' images (an older copy of \
             it?), and whether their save committed cannot be told; restore the index from a backup",
            needs - 1
        ),
    )
    .in_file(dir.join(super::journal::JOURNAL_FILE)))
}

/// Finishes or undoes what a save interrupted by a crash left in `dir`
/// (see the [module docs](self)), given the generation of the directory's
/// journal's last commit (`None`: no journal); a reader (`Access::Read`)
/// changes nothing, and loads what the answer says ([`image_to_load`]).
pub(super) fn settle(dir: &Path, access: Access, journal: Option<u64>) -> Result<Load> {
    let next = pending(dir)?;
    let marker = dir.join(MARKER_FILE);
    if next.is_empty() && !marker.is_file() {
        return Ok(Load::Current);
    }
    let forward = committed(dir, journal)?;
    if access == Access::Read {
        return Ok(if forward { Load::Next } else { Load::Current });
    }
    if forward {
        // The slow tier's image last (the marker of the builds before one).
        let mut order = next;
        order.sort_by_key(|p| p.ends_with(format!("{DEVICE_IMAGE_FILE}{NEXT}")));
        for n in order {
            let name = n.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let path = dir.join(name.trim_end_matches(NEXT));
            std::fs::rename(&n, &path).map_err(|e| io_error(&path, e))?;
            sync_dir(dir)?;
        }
        remove(&marker)?;
    } else {
        // The marker first and the map last: what a crash here leaves is
        // never taken for a committed save.
        remove(&marker)?;
        sync_dir(dir)?;
        let mut order = next;
        order.sort_by_key(|p| p.ends_with(format!("{TIER_MAP_FILE}{NEXT}")));
        for n in order {
            remove(&n)?;
            sync_dir(dir)?;
        }
    }
    sync_dir(dir)?;
    Ok(Load::Current)
}

/// The file to load `file` (an image, or a hybrid's map) from in `dir`,
/// after [`settle`] said `load`: its `.next` when there is one and the save
/// that wrote it committed, else the file itself.
pub(super) fn image_to_load(dir: &Path, file: &str, load: Load) -> PathBuf {
    let next = next_path(dir, file);
    if load == Load::Next && next.is_file() {
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
        let load = |image, how| {
            FlashSim::load(&image_to_load(dir, image, how))
                .unwrap()
                .client_mark()
        };
        let how = settle(dir, Access::Read, None).unwrap();
        let read = (load(FAST_DEVICE_IMAGE_FILE, how), load(DEVICE_IMAGE_FILE, how));
        let how = settle(dir, Access::Write, None).unwrap();
        assert_eq!(how, Load::Current);
        assert!(pending(dir).unwrap().is_empty());
        assert!(!dir.join(MARKER_FILE).exists());
        let written = (load(FAST_DEVICE_IMAGE_FILE, how), load(DEVICE_IMAGE_FILE, how));
        [read, written]
    }

    /// A crash at every step of a save of two images without a map leaves
    /// both old ones or both new ones, for readers and writers alike. (This
    /// build saves two images only with a hybrid's map, written first:
    /// `the_placement_map_of_a_hybrid_of_simulators_is_saved_with_its_images`.
    /// Without it, both images written and no marker read as a save of a
    /// released build before the marker, committed.)
    #[test]
    fn a_crash_anywhere_in_a_save_of_two_images_leaves_both_old_or_both_new() {
        // Steps of a save of the images of mark 2 over those of mark 1:
        // the first `k` done, then a crash.
        for k in 0..=7 {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            save(dir, &images(saved(1)), None).unwrap();
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
                Box::new(|| write_marker(dir, 0).unwrap()),
                Box::new(|| std::fs::rename(next(&new[0]), dir.join(new[0].file)).unwrap()),
                Box::new(|| std::fs::rename(next(&new[1]), dir.join(new[1].file)).unwrap()),
                Box::new(|| remove(&dir.join(MARKER_FILE)).unwrap()),
                Box::new(|| {}),
            ];
            for step in steps.iter().take(k) {
                step();
            }
            // Without the marker, a save of two images whose slow image is
            // there reads as one of a build before the marker: committed.
            let want = if k >= 3 { Some(2) } else { Some(1) };
            assert_eq!(marks(dir), [(want, want); 2], "crash after {k} steps");
        }
    }

    /// What builds before the marker left (two images, `device.img.next`
    /// their last): rolled forward once `device.img.next` is there, also
    /// after the fast image's rename, and dropped before.
    #[test]
    fn a_save_of_a_build_before_the_marker_is_rolled_forward_once_its_last_image_is_written() {
        for (fast_next, fast_renamed, slow_next, want) in [
            (true, false, false, 1),
            (true, false, true, 2),
            (false, true, true, 2),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            save(dir, &images(saved(1)), None).unwrap();
            let new = saved(2);
            if fast_next {
                new[0].sim.save(&next_path(dir, new[0].file)).unwrap();
            }
            if fast_renamed {
                new[0].sim.save(&dir.join(new[0].file)).unwrap();
            }
            if slow_next {
                new[1].sim.save(&next_path(dir, new[1].file)).unwrap();
            }
            let want = Some(want);
            assert_eq!(marks(dir), [(want, want); 2]);
        }
    }

    /// Images of mark 1 in `dir`, then a save of mark 2 that stopped
    /// (failed or crashed) after its commit point and the fast image's rename.
    fn failed_after_the_fast_rename(dir: &Path) {
        save(dir, &images(saved(1)), None).unwrap();
        STOP_AFTER.with(|s| s.set(Some(Step::Rename)));
        assert!(save(dir, &images(saved(2)), None).is_err());
        assert!(dir.join(MARKER_FILE).is_file());
        assert!(next_path(dir, DEVICE_IMAGE_FILE).is_file());
    }

    /// A new image that fails to load once its save passed its commit
    /// point (damage, a read error) is an error at open, never dropped:
    /// dropping it would leave the tiers at two checkpoints for good. So
    /// is a damaged marker.
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
        let how = settle(dir, Access::Read, None).unwrap();
        assert_eq!(image_to_load(dir, DEVICE_IMAGE_FILE, how), last);
        assert!(FlashSim::load(&last).is_err());
        settle(dir, Access::Write, None).unwrap();
        let e = FlashSim::load(&dir.join(DEVICE_IMAGE_FILE)).unwrap_err();
        assert!(e.to_string().contains(DEVICE_IMAGE_FILE), "{e}");
        // A damaged marker: whether the save committed cannot be told.
        let other = tempfile::tempdir().unwrap();
        failed_after_the_fast_rename(other.path());
        let marker = other.path().join(MARKER_FILE);
        let mut bytes = std::fs::read(&marker).unwrap();
        bytes[9] ^= 1;
        std::fs::write(&marker, &bytes).unwrap();
        for access in [Access::Read, Access::Write] {
            let e = settle(other.path(), access, None).unwrap_err();
            assert!(e.to_string().contains(MARKER_FILE), "{e}");
        }
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
        settle(dir, Access::Write, None).unwrap();
        three[0].sim.save(&next_path(dir, three[0].file)).unwrap();
        assert_eq!(marks(dir), [(Some(2), Some(2)); 2]);
        save(dir, &images(three), None).unwrap();
        assert_eq!(marks(dir), [(Some(3), Some(3)); 2]);
    }

    /// A marker that names a journal generation the journal did not reach
    /// is a save before its commit point: dropped; once the journal
    /// reached it, rolled forward. A journal older than the one before it
    /// (or none: the marker names a journal) is refused naming
    /// `journal.dat`, and nothing is dropped.
    #[test]
    fn a_save_with_a_journal_commits_with_the_journal() {
        for (journal, want) in [
            (Some(4), 1),
            (Some(5), 2),
            (Some(6), 2),
            (Some(3), 0),
            (Some(0), 0),
            (None, 0),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            save(dir, &images(saved(1)), None).unwrap();
            STOP_AFTER.with(|s| s.set(Some(Step::Marker)));
            assert!(save(dir, &images(saved(2)), None).is_err());
            write_marker(dir, 5).unwrap();
            let load = |how| {
                let f = image_to_load(dir, DEVICE_IMAGE_FILE, how);
                FlashSim::load(&f).unwrap().client_mark()
            };
            if want == 0 {
                for access in [Access::Read, Access::Write] {
                    let e = settle(dir, access, journal).unwrap_err().to_string();
                    assert!(
                        e.contains("journal.dat") && e.contains("commit 5"),
                        "{journal:?}: {e}"
                    );
                }
                assert!(dir.join(MARKER_FILE).exists() && pending(dir).unwrap().len() == 2);
                continue;
            }
            let how = settle(dir, Access::Read, journal).unwrap();
            assert_eq!(load(how), Some(want), "{journal:?}: a reader");
            let how = settle(dir, Access::Write, journal).unwrap();
            assert_eq!(load(how), Some(want), "{journal:?}: a writer");
            assert!(pending(dir).unwrap().is_empty() && !dir.join(MARKER_FILE).exists());
        }
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
    /// in its save (before its marker, after it, after the first rename):
    /// every page reads as of one checkpoint, for readers and writers.
    /// Before, the placement map was saved at the sync and named fast
    /// slots the images did not hold: the moved pages read what those
    /// slots held at the checkpoint.
    #[test]
    fn the_placement_map_of_a_hybrid_of_simulators_is_saved_with_its_images() {
        use crate::index_dir::devices::{create_device, reopen_device};
        use crate::storage::spec::DeviceSpec;
        use crate::storage::Tier;
        let spec: DeviceSpec = "hybrid:fast=(flashsim:)&slow=(flashsim:)".parse().unwrap();
        // (where the save stops, whether its marker is then lost, the
        // version every page must read): a marker lost is a crash in the
        // first phase, every `.next` but the marker written.
        for (stop, lose_marker, want) in [
            (None, false, 1),
            (Some(Step::Marker), true, 1),
            (Some(Step::Marker), false, 2),
            (Some(Step::Commit), false, 2),
            (Some(Step::Rename), false, 2),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let (device, saved) = create_device(&spec, 512, Some(dir)).unwrap();
            device.hint_tier(&[0, 1, 2, 3], Tier::Fast).unwrap();
            write_version(device.as_ref(), 1);
            device.sync().unwrap();
            save(dir, &saved, None).unwrap();
            // Pages move both ways, each write synced.
            device.hint_tier(&[0, 1], Tier::Slow).unwrap();
            device.hint_tier(&[4, 5, 6], Tier::Fast).unwrap();
            write_version(device.as_ref(), 2);
            device.sync().unwrap();
            if let Some(step) = stop {
                STOP_AFTER.with(|s| s.set(Some(step)));
                assert!(save(dir, &saved, None).is_err());
            }
            if lose_marker {
                std::fs::remove_file(dir.join(MARKER_FILE)).unwrap();
            }
            drop((device, saved));
            for access in [Access::Read, Access::Write] {
                let load = settle(dir, access, None).unwrap();
                let (device, _) = reopen_device(&spec, 512, dir, access, load).unwrap();
                assert_eq!(versions(device.as_ref()), vec![want; 8], "{stop:?}, {access:?}");
            }
            assert!(pending(dir).unwrap().is_empty(), "{stop:?}");
        }
    }
}
