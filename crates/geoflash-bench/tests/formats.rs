//! Dataset formats end to end: one dataset written and read back in every
//! format gives the same ids and bit-identical MBRs; geometries survive the
//! geometry formats; Shapefile ids; a hand-built OSM PBF; corrupt and
//! truncated files are errors, never panics.
use std::path::{Path, PathBuf};

use geoflash::engine::bounding_rect;
use geoflash::engine::Geometry;
use geoflash::geom::Rect;
use geoflash_bench::formats::{self, Format};
use geoflash_bench::generate::InsertionOrder;
use geoflash_bench::import::{self, ReadOptions};

/// Rectangles with awkward coordinates: points, segments, negative and
/// tiny and huge values, values without a short decimal form.
fn dataset() -> Vec<(u64, Rect)> {
    let mut v = vec![
        (
            0,
            Rect::new(0.1 + 0.2, -0.0, 1.0 / 3.0, 2.0f64.sqrt()).unwrap(),
        ),
        (7, Rect::new(5.0, 5.0, 5.0, 5.0).unwrap()),
        (8, Rect::new(-180.0, -90.0, 180.0, 90.0).unwrap()),
        (9, Rect::new(1e-300, 2.5e-308, 1e-299, 3e-300).unwrap()),
        (
            10,
            Rect::new(-1.23456789012345e12, 4.0, 9.87654321e13, 4.0).unwrap(),
        ),
        (11, Rect::new(2.0, -7.25, 2.0, 3.0).unwrap()),
        (
            u64::from(u32::MAX) + 5,
            Rect::new(-3.0, -2.0, -1.0, -1.0).unwrap(),
        ),
    ];
    // and enough boxes for more than one parquet page
    for i in 0..500u64 {
        let x = (i as f64) * 0.7313 - 100.0;
        let y = ((i * 7919) % 1000) as f64 / 13.0;
        v.push((
            1000 + i,
            Rect::new(x, y, x + 0.01 * (i % 7) as f64, y + 1e-9).unwrap(),
        ));
    }
    v
}

/// The formats written here: every writable one (GeoParquet only with the
/// `geoparquet` feature).
fn written() -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| f.writable() && (cfg!(feature = "geoparquet") || *f != Format::GeoParquet))
        .collect()
}

/// Extensions of the geometry formats written here.
fn geometry_exts() -> Vec<&'static str> {
    let mut v = vec!["geojson", "fgb"];
    if cfg!(feature = "geoparquet") {
        v.push("parquet");
    }
    v
}

fn bits(r: &Rect) -> [u64; 4] {
    [r.min_x(), r.min_y(), r.max_x(), r.max_y()].map(f64::to_bits)
}

fn assert_same(got: &[(u64, Rect)], want: &[(u64, Rect)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: count");
    for ((gi, gr), (wi, wr)) in got.iter().zip(want) {
        assert_eq!(gi, wi, "{what}: ids");
        // -0.0 and 0.0 compare equal; the bits must too, except for the sign of zero
        let norm = |b: [u64; 4]| b.map(|x| if x == (-0.0f64).to_bits() { 0 } else { x });
        assert_eq!(
            norm(bits(gr)),
            norm(bits(wr)),
            "{what}: id {gi}: {gr:?} vs {wr:?}"
        );
    }
}

/// Writes the dataset as a shapefile (polygons of the rectangles, the id in
/// a numeric `ID` field of the .dbf) with the `shapefile` crate's writer.
fn write_shapefile(path: &Path, recs: &[(u64, Rect)], id_field: Option<&str>) {
    use shapefile::dbase::{self, FieldValue, TableWriterBuilder};
    use shapefile::{Point, Polygon, PolygonRing};
    let name = id_field.unwrap_or("NAME");
    let table = if id_field.is_some() {
        TableWriterBuilder::new().add_numeric_field(name.try_into().unwrap(), 20, 0)
    } else {
        TableWriterBuilder::new().add_character_field(name.try_into().unwrap(), 20)
    };
    let mut w = shapefile::Writer::from_path(path, table).unwrap();
    for (id, r) in recs {
        let ring = vec![
            Point::new(r.min_x(), r.min_y()),
            Point::new(r.min_x(), r.max_y()),
            Point::new(r.max_x(), r.max_y()),
            Point::new(r.max_x(), r.min_y()),
            Point::new(r.min_x(), r.min_y()),
        ];
        let poly = Polygon::new(PolygonRing::Outer(ring));
        let mut rec = dbase::Record::default();
        let v = match id_field {
            Some(_) => FieldValue::Numeric(Some(*id as f64)),
            None => FieldValue::Character(Some(format!("r{id}"))),
        };
        rec.insert(name.to_string(), v);
        w.write_shape_and_record(&poly, &rec).unwrap();
    }
}

#[test]
fn one_dataset_round_trips_through_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let recs = dataset();
    let mut files = Vec::new();
    for f in written() {
        let p = dir.path().join(format!("d.{}", f.extensions()[0]));
        assert_eq!(
            formats::write_dataset(&p, recs.iter().copied()).unwrap(),
            recs.len() as u64
        );
        assert_eq!(Format::from_path(&p).unwrap(), f);
        files.push(p);
    }
    let shp = dir.path().join("d.shp");
    write_shapefile(&shp, &recs, Some("ID"));
    files.push(shp);
    for p in &files {
        let got = import::read_rects(p).unwrap();
        assert_same(&got, &recs, &p.display().to_string());
        let objs = import::read_objects(p).unwrap();
        assert_eq!(objs.len(), recs.len());
    }
    // import from each format into each writable one keeps ids, MBRs and order
    for input in &files {
        for f in written() {
            let out = dir.path().join(format!("via.{}", f.extensions()[0]));
            let r = import::import(
                input,
                &out,
                InsertionOrder::AsGenerated,
                1,
                &ReadOptions::default(),
            )
            .unwrap();
            assert_eq!((r.count, r.out_format), (recs.len(), f));
            assert_same(
                &import::read_rects(&out).unwrap(),
                &recs,
                &format!("{} -> {}", input.display(), out.display()),
            );
        }
    }
    // a shuffled import is a permutation
    let out = dir.path().join("shuffled.fgb");
    import::import(
        &files[0],
        &out,
        InsertionOrder::Random,
        5,
        &ReadOptions::default(),
    )
    .unwrap();
    let mut got = import::read_rects(&out).unwrap();
    assert_ne!(
        got.iter().map(|x| x.0).collect::<Vec<_>>(),
        recs.iter().map(|x| x.0).collect::<Vec<_>>()
    );
    got.sort_by_key(|x| x.0);
    let mut want = recs.clone();
    want.sort_by_key(|x| x.0);
    assert_same(&got, &want, "shuffled");
}

fn geometries() -> Vec<(u64, Geometry)> {
    use geo_types::{
        line_string, point, polygon, GeometryCollection, MultiLineString, MultiPoint, MultiPolygon,
    };
    let square = polygon!(
        exterior: [(x: 0.0, y: 0.0), (x: 10.0, y: 0.0), (x: 10.0, y: 10.0), (x: 0.0, y: 10.0), (x: 0.0, y: 0.0)],
        interiors: [[(x: 2.0, y: 2.0), (x: 2.0, y: 4.0), (x: 4.0, y: 4.0), (x: 2.0, y: 2.0)]],
    );
    let tri =
        polygon![(x: 20.0, y: 0.0), (x: 21.5, y: 0.0), (x: 20.0, y: 1.0 / 3.0), (x: 20.0, y: 0.0)];
    vec![
        (1, point!(x: -1.5, y: 2.25).into()),
        (
            2,
            line_string![(x: 0.0, y: 0.0), (x: 1e-7, y: 3.0), (x: -4.0, y: 0.1)].into(),
        ),
        (3, square.clone().into()),
        (
            4,
            MultiPoint::new(vec![point!(x: 1.0, y: 1.0), point!(x: 2.0, y: 3.0)]).into(),
        ),
        (
            5,
            MultiLineString::new(vec![
                line_string![(x: 0.0, y: 0.0), (x: 1.0, y: 1.0)],
                line_string![(x: 5.0, y: 5.0), (x: 6.0, y: 5.0), (x: 6.0, y: 7.0)],
            ])
            .into(),
        ),
        (
            6,
            MultiPolygon::new(vec![square.clone(), tri.clone()]).into(),
        ),
        (
            7,
            Geometry::GeometryCollection(GeometryCollection::new_from(vec![
                point!(x: 9.0, y: 9.0).into(),
                tri.into(),
            ])),
        ),
    ]
}

#[test]
fn geometries_survive_geojson_flatgeobuf_and_geoparquet() {
    let dir = tempfile::tempdir().unwrap();
    let geoms = geometries();
    for ext in geometry_exts() {
        let p = dir.path().join(format!("g.{ext}"));
        // the FlatGeobuf writer refuses geometry collections (see formats::fgb)
        let want: Vec<_> = geoms
            .iter()
            .filter(|(_, g)| ext != "fgb" || !matches!(g, Geometry::GeometryCollection(_)))
            .cloned()
            .collect();
        formats::write_objects(&p, want.iter().map(|(i, g)| (*i, g))).unwrap();
        let back = import::read_objects(&p).unwrap();
        assert_eq!(back, want, "{ext}");
    }
    let p = dir.path().join("gc.fgb");
    let e = formats::write_objects(&p, geoms.iter().map(|(i, g)| (*i, g))).unwrap_err();
    assert!(
        e.to_string().contains("object 7 is a geometry collection"),
        "{e}"
    );
    // CSV output holds the MBRs
    let p = dir.path().join("g.csv");
    formats::write_objects(&p, geoms.iter().map(|(i, g)| (*i, g))).unwrap();
    let want: Vec<(u64, Rect)> = geoms
        .iter()
        .map(|(i, g)| (*i, bounding_rect(g).unwrap()))
        .collect();
    assert_eq!(import::read_rects(&p).unwrap(), want);
}

