//! The head page: where a FOR-tree keeps its root and its overflow node
//! table in the store, and how [`Fortree::open`] reads them back.
//!
//! The head page is the store's `TreeMeta::root` and never moves. It and
//! its continuation pages are ordinary node pages (level 0) whose entries
//! carry two integers `(a, b)` as the point rectangle `(a, b, a, b)`
//! (exact as `f64` below 2^53), with the kind of the entry in the top byte
//! of its key and a sequence number below:
//!
//! | kind | a | b |
//! |---|---|---|
//! | [`FORMAT`] | [`MAGIC`] | format version |
//! | [`ROOT`] | P-node of the root unit | height |
//! | [`NEXT`] | next continuation page | 0 |
//! | [`LINK`] | a P-node | one of its O-nodes (chain order = key order) |
//! | [`COUNT`] | a P-node | its access counter |
//!
//! The head holds `FORMAT`, `ROOT` (absent for an empty tree) and `NEXT`
//! (absent without continuation); each continuation page holds up to
//! M − 1 `LINK`/`COUNT` entries and a `NEXT` to the following one. A
//! checkpoint rewrites the continuation pages.
use std::collections::BTreeMap;

use super::{Fortree, FortreeConfig, OntEntry};
use crate::geom::Rect;
use crate::index::diff;
use crate::page::Entry;
use crate::page_id::PageId;
use crate::store::NodeStore;
use crate::{Error, Result};

/// Entry kind: format marker.
pub(super) const FORMAT: u64 = 1;
/// Entry kind: the root unit.
pub(super) const ROOT: u64 = 2;
/// Entry kind: the next continuation page.
pub(super) const NEXT: u64 = 3;
/// Entry kind: one O-node of a P-node.
pub(super) const LINK: u64 = 4;
/// Entry kind: the access counter of a P-node.
pub(super) const COUNT: u64 = 5;
/// `a` of the format entry: "FOR" in ASCII.
pub(super) const MAGIC: u64 = 0x464F52;
/// Format version of the head page.
pub(super) const VERSION: u64 = 1;

const LIMIT: u64 = 1 << 53;

fn pair(kind: u64, seq: u64, a: u64, b: u64) -> Result<Entry> {
    if a >= LIMIT || b >= LIMIT || seq >= 1 << 56 {
        return Err(Error::invalid(format!(
            "FOR-tree head page: value {a} or {b} too large to store"
        )));
    }
    let (x, y) = (a as f64, b as f64);
    Ok(Entry {
        key: (kind << 56) | seq,
        rect: Rect::new(x, y, x, y)?,
        payload: 0,
    })
}

/// `(kind, a, b)` of an entry of a head or continuation page.
fn unpair(page: PageId, e: &Entry) -> Result<(u64, u64, u64)> {
    let r = e.rect;
    let int = |v: f64| {
        if v >= 0.0 && v < LIMIT as f64 && v.fract() == 0.0 {
            Ok(v as u64)
        } else {
            Err(Error::corrupt(
                Some(page),
                format!("FOR-tree head page: {v} is not a stored integer"),
            ))
        }
    };
    if r.min_x() != r.max_x() || r.min_y() != r.max_y() {
        return Err(Error::corrupt(
            Some(page),
            "FOR-tree head page: an entry is not a point",
        ));
    }
    Ok((e.key >> 56, int(r.min_x())?, int(r.min_y())?))
}

/// The entries of the head page.
pub(super) fn head_entries(
    root: Option<PageId>,
    height: u16,
    next: Option<PageId>,
) -> Result<Vec<Entry>> {
    let mut v = vec![pair(FORMAT, 0, MAGIC, VERSION)?];
    if let Some(r) = root {
        v.push(pair(ROOT, 0, r, u64::from(height))?);
    }
    if let Some(n) = next {
        v.push(pair(NEXT, 0, n, 0)?);
    }
    Ok(v)
}

