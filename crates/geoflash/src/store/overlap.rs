//! Reading a batch of node pages with its decoding overlapped.
//!
//! A store that reads a batch of pages and then decodes them leaves the
//! device idle while it decodes and checksums, and itself idle while the
//! device reads: on a cold 100 M-object index the decoding of a query's
//! 773 pages took 3 of its 11 ms after 7.5 ms of device reads. Fevgas'
//! thesis makes the point for SSDs: they are fast only with reads in
//! flight. [`read_decoded`] decodes each page as the device hands it over
//! ([`PageDevice::read_batch_each`]): a file device submits the whole batch
//! at once, keeps its queue full while reads complete, and hands each page
//! over as its read completes, so the decoding runs while the rest of the
//! batch is read, on the calling thread.
use crate::metrics::{Phase, PhaseTimes};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

/// [`read_decoded`] measured as one [`Phase::Read`]: its wall-clock, CPU
/// and simulated time, for the caller to add to its counters.
pub(crate) fn read_decoded_timed<T>(
    device: &dyn PageDevice,
    ids: &[PageId],
    decode: impl FnMut(&[u8], PageId) -> Result<T>,
) -> Result<(Vec<T>, PhaseTimes)> {
    let (read, times) = PhaseTimes::measure(Phase::Read, device, || {
        read_decoded(device, ids, decode)
    });
    Ok((read?, times))
}

/// Reads the pages `ids` of `device` as one device batch and decodes each
/// with `decode` as the device hands it over; returns the decoded pages in
/// the order of `ids`. Every page is read once; the first error (of a read
/// or a decoding) is returned.
pub(crate) fn read_decoded<T>(
    device: &dyn PageDevice,
    ids: &[PageId],
    mut decode: impl FnMut(&[u8], PageId) -> Result<T>,
) -> Result<Vec<T>> {
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(ids.len()).collect();
    device.read_batch_each(ids, &mut |i, page| {
        let (Some(&id), Some(slot)) = (ids.get(i), slots.get_mut(i)) else {
            return Err(Error::invalid("internal: the device handed over a page it was not asked for"));
        };
        *slot = Some(decode(page, id)?);
        Ok(())
    })?;
    slots
        .into_iter()
        .zip(ids)
        .map(|(slot, &id)| {
            slot.ok_or_else(|| {
                Error::invalid(format!("internal: the device did not hand over page {id} of its batch"))
            })
        })
        .collect()
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
        let out = read_decoded(dev, ids, decode);
        let s = dev.stats().io;
        (out, s.read_batches, s.pages_read)
    }

    /// On a file and in memory, a batch (any order of ids, more than the
    /// ring's depth) is one device batch, every page read once and decoded
    /// in the order asked.
    #[test]
    fn a_batch_is_one_device_batch_decoded_in_the_order_asked() {
        let dir = test_dir();
        let dev = file_device(&dir, 1000);
        let mem = MemDevice::new(PS, 1000).unwrap();
        fill(&mem, 1000);
        let mut ids: Vec<PageId> = (0..1000).step_by(3).collect();
        ids.reverse();
        for d in [&dev as &dyn PageDevice, &mem] {
            let (out, batches, pages) = read(d, &ids);
            assert_eq!(out.unwrap(), ids);
            assert_eq!(pages, ids.len() as u64);
            assert_eq!(batches, 1);
        }
    }

    /// A page that does not decode fails the batch with its own error; no
    /// page is decoded after it.
    #[test]
    fn the_first_decoding_error_fails_the_batch_and_nothing_is_decoded_after_it() {
        let dir = test_dir();
        let dev = file_device(&dir, 2000);
        let mut page = vec![0u8; PS];
        page[..8].copy_from_slice(&777u64.to_le_bytes());
        dev.write_batch(&[300], &page).unwrap();
        let ids: Vec<PageId> = (0..2000).collect();
        let mut failed = false;
        let out = read_decoded(&dev, &ids, |page, id| {
            assert!(!failed, "page {id} decoded after the error");
            decode(page, id).inspect_err(|_| failed = true)
        });
        let err = out.unwrap_err().to_string();
        assert!(err.contains("300") && err.contains("another id"), "{err}");
        assert!(failed);
    }

    /// A device batch that fails fails the whole read with the device's error.
    #[test]
    fn a_failed_device_batch_fails_the_read() {
        let dir = test_dir();
        let dev = FaultyDevice::new(file_device(&dir, 1000), FaultPlan::none().fail_read(1));
        let ids: Vec<PageId> = (0..1000).collect();
        let (out, _, _) = read(&dev, &ids);
        let err = out.unwrap_err().to_string();
        assert!(err.contains("read call 1 failed"), "{err}");
    }
}
