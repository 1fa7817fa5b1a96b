// The doc comments of clap arguments are `--help` text, not rustdoc: a
// `[:port]` in them is not an intra-doc link.
#![allow(rustdoc::broken_intra_doc_links)]
//! The `geoflash` command. Exit codes ([`exit_code`], the one table): 0
//! success, 2 bad input, 1 damage, I/O, device and results-database
//! failures, 130 interrupted (Ctrl-C: the message says what the command left).
//! With `--json` the JSON record is the last line of standard output;
//! progress bars go to standard error.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::{Parser, Subcommand};
use geoflash::engine::device::DeviceSpec;
use geoflash::engine::parse_size;
use geoflash::ErrorKind;
use geoflash_bench::devbench::{self, DevbenchConfig, Pattern};
use geoflash_bench::progress::Lines;
use geoflash_bench::{formats, generate};
use indicatif::{ProgressBar, ProgressDrawTarget};
use std::io::IsTerminal;

#[macro_use]
mod output;
mod bench_cmd;
mod ids;
mod import_cmd;
mod index_cmds;
mod index_flags;
mod report_cmd;
mod trace_cmd;

/// geoflash: a flash-aware spatial indexing engine and its workbench.
#[derive(Parser)]
#[command(name = "geoflash", version, about, propagate_version = true)]
struct Cli {
    /// Print no progress on standard error (neither bars on a terminal nor
    /// the status lines printed elsewhere: CI, a log file).
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

/// Set by `--quiet`: no progress at all.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether progress is to be shown (`--quiet` not given).
pub fn show_progress() -> bool {
    !QUIET.load(Ordering::Relaxed)
}

#[derive(Subcommand)]
enum Command {
    /// Runs a fixed pattern of page reads and writes against a device and prints its counters.
    Devbench(DevbenchArgs),
    /// Builds an index from a dataset file (one insertion per object, or a bulk load).
    Build(Box<index_cmds::BuildArgs>),
    /// Inserts the objects of a dataset file into an index.
    Insert(index_cmds::ChangeArgs),
    /// Deletes the objects of a dataset file from an index.
    Delete(index_cmds::ChangeArgs),
    /// Moves objects of an index to new rectangles given by id (CSV id,minx,miny,maxx,maxy).
    Update(index_cmds::UpdateArgs),
    /// Range queries: per window the number of objects (and their ids with --ids).
    Query(index_cmds::QueryArgs),
    /// The k nearest objects to a point.
    Knn(index_cmds::KnnArgs),
    /// Shows an index's manifest and tree structure.
    Inspect(index_cmds::DirArgs),
    /// Checks checksums and every structural invariant (exit 1 on a defect).
    Verify(index_cmds::DirArgs),
    /// Flushes an index and syncs its device.
    Checkpoint(index_cmds::DirArgs),
    /// Runs recovery (restart) on an index, checks every page (exit 1 on a
    /// damaged one), checkpoints it and prints what it replayed.
    Recover(index_cmds::RecoverArgs),
    /// Generates query windows of a given selectivity over a dataset's extent (CSV minx,miny,maxx,maxy).
    Windows(WindowsArgs),
    /// Generates a synthetic dataset (CSV `id,minx,miny,maxx,maxy` or GeoJSON, by extension).
    Generate(GenerateArgs),
    /// Runs a workload file (TOML) and records every step's metrics in a results store (SQLite or PostgreSQL).
    Bench(bench_cmd::BenchArgs),
    /// Writes tables, plots and an HTML page from a results store.
    Report(report_cmd::ReportArgs),
    /// Converts a dataset file (CSV, GeoJSON, FlatGeobuf, GeoParquet, Shapefile, GeoPackage, OSM PBF) or a PostGIS table to CSV, GeoJSON, FlatGeobuf or GeoParquet in an insertion order.
    Import(import_cmd::ImportArgs),
}

#[derive(clap::Args)]
struct WindowsArgs {
    /// Dataset whose extent (and objects, for on-data placement) the windows follow.
    #[arg(long)]
    input: PathBuf,
    /// Window area as a share of the extent: 0.01% or 0.0001.
    #[arg(long)]
    selectivity: String,
    /// Number of windows.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Width/height ratio.
    #[arg(long, default_value_t = 1.0)]
    aspect: f64,
    /// uniform or on-data.
    #[arg(long, default_value = "uniform")]
    placement: String,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output CSV file, written whole or not at all (as generate's --out).
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct GenerateArgs {
    /// uniform, gaussian, diagonal, bit, sierpinski, parcel, thomas, hier-thomas or buildings.
    #[arg(long)]
    distribution: String,
    /// point or box.
    #[arg(long, default_value = "point")]
    geometry: String,
    /// Number of objects.
    #[arg(long)]
    count: usize,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Insertion order written to the file: as-generated, random, hilbert or sessions.
    #[arg(long, default_value = "as-generated")]
    order: String,
    /// Largest box side, as a fraction of the unit square (boxes only).
    #[arg(long)]
    max_size: Option<f64>,
    /// Output file: .csv (id,minx,miny,maxx,maxy), .geojson, .fgb (FlatGeobuf) or .parquet (GeoParquet).
    /// Written whole or not at all: a temporary file beside it replaces it
    /// once complete (an error or Ctrl-C leaves the previous file).
    #[arg(long)]
    out: PathBuf,
    /// Print a JSON summary (last line of standard output).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "A run that writes (the write and mixed patterns, a read pattern's prefill, a replayed trace with writes or trims) refuses a device file that exists and is not empty, or that lies in an index directory (beside a manifest.json), unless --overwrite is given: it would destroy what the file holds. Plain `file` is ./devbench.dat. A read pattern with --no-prefill only reads, and runs on any file.\n\nExamples:\n  geoflash devbench --device mem: --pattern random-write --count 20000 --json\n  geoflash devbench --device \"file:/scratch/dev.dat?direct=true\" --pattern random-read --batch 64\n  geoflash devbench --device \"file:/scratch/dev.dat?direct=true\" --pattern seq-write --overwrite   (run again on the same file)\n  geoflash devbench --device \"file:/data/big.dat?direct=true\" --pattern random-read --no-prefill   (reads an existing file, writes nothing)"
)]
struct DevbenchArgs {
    /// Device spec: file:PATH?direct=true&engine=uring|psync, file (./devbench.dat), mem:, flashsim:preset=NAME&key=value, hddsim:preset=NAME
    #[arg(long)]
    device: String,
    /// Write over a device file that exists and is not empty, or that lies
    /// in an index directory (its data is destroyed); without it such a
    /// file is refused (exit 2) by a run that writes.
    #[arg(long)]
    overwrite: bool,
    /// seq-read, seq-write, random-read, random-write or mixed.
    #[arg(long, default_value = "random-read")]
    pattern: String,
    /// Number of page operations.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Pages per batch submitted at once.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Page size (bytes or a size such as 4KiB).
    #[arg(long, default_value = "4096")]
    page_size: String,
    /// Seed of the random page ids.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Region of the device that page ids are drawn from (capped by its capacity).
    #[arg(long, default_value = "256MiB")]
    region: String,
    /// Share of batches that read in the mixed pattern.
    #[arg(long, default_value_t = 0.5)]
    read_fraction: f64,
    /// Do not fill the region before a read pattern.
    #[arg(long)]
    no_prefill: bool,
    /// Replay this I/O trace (recorded with --record-trace) on the device
    /// instead of running a pattern; the page size is the trace's.
    #[arg(long, conflicts_with = "record_trace")]
    trace: Option<PathBuf>,
    /// Record the run's device I/O (prefill included) as a trace in this file.
    #[arg(long)]
    record_trace: Option<PathBuf>,
    /// Print the report as JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// The exit code of each kind of error: the command line's contract,
/// which scripts rely on (the table in `docs/architecture.md`, "Errors and
/// exit codes"). Every exit code but a Dask sweep's (passed through) and
/// [`FAILURE`] comes from here.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        // The flags, the spec, an input file or its data: fix them and run again.
        ErrorKind::InvalidInput => 2,
        // Not the user's mistake: a damaged index (`geoflash recover` or a
        // backup), the device or file system, the results database.
        ErrorKind::Damaged | ErrorKind::Io | ErrorKind::ResultsStore => 1,
        // Ctrl-C: the message says what the command left.
        ErrorKind::Interrupted => 130,
    }
}

/// The exit code of a failure outside geoflash's kinds of error (standard
/// output cannot be written, configurations of a workbench run failed).
pub const FAILURE: u8 = 1;

/// An error with the exit code it maps to.
pub struct Failure {
    /// Exit code.
    pub code: u8,
    /// What went wrong.
    pub error: anyhow::Error,
}

impl Failure {
    /// `error`, with the exit code of `kind`.
    pub fn new(kind: ErrorKind, error: anyhow::Error) -> Failure {
        Failure {
            code: exit_code(kind),
            error,
        }
    }
}

impl From<geoflash::Error> for Failure {
    fn from(e: geoflash::Error) -> Self {
        Failure::new(e.kind(), e.into())
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Self {
        Failure {
            code: FAILURE,
            error,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    QUIET.store(cli.quiet, Ordering::Relaxed);
    let result = match cli.command {
        Command::Devbench(args) => cmd_devbench(args),
        Command::Generate(args) => {
            discard_outputs_on_interrupt();
            cmd_generate(args)
        }
        Command::Windows(args) => {
            discard_outputs_on_interrupt();
            cmd_windows(args)
        }
        Command::Build(a) => index_cmds::build(*a),
        Command::Insert(a) => index_cmds::change(a, false),
        Command::Delete(a) => index_cmds::change(a, true),
        Command::Update(a) => index_cmds::update(a),
        Command::Query(a) => index_cmds::query(a),
        Command::Knn(a) => index_cmds::knn(a),
        Command::Inspect(a) => index_cmds::inspect(a),
        Command::Verify(a) => index_cmds::verify(a),
        Command::Checkpoint(a) => index_cmds::checkpoint(a),
        Command::Recover(a) => index_cmds::recover(a),
        Command::Bench(a) => bench_cmd::bench(a),
        Command::Report(a) => report_cmd::report(a),
        Command::Import(a) => {
            discard_outputs_on_interrupt();
            import_cmd::import(a)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("geoflash: error: {}", f.error);
            ExitCode::from(f.code)
        }
    }
}

/// Ctrl-C in a command that writes output files (`generate`, `windows`,
/// `import`), which are written whole or not at all
/// ([`formats::OutputFile`]): the temporary file of an output being written
/// is removed, the destination stays as it was (the previous file, or
/// none), and the command exits 130 saying so.
fn discard_outputs_on_interrupt() {
    let handler = || {
        // Held until the process exits: no output is committed after this.
        let discarded = formats::discard_pending_outputs();
        let outputs: Vec<String> = discarded
            .outputs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        if outputs.is_empty() {
            eprintln!("geoflash: error: interrupted: no output file was being written");
        } else {
            eprintln!(
                "geoflash: error: interrupted: {} not written (a previous file there is unchanged)",
                outputs.join(", ")
            );
        }
        std::process::exit(i32::from(exit_code(ErrorKind::Interrupted)));
    };
    if let Err(e) = ctrlc::set_handler(handler) {
        eprintln!(
            "geoflash: warning: cannot catch Ctrl-C ({e}): an interrupt leaves a temporary file \
             beside the output (the output itself stays as it was)"
        );
    }
}

/// Checks that `path`, an input file named on the command line, can be
/// read: a missing or unreadable input is bad input (exit code 2) for
/// every command, named in the message.
pub fn input_file(path: &std::path::Path) -> Result<(), Failure> {
    let bad = |why: String| -> Failure {
        geoflash::Error::invalid(format!("input file {}: {why}", path.display())).into()
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad("no such file".into())),
        Err(e) => Err(bad(e.to_string())),
        Ok(m) if m.is_dir() => Err(bad("is a directory, not a file".into())),
        Ok(_) => std::fs::File::open(path)
            .map(drop)
            .map_err(|e| bad(e.to_string())),
    }
}

/// The progress of `len` steps of `what` on standard error: a bar on a
/// terminal; elsewhere (CI, `make demo > log`), where a bar draws nothing,
/// a status line per tenth of the steps or every few seconds
/// ([`Lines`]) and one when done; nothing with `--quiet`.
pub struct Progress {
    bar: ProgressBar,
    lines: Option<Mutex<Lines>>,
}

impl Progress {
    /// `done` steps are done.
    pub fn set_position(&self, done: u64) {
        self.bar.set_position(done);
        if let Some(lines) = &self.lines {
            if let Ok(mut lines) = lines.lock() {
                if let Some(line) = lines.update(done, Instant::now()) {
                    eprintln!("{line}");
                }
            }
        }
    }

    /// The work ended with `done` steps done: the bar is cleared, the
    /// status lines end with the count and the time taken.
    pub fn finish(&self, done: u64) {
        self.bar.finish_and_clear();
        if let Some(lines) = &self.lines {
            if let Ok(lines) = lines.lock() {
                eprintln!("{}", lines.finish(done, Instant::now()));
            }
        }
    }

    /// Stops the bar where it is with `message` (the command's error says
    /// the same off a terminal).
    pub fn abandon_with_message(&self, message: String) {
        self.bar.abandon_with_message(message);
    }
}

/// A [`Progress`] for `len` steps of `what`.
pub fn progress_bar(len: u64, what: &str) -> Progress {
    let show = show_progress();
    let bar = if show {
        ProgressBar::new(len)
    } else {
        ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden())
    };
    bar.set_style(geoflash_bench::progress::style(
        "{msg} [{bar:40}] {pos}/{len} ({rate}, eta {eta})",
    ));
    bar.set_message(what.to_string());
    let lines = (show && !std::io::stderr().is_terminal())
        .then(|| Mutex::new(Lines::new(what, len, Instant::now())));
    Progress { bar, lines }
}

/// Says on standard error that a step without a count (a bulk load, reading
/// a file whole) begins, off a terminal and without `--quiet`, so that a
/// log shows what a long silence is.
pub fn status_line(message: std::fmt::Arguments) {
    if show_progress() && !std::io::stderr().is_terminal() {
        eprintln!("{message}");
    }
}

fn cmd_devbench(a: DevbenchArgs) -> Result<(), Failure> {
    if let Some(trace) = &a.trace {
        input_file(trace)?;
        return trace_cmd::replay(&a.device, trace, a.json, a.overwrite);
    }
    let page_size = usize::try_from(parse_size(&a.page_size)?)
        .map_err(|_| geoflash::Error::invalid("page size too large"))?;
    let spec = DeviceSpec::parse(&a.device)?;
    let pattern = a.pattern.parse::<Pattern>()?;
    let default_path = PathBuf::from(DEVBENCH_FILE);
    // What writes pages: the write patterns, the writes of the mixed one,
    // the prefill of the patterns that read.
    let writes = match pattern {
        Pattern::SeqWrite | Pattern::RandomWrite => true,
        Pattern::Mixed => !a.no_prefill || a.read_fraction < 1.0,
        Pattern::SeqRead | Pattern::RandomRead => !a.no_prefill,
    };
    if writes && !a.overwrite {
        refuse_overwrite(&spec, &default_path)?;
    }
    let mut device = spec.open(page_size, Some(&default_path))?;
    let mut recorder = None;
    if let Some(path) = &a.record_trace {
        let traced = std::sync::Arc::new(geoflash::engine::device::TraceDevice::create(
            device, path, true,
        )?);
        recorder = Some(traced.clone());
        device = traced;
    }
    let cfg = DevbenchConfig {
        pattern,
        count: a.count,
        batch: a.batch,
        seed: a.seed,
        region_bytes: parse_size(&a.region)?,
        read_fraction: a.read_fraction,
        prefill: !a.no_prefill,
    };
    let bar = progress_bar(cfg.count, "devbench");
    let report = devbench::run(device.as_ref(), &cfg, &|done| bar.set_position(done))?;
    bar.finish(cfg.count);
    if let Some(r) = recorder {
        r.finish()?;
    }
    if a.json {
        output::print_json(&report)?;
    } else {
        output::print_devbench_table(&report);
    }
    Ok(())
}

/// The file of `devbench --device file` (and of a hybrid's `file` tiers).
pub const DEVBENCH_FILE: &str = "devbench.dat";

/// The files `spec` opens, `default` standing for plain `file` (a hybrid's
/// fast tier: the same name with `.fast` before the extension, as
/// [`DeviceSpec::open`] names it).
fn device_files(spec: &DeviceSpec, default: &Path) -> Vec<PathBuf> {
    match spec {
        DeviceSpec::File { path, .. } => {
            vec![path.clone().unwrap_or_else(|| default.to_path_buf())]
        }
        DeviceSpec::Hybrid { fast, slow, .. } => {
            let stem = default
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("pages");
            let fast_default =
                default.with_file_name(match default.extension().and_then(|e| e.to_str()) {
                    Some(ext) => format!("{stem}.fast.{ext}"),
                    None => format!("{stem}.fast"),
                });
            let mut files = device_files(fast, &fast_default);
            files.extend(device_files(slow, default));
            files
        }
        DeviceSpec::Mem { .. } | DeviceSpec::FlashSim { .. } | DeviceSpec::HddSim { .. } => {
            Vec::new()
        }
    }
}

/// Refuses (exit 2) a run of `devbench` that would write over data: a
/// device file of `spec` that exists and is not empty (or is not a regular
/// file: a block device), or that lies in an index directory (beside its
/// `manifest.json`), unless `--overwrite` is given.
pub fn refuse_overwrite(spec: &DeviceSpec, default: &Path) -> Result<(), Failure> {
    for file in device_files(spec, default) {
        let refuse = |why: String| -> Failure {
            geoflash::Error::invalid(format!(
                "--device: devbench would overwrite {}: {why}; give --overwrite to write over it, \
                 or name a new file",
                file.display()
            ))
            .into()
        };
        // The file's directory and, through a symbolic link, its target's:
        // an index's files are not written over without --overwrite.
        let mut dirs = vec![file.parent().map(Path::to_path_buf)];
        if let Ok(target) = std::fs::canonicalize(&file) {
            dirs.push(target.parent().map(Path::to_path_buf));
        }
        for dir in dirs.into_iter().flatten() {
            let dir = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            };
            let manifest = dir.join("manifest.json");
            if manifest.exists() {
                return Err(refuse(format!(
                    "{} is an index directory (it holds {})",
                    dir.display(),
                    manifest.display()
                )));
            }
        }
        match std::fs::metadata(&file) {
            Ok(m) if m.is_file() && m.len() > 0 => {
                return Err(refuse(format!(
                    "the file exists and holds {} bytes",
                    m.len()
                )))
            }
            // A block device holds data whatever its length reads as.
            Ok(m) if !m.is_file() && !m.is_dir() => {
                return Err(refuse("it exists and is not a regular file".into()))
            }
            _ => {}
        }
    }
    Ok(())
}

fn cmd_generate(a: GenerateArgs) -> Result<(), Failure> {
    let mut params = generate::GenParams::new(
        a.distribution.parse()?,
        a.geometry.parse()?,
        a.count,
        a.seed,
    );
    if let Some(m) = a.max_size {
        params.max_size = m;
    }
    let order: generate::InsertionOrder = a.order.parse()?;
    formats::Format::for_output(&a.out)?;
    let bar = progress_bar(a.count as u64, "generate");
    let written = if order == generate::InsertionOrder::AsGenerated {
        // Object by object: memory does not grow with the count, the disk
        // bounds it.
        formats::check_room(&a.out, a.count as u64)?;
        let objects = generate::objects(&params)?.inspect(|o| {
            if let Ok((id, _)) = o {
                if id % 65_536 == 0 {
                    bar.set_position(*id);
                }
            }
        });
        formats::write_dataset_results(&a.out, objects)?
    } else {
        // Another order needs every object first.
        let rects = generate::generate(&params)?;
        let perm = generate::order(&rects, order, a.seed)?;
        let records = perm
            .iter()
            .filter_map(|&i| rects.get(i).map(|r| (i as u64, *r)));
        formats::write_dataset(&a.out, records)?
    };
    bar.finish(written);
    let summary = serde_json::json!({
        "out": a.out.display().to_string(),
        "count": written,
        "distribution": params.distribution,
        "geometry": params.geometry,
        "order": order,
        "seed": a.seed,
    });
    if a.json {
        output::print_json(&summary)?;
    } else {
        outln!("wrote {written} objects to {}", a.out.display());
    }
    Ok(())
}

fn cmd_windows(a: WindowsArgs) -> Result<(), Failure> {
    input_file(&a.input)?;
    let records = formats::read_csv(&a.input)?;
    let rects: Vec<geoflash::geom::Rect> = records.iter().map(|(_, r)| *r).collect();
    let extent = geoflash::geom::Rect::union_all(rects.iter()).ok_or_else(|| {
        geoflash::Error::invalid(format!("{} holds no object", a.input.display()))
    })?;
    let sel = geoflash_bench::windows::parse_selectivity(&a.selectivity)?;
    let ws = geoflash_bench::windows::windows(
        extent,
        sel,
        a.aspect,
        a.count,
        a.placement.parse()?,
        &rects,
        a.seed,
    )?;
    formats::write_via_temp(&a.out, |tmp| {
        geoflash_bench::windows::write_windows(tmp, &ws)
    })?;
    outln!("wrote {} windows to {}", ws.len(), a.out.display());
    Ok(())
}
