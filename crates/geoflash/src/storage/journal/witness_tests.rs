//! The witnesses of a commit: a journal replaced by an older copy of itself
//! (a backup restored, a copy from an earlier generation) is refused, never
//! rolled back by; a damaged page is left to the structure; the witnesses
//! are the last pages written, and older headers have none. Each test whose
//! comment begins "Defect" failed on the code before its fix.
use std::sync::Arc;

use super::tests::{page, read, write_open, PS};
use super::*;
use crate::storage::mem::MemDevice;
use crate::storage::PageDevice;

/// Pages of the node device and of the journal in these tests.
const PAGES: u64 = 64;

fn memory() -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(PS, PAGES).unwrap())
}

/// Every page of `dev`.
fn snapshot(dev: &dyn PageDevice) -> Vec<u8> {
    let ids: Vec<PageId> = (0..dev.capacity()).collect();
    let mut buf = vec![0u8; ids.len() * PS];
    dev.read_batch(&ids, &mut buf).unwrap();
    buf
}

/// `dev` made to hold `bytes` (a [`snapshot`]) again.
fn restore(dev: &dyn PageDevice, bytes: &[u8]) {
    let ids: Vec<PageId> = (0..dev.capacity()).collect();
    dev.write_batch(&ids, bytes).unwrap();
}

/// The error of opening `journal` over `nodes` (for reading, then for
/// writing), which must refuse it as not the pages' journal and write
/// nothing to the pages.
fn refused(nodes: &Arc<dyn PageDevice>, journal: &Arc<dyn PageDevice>, what: &str) {
    let before = snapshot(nodes.as_ref());
    for how in [JournalOpen::Read, write_open()] {
        match JournaledDevice::open(nodes.clone(), journal.clone(), how) {
            Ok((dev, r)) => panic!(
                "{what} ({how:?}): opened as commit {} ({} pages rolled back)",
                dev.generation(),
                r.pages_restored
            ),
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("not the one of the pages' last commit"),
                    "{what}: {msg}"
                );
            }
        }
        assert!(
            snapshot(nodes.as_ref()) == before,
            "{what} ({how:?}): the pages were written"
        );
    }
}

