//! Grid arrays with linear scales: the root directory (in memory, cells hold
//! sub-directory page ids) and the sub-directories (one page each, cells
//! hold bucket references) share this one type.
//!
//! Cell `(c, r)` of a grid covers `[xs[c-1], xs[c]) × [ys[r-1], ys[r])`, the
//! outer cells extending to the region's edges (the region's maximum is
//! inclusive). Several cells may hold the same reference; the cells holding a
//! reference always form a box ([`CellBox`]), the grid file's *region*.
use crate::geom::{Point, Rect};
use crate::storage::PageId;
use crate::{Error, Result};

use super::codec::{self, PageKind, Reader, Writer};

/// A half-open box of cells `[c0, c1) × [r0, r1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellBox {
    /// First column.
    pub c0: usize,
    /// One past the last column.
    pub c1: usize,
    /// First row.
    pub r0: usize,
    /// One past the last row.
    pub r1: usize,
}

impl CellBox {
    /// Start and end along `axis` (0 = x/columns, 1 = y/rows).
    pub fn span(&self, axis: usize) -> (usize, usize) {
        if axis == 0 {
            (self.c0, self.c1)
        } else {
            (self.r0, self.r1)
        }
    }

    fn set_span(&mut self, axis: usize, a: usize, b: usize) {
        if axis == 0 {
            self.c0 = a;
            self.c1 = b;
        } else {
            self.r0 = a;
            self.r1 = b;
        }
    }

    /// Adjusts the box after column/row `c` of `axis` was split in two.
    pub fn widen_after_insert(&mut self, axis: usize, c: usize) {
        let (a, b) = self.span(axis);
        if a > c {
            self.set_span(axis, a + 1, b + 1);
        } else if b > c {
            self.set_span(axis, a, b + 1);
        }
    }

    /// Splits the box at boundary `i` of `axis` (between cells `i` and `i + 1`).
    pub fn split(&self, axis: usize, i: usize) -> (CellBox, CellBox) {
        let (a, b) = self.span(axis);
        let mut lo = *self;
        let mut hi = *self;
        lo.set_span(axis, a, i + 1);
        hi.set_span(axis, i + 1, b);
        (lo, hi)
    }
}

/// A grid array with its linear scales over a region.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// The region the grid covers.
    pub region: Rect,
    /// Interior boundaries along x, strictly increasing.
    pub xs: Vec<f64>,
    /// Interior boundaries along y, strictly increasing.
    pub ys: Vec<f64>,
    /// References, row-major: cell `(c, r)` at `r * nx + c`.
    pub cells: Vec<u64>,
}

impl Grid {
    /// A one-cell grid over `region` holding `v`.
    pub fn single(region: Rect, v: u64) -> Grid {
        Grid {
            region,
            xs: Vec::new(),
            ys: Vec::new(),
            cells: vec![v],
        }
    }

    /// Columns.
    pub fn nx(&self) -> usize {
        self.xs.len() + 1
    }

    /// Rows.
    pub fn ny(&self) -> usize {
        self.ys.len() + 1
    }

    /// The scale of `axis`.
    pub fn scale(&self, axis: usize) -> &[f64] {
        if axis == 0 {
            &self.xs
        } else {
            &self.ys
        }
    }

    /// Cells along `axis`.
    pub fn n(&self, axis: usize) -> usize {
        self.scale(axis).len() + 1
    }

    /// Reference of cell `(c, r)`.
    pub fn cell(&self, c: usize, r: usize) -> Result<u64> {
        self.cells
            .get(r * self.nx() + c)
            .copied()
            .ok_or_else(|| Error::corrupt(None, format!("grid cell ({c}, {r}) out of range")))
    }

    fn set(&mut self, c: usize, r: usize, v: u64) {
        let nx = self.nx();
        if let Some(x) = self.cells.get_mut(r * nx + c) {
            *x = v;
        }
    }

    /// Sets every cell of `b` to `v`.
    pub fn fill(&mut self, b: &CellBox, v: u64) {
        for r in b.r0..b.r1 {
            for c in b.c0..b.c1 {
                self.set(c, r, v);
            }
        }
    }

    /// Cell index along `axis` of coordinate `v`.
    pub fn locate_axis(&self, axis: usize, v: f64) -> usize {
        self.scale(axis).partition_point(|b| *b <= v)
    }

    /// Cell `(c, r)` holding point `(x, y)`.
    pub fn locate(&self, x: f64, y: f64) -> (usize, usize) {
        (self.locate_axis(0, x), self.locate_axis(1, y))
    }

