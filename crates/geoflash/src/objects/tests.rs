use super::*;
use geo::{line_string, point, polygon};
use proptest::prelude::*;

fn square(x: f64, y: f64, s: f64) -> Geometry {
    polygon![(x: x, y: y), (x: x + s, y: y), (x: x + s, y: y + s), (x: x, y: y + s), (x: x, y: y)]
        .into()
}

fn sample(i: u64) -> Geometry {
    let f = i as f64;
    match i % 3 {
        0 => square(f, f * 2.0, 1.5),
        1 => line_string![(x: f, y: 0.0), (x: f + 3.0, y: 4.0), (x: f, y: 9.0)].into(),
        _ => point!(x: f, y: -f).into(),
    }
}

fn through(g: u64) -> Committed {
    Committed::Through(g)
}

#[test]
fn round_trip_delete_replace_reopen_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    assert!(h.is_empty());
    for i in 0..30u64 {
        let r = h.put(i, format!("p{i}").as_bytes(), &sample(i)).unwrap();
        assert_eq!(r, geometry::bounding_rect(&sample(i)).unwrap());
    }
    assert_eq!(h.len(), 30);
    assert_eq!(h.get(4).unwrap(), Some(sample(4)));
    assert_eq!(h.get_payload(4).unwrap(), Some(b"p4".to_vec()));
    assert_eq!(h.get(99).unwrap(), None);
    assert_eq!(h.get_payload(99).unwrap(), None);
    h.delete(7).unwrap();
    assert!(h
        .delete(7)
        .unwrap_err()
        .to_string()
        .contains("not in the object heap"));
    h.commit(1).unwrap();
    h.put(8, b"", &sample(2)).unwrap(); // replaces
    assert_eq!(h.get(8).unwrap(), Some(sample(2)));
    h.commit(2).unwrap();
    assert!(h.live_bytes() < h.file_bytes());
    assert!(!h.has_pending());
    drop(h);

    let check = |h: &Heap| {
        assert_eq!(h.len(), 29);
        assert!(!h.contains(7) && h.get(7).unwrap().is_none());
        assert_eq!(h.get(8).unwrap(), Some(sample(2)));
        assert_eq!(h.get_payload(8).unwrap(), Some(vec![]));
        for i in (0..30u64).filter(|&i| i != 7 && i != 8) {
            assert_eq!(h.get(i).unwrap(), Some(sample(i)), "object {i}");
            assert_eq!(
                h.get_payload(i).unwrap().unwrap(),
                format!("p{i}").into_bytes()
            );
        }
        assert_eq!(h.ids(), (0..30u64).filter(|&i| i != 7).collect::<Vec<_>>());
    };
    let ro = Heap::open(&path, true, through(2)).unwrap();
    check(&ro);
    assert!(ro.get_wkb(3).unwrap().is_some());
    drop(ro);
    let mut rw = Heap::open(&path, false, through(2)).unwrap();
    check(&rw);
    let before = rw.file_bytes();
    rw.put(100, b"x", &sample(100)).unwrap();
    assert!(rw.compact().unwrap_err().to_string().contains("pending"));
    rw.delete(100).unwrap();
    let rep = rw.compact().unwrap();
    assert_eq!(rep.bytes_before, before);
    assert!(rep.bytes_after < rep.bytes_before);
    // the live records, then the mark of the generation
    assert_eq!(rep.bytes_after, rw.live_bytes() + FILE_HEADER + RECORD_HEADER as u64);
    assert_eq!(rep.objects, 29);
    check(&rw);
    drop(rw);
    check(&Heap::open(&path, true, through(2)).unwrap());
    let mut rw = Heap::open(&path, false, through(2)).unwrap();
    rw.put(100, b"x", &sample(100)).unwrap();
    rw.commit(3).unwrap();
    drop(rw);
    let again = Heap::open(&path, true, through(3)).unwrap();
    assert_eq!(again.len(), 30);
    assert_eq!(again.get(100).unwrap(), Some(sample(100)));
    assert!(!path.with_extension("dat.tmp").exists());
    // damage to a compacted record is before the only mark: an error
    let first = FILE_HEADER + RECORD_HEADER as u64 + 1;
    flip(&path, first);
    assert!(Heap::open(&path, true, through(3)).is_err());
}

