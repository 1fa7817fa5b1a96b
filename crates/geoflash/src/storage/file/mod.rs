//! `FileDevice`: pages in a real file, buffered or with `O_DIRECT`, batches
//! submitted at once through io_uring where the kernel permits it (pread and
//! pwrite otherwise).
//!
//! The file is sparse: it grows as pages are written, pages never written
//! (or trimmed) read as zeros, and the capacity is a logical limit only.
//! With `O_DIRECT` the buffer address, the length and the file offset of
//! every I/O must be aligned; [`PageDevice`] calls accept any buffer and
//! bounce through internal [`AlignedBuf`]s when the caller's is misaligned,
//! while the raw calls ([`FileDevice::read_batch_raw`],
//! [`FileDevice::write_batch_raw`]) refuse a misaligned buffer with
//! [`Error::MisalignedBuffer`].
//!
//! All `unsafe` code (aligned allocation, io_uring, `fallocate`) lives in the
//! private `sys` submodule.
use std::collections::HashSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::{check_batch, DeviceStats, IoTracker, PageDevice, PageId};
use crate::units::check_page_size;
use crate::{Error, Result};

mod sys;

pub use sys::AlignedBuf;
use sys::{Ring, Span};

/// Memory alignment required of buffers used for `O_DIRECT` I/O.
pub const DIRECT_MEM_ALIGN: usize = 4096;

/// Default logical size of a file device: 2^34 bytes (16 GiB).
pub const DEFAULT_CAPACITY_BYTES: u64 = 1 << 34;

/// Submission slots of the io_uring instance; larger batches go in chunks.
pub const RING_ENTRIES: u32 = 256;

/// Largest single I/O built by merging consecutive pages of a batch.
const MAX_SPAN_BYTES: usize = 1 << 20;

/// Idle io_uring instances kept for reuse. A caller that finds none idle
/// (another thread is using it) creates its own, so concurrent batches do not
/// wait for each other.
const MAX_IDLE_RINGS: usize = 4;

/// Largest bounce buffer kept for reuse (larger ones are freed after use).
const MAX_POOLED_BYTES: usize = 16 << 20;

/// How a [`FileDevice`] issues its I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoEngine {
    /// io_uring if an instance can be created and a probe read works, else psync.
    #[default]
    Auto,
    /// io_uring: a whole batch is submitted at once (an error if unavailable).
    Uring,
    /// `pread`/`pwrite`, one I/O after the other.
    Psync,
}

impl fmt::Display for IoEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoEngine::Auto => "auto",
            IoEngine::Uring => "uring",
            IoEngine::Psync => "psync",
        })
    }
}

impl FromStr for IoEngine {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(IoEngine::Auto),
            "uring" | "io_uring" => Ok(IoEngine::Uring),
            "psync" => Ok(IoEngine::Psync),
            other => Err(Error::invalid(format!(
                "unknown I/O engine {other:?} (use auto, uring or psync)"
            ))),
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
    /// [`DEFAULT_CAPACITY_BYTES`] / page size.
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

/// A page device backed by a file.
#[derive(Debug)]
pub struct FileDevice {
    path: PathBuf,
    file: File,
    page_size: usize,
    capacity: u64,
    direct: bool,
    /// Opened read-only.
    read_only: bool,
    /// True while io_uring is in use; cleared for good if a ring fails.
    uring: AtomicBool,
    /// Idle rings (taken by a batch, returned after it).
    rings: Mutex<Vec<Ring>>,
    bounce: Mutex<Vec<AlignedBuf>>,
    tracker: Mutex<IoTracker>,
    punch_hole_works: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked; the state inside
    // (a ring between batches, buffers, counters) is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which I/O to perform.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
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
        let mut dev = FileDevice {
            path: path.to_path_buf(),
            file,
            page_size,
            capacity,
            direct: opts.direct,
            uring: AtomicBool::new(false),
            rings: Mutex::new(Vec::new()),
            bounce: Mutex::new(Vec::new()),
            tracker: Mutex::new(IoTracker::default()),
            punch_hole_works: AtomicBool::new(true),
            read_only: opts.read_only,
        };
        match opts.engine {
            IoEngine::Psync => {}
            IoEngine::Uring => {
                let ring = dev.probe_uring().map_err(|e| Error::Io {
                    path: path.to_path_buf(),
                    page: None,
                    source: io::Error::new(
                        e.kind(),
                        format!("io_uring requested but unavailable: {e}"),
                    ),
                })?;
                dev.enable_uring(ring);
            }
            IoEngine::Auto => match dev.probe_uring() {
                Ok(ring) => dev.enable_uring(ring),
                Err(e) => {
                    tracing::info!(path = %path.display(), error = %e, "io_uring unavailable, using psync");
                }
            },
        }
        Ok(dev)
    }