    /// Reference of the cell holding `(x, y)`.
    pub fn lookup(&self, x: f64, y: f64) -> Result<u64> {
        let (c, r) = self.locate(x, y);
        self.cell(c, r)
    }

    /// Lower and upper coordinate of cells `a..b` along `axis`.
    fn extent(&self, axis: usize, a: usize, b: usize) -> (f64, f64) {
        let s = self.scale(axis);
        let (rmin, rmax) = if axis == 0 {
            (self.region.min_x(), self.region.max_x())
        } else {
            (self.region.min_y(), self.region.max_y())
        };
        let lo = if a == 0 {
            rmin
        } else {
            s.get(a - 1).copied().unwrap_or(rmax)
        };
        let hi = s.get(b.saturating_sub(1)).copied().unwrap_or(rmax);
        (lo, hi)
    }

    /// The rectangle a box of cells covers.
    pub fn box_rect(&self, b: &CellBox) -> Rect {
        let (x0, x1) = self.extent(0, b.c0, b.c1);
        let (y0, y1) = self.extent(1, b.r0, b.r1);
        // Scale boundaries lie inside the valid region: valid.
        Rect::from_valid(x0, y0, x1.max(x0), y1.max(y0))
    }

    /// The box of cells that `r` intersects (`None` if it misses the region).
    pub fn cells_of(&self, r: &Rect) -> Option<CellBox> {
        let q = r.intersection(&self.region)?;
        Some(CellBox {
            c0: self.locate_axis(0, q.min_x()),
            c1: self.locate_axis(0, q.max_x()) + 1,
            r0: self.locate_axis(1, q.min_y()),
            r1: self.locate_axis(1, q.max_y()) + 1,
        })
    }

