//! Structural invariant checker: balanced height, node levels, fill bounds
//! (except the root), each parent rectangle equal to the union of its
//! child's entries, keys unique and ascending in a node, no page reachable
//! twice, and the record count of the metadata.
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::ops::mbr;
use super::RTree;
use crate::geom::Rect;
use crate::storage::PageId;
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
    ) -> Result<()> {
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
        if level == 0 {
            report.records += n as u64;
            return Ok(());
        }
        for e in &node.entries {
            self.check_node(e.key, level - 1, Some(e.rect), seen, report)?;
        }
        Ok(())
    }
}
