//! The FOR-tree's memory: its buffered nodes take what the buffer charges
//! for them, a large flush reaches the store in parts of at most
//! [`FLUSH_PART_BYTES`], and its id set is compact for dense ids.
use super::tests::{plain, plain_open, rects};
use super::*;
use crate::index::query::Predicate;
use crate::store::accounting::node_bytes_for;

/// Every buffered node's entries are in a vector of their length, so that
/// the memory of the buffer's nodes (charged for their vectors'
/// capacities) is what the buffer charges and stays within its budget
/// after every insertion. An insertion cloned the node and inserted into
/// the clone, which doubled its vector: a "16 MiB" buffer took 26 MB of
/// vectors.
#[test]
fn buffered_nodes_take_what_the_buffer_charges() {
    let (_dev, store) = plain(4096);
    let cfg = FortreeConfig {
        buffer_bytes: 256 * 1024,
        ..FortreeConfig::for_page_size(4096).unwrap()
    };
    let mut t = Fortree::create(store, cfg).unwrap();
    for (i, (id, rect)) in rects(30_000, 5).into_iter().enumerate() {
        t.insert(id, rect).unwrap();
        if i % 97 == 0 {
            let allocated = t.buf.allocated_bytes();
            assert!(
                allocated <= cfg.buffer_bytes,
                "after {} insertions the buffer's nodes take {allocated} bytes, \
                 over its budget of {} (it charges {})",
                i + 1,
                cfg.buffer_bytes,
                t.buf.bytes()
            );
        }
    }
    assert_eq!(t.buf.allocated_bytes(), t.buf.bytes());
    assert!(t.stats().flushes > 1, "the budget was reached");
    // Deletions and their merges keep the vectors as tight.
    for (id, rect) in rects(30_000, 5).into_iter().step_by(3) {
        t.delete(id, rect).unwrap();
    }
    let (allocated, charged) = (t.buf.allocated_bytes(), t.buf.bytes());
    assert!(
        allocated <= cfg.buffer_bytes && allocated == charged,
        "after the deletions: {allocated} allocated, {charged} charged"
    );
    t.check().unwrap();
}

/// A flush of more than [`FLUSH_PART_BYTES`] (here every node of a tree
/// built within a buffer larger than it) reaches the store as several
/// operations, each a device batch of at most that many bytes' worth of
/// nodes; every node is written once and the tree is the same after a
/// reopen.
#[test]
fn a_large_flush_is_written_in_parts() {
    let (dev, store) = plain(4096);
    let cfg = FortreeConfig {
        buffer_bytes: 1 << 30,
        ..FortreeConfig::for_page_size(4096).unwrap()
    };
    let data = rects(100_000, 9);
    let mut t = Fortree::create(store, cfg).unwrap();
    for (id, rect) in &data {
        t.insert(*id, *rect).unwrap();
    }
    assert_eq!(t.stats().flushes, 0, "everything is still buffered");
    let per_node = node_bytes_for(cfg.max_entries);
    let charged: usize = t.buf.bytes() + t.buf.len() * per_node;
    assert!(charged > FLUSH_PART_BYTES, "charged {charged}");
    let nodes = t.buf.len() as u64;
    let before = dev.stats().io;
    t.flush(None).unwrap();
    let io = dev.stats().io;
    let batches = io.write_batches - before.write_batches;
    let pages = io.pages_written - before.pages_written;
    assert_eq!(pages, nodes, "every node written once");
    assert_eq!(t.stats().flushed_nodes, nodes);
    assert_eq!(t.stats().flushes, 1, "one flush");
    assert!(
        batches as usize >= charged.div_ceil(FLUSH_PART_BYTES),
        "{batches} batches for {charged} bytes"
    );
    assert!(
        pages <= batches * (FLUSH_PART_BYTES / per_node) as u64,
        "{pages} pages in {batches} batches"
    );
    t.checkpoint().unwrap();
    drop(t);
    let store = plain_open(&dev);
    let mut t = Fortree::open(store, cfg).unwrap();
    t.check().unwrap();
    assert_eq!(t.len(), data.len() as u64);
    let w = Rect::new(100.0, 100.0, 300.0, 200.0).unwrap();
    let want = data.iter().filter(|(_, r)| r.intersects(&w)).count();
    assert_eq!(t.query(w, Predicate::Intersects).unwrap().hits.len(), want);
}

/// The id set of the duplicate check takes about 2 bytes an id or less
/// when the ids are dense (a `HashSet<u64>` took 9 to 18 bytes an id).
#[test]
fn the_id_set_is_compact_for_dense_ids() {
    let (_dev, store) = plain(4096);
    let cfg = FortreeConfig {
        buffer_bytes: 1 << 20,
        ..FortreeConfig::for_page_size(4096).unwrap()
    };
    let mut t = Fortree::create(store, cfg).unwrap();
    let n = 50_000u64;
    for (id, rect) in rects(n, 13) {
        t.insert(id, rect).unwrap();
    }
    let ids = t.ids.as_ref().expect("the id set is kept");
    assert_eq!(ids.len() as u64, n);
    assert!(ids.heap_bytes() <= 2 * n as usize, "{} bytes", ids.heap_bytes());
    assert!(t.insert(7, Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()).is_err());
}
