//! Bringing the record map and the tree back to agreement after a crash.
//!
//! The map (`pyrecords.dat` and its log `pyrecords.log`, see
//! `geoflash_engine::engine::records`) knows the id and object of every key
//! ever allocated; the tree (recovered by its own log or rollback journal)
//! decides which keys are live. After a crash they can disagree in three
//! ways, each only about operations after the last commit:
//!
//! - the tree holds a key the map never logged (a power loss between the
//!   engine's log sync and the map's): the entry is dropped, as its
//!   insertion was never acknowledged;
//! - the map knows as live a key the tree does not hold (an insertion
//!   logged in the map but not recovered by the tree, or a deletion the
//!   map's log missed): the key is marked deleted;
//! - the tree holds a key the map logged as deleted (a deletion that the
//!   map's log made durable but the tree did not): the key is brought
//!   back, with its id and object.
//!
//! Opened for writing, the tree is repaired in place (then checkpointed by
//! the caller); opened read-only, nothing is written: the entries kept are
//! copied into an index in memory (an STR bulk load), which the session
//! reads instead.
use geoflash_engine::engine::records::Records;
use geoflash_engine::engine::{
    BulkMethod, Error, Index, IndexOptions, MemorySpec, Predicate, Result, StoreSpec,
};
use geoflash_engine::geom::{Rect, MAX_COORD};

/// What [`reconcile`] did.
pub struct Reconciled {
    /// The index to use (the same one, or a copy in memory when read-only).
    pub index: Index,
    /// Entries of the tree whose keys the map never knew (dropped).
    pub unknown_entries: u64,
    /// Keys the map knew as live but the tree no longer held (marked deleted).
    pub missing_keys: u64,
    /// Keys the map knew as deleted but the tree still held (brought back).
    pub revived_keys: u64,
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

/// Brings `index` and `records` back to agreement (see the module docs);
/// nothing changes when they agree. `writable`: repair in place rather
/// than copy into memory.
pub fn reconcile(index: Index, records: &mut Records, writable: bool) -> Result<Reconciled> {
    let all = entries(&index)?;
    let held: std::collections::HashSet<u64> = all.iter().map(|(k, _)| *k).collect();
    let (kept, unknown): (Entries, Entries) = all.into_iter().partition(|(k, _)| records.knows(*k));
    let missing: Vec<u64> = records.live_keys().filter(|k| !held.contains(k)).collect();
    for &k in &missing {
        records.remove(k);
    }
    let revived = kept.iter().filter(|(k, _)| records.resurrect(*k)).count() as u64;
    records.prune_objects();
    let index = if unknown.is_empty() {
        index
    } else if writable {
        let mut index = index;
        for &(k, r) in &unknown {
            index.delete(k, r)?;
        }
        index
    } else {
        if index.objects().is_some() {
            return Err(Error::corrupt(
                None,
                "the tree holds entries the id map never logged and the index stores geometries: \
                 open it for writing once (geoflash.Index(path)) to repair it",
            ));
        }
        // The copy keeps its nodes decoded, once (the memory store).
        let opts = IndexOptions {
            page_size: index.manifest().page_size,
            device: "mem:".parse()?,
            store: StoreSpec::Memory(MemorySpec {}),
            ..IndexOptions::default()
        };
        Index::bulk_load(None, &opts, kept, BulkMethod::Str, 1.0)?
    };
    Ok(Reconciled {
        index,
        unknown_entries: unknown.len() as u64,
        missing_keys: missing.len() as u64,
        revived_keys: revived,
    })
}