#[test]
fn read_only_and_bad_geometries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.dat");
    let mut h = Heap::create(&path, 0).unwrap();
    let nan: Geometry = point!(x: 0.0, y: f64::NAN).into();
    assert!(h.put(1, b"", &nan).unwrap_err().is_user_error());
    assert!(h.is_empty());
    h.put(1, b"", &sample(1)).unwrap();
    h.commit(1).unwrap();
    drop(h);
    assert!(Heap::create(&path, 0).is_err());
    let mut ro = Heap::open(&path, true, through(1)).unwrap();
    assert!(ro
        .put(2, b"", &sample(2))
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    assert!(ro.delete(1).is_err());
    assert!(ro.commit(2).is_err());
}

/// A heap whose commit `i + 1` wrote object `i` (for `i` in 0..3), and
/// where each object's record starts and ends.
fn three_commits(dir: &Path) -> (PathBuf, Vec<(u64, u64)>) {
    let path = dir.join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    let mut records = vec![];
    for i in 0..3u64 {
        let start = h.file_bytes();
        h.put(i, b"payload", &sample(i)).unwrap();
        h.commit(i + 1).unwrap();
        records.push((start, h.file_bytes() - RECORD_HEADER as u64));
    }
    (path, records)
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_records_before_the_committed_mark_are_errors_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, rec) = three_commits(dir.path());
    // a byte of the middle record's WKB
    flip(&path, rec[1].1 - 3);
    let e = Heap::open(&path, true, through(3)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("offset {}", rec[1].0)) && msg.contains("checksum"),
        "{msg}"
    );
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    // past the mark the index names, it is what a crash left: dropped
    let ro = Heap::open(&path, true, through(1)).unwrap();
    assert_eq!((ro.len(), ro.torn_tail_bytes()), (1, std::fs::metadata(&path).unwrap().len() - rec[0].1 - 32));
    drop(ro);
    flip(&path, rec[1].1 - 3);
    // the magic of the first record
    flip(&path, rec[0].0);
    let msg = Heap::open(&path, false, through(3)).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("offset {}", rec[0].0)) && msg.contains("magic"),
        "{msg}"
    );
    flip(&path, rec[0].0);
    // a length field: the header checksum catches it (not taken for a torn tail)
    flip(&path, rec[1].0 + 17);
    let msg = Heap::open(&path, false, through(3)).unwrap_err().to_string();
    assert!(
        msg.contains(&format!("offset {}", rec[1].0)) && msg.contains("header checksum"),
        "{msg}"
    );
    flip(&path, rec[1].0 + 17);
    // the committed mark itself
    flip(&path, rec[2].1 + 9);
    let msg = Heap::open(&path, true, through(3)).unwrap_err().to_string();
    assert!(msg.contains(&format!("offset {}", rec[2].1)), "{msg}");
    flip(&path, rec[2].1 + 9);
    // the file header
    flip(&path, 2);
    assert!(Heap::open(&path, true, through(3))
        .unwrap_err()
        .to_string()
        .contains("not an object heap"));
    flip(&path, 2);
    let mut b = std::fs::read(&path).unwrap();
    b[8] = 9;
    std::fs::write(&path, &b).unwrap();
    assert!(matches!(
        Heap::open(&path, true, through(3)).unwrap_err(),
        Error::UnsupportedVersion { found: 9, .. }
    ));
    b[8] = 2;
    std::fs::write(&path, &b).unwrap();
    std::fs::write(dir.path().join("short"), b"GFOB").unwrap();
    assert!(Heap::open(&dir.path().join("short"), true, through(0))
        .unwrap_err()
        .to_string()
        .contains("shorter"));

    // damage after open is found by get, naming the offset
    let h = Heap::open(&path, true, through(3)).unwrap();
    assert_eq!(h.len(), 3);
    flip(&path, rec[2].1 - 1);
    let msg = h.get(2).unwrap_err().to_string();
    assert!(msg.contains(&format!("offset {}", rec[2].0)), "{msg}");
    assert!(h.get_payload(2).is_err());
    assert_eq!(h.get(0).unwrap(), Some(sample(0)));
}

