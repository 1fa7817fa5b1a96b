//! Restart of the logged stores (eFIND, FAST) over a damaged log: an index
//! is built once per process and captured as a crash would leave it (files
//! copied while it is open, after unsynced and synced operations); each input
//! patches bytes of that copy's `log.dat` (superblocks and log pages alike)
//! and reopens it. Opening must either fail with an error or give an index
//! whose tree passes its structural check and whose every answer is a
//! subset of the records inserted, or whose reads refuse a node page that
//! proves the log lost durable records (an error naming the page). Nothing
//! may panic.
//!
//! Input: byte 0 chooses the store (bit 0: eFIND or FAST); then patches of
//! `[u32 offset LE][u8 length][bytes]`, the offset taken modulo the log's
//! length.
#![no_main]

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use geoflash::geom::Rect;
use geoflash::index::query::Predicate;
use geoflash::engine::{StoreKind, StoreSpec};
use geoflash::index_dir::LOG_FILE;
use geoflash::manifest::Access;
use geoflash::{Index, IndexOptions};
use libfuzzer_sys::fuzz_target;

/// Records inserted into the captured indexes.
const RECORDS: u64 = 600;

/// The rectangle of record `id` (deterministic, spread over the unit square).
fn rect(id: u64) -> Rect {
    let x = ((id * 7919) % 1000) as f64 / 1000.0;
    let y = ((id * 104_729) % 1000) as f64 / 1000.0;
    Rect::new(x, y, x + 0.01, y + 0.01).expect("a valid rectangle")
}

/// The files of an index of `store` captured mid-run, by name.
fn capture(store: StoreKind) -> HashMap<String, Vec<u8>> {
    let dir = geoflash_fuzz::scratch_dir().join(format!("template-{store:?}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = IndexOptions {
        page_size: 1024,
        device: "file?direct=false".parse().expect("a device spec"),
        ..IndexOptions::default()
    };
    opts.store = StoreSpec::of_kind(store, 16 * 1024);
    let mut index = Index::create(&dir, &opts).expect("template index");
    for id in 0..RECORDS {
        index.insert(id, rect(id)).expect("template insert");
        if id == RECORDS / 2 {
            index.checkpoint().expect("template checkpoint");
        }
    }
    let mut files = HashMap::new();
    for entry in std::fs::read_dir(&dir).expect("template directory") {
        let entry = entry.expect("template entry");
        if entry.file_type().expect("file type").is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(entry.path()).expect("template file"));
        }
    }
    // The captured copy is the crash image; closing the index afterwards
    // changes only the template directory.
    drop(index);
    files
}

/// The captured eFIND and FAST indexes.
fn templates() -> &'static [HashMap<String, Vec<u8>>; 2] {
    static T: OnceLock<[HashMap<String, Vec<u8>>; 2]> = OnceLock::new();
    T.get_or_init(|| [capture(StoreKind::Efind), capture(StoreKind::Fast)])
}

/// Writes `files` into a fresh directory `dir`.
fn restore(dir: &Path, files: &HashMap<String, Vec<u8>>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("replay directory");
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).expect("replay file");
    }
}

/// Whether `e` is a node read refused because the node carries an LSN the
/// recovered log cannot have reached (`geoflash::store::log::LsnHorizon`):
/// the log lost durable records, which a node page not named by the
/// surviving records shows only when it is read. A clean error, not a
/// broken tree.
fn refused_by_horizon(e: &geoflash::Error) -> bool {
    matches!(e, geoflash::Error::Corrupt { .. })
        && e.to_string().contains("newer than the recovered log's end")
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, mut patches)) = data.split_first() else {
        return;
    };
    let mut files = templates()[usize::from(ctl & 1)].clone();
    let log = files.get_mut(LOG_FILE).expect("a logged store has log.dat");
    if log.is_empty() {
        return;
    }
    while patches.len() >= 5 {
        let offset = u32::from_le_bytes([patches[0], patches[1], patches[2], patches[3]]) as usize;
        let len = usize::from(patches[4]).min(patches.len() - 5);
        for (i, &b) in patches[5..5 + len].iter().enumerate() {
            let at = (offset + i) % log.len();
            log[at] = b;
        }
        patches = &patches[5 + len..];
    }
    let dir = geoflash_fuzz::scratch_dir().join("replay");
    restore(&dir, &files);
    let Ok(index) = Index::open(&dir, Access::Write) else {
        return;
    };
    if let Err(e) = index.verify() {
        if refused_by_horizon(&e) {
            return;
        }
        panic!("restart over a damaged log gave a broken tree: {e}");
    }
    let all = Rect::new(-1.0, -1.0, 2.0, 2.0).expect("a valid window");
    let found = match index.query(all, Predicate::Intersects) {
        Ok(found) => found,
        Err(e) if refused_by_horizon(&e) => return,
        Err(e) => panic!("a query on a recovered index failed: {e}"),
    };
    for hit in &found.hits {
        assert!(hit.id < RECORDS, "recovered a record {} never inserted", hit.id);
        assert_eq!(hit.rect, rect(hit.id), "record {} recovered with another rectangle", hit.id);
    }
    assert_eq!(found.hits.len() as u64, index.len(), "len disagrees with a full query");
    drop(index);
});
