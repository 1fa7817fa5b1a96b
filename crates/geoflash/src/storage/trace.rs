//! I/O traces: record what a [`PageDevice`] is asked to do, and replay it on
//! another device.
//!
//! [`TraceDevice`] wraps any device and records every successful call —
//! read batch, write batch, sync, trim — with its page ids and its batch
//! boundary (one record per call), and optionally the wall-clock time the
//! call took. [`replay`] submits the same calls, batch by batch, to another
//! device: replaying a run's trace on a fresh device of the same model
//! reproduces the run's device counters exactly (the contents written are
//! synthetic; no device's counters depend on the bytes).
//!
//! # File format (version 1, little-endian)
//! ```text
//! header  magic "GFTRACE\0" (8 bytes) | u16 version = 1 | u16 flags (bit 0: timed)
//!         | u32 page size in bytes | u64 capacity in pages of the recorded device
//! records one per call:
//!         u8 op (1 read batch, 2 write batch, 3 sync, 4 trim)
//!         for 1, 2, 4: varint n (pages in the call), then n page ids, each the
//!                      zigzag varint of (page − previous page id in the file),
//!                      the previous id starting at 0 (a sequential run costs
//!                      one byte per page)
//!         if timed:    varint wall-clock nanoseconds of the call
//! end     u8 0xFF | u64 number of records | u32 CRC-32C of every byte before it
//! ```
//! Varints are LEB128 (7 bits per byte, low first, at most 10 bytes). A file
//! without its end record (a run that stopped before [`TraceDevice::finish`])
//! is reported as truncated; every damage is an [`Error::Corrupt`] naming the
//! byte offset, never a panic.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::{DeviceExt, DeviceGeometry, PageDevice, PageId};
use crate::{Error, Result};

/// The first bytes of a trace file.
pub const TRACE_MAGIC: &[u8; 8] = b"GFTRACE\0";
/// The trace format version this build writes and reads.
pub const TRACE_VERSION: u16 = 1;

const OP_READ: u8 = 1;
const OP_WRITE: u8 = 2;
const OP_SYNC: u8 = 3;
const OP_TRIM: u8 = 4;
const OP_END: u8 = 0xFF;
const FLAG_TIMED: u16 = 1;
const HEADER_LEN: usize = 24;

/// One recorded device call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceOp {
    /// A `read_batch` of these pages.
    Read(Vec<PageId>),
    /// A `write_batch` of these pages.
    Write(Vec<PageId>),
    /// A `sync`.
    Sync,
    /// A `trim` of these pages.
    Trim(Vec<PageId>),
}

impl TraceOp {
    fn code(&self) -> u8 {
        match self {
            TraceOp::Read(_) => OP_READ,
            TraceOp::Write(_) => OP_WRITE,
            TraceOp::Sync => OP_SYNC,
            TraceOp::Trim(_) => OP_TRIM,
        }
    }

    fn pages(&self) -> &[PageId] {
        match self {
            TraceOp::Read(p) | TraceOp::Write(p) | TraceOp::Trim(p) => p,
            TraceOp::Sync => &[],
        }
    }
}

/// A decoded trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// Page size of the recorded device, in bytes.
    pub page_size: usize,
    /// Capacity of the recorded device, in pages.
    pub capacity: u64,
    /// The calls, in order.
    pub ops: Vec<TraceOp>,
    /// Wall-clock nanoseconds of each call, when the trace is timed.
    pub times_ns: Option<Vec<u64>>,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes trace records incrementally into any writer.
#[derive(Debug)]
pub struct TraceWriter<W: Write> {
    out: W,
    crc: u32,
    records: u64,
    prev: PageId,
    timed: bool,
    buf: Vec<u8>,
}

impl<W: Write> TraceWriter<W> {
    /// Starts a trace of a device with `page_size`-byte pages and `capacity`
    /// pages; `timed` records each call's wall-clock time.
    pub fn new(out: W, page_size: usize, capacity: u64, timed: bool) -> Result<Self> {
        let page_size = u32::try_from(page_size)
            .map_err(|_| Error::invalid(format!("trace: page size {page_size} too large")))?;
        let mut w = TraceWriter {
            out,
            crc: 0,
            records: 0,
            prev: 0,
            timed,
            buf: Vec::with_capacity(HEADER_LEN),
        };
        w.buf.extend_from_slice(TRACE_MAGIC);
        w.buf.extend_from_slice(&TRACE_VERSION.to_le_bytes());
        let flags = if timed { FLAG_TIMED } else { 0 };
        w.buf.extend_from_slice(&flags.to_le_bytes());
        w.buf.extend_from_slice(&page_size.to_le_bytes());
        w.buf.extend_from_slice(&capacity.to_le_bytes());
        w.emit()?;
        Ok(w)
    }

