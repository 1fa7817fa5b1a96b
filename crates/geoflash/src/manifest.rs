//! The index directory: `manifest.json` (format version, the structure
//! and its parameters, the store and its options, device, coordinate
//! reference), the advisory lock that lets one writer or many readers open
//! it, and atomic replacement of small files.
//!
//! Layout of an index directory (see `docs/architecture.md`):
//! `manifest.json`, `pages.dat` (node pages), `log.dat` (FAST/eFIND),
//! `objects.dat` (geometry heap), `device.img` (simulated devices), `LOCK`.
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{StoreSpec, StructureConfig};
use crate::{Error, Result};

/// Newest manifest format this build writes and reads. Version 2 records
/// the typed store ([`StoreSpec`]: only the chosen store's options, each
/// logged store's parameters always written out); version 1 manifests are
/// read through [`upgrade_v1`].
pub const MANIFEST_VERSION: u16 = 2;

/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "manifest.json";

/// File name of the lock inside an index directory.
pub const LOCK_FILE: &str = "LOCK";

/// Coordinate reference of the indexed data: kNN distances and window sizes
/// are in these units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crs {
    /// CRS identifier, e.g. `EPSG:4326`, or `unknown`.
    pub name: String,
    /// Units of the coordinates, e.g. `degree`, `metre`, `unit`.
    pub units: String,
}

impl Default for Crs {
    fn default() -> Self {
        Crs {
            name: "unknown".into(),
            units: "unit".into(),
        }
    }
}

/// The manifest of an index directory: the verified configuration the
/// index was created with, which opening it builds it from again. In the
/// file the structure is its name (`kind`) and its parameters (`index`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "ManifestFile", try_from = "ManifestFile")]
pub struct Manifest {
    /// Manifest format version.
    pub format_version: u16,
    /// Version of geoflash that created the index.
    pub created_by: String,
    /// The structure and its verified parameters.
    pub structure: StructureConfig,
    /// Page size in bytes.
    pub page_size: usize,
    /// Device spec string.
    pub device: String,
    /// Coordinate reference.
    pub crs: Crs,
    /// The node store and its options.
    pub store: StoreSpec,
    /// Whether the index was created with a rollback journal
    /// (`journal.dat`, committed before the index was published): its
    /// absence or a journal without a commit is then damage, never an
    /// index written before journals. Manifests written before this field
    /// read `false`, and their journal is optional as before.
    pub journal: bool,
    /// Whether the index has an object heap (`objects.dat`): set when the
    /// heap is created, before any object is put in it (the file first,
    /// then the manifest: a crash between them leaves a heap the manifest
    /// does not name, which opens as before), and by the first writable
    /// open that holds the heap of an index whose manifest predates the
    /// field. A missing `objects.dat` is then damage naming it, never an
    /// index without objects (whose objects would answer as their boxes).
    pub objects: bool,
    /// The generation of the object heap's newest mark as of the index's
    /// last checkpoint that committed the heap, for an index whose
    /// checkpoints name no generation of their own (the plain store's
    /// `journal = off`; `None` otherwise, and in manifests written before
    /// the field): a heap whose last mark is older (cut back to an earlier
    /// mark, or replaced by an older copy) is damage naming `objects.dat`.
    pub objects_mark: Option<u64>,
}

/// The manifest as its file spells it.
#[derive(Serialize, Deserialize)]
struct ManifestFile {
    format_version: u16,
    created_by: String,
    kind: String,
    page_size: usize,
    device: String,
    #[serde(default)]
    crs: Crs,
    index: serde_json::Value,
    store: StoreSpec,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    journal: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    objects: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    objects_mark: Option<u64>,
}

impl From<Manifest> for ManifestFile {
    fn from(m: Manifest) -> ManifestFile {
        ManifestFile {
            format_version: m.format_version,
            created_by: m.created_by,
            kind: m.structure.kind_name().into(),
            page_size: m.page_size,
            device: m.device,
            crs: m.crs,
            // Plain data: serialising it does not fail.
            index: m.structure.to_json().unwrap_or_default(),
            store: m.store,
            journal: m.journal,
            objects: m.objects,
            objects_mark: m.objects_mark,
        }
    }
}

