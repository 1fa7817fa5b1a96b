//! The PBF side of [`super::read`]: the two passes over the file through
//! `osmpbf`, the tag tests, and the building of ways and relations. Both
//! passes read the file through a [`Stoppable`] reader: they stop at a read
//! once the process is asked to.
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use geo::{Coord, LineString, Polygon};
use geoflash::engine::Geometry;
use geoflash::{Error, Result};

use super::super::attributes::{self, Value};
use super::super::{bad, io_err, reason, unless_stopped, Collector, Stoppable};
use super::rings::{self, RingError};
use super::{object_id, OsmFilter, OsmOptions, OsmRead, OsmType, SkipReason, Skipped};

/// The node ids of a way, delta-decoded; `None` on overflow.
fn decode_refs(deltas: &[i64]) -> Option<Vec<i64>> {
    let mut cur = 0i64;
    deltas
        .iter()
        .map(|d| {
            cur = cur.checked_add(*d)?;
            Some(cur)
        })
        .collect()
}

/// What an element's tags say (tags as indices into the block's string table).
#[derive(Debug, Default, PartialEq, Eq)]
struct TagFacts {
    /// Some filter matches.
    passes: bool,
    /// Some matching filter has a key other than `highway`.
    non_highway_match: bool,
    /// The value of `area`, if tagged.
    area: Option<Vec<u8>>,
    /// Tagged `type=multipolygon`.
    multipolygon: bool,
}

fn tag_facts(
    filters: &[OsmFilter],
    tags: impl Iterator<Item = (u32, u32)>,
    table: &[Vec<u8>],
) -> TagFacts {
    let s = |i: u32| table.get(i as usize).map_or(&[][..], Vec::as_slice);
    let mut f = TagFacts::default();
    for (k, v) in tags {
        let (k, v) = (s(k), s(v));
        for filter in filters.iter().filter(|x| x.matches(k, v)) {
            f.passes = true;
            f.non_highway_match |= filter.key != "highway";
        }
        match k {
            b"area" => f.area = Some(v.to_vec()),
            b"type" => f.multipolygon |= v == b"multipolygon",
            _ => {}
        }
    }
    f
}

/// The values of the tags `keys` among an element's tags (tags as indices
/// into the block's string table), `None` for a key it lacks.
fn tag_values(
    keys: &[String],
    tags: impl Iterator<Item = (u32, u32)>,
    table: &[Vec<u8>],
) -> Vec<Option<String>> {
    let s = |i: u32| table.get(i as usize).map_or(&[][..], Vec::as_slice);
    let mut out = vec![None; keys.len()];
    for (k, v) in tags {
        if let Some(i) = keys.iter().position(|key| key.as_bytes() == s(k)) {
            out[i] = Some(String::from_utf8_lossy(s(v)).into_owned());
        }
    }
    out
}

impl TagFacts {
    /// Whether a closed way with these tags is an area (see the module
    /// documentation of [`super`]).
    fn closed_is_area(&self) -> bool {
        match self.area.as_deref() {
            Some(b"no") => false,
            Some(b"yes") => true,
            _ => self.non_highway_match,
        }
    }
}

/// A way the second pass keeps: its node ids, and for a way that passes
/// the filter whether it is an area when closed.
struct WayRec {
    id: i64,
    refs: Vec<i64>,
    /// `Some(closed_is_area)` when the way passes the filter itself.
    selected: Option<bool>,
    /// The values of the filter keys (empty when not selected).
    tags: Vec<Option<String>>,
}

/// A multipolygon relation that passes the filter: its distinct member ways.
struct RelRec {
    id: i64,
    ways: Vec<i64>,
    /// The values of the filter keys.
    tags: Vec<Option<String>>,
}

/// The error for a failure of `osmpbf` on `path` ([`super::super::read_stopped`]
/// when the process was asked to stop: its [`Stoppable`] reader failed).
fn pbf_error(path: &Path, e: osmpbf::Error) -> Error {
    let e = match e.kind() {
        osmpbf::ErrorKind::Io(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
            io_err(path, std::io::Error::new(io.kind(), io.to_string()))
        }
        _ => bad(path, format!("not a valid OSM PBF file: {e}")),
    };
    unless_stopped(path, e)
}

/// The file at `path`, read through a [`Stoppable`] reader.
fn stoppable(path: &Path) -> Result<Stoppable<File>> {
    File::open(path).map(Stoppable).map_err(|e| io_err(path, e))
}

