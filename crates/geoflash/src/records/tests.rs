use super::log::{RecordLog, LOG_FILE};
use super::*;

/// A map with dense ids, a negative and a duplicate id, objects, a deletion.
fn sample() -> Records {
    let mut m = Records::new();
    for id in [0, 1, -7, 1] {
        let obj = (id == -7).then(|| b"obj".to_vec());
        m.add(id, obj).unwrap();
    }
    m.remove(1);
    m
}

fn same(a: &Records, b: &Records) {
    assert_eq!(
        a.encode()[16..],
        b.encode()[16..],
        "same keys, ids, liveness, objects"
    );
}

#[test]
fn a_snapshot_comes_back_with_its_generation() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = sample();
    m.save(dir.path()).unwrap();
    m.save(dir.path()).unwrap();
    let (back, replay) = Records::load(dir.path()).unwrap();
    assert!(replay.is_none());
    assert_eq!((back.generation(), back.read_version()), (2, VERSION));
    same(&m, &back);
    assert_eq!(back.id(2).unwrap(), -7);
    assert_eq!(back.obj(2), Some(&b"obj"[..]));
}

#[test]
fn a_version_1_snapshot_is_read_as_generation_0() {
    let m = sample();
    let v2 = m.encode_columns(2, m.generation());
    // Version 1: no generation field, version 1.
    let mut v1 = v2[..8].to_vec();
    v1.extend_from_slice(&1u16.to_le_bytes());
    v1.extend_from_slice(&[0u8; 6]);
    v1.extend_from_slice(&v2[24..v2.len() - 4]);
    let crc = crc32c::crc32c(&v1);
    v1.extend_from_slice(&crc.to_le_bytes());
    let back = Records::decode(&v1).unwrap();
    assert_eq!((back.generation(), back.read_version()), (0, 1));
    same(&m, &back);
}

/// Maps of `keys` keys drawn from `seed`: a dense prefix of random length,
/// then ids that are their keys or not (negative, duplicates), random
/// deletions and a few objects.
fn random_map(seed: u64, keys: u64) -> Records {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let prefix = next() % (keys + 1);
    let mut m = Records::new();
    for k in 0..keys {
        let id = if k < prefix || next() % 3 == 0 {
            k as i64
        } else {
            (next() % 50) as i64 - 25
        };
        let obj = (next() % 7 == 0).then(|| k.to_le_bytes().to_vec());
        m.add(id, obj).unwrap();
    }
    for _ in 0..keys / 4 {
        if keys > 0 {
            m.remove(next() % keys);
        }
    }
    m
}

#[test]
fn the_compact_layout_and_the_column_layout_read_back_the_same_map() {
    for (seed, keys) in (0..40u64).map(|s| (s, [0, 1, 7, 63, 64, 65, 200, 1000][s as usize % 8])) {
        let m = random_map(seed, keys);
        let compact = Records::decode(&m.encode()).unwrap();
        assert_eq!(compact.read_version(), VERSION);
        same(&m, &compact);
        for version in [2, 3] {
            let old = Records::decode(&m.encode_columns(version, m.generation())).unwrap();
            assert_eq!(old.read_version(), version, "seed {seed}");
            same(&m, &old);
            assert_eq!(old.live(), m.live(), "seed {seed}");
            for k in 0..keys {
                assert_eq!(old.is_live(k), m.is_live(k), "seed {seed} key {k}");
                assert_eq!(compact.id(k).ok(), m.id(k).ok(), "seed {seed} key {k}");
                assert_eq!(old.obj(k), m.obj(k), "seed {seed} key {k}");
            }
        }
    }
}

#[test]
fn ids_that_are_their_keys_take_a_bit_each_in_the_compact_layout() {
    let mut m = Records::new();
    for id in 0..100_000 {
        m.add(id, None).unwrap();
    }
    m.remove(5);
    let bytes = m.encode();
    // Header, the dense prefix's length, 12,500 bytes of liveness, CRC.
    assert_eq!(bytes.len(), HEADER + 8 + 12_500 + 4);
    assert_eq!(m.encode_columns(3, 0).len(), HEADER + 9 * 100_000 + 4);
    let back = Records::decode(&bytes).unwrap();
    assert_eq!((back.live(), back.is_live(5), back.id(99_999).unwrap()), (Some(99_999), false, 99_999));
}

