//! eFIND's read buffer with FESTIval's S2Q (`buffer_policy =
//! "s2q-festival"`): a page is cached at its second read, not its first;
//! a flush pre-caches a page read once (its id in RQ, the policy's `A1`)
//! and rewrites a cached one; the policy needs temporal control on and
//! eFIND's store.
use super::*;
use crate::config::StoreSpec;
use crate::engine::{IndexSpec, KeyStyle};
use crate::geom::Rect;
use crate::store::NodeStore;

fn e(k: u64) -> Entry {
    Entry {
        key: k,
        rect: Rect::new(k as f64, 0.0, k as f64 + 1.0, 1.0).unwrap(),
        payload: 0,
    }
}

/// A store of 4 KiB pages with the paper's configuration (20 % read
/// buffer, temporal control on), read buffer `mode` and policy `policy`,
/// holding `n` leaves written to the device (the checkpoint flushed them;
/// none was read, so none is cached or in RQ).
fn store_with_leaves(
    policy: PolicyKind,
    mode: ReadBufferMode,
    n: u64,
) -> (EfindStore, Vec<PageId>) {
    let cfg = EfindConfig {
        read_policy: policy,
        read_buffer_mode: mode,
        ..EfindConfig::default()
    };
    let mut s = EfindStore::create_in_memory(4096, cfg).unwrap();
    let op = s.begin_op().unwrap();
    let ids: Vec<PageId> = (1..=n).map(|k| s.create(0, vec![e(k)]).unwrap()).collect();
    s.commit_op(op).unwrap();
    s.checkpoint().unwrap();
    assert_eq!(s.buffered_pages(), 0);
    for &id in &ids {
        assert!(!s.lock().rb.contains(id) && !s.lock().rb.remembered(id));
    }
    (s, ids)
}

/// Reads `id` through the store; returns whether the device was read.
fn read_from_device(s: &EfindStore, id: PageId) -> bool {
    let before = s.stats().node_reads;
    s.get(id).unwrap();
    s.stats().node_reads > before
}

/// Adds an entry to `id` (a leaf holding entry `k`): its new entries.
fn add_entry(s: &mut EfindStore, id: PageId, k: u64) -> Vec<Entry> {
    s.modify(id, 0, &[EntryChange::Upsert(e(10 + id))]).unwrap();
    vec![e(k), e(10 + id)]
}

#[test]
fn a_page_is_cached_at_its_second_read_not_its_first() {
    let (s, ids) = store_with_leaves(PolicyKind::S2qFestival, ReadBufferMode::Fixed, 1);
    let a = ids[0];
    assert!(read_from_device(&s, a));
    assert!(!s.lock().rb.contains(a), "a first read is not cached");
    assert!(s.lock().rb.remembered(a), "its id is in A1 (RQ)");
    assert!(read_from_device(&s, a), "the second read reads the device");
    assert!(s.lock().rb.contains(a), "and is cached");
    assert!(!s.lock().rb.remembered(a), "its id left A1");
    assert!(!read_from_device(&s, a), "a third read is a hit");
    let st = s.stats();
    assert_eq!((st.buffer_misses, st.buffer_hits), (2, 1));

    // Johnson & Shasha's S2Q caches a page at its first read.
    let (s, ids) = store_with_leaves(PolicyKind::S2q, ReadBufferMode::Fixed, 1);
    assert!(read_from_device(&s, ids[0]));
    assert!(s.lock().rb.contains(ids[0]));
    assert!(!read_from_device(&s, ids[0]));
}

