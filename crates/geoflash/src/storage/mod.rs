//! Page devices: numbered fixed-size pages with batched reads and writes.
//!
//! Every device implements [`PageDevice`]. Devices compose like foyer's
//! decorators: [`FaultyDevice`](faulty::FaultyDevice) wraps any device to
//! inject crashes and errors; [`FlashSim`](flashsim::FlashSim) and
//! [`HddSim`](hddsim::HddSim) model hardware that is not present;
//! [`FileDevice`](file::FileDevice) is the real thing (buffered or `O_DIRECT`,
//! batches through io_uring where the kernel permits).
//!
//! Contract shared by all devices:
//! - a page never written (or trimmed) reads as zeros;
//! - `read_batch`/`write_batch` take `pages.len() * page_size` bytes, page `i`
//!   at offset `i * page_size`; the batch is submitted to the device at once;
//! - a page id `>= capacity()` is an [`Error::PageOutOfRange`](crate::Error);
//! - `sync` makes every completed write durable.
//!
//! # Layers
//! A device implements [`PageIo`], its raw I/O only: batches that are
//! already checked, a sync, a trim, and the optional hooks (tiers, simulated
//! clock, simulator counters). Every [`PageIo`] is a [`PageDevice`] through
//! one blanket implementation that does what all devices share, once:
//! [`check_batch`], the wall-clock timing of reads, writes and syncs, and the
//! host-side counters ([`IoCounters`], kept in the device's
//! [`SharedTracker`]). A batch is counted when its raw I/O succeeded; a
//! refused or failed one is not. [`TraceDevice`](trace::TraceDevice) forwards
//! to its inner device (and its counters) and implements [`PageDevice`]
//! directly, as do `Arc<D>` and `Box<dyn PageDevice>`.

pub mod counters;
#[cfg(test)]
pub mod faulty;
pub mod file;
pub mod flashsim;
pub mod hddsim;
pub mod hybrid;
pub mod journal;
pub mod mem;
pub mod overlay;
pub mod spec;
pub mod tier_map;
pub mod trace;

pub use counters::{DeviceStats, IoCounters, SharedTracker, SimCounters};

use std::time::Instant;

use crate::{Error, Result};

pub use crate::page_id::PageId;

/// A tier of a two-tier device ([`hybrid::HybridDevice`]): where a page
/// should live, as hinted by [`PageDevice::hint_tier`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// The fast tier (3D XPoint-like).
    Fast,
    /// The slow tier (flash).
    Slow,
}

/// Counters of a two-tier device ([`PageDevice::tiers`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TierReport {
    /// The fast tier's own counters.
    pub fast: DeviceStats,
    /// The slow tier's own counters.
    pub slow: DeviceStats,
    /// Pages on the fast tier now.
    pub fast_pages: u64,
    /// Pages the fast tier may hold.
    pub fast_limit: u64,
    /// Pages meant for the fast tier that stayed on the slow one (full tier).
    pub fallbacks: u64,
}

/// A device of numbered fixed-size pages. Methods take `&self`: devices are
/// shared by concurrent readers and synchronise internally.
pub trait PageDevice: Send + Sync {
    /// Size of one page in bytes (a power of two from 512 to 65536).
    fn page_size(&self) -> usize;

    /// Logical capacity in pages: valid page ids are `0..capacity()`.
    fn capacity(&self) -> u64;

    /// Reads `pages.len()` pages into `buf` (page `i` at `i * page_size`), submitted as one batch.
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()>;

    /// Writes `pages.len()` pages from `data` (page `i` at `i * page_size`), submitted as one batch.
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()>;

    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;

    /// Declares pages unused: they read as zeros afterwards and a flash device may reclaim them.
    fn trim(&self, pages: &[PageId]) -> Result<()>;

    /// Counters since the device was opened (or since [`PageDevice::reset_stats`]).
    fn stats(&self) -> DeviceStats;

    /// Resets the counters (not the contents).
    fn reset_stats(&self);

    /// One-line description: kind, parameters and, for files, the I/O engine in use.
    fn describe(&self) -> String;

    /// The file holding the pages, for error messages (`None`, the default,
    /// for devices that live in memory).
    fn path(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// A placement hint from the layer above: `pages` should live on `tier`
    /// from their next write on. It costs no I/O and never changes what a
    /// page reads; a device with one tier ignores it (the default). Stores
    /// give hints per node ([`crate::store::placement`]), grid files per
    /// page kind; the device never learns what a page holds.
    fn hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
        let _ = (pages, tier);
        Ok(())
    }

