//! A second review of the rollback journal: its capacity, what an open
//! reads of it, and bad input. Each test whose comment begins "Defect"
//! failed on the code before its fix.
use std::sync::Arc;

use super::tests::{page, read, write_open, PS};
use super::*;
use crate::storage::file::{FileDevice, FileDeviceOptions, IoEngine};
use crate::storage::mem::MemDevice;
use crate::storage::{DeviceExt, PageDevice, PageId};

/// A memory device of `pages` pages.
fn memory(pages: u64) -> Arc<dyn PageDevice> {
    Arc::new(MemDevice::new(PS, pages).unwrap())
}

/// A generation in which every page of a full device of `pages` pages is
/// rewritten, each page in a write of its own, then a crash: the reopened
/// device must read as at the commit. The error of the first step that
/// failed, if any.
fn rewrite_everything_then_crash(pages: u64, journal_pages: u64) -> crate::Result<()> {
    let nodes = memory(pages);
    let journal = memory(journal_pages);
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open())?;
    for p in 0..pages {
        dev.write(p, &page(1))?;
    }
    dev.commit()?;
    for p in 0..pages {
        dev.write(p, &page(2))?;
    }
    dev.sync()?;
    drop(dev); // a crash: no commit
    let (dev, r) = JournaledDevice::open(nodes, journal, write_open())?;
    assert_eq!(r.pages_restored, pages);
    for p in 0..pages {
        assert_eq!(read(&dev, p), page(1), "page {p}");
    }
    Ok(())
}

/// Defect (`index_dir::journal::open_journal`): `journal.dat` had the file
/// device's default capacity (16 GiB) whatever the capacity of the device
/// it protects (`file:PATH?capacity=` can be larger). A generation needs
/// up to one before-image per page of the device and a batch (a header
/// page and its copy) per image when each page is written alone, after the
/// two header slots: a journal as large as the device, or sized for full
/// batches only, runs out of pages when every page of a full device is
/// rewritten between two commits, and then refuses every later write. A
/// journal of [`journal_capacity`] pages holds that generation, and a crash
/// rolls all of it back.
#[test]
fn a_journal_of_journal_capacity_holds_a_full_device_rewritten_page_by_page() {
    for pages in [1u64, 64, 300] {
        let capacity = journal_capacity(pages, PS);
        rewrite_everything_then_crash(pages, capacity)
            .unwrap_or_else(|e| panic!("{pages} pages, a journal of {capacity}: {e}"));
        let full_batches = 2 + pages + 2 * pages.div_ceil(JournaledDevice::per_batch(PS) as u64);
        for smaller in [pages, full_batches, capacity - 1]
            .into_iter()
            .filter(|&s| s < capacity)
        {
            let e = rewrite_everything_then_crash(pages, smaller).unwrap_err();
            assert!(
                matches!(e, crate::Error::PageOutOfRange { .. }),
                "{pages} pages, a journal of {smaller}: {e}"
            );
        }
    }
    // The largest devices: capped at the largest file offset.
    assert_eq!(
        journal_capacity(u64::MAX / 2, PS),
        i64::MAX as u64 / PS as u64
    );
}

/// The file of a journal in `dir` (buffered, psync), for a device of
/// `pages` pages.
fn journal_file(dir: &std::path::Path, pages: u64, read_only: bool) -> Arc<FileDevice> {
    let opts = FileDeviceOptions {
        direct: false,
        engine: IoEngine::Psync,
        capacity_pages: journal_capacity(pages, PS),
        read_only,
    };
    Arc::new(FileDevice::open(&dir.join("journal.dat"), PS, opts).unwrap())
}

