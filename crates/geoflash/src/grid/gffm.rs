//! GFFM's buckets: one page per bucket, updated in place through a
//! hot/cold [`HotCold`] buffer whose dirty pages reach the device only in
//! batch writes of the cold list (Algorithms 4–5). A bucket reference is the
//! page id of its bucket page.
use std::collections::HashSet;

use crate::storage::{PageDevice, PageId};
use crate::{Error, Result};

use super::buffer::{BufferStats, HotCold, PageValue};
use super::codec::{self, PageKind, Reader, Writer};
use super::{BucketIo, BucketLayer, DeleteOutcome, GridOptions, GridPoint, InsertOutcome};

/// Bytes of one point in a bucket page.
const POINT_BYTES: usize = 24;

/// A decoded bucket page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BucketPage(pub Vec<GridPoint>);

impl PageValue for BucketPage {
    fn encode(&self, page_size: usize) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        w.len(self.0.len())?;
        for p in &self.0 {
            w.f64(p.x);
            w.f64(p.y);
            w.u64(p.id);
        }
        codec::frame(PageKind::Bucket, &w.buf, page_size)
    }

    fn decode(id: PageId, page: &[u8]) -> Result<Self> {
        let p = codec::unframe_kind(id, page, PageKind::Bucket)?;
        let mut r = Reader::new(p, Some(id));
        let n = r.count(POINT_BYTES)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(GridPoint {
                x: r.f64()?,
                y: r.f64()?,
                id: r.u64()?,
            });
        }
        Ok(BucketPage(v))
    }
}

/// GFFM's bucket layer (see the module docs).
#[derive(Debug)]
pub struct InPlaceBuckets {
    buf: HotCold<BucketPage>,
    cap: usize,
}

impl BucketLayer for InPlaceBuckets {
    const KIND: u8 = 1;
    const NAME: &'static str = "gffm";
    const BLIND_UPDATES: bool = false;

    fn new(opts: &GridOptions, page_size: usize) -> Result<Self> {
        let cap = codec::slots(page_size, POINT_BYTES, "points per bucket")?;
        Ok(InPlaceBuckets {
            buf: HotCold::new(opts.bucket_hot_pages, opts.cold_pages)?,
            cap,
        })
    }

    fn capacity(&self) -> usize {
        self.cap
    }

    fn pages_of(&self, _b: u64) -> usize {
        1
    }

    fn size_hint(&self, b: u64) -> usize {
        // A resident page is exact; otherwise a grid file's typical fill (ln 2).
        self.buf.peek(b).map_or(self.cap * 69 / 100, |p| p.0.len())
    }

    fn rewrite(
        &mut self,
        io: &mut BucketIo<'_>,
        old: &[u64],
        pieces: Vec<Vec<GridPoint>>,
    ) -> Result<Vec<u64>> {
        // All or nothing: every page the pieces need, and room for them in
        // the buffer, before any bucket changes. A refusal (the device
        // full, a failing batch write of the cold list) changes nothing.
        let n = pieces.len();
        let mut fresh = Vec::with_capacity(n.saturating_sub(old.len()));
        let undo = |alloc: &mut super::Alloc, fresh: &[u64], e: Error| {
            fresh.iter().for_each(|&p| alloc.free(p));
            Err(e)
        };
        for _ in old.len()..n {
            match io.alloc.alloc() {
                Ok(p) => fresh.push(p),
                Err(e) => return undo(io.alloc, &fresh, e),
            }
        }
        let ids: Vec<u64> = old.iter().take(n).chain(&fresh).copied().collect();
        if let Err(e) = self.buf.reserve_for(io.dev, &ids) {
            return undo(io.alloc, &fresh, e);
        }
        for (&id, piece) in ids.iter().zip(pieces) {
            self.buf.stage(id, BucketPage(piece));
        }
        for &p in old.iter().skip(n) {
            self.buf.remove(p);
            io.alloc.free(p);
        }
        Ok(ids)
    }

    fn read_many(&mut self, dev: &dyn PageDevice, bs: &[u64]) -> Result<Vec<Vec<GridPoint>>> {
        Ok(self
            .buf
            .fetch_many(dev, bs)?
            .into_iter()
            .map(|p| p.0.clone())
            .collect())
    }

    fn read_one(&mut self, dev: &dyn PageDevice, b: u64) -> Result<Vec<GridPoint>> {
        Ok(self.buf.fetch(dev, b)?.0.clone())
    }

    fn insert(&mut self, io: &mut BucketIo<'_>, b: u64, p: GridPoint) -> Result<InsertOutcome> {
        let page = self.buf.fetch(io.dev, b)?;
        if page.0.iter().any(|q| q.at(p.x, p.y)) {
            return Ok(InsertOutcome::Duplicate);
        }
        if page.0.len() >= self.cap {
            let mut all = page.0.clone();
            all.push(p);
            return Ok(InsertOutcome::Full(all));
        }
        drop(page);
        self.buf.update(io.dev, b, |bp| bp.0.push(p))?;
        Ok(InsertOutcome::Done)
    }

    fn delete(
        &mut self,
        io: &mut BucketIo<'_>,
        b: u64,
        p: GridPoint,
    ) -> Result<(DeleteOutcome, usize)> {
        let page = self.buf.fetch(io.dev, b)?;
        let Some(pos) = page.0.iter().position(|q| q.at(p.x, p.y) && q.id == p.id) else {
            return Ok((DeleteOutcome::NotFound, page.0.len()));
        };
        drop(page);
        let left = self.buf.update(io.dev, b, |bp| {
            bp.0.swap_remove(pos);
            bp.0.len()
        })?;
        Ok((DeleteOutcome::Removed, left))
    }

    fn flush(&mut self, dev: &dyn PageDevice) -> Result<()> {
        self.buf.flush_all(dev)
    }

    fn encode_meta(&self, w: &mut Writer) -> Result<()> {
        w.len(self.cap)
    }

    fn open(
        opts: &GridOptions,
        dev: &dyn PageDevice,
        r: &mut Reader<'_>,
        live: &HashSet<u64>,
    ) -> Result<(Self, Vec<PageId>)> {
        let layer = Self::new(opts, dev.page_size())?;
        let cap = r.u32()? as usize;
        if cap != layer.cap {
            return Err(Error::corrupt(
                Some(0),
                format!(
                    "GFFM bucket capacity {cap} recorded, {} expected",
                    layer.cap
                ),
            ));
        }
        let mut pages: Vec<PageId> = live.iter().copied().collect();
        pages.sort_unstable();
        Ok((layer, pages))
    }

    fn buffer_stats(&self) -> BufferStats {
        self.buf.stats()
    }

    fn set_tier(&mut self, dev: &dyn PageDevice, b: u64, tier: crate::storage::Tier) -> Result<()> {
        self.buf.set_tier(dev, b, tier).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_page_round_trip_and_corruption() {
        let b = BucketPage(vec![
            GridPoint {
                x: 1.0,
                y: -2.0,
                id: 7,
            },
            GridPoint {
                x: 0.5,
                y: 3.0,
                id: 9,
            },
        ]);
        let enc = b.encode(512).unwrap();
        assert_eq!(BucketPage::decode(4, &enc).unwrap(), b);
        let mut bad = enc.clone();
        bad[20] ^= 1;
        assert!(BucketPage::decode(4, &bad).is_err());
        // A count larger than the payload is refused before allocation.
        let mut w = Writer::default();
        w.u32(u32::MAX);
        let p = codec::frame(PageKind::Bucket, &w.buf, 512).unwrap();
        assert!(BucketPage::decode(4, &p).is_err());
    }
}
