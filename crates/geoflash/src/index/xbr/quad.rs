//! Quadrant addresses and the entry encoding of the xBR+-tree.
//!
//! A quadrant is a cell of the recursive quadtree decomposition of the
//! tree's domain: level 0 is the whole domain, each level halves both axes.
//! Its address is the sequence of directional digits from the domain down
//! (`d = 2·y_bit + x_bit`, so 0 = lower-left, 1 = lower-right, 2 =
//! upper-left, 3 = upper-right), stored as the Z-order (Morton) value of the
//! cell at its level. A point's address is its cell at [`MAX_LEVEL`]; a
//! quadrant contains a point when it is a prefix of the point's address,
//! which decides containment on integers, so a point on a cell boundary
//! belongs to exactly one quadrant of each level (the upper one, except at
//! the domain's maximum, which belongs to the last cell).
//!
//! # Entries
//! Internal entries are `(child page id, DBR, payload)`: the DBR (data
//! bounding rectangle) is the MBR of the points stored below (the quadrant's
//! rectangle when the subtree is empty), the payload holds the quadrant:
//! bits 0–57 the address, bits 58–62 the level, bit 63 set when the subtree
//! holds no point. Leaf entries are `(object id, the point as a degenerate
//! rectangle, 0)`.
use crate::geom::hilbert::{z_order_point, HilbertDomain};
use crate::geom::{Point, Rect};
use crate::page::Entry;
use crate::{Error, Result};

/// Deepest quadrant level: 29 levels of two bits fit the 58 address bits of
/// an entry's payload. Points closer than `domain side / 2^29` along both
/// axes share every quadrant.
pub const MAX_LEVEL: u8 = 29;

/// Payload bit: the subtree below the entry holds no point.
const EMPTY_BIT: u64 = 1 << 63;
/// Bits of the address in the payload.
const PATH_BITS: u32 = 58;

/// A quadrant of the domain: its level and its address (the Z-order value of
/// its cell at that level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quadrant {
    level: u8,
    path: u64,
}

impl Quadrant {
    /// The whole domain.
    pub const ROOT: Quadrant = Quadrant { level: 0, path: 0 };

    /// Level (0 = the whole domain).
    pub fn level(&self) -> u8 {
        self.level
    }

    /// Address: the Z-order value of the quadrant's cell at its level.
    pub fn path(&self) -> u64 {
        self.path
    }

    /// The quadrant of level `level` holding the point whose address is `code`.
    pub fn of_code(code: u64, level: u8) -> Quadrant {
        let level = level.min(MAX_LEVEL);
        Quadrant {
            level,
            path: code >> (2 * u32::from(MAX_LEVEL - level)),
        }
    }

    /// Sub-quadrant `digit` (0–3), `None` at `MAX_LEVEL`.
    pub fn child(&self, digit: u8) -> Option<Quadrant> {
        (self.level < MAX_LEVEL).then(|| Quadrant {
            level: self.level + 1,
            path: (self.path << 2) | u64::from(digit & 3),
        })
    }

    /// True when `other` lies inside this quadrant (or is it).
    pub fn contains(&self, other: &Quadrant) -> bool {
        other.level >= self.level
            && other.path >> (2 * u32::from(other.level - self.level)) == self.path
    }

    /// True when the point with address `code` lies in this quadrant.
    pub fn contains_code(&self, code: u64) -> bool {
        Quadrant::of_code(code, self.level) == *self
    }

    /// Which sub-quadrant (0–3) holds the point with address `code`; `None`
    /// at `MAX_LEVEL`.
    pub fn digit_of(&self, code: u64) -> Option<u8> {
        (self.level < MAX_LEVEL).then(|| {
            // The two bits below this quadrant's prefix.
            (Quadrant::of_code(code, self.level + 1).path & 3) as u8
        })
    }

    /// The payload of an internal entry for this quadrant.
    pub(crate) fn payload(&self, empty: bool) -> u64 {
        (u64::from(self.level) << PATH_BITS) | self.path | if empty { EMPTY_BIT } else { 0 }
    }

    /// The quadrant and emptiness flag of an internal entry's payload;
    /// a payload that is not one is corrupt.
    pub(crate) fn from_payload(payload: u64, page: u64) -> Result<(Quadrant, bool)> {
        let level = ((payload & !EMPTY_BIT) >> PATH_BITS) as u8;
        let path = payload & ((1u64 << PATH_BITS) - 1);
        if level > MAX_LEVEL || path >> (2 * u32::from(level)) != 0 {
            return Err(Error::corrupt(
                Some(page),
                format!("entry payload {payload:#x} is not an xBR+-tree quadrant"),
            ));
        }
        Ok((Quadrant { level, path }, payload & EMPTY_BIT != 0))
    }
}

/// The tree's domain: the declared rectangle and the mapping of points to
/// addresses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Domain {
    grid: HilbertDomain,
}

impl Domain {
    /// The domain `rect`; it must have a positive width and height.
    pub fn new(rect: Rect) -> Result<Domain> {
        // A `Rect` is finite, so its extents are numbers.
        if rect.width() <= 0.0 || rect.height() <= 0.0 {
            return Err(Error::invalid(format!(
                "the xBR+-tree domain {rect:?} must have a positive width and height"
            )));
        }
        Ok(Domain {
            grid: HilbertDomain::new(rect, u32::from(MAX_LEVEL))?,
        })
    }

    /// The declared rectangle.
    pub fn rect(&self) -> Rect {
        self.grid.extent()
    }

    /// The address of `p`; a point outside the domain is an error.
    pub fn code(&self, p: &Point) -> Result<u64> {
        let d = self.rect();
        if !d.contains_point(p) {
            return Err(Error::invalid(format!(
                "point ({}, {}) lies outside the xBR+-tree's domain ({}, {}, {}, {})",
                p.x,
                p.y,
                d.min_x(),
                d.min_y(),
                d.max_x(),
                d.max_y()
            )));
        }
        Ok(self.grid.z_order(p))
    }

