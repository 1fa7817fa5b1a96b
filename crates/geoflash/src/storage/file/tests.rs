use std::collections::HashMap;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::storage::tests::assert_read_out_of_range;

/// A temporary directory under the workspace's `target/` (a real disk
/// filesystem here; `/tmp` may be tmpfs elsewhere).
fn test_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap()
}

fn opts(direct: bool, engine: IoEngine, capacity_pages: u64) -> FileDeviceOptions {
    FileDeviceOptions {
        direct,
        engine,
        capacity_pages,
        read_only: false,
    }
}

/// Reports a missing prerequisite through [`crate::testenv`]: the test
/// fails under CI, and is skipped (with the reason printed) elsewhere.
fn missing(what: &str) {
    if let Err(e) = crate::testenv::prerequisite_missing(what) {
        panic!("{e}");
    }
}

/// Opens a device; `None` when the test directory's filesystem refuses
/// `O_DIRECT` or io_uring is unavailable for an explicit `Uring` request —
/// a failure under CI, a skip with a message elsewhere ([`missing`]).
fn open_or_skip(path: &Path, ps: usize, o: FileDeviceOptions) -> Option<FileDevice> {
    match FileDevice::open(path, ps, o) {
        Ok(d) => Some(d),
        Err(e) => {
            let msg = e.to_string();
            if msg.contains("refuses O_DIRECT") || msg.contains("io_uring requested") {
                missing(&format!("{o:?} under {}: {msg}", path.display()));
                None
            } else {
                panic!("open failed: {msg}");
            }
        }
    }
}

fn pattern(page: PageId, seed: u8, ps: usize) -> Vec<u8> {
    (0..ps)
        .map(|i| (i as u64 ^ page.wrapping_mul(131) ^ seed as u64) as u8)
        .collect()
}

const CONFIGS: [(bool, IoEngine); 4] = [
    (false, IoEngine::Psync),
    (false, IoEngine::Uring),
    (true, IoEngine::Psync),
    (true, IoEngine::Uring),
];

/// Runs `test` on a fresh device of `ps`-byte pages (file `f` of a new
/// test directory, no capacity limit) in each configuration of [`CONFIGS`]
/// that this machine offers (see [`open_or_skip`]).
fn on_each_fresh_device(ps: usize, test: impl Fn(FileDevice)) {
    for (direct, engine) in CONFIGS {
        let dir = test_dir();
        if let Some(d) = open_or_skip(&dir.path().join("f"), ps, opts(direct, engine, 0)) {
            test(d);
        }
    }
}

/// What the other tests of this module exercise on this machine: a direct
/// device whose `Auto` engine resolves to io_uring, writing and reading a
/// page through both. Without them those tests skip (outside CI) or fail
/// (under CI); this test says so once, by name.
#[test]
fn this_machine_runs_direct_io_and_io_uring() {
    let dir = test_dir();
    let Some(d) = open_or_skip(&dir.path().join("f"), 4096, opts(true, IoEngine::Auto, 0)) else {
        return;
    };
    assert!(d.is_direct(), "{}", d.describe());
    assert_ne!(d.engine(), IoEngine::Auto, "{}", d.describe());
    if d.engine() != IoEngine::Uring {
        missing(&format!(
            "io_uring: the kernel refused it, Auto resolved to {}",
            d.engine()
        ));
    }
    let mut buf = d.alloc_buf(2).unwrap();
    buf[..4096].copy_from_slice(&pattern(3, 1, 4096));
    buf[4096..].copy_from_slice(&pattern(9, 1, 4096));
    d.write_batch_raw(&[3, 9], &buf).unwrap();
    d.sync().unwrap();
    let mut back = d.alloc_buf(2).unwrap();
    d.read_batch_raw(&[9, 3], &mut back).unwrap();
    assert_eq!(&back[..4096], pattern(9, 1, 4096));
    assert_eq!(&back[4096..], pattern(3, 1, 4096));
    let io = d.stats().io;
    assert_eq!((io.pages_written, io.pages_read), (2, 2));
}

