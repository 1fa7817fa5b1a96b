//! Page devices: numbered fixed-size pages with batched reads and writes.
//!
//! Every device implements [`PageDevice`]: page I/O and geometry, nothing
//! else. Devices compose like foyer's decorators:
//! [`Counted`] wraps a device to check and count every batch (foyer's
//! `MonitoredIoEngine`); [`FaultyDevice`](faulty::FaultyDevice) wraps any
//! device to inject crashes and errors; [`FlashSim`](flashsim::FlashSim) and
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
//! A device's own type moves pages and nothing else (`MemIo`, `FileIo`,
//! `FlashSimIo`, `HddSimIo`, `HybridIo`, `FaultyIo`). The names the rest of
//! the crate uses are those types counted: `MemDevice` is
//! `Counted<MemIo>`, and so on. [`Counted`] does what all devices share,
//! once: [`check_batch`], the wall-clock timing of reads, writes and syncs,
//! and the host-side counters ([`IoCounters`]). A batch is counted when the
//! device's I/O succeeded; a refused or failed one is not.
//!
//! What a device offers beyond page I/O is the extension trait
//! [`DeviceExt`], with defaults for a device that has none of it: its
//! counters ([`DeviceExt::stats`]: the host counters of [`Counted`], the
//! simulator counters of a simulated device), the tiers of a two-tier device
//! ([`DeviceExt::hint_tier`], [`DeviceExt::tiers`], [`DeviceExt::page_tier`])
//! and the simulated clock ([`DeviceExt::sim_clock_ns`]). It is a
//! supertrait of [`PageDevice`], so `dyn PageDevice` offers it too.
//! Decorators that forward to an inner device
//! ([`TraceDevice`](trace::TraceDevice), the rollback journal, the image
//! overlay, `Arc<D>`, `Box<dyn PageDevice>`) forward its methods with
//! `forward_device_ext!`.

pub mod counted;
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

pub use counted::Counted;
pub use counters::{DeviceStats, IoCounters, SimCounters};

use crate::{Error, Result};

pub use crate::page_id::PageId;

/// A tier of a two-tier device (`hybrid::HybridDevice`): where a page
/// should live, as hinted by `PageDevice::hint_tier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// The fast tier (3D XPoint-like).
    Fast,
    /// The slow tier (flash).
    Slow,
}

/// Counters of a two-tier device (`PageDevice::tiers`).
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
    /// Pages meant for the fast tier that stayed on the slow one (full
    /// tier), since this device was opened (like the other counters, not
    /// kept across a reopen: pages placed on the slow tier before it stay
    /// there, uncounted, until their next write).
    pub fallbacks: u64,
}

/// What a device fixes when it opens: the size of its pages and how many
/// there are. Batch requests are checked against it ([`check_batch`](Self::check_batch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceGeometry {
    /// Size of one page in bytes (a power of two from 512 to 65536).
    pub page_size: usize,
    /// Logical capacity in pages: valid page ids are `0..capacity`.
    pub capacity: u64,
}

impl DeviceGeometry {
    /// The geometry of `capacity` pages of `page_size` bytes.
    pub fn new(page_size: usize, capacity: u64) -> Self {
        Self {
            page_size,
            capacity,
        }
    }

    /// Checks a batch request: `buf_len` must hold exactly `pages.len()`
    /// pages and every page id must be below the capacity.
    /// [`Counted`] calls this before the device's I/O, so that bad input is
    /// reported the same way everywhere.
    pub fn check_batch(&self, pages: &[PageId], buf_len: usize) -> Result<()> {
        let expected = pages
            .len()
            .checked_mul(self.page_size)
            .ok_or_else(|| Error::invalid("batch too large"))?;
        if buf_len != expected {
            return Err(Error::BufferSize {
                expected,
                got: buf_len,
            });
        }
        self.check_pages(pages)
    }

    /// Checks that every page id of a request without data (a trim, a tier
    /// hint) is below the capacity.
    pub fn check_pages(&self, pages: &[PageId]) -> Result<()> {
        match pages.iter().find(|&&p| p >= self.capacity) {
            Some(&page) => Err(Error::PageOutOfRange {
                page,
                capacity: self.capacity,
            }),
            None => Ok(()),
        }
    }
}

/// A device of numbered fixed-size pages: page I/O and geometry. Methods
/// take `&self`: devices are shared by concurrent readers and synchronise
/// internally. What a device offers beyond I/O (counters, tiers, the
/// simulated clock) is its supertrait [`DeviceExt`].
pub trait PageDevice: DeviceExt + Send + Sync {
    /// The page size and capacity, fixed when the device opens.
    fn geometry(&self) -> DeviceGeometry;

    /// Size of one page in bytes (a power of two from 512 to 65536).
    fn page_size(&self) -> usize {
        self.geometry().page_size
    }