#[test]
fn a_compact_snapshot_with_an_impossible_prefix_or_stray_bits_is_refused() {
    let reseal = |mut b: Vec<u8>| {
        b.truncate(b.len() - 4);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    let mut m = Records::new();
    for id in [0, 1, 2, -4, 9] {
        m.add(id, None).unwrap();
    }
    let good = m.encode();
    // The dense prefix (bytes 40..48) longer than the 5 keys.
    let mut b = good.clone();
    b[40..48].copy_from_slice(&6u64.to_le_bytes());
    let e = Records::decode(&reseal(b)).unwrap_err().to_string();
    assert!(e.contains("dense prefix longer"), "{e}");
    // A liveness bit past the last key (byte after the 2 ids).
    let mut b = good.clone();
    b[48 + 16] |= 1 << 6;
    let e = Records::decode(&reseal(b)).unwrap_err().to_string();
    assert!(e.contains("liveness bits set past the last key"), "{e}");
    // A key count the file cannot hold.
    let mut b = good;
    b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Records::decode(&reseal(b)).is_err());
}

#[test]
fn the_log_of_the_snapshots_generation_is_replayed_and_an_older_one_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = sample();
    m.save(dir.path()).unwrap();
    let mut log = RecordLog::create(dir.path(), m.generation()).unwrap();
    let k = m.add(42, Some(b"x".to_vec())).unwrap();
    log.append_add(k, 42, m.obj(k)).unwrap();
    m.remove(0);
    log.append_remove(0).unwrap();
    let (back, replay) = Records::load(dir.path()).unwrap();
    assert_eq!(replay.unwrap().changes.len(), 2);
    same(&m, &back);
    // A replayed deletion keeps the object until the tree confirms it.
    let mut r = back;
    assert!(r.resurrect(0));
    assert_eq!(r.id(0).unwrap(), 0);
    // A newer snapshot holds the log's changes: the log is ignored.
    m.save(dir.path()).unwrap();
    let (back, replay) = Records::load(dir.path()).unwrap();
    assert!(replay.is_none());
    same(&m, &back);
}

#[test]
fn a_log_newer_than_its_snapshot_or_skipping_a_key_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = sample();
    m.save(dir.path()).unwrap();
    RecordLog::create(dir.path(), m.generation() + 1).unwrap();
    let e = Records::load(dir.path()).unwrap_err();
    assert!(e.to_string().contains(LOG_FILE), "{e}");
    let mut log = RecordLog::create(dir.path(), m.generation()).unwrap();
    log.append_add(99, 5, None).unwrap();
    let e = Records::load(dir.path()).unwrap_err();
    assert!(e.to_string().contains("adds key 99"), "{e}");
}

#[test]
fn replayed_changes_equal_the_changes_made() {
    // Random operations on a map, logged as the Python front end logs
    // them; the snapshot plus the log equals the map at every point.
    let dir = tempfile::tempdir().unwrap();
    let mut m = Records::new();
    m.save(dir.path()).unwrap();
    let mut log = RecordLog::create(dir.path(), m.generation()).unwrap();
    let mut state = 7u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    for step in 0..400 {
        let r = next();
        if r % 3 == 0 && m.keys() > 0 {
            let k = next() % m.keys();
            if m.is_live(k) {
                m.remove(k);
                log.append_remove(k).unwrap();
            }
        } else {
            let id = (next() % 50) as i64 - 10;
            let obj = (r % 5 == 0).then(|| vec![step as u8; (r % 7) as usize]);
            let k = m.add(id, obj).unwrap();
            log.append_add(k, id, m.obj(k)).unwrap();
        }
        if step % 97 == 0 {
            m.save(dir.path()).unwrap();
            log = RecordLog::create(dir.path(), m.generation()).unwrap();
        }
        let (mut back, _) = Records::load(dir.path()).unwrap();
        back.prune_objects();
        same(&m, &back);
    }
}

#[test]
fn live_keys_of_an_id_follow_adds_removes_and_revivals() {
    let mut m = sample(); // ids 0, 1 (deleted), -7, 1
    assert_eq!(m.live_keys_of(1), vec![3]);
    assert_eq!(m.live_keys_of(-7), vec![2]);
    let k = m.add(1, None).unwrap();
    assert_eq!(m.live_keys_of(1), vec![3, k]);
    m.remove(3);
    assert_eq!(m.live_keys_of(1), vec![k]);
    assert!(m.resurrect(1));
    // Key 1 is in the dense prefix (its id is the key): listed first.
    assert_eq!(m.live_keys_of(1), vec![1, k]);
    m.undo_add(k);
    assert_eq!(m.live_keys_of(1), vec![1]);
    assert!(m.live_keys_of(99).is_empty());
    assert_eq!(Records::identity().live_keys_of(5), vec![5]);
    assert!(Records::identity().live_keys_of(-5).is_empty());
}

