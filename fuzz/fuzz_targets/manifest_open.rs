//! Opening an index whose `manifest.json` is arbitrary bytes: a small plain
//! R*-tree index is built once per process; each input replaces its manifest
//! and opens it. Opening must fail with an error or give an index that
//! answers a query. Nothing may panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use geoflash::geom::Rect;
use geoflash::index::query::Predicate;
use geoflash::index_dir::PAGES_FILE;
use geoflash::manifest::{Access, MANIFEST_FILE};
use geoflash::{Index, IndexOptions};
use libfuzzer_sys::fuzz_target;

/// The template index's pages (built once).
fn pages() -> &'static [u8] {
    static P: OnceLock<Vec<u8>> = OnceLock::new();
    P.get_or_init(|| {
        let dir = geoflash_fuzz::scratch_dir().join("manifest-template");
        let _ = std::fs::remove_dir_all(&dir);
        let opts = IndexOptions {
            page_size: 1024,
            device: "file?direct=false".parse().expect("a device spec"),
            ..IndexOptions::default()
        };
        let mut index = Index::create(&dir, &opts).expect("template index");
        for id in 0..200u64 {
            let x = (id % 20) as f64;
            let y = (id / 20) as f64;
            index
                .insert(id, Rect::new(x, y, x + 0.5, y + 0.5).expect("a valid rectangle"))
                .expect("template insert");
        }
        index.close().expect("template close");
        std::fs::read(dir.join(PAGES_FILE)).expect("template pages")
    })
}

fuzz_target!(|data: &[u8]| {
    let pages = pages();
    let dir: PathBuf = geoflash_fuzz::scratch_dir().join("manifest-case");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("case directory");
    std::fs::write(dir.join(PAGES_FILE), pages).expect("case pages");
    std::fs::write(dir.join(MANIFEST_FILE), data).expect("case manifest");
    if let Ok(index) = Index::open(&dir, Access::Read) {
        let all = Rect::new(-1.0, -1.0, 30.0, 30.0).expect("a valid window");
        let _ = index.query(all, Predicate::Intersects);
    }
});
