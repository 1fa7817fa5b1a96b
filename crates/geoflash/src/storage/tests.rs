//! The contract every device shares, checked on every kind of device: the
//! counters match the operations issued (issue 20, item 5, and issue 45,
//! item 6: the checks and the counting live once, in the
//! [`Counted`](super::Counted) wrapper every device is opened in), contents
//! read back as written, and invalid batches are refused with an error that
//! changes nothing.
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::faulty::{FaultPlan, FaultyDevice};
use super::mem::MemDevice;
use super::spec::DeviceSpec;
use super::trace::TraceDevice;
use super::{DeviceStats, IoCounters, PageDevice, PageId};
use crate::Error;

/// One step of a random device workload (the devices' own property tests).
#[derive(Debug, Clone)]
pub(crate) enum DeviceOp {
    /// A batch write of these pages, filled from this byte.
    Write(Vec<PageId>, u8),
    Read(Vec<PageId>),
    Trim(Vec<PageId>),
    Sync,
}

/// Asserts that reading page `page` of `d` is refused as past the end of
/// a device of `capacity` pages, naming both.
pub(crate) fn assert_read_out_of_range(d: &dyn PageDevice, page: PageId, capacity: u64) {
    let mut buf = vec![0u8; d.page_size()];
    let e = d.read(page, &mut buf).unwrap_err();
    assert!(
        matches!(e, Error::PageOutOfRange { page: p, capacity: c } if p == page && c == capacity),
        "{e}"
    );
}

/// A temporary directory under the workspace's `target/` (a real disk
/// filesystem, where `O_DIRECT` usually works; `/tmp` may be tmpfs).
fn test_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tmp");
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(&base).unwrap()
}

/// Small simulated flash: GC runs within a few hundred writes.
const FLASH: &str = "flashsim:page_size=512&ppb=16&blocks=160&op=0.2&wl_threshold=4";

/// Every kind of device, named, with its page size. File devices live in `dir`.
fn devices(dir: &std::path::Path) -> Vec<(String, Arc<dyn PageDevice>)> {
    let mut out: Vec<(String, Arc<dyn PageDevice>)> = Vec::new();
    let specs = [
        ("mem:capacity=1m".to_string(), 4096),
        (
            format!(
                "file:{}?direct=false&engine=psync",
                dir.join("psync").display()
            ),
            4096,
        ),
        (
            format!(
                "file:{}?direct=false&engine=auto",
                dir.join("auto").display()
            ),
            512,
        ),
        (FLASH.to_string(), 512),
        (format!("{FLASH}&ftl=flashdbsim"), 512),
        // Host pages larger and smaller than flash pages.
        (FLASH.to_string(), 2048),
        (
            "flashsim:page_size=2048&ppb=16&blocks=200&op=0.2".to_string(),
            512,
        ),
        ("hddsim:".to_string(), 4096),
        ("hddsim:write_cache_bytes=0".to_string(), 4096),
        (
            "hybrid:fast=(mem:capacity=64k);slow=(mem:capacity=1m)".to_string(),
            4096,
        ),
        (
            format!("hybrid:fast=({FLASH});slow=({FLASH}&ftl=flashdbsim)&fast_pages=16"),
            512,
        ),
    ];
    for (spec, ps) in specs {
        let dev = DeviceSpec::parse(&spec).unwrap().open(ps, None).unwrap();
        out.push((format!("{spec} ({ps} B pages)"), dev));
    }
    let direct = format!("file:{}?direct=true", dir.join("direct").display());
    match DeviceSpec::parse(&direct).unwrap().open(4096, None) {
        Ok(dev) => out.push((direct, dev)),
        Err(e) if e.to_string().contains("refuses O_DIRECT") => {
            if let Err(e) = crate::testenv::prerequisite_missing(&format!("{direct}: {e}"))
            {
                panic!("{e}");
            }
        }
        Err(e) => panic!("{direct}: {e}"),
    }
    let mem = || MemDevice::new(4096, 256).unwrap();
    out.push((
        "faulty over mem".into(),
        Arc::new(FaultyDevice::new(mem(), FaultPlan::none())),
    ));
    out.push((
        "trace over mem".into(),
        Arc::new(TraceDevice::in_memory(mem(), true).unwrap()),
    ));
    let boxed: Box<dyn PageDevice> = Box::new(mem());
    out.push(("boxed mem".into(), Arc::new(boxed)));
    out
}

