//! [`Counted`]: the one device that counts. It wraps any device, checks
//! every batch against the device's geometry ([`DeviceGeometry::check_batch`]), times
//! reads, writes and syncs, and keeps the host-side counters
//! ([`IoCounters`]) of the batches that succeeded, as foyer's
//! `MonitoredIoEngine` does around an I/O engine. The devices themselves
//! carry no counters.
use std::ops::Deref;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::counters::IoTracker;
use super::{DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId};
use crate::Result;

/// A device whose batches are checked and counted (see the
/// module docs). It dereferences to the device it wraps, for the
/// methods of that device's own (`FlashSim`'s image, `FaultyDevice`'s
/// crash control); page I/O goes through [`Counted`]'s [`PageDevice`].
#[derive(Debug)]
pub struct Counted<D> {
    inner: D,
    tracker: Mutex<IoTracker>,
}

/// Which way a counted batch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// A read batch.
    Read,
    /// A write batch.
    Write,
}

/// Nanoseconds since `start`, saturated.
fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl<D: PageDevice> Counted<D> {
    /// `inner`, counted from zero.
    pub fn wrap(inner: D) -> Self {
        Counted {
            inner,
            tracker: Mutex::new(IoTracker::default()),
        }
    }

    /// The device inside, uncounted.
    pub fn into_uncounted(self) -> D {
        self.inner
    }

    /// The counters. A poisoned lock only means another thread panicked
    /// between two updates; the counters are still usable.
    fn tracker(&self) -> MutexGuard<'_, IoTracker> {
        self.tracker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counters since the device was opened or reset: this wrapper's host
    /// counters and the simulator counters of the device inside.
    pub fn stats(&self) -> DeviceStats {
        DeviceStats {
            io: self.tracker().counters(),
            sim: self.inner.stats().sim,
        }
    }

    /// Resets the counters, this wrapper's and the device's (not the contents).
    pub fn reset_stats(&self) {
        self.tracker().reset();
        self.inner.reset_stats();
    }

    /// The shared opening of every batch: checks `pages` against a buffer of
    /// `len` bytes and the device's geometry, runs `io`, and counts the
    /// batch with its wall-clock time if `io` succeeded. `FileDevice`'s
    /// unbounced calls go through it too.
    pub(crate) fn count(
        &self,
        dir: Dir,
        pages: &[PageId],
        len: usize,
        io: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.count_less(dir, pages, len, || io().map(|()| 0))
    }

    /// [`Counted::count`] for an `io` that returns the nanoseconds of its
    /// time that were not the device's (the caller's work on pages handed
    /// over during the batch), taken off the batch's time.
    fn count_less(
        &self,
        dir: Dir,
        pages: &[PageId],
        len: usize,
        io: impl FnOnce() -> Result<u64>,
    ) -> Result<()> {
        let geometry = self.inner.geometry();
        geometry.check_batch(pages, len)?;
        let page_size = geometry.page_size;
        let start = Instant::now();
        let not_device = io()?;
        let ns = elapsed_ns(start).saturating_sub(not_device);
        let mut tracker = self.tracker();
        match dir {
            Dir::Read => tracker.record_reads(pages, page_size, ns),
            Dir::Write => tracker.record_writes(pages, page_size, ns),
        }
        Ok(())
    }
}

impl<D> Deref for Counted<D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.inner
    }
}

impl<D: PageDevice> PageDevice for Counted<D> {
    fn geometry(&self) -> DeviceGeometry {
        self.inner.geometry()
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        self.count(Dir::Read, pages, len, || self.inner.read_batch(pages, buf))
    }

    /// Counted as one read batch. Its time is the batch's less the time
    /// spent in `each`: the time the caller waited for the device (below
    /// the device's busy time when the caller's work overlapped reads).
    fn read_batch_each(
        &self,
        pages: &[PageId],
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let len = pages.len().saturating_mul(self.inner.page_size());
        self.count_less(Dir::Read, pages, len, || {
            let mut handling = 0u64;
            self.inner.read_batch_each(pages, &mut |i, page| {
                let start = Instant::now();
                let r = each(i, page);
                handling = handling.saturating_add(elapsed_ns(start));
                r
            })?;
            Ok(handling)
        })
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        self.count(Dir::Write, pages, data.len(), || {
            self.inner.write_batch(pages, data)
        })
    }

    fn sync(&self) -> Result<()> {
        let start = Instant::now();
        self.inner.sync()?;
        let ns = elapsed_ns(start);
        self.tracker().record_sync(ns);
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        self.inner.geometry().check_pages(pages)?;
        self.inner.trim(pages)?;
        self.tracker().record_trim(pages.len());
        Ok(())
    }

    fn shorten(&self, pages: PageId) -> Result<()> {
        self.inner.shorten(pages)
    }

    fn trim_tail(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        if pages.start > pages.end {
            return Err(crate::Error::invalid(format!(
                "trim of pages {}..{}: the run ends before it starts",
                pages.start, pages.end
            )));
        }
        if !pages.is_empty() {
            self.inner.geometry().check_pages(&[pages.end - 1])?;
        }
        let trimmed = pages.end - pages.start;
        self.inner.trim_tail(pages)?;
        self.tracker()
            .record_trim(usize::try_from(trimmed).unwrap_or(usize::MAX));
        Ok(())
    }

    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        if !pages.is_empty() {
            self.inner.geometry().check_pages(&[pages.start, pages.end - 1])?;
        }
        self.inner.reserve(pages)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }
}

impl<D: PageDevice> DeviceExt for Counted<D> {
    fn stats(&self) -> DeviceStats {
        Counted::stats(self)
    }

    fn reset_stats(&self) {
        Counted::reset_stats(self)
    }

    super::forward_device_ext!(
        inner: hint_tier,
        tiers,
        page_tier,
        overwrites_durable,
        sim_clock_ns
    );
}
