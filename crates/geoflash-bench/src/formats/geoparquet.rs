//! GeoParquet (<https://geoparquet.org>, versions 1.0 and 1.1) through the
//! `parquet` crate's column API (no Arrow). Behind the cargo feature
//! `geoparquet` (on by default); without it both functions return an error
//! that says so.
//!
//! **Reading.** The geometry column is the `primary_column` of the file's
//! `geo` metadata, whose `encoding` is `WKB` (a binary column) or one of
//! the GeoArrow encodings of GeoParquet 1.1, `point`, `linestring`,
//! `polygon`, `multipoint`, `multilinestring`, `multipolygon` (nested
//! lists of coordinates, module `geoarrow`; GeoPandas writes them with
//! `to_parquet(geometry_encoding="geoarrow")`); any other encoding is
//! refused with an error naming it. A Parquet file without `geo` metadata
//! is read when it has a top-level binary column named `geometry`, `geom`
//! or `wkb`, taken as WKB. Ids come from a top-level integer column named
//! `id` (any case; 32 or 64 bits, signed or unsigned, negative values
//! refused), else from the row number (0, 1, …). A null geometry or id is
//! an error naming the row. Compression codecs: every one of the Parquet
//! format's but LZO (Snappy, gzip, Brotli, LZ4, LZ4_RAW, Zstandard: what
//! GeoPandas, DuckDB and GDAL write); an LZO column is refused by name.
//!
//! Before the `parquet` crate parses the footer and each column chunk's
//! page headers, the sizes they declare are checked against their bytes
//! (`parquet_thrift`): the crate trusts them, and a few bytes could make it
//! reserve gigabytes or loop for seconds. A page claiming more uncompressed
//! bytes than its codec can make of its compressed ones (`max_ratio`) is
//! refused.
//!
//! The `parquet` crate validates the file's structure but still asserts
//! (panics) on some malformed page data; [`read`] catches such a panic at
//! this boundary and returns it as an error naming the file (the panic hook
//! still prints the crate's message on standard error). Page checksums,
//! when a writer stored them, are verified (the crate's `crc` feature).
//!
//! **Writing.** Two required columns, `id` (INT64 holding the `u64` ids,
//! annotated unsigned) and `geometry` (ISO WKB), Snappy-compressed, in row
//! groups of 64 Ki rows, and the `geo` metadata of GeoParquet 1.1.0:
//! encoding `WKB`, the geometry types written, the bounding box, and
//! `"crs": null` (the workbench's coordinates have no declared CRS).
use std::borrow::Borrow;
use std::path::Path;

use geoflash::engine::Geometry;
use geoflash::Result;

use super::attributes::{Attributes, Column, Row};

#[cfg(feature = "geoparquet")]
mod geoarrow;

#[cfg(not(feature = "geoparquet"))]
fn disabled(path: &Path) -> geoflash::Error {
    super::bad(
        path,
        "GeoParquet support is not built in (enable the cargo feature `geoparquet` of geoflash-bench)",
    )
}

/// Reads the `(id, geometry)` objects of a GeoParquet file (see the module
/// documentation).
pub fn read(path: &Path) -> Result<Vec<(u64, Geometry)>> {
    #[cfg(feature = "geoparquet")]
    return guarded(path, || imp::read_with(path, false)).map(|r| r.0);
    #[cfg(not(feature = "geoparquet"))]
    Err(disabled(path))
}

/// Runs a reader of `path`, turning a panic of the `parquet` crate into an
/// error naming the file (see [`super::contained_reader`]).
#[cfg(feature = "geoparquet")]
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    super::contained_reader(path, "corrupt Parquet data: the parquet decoder failed", f)
}

/// Writes `(id, geometry, attributes)` objects as GeoParquet (see the
/// module documentation); returns the number written. The file is written
/// whole or not at all ([`super::OutputFile`]).
pub fn write<'r, G: Borrow<Geometry>>(
    path: &Path,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    #[cfg(feature = "geoparquet")]
    {
        let out = super::OutputFile::create(path)?;
        let n = imp::write(&out, columns, objects)?;
        out.commit()?;
        Ok(n)
    }
    #[cfg(not(feature = "geoparquet"))]
    {
        let _ = columns;
        drop(objects.into_iter());
        Err(disabled(path))
    }
}

/// [`write`] into `out`, without the commit.
pub(super) fn write_to<'r, G: Borrow<Geometry>>(
    out: &super::OutputFile,
    columns: &[Column],
    objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
) -> Result<u64> {
    #[cfg(feature = "geoparquet")]
    return imp::write(out, columns, objects);
    #[cfg(not(feature = "geoparquet"))]
    {
        let _ = columns;
        drop(objects.into_iter());
        Err(disabled(out.path()))
    }
}

