//! Flushing (Alg. 3), the flushing policies and temporal control on writes
//! (Alg. 4) and reads (Alg. 5).
//!
//! Area definitions (the paper leaves them open):
//! - the **modified area** of a buffered page is the area of the MBR of the
//!   entry versions buffered for it (its mod tree's `Some` entries; removals
//!   carry no rectangle; a DEL page has none, area 0);
//! - the **overlapping modified area** of a candidate page is the sum, over
//!   the other candidates of the flush (the p% oldest pages), of the area of
//!   the intersection of the two modified MBRs;
//! - α = Σ modified area of the unit / Σ modified area of every buffered page;
//!   β = Σ overlapping modified area of the unit / Σ over every candidate.
//!   A zero denominator makes the factor 1 (it then ranks nothing).
use crate::metrics::{Phase, Stopwatch};
use std::collections::VecDeque;

use crate::page_id::IdSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::flush_index::{Choice, FlushIndexConfig, TcParams};
use super::write_buffer::{Status, WbEntry, WriteBuffer};
use super::{EfindConfig, EfindStore};
use crate::page;
use crate::storage::PageId;
use crate::store::FLUSH_BATCH_UNITS;
use crate::Result;

/// Where [`EfindStore::flush_batch`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchTarget {
    /// When the write buffer without the batch holds at most these bytes.
    Bytes(usize),
    /// When at most this many buffered pages are left outside the batch.
    Pages(usize),
}

/// Flushing policy: how a flushing unit's degree is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FlushPolicy {
    /// FP_m = Σ mod_count.
    M,
    /// FP_mh = Σ mod_count·(h+1) (the paper's best, default).
    #[default]
    Mh,
    /// FP_mha = FP_mh·α.
    Mha,
    /// FP_mhao = FP_mha·β.
    Mhao,
}

impl FlushPolicy {
    /// Whether the degree weighs the modified area (α: FP_mha and FP_mhao).
    pub fn uses_area(self) -> bool {
        matches!(self, FlushPolicy::Mha | FlushPolicy::Mhao)
    }

    /// Whether the degree weighs the overlapping modified area (β: FP_mhao).
    pub fn uses_overlap(self) -> bool {
        self == FlushPolicy::Mhao
    }
}

impl std::str::FromStr for FlushPolicy {
    type Err = crate::Error;
    /// Parses `m`, `mh`, `mha` or `mhao` (the names of the CLI, workload
    /// files and Python).
    fn from_str(s: &str) -> Result<FlushPolicy> {
        match s.trim() {
            "m" => Ok(FlushPolicy::M),
            "mh" => Ok(FlushPolicy::Mh),
            "mha" => Ok(FlushPolicy::Mha),
            "mhao" => Ok(FlushPolicy::Mhao),
            _ => Err(crate::Error::invalid(format!(
                "unknown flush policy {s:?}: use m, mh, mha or mhao"
            ))),
        }
    }
}

/// What the flushing algorithm knows about one candidate page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageInfo {
    /// Page id.
    pub id: PageId,
    /// Node height (0 = leaf).
    pub height: u16,
    /// Modifications since the last flush.
    pub mod_count: u64,
    /// Modified area (see the module documentation).
    pub area: f64,
    /// Overlapping modified area (see the module documentation).
    pub overlap: f64,
}

/// The flushing degree of a unit under `policy`; `total_area` and
/// `total_overlap` are the denominators of α and β.
#[cfg(test)]
pub fn degree(policy: FlushPolicy, unit: &[PageInfo], total_area: f64, total_overlap: f64) -> f64 {
    let m: f64 = unit.iter().map(|p| p.mod_count as f64).sum();
    let mh: f64 = unit
        .iter()
        .map(|p| p.mod_count as f64 * (f64::from(p.height) + 1.0))
        .sum();
    let ratio = |part: f64, total: f64| if total > 0.0 { part / total } else { 1.0 };
    let alpha = ratio(unit.iter().map(|p| p.area).sum(), total_area);
    let beta = ratio(unit.iter().map(|p| p.overlap).sum(), total_overlap);
    match policy {
        FlushPolicy::M => m,
        FlushPolicy::Mh => mh,
        FlushPolicy::Mha => mh * alpha,
        FlushPolicy::Mhao => mh * alpha * beta,
    }
}

