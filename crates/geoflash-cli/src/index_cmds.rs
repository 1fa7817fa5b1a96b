//! The index commands: build, insert, delete, query, knn, inspect, verify, checkpoint, recover.
use geoflash::metrics::BatchClock;
use std::path::{Path, PathBuf};

use geoflash::engine::parse_size;
use geoflash::engine::Access;
use geoflash::engine::{BulkMethod, FortreeConfig, FortreeReport, Inspection, ReadMode};
use geoflash::engine::{Durability, RecoveryMode};
use geoflash::engine::{KeyResult, Predicate};
use geoflash::geom::{Point, Rect};
use geoflash::{BatchDurability, Error, ErrorKind, Index, IndexOptions, IndexSpec};
use geoflash_bench::formats;
use serde_json::json;

use crate::ids::{Ids, PrintedId, SortedIds};
use crate::index_flags::IndexFlags;
use crate::output::{print_json, row, Answers};
use crate::{input_file, progress_bar, Failure};

/// Options of `build`.
#[derive(clap::Args)]
pub struct BuildArgs {
    /// Dataset file, by extension: CSV `id,minx,miny,maxx,maxy` with a header (or with a `wkt`
    /// column), GeoJSON, FlatGeobuf (.fgb), GeoParquet (.parquet), Shapefile (.shp), GeoPackage
    /// (.gpkg) or OpenStreetMap PBF (.osm.pbf: building footprints). Geometries are stored in the
    /// index's object heap for `query --refine`.
    #[arg(long)]
    input: PathBuf,
    /// GeoPackage input: the layer to read (needed when the file has several).
    #[arg(long, value_name = "NAME")]
    layer: Option<String>,
    /// Index directory to create.
    #[arg(long)]
    index: PathBuf,
    /// The index's settings: a flag per setting of the library's table
    /// (`IndexSpec::SETTINGS`).
    #[command(flatten)]
    settings: IndexFlags,
    /// Print `acked K` on standard output (flushed) each time the first K
    /// operations are durable, checked every N operations and at the end
    /// (stores without a log checkpoint every N operations to get there).
    #[arg(long)]
    ack_every: Option<u64>,
    /// Bulk load instead of inserting one by one: str or hilbert.
    #[arg(long)]
    bulk: Option<String>,
    /// Fill factor of bulk-loaded nodes, in (0, 1] (with --bulk; default 1).
    #[arg(long)]
    fill: Option<f64>,
    /// With `--bulk str|hilbert` on a CSV input: load with bounded memory, about
    /// SIZE of records in memory and the rest sorted in temporary files in
    /// the build's staging directory (`.NAME.building` beside the index
    /// directory; removed with it), so the input may be larger than memory.
    /// The R-tree family and the xBR+-tree (`--kind xbr`, sorted by Z-order
    /// whatever `--bulk` says).
    #[arg(long)]
    memory: Option<String>,
    /// Record the I/O trace of the index device in this file (replay it with
    /// `devbench --trace`); the build is re-run on a scratch device to record it.
    #[arg(long)]
    record_trace: Option<PathBuf>,
    /// Print the Stats record as JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// Options of `insert` and `delete`.
#[derive(clap::Args)]
pub struct ChangeArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// Dataset file, by extension: CSV `id,minx,miny,maxx,maxy` with a header (or with a `wkt`
    /// column), GeoJSON, FlatGeobuf (.fgb), GeoParquet (.parquet), Shapefile (.shp), GeoPackage
    /// (.gpkg) or OpenStreetMap PBF (.osm.pbf: building footprints). Geometries are stored in the
    /// index's object heap for `query --refine`.
    #[arg(long)]
    input: PathBuf,
    /// GeoPackage input: the layer to read (needed when the file has several).
    #[arg(long, value_name = "NAME")]
    layer: Option<String>,
    /// Print the Stats record as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `update`.
#[derive(clap::Args)]
pub struct UpdateArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// Moves: CSV `id,minx,miny,maxx,maxy` with a header, each row the new
    /// rectangle of an object the index holds (a point for the xBR+-tree
    /// and the grid files).
    #[arg(long)]
    input: PathBuf,
    /// Print `acked K` on standard output (flushed) each time the first K
    /// updates are durable, checked every N updates and at the end (stores
    /// without a log checkpoint every N updates to get there).
    #[arg(long)]
    ack_every: Option<u64>,
    /// Print the Stats record as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `query`.
#[derive(clap::Args)]
pub struct QueryArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// One window MINX,MINY,MAXX,MAXY.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "windows")]
    window: Option<String>,
    /// CSV file of windows (`minx,miny,maxx,maxy` with a header).
    #[arg(long)]
    windows: Option<PathBuf>,
    /// intersects, contains (objects inside the window) or within (objects containing the window).
    #[arg(long, default_value = "intersects")]
    predicate: String,
    /// Refine the MBR answers on the exact geometries of the object heap
    /// (indexes built from GeoJSON).
    #[arg(long)]
    refine: bool,
    /// Print the ids found.
    #[arg(long)]
    ids: bool,
    /// How the tree's nodes are read: batched (a node's children in one
    /// device batch) or single (one page at a time, as the papers).
    #[arg(long, default_value = "batched")]
    reads: String,
    /// Print JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// Options of `knn`.
#[derive(clap::Args)]
pub struct KnnArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// Query point X,Y.
    #[arg(long, allow_hyphen_values = true, conflicts_with = "points")]
    point: Option<String>,
    /// CSV file of query points (`x,y` with a header): one kNN query each,
    /// in one process.
    #[arg(long)]
    points: Option<PathBuf>,
    /// Number of neighbours (at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    k: usize,
    /// Also return every object tied at the k-th distance.
    #[arg(long)]
    ties: bool,
    /// How the tree's nodes are read: batched (a node not in memory with
    /// the queued nodes the search will likely visit next, in one device
    /// batch) or single (one page at a time, as the papers). The answers
    /// are the same.
    #[arg(long, default_value = "batched")]
    reads: String,
    /// Print JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// Options of `recover`.
#[derive(clap::Args)]
pub struct RecoverArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// Take the first damaged log page as the end of the log instead of
    /// refusing a log damaged before its tail: the operations in it and
    /// after it are lost (the report counts the pages and records dropped).
    #[arg(long)]
    tolerate_corrupt_tail: bool,
    /// Print JSON (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// Options of `inspect`, `verify` and `checkpoint`.
#[derive(clap::Args)]
pub struct DirArgs {
    /// Index directory.
    #[arg(long)]
    index: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn numbers(text: &str, n: usize, what: &str) -> Result<Vec<f64>, Failure> {
    let v: Vec<f64> = text
        .split(',')
        .map(|t| t.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            Error::invalid(format!(
                "{what} {text:?} is not {n} comma-separated numbers"
            ))
        })?;
    if v.len() != n {
        return Err(Error::invalid(format!(
            "{what} {text:?} has {} numbers, expected {n}",
            v.len()
        ))
        .into());
    }
    Ok(v)
}

fn parse_window(text: &str) -> Result<Rect, Failure> {
    let v = numbers(text, 4, "window")?;
    Ok(Rect::new(v[0], v[1], v[2], v[3])?)
}

/// The rows of a CSV file with a header naming `columns`, each parsed by
/// `parse` (which gets the row's fields joined by commas); errors name the
/// file and the row as `what` N. A first line that is data is refused
/// ([`formats::check_csv_header`]). Ctrl-C stops the reading
/// ([`reading_stopped`]).
fn read_csv_rows<T>(
    path: &Path,
    what: &str,
    columns: &[&str],
    parse: impl Fn(&str) -> Result<T, Failure>,
) -> Result<Vec<T>, Failure> {
    let mut out = Vec::new();
    for row in csv_rows(path, what, columns, parse)? {
        if (out.len() as u64).is_multiple_of(formats::STOP_EVERY)
            && geoflash::engine::stop_requested()
        {
            return Err(reading_stopped(path));
        }
        out.push(row?);
    }
    Ok(out)
}

/// The rows of [`read_csv_rows`] as they are read, never held whole (the
/// file's header is checked before this returns); the first error ends
/// them. Nothing here asks whether Ctrl-C was pressed: the caller does.
fn csv_rows<T>(
    path: &Path,
    what: &str,
    columns: &[&str],
    parse: impl Fn(&str) -> Result<T, Failure>,
) -> Result<impl Iterator<Item = Result<T, Failure>>, Failure> {
    crate::input_file(path)?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(true)
        .from_path(path)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    let headers = rdr
        .headers()
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    formats::check_csv_header(path, headers, columns)?;
    let width = headers.len();
    let (path, what) = (path.to_path_buf(), what.to_string());
    let mut records = rdr.into_records();
    // Rows read so far (blank lines are not rows), and whether an error ended them.
    let (mut rows, mut ended) = (0usize, false);
    let mut next_row = move || -> Result<Option<T>, Failure> {
        for rec in records.by_ref() {
            let rec = rec.map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
            // Lines of blanks are skipped, as empty lines are.
            if !formats::csv_data_record(&path, rows + 1, rec.as_byte_record(), width)? {
                continue;
            }
            let line: Vec<&str> = rec.iter().collect();
            let v = parse(&line.join(",")).map_err(|f| {
                // the parse error's own text, without the "invalid input: "
                // of an Error::InvalidInput, which the new error adds again
                let msg = match f.error.downcast_ref::<Error>() {
                    Some(e) => formats::reason(e).into_owned(),
                    None => format!("{:#}", f.error),
                };
                Error::invalid(format!("{}: {what} {}: {msg}", path.display(), rows + 1))
            })?;
            rows += 1;
            return Ok(Some(v));
        }
        Ok(None)
    };
    Ok(std::iter::from_fn(move || {
        if ended {
            return None;
        }
        let row = next_row().transpose();
        ended = !matches!(row, Some(Ok(_)));
        row
    }))
}

/// The windows of a CSV file `minx,miny,maxx,maxy` with a header.
fn read_windows(path: &Path) -> Result<Vec<Rect>, Failure> {
    read_csv_rows(path, "window", &formats::WINDOW_COLUMNS, parse_window)
}

fn parse_predicate(s: &str) -> Result<Predicate, Failure> {
    match s {
        "intersects" => Ok(Predicate::Intersects),
        "contains" => Ok(Predicate::Contains),
        "within" => Ok(Predicate::Within),
        _ => Err(Error::invalid(format!(
            "unknown predicate {s:?}: use intersects, contains or within"
        ))
        .into()),
    }
}

/// The `(id, MBR)` records of a CSV input (the other formats go through
/// [`build_objects`] and [`change_objects`]). Ctrl-C stops the reading
/// ([`reading_stopped`]).
fn read_input(path: &Path) -> Result<Vec<(u64, Rect)>, Failure> {
    geoflash_bench::import::read_rects(path).map_err(|e| read_failure(path, e))
}

/// The failure of a command whose reading of its input `path` Ctrl-C
/// stopped, before it changed anything: exit code 130.
fn reading_stopped(path: &Path) -> Failure {
    Failure {
        code: crate::exit_code(ErrorKind::Interrupted),
        error: anyhow::anyhow!(
            "interrupted while reading {}: nothing was changed",
            path.display()
        ),
    }
}

/// The failure of reading the input `path`: [`reading_stopped`] when
/// Ctrl-C stopped the reader (which asks every
/// [`geoflash_bench::formats::STOP_EVERY`] records), else the reader's
/// error.
fn read_failure(path: &Path, e: Error) -> Failure {
    match e {
        Error::Interrupted(_) => reading_stopped(path),
        e => e.into(),
    }
}

/// The `(id, MBR)` records of a CSV input that builds or changes an index
/// by insertion. A CSV file of boxes is streamed, never held whole (issue
/// 47, item 5: the input is not part of the memory budget; 4,000,000
/// records took 160 MB): a first pass checks every record, counts them and
/// takes their extent, so that a bad record still changes nothing, and the
/// operations read the file a second time. A build that publishes nothing
/// when it fails and needs no extent reads it once
/// ([`RectInput::open_unchecked`]). A CSV with a WKT column is read whole
/// ([`read_input`]).
enum RectInput {
    /// A CSV file of boxes, checked by a first pass.
    Streamed {
        /// The file.
        path: PathBuf,
        /// Its records.
        count: u64,
        /// The union of their rectangles.
        extent: Option<Rect>,
    },
    /// Records read whole.
    Read(Vec<(u64, Rect)>),
}

/// The records of a [`RectInput`], each a record or the error of its line.
type Records<'a> = Box<dyn Iterator<Item = geoflash::Result<(u64, Rect)>> + 'a>;

impl RectInput {
    /// The input `path`: streamed when it is a CSV file of boxes, else read whole.
    fn open(path: &Path) -> Result<RectInput, Failure> {
        if !geoflash_bench::import::is_box_csv(path)? {
            return Ok(RectInput::Read(read_input(path)?));
        }
        let (mut count, mut extent) = (0u64, None::<Rect>);
        for rec in formats::csv_records(path)? {
            if count.is_multiple_of(formats::STOP_EVERY) && geoflash::engine::stop_requested() {
                return Err(reading_stopped(path));
            }
            let (_, r) = rec?;
            count += 1;
            extent = Some(extent.map_or(r, |e| e.union(&r)));
        }
        Ok(RectInput::Streamed {
            path: path.to_path_buf(),
            count,
            extent,
        })
    }

