//! The running operation's changes (in the compact log format, the changes
//! of the held group of operations), kept in memory until `commit_op` (the
//! group's logging) and then written as its log records, **coalesced per
//! page** (changes of later operations coalesce as those of one do):
//!
//! - a node created in the operation is one NEW record with its final
//!   content (the operation's later changes applied);
//! - the changes of a modified node are one MOD record holding the last
//!   change of each key, in key order (changes of different keys commute
//!   and the last change of a key decides it, so replaying the record gives
//!   the node the arrival-ordered list gives);
//! - a node deleted in the operation needs no MOD before its DEL; one
//!   created and deleted in it keeps a NEW without entries before the DEL
//!   (restart learns the page was allocated, then releases it).
//!
//! Records of different pages are independent at replay, so pages keep the
//! order of their first change. The table keeps the paper's lists (arrival
//! order, repeats); only the log is coalesced. Without this, an operation
//! that rewrites a node many times (a split cascade, a condense with
//! reinsertions, the Hilbert R-tree's redistributions) logs each change and
//! can need more log than the log holds beside the survivors.
use std::collections::BTreeMap;

use super::table;
use crate::page::Node;
use crate::storage::PageId;
use crate::store::log::{PayloadCodec, Record, RecordKind};
use crate::store::{EntryChange, OpId};

/// What one operation did to one page.
#[derive(Debug, Clone, Default)]
struct PageStage {
    /// Created in the operation: the node with its later changes applied.
    new: Option<Node>,
    /// Level given by the MOD changes.
    level: u16,
    /// Net change per key of a page not created in the operation.
    changes: BTreeMap<u64, EntryChange>,
    /// Deleted in the operation (with the level its DEL record carries).
    del: Option<u16>,
}

/// The running operation's changes per page (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Staging {
    order: Vec<PageId>,
    pages: crate::page_id::IdMap<PageStage>,
    /// Entry changes staged (created entries count one each, a deletion one).
    changes: usize,
}

impl Staging {
    /// Forgets everything (a new operation).
    pub fn clear(&mut self) {
        self.order.clear();
        self.pages.clear();
        self.changes = 0;
    }

    /// Entry changes staged since the last [`Self::clear`] (bounds the size
    /// of a held group's records).
    pub fn changes(&self) -> usize {
        self.changes
    }

    /// Whether the operation changed page `id`.
    pub fn touches(&self, id: PageId) -> bool {
        self.pages.contains_key(&id)
    }

    fn page(&mut self, id: PageId) -> &mut PageStage {
        let order = &mut self.order;
        self.pages.entry(id).or_insert_with(|| {
            order.push(id);
            PageStage::default()
        })
    }

    /// Node `id` was created with `node`.
    pub fn create(&mut self, id: PageId, node: &Node) {
        self.changes += node.entries.len().max(1);
        let p = self.page(id);
        *p = PageStage {
            new: Some(node.clone()),
            level: node.level,
            ..PageStage::default()
        };
    }

    /// Entry-level `changes` of node `id` at `level`.
    pub fn modify(&mut self, id: PageId, level: u16, changes: &[EntryChange]) {
        self.changes += changes.len();
        let p = self.page(id);
        if let Some(n) = p.new.as_mut() {
            table::apply(n, changes.iter().copied());
            return;
        }
        p.level = level;
        for c in changes {
            let key = match c {
                EntryChange::Upsert(e) => e.key,
                EntryChange::Remove(k) => *k,
            };
            p.changes.insert(key, *c);
        }
    }

    /// Node `id` (at `level`) was deleted.
    pub fn delete(&mut self, id: PageId, level: u16) {
        self.changes += 1;
        let p = self.page(id);
        p.changes.clear();
        if let Some(n) = p.new.as_mut() {
            n.entries.clear();
        }
        p.del = Some(level);
    }