#[test]
fn a_heap_without_the_mark_its_index_names_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = three_commits(dir.path());
    // The index names a generation the heap never committed.
    let msg = Heap::open(&path, true, through(7)).unwrap_err().to_string();
    assert!(msg.contains("no mark of generation 7") && msg.contains("its last mark: 3"), "{msg}");
    // A heap created under generation 5 holds nothing an index at 4 named.
    let other = dir.path().join("other.dat");
    let mut h = Heap::create(&other, 5).unwrap();
    h.put(1, b"", &sample(1)).unwrap();
    h.commit(6).unwrap();
    drop(h);
    assert!(Heap::open(&other, true, through(4)).is_err());
    assert_eq!(Heap::open(&other, true, through(5)).unwrap().len(), 0);
    assert_eq!(Heap::open(&other, true, through(6)).unwrap().len(), 1);
}

#[test]
fn what_follows_the_committed_mark_is_dropped_whatever_a_crash_left() {
    let dir = tempfile::tempdir().unwrap();
    let (path, rec) = three_commits(dir.path());
    let full = std::fs::read(&path).unwrap();
    let end_of_2 = rec[1].1 + 32;
    // the third commit cut anywhere, zeroed, or whole but not named
    let mut tails: Vec<Vec<u8>> = (end_of_2..full.len() as u64)
        .step_by(7)
        .map(|cut| full[..cut as usize].to_vec())
        .collect();
    let mut zeroed = full.clone();
    zeroed[end_of_2 as usize + 40..].fill(0);
    tails.push(zeroed);
    tails.push(full.clone());
    for bytes in tails {
        std::fs::write(&path, &bytes).unwrap();
        let ro = Heap::open(&path, true, through(2)).unwrap();
        assert_eq!(ro.len(), 2);
        assert_eq!(ro.torn_tail_bytes(), bytes.len() as u64 - end_of_2);
        assert!(ro.get(2).unwrap().is_none());
        drop(ro);
        let mut rw = Heap::open(&path, false, through(2)).unwrap();
        assert_eq!(rw.len(), 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), end_of_2);
        rw.put(2, b"payload", &sample(2)).unwrap();
        rw.commit(3).unwrap();
        drop(rw);
        let again = Heap::open(&path, true, through(3)).unwrap();
        assert_eq!((again.len(), again.torn_tail_bytes()), (3, 0));
        assert_eq!(std::fs::read(&path).unwrap(), full);
    }
}

#[test]
fn a_version_1_heap_is_read_whole_and_marked_at_its_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut bytes = Vec::from(&FILE_MAGIC[..]);
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&[0; 6]);
    for i in 0..4u64 {
        let wkb = geometry::to_wkb(&sample(i)).unwrap();
        bytes.extend_from_slice(&encode_record(KIND_OBJECT, i, b"", &wkb));
    }
    bytes.extend_from_slice(&encode_record(KIND_TOMBSTONE, 3, b"", b""));
    let v1_len = bytes.len() as u64;
    // and a torn last record, as version 1 tolerated
    bytes.extend_from_slice(&encode_record(KIND_OBJECT, 9, b"", b"xyz")[..20]);
    std::fs::write(&path, &bytes).unwrap();
    for committed in [through(0), through(4), Committed::LastMark] {
        let ro = Heap::open(&path, true, committed).unwrap();
        assert_eq!((ro.len(), ro.mark(), ro.torn_tail_bytes()), (3, None, 20));
    }
    let mut rw = Heap::open(&path, false, through(4)).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), v1_len);
    rw.put(10, b"", &sample(10)).unwrap();
    rw.commit(5).unwrap();
    drop(rw);
    let b = std::fs::read(&path).unwrap();
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 2);
    // the mark of the generation it was opened under ends the old records
    assert_eq!(Heap::open(&path, true, through(4)).unwrap().len(), 3);
    let now = Heap::open(&path, true, through(5)).unwrap();
    assert_eq!(now.ids(), vec![0, 1, 2, 10]);
    // a crash before the header's version was rewritten reads the same
    let mut v1 = b.clone();
    v1[8] = 1;
    std::fs::write(&path, &v1).unwrap();
    assert_eq!(Heap::open(&path, true, through(5)).unwrap().ids(), vec![0, 1, 2, 10]);
    assert_eq!(Heap::open(&path, true, through(4)).unwrap().len(), 3);
}