    /// The input `path` like [`open`](Self::open), but a CSV file of boxes
    /// is not checked first: its records are counted by its lines (for the
    /// progress bar; blank lines count too) and a bad record is found as
    /// the operations reach it. For a build that leaves nothing when it
    /// fails (a staged batch without acknowledgements) and needs no extent:
    /// parsing the file twice took 8 % of a build of 1,000,000 boxes.
    fn open_unchecked(path: &Path) -> Result<RectInput, Failure> {
        if !geoflash_bench::import::is_box_csv(path)? {
            return Ok(RectInput::Read(read_input(path)?));
        }
        Ok(RectInput::Streamed {
            path: path.to_path_buf(),
            count: count_lines(path)?.saturating_sub(1),
            extent: None,
        })
    }

    /// Number of records.
    fn len(&self) -> u64 {
        match self {
            RectInput::Streamed { count, .. } => *count,
            RectInput::Read(v) => v.len() as u64,
        }
    }

    /// `opts` with the records' extent as its domain where it needs one
    /// ([`IndexOptions::with_domain_of`]).
    fn domain_of(&self, opts: &IndexOptions) -> IndexOptions {
        match self {
            RectInput::Streamed { extent, .. } => opts.with_domain_of(extent),
            RectInput::Read(v) => opts.with_domain_of(v.iter().map(|(_, r)| r)),
        }
    }

    /// Every record, read whole.
    fn into_records(self) -> Result<Vec<(u64, Rect)>, Failure> {
        match self {
            RectInput::Streamed { path, .. } => read_input(&path),
            RectInput::Read(v) => Ok(v),
        }
    }

    /// The records, in the file's order (a CSV file's parsed ahead of
    /// their use on a thread of its own: [`geoflash_bench::read_ahead`]).
    fn records(&self) -> Result<Records<'_>, Failure> {
        Ok(match self {
            // Parsed on a thread of its own while the caller applies them.
            RectInput::Streamed { path, .. } => {
                geoflash_bench::read_ahead::read_ahead(formats::csv_records(path)?)
            }
            RectInput::Read(v) => Box::new(v.iter().map(|&rec| Ok(rec))),
        })
    }
}

/// The lines of the file at `path` (a last line without its newline
/// counts).
fn count_lines(path: &Path) -> Result<u64, Failure> {
    use std::io::Read;
    let io = |e: std::io::Error| Error::Io {
        path: path.to_path_buf(),
        page: None,
        source: e,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = file.read(&mut buf).map_err(io)?;
        let Some(read) = buf.get(..n).filter(|r| !r.is_empty()) else {
            break;
        };
        lines += memchr::memchr_iter(b'\n', read).count() as u64;
        last = read.last().copied().unwrap_or(last);
    }
    Ok(lines + u64::from(last != b'\n'))
}

/// The objects of a dataset file of geometries, from its `layer` when it
/// is a GeoPackage. Ctrl-C stops the reading ([`reading_stopped`]).
fn read_objects(
    path: &Path,
    layer: &Option<String>,
) -> Result<Vec<(u64, geoflash::engine::Geometry)>, Failure> {
    let opts = geoflash_bench::import::ReadOptions {
        layer: layer.clone(),
        ..Default::default()
    };
    geoflash_bench::import::read_dataset(path, &opts)
        .map(|d| d.objects)
        .map_err(|e| read_failure(path, e))
}

/// `geoflash build` from a file of geometries (every input format but a
/// CSV of boxes): geometries in the object heap, MBRs in the tree.
fn build_objects(a: &BuildArgs, opts: &IndexOptions) -> Result<(), Failure> {
    let objects = read_objects(&a.input, &a.layer)?;
    let bounds: Vec<Rect> = objects
        .iter()
        .filter_map(|(_, g)| geoflash::engine::bounding_rect(g).ok())
        .collect();
    let opts = &opts.with_domain_of(&bounds);
    opts.resolve()?;
    let start = BatchClock::start();
    let (index, ops) = match &a.bulk {
        Some(method) => {
            let method: BulkMethod = method.parse()?;
            crate::status_line(format_args!(
                "build: bulk loading {} objects (--bulk {})",
                geoflash_bench::progress::count(objects.len() as u64),
                a.bulk.as_deref().unwrap_or_default()
            ));
            // `nodes written` lines and Ctrl-C as for a CSV input (see `build`).
            let written = NodesWritten::default();
            let progress = |done, total| written.update(done, total);
            let index = Index::bulk_load_objects_with_progress(
                &a.index,
                opts,
                &objects,
                method,
                a.fill(),
                &progress,
            )?;
            (index, objects.len() as u64)
        }
        None => build_by_insertion(
            a,
            opts,
            || Ok(objects.iter().map(|(id, g)| Ok((*id, g)))),
            objects.len() as u64,
            |ix, id, g| ix.insert_object(id, g),
        )?,
    };
    print_stats(&index, "build", ops, start, a.json)?;
    index.close()?;
    Ok(())
}