    fn emit(&mut self) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        self.out.write_all(&self.buf).map_err(stream_error)?;
        self.buf.clear();
        Ok(())
    }

    /// Appends one record (`time_ns` is written only in a timed trace).
    pub fn record(&mut self, op: &TraceOp, time_ns: u64) -> Result<()> {
        self.buf.push(op.code());
        if !matches!(op, TraceOp::Sync) {
            let pages = op.pages();
            put_varint(&mut self.buf, pages.len() as u64);
            for &p in pages {
                put_varint(&mut self.buf, zigzag(p.wrapping_sub(self.prev) as i64));
                self.prev = p;
            }
        }
        if self.timed {
            put_varint(&mut self.buf, time_ns);
        }
        self.records += 1;
        self.emit()
    }

    /// Writes the end record, flushes, and returns the writer.
    pub fn finish(mut self) -> Result<W> {
        self.buf.push(OP_END);
        self.buf.extend_from_slice(&self.records.to_le_bytes());
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        let crc = self.crc;
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&self.buf).map_err(stream_error)?;
        self.out.flush().map_err(stream_error)?;
        Ok(self.out)
    }
}

fn stream_error(source: std::io::Error) -> Error {
    Error::Io {
        path: PathBuf::from("<trace>"),
        page: None,
        source,
    }
}

fn corrupt(offset: usize, msg: impl std::fmt::Display) -> Error {
    Error::corrupt(None, format!("trace: {msg} (at byte {offset})"))
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| {
                corrupt(
                    self.pos,
                    format!("truncated in the {what} (no end record: was the recording finished?)"),
                )
            })?;
        let s = self.buf.get(self.pos..end).unwrap_or(&[]);
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn varint(&mut self, what: &str) -> Result<u64> {
        let start = self.pos;
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let [b] = self.array::<1>(what)?;
            if shift == 63 && b > 1 {
                return Err(corrupt(start, format!("{what}: varint overflows 64 bits")));
            }
            v |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(corrupt(
            start,
            format!("{what}: varint longer than 10 bytes"),
        ))
    }
}

