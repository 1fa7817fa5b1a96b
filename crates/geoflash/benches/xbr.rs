//! The xBR+-tree (Fevgas' thesis §3.6): (1) the same tree on the plain
//! store, eFIND and FAST on the seeds' flash chip (`flashsim:preset=seed-tc58`):
//! pages written, NAND programs and erases, simulated time; (2) the SSD
//! batch algorithms against one-at-a-time processing (bulk loading, bulk
//! insertion, batch window / point / distance queries) on the simulator's
//! `nvme` preset (simulated time) and on a real file with `O_DIRECT` (wall
//! time). Not a criterion bench: it prints the Markdown tables of
//! `docs/benchmarks.md`; every ratio comes from one run.
//!
//! Run: `cargo bench -p geoflash --bench xbr` (50,000 points for the store
//! comparison, 100,000 for the batch algorithms; `GEOFLASH_XBR_STORE_POINTS`,
//! `GEOFLASH_XBR_POINTS` change them (0 skips the batch part), `GEOFLASH_XBR_FILE_DIR` says where the
//! O_DIRECT file goes).
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use geoflash::cache::PolicyKind;
use geoflash::geom::{Point, Rect};
use geoflash::index::xbr::{BulkOptions, XbrConfig, XbrTree};
use geoflash::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use geoflash::storage::spec::DeviceSpec;
use geoflash::storage::PageDevice;
use geoflash::store::efind::{EfindConfig, EfindStore};
use geoflash::store::log::Durability;
use geoflash::store::{FastConfig, FastStore, NodeStore, PlainConfig, PlainStore};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PAGE: usize = 4096;
const BUFFER: usize = 512 * 1024;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn unit() -> Rect {
    Rect::new(0.0, 0.0, 1.0, 1.0).expect("domain")
}

/// `n` uniform points in the unit square, ids 0..n.
fn points(n: usize, rng: &mut ChaCha8Rng) -> Vec<(u64, Point)> {
    (0..n)
        .map(|i| {
            let p = Point::new(rng.gen(), rng.gen()).expect("point");
            (i as u64, p)
        })
        .collect()
}

/// Device counters of one step.
#[derive(Default, Clone, Copy)]
struct Cost {
    wall_ms: f64,
    sim_ms: f64,
    pages_read: u64,
    read_batches: u64,
    pages_written: u64,
    write_batches: u64,
    programs: u64,
    erases: u64,
}

fn measure(dev: &Arc<dyn PageDevice>, f: impl FnOnce()) -> Cost {
    dev.reset_stats();
    let t = Instant::now();
    f();
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let s = dev.stats();
    let sim = s.sim.unwrap_or_default();
    Cost {
        wall_ms,
        sim_ms: sim.sim_time_ns as f64 / 1e6,
        pages_read: s.io.pages_read,
        read_batches: s.io.read_batches,
        pages_written: s.io.pages_written,
        write_batches: s.io.write_batches,
        programs: sim.nand_programs,
        erases: sim.nand_erases,
    }
}

fn plain_cfg() -> PlainConfig {
    PlainConfig {
        buffer_bytes: BUFFER,
        policy: PolicyKind::Lru,
        with_payload: true,
    }
}

/// The store `kind` on `dev`: plain (LRU), eFIND (the paper's final
/// configuration) or FAST* (units of 5), 512 KiB each, durability none (the
/// papers' mode), logs in the device's last pages.
fn store(kind: &str, dev: &Arc<dyn PageDevice>) -> Box<dyn NodeStore> {
    match kind {
        "plain" => Box::new(PlainStore::create(Arc::clone(dev), plain_cfg()).expect("plain")),
        "efind" => {
            let cfg = EfindConfig {
                buffer_bytes: BUFFER,
                with_payload: true,
                durability: Durability::None,
                ..EfindConfig::default()
            };
            let log = cfg.log_placement(dev, None).expect("log");
            Box::new(EfindStore::create(Arc::clone(dev), log, cfg).expect("efind"))
        }
        _ => {
            let cfg = FastConfig {
                buffer_bytes: BUFFER,
                with_payload: true,
                durability: Durability::None,
                ..FastConfig::default()
            };
            let log = cfg.log_placement(dev, None).expect("log");
            Box::new(FastStore::create(Arc::clone(dev), log, cfg).expect("fast"))
        }
    }
}

fn windows(n: usize, side: f64, rng: &mut ChaCha8Rng) -> Vec<Rect> {
    (0..n)
        .map(|_| {
            let (x, y) = (
                rng.gen::<f64>() * (1.0 - side),
                rng.gen::<f64>() * (1.0 - side),
            );
            Rect::new(x, y, x + side, y + side).expect("window")
        })
        .collect()
}

