//! The xBR+-tree's structural invariants, checked by one walk.
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::quad::{self, Quadrant};
use super::XbrTree;
use crate::geom::Rect;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// What `XbrTree::check` found in a sound tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct XbrReport {
    /// Nodes.
    pub nodes: u64,
    /// Leaves.
    pub leaves: u64,
    /// Points.
    pub points: u64,
    /// Mean entries per node ÷ M.
    pub fill: f64,
}

impl<S: NodeStore> XbrTree<S> {
    /// Checks every invariant: levels, node sizes, each entry's quadrant
    /// inside its node's and distinct within the node, a remainder entry in
    /// every internal node, DBRs equal to the MBR of the points below (the
    /// quadrant's rectangle and the empty flag for a subtree without
    /// points), every point routed to the leaf that holds it, ids unique,
    /// and the record count. A defect is an [`Error::Corrupt`] naming it.
    pub fn check(&self) -> Result<XbrReport> {
        let meta = self.store.meta();
        let mut report = XbrReport::default();
        let mut ids = HashSet::new();
        let mut entries_total = 0u64;
        if let Some(root) = meta.root {
            let mut leaves = Vec::new();
            self.check_node(
                root,
                Quadrant::ROOT,
                meta.height.saturating_sub(1),
                &mut report,
                &mut entries_total,
                &mut leaves,
            )?;
            for (page, points) in leaves {
                for (id, p) in points {
                    if !ids.insert(id) {
                        return Err(Error::corrupt(
                            Some(page),
                            format!("object id {id} appears twice"),
                        ));
                    }
                    let code = self.domain.code(&p)?;
                    let path = self.descend(root, code)?;
                    if path.last().map(|s| s.id) != Some(page) {
                        return Err(Error::corrupt(
                            Some(page),
                            format!(
                                "point ({}, {}) of this leaf routes to another leaf",
                                p.x, p.y
                            ),
                        ));
                    }
                }
            }
        } else if meta.height != 0 {
            return Err(Error::corrupt(None, "a tree without root has a height"));
        }
        if report.points != meta.records {
            return Err(Error::corrupt(
                meta.root,
                format!(
                    "{} points in the leaves, {} in the metadata",
                    report.points, meta.records
                ),
            ));
        }
        if report.nodes > 0 {
            report.fill =
                entries_total as f64 / report.nodes as f64 / self.config.max_entries as f64;
        }
        Ok(report)
    }

    /// Checks node `page` of quadrant `quad` expected at `level`; returns
    /// the DBR of its points (`None` without points).
    fn check_node(
        &self,
        page: PageId,
        quad: Quadrant,
        level: u16,
        report: &mut XbrReport,
        entries_total: &mut u64,
        leaves: &mut Vec<(PageId, Vec<(u64, crate::geom::Point)>)>,
    ) -> Result<Option<Rect>> {
        let bad = |msg: String| Err(Error::corrupt(Some(page), msg));
        let node = self.node(page)?;
        if node.level != level {
            return bad(format!(
                "node at level {} where {level} was expected",
                node.level
            ));
        }
        if node.entries.len() > self.config.max_entries {
            return bad(format!(
                "{} entries, M = {}",
                node.entries.len(),
                self.config.max_entries
            ));
        }
        report.nodes += 1;
        *entries_total += node.entries.len() as u64;
        if level == 0 {
            report.leaves += 1;
            report.points += node.entries.len() as u64;
            let points = node
                .entries
                .iter()
                .map(|e| (e.key, quad::entry_point(e)))
                .collect();
            leaves.push((page, points));
            return quad::dbr_of(0, &node.entries, page);
        }
        let mut quads = HashSet::new();
        let mut union: Option<Rect> = None;
        for e in &node.entries {
            let c = quad::child_ref(e, page)?;
            if !quad.contains(&c.quad) || !quads.insert(c.quad) {
                return bad(format!(
                    "entry quadrant {:?} outside the node's {quad:?} or repeated",
                    c.quad
                ));
            }
            let below =
                self.check_node(c.page, c.quad, level - 1, report, entries_total, leaves)?;
            let expected = below.unwrap_or_else(|| self.domain.rect_of(&c.quad));
            if below.is_some() != c.dbr.is_some() || e.rect != expected {
                return bad(format!(
                    "entry for page {} has DBR {:?} (empty: {}) but its subtree's is {below:?}",
                    c.page,
                    e.rect,
                    c.dbr.is_none()
                ));
            }
            if let Some(b) = below {
                union = Some(union.map_or(b, |u| u.union(&b)));
            }
        }
        if !quads.contains(&quad) {
            return bad(format!(
                "no remainder entry for the node's quadrant {quad:?}"
            ));
        }
        Ok(union)
    }
}