/// `geoflash insert` and `geoflash delete` from a file of geometries (the object heap and the tree).
fn change_objects(a: &ChangeArgs, delete: bool) -> Result<(), Failure> {
    let objects = read_objects(&a.input, &a.layer)?;
    let index = Index::open(&a.index, Access::Write)?;
    apply_objects(index, a, delete, &objects)
}

/// [`change_objects`] of `objects`, read from `a.input`, on the opened `index`.
fn apply_objects(
    mut index: Index,
    a: &ChangeArgs,
    delete: bool,
    objects: &[(u64, geoflash::engine::Geometry)],
) -> Result<(), Failure> {
    index.device().reset_stats();
    let start = BatchClock::start();
    let durability = batch_durability(index.structure().durability());
    let (label, applied) = if delete {
        let applied = apply_all(
            &mut index,
            objects,
            "delete",
            &a.input,
            durability,
            |ix, id, _| ix.delete_object(id),
        );
        ("delete", applied)
    } else {
        let applied = apply_all(
            &mut index,
            objects,
            "insert",
            &a.input,
            durability,
            |ix, id, g| ix.insert_object(id, g),
        );
        ("insert", applied)
    };
    let done = change_applied(&mut index, applied, label, &a.input)?;
    index.checkpoint()?;
    print_stats(&index, label, done, start, a.json)?;
    index.close()?;
    Ok(())
}

/// Installs the Ctrl-C handler of the commands that change an index
/// (once): the first Ctrl-C asks the command to stop
/// ([`geoflash::engine::request_stop`]): a loop over the input stops at the
/// next operation boundary, a build publishes nothing, and the command
/// exits 130 saying what it left. A second Ctrl-C exits at once.
fn catch_interrupts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let handler = || {
            if geoflash::engine::stop_requested() {
                eprintln!(
                    "geoflash: interrupted again: exiting at once (a build leaves its staging directory, \
                     which the next build of the same index removes; `geoflash recover` finishes an index)"
                );
                std::process::exit(crate::exit_code(ErrorKind::Interrupted).into());
            }
            geoflash::engine::request_stop();
        };
        if let Err(e) = ctrlc::set_handler(handler) {
            eprintln!("geoflash: warning: cannot catch Ctrl-C ({e}): an interrupt will kill the command");
        }
    });
}

/// Ctrl-C stopped [`apply_all`] after `done` of `total` operations (the
/// error of its [`Failure`], exit code 130).
#[derive(Debug)]
struct Stopped {
    done: u64,
    total: u64,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted after {} of {} operations",
            self.done, self.total
        )
    }
}

impl std::error::Error for Stopped {}

/// Where Ctrl-C stopped the loop that failed with `f`, if it did.
fn stopped(f: &Failure) -> Option<(u64, u64)> {
    f.error.downcast_ref::<Stopped>().map(|s| (s.done, s.total))
}

/// An operation of [`apply_all`] failed after `done` of `total` operations
/// had been applied (the error of its [`Failure`], with the failing
/// operation's exit code).
#[derive(Debug)]
struct FailedAt {
    done: u64,
    /// Of the `done`, those known durable when it failed (a durable
    /// commit, or a checkpoint): what survives if no checkpoint follows.
    durable: u64,
    total: u64,
    message: String,
}

impl std::fmt::Display for FailedAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FailedAt {}

/// The failure of a build of `dir` that failed with `f`: when Ctrl-C
/// stopped it, exit code 130 and what it left (nothing: the staging
/// directory is removed, no index is published).
fn build_failure(dir: &Path, f: Failure) -> Failure {
    match stopped(&f) {
        Some((done, total)) => Failure {
            code: crate::exit_code(ErrorKind::Interrupted),
            error: anyhow::anyhow!(
                "interrupted: the build of {} stopped after {done} of {total} operations; no index published at {} \
                 (its staging directory was removed); {} is as it was",
                dir.display(),
                dir.display(),
                dir.display()
            ),
        },
        None => f,
    }
}

/// The operations applied before a build with `--ack-every` stopped at a
/// bad record or on Ctrl-C (`None` for other failures): what it publishes,
/// since every `acked K` it printed promised K of them durable.
fn applied_before(f: &Failure) -> Option<u64> {
    match (stopped(f), f.error.downcast_ref::<FailedAt>()) {
        (Some((done, _)), _) => Some(done),
        (None, Some(fa)) if f.code == crate::exit_code(ErrorKind::InvalidInput) => Some(fa.done),
        _ => None,
    }
}

/// The failure of a build with `--ack-every` that published the `done`
/// operations it applied before `f` (see [`applied_before`]).
fn published_in_part(dir: &Path, f: Failure, done: u64) -> Failure {
    let dir = dir.display();
    let error = match (stopped(&f), f.error.downcast_ref::<FailedAt>()) {
        (Some((_, total)), _) => anyhow::anyhow!(
            "interrupted: the build of {dir} stopped after {done} of {total} operations; with --ack-every those {done} \
             were published at {dir} and are durable (checkpointed); add the rest with `geoflash insert --index {dir}`"
        ),
        (None, Some(fa)) => anyhow::anyhow!(
            "{fa}; with --ack-every the {done} records before it were built into {dir} and are durable \
             (checkpointed); the other {} were not applied",
            fa.total - done
        ),
        _ => return f,
    };
    Failure {
        code: f.code,
        error,
    }
}

/// The end of `insert` or `delete` (`label`) of the records of `input`:
/// `applied` is what [`apply_all`] returned. When Ctrl-C stopped it, the
/// operations done are checkpointed (durable) and the command fails with
/// exit code 130 saying how many were applied.
fn change_applied(
    index: &mut Index,
    applied: Result<u64, Failure>,
    label: &str,
    input: &Path,
) -> Result<u64, Failure> {
    let f = match applied {
        Ok(done) => return Ok(done),
        Err(f) => f,
    };
    let (verb, dir) = match label {
        "delete" => ("deleted from", index.dir()),
        "update" => ("updated in", index.dir()),
        _ => ("inserted into", index.dir()),
    };
    let dir = dir.map_or_else(String::new, |d| d.display().to_string());
    if let Some(fa) = f.error.downcast_ref::<FailedAt>() {
        // Issue 44, item 8: what was applied before the failure is made
        // durable, so readers need no writer's recovery, and said exactly.
        let (done, total) = (fa.done, fa.total);
        let error = match index.checkpoint() {
            Ok(()) => anyhow::anyhow!(
                "{fa}; the {done} records before it were {verb} {dir} and are durable (checkpointed); \
                 the other {} were not applied",
                total - done
            ),
            Err(e) => {
                // Issue 44, item 3: say what survives, not only what was done.
                let durable = fa.durable;
                let more = if durable == done {
                    String::new()
                } else {
                    format!(
                        " and those of the other {} whose operations reached its log (it says how many)",
                        done - durable
                    )
                };
                return Err(Failure {
                    code: crate::FAILURE,
                    error: anyhow::anyhow!(
                        "{fa}; checkpointing the {done} records {verb} {dir} before it failed too ({e}): \
                         {durable} of them are durable; `geoflash recover --index {dir}` keeps them{more}"
                    ),
                })
            }
        };
        return Err(Failure {
            code: f.code,
            error,
        });
    }
    let Some((done, total)) = stopped(&f) else {
        return Err(f);
    };
    index.checkpoint()?;
    Err(Failure {
        code: crate::exit_code(ErrorKind::Interrupted),
        error: anyhow::anyhow!(
            "interrupted: {done} of the {total} records of {} were {verb} {dir} and are durable (checkpointed); \
             the other {} were not applied",
            input.display(),
            total - done
        ),
    })
}

/// `--ack-every`: which operations are durable, printed as `acked K`.
struct Acker {
    every: u64,
    /// (operation id, operations done when it committed), oldest first.
    pending: std::collections::VecDeque<(geoflash::engine::OpId, u64)>,
    acked: u64,
}

impl Acker {
    fn new(every: Option<u64>) -> Result<Option<Acker>, Failure> {
        match every {
            None => Ok(None),
            Some(0) => Err(Error::invalid("--ack-every needs at least 1 operation").into()),
            Some(every) => Ok(Some(Acker {
                every,
                pending: std::collections::VecDeque::new(),
                acked: 0,
            })),
        }
    }

    /// After operation number `done`.
    fn after_op(&mut self, index: &mut Index, done: u64) -> geoflash::Result<()> {
        if let Some(op) = index.last_committed_op() {
            self.pending.push_back((op, done));
        }
        if done.is_multiple_of(self.every) {
            self.check(index, done)?;
        }
        Ok(())
    }

    /// Prints `acked K` if more operations are durable than last printed.
    fn check(&mut self, index: &mut Index, done: u64) -> geoflash::Result<()> {
        let k = match index.durable_op() {
            Some(d) => {
                let mut k = self.acked;
                while let Some(&(op, n)) = self.pending.front() {
                    if op > d {
                        break;
                    }
                    k = n;
                    self.pending.pop_front();
                }
                k
            }
            None if index.last_committed_op().is_none() || index.saved_at_checkpoints() => {
                // A store without a log, or a device saved whole at
                // checkpoints: durable after a checkpoint.
                index.checkpoint()?;
                done
            }
            None => self.acked,
        };
        if k > self.acked {
            self.acked = k;
            outln!("acked {k}");
        }
        Ok(())
    }

