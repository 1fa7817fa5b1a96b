//! Fallible memory reservations for sizes a user chose (`--count`,
//! `--batch`, kNN's `k`, …): a size the machine cannot hold is an
//! [`Error::InvalidInput`](crate::Error) naming it, never an allocation
//! failure that aborts the process.
//!
//! Where an answer is bounded by something smaller than the user's size
//! (kNN: the number of records), reserve for that bound instead
//! ([`answer_capacity`]) and let the vector grow with the answer.
use crate::{Error, Result};

/// The most slots reserved up front for an answer whose final size is only
/// known at its end: a vector grows beyond this as items arrive.
pub const MAX_UP_FRONT: usize = 1 << 16;

/// Slots to reserve for an answer of at most `k` items out of `available`
/// (kNN's `k` over the records of an index): the smallest of the two,
/// capped at [`MAX_UP_FRONT`], so that memory follows the answer and not
/// the size asked for.
pub fn answer_capacity(k: usize, available: u64) -> usize {
    let available = usize::try_from(available).unwrap_or(usize::MAX);
    k.min(available).min(MAX_UP_FRONT)
}

/// An empty vector with room for exactly `n` items, or an error naming
/// `what` when the memory cannot be had (the request overflows the address
/// space or the allocator refuses it).
pub fn vec_for<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| too_large(n, std::mem::size_of::<T>(), what))?;
    Ok(v)
}

/// A vector of `n` copies of `value` (as `vec![value; n]`), or the error of
/// [`vec_for`] when the memory cannot be had.
pub fn filled<T: Clone>(value: T, n: usize, what: &str) -> Result<Vec<T>> {
    let mut v = vec_for(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// Reserves room for `extra` more items in `v`, or the error of [`vec_for`].
pub fn grow<T>(v: &mut Vec<T>, extra: usize, what: &str) -> Result<()> {
    v.try_reserve_exact(extra)
        .map_err(|_| too_large(extra, std::mem::size_of::<T>(), what))
}

fn too_large(n: usize, item_bytes: usize, what: &str) -> Error {
    let bytes = (n as u128) * (item_bytes as u128);
    Error::invalid(format!(
        "{what}: {n} is too large ({bytes} bytes of memory cannot be allocated)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_sizes_are_errors_naming_the_size() {
        let err = vec_for::<[u8; 32]>(usize::MAX / 2, "--count").unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
        assert!(err.to_string().contains("--count"), "{err}");
        assert!(filled(0u64, 1 << 61, "--batch").is_err());
        let mut v: Vec<u64> = Vec::new();
        assert!(grow(&mut v, usize::MAX, "k").is_err());
        let v: Vec<u64> = filled(7, 3, "n").unwrap();
        assert_eq!(v, vec![7, 7, 7]);
    }

    #[test]
    fn answer_capacity_follows_the_smaller_bound() {
        assert_eq!(answer_capacity(usize::MAX, 10), 10);
        assert_eq!(answer_capacity(5, u64::MAX), 5);
        assert_eq!(answer_capacity(usize::MAX, u64::MAX), MAX_UP_FRONT);
        assert_eq!(answer_capacity(0, 10), 0);
    }
}
