//! Feeds arbitrary bytes to the page codec's decoders. Nothing may panic, and
//! whatever decodes must re-encode to exactly the same bytes (the encoding is
//! canonical).
//!
//! Input format: the bytes are tried as they are, then shaped into a page:
//! the first byte is a control byte — bits 0..=2 choose the page size
//! (512 << n bytes), bit 3 asks to re-seal the checksum so that the fuzzer
//! gets past the CRC and exercises the structural validation — and the rest
//! fills the page (zero padded, truncated to the page size).
#![no_main]

use geoflash::page::{
    decode_header, decode_node, decode_raw, encode_node, encode_raw, update_checksum,
};
use libfuzzer_sys::fuzz_target;

fn check(buf: &[u8]) {
    let header = decode_header(buf, Some(7));
    if let Ok((h, node)) = decode_node(buf, Some(7)) {
        assert_eq!(header.as_ref().ok(), Some(&h));
        let mut again = vec![0u8; buf.len()];
        encode_node(&node, h.lsn, h.has_payload, &mut again).expect("a decoded node re-encodes");
        assert_eq!(again, buf, "node page does not re-encode to the same bytes");
    }
    if let Ok((h, body)) = decode_raw(buf, None) {
        assert_eq!(header.as_ref().ok(), Some(&h));
        let mut again = vec![0u8; buf.len()];
        encode_raw(h.kind, h.lsn, body, &mut again).expect("a decoded raw page re-encodes");
        assert_eq!(again, buf, "raw page does not re-encode to the same bytes");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some((&ctl, rest)) = data.split_first() {
        let size = 512usize << (ctl & 0x07);
        let mut page = vec![0u8; size];
        let n = rest.len().min(size);
        page[..n].copy_from_slice(&rest[..n]);
        if ctl & 0x08 != 0 {
            update_checksum(&mut page).expect("page sizes 512..=65536 are valid");
        }
        check(&page);
    }
});
