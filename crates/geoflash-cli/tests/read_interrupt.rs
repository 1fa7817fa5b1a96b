//! Ctrl-C while `geoflash build --bulk` reads its input whole (the
//! in-memory bulk loads read every record before the load starts): the
//! reading stops, whatever the input's format, with exit code 130 and the
//! message of a reading stopped, and nothing is published. The same for
//! `update --input`, which reads its moves whole before opening the index.
mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Sends `signal` (`INT`, `STOP`, `CONT`) to `child`.
fn signal(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal} failed");
}

/// Where `child`'s open file on `input` is (its file position, from
/// `/proc`), `None` while it has no such file open.
fn position_in(child: &Child, input: &Path) -> Option<u64> {
    let proc = PathBuf::from(format!("/proc/{}", child.id()));
    let fds = std::fs::read_dir(proc.join("fd")).ok()?;
    for fd in fds.flatten() {
        if std::fs::read_link(fd.path()).ok().as_deref() != Some(input) {
            continue;
        }
        let info = std::fs::read_to_string(proc.join("fdinfo").join(fd.file_name())).ok()?;
        let pos = info.lines().find_map(|l| l.strip_prefix("pos:"))?;
        return pos.trim().parse().ok();
    }
    None
}

/// Whether `child` is stopped (state `T` in `/proc/PID/stat`).
fn is_stopped(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    // `PID (NAME) STATE …`: the state follows the name's closing parenthesis.
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
}