/// The counters a run of operations must leave, kept independently of
/// [`super::counters::IoTracker`]: the page ids of every read (and write) in issue
/// order, classified only at the end.
#[derive(Default)]
struct Expected {
    reads: Vec<PageId>,
    writes: Vec<PageId>,
    read_batches: u64,
    write_batches: u64,
    syncs: u64,
    trimmed: u64,
}

/// `(sequential, random)`: an access is sequential when it follows the
/// previous access of the list at the next page id.
fn classify(ids: &[PageId]) -> (u64, u64) {
    let sequential = ids.windows(2).filter(|w| w[1] == w[0] + 1).count() as u64;
    (sequential, ids.len() as u64 - sequential)
}

impl Expected {
    fn counters(&self, page_size: usize) -> IoCounters {
        let (sequential_reads, random_reads) = classify(&self.reads);
        let (sequential_writes, random_writes) = classify(&self.writes);
        IoCounters {
            pages_read: self.reads.len() as u64,
            pages_written: self.writes.len() as u64,
            bytes_read: (self.reads.len() * page_size) as u64,
            bytes_written: (self.writes.len() * page_size) as u64,
            read_batches: self.read_batches,
            write_batches: self.write_batches,
            sequential_reads,
            random_reads,
            sequential_writes,
            random_writes,
            syncs: self.syncs,
            pages_trimmed: self.trimmed,
            ..IoCounters::default()
        }
    }
}

/// The counters without the wall-clock times (which no oracle can know).
fn untimed(s: DeviceStats) -> IoCounters {
    IoCounters {
        read_time_ns: 0,
        write_time_ns: 0,
        sync_time_ns: 0,
        ..s.io
    }
}

/// A page's contents for a write: its id and a version in every byte pair.
fn content(page: PageId, version: u8, ps: usize) -> Vec<u8> {
    (0..ps)
        .map(|i| if i % 2 == 0 { page as u8 } else { version })
        .collect()
}

/// Runs a mixed workload of `n` calls on `d` (batches of reads and writes
/// with sequential runs, scattered pages and repeats, trims, syncs; empty
/// batches too), checking every read against a map and the counters after
/// every call.
fn run_workload(name: &str, d: &dyn PageDevice, seed: u64, n: usize) {
    let ps = d.page_size();
    let span = d.capacity().min(96);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut oracle: HashMap<PageId, Vec<u8>> = HashMap::new();
    let mut want = Expected::default();
    for call in 0..n {
        let k = rng.gen_range(0..6usize);
        let pages: Vec<PageId> = if rng.gen_bool(0.4) {
            let first = rng.gen_range(0..span);
            (first..(first + k as u64).min(span)).collect()
        } else {
            (0..k).map(|_| rng.gen_range(0..span)).collect()
        };
        match rng.gen_range(0..10) {
            0..=3 => {
                let version = call as u8;
                let data: Vec<u8> = pages
                    .iter()
                    .flat_map(|&p| content(p, version, ps))
                    .collect();
                d.write_batch(&pages, &data).unwrap();
                for &p in &pages {
                    oracle.insert(p, content(p, version, ps));
                }
                want.writes.extend(&pages);
                want.write_batches += 1;
            }
            4..=7 => {
                let mut buf = vec![0xA5u8; pages.len() * ps];
                d.read_batch(&pages, &mut buf).unwrap();
                for (&p, got) in pages.iter().zip(buf.chunks_exact(ps)) {
                    let zeros = vec![0u8; ps];
                    let expected = oracle.get(&p).unwrap_or(&zeros);
                    assert!(got == &expected[..], "{name}: page {p} at call {call}");
                }
                want.reads.extend(&pages);
                want.read_batches += 1;
            }
            8 => {
                d.trim(&pages).unwrap();
                for p in &pages {
                    oracle.remove(p);
                }
                want.trimmed += pages.len() as u64;
            }
            _ => {
                d.sync().unwrap();
                want.syncs += 1;
            }
        }
        assert_eq!(
            untimed(d.stats()),
            want.counters(ps),
            "{name}: counters after call {call}"
        );
    }
}

