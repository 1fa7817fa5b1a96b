//! The heap's changes as frames of the store's log (CLIENT frames,
//! [`crate::store::log::client`]): the index stages one with each
//! operation that changes an object, so the change is durable exactly
//! when the operation is, and restart hands it back for
//! [`super::Heap::apply_frame`].
//!
//! A frame is a kind byte and the object's id (`u64` LE); a put adds the
//! lengths of the payload and the WKB (`u32` LE each), the payload and the
//! WKB. The kind bytes
//! (0x81, 0x82) differ from those of the record map's frames
//! ([`crate::records::log`]), which share the log: [`is_heap_frame`]
//! tells them apart.
use crate::{Error, Result};

const PUT: u8 = 0x81;
const DELETE: u8 = 0x82;
/// Bytes of a put's kind, id and lengths.
const PUT_HEAD: usize = 17;

/// The frame that puts object `id` with `payload` and `wkb`.
pub fn put(id: u64, payload: &[u8], wkb: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(PUT_HEAD + payload.len() + wkb.len());
    f.push(PUT);
    f.extend_from_slice(&id.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(&(wkb.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    f.extend_from_slice(wkb);
    f
}

/// The frame that deletes object `id`.
pub fn delete(id: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(9);
    f.push(DELETE);
    f.extend_from_slice(&id.to_le_bytes());
    f
}

/// Whether `frame` is one of the heap's (not the record map's).
pub fn is_heap_frame(frame: &[u8]) -> bool {
    matches!(frame.first(), Some(&PUT) | Some(&DELETE))
}

/// A change a frame holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// Object `id`'s new version.
    Put {
        id: u64,
        payload: Vec<u8>,
        wkb: Vec<u8>,
    },
    /// Object `id` deleted.
    Delete { id: u64 },
}

/// The change of a heap frame; [`Error::Corrupt`] when it does not parse.
pub(super) fn decode(frame: &[u8]) -> Result<Change> {
    let bad = || Error::corrupt(None, "a frame of the store's log that is not an object-heap change");
    let id = frame
        .get(1..9)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .ok_or_else(bad)?;
    match frame.first() {
        Some(&DELETE) if frame.len() == 9 => Ok(Change::Delete { id }),
        Some(&PUT) => {
            let len_at = |at: usize| {
                frame
                    .get(at..at + 4)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(|b| u32::from_le_bytes(b) as usize)
                    .ok_or_else(bad)
            };
            let (plen, wlen) = (len_at(9)?, len_at(13)?);
            if wlen == 0 || frame.len() != PUT_HEAD + plen + wlen {
                return Err(bad());
            }
            let payload = frame[PUT_HEAD..PUT_HEAD + plen].to_vec();
            let wkb = frame[PUT_HEAD + plen..].to_vec();
            Ok(Change::Put { id, payload, wkb })
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_damaged_ones_are_refused() {
        let f = put(7, b"pay", &[1, 2, 3]);
        assert!(is_heap_frame(&f));
        assert_eq!(
            decode(&f).unwrap(),
            Change::Put {
                id: 7,
                payload: b"pay".to_vec(),
                wkb: vec![1, 2, 3]
            }
        );
        let d = delete(u64::MAX);
        assert!(is_heap_frame(&d));
        assert_eq!(decode(&d).unwrap(), Change::Delete { id: u64::MAX });
        // The record map's frames (kinds 1 and 2) are not the heap's.
        assert!(!is_heap_frame(&crate::records::log::remove_frame(7)));
        assert!(!is_heap_frame(&[]));
        for cut in 0..f.len() {
            assert!(decode(&f[..cut]).is_err(), "{cut}");
        }
        let mut longer = f.clone();
        longer.push(4);
        assert!(decode(&longer).is_err());
        assert!(decode(&[DELETE, 0, 0]).is_err());
        let mut long = d.clone();
        long.push(0);
        assert!(decode(&long).is_err());
    }
}