#[test]
fn round_trip_all_modes_and_engines() {
    for (direct, engine) in CONFIGS {
        for ps in [512usize, 4096, 65536] {
            let dir = test_dir();
            let path = dir.path().join("pages.dat");
            let Some(d) = open_or_skip(&path, ps, opts(direct, engine, 1 << 20)) else {
                continue;
            };
            assert_eq!(d.engine(), engine, "{}", d.describe());
            assert_eq!(d.is_direct(), direct);
            // Consecutive and scattered pages, including a duplicate (last wins).
            let pages: Vec<PageId> = vec![5, 6, 7, 100, 3, 4000, 6];
            let mut data = Vec::new();
            for (i, &p) in pages.iter().enumerate() {
                data.extend(pattern(p, i as u8, ps));
            }
            d.write_batch(&pages, &data).unwrap();
            // Read into a deliberately misaligned buffer (bounce path) and an
            // aligned one (direct path).
            let want: Vec<PageId> = vec![6, 5, 7, 100, 3, 4000, 9, 999_999];
            let mut storage = vec![0xAAu8; want.len() * ps + 1];
            let misaligned = &mut storage[1..];
            d.read_batch(&want, misaligned).unwrap();
            let mut aligned = d.alloc_buf(want.len()).unwrap();
            d.read_batch(&want, &mut aligned).unwrap();
            for buf in [&*misaligned, &aligned[..]] {
                let page = |i: usize| &buf[i * ps..(i + 1) * ps];
                assert_eq!(page(0), pattern(6, 6, ps), "dup: last wins");
                assert_eq!(page(1), pattern(5, 0, ps));
                assert_eq!(page(2), pattern(7, 2, ps));
                assert_eq!(page(3), pattern(100, 3, ps));
                assert_eq!(page(4), pattern(3, 4, ps));
                assert_eq!(page(5), pattern(4000, 5, ps));
                assert!(page(6).iter().all(|&b| b == 0), "never written");
                assert!(page(7).iter().all(|&b| b == 0), "beyond end of file");
            }
            let s = d.stats().io;
            assert_eq!(s.pages_written, 7);
            assert_eq!(s.pages_read, 16);
            assert_eq!((s.read_batches, s.write_batches), (2, 1));
            // Trimmed pages read as zeros; neighbours are untouched.
            d.trim(&[6, 5, 100]).unwrap();
            let mut one = vec![1u8; ps];
            for p in [5, 6, 100] {
                d.read(p, &mut one).unwrap();
                assert!(one.iter().all(|&b| b == 0), "trimmed page {p}");
            }
            d.read(7, &mut one).unwrap();
            assert_eq!(one, pattern(7, 2, ps));
            assert_eq!(d.stats().io.pages_trimmed, 3);
        }
    }
}

#[test]
fn batches_larger_than_the_ring() {
    let ps = 512;
    on_each_fresh_device(ps, |d| {
        // 700 scattered pages (no merging possible) plus a long run (merged
        // into spans of at most 1 MiB).
        let mut pages: Vec<PageId> = (0..700).map(|i| i * 3 + 1).collect();
        pages.extend(5000..8000);
        let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, 9, ps)).collect();
        d.write_batch(&pages, &data).unwrap();
        let mut rev = pages.clone();
        rev.reverse();
        let mut buf = vec![0u8; rev.len() * ps];
        d.read_batch(&rev, &mut buf).unwrap();
        for (i, &p) in rev.iter().enumerate() {
            assert_eq!(&buf[i * ps..(i + 1) * ps], pattern(p, 9, ps), "page {p}");
        }
        // Handed over page by page: the ring refilled as reads complete.
        let got = read_each(&d, &rev);
        for (i, &p) in rev.iter().enumerate() {
            assert_eq!(got[i], pattern(p, 9, ps), "page {p}");
        }
    });
}