    /// The rectangle of quadrant `q`.
    pub fn rect_of(&self, q: &Quadrant) -> Rect {
        let d = self.rect();
        let (cx, cy) = z_order_point(q.path);
        let n = f64::from(1u32 << q.level);
        let (w, h) = (d.width() / n, d.height() / n);
        let x0 = d.min_x() + f64::from(cx) * w;
        let y0 = d.min_y() + f64::from(cy) * h;
        // The last cell ends exactly at the domain's maximum.
        let x1 = if f64::from(cx) + 1.0 >= n {
            d.max_x()
        } else {
            x0 + w
        };
        let y1 = if f64::from(cy) + 1.0 >= n {
            d.max_y()
        } else {
            y0 + h
        };
        // A part of the valid domain: valid.
        Rect::from_valid(x0, y0, x1.max(x0), y1.max(y0))
    }

    /// Side lengths of a cell of `MAX_LEVEL`.
    pub fn finest_cell(&self) -> (f64, f64) {
        let n = f64::from(1u32 << MAX_LEVEL);
        (self.rect().width() / n, self.rect().height() / n)
    }
}

/// An internal entry: child page `page`, quadrant `quad`, the DBR of the
/// subtree (`None`: no point below).
pub(crate) fn child_entry(domain: &Domain, page: u64, quad: Quadrant, dbr: Option<Rect>) -> Entry {
    Entry {
        key: page,
        rect: dbr.unwrap_or_else(|| domain.rect_of(&quad)),
        payload: quad.payload(dbr.is_none()),
    }
}

/// A decoded internal entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildRef {
    /// Child page.
    pub(crate) page: u64,
    /// Quadrant of the child.
    pub(crate) quad: Quadrant,
    /// DBR of the subtree (`None` when it holds no point).
    pub(crate) dbr: Option<Rect>,
}

/// Decodes an internal entry of node `page`.
pub(crate) fn child_ref(e: &Entry, page: u64) -> Result<ChildRef> {
    let (quad, empty) = Quadrant::from_payload(e.payload, page)?;
    Ok(ChildRef {
        page: e.key,
        quad,
        dbr: (!empty).then_some(e.rect),
    })
}

/// A leaf entry: object `id` at `p`.
pub(crate) fn point_entry(id: u64, p: Point) -> Entry {
    Entry {
        key: id,
        rect: Rect::from_point(p),
        payload: 0,
    }
}

/// The point of a leaf entry.
pub(crate) fn entry_point(e: &Entry) -> Point {
    Point {
        x: e.rect.min_x(),
        y: e.rect.min_y(),
    }
}

/// The DBR of a node's entries at `level`: the MBR of a leaf's points, the
/// union of an internal node's non-empty DBRs (`None`: no point below).
pub(crate) fn dbr_of(level: u16, entries: &[Entry], page: u64) -> Result<Option<Rect>> {
    let mut out: Option<Rect> = None;
    for e in entries {
        let r = if level == 0 {
            Some(e.rect)
        } else {
            child_ref(e, page)?.dbr
        };
        if let Some(r) = r {
            out = Some(out.map_or(r, |o| o.union(&r)));
        }
    }
    Ok(out)
}

/// Index of the entry of internal node `page` that a point with address
/// `code` belongs to: the deepest quadrant holding it (a node's entries
/// partition its region; each entry's region is its quadrant minus the
/// deeper quadrants of the node).
pub(crate) fn route(entries: &[Entry], code: u64, page: u64) -> Result<usize> {
    let mut best: Option<(usize, u8)> = None;
    for (i, e) in entries.iter().enumerate() {
        let (q, _) = Quadrant::from_payload(e.payload, page)?;
        if q.contains_code(code) && best.is_none_or(|(_, l)| q.level > l) {
            best = Some((i, q.level));
        }
    }
    best.map(|(i, _)| i).ok_or_else(|| {
        Error::corrupt(
            Some(page),
            format!("no entry of the xBR+-tree node covers address {code:#x}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_nest_and_round_trip() {
        let d = Domain::new(Rect::new(0.0, 0.0, 8.0, 8.0).unwrap()).unwrap();
        let p = Point::new(5.0, 1.0).unwrap();
        let code = d.code(&p).unwrap();
        let q1 = Quadrant::of_code(code, 1);
        assert_eq!(q1, Quadrant::ROOT.child(1).unwrap(), "lower-right");
        assert_eq!(d.rect_of(&q1), Rect::new(4.0, 0.0, 8.0, 4.0).unwrap());
        let q3 = Quadrant::of_code(code, 3);
        assert!(q1.contains(&q3) && !q3.contains(&q1));
        assert!(q3.contains_code(code));
        assert_eq!(d.rect_of(&q3), Rect::new(5.0, 1.0, 6.0, 2.0).unwrap());
        assert_eq!(Quadrant::ROOT.digit_of(code), Some(1));
        for empty in [false, true] {
            assert_eq!(
                Quadrant::from_payload(q3.payload(empty), 0).unwrap(),
                (q3, empty)
            );
        }
        assert!(Quadrant::from_payload(!EMPTY_BIT, 0).is_err());
        // The domain's maximum belongs to the last cell.
        let top = d.code(&Point::new(8.0, 8.0).unwrap()).unwrap();
        assert!(Quadrant::ROOT.child(3).unwrap().contains_code(top));
        assert!(d.code(&Point::new(8.5, 0.0).unwrap()).is_err());
        assert!(Domain::new(Rect::new(0.0, 0.0, 0.0, 1.0).unwrap()).is_err());
    }
}
