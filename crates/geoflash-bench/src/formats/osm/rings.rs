//! The ring assembler of OpenStreetMap multipolygon relations: member ways
//! (node id lists) joined end to end into closed rings, the rings nested by
//! containment into polygons with holes.
//!
//! Rings are joined by shared node ids, as osmium's assembler does: a ring
//! may be one closed way or several open ways whose ends meet, each in
//! either direction. Member roles are not used: a ring is an outer ring
//! when it lies inside an even number of the relation's other rings
//! (0: a polygon's exterior; 2: an island in a hole) and an inner ring of
//! the smallest ring around it otherwise — the even-odd rule, which is what
//! pyrosm's overlay of the rings computes for rings that do not cross.
//! Exteriors are counter-clockwise and holes clockwise (the GeoJSON and
//! OGC orientation that osmium and pyrosm give).
//!
//! The assembler knows nothing of files: [`assemble`] takes the member
//! ways' node ids and a coordinate lookup, and says why when a relation
//! cannot become a polygon ([`RingError`]).
use std::collections::HashMap;

use geo::{Coord, LineString, MultiPolygon, Polygon};

/// Why a relation's member ways do not make polygons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// The relation has no member way with at least two nodes.
    NoWays,
    /// Some member ways do not join into closed rings: the node where the
    /// first unclosed chain ends.
    Unclosed {
        /// The node id at which the chain could not be continued.
        node: i64,
    },
    /// A ring has fewer than three distinct points (it has no area).
    Degenerate,
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::NoWays => f.write_str("no member way with two or more nodes"),
            RingError::Unclosed { node } => {
                write!(
                    f,
                    "its member ways do not close into rings (open at node {node})"
                )
            }
            RingError::Degenerate => f.write_str("a ring has fewer than three distinct points"),
        }
    }
}

/// Joins `ways` (each a list of node ids in way order) into closed rings of
/// node ids: closed ways are rings of their own, open ways are chained at
/// shared end nodes (a way may be reversed to fit). Ways with fewer than two
/// nodes are ignored. When several ways continue a chain at one node the
/// first in member order is taken.
pub fn join_rings(ways: &[Vec<i64>]) -> Result<Vec<Vec<i64>>, RingError> {
    let ways: Vec<&Vec<i64>> = ways.iter().filter(|w| w.len() >= 2).collect();
    if ways.is_empty() {
        return Err(RingError::NoWays);
    }
    let mut rings = Vec::new();
    // the open ways by end node, in member order
    let mut by_end: HashMap<i64, Vec<usize>> = HashMap::new();
    let mut open = Vec::new();
    for (i, w) in ways.iter().enumerate() {
        if w.first() == w.last() {
            rings.push(w.to_vec());
        } else {
            open.push(i);
            for end in [w[0], w[w.len() - 1]] {
                by_end.entry(end).or_default().push(i);
            }
        }
    }
    let mut used = vec![false; ways.len()];
    for start in open {
        if used[start] {
            continue;
        }
        used[start] = true;
        let mut ring = ways[start].to_vec();
        while ring.first() != ring.last() {
            let end = ring[ring.len() - 1];
            let next = by_end
                .get(&end)
                .and_then(|c| c.iter().copied().find(|&j| !used[j]))
                .ok_or(RingError::Unclosed { node: end })?;
            used[next] = true;
            let w = ways[next];
            if w[0] == end {
                ring.extend_from_slice(&w[1..]);
            } else {
                ring.extend(w.iter().rev().skip(1));
            }
        }
        rings.push(ring);
    }
    Ok(rings)
}

/// Twice the signed area of a closed ring (positive when counter-clockwise).
pub(crate) fn signed_area2(ring: &[Coord]) -> f64 {
    ring.windows(2)
        .map(|p| p[0].x * p[1].y - p[1].x * p[0].y)
        .sum()
}

/// Whether `p` lies on the segment `a`–`b`.
fn on_segment(p: Coord, a: Coord, b: Coord) -> bool {
    let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
    cross == 0.0
        && p.x >= a.x.min(b.x)
        && p.x <= a.x.max(b.x)
        && p.y >= a.y.min(b.y)
        && p.y <= a.y.max(b.y)
}

/// Where `p` lies relative to the closed ring `ring`: `Some(true)` strictly
/// inside, `Some(false)` strictly outside, `None` on its boundary.
fn locate(p: Coord, ring: &[Coord]) -> Option<bool> {
    let mut inside = false;
    for s in ring.windows(2) {
        let (a, b) = (s[0], s[1]);
        if on_segment(p, a, b) {
            return None;
        }
        if (a.y > p.y) != (b.y > p.y) {
            let x = a.x + (p.y - a.y) / (b.y - a.y) * (b.x - a.x);
            if p.x < x {
                inside = !inside;
            }
        }
    }
    Some(inside)
}