/// A panic of the handler mid-batch reaches the caller, no page is handed
/// over after it, and the device reads correctly afterwards. (That the
/// reads in flight are waited for before the panic goes on, so the buffer
/// they write into outlives them, is `Ring::read_each`'s structure; this
/// test cannot observe it.)
#[test]
fn a_panic_of_the_handler_reaches_the_caller_and_the_device_stays_usable() {
    let ps = 4096;
    on_each_fresh_device(ps, |d| {
        let pages: Vec<PageId> = (0..600).map(|i| i * 3).collect();
        write_patterns(&d, &pages, 6);
        let mut calls = 0;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            d.read_batch_each(&pages, &mut |_, _| {
                calls += 1;
                assert!(calls < 3, "the handler panics at its third page");
                Ok(())
            })
        }));
        let message = caught.expect_err("the panic reaches the caller");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| message.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(text.contains("third page"), "{text}");
        assert_eq!(calls, 3, "no page handed over after the panic");
        assert_streams_patterns(&d, &pages, 6);
    });
}

/// A streamed batch larger than its buffer ([`STREAM_BUFFER_BYTES`]) hands
/// every page over once, at its position, the buffer wrapping around.
#[test]
fn a_streamed_batch_larger_than_its_buffer_hands_every_page_over_once() {
    let ps = 4096;
    let n = (STREAM_BUFFER_BYTES / ps) as u64 * 2 + 77;
    on_each_fresh_device(ps, |d| {
        let pages: Vec<PageId> = (0..n).map(|i| (i * 7919) % (n + 13)).collect();
        write_patterns(&d, &pages, 2);
        assert_streams_patterns(&d, &pages, 2);
    });
}

/// Runs of adjacent pages (reads of many pages, some longer than a
/// streamed read takes at once) in a batch several times its buffer: the
/// regions wrap around the buffer's end and are reused, and every page is
/// handed over once with its own bytes.
#[test]
fn runs_of_adjacent_pages_stream_through_a_wrapping_buffer() {
    let ps = 4096;
    let buffer_pages = (STREAM_BUFFER_BYTES / ps) as u64;
    on_each_fresh_device(ps, |d| {
        let mut pages = Vec::new();
        let mut next = 0u64;
        // Run lengths from 1 page to more than a quarter of the buffer,
        // gaps between them, until the batch holds 3.5 buffers of pages.
        for len in (1..).map(|k: u64| (k * 37) % (buffer_pages / 3) + 1) {
            if pages.len() as u64 >= buffer_pages * 7 / 2 {
                break;
            }
            pages.extend(next..next + len);
            next += len + 1 + len % 3;
        }
        write_patterns(&d, &pages, 4);
        assert_streams_patterns(&d, &pages, 4);
        let mut reversed = pages.clone();
        reversed.reverse();
        assert_streams_patterns(&d, &reversed, 4);
    });
}

/// Writes page `p` of `pages` as `pattern(p, seed, page size)`.
fn write_patterns(d: &FileDevice, pages: &[PageId], seed: u8) {
    let ps = d.page_size();
    let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, seed, ps)).collect();
    d.write_batch(pages, &data).unwrap();
}

/// Checks that [`read_each`] of `pages` hands over each one's pattern.
fn assert_streams_patterns(d: &FileDevice, pages: &[PageId], seed: u8) {
    let ps = d.page_size();
    for (i, (got, &p)) in read_each(d, pages).iter().zip(pages).enumerate() {
        assert_eq!(got, &pattern(p, seed, ps), "page {p} at {i}");
    }
}