    /// After the final checkpoint: everything done is durable.
    fn finish(&mut self, done: u64) {
        self.pending.clear();
        if done > self.acked {
            self.acked = done;
            outln!("acked {done}");
        }
    }
}

/// Applies `op` to each `(id, item)` with a progress bar, as one batch of
/// the index ([`Index::batch`]); returns the count done. Ctrl-C stops it at
/// an operation boundary with a [`Stopped`] failure (exit code 130; the
/// batch ends without its checkpoint): see [`build_failure`] and
/// [`change_applied`].
fn apply_all<T>(
    index: &mut Index,
    items: &[(u64, T)],
    what: &str,
    input: &Path,
    durability: BatchDurability,
    op: impl Fn(&mut Index, u64, &T) -> geoflash::Result<()>,
) -> Result<u64, Failure> {
    apply_all_acked(index, items, what, input, durability, op, None)
}

/// How a command applies an input file to an index whose store has the
/// durability `configured`: with the default group commit the whole input
/// is one batch, durable when the command returns (as one SQL
/// transaction); a mode chosen explicitly (`sync`, `group:N,T`) is kept
/// operation by operation.
fn batch_durability(configured: Option<Durability>) -> BatchDurability {
    match configured {
        Some(d) if d != Durability::default() => BatchDurability::AsConfigured,
        _ => BatchDurability::AtEnd,
    }
}

/// [`apply_all`] printing `acked K` lines when `acker` is given. An error
/// names the object, its record in `input` and keeps its exit code (2 for
/// bad input such as a duplicate id, 1 for a failure of the index).
fn apply_all_acked<T>(
    index: &mut Index,
    items: &[(u64, T)],
    what: &str,
    input: &Path,
    durability: BatchDurability,
    op: impl Fn(&mut Index, u64, &T) -> geoflash::Result<()>,
    acker: Option<&mut Acker>,
) -> Result<u64, Failure> {
    let items = items.iter().map(|(id, item)| Ok((*id, item)));
    let op = |ix: &mut Index, id: u64, item: &&T| op(ix, id, item);
    let total = items.len() as u64;
    apply_stream(index, items, total, what, input, durability, op, acker)
}

/// [`apply_all_acked`] over `total` items read as they are applied (an
/// item that cannot be read stops the batch as a failed operation does;
/// its error, which names the file and the record, is the message's
/// reason).
#[allow(clippy::too_many_arguments)]
fn apply_stream<T>(
    index: &mut Index,
    items: impl Iterator<Item = geoflash::Result<(u64, T)>>,
    total: u64,
    what: &str,
    input: &Path,
    durability: BatchDurability,
    op: impl Fn(&mut Index, u64, &T) -> geoflash::Result<()>,
    mut acker: Option<&mut Acker>,
) -> Result<u64, Failure> {
    catch_interrupts();
    let bar = progress_bar(total, what);
    // A failure inside the batch is kept here; the batch then ends without
    // its checkpoint.
    let mut failure = None;
    let run = |index: &mut Index| -> Result<u64, Failure> {
        let mut done = 0u64;
        // Operations of this run known durable (see FailedAt::durable).
        let mut durable = 0u64;
        for item in items {
            let (id, item) = item.map_err(|e| Failure {
                code: crate::exit_code(e.kind()),
                error: anyhow::Error::new(FailedAt {
                    done,
                    durable,
                    total,
                    // The reader's error names the file and the record.
                    message: format!("{what} stopped after {done} operations: {e}"),
                }),
            })?;
            let item = &item;
            if geoflash::engine::stop_requested() {
                // The batch ends without its checkpoint; the caller says
                // what is left (a build publishes nothing).
                bar.abandon_with_message(format!("{what}: interrupted after {done} operations"));
                return Err(Failure {
                    code: crate::exit_code(ErrorKind::Interrupted),
                    error: anyhow::Error::new(Stopped { done, total }),
                });
            }
            let committed_before = index.last_committed_op();
            op(index, id, item).map_err(|e| {
                let e = index.locate(e);
                // Issue 44, item 3: an operation whose COMMIT is durable
                // and that failed after it (a flush of its pages, which
                // hit ENOSPC) is applied: recovery keeps it.
                let committed = index.last_committed_op();
                let in_log = committed != committed_before && committed.is_some();
                let kept = in_log && index.durable_op() >= committed;
                let (applied, how) = if kept {
                    (done + 1, "was applied (its commit is durable), then failed")
                } else if in_log {
                    (done + 1, "was committed to the log, then failed")
                } else {
                    (done, "failed")
                };
                let durable = if kept { applied } else { durable };
                Failure {
                    code: crate::exit_code(e.kind()),
                    error: anyhow::Error::new(FailedAt {
                        done: applied,
                        durable,
                        total,
                        message: format!(
                            "{what} of object {id} (record {} of {}) {how} after {applied} operations: {e}",
                            done + 1,
                            input.display()
                        ),
                    }),
                }
            })?;
            done += 1;
            let committed = index.last_committed_op();
            if committed.is_some() && index.durable_op() >= committed {
                durable = done;
            }
            if let Some(a) = acker.as_deref_mut() {
                a.after_op(index, done)?;
                durable = durable.max(a.acked);
            }
            if done.is_multiple_of(1024) {
                bar.set_position(done);
            }
        }
        Ok(done)
    };
    let done = index.batch(durability, |index| {
        run(index).map_err(|f| {
            failure = Some(f);
            geoflash::Error::invalid("the batch stopped")
        })
    });
    if let Some(f) = failure {
        return Err(f);
    }
    let done = done?;
    bar.finish(done);
    Ok(done)
}

/// The process's peak resident set so far (`VmHWM` of `/proc/self/status`),
/// where the system tells it: what the memory budget promises to bound
/// (`docs/architecture.md`, "Memory budget"), printed by the commands that
/// change an index, `query` and `knn --points` (`peak_rss_bytes` with
/// `--json`).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// The JSON record of `s`, with the process's `peak_rss_bytes` when known.
fn stats_record(
    s: &geoflash::metrics::Stats,
    peak_rss: Option<u64>,
) -> anyhow::Result<serde_json::Value> {
    let mut record = serde_json::to_value(s)?;
    if let (Some(fields), Some(rss)) = (record.as_object_mut(), peak_rss) {
        fields.insert("peak_rss_bytes".into(), rss.into());
    }
    Ok(record)
}

fn print_stats(
    index: &Index,
    label: &str,
    ops: u64,
    start: BatchClock,
    json: bool,
) -> Result<(), Failure> {
    let mut s = index.stats(label);
    s.operations = ops;
    start.finish(&mut s);
    // The pages of the structure, from its store's allocator (a check of
    // the whole structure read every node into the buffer after each
    // build: 38 s and most of the store's budget at 100 M objects).
    let nodes = index.structure().pages_in_use();
    s.set_index_bytes(nodes * index.manifest().page_size as u64);
    let peak_rss = peak_rss_bytes();
    if json {
        print_json(&stats_record(&s, peak_rss)?)?;
    } else {
        row("operations", ops);
        if label == "update" {
            row("updates in place", s.updates_in_place);
        }
        row("records", index.len());
        row("height", index.structure().height());
        row(
            "wall time (ms)",
            format!("{:.1}", s.wall_time_ns as f64 / 1e6),
        );
        row(
            "pages read / written",
            format!("{} / {}", s.io.pages_read, s.io.pages_written),
        );
        row(
            "buffer hits / misses",
            format!("{} / {}", s.buffer_hits, s.buffer_misses),
        );
        row(
            "build rewrite factor",
            format!("{:.3}", s.build_rewrite_factor),
        );
        if let Some(rss) = peak_rss {
            row("peak RSS (MB)", format!("{:.1}", rss as f64 / 1e6));
        }
        if s.device_simulated {
            row(
                "simulated time (ms)",
                format!("{:.1}", s.sim.sim_time_ns as f64 / 1e6),
            );
            row(
                "NAND reads / programs / erases",
                format!(
                    "{} / {} / {}",
                    s.sim.nand_reads, s.sim.nand_programs, s.sim.nand_erases
                ),
            );
            row(
                "device write amplification",
                format!("{:.3}", s.sim.device_write_amplification),
            );
        }
    }
    Ok(())
}

impl BuildArgs {
    /// The fill factor of a bulk load (checked by [`BuildArgs::check_flags`]).
    fn fill(&self) -> f64 {
        self.fill.unwrap_or(1.0)
    }