    /// The operation's page records, coalesced, in first-change order.
    pub fn records(&self, op: OpId, codec: PayloadCodec) -> Vec<Record> {
        let mut out = Vec::with_capacity(self.order.len());
        for &id in &self.order {
            let Some(p) = self.pages.get(&id) else {
                continue;
            };
            if let Some(n) = &p.new {
                out.push(Record::new(
                    RecordKind::New,
                    op,
                    id,
                    codec.encode_new(n.level, &n.entries),
                ));
            } else if !p.changes.is_empty() {
                let changes: Vec<EntryChange> = p.changes.values().copied().collect();
                out.push(Record::new(
                    RecordKind::Mod,
                    op,
                    id,
                    codec.encode_mod(p.level, &changes),
                ));
            }
            if let Some(level) = p.del {
                out.push(Record::new(
                    RecordKind::Del,
                    op,
                    id,
                    codec.encode_del(level),
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::Rect;
    use crate::page::Entry;
    use crate::store::log::PayloadEncoding;

    const FIXED: PayloadCodec = PayloadCodec::new(PayloadEncoding::Fixed);

    fn e(k: u64, x: f64) -> Entry {
        Entry {
            key: k,
            rect: Rect::new(x, x, x + 1.0, x + 1.0).unwrap(),
            payload: 0,
        }
    }

    fn kinds(s: &Staging) -> Vec<(RecordKind, PageId)> {
        s.records(7, FIXED)
            .iter()
            .map(|r| (r.kind, r.page))
            .collect()
    }

    #[test]
    fn changes_coalesce_per_page_and_replay_to_the_same_node() {
        let mut s = Staging::default();
        let ch = [
            vec![EntryChange::Upsert(e(5, 1.0)), EntryChange::Remove(2)],
            vec![
                EntryChange::Upsert(e(2, 4.0)),
                EntryChange::Upsert(e(5, 3.0)),
            ],
            vec![EntryChange::Remove(9), EntryChange::Upsert(e(5, 6.0))],
        ];
        for c in &ch {
            s.modify(4, 1, c);
        }
        s.create(
            8,
            &Node {
                level: 0,
                entries: vec![e(1, 0.0)],
            },
        );
        s.modify(8, 0, &[EntryChange::Upsert(e(3, 2.0))]);
        s.modify(6, 0, &[EntryChange::Remove(1)]);
        s.delete(6, 0);
        assert_eq!(
            kinds(&s),
            vec![
                (RecordKind::Mod, 4),
                (RecordKind::New, 8),
                (RecordKind::Del, 6)
            ]
        );
        let recs = s.records(7, FIXED);
        assert!(recs.iter().all(|r| r.op == 7));
        // The MOD replays to what the arrival-ordered list gives.
        let base = Node {
            level: 1,
            entries: vec![e(1, 0.0), e(2, 0.0), e(9, 0.0)],
        };
        let mut want = base.clone();
        for c in &ch {
            table::apply(&mut want, c.iter().copied());
        }
        let (level, changes) = FIXED.decode_mod(&recs[0]).unwrap();
        assert_eq!((level, changes.len()), (1, 3));
        let mut got = base;
        table::apply(&mut got, changes);
        assert_eq!(got, want);
        // The NEW holds the final node.
        let (_, entries) = FIXED.decode_new(&recs[1]).unwrap();
        assert_eq!(entries, vec![e(1, 0.0), e(3, 2.0)]);
        // Created and deleted: an empty NEW, then the DEL.
        s.create(
            10,
            &Node {
                level: 0,
                entries: vec![e(1, 0.0)],
            },
        );
        s.delete(10, 0);
        let recs = s.records(7, FIXED);
        let tail: Vec<_> = recs.iter().skip(3).map(|r| (r.kind, r.page)).collect();
        assert_eq!(tail, vec![(RecordKind::New, 10), (RecordKind::Del, 10)]);
        assert!(FIXED.decode_new(&recs[3]).unwrap().1.is_empty());
        s.clear();
        assert!(s.records(7, FIXED).is_empty());
    }
}
