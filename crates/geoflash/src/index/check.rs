//! Structural invariant checker: balanced height, node levels, fill bounds
//! (except the root), each parent rectangle equal to the union of its
//! child's entries, keys unique and ascending in a node, object ids unique
//! in the tree, no page reachable twice, and the record count of the metadata. In a Hilbert R-tree also:
//! each record carries its Hilbert value, each internal entry the largest
//! value of its subtree, and siblings are in Hilbert (B+-tree) order.
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::hilbert::{hilbert_order, record_value};
use super::ops::mbr;
use super::params::IndexKind;
use super::RTree;
use crate::geom::Rect;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// What [`RTree::check`] found in a sound tree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeReport {
    /// Number of levels.
    pub height: u16,
    /// Records counted in the leaves.
    pub records: u64,
    /// Nodes per level (index 0: leaves).
    pub nodes_per_level: Vec<u64>,
    /// Entries per level (index 0: records).
    pub entries_per_level: Vec<u64>,
}

impl<S: NodeStore> RTree<S> {
    /// Walks the whole tree and checks every structural invariant; the first
    /// violation is an [`Error::Corrupt`] naming the page and the problem.
    pub fn check(&self) -> Result<TreeReport> {
        let meta = self.store.meta();
        let mut report = TreeReport {
            height: meta.height,
            nodes_per_level: vec![0; usize::from(meta.height)],
            entries_per_level: vec![0; usize::from(meta.height)],
            ..TreeReport::default()
        };
        let Some(root) = meta.root else {
            if meta.height != 0 || meta.records != 0 {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "no root but height {} and {} records",
                        meta.height, meta.records
                    ),
                ));
            }
            return Ok(report);
        };
        if meta.height == 0 {
            return Err(Error::corrupt(Some(root), "a root but height 0"));
        }
        let mut seen = HashSet::new();
        self.check_node(root, meta.height - 1, None, &mut seen, &mut report)?;
        // Object ids unique across leaves (a second walk, through the store's cache).
        self.collect_ids()?;
        if report.records != meta.records {
            return Err(Error::corrupt(
                None,
                format!(
                    "the leaves hold {} records but the metadata says {}",
                    report.records, meta.records
                ),
            ));
        }
        Ok(report)
    }

    fn check_node(
        &self,
        id: PageId,
        level: u16,
        parent_rect: Option<Rect>,
        seen: &mut HashSet<PageId>,
        report: &mut TreeReport,
    ) -> Result<(u64, u64)> {
        let bad = |reason: String| Err(Error::corrupt(Some(id), reason));
        if !seen.insert(id) {
            return bad("page reachable twice".into());
        }
        let node = self.store.get(id)?;
        if node.level != level {
            return bad(format!(
                "node at level {} where level {level} was expected (unbalanced)",
                node.level
            ));
        }
        let n = node.entries.len();
        let (m, big_m) = (self.params.min_entries, self.params.max_entries);
        let is_root = parent_rect.is_none();
        if n > big_m {
            return bad(format!("{n} entries, more than M = {big_m}"));
        }
        if is_root {
            if n == 0 || (level > 0 && n < 2) {
                return bad(format!("root at level {level} with {n} entries"));
            }
        } else if n < m {
            return bad(format!("{n} entries, fewer than m = {m}"));
        }
        if node
            .entries
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.key >= b.key))
        {
            return bad("keys not unique and ascending".into());
        }
        if let (Some(pr), Some(r)) = (parent_rect, mbr(&node.entries)) {
            if pr != r {
                return bad(format!(
                    "parent rectangle {pr:?} differs from the union of the entries {r:?}"
                ));
            }
        }
        let l = usize::from(level);
        if let Some(c) = report.nodes_per_level.get_mut(l) {
            *c += 1;
        }
        if let Some(c) = report.entries_per_level.get_mut(l) {
            *c += n as u64;
        }
        let hilbert = self.params.kind == IndexKind::Hilbert;
        let mut range: Option<(u64, u64)> = None;
        let mut widen = |lo: u64, hi: u64| {
            range = Some(range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        };
        if level == 0 {
            for e in &node.entries {
                widen(e.payload, e.payload);
            }
            report.records += n as u64;
            if hilbert {
                let d = self.domain()?;
                if let Some(e) = node
                    .entries
                    .iter()
                    .find(|e| e.payload != record_value(&d, &e.rect, e.key))
                {
                    return bad(format!("record {} carries a wrong Hilbert value", e.key));
                }
            }
        } else {
            let mut children: Vec<_> = node.entries.clone();
            children.sort_by(hilbert_order);
            // Children that tie on their LHV (records of equal Hilbert
            // value: ids equal modulo 2^32 in one cell) form a group whose
            // first may hold values below the LHV and whose others hold the
            // LHV alone (`RTree::sort_entries`): each child's smallest value
            // is checked against the LHV of the group before its own, and at
            // most one child of a group may hold a smaller value.
            let (mut group, mut prev_max): (Option<u64>, Option<u64>) = (None, None);
            let mut below = 0usize;
            for e in &children {
                let (lo, hi) = self.check_node(e.key, level - 1, Some(e.rect), seen, report)?;
                widen(lo, hi);
                if hilbert {
                    if e.payload != hi {
                        return bad(format!(
                            "entry of child {} holds LHV {} but the subtree's largest Hilbert value is {hi}",
                            e.key, e.payload
                        ));
                    }
                    if group != Some(hi) {
                        prev_max = group;
                        group = Some(hi);
                        below = 0;
                    }
                    below += usize::from(lo < hi);
                    if prev_max.is_some_and(|p| p > lo) || below > 1 {
                        return bad(format!("children out of Hilbert order at child {}", e.key));
                    }
                }
            }
        }
        if !hilbert && node.entries.iter().any(|e| e.payload != 0) {
            return bad("a payload in an R-tree without payloads".into());
        }
        Ok(range.unwrap_or((0, 0)))
    }
}
