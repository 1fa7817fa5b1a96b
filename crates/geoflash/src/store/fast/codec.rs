//! Payloads of the log records a [`FastStore`](super::FastStore) writes
//! (little-endian; the log frames them, see [`crate::store::log::record`]).
//!
//! | kind | payload |
//! |---|---|
//! | NEW | level `u16`, count `u32`, entries |
//! | MOD | level `u16`, count `u32`, changes |
//! | DEL | level `u16` |
//! | META | root flag `u8`, root `u64`, height `u16`, records `u64`, next page `u64`, count `u32`, reused page ids `u64` |
//! | PAGE_IMAGE | the page exactly as written to the device |
//! | CHECKPOINT | the last committed operation id `u64`, then a META payload whose page ids are the free list |
//!
//! An entry is key `u64`, rectangle 4 × `f64`, payload `u64` (48 bytes); a
//! change is a tag `u8` (0 upsert, 1 remove) then the entry (upsert) or the
//! key (remove). Decoding never panics: a short, long or malformed payload is
//! [`Error::Corrupt`](crate::Error) naming the record.
use crate::geom::Rect;
use crate::page::{Entry, Node};
use crate::storage::PageId;
use crate::store::{EntryChange, TreeMeta};
use crate::{Error, Result};

/// Bytes of an encoded entry.
pub const ENTRY_BYTES: usize = 48;

/// The tree metadata and allocation state a META record carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetaRecord {
    /// Tree metadata.
    pub meta: TreeMeta,
    /// End of the allocated page region.
    pub next_page: PageId,
    /// META: pages taken from the durable free list since the last
    /// checkpoint; CHECKPOINT: the free list.
    pub pages: Vec<PageId>,
}

fn put_entry(out: &mut Vec<u8>, e: &Entry) {
    out.extend_from_slice(&e.key.to_le_bytes());
    for v in [e.rect.min_x, e.rect.min_y, e.rect.max_x, e.rect.max_y] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&e.payload.to_le_bytes());
}

/// Payload of a NEW record.
pub fn encode_node(node: &Node) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + ENTRY_BYTES * node.entries.len());
    out.extend_from_slice(&node.level.to_le_bytes());
    out.extend_from_slice(&(node.entries.len() as u32).to_le_bytes());
    for e in &node.entries {
        put_entry(&mut out, e);
    }
    out
}

/// Payload of a MOD record.
pub fn encode_changes(level: u16, changes: &[EntryChange]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + (ENTRY_BYTES + 1) * changes.len());
    out.extend_from_slice(&level.to_le_bytes());
    out.extend_from_slice(&(changes.len() as u32).to_le_bytes());
    for c in changes {
        match c {
            EntryChange::Upsert(e) => {
                out.push(0);
                put_entry(&mut out, e);
            }
            EntryChange::Remove(k) => {
                out.push(1);
                out.extend_from_slice(&k.to_le_bytes());
            }
        }
    }
    out
}

/// Payload of a DEL record.
pub fn encode_level(level: u16) -> Vec<u8> {
    level.to_le_bytes().to_vec()
}

/// Payload of a META record.
pub fn encode_meta(m: &MetaRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(35 + 8 * m.pages.len());
    out.push(u8::from(m.meta.root.is_some()));
    out.extend_from_slice(&m.meta.root.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&m.meta.height.to_le_bytes());
    out.extend_from_slice(&m.meta.records.to_le_bytes());
    out.extend_from_slice(&m.next_page.to_le_bytes());
    out.extend_from_slice(&(m.pages.len() as u32).to_le_bytes());
    for p in &m.pages {
        out.extend_from_slice(&p.to_le_bytes());
    }
    out
}

/// Payload of a CHECKPOINT record: the last operation and the state (free list in `pages`).
pub fn encode_checkpoint(last_op: u64, state: &MetaRecord) -> Vec<u8> {
    let mut out = last_op.to_le_bytes().to_vec();
    out.extend_from_slice(&encode_meta(state));
    out
}

/// A bounds-checked cursor over a payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'a str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'a str) -> Self {
        Reader { buf, pos: 0, what }
    }

    fn bad(&self, why: &str) -> Error {
        Error::corrupt(None, format!("{}: {why}", self.what))
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self
            .pos
            .checked_add(N)
            .ok_or_else(|| self.bad("too long"))?;
        let bytes: [u8; N] = self
            .buf
            .get(self.pos..end)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| self.bad("payload too short"))?;
        self.pos = end;
        Ok(bytes)
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

    fn entry(&mut self) -> Result<Entry> {
        let key = self.u64()?;
        let (a, b, c, d) = (self.f64()?, self.f64()?, self.f64()?, self.f64()?);
        let rect = Rect::new(a, b, c, d).map_err(|e| self.bad(&format!("bad rectangle: {e}")))?;
        let payload = self.u64()?;
        Ok(Entry { key, rect, payload })
    }

    /// A count whose items take at least `min_item` bytes each (refuses
    /// counts the remaining bytes cannot hold, before allocating).
    fn count(&mut self, min_item: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        let rest = self.buf.len().saturating_sub(self.pos);
        if n.saturating_mul(min_item) > rest {
            return Err(self.bad(&format!("count {n} exceeds the payload")));
        }
        Ok(n)
    }

    fn finish(&self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(self.bad("trailing bytes after the payload"));
        }
        Ok(())
    }
}

