//! Atomic creation of an index directory. A new index is built in a
//! *staging directory*, the hidden sibling `.NAME.building` of its target
//! `NAME` (same parent, so the same file system), and renamed onto the
//! target only once it is complete and checkpointed. A build that fails
//! removes its staging directory, so it leaves no directory behind and
//! never touches an index that was there (a target holding an index, or
//! any file, is refused before anything is created).
//!
//! **Killed builds.** A build stopped without a chance to clean up (a
//! killed process, a power loss) leaves its staging directory: a
//! consistent index with everything it had made durable (its log replays
//! at the next writable open), but not under the target's name.
//! [`adopt_interrupted`] renames it onto the target (what `geoflash
//! recover --index NAME` does first), and a new build of the same target
//! refuses to start while it is there. A staging directory without a
//! manifest holds nothing recoverable and is removed by the next build of
//! the same target, or by [`remove_abandoned`] (`geoflash recover`); a
//! bounded-memory bulk load keeps its temporary files in it, so a killed
//! load's files go with it.
//!
//! **Stopping.** A front end asks the builds of its process to stop with
//! [`request_stop`] (the command line's Ctrl-C handler): a build checks
//! [`stop_requested`] before it publishes, and abandons its staging
//! directory instead ([`crate::Error::Interrupted`]), so an interrupted
//! build never publishes an index, partial or not.
//!
//! **Files outside the directory.** A device spec may name explicit files
//! (`file:PATH`, also as a tier of `hybrid:`), which the rename cannot
//! cover. A build refuses a `PATH` that is a non-empty regular file (it
//! would overwrite someone's data), and a failed build removes the files it
//! created. A `PATH` that existed as something else (a block device, an
//! empty file) keeps what a failed build wrote there; no index refers to it.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::manifest::{sync_dir, Access, DirLock, MANIFEST_FILE};
use crate::storage::spec::DeviceSpec;
use crate::{Error, Result};

/// Set by [`request_stop`]: the builds of this process stop.
static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every build running in this process to stop: none publishes its
/// index afterwards (each abandons its staging directory and returns
/// [`Error::Interrupted`]), and loops that check [`stop_requested`] end at
/// their next operation boundary. For a front end's Ctrl-C handler; it is
/// never reset.
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether [`request_stop`] was called in this process.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Suffix of a staging directory's name (`.NAME.building`).
const STAGING_SUFFIX: &str = ".building";

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// The staging directory of `target`: `.NAME.building` beside it.
pub fn staging_dir(target: &Path) -> Result<PathBuf> {
    let name = target
        .file_name()
        .ok_or_else(|| {
            Error::invalid(format!(
                "{} does not name a directory an index can be created in",
                target.display()
            ))
        })?
        .to_string_lossy();
    Ok(parent_of(target).join(format!(".{name}{STAGING_SUFFIX}")))
}

/// The directory holding `target` (`.` for a bare name).
fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// True when `dir` holds an index (its manifest).
fn holds_index(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file()
}

/// The explicit files a device spec names (`file:PATH`, in hybrid tiers too).
fn explicit_files(spec: &DeviceSpec) -> Vec<PathBuf> {
    match spec {
        DeviceSpec::File {
            path: Some(path), ..
        } => vec![path.clone()],
        DeviceSpec::Hybrid { fast, slow, .. } => {
            let mut v = explicit_files(fast);
            v.extend(explicit_files(slow));
            v
        }
        _ => Vec::new(),
    }
}

/// The message for a target that already holds an index.
fn already_holds(target: &Path) -> Error {
    Error::invalid(format!(
        "{} already holds an index; open it, or remove it first",
        target.display()
    ))
}

/// Refuses a target that exists and is not an empty directory.
pub(crate) fn check_target(target: &Path) -> Result<()> {
    if holds_index(target) {
        return Err(already_holds(target));
    }
    match std::fs::metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(target, e)),
        Ok(m) if !m.is_dir() => Err(Error::invalid(format!(
            "{} exists and is not a directory",
            target.display()
        ))),
        Ok(_) => {
            let mut entries = std::fs::read_dir(target).map_err(|e| io(target, e))?;
            if entries.next().is_some() {
                return Err(Error::invalid(format!(
                    "{} exists and is not empty: an index is created in a new or empty directory",
                    target.display()
                )));
            }
            Ok(())
        }
    }
}

/// A staging directory being filled; [`publish`](Staging::publish) renames
/// it onto its target, [`abandon`](Staging::abandon) removes it.
#[derive(Debug)]
pub struct Staging {
    target: PathBuf,
    dir: PathBuf,
    /// Explicit device files this build creates (removed if it fails).
    created: Vec<PathBuf>,
}