    /// Refuses build flags that do not apply to the build asked for, before
    /// anything is read or created (the index's own settings are checked by
    /// [`IndexSpec::options`]).
    fn check_flags(&self) -> Result<(), Failure> {
        match (&self.bulk, self.fill, self.ack_every) {
            (None, Some(_), _) => Err(Error::invalid("--fill applies to bulk loads: give --bulk str|hilbert").into()),
            (Some(_), Some(f), _) if !(f > 0.0 && f <= 1.0) => {
                Err(Error::invalid(format!("--fill {f} must be in (0, 1]")).into())
            }
            (Some(_), _, Some(_)) => Err(Error::invalid(
                "--ack-every applies to builds by insertion, not to --bulk (a bulk load is durable when it ends)",
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The index's settings as the flags give them, through the library's
    /// one front door ([`IndexSpec`], which checks every combination and
    /// names the flags at fault).
    fn spec(&self) -> Result<IndexSpec, Failure> {
        Ok(self.settings.spec().map_err(Error::from)?)
    }
}

/// `geoflash build`.
pub fn build(a: BuildArgs) -> Result<(), Failure> {
    // Ctrl-C from here on stops the build and publishes nothing.
    catch_interrupts();
    a.check_flags()?;
    input_file(&a.input)?;
    if let Some(trace) = &a.record_trace {
        trace_file_can_be_written(trace)?;
    }
    let opts = a.spec()?.options().map_err(Error::from)?;
    if opts.store.in_place() && a.ack_every.is_some() {
        return Err(Error::invalid(
            "--ack-every with --journal off: the papers' in-place mode is not crash-safe, so it acknowledges nothing; \
             drop --journal off (the rollback journal makes checkpoints durable) or --ack-every",
        )
        .into());
    }
    // Refused before the input is read: an existing index is left as it is.
    Index::check_new_dir(&a.index)?;
    if !Index::device_outlives_process(&opts.device) {
        return Err(Error::invalid(format!(
            "--device {}: an index on this device lives only in its process, so {} would hold an index \
             no later command can open; build on file (the default) or flashsim:…, which keep their \
             state in the index directory (or measure in-process builds with `geoflash bench`)",
            opts.device,
            a.index.display()
        ))
        .into());
    }
    if let Some((budget, label)) = bounded_memory(&a, &opts)? {
        return build_external(&a, &opts, budget, &label);
    }
    // Geometries (every format but a CSV of boxes, a CSV's `wkt` column
    // included) go to the object heap as well as the tree.
    if !geoflash_bench::import::is_box_csv(&a.input)? {
        if a.record_trace.is_some() {
            return Err(Error::invalid(
                "--record-trace needs a CSV input of boxes (id,minx,miny,maxx,maxy) in this version",
            )
            .into());
        }
        return build_objects(&a, &opts);
    }
    // A bulk load and a recorded trace take the records whole; a build by
    // insertion streams a CSV of boxes (see `RectInput`).
    // A build by insertion as one batch publishes nothing when a record is
    // bad (its staging directory is removed), so it needs no first pass
    // unless its structure needs the records' extent.
    let input = match (a.bulk.is_some() || a.record_trace.is_some(), a.ack_every) {
        (true, _) => RectInput::Read(read_input(&a.input)?),
        (false, None) if !opts.needs_domain() => RectInput::open_unchecked(&a.input)?,
        (false, _) => RectInput::open(&a.input)?,
    };
    let opts = input.domain_of(&opts);
    opts.resolve()?;
    let trace_input = match (&a.record_trace, &input) {
        (Some(_), RectInput::Read(records)) => Some(records.clone()),
        _ => None,
    };
    let start = BatchClock::start();
    let (index, ops) = match (&a.bulk, input) {
        (Some(method), input) => {
            let method: BulkMethod = method.parse()?;
            let records = input.into_records()?;
            let n = records.len() as u64;
            crate::status_line(format_args!(
                "build: bulk loading {} records (--bulk {})",
                geoflash_bench::progress::count(n),
                a.bulk.as_deref().unwrap_or_default()
            ));
            // Ctrl-C stops the load at its next node, or before or after
            // its next sort (nothing is published).
            let written = NodesWritten::default();
            let progress = |done, total| written.update(done, total);
            (
                Index::bulk_load_with_progress(
                    Some(&a.index),
                    &opts,
                    records,
                    method,
                    a.fill(),
                    &progress,
                )?,
                n,
            )
        }
        (None, input) => build_by_insertion(
            &a,
            &opts,
            || input.records(),
            input.len(),
            |ix, id, r| ix.insert(id, *r),
        )?,
    };
    if let (Some(path), Some(mut input)) = (&a.record_trace, trace_input) {
        input.truncate(ops as usize);
        let bulk = match &a.bulk {
            Some(m) => Some((m.parse::<BulkMethod>()?, a.fill())),
            None => None,
        };
        let stats = index.device().stats();
        crate::trace_cmd::record_build(path, &a.index, &opts, input, bulk, &stats)?;
    }
    print_stats(&index, "build", ops, start, a.json)?;
    index.close()?;
    Ok(())
}

/// `geoflash build` by insertion of `total` items (`items` read as they
/// are applied, `op` inserting one), in a staging directory renamed onto
/// `--index` when done (checkpointed): a failure leaves no directory.
/// Without `--ack-every` the input is one batch; with it, operations are
/// acknowledged as the store's durability mode makes them durable, and a
/// build that stops at a bad record or on Ctrl-C publishes what it
/// applied, the operations it acknowledged among them, as `insert` does.
fn build_by_insertion<T, I>(
    a: &BuildArgs,
    opts: &IndexOptions,
    items: impl FnOnce() -> Result<I, Failure>,
    total: u64,
    op: impl Fn(&mut Index, u64, &T) -> geoflash::Result<()>,
) -> Result<(Index, u64), Failure>
where
    I: Iterator<Item = geoflash::Result<(u64, T)>>,
{
    let mut acker = Acker::new(a.ack_every)?;
    let (index, (done, failed)) = Index::build_acknowledging(&a.index, opts, |index| {
        let durability = match a.ack_every {
            Some(_) => BatchDurability::AsConfigured,
            None => batch_durability(index.structure().durability()),
        };
        let applied = apply_stream(
            index,
            items()?,
            total,
            "build",
            &a.input,
            durability,
            op,
            acker.as_mut(),
        );
        match applied {
            Ok(done) => Ok((done, None)),
            Err(f) => match (a.ack_every, applied_before(&f)) {
                (Some(_), Some(done)) if done > 0 => Ok((done, Some(f))),
                _ => Err(f),
            },
        }
    })
    .map_err(|f| build_failure(&a.index, f))?;
    if let Some(f) = failed {
        index.close()?;
        return Err(published_in_part(&a.index, f, done));
    }
    if let Some(a) = acker.as_mut() {
        a.finish(done);
    }
    Ok((index, done))
}

/// Refuses a `--record-trace` file that cannot be written (its directory
/// missing, or it is a directory) before the build, which would otherwise
/// publish its index and fail afterwards.
fn trace_file_can_be_written(path: &Path) -> Result<(), Failure> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(Error::invalid(format!(
            "--record-trace {}: no directory {}",
            path.display(),
            parent.display()
        ))
        .into());
    }
    if path.is_dir() {
        return Err(Error::invalid(format!(
            "--record-trace {}: is a directory, not a file",
            path.display()
        ))
        .into());
    }
    Ok(())
}

/// The memory budget of a bounded-memory bulk load and how to name it:
/// `--memory`, or the store's budget for `build --bulk str` on a CSV of
/// boxes and the xBR+-tree's bulk load of a CSV (see
/// [`within_store_budget`]); `None` for the other builds.
fn bounded_memory(a: &BuildArgs, opts: &IndexOptions) -> Result<Option<(usize, String)>, Failure> {
    if let Some(memory) = &a.memory {
        let budget = usize::try_from(parse_size(memory)?)
            .map_err(|_| Error::invalid("--memory too large"))?;
        let method = a.bulk.as_deref().unwrap_or_default();
        return Ok(Some((budget, format!("--bulk {method} --memory {memory}"))));
    }
    if !within_store_budget(a, opts)? {
        return Ok(None);
    }
    // The same tree as the in-memory load, node for node, within the
    // store's memory budget (issue 47, item 5: the in-memory STR load held
    // every record, 1.4 GB for 16 M boxes, the xBR+-tree's 72 bytes a
    // point; these are faster).
    let budget = opts
        .store
        .buffer_bytes()
        .max(geoflash::engine::MIN_MEMORY_BUDGET);
    let method = a.bulk.as_deref().unwrap_or_default();
    Ok(Some((
        budget,
        format!("--bulk {method}, within the store's memory budget (--buffer)"),
    )))
}

/// Whether `build --bulk` (no `--memory`) loads through a bounded-memory
/// load with the store's budget, without `--record-trace`, on a CSV of
/// boxes: STR for the R-tree family but the Hilbert R-tree (always packed
/// in Hilbert order), which packs the same tree as the in-memory load, node
/// for node (`index::external_str`), and any `--bulk` of the xBR+-tree,
/// whose Z-ordered load builds the same tree as in memory, node for node,
/// writing it once through the store's bulk load (`index::xbr::external`);
/// both in less time and within the budget (`docs/benchmarks.md`, "STR
/// with bounded memory", "The xBR+-tree's bulk load with bounded memory").
fn within_store_budget(a: &BuildArgs, opts: &IndexOptions) -> Result<bool, Failure> {
    use geoflash::engine::{IndexKind, StructureSpec};
    let bulk = a
        .bulk
        .as_deref()
        .map(str::parse::<BulkMethod>)
        .transpose()?;
    let tree = matches!(&opts.structure, StructureSpec::Tree(t) if t.kind != IndexKind::Hilbert);
    let xbr = matches!(&opts.structure, StructureSpec::Xbr(_));
    let bounded = (bulk == Some(BulkMethod::Str) && tree) || (bulk.is_some() && xbr);
    if !(bounded && a.memory.is_none() && a.record_trace.is_none()) {
        return Ok(false);
    }
    Ok(
        formats::Format::from_path(&a.input)? == formats::Format::Csv
            && geoflash_bench::import::is_box_csv(&a.input)?,
    )
}

/// `geoflash build --bulk str|hilbert --memory SIZE`: the bounded-memory bulk
/// load, streaming the CSV input (read twice for a Hilbert R-tree without a
/// `--hilbert-domain`: once for its extent).
fn build_external(
    a: &BuildArgs,
    opts: &IndexOptions,
    memory_budget: usize,
    memory: &str,
) -> Result<(), Failure> {
    let Some(method) = a
        .bulk
        .as_deref()
        .map(str::parse::<BulkMethod>)
        .transpose()?
    else {
        return Err(Error::invalid(
            "--memory applies to bulk loads (--bulk str|hilbert): a build by insertion is bounded by --buffer",
        )
        .into());
    };
    if formats::Format::from_path(&a.input)? != formats::Format::Csv {
        return Err(Error::invalid(
            "--memory needs a CSV input (id,minx,miny,maxx,maxy) in this version",
        )
        .into());
    }
    if a.record_trace.is_some() {
        return Err(Error::invalid("--record-trace does not combine with --memory").into());
    }
    // Ctrl-C stops the load at the next record read, and once the input is
    // read at its next sort run, merge or node (the staging directory and
    // its temporary files are removed, nothing is published).
    let stream = || {
        geoflash_bench::formats::csv_records(&a.input).map(|records| {
            records.map(|r| match geoflash::engine::stop_requested() {
                true => Err(bulk_load_stopped(&a.index)),
                false => r,
            })
        })
    };
    let opts = if opts.needs_domain() && opts.hilbert_domain.is_none() {
        let mut extent: Option<Rect> = None;
        for rec in stream()? {
            let (_, r) = rec?;
            extent = Some(extent.map_or(r, |e| e.union(&r)));
        }
        opts.with_domain_of(extent.as_ref())
    } else {
        opts.clone()
    };
    opts.resolve()?;
    // The temporary files go in the build's staging directory (see
    // `Index::bulk_load_external`), whatever `temp_dir` says.
    let config = geoflash::engine::ExternalBulkConfig {
        memory_budget,
        temp_dir: PathBuf::from("."),
    };
    config.check(a.fill.unwrap_or(1.0))?;
    // The xBR+-tree's load refuses records (a box, a repeated id or point,
    // a point outside the domain) by the object's id and point.
    let xbr = matches!(opts.structure, geoflash::engine::StructureSpec::Xbr(_));
    crate::status_line(format_args!(
        "build: bounded-memory bulk load of {} ({memory})",
        a.input.display()
    ));
    let start = BatchClock::start();
    let written = NodesWritten::default();
    let progress = |done, total| written.update(done, total);
    let (index, report) = Index::bulk_load_external_with_progress(
        Some(&a.index),
        &opts,
        stream()?,
        method,
        a.fill.unwrap_or(1.0),
        &config,
        &progress,
    )
    .map_err(|e| match e {
        // Stopped while reading or after: one message.
        Error::Interrupted(_) => bulk_load_stopped(&a.index),
        // The load's errors about records ("record N: ...", a duplicate id;
        // every bad-input error of the xBR+-tree's load once the budget and
        // fill are checked) name the record but not the file: put it in
        // front, as the CSV reader's own errors have it.
        Error::InvalidInput(m) if m.starts_with("record ") || xbr => {
            Error::invalid(format!("{}: {m}", a.input.display()))
        }
        e => e,
    })?;
    eprintln!(
        "bounded-memory bulk load: {} records, {} sorted runs, {} merge passes, {} bytes spilled",
        report.records, report.runs, report.merge_passes, report.bytes_spilled
    );
    print_stats(&index, "build", report.records, start, a.json)?;
    index.close()?;
    Ok(())
}

/// The error of a bounded-memory bulk load of `index` stopped by Ctrl-C.
fn bulk_load_stopped(index: &Path) -> Error {
    Error::Interrupted(format!(
        "no index published at {}: the bulk load was stopped (its temporary files removed); {} is as it was",
        index.display(),
        index.display()
    ))
}

/// The progress of a bulk load's writing of its tree (the nodes stored,
/// one a page, of the tree's total), shown as [`progress_bar`] shows
/// progress: `build: nodes written: 40% (…)` off a terminal. The bar is
/// made when the load first tells its total (once the records are sorted).
#[derive(Default)]
struct NodesWritten(std::cell::OnceCell<crate::Progress>);

impl NodesWritten {
    /// `done` of the tree's `total` nodes are stored.
    fn update(&self, done: u64, total: u64) {
        let bar = self
            .0
            .get_or_init(|| progress_bar(total, "build: nodes written"));
        match done >= total {
            true => bar.finish(done),
            false => bar.set_position(done),
        }
    }
}

/// `geoflash insert` and `geoflash delete`.
pub fn change(a: ChangeArgs, delete: bool) -> Result<(), Failure> {
    catch_interrupts();
    input_file(&a.input)?;
    if formats::Format::from_path(&a.input)? != formats::Format::Csv {
        return change_objects(&a, delete);
    }
    let input = RectInput::open(&a.input)?;
    let mut index = Index::open(&a.index, Access::Write)?;
    if !delete && matches!(input, RectInput::Read(_)) && index.objects().is_some() {
        // A CSV of WKT geometries inserted into an index with an object
        // heap: the geometries go to the heap, as a GeoJSON file's do (by
        // their MBRs alone, `query --refine` took each object for its box).
        drop(input);
        let objects = read_objects(&a.input, &a.layer)?;
        return apply_objects(index, &a, false, &objects);
    }
    index.device().reset_stats();
    let start = BatchClock::start();
    let durability = batch_durability(index.structure().durability());
    let label = if delete { "delete" } else { "insert" };
    let applied = apply_stream(
        &mut index,
        input.records()?,
        input.len(),
        label,
        &a.input,
        durability,
        |ix, id, r| match delete {
            true => ix.delete(id, *r),
            false => ix.insert(id, *r),
        },
        None,
    );
    let done = change_applied(&mut index, applied, label, &a.input)?;
    index.checkpoint()?;
    print_stats(&index, label, done, start, a.json)?;
    index.close()?;
    Ok(())
}

/// `geoflash update`: moves objects of an index to the rectangles of a
/// CSV file, by id alone ([`Index::update_by_id`]; R-tree and R*-tree
/// records that stay inside their leaf are rewritten in place). The input
/// is one batch like `insert`'s unless `--ack-every` acknowledges updates
/// as the store's durability mode makes them durable. An id the index does
/// not hold stops the command (exit code 2) with the updates before it
/// applied and checkpointed. The moves are streamed as `insert` streams a
/// CSV of boxes, never held whole (issue 47, item 5: they took 48 bytes a
/// row beside the memory budget): a first pass checks every row and counts
/// them, so that a bad row still changes nothing, and the updates read the
/// file a second time, parsed ahead on a thread of their own.
pub fn update(a: UpdateArgs) -> Result<(), Failure> {
    catch_interrupts();
    input_file(&a.input)?;
    if formats::Format::from_path(&a.input)? != formats::Format::Csv {
        return Err(Error::invalid(format!(
            "{}: update takes a CSV file of new rectangles (id,minx,miny,maxx,maxy with a header)",
            a.input.display()
        ))
        .into());
    }
    let mut total = 0u64;
    for row in moves(&a.input)? {
        if total.is_multiple_of(formats::STOP_EVERY) && geoflash::engine::stop_requested() {
            return Err(reading_stopped(&a.input));
        }
        row?;
        total += 1;
    }
    let mut index = Index::open(&a.index, Access::Write)?;
    index.device().reset_stats();
    let start = BatchClock::start();
    let mut acker = Acker::new(a.ack_every)?;
    let durability = match a.ack_every {
        Some(_) => BatchDurability::AsConfigured,
        None => batch_durability(index.structure().durability()),
    };
    // Read again as they are applied (a row that no longer parses, the
    // file changed since the first pass, stops the batch as a failed
    // update does).
    let rows = moves(&a.input)?.map(|row| row.map_err(failure_error));
    let warmed = Warmed {
        moves: geoflash_bench::read_ahead::read_ahead(rows),
        ahead: std::collections::VecDeque::new(),
    };
    let applied = apply_stream(
        &mut index,
        warmed,
        total,
        "update",
        &a.input,
        durability,
        |ix, id, (r, warm)| {
            if !warm.is_empty() {
                ix.warm_for_updates(warm);
            }
            ix.update_by_id(id, *r)
        },
        acker.as_mut(),
    );
    let done = change_applied(&mut index, applied, "update", &a.input)?;
    index.checkpoint()?;
    if let Some(acker) = acker.as_mut() {
        acker.finish(done);
    }
    print_stats(&index, "update", done, start, a.json)?;
    index.close()?;
    Ok(())
}

/// The moves of `geoflash update` in the file `path`, `(id, new
/// rectangle)`, as they are read ([`csv_rows`]).
fn moves(
    path: &Path,
) -> Result<impl Iterator<Item = Result<(u64, Rect), Failure>> + Send + 'static, Failure> {
    csv_rows(path, "record", &formats::BOX_COLUMNS, parse_move)
}

/// One row `id,minx,miny,maxx,maxy` of [`moves`].
fn parse_move(line: &str) -> Result<(u64, Rect), Failure> {
    let (id, rest) = line
        .split_once(',')
        .ok_or_else(|| Error::invalid(format!("{line:?} is not id,minx,miny,maxx,maxy")))?;
    let id: u64 = id
        .trim()
        .parse()
        .map_err(|_| Error::invalid(format!("id {id:?} is not a non-negative integer")))?;
    let v = numbers(rest, 4, "rectangle")?;
    Ok((id, Rect::new(v[0], v[1], v[2], v[3])?))
}

/// The error a [`Failure`] of reading holds, for a stream of operations
/// ([`apply_stream`] names the file and the record with it).
fn failure_error(f: Failure) -> Error {
    match f.error.downcast::<Error>() {
        Ok(e) => e,
        Err(other) => Error::invalid(format!("{other:#}")),
    }
}

/// The moves of `geoflash update` as they are applied, each with the ids
/// to warm before it ([`Index::warm_for_updates`]): the first of every
/// [`geoflash::engine::WARM_BATCH`] moves carries the ids of those moves, as
/// [`Index::warm_before_update`] takes them from a slice; the others none.
struct Warmed<I> {
    /// The moves not read yet.
    moves: I,
    /// The moves read and not handed out yet (at most a `WARM_BATCH`).
    ahead: std::collections::VecDeque<geoflash::Result<(u64, Rect)>>,
}

impl<I: Iterator<Item = geoflash::Result<(u64, Rect)>>> Iterator for Warmed<I> {
    type Item = geoflash::Result<(u64, (Rect, Vec<u64>))>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut warm = Vec::new();
        if self.ahead.is_empty() {
            for m in self.moves.by_ref() {
                let failed = m.is_err();
                self.ahead.push_back(m);
                if failed || self.ahead.len() == geoflash::engine::WARM_BATCH {
                    break;
                }
            }
            warm = self
                .ahead
                .iter()
                .filter_map(|m| m.as_ref().ok().map(|(id, _)| *id))
                .collect();
        }
        Some(self.ahead.pop_front()?.map(|(id, r)| (id, (r, warm))))
    }
}