/// Decodes a NEW payload (entries sorted by key, keys unique).
pub fn decode_node(buf: &[u8]) -> Result<Node> {
    let mut r = Reader::new(buf, "NEW record");
    let level = r.u16()?;
    let n = r.count(ENTRY_BYTES)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(r.entry()?);
    }
    r.finish()?;
    if entries
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.key >= b.key))
    {
        return Err(r.bad("entries not in ascending key order"));
    }
    Ok(Node { level, entries })
}

/// Decodes a MOD payload: the level and the changes in order.
pub fn decode_changes(buf: &[u8]) -> Result<(u16, Vec<EntryChange>)> {
    let mut r = Reader::new(buf, "MOD record");
    let level = r.u16()?;
    let n = r.count(9)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        match r.u8()? {
            0 => out.push(EntryChange::Upsert(r.entry()?)),
            1 => out.push(EntryChange::Remove(r.u64()?)),
            t => return Err(r.bad(&format!("unknown change tag {t}"))),
        }
    }
    r.finish()?;
    Ok((level, out))
}

/// Decodes a DEL payload (the level).
pub fn decode_level(buf: &[u8]) -> Result<u16> {
    let mut r = Reader::new(buf, "DEL record");
    let level = r.u16()?;
    r.finish()?;
    Ok(level)
}

/// Decodes a META payload.
pub fn decode_meta(buf: &[u8]) -> Result<MetaRecord> {
    let mut r = Reader::new(buf, "META record");
    let m = r.meta()?;
    r.finish()?;
    Ok(m)
}

/// Decodes a CHECKPOINT payload: the last operation and the state.
pub fn decode_checkpoint(buf: &[u8]) -> Result<(u64, MetaRecord)> {
    let mut r = Reader::new(buf, "CHECKPOINT record");
    let op = r.u64()?;
    let m = r.meta()?;
    r.finish()?;
    Ok((op, m))
}

impl Reader<'_> {
    fn meta(&mut self) -> Result<MetaRecord> {
        let r = self;
        let has_root = r.u8()?;
        let root = r.u64()?;
        let height = r.u16()?;
        let records = r.u64()?;
        let next_page = r.u64()?;
        let n = r.count(8)?;
        let mut reused = Vec::with_capacity(n);
        for _ in 0..n {
            reused.push(r.u64()?);
        }
        let root = match has_root {
            0 => None,
            1 => Some(root),
            f => return Err(r.bad(&format!("root flag {f}"))),
        };
        Ok(MetaRecord {
            meta: TreeMeta {
                root,
                height,
                records,
            },
            next_page,
            pages: reused,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(k: u64, x: f64) -> Entry {
        Entry {
            key: k,
            rect: Rect::new(x, x, x + 1.0, x + 2.0).unwrap(),
            payload: k * 3,
        }
    }

    #[test]
    fn round_trips() {
        let n = Node {
            level: 2,
            entries: vec![e(1, 0.5), e(7, -3.0)],
        };
        assert_eq!(decode_node(&encode_node(&n)).unwrap(), n);
        let ch = vec![EntryChange::Upsert(e(4, 1.0)), EntryChange::Remove(9)];
        assert_eq!(decode_changes(&encode_changes(3, &ch)).unwrap(), (3, ch));
        assert_eq!(decode_level(&encode_level(5)).unwrap(), 5);
        let m = MetaRecord {
            meta: TreeMeta {
                root: Some(4),
                height: 2,
                records: 99,
            },
            next_page: 17,
            pages: vec![3, 5],
        };
        assert_eq!(decode_meta(&encode_meta(&m)).unwrap(), m);
        let m0 = MetaRecord::default();
        assert_eq!(decode_meta(&encode_meta(&m0)).unwrap(), m0);
        assert_eq!(
            decode_checkpoint(&encode_checkpoint(42, &m)).unwrap(),
            (42, m)
        );
        assert!(decode_checkpoint(&[1, 2]).is_err());
    }

    #[test]
    fn malformed_payloads_are_errors() {
        let n = Node {
            level: 0,
            entries: vec![e(7, 0.0), e(1, 0.0)],
        };
        let err = decode_node(&encode_node(&n)).unwrap_err();
        assert!(err.to_string().contains("ascending"), "{err}");
        let mut b = encode_changes(0, &[EntryChange::Remove(1)]);
        b[6] = 9;
        assert!(decode_changes(&b).unwrap_err().to_string().contains("tag"));
        let mut b = encode_level(1);
        b.push(0);
        assert!(decode_level(&b)
            .unwrap_err()
            .to_string()
            .contains("trailing"));
        // A count far beyond the bytes is refused before allocating.
        let mut b = encode_node(&Node {
            level: 0,
            entries: vec![],
        });
        b[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_node(&b).is_err());
        let mut b = encode_meta(&MetaRecord::default());
        b[0] = 2;
        assert!(decode_meta(&b).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]
        #[test]
        fn decoding_arbitrary_bytes_never_panics(b in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_node(&b);
            let _ = decode_changes(&b);
            let _ = decode_level(&b);
            let _ = decode_meta(&b);
            let _ = decode_checkpoint(&b);
        }
    }
}