    fn enable_uring(&mut self, ring: Ring) {
        self.uring.store(true, Ordering::Relaxed);
        lock(&self.rings).push(ring);
    }

    /// Creates a ring and reads page 0 through it.
    fn probe_uring(&self) -> io::Result<Ring> {
        let mut ring = Ring::new(RING_ENTRIES)?;
        let mut buf = AlignedBuf::new(self.page_size, self.buf_align())
            .map_err(|e| io::Error::other(e.to_string()))?;
        let span = Span {
            page: 0,
            file_offset: 0,
            buf_offset: 0,
            len: self.page_size,
        };
        let mut out = Vec::new();
        ring.read(&self.file, &mut buf, &[span], &mut out)?;
        for r in out {
            r.map_err(|e| io::Error::new(e.kind(), format!("probe read failed: {e}")))?;
        }
        Ok(ring)
    }

    /// The engine actually in use: [`IoEngine::Uring`] or [`IoEngine::Psync`].
    pub fn engine(&self) -> IoEngine {
        if self.uring.load(Ordering::Relaxed) {
            IoEngine::Uring
        } else {
            IoEngine::Psync
        }
    }

    /// True if the file was opened with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Alignment of buffers made by [`FileDevice::alloc_buf`]: 4096 bytes, or
    /// the page size if larger.
    pub fn buf_align(&self) -> usize {
        DIRECT_MEM_ALIGN.max(self.page_size)
    }

    /// A zeroed aligned buffer for `pages` pages, usable with the raw calls.
    pub fn alloc_buf(&self, pages: usize) -> Result<AlignedBuf> {
        let len = pages
            .checked_mul(self.page_size)
            .ok_or_else(|| Error::invalid("buffer too large"))?;
        AlignedBuf::new(len, self.buf_align())
    }

    /// Reads a batch into `buf` without bouncing: in direct mode `buf` must be
    /// aligned to [`DIRECT_MEM_ALIGN`], else [`Error::MisalignedBuffer`].
    /// Counted in the statistics like [`PageDevice::read_batch`].
    pub fn read_batch_raw(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        check_batch(pages, buf.len(), self.page_size, self.capacity)?;
        if self.direct {
            check_direct_alignment(buf.as_ptr() as usize, buf.len(), DIRECT_MEM_ALIGN)?;
        }
        let start = Instant::now();
        self.read_into(pages, buf)?;
        self.record(Dir::Read, pages, start);
        Ok(())
    }

