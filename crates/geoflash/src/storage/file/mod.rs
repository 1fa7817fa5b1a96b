//! `FileDevice`: pages in a real file, buffered or with `O_DIRECT`, batches
//! submitted at once through io_uring where the kernel permits it (pread and
//! pwrite otherwise).
//!
//! The file is sparse: it grows as pages are written, pages never written
//! (or trimmed) read as zeros, and the capacity is a logical limit only.
//! With `O_DIRECT` the buffer address, the length and the file offset of
//! every I/O must be aligned; [`PageDevice`](super::PageDevice) calls accept any buffer and
//! bounce through internal [`AlignedBuf`]s when the caller's is misaligned,
//! while the raw calls ([`FileDevice::read_batch_raw`],
//! [`FileDevice::write_batch_raw`]) refuse a misaligned buffer with
//! [`Error::MisalignedBuffer`].
//!
//! Layers: this module is the device (the file, `O_DIRECT`, alignment and
//! bounce buffers, how a batch's pages become spans of the file, trim);
//! the private `engine` submodule submits those spans (psync, or io_uring
//! with its pool of rings); the counting and the checks of every batch are
//! [`Counted`]'s (a [`FileDevice`] is a counted [`FileIo`]). All `unsafe` code
//! (aligned allocation, io_uring, `fallocate`) lives in the private `sys`
//! submodule.
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

#[cfg(test)]
use super::counted::Dir;
use super::{Counted, DeviceExt, DeviceGeometry, PageDevice, PageId};
use crate::units::check_page_size;
use crate::{Error, Result};

mod engine;
mod sys;

use engine::Engine;
pub use engine::IoEngine;
internal! {
    pub use sys::AlignedBuf;
}
use sys::Span;

/// Memory alignment required of buffers used for `O_DIRECT` I/O.
pub const DIRECT_MEM_ALIGN: usize = 4096;

/// Default logical size of a file device: 2^34 bytes (16 GiB).
pub const DEFAULT_CAPACITY_BYTES: u64 = 1 << 34;

/// Largest single I/O built by merging consecutive pages of a batch.
const MAX_SPAN_BYTES: usize = 1 << 20;

/// Largest bounce buffer kept for reuse (larger ones are freed after use).
const MAX_POOLED_BYTES: usize = 16 << 20;

/// The size of a streamed read's buffer ([`PageDevice::read_batch_each`]):
/// the batch streams through it as a circular buffer (each span read into
/// the next free region, free again once handed over, the buffer starting
/// over whenever it is empty), so a batch of any size holds at most this
/// much and keeps up to the ring's 256 reads in flight to its end, with
/// room for reads that complete out of order. Groups of 4 MiB, each its
/// own region of a 4 MiB buffer, cost a new process 1,024 page faults:
/// a query reading 1,783 pages of a file in the page cache took 2 ms
/// longer than with 64-page reads into reused memory.
pub const STREAM_BUFFER_BYTES: usize = 2 << 20;

/// The longest read of adjacent pages in a streamed batch (an eighth of
/// [`STREAM_BUFFER_BYTES`], so that a long run of pages leaves room for
/// other reads in flight).
const STREAM_SPAN_BYTES: usize = STREAM_BUFFER_BYTES / 8;

/// Buffers of streamed reads kept for the next one, by any device of the
/// process: a process that opens indexes again and again (a Python
/// program, a server) reads into memory it already has, where a buffer of
/// each new device's own would be fresh memory, faulted in page by page at
/// every cold pass. At most [`STREAM_BUFFERS_KEPT`] buffers of at most
/// [`STREAM_BUFFER_BYTES`] each (8 MiB in all).
static STREAM_BUFFERS: Mutex<Vec<AlignedBuf>> = Mutex::new(Vec::new());

/// Most buffers [`STREAM_BUFFERS`] keeps.
const STREAM_BUFFERS_KEPT: usize = 4;

/// A buffer of at least `len` bytes aligned to `align` for a streamed
/// read: one of [`STREAM_BUFFERS`] that fits, else a new one.
fn take_stream_buffer(len: usize, align: usize) -> Result<AlignedBuf> {
    let mut kept = lock(&STREAM_BUFFERS);
    let fits = kept
        .iter()
        .position(|b| b.len() >= len && b.align() >= align && b.align() % align == 0);
    match fits {
        Some(i) => Ok(kept.swap_remove(i)),
        None => {
            drop(kept);
            AlignedBuf::new(len.next_power_of_two().min(STREAM_BUFFER_BYTES).max(len), align)
        }
    }
}

