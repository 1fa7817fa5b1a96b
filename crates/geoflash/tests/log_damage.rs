//! Restart over a log whose last written pages are damaged after they were
//! synced: a damaged last page looks like a torn tail, so restart recovers
//! a prefix of the log; if node pages were written after the lost records,
//! replaying that prefix onto them would apply changes twice. Restart must
//! then refuse the index (the nodes' LSNs are the evidence), never give a
//! tree that fails its check. The first case is the input the `log_replay`
//! fuzz target found (`fuzz/regressions/log_replay/crash-ef5f6f7c…`).
use std::collections::HashMap;
use std::path::Path;

use geoflash::engine::{StoreKind, StoreSpec};
use geoflash::geom::Rect;
use geoflash::index::query::Predicate;
use geoflash::index_dir::LOG_FILE;
use geoflash::manifest::Access;
use geoflash::{Error, Index, IndexOptions};

/// Records inserted into the captured indexes (as the fuzz target).
const RECORDS: u64 = 600;
/// Page size of the captured indexes.
const PAGE: usize = 1024;

/// The rectangle of record `id` (the fuzz target's).
fn rect(id: u64) -> Rect {
    let x = ((id * 7919) % 1000) as f64 / 1000.0;
    let y = ((id * 104_729) % 1000) as f64 / 1000.0;
    Rect::new(x, y, x + 0.01, y + 0.01).unwrap()
}

/// The files of an index of `store` as a crash would leave them: copied
/// while it is open, after 600 inserts with a checkpoint after 300 (the
/// fuzz target's template).
fn capture(dir: &Path, store: StoreKind) -> HashMap<String, Vec<u8>> {
    let mut opts = IndexOptions {
        page_size: PAGE,
        device: "file?direct=false".parse().unwrap(),
        ..IndexOptions::default()
    };
    opts.store = StoreSpec::of_kind(store, 16 * 1024);
    let mut index = Index::create(dir, &opts).unwrap();
    for id in 0..RECORDS {
        index.insert(id, rect(id)).unwrap();
        if id == RECORDS / 2 {
            index.checkpoint().unwrap();
        }
    }
    let mut files = HashMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(entry.path()).unwrap());
        }
    }
    drop(index);
    files
}

