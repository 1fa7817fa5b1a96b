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
        output_failed(&e);
    }
}

/// Ends the process after a failed write to standard output: quietly with
/// success on a closed pipe, with exit code 1 otherwise.
fn output_failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("geoflash: error: cannot write to standard output: {e}");
    std::process::exit(1);
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

/// Standard output for answers printed as they are found, so that a
/// command holds one answer at a time however many it prints: readable
/// lines, or with `--json` one record whose list `list` is written item by
/// item and whose other fields ([`finish`](Self::finish)) come after it.
pub struct Answers {
    out: std::io::BufWriter<std::io::Stdout>,
    /// The JSON record's list (`None`: readable lines).
    json: Option<&'static str>,
    /// Whether the record's opening is written.
    opened: bool,
    /// Items of the list written so far.
    items: usize,
}

impl Answers {
    /// Answers printed as lines, or (`json`) as the list `list` of one
    /// JSON record.
    pub fn new(json: bool, list: &'static str) -> Answers {
        Answers {
            out: std::io::BufWriter::new(std::io::stdout()),
            json: json.then_some(list),
            opened: false,
            items: 0,
        }
    }

    /// Whether the answers are printed as JSON.
    pub fn is_json(&self) -> bool {
        self.json.is_some()
    }

    /// One readable line (nothing is printed with `--json`).
    pub fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if self.json.is_some() {
            return;
        }
        let out = &mut self.out;
        if let Err(e) = out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
            output_failed(&e);
        }
    }

    /// One item of the JSON record's list (nothing is printed without
    /// `--json`).
    pub fn item<T: Serialize>(&mut self, value: &T) -> anyhow::Result<()> {
        if self.json.is_none() {
            return Ok(());
        }
        self.open();
        if self.items > 0 {
            self.write(b",");
        }
        self.items += 1;
        serde_json::to_writer(&mut self.out, value).map_err(|e| match e.io_error_kind() {
            Some(_) => output_failed(&std::io::Error::other(e)),
            None => anyhow::Error::from(e),
        })
    }

    /// Ends the output: with `--json`, closes the list and writes the
    /// fields of `rest` (a JSON object) after it; flushes.
    pub fn finish(mut self, rest: &serde_json::Value) -> anyhow::Result<()> {
        if self.json.is_some() {
            self.open();
            self.write(b"]");
            let fields = serde_json::to_string(rest)?;
            match fields.strip_prefix('{').filter(|f| *f != "}") {
                Some(f) => {
                    self.write(b",");
                    self.write(f.as_bytes());
                }
                None => self.write(b"}"),
            }
            self.write(b"\n");
        }
        if let Err(e) = self.out.flush() {
            output_failed(&e);
        }
        Ok(())
    }

    /// Writes the record's opening, once.
    fn open(&mut self) {
        if let (Some(list), false) = (self.json, self.opened) {
            self.opened = true;
            let head = format!("{{{}:[", serde_json::Value::from(list));
            self.write(head.as_bytes());
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Err(e) = self.out.write_all(bytes) {
            output_failed(&e);
        }
    }
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
