//! Tests of the plain store: its buffer, write-through, batches, failures and
//! recovery of what it wrote, against a brute-force oracle.
use super::*;
use crate::page::PageKind;
use crate::storage::mem::MemDevice;
use crate::store::accounting::node_bytes_for;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn dev(ps: usize, cap: u64) -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(ps, cap).unwrap())
}

/// Copies the store's header (page 0, 512 bytes) from `from` to `to`.
fn copy_header(from: &dyn PageDevice, to: &dyn PageDevice) {
    let mut buf = vec![0u8; 512];
    from.read(0, &mut buf).unwrap();
    to.write(0, &buf).unwrap();
}

fn entry(key: u64, version: u64, with_payload: bool) -> Entry {
    let (k, v) = (key as f64, version as f64);
    Entry {
        key,
        rect: Rect::new(k, v, k + 1.0, v + 2.0).unwrap(),
        payload: if with_payload { key * 3 + version } else { 0 },
    }
}

fn cfg(buffer_bytes: usize, policy: PolicyKind, with_payload: bool) -> PlainConfig {
    PlainConfig {
        buffer_bytes,
        policy,
        with_payload,
    }
}

fn writes(s: &PlainStore) -> u64 {
    s.device().stats().io.pages_written
}

fn reads(s: &PlainStore) -> u64 {
    s.device().stats().io.pages_read
}

/// Creates one leaf with `keys` in its own operation.
fn leaf(s: &mut PlainStore, keys: &[u64]) -> PageId {
    let op = s.begin_op().unwrap();
    let wp = s.config().with_payload;
    let id = s
        .create(0, keys.iter().map(|&k| entry(k, 0, wp)).collect())
        .unwrap();
    s.commit_op(op).unwrap();
    id
}

#[test]
fn get_batch_reads_the_missing_pages_as_one_batch() {
    for buffer in [0, 2 * node_bytes_for(4)] {
        let d = dev(4096, 64);
        let mut s =
            PlainStore::create(Arc::clone(&d), cfg(buffer, PolicyKind::Lru, false)).unwrap();
        let ids: Vec<PageId> = (0..6).map(|i| leaf(&mut s, &[i, i + 10, i + 20])).collect();
        s.checkpoint().unwrap();
        let s = PlainStore::open(Arc::clone(&d), cfg(buffer, PolicyKind::Lru, false)).unwrap();
        // Buffer the first one; ask for a repeat and a shuffled order.
        let first = s.get(ids[0]).unwrap();
        d.reset_stats();
        let want = [ids[3], ids[0], ids[5], ids[1], ids[3], ids[2], ids[4]];
        let got = s.get_batch(&want).unwrap();
        let io = d.stats().io;
        assert_eq!(io.read_batches, 1, "buffer {buffer}");
        let buffered = u64::from(buffer > 0);
        assert_eq!(io.pages_read, 6 - buffered, "each missing page once");
        for (id, node) in want.iter().zip(&got) {
            assert_eq!(node.entries, s.get(*id).unwrap().entries);
        }
        assert_eq!(got[1].entries, first.entries);
        assert!(s.get_batch(&[ids[0], 999]).is_err(), "no node at page 999");
    }
}

#[test]
fn entries_come_back_sorted_and_changes_apply_by_key() {
    let mut s = PlainStore::create(dev(4096, 64), PlainConfig::default()).unwrap();
    let id = leaf(&mut s, &[9, 3, 7]);
    assert_eq!(
        s.get(id)
            .unwrap()
            .entries
            .iter()
            .map(|e| e.key)
            .collect::<Vec<_>>(),
        vec![3, 7, 9]
    );
    let op = s.begin_op().unwrap();
    s.modify(
        id,
        0,
        &[
            EntryChange::Upsert(entry(5, 0, false)),
            EntryChange::Upsert(entry(7, 4, false)),
            EntryChange::Remove(3),
            EntryChange::Remove(100),
            EntryChange::Upsert(entry(1, 0, false)),
        ],
    )
    .unwrap();
    s.commit_op(op).unwrap();
    let n = s.get(id).unwrap();
    assert_eq!(
        n.entries.iter().map(|e| e.key).collect::<Vec<_>>(),
        vec![1, 5, 7, 9]
    );
    assert_eq!(n.entries[2], entry(7, 4, false));
    // Level mismatch and duplicate keys are refused.
    let op = s.begin_op().unwrap();
    assert!(s.modify(id, 1, &[]).is_err());
    assert!(s
        .create(0, vec![entry(1, 0, false), entry(1, 1, false)])
        .is_err());
    s.commit_op(op).unwrap();
}

