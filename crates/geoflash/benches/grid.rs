//! GFFM and LB-Grid, batched against plain queries (Fevgas' thesis,
//! Algorithms 6–8), on the flash simulator's `nvme` preset (simulated time
//! and device batches) and on a real file with `O_DIRECT` (wall time). All
//! ratios are measured in the same run. Not a criterion bench: it prints one
//! Markdown table (the numbers of `docs/benchmarks.md`).
//!
//! Run: `cargo bench -p geoflash --bench grid` (100,000 points; set
//! `GEOFLASH_GRID_POINTS` for another size, `GEOFLASH_GRID_FILE_DIR` for
//! where the O_DIRECT file goes; default under the target directory).
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use geoflash::geom::Rect;
use geoflash::grid::{BucketLayer, GridFile, GridOptions};
use geoflash::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use geoflash::storage::spec::DeviceSpec;
use geoflash::storage::PageDevice;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PAGE: usize = 4096;

#[derive(Default, Clone, Copy)]
struct Cost {
    wall_ns: u64,
    sim_ns: u64,
    read_batches: u64,
    pages_read: u64,
    write_batches: u64,
    pages_written: u64,
}

fn measure(dev: &Arc<dyn PageDevice>, f: impl FnOnce()) -> Cost {
    dev.reset_stats();
    let t = Instant::now();
    f();
    let wall_ns = t.elapsed().as_nanos() as u64;
    let s = dev.stats();
    Cost {
        wall_ns,
        sim_ns: s.sim.map_or(0, |x| x.sim_time_ns),
        read_batches: s.io.read_batches,
        pages_read: s.io.pages_read,
        write_batches: s.io.write_batches,
        pages_written: s.io.pages_written,
    }
}

fn opts() -> GridOptions {
    GridOptions {
        dir_hot_pages: 64,
        bucket_hot_pages: 128,
        cold_pages: 128,
        ..GridOptions::new(Rect::new(0.0, 0.0, 1.0, 1.0).expect("domain"))
    }
}

struct Workload {
    points: Vec<(f64, f64)>,
    windows: Vec<Rect>,
    knn: Vec<(f64, f64)>,
    groups10: Vec<Vec<(f64, f64)>>,
    groups100: Vec<Vec<(f64, f64)>>,
}

fn workload(n: usize) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let points: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.gen::<f64>(), rng.gen::<f64>()))
        .collect();
    // 1 % of the domain per window.
    let side = 0.1;
    let windows = (0..100)
        .map(|_| {
            let (x, y) = (
                rng.gen::<f64>() * (1.0 - side),
                rng.gen::<f64>() * (1.0 - side),
            );
            Rect::new(x, y, x + side, y + side).expect("window")
        })
        .collect();
    let knn = (0..100)
        .map(|_| (rng.gen::<f64>(), rng.gen::<f64>()))
        .collect();
    let mut pick = |k: usize| -> Vec<(f64, f64)> {
        (0..k)
            .map(|_| points[rng.gen_range(0..points.len())])
            .collect()
    };
    let groups10 = (0..50).map(|_| pick(10)).collect();
    let groups100 = (0..10).map(|_| pick(100)).collect();
    Workload {
        points,
        windows,
        knn,
        groups10,
        groups100,
    }
}

fn row(dev_name: &str, kind: &str, what: &str, plain: Cost, batched: Cost, sim: bool) {
    let t = |c: &Cost| if sim { c.sim_ns } else { c.wall_ns } as f64 / 1e6;
    let ratio = t(&plain) / t(&batched).max(1e-9);
    println!(
        "| {dev_name} | {kind} | {what} | {:.1} | {:.1} | **{ratio:.2}×** | {} / {} | {} / {} |",
        t(&plain),
        t(&batched),
        plain.read_batches,
        batched.read_batches,
        plain.pages_read,
        batched.pages_read
    );
}

