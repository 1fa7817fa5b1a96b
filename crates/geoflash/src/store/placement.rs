//! Placement of tree nodes on the tiers of a two-tier device: the store
//! layer's side of [`PageDevice::hint_tier`].
//!
//! A store knows each node's level when it writes it (the index algorithms
//! pass it to `create` and `modify`); a [`Placement`] maps the level to a
//! tier and the store hints the device before every batch write. The index
//! algorithms never learn about tiers, and the device never learns what a
//! page holds. On a device of one tier the hints are ignored, so a placement
//! changes nothing there.
//!
//! The sHR-tree of Fevgas' thesis (§4.4.2) is [`Placement::FastFromLevel`]`(1)`:
//! every internal node on the fast (3D XPoint) tier, the leaves on flash.
//! Implemented by every store: [`PlainStore`](super::plain::PlainStore),
//! [`EfindStore`](super::efind::EfindStore) and
//! [`FastStore`](super::fast::FastStore) hint each batch of nodes they
//! write (flushes, checkpoints, bulk loads), and the latter two also the
//! page images their restart writes back from the log
//! ([`Placement::hint_images`]; open them with `open_with_placement` so
//! that restart knows the placement); their logs are never hinted (they
//! stay on the slow tier). The device keeps the
//! resulting placement, across processes for an index directory on a
//! `hybrid:` device (see [`crate::storage::hybrid`]).
use serde::{Deserialize, Serialize};

use crate::storage::{PageDevice, PageId, Tier};
use crate::{Error, Result};

/// Which nodes a store hints to the fast tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// No hints: every node where the device puts it (on a hybrid device,
    /// the slow tier).
    #[default]
    None,
    /// Nodes at this level or above on the fast tier, the others on the
    /// slow one (`1`: the sHR-tree; `0`: every node).
    FastFromLevel(u16),
}

impl Placement {
    /// The sHR-tree's placement: every internal node on the fast tier.
    pub const SHR_TREE: Placement = Placement::FastFromLevel(1);

    /// Parses `none`, `internal-fast` (the sHR-tree) or `fast-from-level=N`.
    pub fn parse(s: &str) -> Result<Placement> {
        match s.trim() {
            "none" => Ok(Placement::None),
            "internal-fast" | "shrtree" => Ok(Placement::SHR_TREE),
            other => other
                .strip_prefix("fast-from-level=")
                .and_then(|n| n.parse().ok())
                .map(Placement::FastFromLevel)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "unknown placement {other:?}: use none, internal-fast or fast-from-level=N"
                    ))
                }),
        }
    }

    /// The tier a node of `level` is hinted to (`None`: no hint).
    pub fn tier(self, level: u16) -> Option<Tier> {
        match self {
            Placement::None => None,
            Placement::FastFromLevel(l) if level >= l => Some(Tier::Fast),
            Placement::FastFromLevel(_) => Some(Tier::Slow),
        }
    }

    /// Hints `dev` with the tier of each `(page, level)` about to be written
    /// (two calls at most: the fast pages and the slow ones).
    pub fn hint(
        self,
        dev: &dyn PageDevice,
        nodes: impl IntoIterator<Item = (PageId, u16)>,
    ) -> Result<()> {
        if self == Placement::None {
            return Ok(());
        }
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        for (p, level) in nodes {
            match self.tier(level) {
                Some(Tier::Fast) => fast.push(p),
                Some(Tier::Slow) => slow.push(p),
                None => {}
            }
        }
        for (pages, tier) in [(fast, Tier::Fast), (slow, Tier::Slow)] {
            if !pages.is_empty() {
                dev.hint_tier(&pages, tier)?;
            }
        }
        Ok(())
    }
}

