//! Unlogged bulk loads: the store's side of [`NodeStore::bulk_load`].
//!
//! A bulk loader (STR, Hilbert packing, the bounded-memory external load)
//! builds a whole tree bottom-up and never changes a node once it has
//! written it, so the machinery of single operations (write buffers, log
//! records, page images, group commit) protects nothing there. The contract:
//!
//! 1. The store holds no tree and no operation is running
//!    ([`check_target`]).
//! 2. The loader's `build` closure receives a [`BulkSink`] and stores every
//!    node through [`BulkSink::node`], which returns the node's page id (the
//!    loader puts it in the parent's entry). The pages are *fresh*: pages the
//!    store's durable state does not reference (the allocator's durably free
//!    pages, else pages past its end), so nothing a crash can leave behind
//!    is reachable. Stores with a device encode them back to back and write
//!    them in batches of [`BATCH_BYTES`] with one `write_batch` call each
//!    ([`PageBatcher`]), without syncing, logging or buffering them.
//! 3. `build` returns the new tree's [`TreeMeta`]. The store then
//!    **publishes** it: the device is synced once (every node page is
//!    durable), and the store's durable state is switched to the new tree
//!    with one atomic write and one sync — the plain store's header page,
//!    a clean log checkpoint of the eFIND and FAST stores (their superblock,
//!    whose two slots with checksums make the switch atomic). A crash before
//!    the switch is durable leaves the previous state (the empty tree, its
//!    allocation state unchanged); after it, the whole new tree. The next
//!    open of a logged store reads the superblock and replays nothing.
//! 4. When `build` fails, nothing is published and the store's allocation
//!    state is restored: the store is as before the call (the pages already
//!    written are unreachable and reused later).
//!
//! Two syncs in all, no log record. The loader never learns which store it
//! runs on, and the store never learns which index it holds: it sees pages
//! of nodes and one [`TreeMeta`].
//!
//! Stores without a device of their own (the in-memory reference store)
//! keep the default implementation, [`through_operations`]: one store
//! operation per node, the metadata in a last one, then a checkpoint — what
//! every store did before this contract existed.
use crate::metrics::{Phase, PhaseTimes};
use crate::page::{self, Entry};
use crate::storage::{PageDevice, PageId};
use crate::store::alloc::PageAllocator;
use crate::store::checks;
use crate::store::placement::Placement;
use crate::store::{NodeStore, StoreStats, TreeMeta};
use crate::{Error, Result};

/// Bytes of node pages a bulk load writes with one device call (1 MiB:
/// 256 pages of 4 KiB), large enough to reach a drive's sequential speed.
pub const BATCH_BYTES: usize = 1 << 20;

internal! {
    /// Where a bulk load puts its nodes; given to the loader by
    /// [`NodeStore::bulk_load`] (see the [module docs](self)).
    pub trait BulkSink {
        /// Stores a new node of `level` holding `entries` (any order, keys
        /// unique) on a fresh page and returns its page id. The node can be read
        /// only once the bulk load is published.
        fn node(&mut self, level: u16, entries: &[Entry]) -> Result<PageId>;
    }
}

/// The loader's side of a bulk load: stores the nodes of a new tree through
/// the sink and returns the tree's metadata, which the store then publishes.
pub type BulkBuild<'a> = Box<dyn FnOnce(&mut dyn BulkSink) -> Result<TreeMeta> + 'a>;

/// Refuses a bulk load into a store that holds a tree or runs an operation.
pub(crate) fn check_target(meta: &TreeMeta, running: Option<crate::store::OpId>) -> Result<()> {
    crate::store::check_idle(running, "bulk load")?;
    if meta.root.is_some() || meta.records > 0 {
        return Err(Error::invalid(
            "a bulk load builds a new tree: the store already holds one",
        ));
    }
    Ok(())
}

/// Refuses to publish metadata whose root is not a page of the load.
pub(crate) fn check_published(meta: &TreeMeta, alloc: &PageAllocator) -> Result<()> {
    match meta.root {
        Some(root) if !alloc.is_allocated(root) => Err(Error::invalid(format!(
            "bulk load: the tree's root {root} is not a node of the load"
        ))),
        None if meta.records > 0 || meta.height > 0 => Err(Error::invalid(
            "bulk load: a tree with records or levels needs a root",
        )),
        _ => Ok(()),
    }
}

