//! Feeds arbitrary text to the workload parser (`geoflash bench W.toml`) at
//! every scale: nothing may panic; what parses must expand to configurations
//! without panicking either.
#![no_main]

use geoflash_bench::workload::{Scale, Workload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = geoflash_fuzz::scratch_dir().join("workload.toml");
    for scale in [Scale::Smoke, Scale::Small, Scale::Full] {
        if let Ok(w) = Workload::parse(text, &path, scale) {
            for c in w.configurations(&[]).iter().take(64) {
                let _ = c.key("fuzz", scale);
                let _ = c.index.options();
            }
        }
    }
});