/// A tree reads the nodes of its path (before its operation begins), then
/// changes some: FESTIval's tree changes the node it holds. The store's
/// `modify` and `delete` check the node they change; they take the one
/// the read buffer declined, without a second device read (which would
/// also have cached it). A page written or deleted is forgotten.
#[test]
fn a_page_read_once_is_changed_without_reading_it_again() {
    let (mut s, ids) = store_with_leaves(PolicyKind::S2qFestival, ReadBufferMode::Fixed, 2);
    let (a, b) = (ids[0], ids[1]);
    assert!(read_from_device(&s, a) && read_from_device(&s, b));
    let reads = s.stats().node_reads;
    let op = s.begin_op().unwrap();
    add_entry(&mut s, a, 1);
    s.delete(b).unwrap();
    s.commit_op(op).unwrap();
    assert_eq!(s.stats().node_reads, reads, "no second read");
    assert!(!s.lock().rb.contains(a) && s.lock().rb.remembered(a));
    assert_eq!(s.lock().declined.len(), 1, "b forgotten when deleted");
    s.checkpoint().unwrap();
    assert_eq!(
        s.stats().node_reads,
        reads + 1,
        "the flush reads a for its merge"
    );
    assert_eq!(s.lock().declined.len(), 0, "a forgotten when written");
}

/// A flush, as FESTIval's: the stored version of a flushed page is read
/// through the read buffer for the merge (an offer), then Alg. 5 rewrites
/// the page there when cached. A page read once before (`a`, its id in
/// A1) is cached by the merge's read, its second; a cached page (`b`) is
/// rewritten. Each holds its new contents.
#[test]
fn a_flush_caches_a_page_read_once_and_rewrites_a_cached_one() {
    let (mut s, ids) = store_with_leaves(PolicyKind::S2qFestival, ReadBufferMode::Fixed, 2);
    let (a, b) = (ids[0], ids[1]);
    for _ in 0..2 {
        read_from_device(&s, b);
    }
    let op = s.begin_op().unwrap();
    read_from_device(&s, a);
    let want = [add_entry(&mut s, a, 1), add_entry(&mut s, b, 2)];
    s.commit_op(op).unwrap();
    assert!(s.lock().rb.remembered(a) && s.lock().rb.contains(b));
    let reads = s.stats().node_reads;
    s.checkpoint().unwrap();
    assert_eq!(
        s.stats().node_reads,
        reads + 1,
        "a read for the merge, b a hit"
    );
    let inner = s.lock();
    assert_eq!(inner.estats.temporal_control.precached, 0);
    for (id, want) in [a, b].into_iter().zip(want) {
        assert!(!inner.rb.remembered(id), "page {id} is not in A1");
        assert_eq!(
            inner.rb.peek(id).expect("cached").entries,
            want,
            "page {id}"
        );
    }
    drop(inner);
    assert!(!read_from_device(&s, a) && !read_from_device(&s, b));
}

/// Alg. 5 with A1 as RQ: with an adaptive read buffer the write buffer's
/// view answers the flush (no merge read), and a flushed page whose id is
/// in A1 is pre-cached, its id leaving A1.
#[test]
fn a_flush_pre_caches_a_page_whose_id_is_in_a1() {
    let (mut s, ids) = store_with_leaves(PolicyKind::S2qFestival, ReadBufferMode::Adaptive, 1);
    let a = ids[0];
    let op = s.begin_op().unwrap();
    read_from_device(&s, a);
    let want = add_entry(&mut s, a, 1);
    s.commit_op(op).unwrap();
    assert!(s.lock().rb.remembered(a));
    let reads = s.stats().node_reads;
    s.checkpoint().unwrap();
    assert_eq!(s.stats().node_reads, reads, "the view answers the flush");
    let inner = s.lock();
    assert_eq!(inner.estats.temporal_control.precached, 1);
    assert!(!inner.rb.remembered(a));
    assert_eq!(inner.rb.peek(a).expect("pre-cached").entries, want);
}

/// A cached page a flush rewrites keeps its LRU place (FESTIval does not
/// count the rewrite as an access), and changing it in an operation is no
/// access either (FESTIval's tree changes the node it holds). With an
/// adaptive read buffer the write buffer's view answers the flush, so no
/// merge read touches it (a fixed one reads it for the merge, an access,
/// as FESTIval's flush does).
#[test]
fn a_flushed_cached_page_keeps_its_lru_place() {
    let (mut s, ids) = store_with_leaves(PolicyKind::S2qFestival, ReadBufferMode::Adaptive, 3);
    let (a, b, c) = (ids[0], ids[1], ids[2]);
    for id in [a, a, b, b] {
        read_from_device(&s, id);
    }
    let op = s.begin_op().unwrap();
    let want = add_entry(&mut s, a, 1);
    s.commit_op(op).unwrap();
    let reads = s.stats().node_reads;
    s.checkpoint().unwrap();
    assert_eq!(s.stats().node_reads, reads, "the view answers the flush");
    read_from_device(&s, c);
    let mut inner = s.lock();
    assert_eq!(inner.rb.peek(a).expect("cached").entries, want);
    let victim = inner.rb.evict_one().map(|(id, _)| id);
    assert_eq!(victim, Some(a), "a, read before b, is still the LRU page");
}

