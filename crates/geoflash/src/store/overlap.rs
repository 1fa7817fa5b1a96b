//! Reading a large batch of node pages with its decoding overlapped.
//!
//! A store that reads a batch of pages and then decodes them leaves the
//! device idle while it decodes and checksums, and itself idle while the
//! device reads: on a cold 100 M-object index the decoding of a query's
//! 773 pages took 3 of its 11 ms after 7.5 ms of device reads. Fevgas'
//! thesis makes the point for SSDs: they are fast only with reads in
//! flight. [`read_decoded`] keeps them in flight while it decodes.
use std::sync::mpsc;

use crate::metrics::{stopwatch_cpu_ns, Clock, CpuClockOff, Phase, PhaseTimes};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

/// Pages per device batch of an overlapped read: the queue depth at which
/// `geoflash devbench` measures an SSD's random-read rate.
const OVERLAP_CHUNK: usize = 64;

/// Batches of at least this many pages are overlapped; smaller ones are
/// read as one device batch (a thread costs tens of microseconds).
const OVERLAP_MIN: usize = 2 * OVERLAP_CHUNK;

/// Device batches read ahead of the decoding (each [`OVERLAP_CHUNK`] pages).
const CHUNKS_IN_FLIGHT: usize = 2;

/// Whether a batch of `pages` pages of `device` is read overlapped: a
/// large batch on a real device. A simulated device's clock would see
/// other batches than the papers' and models no CPU, and a device in
/// memory has no reads to wait for.
fn overlaps(device: &dyn PageDevice, pages: usize) -> bool {
    pages >= OVERLAP_MIN && device.sim_clock_ns().is_none() && device.path().is_some()
}

/// [`read_decoded`] measured as one [`Phase::Read`]: its wall-clock,
/// CPU (a helper thread's included) and simulated time, for the caller to
/// add to its counters.
pub(crate) fn read_decoded_timed<T>(
    device: &dyn PageDevice,
    page_size: usize,
    ids: &[PageId],
    decode: impl FnMut(&[u8], PageId) -> Result<T>,
) -> Result<(Vec<T>, PhaseTimes)> {
    let (read, mut times) = PhaseTimes::measure(Phase::Read, device, || {
        read_decoded(device, page_size, ids, decode)
    });
    let (decoded, helper_cpu) = read?;
    times.add_ns(Clock::Cpu, Phase::Read, helper_cpu);
    Ok((decoded, times))
}

/// Reads the pages `ids` of `device` (`page_size` bytes each) and decodes
/// each with `decode`, in order. Returns the decoded pages and the CPU
/// time (ns) a helper thread spent reading, which the caller adds to its
/// read phase (0 when no helper ran, or inside a [`CpuClockOff`] scope).
///
/// A large batch on a real device ([`overlaps`]) is read by a helper
/// thread in device batches of [`OVERLAP_CHUNK`] pages, one after the
/// other and at most [`CHUNKS_IN_FLIGHT`] ahead, while this thread decodes
/// the pages already read. Otherwise the batch is one device batch, then
/// decoded. Either way the same pages are read once each and decoded in
/// the same order; the first error (of a read or a decoding) is returned.
pub(crate) fn read_decoded<T>(
    device: &dyn PageDevice,
    page_size: usize,
    ids: &[PageId],
    mut decode: impl FnMut(&[u8], PageId) -> Result<T>,
) -> Result<(Vec<T>, u64)> {
    if !overlaps(device, ids.len()) {
        let mut buf = vec![0u8; ids.len() * page_size];
        device.read_batch(ids, &mut buf)?;
        let decoded = ids
            .iter()
            .zip(buf.chunks_exact(page_size))
            .map(|(&id, page)| decode(page, id))
            .collect::<Result<Vec<T>>>()?;
        return Ok((decoded, 0));
    }
    let clock_off = CpuClockOff::is_on();
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<Result<Vec<u8>>>(CHUNKS_IN_FLIGHT);
        let reader = scope.spawn(move || {
            let _scope = clock_off.then(CpuClockOff::enter);
            let start = stopwatch_cpu_ns();
            for chunk in ids.chunks(OVERLAP_CHUNK) {
                let mut buf = vec![0u8; chunk.len() * page_size];
                let read = device.read_batch(chunk, &mut buf).map(|()| buf);
                let failed = read.is_err();
                // A closed channel: the decoding failed and stopped.
                if tx.send(read).is_err() || failed {
                    break;
                }
            }
            match (start, stopwatch_cpu_ns()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            }
        });
        let decoded = decode_chunks(&rx, ids, page_size, &mut decode);
        // Unblocks a reader waiting to send after an error here.
        drop(rx);
        let cpu = match reader.join() {
            Ok(cpu) => cpu,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        decoded.map(|d| (d, cpu))
    })
}

