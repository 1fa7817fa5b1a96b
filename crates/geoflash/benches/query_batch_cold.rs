//! A batch of range queries on a reopened (cold) index, in both read
//! modes: `single` reads each node when the shared traversal reaches it
//! (what `query_batch` did before it went through the one traversal),
//! `batched` reads the children a node's windows enter as one device
//! batch. Same answers; the bench prints the median wall time of the
//! batch on the reopened index (cold: empty buffers) and of the same batch
//! repeated in the same process (warm), their ratio, and the device's read
//! batches and pages of the cold pass. Operations read no CPU clock, as
//! in the Python package (`Index::set_operation_cpu_time(false)`).
//!
//! Run: `cargo bench -p geoflash --bench query_batch_cold` (N objects from
//! `GEOFLASH_BENCH_N`, default 1,000,000; windows of
//! `GEOFLASH_BENCH_WINDOW_PERCENT` % of the extent, default 0.01,
//! `GEOFLASH_BENCH_WINDOWS` of them, default 100; `GEOFLASH_BENCH_REPS`
//! repetitions each, default 7, alternating; 5 warm passes after each cold
//! one). The device is `GEOFLASH_BENCH_DEVICE`, default `file?direct=true`
//! (which needs a file system that takes O_DIRECT in the working
//! directory's temporary folder); `file` reads through the OS page cache,
//! which holds the whole index after the first repetition.
use std::time::Instant;

use geoflash::geom::Rect;
use geoflash::index::query::Predicate;
use geoflash::index::{BulkMethod, ReadMode};
use geoflash::manifest::Access;
use geoflash::{Index, IndexSpec, KeyStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> geoflash::Result<()> {
    let n = env("GEOFLASH_BENCH_N", 1_000_000);
    let count = env("GEOFLASH_BENCH_WINDOWS", 100);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let items: Vec<(u64, Rect)> = (0..n as u64)
        .map(|i| {
            let (x, y): (f64, f64) = (rng.gen(), rng.gen());
            (i, Rect::new(x, y, x + 0.001, y + 0.001).expect("rect"))
        })
        .collect();
    let percent: f64 = std::env::var("GEOFLASH_BENCH_WINDOW_PERCENT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.01);
    let reps = env("GEOFLASH_BENCH_REPS", 7).max(1);
    let device =
        std::env::var("GEOFLASH_BENCH_DEVICE").unwrap_or_else(|_| "file?direct=true".into());
    let side = (percent / 100.0).sqrt();
    let windows: Vec<Rect> = (0..count)
        .map(|_| {
            let (x, y): (f64, f64) = (
                rng.gen::<f64>() * (1.0 - side),
                rng.gen::<f64>() * (1.0 - side),
            );
            Rect::new(x, y, x + side, y + side).expect("window")
        })
        .collect();
    let tmp = tempfile::tempdir_in(".").expect("a temporary directory");
    let dir = tmp.path().join("index");
    let mut spec = IndexSpec::new(KeyStyle::Key);
    spec.set("device", &device)?;
    let opts = spec.options()?;
    Index::bulk_load(Some(&dir), &opts, items, BulkMethod::Str, 1.0)?.close()?;
    let mut rows = Vec::new();
    let mut answers = Vec::new();
    let modes = [ReadMode::Single, ReadMode::Batched];
    let mut cold = vec![Vec::new(); modes.len()];
    let mut warm = vec![Vec::new(); modes.len()];
    for _ in 0..reps {
        for (i, &mode) in modes.iter().enumerate() {
            let mut index = Index::open(&dir, Access::Read)?;
            index.set_read_mode(mode);
            index.set_operation_cpu_time(false);
            index.device().reset_stats();
            let t = Instant::now();
            let r = index.query_batch(&windows, Predicate::Intersects)?;
            cold[i].push(t.elapsed().as_secs_f64());
            let io = index.device().stats().io;
            rows.push((mode, io.read_batches, io.pages_read));
            answers.push(r.results.iter().map(|q| q.hits.len()).sum::<usize>());
            for _ in 0..5 {
                let t = Instant::now();
                let again = index.query_batch(&windows, Predicate::Intersects)?;
                warm[i].push(t.elapsed().as_secs_f64());
                answers.push(again.results.iter().map(|q| q.hits.len()).sum::<usize>());
            }
        }
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "answers differ");
    println!(
        "{count} windows of {percent} % on {n} rectangles, device {device}, {} results",
        answers[0]
    );
    let median = |v: &[f64]| {
        let mut t = v.to_vec();
        t.sort_by(f64::total_cmp);
        (t[t.len() / 2], t[0])
    };
    for (i, mode) in modes.iter().enumerate() {
        let (c, c_min) = median(&cold[i]);
        let (w, w_min) = median(&warm[i]);
        let (_, batches, pages) = rows.iter().find(|r| r.0 == *mode).copied().expect("row");
        println!(
            "{mode:?}: cold median {:.3} ms (min {:.3}), warm median {:.3} ms (min {:.3}), \
             cold/warm {:.1}; cold pass: {batches} read batches, {pages} pages read",
            c * 1e3,
            c_min * 1e3,
            w * 1e3,
            w_min * 1e3,
            c / w
        );
    }
    Ok(())
}
