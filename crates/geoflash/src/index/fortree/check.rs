//! Structural check of a FOR-tree: units at consistent levels, node and
//! unit fill bounds, parent rectangles equal to the unit MBRs, keys unique
//! in a unit, no page reachable twice, the ONT naming only reachable units,
//! and the record count.
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::Fortree;
use crate::geom::Rect;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// What `Fortree::check` found in a sound tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FortreeReport {
    /// Number of levels.
    pub height: u16,
    /// Records counted in the leaves.
    pub records: u64,
    /// Units per level (index 0: leaf units).
    pub units_per_level: Vec<u64>,
    /// Nodes (P-nodes and O-nodes) per level.
    pub nodes_per_level: Vec<u64>,
    /// O-nodes in the tree.
    pub overflow_nodes: u64,
    /// The longest overflow chain (O-nodes of one unit).
    pub longest_chain: u64,
    /// O-nodes of the root unit.
    pub root_chain: u64,
}

impl<S: NodeStore> Fortree<S> {
    /// Walks the whole tree and checks every structural invariant; the
    /// first violation is an [`Error::Corrupt`] naming the page and the
    /// problem.
    pub fn check(&mut self) -> Result<FortreeReport> {
        let h = usize::from(self.height);
        let mut report = FortreeReport {
            height: self.height,
            units_per_level: vec![0; h],
            nodes_per_level: vec![0; h],
            ..FortreeReport::default()
        };
        let Some(root) = self.root else {
            if self.height != 0 || self.records != 0 || !self.ont.is_empty() {
                return Err(Error::corrupt(
                    None,
                    format!(
                        "no root but height {}, {} records, {} ONT entries",
                        self.height,
                        self.records,
                        self.ont.len()
                    ),
                ));
            }
            return Ok(report);
        };
        let top = self
            .height
            .checked_sub(1)
            .ok_or_else(|| Error::corrupt(Some(root), "a root but height 0"))?;
        report.root_chain = self.chain_len(root) as u64;
        let mut seen = HashSet::new();
        let mut primaries = HashSet::new();
        let walked = self.check_unit(root, top, None, &mut seen, &mut primaries, &mut report);
        self.after_query();
        walked?;
        for (p, e) in &self.ont {
            if !primaries.contains(p) {
                return Err(Error::corrupt(Some(*p), "ONT entry of an unreachable unit"));
            }
            if e.overflow.is_empty() {
                return Err(Error::corrupt(Some(*p), "ONT entry without O-nodes"));
            }
        }
        if report.records != self.records {
            return Err(Error::corrupt(
                None,
                format!(
                    "{} records in the leaves but {} in the metadata",
                    report.records, self.records
                ),
            ));
        }
        Ok(report)
    }

    fn check_unit(
        &mut self,
        primary: PageId,
        level: u16,
        parent_rect: Option<Rect>,
        seen: &mut HashSet<PageId>,
        primaries: &mut HashSet<PageId>,
        report: &mut FortreeReport,
    ) -> Result<()> {
        primaries.insert(primary);
        let nodes = self.unit(primary)?;
        let max = self.config.max_entries;
        let chain = nodes.len().saturating_sub(1) as u64;
        report.overflow_nodes += chain;
        report.longest_chain = report.longest_chain.max(chain);
        if let Some(u) = report.units_per_level.get_mut(usize::from(level)) {
            *u += 1;
        }
        let mut keys = HashSet::new();
        let mut total = 0usize;
        for (i, (id, node)) in nodes.iter().enumerate() {
            if !seen.insert(*id) {
                return Err(Error::corrupt(Some(*id), "page reachable twice"));
            }
            if let Some(n) = report.nodes_per_level.get_mut(usize::from(level)) {
                *n += 1;
            }
            if node.level != level {
                return Err(Error::corrupt(
                    Some(*id),
                    format!(
                        "node at level {} where level {level} is expected",
                        node.level
                    ),
                ));
            }
            if node.entries.len() > max {
                return Err(Error::corrupt(
                    Some(*id),
                    format!("{} entries, more than M = {max}", node.entries.len()),
                ));
            }
            if i > 0 && node.entries.is_empty() {
                return Err(Error::corrupt(Some(*id), "empty O-node"));
            }
            if !node.entries.is_sorted_by(|a, b| a.key < b.key) {
                return Err(Error::corrupt(Some(*id), "keys not strictly ascending"));
            }
            for e in &node.entries {
                if !keys.insert(e.key) {
                    return Err(Error::corrupt(
                        Some(*id),
                        format!("key {} twice in one unit", e.key),
                    ));
                }
            }
            total += node.entries.len();
        }
        if parent_rect.is_some() && total < self.config.min_entries {
            return Err(Error::corrupt(
                Some(primary),
                format!(
                    "unit with {total} entries, fewer than m = {}",
                    self.config.min_entries
                ),
            ));
        }
        if parent_rect.is_none() && level > 0 && total < 2 {
            return Err(Error::corrupt(
                Some(primary),
                "internal root unit with fewer than 2 entries",
            ));
        }
        let mbr = Rect::union_all(
            nodes
                .iter()
                .flat_map(|(_, n)| n.entries.iter().map(|e| &e.rect)),
        );
        if let Some(pr) = parent_rect {
            if mbr != Some(pr) {
                return Err(Error::corrupt(
                    Some(primary),
                    format!("parent rectangle {pr:?} differs from the unit's MBR {mbr:?}"),
                ));
            }
        }
        if level == 0 {
            report.records += total as u64;
            return Ok(());
        }
        let children: Vec<(PageId, Rect)> = nodes
            .iter()
            .flat_map(|(_, n)| n.entries.iter().map(|e| (e.key, e.rect)))
            .collect();
        for (c, r) in children {
            self.check_unit(c, level - 1, Some(r), seen, primaries, report)?;
        }
        Ok(())
    }
}