impl Placement {
    /// Hints `dev` with the tier of each page image about to be written
    /// back (`(page, bytes)`: a node page as a store wrote it, e.g. restored
    /// from the log by restart), by the level in the page's header. An
    /// image whose header does not decode is an error naming its page.
    pub fn hint_images<'a>(
        self,
        dev: &dyn PageDevice,
        images: impl IntoIterator<Item = (PageId, &'a [u8])>,
    ) -> Result<()> {
        if self == Placement::None {
            return Ok(());
        }
        let levels = images
            .into_iter()
            .map(|(p, bytes)| crate::page::decode_header(bytes, Some(p)).map(|h| (p, h.level)))
            .collect::<Result<Vec<_>>>()?;
        self.hint(dev, levels)
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::None => f.write_str("none"),
            Placement::FastFromLevel(1) => f.write_str("internal-fast"),
            Placement::FastFromLevel(l) => write!(f, "fast-from-level={l}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_maps_levels() {
        for s in [
            "none",
            "internal-fast",
            "fast-from-level=0",
            "fast-from-level=3",
        ] {
            assert_eq!(Placement::parse(s).unwrap().to_string(), s);
        }
        assert!(Placement::parse("everywhere").is_err());
        assert_eq!(Placement::SHR_TREE.tier(0), Some(Tier::Slow));
        assert_eq!(Placement::SHR_TREE.tier(2), Some(Tier::Fast));
        assert_eq!(Placement::None.tier(2), None);
    }

    use crate::geom::Rect;
    use crate::index::query::Predicate;
    use crate::index::IndexKind;
    use crate::config::{StoreKind, StoreSpec, StructureSpec, TreeSpec};
    use crate::index_dir::{Index, IndexOptions};
    use proptest::prelude::*;

    fn shr_options(fast_pages: u64, placement: Placement) -> IndexOptions {
        IndexOptions {
            page_size: 512,
            structure: StructureSpec::Tree(TreeSpec {
                max_entries: Some(6),
                ..TreeSpec::new(IndexKind::RStar)
            }),
            store: StoreSpec::plain(2048).with_placement(placement),
            device: format!(
                "hybrid:fast=(mem:capacity=1MiB);slow=(mem:capacity=4MiB)&fast_pages={fast_pages}"
            )
            .parse()
            .unwrap(),
            ..IndexOptions::default()
        }
    }

    /// A temporary index of `opts` holding `n` half-unit squares on a grid
    /// 20 wide (key i at (i % 20, i / 20)), checkpointed.
    fn checkpointed_grid(opts: &IndexOptions, n: u64) -> Index {
        let mut index = Index::create_temporary(opts).unwrap();
        for i in 0..n {
            let (x, y) = ((i % 20) as f64, (i / 20) as f64);
            index
                .insert(i, Rect::new(x, y, x + 0.5, y + 0.5).unwrap())
                .unwrap();
        }
        index.checkpoint().unwrap();
        index
    }

    /// (internal nodes, leaves) reachable from the root.
    fn node_pages(index: &Index) -> (Vec<PageId>, Vec<PageId>) {
        let store = index.tree().unwrap().store();
        let (mut inner, mut leaves) = (Vec::new(), Vec::new());
        let mut stack: Vec<PageId> = store.meta().root.into_iter().collect();
        while let Some(p) = stack.pop() {
            let n = store.get(p).unwrap();
            if n.level == 0 {
                leaves.push(p);
            } else {
                inner.push(p);
                stack.extend(n.entries.iter().map(|e| e.key));
            }
        }
        (inner, leaves)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(f64, f64, f64),
        Delete(usize),
        Query(f64, f64, f64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0.0..100.0f64, 0.0..100.0f64, 0.0..3.0f64).prop_map(|(x, y, s)| Op::Insert(x, y, s)),
            1 => any::<usize>().prop_map(Op::Delete),
            1 => (0.0..100.0f64, 0.0..100.0f64, 1.0..40.0f64).prop_map(|(x, y, s)| Op::Query(x, y, s)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// The sHR-tree answers like brute force whatever the fast tier's
        /// size, and after a checkpoint every internal node it holds is on
        /// the fast tier and every leaf on the slow one, unless the fast
        /// tier was too small (then the overflow is counted as fallbacks).
        #[test]
        fn shr_tree_matches_the_oracle_and_places_internal_nodes_fast(
            ops in proptest::collection::vec(op(), 1..250),
            fast_pages in prop_oneof![Just(2u64), Just(1000u64)],
        ) {
            let mut index = Index::create_temporary(&shr_options(fast_pages, Placement::SHR_TREE)).unwrap();
            let mut oracle: Vec<(u64, Rect)> = Vec::new();
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Insert(x, y, s) => {
                        let r = Rect::new(x, y, x + s, y + s).unwrap();
                        index.insert(next, r).unwrap();
                        oracle.push((next, r));
                        next += 1;
                    }
                    Op::Delete(i) if !oracle.is_empty() => {
                        let (id, r) = oracle.swap_remove(i % oracle.len());
                        index.delete(id, r).unwrap();
                    }
                    Op::Delete(_) => {}
                    Op::Query(x, y, s) => {
                        let w = Rect::new(x, y, x + s, y + s).unwrap();
                        let mut got: Vec<u64> = index.query(w, Predicate::Intersects).unwrap()
                            .hits.iter().map(|h| h.id).collect();
                        got.sort_unstable();
                        let mut want: Vec<u64> = oracle.iter()
                            .filter(|(_, r)| r.intersects(&w)).map(|(id, _)| *id).collect();
                        want.sort_unstable();
                        prop_assert_eq!(got, want);
                    }
                }
            }
            index.checkpoint().unwrap();
            let t = index.device().tiers().unwrap();
            let (inner, leaves) = node_pages(&index);
            // Nodes written since the last placement decide: internal fast
            // (as far as room allows), leaves slow.
            prop_assert!(t.fast_pages <= fast_pages);
            if fast_pages >= 1000 {
                prop_assert_eq!(t.fallbacks, 0);
                prop_assert!(t.fast_pages >= inner.len() as u64, "{:?} {}", t, inner.len());
            }
            prop_assert!(t.fast_pages <= (inner.len() + leaves.len()) as u64 + t.fast_limit);
            if inner.len() as u64 > fast_pages {
                prop_assert!(t.fallbacks > 0);
            }
            let all = Rect::new(-10.0, -10.0, 200.0, 200.0).unwrap();
            prop_assert_eq!(index.query(all, Predicate::Intersects).unwrap().hits.len(), oracle.len());
        }
    }

