//! Feeds arbitrary bytes to the workbench's reader as a `.csv` dataset file
//! (`geoflash import`, `build --input`): nothing may panic, a refused file's
//! error names the file, and every object read is a valid geometry.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = geoflash_fuzz::scratch_file("input.csv", data);
    geoflash_fuzz::check_dataset(&path);
});