/// Gives a streamed read's buffer back to [`STREAM_BUFFERS`] (kept if it
/// is small enough and there is room, replacing a smaller one when full).
fn give_stream_buffer(b: AlignedBuf) {
    if b.len() > STREAM_BUFFER_BYTES {
        return;
    }
    let mut kept = lock(&STREAM_BUFFERS);
    if kept.len() < STREAM_BUFFERS_KEPT {
        kept.push(b);
    } else if let Some(smallest) = kept.iter_mut().min_by_key(|k| k.len()) {
        if smallest.len() < b.len() {
            *smallest = b;
        }
    }
}

/// Options of [`FileDevice::open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileDeviceOptions {
    /// Open with `O_DIRECT` (bypass the page cache). Default `true`.
    pub direct: bool,
    /// I/O engine. Default [`IoEngine::Auto`].
    pub engine: IoEngine,
    /// Logical capacity in pages; `0` (the default) means
    /// `DEFAULT_CAPACITY_BYTES` / page size.
    pub capacity_pages: u64,
    /// Open the file read-only (it must exist; writes and trims are errors).
    /// Default `false`.
    pub read_only: bool,
}

impl Default for FileDeviceOptions {
    fn default() -> Self {
        FileDeviceOptions {
            direct: true,
            engine: IoEngine::Auto,
            capacity_pages: 0,
            read_only: false,
        }
    }
}

/// Checks that a buffer at address `addr` of `len` bytes may be used for
/// `O_DIRECT` I/O: the address must be a multiple of `align` and the length
/// a multiple of 512 bytes.
#[cfg(test)]
pub fn check_direct_alignment(addr: usize, len: usize, align: usize) -> Result<()> {
    if addr.checked_rem(align) != Some(0) {
        return Err(Error::MisalignedBuffer { addr, align });
    }
    if len.checked_rem(512) != Some(0) {
        return Err(Error::invalid(format!(
            "direct I/O buffer length {len} is not a multiple of 512 bytes"
        )));
    }
    Ok(())
}

/// A page device backed by a file, counted.
pub type FileDevice = Counted<FileIo>;

