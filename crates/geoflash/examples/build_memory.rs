//! Where the memory of a build by insertion goes (issue 47, item 5).
//!
//! Builds an index by insertion of `N` uniform boxes generated in the
//! process (nothing held but the index), as one batch with the command
//! line's defaults (R*-tree, eFIND, `file?direct=false`), and prints, every
//! `N / 8` insertions and at the end: the bytes the allocator holds
//! (counted by this program's global allocator), their peak, the process's
//! resident set (`VmRSS`) and its peak (`VmHWM`), and the store's own
//! accounting (`peak_buffer_bytes`). With `BUILD_MEMORY_TRACE=BYTES` every
//! allocation of at least `BYTES` prints its backtrace on standard error.
//!
//! ```sh no-run
//! cargo run --release -p geoflash --example build_memory -- 4000000 256MiB /tmp/ix
//! ```
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use geoflash::geom::Rect;
use geoflash::{BatchDurability, Index, IndexSpec, KeyStyle};

/// The system allocator, counting the bytes it holds and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Allocations of at least this many bytes print where they come from
/// (`BUILD_MEMORY_TRACE=BYTES`; 0: none).
static TRACE_AT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
    let at = TRACE_AT.load(Ordering::Relaxed);
    if at > 0 && bytes >= at && !TRACING.with(|t| t.replace(true)) {
        eprintln!(
            "allocation of {bytes} bytes:\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        TRACING.with(|t| t.set(false));
    }
}

// SAFETY: every call forwards to `System` with the caller's arguments.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `VmRSS` and `VmHWM` of this process in bytes (0 where /proc is absent).
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mb(b: u64) -> String {
    format!("{:.1}", b as f64 / 1e6)
}

fn report(done: u64, index: &Index) {
    let (rss, hwm) = rss();
    let s = index.stats("build");
    println!(
        "{done:>10} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8}",
        mb(LIVE.load(Ordering::Relaxed) as u64),
        mb(PEAK.load(Ordering::Relaxed) as u64),
        mb(rss),
        mb(hwm),
        mb(s.peak_buffer_bytes)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(at) = std::env::var("BUILD_MEMORY_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        TRACE_AT.store(at, Ordering::Relaxed);
    }
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().as_deref().unwrap_or("1000000").parse()?;
    let buffer = args.next().unwrap_or_else(|| "256MiB".to_string());
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "build_memory.index".to_string()),
    );
    let mut spec = IndexSpec::new(KeyStyle::Key);
    spec.set("buffer", &buffer)?;
    spec.set("device", geoflash::defaults::DEVICE)?;
    spec.set("store", geoflash::defaults::STORE)?;
    let opts = spec.options()?;
    println!(
        "{n} uniform boxes, buffer {buffer}, index {}",
        dir.display()
    );
    println!(
        "{:>10} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8}",
        "inserted", "heap MB", "peak MB", "RSS MB", "HWM MB", "store MB"
    );
    // A linear congruential generator: boxes of at most 0.001 × 0.001 in the unit square.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut unit = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let step = (n / 8).max(1);
    // Rows every `step` insertions, then after the batch's checkpoint and
    // after the build's publication.
    let (index, ()) = Index::build(&dir, &opts, |index| {
        index.batch(BatchDurability::AtEnd, |index| {
            for id in 0..n {
                let (x, y) = (unit(), unit());
                let (w, h) = (unit() * 0.001, unit() * 0.001);
                index.insert(id, Rect::new(x, y, x + w, y + h)?)?;
                if (id + 1) % step == 0 {
                    report(id + 1, index);
                }
            }
            Ok(())
        })?;
        report(n, index);
        Ok::<(), geoflash::Error>(())
    })?;
    report(n, &index);
    index.close()?;
    Ok(())
}