/// A sink storing each node as one operation of the store (the default
/// [`NodeStore::bulk_load`]).
struct OpSink<'s, S: NodeStore + ?Sized>(&'s mut S);

impl<S: NodeStore + ?Sized> BulkSink for OpSink<'_, S> {
    fn node(&mut self, level: u16, entries: &[Entry]) -> Result<PageId> {
        let op = self.0.begin_op()?;
        let id = self.0.create(level, entries.to_vec())?;
        self.0.commit_op(op)?;
        Ok(id)
    }
}

/// The default [`NodeStore::bulk_load`]: each node created in its own
/// operation, the metadata set by a last one, then a checkpoint.
pub fn through_operations<S: NodeStore + ?Sized>(
    store: &mut S,
    build: BulkBuild<'_>,
) -> Result<()> {
    check_target(&store.meta(), None)?;
    let meta = build(&mut OpSink(&mut *store))?;
    let op = store.begin_op()?;
    store.set_meta(meta)?;
    store.commit_op(op)?;
    store.checkpoint()
}

/// What [`write_tree`] wrote: the new tree's metadata (checked), the level
/// of each node written, in order, and the time of the device writes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Written {
    /// The metadata `build` returned, its root a page of the load.
    pub(crate) meta: TreeMeta,
    /// Level of each node written, in order.
    pub(crate) levels: Vec<u16>,
    /// Time of the device writes.
    pub(crate) times: PhaseTimes,
}

impl Written {
    /// Counts the load in a store's statistics: the nodes created, their
    /// writes per level and the time of the device writes.
    pub(crate) fn count_in(&self, stats: &mut StoreStats) {
        stats.nodes_created += self.levels.len() as u64;
        stats.record_node_writes(self.levels.iter().copied());
        stats.times.add(&self.times);
    }
}

impl Failed {
    /// The error, kept in `failed` (the store's sticky failure) when a
    /// device write failed.
    pub(crate) fn record_in(self, failed: &mut Option<String>) -> Error {
        if self.device {
            *failed = Some(self.error.to_string());
        }
        self.error
    }
}

/// Why [`write_tree`] failed.
#[derive(Debug)]
pub(crate) struct Failed {
    /// The error.
    pub(crate) error: Error,
    /// Whether a device write failed (the store's failure is then sticky);
    /// otherwise the loader failed (bad input, its temporary files).
    pub(crate) device: bool,
}

/// How a store's node pages look: what [`PageBatcher`] needs to encode them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PageFormat {
    /// Most entries a node holds.
    pub(crate) max_entries: usize,
    /// Whether entries carry payloads.
    pub(crate) with_payload: bool,
    /// LSN the pages are stamped with.
    pub(crate) lsn: u64,
    /// Tier hints per level.
    pub(crate) placement: Placement,
}

/// Steps 2 and 4 of the [protocol](self): runs `build` with a
/// [`PageBatcher`] on `device` and `alloc`, writes the last batch (no sync)
/// and checks the metadata `build` returned. On failure `alloc` is restored
/// to its state before the call.
pub(crate) fn write_tree(
    device: &dyn PageDevice,
    alloc: &mut PageAllocator,
    format: PageFormat,
    build: BulkBuild<'_>,
) -> std::result::Result<Written, Failed> {
    let before = alloc.clone();
    let mut w = PageBatcher::new(device, alloc, format);
    let out = match build(&mut w) {
        Ok(meta) => w.finish().map(|(levels, times)| (meta, levels, times)),
        Err(error) => Err(Failed {
            error,
            device: w.device_failed,
        }),
    };
    let out = out.and_then(|(meta, levels, times)| {
        check_published(&meta, alloc).map_err(|error| Failed {
            error,
            device: false,
        })?;
        Ok(Written {
            meta,
            levels,
            times,
        })
    });
    if out.is_err() {
        *alloc = before;
    }
    out
}

