//! A record map older than its tree (issue 44, item 4): the map
//! (`pyrecords.dat`) is written whole before each checkpoint and is not in
//! the engine's log, so a Python writer killed after its last checkpoint
//! leaves a tree that the log brought further than the map (the entries it
//! inserted since have record keys the map never saw; those it deleted are
//! still live in the map). Opening such an index used to be refused, even
//! read-only and after `geoflash recover`. Now it returns the index to the
//! map's state, which is the last checkpoint of the Python writer:
//!
//! - opened for writing, the tree is repaired in place: the entries whose
//!   record keys the map does not know as live are deleted, the keys the
//!   map knows but the tree no longer holds are marked deleted in the map,
//!   and both are checkpointed;
//! - opened read-only, nothing is written: the entries the map knows are
//!   copied into an index in memory (an STR bulk load), which the session
//!   reads instead.
//!
//! Either way a `RuntimeWarning` says what was dropped. Issue 43 moves the
//! map into the engine's log, which will make this repair unnecessary.
use geoflash_engine::engine::{BulkMethod, Error, Index, IndexOptions, Predicate, Result};
use geoflash_engine::geom::{Rect, MAX_COORD};

use crate::records::Records;

/// What [`reconcile`] did.
pub struct Reconciled {
    /// The index to use (the same one, or a copy in memory when read-only).
    pub index: Index,
    /// Entries of the tree the map did not know (dropped).
    pub unknown_entries: u64,
    /// Keys the map knew but the tree no longer held (marked deleted).
    pub missing_keys: u64,
}

/// Entries of an index: (record key, rectangle).
type Entries = Vec<(u64, Rect)>;

/// Every entry of `index`.
fn entries(index: &Index) -> Result<Entries> {
    let all = Rect::new(-MAX_COORD, -MAX_COORD, MAX_COORD, MAX_COORD)?;
    Ok(index
        .query(all, Predicate::Intersects)?
        .hits
        .into_iter()
        .map(|h| (h.id, h.rect))
        .collect())
}

/// Brings `index` and `records` back to agreement when the tree may hold
/// other entries than the map knows as live (another number of them, or a
/// restart that replayed operations; see the module docs); nothing changes
/// when they agree. `writable`: repair in place (then `save` writes the map) rather
/// than copy into memory.
pub fn reconcile(
    index: Index,
    records: &mut Records,
    writable: bool,
    save: impl FnOnce(&Index, &Records) -> Result<()>,
) -> Result<Reconciled> {
    let all = entries(&index)?;
    let held: std::collections::HashSet<u64> = all.iter().map(|(k, _)| *k).collect();
    let (kept, unknown): (Entries, Entries) =
        all.into_iter().partition(|(k, _)| records.is_live(*k));
    let missing: Vec<u64> = records.live_keys().filter(|k| !held.contains(k)).collect();
    for &k in &missing {
        records.remove(k);
    }
    let index = if unknown.is_empty() && missing.is_empty() {
        index
    } else if writable {
        let mut index = index;
        for &(k, r) in &unknown {
            index.delete(k, r)?;
        }
        save(&index, records)?;
        index.checkpoint()?;
        index
    } else {
        if index.objects().is_some() {
            return Err(Error::corrupt(
                None,
                "the id map is older than the index and the index stores geometries: \
                 open it for writing once (geoflash.Index(path)) to return it to its last checkpoint",
            ));
        }
        let opts = IndexOptions {
            page_size: index.manifest().page_size,
            device: "mem:".parse()?,
            ..IndexOptions::default()
        };
        Index::bulk_load(None, &opts, kept, BulkMethod::Str, 1.0)?
    };
    Ok(Reconciled {
        index,
        unknown_entries: unknown.len() as u64,
        missing_keys: missing.len() as u64,
    })
}
