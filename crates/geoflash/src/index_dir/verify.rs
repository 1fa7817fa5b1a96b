//! [`Index::verify`]: the structure's own check, whatever the structure,
//! so that a front end asks the index rather than its kind.
use serde::Serialize;

use super::Index;
use crate::{Error, Result};

/// What [`Index::verify`] found in a structure whose every invariant
/// holds (checksums of every page and the structure's invariants).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verified {
    /// Objects held.
    pub records: u64,
    /// Levels of a tree (2 for a grid file: directory and buckets).
    pub height: u16,
    /// Pages the structure uses (its nodes, or a grid file's pages).
    pub nodes: u64,
    /// The FOR-tree's overflow nodes (`None`: another structure).
    pub overflow_nodes: Option<u64>,
    /// The structure's own report (its fields depend on the structure).
    pub report: serde_json::Value,
}

impl Index {
    /// Checks every page and every structural invariant of the structure
    /// the index holds; an error (a defect, or a page that does not read)
    /// says what failed.
    pub fn verify(&self) -> Result<Verified> {
        let s = self.structure();
        if let Some(mut f) = s.fortree() {
            let r = f.check()?;
            return Ok(Verified {
                records: r.records,
                height: r.height,
                nodes: r.nodes_per_level.iter().sum(),
                overflow_nodes: Some(r.overflow_nodes),
                report: json(&r)?,
            });
        }
        if let Some(x) = s.xbr() {
            let r = x.check()?;
            return Ok(Verified {
                records: r.points,
                height: x.height(),
                nodes: r.nodes,
                overflow_nodes: None,
                report: json(&r)?,
            });
        }
        if let Some(points) = s.verify_grid() {
            let records = points?;
            let nodes = s.pages_in_use();
            return Ok(Verified {
                records,
                height: 2,
                nodes,
                overflow_nodes: None,
                report: serde_json::json!({"points": records, "pages": nodes}),
            });
        }
        let r = self.tree()?.check()?;
        Ok(Verified {
            records: r.records,
            height: r.height,
            nodes: r.nodes_per_level.iter().sum(),
            overflow_nodes: None,
            report: json(&r)?,
        })
    }
}

/// A check report as JSON.
fn json(r: &impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(r).map_err(|e| Error::invalid(format!("check report: {e}")))
}