/// The shared [`BulkSink`] of the stores with a device: allocates fresh
/// pages, encodes the nodes back to back and writes every
/// [`BATCH_BYTES`] of them with one `write_batch` call (no sync: the store
/// syncs once when it publishes).
pub(crate) struct PageBatcher<'a> {
    device: &'a dyn PageDevice,
    alloc: &'a mut PageAllocator,
    format: PageFormat,
    page_size: usize,
    batch_pages: usize,
    ids: Vec<PageId>,
    levels: Vec<u16>,
    data: Vec<u8>,
    written: Vec<u16>,
    /// A node's entries sorted by key when they came in another order.
    scratch: Vec<Entry>,
    times: PhaseTimes,
    /// A device call failed.
    device_failed: bool,
}

impl<'a> PageBatcher<'a> {
    /// A batcher writing nodes in `format` to `device`, on the pages `alloc`
    /// hands out.
    pub(crate) fn new(
        device: &'a dyn PageDevice,
        alloc: &'a mut PageAllocator,
        format: PageFormat,
    ) -> Self {
        let page_size = device.page_size();
        let batch_pages = (BATCH_BYTES / page_size).max(1);
        PageBatcher {
            device,
            alloc,
            format,
            page_size,
            batch_pages,
            ids: Vec::with_capacity(batch_pages),
            levels: Vec::with_capacity(batch_pages),
            data: Vec::with_capacity(batch_pages * page_size),
            written: Vec::new(),
            scratch: Vec::new(),
            times: PhaseTimes::default(),
            device_failed: false,
        }
    }

    /// Writes the pages collected so far as one batch.
    fn write_batch(&mut self) -> Result<()> {
        if self.ids.is_empty() {
            return Ok(());
        }
        let (written, t) = PhaseTimes::measure(Phase::Write, self.device, || {
            self.format.placement.hint(
                self.device,
                self.ids.iter().copied().zip(self.levels.iter().copied()),
            )?;
            self.device.write_batch(&self.ids, &self.data)
        });
        if written.is_err() {
            self.device_failed = true;
        }
        written?;
        self.times.add(&t);
        self.written.append(&mut self.levels);
        self.ids.clear();
        self.data.clear();
        Ok(())
    }

    /// Writes the last batch (not synced); the level of every node written
    /// and the time the writes took.
    fn finish(mut self) -> std::result::Result<(Vec<u16>, PhaseTimes), Failed> {
        self.write_batch().map_err(|error| Failed {
            error,
            device: true,
        })?;
        Ok((self.written, self.times))
    }
}

/// Checks a node as every store checks one: it fits a page and its keys
/// are unique (the encoder checks the rectangles and payloads). Returns the
/// node's entries in key order: `entries` themselves when they already are
/// (a bulk load gathers them so), else a sorted copy in `scratch`.
fn in_key_order<'e>(
    entries: &'e [Entry],
    scratch: &'e mut Vec<Entry>,
    format: PageFormat,
    page_size: usize,
) -> Result<&'e [Entry]> {
    checks::check_len(
        entries.len(),
        format.max_entries,
        page_size,
        format.with_payload,
    )?;
    if entries.windows(2).all(|w| matches!(w, [a, b] if a.key < b.key)) {
        return Ok(entries);
    }
    scratch.clear();
    scratch.extend_from_slice(entries);
    scratch.sort_unstable_by_key(|e| e.key);
    if let Some([a, _]) = scratch
        .windows(2)
        .find(|w| matches!(w, [a, b] if a.key == b.key))
    {
        return Err(Error::invalid(format!(
            "duplicate entry key {} in a bulk-loaded node",
            a.key
        )));
    }
    Ok(scratch)
}

