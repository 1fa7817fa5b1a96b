//! The ids the query commands print. An index the command line or the
//! Rust API wrote is keyed by its objects' ids; one the Python package
//! wrote is keyed by that package's record map (`pyrecords.dat`: user ids,
//! which may be negative or repeated, and their objects), so `query` and
//! `knn` print the user ids Python would return, read from that map.
use geoflash::engine::records::Records;
use geoflash::{Index, Result};
use serde::Serialize;

/// An id as printed: an index's own key, or a Python user id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum PrintedId {
    /// The key of an index keyed by its objects' ids.
    Key(u64),
    /// The user id of an index the Python package wrote.
    User(i64),
}

impl std::fmt::Display for PrintedId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrintedId::Key(k) => write!(f, "{k}"),
            PrintedId::User(id) => write!(f, "{id}"),
        }
    }
}

/// How the keys of one open index become [`PrintedId`]s.
pub enum Ids {
    /// The keys are the ids.
    Keys,
    /// The map in the store's log, which the index read at open.
    InIndex,
    /// The map with its own log, read from the index directory.
    Loaded(Records),
}

impl Ids {
    /// The translation for `index`: its front end's map when it has one
    /// (read from `pyrecords.dat` and `pyrecords.log` when the index did
    /// not read it itself).
    pub fn of(index: &Index) -> Result<Ids> {
        if !index.has_front_end_records() {
            return Ok(Ids::Keys);
        }
        if index.records_in_log() {
            return Ok(Ids::InIndex);
        }
        match index.dir() {
            Some(dir) => Ok(Ids::Loaded(Records::load(dir)?.0)),
            None => Ok(Ids::Keys),
        }
    }

    /// The printed id of `key`; an error naming `pyrecords.dat` when the
    /// map does not know it (a map older than the tree, which opening the
    /// index from Python repairs).
    pub fn id(&self, index: &Index, key: u64) -> Result<PrintedId> {
        match self {
            Ids::Keys => Ok(PrintedId::Key(key)),
            Ids::InIndex => index.records().id(key).map(PrintedId::User),
            Ids::Loaded(map) => map.id(key).map(PrintedId::User),
        }
        .map_err(|e| match index.dir() {
            Some(dir) => e.in_file(dir.join(geoflash::engine::records::RECORDS_FILE)),
            None => e,
        })
    }

    /// The printed ids of `keys`, sorted.
    pub fn sorted(&self, index: &Index, keys: impl Iterator<Item = u64>) -> Result<Vec<PrintedId>> {
        let mut ids = keys
            .map(|k| self.id(index, k))
            .collect::<Result<Vec<_>>>()?;
        ids.sort_unstable();
        Ok(ids)
    }
}
