//! The double-buffered superblock of a log (little-endian).
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic `b"GFLS"` |
//! | 4 | 2 | format version |
//! | 6 | 1 | log2 of the page size |
//! | 7 | 1 | live region (0 or 1) |
//! | 8 | 4 | CRC-32C of the page with these 4 bytes taken as zero |
//! | 12 | 1 | flags (version 2) |
//! | 13 | 1 | payload codec version (0: written before it existed) |
//! | 14 | 1 | versions 10 and 11: 1 + log2 of the pages of a chunk of the interleaved regions; else 0 |
//! | 15 | 1 | reserved, 0 |
//! | 16 | 8 | sequence number (slot = seq % 2) |
//! | 24 | 16 | index id |
//! | 40 | 8 | log id |
//! | 48 | 8 | pages of one region |
//! | 56 | 8 | epoch of the live region |
//! | 64 | 8 | highest epoch ever reserved |
//! | 72 | 8 | LSN floor: every LSN ever assigned is at most this or in the live region |
//! | 80 | 8 | base CHECKPOINT's LSN (version 2) |
//! | 88 | 8 | base COMMIT's operation (version 2) |
//! | 96 | 8 | base COMMIT's LSN (version 2) |
//! | 104 | 4 | base CHECKPOINT's payload length (version 2) |
//! | 108 | n | base CHECKPOINT's payload (version 2) |
//!
//! Byte 12 holds flags (version 2): bit 0, a base CHECKPOINT is present;
//! bit 1, a base COMMIT is present; bit 2, the log *mirrors* its switches
//! (below). The rest of the page is zero.
//!
//! **Mirrored switches.** A superblock that switches the live region
//! (compaction, restart, checkpoint) is written to its slot, synced, and
//! then written again to the other slot, so at rest both slots hold the
//! newest state. One damaged slot then never makes an open fall back to an
//! older state: the other slot is the same superblock, or (while a switch
//! is under way) the state the interrupted switch started from, whose
//! region is intact because an old region is trimmed only after the switch
//! is durable. Logs written before bit 2 existed kept the previous state in
//! the other slot with its region already trimmed, so falling back to it
//! would open an *older* index (an empty one after a first checkpoint):
//! when one slot is damaged and the valid one lacks bit 2, the open is
//! refused with an error naming the damaged slot (issue 44, item 1).
//! [`super::repair_corrupt_tail`] (`recover --tolerate-corrupt-tail`)
//! accepts that older state and rewrites both slots.
//!
//! **Payload codec version** (byte 13). The version of the stores' record
//! payload codec ([`super::payload`]) the log's records were written with:
//! [`super::PAYLOAD_CODEC_VERSION`] (1) in every superblock this build
//! writes, 0 in those of builds before the shared codec (whose FAST MOD
//! records had other change tags). Builds before it ignore the byte.
//!
//! **The base.** A clean checkpoint ([`super::Log::checkpoint`]) does not
//! append its CHECKPOINT record to the live region: it starts a fresh, empty
//! epoch and keeps the record (and the COMMIT of the newest operation) in the
//! superblock that switches to it, when the payload fits the page. Readers
//! take the base records as the first records of the live region
//! ([`Superblock::base_records`]), so restart and compaction see exactly the
//! records they would see had the two records been written to the region.
//! Version 1 superblocks (no base) are still read.
//!
//! **Versions and log formats.** Version 2 is a log of the
//! [per-change](super::LogFormat::PerChange) format, version 3 one of the
//! [first-image](super::LogFormat::FirstImage) format; the layout is the
//! same, the version tells how restart treats FLUSH records (see
//! [`super::recovery`]). A build that knows neither version refuses the
//! superblock with an error naming it (builds before version 3 existed
//! say "log superblock format version 3, this build reads versions 1 and
//! 2"), so a first-image log is never recovered with the per-change rules.
//! Version 4 is a [compact](super::LogFormat::Compact) log, version 5 a
//! compact log whose NEW and MOD records may name entries by key
//! ([`super::entry_refs`]); a build that reads version 4 only refuses
//! version 5 by name rather than misreading its payloads. Versions 6 and 7
//! are versions 4 and 5 whose synced batches end with seal pages
//! ([`super::seal`]); a build before them refuses them by name, as it
//! would take a seal for the end of the log. Versions 8 and 9 are versions
//! 6 and 7 whose records may be a front end's CLIENT frames and whose
//! CHECKPOINT payloads may end with its generation ([`super::client`]); a
//! build before them refuses them by name rather than calling the new
//! record kind damage. Versions 10 and 11 are versions 8 and 9 whose two
//! regions are interleaved in chunks (byte 14; [`super::LogLayout::region_page`],
//! the module docs of [`super`], "Interleaved regions"); a build before them
//! refuses them by name, as it would read region pages where the other
//! region's are.
use crate::storage::PageId;
use crate::{Error, Result};