/// The pages of `pages` as [`PageDevice::read_batch_each`] hands them over,
/// in the order of `pages`; fails if a position is handed over twice or
/// never.
fn read_each(d: &FileDevice, pages: &[PageId]) -> Vec<Vec<u8>> {
    let mut got: Vec<Option<Vec<u8>>> = vec![None; pages.len()];
    d.read_batch_each(pages, &mut |i, page| {
        assert!(got[i].is_none(), "position {i} handed over twice");
        got[i] = Some(page.to_vec());
        Ok(())
    })
    .unwrap();
    got.into_iter()
        .enumerate()
        .map(|(i, p)| p.unwrap_or_else(|| panic!("position {i} never handed over")))
        .collect()
}

/// An error of the caller's handler fails the batch: no page is handed
/// over after it, the reads in flight are waited for, and the device reads
/// correctly afterwards.
#[test]
fn an_error_of_the_handler_stops_the_batch_and_the_device_stays_usable() {
    let ps = 4096;
    on_each_fresh_device(ps, |d| {
        let pages: Vec<PageId> = (0..600).map(|i| i * 2).collect();
        write_patterns(&d, &pages, 4);
        let mut calls = 0;
        let err = d
            .read_batch_each(&pages, &mut |_, _| {
                calls += 1;
                match calls {
                    5 => Err(crate::Error::invalid("handler refused page five")),
                    n => {
                        assert!(n < 5, "a page handed over after the error");
                        Ok(())
                    }
                }
            })
            .unwrap_err();
        assert!(err.to_string().contains("page five"), "{err}");
        assert_eq!(calls, 5);
        assert_streams_patterns(&d, &pages, 4);
    });
}

#[test]
fn reopen_after_sync_reads_back() {
    for (direct, engine) in CONFIGS {
        let dir = test_dir();
        let path = dir.path().join("f");
        let ps = 4096;
        {
            let Some(d) = open_or_skip(&path, ps, opts(direct, engine, 0)) else {
                continue;
            };
            d.write_batch(&[2, 0], &[pattern(2, 1, ps), pattern(0, 1, ps)].concat())
                .unwrap();
            d.sync().unwrap();
            assert_eq!(d.stats().io.syncs, 1);
        }
        let d = FileDevice::open(&path, ps, opts(direct, IoEngine::Auto, 0)).unwrap();
        let mut buf = vec![0u8; 3 * ps];
        d.read_batch(&[0, 1, 2], &mut buf).unwrap();
        assert_eq!(&buf[..ps], pattern(0, 1, ps));
        assert!(buf[ps..2 * ps].iter().all(|&b| b == 0));
        assert_eq!(&buf[2 * ps..], pattern(2, 1, ps));
    }
}

/// `reserve` allocates the pages' blocks (the file's block count grows)
/// without changing its size or any page's content, so that their later
/// writes need no space.
#[test]
fn reserve_allocates_blocks_and_keeps_size_and_contents() {
    use std::os::unix::fs::MetadataExt;
    let dir = test_dir();
    let path = dir.path().join("f");
    let ps = 4096;
    let d = FileDevice::open(&path, ps, opts(false, IoEngine::Psync, 0)).unwrap();
    d.write(1, &pattern(1, 3, ps)).unwrap();
    let before = std::fs::metadata(&path).unwrap();
    d.reserve(0..64).unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(after.len(), before.len(), "reserve changed the file's size");
    if after.blocks() <= before.blocks() {
        missing("fallocate on the test directory's file system");
        return;
    }
    // 512-byte blocks: at least the 64 pages are allocated.
    assert!(after.blocks() * 512 >= 64 * ps as u64, "{} blocks", after.blocks());
    let mut buf = vec![0u8; 2 * ps];
    d.read_batch(&[0, 1], &mut buf).unwrap();
    assert!(buf[..ps].iter().all(|&b| b == 0));
    assert_eq!(&buf[ps..], pattern(1, 3, ps));
    // Writes into the reserved range extend the file as before.
    d.write(40, &pattern(40, 3, ps)).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 41 * ps as u64);
    assert!(d.reserve(5..5).is_ok());
}

