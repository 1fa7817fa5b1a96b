//! Random 4 KiB page reads on a real file with `O_DIRECT`: batch 1 versus
//! batch 64, io_uring versus psync. Throughput is reported in pages/s
//! (criterion "elements").
//!
//! The 256 MiB data file is created once under the target directory
//! (`target/tmp/device-bench/`) and filled with non-zero data, so every read
//! reaches the disk (O_DIRECT bypasses the page cache; holes would not).
//!
//! Run: `cargo bench -p geoflash --bench device -- --warm-up-time 1 --measurement-time 5 --sample-size 10`
use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use geoflash::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use geoflash::storage::PageDevice;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PAGE: usize = 4096;
const FILE_BYTES: u64 = 256 << 20;
const PAGES: u64 = FILE_BYTES / PAGE as u64;

fn data_file() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("device-bench");
    std::fs::create_dir_all(&dir).expect("create bench directory");
    let path = dir.join("pages-256MiB.dat");
    let ready = std::fs::metadata(&path).is_ok_and(|m| m.len() == FILE_BYTES);
    if !ready {
        let opts = FileDeviceOptions {
            direct: true,
            engine: IoEngine::Auto,
            capacity_pages: PAGES,
            read_only: false,
        };
        let dev = FileDevice::open(&path, PAGE, opts).expect("open bench file");
        let run = 256u64;
        let mut buf = dev.alloc_buf(run as usize).expect("buffer");
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8 | 1;
        }
        for first in (0..PAGES).step_by(run as usize) {
            let pages: Vec<u64> = (first..first + run).collect();
            dev.write_batch(&pages, &buf).expect("fill bench file");
        }
        dev.sync().expect("sync bench file");
    }
    path
}

fn random_reads(c: &mut Criterion) {
    let path = data_file();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let order: Vec<u64> = (0..1 << 16).map(|_| rng.gen_range(0..PAGES)).collect();
    let mut group = c.benchmark_group("device_random_4k_read_odirect");
    for engine in [IoEngine::Uring, IoEngine::Psync] {
        let opts = FileDeviceOptions {
            direct: true,
            engine,
            capacity_pages: PAGES,
            read_only: false,
        };
        let dev = match FileDevice::open(&path, PAGE, opts) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("skipping engine {engine}: {e}");
                continue;
            }
        };
        eprintln!("{}", dev.describe());
        for batch in [1usize, 64] {
            group.throughput(Throughput::Elements(batch as u64));
            let mut buf = dev.alloc_buf(batch).expect("buffer");
            let mut cursor = 0usize;
            group.bench_function(
                BenchmarkId::new(engine.to_string(), format!("batch{batch}")),
                |b| {
                    b.iter(|| {
                        if cursor + batch > order.len() {
                            cursor = 0;
                        }
                        let pages = &order[cursor..cursor + batch];
                        cursor += batch;
                        dev.read_batch(pages, &mut buf).expect("read");
                    });
                },
            );
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = random_reads
}
criterion_main!(benches);
