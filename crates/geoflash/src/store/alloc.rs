//! The one page-allocation policy of every store.
//!
//! A new page is **the lowest-numbered page on the free list**, else **the
//! page at the end of the allocated region** (`next_page`, which then grows
//! by one). A deleted page joins the free list only once its deletion is
//! durable on the device ([`PageAllocator::make_durable`], called by a store
//! after the metadata that no longer references the page is synced); until
//! then it is *pending* and never handed out, so a crash cannot leave a
//! durable tree pointing at a page that was reused.
//!
//! Consequences other parts rely on: a build by insertion on an empty store
//! allocates consecutive pages in creation order (FAST's flushing units and
//! eFIND's sequential distances are computed on these ids); reuse prefers
//! low pages, keeping the file compact.
use std::collections::BTreeSet;

use crate::storage::PageId;
use crate::{Error, Result};

/// Free-list and end-of-device page allocation; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageAllocator {
    first: PageId,
    next: PageId,
    capacity: u64,
    free: BTreeSet<PageId>,
    pending: BTreeSet<PageId>,
}

impl PageAllocator {
    /// An allocator for a fresh device region: pages `first..capacity`, none allocated.
    pub fn new(first: PageId, capacity: u64) -> Result<Self> {
        if first >= capacity {
            return Err(Error::invalid(format!(
                "a device of {capacity} pages has no room for pages from {first} on"
            )));
        }
        Ok(PageAllocator {
            first,
            next: first,
            capacity,
            free: BTreeSet::new(),
            pending: BTreeSet::new(),
        })
    }

    /// An allocator restored from durable state: pages `first..next` were
    /// handed out, of which `free` are free (durably deleted).
    pub fn restore(
        first: PageId,
        next: PageId,
        free: impl IntoIterator<Item = PageId>,
        capacity: u64,
    ) -> Result<Self> {
        let mut a = Self::new(first, capacity)?;
        if next < first || next > capacity {
            return Err(Error::corrupt(
                None,
                format!("next page {next} outside the device's pages {first}..={capacity}"),
            ));
        }
        a.next = next;
        for id in free {
            if id < first || id >= next {
                return Err(Error::corrupt(
                    None,
                    format!("free page {id} outside the allocated pages {first}..{next}"),
                ));
            }
            if !a.free.insert(id) {
                return Err(Error::corrupt(
                    None,
                    format!("page {id} appears twice on the free list"),
                ));
            }
        }
        Ok(a)
    }

    /// Allocates a page: the lowest durable free page, else the end of the
    /// allocated region. [`Error::DeviceFull`] when neither exists.
    pub fn allocate(&mut self) -> Result<PageId> {
        if let Some(id) = self.free.pop_first() {
            return Ok(id);
        }
        if self.next >= self.capacity {
            return Err(Error::DeviceFull(format!(
                "all {} pages of the device are in use ({} more wait for a checkpoint to be reusable)",
                self.capacity,
                self.pending.len()
            )));
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }

    /// Returns a page: it becomes reusable after the next [`make_durable`](Self::make_durable).
    /// Releasing a page that is not allocated is an error.
    pub fn release(&mut self, id: PageId) -> Result<()> {
        if !self.is_allocated(id) {
            return Err(Error::invalid(format!(
                "page {id} cannot be freed: it is not an allocated page"
            )));
        }
        self.pending.insert(id);
        Ok(())
    }

    /// Declares every pending deletion durable: those pages become reusable.
    /// Returns them in ascending order.
    pub fn make_durable(&mut self) -> Vec<PageId> {
        let moved: Vec<PageId> = std::mem::take(&mut self.pending).into_iter().collect();
        self.free.extend(moved.iter().copied());
        moved
    }

    /// Whether `id` is handed out and not freed (nor pending).
    pub fn is_allocated(&self, id: PageId) -> bool {
        id >= self.first
            && id < self.next
            && !self.free.contains(&id)
            && !self.pending.contains(&id)
    }

    /// Whether `id` was freed but the deletion is not durable yet.
    pub fn is_pending(&self, id: PageId) -> bool {
        self.pending.contains(&id)
    }

    /// End of the allocated region: every page handed out is below it.
    pub fn next_page(&self) -> PageId {
        self.next
    }

    /// The device capacity in pages.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Durably free pages, ascending.
    pub fn free_pages(&self) -> impl Iterator<Item = PageId> + '_ {
        self.free.iter().copied()
    }

    /// Free and pending pages together, ascending: the free list as it will
    /// be once the pending deletions are durable.
    pub fn free_after_durable(&self) -> Vec<PageId> {
        self.free.union(&self.pending).copied().collect()
    }

    /// Number of pages allocated and not freed (a page whose release is
    /// pending until the next durable point counts as freed).
    pub fn allocated_count(&self) -> u64 {
        (self.next - self.first) - self.free.len() as u64 - self.pending.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_then_free_list_after_durability() {
        let mut a = PageAllocator::new(1, 10).unwrap();
        assert_eq!(a.allocate().unwrap(), 1);
        assert_eq!(a.allocate().unwrap(), 2);
        assert_eq!(a.allocate().unwrap(), 3);
        a.release(2).unwrap();
        a.release(1).unwrap();
        assert!(a.release(2).is_err(), "double free");
        assert!(a.release(0).is_err() && a.release(7).is_err());
        // Not reusable before durability.
        assert_eq!(a.allocate().unwrap(), 4);
        assert!(a.is_pending(1) && !a.is_allocated(1));
        assert_eq!(a.free_after_durable(), vec![1, 2]);
        assert_eq!(a.make_durable(), vec![1, 2]);
        // Lowest free page first.
        assert_eq!(a.allocate().unwrap(), 1);
        assert_eq!(a.allocate().unwrap(), 2);
        assert_eq!(a.allocate().unwrap(), 5);
        assert_eq!(a.allocated_count(), 5);
    }

    #[test]
    fn full_device_and_restore_checks() {
        let mut a = PageAllocator::new(1, 3).unwrap();
        a.allocate().unwrap();
        a.allocate().unwrap();
        assert!(matches!(a.allocate(), Err(Error::DeviceFull(_))));
        assert!(PageAllocator::new(5, 5).is_err());
        let r = PageAllocator::restore(1, 6, [3, 5], 10).unwrap();
        assert_eq!(r.free_pages().collect::<Vec<_>>(), vec![3, 5]);
        assert_eq!(r.allocated_count(), 3);
        assert!(PageAllocator::restore(1, 6, [6], 10).is_err());
        assert!(PageAllocator::restore(1, 6, [3, 3], 10).is_err());
        assert!(PageAllocator::restore(1, 11, [], 10).is_err());
    }
}
