//! The payloads of the eFIND store's log records (opaque bytes to the log,
//! little-endian throughout). Every decoder validates and returns an error
//! naming the record; none panics.
//!
//! | record | page | payload |
//! |---|---|---|
//! | NEW | the node | level `u16`, count `u32`, entries |
//! | MOD | the node | level `u16`, count `u32`, changes: tag `u8` (1 upsert, 0 remove), key `u64`, for an upsert the rest of the entry |
//! | DEL | the node | level `u16` |
//! | META | 0 | root `u64` (`u64::MAX` = none), height `u16`, records `u64`, next page `u64` |
//! | PAGE_IMAGE | the page | the page's bytes exactly as written in place |
//! | CHECKPOINT | 0 | last operation `u64`, root, height, records, next page, free-page count `u64`, free pages |
//!
//! An entry is its key `u64`, the rectangle as four `f64` (min x, min y,
//! max x, max y) and its payload `u64`.
use crate::geom::Rect;
use crate::page::Entry;
use crate::storage::PageId;
use crate::store::log::Record;
use crate::store::{EntryChange, OpId, TreeMeta};
use crate::{Error, Result};

const NO_ROOT: u64 = u64::MAX;

/// Tree metadata and the end of the allocated pages, as META records carry them.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaState {
    /// The tree metadata.
    pub meta: TreeMeta,
    /// Next page id never allocated.
    pub next_page: PageId,
}

/// The state a CHECKPOINT record carries: everything restart needs besides the pages.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointState {
    /// The newest operation the checkpoint covers.
    pub last_op: OpId,
    /// Tree metadata and next page.
    pub meta: MetaState,
    /// Free pages (their deletions are durable with the checkpoint).
    pub free: Vec<PageId>,
}

fn put_entry(out: &mut Vec<u8>, e: &Entry) {
    out.extend_from_slice(&e.key.to_le_bytes());
    for v in [e.rect.min_x, e.rect.min_y, e.rect.max_x, e.rect.max_y] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&e.payload.to_le_bytes());
}

fn put_meta(out: &mut Vec<u8>, m: &MetaState) {
    out.extend_from_slice(&m.meta.root.unwrap_or(NO_ROOT).to_le_bytes());
    out.extend_from_slice(&m.meta.height.to_le_bytes());
    out.extend_from_slice(&m.meta.records.to_le_bytes());
    out.extend_from_slice(&m.next_page.to_le_bytes());
}

/// Payload of a NEW record.
pub fn encode_new(level: u16, entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + entries.len() * 48);
    out.extend_from_slice(&level.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        put_entry(&mut out, e);
    }
    out
}

/// Payload of a MOD record.
pub fn encode_mod(level: u16, changes: &[EntryChange]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + changes.len() * 49);
    out.extend_from_slice(&level.to_le_bytes());
    out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for c in changes {
        match c {
            EntryChange::Upsert(e) => {
                out.push(1);
                put_entry(&mut out, e);
            }
            EntryChange::Remove(k) => {
                out.push(0);
                out.extend_from_slice(&k.to_le_bytes());
            }
        }
    }
    out
}

/// Payload of a DEL record.
pub fn encode_del(level: u16) -> Vec<u8> {
    level.to_le_bytes().to_vec()
}

/// Payload of a META record.
pub fn encode_meta(m: &MetaState) -> Vec<u8> {
    let mut out = Vec::with_capacity(26);
    put_meta(&mut out, m);
    out
}

/// Payload of a CHECKPOINT record.
pub fn encode_checkpoint(c: &CheckpointState) -> Vec<u8> {
    let mut out = Vec::with_capacity(42 + 8 * c.free.len());
    out.extend_from_slice(&c.last_op.to_le_bytes());
    put_meta(&mut out, &c.meta);
    out.extend_from_slice(&(c.free.len() as u64).to_le_bytes());
    for p in &c.free {
        out.extend_from_slice(&p.to_le_bytes());
    }
    out
}

/// A bounds-checked reader over a record's payload whose errors name the record.
struct Reader<'a> {
    buf: &'a [u8],
    off: usize,
    rec: &'a Record,
}

impl<'a> Reader<'a> {
    fn new(rec: &'a Record) -> Self {
        Reader {
            buf: &rec.payload,
            off: 0,
            rec,
        }
    }

    fn bad(&self, what: &str) -> Error {
        Error::corrupt(
            None,
            format!(
                "log record {} ({:?} of page {}): {what}",
                self.rec.lsn, self.rec.kind, self.rec.page
            ),
        )
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self
            .off
            .checked_add(N)
            .ok_or_else(|| self.bad("truncated"))?;
        let s = self
            .buf
            .get(self.off..end)
            .ok_or_else(|| self.bad("payload truncated"))?;
        self.off = end;
        s.try_into().map_err(|_| self.bad("payload truncated"))
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }

    fn entry_rest(&mut self, key: u64) -> Result<Entry> {
        let (a, b, c, d) = (self.f64()?, self.f64()?, self.f64()?, self.f64()?);
        let rect = Rect::new(a, b, c, d).map_err(|e| self.bad(&format!("bad rectangle: {e}")))?;
        let payload = self.u64()?;
        Ok(Entry { key, rect, payload })
    }

    fn count(&mut self, min_item: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        let left = self.buf.len().saturating_sub(self.off);
        if n.saturating_mul(min_item) > left {
            return Err(self.bad(&format!("announces {n} items but holds {left} bytes")));
        }
        Ok(n)
    }