/// A FlatGeobuf file of geometry collections written by the crate itself
/// (header type GeometryCollection, typed parts) reads back.
#[test]
fn flatgeobuf_geometry_collections_read() {
    use flatgeobuf::geozero::{ColumnValue, PropertyProcessor};
    use flatgeobuf::{ColumnType, FgbWriter, FgbWriterOptions, GeometryType};
    let dir = tempfile::tempdir().unwrap();
    // a point and a line: the crate's writer splits a polygon inside a
    // collection into two parts (its ring, then an empty polygon)
    use geo_types::{line_string, point};
    let gc = Geometry::GeometryCollection(geo_types::GeometryCollection::new_from(vec![
        point!(x: 1.0, y: -2.0).into(),
        line_string![(x: 0.0, y: 0.0), (x: 3.0, y: 1.0 / 3.0)].into(),
    ]));
    let mut fgb = FgbWriter::create_with_options(
        "gc",
        GeometryType::GeometryCollection,
        FgbWriterOptions {
            write_index: true,
            ..Default::default()
        },
    )
    .unwrap();
    fgb.add_column("fid", ColumnType::Int, |_, _| {});
    fgb.add_column("ID", ColumnType::Long, |_, _| {});
    for id in [3i64, 4] {
        fgb.add_feature_geom(gc.clone(), |f| {
            f.property(0, "fid", &ColumnValue::Int(-1)).unwrap();
            f.property(1, "ID", &ColumnValue::Long(id)).unwrap();
        })
        .unwrap();
    }
    let p = dir.path().join("gc.fgb");
    fgb.write(std::fs::File::create(&p).unwrap()).unwrap();
    let back = import::read_objects(&p).unwrap();
    assert_eq!(back, vec![(3, gc.clone()), (4, gc)]);
}

#[test]
fn shapefile_ids_come_from_the_dbf_or_the_record_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<(u64, Rect)> = dataset().into_iter().take(20).collect();
    // an id field of another case
    let shp = dir.path().join("a.shp");
    write_shapefile(&shp, &recs, Some("Id"));
    assert_same(&import::read_rects(&shp).unwrap(), &recs, "Id field");
    let objs = import::read_objects(&shp).unwrap();
    assert!(matches!(objs[2].1, Geometry::MultiPolygon(_)));
    // without the .dbf: record numbers from 1
    std::fs::remove_file(dir.path().join("a.dbf")).unwrap();
    let numbered: Vec<(u64, Rect)> = recs
        .iter()
        .enumerate()
        .map(|(n, (_, r))| (n as u64 + 1, *r))
        .collect();
    assert_same(&import::read_rects(&shp).unwrap(), &numbered, "no dbf");
    // a .dbf without an id field: record numbers too
    let shp = dir.path().join("b.shp");
    write_shapefile(&shp, &recs, None);
    assert_same(&import::read_rects(&shp).unwrap(), &numbered, "no id field");
    // the .shx is optional
    std::fs::remove_file(dir.path().join("b.shx")).unwrap();
    assert_same(&import::read_rects(&shp).unwrap(), &numbered, "no shx");
}

/// A .shp of point records whose record `null` (1-based) is a null shape.
fn shp_with_null(null: usize, records: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for n in 1..=records {
        body.extend((n as i32).to_be_bytes());
        if n == null {
            body.extend(2i32.to_be_bytes()); // content length in 16-bit words
            body.extend(0i32.to_le_bytes()); // null shape
        } else {
            body.extend(10i32.to_be_bytes());
            body.extend(1i32.to_le_bytes()); // point
            body.extend((n as f64).to_le_bytes());
            body.extend(2.5f64.to_le_bytes());
        }
    }
    let mut f = Vec::new();
    f.extend(9994i32.to_be_bytes());
    f.extend([0u8; 20]);
    f.extend((((100 + body.len()) / 2) as i32).to_be_bytes());
    f.extend(1000i32.to_le_bytes());
    f.extend(1i32.to_le_bytes());
    for v in [1.0, 2.5, records as f64, 2.5, 0.0, 0.0, 0.0, 0.0] {
        f.extend(f64::to_le_bytes(v));
    }
    f.extend(body);
    f
}

#[test]
fn a_shapefile_without_geometry_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let shp = dir.path().join("n.shp");
    std::fs::write(&shp, shp_with_null(0, 3)).unwrap();
    let got = import::read_rects(&shp).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[1], (2, Rect::new(2.0, 2.5, 2.0, 2.5).unwrap()));
    std::fs::write(&shp, shp_with_null(2, 3)).unwrap();
    let e = import::read_objects(&shp).unwrap_err().to_string();
    assert!(e.contains("record 2") && e.contains("no geometry"), "{e}");
    // a file of null shapes only
    std::fs::write(&shp, shp_with_null(1, 1)).unwrap();
    let e = import::read_objects(&shp).unwrap_err().to_string();
    assert!(e.contains("record 1") && e.contains("no geometry"), "{e}");
    // not a shapefile at all
    std::fs::write(&shp, b"id,minx\n1,2\n").unwrap();
    let e = import::read_objects(&shp).unwrap_err().to_string();
    assert!(e.contains("shapefile"), "{e}");
}

// ---- a tiny OSM PBF, built by hand (protobuf wire format) ----

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}
fn tag(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from(field << 3 | wire));
}
fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, 2);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}
fn uint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
fn packed_sint(out: &mut Vec<u8>, field: u32, vals: &[i64]) {
    let mut b = Vec::new();
    for v in vals {
        varint(&mut b, zigzag(*v));
    }
    bytes_field(out, field, &b);
}
fn packed_uint(out: &mut Vec<u8>, field: u32, vals: &[u64]) {
    let mut b = Vec::new();
    for v in vals {
        varint(&mut b, *v);
    }
    bytes_field(out, field, &b);
}
fn deltas(v: &[i64]) -> Vec<i64> {
    let mut prev = 0;
    v.iter()
        .map(|x| {
            let d = x - prev;
            prev = *x;
            d
        })
        .collect()
}
/// A file block: BlobHeader length, BlobHeader, Blob with raw data.
fn block(out: &mut Vec<u8>, kind: &str, payload: &[u8]) {
    let mut blob = Vec::new();
    bytes_field(&mut blob, 1, payload);
    uint_field(&mut blob, 2, payload.len() as u64);
    let mut header = Vec::new();
    bytes_field(&mut header, 1, kind.as_bytes());
    uint_field(&mut header, 3, blob.len() as u64);
    out.extend((header.len() as u32).to_be_bytes());
    out.extend(header);
    out.extend(blob);
}

/// Node `i` lies at (10 + i/1000, 50 + i²/2000) degrees, in units of 100
/// nanodegrees (on a parabola: no three nodes on a line, rings have area).
fn node_units(i: i64) -> (i64, i64) {
    (100_000_000 + i * 10_000, 500_000_000 + i * i * 5_000)
}
#[cfg(feature = "osm-pbf")]
fn degrees(units: i64) -> f64 {
    // the double nearest to the decimal value, as osmium, GDAL and pyrosm read it
    (100 * units) as f64 / 1e9
}

const STRINGS: [&str; 10] = [
    "",
    "building",
    "yes",
    "no",
    "house",
    "type",
    "multipolygon",
    "outer",
    "highway",
    "inner",
];

