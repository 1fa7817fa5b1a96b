//! `geoflash import --input FILE --out FILE.csv|.geojson`: converts a dataset
//! file to the workbench's formats in a chosen insertion order.
use std::path::PathBuf;

use geoflash_bench::import;

use crate::output::print_json;
use crate::Failure;

/// Options of `import`.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  geoflash import --input parcels.csv --out parcels.geojson   (CSV with a wkt column)\n  geoflash import --input buildings.geojson --out b.csv --order sessions --seed 7"
)]
pub struct ImportArgs {
    /// Input: CSV (id,minx,miny,maxx,maxy or a wkt column) or GeoJSON.
    #[arg(long)]
    input: PathBuf,
    /// Output: .csv (id,minx,miny,maxx,maxy) or .geojson (geometries).
    #[arg(long)]
    out: PathBuf,
    /// Insertion order: as-generated (as read), random, hilbert or sessions.
    #[arg(long, default_value = "as-generated")]
    order: String,
    /// Seed of the order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print a JSON summary (last line of standard output).
    #[arg(long)]
    json: bool,
}

/// `geoflash import`.
pub fn import(a: ImportArgs) -> Result<(), Failure> {
    let order = a.order.parse()?;
    let r = import::import(&a.input, &a.out, order, a.seed)?;
    if a.json {
        print_json(&r)?;
    } else {
        outln!("wrote {} objects to {}", r.count, r.out);
    }
    Ok(())
}
