//! The only `unsafe` code of geoflash: aligned buffers for direct I/O, the
//! io_uring submission loop, and `fallocate` for hole punching.
//!
//! Everything here is small and checked before the unsafe step: spans are
//! validated against their buffer before any pointer is handed to the
//! kernel, and the submission loop never returns while the kernel may still
//! touch a buffer.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::fs::File;
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::unix::io::AsRawFd;
use std::ptr::NonNull;

use io_uring::{opcode, types, IoUring};

use crate::storage::PageId;
use crate::{Error, Result};

internal! {
    /// A zeroed buffer whose address is a multiple of its alignment, as
    /// `O_DIRECT` requires. Dereferences to `[u8]`.
    pub struct AlignedBuf {
        ptr: NonNull<u8>,
        len: usize,
        layout: Layout,
        /// Mapped from the kernel rather than taken from the heap.
        mapped: bool,
    }
}

/// Buffers of at least this many bytes, aligned to at most a memory page,
/// are mapped from the kernel: its pages are zero until written, so none
/// is touched (faulted in and cleared a second time) before the device
/// fills it. A cold query's batches of a few hundred pages spent more time
/// zeroing fresh buffers than decoding what was read into them.
const MAPPED_MIN: usize = 64 << 10;

/// The memory page size that mapped buffers are aligned to.
const MAP_ALIGN: usize = 4096;

// SAFETY: `AlignedBuf` owns its allocation exclusively (like `Box<[u8]>`);
// shared references only give `&[u8]`, so sending or sharing it across
// threads is as safe as for `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: see `Send` above; `&AlignedBuf` only permits reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> Result<Self> {
        if !align.is_power_of_two() {
            return Err(Error::invalid(format!(
                "buffer alignment {align} is not a power of two"
            )));
        }
        // Never allocate zero bytes (undefined for `alloc_zeroed`).
        let size = len.max(1);
        let layout = Layout::from_size_align(size, align).map_err(|_| {
            Error::invalid(format!(
                "aligned buffer of {len} bytes (alignment {align}) is too large"
            ))
        })?;
        if size >= MAPPED_MIN && align <= MAP_ALIGN {
            if let Some(ptr) = map_zeroed(size) {
                return Ok(AlignedBuf {
                    ptr,
                    len,
                    layout,
                    mapped: true,
                });
            }
        }
        // SAFETY: `layout` has a non-zero size (at least 1 byte).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Ok(AlignedBuf {
            ptr,
            len,
            layout,
            mapped: false,
        })
    }

    /// The alignment of the buffer's address in bytes.
    pub fn align(&self) -> usize {
        self.layout.align()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to an initialised (zeroed) allocation of at
        // least `len` bytes that this value owns for its whole lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// `size` bytes of fresh anonymous memory (zero, page-aligned), or `None`
/// if the kernel refuses the mapping (the caller takes heap memory then).
fn map_zeroed(size: usize) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address the kernel picks
    // touches no existing memory; the result is checked before use.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(raw.cast::<u8>())
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: `ptr` is a mapping of `layout.size()` bytes made by
            // `map_zeroed` and unmapped only here. An unmap that fails
            // leaves the memory mapped: a leak, not unsoundness.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.layout.size()) };
            return;
        }
        // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly `layout`
        // and is freed only here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.layout.align())
            .finish()
    }
}

/// One contiguous I/O: `len` bytes at `file_offset` in the file and
/// `buf_offset` in the caller's buffer (for a streamed read,
/// [`Ring::read_each`], only the span's position in its batch: the bytes
/// go where the circular buffer has room); `page` is its first page (for
/// errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub page: PageId,
    pub file_offset: u64,
    pub buf_offset: usize,
    pub len: usize,
}

/// An io_uring instance used for batched page I/O.
pub(crate) struct Ring {
    ring: IoUring,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("entries", &self.ring.params().sq_entries())
            .finish()
    }
}

/// Errors of `io_uring_enter` that only mean "try again".
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}

