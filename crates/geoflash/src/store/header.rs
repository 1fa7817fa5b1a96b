//! The header page and the free-list chain shared by the on-device stores
//! ([`PlainStore`](super::PlainStore) and
//! [`EfindStore`](super::efind::EfindStore)).
//!
//! **Page 0** is the header page ([`PageKind::Header`]): magic, format
//! version, payload flag, page size, [`TreeMeta`], next page id, LSN, the
//! number of free pages, optionally an opaque user blob (its length in the
//! fixed part, its bytes after it), and the first free ids. A free list
//! longer than what page 0 holds continues in a chain of [`PageKind::Free`]
//! pages, which are themselves free pages (the last ids of the list): each
//! holds the id of the next chain page (0 ends the chain), a count and ids.
//!
//! What differs between stores is a [`Format`]: the magic bytes, whether the
//! layout has the user blob, and the wording of the errors.
use std::collections::HashSet;

use super::TreeMeta;
use crate::page::{self, PageKind};
use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

/// Version of the header page body.
const HEADER_VERSION: u16 = 1;
/// Bytes of the fixed part of the header body without the user-blob length.
const HEADER_FIXED: usize = 8 + 2 + 1 + 1 + 4 + 8 + 2 + 8 + 8 + 8 + 8 + 4 + 8;
/// Bytes of the fixed part of a free-list chain page body.
const CHAIN_FIXED: usize = 8 + 4;
/// Encoding of "no root".
const NO_ROOT: u64 = u64::MAX;

/// What one store's header page looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Format {
    /// Magic bytes: the first bytes of page 0's body.
    pub(crate) magic: [u8; 8],
    /// Whether the layout holds a user blob (its `u32` length comes after
    /// the free-page count, its bytes after the fixed part).
    pub(crate) user_meta: bool,
    /// Error for a blank page 0.
    pub(crate) blank: &'static str,
    /// Error for a page 0 with another magic.
    pub(crate) bad_magic: &'static str,
}

impl Format {
    /// Bytes of the fixed part of the header body.
    pub(crate) const fn fixed(&self) -> usize {
        if self.user_meta {
            HEADER_FIXED + 4
        } else {
            HEADER_FIXED
        }
    }

    /// Refuses pages too small for the fixed part of the header and one free id.
    pub(crate) fn check_page_size(&self, page_size: usize) -> Result<()> {
        if self.fixed() + 8 > page::max_raw_body(page_size) {
            return Err(Error::invalid(format!(
                "{page_size}-byte pages are too small for the store header"
            )));
        }
        Ok(())
    }

    /// Bytes left for the user blob in a page of `page_size` bytes.
    #[cfg(test)]
    pub(crate) fn max_user_meta(&self, page_size: usize) -> usize {
        page::max_raw_body(page_size).saturating_sub(self.fixed())
    }
}

/// The contents of the header page and its free-list chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    /// Page size the store was created with.
    pub(crate) page_size: usize,
    /// Whether node pages carry entry payloads.
    pub(crate) with_payload: bool,
    /// Tree metadata.
    pub(crate) meta: TreeMeta,
    /// Next page id never allocated.
    pub(crate) next_page: PageId,
    /// LSN of the last operation the header records.
    pub(crate) lsn: u64,
    /// Opaque user blob (always empty in a format without one).
    pub(crate) user_meta: Vec<u8>,
    /// The whole free list (page 0's ids, then the chain's).
    pub(crate) free: Vec<PageId>,
}

impl Header {
    /// Writes page 0 and the free-list chain as one device batch (no sync).
    pub(crate) fn write(&self, fmt: &Format, device: &dyn PageDevice) -> Result<()> {
        let ps = self.page_size;
        let free = &self.free;
        let room = page::max_raw_body(ps);
        let header_slots = room.saturating_sub(fmt.fixed() + self.user_meta(fmt).len()) / 8;
        let chain_slots = room.saturating_sub(CHAIN_FIXED) / 8;
        let (in_header, rest) = free.split_at(free.len().min(header_slots));
        // The chain lives in free pages themselves: the last ids of the list.
        let chunks: Vec<&[u64]> = rest.chunks(chain_slots.max(1)).collect();
        let chain_pages: Vec<PageId> = free.iter().rev().take(chunks.len()).copied().collect();
        let chain_head = chain_pages.first().copied().unwrap_or(0);
        let body = self.encode(fmt, in_header, chain_head);
        let mut pages = vec![0u64];
        let mut data = vec![0u8; ps * (1 + chunks.len())];
        let (first, tail) = data.split_at_mut(ps);
        page::encode_raw(PageKind::Header, self.lsn, &body, first)?;
        for (i, (ids, chunk)) in chunks.iter().zip(tail.chunks_exact_mut(ps)).enumerate() {
            let next = chain_pages.get(i + 1).copied().unwrap_or(0);
            let mut b = Vec::with_capacity(CHAIN_FIXED + ids.len() * 8);
            b.extend_from_slice(&next.to_le_bytes());
            b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in *ids {
                b.extend_from_slice(&id.to_le_bytes());
            }
            page::encode_raw(PageKind::Free, self.lsn, &b, chunk)?;
            pages.push(chain_pages.get(i).copied().unwrap_or(0));
        }
        device.write_batch(&pages, &data)
    }