use crate::store::OpId;

use super::record::{get_u128, get_u32, get_u64, Record, RecordKind};
use super::{LogFormat, LogLayout, Lsn, SharedDevice, NO_OP};

const MAGIC: [u8; 4] = *b"GFLS";
const VERSION: u16 = 2;
/// The oldest version still read (no base).
const VERSION_NO_BASE: u16 = 1;
/// The first-image format (layout of version 2).
const VERSION_FIRST_IMAGE: u16 = 3;
/// The compact format (layout of version 2).
const VERSION_COMPACT: u16 = 4;
/// The compact format with entry references (layout of version 2; see
/// [`super::entry_refs`]).
const VERSION_COMPACT_REFS: u16 = 5;
/// The compact format with seal pages (layout of version 2; see
/// [`super::seal`]).
const VERSION_COMPACT_SEALED: u16 = 6;
/// The compact format with entry references and seal pages.
const VERSION_COMPACT_REFS_SEALED: u16 = 7;
/// Version 6 whose records may be CLIENT frames and whose checkpoints may
/// name a front end's generation (see [`super::client`]).
const VERSION_COMPACT_SEALED_CLIENT: u16 = 8;
/// Version 7 with CLIENT frames (as version 8).
const VERSION_COMPACT_REFS_SEALED_CLIENT: u16 = 9;
/// Version 8 with interleaved regions.
const VERSION_COMPACT_SEALED_CLIENT_CHUNKED: u16 = 10;
/// Version 9 with interleaved regions.
const VERSION_COMPACT_REFS_SEALED_CLIENT_CHUNKED: u16 = 11;
/// The oldest superblock version this build reads (every one up to [`NEWEST`]).
const OLDEST: u16 = VERSION_NO_BASE;
/// The newest superblock version this build reads and writes.
const NEWEST: u16 = VERSION_COMPACT_REFS_SEALED_CLIENT_CHUNKED;
const LEN: usize = 80;
/// Bytes before the base payload.
const BASE_HEADER: usize = 108;
const FLAG_BASE: u8 = 1;
const FLAG_BASE_COMMIT: u8 = 2;
/// Set in every superblock of builds that write each switch to both slots
/// (see [`Superblock::read_with_codec`]); builds before it ignore the bit.
const FLAG_MIRRORED: u8 = 4;

/// The CHECKPOINT (and newest COMMIT) a clean checkpoint keeps in the
/// superblock instead of the live region. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Base {
    /// LSN of the CHECKPOINT record.
    pub checkpoint_lsn: Lsn,
    /// The CHECKPOINT's payload (opaque to the log).
    pub payload: Vec<u8>,
    /// The newest COMMIT at the checkpoint: (operation, LSN).
    pub commit: Option<(OpId, Lsn)>,
}

impl Base {
    /// True when a base with `payload_len` bytes of payload fits a superblock of `page_size`.
    pub fn fits(payload_len: usize, page_size: usize) -> bool {
        BASE_HEADER.saturating_add(payload_len) <= page_size
    }
}