/// The ids and the attributes of a GeoParquet file: the top-level integer
/// columns (unsigned ones as integers, signed ones as decimal text) and
/// binary columns (as UTF-8 text) other than `id` and the
/// geometry column; columns of other types are left out.
pub fn read_attributes(path: &Path) -> Result<(Vec<u64>, Attributes)> {
    #[cfg(feature = "geoparquet")]
    return guarded(path, || imp::read_with(path, true))
        .map(|(objects, attrs)| (objects.into_iter().map(|o| o.0).collect(), attrs));
    #[cfg(not(feature = "geoparquet"))]
    Err(disabled(path))
}

#[cfg(feature = "geoparquet")]
mod imp {
    use std::borrow::Borrow;
    use std::collections::BTreeSet;
    use std::fs::File;
    use std::path::Path;
    use std::sync::Arc;

    use geoflash::engine::Geometry;
    use geoflash::engine::{bounding_rect, from_wkb, to_wkb};
    use geoflash::geom::Rect;
    use geoflash::Result;
    use parquet::basic::{
        Compression, ConvertedType, IntType, LogicalType, Repetition, Type as PhysicalType,
    };
    use parquet::column::page::Page;
    use parquet::column::reader::ColumnReader;
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, RowGroupReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::types::{ColumnDescriptor, SchemaDescriptor, Type as SchemaType};

    use crate::formats::attributes::{Attributes, Column, Kind, Row, Value};

    use super::super::{bad, io_err, parquet_thrift, reason, Collector};
    use super::geoarrow::{self, Coords, Kind as ArrowKind, ListLevels, Nest};

    /// Rows per row group written.
    const ROW_GROUP: usize = 64 * 1024;
    /// Records per read call.
    const BATCH: usize = 8 * 1024;

