//! A second review of the object heap (`objects.dat`) and of its commits
//! with the index's checkpoints:
//!
//! - a model of the heap alone (puts of every geometry kind the encoder
//!   takes, large ones crossing the scan's 64 KiB reads, with payloads;
//!   deletes, re-puts, spills, commits, commits the index never named,
//!   crashes, readers, compactions) against an oracle of id → (payload,
//!   WKB, geometry), and one of an [`Index`] on eFIND, FAST and the plain
//!   store (inserts, deletes, moves, re-inserts, commits, checkpoints,
//!   reopens, crashes) whose refined answers are checked against the
//!   geometries inserted;
//! - a crash anywhere inside the heap's write of a checkpoint (the file
//!   cut or zeroed at and around every record boundary of what the
//!   checkpoint and the spills before it appended);
//! - damage to any part of the file (its header, every record's header,
//!   body and marks; truncation at and inside every record): every answer
//!   is exact or an error naming `objects.dat`;
//! - the WKB decoder on any bytes and on damaged WKB (never a panic), its
//!   round trip of every geometry the encoder takes, and the defects found
//!   (each test names the one it guards).
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use geo::{coord, Coord, LineString, MultiLineString, MultiPolygon, Point, Polygon};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{RngAlgorithm, TestCaseError, TestRng, TestRunner};

use super::*;
use crate::geom::MAX_COORD;
use crate::index::query::Predicate;
use crate::manifest::Access;
use crate::Index;

// ---------------------------------------------------------------------
// Geometries
// ---------------------------------------------------------------------

/// A coordinate of the index tests' domain (0..100 on both axes).
fn domain_coord() -> BoxedStrategy<Coord<f64>> {
    (0.0..100.0f64, 0.0..100.0f64)
        .prop_map(|(x, y)| coord! { x: x, y: y })
        .boxed()
}

/// A coordinate anywhere the encoder takes one: wide values, signed zeros,
/// the smallest normal and subnormal, the largest magnitude.
fn any_coord() -> BoxedStrategy<Coord<f64>> {
    let special = prop::sample::select(vec![
        0.0,
        -0.0,
        f64::MIN_POSITIVE,
        5e-324,
        MAX_COORD,
        -MAX_COORD,
    ]);
    let value = prop_oneof![3 => -1.0e6..1.0e6f64, 1 => special];
    (value.clone(), value)
        .prop_map(|(x, y)| coord! { x: x, y: y })
        .boxed()
}

fn line_of(
    c: &BoxedStrategy<Coord<f64>>,
    n: std::ops::Range<usize>,
) -> BoxedStrategy<LineString<f64>> {
    prop::collection::vec(c.clone(), n)
        .prop_map(LineString::new)
        .boxed()
}

/// A polygon with up to two holes; now and then an empty one, or one of
/// holes without an exterior ring (members of multi-polygons and
/// collections may be empty; the second is refused by the encoder).
fn polygon_of(c: &BoxedStrategy<Coord<f64>>) -> BoxedStrategy<Polygon<f64>> {
    let full = (
        line_of(c, 3..8),
        prop::collection::vec(line_of(c, 3..6), 0..3),
    )
        .prop_map(|(e, h)| Polygon::new(e, h));
    let holes_only = prop::collection::vec(line_of(c, 3..6), 1..3)
        .prop_map(|h| Polygon::new(LineString::new(vec![]), h));
    prop_oneof![
        12 => full,
        1 => Just(Polygon::new(LineString::new(vec![]), vec![])),
        1 => holes_only,
    ]
    .boxed()
}

/// Every kind of geometry (`Line`, `Rect` and `Triangle` too), empty
/// members in multi-geometries and collections, collections nested twice.
fn geometry_of(c: BoxedStrategy<Coord<f64>>) -> BoxedStrategy<Geometry> {
    let points = prop::collection::vec(c.clone(), 1..8)
        .prop_map(|v| Geometry::MultiPoint(v.into_iter().map(Point::from).collect()));
    let lines = prop::collection::vec(line_of(&c, 0..6), 1..4)
        .prop_map(|v| Geometry::MultiLineString(MultiLineString::new(v)));
    let polygons = prop::collection::vec(polygon_of(&c), 1..3)
        .prop_map(|v| Geometry::MultiPolygon(MultiPolygon::new(v)));
    let leaf = prop_oneof![
        c.clone().prop_map(|c| Geometry::Point(c.into())),
        (c.clone(), c.clone()).prop_map(|(a, b)| Geometry::Line(geo::Line::new(a, b))),
        line_of(&c, 1..10).prop_map(Geometry::LineString),
        polygon_of(&c).prop_map(Geometry::Polygon),
        (c.clone(), c.clone()).prop_map(|(a, b)| Geometry::Rect(geo::Rect::new(a, b))),
        (c.clone(), c.clone(), c.clone())
            .prop_map(|(a, b, d)| Geometry::Triangle(geo::Triangle::new(a, b, d))),
        points,
        lines,
        polygons,
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop::collection::vec(inner, 0..4)
            .prop_map(|v| Geometry::GeometryCollection(geo::GeometryCollection::new_from(v)))
    })
    .boxed()
}

/// A line or a ring of `n` vertices around a centre drawn from `seed`,
/// inside the domain.
fn large(seed: u64, n: usize, ring: bool) -> Geometry {
    let (cx, cy) = ((seed % 80) as f64 + 10.0, ((seed * 7) % 80) as f64 + 10.0);
    let coords: Vec<Coord<f64>> = (0..n)
        .map(|i| {
            let a = i as f64 * std::f64::consts::TAU / n as f64;
            let r = 3.0 + (i % 7) as f64 * 0.5;
            coord! { x: cx + r * a.cos(), y: cy + r * a.sin() }
        })
        .collect();
    if ring {
        Polygon::new(LineString::new(coords), vec![]).into()
    } else {
        LineString::new(coords).into()
    }
}

/// Lines and rings of 500 to 6,000 vertices (8 to 96 KiB of WKB): records
/// larger than the scan's 64 KiB reads, a page, a spill's threshold.
fn large_geometry() -> BoxedStrategy<Geometry> {
    (0u64..1000, 500usize..6000, any::<bool>())
        .prop_map(|(seed, n, ring)| large(seed, n, ring))
        .boxed()
}

/// `g` as WKB reads it back: a `Line` is a line string, a `Rect` and a
/// `Triangle` are polygons (at any depth).
fn normalized(g: &Geometry) -> Geometry {
    match g {
        Geometry::Line(l) => Geometry::LineString(LineString::new(vec![l.start, l.end])),
        Geometry::Rect(r) => Geometry::Polygon(r.to_polygon()),
        Geometry::Triangle(t) => Geometry::Polygon(t.to_polygon()),
        Geometry::GeometryCollection(c) => Geometry::GeometryCollection(
            geo::GeometryCollection::new_from(c.0.iter().map(normalized).collect()),
        ),
        other => other.clone(),
    }
}