fn run<L: BucketLayer>(dev_name: &str, dev: Arc<dyn PageDevice>, w: &Workload, sim: bool) {
    let mut g: GridFile<L> = GridFile::create(Arc::clone(&dev), opts()).expect("create");
    let build = measure(&dev, || {
        for (i, &(x, y)) in w.points.iter().enumerate() {
            g.insert(x, y, i as u64).expect("insert");
        }
        g.checkpoint().expect("checkpoint");
    });
    let t = if sim { build.sim_ns } else { build.wall_ns } as f64 / 1e6;
    eprintln!(
        "{dev_name} {}: build {:.1} ms, {} write batches / {} pages written, {} reads, stats {:?}",
        L::NAME,
        t,
        build.write_batches,
        build.pages_written,
        build.pages_read,
        g.stats()
    );
    println!(
        "| {dev_name} | {} | build ({} points) | {t:.1} ms | – | – | {} / – | writes: {} batches, {} pages |",
        L::NAME,
        w.points.len(),
        build.read_batches,
        build.write_batches,
        build.pages_written
    );
    drop(g);
    // Every variant starts from cold buffers (a fresh open).
    let fresh = || -> GridFile<L> { GridFile::open(Arc::clone(&dev), opts()).expect("open") };
    let cost = |batched: bool, what: &str| -> Cost {
        let mut g = fresh();
        measure(&dev, || match what {
            "range" => {
                for r in &w.windows {
                    let v = if batched {
                        g.range_batched(r)
                    } else {
                        g.range(r)
                    };
                    std::hint::black_box(v.expect("range"));
                }
            }
            "knn" => {
                for &(x, y) in &w.knn {
                    let v = if batched {
                        g.knn_prefetch(x, y, 100)
                    } else {
                        g.knn(x, y, 100)
                    };
                    std::hint::black_box(v.expect("knn"));
                }
            }
            "gpq10" | "gpq100" => {
                let groups = if what == "gpq10" {
                    &w.groups10
                } else {
                    &w.groups100
                };
                for grp in groups {
                    let v = if batched {
                        g.group_get(grp)
                    } else {
                        g.group_get_plain(grp)
                    };
                    std::hint::black_box(v.expect("group"));
                }
            }
            _ => {}
        })
    };
    for (what, label) in [
        ("range", "100 range queries, 1 % windows"),
        ("knn", "100 kNN, k = 100"),
        ("gpq10", "50 group point queries of 10"),
        ("gpq100", "10 group point queries of 100"),
    ] {
        let plain = cost(false, what);
        let batched = cost(true, what);
        row(dev_name, L::NAME, label, plain, batched, sim);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let n: usize = std::env::var("GEOFLASH_GRID_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let w = workload(n);
    println!("| device | index | workload | plain (ms) | batched (ms) | speed-up | read batches plain / batched | pages read plain / batched |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    let sim_spec = "flashsim:preset=nvme";
    for kind in ["gffm", "lbgrid"] {
        let spec = DeviceSpec::parse(sim_spec).expect("spec");
        let dev = spec.open(PAGE, None).expect("flashsim");
        let name = "flashsim nvme (simulated ms)";
        if kind == "gffm" {
            run::<geoflash::grid::gffm::InPlaceBuckets>(name, dev, &w, true);
        } else {
            run::<geoflash::grid::lbgrid::LogBuckets>(name, dev, &w, true);
        }
    }
    let dir = std::env::var("GEOFLASH_GRID_FILE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("grid-bench"));
    std::fs::create_dir_all(&dir).expect("bench directory");
    for kind in ["gffm", "lbgrid"] {
        let path = dir.join(format!("{kind}.dat"));
        let _ = std::fs::remove_file(&path);
        let fopts = FileDeviceOptions {
            direct: true,
            engine: IoEngine::Auto,
            capacity_pages: 1 << 18,
            read_only: false,
        };
        let dev = match FileDevice::open(&path, PAGE, fopts) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("O_DIRECT file device unavailable ({e}); skipping the real-file runs");
                return;
            }
        };
        let name = format!("file O_DIRECT {:?} (wall ms)", dev.engine());
        let dev: Arc<dyn PageDevice> = Arc::new(dev);
        if kind == "gffm" {
            run::<geoflash::grid::gffm::InPlaceBuckets>(&name, dev, &w, false);
        } else {
            run::<geoflash::grid::lbgrid::LogBuckets>(&name, dev, &w, false);
        }
        let _ = std::fs::remove_file(&path);
    }
}
