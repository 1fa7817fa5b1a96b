//! The rollback journal of an index directory (`journal.dat`): the indices
//! whose structure writes its pages in place (the plain store, hence the
//! FOR-tree and the xBR+-tree on it, and the grid files) on a device with a
//! file (`file`, `file:PATH`, a `hybrid:` with a file tier) get their device wrapped in a [`JournaledDevice`], committed at each
//! [`Index::checkpoint`](super::Index::checkpoint), so that a crash between
//! two checkpoints (or during one) reopens the last checkpoint exactly
//! (issue 44, item 2). The stores with a log (eFIND, FAST) keep their own
//! protocol; simulated devices are saved whole at checkpoints already.
use std::path::Path;
use std::sync::Arc;

use crate::manifest::{Access, Manifest};
use crate::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use crate::storage::journal::{journal_capacity, JournalOpen, JournaledDevice, Rollback};
use crate::storage::spec::DeviceSpec;
use crate::storage::PageDevice;
use crate::Result;

/// File of the rollback journal in an index directory.
pub const JOURNAL_FILE: &str = "journal.dat";

/// Whether an index on `spec` whose structure writes in place
/// (`in_place`) keeps a rollback journal: every device with a file written
/// in place, that is a file (the directory's own, or `file:PATH`) or a
/// `hybrid:` device with a file tier (issue 44: `file:PATH` and hybrid
/// indexes acknowledged checkpoints a kill then broke). Simulated devices
/// are saved whole, atomically, at checkpoints and need none. A hybrid of
/// a file and a simulator keeps one whatever its structure: its simulated
/// tier is durable only at checkpoints (its image), its file tier at every
/// write, so after a crash the file tier's writes since the last
/// checkpoint are rolled back to meet the image (a logged store's log
/// lives on one of the tiers and cannot speak for the other: eFIND's nodes
/// on a file tier, newer than its log on the simulated one, were refused
/// as "newer than the recovered log's end"); the journal commits with the
/// images (`images.rs`). None with `journal_off` (the plain store's
/// `journal = off`, the papers' in-place mode, which promises nothing
/// after a crash).
pub(super) fn needs_journal(spec: &DeviceSpec, in_place: bool, journal_off: bool) -> bool {
    fn has(spec: &DeviceSpec, file: bool) -> bool {
        match spec {
            DeviceSpec::File { .. } => file,
            DeviceSpec::FlashSim { .. } => !file,
            DeviceSpec::Hybrid { fast, slow, .. } => has(fast, file) || has(slow, file),
            _ => false,
        }
    }
    has(spec, true) && !journal_off && (in_place || has(spec, false))
}

/// The generation of the last commit of the journal in `dir` (pages of
/// `page_size` bytes), read without opening it; `None` without a journal.
pub(super) fn committed_generation(dir: &Path, page_size: usize) -> Result<Option<u64>> {
    let path = dir.join(JOURNAL_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let opts = FileDeviceOptions {
        direct: false,
        engine: IoEngine::Psync,
        capacity_pages: 0,
        read_only: true,
    };
    let file = FileDevice::open(&path, page_size, opts)?;
    Ok(Some(
        crate::storage::journal::committed_generation(&file)?.unwrap_or(0),
    ))
}

/// The device of a journaled index and its journal.
pub(super) struct Journaled {
    /// The device the structure uses (the journaled one).
    pub device: Arc<dyn PageDevice>,
    /// The journal, committed at checkpoints.
    pub journal: Arc<JournaledDevice>,
    /// What opening it rolled back.
    pub rollback: Rollback,
}

/// When the journal of an index directory was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Created {
    /// Now: a new index, whose journal starts blank.
    Now,
    /// Before this open. `true`: the manifest says the index was created
    /// with its journal, which a commit made before the index was
    /// published, so a missing journal or one without a commit is damage
    /// (a deleted, truncated or zeroed `journal.dat` would otherwise leave
    /// the pages a crash left, unrolled, as the index). `false`: a
    /// manifest written before it said so, whose index may predate
    /// journals.
    Before(bool),
}