impl Trace {
    /// Decodes a trace file's bytes, checking the header, every record, the
    /// record count and the checksum.
    pub fn decode(bytes: &[u8]) -> Result<Trace> {
        let mut r = Reader { buf: bytes, pos: 0 };
        if bytes.len() < TRACE_MAGIC.len() || r.take(TRACE_MAGIC.len(), "magic")? != TRACE_MAGIC {
            return Err(corrupt(0, "not a geoflash trace (bad magic)"));
        }
        let version = u16::from_le_bytes(r.array("header")?);
        Error::check_version("trace", version, TRACE_VERSION, TRACE_VERSION)?;
        let flags = u16::from_le_bytes(r.array("header")?);
        if flags & !FLAG_TIMED != 0 {
            return Err(corrupt(10, format!("unknown flags {flags:#x}")));
        }
        let timed = flags & FLAG_TIMED != 0;
        let page_size = u32::from_le_bytes(r.array("header")?) as usize;
        crate::units::check_page_size(page_size)
            .map_err(|e| corrupt(12, format!("bad page size: {e}")))?;
        let capacity = u64::from_le_bytes(r.array("header")?);
        let mut ops = Vec::new();
        let mut times = timed.then(Vec::new);
        let mut prev: PageId = 0;
        loop {
            let at = r.pos;
            let [code] = r.array::<1>("record")?;
            let op = match code {
                OP_END => break,
                OP_SYNC => TraceOp::Sync,
                OP_READ | OP_WRITE | OP_TRIM => {
                    let n = r.varint("page count")?;
                    // Every page id takes at least one byte.
                    if n > (bytes.len() - r.pos) as u64 {
                        return Err(corrupt(
                            at,
                            format!(
                                "truncated or damaged: page count {n} exceeds the rest of the file"
                            ),
                        ));
                    }
                    let mut pages = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let d = unzigzag(r.varint("page id")?);
                        let p = prev.wrapping_add(d as u64);
                        if p >= capacity {
                            return Err(corrupt(
                                at,
                                format!(
                                    "page {p} beyond the recorded capacity of {capacity} pages"
                                ),
                            ));
                        }
                        pages.push(p);
                        prev = p;
                    }
                    match code {
                        OP_READ => TraceOp::Read(pages),
                        OP_WRITE => TraceOp::Write(pages),
                        _ => TraceOp::Trim(pages),
                    }
                }
                other => {
                    return Err(corrupt(at, format!("unknown record type {other:#04x}")));
                }
            };
            if let Some(t) = times.as_mut() {
                t.push(r.varint("time")?);
            }
            ops.push(op);
        }
        let count = u64::from_le_bytes(r.array("end record")?);
        let end = r.pos;
        let crc = u32::from_le_bytes(r.array("checksum")?);
        if r.pos != bytes.len() {
            return Err(corrupt(r.pos, "trailing bytes after the end record"));
        }
        if crc32c::crc32c(bytes.get(..end).unwrap_or(&[])) != crc {
            return Err(corrupt(end, "checksum mismatch"));
        }
        if count != ops.len() as u64 {
            return Err(corrupt(
                end,
                format!("end record counts {count} records, {} found", ops.len()),
            ));
        }
        Ok(Trace {
            page_size,
            capacity,
            ops,
            times_ns: times,
        })
    }

    /// Reads and decodes a trace file.
    pub fn read_file(path: &Path) -> Result<Trace> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            page: None,
            source,
        })?;
        Trace::decode(&bytes).map_err(|e| e.in_file(path))
    }

    /// Encodes the trace (the inverse of [`Trace::decode`]).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = TraceWriter::new(
            Vec::new(),
            self.page_size,
            self.capacity,
            self.times_ns.is_some(),
        )?;
        for (i, op) in self.ops.iter().enumerate() {
            let t = self
                .times_ns
                .as_ref()
                .and_then(|t| t.get(i).copied())
                .unwrap_or(0);
            w.record(op, t)?;
        }
        w.finish()
    }
}

/// Where a [`TraceDevice`] writes.
enum Sink {
    File(TraceWriter<BufWriter<File>>, PathBuf),
    Memory(TraceWriter<Vec<u8>>),
}

/// A device wrapper that records every successful call as a trace record
/// (see the module documentation). Failed calls are not recorded. Call
/// [`TraceDevice::finish`] at the end to write the end record: a trace
/// without it reads as truncated.
pub struct TraceDevice<D> {
    inner: D,
    sink: Mutex<Option<Sink>>,
}

impl<D: std::fmt::Debug> std::fmt::Debug for TraceDevice<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceDevice")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<D: PageDevice> TraceDevice<D> {
    /// Wraps `inner`, recording into the file `path` (created or truncated).
    pub fn create(inner: D, path: &Path, timed: bool) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            page: None,
            source,
        };
        let file = File::create(path).map_err(io)?;
        let w = TraceWriter::new(
            BufWriter::new(file),
            inner.page_size(),
            inner.capacity(),
            timed,
        )?;
        Ok(TraceDevice {
            inner,
            sink: Mutex::new(Some(Sink::File(w, path.to_path_buf()))),
        })
    }

    /// Wraps `inner`, recording in memory ([`TraceDevice::finish`] returns the bytes).
    pub fn in_memory(inner: D, timed: bool) -> Result<Self> {
        let w = TraceWriter::new(Vec::new(), inner.page_size(), inner.capacity(), timed)?;
        Ok(TraceDevice {
            inner,
            sink: Mutex::new(Some(Sink::Memory(w))),
        })
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Sink>> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the trace: writes the end record and flushes. Returns the bytes
    /// of an in-memory trace (`None` for a file). Later calls to the device
    /// are no longer recorded; a second `finish` is an error.
    pub fn finish(&self) -> Result<Option<Vec<u8>>> {
        match self.lock().take() {
            Some(Sink::Memory(w)) => Ok(Some(w.finish()?)),
            Some(Sink::File(w, path)) => {
                let out = w.finish().map_err(|e| with_path(e, &path))?;
                let file = out
                    .into_inner()
                    .map_err(|e| with_path(stream_error(e.into_error()), &path))?;
                file.sync_all()
                    .map_err(|e| with_path(stream_error(e), &path))?;
                Ok(None)
            }
            None => Err(Error::invalid("trace: the recording was already finished")),
        }
    }

    fn record(&self, op: TraceOp, start: Instant) -> Result<()> {
        let ns = start.elapsed().as_nanos() as u64;
        match self.lock().as_mut() {
            Some(Sink::Memory(w)) => w.record(&op, ns),
            Some(Sink::File(w, path)) => w.record(&op, ns).map_err(|e| with_path(e, path)),
            None => Ok(()),
        }
    }
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { page, source, .. } => Error::Io {
            path: path.to_path_buf(),
            page,
            source,
        },
        other => other,
    }
}

