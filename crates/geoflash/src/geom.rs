//! Geometry: points, rectangles (MBRs) and their predicates and measures,
//! Hilbert and Z-order values.
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A point in the plane.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// x coordinate.
    pub x: f64,
    /// y coordinate.
    pub y: f64,
}

/// An axis-aligned rectangle (minimum bounding rectangle), closed on all sides.
/// Constructed through [`Rect::new`], which rejects NaN, infinite and inverted coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rect {
    /// Smallest x.
    pub min_x: f64,
    /// Smallest y.
    pub min_y: f64,
    /// Largest x.
    pub max_x: f64,
    /// Largest y.
    pub max_y: f64,
}

impl Rect {
    /// A rectangle from its corners; an error for NaN, infinite or inverted coordinates.
    pub fn new(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Result<Rect> {
        for v in [min_x, min_y, max_x, max_y] {
            if !v.is_finite() {
                return Err(Error::invalid(format!(
                    "rectangle ({min_x}, {min_y}, {max_x}, {max_y}) has a non-finite coordinate"
                )));
            }
        }
        if min_x > max_x || min_y > max_y {
            return Err(Error::invalid(format!(
                "rectangle ({min_x}, {min_y}, {max_x}, {max_y}) is inverted (min greater than max)"
            )));
        }
        Ok(Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        })
    }
}