    /// Distinct references in box `b`, in row-major order of first appearance.
    pub fn refs_in(&self, b: &CellBox) -> Vec<u64> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in b.r0..b.r1.min(self.ny()) {
            for c in b.c0..b.c1.min(self.nx()) {
                if let Ok(v) = self.cell(c, r) {
                    if seen.insert(v) {
                        out.push(v);
                    }
                }
            }
        }
        out
    }

    /// Every distinct reference with its box.
    pub fn boxes(&self) -> Vec<(u64, CellBox)> {
        let mut order = Vec::new();
        let mut map: std::collections::HashMap<u64, CellBox> = std::collections::HashMap::new();
        let nx = self.nx();
        for (i, &v) in self.cells.iter().enumerate() {
            let (c, r) = (i % nx, i / nx);
            map.entry(v)
                .and_modify(|b| {
                    b.c0 = b.c0.min(c);
                    b.c1 = b.c1.max(c + 1);
                    b.r0 = b.r0.min(r);
                    b.r1 = b.r1.max(r + 1);
                })
                .or_insert_with(|| {
                    order.push(v);
                    CellBox {
                        c0: c,
                        c1: c + 1,
                        r0: r,
                        r1: r + 1,
                    }
                });
        }
        order
            .into_iter()
            .filter_map(|v| map.get(&v).map(|b| (v, *b)))
            .collect()
    }

    /// The box of cells holding `v`.
    pub fn find_box(&self, v: u64) -> Result<CellBox> {
        let nx = self.nx();
        let mut b: Option<CellBox> = None;
        for (i, _) in self.cells.iter().enumerate().filter(|(_, &x)| x == v) {
            let (c, r) = (i % nx, i / nx);
            let nb = match b {
                None => CellBox {
                    c0: c,
                    c1: c + 1,
                    r0: r,
                    r1: r + 1,
                },
                Some(b) => CellBox {
                    c0: b.c0.min(c),
                    c1: b.c1.max(c + 1),
                    r0: b.r0.min(r),
                    r1: b.r1.max(r + 1),
                },
            };
            b = Some(nb);
        }
        b.ok_or_else(|| Error::corrupt(None, format!("grid holds no cell referring to {v}")))
    }

    /// Inserts boundary `v` along `axis`, splitting the cell column/row that
    /// holds it; returns the index of the split column/row (its lower half).
    /// `v` must lie strictly above the column's lower edge.
    pub fn insert_boundary(&mut self, axis: usize, v: f64) -> Result<usize> {
        let c = self.locate_axis(axis, v);
        let (lo, _) = self.extent(axis, c, c + 1);
        if v <= lo || self.scale(axis).contains(&v) {
            return Err(Error::invalid(format!(
                "boundary {v} does not split a cell along axis {axis}"
            )));
        }
        let (nx, ny) = (self.nx(), self.ny());
        let mut cells = Vec::with_capacity(self.cells.len() + if axis == 0 { ny } else { nx });
        if axis == 0 {
            for r in 0..ny {
                for cc in 0..nx {
                    let x = self.cell(cc, r)?;
                    cells.push(x);
                    if cc == c {
                        cells.push(x);
                    }
                }
            }
            self.xs.insert(c, v);
        } else {
            for r in 0..ny {
                for _ in 0..(1 + usize::from(r == c)) {
                    for cc in 0..nx {
                        cells.push(self.cell(cc, r)?);
                    }
                }
            }
            self.ys.insert(c, v);
        }
        self.cells = cells;
        Ok(c)
    }

    /// True if boundary `i` of `axis` separates no region (both sides hold
    /// the same reference in every row/column).
    pub fn redundant(&self, axis: usize, i: usize) -> bool {
        let (nx, ny) = (self.nx(), self.ny());
        if axis == 0 {
            (0..ny).all(|r| self.cell(i, r).ok() == self.cell(i + 1, r).ok())
        } else {
            (0..nx).all(|c| self.cell(c, i).ok() == self.cell(c, i + 1).ok())
        }
    }

    /// Removes boundary `i` of `axis` (its two sides must be equal).
    fn remove_boundary(&mut self, axis: usize, i: usize) {
        let (nx, ny) = (self.nx(), self.ny());
        let mut cells = Vec::with_capacity(self.cells.len());
        for r in 0..ny {
            if axis == 1 && r == i + 1 {
                continue;
            }
            for c in 0..nx {
                if axis == 0 && c == i + 1 {
                    continue;
                }
                cells.push(self.cells.get(r * nx + c).copied().unwrap_or(0));
            }
        }
        self.cells = cells;
        if axis == 0 {
            self.xs.remove(i);
        } else {
            self.ys.remove(i);
        }
    }

    /// Removes every boundary that no longer separates regions; returns how many.
    pub fn remove_redundant(&mut self) -> usize {
        let mut removed = 0;
        for axis in 0..2 {
            let mut i = 0;
            while i < self.scale(axis).len() {
                if self.redundant(axis, i) {
                    self.remove_boundary(axis, i);
                    removed += 1;
                } else {
                    i += 1;
                }
            }
        }
        removed
    }

    /// Splits the grid at boundary `i` of `axis` into the lower and upper grid.
    pub fn split_at(&self, axis: usize, i: usize) -> Result<(Grid, Grid)> {
        let v = *self
            .scale(axis)
            .get(i)
            .ok_or_else(|| Error::invalid(format!("no boundary {i} on axis {axis}")))?;
        let (nx, ny) = (self.nx(), self.ny());
        let mut lo = self.clone();
        let mut hi = self.clone();
        let (mut lc, mut hc) = (Vec::new(), Vec::new());
        for r in 0..ny {
            for c in 0..nx {
                let x = self.cell(c, r)?;
                let k = if axis == 0 { c } else { r };
                if k <= i {
                    lc.push(x);
                } else {
                    hc.push(x);
                }
            }
        }
        lo.cells = lc;
        hi.cells = hc;
        if axis == 0 {
            lo.xs = self.xs.get(..i).unwrap_or_default().to_vec();
            hi.xs = self.xs.get(i + 1..).unwrap_or_default().to_vec();
            let g = &self.region;
            lo.region = Rect::new(g.min_x(), g.min_y(), v, g.max_y())?;
            hi.region = Rect::new(v, g.min_y(), g.max_x(), g.max_y())?;
        } else {
            lo.ys = self.ys.get(..i).unwrap_or_default().to_vec();
            hi.ys = self.ys.get(i + 1..).unwrap_or_default().to_vec();
            let g = &self.region;
            lo.region = Rect::new(g.min_x(), g.min_y(), g.max_x(), v)?;
            hi.region = Rect::new(g.min_x(), v, g.max_x(), g.max_y())?;
        }
        Ok((lo, hi))
    }

    /// Merges `lo` and `hi`, adjacent along `axis` (`lo` below) over the same
    /// extent of the other axis, into one grid whose scales refine both.
    pub fn merge(lo: &Grid, hi: &Grid, axis: usize) -> Result<Grid> {
        let other = 1 - axis;
        let mut s_other: Vec<f64> = lo
            .scale(other)
            .iter()
            .chain(hi.scale(other))
            .copied()
            .collect();
        s_other.sort_by(f64::total_cmp);
        s_other.dedup();
        let edge = if axis == 0 {
            lo.region.max_x()
        } else {
            lo.region.max_y()
        };
        let mut s_axis: Vec<f64> = lo.scale(axis).to_vec();
        s_axis.push(edge);
        s_axis.extend_from_slice(hi.scale(axis));
        let region = lo.region.union(&hi.region);
        let (xs, ys) = if axis == 0 {
            (s_axis, s_other)
        } else {
            (s_other, s_axis)
        };
        let mut g = Grid {
            region,
            xs,
            ys,
            cells: Vec::new(),
        };
        let (nx, ny) = (g.nx(), g.ny());
        let mut cells = Vec::with_capacity(nx * ny);
        for r in 0..ny {
            for c in 0..nx {
                let rect = g.box_rect(&CellBox {
                    c0: c,
                    c1: c + 1,
                    r0: r,
                    r1: r + 1,
                });
                let (x, y) = (rect.min_x(), rect.min_y());
                let src = if (if axis == 0 { x } else { y }) < edge {
                    lo
                } else {
                    hi
                };
                cells.push(src.lookup(x, y)?);
            }
        }
        g.cells = cells;
        Ok(g)
    }

    /// Bytes of the encoded grid.
    pub fn encoded_len(&self) -> usize {
        32 + 4 * 3 + 8 * (self.xs.len() + self.ys.len() + self.cells.len())
    }

    /// Appends the encoding to `w`.
    pub fn encode_into(&self, w: &mut Writer) -> Result<()> {
        let r = &self.region;
        for v in [r.min_x(), r.min_y(), r.max_x(), r.max_y()] {
            w.f64(v);
        }
        w.len(self.xs.len())?;
        self.xs.iter().for_each(|v| w.f64(*v));
        w.len(self.ys.len())?;
        self.ys.iter().for_each(|v| w.f64(*v));
        w.len(self.cells.len())?;
        self.cells.iter().for_each(|v| w.u64(*v));
        Ok(())
    }

    /// Decodes and validates a grid (`page` names the page in errors).
    pub fn decode_from(r: &mut Reader<'_>, page: Option<PageId>) -> Result<Grid> {
        let bad = |m: String| Error::corrupt(page, m);
        let (a, b, c, d) = (r.f64()?, r.f64()?, r.f64()?, r.f64()?);
        let region = Rect::new(a, b, c, d).map_err(|e| bad(format!("grid region: {e}")))?;
        let scale = |r: &mut Reader<'_>, lo: f64, hi: f64| -> Result<Vec<f64>> {
            let n = r.count(8)?;
            let mut s = Vec::with_capacity(n);
            for _ in 0..n {
                s.push(r.f64()?);
            }
            let ordered = s.windows(2).all(|w| w[0] < w[1]);
            if !ordered || s.first().is_some_and(|v| *v <= lo) || s.last().is_some_and(|v| *v > hi)
            {
                return Err(bad(
                    "grid scale not strictly increasing inside its region".into()
                ));
            }
            Ok(s)
        };
        let xs = scale(r, region.min_x(), region.max_x())?;
        let ys = scale(r, region.min_y(), region.max_y())?;
        let n = r.count(8)?;
        if n != (xs.len() + 1) * (ys.len() + 1) {
            return Err(bad(format!(
                "grid of {} x {} cells holds {n} references",
                xs.len() + 1,
                ys.len() + 1
            )));
        }
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            cells.push(r.u64()?);
        }
        let g = Grid {
            region,
            xs,
            ys,
            cells,
        };
        // Every reference must cover exactly its box.
        for (v, b) in g.boxes() {
            let k = (b.c1 - b.c0) * (b.r1 - b.r0);
            let inside = (b.r0..b.r1)
                .flat_map(|r| (b.c0..b.c1).map(move |c| (c, r)))
                .filter(|&(c, r)| g.cell(c, r).ok() == Some(v))
                .count();
            if inside != k {
                return Err(bad(format!("cells referring to {v} do not form a box")));
            }
        }
        Ok(g)
    }

    /// Mindist from `p` to box `b`.
    pub fn box_mindist(&self, b: &CellBox, p: &Point) -> f64 {
        self.box_rect(b).min_dist_point(p)
    }
}