impl Staging {
    /// Checks everything that can be checked before anything is created
    /// (the target, an earlier interrupted build, the explicit files of
    /// `device`), then creates the empty staging directory.
    pub fn begin(target: &Path, device: &DeviceSpec) -> Result<Staging> {
        check_target(target)?;
        let dir = staging_dir(target)?;
        let mut created = Vec::new();
        for path in explicit_files(device) {
            match std::fs::metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => created.push(path),
                Err(e) => return Err(io(&path, e)),
                Ok(m) if m.is_file() && m.len() > 0 => {
                    return Err(Error::invalid(format!(
                        "device file {} already holds data, which a build would overwrite: remove it, or name a new file",
                        path.display()
                    )))
                }
                Ok(_) => {}
            }
        }
        if dir.exists() {
            // A live build holds the staging directory's write lock.
            let lock = DirLock::acquire(&dir, Access::Write).map_err(|_| {
                Error::invalid(format!(
                    "another build of {} is running (in {})",
                    target.display(),
                    dir.display()
                ))
            })?;
            if holds_index(&dir) {
                return Err(Error::invalid(format!(
                    "an interrupted build of {} left its index in {}: `geoflash recover --index {}` publishes what it made durable (or removes it, when nothing was), or remove {}",
                    target.display(),
                    dir.display(),
                    target.display(),
                    dir.display()
                )));
            }
            drop(lock);
            remove_abandoned(target)?;
        }
        let parent = parent_of(target);
        std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
        std::fs::create_dir(&dir).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::invalid(format!(
                    "another build of {} is running (in {})",
                    target.display(),
                    dir.display()
                ))
            } else {
                io(&dir, e)
            }
        })?;
        Ok(Staging {
            target: target.to_path_buf(),
            dir,
            created,
        })
    }

    /// The staging directory, where the index's files go.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Renames the staging directory onto the target (an absent or empty
    /// directory) and syncs the parent directory. On an error the staging
    /// directory is still there, for [`abandon`](Staging::abandon).
    pub fn publish(&self) -> Result<()> {
        rename_onto(&self.dir, &self.target)
    }

    /// Removes the staging directory and the device files this build
    /// created (best effort: this runs on the way out of a failure).
    pub fn abandon(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        for f in &self.created {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Renames the directory `from` onto `to` and syncs `to`'s parent.
fn rename_onto(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        if holds_index(to) {
            already_holds(to)
        } else {
            io(to, e)
        }
    })?;
    sync_dir(&parent_of(to))
}

/// Removes the staging directory of `target` when a build killed before it
/// made an index left it (no manifest: nothing in it is recoverable, but it
/// may hold large files, a bounded-memory load's temporary files among
/// them) and no build is running in it; returns the directory removed, if
/// any. A staging directory that holds an index is left for
/// [`adopt_interrupted`].
pub fn remove_abandoned(target: &Path) -> Result<Option<PathBuf>> {
    let dir = staging_dir(target)?;
    if !dir.is_dir() || holds_index(&dir) {
        return Ok(None);
    }
    // A live build holds the staging directory's write lock.
    let Ok(lock) = DirLock::acquire(&dir, Access::Write) else {
        return Ok(None);
    };
    drop(lock);
    std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
    Ok(Some(dir))
}

/// Removes the index an interrupted build left in `target`'s staging
/// directory when it holds no record (`records`, the count a reader of
/// the staging directory's index sees, says so): a build killed before any
/// of its operations was durable, whose adoption would publish an empty
/// index under `target` (a one-batch build restarts at its empty first
/// checkpoint). The staging directory goes with the device files its
/// manifest names outside it (`file:PATH`). Returns the directory removed,
/// if any; a running build's is never touched.
pub fn discard_empty_interrupted(
    target: &Path,
    records: impl FnOnce(&Path) -> Result<u64>,
) -> Result<Option<PathBuf>> {
    if holds_index(target) {
        return Ok(None);
    }
    let dir = staging_dir(target)?;
    if !holds_index(&dir) {
        return Ok(None);
    }
    // A live build holds the staging directory's write lock.
    let Ok(lock) = DirLock::acquire(&dir, Access::Write) else {
        return Ok(None);
    };
    drop(lock);
    if records(&dir)? > 0 {
        return Ok(None);
    }
    let device = crate::manifest::Manifest::load(&dir)?.device;
    let files = DeviceSpec::parse(&device).map_or_else(|_| Vec::new(), |d| explicit_files(&d));
    std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
    for f in files {
        match std::fs::remove_file(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&f, e)),
            _ => {}
        }
    }
    sync_dir(&parent_of(target))?;
    Ok(Some(dir))
}

/// Renames the index an interrupted build left in `target`'s staging
/// directory onto `target`, when `target` holds no index and no build is
/// running; returns the staging directory it adopted, if any. The adopted
/// index may still need recovery (its log replays at the next writable
/// open).
pub fn adopt_interrupted(target: &Path) -> Result<Option<PathBuf>> {
    if holds_index(target) {
        return Ok(None);
    }
    let dir = staging_dir(target)?;
    if !holds_index(&dir) {
        return Ok(None);
    }
    let lock = DirLock::acquire(&dir, Access::Write).map_err(|_| {
        Error::invalid(format!(
            "a build of {} is still running (in {})",
            target.display(),
            dir.display()
        ))
    })?;
    check_target(target)?;
    rename_onto(&dir, target)?;
    drop(lock);
    Ok(Some(dir))
}