    /// Logical capacity in pages: valid page ids are `0..capacity()`.
    fn capacity(&self) -> u64 {
        self.geometry().capacity
    }

    /// Reads `pages.len()` pages into `buf` (page `i` at `i * page_size`), submitted as one batch.
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()>;

    /// Reads `pages` as one batch, as [`read_batch`](Self::read_batch) does,
    /// and hands each page's bytes to `each` with its position in `pages`,
    /// in any order and possibly while the rest of the batch is still being
    /// read: a file device hands a page over as soon as its read completes,
    /// so the caller's work on it (decoding, checksums) overlaps the reads
    /// still in flight. Each page is handed over once; the first error, of
    /// a read or of `each`, is returned, and no page is handed over after
    /// it. The default reads the whole batch, then hands the pages over in
    /// order.
    fn read_batch_each(
        &self,
        pages: &[PageId],
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let ps = self.page_size();
        let len = pages
            .len()
            .checked_mul(ps)
            .ok_or_else(|| crate::Error::invalid("read batch too large"))?;
        let mut buf = vec![0u8; len];
        self.read_batch(pages, &mut buf)?;
        buf.chunks_exact(ps)
            .enumerate()
            .try_for_each(|(i, page)| each(i, page))
    }

    /// Writes `pages.len()` pages from `data` (page `i` at `i * page_size`; a
    /// page that occurs twice ends with its last copy), submitted as one batch.
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()>;

    /// Makes every completed write durable.
    fn sync(&self) -> Result<()>;

    /// Declares pages unused: they read as zeros afterwards and a flash device may reclaim them.
    fn trim(&self, pages: &[PageId]) -> Result<()>;

    /// Trims the run `pages`, as [`trim`](Self::trim) does, for a caller
    /// that needs none of the pages after it either: afterwards the pages
    /// of `pages` read as zeros and each page after them reads as zeros or
    /// as before. A device with a file shortens it to `pages.start` pages
    /// when it is longer (giving back the blocks of every later page,
    /// [`reserve`](Self::reserve)d ones too), so that its length no longer
    /// counts pages once used (the rollback journal's void images); the
    /// default trims `pages`.
    fn trim_tail(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        self.trim(&pages.collect::<Vec<_>>())
    }

    /// Shortens the device's file to `pages` pages when it is longer, for a
    /// caller whose pages from `pages` on all read as zeros already
    /// (trimmed, or never written): nothing reads differently, and the
    /// file's length no longer counts them (blocks
    /// [`reserve`](Self::reserve)d there are given back). Not a trim: no
    /// counter changes. By default (devices without a file of their own)
    /// nothing.
    fn shorten(&self, pages: PageId) -> Result<()> {
        let _ = pages;
        Ok(())
    }

