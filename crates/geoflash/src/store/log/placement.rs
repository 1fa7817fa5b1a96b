//! Where a store's log lives: [`LogPlacement`], the page range the eFIND
//! and FAST stores both take at creation and at open, and
//! [`LogPlacement::for_capacity`], the one way both size it from their
//! configuration ([`EfindConfig::log_placement`](crate::store::efind::EfindConfig::log_placement),
//! [`FastConfig::log_placement`](crate::store::fast::FastConfig::log_placement)).
//!
//! A log lives either
//! - on the node device, in its **last** pages: node pages are allocated
//!   below the range, page 0 is the store's identity page; or
//! - on a separate device (`log.dat` next to `pages.dat`), in its **first**
//!   pages ([`LogPlacement::head_of`]) or all of them ([`LogPlacement::whole`]).
//!
//! Each store records the range in its identity page at creation and
//! refuses at open a placement naming another range
//! ([`LogPlacement::check_recorded`]).
use std::sync::Arc;

use super::{
    auto_log_capacity, cap_to_shared_device, LogFormat, LogLayout, LOG_CAPACITY_PER_BUFFER,
    PAPERS_LOG_CAPACITY, SUPERBLOCK_PAGES,
};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

/// The bytes of records a log region holds, as a store's configuration
/// sizes it: given by the user, or automatic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSize {
    /// Bytes of records per region.
    pub bytes: u64,
    /// The configuration gave 0, so `bytes` is [`auto_log_capacity`]'s.
    pub automatic: bool,
}

impl LogSize {
    /// `capacity` bytes, or when it is 0 the automatic capacity of a log
    /// of `format` beside a buffer of `buffer_bytes` bytes
    /// ([`auto_log_capacity`]).
    pub fn of(capacity: u64, format: LogFormat, buffer_bytes: usize) -> LogSize {
        match capacity {
            0 => LogSize {
                bytes: auto_log_capacity(format, buffer_bytes),
                automatic: true,
            },
            bytes => LogSize {
                bytes,
                automatic: false,
            },
        }
    }
}

/// Node pages a log sized by [`LogPlacement::for_capacity`] leaves at
/// least on the node device it shares (page 0 included).
pub const MIN_NODE_PAGES: u64 = 16;

/// The error for a log of `capacity` bytes (`pages` pages) that a log
/// device of `device_pages` pages of `page_size` bytes cannot hold. An
/// `automatic` capacity above the papers' follows the memory budget
/// ([`auto_log_capacity`](super::auto_log_capacity)): the message then
/// talks about the buffer that asked for it, and says how large a buffer
/// fits, rather than about a log the user never sized.
fn too_large_for_log_device(
    capacity: u64,
    pages: u64,
    device_pages: u64,
    page_size: usize,
    automatic: bool,
) -> Error {
    if automatic && capacity > PAPERS_LOG_CAPACITY {
        let region = device_pages.saturating_sub(SUPERBLOCK_PAGES) / 2;
        let fits = region.saturating_mul(super::record::data_per_page(page_size) as u64);
        let buffer = fits / LOG_CAPACITY_PER_BUFFER;
        return Error::invalid(format!(
            "the buffer (memory budget) is too large for the store's log: the log follows the \
             buffer ({LOG_CAPACITY_PER_BUFFER} x the buffer, {capacity} bytes, {pages} pages) but \
             the log device holds {device_pages} pages of {page_size} bytes; give a buffer of at \
             most {buffer} bytes ({} MiB), or the log a capacity of its own \
             (--log-capacity, log_capacity)",
            buffer >> 20
        ));
    }
    Error::invalid(format!(
        "a log of {capacity} bytes needs {pages} pages but the log device has {device_pages}"
    ))
}

/// Checks that an automatic log of `capacity` bytes (one the store sized
/// from its buffer, [`auto_log_capacity`](super::auto_log_capacity)) fits
/// `log_device`, its own file; the error talks about the buffer. For front
/// ends that write the resolved capacity down before the store places the
/// log (the index directory's manifest).
pub fn check_automatic_fits(capacity: u64, log_device: &dyn PageDevice) -> Result<()> {
    let ps = log_device.page_size();
    let pages = LogLayout::pages_for_capacity(capacity, ps)?;
    if log_device.capacity() < pages {
        return Err(too_large_for_log_device(
            capacity,
            pages,
            log_device.capacity(),
            ps,
            true,
        ));
    }
    Ok(())
}

/// Where a log lives: pages `first_page .. first_page + pages` of `device`.
/// When `device` is the node device itself, the range must be its tail:
/// node pages are allocated below `first_page`.
#[derive(Clone, Debug)]
pub struct LogPlacement {
    /// The device holding the log (the node device or a separate one).
    pub device: Arc<dyn PageDevice>,
    /// First page of the log's range.
    pub first_page: PageId,
    /// Pages of the range.
    pub pages: u64,
}

