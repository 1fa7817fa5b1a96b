//! The runner: executes a workload's cross product, each configuration on a
//! fresh index, and records one [`Stats`] row per step (per selectivity, per
//! k) in a [`ResultsStore`].
//!
//! Per step the device counters are reset and the store's counters are
//! differenced, so every row holds that step's work only. Build, mixed and
//! delete steps end with a checkpoint (flush and sync), inside the
//! measurement, as FESTIval's protocol flushed at the end of a workload.
//! Configurations already complete in the results store are skipped unless
//! `force`; one that fails is recorded with status `error`, left incomplete
//! (so a later run retries it) and the run goes on with the next.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use geoflash::geom::{Point, Rect};
use geoflash::index::query::Predicate;
use geoflash::metrics::Stats;
use geoflash::storage::spec::DeviceSpec;
use geoflash::{Error, Index, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::generate;
use crate::results::{ConfigRow, ResultsStore, StepRow};
use crate::target::grid::GridTarget;
use crate::target::tree::TreeTarget;
use crate::target::{tier_note, Target};
use crate::windows::{windows, Placement};
use crate::workload::{
    predicate_name, BuildMethod, Configuration, DatasetConfig, DatasetSource, GridKind,
    IndexFamily, MixedQuery, Step, WindowSource, Workload,
};

/// How to run a workload.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Re-run configurations already complete in the results store.
    pub force: bool,
    /// Only the index configurations with these names (base or expanded); all when empty.
    pub only: Vec<String>,
    /// Draw progress bars on standard error.
    pub progress: bool,
    /// The command line, recorded with the run.
    pub command: String,
    /// Directory for the index directories of `file` devices (default: the system's temporary directory).
    pub workdir: Option<PathBuf>,
    /// Only the configuration at this position of the cross product (after
    /// `only`; positions as [`Workload::configurations`] lists them): one
    /// task of a sweep spread over several machines (`geoflash.dask.run`).
    pub pick: Option<usize>,
}

/// What a run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    /// The run's id in the results store.
    pub run_id: i64,
    /// Configurations in the cross product (after `only`).
    pub configurations: usize,
    /// Configurations executed.
    pub executed: usize,
    /// Configurations skipped because already complete.
    pub skipped_complete: usize,
    /// Result rows written.
    pub rows: usize,
    /// Steps skipped as unsupported (with the reason).
    pub unsupported: Vec<String>,
    /// Configurations that failed (with the error).
    pub failures: Vec<String>,
}

/// Datasets read so far, by name, in their source's order.
type DatasetCache = HashMap<String, std::sync::Arc<Vec<(u64, Rect)>>>;

/// The records of a dataset in its insertion order.
fn load_dataset(d: &DatasetConfig, cache: &mut DatasetCache) -> Result<Vec<(u64, Rect)>> {
    let base = source_records(d, cache)?;
    let rects: Vec<Rect> = base.iter().map(|(_, r)| *r).collect();
    let perm = generate::order(&rects, d.order, d.seed)?;
    Ok(perm.iter().filter_map(|&i| base.get(i).copied()).collect())
}

/// The records of a dataset in its source's order (read once, then cached).
fn source_records(
    d: &DatasetConfig,
    cache: &mut DatasetCache,
) -> Result<std::sync::Arc<Vec<(u64, Rect)>>> {
    Ok(match cache.get(&d.name) {
        Some(b) => b.clone(),
        None => {
            let recs: Vec<(u64, Rect)> = match &d.source {
                DatasetSource::Generator(p) => generate::generate(p)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| (i as u64, r))
                    .collect(),
                DatasetSource::File(path) => crate::import::read_rects(path)?,
                #[cfg(feature = "postgres")]
                DatasetSource::Postgis(src) => crate::postgis::read_rects(src)?,
                #[cfg(not(feature = "postgres"))]
                DatasetSource::Postgis(src) => return Err(crate::pg::unsupported(&src.url)),
            };
            if recs.is_empty() {
                return Err(Error::invalid(format!("dataset {:?} is empty", d.name)));
            }
            let arc = std::sync::Arc::new(recs);
            cache.insert(d.name.clone(), arc.clone());
            arc
        }
    })
}

fn order_name(d: &DatasetConfig) -> String {
    serde_json::to_value(d.order)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Runs `work` on `target` as one measured step labelled `label`; returns
/// the step's metrics and, on a hybrid device, the note of its per-tier
/// counters during the step.
fn measure(
    target: &mut dyn Target,
    label: &str,
    work: impl FnOnce(&mut dyn Target, &mut Stats) -> Result<()>,
) -> Result<(Stats, String)> {
    target.reset_device_stats();
    let before = target.counters();
    let (tree_before, times_before) = target.index_counters();
    let cpu = cpu_time::ProcessTime::try_now().ok();
    let wall = Instant::now();
    let mut s = Stats::new(label);
    work(target, &mut s)?;
    s.wall_time_ns = u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
    if let Some(c) = cpu {
        if let Ok(d) = c.try_elapsed() {
            s.cpu_time_ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        }
    }
    target.device_stats_into(&mut s);
    let after = target.counters();
    s.absorb_store(&after.since(&before));
    let (tree_after, times_after) = target.index_counters();
    s.absorb_tree(&tree_after.since(&tree_before));
    s.times.add(&times_after.since(&times_before));
    s.set_index_bytes(target.index_bytes());
    Ok((s, tier_note(&**target.device())))
}

/// The state of one configuration's execution.
struct Exec<'a> {
    /// The dataset in insertion order.
    data: &'a [(u64, Rect)],
    /// The extent of the whole dataset.
    extent: Rect,
    /// Objects `data[..next]` have been offered to the index.
    next: usize,
    /// Objects in the index now.
    live: Vec<(u64, Rect)>,
    bar: ProgressBar,
    /// The store's name.
    store: String,
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("  {msg} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// A finished row: parameter, status, message, metrics.
struct Row {
    parameter: String,
    status: &'static str,
    message: String,
    stats: Stats,
}

fn ok_row(parameter: String, (stats, message): (Stats, String)) -> Row {
    Row {
        parameter,
        status: "ok",
        message,
        stats,
    }
}

fn knn_points(
    extent: &Rect,
    data: &[(u64, Rect)],
    count: usize,
    placement: Placement,
    seed: u64,
) -> Result<Vec<Point>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| match placement {
            Placement::Uniform => Point::new(
                extent.min_x + rng.gen::<f64>() * extent.width(),
                extent.min_y + rng.gen::<f64>() * extent.height(),
            ),
            Placement::OnData => {
                let i = rng.gen_range(0..data.len().max(1));
                let c = data
                    .get(i)
                    .map(|(_, r)| r.center())
                    .ok_or_else(|| Error::invalid("kNN points on data need a non-empty dataset"))?;
                Ok(c)
            }
        })
        .collect()
}

