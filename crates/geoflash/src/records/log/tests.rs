use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn changes() -> Vec<Change> {
    vec![
        Change::Add {
            key: 0,
            id: -5,
            obj: None,
        },
        Change::Add {
            key: 1,
            id: 7,
            obj: Some(b"pickled".to_vec()),
        },
        Change::Remove { key: 0 },
    ]
}

fn append(log: &mut RecordLog, c: &Change) {
    match c {
        Change::Add { key, id, obj } => log.append_add(*key, *id, obj.as_deref()).unwrap(),
        Change::Remove { key } => log.append_remove(*key).unwrap(),
    }
}

/// The bytes of a log of format `version` holding [`changes`], synced.
fn written(dir: &Path, version: u16) -> Vec<u8> {
    let mut log = RecordLog::create_version(dir, 3, version).unwrap();
    for c in changes() {
        append(&mut log, &c);
    }
    log.sync().unwrap();
    std::fs::read(dir.join(LOG_FILE)).unwrap()
}

#[test]
fn changes_come_back_in_order_with_the_generation() {
    for version in [1, VERSION] {
        let dir = tempfile::tempdir().unwrap();
        let bytes = written(dir.path(), version);
        let r = read(&dir.path().join(LOG_FILE)).unwrap().unwrap();
        assert_eq!((r.generation, r.changes, r.torn), (3, changes(), 0));
        assert_eq!((r.end as usize, r.version), (bytes.len() - HEADER, version));
    }
}

#[test]
fn a_torn_last_frame_of_a_format_1_log_is_cut_and_appending_resumes_without_seals() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = written(dir.path(), 1);
    let path = dir.path().join(LOG_FILE);
    // Every cut inside the last frame, and zeros after the intact frames.
    let last = bytes.len() - (FRAME_HEADER + 9);
    for cut in last + 1..bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let r = read(&path).unwrap().unwrap();
        assert_eq!(r.changes, changes()[..2].to_vec(), "cut at {cut}");
        assert_eq!(r.torn as usize, cut - last);
    }
    let mut zeroed = bytes[..last].to_vec();
    zeroed.extend_from_slice(&[0u8; 40]);
    std::fs::write(&path, &zeroed).unwrap();
    let r = read(&path).unwrap().unwrap();
    assert_eq!((r.changes.len(), r.torn), (2, 40));
    let mut log = RecordLog::append_to(dir.path(), &r).unwrap();
    log.append_remove(1).unwrap();
    log.sync().unwrap();
    let r = read(&path).unwrap().unwrap();
    assert_eq!(r.changes.last(), Some(&Change::Remove { key: 1 }));
    assert_eq!((r.changes.len(), r.torn, r.version), (3, 0, 1));
    // Still format 1: a frame per change, no seal.
    let frames = FRAME_HEADER * 3 + 18 + 25 + 9;
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, HEADER + frames);
}

/// A format 1 log (no seals, still appended to by indexes written before
/// them) whose last append was torn by a crash after its frame's first
/// sectors: the rest of the frame reads as zeros from a sector boundary
/// to the end of the file (its size got ahead of the data, as the reader
/// already allows for a frame torn before its header). That is a torn
/// append, cut by the next writable open, never an error: before, the
/// payload's checksum made it "frame checksum mismatch", and the index
/// could not be opened after the crash. Zeros over a sector followed by
/// the frame's data are no tear: damage, an error naming the file.
#[test]
fn a_format_1_frame_torn_after_its_first_sectors_is_a_torn_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    let mut log = RecordLog::create_version(dir.path(), 3, 1).unwrap();
    let big = Change::Add {
        key: 1,
        id: 9,
        obj: Some((0..1500u32).map(|i| (i % 251 + 1) as u8).collect()),
    };
    for c in [&changes()[0], &big] {
        append(&mut log, c);
    }
    log.sync().unwrap();
    drop(log);
    let bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - (FRAME_HEADER + 18 + 1500);
    let mut torn = 0;
    for sector in (last + FRAME_HEADER).div_ceil(512)..bytes.len().div_ceil(512) {
        let keep = sector * 512;
        let mut b = bytes.clone();
        b[keep..].fill(0);
        std::fs::write(&path, &b).unwrap();
        let r = read(&path)
            .unwrap_or_else(|e| panic!("zeros from byte {keep}: a torn append read as damage: {e}"))
            .unwrap();
        assert_eq!(r.changes, changes()[..1].to_vec(), "zeros from byte {keep}");
        assert_eq!(r.torn as usize, bytes.len() - last, "zeros from byte {keep}");
        // The writable open cuts it and appends after the intact frame.
        let mut log = RecordLog::append_to(dir.path(), &r).unwrap();
        log.append_remove(0).unwrap();
        log.sync().unwrap();
        let r = read(&path).unwrap().unwrap();
        let mut want = changes()[..1].to_vec();
        want.push(Change::Remove { key: 0 });
        assert_eq!((r.changes, r.torn), (want, 0), "zeros from byte {keep}");
        // Zeros over one sector followed by the frame's data: damage.
        if keep + 512 < bytes.len() {
            let mut b = bytes.clone();
            b[keep..keep + 512].fill(0);
            std::fs::write(&path, &b).unwrap();
            let e = read(&path).unwrap_err().to_string();
            assert!(e.contains(LOG_FILE) && e.contains("checksum"), "zeros over sector {sector}: {e}");
        }
        torn += 1;
    }
    assert!(torn >= 2, "{torn} sector boundaries inside the last frame");
}

