//! The double-buffered superblock of a log (little-endian).
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic `b"GFLS"` |
//! | 4 | 2 | format version |
//! | 6 | 1 | log2 of the page size |
//! | 7 | 1 | live region (0 or 1) |
//! | 8 | 4 | CRC-32C of the page with these 4 bytes taken as zero |
//! | 12 | 4 | reserved, 0 |
//! | 16 | 8 | sequence number (slot = seq % 2) |
//! | 24 | 16 | index id |
//! | 40 | 8 | log id |
//! | 48 | 8 | pages of one region |
//! | 56 | 8 | epoch of the live region |
//! | 64 | 8 | highest epoch ever reserved |
//! | 72 | 8 | LSN floor: every LSN ever assigned is at most this or in the live region |
//!
//! The rest of the page is zero.
use crate::storage::PageId;
use crate::{Error, Result};

use super::record::{get_u128, get_u32, get_u64};
use super::{LogLayout, Lsn, SharedDevice};

const MAGIC: [u8; 4] = *b"GFLS";
const VERSION: u16 = 1;
const LEN: usize = 80;

/// The superblock's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Superblock {
    pub seq: u64,
    pub index_id: u128,
    pub log_id: u64,
    pub region_pages: u64,
    pub live: u8,
    pub epoch: u64,
    pub epoch_high: u64,
    pub lsn_floor: Lsn,
}

enum Slot {
    Blank,
    Damaged(String),
    Valid(Superblock),
}

impl Superblock {
    fn encode(&self, page_size: usize) -> Vec<u8> {
        let mut buf = vec![0u8; page_size];
        let mut h = [0u8; LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[4..6].copy_from_slice(&VERSION.to_le_bytes());
        h[6] = page_size.trailing_zeros() as u8;
        h[7] = self.live & 1;
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
        if version != VERSION {
            return Slot::Damaged(format!(
                "log superblock format version {version}, this build reads version {VERSION}"
            ));
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
        Slot::Valid(Superblock {
            seq,
            index_id,
            log_id,
            region_pages,
            live,
            epoch,
            epoch_high,
            lsn_floor,
        })
    }

    /// Writes this superblock to its slot (`seq % 2`); no sync.
    pub fn write(&self, dev: &SharedDevice, layout: &LogLayout) -> Result<()> {
        let buf = self.encode(layout.page_size);
        dev.write(layout.superblock_page(self.seq), &buf)
    }

    /// Reads both slots and returns the newest valid superblock, checked against
    /// the layout and the index id. Counts the pages it reads in `pages_read`.
    pub fn read(
        dev: &SharedDevice,
        layout: &LogLayout,
        index_id: u128,
        pages_read: &mut u64,
    ) -> Result<Superblock> {
        let ps = layout.page_size;
        let pages: [PageId; 2] = [layout.superblock_page(0), layout.superblock_page(1)];
        let mut buf = vec![0u8; 2 * ps];
        dev.read_batch(&pages, &mut buf)?;
        *pages_read += 2;
        let mut best: Option<Superblock> = None;
        let mut problems = Vec::new();
        let mut blanks = 0;
        for (page, chunk) in pages.iter().zip(buf.chunks_exact(ps)) {
            match Superblock::decode(chunk) {
                Slot::Blank => blanks += 1,
                Slot::Damaged(why) => problems.push(format!("page {page}: {why}")),
                Slot::Valid(sb) => {
                    if best.is_none_or(|b| sb.seq > b.seq) {
                        best = Some(sb);
                    }
                }
            }
        }
        let Some(sb) = best else {
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
        Ok(sb)
    }
}

fn crc(buf: &[u8]) -> u32 {
    let head = buf.get(..8).unwrap_or(buf);
    let tail = buf.get(12..).unwrap_or(&[]);
    let c = crc32c::crc32c(head);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, tail)
}
