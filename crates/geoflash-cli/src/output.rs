//! Printing results: readable tables by default, one JSON line with `--json`.
use geoflash_bench::devbench::DevbenchReport;
use serde::Serialize;
use std::io::Write;

/// Writes one line to standard output. A closed pipe (`geoflash query … | head`)
/// ends the process quietly with success, as Unix tools do; another write
/// error ends it with exit code 1.
pub fn write_line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("geoflash: error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` through [`write_line`].
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::output::write_line(format_args!($($t)*))
    };
}

/// Prints `value` as one JSON line on standard output.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// Prints one `name value` line of a table.
pub fn row(name: &str, value: impl std::fmt::Display) {
    outln!("{name:<28} {value}");
}

/// Prints a devbench report as a two-column table.
pub fn print_devbench_table(r: &DevbenchReport) {
    let io = &r.stats.io;
    row("device", &r.device);
    row("pattern", format!("{:?}", r.config.pattern));
    row("operations", r.config.count);
    row("batch", r.config.batch);
    row("page size", r.page_size);
    row("region pages", r.region_pages);
    row("wall time (ms)", format!("{:.3}", r.wall_ns as f64 / 1e6));
    row("ops/s (wall)", format!("{:.0}", r.ops_per_sec));
    row("MB/s (wall)", format!("{:.2}", r.mb_per_sec));
    row(
        "pages read / written",
        format!("{} / {}", io.pages_read, io.pages_written),
    );
    row(
        "batches read / written",
        format!("{} / {}", io.read_batches, io.write_batches),
    );
    row(
        "sequential / random reads",
        format!("{} / {}", io.sequential_reads, io.random_reads),
    );
    row(
        "sequential / random writes",
        format!("{} / {}", io.sequential_writes, io.random_writes),
    );
    if let Some(s) = &r.stats.sim {
        row(
            "simulated time (ms)",
            format!("{:.3}", s.sim_time_ns as f64 / 1e6),
        );
        if let Some(x) = r.sim_ops_per_sec {
            row("ops/s (simulated)", format!("{x:.0}"));
        }
        if s.nand_reads + s.nand_programs + s.nand_erases == 0 {
            return;
        }
        row(
            "NAND reads / programs",
            format!("{} / {}", s.nand_reads, s.nand_programs),
        );
        row("NAND erases", s.nand_erases);
        row("GC copies", s.gc_copies);
        row(
            "write amplification",
            format!("{:.3}", s.device_write_amplification),
        );
        row(
            "erase count min/mean/max",
            format!(
                "{} / {:.2} / {}",
                s.erase_count_min, s.erase_count_mean, s.erase_count_max
            ),
        );
    }
}
