//! Issue 44, item 1: damage to the metadata of an index never gives another
//! answer. For every store (plain, eFIND, FAST) and build mode (insertion,
//! STR, Hilbert packing), a small index on a file is built and closed; then
//! 4-byte ranges of its metadata pages (the header page and the last page
//! of `pages.dat`; both superblock slots and the first region page of
//! `log.dat`; both header slots of `journal.dat`; all of `manifest.json`)
//! are flipped one at a time, and a read-only open with a query over
//! everything must either give exactly the records built or fail with an
//! error naming the damaged file. `GEOFLASH_DAMAGE_STRIDE` (bytes between
//! the ranges flipped in a page, default 64; 4 flips every range) sets the
//! density; the first 256 bytes of every page (where the headers are) are
//! flipped at every 4-byte range whatever the stride. A second campaign
//! flips one 4-byte range (at an offset that moves from page to page) in
//! every page of every file of the index.
use std::path::Path;

use super::*;
use crate::config::{StoreKind, StoreSpec};
use crate::geom::Rect;
use crate::index::query::Predicate;
use crate::index::BulkMethod;
use crate::manifest::Access;

const PAGE: usize = 1024;
const N: u64 = 600;

fn rect(i: u64) -> Rect {
    let x = (i * 7919 % 1000) as f64;
    let y = (i * 104_729 % 997) as f64;
    Rect::new(x, y, x + 3.0, y + 3.0).unwrap()
}

fn stride() -> usize {
    std::env::var("GEOFLASH_DAMAGE_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &usize| *s >= 4)
        .unwrap_or(64)
}

fn options(store: StoreKind) -> IndexOptions {
    IndexOptions {
        page_size: PAGE,
        device: "file?direct=false".parse().unwrap(),
        store: StoreSpec::of_kind(store, 64 * 1024),
        ..IndexOptions::default()
    }
}

fn everything(path: &Path) -> crate::Result<Vec<u64>> {
    let idx = Index::open(path, Access::Read)?;
    let all = Rect::new(-10.0, -10.0, 2000.0, 2000.0).unwrap();
    Ok(idx.query(all, Predicate::Intersects)?.sorted_ids())
}

/// Offsets of the 4-byte ranges flipped in a piece of `len` bytes.
fn offsets(len: usize) -> impl Iterator<Item = usize> {
    let s = stride();
    (0..len.min(256))
        .step_by(4)
        .chain((256..len).step_by(s))
        .filter(move |&at| at + 4 <= len)
}

/// Flips each range of `bytes` of `file` (from `start`, `len` bytes) in
/// turn, checking every open; returns the opens that failed.
fn campaign(dir: &Path, file: &str, start: usize, len: usize, want: &[u64], what: &str) -> u64 {
    let path = dir.join(file);
    let clean = std::fs::read(&path).unwrap();
    if clean.len() < start + len {
        return 0;
    }
    let mut refused = 0;
    for at in offsets(len) {
        let mut bad = clean.clone();
        for b in &mut bad[start + at..start + at + 4] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, &bad).unwrap();
        match everything(dir) {
            Ok(got) => assert_eq!(got, want, "{what}: {file} bytes {}..", start + at),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(file),
                    "{what}: {file} bytes {}..: the error does not name the file: {msg}",
                    start + at
                );
                refused += 1;
            }
        }
    }
    std::fs::write(&path, &clean).unwrap();
    assert_eq!(everything(dir).unwrap(), want, "{what}: restored");
    refused
}

