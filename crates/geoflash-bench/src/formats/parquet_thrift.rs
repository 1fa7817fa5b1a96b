//! Bounds checks of the Thrift a Parquet file declares, before the
//! `parquet` crate parses it: the footer (the file's metadata) and the
//! page headers of each column chunk, both in Thrift's compact protocol.
//! The crate trusts the sizes they declare, and fuzzing found files that
//! exploit that (`fuzz/README.md`): a schema element claiming 1.3 billion
//! children, for which the crate reserves 10 GB, and sets declaring
//! billions of booleans in a file of a few hundred bytes, which the crate
//! skips one element at a time for seconds (in a footer, and in a page
//! header). [`check`] walks the footer and [`check_pages`] a column chunk's
//! page headers, once and without allocating, and refuse:
//!
//! - a list, set, map or binary whose declared size needs more bytes than
//!   the footer has left (every element of a compact-protocol container
//!   takes at least one byte; the crate skips a list of booleans without
//!   reading them, one step per declared element);
//! - nesting deeper than [`MAX_DEPTH`];
//! - a schema element (field 5 of each element of `FileMetaData.schema`,
//!   field 2) claiming more children than the schema has elements, or a
//!   negative number.
//!
//! The walk skips a value by the type its field header declares, as the
//! crate skips a field it does not know; the crate reads a field it knows
//! as the type the Parquet format gives it, whatever its header declares.
//! The walk does the same for the schema (field 2 read as a list of
//! structs) and `num_children` (read as an integer). Elsewhere a header
//! that contradicts the format (only a damaged or hostile file has one)
//! can make the two disagree about where values end: the walk then meets
//! the footer's end early or a type code the protocol does not define, and
//! ends with no verdict, leaving the file to the crate as before.

/// Deepest nesting of structs and containers accepted (Parquet's own
/// metadata nests about six deep).
pub(crate) const MAX_DEPTH: usize = 64;

/// Compact-protocol type codes.
mod kind {
    pub const STOP: u8 = 0;
    pub const TRUE: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const SET: u8 = 10;
    pub const MAP: u8 = 11;
    pub const STRUCT: u8 = 12;
}

/// Why a walk stopped early.
enum Stop {
    /// The footer is malformed: the message says how.
    Bad(String),
    /// A type code the walk does not know: no verdict.
    Unknown,
}

type Walk<T> = std::result::Result<T, Stop>;

/// Checks the footer of the Parquet file `data` (the whole file); `Err`
/// says what is wrong with it. A file too short to hold a footer, or whose
/// magic is not `PAR1` (an encrypted footer), passes unchecked: the
/// `parquet` crate refuses it with its own message.
pub(crate) fn check(data: &[u8]) -> std::result::Result<(), String> {
    let Some(footer) = footer(data) else {
        return Ok(());
    };
    let mut r = Reader {
        buf: footer,
        pos: 0,
    };
    match r.file_metadata() {
        Ok(()) | Err(Stop::Unknown) => Ok(()),
        Err(Stop::Bad(msg)) => Err(format!("its footer {msg}")),
    }
}

/// The footer's bytes: before the last 8 bytes (its length, little-endian
/// u32, and `PAR1`), when they are in the file.
fn footer(data: &[u8]) -> Option<&[u8]> {
    let tail = data.len().checked_sub(8)?;
    let (body, end) = data.split_at(tail);
    let (len, magic) = end.split_at(4);
    if magic != b"PAR1" {
        return None;
    }
    let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
    body.get(body.len().checked_sub(len)?..)
}

/// Most bytes one byte of a Snappy stream decompresses to, rounded up: a
/// 3-byte copy element yields at most 64 bytes (21.3 per byte); every other
/// element yields less per byte.
pub(crate) const SNAPPY_MAX_RATIO: u64 = 22;