#[test]
fn pending_changes_are_read_and_frames_replay_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    for i in 0..5u64 {
        h.put(i, b"", &sample(i)).unwrap();
    }
    h.commit(1).unwrap();
    let mut frames = vec![];
    for (i, del) in [(1u64, true), (7, false), (7, true), (8, false), (2, true), (2, false)] {
        if del {
            h.delete(i).unwrap();
            frames.push(frame::delete(i));
        } else {
            let p = Heap::prepare(i, b"q", &sample(i + 1)).unwrap();
            frames.push(p.frame(i));
            h.put_prepared(i, p).unwrap();
        }
    }
    let want = vec![0, 2, 3, 4, 8];
    assert_eq!(h.ids(), want);
    assert_eq!(h.len(), 5);
    assert_eq!(h.get(2).unwrap(), Some(sample(3)));
    assert_eq!(h.get_payload(8).unwrap(), Some(b"q".to_vec()));
    assert!(!h.contains(1) && h.get(1).unwrap().is_none());
    assert!(h.has_pending() && h.pending_bytes() > 0);
    drop(h);
    // after a crash: the committed heap, and the frames replayed on it
    let mut ro = Heap::open(&path, true, through(1)).unwrap();
    assert_eq!(ro.ids(), vec![0, 1, 2, 3, 4]);
    for f in &frames {
        ro.apply_frame(f).unwrap();
    }
    assert_eq!(ro.ids(), want);
    assert_eq!(ro.get(2).unwrap(), Some(sample(3)));
    let mut rw = Heap::open(&path, false, through(1)).unwrap();
    for f in &frames {
        rw.apply_frame(f).unwrap();
    }
    rw.commit(2).unwrap();
    drop(rw);
    let after = Heap::open(&path, true, through(2)).unwrap();
    assert_eq!(after.ids(), want);
    assert!(after.apply_frame_err_probe());
}

