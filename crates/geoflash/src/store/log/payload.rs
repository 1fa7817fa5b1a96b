//! The payloads of the stores' log records: one codec for eFIND and FAST.
//!
//! The log frames records and understands only COMMIT, FLUSH and
//! PAGE_IMAGE (see [`super::record`]); the payloads of NEW, MOD, DEL,
//! META and CHECKPOINT are the stores', and both stores encode them here.
//! Every decoder validates and returns [`Error::Corrupt`] naming the record
//! (LSN, kind, page); none panics.
//!
//! # Records
//!
//! | record | page | payload |
//! |---|---|---|
//! | NEW | the node | level, count, entries (ascending keys) |
//! | MOD | the node | level, count, changes |
//! | DEL | the node | level |
//! | META | 0 | the common META part; FAST adds its *reused-page* list |
//! | CHECKPOINT | 0 | last operation, the common META part, the free list |
//! | PAGE_IMAGE | the page | the page's bytes as written in place (not encoded here) |
//!
//! - An **entry** is its key, the rectangle as four `f64` (min x, min y,
//!   max x, max y, little-endian) and its payload.
//! - A **change** is a tag byte, **1 upsert** (then the entry) or **0
//!   remove** (then the key).
//! - **With entry references** (logs of superblock version 5, written by
//!   [`PayloadCodec::encode_new_refs`] and [`PayloadCodec::encode_mod_refs`]
//!   and read only by the scan that resolves them, see
//!   [`super::entry_refs`]), each NEW entry and MOD change is an *item*:
//!   one varint of `zigzag(key − previous item's key) × 4 + tag` (the
//!   first item's previous key is 0), tag **1** followed by the content
//!   (min x and min y as `f64`, then the bits of max x XOR those of min x
//!   and the same for y as varints, then the payload varint), **2** (the
//!   entry last logged with this level and key) or **0** (a removal, MOD
//!   only). The scan rewrites them in the layout above.
//! - The **common META part** is the root (none is encoded as
//!   `u64::MAX` in [`Fixed`](PayloadEncoding::Fixed), as 0 with the root
//!   plus one otherwise in [`Varint`](PayloadEncoding::Varint)), the
//!   height, the record count and the next page never allocated.
//! - **Store-specific parts.** FAST's META appends the pages taken from the
//!   durable free list since the last checkpoint (a count, then the page
//!   ids: [`PayloadCodec::encode_meta_reused`]); eFIND's META has nothing
//!   after the common part ([`PayloadCodec::encode_meta`]). Both stores'
//!   CHECKPOINT carries the free list (a count, then the page ids).
//!
//! # Integer encodings
//!
//! [`PayloadEncoding::Fixed`] writes levels and heights as `u16`, entry and
//! change counts as `u32`, keys, payloads, page ids, page-list counts,
//! operation ids and record counts as `u64`, all little-endian (the layout of
//! the per-change and first-image log formats). [`PayloadEncoding::Varint`]
//! writes every one of those integers as an unsigned LEB128 varint
//! ([`integer_encoding`]); tags stay one byte and rectangles four `f64`.
//! A log's format decides its encoding
//! ([`LogFormat::payload_encoding`](super::LogFormat::payload_encoding)).
//!
//! # Payloads written before this codec (codec version 0)
//!
//! Before codec version 1 ([`super::PAYLOAD_CODEC_VERSION`], kept in the log
//! superblock) each store had its own codec. eFIND's was byte for byte this
//! one in the fixed encoding. FAST's differed: MOD tags were swapped (0
//! upsert, 1 remove), and META and CHECKPOINT encoded the root as a flag
//! byte and a `u64` and the page list count as a `u32`. Those META and
//! CHECKPOINT layouts are 31 + 8n and 39 + 8n bytes long (n pages), while
//! every fixed META and CHECKPOINT of this codec is 26, 34 + 8n or
//! 42 + 8n bytes long: the length tells them apart without doubt, and the
//! decoders of the fixed encoding read both
//! ([`LEGACY_FAST_REMAINDER`]) for a FAST store created before codec
//! version 1 ([`PayloadCodec::reading_legacy_fast`]). A
//! MOD record does not tell, so a FAST store refuses to replay MOD records
//! of a log whose superblock says codec version 0 (see
//! [`FastStore::open`](crate::store::fast::FastStore::open)).
use integer_encoding::VarInt;
use serde::{Deserialize, Serialize};