/// Checks the page headers of one column chunk (its bytes, from its first
/// page to its end), as [`check`] checks the footer: each header is walked
/// (fields 2 and 3 read as the page's uncompressed and compressed sizes, as
/// the crate reads them) and the next header is looked for after the page.
/// With `max_ratio` (the chunk's codec decompresses each byte to at most
/// that many), a page claiming more uncompressed bytes than its compressed
/// bytes can hold is refused: the crate reserves the claimed size before it
/// decompresses. A header whose page runs past the chunk ends the walk with
/// no verdict.
pub(crate) fn check_pages(chunk: &[u8], max_ratio: Option<u64>) -> std::result::Result<(), String> {
    let mut r = Reader { buf: chunk, pos: 0 };
    let mut page = 0usize;
    while r.left() > 0 {
        let (mut size, mut uncompressed) = (None, None);
        let header = r.fields(0, |r, id, t, depth| match id {
            2 => {
                uncompressed = Some(r.signed()? as i32);
                Ok(())
            }
            3 => {
                size = Some(r.signed()? as i32);
                Ok(())
            }
            _ => r.value(t, false, depth),
        });
        match header {
            Ok(()) => {}
            Err(Stop::Unknown) => return Ok(()),
            Err(Stop::Bad(msg)) => return Err(format!("the header of page {page} {msg}")),
        }
        if let (Some(ratio), Some(c), Some(u)) = (max_ratio, size, uncompressed) {
            let (c, u) = (i64::from(c), i64::from(u));
            let most = c
                .saturating_mul(i64::try_from(ratio).unwrap_or(i64::MAX))
                .saturating_add(64);
            if c >= 0 && u > most {
                return Err(format!(
                    "the header of page {page} claims {u} bytes uncompressed from {c} compressed \
                     (at most {ratio} per byte with this codec)"
                ));
            }
        }
        let Some(next) = size
            .and_then(|s| usize::try_from(s).ok())
            .and_then(|s| r.pos.checked_add(s))
            .filter(|&next| next <= chunk.len())
        else {
            return Ok(());
        };
        r.pos = next;
        page += 1;
    }
    Ok(())
}