#[test]
fn bad_input_is_an_error() {
    let dir = test_dir();
    let path = dir.path().join("f");
    for ps in [0, 100, 1000, 4097, 131072] {
        assert!(matches!(
            FileDevice::open(&path, ps, FileDeviceOptions::default()),
            Err(Error::InvalidInput(_))
        ));
    }
    assert!(FileDevice::open(&path, 4096, opts(false, IoEngine::Psync, u64::MAX)).is_err());
    for (direct, engine) in CONFIGS {
        let Some(d) = open_or_skip(&path, 4096, opts(direct, engine, 8)) else {
            continue;
        };
        assert_eq!(d.capacity(), 8);
        assert_read_out_of_range(&d, 8, 8);
        let mut buf = vec![0u8; 4096];
        assert!(matches!(
            d.write(8, &buf),
            Err(Error::PageOutOfRange { .. })
        ));
        assert!(matches!(d.trim(&[1, 8]), Err(Error::PageOutOfRange { .. })));
        assert!(matches!(
            d.write(0, &buf[..100]),
            Err(Error::BufferSize {
                expected: 4096,
                got: 100
            })
        ));
        assert!(matches!(
            d.read_batch(&[0, 1], &mut buf),
            Err(Error::BufferSize { .. })
        ));
    }
}

#[test]
fn raw_direct_io_refuses_misaligned_buffers() {
    let dir = test_dir();
    let ps = 4096;
    for engine in [IoEngine::Psync, IoEngine::Uring] {
        let Some(d) = open_or_skip(&dir.path().join("f"), ps, opts(true, engine, 0)) else {
            continue;
        };
        let mut buf = d.alloc_buf(3).unwrap();
        assert_eq!(buf.as_ptr() as usize % d.buf_align(), 0);
        buf.copy_from_slice(&[pattern(1, 0, ps), pattern(2, 0, ps), pattern(3, 0, ps)].concat());
        d.write_batch_raw(&[1, 2, 3], &buf).unwrap();
        let mut back = d.alloc_buf(2).unwrap();
        d.read_batch_raw(&[3, 1], &mut back).unwrap();
        assert_eq!(&back[..ps], pattern(3, 0, ps));
        assert_eq!(&back[ps..], pattern(1, 0, ps));
        // Misaligned by 8 bytes: a clear error naming address and alignment.
        let mut big = d.alloc_buf(3).unwrap();
        let addr = big.as_ptr() as usize + 8;
        let err = d.read_batch_raw(&[1], &mut big[8..8 + ps]).unwrap_err();
        assert!(
            matches!(err, Error::MisalignedBuffer { addr: a, align: 4096 } if a == addr),
            "{err}"
        );
        assert!(err.to_string().contains("O_DIRECT"), "{err}");
        assert!(matches!(
            d.write_batch_raw(&[1], &big[8..8 + ps]),
            Err(Error::MisalignedBuffer { .. })
        ));
        // The same misaligned slice is fine through the bouncing trait call.
        d.read_batch(&[1], &mut big[8..8 + ps]).unwrap();
        assert_eq!(&big[8..8 + ps], pattern(1, 0, ps));
    }
    // Buffered mode has no alignment rule.
    let d = FileDevice::open(&dir.path().join("g"), ps, opts(false, IoEngine::Psync, 0)).unwrap();
    let mut v = vec![0u8; ps + 1];
    d.read_batch_raw(&[0], &mut v[1..]).unwrap();
}

#[test]
fn check_direct_alignment_rules() {
    check_direct_alignment(8192, 4096, 4096).unwrap();
    check_direct_alignment(8192, 512, 4096).unwrap();
    assert!(matches!(
        check_direct_alignment(8193, 4096, 4096),
        Err(Error::MisalignedBuffer {
            addr: 8193,
            align: 4096
        })
    ));
    assert!(matches!(
        check_direct_alignment(8192, 100, 4096),
        Err(Error::InvalidInput(_))
    ));
    assert!(check_direct_alignment(0, 0, 0).is_err());
}