    /// The counters of each tier of a two-tier device; `None` for a device
    /// of one tier (the default).
    fn tiers(&self) -> Option<TierReport> {
        None
    }

    /// The tier page `page` lives on now; `None` for a device of one tier
    /// (the default).
    fn page_tier(&self, page: PageId) -> Option<Tier> {
        let _ = page;
        None
    }

    /// The simulated clock of a simulated device, ns since it was created
    /// (never reset, unlike the counters), cheap enough to read around every
    /// phase a store or index measures; `None` on a real device (the default).
    fn sim_clock_ns(&self) -> Option<u64> {
        None
    }

    /// Reads one page.
    fn read(&self, page: PageId, buf: &mut [u8]) -> Result<()> {
        self.read_batch(&[page], buf)
    }

    /// Writes one page.
    fn write(&self, page: PageId, data: &[u8]) -> Result<()> {
        self.write_batch(&[page], data)
    }
}

/// Checks a batch request against a device's geometry: buffer length and page ids.
/// The [`PageDevice`] implementation of every [`PageIo`] calls this before
/// the raw I/O, so that bad input is reported the same way everywhere.
pub fn check_batch(
    pages: &[PageId],
    buf_len: usize,
    page_size: usize,
    capacity: u64,
) -> Result<()> {
    let expected = pages
        .len()
        .checked_mul(page_size)
        .ok_or_else(|| Error::invalid("batch too large"))?;
    if buf_len != expected {
        return Err(Error::BufferSize {
            expected,
            got: buf_len,
        });
    }
    if let Some(&page) = pages.iter().find(|&&p| p >= capacity) {
        return Err(Error::PageOutOfRange { page, capacity });
    }
    Ok(())
}

/// The raw I/O of a device, below [`PageDevice`] (see the module's
/// "Layers"). An implementation moves pages and nothing else: the blanket
/// `impl<T: PageIo> PageDevice for T` checks every batch with
/// [`check_batch`] before calling it, times it, and counts it in
/// [`PageIo::io_tracker`] after it succeeded.
///
/// Every method is named `io_*`, so that no name is shared with
/// [`PageDevice`] (callers use [`PageDevice`]; the raw calls skip the
/// checks and the counting).
pub trait PageIo: Send + Sync {
    /// Size of one page in bytes (a power of two from 512 to 65536).
    fn io_page_size(&self) -> usize;

    /// Logical capacity in pages: valid page ids are `0..capacity()`.
    fn io_capacity(&self) -> u64;

    /// Reads `pages` into `buf` (page `i` at `i * page_size`). The batch was
    /// checked: every id is below the capacity and `buf` holds exactly
    /// `pages.len()` pages.
    fn io_read(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()>;

    /// Writes `pages` from `data` (page `i` at `i * page_size`; a page that
    /// occurs twice ends with its last copy). The batch was checked as for
    /// [`PageIo::io_read`].
    fn io_write(&self, pages: &[PageId], data: &[u8]) -> Result<()>;

    /// Makes every completed write durable.
    fn io_sync(&self) -> Result<()>;

    /// Declares `pages` unused (every id was checked to be below the capacity).
    fn io_trim(&self, pages: &[PageId]) -> Result<()>;

    /// The host-side counters the blanket [`PageDevice`] implementation keeps
    /// for this device.
    fn io_tracker(&self) -> &SharedTracker;

    /// The simulator counters reported by [`PageDevice::stats`] (`None`, the
    /// default, on a real device).
    fn io_sim_counters(&self) -> Option<SimCounters> {
        None
    }

    /// Resets what this device reports beyond its own [`IoCounters`] (the
    /// simulator counters' base, the counters of the devices it is made of);
    /// called by [`PageDevice::reset_stats`]. Nothing by default.
    fn io_reset_sim(&self) {}

    /// One-line description: kind, parameters and, for files, the I/O engine in use.
    fn io_describe(&self) -> String;

    /// See [`PageDevice::path`] (`None` by default).
    fn io_path(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// See [`PageDevice::hint_tier`] (ignored by default).
    fn io_hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
        let _ = (pages, tier);
        Ok(())
    }

    /// See [`PageDevice::tiers`] (`None` by default).
    fn io_tiers(&self) -> Option<TierReport> {
        None
    }

    /// See [`PageDevice::page_tier`] (`None` by default).
    fn io_page_tier(&self, page: PageId) -> Option<Tier> {
        let _ = page;
        None
    }

    /// See [`PageDevice::sim_clock_ns`] (`None` by default).
    fn io_sim_clock_ns(&self) -> Option<u64> {
        None
    }
}

/// Which way a counted batch goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
}