internal! {
    /// The file behind a [`FileDevice`], uncounted.
    #[derive(Debug)]
    pub struct FileIo {
        path: PathBuf,
        file: File,
        page_size: usize,
        capacity: u64,
        direct: bool,
        /// Opened read-only.
        read_only: bool,
        /// How spans reach the kernel (psync or io_uring).
        engine: Engine,
        bounce: Mutex<Vec<AlignedBuf>>,
        punch_hole_works: AtomicBool,
        /// Whether `fallocate` can reserve blocks here (`PageDevice::reserve`).
        allocate_works: AtomicBool,
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked; the buffers
    // inside are still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FileDevice {
    /// Opens (creating if missing) the file at `path` as a device of
    /// `page_size`-byte pages.
    ///
    /// Errors: a page size that is not a power of two from 512 to 65536; a
    /// filesystem that refuses `O_DIRECT` (use `direct: false` there); an
    /// explicit [`IoEngine::Uring`] when io_uring is unavailable; any error
    /// opening the file.
    pub fn open(path: &Path, page_size: usize, opts: FileDeviceOptions) -> Result<FileDevice> {
        FileIo::open(path, page_size, opts).map(Counted::wrap)
    }

    /// Reads a batch into `buf` without bouncing: in direct mode `buf` must be
    /// aligned to [`DIRECT_MEM_ALIGN`], else [`Error::MisalignedBuffer`].
    /// Counted in the statistics like [`PageDevice::read_batch`].
    #[cfg(test)]
    pub fn read_batch_raw(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        self.count(Dir::Read, pages, len, || {
            self.check_unbounced(buf)?;
            self.read_into(pages, buf)
        })
    }

    /// Writes a batch from `data` without bouncing: in direct mode `data`
    /// must be aligned to [`DIRECT_MEM_ALIGN`], else [`Error::MisalignedBuffer`].
    #[cfg(test)]
    pub fn write_batch_raw(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        self.count(Dir::Write, pages, data.len(), || {
            self.check_writable()?;
            self.check_unbounced(data)?;
            self.write_from(pages, data)
        })
    }
}

impl FileIo {
    /// The file of [`FileDevice::open`], uncounted.
    fn open(path: &Path, page_size: usize, opts: FileDeviceOptions) -> Result<FileIo> {
        check_page_size(page_size)?;
        let capacity = if opts.capacity_pages == 0 {
            (DEFAULT_CAPACITY_BYTES / page_size as u64).max(1)
        } else {
            opts.capacity_pages
        };
        let fits = capacity
            .checked_mul(page_size as u64)
            .is_some_and(|b| b <= i64::MAX as u64);
        if !fits {
            return Err(Error::invalid(format!(
                "a file device of {capacity} pages of {page_size} bytes exceeds the largest file offset"
            )));
        }
        let mut oo = OpenOptions::new();
        oo.read(true);
        if !opts.read_only {
            oo.write(true).create(true).truncate(false);
        }
        if opts.direct {
            oo.custom_flags(libc::O_DIRECT);
        }
        let file = oo.open(path).map_err(|e| {
            let source = if opts.direct && e.raw_os_error() == Some(libc::EINVAL) {
                io::Error::new(
                    e.kind(),
                    format!(
                        "the filesystem refuses O_DIRECT ({e}); open the device with direct=false"
                    ),
                )
            } else {
                e
            };
            Error::Io {
                path: path.to_path_buf(),
                page: None,
                source,
            }
        })?;
        let probe = || {
            // Reads page 0 through a new ring.
            let mut buf = AlignedBuf::new(page_size, buf_align(page_size))
                .map_err(|e| io::Error::other(e.to_string()))?;
            Engine::uring(&file, path, page_size, &mut buf)
        };
        let engine = match opts.engine {
            IoEngine::Psync => Engine::psync(path, page_size),
            IoEngine::Uring => probe().map_err(|e| Error::Io {
                path: path.to_path_buf(),
                page: None,
                source: io::Error::new(
                    e.kind(),
                    format!("io_uring requested but unavailable: {e}"),
                ),
            })?,
            IoEngine::Auto => probe().unwrap_or_else(|e| {
                tracing::info!(path = %path.display(), error = %e, "io_uring unavailable, using psync");
                Engine::psync(path, page_size)
            }),
        };
        Ok(FileIo {
            path: path.to_path_buf(),
            file,
            page_size,
            capacity,
            direct: opts.direct,
            engine,
            bounce: Mutex::new(Vec::new()),
            punch_hole_works: AtomicBool::new(true),
            allocate_works: AtomicBool::new(true),
            read_only: opts.read_only,
        })
    }

    /// The engine actually in use: [`IoEngine::Uring`] or [`IoEngine::Psync`].
    pub fn engine(&self) -> IoEngine {
        self.engine.kind()
    }

    /// True if the file was opened with `O_DIRECT`.
    #[cfg(test)]
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Alignment of buffers made by [`FileDevice::alloc_buf`]: 4096 bytes, or
    /// the page size if larger.
    pub fn buf_align(&self) -> usize {
        buf_align(self.page_size)
    }

    /// A zeroed aligned buffer for `pages` pages, usable with the raw calls.
    pub fn alloc_buf(&self, pages: usize) -> Result<AlignedBuf> {
        let len = pages
            .checked_mul(self.page_size)
            .ok_or_else(|| Error::invalid("buffer too large"))?;
        AlignedBuf::new(len, self.buf_align())
    }

    /// In direct mode, an error unless `buf` may be used for `O_DIRECT` as it is.
    #[cfg(test)]
    fn check_unbounced(&self, buf: &[u8]) -> Result<()> {
        if self.direct {
            check_direct_alignment(buf.as_ptr() as usize, buf.len(), DIRECT_MEM_ALIGN)?;
        }
        Ok(())
    }

    /// An error if the device was opened read-only.
    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::Io {
                path: self.path.clone(),
                page: None,
                source: io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the device was opened read-only",
                ),
            });
        }
        Ok(())
    }

    fn io_error(&self, page: PageId, source: io::Error) -> Error {
        let source = if self.direct && source.raw_os_error() == Some(libc::EINVAL) {
            io::Error::new(
                source.kind(),
                format!(
                    "{source} (O_DIRECT refused the request: the device's logical block size may exceed the page size {})",
                    self.page_size
                ),
            )
        } else {
            source
        };
        Error::Io {
            path: self.path.clone(),
            page: Some(page),
            source,
        }
    }

    /// True if direct I/O may use `buf` as it is.
    fn usable_directly(&self, buf: &[u8]) -> bool {
        !self.direct || (buf.as_ptr() as usize).checked_rem(DIRECT_MEM_ALIGN) == Some(0)
    }

    fn take_bounce(&self, len: usize) -> Result<AlignedBuf> {
        let pooled = lock(&self.bounce).pop();
        match pooled {
            Some(b) if b.len() >= len => Ok(b),
            _ => AlignedBuf::new(len.next_power_of_two(), self.buf_align()),
        }
    }

    fn give_bounce(&self, b: AlignedBuf) {
        if b.len() <= MAX_POOLED_BYTES {
            let mut pool = lock(&self.bounce);
            if pool.len() < 4 {
                pool.push(b);
            }
        }
    }

    /// Merges the pages at `indices` (positions in the batch, increasing)
    /// into spans of consecutive pages that are also consecutive in the buffer.
    fn spans(&self, pages: &[PageId], indices: impl Iterator<Item = usize>) -> Vec<Span> {
        self.spans_of_at_most(pages, indices, MAX_SPAN_BYTES)
    }

    /// [`spans`](Self::spans) of at most `max_bytes` each.
    fn spans_of_at_most(
        &self,
        pages: &[PageId],
        indices: impl Iterator<Item = usize>,
        max_bytes: usize,
    ) -> Vec<Span> {
        let ps = self.page_size;
        let mut spans: Vec<Span> = Vec::new();
        let mut last: Option<(usize, PageId)> = None;
        for i in indices {
            let Some(&p) = pages.get(i) else { continue };
            let extend = matches!(last, Some((li, lp)) if li + 1 == i && lp + 1 == p);
            match spans.last_mut() {
                Some(s) if extend && s.len + ps <= max_bytes => s.len += ps,
                _ => spans.push(Span {
                    page: p,
                    // check_batch ensured p < capacity, and capacity * ps fits i64.
                    file_offset: p * ps as u64,
                    buf_offset: i * ps,
                    len: ps,
                }),
            }
            last = Some((i, p));
        }
        spans
    }

    /// Reads `pages` into an already suitable buffer.
    fn read_into(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let spans = self.spans(pages, 0..pages.len());
        self.engine
            .read(&self.file, buf, &spans, &|page, e| self.io_error(page, e))
    }

    /// Writes `pages` from an already suitable buffer. When a page occurs
    /// more than once, its last occurrence wins (as if written in order).
    fn write_from(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let spans = if has_duplicates(pages) {
            let mut seen = HashSet::with_capacity(pages.len());
            let mut keep: Vec<usize> = (0..pages.len())
                .rev()
                .filter(|&i| pages.get(i).is_some_and(|p| seen.insert(*p)))
                .collect();
            keep.reverse();
            self.spans(pages, keep.into_iter())
        } else {
            self.spans(pages, 0..pages.len())
        };
        self.engine
            .write(&self.file, data, &spans, &|page, e| self.io_error(page, e))
    }

    /// Zeroes a run of pages by writing zeros (when hole punching is unsupported).
    fn write_zeros(&self, first: PageId, count: u64) -> Result<()> {
        let per = (MAX_SPAN_BYTES / self.page_size).max(1) as u64;
        let zeros = self.alloc_buf(per.min(count) as usize)?;
        let mut p = first;
        let end = first + count;
        while p < end {
            let n = per.min(end - p);
            let pages: Vec<PageId> = (p..p + n).collect();
            let len = n as usize * self.page_size;
            let Some(chunk) = zeros.get(..len) else {
                return Err(Error::invalid("internal: zero buffer too small"));
            };
            self.write_from(&pages, chunk)?;
            p += n;
        }
        Ok(())
    }
}