#[test]
fn auto_falls_back_to_psync_and_explicit_uring_is_an_error() {
    let dir = test_dir();
    let path = dir.path().join("f");
    sys::tests_hook::set_uring_disabled(true);
    let auto = FileDevice::open(&path, 4096, opts(false, IoEngine::Auto, 0));
    let explicit = FileDevice::open(&path, 4096, opts(false, IoEngine::Uring, 0));
    sys::tests_hook::set_uring_disabled(false);
    let auto = auto.unwrap();
    assert_eq!(auto.engine(), IoEngine::Psync);
    assert!(auto.describe().contains("engine=psync"));
    let err = explicit.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("io_uring requested but unavailable"), "{msg}");
    assert!(msg.contains("disabled by a test"), "{msg}");
    // The fallback device works.
    auto.write(1, &pattern(1, 0, 4096)).unwrap();
    let mut buf = vec![0u8; 4096];
    auto.read(1, &mut buf).unwrap();
    assert_eq!(buf, pattern(1, 0, 4096));
}

#[test]
fn describe_names_path_mode_engine_and_page_size() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let Some(d) = open_or_skip(&path, 8192, FileDeviceOptions::default()) else {
        return;
    };
    let s = d.describe();
    assert!(s.contains(&path.display().to_string()), "{s}");
    assert!(s.contains("direct=on"), "{s}");
    assert!(s.contains(&format!("engine={}", d.engine())), "{s}");
    assert!(s.contains("page_size=8192"), "{s}");
    assert_eq!(d.capacity(), DEFAULT_CAPACITY_BYTES / 8192);
    assert_ne!(d.engine(), IoEngine::Auto);
    let b = FileDevice::open(&path, 8192, opts(false, IoEngine::Psync, 0)).unwrap();
    assert!(b.describe().contains("direct=off engine=psync"));
}

#[test]
fn engine_names_parse() {
    for e in [IoEngine::Auto, IoEngine::Uring, IoEngine::Psync] {
        assert_eq!(e.to_string().parse::<IoEngine>().unwrap(), e);
    }
    assert_eq!("io_uring".parse::<IoEngine>().unwrap(), IoEngine::Uring);
    assert!("aio".parse::<IoEngine>().is_err());
}

#[test]
fn device_is_send_and_sync_and_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FileDevice>();
    assert_send_sync::<AlignedBuf>();
    let dir = test_dir();
    let Some(d) = open_or_skip(&dir.path().join("f"), 4096, FileDeviceOptions::default()) else {
        return;
    };
    let d = std::sync::Arc::new(d);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let d = d.clone();
            s.spawn(move || {
                for i in 0..20u64 {
                    let p = t * 100 + i;
                    d.write(p, &pattern(p, t as u8, 4096)).unwrap();
                    let mut buf = vec![0u8; 4096];
                    d.read(p, &mut buf).unwrap();
                    assert_eq!(buf, pattern(p, t as u8, 4096));
                }
            });
        }
    });
    assert_eq!(d.stats().io.pages_written, 80);
    d.reset_stats();
    assert_eq!(d.stats().io, Default::default());
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<(PageId, u8)>),
    Read(Vec<PageId>),
    ReadEach(Vec<PageId>),
    Trim(Vec<PageId>),
    Sync,
}