/// A cursor over the footer or a column chunk.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bad<T>(&self, msg: impl std::fmt::Display) -> Walk<T> {
        Err(Stop::Bad(format!(
            "{msg} (at byte {} of {})",
            self.pos,
            self.buf.len()
        )))
    }

    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Walk<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            // the walk lost step with the crate's reading (see the module
            // documentation), or the footer is short: the crate decides
            None => Err(Stop::Unknown),
        }
    }

    fn skip(&mut self, n: usize) -> Walk<()> {
        if n > self.left() {
            return self.bad(format!("declares {n} bytes where {} are left", self.left()));
        }
        self.pos += n;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most 10 bytes.
    fn varint(&mut self) -> Walk<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift.min(63);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Stop::Unknown)
    }

    /// A zigzag-encoded signed varint.
    fn signed(&mut self) -> Walk<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A container's element count, refused when its elements (each at
    /// least `min_bytes`) cannot fit in what is left.
    fn count(&mut self, n: u64, min_bytes: usize, what: &str) -> Walk<usize> {
        let fits = usize::try_from(n)
            .ok()
            .filter(|&n| n.saturating_mul(min_bytes) <= self.left());
        match fits {
            Some(n) => Ok(n),
            None => self.bad(format!(
                "declares a {what} of {n} elements where {} bytes are left",
                self.left()
            )),
        }
    }

    /// A list or set header: (element count, element type).
    fn list_header(&mut self, what: &str) -> Walk<(usize, u8)> {
        let h = self.byte()?;
        let elem = h & 0x0f;
        let short = u64::from(h >> 4);
        let n = if short == 15 { self.varint()? } else { short };
        Ok((self.count(n, 1, what)?, elem))
    }

    /// Skips a value of type `t`; `in_list`: an element of a container,
    /// where a boolean takes a byte.
    fn value(&mut self, t: u8, in_list: bool, depth: usize) -> Walk<()> {
        if depth > MAX_DEPTH {
            return self.bad(format!("nests deeper than {MAX_DEPTH}"));
        }
        match t {
            kind::TRUE | kind::FALSE => {
                if in_list {
                    self.skip(1)?;
                }
            }
            kind::BYTE => self.skip(1)?,
            kind::I16 | kind::I32 | kind::I64 => {
                self.varint()?;
            }
            kind::DOUBLE => self.skip(8)?,
            kind::BINARY => {
                let n = self.varint()?;
                let n = self.count(n, 1, "binary")?;
                self.skip(n)?;
            }
            kind::LIST | kind::SET => {
                let (n, elem) = self.list_header("list")?;
                for _ in 0..n {
                    self.value(elem, true, depth + 1)?;
                }
            }
            kind::MAP => {
                let n = self.varint()?;
                let n = self.count(n, 2, "map")?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.value(kv >> 4, true, depth + 1)?;
                        self.value(kv & 0x0f, true, depth + 1)?;
                    }
                }
            }
            kind::STRUCT => {
                self.fields(depth + 1, |r, _, t, depth| r.value(t, false, depth))?;
            }
            _ => return Err(Stop::Unknown),
        }
        Ok(())
    }

    /// The fields of a struct up to its stop byte: `field(reader, id, type,
    /// depth)` reads or skips each value.
    fn fields(
        &mut self,
        depth: usize,
        mut field: impl FnMut(&mut Self, i64, u8, usize) -> Walk<()>,
    ) -> Walk<()> {
        if depth > MAX_DEPTH {
            return self.bad(format!("nests deeper than {MAX_DEPTH}"));
        }
        let mut id = 0i64;
        loop {
            let h = self.byte()?;
            let t = h & 0x0f;
            if t == kind::STOP {
                return Ok(());
            }
            let delta = i64::from(h >> 4);
            id = if delta == 0 {
                self.signed()?
            } else {
                id + delta
            };
            field(self, id, t, depth)?;
        }
    }

    /// `FileMetaData`: field 2 is the schema, a list of `SchemaElement`s
    /// whose field 5 is `num_children` (both read as the crate reads them,
    /// whatever their headers declare).
    fn file_metadata(&mut self) -> Walk<()> {
        self.fields(0, |r, id, t, depth| {
            if id != 2 {
                return r.value(t, false, depth);
            }
            let (n, _) = r.list_header("schema")?;
            for _ in 0..n {
                r.fields(depth + 1, |r, id, t, depth| {
                    if id != 5 {
                        return r.value(t, false, depth);
                    }
                    // an i32, truncated from the varint as the crate does
                    let children = r.signed()? as i32;
                    if usize::try_from(children).map_or(true, |c| c >= n.max(1)) {
                        return r.bad(format!(
                            "has a schema element claiming {children} children among {n} elements"
                        ));
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `footer` with its length and magic.
    fn file(footer: &[u8]) -> Vec<u8> {
        let mut f = b"PAR1".to_vec();
        f.extend_from_slice(footer);
        f.extend_from_slice(&(footer.len() as u32).to_le_bytes());
        f.extend_from_slice(b"PAR1");
        f
    }

    /// A zigzag varint.
    fn zz(v: i64) -> Vec<u8> {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            let b = (u & 0x7f) as u8;
            u >>= 7;
            if u == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    /// `FileMetaData { version: 1, schema: [root with `root_children`
    /// children, then leaves named "a"...], num_rows: 0 }`.
    fn metadata(leaves: usize, root_children: i64) -> Vec<u8> {
        let mut m = vec![0x15];
        m.extend(zz(1)); // field 1, i32 version
        m.push(0x19); // field 2, list
        m.push(((leaves as u8 + 1) << 4) | kind::STRUCT);
        // root: field 4 name "r", field 5 num_children
        m.extend([0x48, 1, b'r', 0x15]);
        m.extend(zz(root_children));
        m.push(0);
        for _ in 0..leaves {
            // field 1 type i32 = 1 (INT32), field 4 name "a"
            m.extend([0x15, 2, 0x38, 1, b'a', 0]);
        }
        m.push(0x16); // field 3, i64 num_rows
        m.extend(zz(0));
        m.push(0);
        m
    }

    #[test]
    fn a_well_formed_footer_passes() {
        assert_eq!(check(&file(&metadata(3, 3))), Ok(()));
        // No footer, or an encrypted one: left to the crate.
        assert_eq!(check(b"PAR1"), Ok(()));
        assert_eq!(check(b"PAR1\x00\x00\x00\x00PARE"), Ok(()));
    }

    #[test]
    fn a_schema_element_claiming_too_many_children_is_refused() {
        let e = check(&file(&metadata(3, 1_300_000_000))).unwrap_err();
        assert!(
            e.contains("claiming 1300000000 children among 4 elements"),
            "{e}"
        );
        let e = check(&file(&metadata(3, -1))).unwrap_err();
        assert!(e.contains("claiming -1 children"), "{e}");
        // num_children under a header declaring a byte: read as the crate
        // reads it, an integer (the fuzz finding's shape)
        let mut m = metadata(3, 1);
        let root5 = m.windows(2).position(|w| w == [1, b'r']).unwrap() + 2;
        assert_eq!(m[root5..root5 + 2], [0x15, 2]);
        // field 5 declared as a byte, then the varint of 2^31 - 1 zigzagged
        m.splice(root5..root5 + 2, [0x13, 0xfe, 0xff, 0xff, 0xff, 0x0f]);
        let e = check(&file(&m)).unwrap_err();
        assert!(e.contains("claiming 2147483647 children"), "{e}");
    }

    #[test]
    fn containers_larger_than_the_footer_are_refused() {
        // field 1 as a set of 2^31 booleans: the 67-byte fuzz finding's shape
        let mut m = vec![0x1a, 0xf2];
        m.extend([0x80, 0x80, 0x80, 0x80, 0x08]);
        m.push(0);
        let e = check(&file(&m)).unwrap_err();
        assert!(
            e.contains("a list of 2147483648 elements where 1 bytes are left"),
            "{e}"
        );
        // a binary longer than the footer
        let e = check(&file(&[0x18, 0x7f, 0])).unwrap_err();
        assert!(e.contains("a binary of 127 elements"), "{e}");
        // a map of more entries than bytes
        let e = check(&file(&[0x1b, 0x10, 0x55, 0])).unwrap_err();
        assert!(e.contains("a map of 16 elements"), "{e}");
        // a footer that ends inside a struct: no verdict (the crate's own
        // parser refuses it)
        assert_eq!(check(&file(&[0x15, 2])), Ok(()));
    }

    #[test]
    fn page_headers_are_walked_page_by_page() {
        // page 0: field 3 = 2 bytes of page; page 1: a set of 2^31 booleans
        let mut chunk = vec![0x35, 0x04, 0x00, 0xaa, 0xbb];
        assert_eq!(check_pages(&chunk, None), Ok(()));
        chunk.extend([0x1a, 0xf2, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00]);
        let e = check_pages(&chunk, None).unwrap_err();
        assert!(
            e.starts_with("the header of page 1 declares a list of 2147483648"),
            "{e}"
        );
        // a page running past the chunk: no verdict
        assert_eq!(check_pages(&[0x35, 0x7e, 0x00], None), Ok(()));
    }

    #[test]
    fn an_uncompressed_size_beyond_the_codec_is_refused() {
        // field 2 (uncompressed) = 108 or 109 (zigzag varints d8 01, da 01),
        // field 3 (compressed) = 2, then the page's 2 bytes: 22 x 2 + 64 = 108
        let page = |u: [u8; 2]| [0x25, u[0], u[1], 0x15, 0x04, 0x00, 0xaa, 0xbb];
        assert_eq!(
            check_pages(&page([0xd8, 1]), Some(SNAPPY_MAX_RATIO)),
            Ok(())
        );
        let e = check_pages(&page([0xda, 1]), Some(SNAPPY_MAX_RATIO)).unwrap_err();
        assert!(
            e.contains("page 0 claims 109 bytes uncompressed from 2 compressed"),
            "{e}"
        );
        // without a codec bound the sizes are not compared
        assert_eq!(check_pages(&page([0xda, 1]), None), Ok(()));
    }

    #[test]
    fn deep_nesting_is_refused_and_unknown_types_give_no_verdict() {
        // field 1, a struct, nested 100 deep, then their stops
        let mut m = vec![0x1c; 100];
        m.extend([0; 101]);
        let e = check(&file(&m)).unwrap_err();
        assert!(e.contains("nests deeper than 64"), "{e}");
        // type 13 is not Thrift compact: no verdict
        assert_eq!(check(&file(&[0x1d, 0xff, 0xff])), Ok(()));
    }
}
