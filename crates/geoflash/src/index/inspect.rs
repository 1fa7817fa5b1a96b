//! Inspection of a tree: height, nodes and fill per level, coverage and
//! overlap of the node rectangles per level — the numbers that explain why
//! one configuration reads more pages than another.
use serde::{Deserialize, Serialize};

use super::RTree;
use crate::geom::Rect;
use crate::store::NodeStore;
use crate::Result;

/// Buckets of the fill-factor histogram: `[0, 0.1), [0.1, 0.2), …, [0.9, 1.0]`.
pub const FILL_BUCKETS: usize = 10;

/// Figures of one level of the tree (level 0: leaves).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelReport {
    /// Level (0 = leaves).
    pub level: u16,
    /// Nodes at this level.
    pub nodes: u64,
    /// Entries in these nodes.
    pub entries: u64,
    /// Smallest fill factor (entries ÷ M).
    pub fill_min: f64,
    /// Mean fill factor.
    pub fill_mean: f64,
    /// Largest fill factor.
    pub fill_max: f64,
    /// Nodes per fill-factor bucket (see [`FILL_BUCKETS`]).
    pub fill_histogram: [u64; FILL_BUCKETS],
    /// Sum of the areas of the nodes' rectangles.
    pub coverage: f64,
    /// Sum over pairs of nodes of the area of their intersection.
    pub overlap: f64,
}

/// What `RTree::inspect` reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InspectReport {
    /// Number of levels.
    pub height: u16,
    /// Records.
    pub records: u64,
    /// Maximum entries per node, M.
    pub max_entries: usize,
    /// Minimum entries per node, m.
    pub min_entries: usize,
    /// Total nodes (= pages holding nodes).
    pub nodes: u64,
    /// MBR of the whole tree.
    pub bounds: Option<Rect>,
    /// One report per level, leaves first.
    pub levels: Vec<LevelReport>,
}

/// Sum of pairwise intersection areas, by a sweep over ascending `min_x`.
fn total_overlap(rects: &mut [Rect]) -> f64 {
    rects.sort_by(|a, b| a.min_x().total_cmp(&b.min_x()));
    let mut sum = 0.0;
    for (i, a) in rects.iter().enumerate() {
        for b in rects.iter().skip(i + 1) {
            if b.min_x() > a.max_x() {
                break;
            }
            sum += a.overlap_area(b);
        }
    }
    sum
}

impl<S: NodeStore> RTree<S> {
    /// Walks the whole tree (every node read once through the store) and reports it.
    pub fn inspect(&self) -> Result<InspectReport> {
        let meta = self.store.meta();
        let big_m = self.params.max_entries.max(1);
        let mut report = InspectReport {
            height: meta.height,
            records: meta.records,
            max_entries: self.params.max_entries,
            min_entries: self.params.min_entries,
            ..InspectReport::default()
        };
        let Some(root) = meta.root else {
            return Ok(report);
        };
        let mut per_level: Vec<(LevelReport, Vec<Rect>)> = (0..meta.height)
            .map(|l| {
                (
                    LevelReport {
                        level: l,
                        fill_min: f64::INFINITY,
                        ..LevelReport::default()
                    },
                    Vec::new(),
                )
            })
            .collect();
        let mut frontier = vec![root];
        while let Some(id) = frontier.pop() {
            let node = self.store.get(id)?;
            let Some(mbr) = Rect::union_all(node.entries.iter().map(|e| &e.rect)) else {
                continue;
            };
            if id == root {
                report.bounds = Some(mbr);
            }
            if let Some((lr, rects)) = per_level.get_mut(usize::from(node.level)) {
                let fill = node.entries.len() as f64 / big_m as f64;
                lr.nodes += 1;
                lr.entries += node.entries.len() as u64;
                lr.fill_min = lr.fill_min.min(fill);
                lr.fill_max = lr.fill_max.max(fill);
                lr.fill_mean += fill;
                let bucket = ((fill * FILL_BUCKETS as f64) as usize).min(FILL_BUCKETS - 1);
                if let Some(b) = lr.fill_histogram.get_mut(bucket) {
                    *b += 1;
                }
                lr.coverage += mbr.area();
                rects.push(mbr);
            }
            if node.level > 0 {
                frontier.extend(node.entries.iter().map(|e| e.key));
            }
        }
        for (mut lr, mut rects) in per_level {
            if lr.nodes > 0 {
                lr.fill_mean /= lr.nodes as f64;
            } else {
                lr.fill_min = 0.0;
            }
            lr.overlap = total_overlap(&mut rects);
            report.nodes += lr.nodes;
            report.levels.push(lr);
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexKind, TreeParams};
    use crate::store::mem::MemStore;

    #[test]
    fn counts_match_the_checker_and_overlap_matches_brute_force() {
        let mut t = RTree::create(MemStore::new(), TreeParams::new(IndexKind::RStar, 6)).unwrap();
        for i in 0..500u64 {
            let x = (i * 37 % 101) as f64;
            let y = (i * 53 % 89) as f64;
            t.insert(i, Rect::new(x, y, x + 3.0, y + 2.0).unwrap())
                .unwrap();
        }
        let check = t.check().unwrap();
        let r = t.inspect().unwrap();
        assert_eq!(r.height, check.height);
        assert_eq!(r.records, 500);
        let nodes: Vec<u64> = r.levels.iter().map(|l| l.nodes).collect();
        assert_eq!(nodes, check.nodes_per_level);
        assert_eq!(r.levels[0].entries, 500);
        for l in &r.levels {
            assert_eq!(l.fill_histogram.iter().sum::<u64>(), l.nodes);
            assert!(l.fill_min <= l.fill_mean && l.fill_mean <= l.fill_max && l.fill_max <= 1.0);
        }
        // brute-force overlap of the leaves
        let mut leaves = Vec::new();
        let mut stack = vec![t.store().meta().root.unwrap()];
        while let Some(id) = stack.pop() {
            let n = t.store().get(id).unwrap();
            if n.level == 0 {
                leaves.push(Rect::union_all(n.entries.iter().map(|e| &e.rect)).unwrap());
            } else {
                stack.extend(n.entries.iter().map(|e| e.key));
            }
        }
        let mut brute = 0.0;
        for i in 0..leaves.len() {
            for j in i + 1..leaves.len() {
                brute += leaves[i].overlap_area(&leaves[j]);
            }
        }
        assert!((r.levels[0].overlap - brute).abs() <= 1e-9 * brute.max(1.0));
    }
}