    /// Reads page 0 and the free-list chain of `device`. A blank or corrupt
    /// header, another magic, a page size other than the device's or a
    /// broken chain is an error (the payload flag is the caller's to check).
    pub(crate) fn read(fmt: &Format, device: &dyn PageDevice) -> Result<Header> {
        let ps = device.page_size();
        let mut buf = vec![0u8; ps];
        device.read(0, &mut buf)?;
        if page::is_blank(&buf) {
            return Err(Error::corrupt(Some(0), fmt.blank));
        }
        let (h, body) = page::decode_raw(&buf, Some(0))?;
        if h.kind != PageKind::Header {
            return Err(Error::corrupt(
                Some(0),
                format!("page 0 is a {:?} page, not a store header", h.kind),
            ));
        }
        let (mut hdr, free_total, mut chain) = Header::decode(fmt, body)?;
        if hdr.page_size != ps {
            return Err(Error::corrupt(
                Some(0),
                format!(
                    "the store was created with {}-byte pages but the device has {ps}-byte pages",
                    hdr.page_size
                ),
            ));
        }
        let mut seen = HashSet::new();
        while chain != 0 {
            if !seen.insert(chain) || chain >= hdr.next_page {
                return Err(Error::corrupt(
                    Some(chain),
                    "free-list chain loops or points outside the allocated pages",
                ));
            }
            device.read(chain, &mut buf)?;
            let (h, body) = page::decode_raw(&buf, Some(chain))?;
            if h.kind != PageKind::Free {
                return Err(Error::corrupt(
                    Some(chain),
                    format!("expected a free-list page, found a {:?} page", h.kind),
                ));
            }
            let mut r = Reader::new(body, chain);
            let next = r.u64()?;
            let n = r.u32()?;
            for _ in 0..n {
                hdr.free.push(r.u64()?);
            }
            chain = next;
        }
        if hdr.free.len() as u64 != free_total {
            return Err(Error::corrupt(
                Some(0),
                format!(
                    "the header announces {free_total} free pages but the free list holds {}",
                    hdr.free.len()
                ),
            ));
        }
        Ok(hdr)
    }

    /// The user blob as `fmt` stores it (empty in a format without one).
    fn user_meta(&self, fmt: &Format) -> &[u8] {
        if fmt.user_meta {
            &self.user_meta
        } else {
            &[]
        }
    }

