//! A rollback journal of before-images: what makes a device written in
//! place crash-safe at its commit points (issue 44, item 2).
//!
//! The stores without a log (the plain store, and through it the FOR-tree
//! and the xBR+-tree; the grid files) write pages in place: a buffer
//! evicts dirty nodes between operations and a checkpoint writes the rest
//! and the header. A crash between two checkpoints left a mix of old and
//! new pages on the device, which could be a broken tree or another set of
//! ids. [`JournaledDevice`] wraps the device of such an index and keeps
//! the device readable as it was at the last [`JournaledDevice::commit`],
//! as SQLite's rollback journal does:
//!
//! - **Before a page is overwritten** for the first time since the last
//!   commit, and only when it held committed content (its id is below the
//!   *horizon*: one past the highest page ever written at the last commit),
//!   its current content (the *before-image*) is appended to the journal
//!   and the journal is synced. Pages above the horizon held nothing
//!   committed and are written directly, so a build into a new index
//!   journals nothing but its header page. Trims are treated as writes.
//! - **A commit** (after the store's checkpoint has written and synced
//!   everything) syncs the device, then writes a new journal header with
//!   the next *generation* and the new horizon, and syncs the journal:
//!   every before-image of the older generation is void from then on, and
//!   the journal is cut back to its header slots
//!   ([`PageDevice::trim_tail`]: a file shortened), so that opens do not
//!   read what a large change used.
//! - **Opening** reads the journal header and the before-images of its
//!   generation that are whole (each image carries a CRC-32C). For
//!   writing, they are written back, the device is synced, and a commit
//!   voids them: the device reads as at the last commit. A read-only open
//!   writes nothing and serves those pages from the images instead, so a
//!   reader never needs a writer's recovery to read the last commit.
//!   First, before anything is written back, the commit's *witnesses*
//!   are checked: each header records the last pages written before its
//!   commit (at most 32, kept across commits that write nothing) with
//!   the CRC-32C of what they held, and each must read so once rolled
//!   back (its first image of the generation, else the device's page).
//!   The journal keeps every page as at its last commit,
//!   so a whole witness page that reads otherwise was changed under a
//!   newer commit this journal does not know: it was replaced by an older
//!   copy of itself (a backup, a copy from an earlier generation), which
//!   would otherwise open at its older horizon and client mark, or write
//!   its older images over newer pages. That is an error naming the
//!   journal; a witness page that is damaged (its format's own check,
//!   [`JournaledDevice::open_checked`]) is left to the structure, which
//!   reports it where it reads it. Not told apart: a copy older only by
//!   commits that left each of its witness pages as it was (the plain
//!   store ends every checkpoint that follows a change by writing its
//!   header page, whose LSN changes with every operation, and a grid file
//!   by writing its metadata and page 0: witnesses of every such commit),
//!   and a copy taken within a checkpoint after the before-images of its
//!   witnesses were synced (it restores them).
//! - **A batch cut by a crash or damaged.** The device writes a batch
//!   protects wait for the journal's sync, so a batch a crash cut left its
//!   pages as they were committed: an image that fails its CRC is harmless
//!   when the device's page still has the CRC the batch header recorded
//!   for it (the committed content), and damage when it has not (the page
//!   was written after the batch was synced, and its committed content is
//!   lost): an error naming the journal, never a half rolled-back device.
//!   The batch header is written twice (its page and a copy after it) in
//!   the same write, so damage to one of them still names the pages of
//!   the batch; only both unreadable end the journal (a crash before the
//!   batch's sync).
//!
//! # Layout of the journal (pages of the device's page size)
//!
//! | page | content |
//! |---|---|
//! | 0, 1 | header slots, written alternately (slot = generation % 2) |
//! | 2 … | batches: a batch header page, then its images |
//!
//! Header slot: magic `GFJRNL01`, CRC-32C (bytes 8..12, taken as zero),
//! version (1), generation, horizon, page size, the *client mark*
//! (bytes 40..48: the generation of the index's object heap at that
//! commit, [`JournaledDevice::set_client_mark`]; zero in journals written
//! before it, which read it as zero), and the *witnesses* (bytes 48..52
//! their count, from byte 56 a page id `u64` and a CRC-32C `u32` each, all
//! within the slot's first 512 bytes; a count of zero in journals written
//! before them, which are not checked; builds before them read past
//! them). The valid slot of the higher generation wins; a torn header
//! write leaves the other slot, the previous commit, whose images are
//! intact (new batches are written only after the new header is synced). The slots hold nothing, generation 1
//! alone (in slot 1), or two consecutive generations, each in its slot; any
//! other pair is damage, zeros beside a generation of 2 or more too (they
//! may have been the newer commit: a crash never zeroes a written slot).
//! Batch header: magic `GFJ2`, CRC-32C,
//! generation, count, then `count` pairs (page id `u64`, image CRC-32C
//! `u32`); the next page holds the same header, then come the `count`
//! images. (Batches of magic `GFJE`, written before the copy existed, have
//! no copy: their images follow the header; they are still read.)
//!
//! Cost: a page changed since the last commit and already committed is
//! read once and written once more to the journal, with one journal sync
//! per batch of such pages; a commit adds one page write and two syncs.
//! The witnesses cost a CRC-32C of at most 32 pages a write and, at an
//! open, one read of their pages: no I/O on commits.
//! Size: a generation holds at most one image per page of the device and
//! one batch per image, so a journal of [`journal_capacity`] pages holds
//! any generation.
//!
//! Not detected: a journal cut at a batch boundary (or whose last batches
//! lost both header copies) after a crash. Its only durable record of a
//! generation's batches is the batches themselves, so a lost suffix reads
//! as a crash before it, and the pages those batches protected stay as
//! the crash left them (unless one is a witness). Telling them apart needs
//! a record of the batches outside them (a header write per batch: one
//! more page write and journal sync per batch, or, sharing the batch's
//! sync, a count one batch behind, so the last batch's loss stays silent)
//! or pages stamped after the commit and read whole at every open (the
//! loss leaves no other sign of when to look). See `docs/reliability.md`.
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::{DeviceExt, DeviceGeometry, DeviceStats, PageDevice, PageId};
use crate::{Error, Result};