/// The rank by which [`choose_unit`] and the
/// [`FlushIndex`](super::flush_index::FlushIndex) compare units: the
/// degree without its denominators (α's total modified area, β's total
/// overlap), which scale every unit of a flush alike. A factor whose total is
/// zero is 1, as in [`degree`] (`area_weighs`, `overlap_weighs`: whether the
/// totals are positive). The sums run over `unit` in order, so one unit
/// ranks the same, to the bit, wherever it is computed.
pub fn unit_rank(
    policy: FlushPolicy,
    unit: &[PageInfo],
    area_weighs: bool,
    overlap_weighs: bool,
) -> f64 {
    let m: f64 = unit.iter().map(|p| p.mod_count as f64).sum();
    let mh: f64 = unit
        .iter()
        .map(|p| p.mod_count as f64 * (f64::from(p.height) + 1.0))
        .sum();
    let area = || -> f64 { unit.iter().map(|p| p.area).sum() };
    let overlap = || -> f64 { unit.iter().map(|p| p.overlap).sum() };
    match policy {
        FlushPolicy::M => m,
        FlushPolicy::Mh => mh,
        FlushPolicy::Mha if area_weighs => mh * area(),
        FlushPolicy::Mha => mh,
        FlushPolicy::Mhao => {
            let a = if area_weighs { mh * area() } else { mh };
            if overlap_weighs {
                a * overlap()
            } else {
                a
            }
        }
    }
}

/// Chooses the unit to flush among `pages` (sorted by id here): consecutive
/// groups of `unit` pages, the first of the highest degree. Degrees are
/// compared by [`unit_rank`] (the totals scale them alike, so only whether
/// `total_area` and `total_overlap` are positive matters).
pub fn choose_unit(
    policy: FlushPolicy,
    mut pages: Vec<PageInfo>,
    unit: usize,
    total_area: f64,
    total_overlap: f64,
) -> Vec<PageId> {
    pages.sort_by_key(|p| p.id);
    let mut best: Option<(f64, &[PageInfo])> = None;
    for fu in pages.chunks(unit.max(1)) {
        let d = unit_rank(policy, fu, total_area > 0.0, total_overlap > 0.0);
        if best.is_none_or(|(b, _)| d > b) {
            best = Some((d, fu));
        }
    }
    best.map(|(_, fu)| fu.iter().map(|p| p.id).collect())
        .unwrap_or_default()
}

/// Outcome of temporal control on writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcChoice {
    /// Pages near recently written pages (sequential).
    Seq,
    /// Pages far from every recently written page (stride).
    Str,
    /// Seq ∪ Str.
    Both,
    /// Neither fills a unit: the input unchanged.
    Fallback,
}

/// Temporal control on writes (Alg. 4): `ids` within `seq` of a page of `wq`
/// form Seq, those farther than `stride` from all of them form Str. Returns
/// Seq if it fills a unit, else Str, else Seq ∪ Str, else the input.
pub fn temporal_control_writes(
    ids: &[PageId],
    wq: &VecDeque<PageId>,
    unit: usize,
    seq: u64,
    stride: u64,
) -> (Vec<PageId>, TcChoice) {
    if wq.is_empty() {
        return (ids.to_vec(), TcChoice::Fallback);
    }
    let mut s = Vec::new();
    let mut t = Vec::new();
    for &id in ids {
        let d = wq.iter().map(|&w| w.abs_diff(id)).min().unwrap_or(u64::MAX);
        if d <= seq {
            s.push(id);
        } else if d > stride {
            t.push(id);
        }
    }
    let unit = unit.max(1);
    if s.len() >= unit {
        (s, TcChoice::Seq)
    } else if t.len() >= unit {
        (t, TcChoice::Str)
    } else if s.len() + t.len() >= unit {
        s.extend(t);
        (s, TcChoice::Both)
    } else {
        (ids.to_vec(), TcChoice::Fallback)
    }
}