impl TryFrom<ManifestFile> for Manifest {
    type Error = Error;
    fn try_from(f: ManifestFile) -> Result<Manifest> {
        Ok(Manifest {
            format_version: f.format_version,
            created_by: f.created_by,
            structure: StructureConfig::from_json(&f.kind, f.index)?,
            page_size: f.page_size,
            device: f.device,
            crs: f.crs,
            store: f.store,
            journal: f.journal,
            objects: f.objects,
            objects_mark: f.objects_mark,
        })
    }
}

impl Manifest {
    /// The structure's name (`rstar`, `fortree`, `gffm`, ...).
    pub fn kind(&self) -> &'static str {
        self.structure.kind_name()
    }

    /// Reads and validates `dir/manifest.json`. A missing file, bad JSON, a
    /// damaged value or a newer format version are clear errors naming the
    /// file; a manifest of format 1 is read through `upgrade_v1`.
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                Error::invalid(format!(
                    "{} is not an index directory (no {MANIFEST_FILE})",
                    dir.display()
                ))
            } else {
                Error::Io {
                    path: path.clone(),
                    page: None,
                    source,
                }
            }
        })?;
        // Check the version first, so a newer layout is refused rather than misread.
        let raw: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Error::corrupt(None, format!("{}: not valid JSON: {e}", path.display()))
        })?;
        let version = raw
            .get("format_version")
            .and_then(|v| v.as_u64())
            .ok_or_else(|| {
                Error::corrupt(None, format!("{}: no format_version", path.display()))
            })?;
        if !(1..=u64::from(MANIFEST_VERSION)).contains(&version) {
            // A newer build's manifest still carries its checksum over every
            // field; a damaged version number does not.
            check_checksum(raw, &path)?;
            return Err(
                Error::unsupported_version("manifest", version, 1u16, MANIFEST_VERSION)
                    .in_file(&path),
            );
        }
        let mut raw = check_checksum(raw, &path)?;
        if version < 2 {
            raw = upgrade_v1(raw);
        }
        serde_json::from_value(raw)
            .map_err(|e| Error::corrupt(None, format!("{}: {e}", path.display())))
    }
    /// Writes the manifest atomically (temporary file, sync, rename, sync
    /// the directory), with its checksum as the last field.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let bad =
            |e: serde_json::Error| Error::invalid(format!("manifest does not serialise: {e}"));
        let mut value = serde_json::to_value(self).map_err(bad)?;
        let sum = checksum_of(&value)?;
        if let Some(map) = value.as_object_mut() {
            map.insert(CHECKSUM_KEY.into(), serde_json::Value::String(sum));
        }
        let text = serde_json::to_vec_pretty(&value).map_err(bad)?;
        write_atomic(dir, MANIFEST_FILE, &text)
    }
}

/// A manifest of format 1 (checksum checked) as format 2 writes it, the
/// one upgrade between them. Format 1 wrote the store as one record of
/// every store's fields: `efind` and `fast` (each `null` unless the
/// store's, and absent or `null` in manifests written before every
/// parameter was recorded, which then stood for the store's defaults),
/// `policy` for FAST, `in_place` for every store. Format 2 writes the
/// chosen store's own fields, so the other store's `null` is dropped and a
/// logged store's missing parameters are written out as the defaults that
/// format 1 stood for. The structure (`kind`, `index`) is unchanged.
pub fn upgrade_v1(mut raw: serde_json::Value) -> serde_json::Value {
    use crate::store::efind::EfindConfig;
    use crate::store::fast::FastConfig;
    if let Some(store) = raw.get_mut("store").and_then(|s| s.as_object_mut()) {
        let kind = store.get("kind").and_then(|k| k.as_str()).map(String::from);
        for own in ["efind", "fast"] {
            let missing = store.get(own).is_none_or(|v| v.is_null());
            if kind.as_deref() != Some(own) {
                store.remove(own);
            } else if missing {
                let defaults = match own {
                    "efind" => serde_json::to_value(EfindConfig::default()),
                    _ => serde_json::to_value(FastConfig::default()),
                };
                store.insert(own.into(), defaults.unwrap_or_default());
            }
        }
        if kind.as_deref() != Some("plain") {
            store.remove("in_place");
        }
        if kind.as_deref() == Some("fast") {
            store.remove("policy");
        }
    }
    if let Some(map) = raw.as_object_mut() {
        map.insert("format_version".into(), serde_json::json!(MANIFEST_VERSION));
    }
    raw
}