use crate::geom::Rect;
use crate::page::Entry;
use crate::storage::PageId;
use crate::store::{EntryChange, OpId, TreeMeta};
use crate::{Error, Result};

use super::entry_refs::{EntryMemo, Resolver};
use super::record::{unzigzag, zigzag};
use super::{Log, Lsn, Record, RecordKind};

/// How the integers of a payload are written. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PayloadEncoding {
    /// Little-endian `u16`/`u32`/`u64` (the per-change and first-image formats).
    Fixed,
    /// Unsigned LEB128 varints.
    Varint,
}

/// A fixed-encoding META or CHECKPOINT payload whose length leaves this
/// remainder modulo 8 has FAST's layout from before codec version 1 (see
/// the [module docs](self)).
pub const LEGACY_FAST_REMAINDER: usize = 7;

/// Bytes of the fixed encoding's common META part.
const META_FIXED: usize = 8 + 2 + 8 + 8;
/// "No root" in the fixed encoding.
const NO_ROOT: u64 = u64::MAX;
/// Tag of an upsert change.
const TAG_UPSERT: u8 = 1;
/// Tag of a remove change.
const TAG_REMOVE: u8 = 0;
/// Tag of an entry named by its key: the content last logged with its
/// level and key (logs with entry references, see [`super::entry_refs`]).
const TAG_SAME: u8 = 2;

/// Tree metadata and the end of the allocated pages: the common META part.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetaState {
    /// The tree metadata.
    pub meta: TreeMeta,
    /// Next page id never allocated.
    pub next_page: PageId,
}

/// What a CHECKPOINT record carries: everything restart needs besides the pages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckpointState {
    /// The newest operation the checkpoint covers.
    pub last_op: OpId,
    /// Tree metadata and next page.
    pub meta: MetaState,
    /// Free pages (their deletions are durable with the checkpoint).
    pub free: Vec<PageId>,
    /// The front end's generation: its snapshot holding every CLIENT
    /// frame logged before this checkpoint (see [`super::client`]);
    /// written after the free list when set (logs of superblock versions
    /// 8 and 9; at least 1), absent (`None`) in the payloads of older logs.
    pub client_generation: Option<u64>,
}

/// The payload codec of one log: its [`PayloadEncoding`], and whether it
/// reads FAST's META and CHECKPOINT layouts from before codec version 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadCodec {
    encoding: PayloadEncoding,
    legacy_fast: bool,
}

/// Appends integers in one encoding.
struct Writer {
    out: Vec<u8>,
    enc: PayloadEncoding,
}

impl Writer {
    fn new(enc: PayloadEncoding, capacity: usize) -> Self {
        Writer {
            out: Vec::with_capacity(capacity),
            enc,
        }
    }

    fn var(&mut self, v: u64) {
        let mut b = [0u8; 10];
        let n = v.encode_var(&mut b);
        self.out.extend_from_slice(b.get(..n).unwrap_or(&b));
    }

    fn u16(&mut self, v: u16) {
        match self.enc {
            PayloadEncoding::Fixed => self.out.extend_from_slice(&v.to_le_bytes()),
            PayloadEncoding::Varint => self.var(u64::from(v)),
        }
    }

    fn u32(&mut self, v: u32) {
        match self.enc {
            PayloadEncoding::Fixed => self.out.extend_from_slice(&v.to_le_bytes()),
            PayloadEncoding::Varint => self.var(u64::from(v)),
        }
    }

    fn u64(&mut self, v: u64) {
        match self.enc {
            PayloadEncoding::Fixed => self.out.extend_from_slice(&v.to_le_bytes()),
            PayloadEncoding::Varint => self.var(v),
        }
    }

