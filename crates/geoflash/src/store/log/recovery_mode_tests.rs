//! Tests of [`RecoveryMode`]: damage before the tail is refused by default
//! and, with [`repair_corrupt_tail`], recovered with the loss reported.
use std::sync::Arc;

use super::*;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;
use crate::store::OpId;

const PS: usize = 512;
const LOG_PAGES: u64 = 64;
const INDEX: u128 = 0x0bad_cafe;

fn config() -> LogConfig {
    LogConfig::new(INDEX).with_durability(Durability::Sync)
}

/// A log of six committed operations of 300-byte MOD records (several pages).
fn six_ops() -> Arc<MemDevice> {
    let dev = Arc::new(MemDevice::new(PS, 256).unwrap());
    let mut log = Log::create(dev.clone(), 0, LOG_PAGES, config()).unwrap();
    for op in 1..=6u64 {
        log.append(Record::new(RecordKind::Mod, op, op, vec![op as u8; 300]))
            .unwrap();
        log.commit(op).unwrap();
    }
    dev
}

fn damage(dev: &Arc<MemDevice>, pos: u64) -> PageId {
    let layout = LogReader::open(dev.clone(), 0, LOG_PAGES, INDEX)
        .unwrap()
        .layout();
    let page = layout.region_page(0, pos);
    let mut buf = vec![0u8; PS];
    dev.read(page, &mut buf).unwrap();
    buf[200] ^= 0x40;
    dev.write(page, &buf).unwrap();
    page
}

fn ops(r: &Recovered) -> Vec<OpId> {
    r.committed_ops.clone()
}

#[test]
fn a_damaged_page_before_the_tail_is_refused_by_default_and_dropped_when_tolerated() {
    let dev = six_ops();
    let (_, whole) = Log::open(copy(&dev), 0, LOG_PAGES, config()).unwrap();
    assert_eq!(ops(&whole), vec![1, 2, 3, 4, 5, 6]);
    let page = damage(&dev, 2);
    // AbsoluteConsistency: an error naming the page, nothing written.
    let err = Log::open(dev.clone(), 0, LOG_PAGES, config()).unwrap_err();
    assert!(
        matches!(err, crate::Error::Corrupt { page: Some(p), .. } if p == page),
        "{err}"
    );
    // TolerateCorruptTail: the damaged page ends the log.
    let shared: SharedDevice = dev.clone();
    let r = repair_corrupt_tail(shared.clone(), 0, LOG_PAGES, INDEX).unwrap();
    assert_eq!(r.first_damaged_page, Some(page));
    assert!(r.pages_dropped >= 2, "{r:?}");
    // Repairing again finds nothing more to drop.
    assert_eq!(
        repair_corrupt_tail(shared, 0, LOG_PAGES, INDEX).unwrap(),
        TailRepair::default()
    );
    let (_, rec) = Log::open(dev, 0, LOG_PAGES, config()).unwrap();
    let kept = ops(&rec);
    assert!(!kept.is_empty() && kept.len() < 6, "{kept:?}");
    // A prefix of the operations, each with its record.
    assert_eq!(kept, (1..=kept.len() as u64).collect::<Vec<_>>());
    let mods = rec
        .records
        .all()
        .iter()
        .filter(|r| r.kind == RecordKind::Mod)
        .count();
    assert_eq!(mods, kept.len());
}

#[test]
fn a_record_damaged_inside_valid_pages_is_dropped_with_its_page_when_tolerated() {
    let dev = six_ops();
    // The last page holding records: damage inside its data, then fix its
    // page checksum so that only the record's own checksum fails.
    let reader = LogReader::open(dev.clone(), 0, LOG_PAGES, INDEX).unwrap();
    let layout = reader.layout();
    let last = reader.pages() - 1;
    let page = layout.region_page(0, last);
    let mut buf = vec![0u8; PS];
    dev.read(page, &mut buf).unwrap();
    let record::PageCheck::Valid(h, data) = record::check_page(&buf) else {
        panic!("page {page} is not a valid log page");
    };
    let mut data = data.to_vec();
    data[20] ^= 0x01;
    let mut sealed = vec![0u8; PS];
    record::encode_page(&h, &data, &mut sealed).unwrap();
    dev.write(page, &sealed).unwrap();
    assert!(Log::open(dev.clone(), 0, LOG_PAGES, config()).is_err());
    let shared: SharedDevice = dev.clone();
    let r = repair_corrupt_tail(shared, 0, LOG_PAGES, INDEX).unwrap();
    assert_eq!(r.pages_dropped, 1, "{r:?}");
    let (_, rec) = Log::open(dev, 0, LOG_PAGES, config()).unwrap();
    assert!(ops(&rec).len() < 6);
}

#[test]
fn a_page_whose_magic_is_damaged_does_not_hide_the_durable_pages_after_it() {
    // The log_replay fuzz finding: one page fails its checksum and the next
    // has lost its magic; a later page proves both durable.
    let dev = six_ops();
    let reader = LogReader::open(dev.clone(), 0, LOG_PAGES, INDEX).unwrap();
    let layout = reader.layout();
    assert!(reader.pages() >= 5, "{} pages", reader.pages());
    let page = damage(&dev, 1);
    let next = layout.region_page(0, 2);
    let mut buf = vec![0u8; PS];
    dev.read(next, &mut buf).unwrap();
    buf[0] ^= 0xff;
    dev.write(next, &buf).unwrap();
    assert_eq!(record::check_page(&buf), record::PageCheck::Foreign);
    let err = Log::open(dev.clone(), 0, LOG_PAGES, config()).unwrap_err();
    assert!(
        matches!(err, crate::Error::Corrupt { page: Some(p), .. } if p == page),
        "{err}"
    );
    // A page that names another epoch still ends the look-ahead (it was
    // not written in this one, as far as the log can tell): the same
    // damage with that page's epoch changed opens as a torn tail.
    buf[16] ^= 0x01;
    dev.write(next, &buf).unwrap();
    let (_, rec) = Log::open(dev, 0, LOG_PAGES, config()).unwrap();
    assert_eq!(ops(&rec), vec![1]);
}

#[test]
fn an_undamaged_log_is_left_alone() {
    let dev = six_ops();
    let writes = dev.stats().io.pages_written;
    let shared: SharedDevice = dev.clone();
    let r = repair_corrupt_tail(shared, 0, LOG_PAGES, INDEX).unwrap();
    assert_eq!(r, TailRepair::default());
    assert_eq!(dev.stats().io.pages_written, writes);
}

fn copy(src: &MemDevice) -> Arc<MemDevice> {
    let dst = MemDevice::new(PS, src.capacity()).unwrap();
    let mut buf = vec![0u8; PS];
    for p in 0..LOG_PAGES {
        src.read(p, &mut buf).unwrap();
        dst.write(p, &buf).unwrap();
    }
    Arc::new(dst)
}