/// Alg. 3's choice with the write buffer's
/// [`FlushIndex`](super::flush_index::FlushIndex) (configured here for
/// `config`): the unit, and temporal control's outcome if it is on and some
/// page is a candidate. `wq` is WQ (unused without temporal control).
pub fn choose_indexed(wb: &mut WriteBuffer, config: &EfindConfig, wq: &VecDeque<PageId>) -> Choice {
    let policy = config.policy;
    wb.configure_flush_index(FlushIndexConfig {
        policy,
        percent: config.flush_percent,
        unit: config.flush_unit,
    });
    wb.flush_index_mut().refresh();
    let idx = wb.flush_index();
    if idx.active() == 0 {
        return Choice {
            unit: Vec::new(),
            tc: None,
        };
    }
    let params = config.temporal_control.map(|tc| TcParams {
        wq,
        seq: tc.seq_distance,
        stride: tc.stride_distance,
    });
    if idx.ranks() {
        let (tc, ranges) = idx.temporal_ranges(params);
        if let Some(unit) = idx.best_unit(&ranges) {
            return Choice { unit, tc };
        }
    }
    // Ranked as the scan does, over the candidates of the age order.
    let mut ids: Vec<PageId> = idx.candidates().collect();
    let mut tc = None;
    if let Some(p) = params {
        let (picked, choice) =
            temporal_control_writes(&ids, p.wq, config.flush_unit, p.seq, p.stride);
        ids = picked;
        tc = Some(choice);
    }
    let infos = page_infos(wb, policy, &ids);
    let total_area = if idx.any_area() { 1.0 } else { 0.0 };
    let total_overlap: f64 = infos.iter().map(|p| p.overlap).sum();
    Choice {
        unit: choose_unit(policy, infos, config.flush_unit, total_area, total_overlap),
        tc,
    }
}

/// Alg. 3's choice by a pass over the whole write buffer among the pages
/// not in `exclude` (the implementation before the
/// [`FlushIndex`](super::flush_index::FlushIndex), kept as its oracle).
#[cfg(test)]
pub fn choose_by_scan(
    wb: &WriteBuffer,
    exclude: &IdSet,
    config: &EfindConfig,
    wq: &VecDeque<PageId>,
) -> Choice {
    let mut rows: Vec<(PageId, u64)> = wb
        .iter()
        .filter(|(id, _)| !exclude.contains(id))
        .map(|(id, r)| (id, r.timestamp))
        .collect();
    if rows.is_empty() {
        return Choice {
            unit: Vec::new(),
            tc: None,
        };
    }
    rows.sort_by_key(|&(id, ts)| (ts, id));
    let n = (rows.len() * usize::from(config.flush_percent))
        .div_ceil(100)
        .max(1);
    let mut ids: Vec<PageId> = rows.iter().take(n).map(|&(id, _)| id).collect();
    let mut tc_choice = None;
    if let Some(tc) = config.temporal_control {
        let (picked, choice) = temporal_control_writes(
            &ids,
            wq,
            config.flush_unit,
            tc.seq_distance,
            tc.stride_distance,
        );
        tc_choice = Some(choice);
        ids = picked;
    }
    let infos = page_infos(wb, config.policy, &ids);
    let total_area: f64 = if config.policy.uses_area() {
        wb.iter()
            .filter_map(|(_, r)| r.modified_mbr())
            .map(|m| m.area())
            .sum()
    } else {
        0.0
    };
    let total_overlap: f64 = infos.iter().map(|p| p.overlap).sum();
    Choice {
        unit: choose_unit(
            config.policy,
            infos,
            config.flush_unit,
            total_area,
            total_overlap,
        ),
        tc: tc_choice,
    }
}