impl<D: PageDevice> PageDevice for TraceDevice<D> {
    fn geometry(&self) -> DeviceGeometry {
        self.inner.geometry()
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let start = Instant::now();
        self.inner.read_batch(pages, buf)?;
        self.record(TraceOp::Read(pages.to_vec()), start)
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let start = Instant::now();
        self.inner.write_batch(pages, data)?;
        self.record(TraceOp::Write(pages.to_vec()), start)
    }
    fn sync(&self) -> Result<()> {
        let start = Instant::now();
        self.inner.sync()?;
        self.record(TraceOp::Sync, start)
    }
    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let start = Instant::now();
        self.inner.trim(pages)?;
        self.record(TraceOp::Trim(pages.to_vec()), start)
    }
    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        self.inner.reserve(pages)
    }
    fn describe(&self) -> String {
        format!("trace({})", self.inner.describe())
    }

    fn path(&self) -> Option<PathBuf> {
        self.inner.path()
    }
}

impl<D: PageDevice> DeviceExt for TraceDevice<D> {
    super::forward_device_ext!(inner: all);
}

/// What a replay submitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// Records replayed.
    pub records: u64,
    /// Read batches.
    pub read_batches: u64,
    /// Write batches.
    pub write_batches: u64,
    /// Syncs.
    pub syncs: u64,
    /// Trim calls.
    pub trims: u64,
    /// Pages read, written and trimmed.
    pub pages: u64,
}

/// Replays `trace` on `device`, call by call with the same batch boundaries,
/// syncs and trims (written contents are synthetic). The device must have the
/// trace's page size and hold every page id. `progress` is called with the
/// number of records done. Returns what was submitted; read the device's
/// counters with `PageDevice::stats`.
pub fn replay_with_progress(
    trace: &Trace,
    device: &dyn PageDevice,
    progress: &dyn Fn(u64),
) -> Result<ReplaySummary> {
    if device.page_size() != trace.page_size {
        return Err(Error::invalid(format!(
            "trace recorded with {}-byte pages cannot be replayed on a device of {}-byte pages",
            trace.page_size,
            device.page_size()
        )));
    }
    let highest = trace.ops.iter().flat_map(|o| o.pages()).max().copied();
    if let Some(h) = highest.filter(|&h| h >= device.capacity()) {
        return Err(Error::invalid(format!(
            "trace uses page {h} but the device holds only {} pages",
            device.capacity()
        )));
    }
    let page = trace.page_size;
    let widest = trace.ops.iter().map(|o| o.pages().len()).max().unwrap_or(0);
    let mut buf = vec![0u8; widest.saturating_mul(page)];
    let mut s = ReplaySummary::default();
    for (i, op) in trace.ops.iter().enumerate() {
        let n = op.pages().len();
        let part = buf.get_mut(..n * page).unwrap_or(&mut []);
        let at = |e: Error| match e {
            Error::InvalidInput(m) => Error::InvalidInput(format!("trace record {i}: {m}")),
            other => other,
        };
        match op {
            TraceOp::Read(p) => {
                device.read_batch(p, part).map_err(at)?;
                s.read_batches += 1;
            }
            TraceOp::Write(p) => {
                for (k, (chunk, &id)) in part.chunks_exact_mut(page).zip(p).enumerate() {
                    chunk.fill((id as u8) ^ (i as u8) ^ (k as u8));
                }
                device.write_batch(p, part).map_err(at)?;
                s.write_batches += 1;
            }
            TraceOp::Sync => {
                device.sync().map_err(at)?;
                s.syncs += 1;
            }
            TraceOp::Trim(p) => {
                device.trim(p).map_err(at)?;
                s.trims += 1;
            }
        }
        s.pages += n as u64;
        s.records += 1;
        if s.records % 4096 == 0 {
            progress(s.records);
        }
    }
    progress(s.records);
    Ok(s)
}