    /// Makes sure that later writes to pages `pages` do not fail for lack of
    /// space on the medium: a file device allocates their blocks now
    /// (`fallocate`, the file's size unchanged), so that a full file system
    /// is an error of this call, at a moment the caller chooses, and not of
    /// a write that must not fail (a log's COMMIT). Contents are unchanged.
    /// Best effort where the file system cannot allocate ahead; by default
    /// (devices without a file system beneath) nothing.
    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        let _ = pages;
        Ok(())
    }

    /// One-line description: kind, parameters and, for files, the I/O engine in use.
    fn describe(&self) -> String;

    /// The file holding the pages, for error messages (`None`, the default,
    /// for devices that live in memory).
    fn path(&self) -> Option<std::path::PathBuf> {
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

/// What a device offers beyond page I/O, each with the default of a device
/// that does not have it: counters, the tiers of a two-tier device, the
/// simulated clock. The supertrait of [`PageDevice`].
pub trait DeviceExt {
    /// Counters since the device was opened (or since
    /// [`DeviceExt::reset_stats`]): the host-side I/O counted by [`Counted`]
    /// and, on a simulated device, the simulator's counters. A device's own
    /// type (not counted) reports zero I/O; the default reports nothing.
    fn stats(&self) -> DeviceStats {
        DeviceStats::default()
    }

    /// Resets the counters (not the contents). Nothing by default.
    fn reset_stats(&self) {}

    /// A placement hint from the layer above: `pages` should live on `tier`
    /// from their next write on. It costs no I/O and never changes what a
    /// page reads; a device with one tier ignores it (the default). Stores
    /// give hints per node (`crate::store::placement`), grid files per
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

    /// Whether a write of each of `pages` now would overwrite, in place,
    /// contents a [`sync`](PageDevice::sync) has made durable: what a
    /// rollback journal (`storage::journal`) must save before the write. True by
    /// default (a file); false on a device whose contents become durable
    /// only when their owner saves them (a flash simulator, saved as an
    /// image at checkpoints, which a crash returns to whole); a hybrid
    /// answers for the tier each page lives on now.
    fn overwrites_durable(&self, pages: &[PageId]) -> Vec<bool> {
        vec![true; pages.len()]
    }

    /// The simulated clock of a simulated device, ns since it was created
    /// (never reset, unlike the counters), cheap enough to read around every
    /// phase a store or index measures; `None` on a real device (the default).
    fn sim_clock_ns(&self) -> Option<u64> {
        None
    }
}

/// A device shows as its one-line description ([`PageDevice::describe`]),
/// so that structures holding one can derive `Debug`.
impl std::fmt::Debug for dyn PageDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Methods of [`DeviceExt`] that forward to another device, inside an
/// `impl DeviceExt`: `forward_device_ext!(inner: stats, tiers)` forwards
/// `stats` and `tiers` to the field `inner`; `forward_device_ext!(*:
/// ...)` to `**self` (a pointer). The methods not named keep their
/// defaults or are written beside the macro. `all` names every method, so
/// a transparent wrapper forwards a method added later without a change.
macro_rules! forward_device_ext {
    (*: all) => {
        $crate::storage::forward_device_ext!(@all [**]);
    };
    ($field:ident: all) => {
        $crate::storage::forward_device_ext!(@all [$field]);
    };
    (@all [$($to:tt)+]) => {
        $crate::storage::forward_device_ext!(@one [$($to)+] stats);
        $crate::storage::forward_device_ext!(@one [$($to)+] reset_stats);
        $crate::storage::forward_device_ext!(@one [$($to)+] hint_tier);
        $crate::storage::forward_device_ext!(@one [$($to)+] tiers);
        $crate::storage::forward_device_ext!(@one [$($to)+] page_tier);
        $crate::storage::forward_device_ext!(@one [$($to)+] overwrites_durable);
        $crate::storage::forward_device_ext!(@one [$($to)+] sim_clock_ns);
    };
    (*: $($method:ident),+ $(,)?) => {
        $($crate::storage::forward_device_ext!(@one [**] $method);)+
    };
    ($field:ident: $($method:ident),+ $(,)?) => {
        $($crate::storage::forward_device_ext!(@one [$field] $method);)+
    };
    (@one [$($to:tt)+] stats) => {
        fn stats(&self) -> $crate::storage::DeviceStats {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).stats()
        }
    };
    (@one [$($to:tt)+] reset_stats) => {
        fn reset_stats(&self) {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).reset_stats()
        }
    };
    (@one [$($to:tt)+] hint_tier) => {
        fn hint_tier(
            &self,
            pages: &[$crate::storage::PageId],
            tier: $crate::storage::Tier,
        ) -> $crate::Result<()> {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).hint_tier(pages, tier)
        }
    };
    (@one [$($to:tt)+] tiers) => {
        fn tiers(&self) -> Option<$crate::storage::TierReport> {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).tiers()
        }
    };
    (@one [$($to:tt)+] page_tier) => {
        fn page_tier(&self, page: $crate::storage::PageId) -> Option<$crate::storage::Tier> {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).page_tier(page)
        }
    };
    (@one [$($to:tt)+] overwrites_durable) => {
        fn overwrites_durable(&self, pages: &[$crate::storage::PageId]) -> Vec<bool> {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).overwrites_durable(pages)
        }
    };
    (@one [$($to:tt)+] sim_clock_ns) => {
        fn sim_clock_ns(&self) -> Option<u64> {
            $crate::storage::forward_device_ext!(@to self [$($to)+]).sim_clock_ns()
        }
    };
    (@to $self:ident [**]) => {
        (**$self)
    };
    (@to $self:ident [$field:ident]) => {
        $self.$field
    };
}
pub(crate) use forward_device_ext;

/// Forwards every call through a pointer, so `Arc<dyn PageDevice>`,
/// `Box<dyn PageDevice>` and an `Arc` or `Box` of a concrete device are
/// devices too.
macro_rules! forward_page_device {
    ([$($generics:tt)*] $ptr:ty) => {
        impl<$($generics)*> PageDevice for $ptr {
            fn geometry(&self) -> DeviceGeometry {
                (**self).geometry()
            }
            fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
                (**self).read_batch(pages, buf)
            }
            fn read_batch_each(
                &self,
                pages: &[PageId],
                each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
            ) -> Result<()> {
                (**self).read_batch_each(pages, each)
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
            fn trim_tail(&self, pages: std::ops::Range<PageId>) -> Result<()> {
                (**self).trim_tail(pages)
            }
            fn shorten(&self, pages: PageId) -> Result<()> {
                (**self).shorten(pages)
            }
            fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
                (**self).reserve(pages)
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn path(&self) -> Option<std::path::PathBuf> {
                (**self).path()
            }
        }

        impl<$($generics)*> DeviceExt for $ptr {
            forward_device_ext!(*: all);
        }
    };
}

forward_page_device!([D: PageDevice + ?Sized] std::sync::Arc<D>);
forward_page_device!([D: PageDevice + ?Sized] Box<D>);

#[cfg(test)]
mod tests;