impl LogPlacement {
    /// The last `pages` pages of `device` (the node device: nodes below).
    pub fn tail_of(device: &Arc<dyn PageDevice>, pages: u64) -> Result<Self> {
        let cap = device.capacity();
        if pages.saturating_add(2) > cap {
            return Err(Error::invalid(format!(
                "a log of {pages} pages leaves no room for nodes on a device of {cap} pages"
            )));
        }
        Ok(LogPlacement {
            device: Arc::clone(device),
            first_page: cap - pages,
            pages,
        })
    }

    /// The first `pages` pages of a separate log device (`log.dat`).
    pub fn head_of(device: Arc<dyn PageDevice>, pages: u64) -> Result<Self> {
        let cap = device.capacity();
        if cap < pages {
            return Err(Error::invalid(format!(
                "a log of {pages} pages does not fit the log device's {cap} pages"
            )));
        }
        Ok(LogPlacement {
            device,
            first_page: 0,
            pages,
        })
    }

    #[cfg(test)]
    /// The whole of a separate log device (`log.dat`).
    pub fn whole(device: Arc<dyn PageDevice>) -> Self {
        let pages = device.capacity();
        LogPlacement {
            device,
            first_page: 0,
            pages,
        }
    }

    /// The log of a store on the node device `nodes` holding `size.bytes`
    /// bytes of records per region ([`LogLayout::pages_for_capacity`]):
    /// the first pages of `log_device` when given, else the last pages of
    /// `nodes`. An automatic size sharing the node device is first
    /// capped to a quarter of it ([`cap_to_shared_device`]), and the range
    /// leaves at least [`MIN_NODE_PAGES`] pages below it.
    pub fn for_capacity(
        nodes: &Arc<dyn PageDevice>,
        log_device: Option<Arc<dyn PageDevice>>,
        size: LogSize,
    ) -> Result<Self> {
        let LogSize {
            bytes: capacity,
            automatic,
        } = size;
        let ps = nodes.page_size();
        match log_device {
            Some(ld) => {
                check_page_sizes(ld.as_ref(), nodes.as_ref())?;
                let pages = LogLayout::pages_for_capacity(capacity, ps)?;
                if ld.capacity() < pages {
                    return Err(too_large_for_log_device(
                        capacity,
                        pages,
                        ld.capacity(),
                        ps,
                        automatic,
                    ));
                }
                Self::head_of(ld, pages)
            }
            None => {
                let cap = nodes.capacity();
                let capacity = if automatic {
                    cap_to_shared_device(capacity, cap.saturating_mul(ps as u64))
                } else {
                    capacity
                };
                let pages = LogLayout::pages_for_capacity(capacity, ps)?;
                if cap < pages.saturating_add(MIN_NODE_PAGES) {
                    return Err(Error::invalid(format!(
                        "a log of {capacity} bytes needs {pages} pages at the end of the device, which has only {cap} pages"
                    )));
                }
                Self::tail_of(nodes, pages)
            }
        }
    }

    /// Whether the log lives on `nodes` (the node device) itself.
    pub fn same_device(&self, nodes: &Arc<dyn PageDevice>) -> bool {
        std::ptr::eq(
            Arc::as_ptr(&self.device) as *const u8,
            Arc::as_ptr(nodes) as *const u8,
        )
    }

    /// The page after the range.
    pub fn end(&self) -> PageId {
        self.first_page.saturating_add(self.pages)
    }

    /// Checks the placement for a store on the node device `nodes` (the
    /// same page size, the range on its device, the tail of `nodes` above
    /// page 1 when it shares it) and returns how many pages nodes may use:
    /// those below the range on a shared device, else all of `nodes`.
    pub fn node_capacity(&self, nodes: &Arc<dyn PageDevice>) -> Result<u64> {
        check_page_sizes(self.device.as_ref(), nodes.as_ref())?;
        LogLayout::on_device(self.device.as_ref(), self.first_page, self.pages)?;
        if !self.same_device(nodes) {
            return Ok(nodes.capacity());
        }
        if self.end() != nodes.capacity() || self.first_page < 2 {
            return Err(Error::invalid(
                "a log on the node device must occupy its last pages, above page 1",
            ));
        }
        Ok(self.first_page)
    }

    /// Refuses the placement unless it names the range `first_page ..
    /// first_page + pages` a store recorded at its creation.
    pub fn check_recorded(&self, first_page: PageId, pages: u64) -> Result<()> {
        if (first_page, pages) == (self.first_page, self.pages) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "the store's log is at pages {first_page}..{} but pages {}..{} were given",
            first_page.saturating_add(pages),
            self.first_page,
            self.end()
        )))
    }
}

/// Refuses a log device whose page size is not the node device's.
fn check_page_sizes(log: &dyn PageDevice, nodes: &dyn PageDevice) -> Result<()> {
    if log.page_size() == nodes.page_size() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "the log device has {}-byte pages but the node device {}-byte pages",
        log.page_size(),
        nodes.page_size()
    )))
}