    fn count(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    fn entry_rest(&mut self, e: &Entry) {
        for v in [
            e.rect.min_x(),
            e.rect.min_y(),
            e.rect.max_x(),
            e.rect.max_y(),
        ] {
            self.out.extend_from_slice(&v.to_le_bytes());
        }
        self.u64(e.payload);
    }

    fn entry(&mut self, e: &Entry) {
        self.u64(e.key);
        self.entry_rest(e);
    }

    /// One item of a NEW or MOD payload with entry references (see
    /// [`PayloadCodec::encode_new_refs`]): the head, then for a full entry
    /// its content.
    fn ref_item(&mut self, prev_key: &mut u64, tag: u8, key: u64) {
        let delta = zigzag(key.wrapping_sub(*prev_key));
        *prev_key = key;
        let mut v = (u128::from(delta) << 2) | u128::from(tag);
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.out.push(byte);
                break;
            }
            self.out.push(byte | 0x80);
        }
    }

    /// An entry's content with entry references: the minima as `f64`, each
    /// maximum as the varint of its bits XOR its minimum's (a small box
    /// shares its high bits, a point is one zero byte), the payload.
    fn ref_content(&mut self, e: &Entry) {
        let (x0, y0) = (e.rect.min_x(), e.rect.min_y());
        self.out.extend_from_slice(&x0.to_le_bytes());
        self.out.extend_from_slice(&y0.to_le_bytes());
        self.var(e.rect.max_x().to_bits() ^ x0.to_bits());
        self.var(e.rect.max_y().to_bits() ^ y0.to_bits());
        self.var(e.payload);
    }

    /// An entry of a log with entry references: its key alone when `memo`
    /// says its content was last logged the same, else in full (always in
    /// full without a memo).
    fn entry_or_ref(
        &mut self,
        prev_key: &mut u64,
        level: u16,
        e: &Entry,
        memo: Option<&mut EntryMemo>,
    ) {
        if memo.is_some_and(|m| m.note(level, e)) {
            self.ref_item(prev_key, TAG_SAME, e.key);
        } else {
            self.ref_item(prev_key, TAG_UPSERT, e.key);
            self.ref_content(e);
        }
    }

    fn meta(&mut self, m: &MetaState) {
        match self.enc {
            PayloadEncoding::Fixed => self.u64(m.meta.root.unwrap_or(NO_ROOT)),
            PayloadEncoding::Varint => self.u64(m.meta.root.map_or(0, |r| r.saturating_add(1))),
        }
        self.u16(m.meta.height);
        self.u64(m.meta.records);
        self.u64(m.next_page);
    }

    fn pages(&mut self, pages: &[PageId]) {
        self.u64(pages.len() as u64);
        for &p in pages {
            self.u64(p);
        }
    }
}

/// A bounds-checked reader over a record's payload whose errors name the record.
struct Reader<'a> {
    buf: &'a [u8],
    off: usize,
    rec: &'a Record,
    enc: PayloadEncoding,
    /// Reads FAST's META/CHECKPOINT layouts from before codec version 1.
    legacy_fast: bool,
}

