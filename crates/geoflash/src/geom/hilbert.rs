//! Space-filling curves: Hilbert values (for the Hilbert R-tree and Hilbert
//! packing) and Z-order (Morton) values, on a grid of `2^order × 2^order`
//! cells, and [`HilbertDomain`], which maps real coordinates onto that grid.
//!
//! The Hilbert mapping is the classic iterative `xy2d` / `d2xy` rotation
//! algorithm (as given in Wikipedia's "Hilbert curve" article, after
//! Hamilton's and Butz's formulations). Orientation: the curve starts at cell
//! (0, 0) and ends at cell (2^order − 1, 0); at order 1 the cells are visited
//! in the order (0,0), (0,1), (1,1), (1,0).
use serde::{Deserialize, Serialize};

use super::{Point, Rect};
use crate::{Error, Result};

/// Largest supported curve order: a `2^32 × 2^32` grid, whose cell numbers fill a `u64`.
pub const MAX_ORDER: u32 = 32;

fn mask(order: u32) -> u64 {
    if order >= 32 {
        u64::from(u32::MAX)
    } else {
        (1u64 << order) - 1
    }
}

/// Hilbert value of cell `(x, y)` on the `2^order × 2^order` grid, in
/// `0 .. 4^order`. `order` above [`MAX_ORDER`] is taken as 32; bits of `x` and
/// `y` at or above `order` are ignored (the coordinates are taken modulo
/// `2^order`). Order 0 is the single cell 0.
pub fn hilbert_index(x: u32, y: u32, order: u32) -> u64 {
    let order = order.min(MAX_ORDER);
    let m = mask(order);
    let mut x = u64::from(x) & m;
    let mut y = u64::from(y) & m;
    let mut d: u64 = 0;
    let mut s: u64 = if order == 0 { 0 } else { 1u64 << (order - 1) };
    while s > 0 {
        let rx = u64::from(x & s != 0);
        let ry = u64::from(y & s != 0);
        // s * s * 3 ≤ 3 · 4^31 < 2^64, and the sum stays below 4^order ≤ 2^64.
        d += s * s * ((3 * rx) ^ ry);
        // Rotate the quadrant so the sub-curve has the standard orientation.
        if ry == 0 {
            if rx == 1 {
                x = (s - 1).wrapping_sub(x) & (s - 1);
                y = (s - 1).wrapping_sub(y) & (s - 1);
            }
            std::mem::swap(&mut x, &mut y);
        }
        x &= s - 1;
        y &= s - 1;
        s >>= 1;
    }
    d
}

/// The cell `(x, y)` whose Hilbert value at `order` is `d` (the inverse of
/// [`hilbert_index`]). Bits of `d` at or above `2 · order` are ignored.
pub fn hilbert_point(d: u64, order: u32) -> (u32, u32) {
    let order = order.min(MAX_ORDER);
    let cells_mask = if order >= 32 {
        u64::MAX
    } else {
        (1u64 << (2 * order)) - 1
    };
    let mut t = d & cells_mask;
    let (mut x, mut y) = (0u64, 0u64);
    let mut s: u64 = 1;
    for _ in 0..order {
        let rx = 1 & (t / 2);
        let ry = 1 & (t ^ rx);
        if ry == 0 {
            if rx == 1 {
                x = s - 1 - x;
                y = s - 1 - y;
            }
            std::mem::swap(&mut x, &mut y);
        }
        x += s * rx;
        y += s * ry;
        t /= 4;
        s <<= 1;
    }
    // x, y < 2^order ≤ 2^32.
    (
        u32::try_from(x).unwrap_or(u32::MAX),
        u32::try_from(y).unwrap_or(u32::MAX),
    )
}

/// Spreads the 32 bits of `v` to the even bit positions of a `u64`.
fn spread(v: u32) -> u64 {
    let mut v = u64::from(v);
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v << 2)) & 0x3333_3333_3333_3333;
    v = (v | (v << 1)) & 0x5555_5555_5555_5555;
    v
}