    #[test]
    fn internal_nodes_go_fast_leaves_slow() {
        let index = checkpointed_grid(&shr_options(1000, Placement::SHR_TREE), 400);
        let (inner, leaves) = node_pages(&index);
        assert!(inner.len() > 3 && leaves.len() > inner.len());
        let t = index.device().tiers().unwrap();
        // Freed pages left the fast tier at their trim or next write; every
        // live internal node is there, no leaf is.
        assert_eq!(t.fast_pages as usize, inner.len(), "{t:?}");
        assert!(t.fast.io.pages_written > 0 && t.slow.io.pages_written > 0);
        // Without the placement everything stays on the slow tier.
        let mut flat = Index::create_temporary(&shr_options(1000, Placement::None)).unwrap();
        for i in 0..100u64 {
            flat.insert(i, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap())
                .unwrap();
        }
        flat.checkpoint().unwrap();
        assert_eq!(flat.device().tiers().unwrap().fast_pages, 0);
    }

    /// Options for `store` and `kind` on a roomy hybrid of memory tiers
    /// (the logs of eFIND and FAST take the slow tier's last pages).
    fn store_options(store: StoreKind, kind: IndexKind, placement: Placement) -> IndexOptions {
        IndexOptions {
            structure: StructureSpec::Tree(TreeSpec {
                max_entries: Some(6),
                ..TreeSpec::new(kind)
            }),
            page_size: 512,
            store: StoreSpec::of_kind(store, 4096).with_placement(placement),
            device: "hybrid:fast=(mem:capacity=8MiB);slow=(mem:capacity=64MiB)"
                .parse()
                .unwrap(),
            hilbert_domain: (kind == IndexKind::Hilbert)
                .then(|| Rect::new(0.0, 0.0, 100.0, 100.0).unwrap()),
            ..IndexOptions::default()
        }
    }

    /// Every node reachable from the root, with its level.
    fn nodes_with_levels(index: &Index) -> Vec<(PageId, u16)> {
        let store = index.tree().unwrap().store();
        let mut out = Vec::new();
        let mut stack: Vec<PageId> = store.meta().root.into_iter().collect();
        while let Some(p) = stack.pop() {
            let n = store.get(p).unwrap();
            if n.level > 0 {
                stack.extend(n.entries.iter().map(|e| e.key));
            }
            out.push((p, n.level));
        }
        out
    }