/// Whether `g` holds a polygon with holes and no exterior ring, which WKB
/// cannot hold (at any depth).
fn holes_without_exterior(g: &Geometry) -> bool {
    let bad = |p: &Polygon<f64>| p.exterior().0.is_empty() && !p.interiors().is_empty();
    match g {
        Geometry::Polygon(p) => bad(p),
        Geometry::MultiPolygon(m) => m.0.iter().any(bad),
        Geometry::GeometryCollection(c) => c.0.iter().any(holes_without_exterior),
        _ => false,
    }
}

/// A runner drawing values of strategies from `seed` (the deterministic
/// campaigns).
fn runner(seed: u64) -> TestRunner {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        ProptestConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    )
}

fn draw<T: std::fmt::Debug>(r: &mut TestRunner, s: &BoxedStrategy<T>) -> T {
    s.new_tree(r).unwrap().current()
}

/// A geometry of `s` the heap takes.
fn draw_accepted(r: &mut TestRunner, s: &BoxedStrategy<Geometry>) -> Geometry {
    loop {
        let g = draw(r, s);
        if Heap::prepare(0, &[], &g).is_ok() {
            return g;
        }
    }
}

// ---------------------------------------------------------------------
// The heap alone, against a model
// ---------------------------------------------------------------------

/// What the model expects of an object: payload, WKB, geometry read.
type Objects = BTreeMap<u64, (Vec<u8>, Vec<u8>, Geometry)>;

#[derive(Debug, Clone)]
enum HeapOp {
    Put(u64, Vec<u8>, Geometry),
    Delete(u64),
    /// A commit the index's checkpoint then names.
    Commit,
    /// A commit whose checkpoint did not name it (it failed, or a crash
    /// came before), then a crash.
    CommitUnnamed,
    Spill,
    /// Dropped with its changes pending, reopened at the named mark.
    Crash,
    /// Committed, closed, reopened.
    Reopen,
    /// A reader opens the file beside the writer.
    Reader,
    Compact,
}

fn heap_op() -> BoxedStrategy<HeapOp> {
    let geometry = prop_oneof![8 => geometry_of(any_coord()), 1 => large_geometry()];
    prop_oneof![
        10 => (0u64..16, prop::collection::vec(any::<u8>(), 0..24), geometry)
            .prop_map(|(id, p, g)| HeapOp::Put(id, p, g)),
        4 => (0u64..16).prop_map(HeapOp::Delete),
        2 => Just(HeapOp::Commit),
        1 => Just(HeapOp::CommitUnnamed),
        2 => Just(HeapOp::Spill),
        1 => Just(HeapOp::Crash),
        1 => Just(HeapOp::Reopen),
        1 => Just(HeapOp::Reader),
        1 => Just(HeapOp::Compact),
    ]
    .boxed()
}

/// Checks that `h` holds exactly `want` (and nothing of the ids 0..16
/// besides).
fn same(h: &Heap, want: &Objects, what: &str) -> std::result::Result<(), TestCaseError> {
    prop_assert_eq!(
        h.ids(),
        want.keys().copied().collect::<Vec<_>>(),
        "{}: ids",
        what
    );
    prop_assert_eq!(h.len(), want.len() as u64, "{}: count", what);
    for id in 0..16u64 {
        match want.get(&id) {
            Some((payload, wkb, g)) => {
                prop_assert_eq!(
                    h.get_wkb(id).unwrap(),
                    Some(wkb.clone()),
                    "{}: WKB of {}",
                    what,
                    id
                );
                prop_assert_eq!(
                    h.get_payload(id).unwrap(),
                    Some(payload.clone()),
                    "{}: payload of {}",
                    what,
                    id
                );
                prop_assert_eq!(
                    h.get(id).unwrap(),
                    Some(g.clone()),
                    "{}: geometry of {}",
                    what,
                    id
                );
            }
            None => prop_assert!(
                h.get(id).unwrap().is_none() && !h.contains(id),
                "{}: {} is there",
                what,
                id
            ),
        }
    }
    Ok(())
}

/// The heap under test and what it must hold.
struct HeapModel {
    path: std::path::PathBuf,
    heap: Heap,
    /// What reads see (pending changes included).
    live: Objects,
    /// The state of the mark the index names.
    committed: Objects,
    named: u64,
    /// The newest generation used (each commit takes a new one).
    newest: u64,
}

impl HeapModel {
    fn commit(&mut self) -> std::result::Result<(), TestCaseError> {
        self.newest += 1;
        self.heap.commit(self.newest).unwrap();
        self.named = self.newest;
        self.committed = self.live.clone();
        Ok(())
    }

    /// A crash (the heap dropped as it is), then a writable open at the
    /// named mark, checked against it.
    fn crash(&mut self, what: &str) -> std::result::Result<(), TestCaseError> {
        let path = self.path.clone();
        let fresh = Heap::open(&path, false, Committed::Through(self.named)).unwrap();
        // The old handle goes only now: nothing it could still do matters.
        self.heap = fresh;
        self.live = self.committed.clone();
        same(&self.heap, &self.live, what)
    }

