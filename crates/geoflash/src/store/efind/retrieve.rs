//! RetrievePage (Alg. 2): the newest version of a page, merging the stored
//! content (read buffer or device) with the write buffer. NEW pages are
//! answered without I/O; the read buffer never holds buffered changes.
use crate::metrics::{Phase, Stopwatch};
use std::collections::VecDeque;
use std::sync::Arc;

use super::write_buffer::{merge, Body, Status, WbEntry};
use super::{EfindStore, ReadBufferMode};
use crate::page::Node;
use crate::storage::PageId;
use crate::store::overlap::read_decoded_timed;
use crate::store::stored::decode_stored;
use crate::{Error, Result};

impl EfindStore {
    /// The page as stored on the device (read buffer, else a device read,
    /// which enters the read buffer and RQ).
    /// `count`: whether this is a `get` (counted as a buffer hit or miss).
    pub(super) fn stored(&self, id: PageId, count: bool) -> Result<Arc<Node>> {
        if let Some(n) = self.buffered(id, count) {
            return Ok(n);
        }
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let mut buf = vec![0u8; self.page_size];
        self.device.read(id, &mut buf)?;
        let node = Arc::new(decode_stored(&buf, id, &self.horizon)?);
        let mut inner = self.lock();
        watch.stop(
            Phase::Read,
            self.device.sim_clock_ns(),
            &mut inner.stats.times,
        );
        self.adopt(&mut inner, id, &node);
        Ok(node)
    }

    /// The page from the read buffer, if it is there (`count`: a hit or a
    /// miss is counted).
    ///
    /// With FESTIval's S2Q, an operation's own reads of the pages it
    /// changes (`modify` and `delete`, not counted; flushes run between
    /// operations) are no accesses, and also take a page the read buffer
    /// declined lately ([`Declined`]): FESTIval's tree changes the node it
    /// read without reading it again.
    fn buffered(&self, id: PageId, count: bool) -> Option<Arc<Node>> {
        let mut inner = self.lock();
        if !count && self.config.read_policy.keeps_read_queue() && self.ops.current.is_some() {
            let held = inner.rb.peek(id).or_else(|| inner.declined.get(id));
            return held.map(Arc::clone);
        }
        if let Some(n) = inner.rb.get(id) {
            let n = Arc::clone(n);
            if count {
                inner.stats.buffer_hits += 1;
            }
            return Some(n);
        }
        if count {
            inner.stats.buffer_misses += 1;
        }
        None
    }

    /// The bytes the read buffer may hold now: its share of the budget
    /// ([`ReadBufferMode::Fixed`]), or what the write buffer and its views
    /// leave of the budget, at least that share less the views
    /// ([`ReadBufferMode::Adaptive`]): a full write buffer takes the rest
    /// of the budget, and the views it keeps whatever the room (their
    /// floor: [`super::write_buffer::VIEW_FLOOR_BYTES`] or the read
    /// buffer's share, whichever is less) come out of the read buffer's
    /// share, so that the three stay within the budget.
    pub(super) fn read_room(&self) -> usize {
        match self.config.read_buffer_mode {
            ReadBufferMode::Fixed => self.read_budget,
            ReadBufferMode::Adaptive => {
                let views = self.wb.view_bytes();
                self.config
                    .buffer_bytes
                    .saturating_sub(self.wb.bytes() + views)
                    .max(self.read_budget.saturating_sub(views))
            }
        }
    }

    /// After the write buffer grew: an adaptive read buffer
    /// gives back what the budget no longer leaves it, `room` (what
    /// [`Self::read_room`] says now; a fixed one never holds more than its
    /// share).
    pub(super) fn trim_read_buffer(&self, inner: &mut super::Inner, room: usize) {
        if self.config.read_buffer_mode.is_fixed() {
            return;
        }
        if inner.rb.used_bytes() > room {
            inner.rb.set_budget(room);
            inner.rb.evict_to_budget();
        }
    }

