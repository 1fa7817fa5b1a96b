//! The I/O engine of a [`FileDevice`](super::FileDevice): how a batch of
//! spans reaches the kernel, apart from what the spans are (the device's
//! file, layout, `O_DIRECT` and bounce buffers).
//!
//! With io_uring a batch is submitted at once through a ring taken from a
//! small pool (a caller that finds none idle creates its own, so concurrent
//! batches do not wait for each other); short transfers and transient errors
//! are finished with `pread`/`pwrite`. A ring that fails as a whole switches
//! the engine to psync for good. With psync every span is one `pread` or
//! `pwrite` loop, one after the other.
use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::sys::{Ring, Span};
use super::AlignedBuf;
use crate::storage::PageId;
use crate::{Error, Result};

/// Submission slots of the io_uring instance; larger batches go in chunks.
pub const RING_ENTRIES: u32 = 256;

/// Idle io_uring instances kept for reuse. A caller that finds none idle
/// (another thread is using it) creates its own, so concurrent batches do not
/// wait for each other.
const MAX_IDLE_RINGS: usize = 4;

/// How a `FileDevice` issues its I/O.
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

/// Turns an OS error at a page into the device's error (path, `O_DIRECT` hint).
pub(super) type OsError<'a> = &'a dyn Fn(PageId, io::Error) -> Error;

/// The running engine of one file: psync, or io_uring with its pool of rings.
#[derive(Debug)]
pub(super) struct Engine {
    /// The file's path, for log messages.
    path: PathBuf,
    page_size: usize,
    /// True while io_uring is in use; cleared for good if a ring fails.
    uring: AtomicBool,
    /// Idle rings (taken by a batch, returned after it).
    rings: Mutex<Vec<Ring>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked; a ring between
    // batches is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    /// An engine that uses `pread`/`pwrite` for the file at `path`.
    pub(super) fn psync(path: &Path, page_size: usize) -> Engine {
        Engine {
            path: path.to_path_buf(),
            page_size,
            uring: AtomicBool::new(false),
            rings: Mutex::new(Vec::new()),
        }
    }

    /// An io_uring engine for `file`: creates a ring and reads its first
    /// page through it into `probe` (an error if either fails).
    pub(super) fn uring(
        file: &File,
        path: &Path,
        page_size: usize,
        probe: &mut AlignedBuf,
    ) -> io::Result<Engine> {
        let mut ring = Ring::new(RING_ENTRIES)?;
        let span = Span {
            page: 0,
            file_offset: 0,
            buf_offset: 0,
            len: page_size,
        };
        let mut out = Vec::new();
        ring.read(file, probe, &[span], &mut out)?;
        for r in out {
            r.map_err(|e| io::Error::new(e.kind(), format!("probe read failed: {e}")))?;
        }
        let engine = Engine::psync(path, page_size);
        engine.uring.store(true, Ordering::Relaxed);
        lock(&engine.rings).push(ring);
        Ok(engine)
    }

    /// The engine in use now: [`IoEngine::Uring`] or [`IoEngine::Psync`].
    pub(super) fn kind(&self) -> IoEngine {
        if self.uring.load(Ordering::Relaxed) {
            IoEngine::Uring
        } else {
            IoEngine::Psync
        }
    }

    /// Reads every span of `file` into `buf`; bytes beyond the end of the
    /// file read as zeros.
    pub(super) fn read(
        &self,
        file: &File,
        buf: &mut [u8],
        spans: &[Span],
        os_error: OsError<'_>,
    ) -> Result<()> {
        let results = self.with_ring(|ring| {
            let mut out = Vec::new();
            ring.read(file, buf, spans, &mut out).map(|()| out)
        });
        complete(spans, results, os_error, |s, done| {
            self.pread_span(file, buf, s, done, os_error)
        })
    }

