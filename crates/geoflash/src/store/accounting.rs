//! The one memory-accounting function every store uses, so that a buffer of
//! "512 KB" means the same thing for the plain store's node cache, FAST's
//! modifications table and eFIND's write and read buffers.
//!
//! Definitions (deterministic: they depend only on entry and change counts,
//! never on allocator behaviour or `Vec` capacities):
//! - a decoded node costs [`NODE_OVERHEAD`] bytes plus `size_of::<Entry>()`
//!   (48 bytes) per entry — see [`node_bytes`];
//! - buffered changes cost [`PAGE_CHANGES_OVERHEAD`] bytes per page that has
//!   changes plus [`CHANGE_BYTES`] per entry-level change — see
//!   [`changes_bytes`].
//!
//! The overheads stand for what a real implementation pays besides the
//! entries: the `Node` value, its `Arc` counters, the hash-table slot with
//! its key and the policy's bookkeeping for a node; the per-page record
//! (page id, height, counters, status) and the ordered-map node around each
//! change for buffered modifications.
use std::mem::size_of;

use crate::page::{Entry, Node};
use crate::storage::PageId;

use super::EntryChange;

/// Fixed bytes charged per decoded node besides its entries.
pub const NODE_OVERHEAD: usize =
    size_of::<Node>() + 2 * size_of::<usize>() + size_of::<PageId>() + 4 * size_of::<u64>();

/// Bytes charged per buffered entry-level change.
pub const CHANGE_BYTES: usize = size_of::<EntryChange>() + 3 * size_of::<usize>();

/// Fixed bytes charged per page that has buffered changes.
pub const PAGE_CHANGES_OVERHEAD: usize = size_of::<PageId>() + 6 * size_of::<u64>();

/// Bytes of a decoded node with `entries` entries.
pub fn node_bytes_for(entries: usize) -> usize {
    NODE_OVERHEAD.saturating_add(entries.saturating_mul(size_of::<Entry>()))
}

/// Bytes of a decoded node.
pub fn node_bytes(node: &Node) -> usize {
    node_bytes_for(node.entries.len())
}

/// Bytes of `changes` buffered entry-level changes spread over `pages` pages.
pub fn changes_bytes(pages: usize, changes: usize) -> usize {
    pages
        .saturating_mul(PAGE_CHANGES_OVERHEAD)
        .saturating_add(changes.saturating_mul(CHANGE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;

    #[test]
    fn grows_with_entries_only() {
        let e = Entry {
            key: 1,
            rect: Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(),
            payload: 0,
        };
        let mut n = Node {
            level: 0,
            entries: Vec::with_capacity(100),
        };
        assert_eq!(node_bytes(&n), NODE_OVERHEAD);
        n.entries.push(e);
        n.entries.push(e);
        assert_eq!(node_bytes(&n), NODE_OVERHEAD + 2 * size_of::<Entry>());
        assert_eq!(node_bytes(&n), node_bytes_for(2));
        assert_eq!(changes_bytes(0, 0), 0);
        assert_eq!(
            changes_bytes(2, 3),
            2 * PAGE_CHANGES_OVERHEAD + 3 * CHANGE_BYTES
        );
        assert_eq!(node_bytes_for(usize::MAX), usize::MAX);
    }
}