    /// A page just read from the device: counted, and offered to the read
    /// buffer (the buffer peak noted: a query's reads grow it) and entered
    /// into RQ (which a policy that keeps RQ, FESTIval's S2Q, keeps itself:
    /// the offer enters its id, or admits the page and takes its id out).
    fn adopt(&self, inner: &mut super::Inner, id: PageId, node: &Arc<Node>) {
        inner.stats.record_node_read(node.level);
        let room = self.read_room();
        if room > 0 {
            let m = super::meta_of(node);
            inner.rb.set_budget(room);
            inner.rb.insert(id, Arc::clone(node), m);
            // Declined (its id is in FESTIval's A1): the tree may change
            // it without reading it again.
            if inner.rb.remembered(id) {
                inner.declined.hold(id, Arc::clone(node));
            }
            let held = self.held_bytes(inner);
            inner.stats.peak_buffer_bytes = inner.stats.peak_buffer_bytes.max(held);
        }
        let rq_apart = !self.config.read_policy.keeps_read_queue();
        if let Some(tc) = self.config.temporal_control.filter(|_| rq_apart) {
            inner.rq.push_back(id);
            while inner.rq.len() > tc.rq_capacity {
                inner.rq.pop_front();
            }
        }
    }

    /// [`Self::stored`] for many pages (each distinct page counted once as
    /// a hit or a miss): the pages not in the read buffer are read as one
    /// device batch (sorted, each page once).
    fn stored_batch(&self, ids: &[PageId]) -> Result<crate::page_id::IdMap<Arc<Node>>> {
        let mut found =
            crate::page_id::IdMap::with_capacity_and_hasher(ids.len(), Default::default());
        let mut missing = Vec::new();
        for &id in ids {
            if found.contains_key(&id) {
                continue;
            }
            match self.buffered(id, true) {
                Some(n) => {
                    found.insert(id, n);
                }
                None => missing.push(id),
            }
        }
        missing.sort_unstable();
        missing.dedup();
        if missing.is_empty() {
            return Ok(found);
        }
        let (nodes, times) =
            read_decoded_timed(&*self.device, &missing, |page, id| {
                decode_stored(page, id, &self.horizon).map(Arc::new)
            })?;
        let mut inner = self.lock();
        inner.stats.times.add(&times);
        for (&id, node) in missing.iter().zip(nodes) {
            self.adopt(&mut inner, id, &node);
            found.insert(id, node);
        }
        Ok(found)
    }

    /// Alg. 2 for many pages (what [`Self::retrieve`] returns for each, in
    /// order), the stored versions needed read as one device batch.
    pub(super) fn retrieve_batch(&self, ids: &[PageId]) -> Result<Vec<Arc<Node>>> {
        let needs_stored = |id: &PageId| match self.wb.get(*id).map(WbEntry::status) {
            Some(Status::New | Status::Del) => false,
            Some(Status::Mod) => self.view_to_answer(*id).is_none(),
            None => true,
        };
        let wanted: Vec<PageId> = ids.iter().copied().filter(needs_stored).collect();
        let stored = self.stored_batch(&wanted)?;
        ids.iter()
            .map(|&id| match self.wb.get(id).map(|row| &row.body) {
                Some(Body::New(node)) => {
                    self.lock().stats.buffer_hits += 1;
                    Ok(Arc::clone(node))
                }
                Some(Body::Del) => Err(deleted(id)),
                Some(Body::Mod(_)) if !stored.contains_key(&id) => match self.view_to_answer(id) {
                    Some(view) => {
                        self.lock().stats.buffer_hits += 1;
                        Ok(view)
                    }
                    // The view was given back since the batch was planned.
                    None => self.retrieve(id, true),
                },
                body => {
                    let base = stored.get(&id).ok_or_else(|| {
                        Error::corrupt(Some(id), "node missing from a batch read")
                    })?;
                    Ok(match body {
                        Some(Body::Mod(changes)) => self.view_or(id, || merge(base, changes)),
                        _ => Arc::clone(base),
                    })
                }
            })
            .collect()
    }

