//! XOR parity of a stream of bytes folded into stripes: what the seals of
//! the store's compact log (`store::log::seal`, one stripe per log page)
//! and of the record map's log (`records::log`, 4 KiB stripes of the bytes
//! a sync makes durable) keep so that one damaged stripe-sized piece of
//! the last synced batch can be rebuilt from the others.
//!
//! Byte `o` of the stream (its offset from the batch's start) is folded
//! into byte `o % width` of the parity, so any `width` consecutive bytes
//! land on distinct parity bytes: when every other byte of the batch is
//! known, those bytes are the parity XOR the fold of the others.

/// The XOR of a stream's bytes folded into `width`-byte stripes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Parity {
    xor: Vec<u8>,
}

impl Parity {
    /// Folds `bytes`, which sit at offset `at` of the stream, into stripes
    /// of `width` bytes (a different width than before starts over).
    pub fn fold(&mut self, width: usize, at: u64, bytes: &[u8]) {
        if width == 0 {
            return;
        }
        if self.xor.len() != width {
            self.xor = vec![0u8; width];
        }
        let mut r = (at % width as u64) as usize;
        for chunk in bytes.chunks(width) {
            // One stripe's worth may wrap around the end of the parity.
            let (head, tail) = chunk.split_at(chunk.len().min(width - r));
            for (x, b) in self.xor[r..].iter_mut().zip(head) {
                *x ^= b;
            }
            for (x, b) in self.xor.iter_mut().zip(tail) {
                *x ^= b;
            }
            r = (r + chunk.len()) % width;
        }
    }

    /// Folds the parity `other` (of the same width, or empty) in too.
    pub fn merge(&mut self, other: &[u8]) {
        if other.is_empty() {
            return;
        }
        if self.xor.len() != other.len() {
            self.xor = vec![0u8; other.len()];
        }
        for (x, b) in self.xor.iter_mut().zip(other) {
            *x ^= b;
        }
    }

    /// The parity: `width` bytes, or none before the first fold.
    pub fn bytes(&self) -> &[u8] {
        &self.xor
    }

    /// Starts a new stream (of the same width).
    pub fn clear(&mut self) {
        self.xor.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_stripe_of_a_stream_is_the_parity_xor_the_others() {
        let stream: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 251) as u8).collect();
        let width = 64;
        // Folded in uneven pieces, as appends arrive.
        let mut p = Parity::default();
        let mut at = 0;
        for piece in stream.chunks(23) {
            p.fold(width, at as u64, piece);
            at += piece.len();
        }
        for start in [0usize, 1, 63, 500, 1000 - width] {
            let mut damaged = stream.clone();
            damaged[start..start + width].fill(0);
            let mut x = Parity::default();
            x.fold(width, 0, &damaged);
            x.merge(p.bytes());
            for (o, want) in stream[start..start + width].iter().enumerate() {
                assert_eq!(x.bytes()[(start + o) % width], *want, "stripe at {start}");
            }
        }
    }
}