#[test]
fn node_too_big_is_a_clear_error_and_changes_nothing() {
    let mut s = PlainStore::create(dev(512, 64), cfg(0, PolicyKind::Lru, false)).unwrap();
    let m = s.max_entries();
    assert_eq!(m, page::max_entries(512, false));
    let keys: Vec<u64> = (0..=m as u64).collect();
    let op = s.begin_op().unwrap();
    let e = s
        .create(0, keys.iter().map(|&k| entry(k, 0, false)).collect())
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit") && e.contains("512"), "{e}");
    s.commit_op(op).unwrap();
    let id = leaf(&mut s, &keys[..m]);
    let op = s.begin_op().unwrap();
    let e = s
        .modify(id, 0, &[EntryChange::Upsert(entry(999, 0, false))])
        .unwrap_err();
    assert!(e.to_string().contains("does not fit"), "{e}");
    s.commit_op(op).unwrap();
    assert_eq!(s.get(id).unwrap().entries.len(), m);
    // A payload in a store without payloads is refused too.
    let op = s.begin_op().unwrap();
    assert!(s.create(0, vec![entry(1, 0, true)]).is_err());
    s.commit_op(op).unwrap();
}

#[test]
fn bad_page_ids_and_full_device_are_errors() {
    let mut s = PlainStore::create(dev(512, 3), PlainConfig::default()).unwrap();
    for id in [0, 1, 2, 3, 1 << 40, u64::MAX] {
        assert!(s.get(id).is_err(), "page {id}");
    }
    let a = leaf(&mut s, &[1]);
    let _b = leaf(&mut s, &[2]);
    let op = s.begin_op().unwrap();
    assert!(matches!(s.create(0, vec![]), Err(Error::DeviceFull(_))));
    assert!(s.delete(7).is_err());
    s.delete(a).unwrap();
    assert!(s.delete(a).is_err());
    assert!(s.get(a).unwrap_err().to_string().contains("deleted"));
    s.commit_op(op).unwrap();
    // Mis-nested operations.
    assert!(s.commit_op(42).is_err());
    let op = s.begin_op().unwrap();
    assert!(s.begin_op().is_err());
    assert!(s.checkpoint().is_err());
    s.commit_op(op).unwrap();
    // A device read error (page beyond the device) is an error, not a panic.
    let small = dev(512, 2);
    let mut s2 = PlainStore::create(Arc::clone(&small), PlainConfig::default()).unwrap();
    leaf(&mut s2, &[1]);
    s2.checkpoint().unwrap();
    let big = dev(512, 100);
    copy_header(&*small, &*big);
    // The header claims node pages the new device never received.
    let s3 = PlainStore::open(big, PlainConfig::default()).unwrap();
    assert!(matches!(s3.get(1), Err(Error::Corrupt { .. })));
}

#[test]
fn open_refuses_blank_corrupt_and_mismatched_headers() {
    let d = dev(512, 16);
    let e = PlainStore::open(Arc::clone(&d), PlainConfig::default()).unwrap_err();
    assert!(e.to_string().contains("blank"), "{e}");
    let mut s = PlainStore::create(Arc::clone(&d), PlainConfig::default()).unwrap();
    s.checkpoint().unwrap();
    let e = PlainStore::open(Arc::clone(&d), cfg(0, PolicyKind::Lru, true)).unwrap_err();
    assert!(e.to_string().contains("payload"), "{e}");
    let mut buf = vec![0u8; 512];
    d.read(0, &mut buf).unwrap();
    buf[100] ^= 0x55;
    d.write(0, &buf).unwrap();
    assert!(matches!(
        PlainStore::open(Arc::clone(&d), PlainConfig::default()),
        Err(Error::Corrupt { .. })
    ));
    // A valid page of another kind at page 0.
    page::encode_raw(PageKind::Meta, 0, b"hello", &mut buf).unwrap();
    d.write(0, &buf).unwrap();
    assert!(PlainStore::open(Arc::clone(&d), PlainConfig::default()).is_err());
    // A header whose magic is wrong.
    page::encode_raw(PageKind::Header, 0, &[7u8; 120], &mut buf).unwrap();
    d.write(0, &buf).unwrap();
    let e = PlainStore::open(d, PlainConfig::default()).unwrap_err();
    assert!(e.to_string().contains("magic"), "{e}");
}

