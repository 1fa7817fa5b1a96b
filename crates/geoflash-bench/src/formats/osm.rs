//! OpenStreetMap PBF input through the `osmpbf` crate: the ways and
//! multipolygon relations that pass a tag filter, as polygons and lines,
//! and the objects that could not be built, each with its reason.
//!
//! **What becomes an object.** An element passes the filter when one of
//! its tags matches one of the [`OsmFilter`]s (`key=*`: any value but
//! `no`; `key=value`: that value; default `building=*`). Several filters
//! select the elements any of them matches.
//! - A *way* that passes becomes a polygon when it is closed (at least four
//!   node references, the first the same node as the last), unless tagged
//!   `area=no`, or its matching filters are all `highway` ones and it is not
//!   tagged `area=yes` (a closed highway is a loop, as the OSM wiki has it);
//!   otherwise it becomes a line.
//! - A *relation* tagged `type=multipolygon` that passes becomes polygons:
//!   its member ways are joined into closed rings, split rings and reversed
//!   ways included, and the rings nested by the even-odd rule
//!   ([`rings`]). Other relation types are not read.
//! - A way that passes the filter itself and is also a member of such a
//!   relation is an object of its own beside the relation, as osmium's area
//!   assembler makes it (the default, [`OsmLike::Osmium`]); with
//!   [`OsmLike::Pyrosm`] it is not (reported as
//!   [`SkipReason::RelationMember`]), which is how pyrosm counts them.
//!
//! **Ways cut at the extract's edge.** An extract keeps a way that crosses
//! its boundary but not the nodes outside: by default such a way is not
//! built (reported as [`SkipReason::MissingNodes`]), as osmium does. With
//! [`OsmLike::Pyrosm`] it is built, as pyrosm builds it, from the nodes
//! present in the way's order, a closed area way's ring closed again on its
//! first node present: the part of the footprint inside the extract, not
//! the building's (a way left with fewer than two nodes, or a ring of
//! fewer than four points, is [`SkipReason::Degenerate`]). Relations with
//! missing nodes or member ways are skipped either way.
//!
//! **Ids.** Way and relation ids are separate number spaces, so the object
//! id is osmium's area id: `2 × way id` for a way, `2 × relation id + 1`
//! for a relation ([`object_id`], [`osm_of`] for the way back).
//!
//! **Attributes.** Every object carries `osm_type` (`way` or `relation`),
//! `osm_id` (the element's own id) and one column per distinct filter key
//! holding the element's value of that tag, absent when it has none
//! ([`OsmRead::attributes`]); the writers store them as properties or
//! columns ([`super::attributes`]).
//!
//! **Skipped objects.** An element that passes the filter but cannot be
//! built is not an error: it is listed in [`OsmRead::skipped`] with its
//! type, id and [`SkipReason`] (extracts cut ways and relations at their
//! edges, so nodes and member ways are often missing). A file that is not
//! valid PBF, a negative id or node references that overflow are errors
//! naming the file.
//!
//! The file is read in two passes: the relations first (every block is
//! decoded), then through `osmpbf::IndexedReader` the blocks that hold
//! ways and the node blocks whose id range can hold a node of a selected
//! way (x = longitude, y = latitude, in degrees).
//!
//! Behind the cargo feature `osm-pbf` (on by default; `osmpbf` brings the
//! `protobuf` crate and, at build time, its code generator); without it
//! [`read`] returns an error that says so.
use std::path::Path;

use geoflash::engine::Geometry;
use geoflash::{Error, Result};

use super::attributes::Attributes;

pub mod rings;

/// One tag filter: `key=*` (any value but `no`) or `key=value`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OsmFilter {
    /// The tag key.
    pub key: String,
    /// The value the tag must have; `None` for any value but `no`.
    pub value: Option<String>,
}

impl OsmFilter {
    /// Whether the tag `key=value` matches this filter.
    pub fn matches(&self, key: &[u8], value: &[u8]) -> bool {
        key == self.key.as_bytes()
            && match &self.value {
                None => value != b"no",
                Some(v) => value == v.as_bytes(),
            }
    }
}

impl Default for OsmFilter {
    /// `building=*`.
    fn default() -> Self {
        OsmFilter {
            key: "building".into(),
            value: None,
        }
    }
}

impl std::str::FromStr for OsmFilter {
    type Err = Error;
    /// Parses `key=*`, `key` (the same) or `key=value`.
    fn from_str(s: &str) -> Result<Self> {
        let (key, value) = match s.split_once('=') {
            None => (s, None),
            Some((k, "*")) => (k, None),
            Some((k, v)) => (k, Some(v.to_string())),
        };
        if key.trim().is_empty() || key != key.trim() || value.as_deref() == Some("") {
            return Err(Error::invalid(format!(
                "bad OSM filter {s:?}: use key=* (any value but no) or key=value, e.g. building=* or highway=primary"
            )));
        }
        Ok(OsmFilter {
            key: key.to_string(),
            value,
        })
    }
}