    /// The body of page 0 holding `in_header` of the free ids.
    fn encode(&self, fmt: &Format, in_header: &[PageId], chain_head: PageId) -> Vec<u8> {
        let user_meta = self.user_meta(fmt);
        let mut b = Vec::with_capacity(fmt.fixed() + user_meta.len() + 8 * in_header.len());
        b.extend_from_slice(&fmt.magic);
        b.extend_from_slice(&HEADER_VERSION.to_le_bytes());
        b.push(u8::from(self.with_payload));
        b.push(0);
        b.extend_from_slice(&(self.page_size as u32).to_le_bytes());
        b.extend_from_slice(&self.meta.root.unwrap_or(NO_ROOT).to_le_bytes());
        b.extend_from_slice(&self.meta.height.to_le_bytes());
        b.extend_from_slice(&self.meta.records.to_le_bytes());
        b.extend_from_slice(&self.next_page.to_le_bytes());
        b.extend_from_slice(&self.lsn.to_le_bytes());
        b.extend_from_slice(&(self.free.len() as u64).to_le_bytes());
        if fmt.user_meta {
            b.extend_from_slice(&(user_meta.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(&(in_header.len() as u32).to_le_bytes());
        b.extend_from_slice(&chain_head.to_le_bytes());
        b.extend_from_slice(user_meta);
        for id in in_header {
            b.extend_from_slice(&id.to_le_bytes());
        }
        b
    }

    /// Decodes the body of page 0: the header with page 0's free ids, the
    /// announced length of the whole free list and the first chain page.
    fn decode(fmt: &Format, body: &[u8]) -> Result<(Header, u64, PageId)> {
        let mut r = Reader::new(body, 0);
        if r.bytes(8)? != fmt.magic {
            return Err(Error::corrupt(Some(0), fmt.bad_magic));
        }
        let version = r.u16()?;
        Error::check_version("store header", version, 1, HEADER_VERSION)?;
        let with_payload = match r.u8()? {
            0 => false,
            1 => true,
            b => {
                return Err(Error::corrupt(
                    Some(0),
                    format!("bad payload flag {b} in the store header"),
                ))
            }
        };
        r.u8()?;
        let page_size = r.u32()? as usize;
        let root = r.u64()?;
        let height = r.u16()?;
        let records = r.u64()?;
        let next_page = r.u64()?;
        let lsn = r.u64()?;
        let free_total = r.u64()?;
        let user_len = if fmt.user_meta { r.u32()? as usize } else { 0 };
        let free_here = r.u32()?;
        let chain_head = r.u64()?;
        let user_meta = r.bytes(user_len)?.to_vec();
        let mut free = Vec::new();
        for _ in 0..free_here {
            free.push(r.u64()?);
        }
        let hdr = Header {
            page_size,
            with_payload,
            meta: TreeMeta {
                root: (root != NO_ROOT).then_some(root),
                height,
                records,
            },
            next_page,
            lsn,
            user_meta,
            free,
        };
        Ok((hdr, free_total, chain_head))
    }
}

/// A bounds-checked little-endian reader whose errors name the page.
struct Reader<'a> {
    buf: &'a [u8],
    off: usize,
    page: PageId,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`, the body of page `page`.
    fn new(buf: &'a [u8], page: PageId) -> Self {
        Reader { buf, off: 0, page }
    }

    /// The next `n` bytes.
    fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .off
            .checked_add(n)
            .and_then(|e| self.buf.get(self.off..e))
            .ok_or_else(|| Error::corrupt(Some(self.page), "store metadata page is truncated"))?;
        self.off += n;
        Ok(s)
    }

    /// The next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.bytes(N)?;
        s.try_into()
            .map_err(|_| Error::corrupt(Some(self.page), "store metadata page is truncated"))
    }

    /// The next byte.
    fn u8(&mut self) -> Result<u8> {
        Ok(u8::from_le_bytes(self.array()?))
    }

    /// The next little-endian `u16`.
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// The next little-endian `u32`.
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// The next little-endian `u64`.
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::mem::MemDevice;

    const WITH: Format = Format {
        magic: *b"GFTEST1\0",
        user_meta: true,
        blank: "blank",
        bad_magic: "bad magic",
    };
    const WITHOUT: Format = Format {
        user_meta: false,
        ..WITH
    };

    #[test]
    fn headers_round_trip_with_and_without_user_blob_and_long_chains() {
        for fmt in [WITH, WITHOUT] {
            let dev = MemDevice::new(512, 4096).unwrap();
            let free: Vec<PageId> = (10..400).collect();
            let hdr = Header {
                page_size: 512,
                with_payload: true,
                meta: TreeMeta {
                    root: Some(3),
                    height: 2,
                    records: 77,
                },
                next_page: 500,
                lsn: 9,
                user_meta: if fmt.user_meta {
                    vec![1, 2, 3]
                } else {
                    Vec::new()
                },
                free,
            };
            hdr.write(&fmt, &dev).unwrap();
            let back = Header::read(&fmt, &dev).unwrap();
            let mut want = hdr.free.clone();
            want.sort_unstable();
            let mut got = back.free.clone();
            got.sort_unstable();
            assert_eq!(got, want);
            assert_eq!(back.meta, hdr.meta);
            assert_eq!(back.user_meta, hdr.user_meta);
            assert_eq!((back.next_page, back.lsn), (500, 9));
            let other = Format {
                magic: *b"GFOTHER\0",
                ..fmt
            };
            assert!(Header::read(&other, &dev).is_err());
        }
    }
}