    /// Reads every span of `file` and calls `each(span, bytes)` for each as
    /// soon as its bytes are read (with io_uring in the order the reads
    /// complete, the rest still in flight; with psync one span after the
    /// other), `buf` serving as a circular buffer that each span must fit
    /// in (see [`Ring::read_each`]: the spans' `buf_offset` is not used).
    /// The first error, of a read or of `each`, is returned and no span is
    /// handed on after it.
    pub(super) fn read_each(
        &self,
        file: &File,
        buf: &mut [u8],
        spans: &[Span],
        os_error: OsError<'_>,
        each: &mut dyn FnMut(&Span, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut handed = vec![false; spans.len()];
        let streamed = self.with_ring(|ring| {
            ring.read_each(file, buf, spans, &mut handed, |i, r, bytes| {
                let Some(s) = spans.get(i) else {
                    return Err(Error::invalid("internal: a completion of no span"));
                };
                match r {
                    Ok(n) if n >= s.len => {}
                    Ok(n) => self.pread_region(file, bytes, s, n, os_error)?,
                    Err(e) if is_retryable(&e) => self.pread_region(file, bytes, s, 0, os_error)?,
                    Err(e) => return Err(os_error(s.page, e)),
                }
                each(s, bytes)
            })
        });
        if let Some(result) = streamed {
            return result;
        }
        // psync, or a ring that failed before its first read: the spans not
        // handed on yet, one after the other.
        for (s, _) in spans.iter().zip(&handed).filter(|(_, &h)| !h) {
            let Some(bytes) = buf.get_mut(..s.len) else {
                return Err(Error::invalid("internal: span larger than its stream buffer"));
            };
            self.pread_region(file, bytes, s, 0, os_error)?;
            each(s, bytes)?;
        }
        Ok(())
    }

    /// Writes every span of `data` to `file`.
    pub(super) fn write(
        &self,
        file: &File,
        data: &[u8],
        spans: &[Span],
        os_error: OsError<'_>,
    ) -> Result<()> {
        let results = self.with_ring(|ring| {
            let mut out = Vec::new();
            ring.write(file, data, spans, &mut out).map(|()| out)
        });
        complete(spans, results, os_error, |s, done| {
            self.pwrite_span(file, data, s, done, os_error)
        })
    }

    /// Runs `f` on a ring if io_uring is in use; `None` means "use psync".
    /// Takes an idle ring or creates one (so concurrent batches run in
    /// parallel). A ring that fails as a whole switches the engine to psync
    /// for good (with a warning).
    fn with_ring<T>(&self, f: impl FnOnce(&mut Ring) -> io::Result<T>) -> Option<T> {
        if !self.uring.load(Ordering::Relaxed) {
            return None;
        }
        let idle = lock(&self.rings).pop();
        let mut ring = match idle {
            Some(r) => r,
            None => match Ring::new(RING_ENTRIES) {
                Ok(r) => r,
                Err(e) => {
                    // Out of rings (memory lock limit, ...): this batch uses psync.
                    tracing::debug!(error = %e, "no extra io_uring instance; batch uses psync");
                    return None;
                }
            },
        };
        match f(&mut ring) {
            Ok(out) => {
                let mut idle = lock(&self.rings);
                if idle.len() < MAX_IDLE_RINGS {
                    idle.push(ring);
                }
                Some(out)
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "io_uring failed; continuing with psync");
                self.uring.store(false, Ordering::Relaxed);
                lock(&self.rings).clear();
                None
            }
        }
    }

    /// Reads span `s` of `buf` from byte `done` on with pread; zeros beyond the end of file.
    fn pread_span(
        &self,
        file: &File,
        buf: &mut [u8],
        s: &Span,
        done: usize,
        os_error: OsError<'_>,
    ) -> Result<()> {
        let Some(region) = buf.get_mut(s.buf_offset..s.buf_offset + s.len) else {
            return Err(Error::invalid("internal: span outside its buffer"));
        };
        self.pread_region(file, region, s, done, os_error)
    }

    /// Reads span `s` into `region` (its `s.len` bytes) from byte `done` on
    /// with pread; zeros beyond the end of file.
    fn pread_region(
        &self,
        file: &File,
        region: &mut [u8],
        s: &Span,
        mut done: usize,
        os_error: OsError<'_>,
    ) -> Result<()> {
        while done < s.len {
            let Some(rest) = region.get_mut(done..) else {
                break;
            };
            match file.read_at(rest, s.file_offset + done as u64) {
                Ok(0) => {
                    rest.fill(0);
                    break;
                }
                Ok(n) => done += n,
                Err(e) if is_retryable(&e) => {}
                Err(e) => return Err(os_error(self.page_at(s, done), e)),
            }
        }
        Ok(())
    }

    /// Writes span `s` from byte `done` on with pwrite.
    fn pwrite_span(
        &self,
        file: &File,
        data: &[u8],
        s: &Span,
        mut done: usize,
        os_error: OsError<'_>,
    ) -> Result<()> {
        let Some(region) = data.get(s.buf_offset..s.buf_offset + s.len) else {
            return Err(Error::invalid("internal: span outside its buffer"));
        };
        while done < s.len {
            let Some(rest) = region.get(done..) else {
                break;
            };
            match file.write_at(rest, s.file_offset + done as u64) {
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::WriteZero, "write returned 0 bytes");
                    return Err(os_error(self.page_at(s, done), e));
                }
                Ok(n) => done += n,
                Err(e) if is_retryable(&e) => {}
                Err(e) => return Err(os_error(self.page_at(s, done), e)),
            }
        }
        Ok(())
    }

    /// The page of span `s` that byte `done` of it belongs to.
    fn page_at(&self, s: &Span, done: usize) -> PageId {
        s.page + (done / self.page_size) as u64
    }
}

/// Completes the transfer of every span: with `finish(span, bytes already
/// done)` (pread or pwrite) where the ring's `results` left it short (end
/// of file) or failed transiently, and for every span when no ring ran
/// (`None`). Any other error of the ring is the batch's.
fn complete(
    spans: &[Span],
    results: Option<Vec<io::Result<usize>>>,
    os_error: OsError<'_>,
    mut finish: impl FnMut(&Span, usize) -> Result<()>,
) -> Result<()> {
    let Some(results) = results else {
        return spans.iter().try_for_each(|s| finish(s, 0));
    };
    for (s, r) in spans.iter().zip(results) {
        match r {
            Ok(n) if n >= s.len => {}
            Ok(n) => finish(s, n)?,
            Err(e) if is_retryable(&e) => finish(s, 0)?,
            Err(e) => return Err(os_error(s.page, e)),
        }
    }
    Ok(())
}

fn is_retryable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}