#[test]
fn damage_inside_the_intact_frames_of_a_format_1_log_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = written(dir.path(), 1);
    let path = dir.path().join(LOG_FILE);
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x5a;
        std::fs::write(&path, &b).unwrap();
        match read(&path) {
            Err(e) => assert!(e.to_string().contains(LOG_FILE), "byte {at}: {e}"),
            // A flip can only pass as a torn tail when it cuts the
            // last frame's length short of the end of the file: then the
            // changes read are a prefix, never a different change.
            Ok(Some(r)) => {
                assert!(r.torn > 0, "byte {at}: damage accepted as intact");
                assert_eq!(
                    r.changes,
                    changes()[..r.changes.len()].to_vec(),
                    "byte {at}"
                );
            }
            Ok(None) => unreachable!(),
        }
    }
}

#[test]
fn a_newer_format_is_refused_naming_the_file_and_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    std::fs::write(&path, header(VERSION + 1, 3)).unwrap();
    let e = read(&path).unwrap_err().to_string();
    assert!(e.contains(LOG_FILE) && e.contains(&format!("version {}", VERSION + 1)), "{e}");
}

/// A change with an object of `len` bytes (none for 0).
fn change(key: u64, len: usize) -> Change {
    if len == 0 && key.is_multiple_of(3) {
        return Change::Remove { key };
    }
    Change::Add {
        key,
        id: key as i64 * 7 - 3,
        obj: (len > 0).then(|| (0..len).map(|i| (i as u64 * 31 + key) as u8).collect()),
    }
}

/// Batches of changes of every size: small frames, objects across
/// blocks, a batch larger than a block, one of a single small change.
fn batches() -> Vec<Vec<Change>> {
    let sizes: [&[usize]; 5] = [
        &[0, 5, 0, 40],
        &[6000, 0, 12],
        &[0, 0, 300, 0, 0, 0, 9000, 7, 0],
        &[100, 200],
        &[0],
    ];
    let mut key = 0;
    sizes
        .iter()
        .map(|b| {
            b.iter()
                .map(|&len| {
                    key += 1;
                    change(key, len)
                })
                .collect()
        })
        .collect()
}

/// Writes `batches` into a new log in `dir`, each synced; the file's size
/// after each sync.
fn write_batches(dir: &Path, batches: &[Vec<Change>]) -> Vec<usize> {
    let mut log = RecordLog::create(dir, 9).unwrap();
    batches
        .iter()
        .map(|b| {
            for c in b {
                append(&mut log, c);
            }
            log.sync().unwrap();
            HEADER + log.bytes() as usize
        })
        .collect()
}