/// The decoding side of [`read_decoded`]: each chunk of `ids` as the
/// reader sends it.
fn decode_chunks<T>(
    rx: &mpsc::Receiver<Result<Vec<u8>>>,
    ids: &[PageId],
    page_size: usize,
    decode: &mut impl FnMut(&[u8], PageId) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(OVERLAP_CHUNK) {
        let buf = rx.recv().map_err(|_| {
            Error::invalid("internal: the page reader stopped before the batch was read")
        })??;
        for (&id, page) in chunk.iter().zip(buf.chunks_exact(page_size)) {
            out.push(decode(page, id)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::storage::faulty::{FaultPlan, FaultyDevice};
    use crate::storage::file::{FileDevice, FileDeviceOptions};
    use crate::storage::mem::MemDevice;

    const PS: usize = 4096;

    /// A buffered file device of `pages` pages, page `p` filled with its
    /// id's low byte after an 8-byte copy of the id.
    fn file_device(dir: &tempfile::TempDir, pages: u64) -> FileDevice {
        let opts = FileDeviceOptions {
            direct: false,
            capacity_pages: pages,
            ..FileDeviceOptions::default()
        };
        let dev = FileDevice::open(&dir.path().join("pages.dat"), PS, opts).unwrap();
        fill(&dev, pages);
        dev
    }

    fn fill(dev: &dyn PageDevice, pages: u64) {
        let ids: Vec<PageId> = (0..pages).collect();
        let mut data = vec![0u8; ids.len() * PS];
        for (&id, page) in ids.iter().zip(data.chunks_exact_mut(PS)) {
            page.fill(id as u8);
            page[..8].copy_from_slice(&id.to_le_bytes());
        }
        dev.write_batch(&ids, &data).unwrap();
    }

    fn test_dir() -> tempfile::TempDir {
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
        std::fs::create_dir_all(&base).unwrap();
        tempfile::tempdir_in(&base).unwrap()
    }

    /// Decodes a page of [`fill`]: its id, checked against the last byte.
    fn decode(page: &[u8], id: PageId) -> Result<u64> {
        let got = u64::from_le_bytes(page[..8].try_into().unwrap());
        if got != id || page[PS - 1] != id as u8 {
            return Err(Error::corrupt(Some(id), "page holds another id"));
        }
        Ok(got)
    }

    /// Pages `ids` read through [`read_decoded`], with the device batches
    /// and pages it read.
    fn read(dev: &dyn PageDevice, ids: &[PageId]) -> (Result<Vec<u64>>, u64, u64) {
        dev.reset_stats();
        let out = read_decoded(dev, PS, ids, decode).map(|(d, _)| d);
        let s = dev.stats().io;
        (out, s.read_batches, s.pages_read)
    }

    /// On a file, a large batch (any order of ids) is read in device
    /// batches of 64, every page once, decoded in the order asked.
    #[test]
    fn a_large_batch_on_a_file_is_read_in_batches_of_the_queue_depth_and_decoded_in_order() {
        let dir = test_dir();
        let dev = file_device(&dir, 1000);
        let mut ids: Vec<PageId> = (0..1000).step_by(3).collect();
        ids.reverse();
        let (out, batches, pages) = read(&dev, &ids);
        assert_eq!(out.unwrap(), ids);
        assert_eq!(pages, ids.len() as u64);
        assert_eq!(batches, ids.len().div_ceil(OVERLAP_CHUNK) as u64);
    }

    /// A small batch on a file, and any batch on a device in memory, is one
    /// device batch.
    #[test]
    fn a_small_batch_or_a_device_in_memory_is_one_device_batch() {
        let dir = test_dir();
        let dev = file_device(&dir, 1000);
        let ids: Vec<PageId> = (0..OVERLAP_MIN as u64 - 1).collect();
        let (out, batches, _) = read(&dev, &ids);
        assert_eq!(out.unwrap(), ids);
        assert_eq!(batches, 1);
        let mem = MemDevice::new(PS, 1000).unwrap();
        fill(&mem, 1000);
        let ids: Vec<PageId> = (0..1000).collect();
        let (out, batches, _) = read(&mem, &ids);
        assert_eq!(out.unwrap(), ids);
        assert_eq!(batches, 1);
    }

    /// A page that does not decode fails the batch with its own error, and
    /// the reader stops soon after it (no more than the chunks in flight).
    #[test]
    fn the_first_decoding_error_fails_the_batch_and_stops_the_reader() {
        let dir = test_dir();
        let dev = file_device(&dir, 2000);
        let mut page = vec![0u8; PS];
        page[..8].copy_from_slice(&777u64.to_le_bytes());
        dev.write_batch(&[300], &page).unwrap();
        let ids: Vec<PageId> = (0..2000).collect();
        let (out, _, pages) = read(&dev, &ids);
        let err = out.unwrap_err().to_string();
        assert!(err.contains("300") && err.contains("another id"), "{err}");
        let most = 384 + ((CHUNKS_IN_FLIGHT + 1) * OVERLAP_CHUNK) as u64;
        assert!(pages <= most, "read {pages} pages after the error");
    }

    /// A device batch that fails (the third) fails the whole read with the
    /// device's error, whichever thread met it.
    #[test]
    fn a_failed_device_batch_fails_the_read() {
        let dir = test_dir();
        let dev = FaultyDevice::new(file_device(&dir, 1000), FaultPlan::none().fail_read(3));
        let ids: Vec<PageId> = (0..1000).collect();
        let (out, batches, _) = read(&dev, &ids);
        let err = out.unwrap_err().to_string();
        assert!(err.contains("read call 3 failed"), "{err}");
        assert!(batches >= 2, "{batches}");
    }
}