const HEADER_MAGIC: [u8; 8] = *b"GFJRNL01";
/// Batches whose header page is followed by a copy of it.
const BATCH_MAGIC: [u8; 4] = *b"GFJ2";
/// Batches of the first format (no copy of the header).
const BATCH_MAGIC_V1: [u8; 4] = *b"GFJE";
const VERSION: u32 = 1;
/// First journal page of the batches (after the two header slots).
const FIRST_BATCH_PAGE: u64 = 2;
/// Bytes of a batch header before its (page, crc) pairs.
const BATCH_HEAD: usize = 24;
/// Bytes of one (page, crc) pair.
const PAIR: usize = 12;
/// Bytes read at once when the pages after a generation's batches are
/// checked ([`JournaledDevice::check_nothing_after`]).
const SCAN_BYTES: usize = 1 << 20;
/// Offset in a header slot of the number of witnesses (`u32`).
const WITNESSES_AT: usize = 48;
/// Offset in a header slot of the witnesses: (page id `u64`, CRC-32C `u32`)
/// each.
const WITNESS_PAIRS_AT: usize = 56;
/// Witnesses a commit records at most: the last pages written.
const MAX_WITNESSES: usize = 32;
/// Bytes of a header slot a write never tears (its first sector): the
/// header, witnesses included, lies within them.
const HEADER_SECTOR: usize = 512;

/// What opening a journal did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rollback {
    /// Pages restored to their content at the last commit (written back
    /// when opened for writing; served from the journal when read-only).
    pub pages_restored: u64,
}

/// How a journal is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalOpen {
    /// For writing: roll back what the last session left uncommitted.
    Write {
        /// The horizon of a journal created now (a new index: 0; an index
        /// written before journals existed: its pages in use).
        fresh_horizon: u64,
    },
    /// Read-only: nothing is written; uncommitted pages are read from the
    /// journal's images.
    Read,
}

/// Whether a page read from the device is whole in the format of the
/// structure that wrote it (its own checksum holds): a witness page that
/// reads other content than the last commit recorded is then the sign of
/// a journal older than the pages, and damage to the page otherwise.
pub type PageCheck = fn(&[u8]) -> bool;

/// Before-images read from a journal: (page id, its committed content).
type Images = Vec<(PageId, Vec<u8>)>;

/// A batch header: the pages whose before-images the batch holds, with
/// their CRC-32Cs.
struct Batch {
    /// Journal pages before the images: the header and its copy (2), or
    /// the header alone (1: the first format).
    head_pages: u64,
    /// (page id, CRC-32C of its before-image), in journal order.
    pairs: Vec<(PageId, u32)>,
}

#[derive(Debug)]
struct State {
    generation: u64,
    /// Pages below it held committed content at the last commit.
    horizon: u64,
    /// The client mark the next commit writes (that of the last commit
    /// until [`JournaledDevice::set_client_mark`]).
    client: u64,
    /// One past the highest page written since (at least the horizon).
    high: u64,
    /// Pages whose before-image this generation holds.
    saved: HashSet<PageId>,
    /// Next journal page of this generation's batches.
    next: u64,
    /// The last pages written (oldest first, each once, at most
    /// [`MAX_WITNESSES`]) with the CRC-32C of what they hold: the
    /// witnesses the next commit records ([`JournaledDevice::check_witnesses`]).
    witnesses: Vec<(PageId, u32)>,
    /// Sticky failure: after an error the journal and the device may
    /// disagree, so nothing more is written.
    failed: Option<String>,
}

/// A device whose in-place writes are undone back to the last commit after
/// a crash. See the [module docs](self).
pub struct JournaledDevice {
    inner: Arc<dyn PageDevice>,
    journal: Arc<dyn PageDevice>,
    page_size: usize,
    /// Read-only opens: the committed content of pages changed since.
    overlay: HashMap<PageId, Vec<u8>>,
    read_only: bool,
    state: Mutex<State>,
}

/// Shows as its description with the journal's and whether it is read-only.
impl std::fmt::Debug for JournaledDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ro = if self.read_only { ", read-only" } else { "" };
        write!(f, "{} with journal {}{ro}", self.describe(), self.journal.describe())
    }
}