impl BulkSink for PageBatcher<'_> {
    fn node(&mut self, level: u16, entries: &[Entry]) -> Result<PageId> {
        let entries = in_key_order(entries, &mut self.scratch, self.format, self.page_size)?;
        let at = self.data.len();
        self.data.resize(at + self.page_size, 0);
        let buf = self
            .data
            .get_mut(at..)
            .ok_or_else(|| Error::invalid("internal: bulk batch buffer"))?;
        let encoded = page::encode_entries(
            level,
            entries,
            self.format.lsn,
            self.format.with_payload,
            buf,
        );
        let id = encoded.and_then(|()| self.alloc.allocate());
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                self.data.truncate(at);
                return Err(e);
            }
        };
        self.ids.push(id);
        self.levels.push(level);
        if self.ids.len() >= self.batch_pages {
            self.write_batch()?;
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;
    use crate::storage::mem::MemDevice;

    fn format(max_entries: usize, lsn: u64) -> PageFormat {
        PageFormat {
            max_entries,
            with_payload: false,
            lsn,
            placement: Placement::None,
        }
    }

    fn e(key: u64) -> Entry {
        let x = key as f64;
        Entry {
            key,
            rect: Rect::new(x, x, x + 1.0, x + 1.0).unwrap(),
            payload: 0,
        }
    }

    #[test]
    fn batches_are_large_and_pages_decode() {
        let dev = MemDevice::new(1024, 4096).unwrap();
        let mut alloc = PageAllocator::new(1, 4096).unwrap();
        let mut b = PageBatcher::new(&dev, &mut alloc, format(20, 7));
        let mut ids = Vec::new();
        for i in 0..2500u64 {
            ids.push(b.node(0, &[e(i * 2 + 1), e(i * 2)]).unwrap());
        }
        let (levels, _) = b.finish().unwrap();
        assert_eq!(levels.len(), 2500);
        assert_eq!(ids, (1..=2500).collect::<Vec<_>>());
        let io = dev.stats().io;
        // 1 MiB of 1 KiB pages per call: three calls, no sync.
        assert_eq!((io.write_batches, io.pages_written, io.syncs), (3, 2500, 0));
        let mut buf = vec![0u8; 1024];
        dev.read(ids[1234], &mut buf).unwrap();
        let (h, n) = page::decode_node(&buf, Some(ids[1234])).unwrap();
        assert_eq!(h.lsn, 7);
        assert_eq!(n.entries, vec![e(2468), e(2469)]);
    }

    #[test]
    fn bad_nodes_are_refused_before_a_page_is_taken() {
        let dev = MemDevice::new(1024, 64).unwrap();
        let mut alloc = PageAllocator::new(1, 64).unwrap();
        let mut b = PageBatcher::new(&dev, &mut alloc, format(2, 0));
        let too_many = b.node(0, &[e(1), e(2), e(3)]).unwrap_err();
        assert!(too_many.to_string().contains("does not fit"), "{too_many}");
        let dup = b.node(0, &[e(1), e(1)]).unwrap_err();
        assert!(dup.to_string().contains("duplicate"), "{dup}");
        let mut paid = e(4);
        paid.payload = 9;
        assert!(b
            .node(0, &[paid])
            .unwrap_err()
            .to_string()
            .contains("payload"));
        let mut nan = e(5);
        nan.rect = Rect::invalid_for_tests(
            f64::NAN,
            nan.rect.min_y(),
            nan.rect.max_x(),
            nan.rect.max_y(),
        );
        assert!(b
            .node(0, &[nan])
            .unwrap_err()
            .to_string()
            .contains("rectangle"));
        assert_eq!(b.node(0, &[e(6)]).unwrap(), 1);
    }

    #[test]
    fn targets_and_published_metadata_are_checked() {
        let empty = TreeMeta::default();
        assert!(check_target(&empty, None).is_ok());
        assert!(check_target(&empty, Some(3)).is_err());
        let held = TreeMeta {
            root: Some(1),
            height: 1,
            records: 1,
        };
        assert!(check_target(&held, None)
            .unwrap_err()
            .to_string()
            .contains("already holds"));
        let mut alloc = PageAllocator::new(1, 64).unwrap();
        assert!(check_published(&held, &alloc).is_err());
        alloc.allocate().unwrap();
        assert!(check_published(&held, &alloc).is_ok());
        assert!(check_published(&empty, &alloc).is_ok());
        let rootless = TreeMeta {
            root: None,
            height: 1,
            records: 4,
        };
        assert!(check_published(&rootless, &alloc).is_err());
    }
}
