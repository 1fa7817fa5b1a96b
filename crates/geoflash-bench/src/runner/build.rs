//! Build steps: the creation of a configuration's index through
//! [`Index`] (a scratch directory for `file` devices) and its loading, by insertion or bulk load, as the first,
//! measured step.
use std::path::Path;

use geoflash::engine::device::DeviceSpec;
use geoflash::geom::Rect;
use geoflash::metrics::Stats;
use geoflash::{Error, Index, Result};
use indicatif::ProgressBar;

use super::measure::{measure, Clock};
use crate::target::{tier_note, Target};
use crate::workload::{BuildMethod, Configuration, Step};

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

/// The options of a configuration's index, with the extent of `data` as
/// the domain of a structure given none, and its scratch directory.
fn options_and_dir(
    c: &Configuration,
    data: &[(u64, Rect)],
    workdir: Option<&Path>,
) -> Result<(geoflash::IndexOptions, Option<tempfile::TempDir>)> {
    let opts = c
        .index
        .options
        .clone()
        .with_domain_of(data.iter().map(|(_, r)| r));
    let dir = scratch_dir(&opts.device, workdir)?;
    Ok((opts, dir))
}

/// Creates the index of a configuration (`file` devices get a fresh
/// directory in `workdir`) through [`Index`]; a structure that needs a
/// domain (a Hilbert R-tree, an xBR+-tree, a grid file) and is given none
/// takes the extent of the whole dataset `data`.
fn create_index(
    c: &Configuration,
    data: &[(u64, Rect)],
    workdir: Option<&Path>,
) -> Result<(Target, Option<tempfile::TempDir>)> {
    let (opts, dir) = options_and_dir(c, data, workdir)?;
    let mut index = match &dir {
        None => Index::create_temporary(&opts)?,
        Some(d) => Index::create(&d.path().join("index"), &opts)?,
    };
    index.set_read_mode(c.index.reads);
    Ok((Target::new(index), dir))
}

/// A built index: the target, its scratch directory, the build step's
/// metrics and tier note, and how many objects of the dataset it holds.
pub(super) type Built = (Target, Option<tempfile::TempDir>, (Stats, String), usize);

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
    crate::progress::restart(bar, load.len() as u64);
    match method {
        BuildMethod::Insert => {
            let (mut index, dir) = create_index(c, data, workdir)?;
            let s = measure(&mut index, "build", |ix, s| {
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
        BuildMethod::Bulk(m) => {
            // The bulk load creates the index, so the measurement wraps creation.
            let (opts, dir) = options_and_dir(c, data, workdir)?;
            let clock = Clock::start();
            let index_dir = dir.as_ref().map(|d| d.path().join("index"));
            let mut index =
                Index::bulk_load(index_dir.as_deref(), &opts, load.to_vec(), *m, *fill)?;
            index.set_read_mode(c.index.reads);
            index.checkpoint()?;
            // Everything the fresh index counted: device (its log file's
            // I/O included), store, tree counters and phase times.
            let mut s = index.stats("build");
            clock.stamp(&mut s);
            s.operations = load.len() as u64;
            let note = tier_note(&**index.device());
            let target = Target::new(index);
            s.set_index_bytes(target.index_bytes());
            bar.set_position(load.len() as u64);
            Ok((target, dir, (s, note), n))
        }
    }
}