    fn step(&mut self, op: &HeapOp) -> std::result::Result<(), TestCaseError> {
        let what = format!("{op:?}");
        match op {
            HeapOp::Put(id, payload, g) => match self.heap.put(*id, payload, g) {
                Ok(rect) => {
                    prop_assert_eq!(rect, geometry::bounding_rect(g).unwrap());
                    let wkb = geometry::to_wkb(g).unwrap();
                    self.live.insert(*id, (payload.clone(), wkb, normalized(g)));
                }
                Err(e) => {
                    prop_assert!(e.is_user_error(), "{}: {}", what, e);
                    prop_assert!(
                        geometry::bounding_rect(g).is_err() || holes_without_exterior(g),
                        "{}: refused: {}",
                        what,
                        e
                    );
                }
            },
            HeapOp::Delete(id) => {
                let done = self.heap.delete(*id).is_ok();
                prop_assert_eq!(done, self.live.remove(id).is_some(), "{}", what);
            }
            HeapOp::Commit => self.commit()?,
            HeapOp::CommitUnnamed => {
                self.newest += 1;
                self.heap.commit(self.newest).unwrap();
                self.crash(&what)?;
            }
            HeapOp::Spill => self.heap.spill().unwrap(),
            HeapOp::Crash => self.crash(&what)?,
            HeapOp::Reopen => {
                self.commit()?;
                self.crash(&what)?;
            }
            HeapOp::Reader => {
                let ro = Heap::open(&self.path, true, Committed::Through(self.named)).unwrap();
                same(&ro, &self.committed, &format!("{what}: a reader"))?;
            }
            HeapOp::Compact => {
                let pending = self.heap.has_pending();
                let done = self.heap.compact();
                prop_assert_eq!(done.is_err(), pending, "{}: {:?}", what, done);
                if !pending {
                    let ro = Heap::open(&self.path, true, Committed::Through(self.named)).unwrap();
                    same(&ro, &self.committed, &format!("{what}: reopened"))?;
                }
            }
        }
        same(&self.heap, &self.live, &what)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// The heap alone: every read (of the writer, of a reader, after a
    /// crash, a compaction or a commit its index never named) is the
    /// model's, WKB bytes, payload and geometry.
    #[test]
    fn the_heap_holds_what_its_model_does(ops in prop::collection::vec(heap_op(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(OBJECTS_FILE);
        let heap = Heap::create(&path, 7).unwrap();
        let mut m = HeapModel {
            path,
            heap,
            live: Objects::new(),
            committed: Objects::new(),
            named: 7,
            newest: 7,
        };
        for op in &ops {
            m.step(op)?;
        }
        m.commit()?;
        m.crash("at the end")?;
    }
}

// ---------------------------------------------------------------------
// Indexes
// ---------------------------------------------------------------------

/// A store configuration of the index tests.
struct Store {
    settings: &'static [(&'static str, &'static str)],
    /// Every operation is durable when it returns (else at checkpoints).
    every_op_acked: bool,
}

const STORES: [Store; 3] = [
    Store {
        settings: &[
            ("store", "efind"),
            ("durability", "sync"),
            ("checkpoint_interval", "off"),
        ],
        every_op_acked: true,
    },
    Store {
        settings: &[
            ("store", "fast"),
            ("durability", "sync"),
            ("checkpoint_interval", "off"),
        ],
        every_op_acked: true,
    },
    Store {
        settings: &[("store", "plain")],
        every_op_acked: false,
    },
];

fn options(store: &Store) -> crate::IndexOptions {
    let mut spec = crate::IndexSpec::new(crate::KeyStyle::Key);
    for (k, v) in [("page_size", "1024"), ("buffer", "1MiB")]
        .iter()
        .chain(store.settings)
    {
        spec.set(k, v).unwrap();
    }
    spec.options()
        .unwrap()
        .with_domain_of([Rect::from_valid(0.0, 0.0, 100.0, 100.0)].iter())
}

/// The inserted geometry of every object.
type Inserted = BTreeMap<u64, Geometry>;

/// The windows of the refined queries: the domain, boxes, a segment.
fn windows() -> Vec<Rect> {
    [
        (-1.0, -1.0, 101.0, 101.0),
        (10.0, 10.0, 40.0, 30.0),
        (50.0, 0.0, 95.0, 95.0),
        (20.0, 45.0, 60.0, 70.0),
        (30.0, 0.0, 30.0, 100.0),
    ]
    .iter()
    .map(|&(a, b, c, d)| Rect::from_valid(a, b, c, d))
    .collect()
}

/// The refined answer for `w` on the geometries inserted (an error where
/// the predicate cannot be evaluated on one of the candidates).
fn refined(want: &Inserted, w: Rect) -> Result<Vec<u64>> {
    let wg = geometry::window_geometry(&w);
    let mut ids = Vec::new();
    for (&id, g) in want {
        if geometry::bounding_rect(g).unwrap().intersects(&w)
            && crate::index::refine::satisfies(&wg, g, Predicate::Intersects)?
        {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Checks that `index` holds exactly `want`: the tree's ids, the heap's
/// WKB and geometry of each, refined answers as on the inserted ones.
fn check_index(index: &Index, want: &Inserted, what: &str) {
    let ids: Vec<u64> = want.keys().copied().collect();
    let heap_ids = index.objects().map(Heap::ids).unwrap_or_default();
    assert_eq!(heap_ids, ids, "{what}: the heap's ids");
    let everything = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
    let tree = index
        .query(everything, Predicate::Intersects)
        .unwrap()
        .sorted_ids();
    assert_eq!(tree, ids, "{what}: the tree's ids");
    let Some(heap) = index.objects() else {
        return;
    };
    for (&id, g) in want {
        let wkb = geometry::to_wkb(g).unwrap();
        assert_eq!(heap.get_wkb(id).unwrap(), Some(wkb), "{what}: WKB of {id}");
        assert_eq!(
            heap.get(id).unwrap(),
            Some(normalized(g)),
            "{what}: geometry of {id}"
        );
    }
    for w in windows() {
        let got = index
            .query_refined(w, Predicate::Intersects)
            .map(|r| r.sorted_ids());
        match refined(want, w) {
            Ok(ids) => assert_eq!(got.unwrap(), ids, "{what}: refined window {w:?}"),
            Err(_) => assert!(got.is_err(), "{what}: window {w:?}"),
        }
    }
}

#[derive(Debug, Clone)]
enum IndexOp {
    Insert(u64, Geometry),
    Delete(u64),
    /// Delete, then insert with another geometry.
    Move(u64, Geometry),
    Commit,
    Checkpoint,
    /// Closed and opened again.
    Reopen,
    /// Dropped without a checkpoint; opened read-only, then for writing.
    Crash,
}

fn index_op() -> BoxedStrategy<IndexOp> {
    let geometry = || prop_oneof![8 => geometry_of(domain_coord()), 1 => large_geometry()];
    prop_oneof![
        8 => (0u64..12, geometry()).prop_map(|(id, g)| IndexOp::Insert(id, g)),
        3 => (0u64..12).prop_map(IndexOp::Delete),
        3 => (0u64..12, geometry()).prop_map(|(id, g)| IndexOp::Move(id, g)),
        1 => Just(IndexOp::Commit),
        1 => Just(IndexOp::Checkpoint),
        1 => Just(IndexOp::Reopen),
        1 => Just(IndexOp::Crash),
    ]
    .boxed()
}

/// An index under test and what it must hold.
struct IndexModel {
    dir: std::path::PathBuf,
    store: &'static Store,
    index: Option<Index>,
    live: Inserted,
    /// What a crash must leave.
    acked: Inserted,
}

impl IndexModel {
    fn index(&mut self) -> &mut Index {
        self.index.as_mut().unwrap()
    }

    fn insert(&mut self, id: u64, g: &Geometry, what: &str) {
        match self.index().insert_object(id, g) {
            Ok(()) => assert!(
                self.live.insert(id, g.clone()).is_none(),
                "{what}: inserted twice"
            ),
            Err(e) => {
                // Refused: a geometry the heap does not take, an id there
                // already, or more than the store's log carries.
                assert!(e.is_user_error(), "{what}: {e}");
                let taken = Heap::prepare(id, &[], g).is_ok();
                let there = self.live.contains_key(&id);
                assert!(
                    !taken || there || e.to_string().contains("log"),
                    "{what}: {e}"
                );
            }
        }
    }

    fn delete(&mut self, id: u64, what: &str) {
        let done = self.index().delete_object(id);
        assert_eq!(
            done.is_ok(),
            self.live.remove(&id).is_some(),
            "{what}: {done:?}"
        );
    }

    fn step(&mut self, op: &IndexOp, what: &str) {
        match op {
            IndexOp::Insert(id, g) => self.insert(*id, g, what),
            IndexOp::Delete(id) => self.delete(*id, what),
            IndexOp::Move(id, g) => {
                if self.live.contains_key(id) {
                    self.delete(*id, what);
                }
                self.insert(*id, g, what);
            }
            IndexOp::Commit => {
                self.index().commit().unwrap();
                self.acked = self.live.clone();
            }
            IndexOp::Checkpoint => {
                self.index().checkpoint().unwrap();
                self.acked = self.live.clone();
            }
            IndexOp::Reopen => {
                self.index.take().unwrap().close().unwrap();
                self.acked = self.live.clone();
                let index = Index::open(&self.dir, Access::Write).unwrap();
                check_index(&index, &self.live, &format!("{what}: reopened"));
                self.index = Some(index);
            }
            IndexOp::Crash => {
                drop(self.index.take());
                let ro = Index::open(&self.dir, Access::Read).unwrap();
                check_index(
                    &ro,
                    &self.acked,
                    &format!("{what}: after a crash, read-only"),
                );
                drop(ro);
                let index = Index::open(&self.dir, Access::Write).unwrap();
                check_index(&index, &self.acked, &format!("{what}: after a crash"));
                self.index = Some(index);
                self.live = self.acked.clone();
            }
        }
        if self.store.every_op_acked {
            self.acked = self.live.clone();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases((crate::testenv::proptest_cases() / 2).max(3)))]

    /// An index with objects on eFIND, FAST (every operation durable) and
    /// the plain store (durable at checkpoints): after every commit,
    /// checkpoint, reopen and crash, the tree, the heap (WKB bytes and
    /// geometries) and refined answers are exactly the acknowledged state.
    #[test]
    fn an_index_with_objects_holds_what_its_model_does(
        store in 0usize..3,
        ops in prop::collection::vec(index_op(), 1..30),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("idx");
        let store = &STORES[store];
        let index = Index::create(&dir, &options(store)).unwrap();
        let mut m = IndexModel {
            dir,
            store,
            index: Some(index),
            live: Inserted::new(),
            acked: Inserted::new(),
        };
        for (k, op) in ops.iter().enumerate() {
            let what = format!("{:?} op {k} {op:?}", store.settings);
            m.step(op, &what);
        }
        let index = m.index.take().unwrap();
        check_index(&index, &m.live, "at the end");
        index.close().unwrap();
        let index = Index::open(&m.dir, Access::Read).unwrap();
        check_index(&index, &m.live, "at the end, reopened");
    }
}

// ---------------------------------------------------------------------
// Crashes inside the heap's write of a checkpoint
// ---------------------------------------------------------------------

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Where the records of the heap file `bytes` start from `from` (a record
/// boundary) on, and where the last complete one ends.
fn boundaries(bytes: &[u8], from: usize) -> Vec<usize> {
    let mut at = from;
    let mut out = vec![at];
    while at + RECORD_HEADER <= bytes.len() {
        let body = le_u32(bytes, at + 16) as usize + le_u32(bytes, at + 20) as usize;
        at += RECORD_HEADER + body;
        if at > bytes.len() {
            break;
        }
        out.push(at);
    }
    out
}

/// Cut points around every record boundary in `bounds` (the boundary,
/// a byte on, the end of the header, the body's middle), within `range`.
fn cuts_around(bounds: &[usize], range: std::ops::RangeInclusive<usize>) -> BTreeSet<usize> {
    let mut cuts = BTreeSet::new();
    for (k, &b) in bounds.iter().enumerate() {
        let next = bounds.get(k + 1).copied().unwrap_or(b);
        let mid = b + RECORD_HEADER + next.saturating_sub(b + RECORD_HEADER) / 2;
        cuts.extend([b, b + 1, b + RECORD_HEADER - 1, b + RECORD_HEADER, mid]);
    }
    cuts.retain(|c| range.contains(c));
    cuts
}

/// A new index in `dir` on `store` holding 12 objects (every fifth a large
/// one), closed (checkpointed).
fn base_index(dir: &Path, store: &Store, r: &mut TestRunner) -> Inserted {
    let (small, big) = (geometry_of(domain_coord()), large_geometry());
    let mut index = Index::create(dir, &options(store)).unwrap();
    let mut base = Inserted::new();
    for id in 0..12u64 {
        let g = draw_accepted(r, if id % 5 == 0 { &big } else { &small });
        index.insert_object(id, &g).unwrap();
        base.insert(id, g);
    }
    index.close().unwrap();
    base
}

/// A session on the open `index`: inserts, deletes, moves and re-inserts
/// (spilled to the file on the way), applied to `live`.
fn session(index: &mut Index, live: &mut Inserted, r: &mut TestRunner) {
    let (small, big) = (geometry_of(domain_coord()), large_geometry());
    let ids = (0u64..20).boxed();
    for k in 0..16 {
        let id = draw(r, &ids);
        if live.contains_key(&id) {
            index.delete_object(id).unwrap();
            live.remove(&id);
            if k % 2 == 0 {
                continue;
            }
        }
        let g = draw_accepted(r, if k % 6 == 0 { &big } else { &small });
        index.insert_object(id, &g).unwrap();
        live.insert(id, g);
    }
}

/// Opens the index in `dir` read-only, then for writing, checks both
/// against `want`; the writer then takes an object and keeps it.
fn recovers(dir: &Path, want: &Inserted, more: bool, what: &str) {
    let ro = Index::open(dir, Access::Read).unwrap_or_else(|e| panic!("{what}: read-only: {e}"));
    check_index(&ro, want, &format!("{what}, read-only"));
    drop(ro);
    let mut index = Index::open(dir, Access::Write).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_index(&index, want, what);
    if more {
        let g = large(3, 700, true);
        index.insert_object(1_000, &g).unwrap();
        index.close().unwrap();
        let mut after = want.clone();
        after.insert(1_000, g);
        let index = Index::open(dir, Access::Read).unwrap();
        check_index(&index, &after, &format!("{what}, changed after"));
    }
}

/// One case: a session after a checkpoint, then a checkpoint whose heap
/// write a crash cuts (the file cut, or zeros past the cut) anywhere from
/// the end of the previous checkpoint's mark (the spills' writes too) to
/// the new mark's end, the other files as they were before the
/// checkpoint (the heap's commit is its first write). Returns the cases.
fn torn_checkpoint_case(store: &Store, seed: u64) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let mut r = runner(seed);
    let base = base_index(&dir, store, &mut r);
    let heap_path = dir.join(OBJECTS_FILE);
    let committed_end = std::fs::metadata(&heap_path).unwrap().len() as usize;
    let mut index = Index::open(&dir, Access::Write).unwrap();
    let mut live = base.clone();
    session(&mut index, &mut live, &mut r);
    let acked = if store.every_op_acked {
        live.clone()
    } else {
        base
    };
    let before = tmp.path().join("before");
    copy_dir(&dir, &before);
    index.checkpoint().unwrap();
    let after = std::fs::read(&heap_path).unwrap();
    drop(index);
    let what = format!("{:?} seed {seed}", store.settings);
    recovers(&dir, &live, false, &format!("{what}: after the checkpoint"));
    let bounds = boundaries(&after, committed_end);
    assert_eq!(bounds.last(), Some(&after.len()), "{what}");
    let mut cuts: Vec<usize> = cuts_around(&bounds, committed_end..=after.len())
        .into_iter()
        .collect();
    // At most 12 of them (48 when the crash cases are raised), the first
    // and the last always.
    let limit = if dense() { 48 } else { 12 };
    if cuts.len() > limit {
        let step = cuts.len() as f64 / limit as f64;
        let last = *cuts.last().unwrap();
        cuts = (0..limit)
            .map(|i| cuts[(i as f64 * step) as usize])
            .collect();
        cuts.push(last);
    }
    let mut cases = 0;
    for (k, &cut) in cuts.iter().enumerate() {
        for zeros in [false, true] {
            if zeros && cut == after.len() {
                continue;
            }
            let case = tmp.path().join(format!("cut{cut}{zeros}"));
            copy_dir(&before, &case);
            let mut bytes = after[..cut].to_vec();
            if zeros {
                bytes.resize(after.len(), 0);
            }
            std::fs::write(case.join(OBJECTS_FILE), bytes).unwrap();
            let what = format!(
                "{what}: the heap cut at {cut} of {}..{} (zeros {zeros})",
                committed_end,
                after.len()
            );
            recovers(&case, &acked, k % 4 == 0, &what);
            std::fs::remove_dir_all(&case).unwrap();
            cases += 1;
        }
    }
    cases
}

/// A crash anywhere in the heap's write of a checkpoint (and of the spills
/// before it) on eFIND and FAST (every operation acknowledged by the log)
/// and the plain store (acknowledged at checkpoints): reopened read-only
/// and for writing, the index is exactly the acknowledged state, refined
/// answers included, and takes changes after.
#[test]
fn a_crash_inside_a_checkpoints_heap_write_reopens_the_acknowledged_state() {
    let seeds = (crate::testenv::crash_cases() / 100).max(2);
    for (s, store) in STORES.iter().enumerate() {
        let mut cases = 0;
        for seed in 0..seeds {
            cases += torn_checkpoint_case(store, 1_000 * s as u64 + seed);
        }
        eprintln!(
            "{:?}: {seeds} sessions, {cases} torn heap writes recovered",
            store.settings
        );
    }
}

// ---------------------------------------------------------------------
// Damage
// ---------------------------------------------------------------------

/// An index in `dir` whose heap holds several commits (inserts, deletes,
/// moves, large objects), closed; `compacted`: its heap compacted after.
fn damage_subject(dir: &Path, store: &Store, compacted: bool) -> Inserted {
    let mut r = runner(77);
    let (small, big) = (geometry_of(domain_coord()), large_geometry());
    let mut index = Index::create(dir, &options(store)).unwrap();
    let mut want = Inserted::new();
    let put = |index: &mut Index, want: &mut Inserted, id: u64, r: &mut TestRunner| {
        let g = draw_accepted(r, if id % 7 == 3 { &big } else { &small });
        index.insert_object(id, &g).unwrap();
        want.insert(id, g);
    };
    for id in 0..14u64 {
        put(&mut index, &mut want, id, &mut r);
    }
    index.checkpoint().unwrap();
    for id in [2u64, 5, 7, 10] {
        index.delete_object(id).unwrap();
        want.remove(&id);
    }
    for id in [7u64, 10, 14, 15] {
        put(&mut index, &mut want, id, &mut r);
    }
    index.checkpoint().unwrap();
    index.delete_object(15).unwrap();
    want.remove(&15);
    index.close().unwrap();
    let path = dir.join(OBJECTS_FILE);
    if compacted {
        let g = Heap::open(&path, true, Committed::LastMark)
            .unwrap()
            .mark()
            .unwrap();
        Heap::open(&path, false, Committed::Through(g))
            .unwrap()
            .compact()
            .unwrap();
    }
    check_index(&Index::open(dir, Access::Read).unwrap(), &want, "undamaged");
    want
}

/// Opens the index in `dir` read-only and reads every object and refined
/// answer: each must be exact or an error naming the heap file. Returns
/// whether something was refused.
fn damaged_answers(dir: &Path, want: &Inserted, what: &str) -> bool {
    let names = |e: &Error| e.to_string().contains(OBJECTS_FILE);
    let index = match Index::open(dir, Access::Read) {
        Ok(index) => index,
        Err(e) => {
            assert!(
                names(&e),
                "{what}: the open failed without naming the heap: {e}"
            );
            return true;
        }
    };
    let heap = index.objects().unwrap_or_else(|| panic!("{what}: no heap"));
    assert_eq!(
        heap.ids(),
        want.keys().copied().collect::<Vec<_>>(),
        "{what}: ids"
    );
    let mut refused = false;
    for (&id, g) in want {
        match heap.get(id) {
            Ok(got) => assert_eq!(got, Some(normalized(g)), "{what}: object {id}"),
            Err(e) => {
                assert!(names(&e), "{what}: object {id}: {e}");
                refused = true;
            }
        }
    }
    for w in windows() {
        match (
            index.query_refined(w, Predicate::Intersects),
            refined(want, w),
        ) {
            (Ok(got), Ok(ids)) => assert_eq!(got.sorted_ids(), ids, "{what}: window {w:?}"),
            (Err(e), _) if names(&e) => refused = true,
            (got, want) => assert!(
                got.is_err() && want.is_err(),
                "{what}: window {w:?}: {got:?}"
            ),
        }
    }
    refused
}

/// Whether the damage campaigns flip every byte they may (when the crash
/// cases are raised above their default, as `make test-long` does), or a
/// sample that still reaches every field.
fn dense() -> bool {
    crate::testenv::crash_cases() > u64::from(crate::testenv::DEFAULT_CRASH_CASES)
}

/// The byte offsets a campaign flips in the heap file `clean` (records
/// from `bounds`): every byte of the file header and of every mark's; of
/// the other records' headers, 6 (in turn over the records, every field
/// and all 32 bytes reached) or all, and of their bodies one (first,
/// middle or last in turn) or those three (`dense`).
fn flip_offsets(clean: &[u8], bounds: &[usize], dense: bool) -> Vec<usize> {
    let mut at: Vec<usize> = (0..FILE_HEADER as usize).collect();
    for (k, w) in bounds.windows(2).enumerate() {
        let (b, e) = (w[0], w[1]);
        if dense || clean[b + 4] == KIND_MARK {
            at.extend(b..b + RECORD_HEADER);
        } else {
            // magic, kind or reserved, id, a length, the body's and the
            // header's checksums
            at.extend(
                [
                    k % 4,
                    4 + k % 4,
                    8 + k % 8,
                    16 + k % 8,
                    24 + k % 4,
                    28 + k % 4,
                ]
                .map(|o| b + o),
            );
        }
        if e > b + RECORD_HEADER {
            let body = [b + RECORD_HEADER, (b + RECORD_HEADER + e) / 2, e - 1];
            if dense {
                at.extend(body);
            } else {
                at.push(body[k % 3]);
            }
        }
    }
    at
}

/// Flips and cuts `objects.dat` of an index (see [`damage_subject`]);
/// returns (cases, refused).
fn damage_campaign(store: &Store, compacted: bool) -> (usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let want = damage_subject(&dir, store, compacted);
    let path = dir.join(OBJECTS_FILE);
    let clean = std::fs::read(&path).unwrap();
    let bounds = boundaries(&clean, FILE_HEADER as usize);
    assert_eq!(bounds.last(), Some(&clean.len()));
    let what = format!("{:?} compacted {compacted}", store.settings);
    let (mut cases, mut refused) = (0, 0);
    for at in flip_offsets(&clean, &bounds, dense()) {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        refused += usize::from(damaged_answers(
            &dir,
            &want,
            &format!("{what}: byte {at} flipped"),
        ));
        cases += 1;
    }
    // At every record boundary, inside every header and body.
    let mut cuts: BTreeSet<usize> = if dense() {
        cuts_around(&bounds, 0..=clean.len() - 1)
    } else {
        let inside =
            |k: usize, b: usize| [b + 1, b + RECORD_HEADER / 2, b + RECORD_HEADER + 1][k % 3];
        bounds
            .iter()
            .enumerate()
            .flat_map(|(k, &b)| [b, inside(k, b)])
            .collect()
    };
    cuts.extend([0, 8, 15, 16, 17, 47]);
    cuts.retain(|&c| c < clean.len());
    for cut in cuts {
        let what = format!("{what}: cut at {cut} of {}", clean.len());
        std::fs::write(&path, &clean[..cut]).unwrap();
        refused += usize::from(damaged_answers(&dir, &want, &what));
        // A writer's open too, on a copy (it would truncate what it drops).
        let copy = tmp.path().join("copy");
        copy_dir(&dir, &copy);
        match Index::open(&copy, Access::Write) {
            Ok(index) => check_index(&index, &want, &format!("{what}, writable")),
            Err(e) => assert!(
                e.to_string().contains(OBJECTS_FILE),
                "{what}, writable: {e}"
            ),
        }
        std::fs::remove_dir_all(&copy).unwrap();
        cases += 1;
    }
    std::fs::write(&path, &clean).unwrap();
    check_index(
        &Index::open(&dir, Access::Read).unwrap(),
        &want,
        &format!("{what}: restored"),
    );
    (cases, refused)
}

/// Damage to any part of `objects.dat` of a closed index (eFIND, the plain
/// store; a compacted heap): every byte of the file header and of the
/// marks, bytes of every record's header and body flipped, and the file
/// cut at and inside every record. Opened, every object read and every
/// refined answer is exact or an error naming `objects.dat`.
#[test]
fn damage_to_the_heap_gives_the_stored_geometries_or_an_error_naming_it() {
    for (store, compacted) in [(&STORES[0], false), (&STORES[2], false), (&STORES[0], true)] {
        let (cases, refused) = damage_campaign(store, compacted);
        eprintln!(
            "{:?} compacted {compacted}: {cases} damaged heaps, {refused} refused naming objects.dat, the rest exact",
            store.settings
        );
    }
}

// ---------------------------------------------------------------------
// The WKB decoder
// ---------------------------------------------------------------------

/// A point's WKB in `order` (1: little-endian) with `code`, then `values`.
fn raw_wkb(order: u8, code: u32, counts: &[u32], values: &[f64]) -> Vec<u8> {
    let little = order == 1;
    let mut b = vec![order];
    let put32 = |b: &mut Vec<u8>, v: u32| {
        b.extend(if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        })
    };
    put32(&mut b, code);
    for &c in counts {
        put32(&mut b, c);
    }
    for v in values {
        b.extend(if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        });
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases() * 4))]

    /// Any bytes: an error naming what was read, or a geometry; never a
    /// panic.
    #[test]
    fn the_decoder_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = geometry::from_wkb(&bytes, "fuzzed") {
            prop_assert!(e.to_string().contains("fuzzed"), "{}", e);
        }
    }

    /// Damaged WKB of every kind (bytes set, flipped, a count made huge,
    /// cut): never a panic; what decodes with finite coordinates encodes
    /// and decodes again to itself.
    #[test]
    fn the_decoder_never_panics_on_damaged_wkb(
        g in geometry_of(any_coord()),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u32>(), 0u8..4), 1..5),
    ) {
        let Ok(mut w) = geometry::to_wkb(&g) else {
            return Ok(());
        };
        for (at, v, how) in edits {
            if w.is_empty() {
                break;
            }
            let i = at.index(w.len());
            match how {
                0 => w[i] = v as u8,
                1 => w[i] ^= (v as u8).max(1),
                2 => {
                    let end = (i + 4).min(w.len());
                    let huge = [u32::MAX, 1 << 31, 1 << 28, v][(v % 4) as usize].to_le_bytes();
                    w[i..end].copy_from_slice(&huge[..end - i]);
                }
                _ => w.truncate(i),
            }
        }
        if let Ok(d) = geometry::from_wkb(&w, "damaged") {
            if geometry::bounding_rect(&d).is_ok() {
                if let Ok(again) = geometry::to_wkb(&d) {
                    prop_assert_eq!(geometry::from_wkb(&again, "again").unwrap(), d);
                }
            }
        }
    }

    /// Every geometry the encoder takes reads back as itself (`Line`,
    /// `Rect` and `Triangle` as a line string and polygons); the encoder
    /// refuses only polygons with holes and no exterior ring.
    #[test]
    fn every_geometry_the_encoder_takes_reads_back_as_itself(g in geometry_of(any_coord())) {
        match geometry::to_wkb(&g) {
            Ok(w) => {
                prop_assert!(!holes_without_exterior(&g));
                prop_assert_eq!(geometry::from_wkb(&w, "t").unwrap(), normalized(&g));
                prop_assert_eq!(w.len(), wkb::writer::geometry_wkb_size(&normalized(&g)));
            }
            Err(e) => {
                prop_assert!(holes_without_exterior(&g), "{}", e);
                prop_assert!(e.is_user_error() && e.to_string().contains("exterior"), "{}", e);
            }
        }
    }
}

