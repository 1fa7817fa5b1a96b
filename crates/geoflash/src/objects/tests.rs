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

#[test]
fn round_trip_delete_replace_reopen_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let mut h = Heap::create(&path).unwrap();
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
    h.put(8, b"", &sample(2)).unwrap(); // replaces
    assert_eq!(h.get(8).unwrap(), Some(sample(2)));
    assert!(h.live_bytes() < h.file_bytes());
    h.sync().unwrap();
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
    };
    let ro = Heap::open(&path, true).unwrap();
    check(&ro);
    assert!(ro.get_wkb(3).unwrap().is_some());
    drop(ro);
    let mut rw = Heap::open(&path, false).unwrap();
    check(&rw);
    let before = rw.file_bytes();
    let rep = rw.compact().unwrap();
    assert_eq!(rep.bytes_before, before);
    assert!(rep.bytes_after < rep.bytes_before);
    assert_eq!(rep.bytes_after, rw.live_bytes() + FILE_HEADER);
    assert_eq!(rep.objects, 29);
    check(&rw);
    rw.put(100, b"x", &sample(100)).unwrap();
    drop(rw);
    let again = Heap::open(&path, true).unwrap();
    assert_eq!(again.len(), 30);
    assert_eq!(again.get(100).unwrap(), Some(sample(100)));
    assert!(!path.with_extension("dat.compact").exists());
}

#[test]
fn read_only_and_bad_geometries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.dat");
    let mut h = Heap::create(&path).unwrap();
    let nan: Geometry = point!(x: 0.0, y: f64::NAN).into();
    assert!(h.put(1, b"", &nan).unwrap_err().is_user_error());
    assert!(h.is_empty());
    h.put(1, b"", &sample(1)).unwrap();
    drop(h);
    assert!(Heap::create(&path).is_err());
    let mut ro = Heap::open(&path, true).unwrap();
    assert!(ro
        .put(2, b"", &sample(2))
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    assert!(ro.delete(1).is_err());
}

fn three_records(dir: &Path) -> (PathBuf, Vec<u64>) {
    let path = dir.join(OBJECTS_FILE);
    let mut h = Heap::create(&path).unwrap();
    let mut offsets = vec![];
    for i in 0..3u64 {
        offsets.push(h.file_bytes());
        h.put(i, b"payload", &sample(i)).unwrap();
    }
    offsets.push(h.file_bytes());
    (path, offsets)
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_records_are_errors_naming_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, off) = three_records(dir.path());
    // a byte of the middle record's WKB
    flip(&path, off[2] - 3);
    let e = Heap::open(&path, true).unwrap_err().to_string();
    assert!(
        e.contains(&format!("offset {}", off[1])) && e.contains("checksum"),
        "{e}"
    );
    flip(&path, off[2] - 3);
    // the magic of the first record
    flip(&path, off[0]);
    let e = Heap::open(&path, false).unwrap_err().to_string();
    assert!(
        e.contains(&format!("offset {}", off[0])) && e.contains("magic"),
        "{e}"
    );
    flip(&path, off[0]);
    // a length field: the header checksum catches it (not taken for a torn tail)
    flip(&path, off[1] + 17);
    let e = Heap::open(&path, false).unwrap_err().to_string();
    assert!(
        e.contains(&format!("offset {}", off[1])) && e.contains("header checksum"),
        "{e}"
    );
    flip(&path, off[1] + 17);
    // the file header
    flip(&path, 2);
    assert!(Heap::open(&path, true)
        .unwrap_err()
        .to_string()
        .contains("not an object heap"));
    flip(&path, 2);
    let mut b = std::fs::read(&path).unwrap();
    b[8] = 9;
    std::fs::write(&path, &b).unwrap();
    assert!(matches!(
        Heap::open(&path, true).unwrap_err(),
        Error::UnsupportedVersion { found: 9, .. }
    ));
    b[8] = 1;
    std::fs::write(&path, &b).unwrap();
    std::fs::write(dir.path().join("short"), b"GFOB").unwrap();
    assert!(Heap::open(&dir.path().join("short"), true)
        .unwrap_err()
        .to_string()
        .contains("shorter"));

    // damage after open is found by get, naming the offset
    let h = Heap::open(&path, true).unwrap();
    assert_eq!(h.len(), 3);
    flip(&path, off[3] - 1);
    let e = h.get(2).unwrap_err().to_string();
    assert!(e.contains(&format!("offset {}", off[2])), "{e}");
    assert!(h.get_payload(2).is_err());
    assert_eq!(h.get(0).unwrap(), Some(sample(0)));
}

#[test]
fn a_torn_last_record_is_ignored_read_only_and_truncated_writable() {
    let dir = tempfile::tempdir().unwrap();
    let (path, off) = three_records(dir.path());
    for cut in [off[3] - 1, off[2] + 5, off[2] + 34] {
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(cut).unwrap();
        drop(f);
        let ro = Heap::open(&path, true).unwrap();
        assert_eq!(ro.len(), 2);
        assert_eq!(ro.torn_tail_bytes(), cut - off[2]);
        drop(ro);
        let mut rw = Heap::open(&path, false).unwrap();
        assert_eq!(rw.len(), 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), off[2]);
        rw.put(2, b"payload", &sample(2)).unwrap();
        drop(rw);
        assert_eq!(Heap::open(&path, true).unwrap().torn_tail_bytes(), 0);
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
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.dat");
        let mut h = Heap::create(&path).unwrap();
        let mut oracle = std::collections::BTreeMap::new();
        for (id, del) in ops {
            if del && oracle.contains_key(&id) {
                h.delete(id).unwrap();
                oracle.remove(&id);
            } else {
                h.put(id, &id.to_le_bytes(), &sample(id)).unwrap();
                oracle.insert(id, sample(id));
            }
        }
        drop(h);
        let clean = Heap::open(&path, true).unwrap();
        prop_assert_eq!(clean.len(), oracle.len() as u64);
        for (id, g) in &oracle {
            prop_assert_eq!(clean.get(*id).unwrap(), Some(g.clone()));
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
        if let Ok(h) = Heap::open(&path, true) {
            for id in 0..6 {
                let _ = h.get(id);
                let _ = h.get_payload(id);
            }
        }
    }
}
