//! Parsing of human-written sizes: `512KiB`, `4MiB`, `4096`, `1GB`.
use crate::{Error, Result};

/// Parses a size: a non-negative integer, optionally followed by a unit.
/// Binary units (`KiB`, `MiB`, `GiB`, `TiB`, and the short `K`, `M`, `G`, `T`)
/// are powers of 1024; decimal units (`kB`/`KB`, `MB`, `GB`, `TB`) powers of 1000;
/// `B` or no unit means bytes. Case-insensitive, surrounding spaces allowed.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(Error::invalid(format!(
            "size {text:?} does not start with a number (examples: 4096, 512KiB, 4MiB, 1GB)"
        )));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| Error::invalid(format!("size {text:?} is too large")))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(Error::invalid(format!(
                "size {text:?} has unknown unit {other:?} (use B, KiB, MiB, GiB, kB, MB, GB)"
            )))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| Error::invalid(format!("size {text:?} overflows 64 bits")))
}

/// Checks that `page_size` is a power of two between 512 B and 64 KiB.
pub fn check_page_size(page_size: usize) -> Result<()> {
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(Error::invalid(format!(
            "page size {page_size} must be a power of two from 512 to 65536 bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_contract_examples() {
        assert_eq!(parse_size("512KiB").unwrap(), 512 * 1024);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_size(" 2 k ").unwrap(), 2048);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_size("").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000000TiB").is_err());
    }

    #[test]
    fn page_sizes() {
        for p in [512, 1024, 4096, 65536] {
            check_page_size(p).unwrap();
        }
        for p in [0, 256, 1000, 4097, 131072] {
            assert!(check_page_size(p).is_err());
        }
    }
}