fn read_windows_file(path: &Path) -> Result<Vec<Rect>> {
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    })?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::new(file));
    let mut out = Vec::new();
    for (n, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        let v: Vec<f64> = rec
            .iter()
            .map(|x| x.parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::invalid(format!(
                    "{}: window {}: not four numbers minx,miny,maxx,maxy",
                    path.display(),
                    n + 1
                ))
            })?;
        let [a, b, c, d] = v.as_slice() else {
            return Err(Error::invalid(format!(
                "{}: window {}: expected minx,miny,maxx,maxy",
                path.display(),
                n + 1
            )));
        };
        out.push(
            Rect::new(*a, *b, *c, *d).map_err(|e| {
                Error::invalid(format!("{}: window {}: {e}", path.display(), n + 1))
            })?,
        );
    }
    if out.is_empty() {
        return Err(Error::invalid(format!("{}: no window", path.display())));
    }
    Ok(out)
}

fn run_queries(
    target: &mut dyn Target,
    s: &mut Stats,
    ws: &[Rect],
    p: Predicate,
    reps: u32,
    bar: &ProgressBar,
) -> Result<()> {
    bar.set_length(ws.len() as u64 * u64::from(reps));
    bar.set_position(0);
    for _ in 0..reps {
        for w in ws {
            let r = target.query(*w, p)?;
            s.operations += 1;
            s.query_candidates += r.candidates;
            s.query_results += r.results;
            bar.inc(1);
        }
    }
    Ok(())
}