impl<'a> Reader<'a> {
    fn new(rec: &'a Record, enc: PayloadEncoding, legacy_fast: bool) -> Self {
        Reader {
            buf: &rec.payload,
            off: 0,
            rec,
            enc,
            legacy_fast,
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

    fn left(&self) -> usize {
        self.buf.len().saturating_sub(self.off)
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self
            .off
            .checked_add(N)
            .ok_or_else(|| self.bad("payload truncated"))?;
        let s: [u8; N] = self
            .buf
            .get(self.off..end)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| self.bad("payload truncated"))?;
        self.off = end;
        Ok(s)
    }

    fn var(&mut self) -> Result<u64> {
        let rest = self.buf.get(self.off..).unwrap_or(&[]);
        let (v, n) =
            u64::decode_var(rest).ok_or_else(|| self.bad("truncated or overlong varint"))?;
        self.off += n;
        Ok(v)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        match self.enc {
            PayloadEncoding::Fixed => Ok(u16::from_le_bytes(self.take()?)),
            PayloadEncoding::Varint => {
                let v = self.var()?;
                u16::try_from(v).map_err(|_| self.bad(&format!("{v} does not fit 16 bits")))
            }
        }
    }

    fn u32(&mut self) -> Result<u32> {
        match self.enc {
            PayloadEncoding::Fixed => Ok(u32::from_le_bytes(self.take()?)),
            PayloadEncoding::Varint => {
                let v = self.var()?;
                u32::try_from(v).map_err(|_| self.bad(&format!("{v} does not fit 32 bits")))
            }
        }
    }

    fn u64(&mut self) -> Result<u64> {
        match self.enc {
            PayloadEncoding::Fixed => Ok(u64::from_le_bytes(self.take()?)),
            PayloadEncoding::Varint => self.var(),
        }
    }

    fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.take()?))
    }

    /// The head of an item with entry references: its tag and key (see
    /// [`Writer::ref_item`]).
    fn ref_item(&mut self, prev_key: &mut u64) -> Result<(u8, u64)> {
        let mut v: u128 = 0;
        let mut shift = 0u32;
        loop {
            let byte = self.u8()?;
            if shift > 126 || (shift == 126 && byte > 0x03) {
                return Err(self.bad("overlong item head"));
            }
            v |= u128::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        let tag = (v & 0x3) as u8;
        let delta = u64::try_from(v >> 2).map_err(|_| self.bad("item head out of range"))?;
        let key = prev_key.wrapping_add(unzigzag(delta));
        *prev_key = key;
        Ok((tag, key))
    }

    /// An entry's content with entry references (see [`Writer::ref_content`]).
    fn ref_content(&mut self, key: u64) -> Result<Entry> {
        let (x0, y0) = (self.f64()?, self.f64()?);
        let x1 = f64::from_bits(self.var()? ^ x0.to_bits());
        let y1 = f64::from_bits(self.var()? ^ y0.to_bits());
        let rect = Rect::new(x0, y0, x1, y1).map_err(|e| self.bad(&format!("bad rectangle: {e}")))?;
        let payload = self.var()?;
        Ok(Entry { key, rect, payload })
    }

    /// A count of items of at least `min_item` bytes each, refused before
    /// allocating when the rest of the payload cannot hold them.
    fn check_count(&self, n: u64, min_item: usize) -> Result<usize> {
        let left = self.left();
        match usize::try_from(n) {
            Ok(n) if n.saturating_mul(min_item) <= left => Ok(n),
            _ => Err(self.bad(&format!("announces {n} items but holds {left} bytes"))),
        }
    }

    fn entry_rest(&mut self, key: u64) -> Result<Entry> {
        let (a, b, c, d) = (self.f64()?, self.f64()?, self.f64()?, self.f64()?);
        let rect = Rect::new(a, b, c, d).map_err(|e| self.bad(&format!("bad rectangle: {e}")))?;
        let payload = self.u64()?;
        Ok(Entry { key, rect, payload })
    }

    fn meta(&mut self) -> Result<MetaState> {
        let root = self.u64()?;
        let root = match self.enc {
            PayloadEncoding::Fixed => (root != NO_ROOT).then_some(root),
            PayloadEncoding::Varint => root.checked_sub(1),
        };
        let height = self.u16()?;
        let records = self.u64()?;
        let next_page = self.u64()?;
        Ok(MetaState {
            meta: TreeMeta {
                root,
                height,
                records,
            },
            next_page,
        })
    }

    fn pages(&mut self) -> Result<Vec<PageId>> {
        let n = self.u64()?;
        let n = self.check_count(n, self.min_int())?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.u64()?);
        }
        Ok(out)
    }

    /// Bytes of the smallest encoded `u64`.
    fn min_int(&self) -> usize {
        match self.enc {
            PayloadEncoding::Fixed => 8,
            PayloadEncoding::Varint => 1,
        }
    }

    /// FAST's META part before codec version 1: root flag `u8`, root, height,
    /// records, next page, page count `u32`, page ids (fixed encoding).
    fn legacy_fast_meta(&mut self) -> Result<(MetaState, Vec<PageId>)> {
        let has_root = self.u8()?;
        let root = self.u64()?;
        let height = self.u16()?;
        let records = self.u64()?;
        let next_page = self.u64()?;
        let n = self.u32()?;
        let n = self.check_count(u64::from(n), 8)?;
        let mut pages = Vec::with_capacity(n);
        for _ in 0..n {
            pages.push(self.u64()?);
        }
        let root = match has_root {
            0 => None,
            1 => Some(root),
            f => return Err(self.bad(&format!("root flag {f}"))),
        };
        let meta = TreeMeta {
            root,
            height,
            records,
        };
        Ok((MetaState { meta, next_page }, pages))
    }

    /// True when a fixed META/CHECKPOINT payload has FAST's layout before codec version 1.
    fn is_legacy_fast(&self) -> bool {
        self.legacy_fast
            && self.enc == PayloadEncoding::Fixed
            && self.buf.len() % 8 == LEGACY_FAST_REMAINDER
    }

    fn end(self) -> Result<()> {
        if self.off != self.buf.len() {
            return Err(self.bad("trailing bytes after the payload"));
        }
        Ok(())
    }
}

