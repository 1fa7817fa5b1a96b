//! A heap of version 1 (written before marks) whose first commit by this
//! code a crash cut short ([`Heap::mark_version_1`], the scan's
//! `unmarked_end`): whatever the crash left after the old records (zeros,
//! from a crash that extended the file without its data; the mark's own
//! write torn; the commit's later bytes torn after the synced mark), the
//! heap opens with the old records, read-only and writable, as the
//! index's checkpoint says (it never named the new generation); damage is
//! still an error naming the file.
use std::path::Path;

use geo::polygon;

use super::*;

/// The generation the index's checkpoint names while its heap is of
/// version 1 (the one the upgrade's first mark names).
const BASE: u64 = 4;

fn shape(i: u64) -> Geometry {
    let f = i as f64;
    polygon![(x: f, y: f), (x: f + 2.0, y: f), (x: f + 1.0, y: f + 3.0), (x: f, y: f)].into()
}

/// A heap file of version 1 at `path` (objects 0..4, then 3 deleted: 0, 1
/// and 2 live) and its bytes.
fn version_1(path: &Path) -> Vec<u8> {
    let mut bytes = Vec::from(&FILE_MAGIC[..]);
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&[0; 6]);
    for i in 0..4u64 {
        let wkb = geometry::to_wkb(&shape(i)).unwrap();
        bytes.extend_from_slice(&encode_record(KIND_OBJECT, i, b"", &wkb));
    }
    bytes.extend_from_slice(&encode_record(KIND_TOMBSTONE, 3, b"", b""));
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// Checks that the heap at `path`, the version-1 file `v1` followed by
/// `tail`, opens with the old records under `committed`, read-only (the
/// tail ignored) and writable (the tail truncated), and that a commit
/// then upgrades it.
fn opens_with_the_old_records(
    path: &Path,
    v1: &[u8],
    tail: &[u8],
    committed: Committed,
    what: &str,
) {
    let mut bytes = v1.to_vec();
    bytes.extend_from_slice(tail);
    std::fs::write(path, &bytes).unwrap();
    let ro = Heap::open(path, true, committed).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(ro.ids(), vec![0, 1, 2], "{what}");
    assert_eq!(ro.torn_tail_bytes(), tail.len() as u64, "{what}");
    assert_eq!(ro.get(2).unwrap(), Some(shape(2)), "{what}");
    drop(ro);
    let mut rw = Heap::open(path, false, committed).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(rw.ids(), vec![0, 1, 2], "{what}");
    assert_eq!(
        std::fs::read(path).unwrap(),
        v1,
        "{what}: the tail truncated"
    );
    rw.put(10, b"", &shape(10)).unwrap();
    let base = match committed {
        Committed::Through(g) => g,
        _ => 0,
    };
    rw.commit(base + 1).unwrap();
    drop(rw);
    let now = Heap::open(path, true, through(base + 1)).unwrap();
    assert_eq!(now.ids(), vec![0, 1, 2, 10], "{what}");
    assert_eq!(std::fs::read(path).unwrap()[8], 2, "{what}: version 2");
}

fn through(g: u64) -> Committed {
    Committed::Through(g)
}

fn mark(g: u64) -> Vec<u8> {
    encode_record(KIND_MARK, g, &[], &[])
}

/// A crash that extended the file without its data: zeros after the
/// records, of any length (the bytes of the whole upgrading commit, as
/// this code wrote it in one write before, among them).
#[test]
fn zeros_after_the_old_records_are_an_unfinished_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let v1 = version_1(&path);
    let wkb = geometry::to_wkb(&shape(10)).unwrap();
    let commit = [
        mark(BASE),
        encode_record(KIND_OBJECT, 10, b"", &wkb),
        mark(BASE + 1),
    ]
    .concat();
    for len in [32, 33, 64, commit.len(), 4096, 70_000] {
        let zeros = vec![0u8; len];
        opens_with_the_old_records(&path, &v1, &zeros, through(BASE), &format!("{len} zeros"));
    }
    // Without a generation named (journal off) too: the upgrade's mark is
    // then of generation 0.
    opens_with_the_old_records(&path, &v1, &[0; 100], Committed::LastMark, "last mark");
}