/// Every kind of invalid batch on `d`: each is refused with its error and
/// leaves the counters as they were.
fn check_refusals(name: &str, d: &dyn PageDevice) {
    let ps = d.page_size();
    let cap = d.capacity();
    let before = d.stats().io;
    let mut page = vec![0u8; ps];
    let out_of_range = |r: crate::Result<()>, what: &str| match r {
        Err(Error::PageOutOfRange { page, capacity }) => {
            assert_eq!((page, capacity), (cap, cap), "{name}: {what}");
        }
        other => panic!("{name}: {what}: {other:?}"),
    };
    out_of_range(d.read_batch(&[0, cap], &mut vec![0u8; 2 * ps]), "read");
    out_of_range(d.write_batch(&[cap, 0], &vec![0u8; 2 * ps]), "write");
    out_of_range(d.trim(&[1, cap]), "trim");
    let wrong_length = |r: crate::Result<()>, got: usize, what: &str| match r {
        Err(Error::BufferSize { expected, got: g }) => {
            assert_eq!((expected, g), (ps, got), "{name}: {what}");
        }
        other => panic!("{name}: {what}: {other:?}"),
    };
    wrong_length(
        d.read_batch(&[0], &mut page[..ps - 1]),
        ps - 1,
        "short read",
    );
    wrong_length(d.write_batch(&[0], &[0u8; 1]), 1, "short write");
    let long = vec![0u8; ps + 512];
    wrong_length(d.write_batch(&[0], &long), ps + 512, "long write");
    assert!(
        matches!(d.read(0, &mut []), Err(Error::BufferSize { .. })),
        "{name}: empty buffer"
    );
    assert_eq!(d.stats().io, before, "{name}: a refused batch counted");
    d.reset_stats();
    assert_eq!(
        d.stats().io,
        IoCounters::default(),
        "{name}: after reset_stats"
    );
}

#[test]
fn every_device_counts_what_it_is_asked_and_refuses_bad_batches() {
    let dir = test_dir();
    let devices = devices(dir.path());
    assert!(devices.len() >= 14);
    for (seed, (name, d)) in devices.iter().enumerate() {
        run_workload(name, d.as_ref(), seed as u64, 300);
        check_refusals(name, d.as_ref());
        // Counting starts afresh after the reset.
        d.write(0, &vec![1u8; d.page_size()]).unwrap();
        let io = d.stats().io;
        assert_eq!((io.pages_written, io.write_batches), (1, 1), "{name}");
    }
}

#[test]
fn a_failed_batch_is_not_counted() {
    // FaultyDevice's planned failures come from its raw I/O: the batch was
    // valid, failed, and leaves no trace in the counters.
    let d = FaultyDevice::new(
        MemDevice::new(512, 16).unwrap(),
        FaultPlan::none().fail_read(2).fail_write(3),
    );
    let page = [3u8; 512];
    let mut buf = [0u8; 512];
    d.write(1, &page).unwrap();
    d.read(1, &mut buf).unwrap();
    d.write(2, &page).unwrap();
    assert!(matches!(d.read(1, &mut buf), Err(Error::InjectedFault(_))));
    assert!(d.write(3, &page).is_err());
    assert!(d.sync().is_err());
    let io = d.stats().io;
    assert_eq!(
        (io.pages_written, io.pages_read, io.read_batches, io.syncs),
        (2, 1, 1, 0)
    );
}
