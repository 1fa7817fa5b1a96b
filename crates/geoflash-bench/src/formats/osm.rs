//! OpenStreetMap PBF input through the `osmpbf` crate: closed ways as
//! polygons, with the way id as the object id.
//!
//! A way is *closed* when it has at least four node references and its
//! first and last references are the same node. By default only closed ways
//! tagged `building=*` (any value but `no`) are read ([`OsmWays::Buildings`]);
//! [`OsmWays::Closed`] reads every closed way. Multipolygon relations, open
//! ways and nodes on their own are not read.
//!
//! The file is read twice through `osmpbf::IndexedReader`: a first pass
//! over the blocks that hold ways selects the ways and remembers their node
//! references, a second pass over the blocks whose node id range can hold
//! one of those references resolves the coordinates (x = longitude,
//! y = latitude, in degrees). A way that references a node the file does not
//! hold (common at the edges of extracts) is skipped and counted
//! ([`OsmRead::incomplete`]), not an error. Node references are
//! delta-decoded here with checked arithmetic; a way whose references
//! overflow is an error.
//!
//! Behind the cargo feature `osm-pbf` (on by default; `osmpbf` brings the
//! `protobuf` crate and, at build time, its code generator); without it
//! [`read`] returns an error that says so.
use std::path::Path;

use geoflash::objects::Geometry;
use geoflash::{Error, Result};

/// Which closed ways become polygons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OsmWays {
    /// Closed ways with a `building` tag whose value is not `no` (the default).
    #[default]
    Buildings,
    /// Every closed way.
    Closed,
}

impl std::str::FromStr for OsmWays {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "buildings" | "building" => Ok(OsmWays::Buildings),
            "closed" | "all-closed" => Ok(OsmWays::Closed),
            _ => Err(Error::invalid(format!(
                "unknown OSM way selection {s:?}: use buildings or closed"
            ))),
        }
    }
}

/// What [`read`] found.
#[derive(Debug, Clone, Default)]
pub struct OsmRead {
    /// The polygons with their way ids, in file order.
    pub objects: Vec<(u64, Geometry)>,
    /// Selected ways skipped because the file lacks one of their nodes.
    pub incomplete: u64,
}

/// The node ids of a way, delta-decoded; `None` on overflow.
/// Reads the polygons of closed ways from an OSM PBF file (see the module
/// documentation).
pub fn read(path: &Path, ways: OsmWays) -> Result<OsmRead> {
    #[cfg(feature = "osm-pbf")]
    return imp::read(path, ways);
    #[cfg(not(feature = "osm-pbf"))]
    {
        let _ = ways;
        Err(super::bad(
            path,
            "OSM PBF support is not built in (enable the cargo feature `osm-pbf` of geoflash-bench)",
        ))
    }
}

#[cfg(feature = "osm-pbf")]
mod imp {
    use std::collections::HashMap;
    use std::path::Path;

    use geo_types::{Coord, LineString, Polygon};
    use geoflash::objects::Geometry;
    use geoflash::Result;

    use super::super::{bad, io_err, Collector};
    use super::{OsmRead, OsmWays};

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

    /// Whether a way's tags (indices into the block's string table) hold a
    /// `building` tag other than `building=no`.
    fn is_building(tags: impl Iterator<Item = (u32, u32)>, table: &[Vec<u8>]) -> bool {
        let s = |i: u32| table.get(i as usize).map(Vec::as_slice);
        tags.into_iter()
            .any(|(k, v)| s(k) == Some(b"building".as_slice()) && s(v) != Some(b"no".as_slice()))
    }

    /// Reads the polygons of closed ways from an OSM PBF file (see the module
    /// documentation).
    pub(super) fn read(path: &Path, ways: OsmWays) -> Result<OsmRead> {
        std::fs::metadata(path).map_err(|e| io_err(path, e))?;
        let fail = |e: osmpbf::Error| match e.kind() {
            osmpbf::ErrorKind::Io(io) if io.kind() != std::io::ErrorKind::UnexpectedEof => {
                io_err(path, std::io::Error::new(io.kind(), io.to_string()))
            }
            _ => bad(path, format!("not a valid OSM PBF file: {e}")),
        };
        let mut reader = osmpbf::IndexedReader::from_path(path).map_err(fail)?;
        let mut selected: Vec<(i64, Vec<i64>)> = Vec::new();
        let mut overflow: Option<i64> = None;
        let mut nodes: HashMap<i64, Coord> = HashMap::new();
        reader
            .read_ways_and_deps(
                |way| {
                    let Some(refs) = decode_refs(way.raw_refs()) else {
                        overflow.get_or_insert(way.id());
                        return false;
                    };
                    let closed = refs.len() >= 4 && refs.first() == refs.last();
                    let keep = closed
                        && (ways == OsmWays::Closed
                            || is_building(way.raw_tags(), way.raw_stringtable()));
                    if keep {
                        selected.push((way.id(), refs));
                    }
                    keep
                },
                |element| {
                    let (id, x, y) = match element {
                        osmpbf::Element::Node(n) => (n.id(), n.lon(), n.lat()),
                        osmpbf::Element::DenseNode(n) => (n.id(), n.lon(), n.lat()),
                        _ => return,
                    };
                    nodes.insert(id, Coord { x, y });
                },
            )
            .map_err(fail)?;
        if let Some(id) = overflow {
            return Err(bad(
                path,
                format!("way {id}: its node references overflow 64 bits"),
            ));
        }
        let mut objects = Collector::new(path);
        let mut incomplete = 0;
        for (id, refs) in selected {
            let what = format!("way {id}");
            let uid = u64::try_from(id).map_err(|_| {
                bad(
                    path,
                    format!("{what}: a negative id cannot be an object id"),
                )
            })?;
            let ring: Option<Vec<Coord>> = refs.iter().map(|r| nodes.get(r).copied()).collect();
            match ring {
                Some(ring) => objects.push(
                    &what,
                    uid,
                    Geometry::Polygon(Polygon::new(LineString::new(ring), vec![])),
                )?,
                None => incomplete += 1,
            }
        }
        Ok(OsmRead {
            objects: objects.finish(),
            incomplete,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn refs_and_tags() {
            assert_eq!(decode_refs(&[5, 1, -3]), Some(vec![5, 6, 3]));
            assert_eq!(decode_refs(&[i64::MAX, 1]), None);
            let table = vec![
                b"".to_vec(),
                b"building".to_vec(),
                b"yes".to_vec(),
                b"no".to_vec(),
            ];
            assert!(is_building([(1, 2)].into_iter(), &table));
            assert!(!is_building([(1, 3)].into_iter(), &table));
            assert!(!is_building([(2, 1), (9, 9)].into_iter(), &table));
            assert_eq!("closed".parse::<OsmWays>().unwrap(), OsmWays::Closed);
            assert!("open".parse::<OsmWays>().is_err());
        }
    }
}