/// FESTIval refuses S2Q without temporal control on reads (its A1 is
/// RQ); so do the store and the settings, which also keep the policy to
/// eFIND's read buffer.
#[test]
fn the_policy_needs_temporal_control_and_the_efind_store() {
    let cfg = EfindConfig {
        read_policy: PolicyKind::S2qFestival,
        temporal_control: None,
        ..EfindConfig::default()
    };
    let err = EfindStore::create_in_memory(4096, cfg)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("s2q-festival") && err.contains("temporal control on"),
        "{err}"
    );

    let refusal = |pairs: &[(&str, &str)]| {
        let mut spec = IndexSpec::new(KeyStyle::Key);
        for (k, v) in pairs {
            spec.set(k, v).unwrap();
        }
        let e = spec.options().expect_err("refused");
        (e.key, e.to_string())
    };
    let policy = ("buffer_policy", "s2q-festival");
    let (key, msg) = refusal(&[("store", "efind"), ("temporal_control", "off"), policy]);
    assert_eq!(key, Some("buffer_policy"));
    assert!(msg.contains("needs temporal_control on"), "{msg}");
    for store in ["plain", "fast"] {
        let (key, msg) = refusal(&[("store", store), policy]);
        assert_eq!(key, Some("buffer_policy"), "{msg}");
        assert!(
            msg.contains("s2q-festival") || msg.contains("no such buffer"),
            "{msg}"
        );
    }
    // Options built without `IndexSpec` are checked when an index is made.
    let mut plain = StoreSpec::plain(512 << 10);
    let mut efind = StoreSpec::efind(
        512 << 10,
        EfindConfig {
            temporal_control: None,
            ..EfindConfig::default()
        },
    );
    assert!(plain.verify(4096).is_ok() && efind.verify(4096).is_ok());
    for store in [&mut plain, &mut efind] {
        match store {
            StoreSpec::Plain(p) => p.policy = PolicyKind::S2qFestival,
            StoreSpec::Efind(e) => e.policy = PolicyKind::S2qFestival,
            _ => unreachable!(),
        }
        let err = store.verify(4096).unwrap_err().to_string();
        assert!(err.contains("s2q-festival"), "{err}");
    }

    let mut spec = IndexSpec::new(KeyStyle::Key);
    spec.set("store", "efind").unwrap();
    spec.set("buffer_policy", "S2Q-FESTIVAL").unwrap();
    match spec.options().unwrap().store {
        StoreSpec::Efind(s) => assert_eq!(s.policy, PolicyKind::S2qFestival),
        other => panic!("{other:?}"),
    }
}

/// The memo of declined pages holds the newest [`Declined::PAGES`].
#[test]
fn the_memo_of_declined_pages_is_bounded() {
    use super::retrieve::Declined;
    let node = || {
        Arc::new(Node {
            level: 0,
            entries: Vec::new(),
        })
    };
    let mut d = Declined::default();
    let n = Declined::PAGES as u64 + 4;
    for id in 1..=n {
        d.hold(id, node());
    }
    // 5..=20 are held; held again, 6 is the newest: 5 and 7 leave first.
    d.hold(6, node());
    d.hold(n + 1, node());
    d.hold(n + 2, node());
    assert_eq!(d.len(), Declined::PAGES);
    assert!(d.get(5).is_none() && d.get(7).is_none());
    assert!(d.get(6).is_some() && d.get(8).is_some() && d.get(n + 2).is_some());
}