/// Writes `files` into a fresh directory `dir`.
fn restore(dir: &Path, files: &HashMap<String, Vec<u8>>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Whether `e` refuses a node page stamped above the recovered log's end
/// (`LsnHorizon`): a clean error, at open or at the read of that page.
fn refused_by_horizon(e: &Error) -> bool {
    matches!(e, Error::Corrupt { .. })
        && e.to_string().contains("newer than the recovered log's end")
}

/// What opening `files` gives: `Err` (the error) or `Ok` after checking
/// the tree and every answer (a broken tree panics).
fn open_and_check(dir: &Path, files: &HashMap<String, Vec<u8>>) -> Result<u64, Error> {
    restore(dir, files);
    let index = Index::open(dir, Access::Write)?;
    if let Err(e) = index.verify() {
        if refused_by_horizon(&e) {
            return Err(e);
        }
        panic!("restart over a damaged log gave a broken tree: {e}");
    }
    let all = Rect::new(-1.0, -1.0, 2.0, 2.0).unwrap();
    let found = match index.query(all, Predicate::Intersects) {
        Ok(found) => found,
        Err(e) if refused_by_horizon(&e) => return Err(e),
        Err(e) => panic!("a query on a recovered index failed: {e}"),
    };
    for hit in &found.hits {
        assert!(hit.id < RECORDS, "record {} never inserted", hit.id);
        assert_eq!(hit.rect, rect(hit.id));
    }
    assert_eq!(found.hits.len() as u64, index.len());
    Ok(index.len())
}

/// The error of replaying a fuzz input on `store`'s template: `bytes`
/// written at `offset` modulo the length of `log.dat` (as the target
/// patches). Panics if the index opens and answers consistently.
fn replay_input(store: StoreKind, offset: usize, bytes: &[u8]) -> Error {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = capture(&tmp.path().join("template"), store);
    let log = files.get_mut(LOG_FILE).unwrap();
    let n = log.len();
    for (i, &b) in bytes.iter().enumerate() {
        log[(offset + i) % n] = b;
    }
    open_and_check(&tmp.path().join("replay"), &files).unwrap_err()
}

#[test]
fn the_fuzz_finding_is_refused_as_damage_before_the_tail() {
    // FAST, `00 d8` at offset 0xfffff7ff: the last byte of one log page
    // and the first (magic) byte of the next.
    let err = replay_input(StoreKind::Fast, 0xffff_f7ff, &[0x00, 0xd8]);
    assert!(
        matches!(&err, Error::Corrupt { .. })
            && err.to_string().contains("damaged before its tail"),
        "{err}"
    );
}

#[test]
fn a_damaged_superblock_slot_opens_the_same_index_as_the_undamaged_log() {
    // The second log_replay finding (`fuzz/regressions/log_replay/crash-43a02ca6…`):
    // FAST, `0a 01` at byte 436 of `log.dat`, inside the newest superblock
    // slot. Restart used to fall back to the older slot, whose log was
    // older than nodes written since (refused at the read of such a node,
    // or an older index where none was). Superblock switches are mirrored
    // now (issue 44, item 1): the other slot holds the same state, and the
    // index opens exactly as it does undamaged.
    let tmp = tempfile::tempdir().unwrap();
    let files = capture(&tmp.path().join("template"), StoreKind::Fast);
    let want = open_and_check(&tmp.path().join("clean"), &files).unwrap();
    let mut damaged = files.clone();
    let log = damaged.get_mut(LOG_FILE).unwrap();
    log[436] = 0x0a;
    log[437] = 0x01;
    let got = open_and_check(&tmp.path().join("replay"), &damaged).unwrap();
    assert_eq!(got, want);
}

/// Byte offsets in a log page header (see `geoflash::store::log`): magic,
/// then CRC, log id, epoch, position.
const MAGIC: &[u8] = b"GFLG";
const EPOCH_AT: usize = 16;
const POSITION_AT: usize = 24;

/// File offsets of the pages of the newest epoch in `log`, by position.
fn live_pages(log: &[u8]) -> Vec<usize> {
    let field = |page: &[u8], at: usize| u64::from_le_bytes(page[at..at + 8].try_into().unwrap());
    let pages: Vec<(u64, u64, usize)> = log
        .chunks_exact(PAGE)
        .enumerate()
        .filter(|(_, p)| &p[..4] == MAGIC)
        .map(|(i, p)| (field(p, EPOCH_AT), field(p, POSITION_AT), i * PAGE))
        .collect();
    let live = pages.iter().map(|p| p.0).max().unwrap();
    let mut mine: Vec<(u64, usize)> = pages
        .iter()
        .filter(|p| p.0 == live)
        .map(|p| (p.1, p.2))
        .collect();
    mine.sort_unstable();
    mine.into_iter().map(|p| p.1).collect()
}

#[test]
fn damage_across_any_log_page_boundary_is_refused_or_recovered_consistently() {
    let tmp = tempfile::tempdir().unwrap();
    for store in [StoreKind::Fast, StoreKind::Efind] {
        let files = capture(&tmp.path().join(format!("template-{store:?}")), store);
        // The boundaries before each page the log wrote and after the last.
        let live = live_pages(&files[LOG_FILE]);
        let after = live.last().unwrap() + PAGE;
        let n = files[LOG_FILE].len();
        let boundaries = live
            .iter()
            .copied()
            .chain([after])
            .filter(|&at| at > 0 && at < n);
        let (mut refused, mut opened) = (0, 0);
        for at in boundaries {
            let mut damaged = files.clone();
            let log = damaged.get_mut(LOG_FILE).unwrap();
            log[at - 1] ^= 0x5a;
            log[at] ^= 0xd8;
            match open_and_check(&tmp.path().join("replay"), &damaged) {
                Ok(_) => opened += 1,
                Err(Error::Corrupt { .. }) => refused += 1,
                Err(e) => panic!("{store:?}, damage at byte {at}: not a corruption error: {e}"),
            }
        }
        assert!(refused > 0, "{store:?}: {refused} refused, {opened} opened");
    }
}

#[test]
fn a_damaged_synced_tail_is_refused_by_the_lsns_of_nodes_written_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut by_horizon = 0;
    for store in [StoreKind::Fast, StoreKind::Efind] {
        let files = capture(&tmp.path().join(format!("template-{store:?}")), store);
        let live = live_pages(&files[LOG_FILE]);
        for k in 1..=3 {
            // The last k pages the log wrote, zeroed: nothing in the log
            // tells them from pages a crash kept from being written.
            let mut damaged = files.clone();
            let log = damaged.get_mut(LOG_FILE).unwrap();
            for &at in &live[live.len() - k..] {
                log[at..at + PAGE].fill(0);
            }
            match open_and_check(&tmp.path().join("replay"), &damaged) {
                Ok(_) => {}
                Err(e) if e.to_string().contains("newer than the recovered log's end") => {
                    by_horizon += 1
                }
                Err(e) => panic!("{store:?}, last {k} pages zeroed: {e}"),
            }
        }
    }
    assert!(by_horizon > 0, "no case was refused by a node's LSN");
}