    /// The oracle: after a checkpoint every node is on the tier its level
    /// maps to, and nothing else is on the fast tier beyond the nodes
    /// written there (the logs are never hinted).
    fn assert_placed(
        index: &Index,
        placement: Placement,
    ) -> std::result::Result<(), TestCaseError> {
        let dev = index.device();
        let nodes = nodes_with_levels(index);
        for &(p, level) in &nodes {
            let want = placement.tier(level).unwrap_or(Tier::Slow);
            prop_assert_eq!(
                dev.page_tier(p),
                Some(want),
                "page {} at level {}",
                p,
                level
            );
        }
        let t = dev.tiers().unwrap();
        prop_assert_eq!(t.fallbacks, 0);
        let fast_nodes = nodes
            .iter()
            .filter(|n| placement.tier(n.1) == Some(Tier::Fast))
            .count();
        prop_assert!(t.fast_pages >= fast_nodes as u64);
        Ok(())
    }

    fn stores_and_kinds() -> impl Strategy<Value = (StoreKind, IndexKind)> {
        (
            prop_oneof![
                Just(StoreKind::Efind),
                Just(StoreKind::Fast),
                Just(StoreKind::Plain)
            ],
            prop_oneof![
                Just(IndexKind::RTree),
                Just(IndexKind::RStar),
                Just(IndexKind::Hilbert)
            ],
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        /// Every store, on every R-tree kind, puts each node it wrote on
        /// the tier `Placement::tier(level)` gives, for inserts and deletes
        /// (flushes, checkpoint) and for a bulk load followed by inserts.
        #[test]
        fn every_store_places_each_node_by_its_level(
            (store, kind) in stores_and_kinds(),
            from_level in 0u16..3,
            pts in proptest::collection::vec((0.0..99.0f64, 0.0..99.0f64), 1..300),
            deletes in 0usize..60,
            bulk in any::<bool>(),
        ) {
            let placement = Placement::FastFromLevel(from_level);
            let opts = store_options(store, kind, placement);
            let rects: Vec<(u64, Rect)> = pts.iter().enumerate()
                .map(|(i, &(x, y))| (i as u64, Rect::new(x, y, x + 0.5, y + 0.5).unwrap()))
                .collect();
            let (loaded, rest) = rects.split_at(if bulk { rects.len() / 2 } else { 0 });
            let mut index = if loaded.is_empty() {
                Index::create_temporary(&opts).unwrap()
            } else {
                Index::bulk_load(None, &opts, loaded.to_vec(), crate::index::BulkMethod::Str, 1.0).unwrap()
            };
            for &(id, r) in rest {
                index.insert(id, r).unwrap();
            }
            for &(id, r) in rects.iter().take(deletes.min(rects.len())) {
                index.delete(id, r).unwrap();
            }
            index.checkpoint().unwrap();
            assert_placed(&index, placement)?;
            let all = Rect::new(-10.0, -10.0, 200.0, 200.0).unwrap();
            prop_assert_eq!(
                index.query(all, Predicate::Intersects).unwrap().hits.len(),
                rects.len() - deletes.min(rects.len())
            );
        }
    }

    #[test]
    fn efind_and_fast_logs_stay_on_the_slow_tier() {
        for store in [StoreKind::Efind, StoreKind::Fast] {
            let opts = store_options(store, IndexKind::RTree, Placement::FastFromLevel(0));
            let index = checkpointed_grid(&opts, 300);
            // Every node is fast; the log's pages (the slow tier's last) are not.
            let nodes = nodes_with_levels(&index);
            let dev = index.device();
            assert!(nodes
                .iter()
                .all(|&(p, _)| dev.page_tier(p) == Some(Tier::Fast)));
            let cap = dev.capacity();
            let log_pages = (cap - 64..cap)
                .filter(|&p| dev.page_tier(p) == Some(Tier::Fast))
                .count();
            assert_eq!(log_pages, 0, "{store:?}");
            assert!(dev.tiers().unwrap().slow.io.pages_written > 0, "{store:?}");
        }
    }

    /// The tier of every node, in page order.
    fn node_tiers(index: &Index) -> Vec<(PageId, u16, Option<Tier>)> {
        let mut v: Vec<(PageId, u16, Option<Tier>)> = nodes_with_levels(index)
            .into_iter()
            .map(|(p, l)| (p, l, index.device().page_tier(p)))
            .collect();
        v.sort_unstable_by_key(|n| (n.0, n.1));
        v
    }

    /// An index directory on a hybrid of two file tiers (or two simulated
    /// flash tiers) keeps every page on its tier after close and reopen,
    /// for every store and R-tree kind, and answers as before.
    #[test]
    fn hybrid_indexes_keep_their_placement_across_processes() {
        let tiers = [
            "hybrid:fast=(file?direct=false&capacity=8MiB);slow=(file?direct=false&capacity=64MiB)",
            "hybrid:fast=(flashsim:preset=xpoint);slow=(flashsim:preset=p3700)&fast_pages=4096",
        ];
        for (t, device) in tiers.iter().enumerate() {
            for store in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast] {
                for kind in [IndexKind::RTree, IndexKind::RStar, IndexKind::Hilbert] {
                    if t == 1 && kind != IndexKind::RStar {
                        continue; // the simulated tiers once per store
                    }
                    let tmp = tempfile::tempdir().unwrap();
                    let dir = tmp.path().join("idx");
                    let mut opts = store_options(store, kind, Placement::SHR_TREE);
                    opts.device = device.parse().unwrap();
                    opts.page_size = 4096;
                    opts.structure = StructureSpec::Tree(TreeSpec {
                        max_entries: Some(8),
                        ..TreeSpec::new(kind)
                    });
                    let mut index = Index::create(&dir, &opts).unwrap();
                    for i in 0..400u64 {
                        let (x, y) = ((i % 20) as f64 * 4.0, (i / 20) as f64 * 4.0);
                        index
                            .insert(i, Rect::new(x, y, x + 1.0, y + 1.0).unwrap())
                            .unwrap();
                    }
                    index.checkpoint().unwrap();
                    let before = node_tiers(&index);
                    let fast_before = index.device().tiers().unwrap().fast_pages;
                    assert!(
                        before.iter().any(|n| n.2 == Some(Tier::Fast)),
                        "{store:?} {kind:?}"
                    );
                    for &(p, level, tier) in &before {
                        assert_eq!(tier, Placement::SHR_TREE.tier(level), "page {p}");
                    }
                    index.close().unwrap();
                    for access in [
                        crate::manifest::Access::Read,
                        crate::manifest::Access::Write,
                    ] {
                        let index = Index::open(&dir, access).unwrap();
                        assert_eq!(node_tiers(&index), before, "{device} {store:?} {kind:?}");
                        assert_eq!(index.device().tiers().unwrap().fast_pages, fast_before);
                        let w = Rect::new(0.0, 0.0, 30.0, 30.0).unwrap();
                        assert_eq!(
                            index.query(w, Predicate::Intersects).unwrap().hits.len(),
                            64,
                            "{device} {store:?} {kind:?}"
                        );
                        index.close().unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn a_hybrid_index_without_its_map_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let mut opts = store_options(StoreKind::Efind, IndexKind::RTree, Placement::SHR_TREE);
        opts.device =
            "hybrid:fast=(file?direct=false&capacity=1MiB);slow=(file?direct=false&capacity=64MiB)"
                .parse()
                .unwrap();
        let mut index = Index::create(&dir, &opts).unwrap();
        for i in 0..100u64 {
            index
                .insert(i, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap())
                .unwrap();
        }
        index.close().unwrap();
        let map = dir.join(crate::index_dir::TIER_MAP_FILE);
        let mut bytes = std::fs::read(&map).unwrap();
        for b in bytes.iter_mut().take(64) {
            *b ^= 0x5a;
        }
        // Both copies damaged: a clear error, not a silent fallback.
        let second =
            crate::storage::tier_map::TierMapStore::region_pages(1 << 11, 4096) as usize * 4096;
        assert!(bytes.len() > second);
        for b in bytes.iter_mut().skip(second).take(64) {
            *b ^= 0x5a;
        }
        std::fs::write(&map, &bytes).unwrap();
        let e = Index::open(&dir, crate::manifest::Access::Read)
            .unwrap_err()
            .to_string();
        assert!(e.contains("placement map"), "{e}");
        std::fs::remove_file(&map).unwrap();
        let e = Index::open(&dir, crate::manifest::Access::Read)
            .unwrap_err()
            .to_string();
        // Named as a missing file (issue 44, item 9: never recreated).
        assert!(e.contains("tiers.map") && e.contains("is missing"), "{e}");
    }
}