impl std::fmt::Display for OsmFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value.as_deref().unwrap_or("*"))
    }
}

/// Whose counting of objects the OSM reader follows where the references
/// differ (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OsmLike {
    /// osmium's area assembler (the default): a tagged way that a
    /// multipolygon relation holds is an object beside the relation; a way
    /// cut at the extract's edge is skipped (`missing-nodes`).
    #[default]
    Osmium,
    /// pyrosm's `get_buildings()`: a tagged way that a multipolygon
    /// relation read as an object holds is not an object of its own
    /// (`relation-member`); a way cut at the extract's edge is built from
    /// the nodes present.
    Pyrosm,
}

impl OsmLike {
    /// `"osmium"` or `"pyrosm"`.
    pub fn name(self) -> &'static str {
        match self {
            OsmLike::Osmium => "osmium",
            OsmLike::Pyrosm => "pyrosm",
        }
    }

    /// Whether a tagged way that a multipolygon relation read as an object
    /// holds is an object of its own too.
    pub fn keeps_member_ways(self) -> bool {
        self == OsmLike::Osmium
    }

    /// Whether a way that lacks some of its nodes is built from the others.
    pub fn builds_cut_ways(self) -> bool {
        self == OsmLike::Pyrosm
    }
}

impl std::str::FromStr for OsmLike {
    type Err = Error;
    /// Parses `osmium` or `pyrosm`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "osmium" => Ok(OsmLike::Osmium),
            "pyrosm" => Ok(OsmLike::Pyrosm),
            _ => Err(Error::invalid(format!(
                "unknown OSM reading {s:?}: use osmium (the default: tagged relation member \
                 ways are objects too, ways cut at the extract's edge are skipped) or pyrosm \
                 (relation member ways counted once, cut ways built from the nodes present)"
            ))),
        }
    }
}

impl std::fmt::Display for OsmLike {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of the OSM reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsmOptions {
    /// The tag filters; an element passes when it matches any. Never empty
    /// in practice: an empty list selects nothing.
    pub filters: Vec<OsmFilter>,
    /// Whose counting to follow where osmium and pyrosm differ.
    pub like: OsmLike,
}

impl OsmOptions {
    /// The distinct keys of the filters, in the filters' order: the tag
    /// columns of the output ([`super::attributes::osm_columns`]).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for f in &self.filters {
            if !keys.contains(&f.key) {
                keys.push(f.key.clone());
            }
        }
        keys
    }
}

impl Default for OsmOptions {
    /// `building=*`, read as osmium reads it.
    fn default() -> Self {
        OsmOptions {
            filters: vec![OsmFilter::default()],
            like: OsmLike::default(),
        }
    }
}

/// The kind of an OSM element that became (or could not become) an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OsmType {
    /// A way.
    Way,
    /// A relation.
    Relation,
}

impl OsmType {
    /// `"way"` or `"relation"`.
    pub fn name(self) -> &'static str {
        match self {
            OsmType::Way => "way",
            OsmType::Relation => "relation",
        }
    }
}

/// The object id of OSM element `id` of type `t`: `2·id` for a way,
/// `2·id + 1` for a relation (osmium's area ids). Every non-negative `i64`
/// id has one.
pub fn object_id(t: OsmType, id: u64) -> u64 {
    let even = id.wrapping_mul(2);
    match t {
        OsmType::Way => even,
        OsmType::Relation => even | 1,
    }
}

/// The OSM element of an object id ([`object_id`]'s inverse).
pub fn osm_of(object_id: u64) -> (OsmType, u64) {
    let t = if object_id.is_multiple_of(2) {
        OsmType::Way
    } else {
        OsmType::Relation
    };
    (t, object_id / 2)
}

/// Why an element that passes the filter did not become an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The file lacks a node of the way (or of a member way of the relation);
    /// for a way only with [`OsmLike::Osmium`].
    MissingNodes,
    /// The file lacks a member way of the relation.
    MissingMembers,
    /// The relation's member ways do not join into closed rings.
    UnclosedRing,
    /// Too few nodes or points for the geometry: a way of fewer than two
    /// nodes, a closed way of fewer than four references, a ring without area.
    Degenerate,
    /// The way is a member of a multipolygon relation that became an object
    /// (only with [`OsmLike::Pyrosm`]).
    RelationMember,
}

