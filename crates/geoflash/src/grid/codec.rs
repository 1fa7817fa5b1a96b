//! The grid files' own page format: a 16-byte header (magic, format
//! version, page kind, payload length, CRC-32C) followed by the payload.
//! Every decode checks all of it and returns [`Error::Corrupt`] naming the
//! page and the problem; nothing a device returns can make it panic.
use crate::storage::PageId;
use crate::{Error, Result};

/// Magic number at the start of every grid page.
pub const MAGIC: [u8; 4] = *b"GFGR";
/// Page format version written by this build.
pub const VERSION: u8 = 1;
/// Bytes of the page header.
pub const HEADER: usize = 16;

/// What a grid page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Page 0: points to the metadata chain written by the last checkpoint.
    Super = 1,
    /// One page of the metadata chain (root directory, counters).
    Meta = 2,
    /// A sub-directory: its region, linear scales and grid array.
    SubDir = 3,
    /// A bucket updated in place (GFFM).
    Bucket = 4,
    /// A log-bucket of LB-Grid: log records of any logical buckets.
    LogBucket = 5,
}

impl PageKind {
    fn from_u8(v: u8) -> Option<PageKind> {
        Some(match v {
            1 => PageKind::Super,
            2 => PageKind::Meta,
            3 => PageKind::SubDir,
            4 => PageKind::Bucket,
            5 => PageKind::LogBucket,
            _ => return None,
        })
    }
}

/// Largest payload a page of `page_size` bytes holds.
pub fn payload_capacity(page_size: usize) -> usize {
    page_size.saturating_sub(HEADER)
}

/// How many items of `item_bytes` a page of `page_size` bytes holds after
/// its header and a 4-byte count; fewer than 2 is refused (`what` names the
/// items in the message).
pub fn slots(page_size: usize, item_bytes: usize, what: &str) -> Result<usize> {
    let n = payload_capacity(page_size).saturating_sub(4) / item_bytes;
    if n < 2 {
        return Err(Error::invalid(format!(
            "{page_size}-byte pages hold fewer than 2 {what}"
        )));
    }
    Ok(n)
}

/// Frames `payload` as one page of `page_size` bytes.
pub fn frame(kind: PageKind, payload: &[u8], page_size: usize) -> Result<Vec<u8>> {
    if payload.len() > payload_capacity(page_size) {
        return Err(Error::invalid(format!(
            "grid page payload of {} bytes does not fit a {page_size}-byte page",
            payload.len()
        )));
    }
    let mut page = vec![0u8; page_size];
    let len = u32::try_from(payload.len())
        .map_err(|_| Error::invalid("grid page payload longer than 4 GiB"))?;
    page[0..4].copy_from_slice(&MAGIC);
    page[4] = VERSION;
    page[5] = kind as u8;
    page[8..12].copy_from_slice(&len.to_le_bytes());
    page[HEADER..HEADER + payload.len()].copy_from_slice(payload);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&page[0..12]), payload);
    page[12..16].copy_from_slice(&crc.to_le_bytes());
    Ok(page)
}

/// Checks the header of `page` (read from page `id`) and returns its kind and payload.
pub fn unframe(id: PageId, page: &[u8]) -> Result<(PageKind, &[u8])> {
    let bad = |r: String| Error::corrupt(Some(id), r);
    let head = page.get(0..HEADER).ok_or_else(|| {
        bad(format!(
            "grid page of {} bytes is shorter than its header",
            page.len()
        ))
    })?;
    if head[0..4] != MAGIC {
        return Err(bad("not a grid page (bad magic)".into()));
    }
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let payload = page
        .get(HEADER..HEADER.saturating_add(len))
        .ok_or_else(|| bad(format!("payload length {len} exceeds the page")))?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[0..12]), payload);
    if crc != u32::from_le_bytes([head[12], head[13], head[14], head[15]]) {
        return Err(bad("checksum mismatch".into()));
    }
    // After the checksum, which covers it: a damaged version is damage.
    Error::check_version("grid page", head[4], VERSION, VERSION)?;
    let kind = PageKind::from_u8(head[5])
        .ok_or_else(|| bad(format!("unknown grid page kind {}", head[5])))?;
    Ok((kind, payload))
}