fn crc_skipping(buf: &[u8], at: usize) -> u32 {
    let head = buf.get(..at).unwrap_or(buf);
    let tail = buf.get(at + 4..).unwrap_or(&[]);
    let c = crc32c::crc32c(head);
    let c = crc32c::crc32c_append(c, &[0u8; 4]);
    crc32c::crc32c_append(c, tail)
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    buf.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    buf.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// A header slot that does not decode.
enum BadHeader {
    /// Damaged: what is wrong.
    Damaged(String),
    /// Intact, of a format version this build does not read.
    Unsupported(u32),
}

impl From<String> for BadHeader {
    fn from(why: String) -> Self {
        BadHeader::Damaged(why)
    }
}

impl From<&str> for BadHeader {
    fn from(why: &str) -> Self {
        BadHeader::Damaged(why.to_string())
    }
}

/// A decoded header slot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    /// The commit's generation.
    generation: u64,
    /// One past the highest page written at the commit.
    horizon: u64,
    /// The client mark (bytes 40..48).
    client: u64,
    /// The commit's witnesses: pages of the device with the CRC-32C of
    /// their content at the commit (bytes 48.., see [`WITNESSES_AT`];
    /// none in journals written before them).
    witnesses: Vec<(PageId, u32)>,
}

/// The witnesses a header slot of a journal of `page_size`-byte pages
/// holds at most: [`MAX_WITNESSES`], fewer when the page is smaller than
/// the sector the header must lie in.
fn max_witnesses(page_size: usize) -> usize {
    let room = page_size
        .min(HEADER_SECTOR)
        .saturating_sub(WITNESS_PAIRS_AT);
    (room / PAIR).min(MAX_WITNESSES)
}

/// A decoded header slot (`None`: zeros).
fn decode_header(buf: &[u8], page_size: usize) -> std::result::Result<Option<Head>, BadHeader> {
    if buf.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    if buf.get(..8) != Some(&HEADER_MAGIC[..]) {
        return Err("not a journal header (bad magic)".into());
    }
    if u32_at(buf, 8) != crc_skipping(buf, 8) {
        return Err("journal header checksum mismatch".into());
    }
    let version = u32_at(buf, 12);
    if version != VERSION {
        return Err(BadHeader::Unsupported(version));
    }
    if u64_at(buf, 32) != page_size as u64 {
        return Err(format!(
            "journal written for pages of {} bytes, the device has {page_size}",
            u64_at(buf, 32)
        )
        .into());
    }
    let count = u32_at(buf, WITNESSES_AT) as usize;
    if count > max_witnesses(page_size) {
        return Err(format!(
            "the header lists {count} witness pages, more than its {} places",
            max_witnesses(page_size)
        )
        .into());
    }
    let witnesses = (0..count)
        .map(|i| {
            let at = WITNESS_PAIRS_AT + i * PAIR;
            (u64_at(buf, at), u32_at(buf, at + 8))
        })
        .collect();
    Ok(Some(Head {
        generation: u64_at(buf, 16),
        horizon: u64_at(buf, 24),
        client: u64_at(buf, 40),
        witnesses,
    }))
}

/// The newest valid header of `journal`; `None` for a blank journal. A
/// damaged slot is an error: a header slot is written whole within its
/// first sector, so a crash leaves either
/// slot intact, and the other slot, an older commit, must not stand for the
/// newer one (issue 44). See [`check_slots`] for what the two slots
/// together must be.
fn newest_header(journal: &dyn PageDevice) -> Result<Option<Head>> {
    let ps = journal.page_size();
    let mut slots = vec![0u8; 2 * ps];
    journal.read_batch(&[0, 1], &mut slots)?;
    let mut decoded = [None, None];
    let mut problems = Vec::new();
    for ((slot, buf), out) in slots.chunks_exact(ps).enumerate().zip(&mut decoded) {
        match decode_header(buf, ps) {
            Ok(h) => *out = h,
            // Either slot may be the newest: one this build cannot read
            // refuses the journal rather than roll back by the other.
            Err(BadHeader::Unsupported(version)) => {
                return Err(Error::unsupported_version(
                    "journal header",
                    version,
                    VERSION,
                    VERSION,
                ))
            }
            Err(BadHeader::Damaged(why)) => problems.push(format!("page {slot}: {why}")),
        }
    }
    if problems.is_empty() {
        let generations = decoded.each_ref().map(|h| h.as_ref().map(|h| h.generation));
        if let Err(why) = check_slots(generations) {
            problems.push(why);
        }
    }
    if !problems.is_empty() {
        return Err(Error::corrupt(
            Some(0),
            format!(
                "damaged journal header ({}); an older commit must not stand for the last one: restore \
                 the index from a backup",
                problems.join("; ")
            ),
        ));
    }
    Ok(decoded.into_iter().flatten().max_by_key(|h| h.generation))
}

/// What the two header slots (the generation of each, or `None` when all
/// zeros) must be, or why they are damaged. The writer puts generation
/// `g` in slot `g % 2`: the first header (generation 1) in slot 1, every
/// commit the next generation in the other slot, over the one before the
/// last. A
/// crash while a slot is written leaves its old content or its new one
/// (the header lies in the slot's first 512-byte sector; the rest of the
/// page is zeros in both), never zeros over a slot written before. So the
/// slots hold nothing (a blank journal), generation 1 alone in slot 1 (the
/// first commit, generation 2, never reached slot 0), or two consecutive
/// generations, each in the slot of its parity. Anything else is damage:
/// a header in the other slot's place, two generations apart, and zeros
/// next to a generation of 2 or more, which may have been the newer
/// commit, whose horizon and client mark the older slot must not replace
/// (a blank older slot looks the same, and is refused too).
fn check_slots(slots: [Option<u64>; 2]) -> std::result::Result<(), String> {
    for (slot, h) in slots.iter().enumerate() {
        if let Some(g) = h {
            if g % 2 != slot as u64 {
                return Err(format!(
                    "page {slot}: holds commit {g}, which is written to page {}",
                    g % 2
                ));
            }
        }
    }
    match slots {
        [None, None] | [None, Some(1)] => Ok(()),
        [Some(a), Some(b)] if a.abs_diff(b) == 1 => Ok(()),
        [Some(a), Some(b)] => Err(format!(
            "pages 0 and 1 hold commits {a} and {b}, not two consecutive ones"
        )),
        [Some(g), None] | [None, Some(g)] => {
            let blank = if slots[0].is_none() { 0 } else { 1 };
            Err(format!(
                "page {blank} is zeros, but page {} holds commit {g}, so both were written (only commit 1 \
                 stands alone); the zeroed slot held commit {} or {}, which cannot be told",
                1 - blank,
                g.saturating_sub(1),
                g.saturating_add(1)
            ))
        }
    }
}