impl PayloadCodec {
    /// The codec of `encoding`.
    pub const fn new(encoding: PayloadEncoding) -> Self {
        PayloadCodec {
            encoding,
            legacy_fast: false,
        }
    }

    /// The same codec, also reading FAST's fixed META and CHECKPOINT
    /// layouts from before codec version 1 when `legacy` (for the log of a
    /// FAST store created before it; see the [module docs](self)). Off, a
    /// payload of such a length is an error like any malformed one; on, a
    /// payload cut short could pass for the older layout, which the log's
    /// record checksum rules out.
    pub const fn reading_legacy_fast(mut self, legacy: bool) -> Self {
        self.legacy_fast = legacy;
        self
    }

    #[cfg(test)]
    /// Its integer encoding.
    pub fn encoding(self) -> PayloadEncoding {
        self.encoding
    }

    fn writer(self, capacity: usize) -> Writer {
        Writer::new(self.encoding, capacity)
    }

    /// Payload of a NEW record: the node's level and entries (ascending keys).
    pub fn encode_new(self, level: u16, entries: &[Entry]) -> Vec<u8> {
        let mut w = self.writer(6 + entries.len() * 48);
        w.u16(level);
        w.count(entries.len());
        for e in entries {
            w.entry(e);
        }
        w.out
    }

    /// Payload of a MOD record: the node's level and the changes in order.
    pub fn encode_mod(self, level: u16, changes: &[EntryChange]) -> Vec<u8> {
        let mut w = self.writer(6 + changes.len() * 49);
        w.u16(level);
        w.count(changes.len());
        for c in changes {
            match c {
                EntryChange::Upsert(e) => {
                    w.out.push(TAG_UPSERT);
                    w.entry(e);
                }
                EntryChange::Remove(k) => {
                    w.out.push(TAG_REMOVE);
                    w.u64(*k);
                }
            }
        }
        w.out
    }

    /// Payload of a DEL record: the node's level.
    pub fn encode_del(self, level: u16) -> Vec<u8> {
        let mut w = self.writer(2);
        w.u16(level);
        w.out
    }

    /// Payload of an eFIND META record: the common part only.
    pub fn encode_meta(self, m: &MetaState) -> Vec<u8> {
        let mut w = self.writer(META_FIXED);
        w.meta(m);
        w.out
    }

    /// Payload of a FAST META record: the common part, then the pages taken
    /// from the durable free list since the last checkpoint.
    pub fn encode_meta_reused(self, m: &MetaState, reused: &[PageId]) -> Vec<u8> {
        let mut w = self.writer(META_FIXED + 8 + 8 * reused.len());
        w.meta(m);
        w.pages(reused);
        w.out
    }