    /// Writes a batch from `data` without bouncing: in direct mode `data`
    /// must be aligned to [`DIRECT_MEM_ALIGN`], else [`Error::MisalignedBuffer`].
    pub fn write_batch_raw(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        check_batch(pages, data.len(), self.page_size, self.capacity)?;
        self.check_writable()?;
        if self.direct {
            check_direct_alignment(data.as_ptr() as usize, data.len(), DIRECT_MEM_ALIGN)?;
        }
        let start = Instant::now();
        self.write_from(pages, data)?;
        self.record(Dir::Write, pages, start);
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

    fn record(&self, dir: Dir, pages: &[PageId], start: Instant) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut t = lock(&self.tracker);
        match dir {
            Dir::Read => t.record_reads(pages, self.page_size, ns),
            Dir::Write => t.record_writes(pages, self.page_size, ns),
        }
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
        let ps = self.page_size;
        let mut spans: Vec<Span> = Vec::new();
        let mut last: Option<(usize, PageId)> = None;
        for i in indices {
            let Some(&p) = pages.get(i) else { continue };
            let extend = matches!(last, Some((li, lp)) if li + 1 == i && lp + 1 == p);
            match spans.last_mut() {
                Some(s) if extend && s.len + ps <= MAX_SPAN_BYTES => s.len += ps,
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
        if let Some(results) =
            self.with_ring(|ring, out| ring.read(&self.file, buf, &spans, out))?
        {
            for (s, r) in spans.iter().zip(results) {
                match r {
                    Ok(n) if n >= s.len => {}
                    // Short read (end of file) or a transient error: finish with pread.
                    Ok(n) => self.pread_span(buf, s, n)?,
                    Err(e) if is_retryable(&e) => self.pread_span(buf, s, 0)?,
                    Err(e) => return Err(self.io_error(s.page, e)),
                }
            }
            return Ok(());
        }
        for s in &spans {
            self.pread_span(buf, s, 0)?;
        }
        Ok(())
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
        if let Some(results) =
            self.with_ring(|ring, out| ring.write(&self.file, data, &spans, out))?
        {
            for (s, r) in spans.iter().zip(results) {
                match r {
                    Ok(n) if n >= s.len => {}
                    Ok(n) => self.pwrite_span(data, s, n)?,
                    Err(e) if is_retryable(&e) => self.pwrite_span(data, s, 0)?,
                    Err(e) => return Err(self.io_error(s.page, e)),
                }
            }
            return Ok(());
        }
        for s in &spans {
            self.pwrite_span(data, s, 0)?;
        }
        Ok(())
    }

    /// Runs `f` on a ring if io_uring is in use; `Ok(None)` means "use psync".
    /// Takes an idle ring or creates one (so concurrent batches run in
    /// parallel). A ring that fails as a whole switches the device to psync
    /// for good (with a warning).
    fn with_ring(
        &self,
        f: impl FnOnce(&mut Ring, &mut Vec<io::Result<usize>>) -> io::Result<()>,
    ) -> Result<Option<Vec<io::Result<usize>>>> {
        if !self.uring.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let idle = lock(&self.rings).pop();
        let mut ring = match idle {
            Some(r) => r,
            None => match Ring::new(RING_ENTRIES) {
                Ok(r) => r,
                Err(e) => {
                    // Out of rings (memory lock limit, ...): this batch uses psync.
                    tracing::debug!(error = %e, "no extra io_uring instance; batch uses psync");
                    return Ok(None);
                }
            },
        };
        let mut out = Vec::new();
        match f(&mut ring, &mut out) {
            Ok(()) => {
                let mut idle = lock(&self.rings);
                if idle.len() < MAX_IDLE_RINGS {
                    idle.push(ring);
                }
                Ok(Some(out))
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "io_uring failed; continuing with psync");
                self.uring.store(false, Ordering::Relaxed);
                lock(&self.rings).clear();
                Ok(None)
            }
        }
    }

    /// Reads span `s` from byte `done` on with pread; zeros beyond the end of file.
    fn pread_span(&self, buf: &mut [u8], s: &Span, mut done: usize) -> Result<()> {
        let Some(region) = buf.get_mut(s.buf_offset..s.buf_offset + s.len) else {
            return Err(Error::invalid("internal: span outside its buffer"));
        };
        while done < s.len {
            let Some(rest) = region.get_mut(done..) else {
                break;
            };
            match self.file.read_at(rest, s.file_offset + done as u64) {
                Ok(0) => {
                    rest.fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) if is_retryable(&e) => {}
                Err(e) => {
                    return Err(self.io_error(s.page + (done / self.page_size) as u64, e));
                }
            }
        }
        Ok(())
    }

    /// Writes span `s` from byte `done` on with pwrite.
    fn pwrite_span(&self, data: &[u8], s: &Span, mut done: usize) -> Result<()> {
        let Some(region) = data.get(s.buf_offset..s.buf_offset + s.len) else {
            return Err(Error::invalid("internal: span outside its buffer"));
        };
        while done < s.len {
            let Some(rest) = region.get(done..) else {
                break;
            };
            match self.file.write_at(rest, s.file_offset + done as u64) {
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::WriteZero, "write returned 0 bytes");
                    return Err(self.io_error(s.page + (done / self.page_size) as u64, e));
                }
                Ok(n) => done += n,
                Err(e) if is_retryable(&e) => {}
                Err(e) => {
                    return Err(self.io_error(s.page + (done / self.page_size) as u64, e));
                }
            }
        }
        Ok(())
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

fn is_retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
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

impl PageDevice for FileDevice {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        check_batch(pages, buf.len(), self.page_size, self.capacity)?;
        let start = Instant::now();
        if self.usable_directly(buf) {
            self.read_into(pages, buf)?;
        } else {
            let mut bounce = self.take_bounce(buf.len())?;
            let result = match bounce.get_mut(..buf.len()) {
                Some(b) => self.read_into(pages, b).map(|()| buf.copy_from_slice(b)),
                None => Err(Error::invalid("internal: bounce buffer too small")),
            };
            self.give_bounce(bounce);
            result?;
        }
        self.record(Dir::Read, pages, start);
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        check_batch(pages, data.len(), self.page_size, self.capacity)?;
        self.check_writable()?;
        let start = Instant::now();
        if self.usable_directly(data) {
            self.write_from(pages, data)?;
        } else {
            let mut bounce = self.take_bounce(data.len())?;
            let result = match bounce.get_mut(..data.len()) {
                Some(b) => {
                    b.copy_from_slice(data);
                    self.write_from(pages, b)
                }
                None => Err(Error::invalid("internal: bounce buffer too small")),
            };
            self.give_bounce(bounce);
            result?;
        }
        self.record(Dir::Write, pages, start);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        let start = Instant::now();
        self.file.sync_data().map_err(|source| Error::Io {
            path: self.path.clone(),
            page: None,
            source,
        })?;
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        lock(&self.tracker).record_sync(ns);
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        check_batch(pages, 0, 0, self.capacity)?;
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
        lock(&self.tracker).record_trim(pages.len());
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        DeviceStats {
            io: lock(&self.tracker).counters(),
            sim: None,
        }
    }

    fn reset_stats(&self) {
        lock(&self.tracker).reset();
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

#[cfg(test)]
mod tests;