/// Runs one pass of `osmpbf` over `path`. `osmpbf` panics on some malformed
/// encodings (an unknown relation member type; node coordinates, ids or
/// member ids whose deltas overflow 64 bits, in a build with overflow
/// checks): such a file is bad input, so the panic becomes an error naming
/// the file.
fn decoded(path: &Path, pass: impl FnOnce() -> osmpbf::Result<()>) -> Result<()> {
    crate::formats::contained_reader(
        path,
        "not a valid OSM PBF file: an element's encoding is malformed",
        || pass().map_err(|e| pbf_error(path, e)),
    )
}

/// A coordinate of `nano` nanodegrees in degrees: the double nearest to
/// `nano / 10^9` (the integer is exact as a double, and so is 10^9, so the
/// division rounds once), the value osmium, GDAL and pyrosm give. The
/// `osmpbf` crate's `lon()` and `lat()` multiply by `1e-9`, which is not a
/// double, and round twice: one coordinate in several came out one unit in
/// the last place away from the references (`10.002000200000001` for
/// 10.0020002; review finding).
fn degrees(nano: i64) -> f64 {
    nano as f64 / 1e9
}

/// A node's coordinates, or `None` outside the WGS 84 range (longitude in
/// [-180, 180], latitude in [-90, 90]), which no valid file holds.
fn wgs84(lon: f64, lat: f64) -> Option<Coord> {
    ((-180.0..=180.0).contains(&lon) && (-90.0..=90.0).contains(&lat))
        .then_some(Coord { x: lon, y: lat })
}

/// The first pass: the multipolygon relations that pass the filter.
fn read_relations(path: &Path, filters: &[OsmFilter], keys: &[String]) -> Result<Vec<RelRec>> {
    let reader = osmpbf::ElementReader::new(BufReader::new(stoppable(path)?));
    let mut rels = Vec::new();
    decoded(path, || {
        reader.for_each(|e| {
            let osmpbf::Element::Relation(r) = e else {
                return;
            };
            let facts = tag_facts(filters, r.raw_tags(), r.raw_stringtable());
            if !(facts.multipolygon && facts.passes) {
                return;
            }
            let mut seen = HashSet::new();
            let ways = r
                .members()
                .filter(|m| m.member_type == osmpbf::RelMemberType::Way)
                .map(|m| m.member_id)
                .filter(|id| seen.insert(*id))
                .collect();
            let tags = tag_values(keys, r.raw_tags(), r.raw_stringtable());
            rels.push(RelRec {
                id: r.id(),
                ways,
                tags,
            });
        })
    })?;
    Ok(rels)
}

/// A non-negative OSM id as `u64`, or an error naming the element.
fn osm_id(path: &Path, t: OsmType, id: i64) -> Result<u64> {
    u64::try_from(id).map_err(|_| {
        bad(
            path,
            format!(
                "{} {id}: a negative id (an unsaved editor object) cannot be an object id",
                t.name()
            ),
        )
    })
}

/// The geometry of a way that passes the filter, or why it has none. A way
/// that lacks some of its nodes is [`SkipReason::MissingNodes`], unless
/// `cut` (pyrosm's reading, [`super::OsmLike::Pyrosm`]): then it is built
/// from the nodes present, in order, and a closed area way's ring is closed
/// on its first node present.
fn way_geometry(
    refs: &[i64],
    closed_is_area: bool,
    cut: bool,
    nodes: &HashMap<i64, Coord>,
) -> std::result::Result<Geometry, SkipReason> {
    let closed = refs.len() >= 2 && refs.first() == refs.last();
    let present: Vec<(i64, Coord)> = refs
        .iter()
        .filter_map(|r| nodes.get(r).map(|c| (*r, *c)))
        .collect();
    let mut refs: Vec<i64> = refs.to_vec();
    if present.len() < refs.len() {
        if !cut {
            return Err(SkipReason::MissingNodes);
        }
        refs = present.iter().map(|p| p.0).collect();
        if closed && refs.first() != refs.last() {
            if let Some(&first) = refs.first() {
                refs.push(first);
            }
        }
    }
    let coords: Vec<Coord> = refs.iter().filter_map(|r| nodes.get(r).copied()).collect();
    if refs.len() < 2 {
        return Err(SkipReason::Degenerate);
    }
    if closed && closed_is_area {
        if refs.len() < 4 {
            return Err(SkipReason::Degenerate);
        }
        return Ok(Geometry::Polygon(Polygon::new(
            LineString::new(coords),
            vec![],
        )));
    }
    Ok(Geometry::LineString(LineString::new(coords)))
}