/// Defect: a journal replaced whole by an older copy of itself opened as
/// if it were the pages' journal. A copy taken after a commit (no
/// batches) opened at its older generation, horizon and client mark (the
/// pages above its horizon then changed without before-images); a copy
/// taken mid-generation (a crash's batches) wrote its older images over
/// pages later commits had changed, a mix of generations: here pages 0..4
/// back at commit 2 and pages 4..8 at commit 4. Each commit now records
/// its witnesses (the last pages written, with their CRC-32C) in its
/// header, and an open refuses a journal whose witnesses the pages, rolled
/// back, do not hold, before writing anything.
#[test]
fn a_journal_replaced_by_an_older_copy_is_refused_not_rolled_back() {
    let nodes = memory();
    let journal = memory();
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..8u64 {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap(); // generation 2, horizon 8
    let clean = snapshot(journal.as_ref());
    for p in 0..4u64 {
        dev.write(p, &page(2)).unwrap();
    }
    dev.sync().unwrap();
    let mid_generation = snapshot(journal.as_ref()); // images of pages 0..4
    dev.commit().unwrap(); // generation 3
    for p in 4..8u64 {
        dev.write(p, &page(3)).unwrap();
    }
    dev.commit().unwrap(); // generation 4
    drop(dev);
    let current = snapshot(journal.as_ref());
    for (what, copy) in [
        ("a copy after commit 2", &clean),
        ("a copy mid-generation 2", &mid_generation),
    ] {
        restore(journal.as_ref(), copy);
        refused(&nodes, &journal, what);
    }
    // The pages' own journal opens, for reading and writing, as commit 4.
    restore(journal.as_ref(), &current);
    let (ro, r) = JournaledDevice::open(nodes.clone(), journal.clone(), JournalOpen::Read).unwrap();
    assert_eq!((ro.generation(), r.pages_restored), (4, 0));
    drop(ro);
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..8u64 {
        assert_eq!(read(&dev, p), page(if p < 4 { 2 } else { 3 }), "page {p}");
    }
    // Commits that write nothing keep the witnesses, and so does the
    // rollback of a crash: a copy from before them is still refused.
    dev.commit().unwrap();
    dev.write(1, &page(4)).unwrap();
    dev.sync().unwrap();
    drop(dev); // a crash: the next open rolls page 1 back and commits
    let (dev, r) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    assert_eq!(r.pages_restored, 1);
    assert_eq!(read(&dev, 1), page(2));
    drop(dev);
    let now = snapshot(journal.as_ref());
    restore(journal.as_ref(), &current);
    let (ro, _) = JournaledDevice::open(nodes.clone(), journal.clone(), JournalOpen::Read).unwrap();
    assert_eq!(
        ro.generation(),
        4,
        "the same pages: commit 4's witnesses hold"
    );
    drop(ro);
    restore(journal.as_ref(), &clean);
    refused(
        &nodes,
        &journal,
        "a copy after commit 2, after later rollbacks",
    );
    restore(journal.as_ref(), &now);
    assert!(JournaledDevice::open(nodes, journal, JournalOpen::Read).is_ok());
}

/// A witness page that is damaged (its format's own check fails) is the
/// structure's to report where it reads it, not a journal older than the
/// pages: [`JournaledDevice::open_checked`] passes over it and checks the
/// others; [`JournaledDevice::open`], for which every page is whole,
/// refuses it.
#[test]
fn a_damaged_witness_page_is_left_to_the_structure() {
    // In these tests a page is damaged when its first byte is 0xdd.
    let intact: PageCheck = |bytes| bytes.first() != Some(&0xdd);
    let nodes = memory();
    let journal = memory();
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..8u64 {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap();
    drop(dev);
    nodes.write(3, &page(0xdd)).unwrap(); // damage, outside the journal
    let (dev, _) =
        JournaledDevice::open_checked(nodes.clone(), journal.clone(), JournalOpen::Read, intact)
            .unwrap();
    assert_eq!(
        read(&dev, 3),
        page(0xdd),
        "the damage stays for the structure to find"
    );
    drop(dev);
    refused(&nodes, &journal, "a damaged page, every page counted whole");
    // Whole but other content on another witness: refused either way.
    nodes.write(5, &page(7)).unwrap();
    let e = JournaledDevice::open_checked(nodes, journal, JournalOpen::Read, intact).unwrap_err();
    assert!(e.to_string().contains("recorded page 5"), "{e}");
}

/// The witnesses are the last [`MAX_WITNESSES`] distinct pages written,
/// each with the CRC-32C of its last write (a page written twice in one
/// batch: the second), oldest first; a trim drops its pages; a header
/// keeps them within its first sector and reads them back; a header of a
/// build before them (none) opens unchecked, and one that lists more than
/// its places is damaged.
#[test]
fn witnesses_are_the_last_pages_written_and_headers_keep_them() {
    let crc = |fill: u8| crc32c::crc32c(&page(fill));
    let mut w = Vec::new();
    let ids: Vec<PageId> = (0..40).collect();
    let data: Vec<u8> = ids.iter().flat_map(|&p| page(p as u8)).collect();
    note_witnesses(&mut w, &ids, Some(&data), PS);
    let want: Vec<(PageId, u32)> = (8..40).map(|p| (p, crc(p as u8))).collect();
    assert_eq!(w, want);
    // Page 9 twice in one batch, then page 10 trimmed.
    let data = [page(0xa0), page(0xa1)].concat();
    note_witnesses(&mut w, &[9, 9], Some(&data), PS);
    note_witnesses(&mut w, &[10], None, PS);
    assert_eq!(w.len(), MAX_WITNESSES - 1);
    assert_eq!(w.last(), Some(&(9, crc(0xa1))));
    assert!(w.iter().all(|&(p, _)| p != 10));
    assert_eq!(w.iter().filter(|&&(p, _)| p == 9).count(), 1);
    // A write of more distinct pages than the witnesses hold replaces them all.
    let ids: Vec<PageId> = (100..100 + MAX_WITNESSES as u64 + 5).collect();
    let data: Vec<u8> = ids.iter().flat_map(|_| page(5)).collect();
    note_witnesses(&mut w, &ids, Some(&data), PS);
    assert!(w.iter().all(|&(p, c)| p >= 105 && c == crc(5)) && w.len() == MAX_WITNESSES);

    let head = Head {
        generation: 6,
        horizon: 9,
        client: 3,
        witnesses: w.clone(),
    };
    let buf = encode_header(&head, 4096);
    assert!(
        buf[HEADER_SECTOR..].iter().all(|&b| b == 0),
        "the header spills past its first sector"
    );
    assert!(matches!(decode_header(&buf, 4096), Ok(Some(h)) if h == head));
    assert_eq!(max_witnesses(PS), MAX_WITNESSES);
    // An older build's header: no witnesses, nothing checked.
    let older = Head {
        witnesses: Vec::new(),
        ..head.clone()
    };
    let buf = encode_header(&older, PS);
    assert!(matches!(decode_header(&buf, PS), Ok(Some(h)) if h.witnesses.is_empty()));
    // More witnesses than places: damage, not a header to trust.
    let mut buf = encode_header(&head, PS);
    put(
        &mut buf,
        WITNESSES_AT,
        &(MAX_WITNESSES as u32 + 1).to_le_bytes(),
    );
    let crc = crc_skipping(&buf, 8);
    put(&mut buf, 8, &crc.to_le_bytes());
    assert!(
        matches!(decode_header(&buf, PS), Err(BadHeader::Damaged(why)) if why.contains("witness"))
    );
}