/// Nodes 1..=9 as dense nodes, node 10 as a plain node; ways:
/// 100 closed building=yes; 101 closed untagged; 102 open building;
/// 103 closed building=no; 104 closed building referencing the missing
/// node 99; 105 closed building=house over the plain node; 106 (1,2,3) and
/// 107 (1,4,3), untagged, the two halves of one ring; 108 closed building
/// (5,6,7); 109 closed highway=yes (6,7,8); 110 closed building (99, 2, 3,
/// 4, 99), cut at the extract's edge on its first and last node.
/// Relations (type=multipolygon, building=yes): 7 over 106 and 107 (a ring
/// split in two, one half reversed); 8 over 104 (a node missing); 9 over
/// the missing way 999; 11 over 108 (an object of its own too, as osmium
/// reads it, but not as pyrosm does); 12 over 106 alone (does not close).
fn osm_pbf() -> Vec<u8> {
    let mut file = Vec::new();
    let mut hb = Vec::new();
    bytes_field(&mut hb, 4, b"OsmSchema-V0.6");
    bytes_field(&mut hb, 4, b"DenseNodes");
    block(&mut file, "OSMHeader", &hb);

    let mut table = Vec::new();
    for s in STRINGS {
        bytes_field(&mut table, 1, s.as_bytes());
    }
    // nodes block
    let ids: Vec<i64> = (1..=9).collect();
    let (lons, lats): (Vec<i64>, Vec<i64>) = ids.iter().map(|&i| node_units(i)).unzip();
    let mut dense = Vec::new();
    packed_sint(&mut dense, 1, &deltas(&ids));
    packed_sint(&mut dense, 8, &deltas(&lats));
    packed_sint(&mut dense, 9, &deltas(&lons));
    let mut group = Vec::new();
    bytes_field(&mut group, 2, &dense);
    let mut node = Vec::new();
    let (lon10, lat10) = node_units(10);
    uint_field(&mut node, 1, zigzag(10));
    uint_field(&mut node, 8, zigzag(lat10));
    uint_field(&mut node, 9, zigzag(lon10));
    let mut group2 = Vec::new();
    bytes_field(&mut group2, 1, &node);
    let mut pb = Vec::new();
    bytes_field(&mut pb, 1, &table);
    bytes_field(&mut pb, 2, &group);
    bytes_field(&mut pb, 2, &group2);
    block(&mut file, "OSMData", &pb);

    // ways block
    // (way id, node refs, tags as string-table indices)
    type Way<'a> = (u64, &'a [i64], &'a [(u64, u64)]);
    let ways: [Way; 11] = [
        (100, &[1, 2, 3, 4, 1], &[(1, 2)]),
        (101, &[2, 3, 5, 2], &[]),
        (102, &[5, 6, 7], &[(1, 2)]),
        (103, &[6, 7, 8, 6], &[(1, 3)]),
        (104, &[1, 99, 3, 1], &[(1, 2)]),
        (105, &[8, 9, 10, 8], &[(1, 4)]),
        (106, &[1, 2, 3], &[]),
        (107, &[1, 4, 3], &[]),
        (108, &[5, 6, 7, 5], &[(1, 2)]),
        (109, &[6, 7, 8, 6], &[(8, 2)]),
        (110, &[99, 2, 3, 4, 99], &[(1, 2)]),
    ];
    let mut group = Vec::new();
    for (id, refs, tags) in ways {
        let mut w = Vec::new();
        uint_field(&mut w, 1, id);
        if !tags.is_empty() {
            packed_uint(&mut w, 2, &tags.iter().map(|t| t.0).collect::<Vec<_>>());
            packed_uint(&mut w, 3, &tags.iter().map(|t| t.1).collect::<Vec<_>>());
        }
        packed_sint(&mut w, 8, &deltas(refs));
        bytes_field(&mut group, 3, &w);
    }
    let mut pb = Vec::new();
    bytes_field(&mut pb, 1, &table);
    bytes_field(&mut pb, 2, &group);
    block(&mut file, "OSMData", &pb);

    // relations block: (id, member way ids), all type=multipolygon building=yes, role outer
    let rels: [(u64, &[i64]); 5] = [
        (7, &[106, 107]),
        (8, &[104]),
        (9, &[999]),
        (11, &[108]),
        (12, &[106]),
    ];
    let mut group = Vec::new();
    for (id, members) in rels {
        let mut r = Vec::new();
        uint_field(&mut r, 1, id);
        packed_uint(&mut r, 2, &[5, 1]);
        packed_uint(&mut r, 3, &[6, 2]);
        packed_uint(&mut r, 8, &vec![7; members.len()]);
        packed_sint(&mut r, 9, &deltas(members));
        packed_uint(&mut r, 10, &vec![1; members.len()]);
        bytes_field(&mut group, 4, &r);
    }
    let mut pb = Vec::new();
    bytes_field(&mut pb, 1, &table);
    bytes_field(&mut pb, 2, &group);
    block(&mut file, "OSMData", &pb);
    file
}

#[cfg(feature = "osm-pbf")]
fn way_rect(nodes: &[i64]) -> Rect {
    let xs: Vec<f64> = nodes.iter().map(|&i| degrees(node_units(i).0)).collect();
    let ys: Vec<f64> = nodes.iter().map(|&i| degrees(node_units(i).1)).collect();
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Rect::new(min(&xs), min(&ys), max(&xs), max(&ys)).unwrap()
}

#[cfg(feature = "osm-pbf")]
#[test]
fn osm_pbf_ways_and_relations_become_objects() {
    use geoflash_bench::formats::osm::{object_id, OsmOptions, OsmType, SkipReason, Skipped};
    let dir = tempfile::tempdir().unwrap();
    let pbf = dir.path().join("tiny.osm.pbf");
    std::fs::write(&pbf, osm_pbf()).unwrap();
    // buildings (the default), as osmium reads them: ways 100, 102 (open: a
    // line), 105, 108 (also the outer ring of relation 11); relations 7 and 11
    let d = import::read_dataset(&pbf, &ReadOptions::default()).unwrap();
    assert_eq!(d.format, Format::OsmPbf);
    let skip = |osm_type, osm_id, reason| Skipped {
        osm_type,
        osm_id,
        reason,
    };
    assert_eq!(
        d.skipped,
        vec![
            skip(OsmType::Way, 104, SkipReason::MissingNodes),
            skip(OsmType::Way, 110, SkipReason::MissingNodes),
            skip(OsmType::Relation, 8, SkipReason::MissingNodes),
            skip(OsmType::Relation, 9, SkipReason::MissingMembers),
            skip(OsmType::Relation, 12, SkipReason::UnclosedRing),
        ]
    );
    let rects: Vec<(u64, Rect)> = d
        .objects
        .iter()
        .map(|(i, g)| (*i, bounding_rect(g).unwrap()))
        .collect();
    let way = |id| object_id(OsmType::Way, id);
    let rel = |id| object_id(OsmType::Relation, id);
    assert_eq!(
        rects,
        vec![
            (way(100), way_rect(&[1, 2, 3, 4])),
            (way(102), way_rect(&[5, 6, 7])),
            (way(105), way_rect(&[8, 9, 10])),
            (way(108), way_rect(&[5, 6, 7])),
            (rel(7), way_rect(&[1, 2, 3, 4])),
            (rel(11), way_rect(&[5, 6, 7])),
        ]
    );
    assert_eq!((way(100), rel(7)), (200, 15));
    match &d.objects[0].1 {
        Geometry::Polygon(p) => {
            assert_eq!(p.exterior().0.len(), 5);
            assert_eq!(p.exterior().0[1].x, degrees(node_units(2).0));
            assert_eq!(p.exterior().0[1].y, degrees(node_units(2).1));
        }
        g => panic!("{g:?}"),
    }
    assert!(matches!(&d.objects[1].1, Geometry::LineString(l) if l.0.len() == 3));
    // the relation's ring, joined from 106 and 107 reversed, encloses what way 100
    // does, counter-clockwise
    {
        use geo::Area;
        match (&d.objects[0].1, &d.objects[4].1) {
            (Geometry::Polygon(w), Geometry::Polygon(r)) => {
                assert_eq!(r.exterior().0.len(), 5);
                assert!(r.signed_area() > 0.0);
                assert!((r.unsigned_area() - w.unsigned_area()).abs() < 1e-18);
            }
            g => panic!("{g:?}"),
        }
    }
    // as pyrosm reads them: way 108 only as relation 11, way 110 built from
    // the nodes present (2, 3, 4, closed on 2), way 104 left with a ring of
    // three points (1, 3, 1)
    let p = import::read_dataset(&pbf, &read_as_pyrosm()).unwrap();
    assert_eq!(
        p.skipped,
        vec![
            skip(OsmType::Way, 104, SkipReason::Degenerate),
            skip(OsmType::Way, 108, SkipReason::RelationMember),
            skip(OsmType::Relation, 8, SkipReason::MissingNodes),
            skip(OsmType::Relation, 9, SkipReason::MissingMembers),
            skip(OsmType::Relation, 12, SkipReason::UnclosedRing),
        ]
    );
    let ids: Vec<u64> = p.objects.iter().map(|o| o.0).collect();
    assert_eq!(
        ids,
        [way(100), way(102), way(105), way(110), rel(7), rel(11)]
    );
    match &p.objects[3].1 {
        Geometry::Polygon(poly) => {
            let at = |i: i64| (degrees(node_units(i).0), degrees(node_units(i).1));
            let ring: Vec<(f64, f64)> = poly.exterior().0.iter().map(|c| (c.x, c.y)).collect();
            assert_eq!(ring, [at(2), at(3), at(4), at(2)]);
        }
        g => panic!("{g:?}"),
    }
    // another filter: highway=*; the closed highway 109 is a line
    let opts = ReadOptions {
        osm: OsmOptions {
            filters: vec!["highway=*".parse().unwrap()],
            ..OsmOptions::default()
        },
        ..ReadOptions::default()
    };
    let d = import::read_dataset(&pbf, &opts).unwrap();
    assert_eq!(d.objects.len(), 1);
    assert_eq!(d.objects[0].0, way(109));
    assert!(matches!(&d.objects[0].1, Geometry::LineString(l) if l.0.len() == 4));
    assert!(d.skipped.is_empty());
    // several filters: what any of them selects; building=house selects 105 only
    let opts = ReadOptions {
        osm: OsmOptions {
            filters: vec![
                "highway=*".parse().unwrap(),
                "building=house".parse().unwrap(),
            ],
            ..OsmOptions::default()
        },
        ..ReadOptions::default()
    };
    let d = import::read_dataset(&pbf, &opts).unwrap();
    assert_eq!(
        d.objects.iter().map(|o| o.0).collect::<Vec<_>>(),
        [way(105), way(109)]
    );
    // import reports the skipped way and writes the polygons
    let out = dir.path().join("b.fgb");
    let r = import::import(
        &pbf,
        &out,
        InsertionOrder::AsGenerated,
        1,
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        (r.count, r.skipped, r.input_format.as_str()),
        (6, 5, "osm-pbf")
    );
    let by_reason: Vec<(&str, u64)> = r
        .skipped_by_reason
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        by_reason,
        [
            ("missing-members", 1),
            ("missing-nodes", 3),
            ("unclosed-ring", 1)
        ]
    );
    assert_eq!(import::read_rects(&out).unwrap(), rects);
    let list = dir.path().join("skipped.csv");
    import::write_skipped(&list, &r.skipped_records).unwrap();
    assert_eq!(
        std::fs::read_to_string(&list).unwrap(),
        "osm_type,osm_id,reason\nway,104,missing-nodes\nway,110,missing-nodes\nrelation,8,missing-nodes\nrelation,9,missing-members\nrelation,12,unclosed-ring\n"
    );
    // corrupt PBF: clear errors
    let good = osm_pbf();
    std::fs::write(&pbf, &good[..good.len() - 7]).unwrap();
    let e = import::read_objects(&pbf).unwrap_err().to_string();
    assert!(e.contains("OSM PBF"), "{e}");
    std::fs::write(&pbf, b"definitely not a pbf").unwrap();
    let e = import::read_objects(&pbf).unwrap_err().to_string();
    assert!(e.contains("not a valid OSM PBF"), "{e}");
}

