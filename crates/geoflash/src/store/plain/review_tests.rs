//! Review of the plain store (wrong answers and bad input): a header page
//! or free-list chain page whose fields hold any value under a valid
//! checksum (a bug elsewhere, a tool, a crafted file) opens with an error
//! or a tree that answers and checks, never a panic.
use super::*;
use crate::geom::Rect;
use crate::index::{IndexKind, Predicate, RTree, TreeParams};
use crate::storage::mem::MemDevice;

const PS: usize = 512;

fn params() -> TreeParams {
    TreeParams::new(IndexKind::RStar, 6)
}

fn config() -> PlainConfig {
    PlainConfig {
        buffer_bytes: 2000,
        ..PlainConfig::default()
    }
}

/// A checkpointed tree whose free list is long enough to chain.
fn built() -> MemDevice {
    let dev = Arc::new(MemDevice::new(PS, 4000).unwrap());
    let store = PlainStore::create(dev.clone(), config()).unwrap();
    let mut t = RTree::create(store, params()).unwrap();
    let rect = |i: u64| {
        let (x, y) = ((i * 37 % 300) as f64, (i * 91 % 300) as f64);
        Rect::new(x, y, x + 1.0, y + 1.0).unwrap()
    };
    for i in 0..1500 {
        t.insert(i, rect(i)).unwrap();
    }
    for i in (0..1500).filter(|i| i % 5 != 0) {
        t.delete(i, rect(i)).unwrap();
    }
    t.store_mut().checkpoint().unwrap();
    drop(t);
    match Arc::try_unwrap(dev) {
        Ok(d) => d,
        Err(_) => panic!("the device is still held"),
    }
}

/// Opens the store on `dev` and uses it: check, a query, an insert, a
/// checkpoint. Any error is fine.
fn exercise(dev: MemDevice) -> crate::Result<()> {
    let store = PlainStore::open(Arc::new(dev), config())?;
    let mut t = RTree::open(store, params())?;
    t.check()?;
    let all = Rect::new(-1e9, -1e9, 1e9, 1e9)?;
    t.query(all, Predicate::Intersects)?;
    t.insert(1_000_000, Rect::new(1.0, 1.0, 2.0, 2.0)?)?;
    t.store_mut().checkpoint()
}

/// Every 4-byte range of the header page's body and of the first chain
/// page, set to 0, 1, 2^31 and 2^32 - 1 with the checksum recomputed:
/// an error or a working tree, never a panic.
#[test]
fn header_and_chain_fields_of_any_value_under_a_valid_checksum_never_panic() {
    let base = built();
    let mut page0 = vec![0u8; PS];
    base.read(0, &mut page0).unwrap();
    let hdr = super::super::header::Header::read(&FORMAT, &base).unwrap();
    // The first chain page: the last id of the free list (see `Header::write`).
    let chain = *hdr.free.iter().max().expect("a free list");
    let mut targets = vec![0u64];
    let mut chain_page = vec![0u8; PS];
    base.read(chain, &mut chain_page).unwrap();
    if page::decode_raw(&chain_page, Some(chain)).is_ok_and(|(h, _)| h.kind == page::PageKind::Free)
    {
        targets.push(chain);
    }
    let mut cases = 0;
    for &target in &targets {
        let mut original = vec![0u8; PS];
        base.read(target, &mut original).unwrap();
        for at in (24..PS - 4).step_by(2) {
            for value in [0u32, 1, 1 << 31, u32::MAX] {
                let mut bytes = original.clone();
                bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
                if bytes == original || page::update_checksum(&mut bytes).is_err() {
                    continue;
                }
                let dev = base.copied();
                dev.write(target, &bytes).unwrap();
                cases += 1;
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(dev)));
                assert!(
                    outcome.is_ok(),
                    "page {target}, bytes {at}..{} set to {value:#x}: a panic",
                    at + 4
                );
            }
        }
    }
    println!("plain header review: {cases} cases over pages {targets:?}");
}
