//! Seals of the record map's log (format version 2): the parity of the
//! frames each sync makes durable, written with that sync.
//!
//! A damaged block at the end of `pyrecords.log` cannot be told from a
//! crash's torn append by the frames alone (issue 44: zeros over the last
//! commit's frames opened the index at an earlier commit without an
//! error). So every [`RecordLog::sync`](super::RecordLog::sync) that made
//! frames durable appends, before its one `fsync`, a *seal frame*: the
//! XOR of the bytes of the frames written since the previous seal, folded
//! into [`BLOCK`]-byte stripes ([`crate::parity::Parity`], the code the
//! store log's seal pages use). The frames a seal covers run from the end
//! of the previous seal frame (or the header) to the seal frame's start.
//!
//! The part of the seal a rebuild needs (the *inner seal*) starts at the
//! first [`BLOCK`] boundary of the file after the seal frame's header and
//! kind byte, the bytes between are zeros: no aligned block holds both a
//! covered byte and a byte of the inner seal, and the frame header and the
//! inner seal never share a block either. One damaged block therefore
//! leaves either the covered frames or the seal intact, and the reader
//! finds the inner seal by looking at block boundaries alone, past frames
//! whose lengths it cannot trust.
//!
//! # Inner seal layout
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic [`SEAL_MAGIC`] = `b"GFPYSEAL"` |
//! | 8 | 8 | generation of the log |
//! | 16 | 8 | file offset of the first covered byte |
//! | 24 | 8 | file offset of the seal frame (the end of the covered bytes) |
//! | 32 | 4 | CRC-32C of bytes 0..32 and of the parity |
//! | 36 | p | the parity: `p = min(covered bytes, BLOCK)` |
//!
//! The inner seal ends the seal frame. Its position follows from the seal
//! frame's, which the reader checks, so an inner seal read elsewhere (inside
//! a pickled object) is never taken for one.
use crate::parity::Parity;

/// The damage unit the seals rebuild, and the width of their parity: one
/// aligned block of this many bytes of the file.
pub const BLOCK: usize = 4096;

/// Magic of an inner seal.
pub const SEAL_MAGIC: [u8; 8] = *b"GFPYSEAL";

/// Bytes of an inner seal before its parity.
const FIXED: usize = 36;

/// Bytes of a frame's header (length, payload CRC, header CRC).
const FRAME_HEADER: usize = super::FRAME_HEADER;

/// A valid seal found in a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seal {
    /// File offset of the first covered byte.
    pub first: usize,
    /// File offset of the seal frame (the end of the covered bytes).
    pub frame: usize,
    /// File offset after the seal frame.
    pub end: usize,
    /// The parity, [`BLOCK`] bytes (zeros past the covered length).
    pub parity: Vec<u8>,
}

/// Where the inner seal of a seal frame at file offset `frame` starts.
pub(super) fn inner_at(frame: usize) -> usize {
    (frame + FRAME_HEADER + 1).div_ceil(BLOCK) * BLOCK
}

/// The payload of the seal frame at file offset `frame` of a log of
/// `generation`, covering the bytes from `first` to `frame` whose parity
/// is `parity` ([`BLOCK`] wide): the kind byte `kind`, zeros up to the
/// block boundary, the inner seal.
pub(super) fn payload(
    kind: u8,
    generation: u64,
    first: u64,
    frame: u64,
    parity: &Parity,
) -> Vec<u8> {
    let at = inner_at(frame as usize);
    let start = frame as usize + FRAME_HEADER;
    let p = ((frame - first) as usize).min(BLOCK);
    let mut out = vec![0u8; at - start + FIXED + p];
    out[0] = kind;
    let inner = &mut out[at - start..];
    inner[..8].copy_from_slice(&SEAL_MAGIC);
    inner[8..16].copy_from_slice(&generation.to_le_bytes());
    inner[16..24].copy_from_slice(&first.to_le_bytes());
    inner[24..32].copy_from_slice(&frame.to_le_bytes());
    if let Some(src) = parity.bytes().get(..p) {
        inner[FIXED..].copy_from_slice(src);
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&inner[..32]), &inner[FIXED..]);
    inner[32..36].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The seal whose inner seal starts at file offset `at` of `bytes`, if it
/// is a valid one of `generation` at the place its frame puts it.
pub(super) fn seal_at(bytes: &[u8], at: usize, generation: u64) -> Option<Seal> {
    let u64_at = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?))
    };
    if bytes.get(at..at + 8)? != SEAL_MAGIC || u64_at(at + 8)? != generation {
        return None;
    }
    let first = usize::try_from(u64_at(at + 16)?).ok()?;
    let frame = usize::try_from(u64_at(at + 24)?).ok()?;
    if first >= frame || frame.checked_add(FRAME_HEADER + 1)? > at || inner_at(frame) != at {
        return None;
    }
    let p = (frame - first).min(BLOCK);
    let parity = bytes.get(at + FIXED..at + FIXED + p)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(bytes.get(at..at + 32)?), parity);
    if bytes.get(at + 32..at + 36)? != crc.to_le_bytes() {
        return None;
    }
    let mut full = parity.to_vec();
    full.resize(BLOCK, 0);
    Some(Seal {
        first,
        frame,
        end: at + FIXED + p,
        parity: full,
    })
}

/// The first valid seal of `generation` whose inner seal starts at or
/// after file offset `from` (at block boundaries).
pub(super) fn find(bytes: &[u8], from: usize, generation: u64) -> Option<Seal> {
    (from.div_ceil(BLOCK) * BLOCK..bytes.len())
        .step_by(BLOCK)
        .find_map(|at| seal_at(bytes, at, generation))
}

/// Rebuilds the damaged bytes of the frames `seal` covers, when they lie
/// in one aligned [`BLOCK`] of the file that holds bytes of the frame
/// from `at` to `frame_end`: tries each such block, and keeps the
/// correction after which `intact` holds (the caller checks that the
/// frames from `at` to the seal then all pass their checksums). Returns
/// the bytes corrected, or `None` (`bytes` unchanged) when no block does.
pub(super) fn rebuild(
    bytes: &mut [u8],
    seal: &Seal,
    at: usize,
    frame_end: usize,
    intact: impl Fn(&[u8]) -> bool,
) -> Option<usize> {
    let (first, end) = (seal.first, seal.frame);
    let covered = bytes.get(first..end)?;
    // The XOR of the damage folded into stripes: the parity of what was
    // written against the parity of what is read.
    let mut x = Parity::default();
    x.fold(BLOCK, 0, covered);
    x.merge(&seal.parity);
    let x = x.bytes().to_vec();
    if x.iter().all(|&b| b == 0) {
        return None;
    }
    let stripe = |o: usize| (o - first) % BLOCK;
    let mut block = at / BLOCK * BLOCK;
    while block < frame_end.min(end) {
        let lo = block.max(first);
        let hi = (block + BLOCK).min(end);
        // A block that holds fewer than BLOCK covered bytes explains the
        // damage only if the parity differs nowhere else.
        let mut inside = vec![false; BLOCK];
        for o in lo..hi {
            inside[stripe(o)] = true;
        }
        if x.iter().zip(&inside).all(|(&d, &i)| d == 0 || i) {
            let flip = |bytes: &mut [u8]| {
                for o in lo..hi {
                    bytes[o] ^= x[stripe(o)];
                }
            };
            flip(bytes);
            if intact(bytes) {
                return Some(x.iter().filter(|&&d| d != 0).count());
            }
            flip(bytes);
        }
        block += BLOCK;
    }
    None
}