/// `geoflash query`.
pub fn query(a: QueryArgs) -> Result<(), Failure> {
    let windows = match (&a.window, &a.windows) {
        (Some(w), None) => vec![parse_window(w)?],
        (None, Some(f)) => read_windows(f)?,
        _ => {
            return Err(
                Error::invalid("give --window MINX,MINY,MAXX,MAXY or --windows FILE").into(),
            )
        }
    };
    let predicate = parse_predicate(&a.predicate)?;
    let reads: ReadMode = a.reads.parse()?;
    let mut index = Index::open(&a.index, Access::Read)?;
    index.set_read_mode(reads);
    let printed = Ids::of(&index)?;
    let mut clock = BatchClock::start();
    let mut out = Answers::new(a.json, "windows");
    let (mut candidates, mut results) = (0u64, 0u64);
    for (pass, group) in windows.chunks(WINDOWS_PER_PASS).enumerate() {
        // Without refinement a pass's windows go through one traversal (the
        // children a node's windows enter read as one device batch: more
        // reads in flight on a cold index); with it, one refined query each.
        let found = if a.refine {
            group
                .iter()
                .map(|w| index.query_refined(*w, predicate).map(KeyResult::from))
                .collect::<Result<Vec<_>, Error>>()?
        } else {
            index.query_batch_keys(group, predicate)?
        };
        for (j, r) in found.into_iter().enumerate() {
            candidates += r.stats.candidates;
            results += r.stats.results;
            let ids = printed.sorted(&index, r.keys)?;
            let i = pass * WINDOWS_PER_PASS + j;
            clock.excluding(|| print_window(&mut out, i, &ids, a.ids))?;
        }
    }
    let stats = batch_stats(&index, "query", &clock, windows.len(), candidates, results);
    out.finish(&json!({ "stats": stats_record(&stats, peak_rss_bytes())? }))?;
    Ok(())
}