/// The generation of the last commit of the journal on `journal`, without
/// opening it (`None`: a blank journal). Errors as [`JournaledDevice::open`]'s.
pub fn committed_generation(journal: &dyn PageDevice) -> Result<Option<u64>> {
    let in_journal = |e: Error| match journal.path() {
        Some(p) => e.in_file(&p),
        None => e,
    };
    Ok(newest_header(journal)
        .map_err(in_journal)?
        .map(|h| h.generation))
}

/// The capacity, in pages, of the journal of a device of `inner_capacity`
/// pages of `page_size` bytes: what the largest generation can fill. A
/// generation holds at most one before-image per page of the device (each
/// page is saved once, at its first change since the commit), and its
/// batches hold at least one image each (a batch holds the new pages of
/// one write, so a page written alone makes a batch of one), each batch
/// with a header page and its copy; the two header slots come first: `2 +
/// 3 × inner_capacity` pages when every page of a full device is rewritten
/// one write at a time. Capped at the largest file offset (beyond it no
/// device of `page_size`-byte pages has pages anyway). With a smaller
/// journal (the file device's default of 16 GiB under a larger
/// `file:PATH?capacity=`), such a generation ran out of journal pages, and
/// the journal then refused every later write.
pub fn journal_capacity(inner_capacity: u64, page_size: usize) -> u64 {
    let most = (i64::MAX as u64) / (page_size.max(1) as u64);
    inner_capacity
        .saturating_mul(3)
        .saturating_add(FIRST_BATCH_PAGE)
        .min(most)
}

/// Notes in `witnesses` (the last pages written, oldest first) a change of
/// `pages`: a write of `data` (pages of `page_size` bytes) makes its last
/// [`MAX_WITNESSES`] distinct pages the newest witnesses, with the CRC-32C
/// of what they hold now; a trim (`None`) drops its pages (what a trimmed
/// page reads is the device's business). A page of the change that is not
/// among its newest ones leaves no witness of an older content: a change
/// of more distinct pages than that replaces every witness.
fn note_witnesses(
    witnesses: &mut Vec<(PageId, u32)>,
    pages: &[PageId],
    data: Option<&[u8]>,
    page_size: usize,
) {
    let Some(data) = data else {
        let gone: HashSet<PageId> = pages.iter().copied().collect();
        witnesses.retain(|(p, _)| !gone.contains(p));
        return;
    };
    // Newest first: a page written twice in one batch holds its last write.
    let mut newest: Vec<(PageId, u32)> = Vec::new();
    for (i, &page) in pages.iter().enumerate().rev() {
        if newest.len() == MAX_WITNESSES {
            break;
        }
        if newest.iter().any(|(p, _)| *p == page) {
            continue;
        }
        let bytes = data
            .get(i * page_size..(i + 1) * page_size)
            .unwrap_or_default();
        newest.push((page, crc32c::crc32c(bytes)));
    }
    witnesses.retain(|(p, _)| !newest.iter().any(|(q, _)| q == p));
    witnesses.extend(newest.into_iter().rev());
    let excess = witnesses.len().saturating_sub(MAX_WITNESSES);
    witnesses.drain(..excess);
}

fn encode_header(head: &Head, page_size: usize) -> Vec<u8> {
    let mut buf = vec![0u8; page_size];
    put(&mut buf, 0, &HEADER_MAGIC);
    put(&mut buf, 12, &VERSION.to_le_bytes());
    put(&mut buf, 16, &head.generation.to_le_bytes());
    put(&mut buf, 24, &head.horizon.to_le_bytes());
    put(&mut buf, 32, &(page_size as u64).to_le_bytes());
    put(&mut buf, 40, &head.client.to_le_bytes());
    // The newest ones when there are more than the slot's places.
    let skip = head
        .witnesses
        .len()
        .saturating_sub(max_witnesses(page_size));
    let witnesses = head.witnesses.get(skip..).unwrap_or_default();
    put(
        &mut buf,
        WITNESSES_AT,
        &(witnesses.len() as u32).to_le_bytes(),
    );
    for (i, (page, crc)) in witnesses.iter().enumerate() {
        let at = WITNESS_PAIRS_AT + i * PAIR;
        put(&mut buf, at, &page.to_le_bytes());
        put(&mut buf, at + 8, &crc.to_le_bytes());
    }
    let crc = crc_skipping(&buf, 8);
    put(&mut buf, 8, &crc.to_le_bytes());
    buf
}