/// The superblock's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub seq: u64,
    pub index_id: u128,
    pub log_id: u64,
    pub region_pages: u64,
    pub live: u8,
    pub epoch: u64,
    pub epoch_high: u64,
    pub lsn_floor: Lsn,
    /// Records a clean checkpoint kept here instead of in the live region.
    pub base: Option<Base>,
    /// The log's format (its version: 2 per-change, 3 first-image, 4 compact,
    /// 5 compact with entry references).
    pub format: LogFormat,
    /// NEW and MOD records may name entries by key (version 5, compact
    /// format only; see [`super::entry_refs`]).
    pub entry_refs: bool,
    /// Written by a build that mirrors switches to both slots (flag bit 2;
    /// every superblock this build writes sets it).
    pub mirrored: bool,
    /// Every synced batch of the live region ends with a seal page
    /// (versions 6 to 11, compact format only; see [`super::seal`]).
    pub sealed: bool,
    /// The log may hold CLIENT records and its checkpoints a front end's
    /// generation (versions 8 to 11, sealed compact logs only; see
    /// [`super::client`]).
    pub client: bool,
    /// Pages of a chunk of the interleaved regions (versions 10 and 11, a
    /// power of two), or 0 for contiguous regions (every other version).
    pub chunk_pages: u64,
}

/// What a superblock version says about its log.
struct Traits {
    format: LogFormat,
    entry_refs: bool,
    sealed: bool,
    client: bool,
    /// Interleaved regions (the chunk is byte 14).
    chunked: bool,
}

impl Traits {
    /// The traits of a version this build reads (see the module docs).
    fn of(version: u16) -> Traits {
        let (format, entry_refs, sealed, client, chunked) = match version {
            VERSION_FIRST_IMAGE => (LogFormat::FirstImage, false, false, false, false),
            VERSION_COMPACT => (LogFormat::Compact, false, false, false, false),
            VERSION_COMPACT_REFS => (LogFormat::Compact, true, false, false, false),
            VERSION_COMPACT_SEALED => (LogFormat::Compact, false, true, false, false),
            VERSION_COMPACT_REFS_SEALED => (LogFormat::Compact, true, true, false, false),
            VERSION_COMPACT_SEALED_CLIENT => (LogFormat::Compact, false, true, true, false),
            VERSION_COMPACT_REFS_SEALED_CLIENT => (LogFormat::Compact, true, true, true, false),
            VERSION_COMPACT_SEALED_CLIENT_CHUNKED => (LogFormat::Compact, false, true, true, true),
            VERSION_COMPACT_REFS_SEALED_CLIENT_CHUNKED => {
                (LogFormat::Compact, true, true, true, true)
            }
            _ => (LogFormat::PerChange, false, false, false, false),
        };
        Traits {
            format,
            entry_refs,
            sealed,
            client,
            chunked,
        }
    }
}

enum Slot {
    Blank,
    Damaged(String),
    /// An intact superblock of a format version this build does not read.
    Unsupported(u16),
    /// The superblock and its payload codec version.
    Valid(Superblock, u8),
}