#[test]
fn meta_and_user_meta_survive_reopen() {
    let d = dev(512, 64);
    let mut s = PlainStore::create(Arc::clone(&d), PlainConfig::default()).unwrap();
    let root = leaf(&mut s, &[1, 2]);
    let meta = TreeMeta {
        root: Some(root),
        height: 1,
        records: 2,
    };
    s.set_meta(meta.clone()).unwrap();
    assert!(s
        .set_meta(TreeMeta {
            root: Some(55),
            ..meta.clone()
        })
        .is_err());
    let max = s.max_user_meta();
    assert!(s.set_user_meta(vec![1; max + 1]).is_err());
    s.set_user_meta(b"{\"kind\":\"rstar\"}".to_vec()).unwrap();
    s.checkpoint().unwrap();
    let r = PlainStore::open(d, PlainConfig::default()).unwrap();
    assert_eq!(r.meta(), meta);
    assert_eq!(r.user_meta(), b"{\"kind\":\"rstar\"}");
    assert_eq!(r.get(root).unwrap().entries.len(), 2);
}

#[test]
fn freed_pages_are_reused_only_after_checkpoint_and_long_free_lists_chain() {
    let d = dev(512, 1024);
    let mut s = PlainStore::create(Arc::clone(&d), cfg(4096, PolicyKind::TwoQ, false)).unwrap();
    let ids: Vec<PageId> = (0..300).map(|i| leaf(&mut s, &[i])).collect();
    assert_eq!(
        ids,
        (1..=300).collect::<Vec<_>>(),
        "pages allocated in order"
    );
    let op = s.begin_op().unwrap();
    for &id in &ids[..250] {
        s.delete(id).unwrap();
    }
    s.commit_op(op).unwrap();
    // Not durable yet: new pages come from the end.
    assert_eq!(leaf(&mut s, &[1000]), 301);
    s.checkpoint().unwrap();
    let free: Vec<PageId> = s.allocator().free_pages().collect();
    assert_eq!(free, (1..=250).collect::<Vec<_>>());
    // 250 ids do not fit the 512-byte header page: the list chains.
    assert!(250 * 8 > page::max_raw_body(512));
    let mut r = PlainStore::open(Arc::clone(&d), cfg(0, PolicyKind::Lru, false)).unwrap();
    assert_eq!(r.allocator(), s.allocator());
    for &id in &ids[250..] {
        assert_eq!(r.get(id).unwrap().entries[0].key, id - 1);
    }
    assert_eq!(r.get(301).unwrap().entries[0].key, 1000);
    // Durable free pages are reused, lowest first.
    assert_eq!(leaf(&mut r, &[5]), 1);
    assert_eq!(leaf(&mut r, &[6]), 2);
}

#[test]
fn no_buffer_reads_every_get_and_writes_through_at_commit() {
    let mut s = PlainStore::create(dev(4096, 64), cfg(0, PolicyKind::Lru, false)).unwrap();
    let w0 = writes(&s);
    let op = s.begin_op().unwrap();
    let a = s.create(0, vec![entry(1, 0, false)]).unwrap();
    let b = s.create(0, vec![entry(2, 0, false)]).unwrap();
    s.modify(a, 0, &[EntryChange::Upsert(entry(3, 0, false))])
        .unwrap();
    // Inside the operation: nothing written, changed nodes readable.
    assert_eq!(writes(&s), w0);
    assert_eq!(s.get(a).unwrap().entries.len(), 2);
    s.commit_op(op).unwrap();
    assert_eq!(
        writes(&s),
        w0 + 2,
        "write-through at commit, one write per node"
    );
    assert_eq!(s.buffered_bytes(), 0);
    let r0 = reads(&s);
    for _ in 0..3 {
        s.get(b).unwrap();
    }
    assert_eq!(reads(&s), r0 + 3);
    let st = s.stats();
    assert_eq!(st.node_writes, 2);
    assert_eq!(st.nodes_created, 2);
    assert_eq!(st.ops_committed, 1);
    assert_eq!(st.node_gets, 4);
    assert_eq!(st.buffer_hits, 1);
    assert_eq!(st.buffer_misses, 3);
    assert_eq!(st.node_reads, 3);
    assert_eq!(
        st.peak_buffer_bytes as usize,
        node_bytes_for(1) + node_bytes_for(2)
    );
}

