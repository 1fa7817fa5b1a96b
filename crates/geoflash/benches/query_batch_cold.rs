//! A batch of range queries on a reopened (cold) index on direct I/O, in
//! both read modes: `single` reads each node when the shared traversal
//! reaches it (what `query_batch` did before it went through the one
//! traversal), `batched` reads the children a node's windows enter as one
//! device batch. Same answers; the bench prints the median wall time of
//! the batch and the device's read batches and pages.
//!
//! Run: `cargo bench -p geoflash --bench query_batch_cold` (N objects from
//! `GEOFLASH_BENCH_N`, default 1,000,000; windows of 0.01 % of the extent,
//! `GEOFLASH_BENCH_WINDOWS` of them, default 100; 7 repetitions each,
//! alternating). Needs a file system that takes O_DIRECT in the working
//! directory's temporary folder.
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
    let side = 1e-4f64.sqrt();
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
    spec.set("device", "file?direct=true")?;
    let opts = spec.options()?;
    Index::bulk_load(Some(&dir), &opts, items, BulkMethod::Str, 1.0)?.close()?;
    let mut rows = Vec::new();
    let mut answers = Vec::new();
    let modes = [ReadMode::Single, ReadMode::Batched];
    let mut times = vec![Vec::new(); modes.len()];
    for _ in 0..7 {
        for (i, &mode) in modes.iter().enumerate() {
            let mut index = Index::open(&dir, Access::Read)?;
            index.set_read_mode(mode);
            index.device().reset_stats();
            let t = Instant::now();
            let r = index.query_batch(&windows, Predicate::Intersects)?;
            times[i].push(t.elapsed().as_secs_f64());
            let io = index.device().stats().io;
            rows.push((mode, io.read_batches, io.pages_read));
            answers.push(r.results.iter().map(|q| q.hits.len()).sum::<usize>());
        }
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "answers differ");
    println!(
        "{count} windows of 0.01 % on {n} rectangles, cold, direct I/O, {} results",
        answers[0]
    );
    for (i, mode) in modes.iter().enumerate() {
        let mut t = times[i].clone();
        t.sort_by(f64::total_cmp);
        let (_, batches, pages) = rows.iter().find(|r| r.0 == *mode).copied().expect("row");
        println!(
            "{mode:?}: median {:.2} ms (min {:.2}), {batches} read batches, {pages} pages read",
            t[t.len() / 2] * 1e3,
            t[0] * 1e3
        );
    }
    Ok(())
}