/// What [`choose_unit`] needs of the candidate pages `ids`. The modified
/// area is computed only for the policies that weigh it (FP_mha and
/// FP_mhao) and the overlap, quadratic in the candidates, only for
/// FP_mhao: the degrees of the other policies do not read them (see
/// [`FlushPolicy::uses_area`]), so the choice is the same.
fn page_infos(wb: &WriteBuffer, policy: FlushPolicy, ids: &[PageId]) -> Vec<PageInfo> {
    let mbrs: Vec<(PageId, Option<crate::geom::Rect>)> = if policy.uses_area() {
        ids.iter()
            .map(|&id| (id, wb.get(id).and_then(|r| r.modified_mbr())))
            .collect()
    } else {
        ids.iter().map(|&id| (id, None)).collect()
    };
    mbrs.iter()
        .filter_map(|&(id, mbr)| {
            let row = wb.get(id)?;
            let overlap = match mbr {
                Some(m) if policy.uses_overlap() => mbrs
                    .iter()
                    .filter(|(o, _)| *o != id)
                    .filter_map(|(_, om)| om.map(|om| m.overlap_area(&om)))
                    .sum(),
                _ => 0.0,
            };
            Some(PageInfo {
                id,
                height: row.height,
                mod_count: row.mod_count,
                area: mbr.map_or(0.0, |m| m.area()),
                overlap,
            })
        })
        .collect()
}

/// Which of the pages a flush writes the read buffer takes (Alg. 5 and the
/// adaptive read buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeepFlushed {
    /// Alg. 5's pages (those it holds, those read recently) and, in an
    /// adaptive read buffer, every page the write buffer held decoded.
    Decoded,
    /// Alg. 5's pages only: the checkpoint that ends the unlogged mode (a
    /// build that publishes its index at its end). Moving the whole write
    /// buffer into the read buffer there grew the resident set of a
    /// 16,000,000-object build with 10 % reinsertion 18 MB past budget +
    /// 64 MB (the read buffer's tables take fresh memory while the write
    /// buffer's entries it frees are small blocks the allocator keeps);
    /// without it the peak stayed 15.6 MB under (`docs/benchmarks.md`, "Forced reinsertion: the product
    /// default"). The process reads those pages back if it queries them.
    Alg5,
}

impl EfindStore {
    /// One flush (Alg. 3): writes one flushing unit as one device batch.
    /// Returns the number of buffered pages it removed.
    pub(super) fn flush_once(&mut self) -> Result<usize> {
        let chosen = self.choose_flush();
        if chosen.is_empty() {
            return Ok(0);
        }
        self.write_pages(&chosen, 1, KeepFlushed::Decoded)?;
        Ok(chosen.len())
    }

    /// Flushes a batch (first-image format with a durable mode): flushing
    /// units chosen one after the other as [`flush_once`](Self::flush_once)
    /// would (each among the pages not chosen yet) until `target` is met,
    /// then written with one log sync (see
    /// [`write_pages`](Self::write_pages)), in chunks whose page images fit a
    /// quarter of the log. A batch down to a byte target has at most
    /// [`FLUSH_BATCH_UNITS`](crate::store::FLUSH_BATCH_UNITS) units. Returns the units flushed.
    pub(super) fn flush_batch(&mut self, target: BatchTarget) -> Result<u64> {
        let mut chosen = IdSet::default();
        let mut order: Vec<PageId> = Vec::new();
        let mut units = 0u64;
        loop {
            let more = match target {
                BatchTarget::Bytes(low) => {
                    units < FLUSH_BATCH_UNITS && self.wb.bytes_without(&chosen) > low
                }
                BatchTarget::Pages(left) => self.wb.len() - chosen.len() > left,
            };
            if !more {
                break;
            }
            let unit = self.choose_flush();
            if unit.is_empty() {
                break;
            }
            units += 1;
            for &id in &unit {
                self.wb.flush_index_mut().exclude(id);
            }
            chosen.extend(unit.iter().copied());
            order.extend(unit);
        }
        // The chosen pages are buffered until written; writing removes them.
        self.wb.flush_index_mut().include_all();
        if order.is_empty() {
            return Ok(0);
        }
        let chunk = self.image_chunk_pages()?;
        let parts = order.len().div_ceil(chunk).max(1) as u64;
        for (i, part) in order.chunks(chunk).enumerate() {
            // The units spread over the chunks, for the flush counter.
            let n = units / parts + u64::from((i as u64) < units % parts);
            self.write_pages(part, n, KeepFlushed::Decoded)?;
        }
        Ok(units)
    }