#[test]
fn corrupt_flatgeobuf_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.fgb");
    formats::write_dataset(&good, dataset().into_iter()).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let p = dir.path().join("bad.fgb");
    // truncated inside a feature, and exactly at a feature boundary
    std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(e.contains("truncated FlatGeobuf"), "{e}");
    let boundary = {
        // the last feature is size-prefixed: find where it starts
        let mut at = None;
        for i in (12..bytes.len() - 4).rev() {
            let n =
                u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]) as usize;
            if i + 4 + n == bytes.len() {
                at = Some(i);
                break;
            }
        }
        at.unwrap()
    };
    std::fs::write(&p, &bytes[..boundary]).unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(
        e.contains("announces 507 features, the file holds 506"),
        "{e}"
    );
    std::fs::write(&p, &bytes[..5]).unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(e.contains("truncated FlatGeobuf"), "{e}");
    // flipped magic, flipped header size
    let mut b = bytes.clone();
    b[1] ^= 0xff;
    std::fs::write(&p, &b).unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(e.contains("not a valid FlatGeobuf"), "{e}");
    let mut b = bytes.clone();
    b[11] ^= 0x40;
    std::fs::write(&p, &b).unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(e.contains("FlatGeobuf"), "{e}");
}

/// Every truncation and many byte flips of a valid file of each format read
/// as an error or as (possibly different) objects, never as a panic.
#[test]
fn damaged_files_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<(u64, Rect)> = dataset().into_iter().take(40).collect();
    let mut files: Vec<PathBuf> = std::iter::once("csv")
        .chain(geometry_exts())
        .map(|ext| {
            let p = dir.path().join(format!("d.{ext}"));
            formats::write_dataset(&p, recs.iter().copied()).unwrap();
            p
        })
        .collect();
    let g = dir.path().join("g.fgb");
    let geoms = geometries();
    let no_collection = geoms
        .iter()
        .filter(|(_, g)| !matches!(g, Geometry::GeometryCollection(_)));
    formats::write_objects(&g, no_collection.map(|(i, g)| (*i, g))).unwrap();
    files.push(g);
    let shp = dir.path().join("d.shp");
    write_shapefile(&shp, &recs, Some("ID"));
    files.push(shp);
    let pbf = dir.path().join("d.osm.pbf");
    std::fs::write(&pbf, osm_pbf()).unwrap();
    files.push(pbf);
    // damaged copies per file (GEOFLASH_DAMAGE_CASES; make test-long may raise it)
    let flips: usize = std::env::var("GEOFLASH_DAMAGE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for file in &files {
        let good = std::fs::read(file).unwrap();
        let bad = dir.path().join(format!(
            "bad.{}",
            file.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .split_once('.')
                .unwrap()
                .1
        ));
        let try_bytes = |bytes: &[u8], what: &str| {
            std::fs::write(&bad, bytes).unwrap();
            let r = std::panic::catch_unwind(|| import::read_objects(&bad));
            assert!(r.is_ok(), "{}: {what} panicked", file.display());
        };
        let step = (good.len() / 150).max(1);
        for cut in (0..good.len()).step_by(step) {
            try_bytes(&good[..cut], &format!("truncated at {cut}"));
        }
        for _ in 0..flips {
            let mut b = good.clone();
            for _ in 0..1 + next() % 3 {
                let i = (next() % b.len() as u64) as usize;
                b[i] ^= 1 << (next() % 8);
            }
            try_bytes(&b, "flipped");
        }
    }
}

#[test]
fn missing_files_and_unknown_extensions() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["csv", "geojson", "fgb", "parquet", "shp", "osm.pbf"] {
        let p = dir.path().join(format!("missing.{ext}"));
        let e = import::read_objects(&p).unwrap_err().to_string();
        assert!(
            e.contains("missing") && e.contains("no such file"),
            "{ext}: {e}"
        );
    }
    let p = dir.path().join("data.xlsx");
    std::fs::write(&p, "x").unwrap();
    let e = import::read_objects(&p).unwrap_err().to_string();
    assert!(
        e.contains("unknown dataset format") && e.contains(".fgb"),
        "{e}"
    );
    let e = import::import(
        &p,
        &dir.path().join("o.shp"),
        InsertionOrder::AsGenerated,
        1,
        &ReadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("input format only"), "{e}");
}

#[cfg(not(feature = "osm-pbf"))]
#[test]
fn without_the_feature_osm_pbf_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.osm.pbf");
    std::fs::write(&p, osm_pbf()).unwrap();
    let e = import::read_objects(&p).unwrap_err();
    assert!(e.to_string().contains("cargo feature `osm-pbf`"), "{e}");
}

#[cfg(not(feature = "geoparquet"))]
#[test]
fn without_the_feature_geoparquet_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.parquet");
    let e = formats::write_dataset(&p, dataset().into_iter()).unwrap_err();
    assert!(e.to_string().contains("cargo feature `geoparquet`"), "{e}");
    std::fs::write(&p, b"PAR1").unwrap();
    let e = import::read_objects(&p).unwrap_err();
    assert!(e.to_string().contains("cargo feature `geoparquet`"), "{e}");
}

#[cfg(feature = "geoparquet")]
#[test]
fn geoparquet_metadata_and_plain_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.parquet");
    formats::write_objects(&p, geometries().iter().map(|(i, g)| (*i, g))).unwrap();
    // the 'geo' metadata of GeoParquet 1.1 is there
    let bytes = std::fs::read(&p).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    for want in [
        "\"primary_column\":\"geometry\"",
        "\"encoding\":\"WKB\"",
        "\"version\":\"1.1.0\"",
        "\"MultiPolygon\"",
    ] {
        assert!(text.contains(want), "{want}");
    }
}

/// A row of [`plain_parquet`]: an id and a WKB geometry, `None` for null.
#[cfg(feature = "geoparquet")]
type Row = (Option<i32>, Option<Vec<u8>>);

/// Writes a Parquet file with an optional INT32 `ID` and an optional binary
/// `geom` column (`None` = null), and the given key-value metadata.
#[cfg(feature = "geoparquet")]
fn plain_parquet(path: &Path, rows: &[Row], geo: Option<&str>) {
    use parquet::data_type::{ByteArray, ByteArrayType, Int32Type};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::sync::Arc;
    let schema = parquet::schema::parser::parse_message_type(
        "message m { OPTIONAL INT32 ID; OPTIONAL BYTE_ARRAY geom; }",
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(geo.map(|g| vec![KeyValue::new("geo".to_string(), g.to_string())]))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).unwrap();
    let mut rg = w.next_row_group().unwrap();
    let defs = |present: Vec<bool>| present.into_iter().map(i16::from).collect::<Vec<_>>();
    let mut col = rg.next_column().unwrap().unwrap();
    let ids: Vec<i32> = rows.iter().filter_map(|r| r.0).collect();
    col.typed::<Int32Type>()
        .write_batch(
            &ids,
            Some(&defs(rows.iter().map(|r| r.0.is_some()).collect())),
            None,
        )
        .unwrap();
    col.close().unwrap();
    let mut col = rg.next_column().unwrap().unwrap();
    let gs: Vec<ByteArray> = rows
        .iter()
        .filter_map(|r| r.1.clone().map(ByteArray::from))
        .collect();
    col.typed::<ByteArrayType>()
        .write_batch(
            &gs,
            Some(&defs(rows.iter().map(|r| r.1.is_some()).collect())),
            None,
        )
        .unwrap();
    col.close().unwrap();
    rg.close().unwrap();
    w.close().unwrap();
}

