//! [`Index::inspect`], [`Index::nearest_to`] and [`Index::leaves`]: what a
//! front end shows of a structure or asks of an R-tree-family tree, through
//! the index, so that no front end reaches for the structure's own type.
use serde::Serialize;

use super::Index;
use crate::geom::Rect;
use crate::index::fortree::{FortreeConfig, FortreeReport};
use crate::index::inspect::InspectReport;
use crate::index::query::{KnnResult, Leaf};
use crate::index::xbr::{XbrConfig, XbrReport};
use crate::Result;

/// What [`Index::inspect`] reports, by structure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Inspection {
    /// An R-tree-family tree: height, and nodes, fill, coverage and
    /// overlap per level.
    Tree(InspectReport),
    /// An xBR+-tree: its check's figures, its parameters and its height.
    Xbr {
        /// What the structural check counted.
        report: XbrReport,
        /// Domain and M.
        config: XbrConfig,
        /// Levels.
        height: u16,
    },
    /// A FOR-tree: its check's figures, the units with overflow nodes and
    /// its parameters.
    Fortree {
        /// What the structural check counted.
        report: FortreeReport,
        /// Units in the overflow-node table.
        ont_units: usize,
        /// M, m, the buffer and the merge-back settings.
        config: FortreeConfig,
    },
}

impl Index {
    /// Walks the whole structure (every node read once) and reports it;
    /// an error for a grid file, which has no tree to inspect, and for a
    /// page that does not read.
    pub fn inspect(&self) -> Result<Inspection> {
        let s = self.structure();
        if let Some(mut f) = s.fortree() {
            let report = f.check().map_err(|e| self.locate(e))?;
            return Ok(Inspection::Fortree {
                report,
                ont_units: f.ont().len(),
                config: *f.config(),
            });
        }
        if let Some(x) = s.xbr() {
            return Ok(Inspection::Xbr {
                report: x.check().map_err(|e| self.locate(e))?,
                config: *x.config(),
                height: x.height(),
            });
        }
        let tree = s.rtree("inspect")?;
        let report = tree.inspect().map_err(|e| self.locate(e))?;
        Ok(Inspection::Tree(report))
    }

    /// The `k` records nearest to rectangle `query` by rectangle distance
    /// (and with `ties` every record at the k-th distance), best first: an
    /// R-tree-family index only. A point query of any structure is
    /// [`Index::nearest`].
    pub fn nearest_to(&self, query: Rect, k: usize, ties: bool) -> Result<KnnResult> {
        self.ask(|t| t.rtree("nearest to a rectangle")?.nearest_to(query, k, ties))
    }

    /// The leaves of an R-tree-family index, left to right: each leaf's
    /// page, the keys of its entries and its rectangle.
    pub fn leaves(&self) -> Result<Vec<Leaf>> {
        self.ask(|t| t.rtree("listing the leaves")?.leaves())
    }
}