impl Heap {
    /// A frame that does not parse is an error naming the file.
    fn apply_frame_err_probe(&self) -> bool {
        let mut copy = Heap::open(&self.path, true, Committed::LastMark).unwrap();
        let e = copy.apply_frame(&[0x81, 1]).unwrap_err();
        matches!(e, Error::Corrupt { .. }) && e.to_string().contains(OBJECTS_FILE)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

    /// Any damage (byte flips, truncation) gives an error or a heap whose
    /// reads succeed or fail cleanly: never a panic.
    #[test]
    fn damaged_files_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        ops in proptest::collection::vec((0u64..6, any::<bool>()), 1..12),
        g in 0u64..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.dat");
        let mut h = Heap::create(&path, 0).unwrap();
        let mut oracle = std::collections::BTreeMap::new();
        for (n, (id, del)) in ops.into_iter().enumerate() {
            if del && oracle.contains_key(&id) {
                h.delete(id).unwrap();
                oracle.remove(&id);
            } else {
                h.put(id, &id.to_le_bytes(), &sample(id)).unwrap();
                oracle.insert(id, sample(id));
            }
            if n % 3 == 2 {
                h.commit(h.mark().unwrap_or(0) + 1).unwrap();
            }
        }
        h.commit(h.mark().unwrap_or(0) + 1).unwrap();
        let last = h.mark().unwrap();
        drop(h);
        let clean = Heap::open(&path, true, Committed::Through(last)).unwrap();
        prop_assert_eq!(clean.len(), oracle.len() as u64);
        for (id, geom) in &oracle {
            prop_assert_eq!(clean.get(*id).unwrap(), Some(geom.clone()));
        }
        drop(clean);
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, x) in &flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Some(c) = cut {
            bytes.truncate(c.index(bytes.len() + 1));
        }
        std::fs::write(&path, &bytes).unwrap();
        for committed in [Committed::Through(g.min(last)), Committed::LastMark] {
            if let Ok(h) = Heap::open(&path, true, committed) {
                for id in 0..6 {
                    let _ = h.get(id);
                    let _ = h.get_payload(id);
                }
            }
        }
    }

    /// Random changes committed at random generations, then a crash
    /// anywhere in the last commit's write (cut, or zeros over its end):
    /// opened with the generation the index named, the heap is exactly the
    /// state of that commit (the last one if its mark is whole and named,
    /// else the one before), never an error.
    #[test]
    fn a_crash_during_a_commit_reopens_the_named_commit_exactly(
        batches in proptest::collection::vec(
            proptest::collection::vec((0u64..12, any::<bool>()), 1..8), 1..5),
        cut in any::<prop::sample::Index>(),
        zero in any::<bool>(),
        named_last in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.dat");
        let mut h = Heap::create(&path, 3).unwrap();
        let mut oracle = std::collections::BTreeMap::new();
        let mut states = vec![(3u64, oracle.clone(), h.file_bytes())];
        for (b, batch) in batches.iter().enumerate() {
            for &(id, del) in batch {
                if del && oracle.contains_key(&id) {
                    h.delete(id).unwrap();
                    oracle.remove(&id);
                } else {
                    h.put(id, &[b as u8], &sample(id + b as u64)).unwrap();
                    oracle.insert(id, (sample(id + b as u64), vec![b as u8]));
                }
            }
            let g = 4 + 2 * b as u64;
            h.commit(g).unwrap();
            states.push((g, oracle.clone(), h.file_bytes()));
        }
        drop(h);
        let full = std::fs::read(&path).unwrap();
        let (prev_g, prev_state, prev_end) = states[states.len() - 2].clone();
        let (last_g, last_state, last_end) = states[states.len() - 1].clone();
        // The crash: the last commit's bytes cut at `cut`, or zeros from there.
        let at = prev_end as usize + cut.index((last_end - prev_end) as usize + 1);
        let mut bytes = full.clone();
        if zero { bytes[at..].fill(0) } else { bytes.truncate(at) }
        let whole = at == full.len();
        std::fs::write(&path, &bytes).unwrap();
        // The index names the last generation only if the commit was whole.
        let (g, state) = if whole && named_last { (last_g, last_state) } else { (prev_g, prev_state) };
        let h = Heap::open(&path, false, Committed::Through(g)).unwrap();
        prop_assert_eq!(h.ids(), state.keys().copied().collect::<Vec<_>>());
        for (id, (geom, payload)) in &state {
            prop_assert_eq!(h.get(*id).unwrap(), Some(geom.clone()));
            prop_assert_eq!(h.get_payload(*id).unwrap(), Some(payload.clone()));
        }
    }
}

#[test]
fn spilled_changes_stay_uncommitted_until_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path, 0).unwrap();
    for i in 0..4u64 {
        h.put(i, b"", &sample(i)).unwrap();
    }
    h.spill().unwrap();
    assert!(h.has_pending() && h.pending_bytes() == 0);
    assert_eq!((h.len(), h.get(2).unwrap()), (4, Some(sample(2))));
    h.put(9, b"", &sample(9)).unwrap();
    h.delete(1).unwrap();
    h.spill().unwrap();
    // a crash now: the index names generation 0, and nothing was committed
    assert_eq!(Heap::open(&path, true, through(0)).unwrap().len(), 0);
    h.commit(1).unwrap();
    drop(h);
    assert_eq!(Heap::open(&path, true, through(1)).unwrap().ids(), vec![0, 2, 3, 9]);
}

#[test]
fn without_a_named_generation_damage_is_an_error_wherever_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let (path, rec) = three_commits(dir.path());
    assert_eq!(Heap::open(&path, true, Committed::LastMark).unwrap().len(), 3);
    flip(&path, rec[2].1 - 3);
    let msg = Heap::open(&path, false, Committed::LastMark).unwrap_err().to_string();
    assert!(msg.contains(&format!("offset {}", rec[2].0)), "{msg}");
    // and nothing was truncated
    assert_eq!(std::fs::metadata(&path).unwrap().len(), rec[2].1 + 32);
}