impl JournaledDevice {
    /// Pages one batch header can list.
    fn per_batch(page_size: usize) -> usize {
        (page_size - BATCH_HEAD) / PAIR
    }

    /// Wraps `inner` with the journal on `journal` (same page size). A
    /// blank journal is created (for writing) with the horizon of `how`;
    /// otherwise the images of its generation are rolled back (see the
    /// [module docs](self)). Errors name the journal's file when it is one.
    /// Every page of `inner` counts as whole ([`Self::open_checked`]).
    /// For tests: an index directory opens its journal with its pages'
    /// check.
    #[cfg(test)]
    pub fn open(
        inner: Arc<dyn PageDevice>,
        journal: Arc<dyn PageDevice>,
        how: JournalOpen,
    ) -> Result<(JournaledDevice, Rollback)> {
        Self::open_checked(inner, journal, how, |_| true)
    }

    /// `open`, telling damaged pages of `inner` by `intact`: a
    /// witness page of the last commit that reads other content is the
    /// sign of a journal older than the pages when the page is whole (an
    /// error naming the journal), and damage the structure reports where
    /// it reads the page when it is not.
    pub fn open_checked(
        inner: Arc<dyn PageDevice>,
        journal: Arc<dyn PageDevice>,
        how: JournalOpen,
        intact: PageCheck,
    ) -> Result<(JournaledDevice, Rollback)> {
        let ps = inner.page_size();
        if journal.page_size() != ps {
            return Err(Error::invalid(format!(
                "journal page size {} differs from the device's {ps}",
                journal.page_size()
            )));
        }
        let journal_path = journal.path();
        let in_journal = |e: Error| match &journal_path {
            Some(p) => e.in_file(p),
            None => e,
        };
        let best = newest_header(journal.as_ref()).map_err(in_journal)?;
        let read_only = how == JournalOpen::Read;
        let mut dev = JournaledDevice {
            inner,
            journal,
            page_size: ps,
            overlay: HashMap::new(),
            read_only,
            state: Mutex::new(State {
                generation: 0,
                horizon: 0,
                client: 0,
                high: 0,
                saved: HashSet::new(),
                next: FIRST_BATCH_PAGE,
                witnesses: Vec::new(),
                failed: None,
            }),
        };
        let Some(head) = best else {
            // A blank journal: nothing to roll back.
            if let JournalOpen::Write { fresh_horizon } = how {
                dev.write_header(&Head {
                    generation: 1,
                    horizon: fresh_horizon,
                    client: 0,
                    witnesses: Vec::new(),
                })?;
                let mut st = dev.lock();
                st.generation = 1;
                st.horizon = fresh_horizon;
                st.high = fresh_horizon;
            }
            return Ok((dev, Rollback::default()));
        };
        let (images, end) = dev.read_images(head.generation).map_err(in_journal)?;
        // Before anything is written back: a journal that is not the one
        // of the pages' last commit must not roll them back.
        dev.check_witnesses(&head, &images, intact)
            .map_err(in_journal)?;
        let rollback = Rollback {
            pages_restored: images.len() as u64,
        };
        {
            let mut st = dev.lock();
            st.generation = head.generation;
            st.horizon = head.horizon;
            st.client = head.client;
            st.high = head.horizon;
            st.witnesses = head.witnesses;
        }
        if read_only {
            dev.overlay = images.into_iter().collect();
        } else if end > FIRST_BATCH_PAGE {
            // Batches were found (maybe with nothing to restore): written
            // back, then a new generation voids them all.
            if !images.is_empty() {
                let (ids, data): (Vec<PageId>, Vec<Vec<u8>>) = images.into_iter().unzip();
                dev.inner.write_batch(&ids, &data.concat())?;
                dev.inner.sync()?;
            }
            dev.commit()?;
        }
        Ok((dev, rollback))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_header(&self, head: &Head) -> Result<()> {
        let buf = encode_header(head, self.page_size);
        self.journal.write(head.generation % 2, &buf)?;
        self.journal.sync()
    }

    /// The header of the batch of `generation` in the journal page `head`
    /// (a batch's header page or its copy), if it is one.
    fn batch_in(head: &[u8], generation: u64) -> Option<Batch> {
        let head_pages = match head.get(..4) {
            Some(m) if m == BATCH_MAGIC => 2,
            Some(m) if m == BATCH_MAGIC_V1 => 1,
            _ => return None,
        };
        if u32_at(head, 4) != crc_skipping(head, 4) || u64_at(head, 8) != generation {
            return None;
        }
        let n = u32_at(head, 16) as usize;
        if n == 0 || n > Self::per_batch(head.len()) {
            return None;
        }
        let pairs = (0..n)
            .map(|i| {
                let at = BATCH_HEAD + i * PAIR;
                (u64_at(head, at), u32_at(head, at + 8))
            })
            .collect();
        Some(Batch { head_pages, pairs })
    }

    /// The before-images of `generation`, in journal order (the first
    /// image of a page is its committed content), and the journal page
    /// after its last batch. An image that fails its CRC is skipped when
    /// the device's page still has the CRC its batch recorded (a batch a
    /// crash cut before its sync: its writes never happened), and is an
    /// error otherwise (see the [module docs](self)).
    fn read_images(&self, generation: u64) -> Result<(Images, u64)> {
        let ps = self.page_size;
        let mut out: Images = Vec::new();
        let mut seen = HashSet::new();
        let mut pos = FIRST_BATCH_PAGE;
        let mut head = vec![0u8; ps];
        let mut current = vec![0u8; ps];
        let capacity = self.journal.capacity();
        while pos < capacity {
            self.journal.read(pos, &mut head)?;
            let mut batch = Self::batch_in(&head, generation);
            if batch.is_none() && pos + 1 < capacity {
                // A damaged header page: its copy names the same pages.
                self.journal.read(pos + 1, &mut head)?;
                batch = Self::batch_in(&head, generation).filter(|b| b.head_pages == 2);
            }
            // Neither readable: the end (a batch cut by a crash, an older
            // generation, or nothing).
            let Some(batch) = batch else { break };
            let first = pos + batch.head_pages;
            let n = batch.pairs.len() as u64;
            if first + n > capacity {
                break;
            }
            let ids: Vec<PageId> = (first..first + n).collect();
            let mut images = vec![0u8; ids.len() * ps];
            self.journal.read_batch(&ids, &mut images)?;
            let each = batch.pairs.iter().zip(images.chunks_exact(ps)).zip(first..);
            for ((&(page, crc), image), at) in each {
                if crc32c::crc32c(image) == crc {
                    if seen.insert(page) {
                        out.push((page, image.to_vec()));
                    }
                    continue;
                }
                self.inner.read(page, &mut current)?;
                if crc32c::crc32c(&current) != crc {
                    return Err(Error::corrupt(
                        Some(at),
                        format!(
                            "journal page {at}: the before-image of page {page} is damaged, and the page was \
                             written after the image was saved: its content at commit {generation} is lost; \
                             restore the index from a backup"
                        ),
                    ));
                }
                // The device still holds the committed content.
                seen.insert(page);
            }
            pos = first + n;
        }
        self.check_nothing_after(pos, generation)?;
        Ok((out, pos))
    }

    /// The generation of the batch whose header page (or its copy) is
    /// `head`, if it is one.
    fn batch_generation(head: &[u8]) -> Option<u64> {
        let magic = head.get(..4)?;
        ((magic == BATCH_MAGIC || magic == BATCH_MAGIC_V1) && u32_at(head, 4) == crc_skipping(head, 4))
            .then(|| u64_at(head, 8))
    }

    /// After the batches of `generation` read up to page `end`: the end of
    /// a journal is its last batch, cut by a crash or whole, never a batch
    /// followed by another of its generation (or one of a newer
    /// generation than the header's): such a batch means the one at `end`
    /// or a header slot was damaged, and rolling back only the images
    /// before it would leave the pages of the later ones as the crash left
    /// them, another state than the commit (issue 44's damage campaign).
    fn check_nothing_after(&self, end: u64, generation: u64) -> Result<()> {
        let ps = self.page_size;
        let pages = match self.journal.path().map(std::fs::metadata) {
            Some(Ok(m)) => m.len() / ps as u64,
            _ => self.journal.capacity(),
        };
        let last = pages.min(self.journal.capacity());
        // Many pages a read: a journal a large change left long (when its
        // file could not be shortened) is read in a few batches, not one
        // read a page.
        let per_read = (SCAN_BYTES / ps).max(1) as u64;
        let mut buf = Vec::new();
        let mut first = end;
        while first < last {
            let ids: Vec<PageId> = (first..last.min(first.saturating_add(per_read))).collect();
            buf.resize(ids.len() * ps, 0);
            self.journal.read_batch(&ids, &mut buf)?;
            for (&p, head) in ids.iter().zip(buf.chunks_exact(ps)) {
                match Self::batch_generation(head) {
                    Some(g) if g > generation || (g == generation && p > end) => {
                        return Err(Error::corrupt(
                            Some(end),
                            format!(
                                "journal page {end} ends the before-images of commit {generation}, but page {p} \
                                 holds a batch of commit {g}: the journal is damaged, and rolling back part of \
                                 it would not give the last commit; restore the index from a backup"
                            ),
                        ));
                    }
                    _ => {}
                }
            }
            first += ids.len() as u64;
        }
        Ok(())
    }

    /// Appends the before-images of `pages` (below the horizon, not yet
    /// saved), syncing the journal after each batch: a batch follows only
    /// synced ones, so the end of a journal a crash cut is its last batch
    /// ([`Self::check_nothing_after`]).
    fn save(&self, st: &mut State, pages: &[PageId]) -> Result<()> {
        let mut need: Vec<PageId> = pages
            .iter()
            .copied()
            .filter(|p| *p < st.horizon && !st.saved.contains(p))
            .collect();
        need.sort_unstable();
        need.dedup();
        if need.is_empty() {
            return Ok(());
        }
        // Pages whose place a crash returns to by itself (a simulated
        // tier's, restored whole from its image) need no before-image:
        // counted as saved, so they are not asked about again. This holds
        // while the device's answer, at a page's first change since a
        // commit, is about the place the committed state gives it (a
        // hybrid's map: saved with each commit of the journal, see
        // `HybridIo::overwrites_durable`).
        let durable = self.inner.overwrites_durable(&need);
        if durable.iter().any(|d| !d) {
            let mut keep = Vec::with_capacity(need.len());
            for (p, d) in need.into_iter().zip(durable) {
                if d {
                    keep.push(p);
                } else {
                    st.saved.insert(p);
                }
            }
            need = keep;
        }
        if need.is_empty() {
            return Ok(());
        }
        let ps = self.page_size;
        for chunk in need.chunks(Self::per_batch(ps)) {
            let mut data = vec![0u8; (2 + chunk.len()) * ps];
            let (head, rest) = data.split_at_mut(ps);
            let (copy, images) = rest.split_at_mut(ps);
            self.inner.read_batch(chunk, images)?;
            put(head, 0, &BATCH_MAGIC);
            put(head, 8, &st.generation.to_le_bytes());
            put(head, 16, &(chunk.len() as u32).to_le_bytes());
            for (i, (page, image)) in chunk.iter().zip(images.chunks_exact(ps)).enumerate() {
                let at = BATCH_HEAD + i * PAIR;
                put(head, at, &page.to_le_bytes());
                put(head, at + 8, &crc32c::crc32c(image).to_le_bytes());
            }
            let crc = crc_skipping(head, 4);
            put(head, 4, &crc.to_le_bytes());
            copy.copy_from_slice(head);
            let ids: Vec<PageId> = (0..2 + chunk.len() as u64).map(|i| st.next + i).collect();
            self.journal.write_batch(&ids, &data)?;
            self.journal.sync()?;
            st.next += ids.len() as u64;
        }
        st.saved.extend(need);
        Ok(())
    }

    /// Runs a change of the device of `pages` (a write of `data`, `None`
    /// for a trim): refused after a failure or when
    /// read-only, and bad input (a page beyond the device, a buffer of
    /// another length) refused before anything is written, which leaves
    /// the journal as it was. Any other error (of the journal's images,
    /// their sync, or the device's write) makes the journal refuse further
    /// changes: the device and the journal may disagree.
    fn change(
        &self,
        pages: &[PageId],
        data: Option<&[u8]>,
        f: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if self.read_only {
            return Err(Error::invalid(
                "the device was opened read-only (a rollback journal's reader)",
            ));
        }
        let mut st = self.lock();
        crate::error::refuse_after_failure(
            &st.failed,
            "the rollback journal failed earlier and accepts no more writes",
        )?;
        let geometry = self.geometry();
        match data {
            Some(data) => geometry.check_batch(pages, data.len())?,
            None => geometry.check_pages(pages)?,
        }
        let r = self.save(&mut st, pages).and_then(|()| f());
        if r.is_ok() {
            if let Some(&top) = pages.iter().max() {
                st.high = st.high.max(top.saturating_add(1));
            }
            note_witnesses(&mut st.witnesses, pages, data, self.page_size);
        }
        crate::error::keep_failure(&mut st.failed, r)
    }

    /// Checks, before a journal opened at `head` rolls anything back, that
    /// it is the journal of the device's last commit: each witness page
    /// its commit recorded must read, once rolled back (its first image of
    /// this generation, else the device's page), what it held then. The
    /// journal keeps every page as at its last commit, so a page that
    /// reads otherwise was changed after a newer commit the journal does
    /// not know: the journal was replaced by an older copy of itself (a
    /// backup, a copy from an earlier generation), and rolling back by it
    /// would write older images over newer pages, or keep an older horizon
    /// and client mark for the newer ones; or the page was damaged since.
    /// Either is an error, never another state than the last commit.
    fn check_witnesses(&self, head: &Head, images: &Images, intact: PageCheck) -> Result<()> {
        let capacity = self.inner.capacity();
        let wanted: HashSet<PageId> = head.witnesses.iter().map(|&(page, _)| page).collect();
        // The first image of a page is its committed content.
        let mut committed: HashMap<PageId, &[u8]> = HashMap::new();
        for (page, image) in images.iter().filter(|(p, _)| wanted.contains(p)) {
            committed.entry(*page).or_insert(image);
        }
        let mut unread: Vec<PageId> = wanted
            .iter()
            .copied()
            .filter(|p| *p < capacity && !committed.contains_key(p))
            .collect();
        unread.sort_unstable();
        let ps = self.page_size;
        let mut buf = vec![0u8; unread.len() * ps];
        self.inner.read_batch(&unread, &mut buf)?;
        committed.extend(unread.iter().copied().zip(buf.chunks_exact(ps)));
        for &(page, crc) in &head.witnesses {
            let now = committed.get(&page).copied();
            let held = match now {
                Some(bytes) if crc32c::crc32c(bytes) == crc => continue,
                // A damaged page: the structure reports it where it reads it.
                Some(bytes) if !intact(bytes) => continue,
                Some(bytes) => format!(
                    "holds other content there (CRC-32C {:#010x})",
                    crc32c::crc32c(bytes)
                ),
                None => format!("has {capacity} pages"),
            };
            let pages = match self.inner.path() {
                Some(p) => p.display().to_string(),
                None => self.inner.describe(),
            };
            return Err(Error::corrupt(
                Some(head.generation % 2),
                format!(
                    "the journal's last commit ({}) recorded page {page} of {pages} with CRC-32C {crc:#010x}, \
                     but the device {held}, and the journal holds no before-image that restores it: the \
                     journal is not the one of the pages' last commit (an older copy of it, restored from a \
                     backup or copied from an earlier generation?), or the pages were replaced; rolling back \
                     by this journal would not give the last commit: restore the index from a backup",
                    head.generation
                ),
            ));
        }
        Ok(())
    }

    /// The client mark of the last commit (or the one the next commit
    /// writes, once set): the generation of the index's object heap that
    /// the committed pages go with (0: none).
    pub fn client_mark(&self) -> u64 {
        self.lock().client
    }

    /// Pages the journal holds at most (tests: what an index directory
    /// sized its journal to).
    #[cfg(test)]
    pub(crate) fn journal_pages(&self) -> u64 {
        self.journal.capacity()
    }

    /// The generation of the last [`commit`](Self::commit) (the next one
    /// writes one more).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// An error when the journal failed earlier (a write, a sync, a commit
    /// whose header may or may not have reached the file): what it holds on
    /// disk is then known only to the next open.
    pub fn refuse_if_failed(&self) -> Result<()> {
        crate::error::refuse_after_failure(&self.lock().failed, "the rollback journal failed earlier")
    }

    /// Refuses every later change and commit with `why`: the structure
    /// above failed part-way through an operation (damage found, a device
    /// error), so its pages may hold a part of it, which no commit may make
    /// the state a crash returns to. The next open rolls the pages back to
    /// the last commit.
    pub fn fail(&self, why: String) {
        let mut st = self.lock();
        if st.failed.is_none() {
            st.failed = Some(why);
        }
    }

    /// Sets the client mark the next [`commit`](Self::commit) writes with
    /// its header, so that it is committed exactly with the pages.
    pub fn set_client_mark(&self, mark: u64) {
        self.lock().client = mark;
    }

    /// Makes the device's current content the state a crash returns to:
    /// syncs the device, then voids the journal's images with a new header
    /// (the next generation, the horizon raised to every page written).
    /// Once that header is synced the commit stands: trimming the void
    /// images after it is best effort, and a failure there is only logged.
    pub fn commit(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut st = self.lock();
        crate::error::refuse_after_failure(&st.failed, "the rollback journal failed earlier")?;
        let r = (|| {
            self.inner.sync()?;
            let generation = st.generation + 1;
            let horizon = st.high.max(st.horizon);
            self.write_header(&Head {
                generation,
                horizon,
                client: st.client,
                witnesses: st.witnesses.clone(),
            })?;
            let used = FIRST_BATCH_PAGE..st.next;
            st.generation = generation;
            st.horizon = horizon;
            st.high = horizon;
            st.saved.clear();
            st.next = FIRST_BATCH_PAGE;
            // Every page after the header slots is void now: the journal's
            // file is cut back to them (so that opens do not read the pages
            // a large change used), the images of this generation trimmed
            // where it cannot be. Best effort: the commit is durable and
            // the images are void already (batches of an older generation,
            // which `read_images` and `check_nothing_after` pass over), so
            // a failure fails neither the commit nor later changes.
            let pages = used.end - used.start;
            if let Err(e) = self.journal.trim_tail(used) {
                tracing::warn!(
                    journal = %self.journal.describe(),
                    error = %e,
                    "rollback journal: commit {generation} is durable, but cutting the journal back to its \
                     header slots (the {pages} pages of the images it voided among them) failed; what stays \
                     is passed over by every open"
                );
            }
            Ok(())
        })();
        crate::error::keep_failure(&mut st.failed, r)
    }
}

impl PageDevice for JournaledDevice {
    fn geometry(&self) -> DeviceGeometry {
        DeviceGeometry::new(self.page_size, self.inner.capacity())
    }
    fn read_batch(&self, pages: &[PageId], buf: &mut [u8]) -> Result<()> {
        self.inner.read_batch(pages, buf)?;
        if !self.overlay.is_empty() {
            for (page, dst) in pages.iter().zip(buf.chunks_exact_mut(self.page_size)) {
                if let Some(image) = self.overlay.get(page) {
                    dst.copy_from_slice(image);
                }
            }
        }
        Ok(())
    }
    /// The device's streamed read, each page the overlay holds handed over
    /// from the overlay instead.
    fn read_batch_each(
        &self,
        pages: &[PageId],
        each: &mut dyn FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        if self.overlay.is_empty() {
            return self.inner.read_batch_each(pages, each);
        }
        self.inner.read_batch_each(pages, &mut |i, bytes| {
            match pages.get(i).and_then(|p| self.overlay.get(p)) {
                Some(image) => each(i, image),
                None => each(i, bytes),
            }
        })
    }
    fn write_batch(&self, pages: &[PageId], data: &[u8]) -> Result<()> {
        self.change(pages, Some(data), || self.inner.write_batch(pages, data))
    }
    fn sync(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        self.inner.sync()
    }
    fn trim(&self, pages: &[PageId]) -> Result<()> {
        self.change(pages, None, || self.inner.trim(pages))
    }
    fn reserve(&self, pages: std::ops::Range<PageId>) -> Result<()> {
        self.inner.reserve(pages)
    }
    fn describe(&self) -> String {
        format!("journaled({})", self.inner.describe())
    }
    fn path(&self) -> Option<std::path::PathBuf> {
        self.inner.path()
    }
}

impl DeviceExt for JournaledDevice {
    /// The device's counters with the journal's I/O added: what the index
    /// costs the drive.
    fn stats(&self) -> DeviceStats {
        let mut s = self.inner.stats();
        s.io.add(&self.journal.stats().io);
        s
    }
    fn reset_stats(&self) {
        self.inner.reset_stats();
        self.journal.reset_stats();
    }
    super::forward_device_ext!(inner: hint_tier, tiers, page_tier, sim_clock_ns);
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod review_tests;
#[cfg(test)]
mod second_review_tests;
#[cfg(test)]
mod witness_tests;