/// Replays `trace` on `device` (see [`replay_with_progress`]).
#[cfg(test)]
pub fn replay(trace: &Trace, device: &dyn PageDevice) -> Result<ReplaySummary> {
    replay_with_progress(trace, device, &|_| {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::flashsim::FlashSim;
    use crate::storage::DeviceStats;
    use crate::storage::hddsim::HddSim;
    use crate::storage::mem::MemDevice;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A mixed workload: batches of writes and reads, trims and syncs.
    fn workload(d: &dyn PageDevice, seed: u64, n: usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ps = d.page_size();
        let cap = d.capacity().min(2000);
        for _ in 0..n {
            let k = rng.gen_range(1..8usize);
            let pages: Vec<u64> = (0..k).map(|_| rng.gen_range(0..cap)).collect();
            match rng.gen_range(0..10) {
                0..=4 => d.write_batch(&pages, &vec![7u8; k * ps]).unwrap(),
                5..=7 => d.read_batch(&pages, &mut vec![0u8; k * ps]).unwrap(),
                8 => d.trim(&pages).unwrap(),
                _ => d.sync().unwrap(),
            }
        }
    }

    fn record_and_replay(make: &dyn Fn() -> Box<dyn PageDevice>, seed: u64) {
        let traced = TraceDevice::in_memory(make(), true).unwrap();
        workload(&traced, seed, 3000);
        let bytes = traced.finish().unwrap().unwrap();
        let trace = Trace::decode(&bytes).unwrap();
        let fresh = make();
        let summary = replay(&trace, &fresh).unwrap();
        assert_eq!(summary.records, trace.ops.len() as u64);
        let (a, b) = (traced.stats(), fresh.stats());
        // Everything but wall-clock times must agree exactly.
        let strip = |mut s: DeviceStats| {
            s.io.read_time_ns = 0;
            s.io.write_time_ns = 0;
            s.io.sync_time_ns = 0;
            s
        };
        assert_eq!(strip(a), strip(b), "{}", fresh.describe());
        assert!(a.io.pages_written > 0 && a.io.syncs > 0 && a.io.pages_trimmed > 0);
    }

    #[test]
    fn replay_reproduces_counters_on_every_model() {
        // Small flash devices so that GC and (for flashdbsim) wear levelling run.
        let page = "page_size=512&ppb=16&blocks=160&op=0.2&wl_threshold=4";
        record_and_replay(&|| Box::new(FlashSim::from_params(page, 512).unwrap()), 1);
        record_and_replay(
            &|| Box::new(FlashSim::from_params(&format!("{page}&ftl=flashdbsim"), 512).unwrap()),
            2,
        );
        // Host pages larger and smaller than flash pages.
        record_and_replay(&|| Box::new(FlashSim::from_params(page, 1024).unwrap()), 3);
        record_and_replay(
            &|| {
                Box::new(
                    FlashSim::from_params("page_size=2048&ppb=16&blocks=200&op=0.2", 512).unwrap(),
                )
            },
            4,
        );
        record_and_replay(&|| Box::new(MemDevice::new(4096, 5000).unwrap()), 5);
        record_and_replay(
            &|| {
                Box::new(
                    HddSim::new(
                        crate::storage::hddsim::HddSimConfig::from_params("").unwrap(),
                        4096,
                    )
                    .unwrap(),
                )
            },
            6,
        );
    }

    #[test]
    fn the_flash_counters_show_gc_in_the_replayed_run() {
        let make = || {
            FlashSim::from_params("page_size=512&ppb=16&blocks=160&op=0.2&ftl=flashdbsim", 512)
                .unwrap()
        };
        let traced = TraceDevice::in_memory(make(), false).unwrap();
        workload(&traced, 9, 3000);
        let trace = Trace::decode(&traced.finish().unwrap().unwrap()).unwrap();
        let fresh = make();
        replay(&trace, &fresh).unwrap();
        let s = fresh.stats().sim.unwrap();
        assert!(s.nand_erases > 0 && s.gc_runs > 0, "{s:?}");
        assert_eq!(s, traced.stats().sim.unwrap());
    }

    #[test]
    fn file_round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let d = TraceDevice::create(MemDevice::new(4096, 100).unwrap(), &path, false).unwrap();
        d.write_batch(&[1, 2, 3], &vec![1u8; 3 * 4096]).unwrap();
        d.sync().unwrap();
        d.read(2, &mut vec![0u8; 4096]).unwrap();
        d.trim(&[3]).unwrap();
        // A failed call is not recorded.
        assert!(d.write(100, &vec![0u8; 4096]).is_err());
        assert_eq!(d.finish().unwrap(), None);
        assert!(d.finish().is_err());
        let t = Trace::read_file(&path).unwrap();
        assert_eq!(
            t.ops,
            vec![
                TraceOp::Write(vec![1, 2, 3]),
                TraceOp::Sync,
                TraceOp::Read(vec![2]),
                TraceOp::Trim(vec![3])
            ]
        );
        assert_eq!(
            (t.page_size, t.capacity, t.times_ns.is_none()),
            (4096, 100, true)
        );
        // Header 24 + write (1 + 1 + 3) + sync 1 + read (1 + 1 + 1) + trim 3 + end 13.
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            24 + 5 + 1 + 3 + 3 + 13
        );
        // Page size and capacity mismatches are clear errors.
        let e = replay(&t, &MemDevice::new(8192, 100).unwrap()).unwrap_err();
        assert!(e.to_string().contains("4096-byte pages"), "{e}");
        let e = replay(&t, &MemDevice::new(4096, 3).unwrap()).unwrap_err();
        assert!(e.to_string().contains("page 3"), "{e}");
        // A missing file names itself.
        let e = Trace::read_file(&dir.path().join("none.bin")).unwrap_err();
        assert!(e.to_string().contains("none.bin"), "{e}");
    }

    #[test]
    fn damaged_traces_are_clear_errors() {
        let t = Trace {
            page_size: 4096,
            capacity: 1 << 40,
            ops: vec![
                TraceOp::Write(vec![0, 1, 2, 1 << 39]),
                TraceOp::Sync,
                TraceOp::Read(vec![5]),
            ],
            times_ns: Some(vec![10, 20, u64::MAX]),
        };
        let bytes = t.encode().unwrap();
        assert_eq!(Trace::decode(&bytes).unwrap(), t);
        // Every truncation says truncated (or bad magic for the first bytes).
        for n in 0..bytes.len() {
            let e = Trace::decode(&bytes[..n]).unwrap_err().to_string();
            assert!(e.contains("truncated") || e.contains("magic"), "{n}: {e}");
        }
        let mut b = bytes.clone();
        b[0] = b'X';
        assert!(Trace::decode(&b).unwrap_err().to_string().contains("magic"));
        let mut b = bytes.clone();
        b[8] = 9;
        assert!(matches!(
            Trace::decode(&b),
            Err(Error::UnsupportedVersion { found: 9, .. })
        ));
        let mut b = bytes.clone();
        b[HEADER_LEN] = 0x42;
        assert!(Trace::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("unknown record"));
        let mut b = bytes.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(Trace::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("checksum"));
        let mut b = bytes.clone();
        b.push(0);
        assert!(Trace::decode(&b)
            .unwrap_err()
            .to_string()
            .contains("trailing"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn round_trip(ops in prop::collection::vec((0u8..4, prop::collection::vec(0u64..1_000_000, 0..20), any::<u64>()), 0..40),
                      timed in any::<bool>()) {
            let ops: Vec<TraceOp> = ops.into_iter().map(|(k, p, _)| match k {
                0 => TraceOp::Read(p),
                1 => TraceOp::Write(p),
                2 => TraceOp::Trim(p),
                _ => TraceOp::Sync,
            }).collect();
            let times = timed.then(|| (0..ops.len() as u64).map(|i| i * 1_000_003).collect());
            let t = Trace { page_size: 512, capacity: 1_000_000, ops, times_ns: times };
            prop_assert_eq!(Trace::decode(&t.encode().unwrap()).unwrap(), t);
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200),
                                         edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
            let _ = Trace::decode(&bytes);
            let t = Trace { page_size: 512, capacity: 100, ops: vec![TraceOp::Write(vec![1, 2, 3]), TraceOp::Sync], times_ns: None };
            let mut b = t.encode().unwrap();
            for (i, v) in edits {
                let i = i.index(b.len());
                b[i] = v;
            }
            let _ = Trace::decode(&b);
        }
    }
}