/// Gathers the even bits of `v` (inverse of `spread`).
fn compact(v: u64) -> u32 {
    let mut v = v & 0x5555_5555_5555_5555;
    v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
    v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
    v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
    v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Z-order (Morton) value of cell `(x, y)`: the bits interleaved, bit `i` of
/// `x` at bit `2i`, bit `i` of `y` at bit `2i + 1`.
pub fn z_order(x: u32, y: u32) -> u64 {
    spread(x) | (spread(y) << 1)
}

/// The cell `(x, y)` of a Z-order value (the inverse of [`z_order`]).
pub fn z_order_point(z: u64) -> (u32, u32) {
    (compact(z), compact(z >> 1))
}

/// The mapping of real coordinates onto the `2^order × 2^order` curve grid:
/// the extent is cut into `2^order` equal columns and rows, cell `(i, j)`
/// covering `[min_x + i·w, min_x + (i+1)·w) × [min_y + j·h, min_y + (j+1)·h)`
/// (the last column and row include the extent's maximum). Coordinates
/// outside the extent are clamped to the nearest border cell, so every point
/// has a value and points outside the extent share their border cells' values
/// (the index stays correct, only less well clustered). A degenerate extent
/// (zero width or height) maps every coordinate along that axis to cell 0.
///
/// The domain is part of an index's manifest: a Hilbert R-tree must use the
/// same domain for its whole life.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "HilbertDomainRepr")]
pub struct HilbertDomain {
    extent: Rect,
    order: u32,
}

#[derive(Deserialize)]
struct HilbertDomainRepr {
    extent: Rect,
    order: u32,
}

impl TryFrom<HilbertDomainRepr> for HilbertDomain {
    type Error = Error;
    fn try_from(r: HilbertDomainRepr) -> Result<HilbertDomain> {
        HilbertDomain::new(r.extent, r.order)
    }
}

impl HilbertDomain {
    /// Default order: a `2^16 × 2^16` grid (values below 2^32), as in common
    /// Hilbert R-tree implementations.
    pub const DEFAULT_ORDER: u32 = 16;

    /// A domain over `extent` with `2^order` cells per axis; an error for an
    /// order outside `1..=32`.
    pub fn new(extent: Rect, order: u32) -> Result<HilbertDomain> {
        if !(1..=MAX_ORDER).contains(&order) {
            return Err(Error::invalid(format!(
                "Hilbert curve order {order} must be between 1 and {MAX_ORDER}"
            )));
        }
        Ok(HilbertDomain { extent, order })
    }

    /// The extent mapped onto the grid.
    pub fn extent(&self) -> Rect {
        self.extent
    }

    /// The curve order (cells per axis = `2^order`).
    pub fn order(&self) -> u32 {
        self.order
    }

    fn axis_cell(&self, v: f64, lo: f64, hi: f64) -> u32 {
        let cells = 1u64 << self.order; // order ≤ 32
        let width = hi - lo;
        if width <= 0.0 {
            return 0;
        }
        let frac = ((v - lo) / width).clamp(0.0, 1.0);
        // `as` saturates (NaN becomes 0); the clamp keeps the maximum in the last cell.
        let c = ((frac * cells as f64) as u64).min(cells - 1);
        u32::try_from(c).unwrap_or(u32::MAX)
    }

    /// The grid cell of a point (clamped into the extent).
    pub fn cell(&self, p: &Point) -> (u32, u32) {
        let e = &self.extent;
        (
            self.axis_cell(p.x, e.min_x(), e.max_x()),
            self.axis_cell(p.y, e.min_y(), e.max_y()),
        )
    }

    /// Hilbert value of a point.
    pub fn hilbert(&self, p: &Point) -> u64 {
        let (x, y) = self.cell(p);
        hilbert_index(x, y, self.order)
    }

    /// Hilbert value of a rectangle: that of its centre (Kamel and
    /// Faloutsos's Hilbert R-tree).
    pub fn hilbert_rect(&self, r: &Rect) -> u64 {
        self.hilbert(&r.center())
    }

    /// Z-order value of a point.
    pub fn z_order(&self, p: &Point) -> u64 {
        let (x, y) = self.cell(p);
        z_order(x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn order_one_orientation() {
        assert_eq!(hilbert_index(0, 0, 1), 0);
        assert_eq!(hilbert_index(0, 1, 1), 1);
        assert_eq!(hilbert_index(1, 1, 1), 2);
        assert_eq!(hilbert_index(1, 0, 1), 3);
        assert_eq!(hilbert_index(5, 9, 0), 0);
    }

    /// Brute force over every cell for orders 1..=6: a bijection onto
    /// `0..4^order`, consecutive values are edge-adjacent cells, the curve
    /// starts at (0,0) and ends at (2^order−1, 0), and `hilbert_point` inverts it.
    #[test]
    fn bijection_and_adjacency_small_orders() {
        for order in 1..=6u32 {
            let n = 1u32 << order;
            let total = (n as usize) * (n as usize);
            let mut by_d = vec![None; total];
            for x in 0..n {
                for y in 0..n {
                    let d = hilbert_index(x, y, order) as usize;
                    assert!(d < total, "order {order}: ({x},{y}) -> {d}");
                    assert!(by_d[d].is_none(), "order {order}: value {d} repeated");
                    by_d[d] = Some((x, y));
                    assert_eq!(hilbert_point(d as u64, order), (x, y));
                }
            }
            let cells: Vec<(u32, u32)> = by_d.into_iter().map(|c| c.unwrap()).collect();
            for w in cells.windows(2) {
                let (a, b) = (w[0], w[1]);
                let dist = a.0.abs_diff(b.0) + a.1.abs_diff(b.1);
                assert_eq!(dist, 1, "order {order}: {a:?} then {b:?}");
            }
            assert_eq!(cells[0], (0, 0));
            assert_eq!(cells[total - 1], (n - 1, 0));
        }
    }

    /// The order-k curve refines the order-(k−1) curve: the parent cell of a
    /// cell has the value `d / 4`.
    #[test]
    fn nested_refinement() {
        for order in 2..=7u32 {
            let n = 1u32 << order;
            for x in 0..n {
                for y in 0..n {
                    assert_eq!(
                        hilbert_index(x, y, order) / 4,
                        hilbert_index(x / 2, y / 2, order - 1)
                    );
                }
            }
        }
    }

    #[test]
    fn high_orders() {
        assert_eq!(hilbert_index(0, 0, 32), 0);
        assert_eq!(hilbert_index(u32::MAX, 0, 32), u64::MAX);
        assert_eq!(hilbert_point(u64::MAX, 32), (u32::MAX, 0));
        assert_eq!(hilbert_index(u32::MAX, 0, 40), u64::MAX);
        // Bits above the order are ignored.
        assert_eq!(hilbert_index(5 | 1 << 10, 3, 4), hilbert_index(5, 3, 4));
    }

    #[test]
    fn z_order_matches_naive() {
        let naive = |x: u32, y: u32| {
            let mut z = 0u64;
            for i in 0..32 {
                z |= u64::from((x >> i) & 1) << (2 * i);
                z |= u64::from((y >> i) & 1) << (2 * i + 1);
            }
            z
        };
        for (x, y) in [
            (0, 0),
            (1, 0),
            (0, 1),
            (3, 5),
            (u32::MAX, 0),
            (0, u32::MAX),
            (0xDEAD_BEEF, 0x1234_5678),
        ] {
            assert_eq!(z_order(x, y), naive(x, y));
            assert_eq!(z_order_point(z_order(x, y)), (x, y));
        }
        let mut seen = HashSet::new();
        for x in 0..16 {
            for y in 0..16 {
                assert!(seen.insert(z_order(x, y)));
            }
        }
        assert_eq!(seen.len(), 256);
        assert!(seen.iter().all(|&z| z < 256));
    }

    #[test]
    fn domain_mapping_and_clamping() {
        let d = HilbertDomain::new(Rect::new(0.0, 0.0, 16.0, 16.0).unwrap(), 4).unwrap();
        let p = |x, y| Point::new(x, y).unwrap();
        assert_eq!(d.cell(&p(0.0, 0.0)), (0, 0));
        assert_eq!(d.cell(&p(15.99, 0.5)), (15, 0));
        assert_eq!(d.cell(&p(16.0, 16.0)), (15, 15)); // maximum in the last cell
        assert_eq!(d.cell(&p(-100.0, 1e9)), (0, 15)); // clamped
        assert_eq!(d.cell(&p(3.5, 7.2)), (3, 7));
        assert_eq!(d.hilbert(&p(3.5, 7.2)), hilbert_index(3, 7, 4));
        assert_eq!(d.z_order(&p(3.5, 7.2)), z_order(3, 7));
        let r = Rect::new(2.0, 6.0, 5.0, 8.4).unwrap();
        assert_eq!(d.hilbert_rect(&r), hilbert_index(3, 7, 4));
        // Degenerate extent.
        let flat = HilbertDomain::new(Rect::new(0.0, 5.0, 10.0, 5.0).unwrap(), 8).unwrap();
        assert_eq!(flat.cell(&p(10.0, 99.0)), (255, 0));
        assert!(HilbertDomain::new(Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(), 0).is_err());
        assert!(HilbertDomain::new(Rect::new(0.0, 0.0, 1.0, 1.0).unwrap(), 33).is_err());
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<HilbertDomain>(&json).unwrap(), d);
        let bad = json.replace("\"order\":4", "\"order\":40");
        assert!(serde_json::from_str::<HilbertDomain>(&bad).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::testenv::proptest_cases()))]

        #[test]
        fn prop_inverse(x in any::<u32>(), y in any::<u32>(), order in 1u32..=32) {
            let m = mask(order);
            let (xm, ym) = ((u64::from(x) & m) as u32, (u64::from(y) & m) as u32);
            let d = hilbert_index(x, y, order);
            if order < 32 {
                prop_assert!(d < 1u64 << (2 * order));
            }
            prop_assert_eq!(hilbert_point(d, order), (xm, ym));
            prop_assert_eq!(z_order_point(z_order(x, y)), (x, y));
        }

        #[test]
        fn prop_domain_monotone_cells(a in -1e6f64..1e6, b in -1e6f64..1e6, order in 1u32..=32) {
            let d = HilbertDomain::new(Rect::new(-1e5, -1e5, 1e5, 1e5).unwrap(), order).unwrap();
            let (lo, hi) = (a.min(b), a.max(b));
            let c_lo = d.cell(&Point::new(lo, lo).unwrap());
            let c_hi = d.cell(&Point::new(hi, hi).unwrap());
            prop_assert!(c_lo.0 <= c_hi.0 && c_lo.1 <= c_hi.1);
            prop_assert!(u64::from(c_hi.0) < 1u64 << order);
        }
    }
}