/// The upgrade's mark is written and synced alone: a crash inside that
/// write leaves some of its bytes and zeros in the others (sectors
/// written or not), whatever follows it zeros.
#[test]
fn a_torn_write_of_the_upgrades_mark_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let v1 = version_1(&path);
    let m = mark(BASE);
    for k in 1..m.len() {
        let mut head = m[..k].to_vec();
        head.resize(m.len(), 0);
        opens_with_the_old_records(
            &path,
            &v1,
            &head,
            through(BASE),
            &format!("first {k} bytes"),
        );
        let mut tail = vec![0u8; k];
        tail.extend_from_slice(&m[k..]);
        tail.resize(4096, 0);
        opens_with_the_old_records(&path, &v1, &tail, through(BASE), &format!("from byte {k}"));
    }
}

/// The first commit of a version-1 heap writes and syncs its mark before
/// the commit's records: a crash that then tears the records' write (its
/// first bytes zero, its later ones written) leaves a heap whose old
/// records end at that mark, which the index names. (Written in one
/// write with the records, a crash could leave zeros over the mark and
/// the records after them: an error, the index no longer opened.)
#[test]
fn a_crash_in_the_first_commit_after_its_mark_reopens_the_old_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let v1 = version_1(&path);
    let mut rw = Heap::open(&path, false, through(BASE)).unwrap();
    for id in [10, 11] {
        rw.put(id, b"payload", &shape(id)).unwrap();
    }
    APPEND_FAILS.with(|f| f.set(true));
    assert!(rw.commit(BASE + 1).is_err());
    drop(rw);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        bytes,
        [v1.clone(), mark(BASE)].concat(),
        "the mark synced alone first"
    );
    // What the crash left of the commit's write: zeros, then its bytes.
    let wkb = geometry::to_wkb(&shape(10)).unwrap();
    let mut torn = [
        encode_record(KIND_OBJECT, 10, b"payload", &wkb),
        mark(BASE + 1),
    ]
    .concat();
    torn[..40].fill(0);
    bytes.extend_from_slice(&torn);
    for read_only in [true, false] {
        std::fs::write(&path, &bytes).unwrap();
        let h = Heap::open(&path, read_only, through(BASE)).unwrap();
        assert_eq!(
            (h.ids(), h.mark()),
            (vec![0, 1, 2], Some(BASE)),
            "read-only {read_only}"
        );
        assert_eq!(h.torn_tail_bytes(), torn.len() as u64);
    }
    // A spill (no sync) marks the old records the same way.
    std::fs::write(&path, &v1).unwrap();
    let mut rw = Heap::open(&path, false, through(BASE)).unwrap();
    rw.put(12, b"", &shape(12)).unwrap();
    APPEND_FAILS.with(|f| f.set(true));
    assert!(rw.spill().is_err());
    drop(rw);
    assert_eq!(std::fs::read(&path).unwrap()[v1.len()..], mark(BASE)[..]);
}

/// Anything else after the old records is damage, an error naming the
/// file and the offset: bytes that are neither zero nor the mark's, the
/// mark of another generation, bytes past the mark's 32.
#[test]
fn damage_after_the_old_records_is_still_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OBJECTS_FILE);
    let v1 = version_1(&path);
    let m = mark(BASE);
    let mut flipped = m.clone();
    flipped[9] ^= 0x5a;
    let mut late = vec![0u8; 100];
    late[40] = 1;
    let mut other = mark(BASE + 3)[..20].to_vec();
    other.resize(64, 0);
    let mut garbage = m[..10].to_vec();
    garbage.extend_from_slice(&[0xee; 30]);
    for (tail, what) in [
        (flipped, "a flipped byte"),
        (late, "a byte past the mark"),
        (other, "another mark"),
        (garbage, "garbage"),
    ] {
        std::fs::write(&path, [v1.clone(), tail].concat()).unwrap();
        for read_only in [true, false] {
            let msg = Heap::open(&path, read_only, through(BASE))
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains(OBJECTS_FILE) && msg.contains(&format!("offset {}", v1.len())),
                "{what}: {msg}"
            );
        }
    }
    // A heap of version 1 where the manifest records a committed mark: the
    // file was replaced by an older one.
    std::fs::write(&path, &v1).unwrap();
    let msg = Heap::open(&path, true, Committed::NotBefore(1))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(OBJECTS_FILE) && msg.contains("generation 1"),
        "{msg}"
    );
}
