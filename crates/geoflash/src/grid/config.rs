//! A grid file's settings as an index records them: which kind
//! ([`GridKind`]: `grid`, `gffm`, `lbgrid`, `hgrid`), the user's parameters
//! ([`GridSettings`]) and, once the index is made, its domain and memory
//! budget ([`GridConfig`], what the manifest keeps). [`GridConfig`] turns
//! them into the grid file's [`GridOptions`] (the buffer budget divided
//! between directory and bucket pages) and creates or reopens the grid file
//! as a [`SpatialIndex`] on a device.
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::gffm::InPlaceBuckets;
use super::hot::HybridOptions;
use super::lbgrid::LogBuckets;
use super::{GridIndex, GridOptions};
use crate::geom::Rect;
use crate::spatial::SpatialIndex;
use crate::storage::PageDevice;
use crate::{Error, Result};

/// The grid-file kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GridKind {
    /// The two-level Grid File: GFFM's in-place buckets behind an LRU buffer
    /// that writes each dirty page on its own (a cold list of one page).
    Grid,
    /// GFFM: in-place buckets, hot/cold buffers writing in batches.
    Gffm,
    /// LB-Grid: log-buckets and the BTT.
    #[serde(rename = "lbgrid")]
    LbGrid,
    /// H-Grid: GFFM with hot-region placement on a hybrid device.
    #[serde(rename = "hgrid")]
    HGrid,
}

impl GridKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [GridKind; 4] = [
        GridKind::Grid,
        GridKind::Gffm,
        GridKind::LbGrid,
        GridKind::HGrid,
    ];

    /// The kind's name (`grid`, `gffm`, `lbgrid`, `hgrid`).
    pub fn name(self) -> &'static str {
        match self {
            GridKind::Grid => "grid",
            GridKind::Gffm => "gffm",
            GridKind::LbGrid => "lbgrid",
            GridKind::HGrid => "hgrid",
        }
    }

    /// The kind named `name` (any case), if it is one.
    pub fn of(name: &str) -> Option<GridKind> {
        GridKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for GridKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a user sets of a grid file (every field but the kind has a default).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridSettings {
    /// Which grid file.
    pub kind: GridKind,
    /// Queries run the batched algorithms (Algorithms 6–8 of the batch
    /// paper; the default) or read one page at a time.
    pub batched: bool,
    /// Share of the memory budget given to directory pages (0.75, as in the
    /// thesis' final runs).
    pub dir_share: f64,
    /// Pages of each cold list, the size of every batch write (`None`: an
    /// eighth of the budget, at most 128 pages; always 1 for kind `grid`).
    pub cold_pages: Option<usize>,
    /// H-Grid's selectivity constant s (`None`: 1.5); H-Grid only.
    pub s: Option<f64>,
    /// H-Grid's special case, every sub-directory on the fast tier
    /// (`None`: off); H-Grid only.
    pub special: Option<bool>,
}

impl GridSettings {
    /// The defaults of kind `kind`.
    pub fn new(kind: GridKind) -> GridSettings {
        GridSettings {
            kind,
            batched: true,
            dir_share: 0.75,
            cold_pages: None,
            s: None,
            special: None,
        }
    }
}

/// A grid file's settings with its domain and memory budget, fixed when the
/// index is made and recorded in its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridConfig {
    /// The user's settings.
    #[serde(flatten)]
    pub settings: GridSettings,
    /// The declared domain: every point must lie inside.
    pub domain: Rect,
    /// The memory budget of the grid file's two buffers, in bytes.
    pub buffer_bytes: usize,
}

impl GridConfig {
    /// The grid file's options on pages of `page_size` bytes: the buffer
    /// budget in pages divided between directory pages (`dir_share`) and
    /// bucket pages, each buffer a hot list and a cold list of `cold_pages`
    /// (one page for kind `grid`, which therefore writes page by page).
    /// Every parameter checked; the error names the bad one.
    pub fn options(&self, page_size: usize) -> Result<GridOptions> {
        let s = &self.settings;
        let pages = self.buffer_bytes / page_size.max(1);
        let share = s.dir_share;
        if !(share > 0.0 && share < 1.0) {
            return Err(Error::invalid(format!(
                "grid dir_share {share} must lie in (0, 1)"
            )));
        }
        let cold = match (s.kind, s.cold_pages) {
            (GridKind::Grid, _) => 1,
            (_, Some(c)) => c,
            (_, None) => (pages / 8).clamp(1, 128),
        };
        let dir_total = ((pages as f64) * share).round() as usize;
        let bucket_total = pages.saturating_sub(dir_total);
        if dir_total < cold + 2 || bucket_total < cold + 2 {
            return Err(Error::invalid(format!(
                "a buffer of {} bytes ({pages} pages of {page_size} bytes) is too small for \
                 grid buffers of 2 hot and {cold} cold pages each",
                self.buffer_bytes
            )));
        }
        let mut o = GridOptions::new(self.domain);
        if s.kind == GridKind::HGrid {
            let d = HybridOptions::default();
            o.hybrid = Some(HybridOptions {
                s: s.s.unwrap_or(d.s),
                special: s.special.unwrap_or(d.special),
            });
        } else if s.s.is_some() || s.special.is_some() {
            return Err(Error::invalid(
                "grid parameters s and special apply to kind hgrid only",
            ));
        }
        o.dir_hot_pages = dir_total - cold;
        o.bucket_hot_pages = bucket_total - cold;
        o.cold_pages = cold;
        o.validate()?;
        Ok(o)
    }

    /// Creates an empty grid file of this configuration on `dev`
    /// (overwriting what it holds).
    pub fn create(&self, dev: Arc<dyn PageDevice>) -> Result<Box<dyn SpatialIndex>> {
        let opts = self.options(dev.page_size())?;
        let (kind, batched) = (self.settings.kind.name(), self.settings.batched);
        Ok(match self.settings.kind {
            GridKind::LbGrid => {
                Box::new(GridIndex::<LogBuckets>::create(kind, dev, opts, batched)?)
            }
            _ => Box::new(GridIndex::<InPlaceBuckets>::create(
                kind, dev, opts, batched,
            )?),
        })
    }

    /// Reopens the grid file of this configuration that the last checkpoint
    /// left on `dev`.
    pub fn open(&self, dev: Arc<dyn PageDevice>) -> Result<Box<dyn SpatialIndex>> {
        let opts = self.options(dev.page_size())?;
        let (kind, batched) = (self.settings.kind.name(), self.settings.batched);
        Ok(match self.settings.kind {
            GridKind::LbGrid => Box::new(GridIndex::<LogBuckets>::open(kind, dev, opts, batched)?),
            _ => Box::new(GridIndex::<InPlaceBuckets>::open(kind, dev, opts, batched)?),
        })
    }

    /// [`GridConfig::open`] for a reader (`GridIndex::open_read_only`):
    /// changes are refused and queries never write, as a device opened
    /// read-only (a rollback journal's reader) requires.
    pub fn open_read_only(&self, dev: Arc<dyn PageDevice>) -> Result<Box<dyn SpatialIndex>> {
        let opts = self.options(dev.page_size())?;
        let (kind, batched) = (self.settings.kind.name(), self.settings.batched);
        Ok(match self.settings.kind {
            GridKind::LbGrid => Box::new(GridIndex::<LogBuckets>::open_read_only(
                kind, dev, opts, batched,
            )?),
            _ => Box::new(GridIndex::<InPlaceBuckets>::open_read_only(
                kind, dev, opts, batched,
            )?),
        })
    }
}