impl Ring {
    /// Creates a ring with `entries` submission slots.
    pub fn new(entries: u32) -> io::Result<Ring> {
        #[cfg(test)]
        if tests_hook::uring_disabled() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring disabled by a test",
            ));
        }
        Ok(Ring {
            ring: IoUring::new(entries)?,
        })
    }

    /// Reads every span into `buf`. `out[i]` receives the byte count (or
    /// error) of span `i`. An `Err` return means the ring itself failed
    /// (nothing is in flight then) and should no longer be used.
    pub fn read(
        &mut self,
        file: &File,
        buf: &mut [u8],
        spans: &[Span],
        out: &mut Vec<io::Result<usize>>,
    ) -> io::Result<()> {
        check_spans(buf.len(), spans)?;
        self.run(file, buf.as_mut_ptr(), spans, false, out)
    }

    /// Writes every span from `buf`; see [`Ring::read`].
    pub fn write(
        &mut self,
        file: &File,
        buf: &[u8],
        spans: &[Span],
        out: &mut Vec<io::Result<usize>>,
    ) -> io::Result<()> {
        check_spans(buf.len(), spans)?;
        // The pointer is only read by the kernel for a write.
        self.run(file, buf.as_ptr().cast_mut(), spans, true, out)
    }

    /// Submits the spans in chunks of at most the ring's size; waits for all
    /// completions of a chunk before the next. Spans were checked against
    /// the buffer by the caller.
    fn run(
        &mut self,
        file: &File,
        base: *mut u8,
        spans: &[Span],
        write: bool,
        out: &mut Vec<io::Result<usize>>,
    ) -> io::Result<()> {
        out.clear();
        out.resize_with(spans.len(), || Ok(0));
        let fd = types::Fd(file.as_raw_fd());
        let chunk = (self.ring.params().sq_entries() as usize).max(1);
        for (c, group) in spans.chunks(chunk).enumerate() {
            let first = c * chunk;
            for (i, s) in group.iter().enumerate() {
                // `check_spans` guarantees `buf_offset + len <= buf.len()`
                // and `len <= u32::MAX`.
                let len = s.len as u32;
                // SAFETY: `buf_offset` is within the buffer (checked), so the
                // resulting pointer stays inside the same allocation.
                let ptr = unsafe { base.add(s.buf_offset) };
                let entry = if write {
                    opcode::Write::new(fd, ptr.cast_const(), len)
                        .offset(s.file_offset)
                        .build()
                } else {
                    opcode::Read::new(fd, ptr, len)
                        .offset(s.file_offset)
                        .build()
                };
                let entry = entry.user_data((first + i) as u64);
                // SAFETY: the entry points at `len` bytes inside the caller's
                // buffer, which stays borrowed (and alive) until this
                // function returns, and this function does not return while
                // any submitted entry is still in flight (see the wait loop
                // below). The fd belongs to `file`, borrowed for as long.
                let pushed = unsafe { self.ring.submission().push(&entry) };
                if pushed.is_err() {
                    // Cannot happen: the queue is empty at the start of each
                    // chunk and a chunk is at most the queue's size.
                    return Err(io::Error::other("io_uring submission queue full"));
                }
            }
            self.wait_all(group.len(), out)?;
        }
        Ok(())
    }

    /// Submits what is queued and collects `count` completions into `out`.
    fn wait_all(&mut self, count: usize, out: &mut [io::Result<usize>]) -> io::Result<()> {
        let mut done = 0usize;
        while done < count {
            self.enter(count - done, count - done)?;
            for (idx, r) in self.completed() {
                if let Some(slot) = out.get_mut(idx) {
                    *slot = r;
                }
                done += 1;
            }
        }
        Ok(())
    }

    /// Reads every span with up to the ring's size in flight, and calls
    /// `done(i, result, bytes)` for span `i` as soon as its read completes
    /// (in the order the reads complete) with the span's bytes (the kernel
    /// no longer touches them; what it did not fill is as it was). A span
    /// is submitted as another completes, so the device keeps its queue
    /// full to the end of the batch.
    ///
    /// `buf` is used as a circular buffer: each span is read into the next
    /// free region of it (wrapping to its start when the rest is too short)
    /// and the region is free again once `done` returns, so a batch of any
    /// size streams through a buffer of a few hundred pages, and a process
    /// faults in no more of it than that. The spans' own `buf_offset` is
    /// not used (the caller maps span indexes to its positions); each span
    /// must fit in `buf`.
    ///
    /// After `done` returns an error nothing more is submitted; the reads
    /// in flight are waited for and not handed on, and the error is
    /// returned inside `Ok`. An outer `Err` means the ring itself failed
    /// (nothing is in flight then; the spans already handed on are marked
    /// in `handed`) and should no longer be used.
    pub fn read_each<E>(
        &mut self,
        file: &File,
        buf: &mut [u8],
        spans: &[Span],
        handed: &mut [bool],
        mut done: impl FnMut(usize, io::Result<usize>, &mut [u8]) -> std::result::Result<(), E>,
    ) -> io::Result<std::result::Result<(), E>> {
        let cap = buf.len();
        if let Some(s) = spans.iter().find(|s| s.len > cap || u32::try_from(s.len).is_err()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("I/O span {s:?} larger than a stream buffer of {cap} bytes"),
            ));
        }
        if handed.len() != spans.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "one handed flag per span",
            ));
        }
        let base = buf.as_mut_ptr();
        let fd = types::Fd(file.as_raw_fd());
        let depth = (self.ring.params().sq_entries() as usize).max(1);
        let mut place = Circular::new(cap, spans.len());
        let (mut next, mut in_flight) = (0usize, 0usize);
        let mut failed: Option<E> = None;
        // A panic of `done` stops the batch like an error; it is resumed
        // once no read is in flight (unwinding at once would free the
        // buffer under the kernel's writes).
        let mut panicked: Option<Box<dyn std::any::Any + Send>> = None;
        loop {
            let stopped = failed.is_some() || panicked.is_some();
            if in_flight == 0 && (stopped || next >= spans.len()) {
                break;
            }
            while !stopped && next < spans.len() && in_flight < depth {
                let Some(s) = spans.get(next) else { break };
                // No room until older spans are handed over (then some are
                // in flight: with none, the whole buffer is free).
                let Some(at) = place.reserve(next, s.len) else { break };
                // SAFETY: `reserve` gave `s.len` bytes at `at` inside the
                // buffer (`at + s.len <= cap`), disjoint from every region
                // still reserved (those of the reads in flight and of the
                // span being handed over), so the pointer stays in the same
                // allocation and no two reads in flight share a byte. The
                // buffer is borrowed until this function returns, which it
                // does not while any read is in flight (the loop waits for
                // all of them, a panic of `done` is held until then, and a
                // ring failure with reads in flight aborts in `enter`). The
                // fd belongs to `file`, borrowed as long. `in_flight` counts
                // the entries queued and those in the kernel, at most
                // `depth` (the submission queue's size), so the push fits;
                // the completion queue holds twice as many.
                let entry = opcode::Read::new(fd, unsafe { base.add(at) }, s.len as u32)
                    .offset(s.file_offset)
                    .build()
                    .user_data(next as u64);
                // SAFETY: as above.
                if unsafe { self.ring.submission().push(&entry) }.is_err() {
                    return Err(io::Error::other("io_uring submission queue full"));
                }
                next += 1;
                in_flight += 1;
            }
            if let Err(e) = self.enter(1, in_flight) {
                // Nothing is in the kernel (`enter`): the batch's own
                // failure, if any, comes first.
                if let Some(p) = panicked {
                    std::panic::resume_unwind(p);
                }
                return match failed {
                    Some(f) => Ok(Err(f)),
                    None => Err(e),
                };
            }
            for (idx, r) in self.completed() {
                in_flight = in_flight.saturating_sub(1);
                let (Some(s), Some(at)) = (spans.get(idx), place.at(idx)) else { continue };
                if failed.is_none() && panicked.is_none() {
                    // SAFETY: span `idx`'s region (`at .. at + len`, inside
                    // the buffer) is reserved until `release` below and no
                    // other reserved region overlaps it; its read has
                    // completed, so the kernel no longer writes it, and no
                    // other slice of it exists (each span completes once).
                    let bytes = unsafe { std::slice::from_raw_parts_mut(base.add(at), s.len) };
                    if let Some(h) = handed.get_mut(idx) {
                        *h = true;
                    }
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| done(idx, r, bytes))) {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => failed = Some(e),
                        Err(p) => panicked = Some(p),
                    }
                }
                place.release(idx);
            }
        }
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
        Ok(failed.map_or(Ok(()), Err))
    }

    /// Submits what is queued and waits for `want` completions, with
    /// `in_flight` requests queued or in the kernel. A transient failure
    /// returns to let the caller collect what completed. Any other failure
    /// with nothing in flight is returned (the caller drops the ring); with
    /// requests in flight it aborts the process, since returning would let
    /// the kernel write into freed memory.
    fn enter(&mut self, want: usize, in_flight: usize) -> io::Result<()> {
        let Err(e) = self.ring.submit_and_wait(want) else {
            return Ok(());
        };
        if is_transient(&e) {
            return Ok(());
        }
        let unsubmitted = self.ring.submission().len();
        let in_kernel = in_flight - unsubmitted.min(in_flight);
        if in_kernel == 0 {
            // Nothing reached the kernel: no buffer is in use; the caller
            // drops this ring (with its unsubmitted entries) and never uses
            // it again.
            return Err(e);
        }
        // This needs a kernel failure that io_uring_enter does not document.
        tracing::error!(error = %e, in_flight = in_kernel, "io_uring failed with I/O in flight; aborting");
        std::process::abort();
    }

    /// The completions waiting in the ring: each request's index (its
    /// `user_data`) and its byte count or error.
    fn completed(&mut self) -> Vec<(usize, io::Result<usize>)> {
        self.ring
            .completion()
            .map(|cqe| {
                let res = cqe.result();
                let r = if res < 0 {
                    Err(io::Error::from_raw_os_error(-res))
                } else {
                    Ok(res as usize)
                };
                (cqe.user_data() as usize, r)
            })
            .collect()
    }
}

