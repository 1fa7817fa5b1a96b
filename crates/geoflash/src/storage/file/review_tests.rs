//! Review of the file device (durability and wrong answers): offsets past
//! 4 GiB in every mode and engine, and a file cut inside a page.
use std::path::PathBuf;

use super::*;

fn test_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap()
}

const CONFIGS: [(bool, IoEngine); 4] = [
    (false, IoEngine::Psync),
    (false, IoEngine::Uring),
    (true, IoEngine::Psync),
    (true, IoEngine::Uring),
];

fn open(
    path: &Path,
    ps: usize,
    direct: bool,
    engine: IoEngine,
    capacity_pages: u64,
) -> Option<FileDevice> {
    let opts = FileDeviceOptions {
        direct,
        engine,
        capacity_pages,
        read_only: false,
    };
    match FileDevice::open(path, ps, opts) {
        Ok(d) => Some(d),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains("refuses O_DIRECT") || msg.contains("io_uring requested"),
                "open failed: {msg}"
            );
            if let Err(e) = crate::testenv::prerequisite_missing(&format!("{opts:?}: {msg}")) {
                panic!("{e}");
            }
            None
        }
    }
}

fn pattern(page: PageId, seed: u8, ps: usize) -> Vec<u8> {
    (0..ps)
        .map(|i| (i as u64 ^ page.wrapping_mul(131) ^ u64::from(seed) ^ (page >> 8)) as u8)
        .collect()
}

fn streamed(d: &FileDevice, pages: &[PageId]) -> Vec<Vec<u8>> {
    let mut got: Vec<Option<Vec<u8>>> = vec![None; pages.len()];
    d.read_batch_each(pages, &mut |i, bytes| {
        assert!(got[i].is_none(), "position {i} handed over twice");
        got[i] = Some(bytes.to_vec());
        Ok(())
    })
    .unwrap();
    got.into_iter()
        .map(|p| p.expect("every position handed over"))
        .collect()
}

/// Pages around 4 GiB and 8 GiB of file offset (runs merged into one I/O
/// across each boundary, scattered pages, a misaligned caller buffer, a
/// streamed read, trims and a reservation there) read back what was
/// written, in every mode and engine: no offset is cut to 32 bits.
#[test]
fn pages_past_4_gib_round_trip_in_every_mode_and_engine() {
    for ps in [512usize, 4096] {
        let four = (1u64 << 32) / ps as u64;
        let eight = (1u64 << 33) / ps as u64;
        for (direct, engine) in CONFIGS {
            let dir = test_dir();
            let Some(d) = open(&dir.path().join("big.dat"), ps, direct, engine, eight * 2) else {
                continue;
            };
            let mut pages: Vec<PageId> = (four - 3..four + 3).collect();
            pages.extend([eight + 5, 7, eight - 1, eight]);
            let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, 1, ps)).collect();
            d.write_batch(&pages, &data).unwrap();
            d.sync().unwrap();
            let mut want = pages.clone();
            want.reverse();
            want.push(four + 100);
            let mut storage = vec![0x55u8; want.len() * ps + 1];
            d.read_batch(&want, &mut storage[1..]).unwrap();
            let ctx = format!("{ps} B pages, direct={direct}, {engine}");
            for (i, &p) in want.iter().enumerate() {
                let got = &storage[1 + i * ps..1 + (i + 1) * ps];
                if p == four + 100 {
                    assert!(got.iter().all(|&b| b == 0), "{ctx}: page {p} never written");
                } else {
                    assert_eq!(got, pattern(p, 1, ps), "{ctx}: page {p}");
                }
            }
            for (got, &p) in streamed(&d, &pages).iter().zip(&pages) {
                assert_eq!(got, &pattern(p, 1, ps), "{ctx}: streamed page {p}");
            }
            d.trim(&[four - 1, four, eight]).unwrap();
            d.reserve(four + 200..four + 260).unwrap();
            let mut one = vec![1u8; ps];
            for p in [four - 1, four, eight] {
                d.read(p, &mut one).unwrap();
                assert!(one.iter().all(|&b| b == 0), "{ctx}: trimmed page {p}");
            }
            for p in [four - 2, four + 1, eight - 1, eight + 5, 7] {
                d.read(p, &mut one).unwrap();
                assert_eq!(one, pattern(p, 1, ps), "{ctx}: page {p} beside the trims");
            }
        }
    }
}

/// A file cut inside a page (damage: a truncated `pages.dat`) reads that
/// page as its bytes up to the cut and zeros after, or fails naming the
/// file: never as other bytes, in every mode and engine, batched and
/// streamed.
#[test]
fn a_file_cut_inside_a_page_reads_its_bytes_and_zeros_or_an_error_naming_it() {
    let ps = 4096;
    for (direct, engine) in CONFIGS {
        let dir = test_dir();
        let path = dir.path().join("cut.dat");
        let Some(d) = open(&path, ps, direct, engine, 64) else {
            continue;
        };
        let pages: Vec<PageId> = (0..4).collect();
        let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, 3, ps)).collect();
        d.write_batch(&pages, &data).unwrap();
        d.sync().unwrap();
        let cut = 2 * ps + 1000;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut as u64)
            .unwrap();
        let ctx = format!("direct={direct}, {engine}");
        let check = |got: crate::Result<Vec<u8>>, how: &str| match got {
            Ok(bytes) => {
                let mut want = pattern(2, 3, ps);
                want[1000..].fill(0);
                assert_eq!(bytes, want, "{ctx}, {how}: page 2 after the cut");
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.contains("cut.dat"), "{ctx}, {how}: {msg}");
                eprintln!("{ctx}, {how}: {msg}");
            }
        };
        let mut buf = vec![0x77u8; 2 * ps];
        check(
            d.read_batch(&[1, 2], &mut buf).map(|()| buf[ps..].to_vec()),
            "batch",
        );
        let mut got = None;
        let r = d.read_batch_each(&[1, 2], &mut |i, bytes| {
            if i == 1 {
                got = Some(bytes.to_vec());
            }
            Ok(())
        });
        check(r.map(|()| got.unwrap_or_default()), "streamed");
    }
}