/// The geometry of a relation, or why it has none.
fn relation_geometry(
    rel: &RelRec,
    ways: &HashMap<i64, usize>,
    recs: &[WayRec],
    nodes: &HashMap<i64, Coord>,
) -> std::result::Result<Geometry, SkipReason> {
    let members: Vec<Vec<i64>> = rel
        .ways
        .iter()
        .map(|w| ways.get(w).map(|&i| recs[i].refs.clone()))
        .collect::<Option<_>>()
        .ok_or(SkipReason::MissingMembers)?;
    if members.iter().flatten().any(|n| !nodes.contains_key(n)) {
        return Err(SkipReason::MissingNodes);
    }
    let mut mp = rings::assemble(&members, |n| nodes.get(&n).copied()).map_err(|e| match e {
        RingError::Unclosed { .. } => SkipReason::UnclosedRing,
        RingError::NoWays | RingError::Degenerate => SkipReason::Degenerate,
    })?;
    Ok(if mp.0.len() == 1 {
        Geometry::Polygon(mp.0.remove(0))
    } else {
        Geometry::MultiPolygon(mp)
    })
}

/// The ways that pass `filters` or are members of a kept relation
/// (`members`), and every node they reference: an error for a way whose
/// node references overflow or a node outside WGS 84.
fn read_ways(
    path: &Path,
    filters: &[OsmFilter],
    keys: &[String],
    members: &HashSet<i64>,
) -> Result<(Vec<WayRec>, HashMap<i64, Coord>)> {
    let mut reader =
        osmpbf::IndexedReader::new(stoppable(path)?).map_err(|e| pbf_error(path, e))?;
    let mut recs: Vec<WayRec> = Vec::new();
    let mut overflow: Option<i64> = None;
    let mut nodes: HashMap<i64, Coord> = HashMap::new();
    let mut outside: Option<(i64, f64, f64)> = None;
    decoded(path, || {
        reader.read_ways_and_deps(
            |way| {
                let facts = tag_facts(filters, way.raw_tags(), way.raw_stringtable());
                let member = members.contains(&way.id());
                if !facts.passes && !member {
                    return false;
                }
                let Some(refs) = decode_refs(way.raw_refs()) else {
                    overflow.get_or_insert(way.id());
                    return false;
                };
                let tags = if facts.passes {
                    tag_values(keys, way.raw_tags(), way.raw_stringtable())
                } else {
                    Vec::new()
                };
                recs.push(WayRec {
                    id: way.id(),
                    refs,
                    selected: facts.passes.then(|| facts.closed_is_area()),
                    tags,
                });
                true
            },
            |element| {
                let (id, lon, lat) = match element {
                    osmpbf::Element::Node(n) => {
                        (n.id(), degrees(n.nano_lon()), degrees(n.nano_lat()))
                    }
                    osmpbf::Element::DenseNode(n) => {
                        (n.id(), degrees(n.nano_lon()), degrees(n.nano_lat()))
                    }
                    _ => return,
                };
                match wgs84(lon, lat) {
                    Some(c) => {
                        nodes.insert(id, c);
                    }
                    None => {
                        outside.get_or_insert((id, lon, lat));
                    }
                }
            },
        )
    })?;
    if let Some(id) = overflow {
        return Err(bad(
            path,
            format!("way {id}: its node references overflow 64 bits"),
        ));
    }
    if let Some((id, lon, lat)) = outside {
        return Err(bad(
            path,
            format!(
                "node {id}: longitude {lon}, latitude {lat} lie outside WGS 84 \
                 (longitude -180 to 180, latitude -90 to 90)"
            ),
        ));
    }
    Ok((recs, nodes))
}