    fn meta(&mut self) -> Result<MetaState> {
        let root = self.u64()?;
        let height = self.u16()?;
        let records = self.u64()?;
        let next_page = self.u64()?;
        Ok(MetaState {
            meta: TreeMeta {
                root: (root != NO_ROOT).then_some(root),
                height,
                records,
            },
            next_page,
        })
    }

    fn end(self) -> Result<()> {
        if self.off != self.buf.len() {
            return Err(self.bad("trailing bytes after the payload"));
        }
        Ok(())
    }
}

/// Decodes a NEW payload: the level and the entries.
pub fn decode_new(rec: &Record) -> Result<(u16, Vec<Entry>)> {
    let mut r = Reader::new(rec);
    let level = r.u16()?;
    let n = r.count(48)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key = r.u64()?;
        entries.push(r.entry_rest(key)?);
    }
    r.end()?;
    Ok((level, entries))
}

/// Decodes a MOD payload: the level and the changes.
pub fn decode_mod(rec: &Record) -> Result<(u16, Vec<EntryChange>)> {
    let mut r = Reader::new(rec);
    let level = r.u16()?;
    let n = r.count(9)?;
    let mut changes = Vec::with_capacity(n);
    for _ in 0..n {
        let tag = r.u8()?;
        let key = r.u64()?;
        changes.push(match tag {
            1 => EntryChange::Upsert(r.entry_rest(key)?),
            0 => EntryChange::Remove(key),
            t => return Err(r.bad(&format!("unknown change tag {t}"))),
        });
    }
    r.end()?;
    Ok((level, changes))
}

/// Decodes a DEL payload: the level.
pub fn decode_del(rec: &Record) -> Result<u16> {
    let mut r = Reader::new(rec);
    let level = r.u16()?;
    r.end()?;
    Ok(level)
}

/// Decodes a META payload.
pub fn decode_meta(rec: &Record) -> Result<MetaState> {
    let mut r = Reader::new(rec);
    let m = r.meta()?;
    r.end()?;
    Ok(m)
}

/// Decodes a CHECKPOINT payload.
pub fn decode_checkpoint(rec: &Record) -> Result<CheckpointState> {
    let mut r = Reader::new(rec);
    let last_op = r.u64()?;
    let meta = r.meta()?;
    let n = r.u64()?;
    let left = r.buf.len().saturating_sub(r.off) as u64;
    if n.saturating_mul(8) != left {
        return Err(r.bad(&format!("announces {n} free pages but holds {left} bytes")));
    }
    let mut free = Vec::with_capacity(n as usize);
    for _ in 0..n {
        free.push(r.u64()?);
    }
    r.end()?;
    Ok(CheckpointState {
        last_op,
        meta,
        free,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::log::RecordKind;

    fn e(k: u64) -> Entry {
        Entry {
            key: k,
            rect: Rect::new(k as f64, 0.0, k as f64 + 1.0, 2.0).unwrap(),
            payload: k * 3,
        }
    }

    fn rec(kind: RecordKind, payload: Vec<u8>) -> Record {
        Record::new(kind, 1, 9, payload)
    }

    #[test]
    fn payloads_round_trip_and_damage_is_an_error() {
        let entries = vec![e(1), e(5)];
        let r = rec(RecordKind::New, encode_new(2, &entries));
        assert_eq!(decode_new(&r).unwrap(), (2, entries));
        let changes = vec![EntryChange::Upsert(e(3)), EntryChange::Remove(8)];
        let r = rec(RecordKind::Mod, encode_mod(1, &changes));
        assert_eq!(decode_mod(&r).unwrap(), (1, changes));
        assert_eq!(decode_del(&rec(RecordKind::Del, encode_del(4))).unwrap(), 4);
        let m = MetaState {
            meta: TreeMeta {
                root: Some(3),
                height: 2,
                records: 10,
            },
            next_page: 12,
        };
        assert_eq!(
            decode_meta(&rec(RecordKind::Meta, encode_meta(&m))).unwrap(),
            m
        );
        let none = MetaState {
            meta: TreeMeta::default(),
            next_page: 1,
        };
        assert_eq!(
            decode_meta(&rec(RecordKind::Meta, encode_meta(&none))).unwrap(),
            none
        );
        let c = CheckpointState {
            last_op: 77,
            meta: m,
            free: vec![4, 6],
        };
        let cr = rec(RecordKind::Checkpoint, encode_checkpoint(&c));
        assert_eq!(decode_checkpoint(&cr).unwrap(), c);
        // Truncations and trailing bytes are errors, never panics.
        for r in [
            rec(RecordKind::New, encode_new(2, &[e(1)])),
            rec(RecordKind::Mod, encode_mod(1, &[EntryChange::Upsert(e(1))])),
            cr,
        ] {
            for cut in 0..r.payload.len() {
                let mut t = r.clone();
                t.payload.truncate(cut);
                assert!(decode_new(&t).is_err() || r.kind != RecordKind::New);
                assert!(decode_mod(&t).is_err() || r.kind != RecordKind::Mod);
                assert!(decode_checkpoint(&t).is_err() || r.kind != RecordKind::Checkpoint);
            }
            let mut t = r.clone();
            t.payload.push(0);
            assert!(decode_new(&t).is_err());
            assert!(decode_checkpoint(&t).is_err() || decode_mod(&t).is_err());
        }
        let mut bad = encode_mod(0, &[EntryChange::Remove(1)]);
        bad[6] = 7;
        let err = decode_mod(&rec(RecordKind::Mod, bad))
            .unwrap_err()
            .to_string();
        assert!(err.contains("tag 7"), "{err}");
    }
}