#[cfg(feature = "geoparquet")]
#[test]
fn parquet_from_other_writers() {
    use geoflash::engine::to_wkb;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.parquet");
    let geoms = geometries();
    let wkb = |i: usize| Some(to_wkb(&geoms[i].1).unwrap());
    // no 'geo' metadata: the `geom` column is taken as WKB, ids from `ID`
    plain_parquet(&p, &[(Some(5), wkb(0)), (Some(7), wkb(2))], None);
    let got = import::read_objects(&p).unwrap();
    assert_eq!(got, vec![(5, geoms[0].1.clone()), (7, geoms[2].1.clone())]);
    // GeoParquet metadata naming the column
    let meta = r#"{"version":"1.0.0","primary_column":"geom","columns":{"geom":{"encoding":"WKB","geometry_types":[]}}}"#;
    plain_parquet(&p, &[(Some(5), wkb(0)), (Some(7), wkb(2))], Some(meta));
    assert_eq!(import::read_objects(&p).unwrap().len(), 2);
    // (rows, 'geo' metadata, expected error)
    type Case<'a> = (&'a [Row], Option<&'a str>, &'a str);
    let cases: [Case; 7] = [
        (
            &[(Some(5), wkb(0)), (Some(7), None)],
            None,
            "row 1 (id 7) has no geometry",
        ),
        (&[(None, wkb(0))], None, "row 0: the id is null"),
        (&[(Some(-4), wkb(0))], None, "row 0: id -4 is negative"),
        (
            &[(Some(1), Some(vec![1, 2, 3]))],
            None,
            "row 0 (id 1): bad WKB",
        ),
        (
            &[(Some(1), wkb(0))],
            Some(
                r#"{"version":"1.1.0","primary_column":"geom","columns":{"geom":{"encoding":"point"}}}"#,
            ),
            "\"geom\" is encoded as point, but its coordinate field geom is BYTE_ARRAY",
        ),
        (
            &[(Some(1), wkb(0))],
            Some(
                r#"{"version":"1.1.0","primary_column":"geom","columns":{"geom":{"encoding":"geoarrow.box"}}}"#,
            ),
            "\"geom\" is encoded as geoarrow.box, which this reader does not know",
        ),
        (
            &[(Some(1), wkb(0))],
            Some(
                r#"{"version":"1.1.0","primary_column":"shape","columns":{"shape":{"encoding":"WKB"}}}"#,
            ),
            "\"shape\" is not in the schema",
        ),
    ];
    for (rows, geo, want) in cases {
        plain_parquet(&p, rows, geo);
        let e = import::read_objects(&p).unwrap_err().to_string();
        assert!(e.contains(want), "wanted {want:?}: {e}");
    }
}

/// WKB of a collection (`kind` 4 to 7, little-endian) of 2D points, NaN
/// coordinates for an empty one.
#[cfg(feature = "geoparquet")]
fn wkb_points(kind: u32, points: &[(f64, f64)]) -> Vec<u8> {
    let mut b = vec![1];
    b.extend(kind.to_le_bytes());
    b.extend((points.len() as u32).to_le_bytes());
    for (x, y) in points {
        b.push(1);
        b.extend(1u32.to_le_bytes());
        b.extend(x.to_le_bytes());
        b.extend(y.to_le_bytes());
    }
    b
}

/// A WKB GeometryCollection or MultiPoint with an empty member (an empty
/// point: NaN coordinates) reads as its other members instead of being
/// refused whole; one of empty members only is an empty geometry, refused
/// naming the row as a top-level empty geometry is.
#[cfg(feature = "geoparquet")]
#[test]
fn geoparquet_collections_with_empty_members() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty-members.parquet");
    let nan = f64::NAN;
    let rows = [
        (Some(1), Some(wkb_points(7, &[(nan, nan), (1.0, 2.0)]))),
        (
            Some(2),
            Some(wkb_points(4, &[(3.0, 4.0), (nan, nan), (5.0, 6.0)])),
        ),
    ];
    plain_parquet(&p, &rows, None);
    assert_eq!(
        import::read_rects(&p).unwrap(),
        [
            (1, Rect::new(1.0, 2.0, 1.0, 2.0).unwrap()),
            (2, Rect::new(3.0, 4.0, 5.0, 6.0).unwrap())
        ]
    );
    for (wkb, want) in [
        (wkb_points(7, &[(nan, nan)]), "geometry is empty"),
        (
            wkb_points(4, &[(nan, nan), (nan, nan)]),
            "geometry is empty",
        ),
        (wkb_points(7, &[]), "geometry is empty"),
    ] {
        plain_parquet(
            &p,
            &[(Some(1), rows[0].1.clone()), (Some(2), Some(wkb))],
            None,
        );
        let e = import::read_objects(&p).unwrap_err();
        let m = e.to_string();
        assert!(
            e.is_user_error() && m.contains("row 1 (id 2)") && m.contains(want),
            "wanted {want:?}: {m}"
        );
    }
    // a top-level empty point: refused, as before
    let mut empty = vec![1];
    empty.extend(1u32.to_le_bytes());
    empty.extend(nan.to_le_bytes());
    empty.extend(nan.to_le_bytes());
    plain_parquet(&p, &[(Some(2), Some(empty))], None);
    let m = import::read_objects(&p).unwrap_err().to_string();
    assert!(m.contains("row 0 (id 2): WKB holds an empty point"), "{m}");
}

/// A real extract (tests/data/README.md): the indexed two-pass reader gives
/// the way polygons that a plain sequential scan of the file with `osmpbf`'s
/// `ElementReader` gives (all nodes in a map, then the closed building
/// ways, those a multipolygon relation holds included), bit for bit.
#[cfg(feature = "osm-pbf")]
#[test]
fn real_osm_extract_reads_like_a_sequential_scan() {
    use geoflash_bench::formats::osm::{object_id, OsmType, SkipReason};
    use std::collections::{HashMap, HashSet};
    let pbf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pyrosm-test.osm.pbf");
    let d = import::read_dataset(&pbf, &ReadOptions::default()).unwrap();
    let reasons = |r| d.skipped.iter().filter(|s| s.reason == r).count();
    assert_eq!(reasons(SkipReason::MissingNodes), 48);
    // as osmium reads it, a way that a multipolygon relation holds is an object too
    assert_eq!(reasons(SkipReason::RelationMember), 0);
    // as pyrosm reads it: those ways are only their relations'
    let p = import::read_dataset(&pbf, &read_as_pyrosm()).unwrap();
    let in_relation: HashSet<u64> = p
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::RelationMember)
        .map(|s| s.osm_id)
        .collect();

    let mut nodes = HashMap::new();
    let mut ways = Vec::new();
    osmpbf::ElementReader::from_path(&pbf)
        .unwrap()
        .for_each(|e| match e {
            osmpbf::Element::Node(n) => {
                nodes.insert(
                    n.id(),
                    (n.nano_lon() as f64 / 1e9, n.nano_lat() as f64 / 1e9),
                );
            }
            osmpbf::Element::DenseNode(n) => {
                nodes.insert(
                    n.id(),
                    (n.nano_lon() as f64 / 1e9, n.nano_lat() as f64 / 1e9),
                );
            }
            osmpbf::Element::Way(w) => {
                let refs: Vec<i64> = w.refs().collect();
                let building = w.tags().any(|(k, v)| k == "building" && v != "no");
                let id = w.id() as u64;
                if building && refs.len() >= 4 && refs.first() == refs.last() {
                    ways.push((object_id(OsmType::Way, id), refs));
                }
            }
            _ => {}
        })
        .unwrap();
    let mut want = Vec::new();
    let mut missing = 0;
    for (id, refs) in ways {
        match refs
            .iter()
            .map(|r| nodes.get(r))
            .collect::<Option<Vec<_>>>()
        {
            Some(cs) => {
                let ring: Vec<geo_types::Coord> = cs
                    .iter()
                    .map(|&&(x, y)| geo_types::Coord { x, y })
                    .collect();
                let poly = geo_types::Polygon::new(geo_types::LineString::new(ring), vec![]);
                want.push((id, Geometry::Polygon(poly)));
            }
            None => missing += 1,
        }
    }
    assert_eq!(missing, 48);
    // the closed ways, then the relations (odd ids)
    let closed_ways: Vec<_> = d
        .objects
        .iter()
        .filter(|(id, g)| id % 2 == 0 && matches!(g, Geometry::Polygon(_)))
        .cloned()
        .collect();
    assert_eq!(closed_ways, want);
    assert_eq!(closed_ways.len(), 2171);
    // The file has no building relations. pyrosm 0.25.0's get_buildings()
    // gives 2,208 ways here: the 2,171, 22 of the 48 cut at the edge built
    // from the nodes left, and 15 more cut ways whose nodes left make a ring
    // of no area, which geoflash skips as degenerate (counted with pyrosm
    // and shapely: `len(b)`, `(b.geometry.area == 0).sum()`).
    assert!(in_relation.is_empty());
    let cut = |r| p.skipped.iter().filter(|s| s.reason == r).count();
    assert_eq!(p.objects.len(), 2171 + 22);
    assert_eq!(
        (cut(SkipReason::MissingNodes), cut(SkipReason::Degenerate)),
        (0, 26)
    );
    // the ways with every node are the same polygons in both readings
    let whole: Vec<_> = p
        .objects
        .iter()
        .filter(|o| closed_ways.contains(o))
        .cloned()
        .collect();
    assert_eq!(whole, closed_ways);
    for (_, g) in &d.objects {
        let r = bounding_rect(g).unwrap();
        assert!(
            r.min_x() > 26.9 && r.max_x() < 27.0 && r.min_y() > 60.5 && r.max_y() < 60.55,
            "{r:?}"
        );
    }
}

/// Reads `data` written to a file `name` in a fresh directory (the
/// regressions of the fuzz targets) and checks that it is refused with an
/// error naming the file and saying each of `wants`.
fn assert_refused(name: &str, data: &[u8], wants: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, data).unwrap();
    let e = geoflash_bench::import::read_objects(&path)
        .unwrap_err()
        .to_string();
    assert!(e.contains(name), "{e}");
    for want in wants {
        assert!(e.contains(want), "wanted {want:?} in: {e}");
    }
}

