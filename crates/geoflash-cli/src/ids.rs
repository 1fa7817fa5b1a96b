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
        Ok(match self.user(index, key)? {
            Some(id) => PrintedId::User(id),
            None => PrintedId::Key(key),
        })
    }

    /// The user id of `key` (`None` when the keys are the ids), as
    /// [`id`](Self::id).
    fn user(&self, index: &Index, key: u64) -> Result<Option<i64>> {
        match self {
            Ids::Keys => return Ok(None),
            Ids::InIndex => index.records().id(key),
            Ids::Loaded(map) => map.id(key),
        }
        .map(Some)
        .map_err(|e| match index.dir() {
            Some(dir) => e.in_file(dir.join(geoflash::engine::records::RECORDS_FILE)),
            None => e,
        })
    }

    /// The printed ids of `keys`, sorted, in the memory of `keys` (8 bytes
    /// an id: a query's answer is held once while it is printed).
    pub fn sorted(&self, index: &Index, mut keys: Vec<u64>) -> Result<SortedIds> {
        if matches!(self, Ids::Keys) {
            keys.sort_unstable();
            return Ok(SortedIds::Keys(keys));
        }
        for k in &mut keys {
            if let Some(id) = self.user(index, *k)? {
                *k = u64::from_ne_bytes(id.to_ne_bytes());
            }
        }
        // Same size and alignment: collected in place.
        let mut users: Vec<i64> = keys
            .into_iter()
            .map(|k| i64::from_ne_bytes(k.to_ne_bytes()))
            .collect();
        users.sort_unstable();
        Ok(SortedIds::Users(users))
    }
}

/// The printed ids of one answer, sorted ([`Ids::sorted`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SortedIds {
    /// The keys of an index keyed by its objects' ids.
    Keys(Vec<u64>),
    /// The user ids of an index the Python package wrote.
    Users(Vec<i64>),
}

impl SortedIds {
    /// How many ids.
    pub fn len(&self) -> usize {
        match self {
            SortedIds::Keys(v) => v.len(),
            SortedIds::Users(v) => v.len(),
        }
    }
}

/// The ids separated by spaces.
impl std::fmt::Display for SortedIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn spaced<T: std::fmt::Display>(
            f: &mut std::fmt::Formatter<'_>,
            ids: &[T],
        ) -> std::fmt::Result {
            for (i, id) in ids.iter().enumerate() {
                if i > 0 {
                    f.write_str(" ")?;
                }
                write!(f, "{id}")?;
            }
            Ok(())
        }
        match self {
            SortedIds::Keys(v) => spaced(f, v),
            SortedIds::Users(v) => spaced(f, v),
        }
    }
}