impl<S: NodeStore> Fortree<S> {
    /// Rewrites the head page and its continuation pages (inside one store
    /// operation); called by `checkpoint` after a full flush.
    pub(super) fn write_head(&mut self) -> Result<()> {
        let mut data = Vec::new();
        let mut seq = 0u64;
        for (p, e) in &self.ont {
            for o in &e.overflow {
                data.push(pair(LINK, seq, *p, *o)?);
                seq += 1;
            }
            data.push(pair(COUNT, seq, *p, e.accesses)?);
            seq += 1;
        }
        let per_page = self.config.max_entries.saturating_sub(1).max(1);
        let op = self.store.begin_op()?;
        for id in std::mem::take(&mut self.continuation) {
            self.store.delete(id)?;
        }
        // Last page first, so each page knows the next one.
        let chunks: Vec<Vec<Entry>> = data.chunks(per_page).map(<[Entry]>::to_vec).collect();
        let mut next: Option<PageId> = None;
        let mut pages = Vec::new();
        for (i, chunk) in chunks.into_iter().enumerate().rev() {
            let mut entries = chunk;
            if let Some(n) = next {
                entries.push(pair(NEXT, i as u64, n, 0)?);
            }
            let id = self.store.create(0, entries)?;
            pages.push(id);
            next = Some(id);
        }
        pages.reverse();
        let old = self.store.get(self.head)?;
        let new = head_entries(self.root, self.height, next)?;
        let changes = diff(&old.entries, &new);
        if !changes.is_empty() {
            self.store.modify(self.head, 0, &changes)?;
        }
        self.store.set_meta(self.tree_meta())?;
        self.store.commit_op(op)?;
        self.continuation = pages;
        Ok(())
    }

    /// The FOR-tree `store` keeps since its last checkpoint. `config` must
    /// have the M it was built with (checked against the stored nodes by
    /// [`Fortree::check`]); the other parameters may change.
    pub fn open(store: S, config: FortreeConfig) -> Result<Self> {
        config.verify()?;
        let meta = store.meta();
        let head = meta.root.ok_or_else(|| {
            Error::invalid("the store holds no FOR-tree (no head page): create one first")
        })?;
        let page = store.get(head)?;
        let mut format = None;
        let mut root = None;
        let mut next = None;
        for e in &page.entries {
            match unpair(head, e)? {
                (FORMAT, a, b) => format = Some((a, b)),
                (ROOT, a, b) => root = Some((a, b)),
                (NEXT, a, _) => next = Some(a),
                (k, _, _) => {
                    return Err(Error::corrupt(
                        Some(head),
                        format!("FOR-tree head page: unexpected entry kind {k}"),
                    ))
                }
            }
        }
        match format {
            Some((MAGIC, VERSION)) => {}
            Some((MAGIC, v)) => {
                return Err(Error::unsupported_version(
                    "FOR-tree head page",
                    v,
                    VERSION,
                    VERSION,
                ))
            }
            _ => {
                return Err(Error::invalid(
                    "the store's root is not a FOR-tree head page (is it another index?)",
                ))
            }
        }
        let mut t = Self::assemble(store, config, head);
        if let Some((r, h)) = root {
            t.root = Some(r);
            t.height = u16::try_from(h)
                .map_err(|_| Error::corrupt(Some(head), format!("height {h} out of range")))?;
        }
        if (t.root.is_some()) != (meta.height > 0) || u64::from(t.height) != u64::from(meta.height)
        {
            return Err(Error::corrupt(
                Some(head),
                format!(
                    "FOR-tree head page (height {}) disagrees with the store metadata (height {})",
                    t.height, meta.height
                ),
            ));
        }
        t.records = meta.records;
        let mut ont: BTreeMap<PageId, OntEntry> = BTreeMap::new();
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = next.take() {
            if !seen.insert(id) {
                return Err(Error::corrupt(Some(id), "FOR-tree head pages form a cycle"));
            }
            t.continuation.push(id);
            let page = t.store.get(id)?;
            for e in &page.entries {
                match unpair(id, e)? {
                    (LINK, p, o) => ont.entry(p).or_default().overflow.push(o),
                    (COUNT, p, c) => ont.entry(p).or_default().accesses = c,
                    (NEXT, n, _) => next = Some(n),
                    (k, _, _) => {
                        return Err(Error::corrupt(
                            Some(id),
                            format!("FOR-tree continuation page: unexpected entry kind {k}"),
                        ))
                    }
                }
            }
        }
        ont.retain(|_, e| !e.overflow.is_empty());
        t.ont = ont;
        Ok(t)
    }
}