/// Defect: every open read the journal from the end of its generation's
/// batches to the end of its file one page at a time, and a commit only
/// trimmed the images it voided (holes), leaving the file as long as the
/// largest generation had made it: after a large change every later open,
/// read-only ones too, read all of it page by page. A commit now cuts the
/// file back to its header slots, and the pages after the batches are read
/// many at a time (a file left long, by a build before this or a failed
/// cut, is still read, in a few reads).
#[test]
fn a_commit_cuts_the_journal_back_and_an_open_reads_what_is_left_in_few_reads() {
    const PAGES: u64 = 2000;
    let tmp = tempfile::tempdir().unwrap();
    let nodes = memory(PAGES);
    let journal = journal_file(tmp.path(), PAGES, false);
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..PAGES {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap();
    // Full batches (40 images of 512-byte pages), one journal sync each.
    let ids: Vec<PageId> = (0..PAGES).collect();
    for chunk in ids.chunks(40) {
        dev.write_batch(chunk, &page(2).repeat(chunk.len()))
            .unwrap();
    }
    let long = std::fs::metadata(tmp.path().join("journal.dat"))
        .unwrap()
        .len();
    assert_eq!(long, (2 + PAGES + 2 * PAGES / 40) * PS as u64);
    dev.commit().unwrap();
    let len = std::fs::metadata(tmp.path().join("journal.dat"))
        .unwrap()
        .len();
    assert_eq!(len, 2 * PS as u64, "the journal's file after the commit");
    // A later generation (a batch of two images), then a crash: its images
    // are read back whole.
    dev.write_batch(&[5, 9], &[page(3), page(3)].concat())
        .unwrap();
    drop(dev);
    drop(journal);

    // The file as a large change left it before (holes after the batches):
    // a reader reads it in a few batches, not one read a page.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(tmp.path().join("journal.dat"))
        .unwrap();
    file.set_len(long).unwrap();
    drop(file);
    let journal = journal_file(tmp.path(), PAGES, true);
    let (ro, r) = JournaledDevice::open(nodes.clone(), journal.clone(), JournalOpen::Read).unwrap();
    assert_eq!(r.pages_restored, 2);
    assert_eq!(
        (read(&ro, 5), read(&ro, 9), read(&ro, 6)),
        (page(2), page(2), page(2))
    );
    let io = journal.stats().io;
    assert!(
        io.pages_read >= long / PS as u64,
        "every page of the file is checked: {io:?}"
    );
    assert!(
        io.read_batches <= 8,
        "{} reads of {} pages",
        io.read_batches,
        io.pages_read
    );
}

/// The check after the batches is not weakened by reading many pages at
/// once: a batch of the current generation anywhere after its last one
/// (here in the second read of the check, and at its last page) is
/// refused, naming the page, for readers and the writer.
#[test]
fn a_batch_after_the_end_is_refused_wherever_the_check_reads_it() {
    let per_read = (SCAN_BYTES / PS) as u64;
    let journal_pages = journal_capacity(1000, PS);
    for at in [20, per_read + 7, journal_pages - 1] {
        for how in [JournalOpen::Read, write_open()] {
            let nodes = memory(1000);
            let journal = memory(journal_pages);
            let (dev, _) =
                JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
            dev.write(0, &page(1)).unwrap();
            dev.commit().unwrap();
            dev.write(0, &page(2)).unwrap(); // journal pages 2, 3, 4
            drop(dev);
            // A copy of its batch header far after it.
            journal.write(at, &read(journal.as_ref(), 2)).unwrap();
            match JournaledDevice::open(nodes, journal, how) {
                Ok(_) => panic!("a batch at journal page {at} after the end: opened ({how:?})"),
                Err(e) => assert!(
                    e.to_string().contains(&format!("page {at} holds a batch")),
                    "{e}"
                ),
            }
        }
    }
}

/// Defect: any error inside a change made the journal refuse every later
/// write and commit, bad input too: a page beyond the device's capacity, a
/// buffer of another length (after the journal had saved the page's image
/// for it). Such a request is refused before anything is written and
/// leaves the journal working; an index hands its journaled device to any
/// caller (`Index::device`), whose bad request failed the index's
/// checkpoints for good.
#[test]
fn bad_input_is_refused_before_anything_is_written_and_fails_nothing() {
    let nodes = memory(16);
    let journal = memory(journal_capacity(16, PS));
    let (dev, _) = JournaledDevice::open(nodes.clone(), journal.clone(), write_open()).unwrap();
    for p in 0..4u64 {
        dev.write(p, &page(1)).unwrap();
    }
    dev.commit().unwrap();
    let written = journal.stats().io.pages_written;
    let short = vec![7u8; PS - 1];
    let refused = [
        dev.write(16, &page(2)),
        dev.write_batch(&[1, 16], &[page(2), page(2)].concat()),
        dev.write(0, &short),
        dev.write_batch(&[1, 2], &page(2)),
        dev.trim(&[3, 99]),
    ];
    for (i, r) in refused.into_iter().enumerate() {
        match r {
            Err(e) => assert!(e.is_user_error(), "request {i}: {e}"),
            Ok(()) => panic!("request {i} was accepted"),
        }
    }
    assert_eq!(
        journal.stats().io.pages_written,
        written,
        "nothing journaled"
    );
    assert!(
        (0..4).all(|p| read(nodes.as_ref(), p) == page(1)),
        "nothing written"
    );
    dev.write(0, &page(3)).unwrap();
    dev.commit().unwrap();
    dev.write(1, &page(4)).unwrap();
    drop(dev); // a crash after the commit: page 1 rolls back, page 0 stays
    let (dev, r) = JournaledDevice::open(nodes, journal, write_open()).unwrap();
    assert_eq!(r.pages_restored, 1);
    assert_eq!((read(&dev, 0), read(&dev, 1)), (page(3), page(1)));
}