    /// Alg. 2: the newest version of page `id`; `count` as in [`Self::stored`].
    pub(super) fn retrieve(&self, id: PageId, count: bool) -> Result<Arc<Node>> {
        match self.wb.get(id).map(|row| &row.body) {
            Some(Body::New(node)) => {
                if count {
                    self.lock().stats.buffer_hits += 1;
                }
                Ok(Arc::clone(node))
            }
            Some(Body::Del) => Err(deleted(id)),
            Some(Body::Mod(changes)) => {
                if let Some(view) = self.view_to_answer(id) {
                    if count {
                        self.lock().stats.buffer_hits += 1;
                    }
                    return Ok(view);
                }
                // The paper's mode reads the stored version even when a
                // view exists, so that views change no I/O or buffer
                // counters.
                let base = self.stored(id, count)?;
                Ok(self.view_or(id, || merge(&base, changes)))
            }
            None => self.stored(id, count),
        }
    }

    /// The write buffer's view of MOD page `id` when it answers reads
    /// without the stored version ([`ReadBufferMode::Adaptive`]).
    fn view_to_answer(&self, id: PageId) -> Option<Arc<Node>> {
        match self.config.read_buffer_mode {
            ReadBufferMode::Fixed => None,
            ReadBufferMode::Adaptive => self.wb.view(id).map(Arc::clone),
        }
    }

    /// The write buffer's view of MOD page `id`, else `make()`. Under
    /// test, a view is checked against `make()`.
    fn view_or(&self, id: PageId, make: impl FnOnce() -> Node) -> Arc<Node> {
        match self.wb.view(id) {
            Some(v) => {
                #[cfg(test)]
                assert_eq!(**v, make(), "eFIND view of page {id} is stale");
                Arc::clone(v)
            }
            None => Arc::new(make()),
        }
    }
}

/// The newest pages the read buffer declined (FESTIval's S2Q caches a page
/// at its second read), as stored on the device, at most
/// [`Declined::PAGES`]. A tree reads the nodes of its path (before its
/// operation begins: it validates first) and then changes some of them;
/// FESTIval's tree changes the node it holds, while geoflash's `modify`
/// and `delete` read the node they change to check it. They take it from
/// here instead of reading the device a second time (which would also
/// cache it: a second offer). Only they do: a `get` or a flush's merge
/// reads the device as FESTIval does. A page leaves when a flush or a
/// checkpoint writes it, or when it is deleted. Outside the budget: at
/// most [`Declined::PAGES`] nodes.
#[derive(Debug, Default)]
pub(super) struct Declined {
    /// Oldest first.
    pages: VecDeque<(PageId, Arc<Node>)>,
}

impl Declined {
    /// How many pages are held: more than an insertion's or a deletion's
    /// path (a tree of height 10 holds 10^10 records at fan-out 10).
    pub(super) const PAGES: usize = 16;

    /// Holds `node`, the stored version of `id`, as the newest.
    pub(super) fn hold(&mut self, id: PageId, node: Arc<Node>) {
        self.forget(id);
        self.pages.push_back((id, node));
        while self.pages.len() > Self::PAGES {
            self.pages.pop_front();
        }
    }

    /// The stored version of `id`, if held.
    pub(super) fn get(&self, id: PageId) -> Option<&Arc<Node>> {
        self.pages.iter().find(|p| p.0 == id).map(|p| &p.1)
    }

    /// Forgets `id` (written or deleted).
    pub(super) fn forget(&mut self, id: PageId) {
        self.pages.retain(|p| p.0 != id);
    }

    /// Forgets every page.
    pub(super) fn clear(&mut self) {
        self.pages.clear();
    }

    /// Number of pages held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.pages.len()
    }
}

/// The error of a read of deleted page `id`.
fn deleted(id: PageId) -> Error {
    Error::invalid(format!("no node at page {id}: the node was deleted"))
}