    /// Payload of a CHECKPOINT record: last operation, common META part, free list.
    pub fn encode_checkpoint(self, c: &CheckpointState) -> Vec<u8> {
        let mut w = self.writer(8 + META_FIXED + 8 + 8 * c.free.len());
        w.u64(c.last_op);
        w.meta(&c.meta);
        w.pages(&c.free);
        if let Some(g) = c.client_generation {
            w.u64(g);
        }
        w.out
    }

    /// Payload of a NEW record of a log with entry references: the level,
    /// the count, then per entry a tag, **1** and the entry, or **2** and
    /// the key of an entry whose content `memo` says was last logged the
    /// same (see [`super::entry_refs`]).
    pub fn encode_new_refs(
        self,
        level: u16,
        entries: &[Entry],
        mut memo: Option<&mut EntryMemo>,
    ) -> Vec<u8> {
        let mut w = self.writer(6 + entries.len() * 49);
        w.u16(level);
        w.count(entries.len());
        let mut prev = 0;
        for e in entries {
            w.entry_or_ref(&mut prev, level, e, memo.as_deref_mut());
        }
        w.out
    }

    /// Payload of a MOD record of a log with entry references: as
    /// [`Self::encode_mod`], an upsert whose content `memo` says was last
    /// logged the same being tag **2** and the key.
    pub fn encode_mod_refs(
        self,
        level: u16,
        changes: &[EntryChange],
        mut memo: Option<&mut EntryMemo>,
    ) -> Vec<u8> {
        let mut w = self.writer(6 + changes.len() * 49);
        w.u16(level);
        w.count(changes.len());
        let mut prev = 0;
        for c in changes {
            match c {
                EntryChange::Upsert(e) => {
                    w.entry_or_ref(&mut prev, level, e, memo.as_deref_mut())
                }
                EntryChange::Remove(k) => w.ref_item(&mut prev, TAG_REMOVE, *k),
            }
        }
        w.out
    }

