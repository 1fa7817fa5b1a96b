//! Helpers shared by the command-line tests: run the `geoflash` binary,
//! require success, read the JSON record on the last line of its output.
// Each test binary uses a subset of these.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `geoflash` with `args`.
pub fn geoflash(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(args)
        .output()
        .expect("run geoflash")
}

/// Runs `geoflash` with `args` in the directory `cwd`.
pub fn geoflash_in(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run geoflash")
}

/// `out`, after checking that the command succeeded (its standard error otherwise).
pub fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON record on the last line of standard output.
pub fn last_json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().next_back().unwrap_or_else(|| {
        panic!(
            "no output; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