/// Reads the ways and multipolygon relations of an OSM PBF file that pass
/// the filters (see the module documentation of [`super`]).
pub(super) fn read(path: &Path, opts: &OsmOptions) -> Result<OsmRead> {
    std::fs::metadata(path).map_err(|e| io_err(path, e))?;
    let filters = opts.filters.as_slice();
    let keys = opts.keys();
    let mut attributes = attributes::osm_columns(&keys).map_err(|e| bad(path, reason(&e)))?;
    let rels = read_relations(path, filters, &keys)?;
    let members: HashSet<i64> = rels.iter().flat_map(|r| r.ways.iter().copied()).collect();
    let (recs, nodes) = read_ways(path, filters, &keys, &members)?;
    let by_id: HashMap<i64, usize> = recs.iter().enumerate().map(|(i, w)| (w.id, i)).collect();

    // relations first: with pyrosm's reading their member ways are not
    // objects of their own
    let mut rel_objects = Vec::new();
    let mut skipped_rels = Vec::new();
    let mut claimed: HashSet<i64> = HashSet::new();
    for rel in &rels {
        let id = osm_id(path, OsmType::Relation, rel.id)?;
        match relation_geometry(rel, &by_id, &recs, &nodes) {
            Ok(g) => {
                if !opts.like.keeps_member_ways() {
                    claimed.extend(rel.ways.iter().copied());
                }
                rel_objects.push((id, g, &rel.tags));
            }
            Err(reason) => skipped_rels.push(Skipped {
                osm_type: OsmType::Relation,
                osm_id: id,
                reason,
            }),
        }
    }
    let mut objects = Collector::new(path);
    let mut skipped = Vec::new();
    for w in &recs {
        let Some(closed_is_area) = w.selected else {
            continue;
        };
        let id = osm_id(path, OsmType::Way, w.id)?;
        let built = if claimed.contains(&w.id) {
            Err(SkipReason::RelationMember)
        } else {
            way_geometry(&w.refs, closed_is_area, opts.like.builds_cut_ways(), &nodes)
        };
        match built {
            Ok(g) => {
                objects.push(format!("way {id}"), object_id(OsmType::Way, id), g)?;
                attributes.push(osm_row(OsmType::Way, id, &w.tags))?;
            }
            Err(reason) => skipped.push(Skipped {
                osm_type: OsmType::Way,
                osm_id: id,
                reason,
            }),
        }
    }
    for (id, g, tags) in rel_objects {
        objects.push(
            format!("relation {id}"),
            object_id(OsmType::Relation, id),
            g,
        )?;
        attributes.push(osm_row(OsmType::Relation, id, tags))?;
    }
    skipped.extend(skipped_rels);
    Ok(OsmRead {
        objects: objects.finish(),
        attributes,
        skipped,
    })
}

