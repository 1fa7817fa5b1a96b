//! `geoflash import --input FILE --out FILE`: converts a dataset file of any
//! input format (CSV, GeoJSON, FlatGeobuf, GeoParquet, Shapefile, OSM PBF)
//! to one of the workbench's output formats (CSV, GeoJSON, FlatGeobuf,
//! GeoParquet) in a chosen insertion order.
use std::path::PathBuf;

use geoflash_bench::import;

use crate::output::print_json;
use crate::Failure;

/// Options of `import`.
#[derive(clap::Args)]
#[command(
    after_help = "Formats follow the extensions: read .csv, .geojson/.json, .fgb, .parquet, .shp (with its .dbf), .osm.pbf; write .csv (MBRs), .geojson, .fgb, .parquet (geometries).\n\nExamples:\n  geoflash import --input parcels.csv --out parcels.geojson   (CSV with a wkt column)\n  geoflash import --input buildings.geojson --out b.csv --order sessions --seed 7\n  geoflash import --input monaco-latest.osm.pbf --out monaco.fgb   (building footprints)\n  geoflash import --input roads.shp --out roads.parquet --order hilbert"
)]
pub struct ImportArgs {
    /// Input: CSV (id,minx,miny,maxx,maxy or a wkt column), GeoJSON, FlatGeobuf (.fgb),
    /// GeoParquet (.parquet), Shapefile (.shp) or OpenStreetMap PBF (.osm.pbf).
    #[arg(long)]
    input: PathBuf,
    /// Output: .csv (id,minx,miny,maxx,maxy), or .geojson, .fgb, .parquet (geometries with ids).
    #[arg(long)]
    out: PathBuf,
    /// Insertion order: as-generated (as read), random, hilbert or sessions.
    #[arg(long, default_value = "as-generated")]
    order: String,
    /// Seed of the order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// OSM PBF input: which closed ways become polygons, buildings (tagged building=*) or closed (all).
    #[arg(long, default_value = "buildings")]
    osm_ways: String,
    /// Print a JSON summary (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// `geoflash import`.
pub fn import(a: ImportArgs) -> Result<(), Failure> {
    let order = a.order.parse()?;
    let opts = import::ReadOptions {
        osm_ways: a.osm_ways.parse()?,
    };
    let r = import::import(&a.input, &a.out, order, a.seed, &opts)?;
    if a.json {
        print_json(&r)?;
    } else {
        let skipped = if r.skipped > 0 {
            format!(
                " ({} ways skipped: the file lacks some of their nodes)",
                r.skipped
            )
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