#[test]
fn write_back_buffer_hits_and_writes_on_eviction_and_checkpoint() {
    let budget = 3 * node_bytes_for(1);
    let mut s = PlainStore::create(dev(4096, 64), cfg(budget, PolicyKind::Lru, false)).unwrap();
    let w0 = writes(&s);
    let ids: Vec<PageId> = (0..3).map(|i| leaf(&mut s, &[i])).collect();
    assert_eq!(writes(&s), w0, "three nodes fit: nothing written");
    assert_eq!(s.dirty_nodes(), 3);
    let r0 = reads(&s);
    s.get(ids[0]).unwrap();
    assert_eq!(reads(&s), r0);
    // A fourth node evicts the least recently used (ids[1]), which is dirty.
    leaf(&mut s, &[9]);
    assert_eq!(writes(&s), w0 + 1);
    assert_eq!(s.stats().node_writes, 1);
    s.checkpoint().unwrap();
    assert_eq!(s.dirty_nodes(), 0);
    assert_eq!(s.stats().node_writes, 4);
    assert!(s.buffered_bytes() <= budget);
    // Clean evictions write nothing.
    let w1 = writes(&s);
    s.get(ids[1]).unwrap();
    assert_eq!(writes(&s), w1);
    assert_eq!(
        s.stats().peak_buffer_bytes as usize,
        budget + node_bytes_for(1)
    );
}