/// Counts far past the bytes (every kind), and collections nested past
/// the `wkb` crate's limit of 128 or far deeper: errors, without a large
/// allocation or a stack overflow; non-finite coordinates decode and are
/// refused by `bounding_rect`, as the heap's `put` does.
#[test]
fn huge_counts_deep_nesting_and_non_finite_coordinates_are_refused() {
    for order in [0u8, 1] {
        for code in 2..=7u32 {
            for count in [u32::MAX, 1 << 31, 1 << 20] {
                let b = raw_wkb(order, code, &[count], &[1.0, 2.0]);
                assert!(
                    geometry::from_wkb(&b, "huge").is_err(),
                    "{order} {code} {count}"
                );
            }
        }
        // a polygon of one ring of a huge count
        let b = raw_wkb(order, 3, &[1, u32::MAX], &[1.0, 2.0]);
        assert!(geometry::from_wkb(&b, "ring").is_err());
    }
    for depth in [129usize, 100_000] {
        let mut b = Vec::new();
        for _ in 0..depth {
            b.extend(raw_wkb(1, 7, &[1], &[]));
        }
        b.extend(raw_wkb(1, 1, &[], &[1.0, 2.0]));
        assert!(geometry::from_wkb(&b, "deep").is_err(), "{depth}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = Heap::create(&dir.path().join(OBJECTS_FILE), 0).unwrap();
    for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 2.0 * MAX_COORD] {
        let b = raw_wkb(1, 2, &[2], &[0.0, 0.0, v, 1.0]);
        let g = geometry::from_wkb(&b, "t").unwrap();
        assert!(geometry::bounding_rect(&g).unwrap_err().is_user_error());
        assert!(h.put(1, b"", &g).unwrap_err().is_user_error());
    }
    assert!(h.is_empty());
}

// ---------------------------------------------------------------------
// Defects found
// ---------------------------------------------------------------------

/// A `Rect` was written by the `wkb` crate's writer (0.9.3) without its
/// ring's point count: it read back as `POLYGON EMPTY` (integer-valued
/// minimum x; refined queries never returned it) or failed as a corrupt
/// record, and a logged frame of it failed the index's open after a
/// crash. It is written as its polygon now.
#[test]
fn a_rect_is_stored_as_its_polygon() {
    let rects = [
        ((0.0, 0.0), (2.0, 3.0)),
        ((1.5, 0.25), (2.0, 3.0)),
        ((0.1, 0.2), (2.0, 3.0)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    for (id, &(a, b)) in rects.iter().enumerate() {
        let r = geo::Rect::new(a, b);
        h.put(id as u64, b"", &Geometry::Rect(r)).unwrap();
        assert_eq!(
            h.get(id as u64).unwrap(),
            Some(Geometry::Polygon(r.to_polygon())),
            "{r:?}"
        );
    }
    h.commit(1).unwrap();
    drop(h);
    let h = Heap::open(&path, true, Committed::Through(1)).unwrap();
    for (id, &(a, b)) in rects.iter().enumerate() {
        let want = Geometry::Polygon(geo::Rect::new(a, b).to_polygon());
        assert_eq!(h.get(id as u64).unwrap(), Some(want));
    }
    // Through an index: refined, and replayed from the store's log.
    let tmp = tempfile::tempdir().unwrap();
    let idx = tmp.path().join("idx");
    let mut index = Index::create(&idx, &options(&STORES[0])).unwrap();
    let mut want = Inserted::new();
    for (id, &((x0, y0), (x1, y1))) in rects.iter().enumerate() {
        let g = Geometry::Rect(geo::Rect::new(
            (x0 * 10.0, y0 * 10.0),
            (x1 * 10.0, y1 * 10.0),
        ));
        index.insert_object(id as u64, &g).unwrap();
        want.insert(id as u64, g);
    }
    check_index(&index, &want, "open");
    drop(index);
    check_index(
        &Index::open(&idx, Access::Write).unwrap(),
        &want,
        "after a crash",
    );
}

/// A polygon with holes and no exterior ring was written as a polygon of
/// no rings followed by the holes' bytes: in a multi-polygon it read back
/// as `POLYGON EMPTY` and the polygons after it were lost (read from the
/// holes' bytes), in a collection it failed as a corrupt record (and a
/// logged frame of it, the index's open after a crash). Refused now, as
/// geometries that WKB cannot hold.
#[test]
fn a_polygon_with_holes_and_no_exterior_is_refused() {
    let hole = LineString::from(vec![(1.0, 1.0), (2.0, 1.0), (2.0, 2.0), (1.0, 1.0)]);
    let p = Polygon::new(LineString::new(vec![]), vec![hole]);
    let square = Polygon::new(
        LineString::from(vec![(5.0, 5.0), (6.0, 5.0), (6.0, 6.0), (5.0, 5.0)]),
        vec![],
    );
    let geometries = [
        Geometry::Polygon(p.clone()),
        Geometry::MultiPolygon(MultiPolygon::new(vec![p.clone(), square.clone()])),
        Geometry::GeometryCollection(geo::GeometryCollection::new_from(vec![
            square.clone().into(),
            p.into(),
        ])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut h = Heap::create(&dir.path().join(OBJECTS_FILE), 0).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let idx = tmp.path().join("idx");
    let mut index = Index::create(&idx, &options(&STORES[0])).unwrap();
    index
        .insert_object(9, &Geometry::Polygon(square.clone()))
        .unwrap();
    for (k, g) in geometries.iter().enumerate() {
        // A polygon alone has no bounding box either (`geo` takes its
        // exterior's): refused as empty before.
        let said = |e: &Error| e.is_user_error() && (k == 0 || e.to_string().contains("exterior"));
        let e = h.put(1, b"", g).unwrap_err();
        assert!(said(&e), "{e}");
        let e = index.insert_object(1, g).unwrap_err();
        assert!(said(&e), "{e}");
    }
    assert!(h.is_empty());
    let want: Inserted = [(9, Geometry::Polygon(square))].into();
    check_index(&index, &want, "after the refusals");
}

/// A multi-line string or multi-polygon member was read in the parent's
/// byte order and dimensions whatever its own header said (the `wkb`
/// crate reads them so): a member with Z in a two-dimensional parent gave
/// other coordinates, silently. Refused now, as for multi-points; so are
/// bytes past the geometry's end (where such misreads and the old
/// encoding of a `Rect` ended).
#[test]
fn multi_geometry_members_of_another_header_and_trailing_bytes_are_refused() {
    let line_xy = raw_wkb(1, 2, &[2], &[1.0, 2.0, 4.0, 5.0]);
    let line_z = raw_wkb(1, 1002, &[2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let ring = [0.0, 0.0, 4.0, 0.0, 0.0, 4.0, 0.0, 0.0];
    let poly_xy = raw_wkb(1, 3, &[1, 4], &ring);
    let multi = |code: u32, members: &[&[u8]]| {
        let mut b = raw_wkb(1, code, &[members.len() as u32], &[]);
        members.iter().for_each(|m| b.extend_from_slice(m));
        b
    };
    // Good ones read.
    let g = geometry::from_wkb(&multi(5, &[&line_xy, &line_xy]), "t").unwrap();
    assert_eq!(
        g,
        Geometry::MultiLineString(MultiLineString::new(vec![
            LineString::from(vec![(1.0, 2.0), (4.0, 5.0)]),
            LineString::from(vec![(1.0, 2.0), (4.0, 5.0)]),
        ]))
    );
    let z = geometry::from_wkb(&multi(1005, &[&line_z]), "t").unwrap();
    assert_eq!(
        z,
        Geometry::MultiLineString(MultiLineString::new(vec![LineString::from(vec![
            (1.0, 2.0),
            (4.0, 5.0)
        ]),]))
    );
    assert!(geometry::from_wkb(&multi(6, &[&poly_xy]), "t").is_ok());
    // Members of another header.
    let line_be = raw_wkb(0, 2, &[2], &[1.0, 2.0, 4.0, 5.0]);
    let mut line_srid = raw_wkb(1, 0x2000_0002, &[4326, 2], &[1.0, 2.0, 4.0, 5.0]);
    // An EWKB member with an SRID is read right: taken.
    assert_eq!(
        geometry::from_wkb(&multi(5, &[&line_srid]), "t").unwrap(),
        z
    );
    let point = raw_wkb(1, 1, &[], &[1.0, 2.0]);
    let poly_z = raw_wkb(
        1,
        1003,
        &[1, 4],
        &[0.0, 0.0, 9.0, 4.0, 0.0, 9.0, 0.0, 4.0, 9.0, 0.0, 0.0, 9.0],
    );
    let bad: Vec<(u32, Vec<&[u8]>)> = vec![
        (5, vec![&line_z]),
        (5, vec![&line_xy, &line_z]),
        (5, vec![&line_be]),
        (5, vec![&point]),
        (6, vec![&poly_z]),
        (6, vec![&poly_xy, &line_xy]),
        (1005, vec![&line_xy]),
    ];
    for (code, members) in &bad {
        let b = multi(*code, members);
        let e = geometry::from_wkb(&b, "m").unwrap_err().to_string();
        assert!(e.contains("m: bad WKB"), "{code} {members:?}: {e}");
    }
    // A Z member whose misread (as two-dimensional) ends where the bytes
    // do: its last coordinates read as a one-point line string of bytes
    // that follow. Only its header tells.
    let y2 = f64::from_le_bytes([1, 2, 0, 0, 0, 1, 0, 0]);
    let z_then = raw_wkb(1, 1002, &[2], &[1.0, 2.0, 3.0, 4.0, y2, 0.0]);
    let mut crafted = multi(5, &[&z_then]);
    crafted[5] = 2;
    crafted.extend([0u8; 9]);
    let e = geometry::from_wkb(&crafted, "m").unwrap_err().to_string();
    assert!(e.contains("line string 0 of a multi-line string"), "{e}");
    // Bytes past the end.
    for mut b in [
        raw_wkb(1, 1, &[], &[1.0, 2.0]),
        line_xy.clone(),
        multi(5, &[&line_xy]),
    ] {
        b.push(0);
        let e = geometry::from_wkb(&b, "tail").unwrap_err().to_string();
        assert!(e.contains("tail: bad WKB") && e.contains("past"), "{e}");
    }
    line_srid.truncate(line_srid.len() - 1);
    assert!(geometry::from_wkb(&line_srid, "t").is_err());
}

/// A heap cut inside its first record (the mark of its creation), or a
/// compacted heap cut anywhere before its only mark, opened as an empty
/// heap whatever generation its index named (the "creation cut short"
/// rule): every object of the index lost, refined answers the boxes.
/// Refused now (a creation writes its header and mark in one write, so a
/// crash leaves no file, a short one that is refused as before, or the
/// mark; a compaction is atomic).
#[test]
fn a_heap_cut_before_its_first_mark_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    for id in 0..4u64 {
        h.put(id, b"p", &large(id, 40, id % 2 == 0)).unwrap();
    }
    h.commit(1).unwrap();
    drop(h);
    let appended = std::fs::read(&path).unwrap();
    let mut h = Heap::open(&path, false, Committed::Through(1)).unwrap();
    h.compact().unwrap();
    drop(h);
    let compacted = std::fs::read(&path).unwrap();
    let first_mark_end = FILE_HEADER as usize + RECORD_HEADER;
    let mut cases: Vec<(&str, Vec<u8>)> = (FILE_HEADER as usize..first_mark_end)
        .map(|cut| ("appended", appended[..cut].to_vec()))
        .collect();
    let bounds = boundaries(&compacted, FILE_HEADER as usize);
    for cut in cuts_around(&bounds, FILE_HEADER as usize..=compacted.len() - 1) {
        cases.push(("compacted", compacted[..cut].to_vec()));
    }
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        for committed in [Committed::Through(1), Committed::LastMark] {
            for read_only in [true, false] {
                let e = Heap::open(&path, read_only, committed).map(|h| h.len());
                let e = e.expect_err(&format!("{what} heap cut at {}: opened", bytes.len()));
                assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
                assert!(e.to_string().contains(OBJECTS_FILE), "{e}");
                assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
            }
        }
    }
}

/// A crash while the heap of an index is created (its first object), after
/// any number of the new file's bytes: the index opens, read-only and for
/// writing, without the object, and takes objects after. The file was
/// created under its name and written in place: a crash could leave it
/// empty (the likeliest remnant of a write not yet synced) or cut, and
/// every open of the index then failed ("shorter than its header", or no
/// mark).
#[test]
fn a_crash_while_the_heap_is_created_leaves_an_index_that_opens() {
    let head = FILE_HEADER as usize + RECORD_HEADER;
    let square = Geometry::Polygon(Polygon::new(
        LineString::from(vec![(5.0, 5.0), (6.0, 5.0), (6.0, 6.0), (5.0, 5.0)]),
        vec![],
    ));
    let boxed = Rect::from_valid(80.0, 80.0, 81.0, 81.0);
    for store in &STORES {
        for n in [0, 1, 8, 15, 16, 17, 40, head - 1, head] {
            let what = format!("{:?}, a crash after {n} bytes", store.settings);
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("idx");
            let mut index = Index::create(&dir, &options(store)).unwrap();
            index.insert(5, boxed).unwrap();
            index.commit().unwrap();
            CREATE_CRASH_AFTER.with(|c| c.set(Some(n)));
            let e = index.insert_object(1, &square).unwrap_err();
            assert!(matches!(e, Error::Crashed(_)), "{what}: {e}");
            drop(index);
            let ids = |index: &Index| {
                let everything = Rect::from_valid(-1.0, -1.0, 101.0, 101.0);
                index
                    .query(everything, Predicate::Intersects)
                    .unwrap()
                    .sorted_ids()
            };
            for access in [Access::Read, Access::Write] {
                let index = Index::open(&dir, access).unwrap_or_else(|e| {
                    panic!("{what}: the index does not open ({access:?}): {e}")
                });
                assert_eq!(ids(&index), vec![5], "{what}");
                assert!(index.objects().is_none_or(Heap::is_empty), "{what}");
            }
            let mut index = Index::open(&dir, Access::Write).unwrap();
            index.insert_object(1, &square).unwrap();
            index.close().unwrap();
            let index = Index::open(&dir, Access::Read).unwrap();
            assert_eq!(ids(&index), vec![1, 5], "{what}");
            assert_eq!(
                index.objects().unwrap().get(1).unwrap(),
                Some(square.clone()),
                "{what}"
            );
        }
    }
}
