//! I/O traces on the command line: a build records the trace of its index
//! device, devbench replays it on any device and reproduces the counters.
mod common;
use common::*;

#[test]
fn build_trace_replays_to_the_same_counters_in_both_ftl_modes() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("d.csv");
    let trace = dir.path().join("t.bin");
    ok(geoflash(&[
        "generate",
        "--distribution",
        "uniform",
        "--geometry",
        "box",
        "--count",
        "3000",
        "--seed",
        "3",
        "--out",
        s(&csv),
    ]));
    let dev = "flashsim:preset=seed-tc58&capacity=4MiB&op=0.15";
    let build = last_json(&ok(geoflash(&[
        "build",
        "--input",
        s(&csv),
        "--index",
        s(&dir.path().join("idx")),
        "--store",
        "plain",
        "--page-size",
        "1024",
        "--buffer",
        "16KiB",
        "--device",
        dev,
        "--record-trace",
        s(&trace),
        "--json",
    ])));
    let mut programs = Vec::new();
    for ftl in ["page", "flashdbsim"] {
        let r = last_json(&ok(geoflash(&[
            "devbench",
            "--trace",
            s(&trace),
            "--device",
            &format!("{dev}&ftl={ftl}"),
            "--json",
        ])));
        let io = &r["stats"]["io"];
        // The build ends with a checkpoint that makes everything durable,
        // so closing the index writes nothing more: the trace's counters are
        // the build's.
        for k in ["pages_written", "write_batches", "pages_read", "syncs"] {
            assert_eq!(io[k].as_u64(), build[k].as_u64(), "{ftl}: {k}");
        }
        programs.push(r["stats"]["sim"]["nand_programs"].as_u64().unwrap());
    }
    if programs[0] == programs[1] {
        // Without garbage collection both modes program each flash page once.
        assert_eq!(programs[0], build["nand_programs"].as_u64().unwrap());
    }
    // A damaged trace is a clear error (exit 1 or 2), never a panic.
    let mut bytes = std::fs::read(&trace).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&trace, &bytes).unwrap();
    let out = geoflash(&["devbench", "--trace", s(&trace), "--device", "mem:"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(1 | 2)), "{err}");
    assert!(err.contains("trace") && err.contains("truncated"), "{err}");
}