impl SkipReason {
    /// Every reason, in the order reports list them.
    pub const ALL: [SkipReason; 5] = [
        SkipReason::MissingNodes,
        SkipReason::MissingMembers,
        SkipReason::UnclosedRing,
        SkipReason::Degenerate,
        SkipReason::RelationMember,
    ];

    /// The reason's name in reports (`missing-nodes`).
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::MissingNodes => "missing-nodes",
            SkipReason::MissingMembers => "missing-members",
            SkipReason::UnclosedRing => "unclosed-ring",
            SkipReason::Degenerate => "degenerate",
            SkipReason::RelationMember => "relation-member",
        }
    }

    /// A sentence for people (`the file lacks some of its nodes`).
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::MissingNodes => "the file lacks some of its nodes",
            SkipReason::MissingMembers => "the file lacks some of its member ways",
            SkipReason::UnclosedRing => "its member ways do not close into rings",
            SkipReason::Degenerate => "too few nodes for its geometry",
            SkipReason::RelationMember => "part of a multipolygon relation read as an object",
        }
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An element that passes the filter but did not become an object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skipped {
    /// Way or relation.
    pub osm_type: OsmType,
    /// Its OSM id.
    pub osm_id: u64,
    /// Why.
    pub reason: SkipReason,
}

/// What [`read`] found.
#[derive(Debug, Clone, Default)]
pub struct OsmRead {
    /// The objects with their ids ([`object_id`]): the ways in file order,
    /// then the relations in file order.
    pub objects: Vec<(u64, Geometry)>,
    /// One row per object, in `objects`' order: `osm_type`, `osm_id` and
    /// the value of each filter key ([`super::attributes::osm_columns`];
    /// absent when the element lacks the tag).
    pub attributes: Attributes,
    /// The elements that pass the filter but were not built, ways first.
    pub skipped: Vec<Skipped>,
}

/// Reads the ways and multipolygon relations of an OSM PBF file that pass
/// the filters of `opts` (see the module documentation).
pub fn read(path: &Path, opts: &OsmOptions) -> Result<OsmRead> {
    #[cfg(feature = "osm-pbf")]
    return pbf::read(path, opts);
    #[cfg(not(feature = "osm-pbf"))]
    {
        let _ = opts;
        Err(super::bad(
            path,
            "OSM PBF support is not built in (enable the cargo feature `osm-pbf` of geoflash-bench)",
        ))
    }
}

#[cfg(feature = "osm-pbf")]
mod pbf;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_match() {
        let any: OsmFilter = "building=*".parse().unwrap();
        assert_eq!(any, OsmFilter::default());
        assert_eq!("building".parse::<OsmFilter>().unwrap(), any);
        assert!(any.matches(b"building", b"yes"));
        assert!(any.matches(b"building", b"house"));
        assert!(!any.matches(b"building", b"no"));
        assert!(!any.matches(b"highway", b"yes"));
        let one: OsmFilter = "highway=primary".parse().unwrap();
        assert!(one.matches(b"highway", b"primary"));
        assert!(!one.matches(b"highway", b"secondary"));
        assert_eq!(one.to_string(), "highway=primary");
        assert_eq!(any.to_string(), "building=*");
        for bad in ["", "=yes", "building=", " building=*"] {
            let e = bad.parse::<OsmFilter>().unwrap_err().to_string();
            assert!(e.contains("key=value"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn readings_parse_and_name_their_choices() {
        assert_eq!(OsmOptions::default().like, OsmLike::Osmium);
        for like in [OsmLike::Osmium, OsmLike::Pyrosm] {
            assert_eq!(like.name().parse::<OsmLike>().unwrap(), like);
            assert_eq!(serde_json::to_value(like).unwrap(), like.name());
        }
        assert!(OsmLike::Osmium.keeps_member_ways() && !OsmLike::Osmium.builds_cut_ways());
        assert!(!OsmLike::Pyrosm.keeps_member_ways() && OsmLike::Pyrosm.builds_cut_ways());
        let e = "gdal".parse::<OsmLike>().unwrap_err().to_string();
        assert!(e.contains("osmium") && e.contains("pyrosm"), "{e}");
    }

    #[test]
    fn object_ids_keep_type_and_id() {
        for id in [0u64, 1, 9630, 1 << 40, i64::MAX as u64] {
            for t in [OsmType::Way, OsmType::Relation] {
                assert_eq!(osm_of(object_id(t, id)), (t, id));
            }
        }
        assert_eq!(object_id(OsmType::Way, 5), 10);
        assert_eq!(object_id(OsmType::Relation, 5), 11);
        let names: Vec<&str> = SkipReason::ALL.iter().map(|r| r.name()).collect();
        for (r, n) in SkipReason::ALL.iter().zip(&names) {
            assert_eq!(serde_json::to_value(r).unwrap(), *n);
        }
    }
}