#[test]
fn concurrent_readers_agree() {
    let mut s = PlainStore::create(
        dev(4096, 4096),
        cfg(8 * node_bytes_for(4), PolicyKind::S2q, false),
    )
    .unwrap();
    let ids: Vec<PageId> = (0..64)
        .map(|i| leaf(&mut s, &[i, i + 100, i + 200, i + 300]))
        .collect();
    s.checkpoint().unwrap();
    let s = Arc::new(s);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&s);
            let ids = ids.clone();
            std::thread::spawn(move || {
                for round in 0..50usize {
                    let i = (round * 7 + t * 13) % ids.len();
                    let n = s.get(ids[i]).unwrap();
                    assert_eq!(n.entries[0].key, i as u64);
                    assert_eq!(n.entries.len(), 4);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let st = s.stats();
    assert_eq!(st.node_gets, 200);
    assert_eq!(st.buffer_hits + st.buffer_misses, 200);
    assert!(s.buffered_bytes() <= 8 * node_bytes_for(4));
}

#[test]
fn failed_writes_are_sticky_and_keep_the_buffer() {
    use crate::storage::faulty::{FaultPlan, FaultyDevice};
    // Write calls: 1 = header at create, 2 = first commit, 3 = second commit (fails).
    let d: Arc<dyn PageDevice> = Arc::new(FaultyDevice::new(
        MemDevice::new(512, 64).unwrap(),
        FaultPlan::none().fail_write(3),
    ));
    let mut s = PlainStore::create(d, cfg(0, PolicyKind::Lru, false)).unwrap();
    let a = leaf(&mut s, &[1]);
    let op = s.begin_op().unwrap();
    s.modify(a, 0, &[EntryChange::Upsert(entry(2, 0, false))])
        .unwrap();
    assert!(s.commit_op(op).is_err());
    // The change is still visible; no more changes are taken.
    assert_eq!(s.get(a).unwrap().entries.len(), 2);
    assert_eq!(s.dirty_nodes(), 1);
    let e = s.begin_op().unwrap_err().to_string();
    assert!(e.contains("earlier"), "{e}");
    assert!(s.checkpoint().is_err());

    // A full device is reported as such, and sticks too.
    let d: Arc<dyn PageDevice> = Arc::new(FaultyDevice::new(
        MemDevice::new(512, 64).unwrap(),
        FaultPlan::none().full_at_page(3),
    ));
    let mut s = PlainStore::create(d, cfg(0, PolicyKind::S2q, false)).unwrap();
    leaf(&mut s, &[1]);
    leaf(&mut s, &[2]);
    let op = s.begin_op().unwrap();
    s.create(0, vec![entry(3, 0, false)]).unwrap();
    assert!(matches!(s.commit_op(op), Err(Error::DeviceFull(_))));
    assert!(matches!(s.begin_op(), Err(Error::StoreFailed(_))));
    assert_eq!(s.get(3).unwrap().entries[0].key, 3);
}

#[test]
fn hlru_keeps_upper_levels_through_a_leaf_scan() {
    fn root_hit_after_scan(policy: PolicyKind) -> bool {
        let budget = 3 * node_bytes_for(1);
        let mut s = PlainStore::create(dev(4096, 256), cfg(budget, policy, false)).unwrap();
        let leaves: Vec<PageId> = (0..20).map(|i| leaf(&mut s, &[i])).collect();
        let op = s.begin_op().unwrap();
        let root = s.create(1, vec![entry(leaves[0], 0, false)]).unwrap();
        s.commit_op(op).unwrap();
        s.checkpoint().unwrap();
        s.get(root).unwrap();
        for &l in &leaves {
            s.get(l).unwrap();
        }
        let hits = s.stats().buffer_hits;
        s.get(root).unwrap();
        s.stats().buffer_hits == hits + 1
    }
    assert!(root_hit_after_scan(PolicyKind::Hlru));
    assert!(!root_hit_after_scan(PolicyKind::Lru));
}

#[test]
fn a_header_beyond_the_device_is_refused() {
    let big = dev(512, 100);
    let mut s = PlainStore::create(Arc::clone(&big), PlainConfig::default()).unwrap();
    for i in 0..10 {
        leaf(&mut s, &[i]);
    }
    s.checkpoint().unwrap();
    let small = dev(512, 5);
    copy_header(&*big, &*small);
    let e = PlainStore::open(small, PlainConfig::default()).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
}

#[test]
fn in_memory_store() {
    let mut s = PlainStore::create_in_memory(1024, PlainConfig::default()).unwrap();
    let id = leaf(&mut s, &[4, 2]);
    assert_eq!(s.get(id).unwrap().entries[0].key, 2);
    assert!(PlainStore::create_in_memory(1000, PlainConfig::default()).is_err());
}

// ---------------------------------------------------------------
// Oracle test.

#[derive(Debug, Clone)]
enum Mutation {
    Create {
        level: u16,
        keys: Vec<u64>,
    },
    Modify {
        pick: usize,
        changes: Vec<(bool, u64, u64)>,
    },
    Delete {
        pick: usize,
    },
    Get {
        pick: usize,
    },
    Meta {
        pick: usize,
        records: u64,
    },
}

#[derive(Debug, Clone)]
enum Step {
    Op(Vec<Mutation>),
    Get(usize),
    Checkpoint,
    Reopen,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (0u16..3, prop::collection::vec(0u64..40, 0..14))
            .prop_map(|(level, keys)| Mutation::Create { level, keys }),
        4 => (any::<usize>(), prop::collection::vec((any::<bool>(), 0u64..40, 0u64..5), 1..6))
            .prop_map(|(pick, changes)| Mutation::Modify { pick, changes }),
        1 => any::<usize>().prop_map(|pick| Mutation::Delete { pick }),
        2 => any::<usize>().prop_map(|pick| Mutation::Get { pick }),
        1 => (any::<usize>(), 0u64..1000).prop_map(|(pick, records)| Mutation::Meta { pick, records }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => prop::collection::vec(mutation(), 1..5).prop_map(Step::Op),
        3 => any::<usize>().prop_map(Step::Get),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Reopen),
    ]
}

struct Model {
    nodes: BTreeMap<PageId, Node>,
    /// Deleted since the last checkpoint: must not be handed out again yet.
    pending: BTreeSet<PageId>,
    meta: TreeMeta,
}

impl Model {
    fn pick(&self, pick: usize) -> Option<PageId> {
        if self.nodes.is_empty() {
            None
        } else {
            self.nodes.keys().nth(pick % self.nodes.len()).copied()
        }
    }
}

fn check_all(s: &PlainStore, m: &Model) -> std::result::Result<(), TestCaseError> {
    for (&id, node) in &m.nodes {
        let got = s.get(id).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&*got, node, "page {}", id);
    }
    prop_assert_eq!(s.meta(), m.meta.clone());
    Ok(())
}