/// Damage to any one aligned 4 KiB block of a sealed log (zeros over a
/// 512-byte sector or the whole block, four bytes flipped at several
/// offsets) reads every change exactly (rebuilt from the seal of its
/// batch), or, in the header, is an error naming the file: never fewer
/// changes with success (issue 44: zeros over the last commit's frames
/// read as a torn append and opened the index at an earlier commit).
#[test]
fn damage_to_any_block_of_a_sealed_log_is_rebuilt_exactly_or_names_the_file() {
    for last_big in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let mut bs = batches();
        if last_big {
            bs.swap(2, 4); // the last synced batch spans several blocks
        }
        let ends = write_batches(dir.path(), &bs);
        let all: Vec<Change> = bs.concat();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), *ends.last().unwrap());
        let (mut exact, mut refused, mut cases) = (0, 0, 0);
        for sector in 0..bytes.len().div_ceil(512) {
            let s = sector * 512;
            let e = (s + 512).min(bytes.len());
            let mut damages: Vec<(String, Vec<u8>)> = Vec::new();
            let mut zeroed = bytes.clone();
            zeroed[s..e].fill(0);
            damages.push((format!("zeros over bytes {s}..{e}"), zeroed));
            for off in [0, 4, 10, 100, 256, 508] {
                let at = s + off;
                if at + 4 <= bytes.len() {
                    let mut b = bytes.clone();
                    b[at..at + 4].iter_mut().for_each(|x| *x ^= 0xa5);
                    damages.push((format!("4 bytes flipped at {at}"), b));
                }
            }
            if s % seal::BLOCK == 0 {
                let e = (s + seal::BLOCK).min(bytes.len());
                let mut b = bytes.clone();
                b[s..e].iter_mut().for_each(|x| *x = !*x);
                damages.push((format!("block {s}..{e} inverted"), b));
            }
            for (what, damaged) in damages {
                if damaged == bytes {
                    continue;
                }
                cases += 1;
                let header = damaged[..HEADER] != bytes[..HEADER];
                std::fs::write(&path, &damaged).unwrap();
                match read(&path) {
                    Err(e) => {
                        assert!(e.to_string().contains(LOG_FILE), "{what}: {e}");
                        assert!(header, "{what}: one damaged block refused ({e}), not rebuilt");
                        refused += 1;
                    }
                    Ok(r) => {
                        let r = r.unwrap();
                        assert!(!header, "{what}: a damaged header read");
                        assert_eq!(r.changes.len(), all.len(), "{what}: changes lost without an error");
                        assert!(r.changes == all, "{what}: other changes");
                        exact += 1;
                    }
                }
            }
        }
        assert!(exact > 0 && refused > 0 && cases == exact + refused);
        eprintln!(
            "record-map log damage (last batch {}): {cases} cases, {exact} rebuilt exactly, {refused} refused (header)",
            if last_big { "large" } else { "small" }
        );
    }
}

/// A writer that appends after a log read with damage rebuilt, or after a
/// torn seal, seals the frames after the last intact seal: damage to the
/// new last batch is still rebuilt.
#[test]
fn appending_after_a_rebuilt_or_torn_seal_keeps_the_last_batch_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE);
    let bs = batches();
    let ends = write_batches(dir.path(), &bs[..2]);
    let bytes = std::fs::read(&path).unwrap();
    // The last seal torn away (the batch before it intact), and, apart,
    // a block of the first batch zeroed.
    for (what, damaged) in [
        ("seal torn", {
            let mut b = bytes[..ends[1] - 40].to_vec();
            b.resize(ends[1], 0);
            b
        }),
        ("first block zeroed", {
            let mut b = bytes.clone();
            b[512..1024].fill(0);
            b
        }),
    ] {
        std::fs::write(&path, &damaged).unwrap();
        let r = read(&path).unwrap().unwrap();
        assert_eq!(r.changes, bs[..2].concat(), "{what}");
        let mut log = RecordLog::append_to(dir.path(), &r).unwrap();
        for c in &bs[2] {
            append(&mut log, c);
        }
        log.sync().unwrap();
        let sealed = std::fs::read(&path).unwrap();
        let want = bs[..3].concat();
        // Zeros over each sector after what was read.
        for s in (HEADER + r.end as usize) / 512 * 512..sealed.len() {
            if s % 512 != 0 {
                continue;
            }
            let mut b = sealed.clone();
            b[s..(s + 512).min(sealed.len())].fill(0);
            std::fs::write(&path, &b).unwrap();
            let got = read(&path).unwrap().unwrap();
            assert_eq!(got.changes, want, "{what}, then zeros at {s}");
        }
        std::fs::write(&path, &bytes).unwrap();
    }
}