/// Regression (fuzz target `import_shp`): a record whose point count is far
/// larger than the record made the `shapefile` crate allocate 24 GB; it is
/// now refused with an error naming the file, the record and its position.
#[test]
fn a_shapefile_record_with_a_huge_point_count_is_refused() {
    assert_refused(
        "huge-point-count.shp",
        include_bytes!("data/fuzz/huge-point-count.shp"),
        &["record 1 at byte 100"],
    );
}

/// Found by fuzzing (session 22): a PolygonZ record of no points whose
/// part index is far past its point count; the `shapefile` crate sizes a
/// part by the distance between part starts and asked for 22 GB. The part
/// starts are checked against the point count first.
#[test]
fn a_shapefile_part_starting_past_the_points_is_refused() {
    assert_refused(
        "part-index.shp",
        include_bytes!("data/fuzz/part-index-past-points.shp"),
        &["record 1 at byte 100", "part 0 starts at point"],
    );
}

/// Found by fuzzing (session 22, `fuzz/regressions/import_geoparquet/oom-a3dee677…`):
/// a footer whose schema element claims about 1.3 billion children (under a
/// field header declaring a byte; the `parquet` crate reads it as an i32
/// anyway) made the crate reserve 10 GB while parsing the footer, which
/// aborts where the system refuses the reservation. The footer check
/// refuses it first (session 23).
#[cfg(feature = "geoparquet")]
#[test]
fn a_parquet_footer_claiming_a_billion_children_is_refused() {
    assert_refused(
        "children.parquet",
        include_bytes!("data/fuzz/footer-claims-billion-children.parquet"),
        &["its footer has a schema element claiming 1342177280 children among 3 elements"],
    );
}

/// Found by fuzzing (session 22, `fuzz/regressions/import_geoparquet/slow-unit-685397ac…`):
/// a 67-byte file whose footer declares a set of 1.9 billion booleans,
/// which the `parquet` crate skips one element at a time without reading
/// (4.2 s in a release build). The footer check refuses it first.
#[cfg(feature = "geoparquet")]
#[test]
fn a_parquet_footer_declaring_a_billion_booleans_is_refused() {
    assert_refused(
        "booleans.parquet",
        include_bytes!("data/fuzz/footer-set-of-billion-booleans.parquet"),
        &["its footer declares a list of 1868479866 elements where 46 bytes are left"],
    );
}

/// Found by fuzzing (session 23, `fuzz/regressions/import_geoparquet/slow-unit-7cda4c39…`):
/// a page header declaring a map of 263 million entries of booleans,
/// which the `parquet` crate skips one entry at a time without reading
/// (4.9 s in a release build before the file was refused). The page
/// headers are walked before the crate reads them.
#[cfg(feature = "geoparquet")]
#[test]
fn a_parquet_page_header_declaring_a_huge_map_is_refused() {
    assert_refused(
        "map.parquet",
        include_bytes!("data/fuzz/page-header-map-of-booleans.parquet"),
        &["row group 0, column 1: the header of page 0 declares a map of 263398988 elements"],
    );
}

/// Found by fuzzing (session 23): a data page whose header claims
/// 2,147,483,557 uncompressed bytes from 250 Snappy-compressed ones; the
/// `parquet` crate reserved the claim before decompressing (2.1 GB of
/// resident memory for a 1 KiB file). libFuzzer's out-of-memory report
/// kept no input, so this file is the seed `boxes.parquet` with that one
/// field rewritten. Refused from the header: Snappy yields at most 22
/// bytes per byte.
#[cfg(feature = "geoparquet")]
#[test]
fn a_parquet_page_claiming_two_gigabytes_uncompressed_is_refused() {
    assert_refused(
        "claim.parquet",
        include_bytes!("data/fuzz/page-claims-two-gigabytes.parquet"),
        &["row group 0, column 1: the header of page 0 claims 2147483557 bytes uncompressed from 250 compressed"],
    );
}

/// Found by fuzzing (session 23, `fuzz/regressions/import_osm_pbf/crash-38bed7ac…`):
/// a dense node whose longitude delta makes `osmpbf`'s coordinate arithmetic
/// overflow 64 bits. With overflow checks (tests, fuzzing) `osmpbf` panics;
/// the pass runs contained and the file is refused. Without them (a release
/// build) the coordinate wraps and lands outside WGS 84, and is refused by
/// the range check.
#[cfg(feature = "osm-pbf")]
#[test]
fn an_osm_node_whose_coordinate_overflows_is_refused() {
    let why = if cfg!(debug_assertions) {
        "an element's encoding is malformed"
    } else {
        "lie outside WGS 84"
    };
    assert_refused(
        "overflow.osm.pbf",
        include_bytes!("data/fuzz/node-longitude-overflows.osm.pbf"),
        &[why],
    );
}

/// A node of a selected way at longitude 200 (written by pyosmium) is
/// refused, naming the node; no valid OSM file holds one.
#[cfg(feature = "osm-pbf")]
#[test]
fn an_osm_node_outside_wgs84_is_refused() {
    assert_refused(
        "lon200.osm.pbf",
        include_bytes!("data/fuzz/node-longitude-200.osm.pbf"),
        &["node 2: longitude 200, latitude 60.1 lie outside WGS 84"],
    );
}

/// The attribute values of every object of a written file, by object id:
/// the file's columns read back with `formats::read_attributes`, as text.
#[cfg(feature = "osm-pbf")]
fn attribute_text(path: &Path) -> std::collections::BTreeMap<u64, Vec<(String, Option<String>)>> {
    let (ids, attrs) = geoflash_bench::formats::read_attributes(path).unwrap();
    assert_eq!(ids.len(), attrs.len(), "{}", path.display());
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            // by column name: GeoJSON properties come back in name order
            let mut row: Vec<_> = attrs
                .columns()
                .iter()
                .map(|c| (c.name.clone(), attrs.get(i, &c.name).map(|v| v.to_string())))
                .collect();
            row.sort();
            (id, row)
        })
        .collect()
}

/// OSM objects carry `osm_type`, `osm_id` and one column per filter key
/// into every output format, in any order, and read back the same; the
/// geometry readers still read those files; the id and type columns are
/// integers where the format has types.
#[cfg(feature = "osm-pbf")]
#[test]
fn osm_type_id_and_tags_reach_every_output() {
    use geoflash_bench::formats::attributes::{Kind, Value};
    use geoflash_bench::formats::osm::{object_id, OsmOptions, OsmType};
    let dir = tempfile::tempdir().unwrap();
    let pbf = dir.path().join("tiny.osm.pbf");
    std::fs::write(&pbf, osm_pbf()).unwrap();
    let opts = ReadOptions {
        osm: OsmOptions {
            filters: vec![
                "building=*".parse().unwrap(),
                "highway=*".parse().unwrap(),
                "building=house".parse().unwrap(),
            ],
            ..OsmOptions::default()
        },
        ..ReadOptions::default()
    };
    let d = import::read_dataset(&pbf, &opts).unwrap();
    let names: Vec<(&str, Kind)> = d
        .attributes
        .columns()
        .iter()
        .map(|c| (c.name.as_str(), c.kind))
        .collect();
    assert_eq!(
        names,
        [
            ("osm_type", Kind::Text),
            ("osm_id", Kind::UInt),
            ("building", Kind::Text),
            ("highway", Kind::Text),
        ]
    );
    let way = |id| object_id(OsmType::Way, id);
    let rel = |id| object_id(OsmType::Relation, id);
    // by column name, as attribute_text gives them
    let row = |t: &str, id: u64, b: Option<&str>, h: Option<&str>| {
        vec![
            ("building".to_string(), b.map(String::from)),
            ("highway".to_string(), h.map(String::from)),
            ("osm_id".to_string(), Some(id.to_string())),
            ("osm_type".to_string(), Some(t.to_string())),
        ]
    };
    let want: std::collections::BTreeMap<u64, _> = [
        (way(100), row("way", 100, Some("yes"), None)),
        (way(102), row("way", 102, Some("yes"), None)),
        (way(105), row("way", 105, Some("house"), None)),
        (way(108), row("way", 108, Some("yes"), None)),
        (way(109), row("way", 109, None, Some("yes"))),
        (rel(7), row("relation", 7, Some("yes"), None)),
        (rel(11), row("relation", 11, Some("yes"), None)),
    ]
    .into_iter()
    .collect();
    assert_eq!(d.attributes.len(), d.objects.len());
    for (i, (id, _)) in d.objects.iter().enumerate() {
        let got: Vec<_> = d
            .attributes
            .columns()
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    d.attributes.get(i, &c.name).map(|v| v.to_string()),
                )
            })
            .collect();
        let mut got = got;
        got.sort();
        assert_eq!(Some(&got), want.get(id), "object {id}");
    }
    let mut rects: Vec<(u64, Rect)> = d
        .objects
        .iter()
        .map(|(i, g)| (*i, bounding_rect(g).unwrap()))
        .collect();
    rects.sort_by_key(|r| r.0);
    for ext in ["csv", "geojson", "fgb", "parquet"] {
        if ext == "parquet" && !cfg!(feature = "geoparquet") {
            continue;
        }
        let out = dir.path().join(format!("b.{ext}"));
        import::import(&pbf, &out, InsertionOrder::Random, 5, &opts).unwrap();
        assert_eq!(attribute_text(&out), want, "{ext}");
        let mut back = import::read_rects(&out).unwrap();
        back.sort_by_key(|r| r.0);
        assert_eq!(back, rects, "{ext}");
        // typed formats keep the id an integer; CSV has text only
        let (ids, attrs) = geoflash_bench::formats::read_attributes(&out).unwrap();
        let i = ids.iter().position(|&id| id == rel(11)).unwrap();
        let osm_id = attrs.get(i, "osm_id").unwrap();
        if ext == "csv" {
            assert_eq!(osm_id, &Value::Text("11".into()));
        } else {
            assert_eq!(osm_id, &Value::UInt(11), "{ext}");
        }
    }
    // the CSV header and a row, as other tools see them
    let csv = std::fs::read_to_string(dir.path().join("b.csv")).unwrap();
    assert!(
        csv.starts_with("id,minx,miny,maxx,maxy,osm_type,osm_id,building,highway\n"),
        "{csv}"
    );
    assert!(
        csv.contains(&format!("{},", way(109))) && csv.contains(",way,109,,yes\n"),
        "{csv}"
    );
}

