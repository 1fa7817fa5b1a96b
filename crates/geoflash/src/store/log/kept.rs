//! The records a restart kept, as the store replays them: held in memory
//! when the first pass held the region ([`super::passes::HELD_BYTES`]),
//! else read again from the log each time they are walked, so that the
//! memory of a restart does not grow with the log.
//!
//! A writable restart has just written the survivors to the other region
//! ([`super::Log::open_checked`]): they are read from there, up to the
//! largest LSN of the recovered log (records appended later are not
//! theirs). The read-only reader writes nothing: it reads its region
//! again and judges each record as restart's second pass does
//! ([`super::survival`]).
use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{Error, Result};

use super::cursor::reread;
use super::reader::in_device_file;
use super::record::Record;
use super::superblock::Superblock;
use super::survival::Survival;
use super::{LogLayout, Lsn, SharedDevice};

/// The surviving records of a restart, oldest first (original LSNs). See
/// the [module docs](self).
#[derive(Clone, Default)]
pub struct KeptRecords {
    source: Source,
    len: u64,
    /// Log pages read by walks of a streamed source.
    pages_read: Arc<AtomicU64>,
}

#[derive(Clone)]
enum Source {
    Held(Vec<Record>),
    /// A region that holds exactly the survivors, up to `last_lsn`.
    Rewritten(Arc<Region>, Lsn),
    /// A region judged again at every walk.
    Judged(Arc<Region>, Arc<Survival>),
}

impl Default for Source {
    fn default() -> Self {
        Source::Held(Vec::new())
    }
}

/// A live region of a log, as a superblock lays it out.
pub(super) struct Region {
    pub dev: SharedDevice,
    pub layout: LogLayout,
    pub sb: Superblock,
}

impl Region {
    /// Its records, oldest first, read from the device; the pages read are
    /// added to `pages_read`, errors name the log's file.
    fn records<'a>(&'a self, pages_read: &'a AtomicU64) -> impl Iterator<Item = Result<Record>> + 'a {
        reread(&self.dev, &self.layout, &self.sb, |n| {
            pages_read.fetch_add(n, Ordering::Relaxed);
        })
        .map(|r| r.map_err(|e| in_device_file(&self.dev, e)))
    }
}

/// A walk of the survivors.
pub type KeptIter<'a> = Box<dyn Iterator<Item = Result<Cow<'a, Record>>> + 'a>;

impl KeptRecords {
    /// Survivors held in memory.
    pub fn held(records: Vec<Record>) -> Self {
        KeptRecords {
            len: records.len() as u64,
            source: Source::Held(records),
            pages_read: Arc::default(),
        }
    }

    /// The `len` survivors `survival` keeps of `region`, judged again at
    /// every walk.
    pub(super) fn judged(region: Region, survival: Survival, len: u64) -> Self {
        KeptRecords {
            source: Source::Judged(Arc::new(region), Arc::new(survival)),
            len,
            pages_read: Arc::default(),
        }
    }

    /// The same survivors, now the records of `region` up to `last_lsn`
    /// (restart wrote them there), unless they are held.
    pub(super) fn rewritten_to(self, region: Region, last_lsn: Lsn) -> Self {
        match self.source {
            Source::Held(_) => self,
            _ => KeptRecords {
                source: Source::Rewritten(Arc::new(region), last_lsn),
                ..self
            },
        }
    }

    /// Number of survivors.
    pub fn count(&self) -> u64 {
        self.len
    }

    /// Log pages the walks of streamed survivors have read so far.
    pub fn pages_read(&self) -> u64 {
        self.pages_read.load(Ordering::Relaxed)
    }

    /// The survivors, oldest first: borrowed when held, else decoded from
    /// the log as its pages are read (a read or damage is an error naming
    /// the log's file).
    pub fn iter(&self) -> KeptIter<'_> {
        let read = &*self.pages_read;
        let walk: KeptIter<'_> = match &self.source {
            Source::Held(records) => Box::new(records.iter().map(|r| Ok(Cow::Borrowed(r)))),
            Source::Rewritten(region, last_lsn) => {
                let last_lsn = *last_lsn;
                Box::new(
                    region
                        .records(read)
                        .take_while(move |r| r.as_ref().map_or(true, |r| r.lsn <= last_lsn))
                        .map(|r| r.map(Cow::Owned)),
                )
            }
            Source::Judged(region, survival) => {
                let mut keep = survival.survivors();
                Box::new(
                    region
                        .records(read)
                        .filter(move |r| r.as_ref().map_or(true, |r| keep.keep(r)))
                        .map(|r| r.map(Cow::Owned)),
                )
            }
        };
        Box::new(Counted {
            walk,
            expect: self.len,
            seen: 0,
        })
    }

    /// Whether any survivor satisfies `f` (a walk that stops at the first).
    pub fn any(&self, mut f: impl FnMut(&Record) -> bool) -> Result<bool> {
        for rec in self.iter() {
            if f(&*rec?) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every survivor, read into memory (tests: a read error fails them).
    #[cfg(test)]
    pub fn all(&self) -> Vec<Record> {
        self.iter()
            .map(|r| r.map(Cow::into_owned))
            .collect::<Result<_>>()
            .expect("reading the surviving records")
    }
}

/// Tests compare survivors by their records, however they are kept.
#[cfg(test)]
impl PartialEq for KeptRecords {
    fn eq(&self, other: &Self) -> bool {
        self.all() == other.all()
    }
}

#[cfg(test)]
impl PartialEq<Vec<Record>> for KeptRecords {
    fn eq(&self, other: &Vec<Record>) -> bool {
        self.all() == *other
    }
}

/// A walk that ends in an error unless it yields exactly the survivors
/// restart counted: a region written again since (a compaction of the
/// writable log, or a writer's restart under the read-only reader) never
/// passes for a shorter or longer list of survivors.
struct Counted<'a> {
    walk: KeptIter<'a>,
    expect: u64,
    seen: u64,
}

impl<'a> Iterator for Counted<'a> {
    type Item = Result<Cow<'a, Record>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.seen > self.expect {
            return None;
        }
        match self.walk.next() {
            Some(Ok(rec)) if self.seen < self.expect => {
                self.seen += 1;
                Some(Ok(rec))
            }
            Some(Err(e)) => {
                self.seen = self.expect + 1;
                Some(Err(e))
            }
            None if self.seen == self.expect => None,
            _ => {
                let expect = self.expect;
                self.seen = expect + 1;
                Some(Err(Error::invalid(format!(
                    "the log changed while restart's {expect} surviving records were being read from it"
                ))))
            }
        }
    }
}

impl fmt::Debug for KeptRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::Held(records) => f.debug_tuple("KeptRecords::Held").field(records).finish(),
            Source::Rewritten(_, last_lsn) => f
                .debug_struct("KeptRecords::Rewritten")
                .field("len", &self.len)
                .field("last_lsn", last_lsn)
                .finish(),
            Source::Judged(..) => f
                .debug_struct("KeptRecords::Judged")
                .field("len", &self.len)
                .finish(),
        }
    }
}