fn op_strategy(max_page: PageId) -> impl Strategy<Value = Op> {
    let page = 0..max_page;
    prop_oneof![
        4 => prop::collection::vec((page.clone(), any::<u8>()), 1..12).prop_map(Op::Write),
        4 => prop::collection::vec(page.clone(), 1..12).prop_map(Op::Read),
        3 => prop::collection::vec(page.clone(), 0..40).prop_map(Op::ReadEach),
        2 => prop::collection::vec(page, 1..5).prop_map(Op::Trim),
        1 => Just(Op::Sync),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn random_operations_match_a_hashmap(
        config in 0usize..4,
        big_pages in any::<bool>(),
        misalign in any::<bool>(),
        ops in prop::collection::vec(op_strategy(40), 1..30),
    ) {
        let (direct, engine) = CONFIGS[config];
        let ps = if big_pages { 4096 } else { 512 };
        let dir = test_dir();
        let Some(d) = open_or_skip(&dir.path().join("f"), ps, opts(direct, engine, 40)) else {
            return Ok(());
        };
        let mut oracle: HashMap<PageId, Vec<u8>> = HashMap::new();
        let shift = usize::from(misalign);
        for op in ops {
            match op {
                Op::Write(w) => {
                    let pages: Vec<PageId> = w.iter().map(|&(p, _)| p).collect();
                    let mut storage = vec![0u8; pages.len() * ps + shift];
                    let data = &mut storage[shift..];
                    for (i, &(p, seed)) in w.iter().enumerate() {
                        let v = pattern(p, seed, ps);
                        data[i * ps..(i + 1) * ps].copy_from_slice(&v);
                        oracle.insert(p, v);
                    }
                    d.write_batch(&pages, data).unwrap();
                }
                Op::Read(pages) => {
                    let mut storage = vec![0x55u8; pages.len() * ps + shift];
                    let buf = &mut storage[shift..];
                    d.read_batch(&pages, buf).unwrap();
                    for (i, p) in pages.iter().enumerate() {
                        let got = &buf[i * ps..(i + 1) * ps];
                        match oracle.get(p) {
                            Some(v) => prop_assert_eq!(got, &v[..], "page {}", p),
                            None => prop_assert!(got.iter().all(|&b| b == 0), "page {} not zero", p),
                        }
                    }
                }
                Op::ReadEach(pages) => {
                    for (got, p) in read_each(&d, &pages).iter().zip(&pages) {
                        match oracle.get(p) {
                            Some(v) => prop_assert_eq!(got, v, "page {}", p),
                            None => prop_assert!(got.iter().all(|&b| b == 0), "page {} not zero", p),
                        }
                    }
                }
                Op::Trim(pages) => {
                    d.trim(&pages).unwrap();
                    for p in pages {
                        oracle.remove(&p);
                    }
                }
                Op::Sync => d.sync().unwrap(),
            }
        }
    }
}

#[test]
fn merged_span_crossing_the_end_of_file_reads_zeros_after_it() {
    let ps = 4096;
    on_each_fresh_device(ps, |d| {
        d.write(10, &pattern(10, 3, ps)).unwrap();
        // Pages 9..=12 form one I/O; the file ends after page 10.
        let mut buf = vec![0x77u8; 4 * ps];
        d.read_batch(&[9, 10, 11, 12], &mut buf).unwrap();
        assert!(buf[..ps].iter().all(|&b| b == 0));
        assert_eq!(&buf[ps..2 * ps], pattern(10, 3, ps));
        assert!(buf[2 * ps..].iter().all(|&b| b == 0));
        // Handed over from the device's pooled buffer, last filled with
        // other pages: still zeros after the end of the file.
        read_each(&d, &[10, 10, 10, 10]);
        let got = read_each(&d, &[9, 10, 11, 12]);
        assert!(got[0].iter().all(|&b| b == 0));
        assert_eq!(got[1], pattern(10, 3, ps));
        assert!(got[2].iter().chain(&got[3]).all(|&b| b == 0));
    });
}

#[test]
fn trim_without_hole_punching_writes_zeros() {
    let ps = 512;
    on_each_fresh_device(ps, |d| {
        d.punch_hole_works.store(false, Ordering::Relaxed);
        let pages: Vec<PageId> = (0..3000).collect();
        let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, 1, ps)).collect();
        d.write_batch(&pages, &data).unwrap();
        // A run longer than one zero buffer (1 MiB = 2048 pages) and a single page.
        let trimmed: Vec<PageId> = (100..2900).chain([2950]).collect();
        d.trim(&trimmed).unwrap();
        let mut buf = vec![1u8; pages.len() * ps];
        d.read_batch(&pages, &mut buf).unwrap();
        for &p in &pages {
            let got = &buf[p as usize * ps..(p as usize + 1) * ps];
            if (100..2900).contains(&p) || p == 2950 {
                assert!(got.iter().all(|&b| b == 0), "page {p} not trimmed");
            } else {
                assert_eq!(got, pattern(p, 1, ps), "page {p}");
            }
        }
        assert_eq!(d.stats().io.pages_trimmed, trimmed.len() as u64);
    });
}