impl Superblock {
    fn encode(&self, page_size: usize) -> Vec<u8> {
        let mut buf = vec![0u8; page_size];
        let mut h = [0u8; LEN];
        h[0..4].copy_from_slice(&MAGIC);
        let version = match self.format {
            LogFormat::PerChange => VERSION,
            LogFormat::FirstImage => VERSION_FIRST_IMAGE,
            LogFormat::Compact => match (self.entry_refs, self.sealed, self.client) {
                (true, true, true) if self.chunk_pages > 0 => {
                    VERSION_COMPACT_REFS_SEALED_CLIENT_CHUNKED
                }
                (false, true, true) if self.chunk_pages > 0 => {
                    VERSION_COMPACT_SEALED_CLIENT_CHUNKED
                }
                (true, true, true) => VERSION_COMPACT_REFS_SEALED_CLIENT,
                (false, true, true) => VERSION_COMPACT_SEALED_CLIENT,
                (true, true, false) => VERSION_COMPACT_REFS_SEALED,
                (true, false, _) => VERSION_COMPACT_REFS,
                (false, true, false) => VERSION_COMPACT_SEALED,
                (false, false, _) => VERSION_COMPACT,
            },
        };
        h[4..6].copy_from_slice(&version.to_le_bytes());
        h[6] = page_size.trailing_zeros() as u8;
        h[7] = self.live & 1;
        h[12] = FLAG_MIRRORED;
        h[13] = super::PAYLOAD_CODEC_VERSION;
        if self.chunk_pages > 0 && self.client && self.sealed {
            h[14] = self.chunk_pages.trailing_zeros() as u8 + 1;
        }
        h[16..24].copy_from_slice(&self.seq.to_le_bytes());
        h[24..40].copy_from_slice(&self.index_id.to_le_bytes());
        h[40..48].copy_from_slice(&self.log_id.to_le_bytes());
        h[48..56].copy_from_slice(&self.region_pages.to_le_bytes());
        h[56..64].copy_from_slice(&self.epoch.to_le_bytes());
        h[64..72].copy_from_slice(&self.epoch_high.to_le_bytes());
        h[72..80].copy_from_slice(&self.lsn_floor.to_le_bytes());
        if let Some(dst) = buf.get_mut(..LEN) {
            dst.copy_from_slice(&h);
        }
        if let Some(base) = &self.base {
            let mut flags = FLAG_MIRRORED | FLAG_BASE;
            let mut b = Vec::with_capacity(BASE_HEADER - LEN + base.payload.len());
            b.extend_from_slice(&base.checkpoint_lsn.to_le_bytes());
            let (op, lsn) = base.commit.unwrap_or((0, 0));
            if base.commit.is_some() {
                flags |= FLAG_BASE_COMMIT;
            }
            b.extend_from_slice(&op.to_le_bytes());
            b.extend_from_slice(&lsn.to_le_bytes());
            b.extend_from_slice(&(base.payload.len() as u32).to_le_bytes());
            b.extend_from_slice(&base.payload);
            // The writer checks `Base::fits` first; a base that does not fit is dropped
            // here rather than written cut short (the CRC would not cover it otherwise).
            if let Some(dst) = buf.get_mut(LEN..LEN + b.len()) {
                dst.copy_from_slice(&b);
                if let Some(f) = buf.get_mut(12) {
                    *f = flags;
                }
            }
        }
        let crc = crc(&buf);
        if let Some(dst) = buf.get_mut(8..12) {
            dst.copy_from_slice(&crc.to_le_bytes());
        }
        buf
    }