/// Crashes while the last batch is written and synced (each 512-byte
/// sector of its frames and seal written or not, the last one written
/// in part, the file's size updated or not): the log reads a prefix of
/// the changes holding every acknowledged one (those of the batches
/// synced before), never an error, and a writer appending after it
/// seals what it adds. `GEOFLASH_CRASH_CASES` cases (200 by default).
#[test]
fn crashes_while_a_batch_is_synced_recover_a_prefix_with_every_acknowledged_change() {
    let cases = crate::testenv::crash_cases();
    let (mut whole, mut rebuilt, mut cut) = (0u64, 0u64, 0u64);
    for case in 0..cases {
        let mut rng = ChaCha8Rng::seed_from_u64(case ^ 0x5eed_1095);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let mut key = 0;
        let mut batch = |rng: &mut ChaCha8Rng| -> Vec<Change> {
            (0..rng.gen_range(1..8))
                .map(|_| {
                    key += 1;
                    let len = match rng.gen_range(0..4) {
                        0 => rng.gen_range(1..10_000),
                        1 => rng.gen_range(1..200),
                        _ => 0,
                    };
                    change(key, len)
                })
                .collect()
        };
        let acked: Vec<Vec<Change>> = (0..rng.gen_range(0..4)).map(|_| batch(&mut rng)).collect();
        let last = batch(&mut rng);
        let mut all = acked.clone();
        all.push(last.clone());
        let ends = write_batches(dir.path(), &all);
        let after = std::fs::read(&path).unwrap();
        let before = ends.len().checked_sub(2).map_or(HEADER, |i| ends[i]);
        // The crash: sectors of the last batch's writes kept or lost.
        let mut image = after[..before].to_vec();
        let torn_at = rng.gen_range(before..after.len());
        for sector in before / 512..after.len().div_ceil(512) {
            let s = sector * 512;
            let lo = s.max(before);
            let hi = (s + 512).min(after.len());
            image.resize(hi, 0);
            match rng.gen_range(0..3) {
                0 => {}
                1 if (lo..hi).contains(&torn_at) => image[lo..torn_at].copy_from_slice(&after[lo..torn_at]),
                _ => image[lo..hi].copy_from_slice(&after[lo..hi]),
            }
        }
        if rng.gen_bool(0.3) {
            image.truncate(rng.gen_range(before..=image.len()));
        }
        std::fs::write(&path, &image).unwrap();
        let r = read(&path)
            .unwrap_or_else(|e| panic!("case {case}: a crash read as damage: {e}"))
            .unwrap();
        let want = all.concat();
        let n_acked = acked.concat().len();
        assert!(
            r.changes.len() >= n_acked && r.changes[..] == want[..r.changes.len()],
            "case {case}: {} changes read, {n_acked} acknowledged",
            r.changes.len()
        );
        match (r.changes.len() == want.len(), r.rebuilt > 0) {
            (true, true) => rebuilt += 1,
            (true, false) => whole += 1,
            _ => cut += 1,
        }
        // The writable open after the crash: appends after the prefix and
        // seals; damage to that batch's last sector is rebuilt.
        let mut log = RecordLog::append_to(dir.path(), &r).unwrap();
        let more = batch(&mut rng);
        for c in &more {
            append(&mut log, c);
        }
        log.sync().unwrap();
        drop(log);
        let mut expect = r.changes.clone();
        expect.extend(more);
        let mut b = std::fs::read(&path).unwrap();
        // Zeros from a byte of what the reopened writer added to the end
        // of its sector.
        let p = rng.gen_range(HEADER + r.end as usize..b.len());
        let e = ((p / 512 + 1) * 512).min(b.len());
        b[p..e].fill(0);
        std::fs::write(&path, &b).unwrap();
        let got = read(&path).unwrap_or_else(|e| panic!("case {case}: {e}")).unwrap();
        assert_eq!(got.changes, expect, "case {case}: after the reopen");
    }
    eprintln!(
        "record-map log crash campaign: {cases} crashes in the last batch's sync: {whole} read it whole, \
         {rebuilt} rebuilt one lost sector from its seal, {cut} ended before it (a prefix, every acknowledged change kept)"
    );
}

/// A sync that failed leaves nothing known durable: every later sync (and
/// append) is refused. Before, the failed sync had already cleared the
/// "unsynced" mark, so the next one returned `Ok` with nothing written.
#[test]
fn a_failed_sync_is_never_followed_by_one_that_says_ok() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = RecordLog::create_version(dir.path(), 3, VERSION).unwrap();
    append(&mut log, &changes()[0]);
    // The seal's write fails: the file is now open read-only.
    log.file = File::open(dir.path().join(LOG_FILE)).unwrap();
    assert!(log.sync().is_err());
    for _ in 0..2 {
        let e = log.sync().unwrap_err();
        assert!(
            matches!(e, Error::StoreFailed(ref m) if m.contains("an earlier write failed")),
            "{e}"
        );
    }
    assert!(log.append_remove(0).is_err());
}