    /// Alg. 3's choice of one flushing unit among the buffered pages not set
    /// aside in the write buffer's [`FlushIndex`](super::flush_index::FlushIndex),
    /// counting temporal control's outcome.
    fn choose_flush(&mut self) -> Vec<PageId> {
        let wq = match self.config.temporal_control {
            Some(_) => self.lock().wq.clone(),
            None => VecDeque::new(),
        };
        let choice = choose_indexed(&mut self.wb, &self.config, &wq);
        // Every store test checks each choice against the scan (the oracle).
        #[cfg(test)]
        {
            let excluded = self.wb.flush_index().excluded().clone();
            let old = choose_by_scan(&self.wb, &excluded, &self.config, &wq);
            assert_eq!(choice, old, "the flush index chose otherwise than the scan");
        }
        if let Some(tc) = choice.tc {
            let mut inner = self.lock();
            let counts = &mut inner.estats.temporal_control;
            match tc {
                TcChoice::Seq => counts.seq += 1,
                TcChoice::Str => counts.stride += 1,
                TcChoice::Both => counts.both += 1,
                TcChoice::Fallback => counts.fallback += 1,
            }
        }
        choice.unit
    }

    /// Writes the buffered pages `ids` (`units` flushing units) with the
    /// flush protocol (page images, see the [module docs](super)), applies
    /// temporal control on reads, and removes them from the write buffer:
    /// as one batch when the log has room for the page images of all of
    /// them, else in parts that fit ([`Self::pages_that_fit`]). `keep`
    /// says which written pages the read buffer takes.
    pub(super) fn write_pages(&mut self, ids: &[PageId], units: u64, keep: KeepFlushed) -> Result<()> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        let mut rest = &ids[..];
        let mut units = units;
        while !rest.is_empty() {
            let n = self.pages_that_fit(rest)?;
            let (part, more) = rest.split_at(n);
            // The flushing units are counted with the first part.
            self.write_part(part, std::mem::take(&mut units), keep)?;
            rest = more;
        }
        Ok(())
    }

    /// How many of `ids` (sorted), from the first, the log has room to
    /// flush now (their page images and the FLUSH record, after a
    /// compaction if needed): all of them, or the most a halving finds,
    /// at least one. A flush makes the records of its pages obsolete, so
    /// the compaction before the next part frees their room: a log whose
    /// records all describe buffered pages (as restart leaves it) still
    /// empties part by part, where a flush of a whole chunk needed more
    /// room than any compaction could free (issue 44: `DeviceFull` after
    /// a recovery, and the store refused every change after).
    fn pages_that_fit(&mut self, ids: &[PageId]) -> Result<usize> {
        if self.config.durability == crate::store::log::Durability::None {
            // No page images: the FLUSH record alone (write_protected).
            return Ok(ids.len());
        }
        let per_image = (self.page_size + crate::store::log::record::RECORD_HEADER) as u64;
        let mut n = ids.len();
        loop {
            let part = &ids[..n];
            let written = |id: &&PageId| {
                !matches!(self.wb.get(**id).map(WbEntry::status), Some(Status::Del) | None)
            };
            let images = part.iter().filter(written).count() as u64;
            let flush = crate::store::log::Record::flush(part)?.encoded_len() as u64;
            match self.ensure_room(images * per_image + flush) {
                Ok(()) => return Ok(n),
                Err(crate::Error::DeviceFull(_)) if n > 1 => n /= 2,
                Err(e) => return Err(e),
            }
        }
    }

    /// [`Self::write_pages`] of one batch: `ids` sorted, their images fit the log.
    /// Each page is encoded as soon as its newest version is made, and a
    /// version made by a merge is dropped then: a part holds its encoded
    /// pages, not a decoded copy of each beside them. A page the read
    /// buffer then takes (Alg. 5) is the write buffer's node or view, else
    /// decoded again from its encoded bytes.
    fn write_part(&mut self, ids: &[PageId], units: u64, keep: KeepFlushed) -> Result<()> {
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let ids = ids.to_vec();
        let written: Vec<PageId> = ids
            .iter()
            .copied()
            .filter(|&id| {
                !matches!(
                    self.wb.get(id).map(WbEntry::status),
                    Some(Status::Del) | None
                )
            })
            .collect();
        let ps = self.page_size;
        let lsn = self.log.as_ref().map_or(0, |l| l.page_lsn());
        let mut data = vec![0u8; written.len() * ps];
        let mut levels: Vec<u16> = Vec::with_capacity(written.len());
        for (&id, chunk) in written.iter().zip(data.chunks_exact_mut(ps)) {
            let node = self.retrieve(id, false)?;
            page::encode_node(&node, lsn, self.config.with_payload, chunk)?;
            levels.push(node.level);
        }
        // Tier hints for the nodes of this batch (not for the log's pages,
        // which the flush protocol may write first).
        self.placement.hint(
            &*self.device,
            written.iter().copied().zip(levels.iter().copied()),
        )?;
        self.write_protected(&written, &data, &ids)?;
        let mut inner = self.lock();
        inner.stats.record_node_writes(levels.iter().copied());
        inner.stats.flushes += units;
        inner.stats.flushed_nodes += written.len() as u64;
        let tc = self.config.temporal_control;
        // An adaptive read buffer also keeps the flushed pages the write
        // buffer held decoded (new nodes, views): no decode, and they were
        // in use.
        let adaptive =
            !self.config.read_buffer_mode.is_fixed() && keep == KeepFlushed::Decoded;
        if adaptive {
            inner.rb.set_budget(self.read_room());
        }
        // FESTIval's S2Q keeps RQ as its A1, which holds pages read only:
        // it pre-caches the flushed pages from A1 alone.
        let own_rq = self.config.read_policy.keeps_read_queue();
        let keep_decoded = adaptive && !own_rq;
        for (&id, chunk) in written.iter().zip(data.chunks_exact(ps)) {
            // Alg. 5: keep the read buffer in step; pre-cache pages read recently.
            let cached = inner.rb.peek(id).is_some();
            let recently_read = tc.is_some()
                && if own_rq {
                    inner.rb.remembered(id)
                } else {
                    inner.rq.contains(&id)
                };
            let decoded = self.wb.node(id).or_else(|| self.wb.view(id));
            if cached || recently_read || (keep_decoded && decoded.is_some()) {
                let node = match decoded {
                    Some(node) => Arc::clone(node),
                    None => Arc::new(page::decode_node(chunk, Some(id))?.1),
                };
                let m = super::meta_of(&node);
                // A cached page is rewritten (FESTIval's S2Q leaves it in
                // its LRU place), another one offered.
                if cached {
                    inner.rb.rewrite(id, node, m);
                } else {
                    inner.rb.insert(id, node, m);
                }
                if recently_read && !cached {
                    inner.estats.temporal_control.precached += 1;
                }
            }
            if let Some(tc) = tc {
                inner.wq.push_back(id);
                while inner.wq.len() > tc.wq_capacity {
                    inner.wq.pop_front();
                }
            }
        }
        for &id in &ids {
            inner.declined.forget(id);
        }
        drop(inner);
        for id in ids {
            self.wb.remove(id);
        }
        watch.stop(
            Phase::Flush,
            self.device.sim_clock_ns(),
            &mut self.lock().stats.times,
        );
        Ok(())
    }
}