#[test]
fn only_live_key_finds_one_key_and_counts_the_others() {
    let mut m = sample(); // ids 0, 1 (deleted), -7, 1
    assert_eq!(m.only_live_key(0), Ok(0));
    assert_eq!(m.only_live_key(1), Ok(3));
    assert_eq!(m.only_live_key(-7), Ok(2));
    assert_eq!(m.only_live_key(99), Err(0));
    // A dense key and a duplicate beyond the prefix: two.
    assert!(m.resurrect(1));
    assert_eq!(m.only_live_key(1), Err(2));
    m.remove(1);
    m.remove(3);
    assert_eq!(m.only_live_key(1), Err(0));
    // Dense ids alone (from_arrays with arange): no id map needed.
    let mut d = Records::new();
    for id in 0..100 {
        d.add(id, None).unwrap();
    }
    assert_eq!(d.only_live_key(42), Ok(42));
    assert_eq!(d.by_id.as_ref().map(HashMap::len), Some(0));
    d.remove(42);
    assert_eq!(d.only_live_key(42), Err(0));
    assert_eq!(Records::identity().only_live_key(5), Ok(5));
    assert_eq!(Records::identity().only_live_key(-5), Err(0));
}

#[test]
fn a_liveness_column_decodes_as_the_bits_pushed_one_by_one() {
    // Lengths around word boundaries, bytes other than 0 and 1, and pops
    // that cross a word: the packed decode equals pushing bit by bit.
    for n in [0usize, 1, 63, 64, 65, 127, 128, 129, 1000] {
        let bytes: Vec<u8> = (0..n).map(|i| [0u8, 1, 0, 7, 255][(i * 7 + i / 3) % 5]).collect();
        let mut pushed = BitSet::default();
        for &b in &bytes {
            pushed.push(b != 0);
        }
        let mut packed = BitSet::from_bytes(&bytes);
        assert_eq!((packed.len(), &packed.words), (pushed.len(), &pushed.words), "n = {n}");
        let set = bytes.iter().filter(|&&b| b != 0).count() as u64;
        assert_eq!(packed.count_ones(), set, "n = {n}");
        for _ in 0..n.min(70) {
            packed.pop();
            pushed.pop();
        }
        assert_eq!((packed.len(), &packed.words), (pushed.len(), &pushed.words), "n = {n}, popped");
        assert_eq!(packed.count_ones(), (0..packed.len()).filter(|&k| packed.get(k)).count() as u64);
    }
}

#[test]
fn every_key_id_and_liveness_comes_back_whatever_the_dense_prefix() {
    // Ids that are their own keys throughout, for a prefix, or not from
    // the first key: the decoded map has every key, id and liveness.
    for ids in [vec![0i64, 1, 2, 3], vec![0, 1, 5, 3], vec![9, 1, 2], vec![]] {
        let mut m = Records::new();
        for &id in &ids {
            m.add(id, None).unwrap();
        }
        if !ids.is_empty() {
            m.remove(0);
        }
        let back = Records::decode(&m.encode()).unwrap();
        same(&m, &back);
        assert_eq!(back.keys(), ids.len() as u64, "{ids:?}");
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(back.stored_id(k as u64), Some(id), "{ids:?} key {k}");
            assert_eq!(back.alive.get(k as u64), k != 0, "{ids:?} key {k}");
        }
    }
}

/// An object whose length does not fit the snapshot's 32-bit length field
/// is refused when it is added, as bad input, the map unchanged. Before,
/// it was taken (a bulk load passes its objects straight to the map), and
/// the snapshot wrote its length modulo 2^32 under a valid checksum: the
/// file then failed to decode, or decoded as other objects. (The refusal
/// touches no memory: the object is allocated zeroed, lazily.)
#[test]
fn an_object_longer_than_the_snapshot_can_hold_is_refused() {
    let mut m = Records::new();
    m.add(7, Some(b"small".to_vec())).unwrap();
    let len = u32::MAX as usize + 1;
    match m.add(8, Some(vec![0u8; len])) {
        Err(e) => {
            assert!(e.is_user_error(), "{e}");
            assert!(e.to_string().contains("object"), "{e}");
            assert_eq!((m.keys(), m.live()), (1, Some(1)), "the map changed");
            let back = Records::decode(&m.encode()).unwrap();
            same(&m, &back);
        }
        Ok(key) => {
            let back = Records::decode(&m.encode());
            let held = back.as_ref().ok().and_then(|b| b.obj(key)).map(<[u8]>::len);
            assert_eq!(held, Some(len), "the snapshot lost the object: {:?}", back.err());
        }
    }
}