/// Wraps `device`, the pages of the index in `dir`, in the journal of
/// `dir` (`created` now for a new index). A read-only open of an index
/// without a journal (written before journals) is not wrapped (`None`).
pub(super) fn open_journal(
    device: Arc<dyn PageDevice>,
    dir: &Path,
    access: Access,
    created: Created,
) -> Result<Option<Journaled>> {
    let path = dir.join(JOURNAL_FILE);
    let exists = path.is_file();
    let required = created == Created::Before(true);
    if required && !exists {
        return Err(super::devices::missing_file(
            &path,
            "the rollback journal of the index",
        ));
    }
    if access == Access::Read && !exists {
        return Ok(None);
    }
    let fresh = created == Created::Now;
    let page_size = device.page_size();
    let opts = FileDeviceOptions {
        direct: false,
        engine: IoEngine::Psync,
        // Room for the largest generation of this device (not the file
        // device's default, which a larger `file:PATH?capacity=` outgrew).
        capacity_pages: journal_capacity(device.capacity(), page_size),
        read_only: access == Access::Read,
    };
    let file: Arc<dyn PageDevice> = Arc::new(FileDevice::open(&path, page_size, opts)?);
    if !exists {
        // The new file's directory entry must outlive a power failure as
        // its first header will (a filesystem may need the directory
        // synced for it).
        crate::manifest::sync_dir(dir)?;
    }
    // No commit: a journal created now (by this open when it was missing),
    // or one a crash left before its first header was synced.
    let blank = crate::storage::journal::committed_generation(file.as_ref())?.is_none();
    if required && blank {
        return Err(crate::Error::Corrupt {
            file: Some(path),
            page: Some(0),
            reason: "the rollback journal holds no commit, but the index was created with one \
                     (the file was replaced, truncated or zeroed): its pages may hold writes \
                     a crash left; restore the index from a backup"
                .into(),
        });
    }
    let how = match access {
        Access::Read => JournalOpen::Read,
        // An index written before journals (its journal missing, or blank
        // after a crash of the open that created it): every page it holds
        // is committed.
        Access::Write if blank && !fresh => JournalOpen::Write {
            fresh_horizon: pages_in_use(device.as_ref())?,
        },
        Access::Write => JournalOpen::Write { fresh_horizon: 0 },
    };
    let (journal, rollback) = JournaledDevice::open_checked(device, file, how, page_intact)?;
    let journal = Arc::new(journal);
    Ok(Some(Journaled {
        device: journal.clone(),
        journal,
        rollback,
    }))
}

/// Whether `page` is whole in one of the page formats of the structures an
/// index directory journals (the stores' pages, `crate::page`, and the
/// grid files' own, `crate::grid::codec`): its checksum holds. A witness
/// page of the journal's last commit that reads other content is then the
/// sign of a journal older than the pages, and damage to the page (which
/// the structure reports, naming `pages.dat`, where it reads it)
/// otherwise.
fn page_intact(page: &[u8]) -> bool {
    crate::page::decode_header(page, None).is_ok() || crate::grid::codec::unframe(0, page).is_ok()
}

/// Records in the manifest of the index in `dir` that its journal is
/// required (`"journal": true`) once a writable open holds the journal
/// with a commit ([`open_journal`] for writing leaves one, synced, with the
/// file's directory entry) of an index whose manifest did not say so (one
/// written before the field, whose index may predate journals). From then
/// on a missing or blank `journal.dat` is damage naming it, as for an index
/// created with its journal; before, such an index kept its journal
/// optional for good, so a deleted or zeroed journal left the pages a
/// crash left, unrolled, as the index. The manifest is replaced atomically
/// and synced ([`Manifest::store`]); a read-only open, or a manifest that
/// says so already, writes nothing.
pub(super) fn require_journal(dir: &Path, access: Access, manifest: &mut Manifest) -> Result<()> {
    if access == Access::Read || manifest.journal {
        return Ok(());
    }
    let required = Manifest {
        journal: true,
        ..manifest.clone()
    };
    required.store(dir)?;
    *manifest = required;
    Ok(())
}

/// Pages of the device's file (its length rounded up), or its capacity
/// when it has no file.
fn pages_in_use(device: &dyn PageDevice) -> Result<u64> {
    // The path the device was opened by (relative ones to the current
    // directory, as the device resolved them: joining `dir` again named
    // `DIR/DIR/pages.dat` for a relative index directory).
    let Some(path) = device.path() else {
        return Ok(device.capacity());
    };
    let len = std::fs::metadata(&path)
        .map_err(|source| crate::Error::Io {
            path: path.clone(),
            page: None,
            source,
        })?
        .len();
    Ok(len.div_ceil(device.page_size() as u64))
}

#[cfg(test)]
mod tests;