/// Whether ring `inner` lies inside ring `outer` (rings that do not cross):
/// decided at the first vertex of `inner` not on `outer`'s boundary, else
/// at the midpoint of one of its edges not on it. Both rings closed (first
/// = last). Also the Shapefile reader's test of which shell holds a hole
/// ([`crate::formats::shp`]).
pub(crate) fn ring_inside(inner: &[Coord], outer: &[Coord]) -> bool {
    let midpoints = inner.windows(2).map(|s| Coord {
        x: (s[0].x + s[1].x) / 2.0,
        y: (s[0].y + s[1].y) / 2.0,
    });
    inner
        .iter()
        .copied()
        .chain(midpoints)
        .find_map(|p| locate(p, outer))
        .unwrap_or(false)
}

/// The polygons of closed rings of coordinates (each first = last), nested
/// by the even-odd rule (see the module documentation), exteriors
/// counter-clockwise and holes clockwise.
pub fn nest_rings(rings: Vec<Vec<Coord>>) -> Result<MultiPolygon, RingError> {
    for r in &rings {
        let mut distinct: Vec<(u64, u64)> =
            r.iter().map(|c| (c.x.to_bits(), c.y.to_bits())).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if r.len() < 4 || distinct.len() < 3 || signed_area2(r) == 0.0 {
            return Err(RingError::Degenerate);
        }
    }
    // largest first: a ring's container comes before it
    let mut order: Vec<usize> = (0..rings.len()).collect();
    let area = |i: usize| signed_area2(&rings[i]).abs();
    order.sort_by(|&a, &b| area(b).total_cmp(&area(a)));
    // per ring in `order`: its depth and, for an outer ring, its polygon index
    let mut depth = vec![0usize; rings.len()];
    let mut polygon_of = vec![usize::MAX; rings.len()];
    let mut parent = vec![None; rings.len()];
    let mut exteriors: Vec<Vec<Coord>> = Vec::new();
    let mut holes: Vec<Vec<Vec<Coord>>> = Vec::new();
    for (k, &i) in order.iter().enumerate() {
        // the smallest earlier ring that holds this one
        let container = order[..k]
            .iter()
            .rev()
            .copied()
            .find(|&j| ring_inside(&rings[i], &rings[j]));
        parent[i] = container;
        depth[i] = container.map_or(0, |j| depth[j] + 1);
        let mut ring = rings[i].clone();
        let ccw = signed_area2(&ring) > 0.0;
        if depth[i] % 2 == 0 {
            if !ccw {
                ring.reverse();
            }
            polygon_of[i] = exteriors.len();
            exteriors.push(ring);
            holes.push(Vec::new());
        } else {
            if ccw {
                ring.reverse();
            }
            let owner = container.map_or(usize::MAX, |j| polygon_of[j]);
            if let Some(h) = holes.get_mut(owner) {
                h.push(ring);
            }
        }
    }
    Ok(MultiPolygon::new(
        exteriors
            .into_iter()
            .zip(holes)
            .map(|(e, h)| {
                Polygon::new(
                    LineString::new(e),
                    h.into_iter().map(LineString::new).collect(),
                )
            })
            .collect(),
    ))
}

/// The polygons of a multipolygon relation whose member ways have the node
/// ids `ways`, each node's coordinates from `coord` (every node of `ways`
/// must have some; the caller checks for missing nodes first).
pub fn assemble(
    ways: &[Vec<i64>],
    coord: impl Fn(i64) -> Option<Coord>,
) -> Result<MultiPolygon, RingError> {
    let rings = join_rings(ways)?;
    let coords = rings
        .iter()
        .map(|r| r.iter().map(|&n| coord(n)).collect::<Option<Vec<Coord>>>())
        .collect::<Option<Vec<_>>>()
        .ok_or(RingError::Degenerate)?;
    nest_rings(coords)
}

#[cfg(test)]
mod tests {
    use super::*;
    use geo::Area;

    fn area(mp: &MultiPolygon) -> f64 {
        mp.unsigned_area()
    }

    /// Node `n` of a 10 × 10 grid of unit spacing: id 10·y + x.
    fn grid(n: i64) -> Option<Coord> {
        (0..100).contains(&n).then_some(Coord {
            x: (n % 10) as f64,
            y: (n / 10) as f64,
        })
    }

    /// The square with corners (x0, y0) and (x1, y1) as grid node ids,
    /// counter-clockwise from (x0, y0), closed.
    fn square(x0: i64, y0: i64, x1: i64, y1: i64) -> Vec<i64> {
        vec![
            10 * y0 + x0,
            10 * y0 + x1,
            10 * y1 + x1,
            10 * y1 + x0,
            10 * y0 + x0,
        ]
    }