/// Checks that the spans lie in their buffer in increasing order, none
/// overlapping the next.
/// The regions of a circular buffer of `cap` bytes given to the spans of
/// a streamed read ([`Ring::read_each`]), in the order they are submitted:
/// span `i` holds bytes `start[i] .. start[i] + len` of an ever-growing
/// counter, at offset `start[i] % cap` of the buffer (a region never
/// wraps: one that would is moved to the buffer's start). The spans still
/// reserved lie between the oldest of them and `head`, never more than
/// `cap` apart, so their bytes are disjoint. A span reserved when none is
/// goes to the buffer's start.
struct Circular {
    cap: u64,
    /// Counter position of each span submitted so far.
    start: Vec<u64>,
    /// Whether each submitted span was released (handed over).
    released: Vec<bool>,
    /// The oldest span not released (`start.len()` when none is).
    oldest: usize,
    /// The next free counter position.
    head: u64,
}

impl Circular {
    fn new(cap: usize, spans: usize) -> Circular {
        Circular {
            cap: cap as u64,
            start: Vec::with_capacity(spans),
            released: Vec::with_capacity(spans),
            oldest: 0,
            head: 0,
        }
    }

    /// Reserves `len` bytes for span `i` (the next span: spans are reserved
    /// in order) and returns their offset in the buffer, or `None` while the
    /// spans not released leave no room.
    fn reserve(&mut self, i: usize, len: usize) -> Option<usize> {
        debug_assert_eq!(i, self.start.len(), "spans are reserved in order");
        let (len, cap) = (len as u64, self.cap);
        let at = self.head % cap;
        // With nothing reserved the buffer starts over at its beginning:
        // reads that complete as soon as they are submitted (pages in the
        // OS page cache) then reuse its first pages instead of walking
        // through all of it, fresh memory for a new process to fault in.
        let empty = self.oldest == self.start.len();
        let begin = if (empty && at > 0) || at + len > cap {
            self.head + (cap - at)
        } else {
            self.head
        };
        let first = self.start.get(self.oldest).copied().unwrap_or(begin);
        if begin + len - first > cap {
            return None;
        }
        // Below `cap`, itself a buffer length: the conversion cannot fail,
        // and nothing is reserved if it did.
        let at = usize::try_from(begin % cap).ok()?;
        self.start.push(begin);
        self.released.push(false);
        self.head = begin + len;
        Some(at)
    }