/// Nanoseconds since `start`, saturated.
fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The shared opening of every batch: checks `pages` against a buffer of
/// `len` bytes and `dev`'s geometry, runs `io`, and counts the batch with
/// its wall-clock time if `io` succeeded. [`FileDevice`](file::FileDevice)'s
/// unbounced calls go through it too.
fn counted<T: PageIo + ?Sized>(
    dev: &T,
    dir: Dir,
    pages: &[PageId],
    len: usize,
    io: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let page_size = dev.io_page_size();
    check_batch(pages, len, page_size, dev.io_capacity())?;
    let start = Instant::now();
    io()?;
    let ns = elapsed_ns(start);
    let mut tracker = dev.io_tracker().lock();
    match dir {
        Dir::Read => tracker.record_reads(pages, page_size, ns),
        Dir::Write => tracker.record_writes(pages, page_size, ns),
    }
    Ok(())
}

impl<T: PageIo> PageDevice for T {
    fn page_size(&self) -> usize {
        self.io_page_size()
    }

    fn capacity(&self) -> u64 {
        self.io_capacity()
    }

    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        counted(self, Dir::Read, pages, buf.len(), || {
            self.io_read(pages, buf)
        })
    }

    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        counted(self, Dir::Write, pages, data.len(), || {
            self.io_write(pages, data)
        })
    }

    fn sync(&self) -> Result<()> {
        let start = Instant::now();
        self.io_sync()?;
        let ns = elapsed_ns(start);
        self.io_tracker().lock().record_sync(ns);
        Ok(())
    }

    fn trim(&self, pages: &[PageId]) -> Result<()> {
        check_batch(pages, 0, 0, self.io_capacity())?;
        self.io_trim(pages)?;
        self.io_tracker().lock().record_trim(pages.len());
        Ok(())
    }

    fn stats(&self) -> DeviceStats {
        DeviceStats {
            io: self.io_tracker().lock().counters(),
            sim: self.io_sim_counters(),
        }
    }

    fn reset_stats(&self) {
        self.io_tracker().lock().reset();
        self.io_reset_sim();
    }

    fn describe(&self) -> String {
        self.io_describe()
    }

    fn path(&self) -> Option<std::path::PathBuf> {
        self.io_path()
    }

    fn hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
        self.io_hint_tier(pages, tier)
    }

    fn tiers(&self) -> Option<TierReport> {
        self.io_tiers()
    }

    fn page_tier(&self, page: PageId) -> Option<Tier> {
        self.io_page_tier(page)
    }

    fn sim_clock_ns(&self) -> Option<u64> {
        self.io_sim_clock_ns()
    }
}

/// Forwards every call through a pointer, so `Arc<dyn PageDevice>`,
/// `Box<dyn PageDevice>` and `Arc` of a concrete device are devices too.
/// (`Box<D>` of a concrete device is not: `Box` may implement [`PageIo`]
/// downstream, which the blanket implementation above rules out.)
macro_rules! forward_page_device {
    ([$($generics:tt)*] $ptr:ty) => {
        impl<$($generics)*> PageDevice for $ptr {
            fn page_size(&self) -> usize {
                (**self).page_size()
            }
            fn capacity(&self) -> u64 {
                (**self).capacity()
            }
            fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
                (**self).read_batch(pages, buf)
            }
            fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
                (**self).write_batch(pages, data)
            }
            fn sync(&self) -> Result<()> {
                (**self).sync()
            }
            fn trim(&self, pages: &[PageId]) -> Result<()> {
                (**self).trim(pages)
            }
            fn stats(&self) -> DeviceStats {
                (**self).stats()
            }
            fn reset_stats(&self) {
                (**self).reset_stats()
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn path(&self) -> Option<std::path::PathBuf> {
                (**self).path()
            }
            fn hint_tier(&self, pages: &[PageId], tier: Tier) -> Result<()> {
                (**self).hint_tier(pages, tier)
            }
            fn tiers(&self) -> Option<TierReport> {
                (**self).tiers()
            }
            fn page_tier(&self, page: PageId) -> Option<Tier> {
                (**self).page_tier(page)
            }
            fn sim_clock_ns(&self) -> Option<u64> {
                (**self).sim_clock_ns()
            }
        }
    };
}

forward_page_device!([D: PageDevice + ?Sized] std::sync::Arc<D>);
forward_page_device!([] Box<dyn PageDevice>);

#[cfg(test)]
mod tests;