/// A sub-directory page.
#[derive(Debug, Clone, PartialEq)]
pub struct SubDir(pub Grid);

impl super::buffer::PageValue for SubDir {
    fn encode(&self, page_size: usize) -> Result<Vec<u8>> {
        let mut w = Writer::default();
        self.0.encode_into(&mut w)?;
        codec::frame(PageKind::SubDir, &w.buf, page_size)
    }
    fn decode(id: PageId, page: &[u8]) -> Result<Self> {
        let p = codec::unframe_kind(id, page, PageKind::SubDir)?;
        let mut r = Reader::new(p, Some(id));
        let g = Grid::decode_from(&mut r, Some(id))?;
        if !r.at_end() {
            return Err(Error::corrupt(
                Some(id),
                "trailing bytes after a sub-directory",
            ));
        }
        Ok(SubDir(g))
    }
}

#[cfg(test)]
mod tests {
    use super::super::buffer::PageValue;
    use super::*;

    fn unit() -> Rect {
        Rect::new(0.0, 0.0, 1.0, 1.0).unwrap()
    }

    #[test]
    fn insert_split_merge_and_redundant_boundaries() {
        let mut g = Grid::single(unit(), 7);
        let c = g.insert_boundary(0, 0.5).unwrap();
        assert_eq!(c, 0);
        g.fill(
            &CellBox {
                c0: 1,
                c1: 2,
                r0: 0,
                r1: 1,
            },
            8,
        );
        let r = g.insert_boundary(1, 0.25).unwrap();
        assert_eq!(r, 0);
        assert_eq!(g.cells, vec![7, 8, 7, 8]);
        assert_eq!(g.lookup(0.7, 0.9).unwrap(), 8);
        assert_eq!(g.lookup(1.0, 1.0).unwrap(), 8);
        assert_eq!(
            g.find_box(7).unwrap(),
            CellBox {
                c0: 0,
                c1: 1,
                r0: 0,
                r1: 2
            }
        );
        assert!(g.insert_boundary(0, 0.5).is_err());
        assert!(g.insert_boundary(0, 0.0).is_err());
        assert_eq!(g.remove_redundant(), 1); // the y boundary separates nothing
        assert_eq!(g.ys.len(), 0);
        let (lo, hi) = g.split_at(0, 0).unwrap();
        assert_eq!(lo.cells, vec![7]);
        assert_eq!(hi.cells, vec![8]);
        assert_eq!(lo.region.max_x(), 0.5);
        let m = Grid::merge(&lo, &hi, 0).unwrap();
        assert_eq!(m, g);
        let enc = SubDir(g.clone()).encode(512).unwrap();
        assert_eq!(SubDir::decode(1, &enc).unwrap().0, g);
        assert!(g.encoded_len() >= 16);
    }

