//! Feeds arbitrary bytes to the workbench's Shapefile reader: the input is
//! split into the `.shp`, `.shx` and `.dbf` files (each but the last
//! prefixed by a little-endian u16 length; an empty part leaves that file
//! out). Nothing may panic, a refused file's error names the file, and every
//! object read is a valid geometry.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [shp, shx, dbf] = geoflash_fuzz::split_parts::<3>(data);
    for (ext, part) in [("shx", shx), ("dbf", dbf)] {
        let name = format!("input.{ext}");
        if part.is_empty() {
            geoflash_fuzz::remove_scratch(&name);
        } else {
            geoflash_fuzz::scratch_file(&name, part);
        }
    }
    let path = geoflash_fuzz::scratch_file("input.shp", shp);
    geoflash_fuzz::check_dataset(&path);
});