/// Windows (or points) whose answers `query` and `knn --points` hold at
/// a time: a pass of windows is one traversal, its answers (8 bytes a
/// record found) printed as it ends and dropped.
const WINDOWS_PER_PASS: usize = 1024;

/// Prints the answer of window `i`: its count, and its ids (sorted) when
/// `with_ids`.
fn print_window(
    out: &mut Answers,
    i: usize,
    ids: &SortedIds,
    with_ids: bool,
) -> anyhow::Result<()> {
    /// A window's answer in the JSON record.
    #[derive(serde::Serialize)]
    struct Window<'a> {
        count: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        ids: Option<&'a SortedIds>,
    }
    if with_ids {
        out.line(format_args!("window {i}: {} [{ids}]", ids.len()));
    } else {
        out.line(format_args!("window {i}: {}", ids.len()));
    }
    out.item(&Window {
        count: ids.len(),
        ids: with_ids.then_some(ids),
    })
}

fn parse_point(text: &str) -> Result<Point, Failure> {
    let v = numbers(text, 2, "point")?;
    Ok(Point::new(v[0], v[1])?)
}

/// The points of a CSV file `x,y` with a header.
fn read_points(path: &Path) -> Result<Vec<Point>, Failure> {
    read_csv_rows(path, "point", &formats::POINT_COLUMNS, parse_point)
}

/// `geoflash knn`.
pub fn knn(a: KnnArgs) -> Result<(), Failure> {
    let reads: ReadMode = a.reads.parse()?;
    let point = match (&a.point, &a.points) {
        (Some(p), None) => parse_point(p)?,
        (None, Some(f)) => return knn_points(&a, &read_points(f)?, reads),
        _ => return Err(Error::invalid("give --point X,Y or --points FILE").into()),
    };
    let mut index = Index::open(&a.index, Access::Read)?;
    index.set_read_mode(reads);
    let r = index.nearest(point, a.k, a.ties)?;
    let neighbors = neighbors(&index, &Ids::of(&index)?, &r)?;
    if a.json {
        print_json(&json!({
            "neighbors": neighbors.iter().map(|(id, d)| json!({"id": id, "distance": d})).collect::<Vec<_>>(),
            "units": index.manifest().crs.units,
            "stats": r.stats,
        }))?;
    } else {
        for (id, d) in &neighbors {
            outln!("{id} {d}");
        }
    }
    Ok(())
}

/// The neighbours of `r` as (printed id, distance), in `r`'s order.
fn neighbors(
    index: &Index,
    printed: &Ids,
    r: &geoflash::engine::KnnResult,
) -> geoflash::Result<Vec<(PrintedId, f64)>> {
    r.neighbors
        .iter()
        .map(|n| Ok((printed.id(index, n.id)?, n.distance)))
        .collect()
}

/// The index's Stats record `label` of a batch of `operations` queries
/// timed from `start`, with the candidates and results they found.
fn batch_stats(
    index: &Index,
    label: &str,
    start: &BatchClock,
    operations: usize,
    candidates: u64,
    results: u64,
) -> geoflash::metrics::Stats {
    let mut stats = index.stats(label);
    stats.operations = operations as u64;
    start.finish(&mut stats);
    stats.query_candidates = candidates;
    stats.query_results = results;
    stats
}

/// `geoflash knn --points`: one query per point, then the index's Stats
/// record (device counters of the whole run, the open included).
fn knn_points(a: &KnnArgs, points: &[Point], reads: ReadMode) -> Result<(), Failure> {
    let mut index = Index::open(&a.index, Access::Read)?;
    index.set_read_mode(reads);
    let printed = Ids::of(&index)?;
    let mut clock = BatchClock::start();
    let mut out = Answers::new(a.json, "points");
    let (mut candidates, mut results) = (0u64, 0u64);
    for (pass, group) in points.chunks(WINDOWS_PER_PASS).enumerate() {
        // One batched search for a pass's points: the nodes the searches
        // need next are read as one device batch (more reads in flight on
        // a cold index).
        for (j, r) in index
            .nearest_batch(group, a.k, a.ties)?
            .into_iter()
            .enumerate()
        {
            candidates += r.stats.candidates;
            results += r.stats.results;
            let found = neighbors(&index, &printed, &r)?;
            let i = pass * WINDOWS_PER_PASS + j;
            clock.excluding(|| print_neighbors(&mut out, i, &found, &r.stats))?;
        }
    }
    let stats = batch_stats(&index, "knn", &clock, points.len(), candidates, results);
    out.finish(&json!({
        "units": index.manifest().crs.units,
        "stats": stats_record(&stats, peak_rss_bytes())?,
    }))?;
    Ok(())
}

/// Prints the neighbours of point `i` (in `knn --points`), found with
/// `stats`.
fn print_neighbors(
    out: &mut Answers,
    i: usize,
    found: &[(PrintedId, f64)],
    stats: &geoflash::engine::QueryStats,
) -> anyhow::Result<()> {
    /// A neighbour in the JSON record.
    #[derive(serde::Serialize)]
    struct Neighbor {
        id: PrintedId,
        distance: f64,
    }
    /// A point's answer in the JSON record.
    #[derive(serde::Serialize)]
    struct PointAnswer<'a> {
        neighbors: Vec<Neighbor>,
        stats: &'a geoflash::engine::QueryStats,
    }
    if !out.is_json() {
        let list: Vec<String> = found.iter().map(|(id, d)| format!("{id}:{d}")).collect();
        out.line(format_args!("point {i}: {}", list.join(" ")));
        return Ok(());
    }
    out.item(&PointAnswer {
        neighbors: found
            .iter()
            .map(|&(id, distance)| Neighbor { id, distance })
            .collect(),
        stats,
    })
}