    /// Where span `i`'s bytes are in the buffer, if it was reserved.
    fn at(&self, i: usize) -> Option<usize> {
        self.start.get(i).and_then(|&b| usize::try_from(b % self.cap).ok())
    }

    /// Frees span `i`'s region (with those of the older spans, once all
    /// of them are released).
    fn release(&mut self, i: usize) {
        if let Some(r) = self.released.get_mut(i) {
            *r = true;
        }
        while self.released.get(self.oldest).copied().unwrap_or(false) {
            self.oldest += 1;
        }
    }
}

/// Checks that every span lies inside a buffer of `buf_len` bytes and fits
/// one io_uring request.
fn check_spans(buf_len: usize, spans: &[Span]) -> io::Result<()> {
    for s in spans {
        let inside = matches!(s.buf_offset.checked_add(s.len), Some(end) if end <= buf_len);
        if !inside || u32::try_from(s.len).is_err() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("I/O span {s:?} outside a buffer of {buf_len} bytes"),
            ));
        }
    }
    Ok(())
}

/// Deallocates the byte range `offset..offset+len` of `file` (the file size
/// is kept); it reads as zeros afterwards.
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(
        file,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        offset,
        len,
    )
}

/// Allocates the blocks of the byte range `offset..offset+len` of `file`
/// without changing its size or contents (`FALLOC_FL_KEEP_SIZE`): writes
/// there need no new space afterwards.
pub(crate) fn allocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    fallocate(file, libc::FALLOC_FL_KEEP_SIZE, offset, len)
}