/// Like [`unframe`], and checks the kind.
pub fn unframe_kind(id: PageId, page: &[u8], want: PageKind) -> Result<&[u8]> {
    let (kind, payload) = unframe(id, page)?;
    if kind != want {
        return Err(Error::corrupt(
            Some(id),
            format!("grid page of kind {kind:?} where a {want:?} page was expected"),
        ));
    }
    Ok(payload)
}

/// Little-endian writer.
#[derive(Debug, Default)]
pub struct Writer {
    /// Bytes written so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends an `f64`.
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a length as `u32` (an error above `u32::MAX`).
    pub fn len(&mut self, n: usize) -> Result<()> {
        let v =
            u32::try_from(n).map_err(|_| Error::invalid("grid structure too large to encode"))?;
        self.u32(v);
        Ok(())
    }
}

/// Bounds-checked little-endian reader; every short read is [`Error::Corrupt`].
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    page: Option<PageId>,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, which came from `page` (for error messages).
    pub fn new(buf: &'a [u8], page: Option<PageId>) -> Self {
        Reader { buf, pos: 0, page }
    }
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos.saturating_add(N);
        let s = self.buf.get(self.pos..end).ok_or_else(|| {
            Error::corrupt(
                self.page,
                format!("grid page payload truncated at byte {}", self.pos),
            )
        })?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        self.pos = end;
        Ok(a)
    }
    /// Reads a `u8`.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    /// Reads a `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    /// Reads a finite `f64` (NaN and infinities are corruption).
    pub fn f64(&mut self) -> Result<f64> {
        let v = f64::from_le_bytes(self.take()?);
        if !v.is_finite() {
            return Err(Error::corrupt(
                self.page,
                format!("non-finite coordinate at byte {}", self.pos - 8),
            ));
        }
        Ok(v)
    }
    /// Reads a count of items of `item_bytes` each, checking that they can fit in what is left.
    pub fn count(&mut self, item_bytes: usize) -> Result<usize> {
        let n = self.u32()? as usize;
        let left = self.buf.len().saturating_sub(self.pos);
        if n.saturating_mul(item_bytes.max(1)) > left {
            return Err(Error::corrupt(
                self.page,
                format!("count {n} of {item_bytes}-byte items exceeds the {left} bytes left"),
            ));
        }
        Ok(n)
    }
    /// True when every byte was consumed.
    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip_and_damage_detected() {
        let p = frame(PageKind::Bucket, b"hello", 512).unwrap();
        let (k, pl) = unframe(3, &p).unwrap();
        assert_eq!(k, PageKind::Bucket);
        assert_eq!(pl, b"hello");
        for i in 0..HEADER + 5 {
            let mut q = p.clone();
            q[i] ^= 0x40;
            assert!(unframe(3, &q).is_err(), "flip at byte {i} undetected");
        }
        assert!(unframe(3, &[0u8; 512]).is_err());
        assert!(unframe(3, &p[..10]).is_err());
        assert!(unframe_kind(3, &p, PageKind::SubDir).is_err());
        assert!(frame(PageKind::Bucket, &[0u8; 500], 512).is_err());
    }

    #[test]
    fn reader_rejects_truncation_and_huge_counts() {
        let mut w = Writer::default();
        w.u32(1_000_000);
        let mut r = Reader::new(&w.buf, Some(1));
        assert!(r.count(8).is_err());
        let mut r = Reader::new(&[1, 2], None);
        assert!(r.u64().is_err());
        let mut w = Writer::default();
        w.f64(f64::NAN);
        assert!(Reader::new(&w.buf, None).f64().is_err());
    }
}