/// `geoflash inspect`.
pub fn inspect(a: DirArgs) -> Result<(), Failure> {
    let index = Index::open(&a.index, Access::Read)?;
    let report = match index.inspect()? {
        Inspection::Tree(report) => report,
        Inspection::Xbr {
            report,
            config,
            height,
        } => {
            if a.json {
                print_json(
                    &json!({"manifest": index.manifest(), "xbr": report, "config": config}),
                )?;
                return Ok(());
            }
            let m = index.manifest();
            row("kind", m.kind());
            row("page size", m.page_size);
            row("device", index.device().describe());
            row("records", report.points);
            row("height", height);
            row("nodes", report.nodes);
            row("leaves", report.leaves);
            row("fill", format!("{:.2}", report.fill));
            return Ok(());
        }
        Inspection::Fortree {
            report,
            ont_units,
            config,
        } => return inspect_fortree(&index, &report, ont_units, &config, a.json),
    };
    if a.json {
        let objects = index.objects().map(|h| {
            json!({"objects": h.len(), "file_bytes": h.file_bytes(), "live_bytes": h.live_bytes()})
        });
        print_json(&json!({"manifest": index.manifest(), "tree": report, "objects": objects}))?;
    } else {
        let m = index.manifest();
        row("kind", m.kind());
        row("page size", m.page_size);
        row("device", index.device().describe());
        row("crs / units", format!("{} / {}", m.crs.name, m.crs.units));
        row("records", report.records);
        row("height", report.height);
        row(
            "M / m",
            format!("{} / {}", report.max_entries, report.min_entries),
        );
        row("nodes (pages)", report.nodes);
        match index.objects() {
            Some(h) => row(
                "object heap",
                format!(
                    "{} objects, {} bytes ({} live)",
                    h.len(),
                    h.file_bytes(),
                    h.live_bytes()
                ),
            ),
            None => row("object heap", "none (built from rectangles)"),
        }
        for l in &report.levels {
            row(
                &format!("level {}", l.level),
                format!(
                    "{} nodes, fill {:.2}/{:.2}/{:.2}, coverage {:.6e}, overlap {:.6e}",
                    l.nodes, l.fill_min, l.fill_mean, l.fill_max, l.coverage, l.overlap
                ),
            );
        }
    }
    Ok(())
}

/// `geoflash inspect` of a FOR-tree: its units, overflow nodes and chains.
fn inspect_fortree(
    index: &Index,
    report: &FortreeReport,
    ont_units: usize,
    c: &FortreeConfig,
    json: bool,
) -> Result<(), Failure> {
    if json {
        print_json(&json!({
            "manifest": index.manifest(),
            "fortree": report,
            "ont_units": ont_units,
            "config": c,
        }))?;
        return Ok(());
    }
    let m = index.manifest();
    row("kind", m.kind());
    row("page size", m.page_size);
    row("device", index.device().describe());
    row("records", report.records);
    row("height", report.height);
    row("M / m", format!("{} / {}", c.max_entries, c.min_entries));
    row("nodes (pages)", report.nodes_per_level.iter().sum::<u64>());
    row(
        "overflow nodes",
        format!(
            "{} in {ont_units} units, longest chain {}, root chain {}",
            report.overflow_nodes, report.longest_chain, report.root_chain
        ),
    );
    for (level, (units, nodes)) in report
        .units_per_level
        .iter()
        .zip(&report.nodes_per_level)
        .enumerate()
    {
        row(
            &format!("level {level}"),
            format!("{units} units, {nodes} nodes"),
        );
    }
    Ok(())
}

/// `geoflash verify`: checksums of every node and every structural invariant; exit 1 on a defect.
pub fn verify(a: DirArgs) -> Result<(), Failure> {
    let index = Index::open(&a.index, Access::Read)?;
    let v = index.verify().map_err(|e| {
        Failure::new(
            ErrorKind::Damaged,
            anyhow::anyhow!("index is defective: {}", index.locate(e)),
        )
    })?;
    let (records, height, nodes, report) = (v.records, v.height, v.nodes, v.report);
    let overflow = v.overflow_nodes;
    if a.json {
        print_json(&json!({"ok": true, "report": report}))?;
    } else {
        let overflow = overflow.map_or(String::new(), |o| format!(" ({o} overflow nodes)"));
        outln!("ok: {records} records, height {height}, {nodes} nodes{overflow}");
    }
    Ok(())
}

/// `geoflash checkpoint`.
pub fn checkpoint(a: DirArgs) -> Result<(), Failure> {
    let mut index = Index::open(&a.index, Access::Write)?;
    index.checkpoint()?;
    if a.json {
        print_json(&json!({"ok": true}))?;
    } else {
        outln!("checkpointed {}", a.index.display());
    }
    Ok(())
}

/// `geoflash recover`: opens the index for writing, which runs restart
/// (replays the log's committed operations, repairs torn pages), checks
/// every page (a damaged one is an error, and nothing is checkpointed),
/// then checkpoints it, and prints what restart did. An index an interrupted
/// build left in its staging directory is first renamed onto `--index`.
pub fn recover(a: RecoverArgs) -> Result<(), Failure> {
    // A build killed before it finished left its index in the staging
    // directory beside --index: move it in place first.
    if let Some(staging) = geoflash::engine::remove_abandoned(&a.index)? {
        eprintln!(
            "geoflash: removed {}, left by a build of {} killed before it made an index (nothing in it was recoverable)",
            staging.display(),
            a.index.display()
        );
    }
    // A build killed before any of its operations was durable left an
    // empty index: nothing to publish (the target stays free for a build).
    let records = |dir: &Path| Index::open(dir, Access::Read).map(|ix| ix.len());
    if let Some(staging) = geoflash::engine::discard_empty_interrupted(&a.index, records)? {
        eprintln!(
            "geoflash: removed {}, left by a build of {} killed before any of its operations was durable; \
             nothing was published: build {} again",
            staging.display(),
            a.index.display(),
            a.index.display()
        );
        return Ok(());
    }
    if let Some(staging) = geoflash::engine::adopt_interrupted(&a.index)? {
        eprintln!(
            "geoflash: finishing the interrupted build left in {}",
            staging.display()
        );
    }
    let mode = if a.tolerate_corrupt_tail {
        RecoveryMode::TolerateCorruptTail
    } else {
        RecoveryMode::AbsoluteConsistency
    };
    let mut index = Index::open_recovering(&a.index, mode)?;
    let report = index.restart_report().cloned();
    let rolled_back = index.rolled_back_pages();
    // Restart repairs what a crash leaves (a torn tail, torn pages); a
    // page damaged otherwise is found only by reading it: check every
    // page before the checkpoint makes the replayed state the index's.
    index.verify().map_err(|e| {
        Failure::new(
            ErrorKind::Damaged,
            anyhow::anyhow!(
                "{} is damaged where recover cannot repair it ({}); nothing was checkpointed: \
                 rebuild it from its input or restore a copy",
                a.index.display(),
                index.locate(e)
            ),
        )
    })?;
    index.checkpoint()?;
    let records = index.len();
    index.close()?;
    match report {
        Some(r) => {
            if r.corrupt_pages_dropped > 0 {
                // The count of records is a floor: the dropped pages cannot be read.
                eprintln!(
                    "geoflash: warning: the log of {} was damaged before its tail: {} log pages were dropped, \
                     and every operation logged in them is lost; the index now holds {records} records",
                    a.index.display(),
                    r.corrupt_pages_dropped,
                );
            }
            if a.json {
                print_json(&json!({"recovered": r.recovered_anything(), "restart": r}))?;
            } else {
                row("records scanned", r.records_scanned);
                row("changes replayed", r.changes_replayed);
                row("operations replayed", r.ops_replayed);
                row("incomplete operations", r.incomplete_ops);
                row("pages restored", r.pages_restored);
                row("torn tail", r.torn_tail);
                if a.tolerate_corrupt_tail {
                    row("corrupt log pages dropped", r.corrupt_pages_dropped);
                    row(
                        "corrupt log records dropped",
                        format!("at least {}", r.corrupt_records_dropped),
                    );
                }
                row(
                    "last committed operation",
                    r.last_committed_op
                        .map_or("none".to_string(), |o| o.to_string()),
                );
                row("records", records);
            }
        }
        None => {
            // A structure written in place: its rollback journal restored
            // the pages a crash had changed since the last checkpoint.
            if a.json {
                print_json(&json!({
                    "recovered": rolled_back > 0,
                    "restart": null,
                    "rolled_back_pages": rolled_back
                }))?;
            } else if rolled_back > 0 {
                row("pages rolled back to the last checkpoint", rolled_back);
                row("records", records);
            } else {
                outln!("nothing to recover: the index was closed cleanly at its last checkpoint");
            }
        }
    }
    Ok(())
}