    fn decode(buf: &[u8]) -> Slot {
        if buf.iter().all(|&b| b == 0) {
            return Slot::Blank;
        }
        if buf.get(0..4) != Some(&MAGIC[..]) {
            return Slot::Damaged("not a log superblock (bad magic)".into());
        }
        if get_u32(buf, 8) != Some(crc(buf)) {
            return Slot::Damaged("superblock checksum mismatch".into());
        }
        let version = buf
            .get(4..6)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_le_bytes)
            .unwrap_or(0);
        if !(OLDEST..=NEWEST).contains(&version) {
            return Slot::Unsupported(version);
        }
        if buf.get(6).copied() != Some(buf.len().trailing_zeros() as u8) {
            return Slot::Damaged("superblock written with another page size".into());
        }
        let live = buf.get(7).copied().unwrap_or(u8::MAX);
        let fields = (
            get_u64(buf, 16),
            get_u128(buf, 24),
            get_u64(buf, 40),
            get_u64(buf, 48),
            get_u64(buf, 56),
            get_u64(buf, 64),
            get_u64(buf, 72),
        );
        let (
            Some(seq),
            Some(index_id),
            Some(log_id),
            Some(region_pages),
            Some(epoch),
            Some(epoch_high),
            Some(lsn_floor),
        ) = fields
        else {
            return Slot::Damaged("superblock truncated".into());
        };
        if live > 1 || epoch > epoch_high {
            return Slot::Damaged("superblock fields out of range".into());
        }
        let traits = Traits::of(version);
        let chunk_pages = match (traits.chunked, buf.get(14).copied().unwrap_or(0)) {
            (false, 0) => 0,
            (true, b @ 1..=40) if (1u64 << (b - 1)) <= region_pages.max(1) => 1u64 << (b - 1),
            _ => return Slot::Damaged("superblock chunk of interleaved regions out of range".into()),
        };
        let flags = buf.get(12).copied().unwrap_or(0);
        let base = if version != VERSION_NO_BASE && flags & FLAG_BASE != 0 {
            let len = get_u32(buf, 104).map(|l| l as usize);
            let payload = len.and_then(|l| buf.get(BASE_HEADER..BASE_HEADER.checked_add(l)?));
            let (Some(checkpoint_lsn), Some(op), Some(commit_lsn), Some(payload)) = (
                get_u64(buf, 80),
                get_u64(buf, 88),
                get_u64(buf, 96),
                payload,
            ) else {
                return Slot::Damaged("superblock base checkpoint truncated".into());
            };
            Some(Base {
                checkpoint_lsn,
                payload: payload.to_vec(),
                commit: (flags & FLAG_BASE_COMMIT != 0).then_some((op, commit_lsn)),
            })
        } else {
            None
        };
        let codec = buf.get(13).copied().unwrap_or(0);
        Slot::Valid(
            Superblock {
                seq,
                index_id,
                log_id,
                region_pages,
                live,
                epoch,
                epoch_high,
                lsn_floor,
                base,
                format: traits.format,
                entry_refs: traits.entry_refs,
                mirrored: flags & FLAG_MIRRORED != 0,
                sealed: traits.sealed,
                client: traits.client,
                chunk_pages,
            },
            codec,
        )
    }

    /// The base's CHECKPOINT and COMMIT records, to be read before the live
    /// region's records (empty without a base).
    pub fn base_records(&self) -> Vec<Record> {
        let Some(base) = &self.base else {
            return Vec::new();
        };
        let mut ck = Record::new(RecordKind::Checkpoint, NO_OP, 0, base.payload.clone());
        ck.lsn = base.checkpoint_lsn;
        let mut out = vec![ck];
        if let Some((op, lsn)) = base.commit {
            let mut c = Record::commit(op);
            c.lsn = lsn;
            out.push(c);
        }
        out
    }

    /// Writes this superblock to its slot (`seq % 2`); no sync.
    pub fn write(&self, dev: &SharedDevice, layout: &LogLayout) -> Result<()> {
        let buf = self.encode(layout.page_size);
        dev.write(layout.superblock_page(self.seq), &buf)
    }

    /// Writes this superblock to the other slot than its own (the mirror of
    /// a switch, see the [module docs](self)); no sync.
    pub fn write_mirror(&self, dev: &SharedDevice, layout: &LogLayout) -> Result<()> {
        let buf = self.encode(layout.page_size);
        dev.write(layout.superblock_page(self.seq + 1), &buf)
    }

    /// Reads both slots and returns the newest valid superblock, checked against
    /// the layout and the index id. Counts the pages it reads in `pages_read`.
    pub fn read(
        dev: &SharedDevice,
        layout: &LogLayout,
        index_id: u128,
        pages_read: &mut u64,
    ) -> Result<Superblock> {
        Self::read_with_codec(dev, layout, index_id, pages_read).map(|(sb, _)| sb)
    }

    /// [`Superblock::read`], and the newest superblock's payload codec version.
    pub fn read_with_codec(
        dev: &SharedDevice,
        layout: &LogLayout,
        index_id: u128,
        pages_read: &mut u64,
    ) -> Result<(Superblock, u8)> {
        Self::read_slots(dev, layout, index_id, pages_read, false).map(|(sb, codec, _)| (sb, codec))
    }

    /// Reads both slots. With `accept_older`, a damaged slot beside an
    /// unmirrored valid one is accepted (the caller accepts the older
    /// state); the third value then names the damaged slot's page.
    pub fn read_slots(
        dev: &SharedDevice,
        layout: &LogLayout,
        index_id: u128,
        pages_read: &mut u64,
        accept_older: bool,
    ) -> Result<(Superblock, u8, Option<PageId>)> {
        let ps = layout.page_size;
        let pages: [PageId; 2] = [layout.superblock_page(0), layout.superblock_page(1)];
        let mut buf = vec![0u8; 2 * ps];
        dev.read_batch(&pages, &mut buf)?;
        *pages_read += 2;
        let mut best: Option<(Superblock, u8)> = None;
        let mut problems = Vec::new();
        let mut damaged_page = None;
        let mut blanks = 0;
        for (page, chunk) in pages.iter().zip(buf.chunks_exact(ps)) {
            match Superblock::decode(chunk) {
                Slot::Blank => blanks += 1,
                // Either slot may be the newest: one this build cannot read
                // refuses the log rather than open it at the other's older state.
                Slot::Unsupported(version) => {
                    return Err(Error::unsupported_version(
                        "log superblock",
                        version,
                        OLDEST,
                        NEWEST,
                    ))
                }
                Slot::Damaged(why) => {
                    damaged_page = Some(*page);
                    problems.push(format!("page {page}: {why}"));
                }
                Slot::Valid(sb, codec) => {
                    if best.as_ref().is_none_or(|(b, _)| sb.seq > b.seq) {
                        best = Some((sb, codec));
                    }
                }
            }
        }
        let Some((sb, codec)) = best else {
            if blanks == 2 {
                return Err(Error::corrupt(
                    Some(layout.first_page),
                    "no log here: both superblock slots are blank (the log was never created)",
                ));
            }
            return Err(Error::corrupt(
                Some(layout.first_page),
                format!("no valid log superblock: {}", problems.join("; ")),
            ));
        };
        if let Some(page) = damaged_page.filter(|_| !sb.mirrored && !accept_older) {
            return Err(Error::corrupt(
                Some(page),
                format!(
                    "log superblock slot damaged ({}), and the other slot was written by a build that did not mirror its superblocks, so it may describe an older state of the index; refusing to open it rather than lose what the damaged slot described (`geoflash recover --tolerate-corrupt-tail` accepts the older state)",
                    problems.join("; ")
                ),
            ));
        }
        if sb.index_id != index_id {
            return Err(Error::corrupt(
                Some(layout.superblock_page(sb.seq)),
                format!(
                    "the log belongs to another index: its superblock names index {:032x}, this index is {index_id:032x}",
                    sb.index_id
                ),
            ));
        }
        if sb.region_pages != layout.region_pages() {
            return Err(Error::corrupt(
                Some(layout.superblock_page(sb.seq)),
                format!(
                    "the log was created with regions of {} pages, the layout gives {}",
                    sb.region_pages,
                    layout.region_pages()
                ),
            ));
        }
        Ok((sb, codec, damaged_page))
    }
}