/// `shorten` cuts the file after its pages (a longer file only), changes
/// what no page reads, and counts nothing (the log's cut after a switch,
/// whose later pages were trimmed already).
#[test]
fn shorten_cuts_a_longer_file_and_counts_nothing() {
    let ps = 512;
    on_each_fresh_device(ps, |d| {
        let pages: Vec<PageId> = (0..40).collect();
        let data: Vec<u8> = pages.iter().flat_map(|&p| pattern(p, 2, ps)).collect();
        d.write_batch(&pages, &data).unwrap();
        d.trim(&(10..40).collect::<Vec<_>>()).unwrap();
        let path = d.path().unwrap();
        let before = d.stats().io;
        d.shorten(10).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 * ps as u64);
        d.shorten(30).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 * ps as u64);
        assert_eq!(d.stats().io, before, "shorten counts nothing");
        let mut buf = vec![1u8; pages.len() * ps];
        d.read_batch(&pages, &mut buf).unwrap();
        for &p in &pages {
            let got = &buf[p as usize * ps..(p as usize + 1) * ps];
            if p < 10 {
                assert_eq!(got, pattern(p, 2, ps), "page {p}");
            } else {
                assert!(got.iter().all(|&b| b == 0), "page {p}");
            }
        }
    });
}

#[test]
fn os_errors_name_the_path_and_the_page() {
    // A page far beyond the largest file ext4 (or most filesystems) allows:
    // the write fails in the kernel with EFBIG.
    let ps = 4096;
    let far: PageId = 1 << 40; // offset 2^52 bytes
    for (direct, engine) in CONFIGS {
        let dir = test_dir();
        let path = dir.path().join("f");
        let Some(d) = open_or_skip(&path, ps, opts(direct, engine, far + 1)) else {
            continue;
        };
        let buf = d.alloc_buf(1).unwrap();
        match d.write(far, &buf) {
            Err(Error::Io {
                path: p,
                page,
                source,
            }) => {
                assert_eq!(p, path);
                assert_eq!(page, Some(far));
                eprintln!("{engine} direct={direct}: {source}");
            }
            Ok(()) => eprintln!("filesystem accepted a write at 2^52 bytes; nothing to check"),
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

#[test]
fn read_only_open_reads_and_refuses_writes() {
    let dir = test_dir();
    let path = dir.path().join("ro.dat");
    let missing = FileDevice::open(
        &dir.path().join("absent.dat"),
        4096,
        FileDeviceOptions {
            read_only: true,
            direct: false,
            ..FileDeviceOptions::default()
        },
    );
    assert!(missing.is_err(), "read-only open does not create files");
    {
        let d = FileDevice::open(&path, 4096, opts(false, IoEngine::Psync, 16)).unwrap();
        d.write(3, &[7u8; 4096]).unwrap();
        d.sync().unwrap();
    }
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&path, perms).unwrap();
    for engine in [IoEngine::Psync, IoEngine::Auto] {
        let d = FileDevice::open(
            &path,
            4096,
            FileDeviceOptions {
                read_only: true,
                ..opts(false, engine, 16)
            },
        )
        .unwrap();
        let mut buf = vec![0u8; 4096];
        d.read(3, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
        let e = d.write(3, &buf).unwrap_err().to_string();
        assert!(e.contains("read-only"), "{e}");
        assert!(d.trim(&[3]).is_err());
    }
}