/// The manifest's checksum field: `crc32c:` and eight hex digits, the
/// CRC-32C of the compact JSON of every other field (in the order they
/// are read back), so a damaged value (a digit of the page size, a
/// coordinate of the Hilbert domain) is an error naming the file instead
/// of another index (issue 44, item 1). Manifests written before it have
/// no checksum and are read as before; builds before it ignore the field.
const CHECKSUM_KEY: &str = "checksum";

fn checksum_of(value: &serde_json::Value) -> Result<String> {
    let bytes = serde_json::to_vec(value)
        .map_err(|e| Error::invalid(format!("manifest does not serialise: {e}")))?;
    Ok(format!("crc32c:{:08x}", crc32c::crc32c(&bytes)))
}

/// `raw` without its checksum field, after checking it (absent: a manifest
/// written before checksums, accepted).
fn check_checksum(mut raw: serde_json::Value, path: &Path) -> Result<serde_json::Value> {
    let Some(stored) = raw.as_object_mut().and_then(|m| m.remove(CHECKSUM_KEY)) else {
        return Ok(raw);
    };
    let want = checksum_of(&raw)?;
    if stored.as_str() != Some(want.as_str()) {
        return Err(Error::corrupt(
            None,
            format!(
                "{}: checksum mismatch (stored {stored}, computed {want}): the manifest is damaged",
                path.display()
            ),
        ));
    }
    Ok(raw)
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    }
}

/// Replaces `dir/name` with `data` atomically: write `name.tmp`, sync it,
/// rename over `name`, sync the directory. A crash leaves either the old or
/// the new file, never a mix.
pub fn write_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    {
        let mut f = File::create(&tmp).map_err(|e| io(&tmp, e))?;
        f.write_all(data).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
    }
    std::fs::rename(&tmp, &dst).map_err(|e| io(&dst, e))?;
    sync_dir(dir)
}

/// Syncs a directory so that file creations and renames in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))
}

/// How an index directory is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Shared: many readers at once, no writer.
    Read,
    /// Exclusive: one writer, no reader in another process.
    Write,
}

/// An advisory lock on an index directory (`LOCK`), held until dropped.
#[derive(Debug)]
pub struct DirLock {
    /// The open lock file that holds the lock; `None` for a reader on a
    /// read-only file system whose directory has no lock file.
    _file: Option<File>,
    path: PathBuf,
    access: Access,
    /// The lock file's canonical path, as [`HELD`] records it.
    key: PathBuf,
}

/// How long a refused lock is retried when this process does not hold it
/// (see [`DirLock::acquire`]).
const LOCK_RETRY_MS: u64 = 200;

/// The locks this process holds (the lock file's canonical path and how),
/// so that a lock refused because this very process holds it says so
/// rather than blaming "another process" (the advisory lock belongs to an
/// open file, so a second open of the same directory in one process is
/// refused like one from another process).
static HELD: std::sync::Mutex<Vec<(PathBuf, Access)>> = std::sync::Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Access)>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// How this process holds the lock file `key`, if it does (a writer over readers).
fn held_here(key: &Path) -> Option<Access> {
    let held = held();
    let mut found = None;
    for (k, a) in held.iter() {
        if k == key {
            found = Some(match (found, *a) {
                (Some(Access::Write), _) | (_, Access::Write) => Access::Write,
                _ => Access::Read,
            });
        }
    }
    found
}

