//! Build steps: the creation of a configuration's index (a tree through
//! [`Index`], a grid file on its device; a scratch directory for `file`
//! devices) and its loading, by insertion or bulk load, as the first,
//! measured step.
use std::path::Path;

use geoflash::geom::Rect;
use geoflash::metrics::Stats;
use geoflash::storage::spec::DeviceSpec;
use geoflash::{Error, Index, Result};
use indicatif::ProgressBar;

use super::measure::{measure, Clock};
use crate::target::grid::GridTarget;
use crate::target::tree::TreeTarget;
use crate::target::{tier_note, Target};
use crate::workload::{BuildMethod, Configuration, GridKind, IndexFamily, Step};
use geoflash::grid::gffm::InPlaceBuckets;
use geoflash::grid::lbgrid::LogBuckets;
use geoflash::grid::GridIndex;

/// A fresh directory in `workdir` (created if missing; or the temporary
/// directory) for an index on a `file` device; `None` for other devices,
/// whose indexes need none.
fn scratch_dir(device: &DeviceSpec, workdir: Option<&Path>) -> Result<Option<tempfile::TempDir>> {
    fn has_file(spec: &DeviceSpec) -> bool {
        match spec {
            DeviceSpec::File { .. } => true,
            DeviceSpec::Hybrid { fast, slow, .. } => has_file(fast) || has_file(slow),
            _ => false,
        }
    }
    if !has_file(device) {
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
    e.with_area()
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
    let device = DeviceSpec::parse(&c.index.device)?;
    let dir = scratch_dir(&device, workdir)?;
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
            let dev = device.open(c.index.page_size, path.as_deref())?;
            let k = &c.index.kind;
            let t: Box<dyn Target> = match kind {
                GridKind::Grid | GridKind::Gffm | GridKind::HGrid => Box::new(GridTarget::new(
                    GridIndex::<InPlaceBuckets>::create(k, dev, opts, batched)?,
                )),
                GridKind::LbGrid => Box::new(GridTarget::new(GridIndex::<LogBuckets>::create(
                    k, dev, opts, batched,
                )?)),
            };
            Ok((t, dir))
        }
    }
}

/// A built index: the target, its scratch directory, the build step's
/// metrics and tier note, and how many objects of the dataset it holds.
pub(super) type Built = (
    Box<dyn Target>,
    Option<tempfile::TempDir>,
    (Stats, String),
    usize,
);

/// Builds the index of configuration `c` over `data` as its first step.
pub(super) fn build(
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
            let clock = Clock::start();
            let index_dir = dir.as_ref().map(|d| d.path().join("index"));
            let mut index =
                Index::bulk_load(index_dir.as_deref(), &opts, load.to_vec(), *m, *fill)?;
            index.set_read_mode(c.index.reads.parse()?);
            index.checkpoint()?;
            // Everything the fresh index counted: device (its log file's
            // I/O included), store, tree counters and phase times.
            let mut s = index.stats("build");
            clock.stamp(&mut s);
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