/// Objects without attributes write the files of before (the CSV header
/// is `id,minx,miny,maxx,maxy`, no other column, property or field), and
/// attribute values that need quoting or escaping survive every format.
#[test]
fn attributes_are_optional_and_survive_awkward_text() {
    use geoflash_bench::formats::attributes::{self, Attributes, Column, Kind, Value};
    let dir = tempfile::tempdir().unwrap();
    let objects: Vec<(u64, Geometry)> = dataset()
        .into_iter()
        .take(4)
        .map(|(id, r)| (id, formats::rect_geometry(&r)))
        .collect();
    let mut attrs = Attributes::new(vec![
        Column::new("name", Kind::Text),
        Column::new("n", Kind::UInt),
    ])
    .unwrap();
    let texts = ["a,b", "say \"hi\"", "two\nlines", "ünïcode"];
    for (i, t) in texts.iter().enumerate() {
        let n = (i != 2).then_some(Value::UInt(u64::MAX - i as u64));
        attrs
            .push(vec![Some(Value::Text(t.to_string())), n])
            .unwrap();
    }
    for ext in ["csv", "geojson", "fgb", "parquet"] {
        if ext == "parquet" && !cfg!(feature = "geoparquet") {
            continue;
        }
        let plain = dir.path().join(format!("plain.{ext}"));
        formats::write_objects(&plain, objects.iter().map(|(id, g)| (*id, g))).unwrap();
        let (ids, none) = geoflash_bench::formats::read_attributes(&plain).unwrap();
        assert_eq!(ids, objects.iter().map(|o| o.0).collect::<Vec<_>>());
        assert!(none.is_empty(), "{ext}: {:?}", none.columns());
        let with = dir.path().join(format!("with.{ext}"));
        let n = formats::write_objects_with(
            &with,
            attrs.columns(),
            objects
                .iter()
                .enumerate()
                .map(|(i, (id, g))| (*id, g, attrs.row(i))),
        )
        .unwrap();
        assert_eq!(n, 4);
        let (ids, back) = geoflash_bench::formats::read_attributes(&with).unwrap();
        assert_eq!(ids.len(), 4);
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(
                back.get(i, "name").map(|v| v.to_string()),
                Some(t.to_string()),
                "{ext}"
            );
            let n = back.get(i, "n").map(|v| v.to_string());
            assert_eq!(
                n,
                (i != 2).then(|| (u64::MAX - i as u64).to_string()),
                "{ext}"
            );
        }
        assert_eq!(
            import::read_rects(&with).unwrap(),
            import::read_rects(&plain).unwrap()
        );
        // a row that does not fit the columns is an error, not a file
        let short: Vec<(u64, &Geometry, &attributes::Row)> =
            vec![(1, &objects[0].1, &[] as &attributes::Row)];
        let e = formats::write_objects_with(&with, attrs.columns(), short)
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 attribute values for 2 columns"), "{ext}: {e}");
    }
    let header = std::fs::read_to_string(dir.path().join("plain.csv")).unwrap();
    assert!(header.starts_with("id,minx,miny,maxx,maxy\n0,"), "{header}");
}

/// The real extract: every building carries its type and id (those of its
/// object id) and its `building` tag, which a plain sequential scan of
/// the file with `osmpbf` gives for the same element.
#[cfg(all(feature = "osm-pbf", feature = "geoparquet"))]
#[test]
fn real_osm_extract_tags_match_a_sequential_scan() {
    use geoflash_bench::formats::osm::{osm_of, OsmType};
    use std::collections::HashMap;
    let pbf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pyrosm-test.osm.pbf");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.parquet");
    let r = import::import(
        &pbf,
        &out,
        InsertionOrder::Hilbert,
        1,
        &ReadOptions::default(),
    )
    .unwrap();
    let mut tags: HashMap<(OsmType, u64), String> = HashMap::new();
    osmpbf::ElementReader::from_path(&pbf)
        .unwrap()
        .for_each(|e| {
            let (t, id, found) = match &e {
                osmpbf::Element::Way(w) => (
                    OsmType::Way,
                    w.id(),
                    w.tags()
                        .find(|t| t.0 == "building")
                        .map(|t| t.1.to_string()),
                ),
                osmpbf::Element::Relation(r) => (
                    OsmType::Relation,
                    r.id(),
                    r.tags()
                        .find(|t| t.0 == "building")
                        .map(|t| t.1.to_string()),
                ),
                _ => return,
            };
            if let Some(v) = found {
                tags.insert((t, id as u64), v);
            }
        })
        .unwrap();
    let got = attribute_text(&out);
    assert_eq!(got.len(), r.count);
    let mut kinds = std::collections::BTreeSet::new();
    for (id, row) in &got {
        let (t, osm) = osm_of(*id);
        let value = |k: &str| row.iter().find(|c| c.0 == k).and_then(|c| c.1.clone());
        assert_eq!(value("osm_type").as_deref(), Some(t.name()), "{id}");
        assert_eq!(value("osm_id"), Some(osm.to_string()), "{id}");
        assert_eq!(value("building").as_ref(), tags.get(&(t, osm)), "{id}");
        kinds.insert(t);
    }
    // this extract's buildings are all ways (the tiny file above has relations)
    assert!(kinds.contains(&OsmType::Way), "{kinds:?}");
    assert!(!got.is_empty());
}

/// Regression (fuzz target `import_csv`, 2026-11-28): a rectangle CSV with
/// the same id on two records was read with both; a repeated id is now
/// refused with an error naming the file and the record. The fuzz input's
/// first line (`N,P,y,,0`) holds a number, so it is refused before that as
/// a header that is data (issue 44, item 12); the same records under a
/// proper header give the duplicate-id error.
#[test]
fn a_rectangle_csv_with_a_repeated_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fuzzed = dir.path().join("duplicate-id.csv");
    let input = include_bytes!("data/fuzz/duplicate-id.csv").as_slice();
    std::fs::write(&fuzzed, input).unwrap();
    for e in [
        geoflash_bench::import::read_objects(&fuzzed).unwrap_err(),
        formats::read_csv(&fuzzed).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("duplicate-id.csv") && e.contains("is data, not a header"),
            "{e}"
        );
    }
    let path = dir.path().join("repeated.csv");
    std::fs::write(&path, "id,minx,miny,maxx,maxy\n1,0,0,1,1\n1,2,2,3,3\n").unwrap();
    for e in [
        geoflash_bench::import::read_objects(&path).unwrap_err(),
        formats::read_csv(&path).unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(
            e.contains("repeated.csv") && e.contains("record 2") && e.contains("duplicate id"),
            "{e}"
        );
    }
}

/// Regression (fuzz target `import_geojson`, 2026-11-28): a polygon with a
/// position of one coordinate (`[140]`) made the `geojson` crate's
/// conversion index past the position (a panic); it is now an error naming
/// the file and the feature.
#[test]
fn a_geojson_position_of_one_coordinate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-coordinate.geojson");
    std::fs::write(
        &path,
        include_bytes!("data/fuzz/one-coordinate-position.geojson").as_slice(),
    )
    .unwrap();
    let e = geoflash_bench::import::read_objects(&path)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("one-coordinate.geojson")
            && e.contains("feature 0 (id 7)")
            && e.contains("fewer than two coordinates"),
        "{e}"
    );
    // The same position inside a geometry collection, a multipolygon and a
    // point (which the parser itself refuses).
    for geometry in [
        r#"{"type":"GeometryCollection","geometries":[{"type":"Point","coordinates":[1,2]},{"type":"LineString","coordinates":[[0,0],[3]]}]}"#,
        r#"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1],[0,0]]]]}"#,
        r#"{"type":"Point","coordinates":[5]}"#,
    ] {
        std::fs::write(&path, geometry).unwrap();
        let e = geoflash_bench::import::read_objects(&path)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("fewer than two coordinates") || e.contains("two or more elements"),
            "{geometry}: {e}"
        );
    }
}

/// Reading options for an OSM extract read as pyrosm reads it.
#[cfg(feature = "osm-pbf")]
fn read_as_pyrosm() -> ReadOptions {
    ReadOptions {
        osm: geoflash_bench::formats::osm::OsmOptions {
            like: geoflash_bench::formats::osm::OsmLike::Pyrosm,
            ..Default::default()
        },
        ..ReadOptions::default()
    }
}

