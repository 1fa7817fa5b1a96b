//! The xBR+-tree's bulk load with bounded memory (issue 47, item 5): the
//! points are sorted by address (Z-order) through the external sort of
//! [`crate::index::external`] (sorted runs of temporary files that fit the
//! budget, merged with a fan-in that fits it), then checked and built as
//! [`XbrTree::load_each`] checks and builds them, from the merged stream.
//!
//! The thesis' bulk load (§3.6) partitions an input larger than memory into
//! quadrant sub-files; a sort by address gives the same order in one
//! stream, and the build writes the nodes the stream leaves behind as it
//! goes ([`super::bulk`]), so memory holds the sort's chunk or the merge's
//! buffers, the tree's last [`BulkOptions::held_nodes`] nodes, and the id
//! set the tree keeps ([`ObjectIds`]: bits while the ids are dense). The
//! tree is the one `load_each` builds, node for node.
//!
//! Before anything is written, the whole input is checked: each point in
//! the domain and each id once while the runs are formed; distinct points
//! and at most M points in one finest cell in a first pass over the merged
//! runs. The build is a second pass.
use super::bulk::{BulkOptions, CellRuns};
use super::insert::duplicate_point;
use super::{duplicate_id, XbrTree};
use crate::geom::Point;
use crate::index::bulk::{BulkWatch, STOP_EVERY};
use crate::index::external::{
    le_f64, le_u64, reduce_runs, reserve_within, ExternalBulkConfig, ExternalBulkReport, Fixed,
    Merge, Spill, READ_BUFFER,
};
use crate::index::object_ids::ObjectIds;
use crate::store::NodeStore;
use crate::{Error, Result};

/// A point of the load with its address; ordered by (address, x, y, id),
/// the order of the in-memory load (`-0.0` and `0.0` compare equal, as
/// they do there, so that equal points are neighbours).
#[derive(Debug, Clone, Copy)]
struct Addressed {
    code: u64,
    p: Point,
    id: u64,
}

/// `v` with `-0.0` made `0.0`, for the order only.
fn zero_signless(v: f64) -> f64 {
    v + 0.0
}

ordered_by!(Addressed, |a, b| a
    .code
    .cmp(&b.code)
    .then(zero_signless(a.p.x).total_cmp(&zero_signless(b.p.x)))
    .then(zero_signless(a.p.y).total_cmp(&zero_signless(b.p.y)))
    .then(a.id.cmp(&b.id)));

impl Fixed for Addressed {
    const BYTES: usize = 32;
    fn put(&self, out: &mut Vec<u8>) {
        for v in [self.code, self.p.x.to_bits(), self.p.y.to_bits(), self.id] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn get(b: &[u8]) -> Result<Self> {
        Ok(Addressed {
            code: le_u64(b, 0),
            p: Point {
                x: le_f64(b, 8),
                y: le_f64(b, 16),
            },
            id: le_u64(b, 24),
        })
    }
}

impl<S: NodeStore> XbrTree<S> {
    /// Bulk loads the points `items` yields into this empty tree with about
    /// `config.memory_budget` bytes for the sort (temporary files in
    /// `config.temp_dir`, removed when the load ends), stopped when `watch`
    /// asks (between records, runs, merges and nodes). Errors as
    /// [`load_each`](Self::load_each)'s (the first error `items` yields
    /// among them), before anything is written.
    pub fn load_external(
        &mut self,
        items: impl IntoIterator<Item = Result<(u64, Point)>>,
        opts: BulkOptions,
        config: &ExternalBulkConfig,
        watch: BulkWatch<'_>,
    ) -> Result<ExternalBulkReport> {
        config.check(1.0)?;
        let meta = self.store.meta();
        if meta.root.is_some() || meta.records > 0 {
            return Err(Error::invalid(
                "a bulk load needs an empty xBR+-tree: use bulk insertion to add to one",
            ));
        }
        let mut spill = Spill::new(&config.temp_dir)?;
        let mut ids = ObjectIds::new();
        let mut report = ExternalBulkReport::default();
        let run_len = (config.memory_budget / Addressed::BYTES).max(1);
        let runs = self.sorted_runs(items, run_len, &mut spill, &mut ids, &mut report, watch)?;
        let fan_in = config.memory_budget / READ_BUFFER;
        let (runs, passes) = reduce_runs::<Addressed>(&mut spill, runs, fan_in, READ_BUFFER, watch)?;
        report.merge_passes = passes;
        // The checks over the whole sorted input, then the build.
        let mut merged = Merge::<Addressed>::open(&runs, READ_BUFFER)?;
        let mut cells = CellRuns::new(self.config.max_entries);
        let mut last: Option<Addressed> = None;
        let mut checked = 0u64;
        while let Some(a) = merged.next_rec()? {
            checked += 1;
            if checked.is_multiple_of(STOP_EVERY) {
                watch.check()?;
            }
            if let Some(l) = last.filter(|l| l.p == a.p) {
                return Err(duplicate_point(&a.p, l.id));
            }
            cells.push(&self.domain, a.id, a.code, a.p)?;
            last = Some(a);
        }
        let mut merged = Merge::<Addressed>::open(&runs, READ_BUFFER)?;
        let mut done = 0u64;
        let sorted = std::iter::from_fn(|| {
            done += 1;
            if done.is_multiple_of(STOP_EVERY) {
                if let Err(e) = watch.check() {
                    return Some(Err(e));
                }
            }
            merged.next_rec().transpose()
        })
        .map(|a| a.map(|a| (a.id, a.code, a.p)));
        let (_, nodes) = self.build_sorted_unlogged(sorted, opts.held_nodes)?;
        self.ids = Some(ids);
        report.bytes_spilled = spill.bytes;
        report.nodes = nodes;
        Ok(report)
    }

    /// Reads `items` in chunks of `run_len` points, checks each (inside the
    /// domain, its id new to `ids`) and writes each chunk sorted by address
    /// as a run; returns the runs.
    fn sorted_runs(
        &self,
        items: impl IntoIterator<Item = Result<(u64, Point)>>,
        run_len: usize,
        spill: &mut Spill,
        ids: &mut ObjectIds,
        report: &mut ExternalBulkReport,
        watch: BulkWatch<'_>,
    ) -> Result<Vec<std::path::PathBuf>> {
        let mut runs = Vec::new();
        // Grown as points come (at most `run_len`): the budget bounds the
        // chunk, it is not allocated up front.
        let mut chunk: Vec<Addressed> = Vec::new();
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            chunk.clear();
            for item in items.by_ref().take(run_len) {
                let (id, p) = item?;
                if (chunk.len() as u64 + 1).is_multiple_of(STOP_EVERY) {
                    watch.check()?;
                }
                let code = self.domain.code(&p)?;
                if !ids.insert(id) {
                    return Err(duplicate_id(id));
                }
                reserve_within(&mut chunk, run_len);
                chunk.push(Addressed { code, p, id });
            }
            report.records += chunk.len() as u64;
            watch.check()?;
            chunk.sort_unstable();
            watch.check()?;
            runs.push(spill.write_all(&chunk)?);
        }
        report.runs = runs.len() as u64;
        Ok(runs)
    }
}