#[test]
fn damaged_metadata_gives_the_exact_answer_or_an_error_naming_the_file() {
    let want: Vec<u64> = (1..=N).collect();
    let root = tempfile::tempdir().unwrap();
    let mut refused = 0;
    let mut cases = 0;
    for store in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast] {
        for build in ["insertion", "str", "hilbert"] {
            let what = format!("{store:?} {build}");
            let dir = root.path().join(what.replace(' ', "-"));
            let opts = options(store);
            let items: Vec<(u64, Rect)> = (1..=N).map(|i| (i, rect(i))).collect();
            let idx = match build {
                "insertion" => {
                    let (idx, ()) = Index::build(&dir, &opts, |idx| {
                        items.iter().try_for_each(|&(i, r)| idx.insert(i, r))
                    })
                    .unwrap();
                    idx
                }
                "str" => Index::bulk_load(Some(&dir), &opts, items, BulkMethod::Str, 1.0).unwrap(),
                _ => Index::bulk_load(Some(&dir), &opts, items, BulkMethod::Hilbert, 1.0).unwrap(),
            };
            idx.close().unwrap();
            assert_eq!(everything(&dir).unwrap(), want, "{what}");
            let pages_len = std::fs::metadata(dir.join("pages.dat")).unwrap().len() as usize;
            let mut pieces = vec![
                ("pages.dat", 0, PAGE),
                ("pages.dat", pages_len - PAGE, PAGE),
                ("manifest.json", 0, std::fs::metadata(dir.join("manifest.json")).unwrap().len() as usize),
            ];
            if store == StoreKind::Plain {
                pieces.extend([("journal.dat", 0, PAGE), ("journal.dat", PAGE, PAGE)]);
            } else {
                pieces.extend([("log.dat", 0, PAGE), ("log.dat", PAGE, PAGE), ("log.dat", 2 * PAGE, PAGE)]);
            }
            for (file, start, len) in pieces {
                refused += campaign(&dir, file, start, len, &want, &what);
                cases += offsets(len).count();
            }
        }
    }
    println!("metadata damage: {cases} flips, {refused} refused naming the file, the rest answered exactly");
}

/// Writes `bytes` at `offset` of `path` in place.
fn patch(path: &Path, offset: usize, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset as u64).unwrap();
}

/// Every page of every file of each index (one 4-byte range per page, at an
/// offset that moves from page to page, over the node pages' headers and
/// entries): the exact answer or an error naming the file.
#[test]
fn damage_to_any_page_of_any_file_gives_the_exact_answer_or_names_the_file() {
    let want: Vec<u64> = (1..=N).collect();
    let root = tempfile::tempdir().unwrap();
    let (mut flips, mut refused) = (0, 0);
    for store in [StoreKind::Plain, StoreKind::Efind, StoreKind::Fast] {
        for bulk in [false, true] {
            let what = format!("{store:?} bulk={bulk}");
            let dir = root.path().join(what.replace([' ', '='], "-"));
            let opts = options(store);
            let items: Vec<(u64, Rect)> = (1..=N).map(|i| (i, rect(i))).collect();
            let idx = if bulk {
                Index::bulk_load(Some(&dir), &opts, items, BulkMethod::Str, 1.0).unwrap()
            } else {
                let (idx, ()) = Index::build(&dir, &opts, |idx| {
                    items.iter().try_for_each(|&(i, r)| idx.insert(i, r))
                })
                .unwrap();
                idx
            };
            idx.close().unwrap();
            for file in ["pages.dat", "log.dat", "journal.dat"] {
                let path = dir.join(file);
                let Ok(clean) = std::fs::read(&path) else {
                    continue;
                };
                for page in 0..clean.len() / PAGE {
                    let base = page * PAGE;
                    if clean[base..base + PAGE].iter().all(|&b| b == 0) {
                        continue; // never written: nothing reads it
                    }
                    let at = base + (page * 52) % (PAGE - 4);
                    let mut bytes: [u8; 4] = clean[at..at + 4].try_into().unwrap();
                    for b in &mut bytes {
                        *b ^= 0x5a;
                    }
                    patch(&path, at, &bytes);
                    flips += 1;
                    match everything(&dir) {
                        Ok(got) => assert_eq!(got, want, "{what}: {file} page {page} byte {at}"),
                        Err(e) => {
                            let msg = e.to_string();
                            assert!(msg.contains(file), "{what}: {file} page {page}: {msg}");
                            refused += 1;
                        }
                    }
                    patch(&path, at, &clean[at..at + 4]);
                }
            }
            assert_eq!(everything(&dir).unwrap(), want, "{what}: restored");
        }
    }
    println!("page damage: {flips} pages flipped, {refused} refused naming the file, the rest answered exactly");
}
