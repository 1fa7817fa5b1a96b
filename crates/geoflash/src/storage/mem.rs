//! `MemDevice`: pages in memory, for tests and for `mem:` indexes that live
//! only in their process.
use std::sync::Mutex;

use super::{Counted, DeviceExt, DeviceGeometry, PageDevice, PageId};
use crate::units::check_page_size;
use crate::{Error, Result};

/// A device whose pages live in a hash map (sparse: unwritten pages cost
/// nothing), counted.
pub type MemDevice = Counted<MemIo>;

/// The pages of a [`MemDevice`], uncounted.
#[derive(Debug)]
pub struct MemIo {
    page_size: usize,
    capacity: u64,
    inner: Mutex<MemInner>,
}

#[derive(Debug, Default)]
struct MemInner {
    pages: crate::page_id::IdMap<Box<[u8]>>,
}

impl MemDevice {
    /// Default capacity of `mem:` devices: 2^32 pages (sparse, so free until written).
    pub const DEFAULT_CAPACITY: u64 = 1 << 32;

    /// A memory device of `capacity` pages of `page_size` bytes.
    pub fn new(page_size: usize, capacity: u64) -> Result<Self> {
        check_page_size(page_size)?;
        if capacity == 0 {
            return Err(Error::invalid(
                "a memory device needs a capacity of at least one page",
            ));
        }
        Ok(Counted::wrap(MemIo {
            page_size,
            capacity,
            inner: Mutex::new(MemInner::default()),
        }))
    }
}

impl MemDevice {
    /// A new device holding a copy of this one's pages, its counters at
    /// zero (for tests: a crash case runs on a copy of the state before
    /// it).
    #[cfg(test)]
    pub(crate) fn copied(&self) -> MemDevice {
        let pages = self.lock().pages.clone();
        Counted::wrap(MemIo {
            page_size: self.page_size,
            capacity: self.capacity,
            inner: Mutex::new(MemInner { pages }),
        })
    }
}

impl MemIo {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemInner> {
        // A poisoned lock only means another thread panicked; the map is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of pages holding data (written and not trimmed).
    pub fn pages_in_use(&self) -> usize {
        self.lock().pages.len()
    }
}

impl PageDevice for MemIo {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.page_size, self.capacity)
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let inner = self.lock();
        for (&p, out) in pages.iter().zip(buf.chunks_exact_mut(self.page_size)) {
            match inner.pages.get(&p) {
                Some(data) => out.copy_from_slice(data),
                None => out.fill(0),
            }
        }
        Ok(())
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let mut inner = self.lock();
        for (&p, chunk) in pages.iter().zip(data.chunks_exact(self.page_size)) {
            inner.pages.insert(p, chunk.into());
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        let mut inner = self.lock();
        for p in pages {
            inner.pages.remove(p);
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "mem: page_size={} capacity={} pages",
            self.page_size, self.capacity
        )
    }
}

impl DeviceExt for MemIo {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::tests::{assert_read_out_of_range, DeviceOp as Op};
    use crate::storage::PageDevice;

    #[test]
    fn round_trip_and_zeros() {
        let d = MemDevice::new(512, 16).unwrap();
        let data: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        d.write_batch(&[3, 7], &data).unwrap();
        let mut buf = vec![1u8; 1536];
        d.read_batch(&[7, 3, 0], &mut buf).unwrap();
        assert_eq!(&buf[..512], &data[512..]);
        assert_eq!(&buf[512..1024], &data[..512]);
        assert!(buf[1024..].iter().all(|&b| b == 0));
        d.trim(&[3]).unwrap();
        d.read(3, &mut buf[..512]).unwrap();
        assert!(buf[..512].iter().all(|&b| b == 0));
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let ids = proptest::collection::vec(0u64..32, 1..6);
        prop_oneof![
            (ids.clone(), any::<u8>()).prop_map(|(p, b)| Op::Write(p, b)),
            ids.clone().prop_map(Op::Read),
            ids.prop_map(Op::Trim),
            Just(Op::Sync),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
        /// Any sequence of batched writes, reads, trims and syncs reads back
        /// what was last written (zeros for never-written or trimmed pages).
        #[test]
        fn reads_return_the_last_write(ops in proptest::collection::vec(op(), 1..60)) {
            let d = MemDevice::new(512, 32).unwrap();
            let mut oracle: std::collections::HashMap<u64, u8> = std::collections::HashMap::new();
            for op in ops {
                match op {
                    Op::Write(pages, b) => {
                        // a page repeated in one batch: the last copy wins
                        let data: Vec<u8> = pages.iter().enumerate().flat_map(|(i, _)| vec![b.wrapping_add(i as u8); 512]).collect();
                        d.write_batch(&pages, &data).unwrap();
                        for (i, p) in pages.iter().enumerate() {
                            oracle.insert(*p, b.wrapping_add(i as u8));
                        }
                    }
                    Op::Read(pages) => {
                        let mut buf = vec![0xAAu8; pages.len() * 512];
                        d.read_batch(&pages, &mut buf).unwrap();
                        for (p, chunk) in pages.iter().zip(buf.chunks(512)) {
                            let want = oracle.get(p).copied().unwrap_or(0);
                            proptest::prop_assert!(chunk.iter().all(|&x| x == want));
                        }
                    }
                    Op::Trim(pages) => {
                        d.trim(&pages).unwrap();
                        for p in &pages {
                            oracle.remove(p);
                        }
                    }
                    Op::Sync => d.sync().unwrap(),
                }
            }
            proptest::prop_assert_eq!(d.pages_in_use(), oracle.len());
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(MemDevice::new(1000, 4).is_err());
        assert!(MemDevice::new(512, 0).is_err());
        let d = MemDevice::new(512, 4).unwrap();
        assert_read_out_of_range(&d, 4, 4);
        let buf = vec![0u8; 512];
        assert!(matches!(
            d.write(0, &buf[..100]),
            Err(Error::BufferSize { .. })
        ));
        assert!(matches!(d.trim(&[9]), Err(Error::PageOutOfRange { .. })));
    }
}