/// Part 1: one tree built by insertion on each store, then range queries;
/// on the seed chip as preset (512 MiB) and cut to 28 MiB (the logs take
/// 20 MiB of it) so that garbage collection runs.
fn stores(n: usize) {
    println!("\n### xBR+-tree on the plain store, eFIND and FAST* ({n} uniform points inserted one by one, 4 KiB pages, 512 KiB, durability none)\n");
    println!("| device | store | build: pages written | NAND programs | erases | GC copies | simulated s | 1,000 windows 0.01 %: pages read | simulated ms |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let pts = points(n, &mut rng);
    let ws = windows(1000, 0.01, &mut rng);
    for spec in [
        "flashsim:preset=seed-tc58",
        "flashsim:preset=seed-tc58&capacity=28MiB",
    ] {
        for kind in ["plain", "efind", "fast"] {
            let dev = DeviceSpec::parse(spec)
                .expect("spec")
                .open(PAGE, None)
                .expect("flashsim");
            let cfg = XbrConfig::for_page(unit(), PAGE);
            let mut t = XbrTree::create(store(kind, &dev), cfg).expect("create");
            dev.reset_stats();
            let gc_before = dev.stats().sim.unwrap_or_default().gc_copies;
            let mut failed = None;
            let build = measure(&dev, || {
                for &(id, p) in &pts {
                    if let Err(e) = t.insert(id, p) {
                        failed = Some(e);
                        return;
                    }
                }
                failed = t.checkpoint().err();
            });
            if let Some(e) = failed {
                println!("| `{spec}` | {kind} | error: {e} | | | | | | |");
                continue;
            }
            let gc = dev.stats().sim.unwrap_or_default().gc_copies - gc_before;
            let q = measure(&dev, || {
                for w in &ws {
                    std::hint::black_box(t.range(w).expect("range"));
                }
            });
            let rep = t.check().expect("check");
            eprintln!(
                "{spec} {kind}: height {}, {rep:?}, store {:?}",
                t.height(),
                t.store().stats()
            );
            println!(
                "| `{spec}` | {kind} | {} | {} | {} | {gc} | {:.2} | {} | {:.1} |",
                build.pages_written,
                build.programs,
                build.erases,
                build.sim_ms / 1e3,
                q.pages_read,
                q.sim_ms
            );
        }
    }
}

fn row(dev_name: &str, what: &str, one: Cost, batched: Cost, sim: bool) {
    let t = |c: &Cost| if sim { c.sim_ms } else { c.wall_ms };
    let gain = 100.0 * (1.0 - t(&batched) / t(&one).max(1e-9));
    println!(
        "| {dev_name} | {what} | {:.1} | {:.1} | **{gain:.1} %** | {} / {} | {} / {} | {} / {} |",
        t(&one),
        t(&batched),
        one.read_batches,
        batched.read_batches,
        one.pages_read,
        batched.pages_read,
        one.write_batches,
        batched.write_batches
    );
}

/// Part 2: the batch algorithms against one-at-a-time processing on `dev`
/// (fresh for every build; queries on a store reopened cold).
fn batches(dev_name: &str, mk: &dyn Fn() -> Arc<dyn PageDevice>, n: usize, sim: bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let all = points(n + n / 10, &mut rng);
    let (base, more) = all.split_at(n);
    let cfg = XbrConfig::for_page(unit(), PAGE);
    let opts = BulkOptions::default();
    let plain = |dev: &Arc<dyn PageDevice>| {
        PlainStore::create(Arc::clone(dev), plain_cfg()).expect("plain")
    };
    // Build: one by one vs bulk load.
    let dev_one = mk();
    let mut one = XbrTree::create(plain(&dev_one), cfg).expect("create");
    let c_one = measure(&dev_one, || {
        for &(id, p) in base {
            one.insert(id, p).expect("insert");
        }
        one.checkpoint().expect("checkpoint");
    });
    let dev_bulk = mk();
    let mut bulk = None;
    let c_bulk = measure(&dev_bulk, || {
        let mut t = XbrTree::bulk_load(plain(&dev_bulk), cfg, base, opts).expect("bulk load");
        t.checkpoint().expect("checkpoint");
        bulk = Some(t);
    });
    let mut bulk = bulk.expect("bulk tree");
    eprintln!(
        "{dev_name}: inserted tree {:?} height {}, bulk-loaded {:?} height {}",
        one.check().expect("check"),
        one.height(),
        bulk.check().expect("check"),
        bulk.height()
    );
    row(
        dev_name,
        &format!("build {n} points: insertion vs bulk loading"),
        c_one,
        c_bulk,
        sim,
    );
    // Bulk loading alone: node by node (the original's writes) vs write
    // batches of 128, on a plain store without buffer (write-through per operation).
    let unbuffered = |dev: &Arc<dyn PageDevice>| {
        let cfg = PlainConfig {
            buffer_bytes: 0,
            ..plain_cfg()
        };
        PlainStore::create(Arc::clone(dev), cfg).expect("plain")
    };
    let load = |write_batch: usize| {
        let dev = mk();
        measure(&dev, || {
            let o = BulkOptions {
                write_batch,
                ..opts
            };
            let mut t = XbrTree::bulk_load(unbuffered(&dev), cfg, base, o).expect("bulk load");
            t.checkpoint().expect("checkpoint");
        })
    };
    row(
        dev_name,
        "bulk loading, no node buffer: 1 vs 128 nodes per write",
        load(1),
        load(128),
        sim,
    );
    // Growth by 10 %: one by one vs bulk insertion (same starting tree: the bulk-loaded one, copied).
    let c_one = measure(&dev_one, || {
        for &(id, p) in more {
            one.insert(id, p).expect("insert");
        }
        one.checkpoint().expect("checkpoint");
    });
    let c_bulk = measure(&dev_bulk, || {
        bulk.bulk_insert(more, opts).expect("bulk insert");
        bulk.checkpoint().expect("checkpoint");
    });
    row(
        dev_name,
        &format!(
            "insert {} more points: one by one vs bulk insertion",
            more.len()
        ),
        c_one,
        c_bulk,
        sim,
    );
    drop(one);
    drop(bulk);
    // Queries on the bulk-built tree, each variant from a cold store.
    let reopen = || {
        XbrTree::open(
            PlainStore::open(Arc::clone(&dev_bulk), plain_cfg()).expect("open"),
            cfg,
        )
        .expect("open tree")
    };
    let ws = windows(1000, 0.01, &mut rng);
    let pq: Vec<Point> = (0..1000).map(|i| all[(i * 7919) % all.len()].1).collect();
    let dq: Vec<(Point, f64)> = (0..1000)
        .map(|_| (Point::new(rng.gen(), rng.gen()).expect("point"), 0.005))
        .collect();
    const BATCH: usize = 100;
    let t = reopen();
    let one = measure(&dev_bulk, || {
        for w in &ws {
            std::hint::black_box(t.range(w).expect("range"));
        }
    });
    let t = reopen();
    let batched = measure(&dev_bulk, || {
        for chunk in ws.chunks(BATCH) {
            std::hint::black_box(t.range_batch(chunk, 1024).expect("range batch"));
        }
    });
    row(
        dev_name,
        "1,000 window queries (0.01 %), batches of 100",
        one,
        batched,
        sim,
    );
    let t = reopen();
    let one = measure(&dev_bulk, || {
        for p in &pq {
            std::hint::black_box(t.point(p).expect("point"));
        }
    });
    let t = reopen();
    let batched = measure(&dev_bulk, || {
        for chunk in pq.chunks(BATCH) {
            std::hint::black_box(t.point_batch(chunk, 1024).expect("point batch"));
        }
    });
    row(
        dev_name,
        "1,000 point-location queries, batches of 100",
        one,
        batched,
        sim,
    );
    let t = reopen();
    let one = measure(&dev_bulk, || {
        for (c, r) in &dq {
            std::hint::black_box(t.within_distance(c, *r).expect("distance"));
        }
    });
    let t = reopen();
    let batched = measure(&dev_bulk, || {
        for chunk in dq.chunks(BATCH) {
            std::hint::black_box(
                t.within_distance_batch(chunk, 1024)
                    .expect("distance batch"),
            );
        }
    });
    row(
        dev_name,
        "1,000 distance-range queries (r = 0.005), batches of 100",
        one,
        batched,
        sim,
    );
}

fn main() {
    let n_stores = env_usize("GEOFLASH_XBR_STORE_POINTS", 50_000);
    let n = env_usize("GEOFLASH_XBR_POINTS", 100_000);
    stores(n_stores);
    if n == 0 {
        return;
    }
    println!("\n### Batch algorithms against one-at-a-time processing (plain store, 512 KiB LRU, 4 KiB pages, {n} uniform points)\n");
    println!("| device | step | one at a time (ms) | batched (ms) | gain | read batches | pages read | write batches |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let sim = || {
        DeviceSpec::parse("flashsim:preset=nvme")
            .expect("spec")
            .open(PAGE, None)
            .expect("flashsim")
    };
    batches("flashsim nvme (simulated ms)", &sim, n, true);
    let dir = std::env::var("GEOFLASH_XBR_FILE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xbr-bench"));
    std::fs::create_dir_all(&dir).expect("bench directory");
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let file = || -> Arc<dyn PageDevice> {
        let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("xbr-{i}.dat"));
        let _ = std::fs::remove_file(&path);
        let fopts = FileDeviceOptions {
            direct: true,
            engine: IoEngine::Auto,
            capacity_pages: 1 << 18,
            read_only: false,
        };
        Arc::new(FileDevice::open(&path, PAGE, fopts).expect("O_DIRECT file"))
    };
    batches("file O_DIRECT (wall ms)", &file, n, false);
    for i in 0..counter.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = std::fs::remove_file(dir.join(format!("xbr-{i}.dat")));
    }
}