    #[test]
    fn one_closed_way_is_one_polygon_counter_clockwise() {
        let mut cw = square(0, 0, 4, 3);
        cw.reverse();
        let mp = assemble(&[cw], grid).unwrap();
        assert_eq!(mp.0.len(), 1);
        assert_eq!(area(&mp), 12.0);
        assert!(signed_area2(&mp.0[0].exterior().0) > 0.0);
        assert!(mp.0[0].interiors().is_empty());
    }

    #[test]
    fn ring_split_over_several_ways_some_reversed() {
        // the square 0,0 – 5,5 in three pieces: bottom, right+top reversed, left
        let bottom = vec![0, 1, 2, 5];
        let right_top_reversed = vec![50, 55, 25, 15, 5];
        let left = vec![0, 10, 30, 50];
        let ways = vec![bottom, right_top_reversed, left];
        let rings = join_rings(&ways).unwrap();
        assert_eq!(rings.len(), 1);
        assert_eq!(rings[0].first(), rings[0].last());
        assert_eq!(rings[0].len(), 4 + 4 + 3);
        let mp = assemble(&ways, grid).unwrap();
        assert_eq!(area(&mp), 25.0);
    }

    #[test]
    fn inner_rings_become_clockwise_holes_and_islands_new_polygons() {
        // outer 0,0–9,9; hole 2,2–7,7 split in two ways; island 4,4–5,5 in the hole;
        // a second outer elsewhere is impossible on the grid, so the island is the second polygon
        let outer = square(0, 0, 9, 9);
        let hole = square(2, 2, 7, 7);
        let (a, b) = hole.split_at(3);
        let hole_a = a.to_vec();
        let mut hole_b = vec![a[2]];
        hole_b.extend_from_slice(b);
        hole_b.reverse();
        let island = square(4, 4, 5, 5);
        // member order does not matter: inner first
        let ways = vec![hole_a, island, outer, hole_b];
        let mp = assemble(&ways, grid).unwrap();
        assert_eq!(mp.0.len(), 2);
        let big = &mp.0[0];
        assert_eq!(big.interiors().len(), 1);
        assert!(signed_area2(&big.exterior().0) > 0.0);
        assert!(signed_area2(&big.interiors()[0].0) < 0.0);
        assert_eq!(mp.0[1].unsigned_area(), 1.0);
        assert_eq!(area(&mp), 81.0 - 25.0 + 1.0);
    }

    #[test]
    fn hole_touching_its_outer_ring_is_still_a_hole() {
        // the hole shares the corner node 0 and the edge 0–2 with the outer ring
        let outer = square(0, 0, 6, 6);
        let hole = vec![0, 2, 22, 0];
        let mp = assemble(&[outer, hole], grid).unwrap();
        assert_eq!(mp.0.len(), 1);
        assert_eq!(mp.0[0].interiors().len(), 1);
        assert_eq!(area(&mp), 36.0 - 2.0);
    }

    #[test]
    fn unclosable_and_degenerate_rings_say_why() {
        // two ways that meet at one end only
        assert_eq!(
            join_rings(&[vec![0, 1, 11], vec![11, 21, 20]]),
            Err(RingError::Unclosed { node: 20 })
        );
        // no usable way
        assert_eq!(join_rings(&[vec![3]]), Err(RingError::NoWays));
        assert_eq!(join_rings(&[]), Err(RingError::NoWays));
        // a closed ring with no area: there and back
        assert_eq!(
            assemble(&[vec![0, 1, 2, 1, 0]], grid),
            Err(RingError::Degenerate)
        );
        assert_eq!(assemble(&[vec![0, 1, 0]], grid), Err(RingError::Degenerate));
        // a node without coordinates
        assert_eq!(
            assemble(&[vec![0, 1, 500, 0]], grid),
            Err(RingError::Degenerate)
        );
        let e = RingError::Unclosed { node: 7 }.to_string();
        assert!(e.contains("node 7"), "{e}");
    }

    #[test]
    fn point_location() {
        let sq: Vec<Coord> = square(0, 0, 2, 2).into_iter().filter_map(grid).collect();
        assert_eq!(locate(Coord { x: 1.0, y: 1.0 }, &sq), Some(true));
        assert_eq!(locate(Coord { x: 3.0, y: 1.0 }, &sq), Some(false));
        assert_eq!(locate(Coord { x: 2.0, y: 1.0 }, &sq), None);
        assert_eq!(locate(Coord { x: 0.0, y: 0.0 }, &sq), None);
    }
}
