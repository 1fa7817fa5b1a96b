//! A read-only view of a device with some pages replaced in memory: what a
//! reader of a logged store (eFIND, FAST) opens its device through when the
//! log holds changes to replay. The store's restart then runs as for a
//! writer (the page images it would write back against torn writes land in
//! memory, the replayed changes in the store's buffer) and the files stay
//! untouched, so a reader needs no `geoflash recover` and never races the
//! next writer's recovery.
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::{DeviceExt, DeviceGeometry, PageDevice, PageId, Tier};
use crate::{Error, Result};

/// A device whose writes stay in memory and whose reads see them first.
/// See the [module docs](self).
pub struct ImageOverlay {
    inner: Arc<dyn PageDevice>,
    pages: RwLock<HashMap<PageId, Vec<u8>>>,
}

impl ImageOverlay {
    /// A view of `inner` with no page replaced yet.
    pub fn new(inner: Arc<dyn PageDevice>) -> ImageOverlay {
        ImageOverlay {
            inner,
            pages: RwLock::new(HashMap::new()),
        }
    }

    /// Pages held in memory.
    #[cfg(test)]
    pub fn replaced(&self) -> usize {
        self.pages.read().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl PageDevice for ImageOverlay {
    fn geometry(&self) -> DeviceGeometry {
        self.inner.geometry()
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        self.inner.read_batch(pages, buf)?;
        let held = self.pages.read().unwrap_or_else(|e| e.into_inner());
        if !held.is_empty() {
            let ps = self.page_size();
            for (page, dst) in pages.iter().zip(buf.chunks_exact_mut(ps)) {
                if let Some(image) = held.get(page) {
                    dst.copy_from_slice(image);
                }
            }
        }
        Ok(())
    }
    /// Keeps the pages in memory (the device is never written).
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        let ps = self.page_size();
        if data.len() != pages.len() * ps {
            return Err(Error::invalid(format!(
                "write of {} pages with {} bytes",
                pages.len(),
                data.len()
            )));
        }
        if let Some(&p) = pages.iter().find(|&&p| p >= self.capacity()) {
            return Err(Error::invalid(format!(
                "page {p} beyond the device's {} pages",
                self.capacity()
            )));
        }
        let mut held = self.pages.write().unwrap_or_else(|e| e.into_inner());
        for (&p, page) in pages.iter().zip(data.chunks_exact(ps)) {
            held.insert(p, page.to_vec());
        }
        Ok(())
    }
    /// Nothing to make durable: the view lives in memory.
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn trim(&self, _pages: &[PageId]) -> Result<()> {
        Err(Error::invalid("a read-only view of a device trims nothing"))
    }
    fn describe(&self) -> String {
        format!("read-only view of {}", self.inner.describe())
    }
    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }
}

impl DeviceExt for ImageOverlay {
    /// Ignored: nothing is written to a tier.
    fn hint_tier(&self, _pages: &[PageId], _tier: Tier) -> Result<()> {
        Ok(())
    }
    super::forward_device_ext!(inner: stats, reset_stats, tiers, page_tier, sim_clock_ns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;

    #[test]
    fn writes_stay_in_memory_and_reads_see_them() {
        let dev: Arc<dyn PageDevice> = Arc::new(MemDevice::new(512, 8).unwrap());
        dev.write_batch(&[1, 2], &[[1u8; 512], [2u8; 512]].concat())
            .unwrap();
        let view = ImageOverlay::new(Arc::clone(&dev));
        view.write_batch(&[2], &[9u8; 512]).unwrap();
        view.sync().unwrap();
        let mut buf = vec![0u8; 1024];
        view.read_batch(&[1, 2], &mut buf).unwrap();
        assert!(buf[..512].iter().all(|&b| b == 1) && buf[512..].iter().all(|&b| b == 9));
        dev.read_batch(&[1, 2], &mut buf).unwrap();
        assert!(buf[512..].iter().all(|&b| b == 2), "the device is untouched");
        assert_eq!(view.replaced(), 1);
        assert!(view.write_batch(&[8], &[0u8; 512]).is_err());
        assert!(view.trim(&[1]).is_err());
    }
}