    /// The GeoParquet geometry type name of a geometry.
    fn type_name(g: &Geometry) -> &'static str {
        match g {
            Geometry::Point(_) => "Point",
            Geometry::Line(_) | Geometry::LineString(_) => "LineString",
            Geometry::Polygon(_) | Geometry::Rect(_) | Geometry::Triangle(_) => "Polygon",
            Geometry::MultiPoint(_) => "MultiPoint",
            Geometry::MultiLineString(_) => "MultiLineString",
            Geometry::MultiPolygon(_) => "MultiPolygon",
            Geometry::GeometryCollection(_) => "GeometryCollection",
        }
    }

    /// The `geo` metadata of a file written here.
    fn geo_metadata(types: &BTreeSet<&str>, bbox: Option<Rect>) -> String {
        let mut column = serde_json::json!({
            "encoding": "WKB",
            "geometry_types": types.iter().collect::<Vec<_>>(),
            "crs": null,
        });
        if let Some(b) = bbox {
            column["bbox"] = serde_json::json!([b.min_x(), b.min_y(), b.max_x(), b.max_y()]);
        }
        serde_json::json!({
            "version": "1.1.0",
            "primary_column": "geometry",
            "columns": { "geometry": column },
        })
        .to_string()
    }

    /// The schema written: `id`, `geometry`, then the attribute columns
    /// (optional unsigned INT64 or UTF-8 BYTE_ARRAY).
    fn schema(columns: &[Column]) -> parquet::errors::Result<SchemaType> {
        let unsigned = Some(LogicalType::Integer(IntType {
            bit_width: 64,
            is_signed: false,
        }));
        let mut fields = vec![
            Arc::new(
                SchemaType::primitive_type_builder("id", PhysicalType::INT64)
                    .with_repetition(Repetition::REQUIRED)
                    .with_logical_type(unsigned.clone())
                    .build()?,
            ),
            Arc::new(
                SchemaType::primitive_type_builder("geometry", PhysicalType::BYTE_ARRAY)
                    .with_repetition(Repetition::REQUIRED)
                    .build()?,
            ),
        ];
        for c in columns {
            let (physical, logical) = match c.kind {
                Kind::UInt => (PhysicalType::INT64, unsigned.clone()),
                Kind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
            };
            fields.push(Arc::new(
                SchemaType::primitive_type_builder(&c.name, physical)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(logical)
                    .build()?,
            ));
        }
        SchemaType::group_type_builder("geoflash")
            .with_fields(fields)
            .build()
    }

    /// The rows of one row group, column by column.
    #[derive(Default)]
    struct Batch {
        /// The types of the attribute columns.
        kinds: Vec<Kind>,
        ids: Vec<i64>,
        wkbs: Vec<ByteArray>,
        /// Per attribute column: definition levels (1 set, 0 null), and
        /// the set values (integers or text).
        defs: Vec<Vec<i16>>,
        ints: Vec<Vec<i64>>,
        texts: Vec<Vec<ByteArray>>,
    }

    impl Batch {
        fn new(kinds: Vec<Kind>) -> Self {
            let n = kinds.len();
            Batch {
                kinds,
                defs: vec![Vec::new(); n],
                ints: vec![Vec::new(); n],
                texts: vec![Vec::new(); n],
                ..Batch::default()
            }
        }

        fn push(&mut self, id: u64, wkb: Vec<u8>, row: &Row) {
            // the column holds the u64 bits; its INTEGER(64, false) annotation says so
            self.ids.push(id as i64);
            self.wkbs.push(ByteArray::from(wkb));
            for (c, v) in row.iter().enumerate() {
                self.defs[c].push(i16::from(v.is_some()));
                match v {
                    None => {}
                    Some(Value::UInt(x)) => self.ints[c].push(*x as i64),
                    Some(Value::Text(t)) => self.texts[c].push(ByteArray::from(t.as_str())),
                }
            }
        }

        /// Writes the rows as one row group and empties the batch.
        fn flush(
            &mut self,
            writer: &mut SerializedFileWriter<&File>,
        ) -> parquet::errors::Result<()> {
            if self.ids.is_empty() {
                return Ok(());
            }
            let mut rg = writer.next_row_group()?;
            let mut i = 0;
            while let Some(mut col) = rg.next_column()? {
                match i {
                    0 => col
                        .typed::<Int64Type>()
                        .write_batch(&self.ids, None, None)?,
                    1 => col
                        .typed::<ByteArrayType>()
                        .write_batch(&self.wkbs, None, None)?,
                    _ => {
                        let c = i - 2;
                        let defs = Some(self.defs[c].as_slice());
                        match self.kinds[c] {
                            Kind::UInt => {
                                col.typed::<Int64Type>()
                                    .write_batch(&self.ints[c], defs, None)?
                            }
                            Kind::Text => col.typed::<ByteArrayType>().write_batch(
                                &self.texts[c],
                                defs,
                                None,
                            )?,
                        }
                    }
                };
                col.close()?;
                i += 1;
            }
            rg.close()?;
            *self = Batch::new(std::mem::take(&mut self.kinds));
            Ok(())
        }
    }

    pub(super) fn write<'r, G: Borrow<Geometry>>(
        out: &super::super::OutputFile,
        columns: &[Column],
        objects: impl IntoIterator<Item = (u64, G, &'r Row)>,
    ) -> Result<u64> {
        let path = out.path();
        let fail = |e: &dyn std::fmt::Display| bad(path, format!("cannot write GeoParquet: {e}"));
        let schema = schema(columns).map_err(|e| fail(&e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("geoflash {}", env!("CARGO_PKG_VERSION")))
            .build();
        let mut writer = SerializedFileWriter::new(out.file(), Arc::new(schema), Arc::new(props))
            .map_err(|e| fail(&e))?;
        let mut types = BTreeSet::new();
        let mut bbox: Option<Rect> = None;
        let mut batch = Batch::new(columns.iter().map(|c| c.kind).collect());
        let mut n = 0u64;
        for (id, g, row) in objects {
            let g = g.borrow();
            let r =
                bounding_rect(g).map_err(|e| fail(&format_args!("object {id}: {}", reason(&e))))?;
            bbox = Some(bbox.map_or(r, |b| b.union(&r)));
            types.insert(type_name(g));
            let wkb = to_wkb(g).map_err(|e| fail(&format_args!("object {id}: {}", reason(&e))))?;
            batch.push(id, wkb, row);
            n += 1;
            if batch.ids.len() == ROW_GROUP {
                batch.flush(&mut writer).map_err(|e| fail(&e))?;
            }
        }
        batch.flush(&mut writer).map_err(|e| fail(&e))?;
        writer.append_key_value_metadata(KeyValue::new(
            "geo".to_string(),
            geo_metadata(&types, bbox),
        ));
        writer.close().map_err(|e| fail(&e))?;
        Ok(n)
    }

    /// The geometry column's name and encoding from the `geo` metadata.
    fn geometry_column(path: &Path, geo: &str) -> Result<(String, String)> {
        let v: serde_json::Value = serde_json::from_str(geo).map_err(|e| {
            bad(
                path,
                format!("the GeoParquet 'geo' metadata is not JSON: {e}"),
            )
        })?;
        let primary = v["primary_column"]
            .as_str()
            .ok_or_else(|| bad(path, "the GeoParquet 'geo' metadata has no primary_column"))?;
        let encoding = v["columns"][primary]["encoding"].as_str().ok_or_else(|| {
            bad(
                path,
                format!("the GeoParquet 'geo' metadata gives no encoding for column {primary:?}"),
            )
        })?;
        Ok((primary.to_string(), encoding.to_string()))
    }

    /// Whether an integer column holds unsigned values.
    fn unsigned(c: &ColumnDescriptor) -> bool {
        matches!(c.logical_type_ref(), Some(LogicalType::Integer(t)) if !t.is_signed)
            || matches!(
                c.converted_type(),
                ConvertedType::UINT_8
                    | ConvertedType::UINT_16
                    | ConvertedType::UINT_32
                    | ConvertedType::UINT_64
            )
    }

    /// Refuses a column chunk whose dictionary page claims more values than
    /// its bytes can hold: the `parquet` crate sizes the decoded dictionary
    /// by that claim, so a 1 KiB file claiming two billion values made it
    /// ask for 47 GB (found by fuzzing). A value takes at least 4 bytes in a
    /// dictionary of byte arrays (its length), of 32-bit and of 64-bit
    /// integers, the types this reader decodes. Only dictionary pages are
    /// read here (data pages are skipped, not decompressed).
    fn check_dictionary(rg: &dyn RowGroupReader, col: usize) -> parquet::errors::Result<()> {
        let mut pages = rg.get_column_page_reader(col)?;
        while let Some(meta) = pages.peek_next_page()? {
            if !meta.is_dict {
                pages.skip_next_page()?;
                continue;
            }
            if let Some(Page::DictionaryPage {
                buf, num_values, ..
            }) = pages.get_next_page()?
            {
                let most = buf.len() / 4;
                if usize::try_from(num_values).map_or(true, |n| n > most) {
                    return Err(parquet::errors::ParquetError::General(format!(
                        "a dictionary page claims {num_values} values in {} bytes",
                        buf.len()
                    )));
                }
            }
        }
        Ok(())
    }

    /// A whole column chunk of binary values, `None` for nulls.
    fn read_binary(
        rg: &dyn RowGroupReader,
        col: usize,
    ) -> parquet::errors::Result<Vec<Option<ByteArray>>> {
        check_dictionary(rg, col)?;
        let max_def = rg.metadata().schema_descr().column(col).max_def_level();
        let ColumnReader::ByteArrayColumnReader(mut r) = rg.get_column_reader(col)? else {
            return Err(parquet::errors::ParquetError::General(
                "the geometry column is not binary".into(),
            ));
        };
        let (mut defs, mut vals) = (Vec::new(), Vec::new());
        while r.read_records(BATCH, Some(&mut defs), None, &mut vals)?.0 > 0 {}
        Ok(spread(defs, vals, max_def))
    }

    /// A whole column chunk of integers as `i128` (so that signed and
    /// unsigned 64-bit values both fit), `None` for nulls.
    fn read_ints(
        rg: &dyn RowGroupReader,
        col: usize,
        unsigned: bool,
    ) -> parquet::errors::Result<Vec<Option<i128>>> {
        check_dictionary(rg, col)?;
        let max_def = rg.metadata().schema_descr().column(col).max_def_level();
        let (mut defs, mut out) = (Vec::new(), Vec::new());
        match rg.get_column_reader(col)? {
            ColumnReader::Int64ColumnReader(mut r) => {
                let mut vals = Vec::new();
                while r.read_records(BATCH, Some(&mut defs), None, &mut vals)?.0 > 0 {}
                out.extend(vals.into_iter().map(|v: i64| {
                    if unsigned {
                        i128::from(v as u64)
                    } else {
                        i128::from(v)
                    }
                }));
            }
            ColumnReader::Int32ColumnReader(mut r) => {
                let mut vals = Vec::new();
                while r.read_records(BATCH, Some(&mut defs), None, &mut vals)?.0 > 0 {}
                out.extend(vals.into_iter().map(|v: i32| {
                    if unsigned {
                        i128::from(v as u32)
                    } else {
                        i128::from(v)
                    }
                }));
            }
            _ => {
                return Err(parquet::errors::ParquetError::General(
                    "the id column is not an integer column".into(),
                ))
            }
        }
        Ok(spread(defs, out, max_def))
    }

    /// Spreads the non-null `values` over the rows whose definition level is
    /// `max_def` (all rows when the column is required: `max_def` is 0).
    fn spread<T>(defs: Vec<i16>, values: Vec<T>, max_def: i16) -> Vec<Option<T>> {
        if max_def == 0 {
            return values.into_iter().map(Some).collect();
        }
        let mut vals = values.into_iter();
        defs.into_iter()
            .map(|d| if d == max_def { vals.next() } else { None })
            .collect()
    }

    /// Most bytes one compressed byte of `codec` becomes (`None`: no
    /// compression, nothing to bound): Snappy's elements yield at most 22
    /// per byte, DEFLATE's (gzip) 1,032, LZ4's 255 per length byte, and a
    /// Zstandard block of at most 128 KiB takes at least 4 bytes (an RLE
    /// block). Brotli has no useful bound (a prefix code of one symbol
    /// costs no bit per byte): 2^16, far beyond what a Parquet page of
    /// encoded values compresses to, stops the claims of gigabytes that the
    /// crate would reserve.
    pub(super) fn max_ratio(codec: Compression) -> Option<u64> {
        match codec {
            Compression::UNCOMPRESSED => None,
            Compression::SNAPPY => Some(parquet_thrift::SNAPPY_MAX_RATIO),
            Compression::GZIP(_) => Some(1_032),
            Compression::LZ4 | Compression::LZ4_RAW => Some(256),
            Compression::ZSTD(_) => Some(32 * 1024),
            Compression::BROTLI(_) => Some(1 << 16),
            // refused before any page is read (read_with)
            Compression::LZO => None,
        }
    }

    /// Checks the page headers of every column chunk of the file `data`
    /// (`parquet_thrift::check_pages`) before the crate reads them; a chunk
    /// whose declared range is not in the file is left to the crate.
    fn check_page_headers(
        path: &Path,
        reader: &SerializedFileReader<bytes::Bytes>,
        data: &[u8],
    ) -> Result<()> {
        for (g, rg) in reader.metadata().row_groups().iter().enumerate() {
            for (c, col) in rg.columns().iter().enumerate() {
                let start = col
                    .dictionary_page_offset()
                    .unwrap_or(col.data_page_offset());
                let chunk = usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(col.compressed_size()).ok())
                    .and_then(|(s, n)| data.get(s..s.checked_add(n)?));
                // the crate sizes its output by the header's claim first
                let ratio = max_ratio(col.compression());
                if let Some(chunk) = chunk {
                    parquet_thrift::check_pages(chunk, ratio).map_err(|msg| {
                        bad(
                            path,
                            format!("not a valid Parquet file: row group {g}, column {c}: {msg}"),
                        )
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Where a file's geometries are.
    enum GeometryColumn {
        /// A top-level binary column of WKB.
        Wkb(usize),
        /// A GeoArrow-encoded column.
        Arrow(ArrowColumn),
    }

    /// A GeoArrow-encoded geometry column.
    struct ArrowColumn {
        kind: ArrowKind,
        /// The leaf columns read: `x` and `y` (separated layout), or the
        /// one leaf of the interleaved layout.
        leaves: Vec<usize>,
        /// The lists around a coordinate value, outermost first.
        lists: Vec<ListLevels>,
        /// The definition level of a present coordinate value.
        max_def: i16,
    }

    /// Why a geometry column could not be read.
    enum Read {
        /// The decoder failed.
        Parquet(parquet::errors::ParquetError),
        /// The levels contradict each other or the encoding.
        Levels(String),
    }

    impl From<parquet::errors::ParquetError> for Read {
        fn from(e: parquet::errors::ParquetError) -> Self {
            Read::Parquet(e)
        }
    }

    /// The geometries of one row group, still encoded.
    enum Geometries {
        Wkb(Vec<Option<ByteArray>>),
        Arrow {
            kind: ArrowKind,
            rows: Vec<Option<Nest>>,
            /// x values, or all values when interleaved (`y` empty).
            x: Vec<f64>,
            y: Vec<f64>,
            interleaved: bool,
        },
    }

    impl Geometries {
        fn len(&self) -> usize {
            match self {
                Geometries::Wkb(v) => v.len(),
                Geometries::Arrow { rows, .. } => rows.len(),
            }
        }

        /// Row `i`'s geometry, `None` when null; errors start with `what`.
        fn geometry(&self, i: usize, what: &str) -> Result<Option<Geometry>> {
            match self {
                Geometries::Wkb(v) => v[i]
                    .as_ref()
                    .map(|wkb| from_wkb(wkb.data(), what))
                    .transpose(),
                Geometries::Arrow {
                    kind,
                    rows,
                    x,
                    y,
                    interleaved,
                } => {
                    let coords = if *interleaved {
                        Coords::Interleaved(x)
                    } else {
                        Coords::Separated { x, y }
                    };
                    rows[i]
                        .as_ref()
                        .map(|n| {
                            geoarrow::geometry(*kind, n, &coords).map_err(|e| {
                                geoflash::Error::invalid(format!("{what}: bad GeoArrow {e}"))
                            })
                        })
                        .transpose()
                }
            }
        }
    }

    impl GeometryColumn {
        /// The WKB column `col`, which must be a top-level binary column.
        fn wkb(path: &Path, schema: &SchemaDescriptor, col: usize) -> Result<Self> {
            let d = schema.column(col);
            if d.physical_type() != PhysicalType::BYTE_ARRAY || d.max_rep_level() != 0 {
                return Err(bad(
                    path,
                    format!(
                        "geometry column {:?} is not a binary (WKB) column",
                        d.path().string()
                    ),
                ));
            }
            Ok(GeometryColumn::Wkb(col))
        }

        /// The geometry column `name` of the `geo` metadata, in `encoding`.
        fn named(
            path: &Path,
            schema: &SchemaDescriptor,
            name: &str,
            encoding: &str,
        ) -> Result<Self> {
            let leaves: Vec<usize> = (0..schema.num_columns())
                .filter(|&c| {
                    schema.column(c).path().parts().first().map(String::as_str) == Some(name)
                })
                .collect();
            if leaves.is_empty() {
                return Err(bad(
                    path,
                    format!("the geometry column {name:?} is not in the schema"),
                ));
            }
            if encoding.eq_ignore_ascii_case("WKB") {
                let col = leaves
                    .iter()
                    .copied()
                    .find(|&c| schema.column(c).path().parts().len() == 1);
                return match col {
                    Some(c) => Self::wkb(path, schema, c),
                    None => Err(bad(
                        path,
                        format!(
                            "geometry column {name:?} is declared WKB but is a nested column, not a binary one"
                        ),
                    )),
                };
            }
            let Some(kind) = ArrowKind::parse(encoding) else {
                return Err(bad(
                    path,
                    format!(
                        "geometry column {name:?} is encoded as {encoding}, which this reader does not know (it reads WKB and the GeoArrow encodings point, linestring, polygon, multipoint, multilinestring and multipolygon)"
                    ),
                ));
            };
            let leaf = |field: &str| {
                leaves.iter().copied().find(|&c| {
                    let d = schema.column(c);
                    let parts = d.path().parts();
                    parts.len() > 1 && parts.last().map(String::as_str) == Some(field)
                })
            };
            let (cols, interleaved) = match (leaf("x"), leaf("y")) {
                (Some(x), Some(y)) => (vec![x, y], false),
                _ if leaves.len() == 1 => (leaves.clone(), true),
                _ => {
                    let names: Vec<String> = leaves
                        .iter()
                        .map(|&c| schema.column(c).path().string())
                        .collect();
                    return Err(bad(
                        path,
                        format!(
                            "geometry column {name:?} is encoded as {encoding} but has no x and y coordinate fields (its fields: {})",
                            names.join(", ")
                        ),
                    ));
                }
            };
            let lists = list_levels(schema, cols[0]);
            for &c in &cols {
                let d = schema.column(c);
                if d.physical_type() != PhysicalType::DOUBLE {
                    return Err(bad(
                        path,
                        format!(
                            "geometry column {name:?} is encoded as {encoding}, but its coordinate field {} is {}, not DOUBLE",
                            d.path().string(),
                            d.physical_type()
                        ),
                    ));
                }
                if list_levels(schema, c) != lists
                    || d.max_def_level() != schema.column(cols[0]).max_def_level()
                {
                    return Err(bad(
                        path,
                        format!(
                            "geometry column {name:?}: coordinate fields {} and {} are nested differently",
                            schema.column(cols[0]).path().string(),
                            d.path().string()
                        ),
                    ));
                }
            }
            let want = kind.depth() + usize::from(interleaved);
            if lists.len() != want {
                return Err(bad(
                    path,
                    format!(
                        "geometry column {name:?} is encoded as {encoding}, which nests {} lists around a coordinate{}, but its Parquet type nests {}",
                        kind.depth(),
                        if interleaved { " (and one list per interleaved coordinate)" } else { "" },
                        lists.len()
                    ),
                ));
            }
            Ok(GeometryColumn::Arrow(ArrowColumn {
                kind,
                max_def: schema.column(cols[0]).max_def_level(),
                leaves: cols,
                lists,
            }))
        }

        /// The leaf columns read for the geometries.
        fn leaves(&self) -> &[usize] {
            match self {
                GeometryColumn::Wkb(c) => std::slice::from_ref(c),
                GeometryColumn::Arrow(a) => &a.leaves,
            }
        }

        /// The geometries of a row group.
        fn read(&self, rg: &dyn RowGroupReader) -> std::result::Result<Geometries, Read> {
            let a = match self {
                GeometryColumn::Wkb(c) => return Ok(Geometries::Wkb(read_binary(rg, *c)?)),
                GeometryColumn::Arrow(a) => a,
            };
            let (defs, reps, x) = read_doubles(rg, a.leaves[0])?;
            let (rows, used) =
                geoarrow::assemble(&a.lists, a.max_def, &defs, &reps).map_err(Read::Levels)?;
            let y = match a.leaves.get(1) {
                Some(&c) => {
                    let (ydefs, yreps, y) = read_doubles(rg, c)?;
                    if ydefs != defs || yreps != reps {
                        return Err(Read::Levels(
                            "the x and y fields have different levels".into(),
                        ));
                    }
                    y
                }
                None => Vec::new(),
            };
            let interleaved = a.leaves.len() == 1;
            if used != x.len() || (!interleaved && used != y.len()) {
                return Err(Read::Levels(format!(
                    "the levels place {used} coordinate values, the column holds {}",
                    x.len()
                )));
            }
            Ok(Geometries::Arrow {
                kind: a.kind,
                rows,
                x,
                y,
                interleaved,
            })
        }
    }

    /// The levels of the lists (repeated nodes) on the path of leaf column
    /// `col`, outermost first.
    fn list_levels(schema: &SchemaDescriptor, col: usize) -> Vec<ListLevels> {
        let mut node = schema.root_schema();
        let (mut def, mut out) = (0i16, Vec::new());
        for part in schema.column(col).path().parts() {
            if !node.is_group() {
                break;
            }
            let Some(child) = node.get_fields().iter().find(|f| f.name() == part) else {
                break;
            };
            node = child;
            match node.get_basic_info().repetition() {
                Repetition::REQUIRED => {}
                Repetition::OPTIONAL => def += 1,
                Repetition::REPEATED => {
                    out.push(ListLevels {
                        present: def,
                        element: def + 1,
                    });
                    def += 1;
                }
            }
        }
        out
    }

    /// A whole column chunk of doubles with its definition and repetition
    /// levels (zeros for a column that has none).
    fn read_doubles(
        rg: &dyn RowGroupReader,
        col: usize,
    ) -> parquet::errors::Result<(Vec<i16>, Vec<i16>, Vec<f64>)> {
        check_dictionary(rg, col)?;
        let d = rg.metadata().schema_descr().column(col);
        let ColumnReader::DoubleColumnReader(mut r) = rg.get_column_reader(col)? else {
            return Err(parquet::errors::ParquetError::General(
                "a coordinate column is not of doubles".into(),
            ));
        };
        let (mut defs, mut reps, mut vals) = (Vec::new(), Vec::new(), Vec::new());
        while r
            .read_records(BATCH, Some(&mut defs), Some(&mut reps), &mut vals)?
            .0
            > 0
        {}
        if d.max_def_level() == 0 {
            defs = vec![0; vals.len()];
        }
        if d.max_rep_level() == 0 {
            reps = vec![0; defs.len()];
        }
        Ok((defs, reps, vals))
    }

    /// The geometry column of a Parquet file without `geo` metadata: the
    /// first of `geometry`, `geom` and `wkb` (found by `top`).
    fn untagged_geometry(path: &Path, top: &dyn Fn(&str) -> Option<usize>) -> Result<usize> {
        ["geometry", "geom", "wkb"]
            .into_iter()
            .find_map(top)
            .ok_or_else(|| {
                bad(
                    path,
                    "not a GeoParquet file: no 'geo' metadata and no geometry, geom or wkb column",
                )
            })
    }

    /// Refuses an `id` column `d` of another type than an integer.
    fn check_id_column(path: &Path, d: &ColumnDescriptor) -> Result<()> {
        let ty = d.physical_type();
        if matches!(ty, PhysicalType::INT32 | PhysicalType::INT64) {
            Ok(())
        } else {
            Err(bad(
                path,
                format!("the id column has type {ty}, not an integer type"),
            ))
        }
    }

    /// The attribute table of `schema`'s columns `attr_cols`: unsigned
    /// integer columns as [`Kind::UInt`], the others as text.
    fn attribute_table(schema: &SchemaDescriptor, attr_cols: &[usize]) -> Result<Attributes> {
        Attributes::new(
            attr_cols
                .iter()
                .map(|&c| {
                    let d = schema.column(c);
                    let kind = if d.physical_type() != PhysicalType::BYTE_ARRAY && unsigned(&d) {
                        Kind::UInt
                    } else {
                        Kind::Text
                    };
                    Column::new(d.name(), kind)
                })
                .collect(),
        )
    }

    /// Refuses a file whose columns `read` are compressed with the codec this
    /// build cannot decode, before the decoder fails on it.
    fn refuse_lzo(
        path: &Path,
        reader: &SerializedFileReader<bytes::Bytes>,
        read: &[usize],
    ) -> Result<()> {
        for rg in reader.metadata().row_groups() {
            for &c in read {
                if rg.column(c).compression() == Compression::LZO {
                    return Err(bad(
                        path,
                        format!(
                            "column {:?} is compressed with LZO, which this build does not read (it reads uncompressed, Snappy, gzip, Brotli, LZ4 and Zstandard columns; rewrite the file with one of them, e.g. GeoPandas to_parquet(compression=\"zstd\"))",
                            rg.column(c).column_descr().path().string()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The values of attribute column `c` (`col` of the table) in row group
    /// `rg`: text, or unsigned integers where the column is of that kind.
    fn attribute_values(
        rg: &dyn RowGroupReader,
        schema: &SchemaDescriptor,
        c: usize,
        col: &Column,
    ) -> parquet::errors::Result<Vec<Option<Value>>> {
        Ok(
            if schema.column(c).physical_type() == PhysicalType::BYTE_ARRAY {
                read_binary(rg, c)?
                    .into_iter()
                    .map(|v| v.map(|b| Value::Text(String::from_utf8_lossy(b.data()).into())))
                    .collect()
            } else {
                read_ints(rg, c, col.kind == Kind::UInt)?
                    .into_iter()
                    .map(|v| {
                        v.map(|x| match (col.kind, u64::try_from(x)) {
                            (Kind::UInt, Ok(u)) => Value::UInt(u),
                            _ => Value::Text(x.to_string()),
                        })
                    })
                    .collect()
            },
        )
    }

    /// The columns read as attributes: the top-level, non-repeated
    /// integer and byte-array columns other than the geometry's leaves and
    /// the id column.
    fn attribute_columns(
        schema: &SchemaDescriptor,
        geometry: &[usize],
        idcol: Option<usize>,
    ) -> Vec<usize> {
        (0..schema.num_columns())
            .filter(|&c| !geometry.contains(&c) && Some(c) != idcol)
            .filter(|&c| {
                let d = schema.column(c);
                d.path().parts().len() == 1
                    && d.max_rep_level() == 0
                    && matches!(
                        d.physical_type(),
                        PhysicalType::INT32 | PhysicalType::INT64 | PhysicalType::BYTE_ARRAY
                    )
            })
            .collect()
    }

    /// Reads the objects of a GeoParquet file, and its attribute columns
    /// when `attributes` is set (else an empty table).
    pub(super) fn read_with(
        path: &Path,
        attributes: bool,
    ) -> Result<(Vec<(u64, Geometry)>, Attributes)> {
        // The whole file in memory (the objects read from it take more):
        // the page reader then parses page headers from memory, where a
        // corrupt header that makes it skip a long list ends at once, instead
        // of issuing a read system call per byte of a file (a 1 KiB file took
        // 57 s that way; found by fuzzing).
        let data = std::fs::read(path).map_err(|e| io_err(path, e))?;
        // The footer's declared sizes checked before the crate trusts them.
        parquet_thrift::check(&data)
            .map_err(|msg| bad(path, format!("not a valid Parquet file: {msg}")))?;
        let data = bytes::Bytes::from(data);
        let reader = SerializedFileReader::new(data.clone())
            .map_err(|e| bad(path, format!("not a valid Parquet file: {e}")))?;
        check_page_headers(path, &reader, &data)?;
        let meta = reader.metadata().file_metadata();
        let schema = meta.schema_descr();
        let top = |name: &str| {
            schema
                .columns()
                .iter()
                .position(|c| c.path().parts().len() == 1 && c.name().eq_ignore_ascii_case(name))
        };
        let geo = meta
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|kv| kv.key == "geo"))
            .and_then(|kv| kv.value.as_deref());
        let geometry = match geo {
            Some(text) => {
                let (name, encoding) = geometry_column(path, text)?;
                GeometryColumn::named(path, schema, &name, &encoding)?
            }
            None => GeometryColumn::wkb(path, schema, untagged_geometry(path, &top)?)?,
        };
        let idcol = top("id");
        if let Some(i) = idcol {
            check_id_column(path, &schema.column(i))?;
        }
        let id_unsigned = idcol.is_some_and(|i| unsigned(&schema.column(i)));
        let attr_cols = if attributes {
            attribute_columns(schema, geometry.leaves(), idcol)
        } else {
            Vec::new()
        };
        let mut attrs = attribute_table(schema, &attr_cols).map_err(|e| bad(path, reason(&e)))?;
        let read: Vec<usize> = geometry
            .leaves()
            .iter()
            .copied()
            .chain(idcol)
            .chain(attr_cols.iter().copied())
            .collect();
        refuse_lzo(path, &reader, &read)?;
        let pq =
            |e: parquet::errors::ParquetError| bad(path, format!("cannot read Parquet data: {e}"));
        let mut objects = Collector::new(path);
        let mut row = 0u64;
        for g in 0..reader.num_row_groups() {
            let rg = reader.get_row_group(g).map_err(pq)?;
            let rows = usize::try_from(rg.metadata().num_rows()).unwrap_or(0);
            let geoms = geometry.read(rg.as_ref()).map_err(|e| match e {
                Read::Parquet(e) => pq(e),
                Read::Levels(e) => bad(
                    path,
                    format!("row group {g}: the geometry column's levels are malformed: {e}"),
                ),
            })?;
            let ids = match idcol {
                Some(i) => Some(read_ints(rg.as_ref(), i, id_unsigned).map_err(pq)?),
                None => None,
            };
            if geoms.len() != rows || ids.as_ref().is_some_and(|ids| ids.len() != rows) {
                return Err(bad(
                    path,
                    format!("row group {g} announces {rows} rows but its columns hold a different number"),
                ));
            }
            let mut columns = Vec::with_capacity(attr_cols.len());
            for (&c, col) in attr_cols.iter().zip(attrs.columns()) {
                let values = attribute_values(rg.as_ref(), schema, c, col).map_err(pq)?;
                if values.len() != rows {
                    return Err(bad(
                        path,
                        format!(
                            "row group {g} announces {rows} rows but column {:?} holds {}",
                            col.name,
                            values.len()
                        ),
                    ));
                }
                columns.push(values.into_iter());
            }
            let mut ids = ids.map(Vec::into_iter);
            for i in 0..geoms.len() {
                let what = format!("row {row}");
                let id = match ids.as_mut().and_then(Iterator::next) {
                    None => row,
                    Some(None) => return Err(bad(path, format!("{what}: the id is null"))),
                    Some(Some(v)) => u64::try_from(v)
                        .map_err(|_| bad(path, format!("{what}: id {v} is negative")))?,
                };
                let g = geoms
                    .geometry(i, &format!("{}: {what} (id {id})", path.display()))?
                    .ok_or_else(|| bad(path, format!("{what} (id {id}) has no geometry")))?;
                objects.push(&what, id, g)?;
                if !columns.is_empty() {
                    attrs.push(columns.iter_mut().map(|c| c.next().flatten()).collect())?;
                }
                row += 1;
            }
        }
        Ok((objects.finish(), attrs))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn spread_nulls() {
            assert_eq!(spread(vec![], vec![1, 2], 0), vec![Some(1), Some(2)]);
            assert_eq!(
                spread(vec![1, 0, 1], vec![1, 2], 1),
                vec![Some(1), None, Some(2)]
            );
            assert_eq!(
                spread(vec![2, 1, 2], vec![1, 2], 2),
                vec![Some(1), None, Some(2)]
            );
            // fewer values than levels announce: the missing ones read as nulls
            assert_eq!(
                spread(vec![1, 1, 1], vec![1, 2], 1),
                vec![Some(1), Some(2), None]
            );
        }
    }
}