/// The error for a lock on `dir` refused as `access` wants it, saying who
/// holds it: this process (`here`), or another one, which for a reader is
/// a writer at work (nothing to recover).
fn lock_refused(dir: &Path, access: Access, here: Option<Access>) -> Error {
    let dir = dir.display();
    Error::invalid(match (here, access) {
        (Some(Access::Write), _) => format!(
            "{dir} is locked by this process, which already has it open for writing: \
             use that index, or close it before opening the directory again \
             (one writer or many readers at a time)"
        ),
        (Some(Access::Read), _) => format!(
            "{dir} is locked by this process, which has it open read-only: \
             close that index before opening the directory for writing \
             (one writer or many readers at a time)"
        ),
        (None, Access::Read) => format!(
            "{dir} is locked by another process that is writing it (a build, insert, delete, \
             checkpoint or recover, or a program that opened it for writing): \
             it can be read once that process has closed it"
        ),
        (None, Access::Write) => format!(
            "{dir} is locked by another process that has it open (a writer, or readers such as \
             a query): one writer or many readers at a time; try again once it has closed it"
        ),
    })
}

impl DirLock {
    /// Takes the lock without waiting; an error says who holds it when it is taken.
    ///
    /// A reader opens `LOCK` read-only, so a directory another user owns
    /// reads as well. A reader that finds no lock file creates it (a writer
    /// starting later must see the reader), except on a read-only file
    /// system, where no writer can run either: there it reads without a
    /// lock. A directory without a lock file that this user may not write
    /// is refused, saying how to give it one.
    pub fn acquire(dir: &Path, access: Access) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let create = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
        };
        let file = match access {
            Access::Write => create().map_err(|e| io(&path, e))?,
            Access::Read => match OpenOptions::new().read(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => match create() {
                    Ok(f) => f,
                    Err(e) => return DirLock::without_lock_file(dir, path, e),
                },
                Err(e) => return Err(io(&path, e)),
            },
        };
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let try_lock = || match access {
            Access::Write => file.try_lock(),
            Access::Read => file.try_lock_shared(),
        };
        let mut res = try_lock();
        // The lock belongs to the open file, which a child process shares
        // between its fork and its exec (another thread of this process
        // starting a program): a lock just released can look held for that
        // instant. A refusal not explained by this process's own locks is
        // retried for up to LOCK_RETRY_MS before it is reported.
        let mut waited = 0;
        while matches!(res, Err(std::fs::TryLockError::WouldBlock))
            && held_here(&key).is_none()
            && waited < LOCK_RETRY_MS
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 10;
            res = try_lock();
        }
        match res {
            Ok(()) => {
                held().push((key.clone(), access));
                Ok(DirLock {
                    _file: Some(file),
                    path,
                    access,
                    key,
                })
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                Err(lock_refused(dir, access, held_here(&key)))
            }
            Err(std::fs::TryLockError::Error(e)) => Err(io(&path, e)),
        }
    }

    /// A reader's lock on `dir` whose lock file `path` is missing and could
    /// not be created (`err`): none on a read-only file system (no writer
    /// can run there), else an error saying what to do.
    fn without_lock_file(dir: &Path, path: PathBuf, err: std::io::Error) -> Result<DirLock> {
        match err.kind() {
            std::io::ErrorKind::ReadOnlyFilesystem => Ok(DirLock {
                _file: None,
                key: path.clone(),
                path,
                access: Access::Read,
            }),
            std::io::ErrorKind::PermissionDenied => Err(Error::invalid(format!(
                "{} has no lock file ({LOCK_FILE}) and this user may not create one, so a writer \
                 could change the index while it is read: create it once as a user who may write \
                 the directory (`touch {}`), or read a copy of the index",
                dir.display(),
                path.display()
            ))),
            _ => Err(io(&path, err)),
        }
    }

    /// How the lock is held.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Path of the lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Follows the lock's directory renamed to `dir` (a build's staging
    /// directory published onto its target): the lock file and this
    /// process's record of the lock now name `dir`, so that a second open
    /// of `dir` here is told this process holds it.
    pub fn moved_to(&mut self, dir: &Path) {
        let path = dir.join(LOCK_FILE);
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let mut held = held();
        if let Some(entry) = held
            .iter_mut()
            .find(|(k, a)| *k == self.key && *a == self.access)
        {
            entry.0 = key.clone();
        }
        self.path = path;
        self.key = key;
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut held = held();
        if let Some(i) = held
            .iter()
            .position(|(k, a)| *k == self.key && *a == self.access)
        {
            held.swap_remove(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::index::{IndexKind, TreeParams};

    fn sample() -> Manifest {
        Manifest {
            format_version: MANIFEST_VERSION,
            created_by: "test".into(),
            structure: StructureConfig::Tree(TreeParams::new(IndexKind::RStar, 101)),
            page_size: 4096,
            device: "mem:".into(),
            crs: Crs::default(),
            store: StoreSpec::plain(4096),
            journal: false,
            objects: false,
            objects_mark: None,
        }
    }

    #[test]
    fn round_trip_and_version_check() {
        let dir = tempfile::tempdir().unwrap();
        let m = sample();
        m.store(dir.path()).unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        let mut newer = serde_json::to_value(&m).unwrap();
        newer["format_version"] = serde_json::json!(MANIFEST_VERSION + 1);
        std::fs::write(dir.path().join(MANIFEST_FILE), newer.to_string()).unwrap();
        // Refused with a message naming the version and the file.
        let e = Manifest::load(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("format version {}", MANIFEST_VERSION + 1))
                && e.contains(&dir.path().join(MANIFEST_FILE).display().to_string()),
            "{e}"
        );
        std::fs::write(dir.path().join(MANIFEST_FILE), "{not json").unwrap();
        assert!(matches!(
            Manifest::load(dir.path()),
            Err(Error::Corrupt { .. })
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(Manifest::load(empty.path())
            .unwrap_err()
            .to_string()
            .contains("not an index directory"));
    }

    /// Issue 44, item 1: every 4-byte range of the manifest flipped reads
    /// back as the same manifest or as an error naming the file; a
    /// manifest without a checksum (earlier builds) still reads.
    #[test]
    fn a_damaged_manifest_is_an_error_naming_it_never_another_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = sample();
        m.structure = StructureConfig::Xbr(crate::index::xbr::XbrConfig::new(
            crate::geom::Rect::new(0.25, -3.5, 1e9, 7.0).unwrap(),
            101,
        ));
        m.store(dir.path()).unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let clean = std::fs::read(&path).unwrap();
        assert!(String::from_utf8_lossy(&clean).contains("\"checksum\": \"crc32c:"));
        for at in (0..clean.len()).step_by(4) {
            let mut bad = clean.clone();
            for b in bad.iter_mut().skip(at).take(4) {
                *b ^= 0x01;
            }
            std::fs::write(&path, &bad).unwrap();
            match Manifest::load(dir.path()) {
                Ok(got) => assert_eq!(got, m, "bytes {at}..{}", at + 4),
                Err(e) => assert!(e.to_string().contains(MANIFEST_FILE), "bytes {at}: {e}"),
            }
        }
        let legacy = serde_json::to_vec_pretty(&m).unwrap();
        std::fs::write(&path, legacy).unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
    }

    /// The object heap's fields round-trip and are left out when unset (a
    /// manifest without them reads `false` and `None`, as written before
    /// them); a field this build does not know is ignored, its checksum
    /// checked over it: how a build before the heap's fields reads a
    /// manifest that has them.
    #[test]
    fn the_object_heaps_fields_round_trip_and_unknown_fields_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = sample();
        m.store(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(!text.contains("objects"), "{text}");
        m.objects = true;
        m.objects_mark = Some(7);
        m.store(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(
            text.contains("\"objects\": true") && text.contains("\"objects_mark\": 7"),
            "{text}"
        );
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
        let mut newer = serde_json::to_value(&m).unwrap();
        newer["a_later_field"] = serde_json::json!({"n": 1});
        let sum = checksum_of(&newer).unwrap();
        newer[CHECKSUM_KEY] = serde_json::Value::String(sum);
        std::fs::write(dir.path().join(MANIFEST_FILE), newer.to_string()).unwrap();
        assert_eq!(Manifest::load(dir.path()).unwrap(), m);
    }

    #[test]
    fn one_writer_or_many_readers() {
        let dir = tempfile::tempdir().unwrap();
        let w = DirLock::acquire(dir.path(), Access::Write).unwrap();
        assert!(DirLock::acquire(dir.path(), Access::Write).is_err());
        assert!(DirLock::acquire(dir.path(), Access::Read).is_err());
        // Issue 44: a lock this process holds is not blamed on another one.
        for access in [Access::Write, Access::Read] {
            let e = DirLock::acquire(dir.path(), access)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("locked by this process, which already has it open for writing")
                    && !e.contains("another process"),
                "{e}"
            );
        }
        drop(w);
        let r = DirLock::acquire(dir.path(), Access::Read).unwrap();
        let e = DirLock::acquire(dir.path(), Access::Write)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("locked by this process, which has it open read-only"),
            "{e}"
        );
        drop(r);
        // The messages for a lock another process holds.
        let e = lock_refused(dir.path(), Access::Read, None).to_string();
        assert!(
            e.contains("another process that is writing it") && !e.contains("recover --"),
            "{e}"
        );
        let e = lock_refused(dir.path(), Access::Write, None).to_string();
        assert!(e.contains("another process that has it open"), "{e}");
        // Every lock dropped, the directory is free again.
        assert!(held_here(&std::fs::canonicalize(dir.path().join(LOCK_FILE)).unwrap()).is_none());
        let r1 = DirLock::acquire(dir.path(), Access::Read).unwrap();
        let _r2 = DirLock::acquire(dir.path(), Access::Read).unwrap();
        assert!(DirLock::acquire(dir.path(), Access::Write).is_err());
        assert_eq!(r1.access(), Access::Read);
    }

    /// A reader whose directory has no lock file and cannot get one: on a
    /// read-only file system it reads without a lock (no writer can run
    /// there); where this user may not write, it is refused saying how to
    /// give the directory its lock file; other errors name the file. (The
    /// tests run as root, who may write anywhere, so the errors are made
    /// here rather than by the file system.)
    #[test]
    fn a_reader_without_a_lock_file_reads_on_a_read_only_file_system_only() {
        use std::io::{Error as IoError, ErrorKind};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let lock = DirLock::without_lock_file(
            dir.path(),
            path.clone(),
            IoError::from(ErrorKind::ReadOnlyFilesystem),
        )
        .unwrap();
        assert_eq!(lock.access(), Access::Read);
        assert!(!path.exists());
        // The lock-less reader does not stand in for a lock: a writer can
        // still be refused or taken by the file system, not by this record.
        assert!(held_here(&path).is_none());
        drop(lock);
        let e = DirLock::without_lock_file(
            dir.path(),
            path.clone(),
            IoError::from(ErrorKind::PermissionDenied),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("has no lock file") && e.contains(&format!("touch {}", path.display())), "{e}");
        let e = DirLock::without_lock_file(dir.path(), path.clone(), IoError::from(ErrorKind::StorageFull))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }

    /// A reader that finds no lock file creates it, so that a writer
    /// starting later is kept out while it reads.
    #[test]
    fn a_reader_creates_a_missing_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let _r = DirLock::acquire(dir.path(), Access::Read).unwrap();
        assert!(dir.path().join(LOCK_FILE).is_file());
        assert!(DirLock::acquire(dir.path(), Access::Write).is_err());
    }
}