/// A .shp of one polygon record whose parts are `parts` (each ring's
/// points in the order given: the orientation is the test's).
fn shp_polygon(parts: &[Vec<(f64, f64)>]) -> Vec<u8> {
    let points: Vec<(f64, f64)> = parts.iter().flatten().copied().collect();
    let (mut lo, mut hi) = ((f64::MAX, f64::MAX), (f64::MIN, f64::MIN));
    for &(x, y) in &points {
        lo = (lo.0.min(x), lo.1.min(y));
        hi = (hi.0.max(x), hi.1.max(y));
    }
    let mut content = Vec::new();
    content.extend(5i32.to_le_bytes()); // polygon
    for v in [lo.0, lo.1, hi.0, hi.1] {
        content.extend(v.to_le_bytes());
    }
    content.extend((parts.len() as i32).to_le_bytes());
    content.extend((points.len() as i32).to_le_bytes());
    let mut start = 0i32;
    for p in parts {
        content.extend(start.to_le_bytes());
        start += p.len() as i32;
    }
    for (x, y) in points {
        content.extend(x.to_le_bytes());
        content.extend(y.to_le_bytes());
    }
    let mut f = Vec::new();
    f.extend(9994i32.to_be_bytes());
    f.extend([0u8; 20]);
    f.extend((((108 + content.len()) / 2) as i32).to_be_bytes());
    f.extend(1000i32.to_le_bytes());
    f.extend(5i32.to_le_bytes());
    for v in [lo.0, lo.1, hi.0, hi.1, 0.0, 0.0, 0.0, 0.0] {
        f.extend(v.to_le_bytes());
    }
    f.extend(1i32.to_be_bytes()); // record number
    f.extend(((content.len() / 2) as i32).to_be_bytes());
    f.extend(content);
    f
}

/// Review finding: the parts of a shapefile polygon were paired by their
/// order, as the `shapefile` crate converts them, so a counter-clockwise
/// second part (a writer that does not orient rings as the format asks)
/// became a "hole" of the first part, outside it, and the object's MBR
/// lost it: a window on that part missed the object. A polygon whose rings
/// are all counter-clockwise, or whose hole comes before its shell, was
/// refused ("Inner ring without a previous outer ring") where GDAL reads
/// it. Holes now go to the shell that holds them; a counter-clockwise ring
/// that no shell holds is a shell.
#[test]
fn shapefile_polygon_rings_are_nested_by_containment_not_by_order() {
    let dir = tempfile::tempdir().unwrap();
    let shp = dir.path().join("p.shp");
    // clockwise (the format's shells) and counter-clockwise squares
    let cw = |x: f64, y: f64, s: f64| vec![(x, y), (x, y + s), (x + s, y + s), (x + s, y), (x, y)];
    let ccw = |x: f64, y: f64, s: f64| {
        let mut r = cw(x, y, s);
        r.reverse();
        r
    };
    let rect = |a: f64, b: f64, c: f64, d: f64| Rect::new(a, b, c, d).unwrap();
    let polygons = |g: &Geometry| match g {
        Geometry::MultiPolygon(mp) => mp.0.iter().map(|p| p.interiors().len()).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    for (what, parts, mbr, holes) in [
        (
            "a counter-clockwise second part",
            vec![cw(0.0, 0.0, 1.0), ccw(50.0, 50.0, 1.0)],
            rect(0.0, 0.0, 51.0, 51.0),
            vec![0, 0],
        ),
        (
            "one counter-clockwise ring",
            vec![ccw(0.0, 0.0, 1.0)],
            rect(0.0, 0.0, 1.0, 1.0),
            vec![0],
        ),
        (
            "a hole before its shell",
            vec![ccw(1.0, 1.0, 1.0), cw(0.0, 0.0, 10.0)],
            rect(0.0, 0.0, 10.0, 10.0),
            vec![1],
        ),
        (
            "a shell and its hole",
            vec![cw(0.0, 0.0, 10.0), ccw(1.0, 1.0, 1.0)],
            rect(0.0, 0.0, 10.0, 10.0),
            vec![1],
        ),
        (
            // the hole is in the island (the smaller shell), not the big one
            "an island in a hole, with a hole of its own",
            vec![
                cw(0.0, 0.0, 10.0),
                ccw(2.0, 2.0, 6.0),
                cw(3.0, 3.0, 4.0),
                ccw(4.0, 4.0, 1.0),
            ],
            rect(0.0, 0.0, 10.0, 10.0),
            vec![1, 1],
        ),
    ] {
        std::fs::write(&shp, shp_polygon(&parts)).unwrap();
        let objs = import::read_objects(&shp).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(objs.len(), 1, "{what}");
        assert_eq!(objs[0].0, 1, "{what}");
        assert_eq!(bounding_rect(&objs[0].1).unwrap(), mbr, "{what}");
        assert_eq!(polygons(&objs[0].1), holes, "{what}");
    }
}

/// Review finding: a FlatGeobuf feature that leaves its `id` column unset
/// (a null id: GDAL writes a null value so) got its position in the file
/// as its id, silently (an id of another object, or of none); the other
/// formats refuse a null id.
#[test]
fn a_flatgeobuf_feature_without_its_id_is_refused() {
    use flatgeobuf::geozero::{ColumnValue, PropertyProcessor};
    use flatgeobuf::{ColumnType, FgbWriter, FgbWriterOptions, GeometryType};
    let dir = tempfile::tempdir().unwrap();
    let mut fgb = FgbWriter::create_with_options(
        "ids",
        GeometryType::Point,
        FgbWriterOptions {
            write_index: false,
            ..Default::default()
        },
    )
    .unwrap();
    fgb.add_column("id", ColumnType::Long, |_, c| c.nullable = true);
    for (x, id) in [(1.0, Some(7i64)), (2.0, None), (3.0, Some(9))] {
        let p = Geometry::Point(geo_types::Point::new(x, 0.0));
        fgb.add_feature_geom(p, |f| {
            if let Some(id) = id {
                f.property(0, "id", &ColumnValue::Long(id)).unwrap();
            }
        })
        .unwrap();
    }
    let p = dir.path().join("null-id.fgb");
    fgb.write(std::fs::File::create(&p).unwrap()).unwrap();
    let e = import::read_objects(&p).unwrap_err();
    let m = e.to_string();
    assert!(e.is_user_error(), "{m}");
    assert!(
        m.contains("null-id.fgb") && m.contains("feature 1") && m.contains("the id is null"),
        "{m}"
    );
}

/// Review finding: the `wkt` crate stops at the parenthesis that closes
/// the geometry and ignores what follows, so a CSV value with one `)` too
/// many was read as its first part alone (`MULTIPOLYGON(((…))),((…)))`
/// lost its second polygon; `POINT(1 2) POINT(3 4)` was the first point).
/// Such text is now refused. And coordinates of 3 or 4 values without a
/// dimension tag (`POINT (1 2 3)`, PostGIS's EWKT), which the crate refused
/// as "Missing closing parenthesis", read as GEOS reads them.
#[test]
fn wkt_with_text_after_the_geometry_is_refused_and_untagged_z_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.csv");
    for (text, want) in [
        (
            "MULTIPOLYGON(((0 0,1 0,1 1,0 0))),((5 5,6 5,6 6,5 5)))",
            "text after the end of the geometry",
        ),
        (
            "POINT(1 2) POINT(3 4)",
            "text after the end of the geometry",
        ),
        ("POINT(1 2))", "text after the end of the geometry"),
        ("POINT(1 2)x", "text after the end of the geometry"),
    ] {
        std::fs::write(&p, format!("id,wkt\n1,POINT(0 0)\n2,\"{text}\"\n")).unwrap();
        let e = import::read_objects(&p).unwrap_err();
        let m = e.to_string();
        assert!(e.is_user_error(), "{text}: {m}");
        assert!(m.contains("record 2") && m.contains(want), "{text}: {m}");
    }
    let rect = |a: f64, b: f64, c: f64, d: f64| Rect::new(a, b, c, d).unwrap();
    for (text, mbr) in [
        ("POINT (1 2 3)", rect(1.0, 2.0, 1.0, 2.0)),
        ("LINESTRING(0 0 5, 3 -4 7)", rect(0.0, -4.0, 3.0, 0.0)),
        (
            "POLYGON((0 0 1 9,4 0 1 9,4 4 1 9,0 0 1 9))",
            rect(0.0, 0.0, 4.0, 4.0),
        ),
        (
            "MULTIPOLYGON(((0 0 1,1 0 1,1 1 1,0 0 1)),((5 5 1,6 5 1,6 6 1,5 5 1)))",
            rect(0.0, 0.0, 6.0, 6.0),
        ),
        (
            "GEOMETRYCOLLECTION(POINT(9 9 9),LINESTRING(0 1 2,3 4 5))",
            rect(0.0, 1.0, 9.0, 9.0),
        ),
        // tagged text and blanks after the geometry, as before
        ("POINT Z (1 2 3)  ", rect(1.0, 2.0, 1.0, 2.0)),
        (" POLYGON ((0 0,2 0,2 1,0 0)) ", rect(0.0, 0.0, 2.0, 1.0)),
    ] {
        std::fs::write(&p, format!("id,wkt\n4,\"{text}\"\n")).unwrap();
        let got = import::read_rects(&p).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got, vec![(4, mbr)], "{text}");
    }
}