/// The attribute row of an object: its type, id and tag values.
fn osm_row(t: OsmType, id: u64, tags: &[Option<String>]) -> Vec<Option<Value>> {
    let mut row = vec![Some(Value::Text(t.name().into())), Some(Value::UInt(id))];
    row.extend(tags.iter().map(|v| v.clone().map(Value::Text)));
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_tags() {
        assert_eq!(decode_refs(&[5, 1, -3]), Some(vec![5, 6, 3]));
        assert_eq!(decode_refs(&[i64::MAX, 1]), None);
        let table: Vec<Vec<u8>> = ["", "building", "yes", "no", "highway", "area", "type"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let b = [OsmFilter::default()];
        let facts =
            |f: &[OsmFilter], tags: &[(u32, u32)]| tag_facts(f, tags.iter().copied(), &table);
        assert!(facts(&b, &[(1, 2)]).passes);
        assert!(!facts(&b, &[(1, 3)]).passes);
        // out-of-range indices read as empty strings, not a panic
        assert!(!facts(&b, &[(2, 1), (9, 9)]).passes);
        let h: Vec<OsmFilter> = vec!["highway=*".parse().unwrap(), OsmFilter::default()];
        // a closed highway is a line unless area=yes; a building is an area unless area=no
        assert!(!facts(&h, &[(4, 2)]).closed_is_area());
        assert!(facts(&h, &[(4, 2), (5, 2)]).closed_is_area());
        assert!(facts(&h, &[(4, 2), (1, 2)]).closed_is_area());
        assert!(!facts(&h, &[(1, 2), (5, 3)]).closed_is_area());
    }

    /// Review finding: coordinates were the `osmpbf` crate's `1e-9 *
    /// nanodegrees`, one unit in the last place away from the decimal
    /// value for many nodes (10.002000200000001 for 10.0020002), where
    /// osmium, GDAL and pyrosm give the double nearest to it. Every node
    /// coordinate of the usual granularity (1e-7 degrees) around a few
    /// places, and the extremes, is now the decimal value read as a double.
    #[test]
    fn coordinates_are_the_nearest_doubles_to_their_decimal_values() {
        let decimal = |d: i64| -> f64 {
            let sign = if d < 0 { "-" } else { "" };
            let a = d.unsigned_abs();
            format!("{sign}{}.{:07}", a / 10_000_000, a % 10_000_000)
                .parse()
                .unwrap()
        };
        assert_eq!(degrees(10_002_000_200), 10.0020002);
        let mut checked = 0;
        for centre in [
            0i64,
            100_020_002,
            500_010_000,
            -1_799_999_999,
            899_999_000,
            246_000_000,
        ] {
            for d in centre - 20_000..=centre + 20_000 {
                assert_eq!(degrees(d * 100), decimal(d), "{d} decimicrodegrees");
                checked += 1;
            }
        }
        for d in [
            -1_800_000_000i64,
            1_800_000_000,
            -900_000_000,
            900_000_000,
            1,
            -1,
        ] {
            assert_eq!(degrees(d * 100), decimal(d), "{d} decimicrodegrees");
        }
        assert_eq!(checked, 6 * 40_001);
        assert_eq!(degrees(1), 1e-9);
    }

    #[test]
    fn coordinates_outside_wgs84_are_refused() {
        assert_eq!(wgs84(24.9, 60.1), Some(Coord { x: 24.9, y: 60.1 }));
        assert_eq!(wgs84(-180.0, 90.0), Some(Coord { x: -180.0, y: 90.0 }));
        assert_eq!(wgs84(180.5, 0.0), None);
        assert_eq!(wgs84(0.0, -90.5), None);
        assert_eq!(wgs84(f64::NAN, 0.0), None);
    }

    #[test]
    fn way_geometries_and_reasons() {
        let nodes: HashMap<i64, Coord> = (1..=4)
            .map(|i| {
                (
                    i,
                    Coord {
                        x: i as f64,
                        y: (i * i) as f64,
                    },
                )
            })
            .collect();
        for cut in [false, true] {
            assert!(matches!(
                way_geometry(&[1, 2, 3, 1], true, cut, &nodes),
                Ok(Geometry::Polygon(_))
            ));
            assert!(matches!(
                way_geometry(&[1, 2, 3, 1], false, cut, &nodes),
                Ok(Geometry::LineString(_))
            ));
            assert!(matches!(
                way_geometry(&[1, 2, 3], true, cut, &nodes),
                Ok(Geometry::LineString(_))
            ));
            assert_eq!(
                way_geometry(&[1, 2, 1], true, cut, &nodes),
                Err(SkipReason::Degenerate)
            );
            assert_eq!(
                way_geometry(&[1], true, cut, &nodes),
                Err(SkipReason::Degenerate)
            );
        }
        assert_eq!(
            way_geometry(&[1, 9, 3, 1], true, false, &nodes),
            Err(SkipReason::MissingNodes)
        );
        // cut at the edge (pyrosm's reading): built from the nodes present
        let coords = |g: Geometry| match g {
            Geometry::Polygon(p) => p.exterior().0.clone(),
            Geometry::LineString(l) => l.0,
            g => panic!("{g:?}"),
        };
        let at = |ids: &[i64]| -> Vec<Coord> { ids.iter().map(|i| nodes[i]).collect() };
        let p = way_geometry(&[1, 2, 9, 3, 4, 1], true, true, &nodes).unwrap();
        assert!(matches!(p, Geometry::Polygon(_)));
        assert_eq!(coords(p), at(&[1, 2, 3, 4, 1]));
        // the first (and last) node missing: the ring closes on the first present
        let p = way_geometry(&[9, 2, 3, 4, 9], true, true, &nodes).unwrap();
        assert_eq!(coords(p), at(&[2, 3, 4, 2]));
        let l = way_geometry(&[9, 2, 3], true, true, &nodes).unwrap();
        assert!(matches!(l, Geometry::LineString(_)));
        assert_eq!(coords(l), at(&[2, 3]));
        // too little left: three points of a ring, one of a line
        assert_eq!(
            way_geometry(&[1, 9, 3, 1], true, true, &nodes),
            Err(SkipReason::Degenerate)
        );
        assert_eq!(
            way_geometry(&[9, 2, 8], false, true, &nodes),
            Err(SkipReason::Degenerate)
        );
    }
}