/// `fallocate(2)` with `mode` on the byte range `offset..offset+len`,
/// retried when interrupted.
fn fallocate(file: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let off = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
    loop {
        // SAFETY: `fallocate` takes plain integers and a valid open fd owned
        // by `file`; it touches no memory of this process.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), mode, off, len) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests_hook {
    use std::cell::Cell;

    thread_local! {
        static URING_DISABLED: Cell<bool> = const { Cell::new(false) };
    }

    /// Makes `Ring::new` fail on this thread (to test the fallback).
    pub fn set_uring_disabled(v: bool) {
        URING_DISABLED.with(|c| c.set(v));
    }

    pub fn uring_disabled() -> bool {
        URING_DISABLED.with(|c| c.get())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// The circular buffer of a streamed read against the regions it
        /// gave out: a reserved region lies inside the buffer, overlaps no
        /// region still reserved, and is refused only while some region is
        /// reserved (an empty buffer takes any span that fits it, at its start).
        #[test]
        fn circular_regions_never_overlap_and_an_empty_buffer_takes_any_span(
            cap_pages in 1usize..40,
            spans in prop::collection::vec((1usize..12, any::<bool>(), 0usize..4), 1..200),
        ) {
            let cap = cap_pages * 512;
            let mut place = Circular::new(cap, spans.len());
            let mut live: Vec<(usize, usize, usize)> = Vec::new(); // (span, at, len)
            let mut next = 0;
            for (pages, release_oldest, releases) in spans {
                let len = pages.min(cap_pages) * 512;
                // Release some live regions, the oldest or the newest first.
                for _ in 0..releases.min(live.len()) {
                    let k = if release_oldest { 0 } else { live.len() - 1 };
                    let (i, _, _) = live.remove(k);
                    place.release(i);
                }
                match place.reserve(next, len) {
                    Some(at) => {
                        prop_assert!(at + len <= cap, "region {at}+{len} outside {cap}");
                        prop_assert!(!live.is_empty() || at == 0, "an empty buffer did not start over: {at}");
                        for &(j, b, l) in &live {
                            prop_assert!(at + len <= b || b + l <= at, "span {next} at {at} overlaps span {j} at {b}");
                        }
                        prop_assert_eq!(place.at(next), Some(at));
                        live.push((next, at, len));
                        next += 1;
                    }
                    None => prop_assert!(!live.is_empty(), "an empty buffer refused {len} bytes"),
                }
            }
        }
    }

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        let sizes = [(0, 4096), (1, 4096), (8192, 4096), (65536, 65536), (MAPPED_MIN, 4096), (3 << 20, 512)];
        for (len, align) in sizes {
            let b = AlignedBuf::new(len, align).unwrap();
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % align, 0);
            assert!(b.iter().all(|&x| x == 0));
            assert_eq!(b.align(), align);
            assert_eq!(b.mapped, len >= MAPPED_MIN && align <= MAP_ALIGN);
            // Written end to end and read back (a mapping is writable).
            let mut b = b;
            b.fill(0xa5);
            assert!(b.iter().all(|&x| x == 0xa5));
        }
        assert!(AlignedBuf::new(16, 3000).is_err());
    }

    #[test]
    fn spans_outside_the_buffer_are_rejected() {
        let s = Span {
            page: 0,
            file_offset: 0,
            buf_offset: 4096,
            len: 4096,
        };
        assert!(check_spans(8192, &[s]).is_ok());
        assert!(check_spans(8191, &[s]).is_err());
        let s2 = Span {
            buf_offset: usize::MAX,
            ..s
        };
        assert!(check_spans(8192, &[s2]).is_err());
    }
}