    /// A grid over `region` with one boundary at `y`: bucket `below` under
    /// it, bucket `above` over it.
    fn split_at_y(region: Rect, y: f64, below: u64, above: u64) -> Grid {
        let mut g = Grid::single(region, below);
        g.insert_boundary(1, y).unwrap();
        let upper = CellBox {
            c0: 0,
            c1: 1,
            r0: 1,
            r1: 2,
        };
        g.fill(&upper, above);
        g
    }

    #[test]
    fn merge_refines_the_other_axis() {
        let a = split_at_y(Rect::new(0.0, 0.0, 0.5, 1.0).unwrap(), 0.3, 1, 2);
        let b = split_at_y(Rect::new(0.5, 0.0, 1.0, 1.0).unwrap(), 0.6, 3, 4);
        let m = Grid::merge(&a, &b, 0).unwrap();
        assert_eq!(m.ys, vec![0.3, 0.6]);
        for (x, y) in [
            (0.1, 0.1),
            (0.1, 0.5),
            (0.1, 0.9),
            (0.7, 0.1),
            (0.7, 0.5),
            (0.7, 0.9),
        ] {
            let want = if x < 0.5 {
                a.lookup(x, y).unwrap()
            } else {
                b.lookup(x, y).unwrap()
            };
            assert_eq!(m.lookup(x, y).unwrap(), want);
        }
    }

    #[test]
    fn decode_rejects_non_box_regions_and_bad_scales() {
        let g = Grid {
            region: unit(),
            xs: vec![0.3, 0.6],
            ys: vec![],
            cells: vec![1, 2, 1],
        };
        let enc = SubDir(g).encode(512).unwrap();
        assert!(SubDir::decode(1, &enc).is_err());
        let g = Grid {
            region: unit(),
            xs: vec![0.6, 0.3],
            ys: vec![],
            cells: vec![1, 2, 3],
        };
        assert!(SubDir::decode(1, &SubDir(g).encode(512).unwrap()).is_err());
    }
}