/// Alignment of the buffers of a device of `page_size`-byte pages: 4096
/// bytes, or the page size if larger.
fn buf_align(page_size: usize) -> usize {
    DIRECT_MEM_ALIGN.max(page_size)
}

fn has_duplicates(pages: &[PageId]) -> bool {
    if pages.len() < 2 {
        return false;
    }
    if pages.windows(2).all(|w| matches!(w, [a, b] if a < b)) {
        return false;
    }
    let mut seen = HashSet::with_capacity(pages.len());
    !pages.iter().all(|p| seen.insert(*p))
}

impl PageDevice for FileIo {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.page_size, self.capacity)
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        if self.usable_directly(buf) {
            return self.read_into(pages, buf);
        }
        let mut bounce = self.take_bounce(buf.len())?;
        let result = match bounce.get_mut(..buf.len()) {
            Some(b) => self.read_into(pages, b).map(|()| buf.copy_from_slice(b)),
            None => Err(Error::invalid("internal: bounce buffer too small")),
        };
        self.give_bounce(bounce);
        result
    }

    /// The batch streamed through an aligned buffer of the process's pool
    /// ([`STREAM_BUFFER_BYTES`], or less for a smaller batch), direct or
    /// not, each span handed over (no copy) as its read completes.
    fn read_batch_each(
        &self,
        pages: &[PageId],
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let ps = self.page_size;
        // The spans' `buf_offset` is each one's position in the batch, in
        // bytes: the handler maps a span back to its pages with it.
        let spans = self.spans_of_at_most(pages, 0..pages.len(), STREAM_SPAN_BYTES.max(ps));
        let len = (pages.len() * ps).min(STREAM_BUFFER_BYTES.max(ps));
        let mut bounce = take_stream_buffer(len, self.buf_align())?;
        let result = match bounce.get_mut(..len) {
            Some(buf) => self.engine.read_each(
                &self.file,
                buf,
                &spans,
                &|page, e| self.io_error(page, e),
                &mut |s, bytes| {
                    let first = s.buf_offset / ps;
                    bytes
                        .chunks_exact(ps)
                        .enumerate()
                        .try_for_each(|(k, page)| each(first + k, page))
                },
            ),
            None => Err(Error::invalid("internal: stream buffer too small")),
        };
        give_stream_buffer(bounce);
        result
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        self.check_writable()?;
        if self.usable_directly(data) {
            return self.write_from(pages, data);
        }
        let mut bounce = self.take_bounce(data.len())?;
        let result = match bounce.get_mut(..data.len()) {
            Some(b) => {
                b.copy_from_slice(data);
                self.write_from(pages, b)
            }
            None => Err(Error::invalid("internal: bounce buffer too small")),
        };
        self.give_bounce(bounce);
        result
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|source| Error::Io {
            path: self.path.clone(),
            page: None,
            source,
        })
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        self.check_writable()?;
        let mut sorted = pages.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        // Runs of consecutive pages: (first, count).
        let mut runs: Vec<(PageId, u64)> = Vec::new();
        for p in sorted {
            match runs.last_mut() {
                Some((first, count)) if *first + *count == p => *count += 1,
                _ => runs.push((p, 1)),
            }
        }
        let ps = self.page_size as u64;
        for (first, count) in runs {
            if self.punch_hole_works.load(Ordering::Relaxed) {
                match sys::punch_hole(&self.file, first * ps, count * ps) {
                    Ok(()) => continue,
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)
                        ) =>
                    {
                        self.punch_hole_works.store(false, Ordering::Relaxed);
                    }
                    Err(e) => return Err(self.io_error(first, e)),
                }
            }
            self.write_zeros(first, count)?;
        }
        Ok(())
    }

    fn shorten(&self, pages: PageId) -> Result<()> {
        self.trim_tail(pages..pages)
    }

    /// Shortens the file to `pages.start` pages when it is longer (every
    /// page from there on then reads as zeros); a shorter file already
    /// reads the run as zeros.
    fn trim_tail(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        self.check_writable()?;
        let keep = pages.start.saturating_mul(self.page_size as u64);
        let len = self
            .file
            .metadata()
            .map_err(|e| self.io_error(pages.start, e))?
            .len();
        if len > keep {
            self.file
                .set_len(keep)
                .map_err(|e| self.io_error(pages.start, e))?;
        }
        Ok(())
    }

    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        self.check_writable()?;
        if pages.is_empty() || !self.allocate_works.load(Ordering::Relaxed) {
            return Ok(());
        }
        let ps = self.page_size as u64;
        match sys::allocate(&self.file, pages.start * ps, (pages.end - pages.start) * ps) {
            Ok(()) => Ok(()),
            // A file system that cannot allocate ahead: writes keep their
            // own allocation, as without this call.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)) => {
                self.allocate_works.store(false, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => Err(self.io_error(pages.start, e)),
        }
    }

    fn describe(&self) -> String {
        format!(
            "file: path={} direct={} engine={} page_size={} capacity={} pages",
            self.path.display(),
            if self.direct { "on" } else { "off" },
            self.engine(),
            self.page_size,
            self.capacity
        )
    }

    fn path(&self) -> Option<PathBuf> {
        Some(self.path.clone())
    }
}

impl DeviceExt for FileIo {}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod review_tests;