/// `count` loaded objects' centres drawn at random (seeded), for exact point lookups.
fn live_points(live: &[(u64, Rect)], count: usize, seed: u64) -> Result<Vec<Point>> {
    if live.is_empty() {
        return Err(Error::invalid(
            "point lookups need loaded objects: the index is empty",
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Ok((0..count)
        .filter_map(|_| live.get(rng.gen_range(0..live.len())))
        .map(|(_, r)| r.center())
        .collect())
}

impl Exec<'_> {
    fn insert_next(&mut self, index: &mut dyn Target) -> Result<()> {
        let Some(&(id, r)) = self.data.get(self.next) else {
            return Err(Error::invalid(format!(
                "the dataset's {} objects are all inserted: a mixed step needs objects left \
                 (give the build step a fraction below 1)",
                self.data.len()
            )));
        };
        index.insert(id, r)?;
        self.live.push((id, r));
        self.next += 1;
        Ok(())
    }

    fn step(&mut self, index: &mut dyn Target, step: &Step) -> Result<Vec<Row>> {
        let label = step.kind();
        let bar = self.bar.clone();
        bar.set_message(label.to_string());
        match step {
            Step::Build { .. } => Err(Error::invalid("a build step must come first")),
            Step::RangeQueries {
                windows: source,
                predicate,
                repetitions,
                seed,
            } => {
                let batches: Vec<(String, Vec<Rect>)> = match source {
                    WindowSource::File(p) => vec![(
                        format!(
                            "windows={}",
                            p.file_name().and_then(|n| n.to_str()).unwrap_or("")
                        ),
                        read_windows_file(p)?,
                    )],
                    WindowSource::Generated {
                        selectivities,
                        labels,
                        count,
                        aspect,
                        placement,
                    } => {
                        let data: Vec<Rect> = self.data.iter().map(|(_, r)| *r).collect();
                        selectivities
                            .iter()
                            .zip(labels)
                            .map(|(sel, l)| {
                                windows(
                                    self.extent,
                                    *sel,
                                    *aspect,
                                    *count,
                                    *placement,
                                    &data,
                                    *seed,
                                )
                                .map(|w| (format!("selectivity={l}"), w))
                            })
                            .collect::<Result<_>>()?
                    }
                };
                let mut rows = Vec::new();
                for (param, ws) in batches {
                    let s = measure(index, label, |ix, s| {
                        run_queries(ix, s, &ws, *predicate, *repetitions, &bar)
                    })?;
                    rows.push(ok_row(
                        format!("{param};predicate={}", predicate_name(*predicate)),
                        s,
                    ));
                }
                Ok(rows)
            }
            Step::Knn {
                k,
                count,
                placement,
                seed,
            } => {
                let points = knn_points(&self.extent, self.data, *count, *placement, *seed)?;
                let mut rows = Vec::new();
                for &kk in k {
                    bar.set_length(points.len() as u64);
                    bar.set_position(0);
                    let s = measure(index, label, |ix, s| {
                        for p in &points {
                            let r = ix.knn(*p, kk)?;
                            s.operations += 1;
                            s.query_candidates += r.candidates;
                            s.query_results += r.results;
                            bar.inc(1);
                        }
                        Ok(())
                    })?;
                    rows.push(ok_row(format!("k={kk}"), s));
                }
                Ok(rows)
            }
            Step::PointQueries { group, count, seed } => {
                let points = live_points(&self.live, *count, *seed)?;
                let mut rows = Vec::new();
                for &g in group {
                    bar.set_length(points.len() as u64);
                    bar.set_position(0);
                    let s = measure(index, label, |ix, s| {
                        for chunk in points.chunks(g.max(1)) {
                            let r = ix.point_group(chunk)?;
                            s.operations += chunk.len() as u64;
                            s.query_candidates += r.candidates;
                            s.query_results += r.results;
                            bar.inc(chunk.len() as u64);
                        }
                        Ok(())
                    })?;
                    rows.push(ok_row(format!("group={g}"), s));
                }
                Ok(rows)
            }
            Step::Mixed {
                operations,
                insert_ratio,
                selectivity,
                predicate,
                query,
                seed,
            } => {
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                let plan: Vec<bool> = (0..*operations)
                    .map(|_| rng.gen::<f64>() < *insert_ratio)
                    .collect();
                let inserts = plan.iter().filter(|x| **x).count();
                let left = self.data.len() - self.next.min(self.data.len());
                if inserts > left {
                    return Err(Error::invalid(format!(
                        "the mixed step inserts {inserts} objects but only {left} of the dataset are left: \
                         lower the build step's fraction or the mixed step's operations"
                    )));
                }
                let queries = plan.len() - inserts;
                let ws = windows(
                    self.extent,
                    *selectivity,
                    1.0,
                    queries,
                    Placement::Uniform,
                    &[],
                    seed.wrapping_add(1),
                )?;
                bar.set_length(plan.len() as u64);
                bar.set_position(0);
                let mut pick = ChaCha8Rng::seed_from_u64(seed.wrapping_add(2));
                let s = measure(index, label, |ix, s| {
                    let mut wi = ws.iter();
                    for is_insert in &plan {
                        if *is_insert {
                            self.insert_next(ix)?;
                        } else if *query == MixedQuery::Point {
                            // An exact lookup of an object loaded so far.
                            let i = pick.gen_range(0..self.live.len().max(1));
                            if let Some((_, r)) = self.live.get(i) {
                                let a = ix.point_group(&[r.center()])?;
                                s.query_candidates += a.candidates;
                                s.query_results += a.results;
                            }
                        } else if let Some(w) = wi.next() {
                            let r = ix.query(*w, *predicate)?;
                            s.query_candidates += r.candidates;
                            s.query_results += r.results;
                        }
                        s.operations += 1;
                        bar.inc(1);
                    }
                    ix.checkpoint()
                })?;
                let q = match query {
                    MixedQuery::Range => "",
                    MixedQuery::Point => ";query=point",
                };
                Ok(vec![ok_row(format!("insert_ratio={insert_ratio}{q}"), s)])
            }
            Step::Delete { fraction, seed } => {
                let n = ((self.live.len() as f64) * fraction).round() as usize;
                let mut rng = ChaCha8Rng::seed_from_u64(*seed);
                // choose n live objects at random
                for i in 0..n.min(self.live.len()) {
                    let j = rng.gen_range(i..self.live.len());
                    self.live.swap(i, j);
                }
                let victims: Vec<(u64, Rect)> = self.live.drain(..n.min(self.live.len())).collect();
                bar.set_length(victims.len() as u64);
                bar.set_position(0);
                let s = measure(index, label, |ix, s| {
                    for (id, r) in &victims {
                        ix.delete(*id, *r)?;
                        s.operations += 1;
                        bar.inc(1);
                    }
                    ix.checkpoint()
                })?;
                Ok(vec![ok_row(format!("fraction={fraction}"), s)])
            }
            Step::Checkpoint => {
                let s = measure(index, label, |ix, _| ix.checkpoint())?;
                Ok(vec![ok_row(String::new(), s)])
            }
            Step::CrashAndRecover { .. } => Err(Error::invalid(
                "crash_and_recover is run by the configuration's loop",
            )),
        }
    }
}

/// Crash and recover: `operations` inserts without a checkpoint, the index
/// dropped without flushing (a crash at an operation boundary), then
/// reopened, which runs recovery from the log. The row measures the reopen.
fn crash_and_recover(
    exec: &mut Exec,
    target: Box<dyn Target>,
    operations: usize,
) -> Result<(Box<dyn Target>, Row)> {
    let skipped = |index: Box<dyn Target>, message: String| {
        Ok((
            index,
            Row {
                parameter: String::new(),
                status: "skipped",
                message,
                stats: Stats::new("crash_and_recover"),
            },
        ))
    };
    if target.as_index().is_none() {
        return skipped(
            target,
            "crash_and_recover is not supported by this index kind (it keeps no log; \
             R-trees on the efind and fast stores do)"
                .to_string(),
        );
    }
    let index = target;
    if exec.store != "efind" && exec.store != "fast" {
        return skipped(
            index,
            format!(
                "crash_and_recover is not supported by store {} in this version (it keeps no log; efind and fast do)",
                exec.store
            ),
        );
    }
    let Some(dir) = index
        .as_index()
        .and_then(|i| i.dir())
        .map(Path::to_path_buf)
    else {
        let device = index
            .as_index()
            .map(|i| i.manifest().device.clone())
            .unwrap_or_default();
        return skipped(
            index,
            format!(
                "crash_and_recover needs a file device: an index on {} lives in this process only",
                device
            ),
        );
    };
    let mut index = index;
    let reads = index.as_index().map(Index::read_mode).unwrap_or_default();
    let before = exec.live.len();
    exec.bar.set_message("crash_and_recover");
    for _ in 0..operations {
        exec.insert_next(&mut *index)?;
    }
    // The crash: no checkpoint, no close.
    drop(index.into_index());
    let cpu = cpu_time::ProcessTime::try_now().ok();
    let wall = Instant::now();
    let mut index = Index::open(&dir, geoflash::manifest::Access::Write)?;
    index.set_read_mode(reads);
    let mut s = index.stats("crash_and_recover");
    s.wall_time_ns = u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
    if let Some(d) = cpu.and_then(|c| c.try_elapsed().ok()) {
        s.cpu_time_ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    }
    let recovered = usize::try_from(index.len()).unwrap_or(usize::MAX);
    if recovered < before || recovered > before + operations {
        return Err(Error::corrupt(
            None,
            format!(
                "after the crash the index holds {recovered} records: expected between {before} \
             (the last checkpoint) and {} (every insert)",
                before + operations
            ),
        ));
    }
    // The inserts that did not survive are gone from the live set.
    exec.live.truncate(recovered);
    let report = index
        .restart_report()
        .and_then(|r| serde_json::to_string(r).ok())
        .unwrap_or_default();
    s.operations = (recovered - before) as u64;
    Ok((
        Box::new(TreeTarget::new(index)),
        Row {
            parameter: format!("operations={operations}"),
            status: "ok",
            message: format!(
                "{} of {operations} inserts after the last checkpoint recovered; restart: {report}",
                recovered - before
            ),
            stats: s,
        },
    ))
}

/// A fresh directory in `workdir` (created if missing; or the temporary
/// directory) for an index on a `file` device; `None` for other devices,
/// whose indexes need none.
fn scratch_dir(device: &str, workdir: Option<&Path>) -> Result<Option<tempfile::TempDir>> {
    fn has_file(spec: &DeviceSpec) -> bool {
        match spec {
            DeviceSpec::File { .. } => true,
            DeviceSpec::Hybrid { fast, slow, .. } => has_file(fast) || has_file(slow),
            _ => false,
        }
    }
    if !has_file(&DeviceSpec::parse(device)?) {
        return Ok(None);
    }
    let b = tempfile::Builder::new().prefix("geoflash-bench-").clone();
    match workdir {
        Some(w) => std::fs::create_dir_all(w).and_then(|()| b.tempdir_in(w)),
        None => b.tempdir(),
    }
    .map(Some)
    .map_err(|source| Error::Io {
        path: workdir.map(Path::to_path_buf).unwrap_or_default(),
        page: None,
        source,
    })
}

/// The extent of `data`, widened where it is flat (a grid file's domain
/// needs an area).
fn padded_extent(data: &[(u64, Rect)]) -> Result<Rect> {
    let e = Rect::union_all(data.iter().map(|(_, r)| r))
        .ok_or_else(|| Error::invalid("empty dataset"))?;
    let pad = |lo: f64, hi: f64| {
        if hi > lo {
            0.0
        } else {
            lo.abs().max(1.0) * 1e-9
        }
    };
    let (px, py) = (pad(e.min_x, e.max_x), pad(e.min_y, e.max_y));
    Rect::new(e.min_x - px, e.min_y - py, e.max_x + px, e.max_y + py)
}

/// Creates the index of a configuration (`file` devices get a fresh
/// directory in `workdir`): a tree through [`Index`] (a Hilbert R-tree's
/// domain is the extent of the whole dataset `data`), a grid file over the
/// extent of `data` on the configuration's device.
fn create_index(
    c: &Configuration,
    data: &[(u64, Rect)],
    workdir: Option<&Path>,
) -> Result<(Box<dyn Target>, Option<tempfile::TempDir>)> {
    let dir = scratch_dir(&c.index.device, workdir)?;
    match c.index.family()? {
        IndexFamily::Tree => {
            let opts = c
                .index
                .options()?
                .with_domain_of(data.iter().map(|(_, r)| r));
            let mut index = match &dir {
                None => Index::create_temporary(&opts)?,
                Some(d) => Index::create(&d.path().join("index"), &opts)?,
            };
            index.set_read_mode(c.index.reads.parse()?);
            Ok((Box::new(TreeTarget::new(index)), dir))
        }
        IndexFamily::Grid(kind) => {
            let opts = c.index.grid_options(padded_extent(data)?)?;
            let batched = c.index.grid.clone().unwrap_or_default().batched()?;
            let path = dir.as_ref().map(|d| d.path().join("pages.dat"));
            let dev =
                DeviceSpec::parse(&c.index.device)?.open(c.index.page_size, path.as_deref())?;
            let k = &c.index.kind;
            let t: Box<dyn Target> = match kind {
                GridKind::Grid | GridKind::Gffm | GridKind::HGrid => {
                    Box::new(GridTarget::<geoflash::grid::gffm::InPlaceBuckets>::create(
                        k, dev, opts, batched,
                    )?)
                }
                GridKind::LbGrid => {
                    Box::new(GridTarget::<geoflash::grid::lbgrid::LogBuckets>::create(
                        k, dev, opts, batched,
                    )?)
                }
            };
            Ok((t, dir))
        }
    }
}

/// A built index: the target, its scratch directory, the build step's
/// metrics and tier note, and how many objects of the dataset it holds.
type Built = (
    Box<dyn Target>,
    Option<tempfile::TempDir>,
    (Stats, String),
    usize,
);

/// Builds the index of configuration `c` over `data` as its first step.
fn build(
    c: &Configuration,
    step: &Step,
    data: &[(u64, Rect)],
    workdir: Option<&Path>,
    bar: &ProgressBar,
) -> Result<Built> {
    let Step::Build {
        method,
        fill,
        fraction,
    } = step
    else {
        return Err(Error::invalid("the first step must be a build"));
    };
    let n = ((data.len() as f64) * fraction).round() as usize;
    let n = n.clamp(1, data.len().max(1)).min(data.len());
    let load = data.get(..n).unwrap_or(data);
    bar.set_message("build");
    bar.set_length(load.len() as u64);
    bar.set_position(0);
    match method {
        BuildMethod::Insert => {
            let (mut index, dir) = create_index(c, data, workdir)?;
            let s = measure(&mut *index, "build", |ix, s| {
                for (i, (id, r)) in load.iter().enumerate() {
                    ix.insert(*id, *r)?;
                    if i % 256 == 0 {
                        bar.set_position(i as u64);
                    }
                }
                s.operations = load.len() as u64;
                ix.checkpoint()
            })?;
            Ok((index, dir, s, n))
        }
        BuildMethod::Bulk(_) if c.index.family()? != IndexFamily::Tree => {
            Err(Error::invalid(format!(
                "bulk loading is not available for index kind {}: build it by insertion",
                c.index.kind
            )))
        }
        BuildMethod::Bulk(m) => {
            // The bulk load creates the index, so the measurement wraps creation.
            let opts = c
                .index
                .options()?
                .with_domain_of(data.iter().map(|(_, r)| r));
            let dir = scratch_dir(&opts.device, workdir)?;
            let cpu = cpu_time::ProcessTime::try_now().ok();
            let wall = Instant::now();
            let index_dir = dir.as_ref().map(|d| d.path().join("index"));
            let mut index =
                Index::bulk_load(index_dir.as_deref(), &opts, load.to_vec(), *m, *fill)?;
            index.set_read_mode(c.index.reads.parse()?);
            index.checkpoint()?;
            // Everything the fresh index counted: device (its log file's
            // I/O included), store, tree counters and phase times.
            let mut s = index.stats("build");
            s.wall_time_ns = u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if let Some(d) = cpu.and_then(|c| c.try_elapsed().ok()) {
                s.cpu_time_ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            }
            s.operations = load.len() as u64;
            let st = index.structure().store_stats();
            s.set_index_bytes(
                st.nodes_created
                    .saturating_sub(st.nodes_deleted)
                    .saturating_mul(opts.page_size as u64),
            );
            bar.set_position(load.len() as u64);
            let note = tier_note(&**index.device());
            Ok((Box::new(TreeTarget::new(index)), dir, (s, note), n))
        }
    }
}

/// Runs workload `w`, recording into `store`.
pub fn run(w: &Workload, store: &mut ResultsStore, opts: &RunOptions) -> Result<RunSummary> {
    let mut configs = w.configurations(&opts.only);
    if configs.is_empty() {
        return Err(Error::invalid(format!(
            "no index configuration of workload {:?} is named {}",
            w.name,
            opts.only.join(" or ")
        )));
    }
    if let Some(i) = opts.pick {
        if i >= configs.len() {
            return Err(Error::invalid(format!(
                "workload {:?} has {} configurations: there is none at position {i}",
                w.name,
                configs.len()
            )));
        }
        configs = vec![configs.swap_remove(i)];
    }
    // PostGIS tables are read before anything is recorded: a server that
    // cannot be reached leaves no trace in the results store.
    let mut cache = DatasetCache::new();
    for c in &configs {
        if matches!(c.dataset.source, DatasetSource::Postgis(_)) {
            source_records(&c.dataset, &mut cache)?;
        }
    }
    let run_id = store.begin_run(
        &w.name,
        &w.path.display().to_string(),
        &w.text,
        w.scale.name(),
        &opts.command,
    )?;
    let multi = MultiProgress::with_draw_target(if opts.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let overall = multi.add(ProgressBar::new(configs.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} configurations (eta {eta})")
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    overall.set_message(w.name.clone());
    let step_bar = multi.add(ProgressBar::new(0));
    step_bar.set_style(bar_style());
    let mut summary = RunSummary {
        run_id,
        configurations: configs.len(),
        ..RunSummary::default()
    };
    for c in &configs {
        overall.inc(1);
        let key = c.key(&w.name, w.scale)?;
        if !opts.force && store.is_complete(&key)? {
            summary.skipped_complete += 1;
            continue;
        }
        let what = format!(
            "{} / {} ({}) / rep {}",
            c.dataset.name,
            c.index.name,
            order_name(&c.dataset),
            c.repetition
        );
        overall.set_message(what.clone());
        let data = match load_dataset(&c.dataset, &mut cache) {
            Ok(d) => d,
            Err(e) => {
                // A dataset that cannot be read fails the whole run: nothing else can use it.
                store.finish_run(run_id)?;
                return Err(e);
            }
        };
        let config_json = serde_json::to_string(c)
            .map_err(|e| Error::invalid(format!("cannot serialize configuration: {e}")))?;
        let order = order_name(&c.dataset);
        let row = ConfigRow {
            key: &key,
            workload: &w.name,
            scale: w.scale.name(),
            dataset: &c.dataset.name,
            insertion_order: &order,
            dataset_count: data.len() as u64,
            index_name: &c.index.name,
            index_kind: &c.index.kind,
            split: &c.index.split,
            page_size: c.index.page_size as u64,
            store: &c.index.store,
            buffer_bytes: c.index.buffer_bytes as u64,
            buffer_policy: &c.index.buffer_policy,
            device: &c.index.device,
            repetition: c.repetition,
            config_json: &config_json,
        };
        let config_id = store.begin_configuration(run_id, &row)?;
        summary.executed += 1;
        match execute(
            w,
            c,
            &data,
            store,
            run_id,
            config_id,
            opts,
            &step_bar,
            &mut summary,
        ) {
            Ok(()) => store.complete_configuration(config_id)?,
            Err(Failed::Store(e)) => return Err(e),
            Err(Failed::Step(e)) => summary.failures.push(format!("{what}: {e}")),
        }
    }
    step_bar.finish_and_clear();
    overall.finish_and_clear();
    store.finish_run(run_id)?;
    Ok(summary)
}

enum Failed {
    /// The results store failed: stop the run.
    Store(Error),
    /// A step failed: recorded, the run goes on.
    Step(Error),
}

#[allow(clippy::too_many_arguments)]
fn execute(
    w: &Workload,
    c: &Configuration,
    data: &[(u64, Rect)],
    store: &mut ResultsStore,
    run_id: i64,
    config_id: i64,
    opts: &RunOptions,
    bar: &ProgressBar,
    summary: &mut RunSummary,
) -> std::result::Result<(), Failed> {
    let step_json = |s: &Step| serde_json::to_string(s).unwrap_or_default();
    // The rows of one step are recorded in one transaction: all or none.
    let mut record = |store: &mut ResultsStore, i: usize, s: &Step, rows: &[Row]| {
        summary.rows += rows.len();
        let json = step_json(s);
        let rows: Vec<StepRow> = rows
            .iter()
            .map(|r| StepRow {
                step_index: i,
                step_kind: s.kind(),
                parameter: &r.parameter,
                step_json: &json,
                status: r.status,
                message: &r.message,
                stats: &r.stats,
            })
            .collect();
        store
            .record_step(run_id, config_id, &rows)
            .map(|_| ())
            .map_err(Failed::Store)
    };
    let fail = |store: &mut ResultsStore, i: usize, s: &Step, e: Error| {
        let r = store.record(
            run_id,
            config_id,
            &StepRow {
                step_index: i,
                step_kind: s.kind(),
                parameter: "",
                step_json: &step_json(s),
                status: "error",
                message: &e.to_string(),
                stats: &Stats::new(s.kind()),
            },
        );
        match r {
            Ok(_) => Failed::Step(e),
            Err(se) => Failed::Store(se),
        }
    };
    let Some(first) = w.steps.first() else {
        return Ok(());
    };
    let (mut index, _dir, (s, note), next) =
        match build(c, first, data, opts.workdir.as_deref(), bar) {
            Ok(x) => x,
            Err(e) => return Err(fail(store, 0, first, e)),
        };
    store
        .set_device_description(config_id, &index.device().describe())
        .map_err(Failed::Store)?;
    record(
        store,
        0,
        first,
        &[Row {
            parameter: String::new(),
            status: "ok",
            message: note,
            stats: s,
        }],
    )?;
    let extent = Rect::union_all(data.iter().map(|(_, r)| r))
        .ok_or_else(|| Failed::Step(Error::invalid("empty dataset")))?;
    let mut exec = Exec {
        data,
        extent,
        next,
        live: data.get(..next).unwrap_or(data).to_vec(),
        bar: bar.clone(),
        store: c.index.store.clone(),
    };
    for (i, step) in w.steps.iter().enumerate().skip(1) {
        if let Step::CrashAndRecover { operations } = step {
            match crash_and_recover(&mut exec, index, *operations) {
                Ok((ix, r)) => {
                    index = ix;
                    if r.status == "skipped" {
                        summary.unsupported.push(r.message.clone());
                    }
                    record(store, i, step, std::slice::from_ref(&r))?;
                    continue;
                }
                Err(e) => return Err(fail(store, i, step, e)),
            }
        }
        match exec.step(&mut *index, step) {
            Ok(rows) => {
                for r in rows.iter().filter(|r| r.status == "skipped") {
                    summary.unsupported.push(r.message.clone());
                }
                record(store, i, step, &rows)?;
            }
            Err(e) => return Err(fail(store, i, step, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Scale;

    const W: &str = r#"
name = "runner-test"
[[dataset]]
name = "u"
generator = "uniform"
geometry = "box"
count = 600
order = ["random", "hilbert"]

[[index]]
name = "plain"
store = "plain"
page_size = 1024
buffer = "16KiB"
device = ["mem:", "flashsim:preset=seed-tc58"]

[[step]]
kind = "build"
fraction = 0.8

[[step]]
kind = "range_queries"
selectivity = ["0.1%", "1%"]
count = 20

[[step]]
kind = "knn"
k = [1, 5]
count = 10

[[step]]
kind = "mixed"
operations = 100
insert_ratio = 0.5

[[step]]
kind = "delete"
fraction = 0.25

[[step]]
kind = "crash_and_recover"
"#;

    fn count(st: &mut ResultsStore, sql: &str) -> i64 {
        crate::results::sql::Value::as_i64(&st.query(sql, &[]).unwrap()[0][0]).unwrap()
    }

    /// Runs workload `text` (configurations of kinds `rstar` and `kind`)
    /// without failures and checks that `kind` answers the range and kNN
    /// queries as the R*-tree does on the same data.
    fn answers_as_the_rstar_tree(text: &str, kind: &str, configurations: usize) {
        let w = Workload::parse(text, Path::new("w.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert_eq!(s.configurations, configurations);
        let mut answers = |kind: &str| {
            count(
                &mut st,
                &format!(
                    "SELECT sum(query_results) FROM results_full WHERE index_kind = '{kind}' \
                     AND step_kind IN ('range_queries', 'knn', 'point_queries')"
                ),
            )
        };
        let (rstar, other) = (answers("rstar"), answers(kind));
        assert!(rstar > 0);
        assert_eq!(other, rstar);
    }

    /// The FOR-tree (`kind = "fortree"`) runs every step and answers as the
    /// R*-tree does on the same data and windows.
    #[test]
    fn the_fortree_kind_answers_as_the_rstar_tree() {
        let text = W.replace(
            "name = \"plain\"\n",
            "name = \"plain\"\nkind = [\"rstar\", \"fortree\"]\n",
        );
        answers_as_the_rstar_tree(&text, "fortree", 8);
    }

    /// The xBR+-tree (`kind = "xbr"`, points) runs every step on every
    /// store and answers as the R*-tree on the same points.
    #[test]
    fn the_xbr_kind_answers_as_the_rstar_tree() {
        let text = W
            .replace("geometry = \"box\"", "geometry = \"point\"")
            .replace(
                "[[step]]\nkind = \"mixed\"",
                "[[step]]\nkind = \"point_queries\"\ngroup = [1, 10]\ncount = 20\n\n[[step]]\nkind = \"mixed\"",
            )
            .replace(
                "store = \"plain\"\n",
                "store = [\"plain\", \"efind\", \"fast\"]\nkind = [\"rstar\", \"xbr\"]\n",
            );
        answers_as_the_rstar_tree(&text, "xbr", 24);
    }

    /// `pick` runs the one configuration at its position, as a full run
    /// would have recorded it; a position past the end is an error.
    #[test]
    fn pick_runs_one_configuration() {
        let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
        let configs = w.configurations(&[]);
        let mut st = ResultsStore::in_memory().unwrap();
        let pick = |i| RunOptions {
            pick: Some(i),
            ..RunOptions::default()
        };
        let s = run(&w, &mut st, &pick(2)).unwrap();
        assert_eq!((s.configurations, s.executed, s.rows), (1, 1, 8));
        let key = configs[2].key(&w.name, w.scale).unwrap();
        let keys = st
            .query("SELECT config_key FROM configurations", &[])
            .unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0][0].as_str(), Some(key.as_str()));
        let again = run(&w, &mut st, &pick(2)).unwrap();
        assert_eq!((again.skipped_complete, again.executed), (1, 0));
        let err = run(&w, &mut st, &pick(4)).unwrap_err().to_string();
        assert!(err.contains("4 configurations"), "{err}");
    }

    #[test]
    fn runs_every_configuration_and_step_and_resumes() {
        let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert_eq!(s.configurations, 4);
        // per configuration: build, 2 selectivities, 2 k, mixed, delete, crash (skipped)
        assert_eq!(s.rows, 4 * 8);
        assert_eq!(count(&mut st, "SELECT count(*) FROM results"), 32);
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM results WHERE status = 'skipped'"
            ),
            4
        );
        assert_eq!(s.unsupported.len(), 4);
        // builds insert 80% of 600 objects and write pages; the device counts them
        assert_eq!(
            count(
                &mut st,
                "SELECT min(operations) FROM results WHERE step_kind = 'build'"
            ),
            480
        );
        assert!(
            count(
                &mut st,
                "SELECT min(pages_written) FROM results WHERE step_kind = 'build'"
            ) > 0
        );
        assert!(
            count(
                &mut st,
                "SELECT min(index_bytes) FROM results WHERE step_kind = 'build'"
            ) > 0
        );
        // the flash simulator's rows carry NAND counters, the memory device's do not
        assert!(count(&mut st, "SELECT min(nand_programs) FROM results_full WHERE device LIKE 'flashsim%' AND step_kind = 'build'") > 0);
        assert_eq!(
            count(
                &mut st,
                "SELECT max(device_simulated) FROM results_full WHERE device = 'mem:'"
            ),
            0
        );
        // queries: the 1% windows return more than the 0.1% ones
        let mut q = |sel: &str| {
            count(
                &mut st,
                &format!("SELECT sum(query_results) FROM results WHERE parameter LIKE 'selectivity={sel};%'"),
            )
        };
        let (wide, narrow) = (q("1%"), q("0.1%"));
        assert!(wide > narrow, "{wide} vs {narrow}");
        // kNN returns k per point
        assert_eq!(
            count(
                &mut st,
                "SELECT sum(query_results) FROM results WHERE parameter = 'k=5'"
            ),
            4 * 10 * 5
        );
        // delete removes a quarter of the live objects
        let live_after_mixed = count(
            &mut st,
            "SELECT max(operations) FROM results WHERE step_kind = 'delete'",
        );
        assert!(
            live_after_mixed > 100 && live_after_mixed < 150,
            "{live_after_mixed}"
        );
        // configuration rows are complete, with a device description
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM configurations WHERE completed_at IS NOT NULL"
            ),
            4
        );
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM configurations WHERE device_description = ''"
            ),
            0
        );
        // a second run skips everything; --force re-runs and replaces
        let s2 = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert_eq!((s2.skipped_complete, s2.executed, s2.rows), (4, 0, 0));
        let s3 = run(
            &w,
            &mut st,
            &RunOptions {
                force: true,
                only: vec!["plain[device=mem:]".into()],
                ..RunOptions::default()
            },
        )
        .unwrap();
        assert_eq!((s3.executed, s3.rows), (2, 16));
        assert_eq!(count(&mut st, "SELECT count(*) FROM results"), 32);
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM runs WHERE finished_at IS NOT NULL"
            ),
            3
        );
    }

    #[test]
    fn same_configuration_same_counts() {
        // Deterministic: the same workload twice gives the same device counts.
        let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
        let mut a = ResultsStore::in_memory().unwrap();
        let mut b = ResultsStore::in_memory().unwrap();
        run(&w, &mut a, &RunOptions::default()).unwrap();
        run(&w, &mut b, &RunOptions::default()).unwrap();
        let sql = "SELECT group_concat(pages_written || '/' || pages_read || '/' || nand_erases || '/' || query_results, ',') FROM (SELECT * FROM results ORDER BY result_id)";
        let ga = a.query(sql, &[]).unwrap();
        let gb = b.query(sql, &[]).unwrap();
        assert_eq!(ga, gb);
    }

    #[test]
    fn a_failing_configuration_is_recorded_and_the_run_goes_on() {
        // The mixed step needs more objects than the build leaves.
        let text = W.replace("fraction = 0.8", "fraction = 0.99");
        let w = Workload::parse(&text, Path::new("w.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert_eq!(s.failures.len(), 4);
        assert!(
            s.failures[0].contains("objects are all inserted") || s.failures[0].contains("left"),
            "{}",
            s.failures[0]
        );
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM results WHERE status = 'error' AND step_kind = 'mixed'"
            ),
            4
        );
        assert_eq!(
            count(
                &mut st,
                "SELECT count(*) FROM configurations WHERE completed_at IS NULL"
            ),
            4
        );
    }

    #[test]
    fn bulk_build_and_windows_file() {
        let dir = tempfile::tempdir().unwrap();
        crate::windows::write_windows(
            &dir.path().join("w.csv"),
            &[
                Rect::new(0.0, 0.0, 0.5, 0.5).unwrap(),
                Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(),
            ],
        )
        .unwrap();
        let text = r#"
name = "bulk"
[[dataset]]
name = "g"
generator = "gaussian"
count = 300
[[index]]
name = "e"
store = "efind"
device = "flashsim:preset=seed-tc58"
[[step]]
kind = "build"
method = "bulk"
bulk = "hilbert"
[[step]]
kind = "range_queries"
windows = "w.csv"
repetitions = 2
[[step]]
kind = "checkpoint"
"#;
        let path = dir.path().join("b.toml");
        std::fs::write(&path, text).unwrap();
        let w = Workload::load(&path, Scale::Small).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert_eq!(
            count(
                &mut st,
                "SELECT operations FROM results WHERE step_kind = 'range_queries'"
            ),
            4
        );
        // the whole unit square holds every point, twice
        let r = count(
            &mut st,
            "SELECT query_results FROM results WHERE step_kind = 'range_queries'",
        );
        assert!(r >= 600, "{r}");
        assert!(
            count(
                &mut st,
                "SELECT pages_written FROM results WHERE step_kind = 'build'"
            ) > 0
        );
    }

    #[test]
    fn crash_and_recover_on_a_file_device() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"
name = "crash"
[[dataset]]
name = "u"
generator = "uniform"
count = 500
[[index]]
name = "e"
store = "efind"
page_size = 1024
buffer = "16KiB"
device = "file"
efind = { durability = ["sync", "none"] }
[[index]]
name = "p"
store = "plain"
device = "file"
[[step]]
kind = "build"
fraction = 0.8
[[step]]
kind = "crash_and_recover"
operations = 50
[[step]]
kind = "range_queries"
windows = "WINDOWS"
"#;
        let wdir = tempfile::tempdir().unwrap();
        let wfile = wdir.path().join("all.csv");
        crate::windows::write_windows(&wfile, &[Rect::new(-1.0, -1.0, 2.0, 2.0).unwrap()]).unwrap();
        let text = text.replace("WINDOWS", wfile.to_str().unwrap());
        let w = Workload::parse(&text, Path::new("c.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(
            &w,
            &mut st,
            &RunOptions {
                workdir: Some(dir.path().to_path_buf()),
                ..RunOptions::default()
            },
        )
        .unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        let mut get = |sql: &str| count(&mut st, sql);
        // sync durability: every acknowledged insert survives; the query sees them all
        assert_eq!(
            get("SELECT operations FROM results_full WHERE step_kind = 'crash_and_recover' AND index_name LIKE '%sync%'"),
            50
        );
        assert_eq!(
            get("SELECT query_results FROM results_full WHERE step_kind = 'range_queries' AND index_name LIKE '%sync%'"),
            450
        );
        // no durability: between none and all of them, and the query agrees with the recovered count
        let kept = get("SELECT operations FROM results_full WHERE step_kind = 'crash_and_recover' AND index_name LIKE '%none%'");
        assert!((0..=50).contains(&kept), "{kept}");
        assert_eq!(
            get("SELECT query_results FROM results_full WHERE step_kind = 'range_queries' AND index_name LIKE '%none%'"),
            400 + kept
        );
        // recovery read the device
        assert!(get("SELECT min(pages_read) FROM results WHERE step_kind = 'crash_and_recover' AND status = 'ok'") > 0);
        // the plain store says it cannot
        assert_eq!(
            get("SELECT count(*) FROM results WHERE status = 'skipped'"),
            1
        );
        assert!(
            s.unsupported[0].contains("store plain"),
            "{:?}",
            s.unsupported
        );
        // nothing left behind in the work directory
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    const GRID: &str = r#"
name = "grid-test"
[[dataset]]
name = "g"
generator = "gaussian"
geometry = "point"
count = 3000

[[index]]
name = "grids"
kind = ["grid", "gffm", "lbgrid"]
page_size = 1024
buffer = "64KiB"
device = "flashsim:preset=seed-tc58"
grid = { queries = ["plain", "batched"] }

[[index]]
name = "rstar"
store = "plain"
page_size = 1024
buffer = "64KiB"
device = "flashsim:preset=seed-tc58"

[[step]]
kind = "build"
fraction = 0.6

[[step]]
kind = "range_queries"
selectivity = ["0.1%", "1%"]
count = 20

[[step]]
kind = "knn"
k = [1, 10]
count = 10

[[step]]
kind = "point_queries"
group = [1, 10]
count = 40

[[step]]
kind = "mixed"
operations = 400
insert_ratio = 0.5
query = "point"

[[step]]
kind = "mixed"
operations = 200
insert_ratio = 0.5

[[step]]
kind = "delete"
fraction = 0.2

[[step]]
kind = "range_queries"
selectivity = "100%"
count = 1
"#;

    #[test]
    fn grid_kinds_answer_like_the_rstar_tree() {
        let w = Workload::parse(GRID, Path::new("g.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert_eq!(s.configurations, 7);
        // Every query step returns the same number of results on every index.
        let mut distinct = |sql: &str| count(&mut st, sql);
        for (kind, param) in [
            ("range_queries", "selectivity=0.1%;predicate=intersects"),
            ("range_queries", "selectivity=1%;predicate=intersects"),
            ("range_queries", "selectivity=100%;predicate=intersects"),
            ("knn", "k=10"),
            ("point_queries", "group=1"),
            ("point_queries", "group=10"),
            ("mixed", "insert_ratio=0.5;query=point"),
            ("mixed", "insert_ratio=0.5"),
        ] {
            assert_eq!(
                distinct(&format!(
                    "SELECT count(DISTINCT query_results) FROM results \
                     WHERE step_kind = '{kind}' AND parameter = '{param}'"
                )),
                1,
                "{kind} {param}"
            );
        }
        // Point lookups find every point; the whole extent holds every live point.
        assert_eq!(
            count(
                &mut st,
                "SELECT min(query_results) FROM results WHERE step_kind = 'point_queries'"
            ),
            40
        );
        let all = count(
            &mut st,
            "SELECT max(query_results) FROM results WHERE parameter LIKE 'selectivity=100%%'",
        );
        assert!(all > 1500 && all < 3000, "{all}");
        // Batched range queries issue fewer read batches than plain ones.
        let mut batches = |q: &str| {
            count(
                &mut st,
                &format!(
                    "SELECT sum(read_batches) FROM results_full WHERE index_name = 'grids[kind=gffm,grid.queries={q}]' \
                     AND step_kind = 'range_queries'"
                ),
            )
        };
        assert!(
            batches("batched") < batches("plain"),
            "{} vs {}",
            batches("batched"),
            batches("plain")
        );
        // The plain grid writes page by page, GFFM in batches.
        let mut per_batch = |k: &str| {
            count(
                &mut st,
                &format!(
                    "SELECT max(pages_written / max(write_batches, 1)) FROM results_full \
                     WHERE index_name = 'grids[kind={k},grid.queries=plain]' AND step_kind = 'build'"
                ),
            )
        };
        assert!(
            per_batch("gffm") > per_batch("grid"),
            "{} vs {}",
            per_batch("gffm"),
            per_batch("grid")
        );
    }

    #[test]
    fn grid_kinds_refuse_box_datasets_and_bulk_loads() {
        let boxes = GRID.replace("geometry = \"point\"", "geometry = \"box\"");
        let e = Workload::parse(&boxes, Path::new("g.toml"), Scale::Smoke)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("indexes points") && e.contains("geometry = \"point\""),
            "{e}"
        );
        let bulk = GRID.replace("fraction = 0.6", "fraction = 0.6\nmethod = \"bulk\"");
        let w = Workload::parse(&bulk, Path::new("g.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(
            &w,
            &mut st,
            &RunOptions {
                only: vec!["grids[kind=gffm,grid.queries=plain]".into()],
                ..RunOptions::default()
            },
        )
        .unwrap();
        assert!(
            s.failures[0].contains("bulk loading is not available"),
            "{:?}",
            s.failures
        );
        let bad = GRID.replace(
            "queries = [\"plain\", \"batched\"]",
            "queries = \"sideways\"",
        );
        let e = Workload::parse(&bad, Path::new("g.toml"), Scale::Smoke)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("plain or batched") && e.contains("line 15"),
            "{e}"
        );
        let bad = GRID.replace(
            "kind = [\"grid\", \"gffm\", \"lbgrid\"]",
            "kind = \"quadtree\"",
        );
        let e = Workload::parse(&bad, Path::new("g.toml"), Scale::Smoke)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown index kind") && e.contains("lbgrid"),
            "{e}"
        );
    }

    #[test]
    fn hybrid_kinds_use_the_fast_tier_and_answer_alike() {
        let text = r#"
name = "hybrid-test"
[[dataset]]
name = "g"
generator = "gaussian"
count = 3000
[[index]]
name = "hgrid"
kind = "hgrid"
page_size = 1024
buffer = "64KiB"
device = "hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)&fast_pages=200"
grid = { special = [false, true], s = 1.0 }
[[index]]
name = "shr"
kind = "shrtree"
store = "plain"
page_size = 1024
buffer = "16KiB"
device = "hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)"
[[index]]
name = "flash"
kind = "gffm"
page_size = 1024
buffer = "64KiB"
device = "flashsim:preset=p3700"
[[step]]
kind = "build"
fraction = 0.8
[[step]]
kind = "point_queries"
group = [1, 10]
count = 300
[[step]]
kind = "range_queries"
selectivity = "1%"
count = 20
"#;
        let w = Workload::parse(text, Path::new("h.toml"), Scale::Smoke).unwrap();
        let mut st = ResultsStore::in_memory().unwrap();
        let s = run(&w, &mut st, &RunOptions::default()).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert_eq!(
            count(
                &mut st,
                "SELECT count(DISTINCT query_results) FROM results WHERE step_kind = 'range_queries'"
            ),
            1
        );
        // Hybrid rows carry per-tier notes; the fast tier was used.
        let notes: Vec<String> = st
            .query(
                "SELECT message FROM results_full WHERE device LIKE 'hybrid%' AND step_kind = 'build'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row[0].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(notes.len(), 3);
        for n in &notes {
            assert!(
                n.contains("pages on fast tier")
                    && !n.contains("fast: 0 pages read in 0 batches, 0 written"),
                "{n}"
            );
        }
        let bad = text.replace(
            "device = \"hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)&fast_pages=200\"",
            "device = \"flashsim:preset=p3700\"",
        );
        let e = Workload::parse(&bad, Path::new("h.toml"), Scale::Smoke)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hgrid") && e.contains("one tier"), "{e}");
        let e = Workload::parse(
            &text.replace(
                "kind = \"shrtree\"\nstore = \"plain\"",
                "kind = \"shrtree\"\nstore = \"efind\"",
            ),
            Path::new("h.toml"),
            Scale::Smoke,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("shrtree") && e.contains("store"), "{e}");
    }
}