/// [`Records::finish_promotion`]: the snapshot the store names is renamed
/// from `pyrecords.next.dat` when it is still there, taken as it is when
/// the rename was done (its directory's sync failed), and anything else
/// is an error naming the files, which leaves them as they are.
#[test]
fn a_failed_promotion_is_finished_from_either_file_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = sample();
    m.save(dir.path()).unwrap(); // generation 1
    m.save_next(dir.path(), 2).unwrap();
    // The rename was not done.
    m.finish_promotion(dir.path(), 2).unwrap();
    assert_eq!(m.generation(), 2);
    assert!(!dir.path().join(NEXT_FILE).exists());
    assert_eq!(Records::decode(&std::fs::read(dir.path().join(RECORDS_FILE)).unwrap()).unwrap().generation(), 2);
    // The rename was done.
    let mut m = sample();
    m.finish_promotion(dir.path(), 2).unwrap();
    assert_eq!(m.generation(), 2);
    // Neither file holds the generation: refused, nothing renamed.
    m.save_next(dir.path(), 4).unwrap();
    let e = m.finish_promotion(dir.path(), 3).unwrap_err().to_string();
    assert!(e.contains(RECORDS_FILE) && e.contains(NEXT_FILE) && e.contains("generation 3"), "{e}");
    assert!(dir.path().join(NEXT_FILE).exists());
    assert_eq!(m.generation(), 2);
}

/// [`Records::save_next`] never overwrites `pyrecords.next.dat` holding a
/// generation above the map's other than the one it writes: the snapshot
/// of a checkpoint that failed, which the store's durable checkpoint may
/// name although the store returned an error (it is then the only copy of
/// that generation). It is refused naming the file, the file left as it
/// is; the same generation again (a retry the store never named), or a
/// generation the map has passed, is written as before.
#[test]
fn a_snapshot_of_a_checkpoint_whose_outcome_is_unknown_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let next = dir.path().join(NEXT_FILE);
    let generation = |p: &Path| {
        Records::decode(&std::fs::read(p).unwrap())
            .unwrap()
            .generation()
    };
    let mut m = sample();
    m.save(dir.path()).unwrap(); // generation 1
    m.save_next(dir.path(), 2).unwrap();
    // The store's checkpoint naming 2 failed: a retry of 2 is written.
    m.save_next(dir.path(), 2).unwrap();
    assert_eq!(generation(&next), 2);
    // The next checkpoint's 3 would replace the only copy of 2.
    let e = m.save_next(dir.path(), 3).unwrap_err();
    assert!(matches!(e, Error::StoreFailed(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(NEXT_FILE) && text.contains("generation 2") && text.contains("reopen"),
        "{text}"
    );
    assert_eq!(generation(&next), 2, "the pending snapshot is kept");
    // Once the map has taken 2 (an open, or the promotion finished), the
    // next snapshot goes there as before.
    m.finish_promotion(dir.path(), 2).unwrap();
    m.save_next(dir.path(), 3).unwrap();
    assert_eq!(generation(&next), 3);
    // A leftover of a generation the map has passed is no obstacle.
    let mut m = sample();
    m.save(dir.path()).unwrap();
    m.save(dir.path()).unwrap();
    m.save(dir.path()).unwrap(); // generation 3, pyrecords.next.dat 3
    m.save_next(dir.path(), 4).unwrap();
    assert_eq!(generation(&next), 4);
}

/// [`log::mark_tree_recovered`] leaves a change in the map's log that
/// replays as nothing: after the log's own changes, in a log of the
/// snapshot's generation (a new one when the log is missing or older than
/// the snapshot), and nothing at all without a snapshot.
#[test]
fn the_recovery_mark_is_a_change_that_replays_as_nothing() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        !log::mark_tree_recovered(dir.path()).unwrap(),
        "no map: nothing marked"
    );
    assert!(!dir.path().join(LOG_FILE).exists());
    let mut m = sample();
    m.save(dir.path()).unwrap();
    let mut rlog = RecordLog::create(dir.path(), m.generation()).unwrap();
    let k = m.add(42, Some(b"x".to_vec())).unwrap();
    rlog.append_add(k, 42, m.obj(k)).unwrap();
    rlog.sync().unwrap();
    drop(rlog);
    let mark = log::Change::Remove {
        key: log::RECOVERY_MARK,
    };
    for (what, setup) in [
        ("a log continuing the snapshot", None),
        ("no log", Some(false)),
        ("a log older than the snapshot", Some(true)),
    ] {
        match setup {
            None => {}
            Some(older) => {
                m.save(dir.path()).unwrap();
                std::fs::remove_file(dir.path().join(LOG_FILE)).unwrap();
                if older {
                    RecordLog::create(dir.path(), m.generation() - 1).unwrap();
                }
            }
        }
        assert!(log::mark_tree_recovered(dir.path()).unwrap(), "{what}");
        let (back, replay) = Records::load(dir.path()).unwrap();
        let replay =
            replay.unwrap_or_else(|| panic!("{what}: the mark is in no log the map reads"));
        assert_eq!(replay.changes.last(), Some(&mark), "{what}");
        let mut back = back;
        back.prune_objects();
        same(&m, &back);
    }
}