/// The superblock checksum of `buf` (tests that forge older superblocks).
#[cfg(test)]
pub(crate) fn test_crc(buf: &[u8]) -> u32 {
    crc(buf)
}

fn crc(buf: &[u8]) -> u32 {
    let head = buf.get(..8).unwrap_or(buf);
    let tail = buf.get(12..).unwrap_or(&[]);
    let c = crc32c::crc32c(head);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, tail)
}

/// Rewrites the newest superblock of the log in `layout` as a build before
/// the shared payload codec would have written it: payload codec version 0
/// and, when `base_payload` is given, that base CHECKPOINT payload (tests of
/// logs written by older builds).
#[cfg(test)]
pub(crate) fn rewrite_as_codec_0(
    dev: &SharedDevice,
    layout: &LogLayout,
    index_id: u128,
    base_payload: Option<Vec<u8>>,
) -> Result<()> {
    let mut n = 0;
    let mut sb = Superblock::read(dev, layout, index_id, &mut n)?;
    if let (Some(base), Some(p)) = (sb.base.as_mut(), base_payload) {
        base.payload = p;
    }
    let mut buf = sb.encode(layout.page_size);
    buf[13] = 0;
    let c = crc(&buf);
    buf[8..12].copy_from_slice(&c.to_le_bytes());
    // Both slots: the mirror holds the same superblock.
    dev.write(layout.superblock_page(sb.seq), &buf)?;
    dev.write(layout.superblock_page(sb.seq + 1), &buf)?;
    dev.sync()
}
