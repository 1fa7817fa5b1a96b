//! Seal pages: the parity of the last synced batch of log pages (compact
//! logs of superblock versions 6 and 7).
//!
//! A damaged page in the last batch the log synced cannot be told from a
//! crash's torn tail by the log pages alone: no later page says it had
//! been made durable (issue 44: a 4-byte flip there opened the index at an
//! earlier commit with exit 0). A second sync per commit would settle it;
//! a seal settles it without one. Every [`Log::sync`](super::Log::sync)
//! that made pages durable writes, just before its device sync, one seal
//! page at the position after them: the XOR of the batch's pages (every
//! page written since the previous sync, which all carry the batch's first
//! position as their durable position). The next batch starts at the
//! seal's position and overwrites it: a seal holds no record, and only the
//! last batch needs one, since damage to an earlier batch is proven by the
//! later pages' durable positions (an error naming the page). A valid seal
//! therefore ends the log.
//!
//! At a page that fails its checksum the reader reads on to the batch's
//! seal and rebuilds the page from the seal and the batch's other pages;
//! the rebuilt page must pass the checksum the damaged one carried (the
//! seal holds the XOR of the checksums). One damaged page of the last
//! batch is read exactly instead of ending the log; a damaged seal ends
//! the log after the batch, which was read whole. A torn write of an
//! unacknowledged batch (its sync never returned) is rebuilt when only one
//! of its pages tore and its seal reached the device, and is otherwise the
//! torn tail it always was: either way the recovered log is a prefix
//! holding every acknowledged commit. The cost: one page write per sync
//! (the seal) and one page of each region kept free for it; the sync count
//! is unchanged.
//!
//! # Seal page layout
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 4 | magic [`SEAL_MAGIC`] = `b"GFLX"` |
//! | 4 | 4 | CRC-32C of the whole page with these 4 bytes taken as zero |
//! | 8 | 8 | log id |
//! | 16 | 8 | epoch |
//! | 24 | 4 | position of the seal in its region |
//! | 28 | 4 | first position of its batch (the durable position every page of the batch carries) |
//! | 32 | 4 | XOR of the batch pages' bytes 4..8 (their CRCs) |
//! | 36 | … | XOR of the batch pages' bytes 36.. (data length, records, padding) |
//!
//! The other bytes of a log page (magic, log id, epoch, position, durable
//! position) follow from where the page is, so the seal holds exactly what
//! a rebuild needs. The log id and epoch sit where a log page has them, so
//! the torn-tail look-ahead treats a seal as a page of its epoch.
use super::record::{get_u32, get_u64, page_crc, PAGE_MAGIC};
use crate::parity::Parity;

/// Magic number of a seal page.
pub const SEAL_MAGIC: [u8; 4] = *b"GFLX";

/// The header of a valid seal page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SealHeader {
    pub log_id: u64,
    pub epoch: u64,
    pub position: u64,
    /// First position of the batch the seal covers.
    pub first: u64,
}

/// The XOR of the raw pages of one batch, kept by the writer while it
/// writes the batch and by the reader while it scans it: a
/// [`Parity`] one page wide.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchXor {
    xor: Parity,
    pages: u64,
}

impl BatchXor {
    /// Folds one raw page into the batch.
    pub fn add(&mut self, page: &[u8]) {
        self.xor.fold(page.len(), 0, page);
        self.pages += 1;
    }

    /// Folds the pages of `other` in too.
    pub fn merge(&mut self, other: &BatchXor) {
        if other.pages == 0 {
            return;
        }
        self.xor.merge(other.xor.bytes());
        self.pages += other.pages;
    }

    /// Pages folded in since the last [`BatchXor::clear`].
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Starts a new batch.
    pub fn clear(&mut self) {
        self.xor.clear();
        self.pages = 0;
    }

    /// The seal of the batch, at region position `position`, for a batch
    /// starting at `first`, as a page of `page_size` bytes.
    pub fn seal(
        &self,
        log_id: u64,
        epoch: u64,
        position: u64,
        first: u64,
        page_size: usize,
    ) -> Vec<u8> {
        let mut buf = vec![0u8; page_size];
        let xor = self.xor.bytes();
        if let Some(src) = xor.get(36..) {
            if let Some(dst) = buf.get_mut(36..36 + src.len()) {
                dst.copy_from_slice(src);
            }
        }
        if let (Some(dst), Some(src)) = (buf.get_mut(32..36), xor.get(4..8)) {
            dst.copy_from_slice(src);
        }
        put(&mut buf, 0, &SEAL_MAGIC);
        put(&mut buf, 8, &log_id.to_le_bytes());
        put(&mut buf, 16, &epoch.to_le_bytes());
        put(&mut buf, 24, &(position as u32).to_le_bytes());
        put(&mut buf, 28, &(first as u32).to_le_bytes());
        let crc = page_crc(&buf);
        put(&mut buf, 4, &crc.to_le_bytes());
        buf
    }

    /// The page at region position `position` of the batch starting at
    /// `first` that `seal` covers, when this XOR holds every other page of
    /// the batch: the raw page as written, if its own checksum says so
    /// (the caller checks it with [`check_page`](super::record::check_page)).
    pub fn rebuild(
        &self,
        seal: &[u8],
        h: &SealHeader,
        position: u64,
        first: u64,
    ) -> Option<Vec<u8>> {
        let ps = seal.len();
        let mut page = vec![0u8; ps];
        let zeros = vec![0u8; ps];
        let xor = if self.xor.bytes().len() == ps {
            self.xor.bytes()
        } else {
            &zeros
        };
        for ((p, s), x) in page.iter_mut().zip(seal).zip(xor.iter()).skip(36) {
            *p = s ^ x;
        }
        let crc: Vec<u8> = seal
            .get(32..36)?
            .iter()
            .zip(xor.get(4..8)?)
            .map(|(s, x)| s ^ x)
            .collect();
        put(&mut page, 4, &crc);
        put(&mut page, 0, &PAGE_MAGIC);
        put(&mut page, 8, &h.log_id.to_le_bytes());
        put(&mut page, 16, &h.epoch.to_le_bytes());
        put(&mut page, 24, &position.to_le_bytes());
        put(&mut page, 32, &u32::try_from(first).ok()?.to_le_bytes());
        Some(page)
    }
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// The header of `buf` if it is a seal page whose checksum is right.
/// Never panics.
pub(crate) fn check_seal(buf: &[u8]) -> Option<SealHeader> {
    if buf.get(0..4) != Some(&SEAL_MAGIC[..]) || get_u32(buf, 4) != Some(page_crc(buf)) {
        return None;
    }
    Some(SealHeader {
        log_id: get_u64(buf, 8)?,
        epoch: get_u64(buf, 16)?,
        position: u64::from(get_u32(buf, 24)?),
        first: u64::from(get_u32(buf, 28)?),
    })
}