fn run(
    ps: usize,
    policy: PolicyKind,
    buffer: usize,
    with_payload: bool,
    steps: Vec<Step>,
) -> std::result::Result<(), TestCaseError> {
    let config = cfg(buffer, policy, with_payload);
    let d = dev(ps, 1 << 16);
    let mut s = PlainStore::create(Arc::clone(&d), config).unwrap();
    let max = s.max_entries();
    let mut m = Model {
        nodes: BTreeMap::new(),
        pending: BTreeSet::new(),
        meta: TreeMeta::default(),
    };
    for st in steps {
        match st {
            Step::Op(muts) => {
                let w0 = writes(&s);
                let op = s.begin_op().unwrap();
                for mu in muts {
                    match mu {
                        Mutation::Create { level, keys } => {
                            let uniq: BTreeSet<u64> = keys.iter().copied().collect();
                            let entries: Vec<Entry> =
                                keys.iter().map(|&k| entry(k, 0, with_payload)).collect();
                            let r = s.create(level, entries);
                            if uniq.len() != keys.len() || keys.len() > max {
                                prop_assert!(r.is_err());
                            } else {
                                let id = r.map_err(|e| TestCaseError::fail(e.to_string()))?;
                                prop_assert!(
                                    !m.nodes.contains_key(&id),
                                    "page {} handed out twice",
                                    id
                                );
                                prop_assert!(
                                    !m.pending.contains(&id),
                                    "page {} reused before its deletion was durable",
                                    id
                                );
                                let entries =
                                    uniq.iter().map(|&k| entry(k, 0, with_payload)).collect();
                                m.nodes.insert(id, Node { level, entries });
                            }
                        }
                        Mutation::Modify { pick, changes } => {
                            let Some(id) = m.pick(pick) else { continue };
                            let level = m.nodes[&id].level;
                            let ch: Vec<EntryChange> = changes
                                .iter()
                                .map(|&(up, k, v)| {
                                    if up {
                                        EntryChange::Upsert(entry(k, v, with_payload))
                                    } else {
                                        EntryChange::Remove(k)
                                    }
                                })
                                .collect();
                            let mut map: BTreeMap<u64, Entry> =
                                m.nodes[&id].entries.iter().map(|e| (e.key, *e)).collect();
                            for c in &ch {
                                match c {
                                    EntryChange::Upsert(e) => {
                                        map.insert(e.key, *e);
                                    }
                                    EntryChange::Remove(k) => {
                                        map.remove(k);
                                    }
                                }
                            }
                            let r = s.modify(id, level, &ch);
                            if map.len() > max {
                                prop_assert!(r.is_err());
                            } else {
                                r.map_err(|e| TestCaseError::fail(e.to_string()))?;
                                m.nodes.insert(
                                    id,
                                    Node {
                                        level,
                                        entries: map.into_values().collect(),
                                    },
                                );
                            }
                        }
                        Mutation::Delete { pick } => {
                            let Some(id) = m.pick(pick) else { continue };
                            s.delete(id).unwrap();
                            m.nodes.remove(&id);
                            m.pending.insert(id);
                            prop_assert!(s.get(id).is_err());
                            if m.meta.root == Some(id) {
                                m.meta.root = None;
                                s.set_meta(m.meta.clone()).unwrap();
                            }
                        }
                        Mutation::Get { pick } => {
                            let Some(id) = m.pick(pick) else { continue };
                            prop_assert_eq!(&*s.get(id).unwrap(), &m.nodes[&id]);
                        }
                        Mutation::Meta { pick, records } => {
                            m.meta = TreeMeta {
                                root: m.pick(pick),
                                height: (records % 7) as u16,
                                records,
                            };
                            s.set_meta(m.meta.clone()).unwrap();
                        }
                    }
                }
                prop_assert_eq!(writes(&s), w0, "no write inside an operation");
                s.commit_op(op).unwrap();
                prop_assert!(s.buffered_bytes() <= buffer);
                if buffer == 0 {
                    prop_assert_eq!(s.dirty_nodes(), 0);
                }
            }
            Step::Get(pick) => {
                if let Some(id) = m.pick(pick) {
                    prop_assert_eq!(&*s.get(id).unwrap(), &m.nodes[&id]);
                }
                prop_assert!(s.buffered_bytes() <= buffer);
            }
            Step::Checkpoint => {
                s.checkpoint().unwrap();
                m.pending.clear();
                prop_assert_eq!(s.dirty_nodes(), 0);
            }
            Step::Reopen => {
                s.checkpoint().unwrap();
                m.pending.clear();
                let before = s.allocator().clone();
                drop(s);
                s = PlainStore::open(Arc::clone(&d), config).unwrap();
                prop_assert_eq!(s.allocator(), &before);
                check_all(&s, &m)?;
            }
        }
    }
    check_all(&s, &m)?;
    s.checkpoint().unwrap();
    let r = PlainStore::open(d, config).unwrap();
    check_all(&r, &m)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    #[test]
    fn plain_store_matches_oracle(
        ps in prop::sample::select(vec![512usize, 4096]),
        policy in prop::sample::select(PolicyKind::ALL.to_vec()),
        size in 0usize..3,
        with_payload in any::<bool>(),
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let buffer = [0, 3 * node_bytes_for(6), 1 << 20][size];
        run(ps, policy, buffer, with_payload, steps)?;
    }
}
