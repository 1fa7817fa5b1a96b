//! The checks every node store applies to what an index hands it, with one
//! wording: a node fits a page, an entry carries a payload only where the
//! store keeps payloads, a page id names a live node.
use super::alloc::PageAllocator;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::{Error, Result};

/// `n` entries fit a `page_size`-byte page holding at most `max` entries
/// (with payloads when `with_payload`).
pub(crate) fn check_len(n: usize, max: usize, page_size: usize, with_payload: bool) -> Result<()> {
    if n > max {
        return Err(Error::invalid(format!(
            "node with {n} entries does not fit a {page_size}-byte page (at most {max} entries{})",
            if with_payload { " with payload" } else { "" }
        )));
    }
    Ok(())
}

/// Entry `e` has no payload unless the store keeps payloads.
#[inline]
pub(crate) fn check_payload(e: &Entry, with_payload: bool) -> Result<()> {
    if !with_payload && e.payload != 0 {
        return Err(Error::invalid(format!(
            "entry with key {} has payload {} but the store keeps no payloads",
            e.key, e.payload
        )));
    }
    Ok(())
}

/// Page `id` holds a live node of a store whose pages `alloc` hands out.
pub(crate) fn check_node_page(alloc: &PageAllocator, id: PageId) -> Result<()> {
    if alloc.is_allocated(id) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "no node at page {id}: {}",
        if id == 0 {
            "page 0 is the store header"
        } else {
            "no live node was created there"
        }
    )))
}