/// Waits (up to a minute: a bound for a hung command, not a measure)
/// until `done`, checking that `child` still runs.
fn wait_until(child: &mut Child, what: &str, mut done: impl FnMut(&Child) -> bool) {
    let start = Instant::now();
    while !done(child) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("geoflash ended ({status}) before {what}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "geoflash never got to {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs the command line with `args`, and once it has read part of
/// `input` (its file position there past 0) stops it (SIGSTOP); when at
/// least half of the file is still to read there, sends it SIGINT and
/// resumes it (SIGCONT), else kills it and starts again (a few times: the
/// test's own wait may have come late on a busy machine). The interrupt
/// thus comes while the input is read, however fast the machine, with
/// much of the file to read. Returns the command's output.
fn interrupted_while_reading(args: &[&str], input: &Path) -> Output {
    let input = std::fs::canonicalize(input).unwrap();
    let len = std::fs::metadata(&input).unwrap().len();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until(&mut child, "reading its input", |c| {
            position_in(c, &input).is_some_and(|p| p > 0)
        });
        signal(&child, "STOP");
        wait_until(&mut child, "stopping", is_stopped);
        let at = position_in(&child, &input);
        if at.is_some_and(|p| p < len / 2) {
            signal(&child, "INT");
            signal(&child, "CONT");
            return child.wait_with_output().unwrap();
        }
        seen.push(at);
        signal(&child, "KILL");
        child.wait().unwrap();
    }
    panic!(
        "geoflash {args:?} was never stopped in the first half of {} ({len} bytes; stopped at {seen:?})",
        input.display()
    );
}

/// `n` points with ids `1..=n` as a GeoJSON FeatureCollection.
fn write_geojson_points(path: &Path, n: u64) {
    let mut text = String::from("{\"type\":\"FeatureCollection\",\"features\":[\n");
    for i in 1..=n {
        let (x, y) = (
            (i * 7919 % 10_000) as f64 / 10.0,
            (i * 104_729 % 9_973) as f64 / 10.0,
        );
        let sep = if i == 1 { "" } else { ",\n" };
        text.push_str(&format!(
            "{sep}{{\"type\":\"Feature\",\"id\":{i},\"geometry\":{{\"type\":\"Point\",\"coordinates\":[{x},{y}]}}}}"
        ));
    }
    text.push_str("]}\n");
    std::fs::write(path, text).unwrap();
}

/// `n` points with ids `1..=n` in a CSV file of WKT.
fn write_wkt_points(path: &Path, n: u64) {
    let mut text = String::from("id,wkt\n");
    for i in 1..=n {
        let (x, y) = (
            (i * 7919 % 10_000) as f64 / 10.0,
            (i * 104_729 % 9_973) as f64 / 10.0,
        );
        text.push_str(&format!("{i},POINT ({x} {y})\n"));
    }
    std::fs::write(path, text).unwrap();
}

/// Ctrl-C while `build --bulk str|hilbert` reads its input whole, before
/// the load: a GeoJSON document (parsed whole, then its features), a
/// FlatGeobuf file, a CSV of WKT and a CSV of boxes, each of 1,000,000
/// records, a second or more of reading. The reading stops: exit code
/// 130, the message `interrupted while reading FILE: nothing was changed`
/// (that of a CSV input's first pass, `insert`'s), the load never begun
/// (no `bulk loading` nor `nodes written` line), no index and no staging
/// directory. Before the fix every reader but that first pass read its
/// whole file, and the load stopped at its first question instead, with
/// the message of an interrupted build.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_while_a_bulk_load_reads_its_input_stops_the_reading() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let n = 1_000_000u64;
    let geojson = dir.path().join("d.geojson");
    write_geojson_points(&geojson, n);
    let fgb = dir.path().join("d.fgb");
    ok(geoflash(&[
        "import",
        "--input",
        s(&geojson),
        "--out",
        s(&fgb),
    ]));
    let wkt = dir.path().join("w.csv");
    write_wkt_points(&wkt, n);
    let boxes = dir.path().join("b.csv");
    write_rects(&boxes, n);
    let idx = dir.path().join("idx");
    let staging = dir.path().join(".idx.building");
    for (input, bulk) in [
        (&geojson, "str"),
        (&geojson, "hilbert"),
        (&fgb, "str"),
        (&fgb, "hilbert"),
        (&wkt, "str"),
        (&boxes, "hilbert"),
    ] {
        let what = format!("--bulk {bulk} of {}", input.display());
        let args = [
            "build",
            "--input",
            s(input),
            "--index",
            s(&idx),
            "--bulk",
            bulk,
        ];
        let out = interrupted_while_reading(&args, input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{what}: {err}");
        let want = format!(
            "geoflash: error: interrupted while reading {}: nothing was changed",
            input.display()
        );
        assert_eq!(
            err.trim_end().lines().last(),
            Some(want.as_str()),
            "{what}: {err}"
        );
        assert!(
            !err.contains("bulk loading") && !err.contains("nodes written"),
            "{what}: the load began after the interrupt: {err}"
        );
        assert!(
            !idx.exists(),
            "{what}: something was published at the target"
        );
        assert!(!staging.exists(), "{what}: the staging directory was left");
        println!("{what}: {err}");
    }
}

/// The files of the index directory `dir` and their bytes.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Ctrl-C while `update --input` reads its CSV of 1,000,000 moves (read
/// whole before the index is opened): exit code 130, the message of a
/// reading stopped, and the index unchanged, byte for byte. Before the
/// fix the whole file was read, then the updates ran until the first
/// check of the stop inside them.
#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_while_update_reads_its_moves_stops_the_reading() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rects = dir.path().join("r.csv");
    write_rects(&rects, 1_000);
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&rects),
        "--index",
        s(&idx),
    ]));
    let moves = dir.path().join("moves.csv");
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for i in 0..1_000_000u64 {
        let (x, y) = ((i % 997) as f64, (i % 991) as f64);
        text.push_str(&format!(
            "{},{x},{y},{},{}\n",
            i % 1_000 + 1,
            x + 0.5,
            y + 0.5
        ));
    }
    std::fs::write(&moves, text).unwrap();
    let before = contents(&idx);
    let args = ["update", "--index", s(&idx), "--input", s(&moves)];
    let out = interrupted_while_reading(&args, &moves);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let want = format!(
        "geoflash: error: interrupted while reading {}: nothing was changed",
        moves.display()
    );
    assert_eq!(err.trim_end().lines().last(), Some(want.as_str()), "{err}");
    assert!(contents(&idx) == before, "the index changed: {err}");
}
