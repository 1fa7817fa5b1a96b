//! How a store's counters join the record of an operation batch
//! ([`Stats::absorb_store`]): here, beside the store's counters, so that
//! [`crate::metrics`] knows nothing of the layers that feed it.
use super::StoreStats;
use crate::metrics::{add_levels, Stats};

impl Stats {
    /// Adds a store's counters (node traffic, by level too, buffer hits and
    /// misses, flushes, created and deleted nodes, committed operations, log
    /// counters, phase times); the buffer peak is the larger of the two.
    pub fn absorb_store(&mut self, store: &StoreStats) {
        let StoreStats {
            peak_buffer_bytes,
            ref temporal_control,
            ref node_reads_by_level,
            ref node_writes_by_level,
            ref times,
            ..
        } = *store;
        add_levels(&mut self.node_reads_by_level, node_reads_by_level);
        add_levels(&mut self.node_writes_by_level, node_writes_by_level);
        self.times.add(times);
        self.peak_buffer_bytes = self.peak_buffer_bytes.max(peak_buffer_bytes);
        add_counters!(
            &mut *self,
            StoreStats {
                node_gets,
                buffer_hits,
                buffer_misses,
                node_reads,
                node_writes,
                nodes_created,
                nodes_deleted,
                flushes,
                flushed_nodes,
                ops_committed,
                log_records,
                log_bytes,
                log_pages_written,
                log_syncs,
                compactions,
                forced_flushes,
                page_images,
                page_image_bytes,
                ..
            } = *store
        );
        self.temporal_control.add(temporal_control);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_s_counters_add_up_and_keep_the_larger_peak() {
        let mut s = Stats::new("q");
        let st = StoreStats {
            buffer_hits: 3,
            buffer_misses: 1,
            flushes: 2,
            flushed_nodes: 9,
            peak_buffer_bytes: 100,
            ..StoreStats::default()
        };
        s.absorb_store(&st);
        s.absorb_store(&StoreStats {
            peak_buffer_bytes: 50,
            ..st
        });
        assert_eq!((s.buffer_hits, s.buffer_misses), (6, 2));
        assert_eq!((s.flushes, s.flushed_nodes), (4, 18));
        assert_eq!(s.peak_buffer_bytes, 100);
        assert_eq!(s.buffer_hit_ratio(), 0.75);
    }
}
