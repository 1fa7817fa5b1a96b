//! Output files written whole or not at all ([`OutputFile`]): the bytes go
//! to a temporary file beside the destination (`.NAME.XXXXXX.tmp`), which
//! is synced and renamed onto it only when complete. An error, a dropped
//! writer or an interrupt (Ctrl-C: [`discard_pending_outputs`]) removes the
//! temporary file and leaves what was at the destination (the previous
//! file, or none); a process killed outright leaves at most the temporary
//! file, never a truncated destination that a reader would take for a
//! dataset.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use geoflash::{Error, Result};

use super::{bad, io_err};

/// A temporary file being written, and its destination.
struct Pending {
    tmp: PathBuf,
    out: PathBuf,
}

/// The temporary files of the [`OutputFile`]s being written, for an
/// interrupt to remove.
static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

fn pending() -> MutexGuard<'static, Vec<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file written whole or not at all (see the module documentation):
/// [`OutputFile::create`], write to [`OutputFile::file`], then
/// [`OutputFile::commit`]; dropped without a commit, it leaves the
/// destination as it was.
pub struct OutputFile {
    /// The destination as given (errors name it).
    path: PathBuf,
    /// Where the rename lands: the destination, or the file a symbolic
    /// link there names.
    target: PathBuf,
    /// The file written.
    file: File,
    /// The temporary file's path (removed when dropped), until the commit;
    /// `None` when writing the destination itself: an existing file that
    /// is not a regular one (a named pipe, `/dev/null`), which a rename
    /// must not replace.
    tmp: Option<tempfile::TempPath>,
}

impl OutputFile {
    /// Starts writing `path`: creates the temporary file in its directory.
    /// A directory at `path` is bad input; a missing directory or one that
    /// cannot be written is an I/O error naming `path`.
    pub fn create(path: &Path) -> Result<OutputFile> {
        // A symbolic link is followed, as writing through it would: the
        // file it names is replaced, the link stays.
        let target = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
            }
            _ => path.to_path_buf(),
        };
        match std::fs::metadata(&target) {
            Ok(m) if m.is_dir() => return Err(bad(path, "is a directory, not a file")),
            Ok(m) if !m.is_file() => {
                let file = File::create(&target).map_err(|e| io_err(path, e))?;
                return Ok(OutputFile {
                    path: path.to_path_buf(),
                    target,
                    file,
                    tmp: None,
                });
            }
            _ => {}
        }
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            let e = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no directory {}", dir.display()),
            );
            return Err(io_err(path, e));
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        #[cfg(unix)]
        {
            // The mode a plain File::create gives (less the umask), not
            // tempfile's private 0600.
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        // Registered under the lock it is created under: an interrupt sees
        // every temporary file there is.
        let mut list = pending();
        let (file, tmp) = builder
            .tempfile_in(dir)
            .map_err(|e| io_err(path, e))?
            .into_parts();
        list.push(Pending {
            tmp: tmp.to_path_buf(),
            out: path.to_path_buf(),
        });
        Ok(OutputFile {
            path: path.to_path_buf(),
            target,
            file,
            tmp: Some(tmp),
        })
    }

    /// The destination, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file to write to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The path the bytes go to until the commit (the temporary file).
    pub fn write_path(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.target)
    }

    /// The file is complete: syncs it and renames it onto the destination
    /// (replacing what was there), then syncs the directory.
    pub fn commit(mut self) -> Result<()> {
        let Some(tmp) = self.tmp.take() else {
            // A pipe or a device: nothing to rename, and a sync it may refuse.
            let _ = self.file.sync_all();
            return Ok(());
        };
        if let Err(e) = self.file.sync_all() {
            // dropped, self removes the file
            self.tmp = Some(tmp);
            return Err(io_err(&self.path, e));
        }
        // Renamed under the lock: an interrupt either removed the file
        // before (and holds the lock until the process exits) or comes after.
        let mut list = pending();
        let tmp_path = tmp.to_path_buf();
        // (a failed rename drops the path, which removes the file)
        let renamed = tmp
            .persist(&self.target)
            .map_err(|e| io_err(&self.path, e.error));
        list.retain(|p| p.tmp != tmp_path);
        drop(list);
        renamed?;
        if let Some(dir) = self.target.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            // Best effort: some file systems cannot sync a directory.
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let mut list = pending();
            list.retain(|p| p.tmp != *tmp);
            // dropping the path removes the file
            drop(tmp);
        }
    }
}

/// Writes `path` whole or not at all through `write`, which writes the
/// file at the path it is given (a temporary file beside `path`, see
/// [`OutputFile`]); an I/O error of `write` on that file names `path`.
pub fn write_via_temp<T>(path: &Path, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let out = OutputFile::create(path)?;
    let tmp = out.write_path().to_path_buf();
    let value = write(&tmp).map_err(|e| match e {
        Error::Io {
            path: p,
            page,
            source,
        } if p == tmp => Error::Io {
            path: path.to_path_buf(),
            page,
            source,
        },
        e => e,
    })?;
    out.commit()?;
    Ok(value)
}

/// The outputs an interrupt abandoned ([`discard_pending_outputs`]). Keep
/// it until the process exits: while it lives no output is committed.
pub struct Discarded {
    _lock: MutexGuard<'static, Vec<Pending>>,
    /// The destinations whose writing was abandoned (left as they were).
    pub outputs: Vec<PathBuf>,
}

/// For a Ctrl-C handler about to exit: removes the temporary file of every
/// [`OutputFile`] being written and stops any from being committed while
/// the returned value lives, so the process exits leaving each destination
/// as it was.
pub fn discard_pending_outputs() -> Discarded {
    let mut list = pending();
    for p in list.iter() {
        let _ = std::fs::remove_file(&p.tmp);
    }
    let outputs = list.drain(..).map(|p| p.out).collect();
    Discarded {
        _lock: list,
        outputs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.csv");
        std::fs::write(&p, "old\n").unwrap();
        // dropped before the commit: the previous file stays, no temporary file
        let out = OutputFile::create(&p).unwrap();
        assert!(out.write_path().starts_with(dir.path()) && out.write_path() != p);
        writeln!(out.file(), "half").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        drop(out);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n");
        assert_eq!(names(dir.path()), ["d.csv"]);
        // committed: replaced
        let out = OutputFile::create(&p).unwrap();
        writeln!(out.file(), "new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(dir.path()), ["d.csv"]);
        // through a closure, with errors naming the destination
        let e = write_via_temp(&p, |tmp| -> Result<()> {
            std::fs::write(tmp, "x").unwrap();
            Err(io_err(tmp, std::io::Error::other("disk on fire")))
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("d.csv: disk on fire") && !e.contains(".d.csv."),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(names(dir.path()), ["d.csv"]);
        // a directory, a missing directory
        let e = OutputFile::create(dir.path()).err().unwrap();
        assert!(
            e.is_user_error() && e.to_string().contains("is a directory"),
            "{e}"
        );
        let e = OutputFile::create(&dir.path().join("no/such.csv"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no/such.csv: no directory"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_followed_and_the_mode_is_the_usual_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.csv");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let out = OutputFile::create(&link).unwrap();
        write!(out.file(), "new").unwrap();
        out.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode();
        assert_ne!(
            mode & 0o044,
            0,
            "{mode:o}: readable by others, as File::create makes it"
        );
    }
}
