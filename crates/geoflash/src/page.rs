//! The on-device node format. Types here; the codec (encode/decode with
//! header, checksum and validation) is being written.
use serde::{Deserialize, Serialize};

use crate::geom::Rect;

/// An entry of a node: a key and its rectangle, plus a small fixed payload.
///
/// In internal nodes `key` is a child page id; in leaves it is a record key.
/// Keys are unique within a node. `payload` is 0 unless an index needs it
/// (the Hilbert R-tree stores the largest Hilbert value of an internal entry).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Child page id (internal node) or record key (leaf).
    pub key: u64,
    /// Minimum bounding rectangle.
    pub rect: Rect,
    /// Index-specific payload, 0 when unused.
    pub payload: u64,
}

/// A decoded node: its level (leaves are level 0) and its entries in
/// ascending key order (the canonical order every store returns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Height of the node: 0 for leaves.
    pub level: u16,
    /// Entries, sorted by ascending key.
    pub entries: Vec<Entry>,
}
