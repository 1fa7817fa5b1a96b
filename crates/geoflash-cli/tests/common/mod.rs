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

/// `n` small rectangles with ids `1..=n` in a CSV file.
pub fn write_rects(path: &Path, n: u64) {
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for i in 1..=n {
        let x = (i * 7919 % 10_000) as f64 / 10.0;
        let y = (i * 104_729 % 9_973) as f64 / 10.0;
        text.push_str(&format!("{i},{x},{y},{},{}\n", x + 0.5, y + 0.5));
    }
    std::fs::write(path, text).unwrap();
}

/// The sorted ids of every object in the index in `idx`.
pub fn all_ids(idx: &Path) -> Vec<u64> {
    window_ids(idx, "-10,-10,2000,2000")
}

/// The sorted ids `query --window` finds.
pub fn window_ids(idx: &Path, window: &str) -> Vec<u64> {
    let out = last_json(&ok(geoflash(&[
        "query",
        "--index",
        s(idx),
        "--window",
        window,
        "--ids",
        "--json",
    ])));
    windows_ids(&out).swap_remove(0)
}

/// The sorted ids of each window of a `query --ids --json` record.
pub fn windows_ids(record: &serde_json::Value) -> Vec<Vec<u64>> {
    record["windows"]
        .as_array()
        .expect("a `windows` array")
        .iter()
        .map(|w| {
            let mut ids: Vec<u64> = w["ids"]
                .as_array()
                .expect("an `ids` array")
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            ids.sort_unstable();
            ids
        })
        .collect()
}

/// Sends SIGINT (Ctrl-C) to `child`.
pub fn interrupt(child: &std::process::Child) {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -INT failed");
}

/// Runs the command line with `args`, sends it SIGINT as soon as its
/// first progress line (`…: N% (…)`, printed on standard error when that
/// is not a terminal) shows it at work, and returns its output, standard
/// error whole. Waiting for the progress line rather than for a fixed time
/// keeps the interrupt inside the work however fast the machine or the
/// build is: it comes with about nine tenths of the work still to do.
pub fn interrupted_at_first_progress(args: &[&str]) -> std::process::Output {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (seen, progress) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if line.contains("% (") {
                let _ = seen.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    if progress
        .recv_timeout(std::time::Duration::from_secs(120))
        .is_err()
    {
        // No progress line: the command ended first, or hangs.
        let _ = child.kill();
        let status = child.wait().unwrap();
        let err = reader.join().unwrap();
        panic!("geoflash {args:?} printed no progress line to interrupt at ({status}): {err}");
    }
    interrupt(&child);
    let mut out = child.wait_with_output().unwrap();
    out.stderr = reader.join().unwrap().into_bytes();
    out
}

/// Whether the system tells a process's peak RSS (`/proc/self/status`,
/// which the commands' `peak_rss_bytes` reads); a test of memory skips
/// when it does not, except under CI, where that fails the run.
pub fn peak_rss_is_known() -> bool {
    if Path::new("/proc/self/status").exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: no /proc/self/status to read the peak RSS from"
    );
    eprintln!("skipped: no /proc/self/status to read the peak RSS from");
    false
}

/// An index `ix` in `dir` built quietly from `n` rectangles of
/// [`write_rects`] (in `d.csv`) with the build flags `flags`.
pub fn build_rects(dir: &Path, n: u64, flags: &[&str]) -> std::path::PathBuf {
    let (data, idx) = (dir.join("d.csv"), dir.join("ix"));
    write_rects(&data, n);
    let mut args = vec!["-q", "build", "--input", s(&data), "--index", s(&idx)];
    args.extend_from_slice(flags);
    ok(geoflash(&args));
    idx
}
