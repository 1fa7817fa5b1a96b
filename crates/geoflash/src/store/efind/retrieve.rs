//! RetrievePage (Alg. 2): the newest version of a page, merging the stored
//! content (read buffer or device) with the write buffer. NEW pages are
//! answered without I/O; the read buffer never holds buffered changes.
use crate::metrics::{Phase, Stopwatch};
use std::sync::Arc;

use super::write_buffer::{merge, new_node, Status};
use super::EfindStore;
use crate::page::{self, Node};
use crate::storage::PageId;
use crate::{Error, Result};

impl EfindStore {
    /// The page as stored on the device (read buffer, else a device read,
    /// which enters the read buffer and RQ).
    /// `count`: whether this is a `get` (counted as a buffer hit or miss).
    pub(super) fn stored(&self, id: PageId, count: bool) -> Result<Arc<Node>> {
        {
            let mut inner = self.lock();
            if let Some(n) = inner.rb.get(id) {
                let n = Arc::clone(n);
                if count {
                    inner.stats.buffer_hits += 1;
                }
                return Ok(n);
            }
            if count {
                inner.stats.buffer_misses += 1;
            }
        }
        let watch = Stopwatch::start(self.device.sim_clock_ns());
        let mut buf = vec![0u8; self.page_size];
        self.device.read(id, &mut buf)?;
        if page::is_blank(&buf) {
            return Err(Error::corrupt(
                Some(id),
                "node page is blank (never written)",
            ));
        }
        let (_, node) = page::decode_node(&buf, Some(id))?;
        let node = Arc::new(node);
        let mut inner = self.lock();
        watch.stop(
            Phase::Read,
            self.device.sim_clock_ns(),
            &mut inner.stats.times,
        );
        inner.stats.record_node_read(node.level);
        if self.read_budget > 0 {
            let m = super::meta_of(&node);
            inner.rb.insert(id, Arc::clone(&node), m);
        }
        if let Some(tc) = self.config.temporal_control {
            inner.rq.push_back(id);
            while inner.rq.len() > tc.rq_capacity {
                inner.rq.pop_front();
            }
        }
        Ok(node)
    }

    /// Alg. 2: the newest version of page `id`; `count` as in [`Self::stored`].
    pub(super) fn retrieve(&self, id: PageId, count: bool) -> Result<Arc<Node>> {
        match self.wb.get(id) {
            Some(row) if row.status == Status::New => {
                if count {
                    self.lock().stats.buffer_hits += 1;
                }
                Ok(Arc::new(new_node(row)))
            }
            Some(row) if row.status == Status::Del => Err(Error::invalid(format!(
                "no node at page {id}: the node was deleted"
            ))),
            Some(row) => {
                let base = self.stored(id, count)?;
                Ok(Arc::new(merge(&base, row)))
            }
            None => self.stored(id, count),
        }
    }
}