    /// The payload of a NEW or MOD record of a log with entry references,
    /// written without them (as [`Self::encode_new`] or
    /// [`Self::encode_mod`] write it): every reference replaced by the entry
    /// `resolver` last saw with its level and key, every entry learnt.
    pub(super) fn resolve_refs(self, rec: &Record, resolver: &mut Resolver) -> Result<Vec<u8>> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let level = r.u16()?;
        let n = r.u32()?;
        // An item is at least its one-byte head.
        let n = r.check_count(u64::from(n), 1)?;
        let is_new = rec.kind == RecordKind::New;
        let mut w = self.writer(6 + n * 49);
        w.u16(level);
        w.count(n);
        let mut last_key: Option<u64> = None;
        let mut prev = 0;
        for _ in 0..n {
            let (tag, key) = r.ref_item(&mut prev)?;
            if is_new && last_key.is_some_and(|p| p >= key) {
                return Err(r.bad("entries not in ascending key order"));
            }
            last_key = Some(key);
            let entry = match tag {
                TAG_UPSERT => {
                    let e = r.ref_content(key)?;
                    resolver.learn(level, e);
                    Some(e)
                }
                TAG_SAME => Some(resolver.lookup(level, key).ok_or_else(|| {
                    r.bad(&format!(
                        "names entry {key} of level {level}, which no earlier record of the log holds"
                    ))
                })?),
                TAG_REMOVE if !is_new => None,
                t => return Err(r.bad(&format!("unknown entry tag {t}"))),
            };
            match (entry, is_new) {
                (Some(e), true) => w.entry(&e),
                (Some(e), false) => {
                    w.out.push(TAG_UPSERT);
                    w.entry(&e);
                }
                (None, _) => {
                    w.out.push(TAG_REMOVE);
                    w.u64(key);
                }
            }
        }
        r.end()?;
        Ok(w.out)
    }

    /// Decodes a NEW payload: the level and the entries (keys must ascend).
    pub fn decode_new(self, rec: &Record) -> Result<(u16, Vec<Entry>)> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let level = r.u16()?;
        let n = r.u32()?;
        let n = r.check_count(u64::from(n), 32 + 2 * r.min_int())?;
        let mut entries: Vec<Entry> = Vec::with_capacity(n);
        for _ in 0..n {
            let key = r.u64()?;
            if entries.last().is_some_and(|p| p.key >= key) {
                return Err(r.bad("entries not in ascending key order"));
            }
            entries.push(r.entry_rest(key)?);
        }
        r.end()?;
        Ok((level, entries))
    }

    /// Decodes a MOD payload: the level and the changes in order.
    pub fn decode_mod(self, rec: &Record) -> Result<(u16, Vec<EntryChange>)> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let level = r.u16()?;
        let n = r.u32()?;
        let n = r.check_count(u64::from(n), 1 + r.min_int())?;
        let mut changes = Vec::with_capacity(n);
        for _ in 0..n {
            let tag = r.u8()?;
            let key = r.u64()?;
            changes.push(match tag {
                TAG_UPSERT => EntryChange::Upsert(r.entry_rest(key)?),
                TAG_REMOVE => EntryChange::Remove(key),
                t => return Err(r.bad(&format!("unknown change tag {t}"))),
            });
        }
        r.end()?;
        Ok((level, changes))
    }

    /// Decodes a DEL payload: the level.
    pub fn decode_del(self, rec: &Record) -> Result<u16> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let level = r.u16()?;
        r.end()?;
        Ok(level)
    }

    /// Decodes an eFIND META payload (the common part only).
    pub fn decode_meta(self, rec: &Record) -> Result<MetaState> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let m = r.meta()?;
        r.end()?;
        Ok(m)
    }

    /// Decodes a FAST META payload: the common part and the reused pages
    /// (also FAST's layout before codec version 1, see the [module docs](self)).
    pub fn decode_meta_reused(self, rec: &Record) -> Result<(MetaState, Vec<PageId>)> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let out = if r.is_legacy_fast() {
            r.legacy_fast_meta()?
        } else {
            let m = r.meta()?;
            (m, r.pages()?)
        };
        r.end()?;
        Ok(out)
    }

    /// Decodes a CHECKPOINT payload (also FAST's layout before codec
    /// version 1, see the [module docs](self)).
    pub fn decode_checkpoint(self, rec: &Record) -> Result<CheckpointState> {
        let mut r = Reader::new(rec, self.encoding, self.legacy_fast);
        let legacy = r.is_legacy_fast();
        let last_op = r.u64()?;
        let (meta, free) = if legacy {
            r.legacy_fast_meta()?
        } else {
            let m = r.meta()?;
            (m, r.pages()?)
        };
        let client_generation = if r.off < r.buf.len() {
            // Generations start at 1: a 0 here is a stray byte.
            match r.u64()? {
                0 => return Err(r.bad("trailing bytes after the payload")),
                g => Some(g),
            }
        } else {
            None
        };
        r.end()?;
        Ok(CheckpointState {
            last_op,
            meta,
            free,
            client_generation,
        })
    }
}

impl Log {
    /// A clean checkpoint ([`Log::checkpoint`]) whose CHECKPOINT payload is
    /// `state` in the codec of the log's format.
    pub fn checkpoint_state(&mut self, state: &CheckpointState) -> Result<Lsn> {
        let payload = self.format().payload_codec().encode_checkpoint(state);
        self.checkpoint(payload)
    }

    /// [`Log::checkpoint_state`] of a state holding operations up to
    /// `op` that were not logged ([`Log::checkpoint_including`]).
    pub fn checkpoint_state_including(
        &mut self,
        state: &CheckpointState,
        op: Option<crate::store::OpId>,
    ) -> Result<Lsn> {
        let payload = self.format().payload_codec().encode_checkpoint(state);
        self.checkpoint_including(payload, op)
    }
}

#[cfg(test)]
mod tests;