/// A hint for opening `target` when it holds no index: a build of it is
/// running (its staging directory is locked by a writer), or an
/// interrupted build left an index in its staging directory (`None`
/// otherwise). A running build is never taken for an interrupted one.
pub fn interrupted_hint(target: &Path) -> Option<String> {
    let dir = staging_dir(target).ok()?;
    if !dir.is_dir() {
        return None;
    }
    // A live build holds its staging directory's write lock.
    if let Err(Error::InvalidInput(_)) = DirLock::acquire(&dir, Access::Read) {
        return Some(format!(
            "; a build of {} is running (in {}): the index appears under {} when it finishes",
            target.display(),
            dir.display(),
            target.display()
        ));
    }
    holds_index(&dir).then(|| {
        format!(
            "; an interrupted build left an index in {}: `geoflash recover --index {}` publishes what it made durable (or removes it, when nothing was)",
            dir.display(),
            target.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> DeviceSpec {
        DeviceSpec::parse(s).unwrap()
    }

    #[test]
    fn staging_is_a_hidden_sibling() {
        assert_eq!(
            staging_dir(Path::new("/a/b/idx")).unwrap(),
            PathBuf::from("/a/b/.idx.building")
        );
        assert_eq!(
            staging_dir(Path::new("idx")).unwrap(),
            PathBuf::from("./.idx.building")
        );
        assert!(staging_dir(Path::new("/")).is_err());
    }

    #[test]
    fn targets_that_are_files_or_non_empty_are_refused_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = Staging::begin(&file, &spec("mem:")).unwrap_err();
        assert!(
            e.is_user_error() && e.to_string().contains("not a directory"),
            "{e}"
        );
        let full = tmp.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("keep"), b"x").unwrap();
        let e = Staging::begin(&full, &spec("mem:")).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        assert!(full.join("keep").is_file());
        assert!(!staging_dir(&full).unwrap().exists());
    }

    #[test]
    fn abandon_removes_the_staging_directory_and_the_files_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("idx");
        let dev = tmp.path().join("dev.dat");
        let s = Staging::begin(&target, &spec(&format!("file:{}", dev.display()))).unwrap();
        std::fs::write(&dev, b"pages").unwrap();
        std::fs::write(s.dir().join(MANIFEST_FILE), b"{}").unwrap();
        let staged = s.dir().to_path_buf();
        s.abandon();
        assert!(!staged.exists() && !dev.exists() && !target.exists());
        // A non-empty device file is refused before anything is created.
        std::fs::write(&dev, b"someone's data").unwrap();
        let e = Staging::begin(&target, &spec(&format!("file:{}", dev.display()))).unwrap_err();
        assert!(e.to_string().contains("already holds data"), "{e}");
        assert!(!staged.exists());
        assert_eq!(std::fs::read(&dev).unwrap(), b"someone's data");
    }

    #[test]
    fn an_interrupted_build_blocks_a_new_one_until_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("idx");
        let s = Staging::begin(&target, &spec("mem:")).unwrap();
        std::fs::write(s.dir().join(MANIFEST_FILE), b"{}").unwrap();
        // While the build holds the lock: "running".
        let lock = DirLock::acquire(s.dir(), Access::Write).unwrap();
        let e = Staging::begin(&target, &spec("mem:")).unwrap_err();
        assert!(e.to_string().contains("is running"), "{e}");
        assert!(adopt_interrupted(&target).is_err());
        // Issue 44: a running build is not taken for an interrupted one.
        let hint = interrupted_hint(&target).unwrap();
        assert!(
            hint.contains("is running") && !hint.contains("recover"),
            "{hint}"
        );
        drop(lock);
        // Killed (the lock is free): refused with the way out.
        let e = Staging::begin(&target, &spec("mem:")).unwrap_err();
        assert!(e.to_string().contains("geoflash recover"), "{e}");
        assert!(interrupted_hint(&target).is_some());
        assert_eq!(
            adopt_interrupted(&target).unwrap(),
            Some(s.dir().to_path_buf())
        );
        assert!(target.join(MANIFEST_FILE).is_file() && !s.dir().exists());
        assert_eq!(adopt_interrupted(&target).unwrap(), None);
        // A staging directory without a manifest is removed by the next
        // build, or by `remove_abandoned` (`geoflash recover`), unless a
        // build is running in it.
        let other = tmp.path().join("other");
        let s = Staging::begin(&other, &spec("mem:")).unwrap();
        std::fs::write(s.dir().join("geoflash-bulk-1-0-0.tmp"), b"spill").unwrap();
        let lock = DirLock::acquire(s.dir(), Access::Write).unwrap();
        assert_eq!(remove_abandoned(&other).unwrap(), None);
        assert!(s.dir().is_dir());
        drop(lock);
        assert_eq!(
            remove_abandoned(&other).unwrap(),
            Some(s.dir().to_path_buf())
        );
        assert!(!s.dir().exists());
        assert_eq!(remove_abandoned(&other).unwrap(), None);
        let s = Staging::begin(&other, &spec("mem:")).unwrap();
        let again = Staging::begin(&other, &spec("mem:")).unwrap();
        assert_eq!(s.dir(), again.dir());
        again.publish().unwrap();
        assert!(other.is_dir());
    }
}
