//! The corruption campaign of the torture tier (issue 44, `docs/reliability.md`):
//! damage to every page of every file of an index, read by the command
//! line. Indexes of every store and structure family (the plain store and
//! its rollback journal, eFIND and FAST with their logs, one of them killed
//! mid-insert so that its log holds changes readers replay, the FOR-tree,
//! a grid file, a `hybrid:` device with its placement map, a flash
//! simulator's image, the object heap of a GeoJSON build) are damaged one
//! 512-byte block at a time (every block of every file, the manifest every
//! 32 bytes): four bytes flipped at an offset that moves from block to
//! block. Then `query` (many windows) must answer exactly what a
//! brute-force oracle over the input answers, or fail with exit code 1
//! naming the damaged file; `verify` must pass or fail with exit code 1
//! naming it. Never another answer with exit code 0, never another exit
//! code; except, not promised yet (`docs/reliability.md`), damage to the
//! last pages of `log.dat`, read as a crash's torn tail: the answers of an
//! earlier prefix, counted apart.
//!
//! Blocks of zeros (the unused room of a sparse placement map or log) are
//! sampled: 64 spread over each file. `make test` damages every 16th block
//! (`GEOFLASH_CLI_DAMAGE_STRIDE`); `make torture` every block (stride 1).
mod common;
use common::*;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Objects per index.
const N: u64 = 1_500;

/// The bytes a damage campaign treats as one page of a file (the smallest
/// page any file of an index has; the manifest is damaged every 32 bytes).
const BLOCK: usize = 512;

/// The rectangle (a point for the point structures) of object `i`.
fn object(i: u64, points: bool) -> [f64; 4] {
    let x = (i * 7919 % 10_000) as f64 / 10.0;
    let y = (i * 104_729 % 9_973) as f64 / 10.0;
    let side = if points { 0.0 } else { 0.5 };
    [x, y, x + side, y + side]
}

/// Writes objects `first..=last` to a CSV (or, `geojson`, a GeoJSON file of
/// polygons, whose geometries go to the object heap).
fn write_objects(path: &Path, first: u64, last: u64, points: bool, geojson: bool) {
    let text = if geojson {
        let features: Vec<String> = (first..=last)
            .map(|i| {
                let b = object(i, false);
                format!(
                    r#"{{"type":"Feature","id":{i},"properties":{{}},"geometry":{{"type":"Polygon","coordinates":[[[{0},{1}],[{2},{1}],[{2},{3}],[{0},{3}],[{0},{1}]]]}}}}"#,
                    b[0], b[1], b[2], b[3]
                )
            })
            .collect();
        format!(
            r#"{{"type":"FeatureCollection","features":[{}]}}"#,
            features.join(",")
        )
    } else {
        let mut text = String::from("id,minx,miny,maxx,maxy\n");
        for i in first..=last {
            let b = object(i, points);
            text.push_str(&format!("{i},{},{},{},{}\n", b[0], b[1], b[2], b[3]));
        }
        text
    };
    std::fs::write(path, text).unwrap();
}

/// The windows queried: everything, then a grid of small windows.
fn windows() -> Vec<[f64; 4]> {
    let mut w = vec![[-10.0, -10.0, 2000.0, 2000.0]];
    for gx in 0..8 {
        for gy in 0..8 {
            let (x, y) = (gx as f64 * 125.0, gy as f64 * 125.0);
            w.push([x, y, x + 61.0, y + 47.0]);
        }
    }
    w
}

/// The brute-force answers over objects `1..=k`.
fn oracle(k: u64, points: bool) -> Vec<Vec<u64>> {
    windows()
        .iter()
        .map(|w| {
            (1..=k)
                .filter(|&i| {
                    let b = object(i, points);
                    b[0] <= w[2] && w[0] <= b[2] && b[1] <= w[3] && w[1] <= b[3]
                })
                .collect()
        })
        .collect()
}

/// `query --windows` on `idx`: the sorted answers, or the exit code and
/// standard error.
fn query(idx: &Path, windows: &Path) -> Result<Vec<Vec<u64>>, (Option<i32>, String)> {
    let out = geoflash(&[
        "query",
        "--index",
        s(idx),
        "--windows",
        s(windows),
        "--ids",
        "--json",
    ]);
    if !out.status.success() {
        return Err((
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(windows_ids(&last_json(&out)))
}

/// One index of the campaign.
struct Case {
    /// Its name (and directory).
    name: &'static str,
    /// `build` arguments besides input, index and page size.
    args: &'static [&'static str],
    /// Points (grid files) instead of rectangles.
    points: bool,
    /// Built from GeoJSON (an object heap).
    geojson: bool,
    /// After the build, an `insert` of more objects killed mid-way, so
    /// that the log holds changes readers replay.
    killed_insert: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "plain",
        args: &["--store", "plain", "--kind", "rtree", "--buffer", "64KiB"],
        points: false,
        geojson: false,
        killed_insert: true,
    },
    Case {
        name: "efind-sync",
        args: &[
            "--store",
            "efind",
            "--durability",
            "sync",
            "--log-capacity",
            "256KiB",
            "--buffer",
            "64KiB",
        ],
        points: false,
        geojson: false,
        killed_insert: true,
    },
    Case {
        name: "fast-str",
        args: &[
            "--store",
            "fast",
            "--bulk",
            "str",
            "--log-capacity",
            "256KiB",
        ],
        points: false,
        geojson: false,
        killed_insert: false,
    },
    Case {
        name: "fortree",
        args: &["--kind", "fortree", "--buffer", "64KiB"],
        points: false,
        geojson: false,
        killed_insert: false,
    },
    Case {
        name: "gffm",
        args: &["--kind", "gffm"],
        points: true,
        geojson: false,
        killed_insert: false,
    },
    Case {
        name: "hybrid-plain",
        args: &[
            "--store",
            "plain",
            "--device",
            "hybrid:fast=(file?direct=false)&slow=(file?direct=false)",
            "--placement",
            "internal-fast",
        ],
        points: false,
        geojson: false,
        killed_insert: false,
    },
    Case {
        name: "flashsim-efind",
        args: &["--store", "efind", "--device", "flashsim:"],
        points: false,
        geojson: false,
        killed_insert: false,
    },
    Case {
        name: "geojson-efind",
        args: &["--store", "efind", "--log-capacity", "256KiB"],
        points: false,
        geojson: true,
        killed_insert: false,
    },
];

/// Builds `case` in `dir`; returns the index and the objects it holds
/// (`1..=k`, checked against the oracle before any damage).
fn build(case: &Case, dir: &Path, windows: &Path) -> (std::path::PathBuf, u64) {
    let ext = if case.geojson { "geojson" } else { "csv" };
    let data = dir.join(format!("{}.{ext}", case.name));
    write_objects(&data, 1, N, case.points, case.geojson);
    let idx = dir.join(case.name);
    let mut args = vec![
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--page-size",
        "1024",
    ];
    if !case.args.contains(&"--device") {
        args.extend_from_slice(&["--device", "file?direct=false"]);
    }
    args.extend_from_slice(case.args);
    ok(geoflash(&args));
    let mut k = N;
    if case.killed_insert {
        let more = dir.join(format!("{}-more.csv", case.name));
        write_objects(&more, N + 1, 4 * N, case.points, false);
        let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
            .args(["insert", "--index", s(&idx), "--input", s(&more)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let _ = child.kill();
        child.wait().unwrap();
        // What readers see (the last checkpoint, or a prefix replayed
        // from the log): a prefix of the ids, then the oracle's answers.
        let all = query(&idx, windows).unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        k = all[0].len() as u64;
        assert_eq!(
            all[0],
            (1..=k).collect::<Vec<_>>(),
            "{}: not a prefix",
            case.name
        );
    }
    assert_eq!(
        query(&idx, windows).unwrap(),
        oracle(k, case.points),
        "{}: undamaged",
        case.name
    );
    (idx, k)
}

/// What the damage campaign counted.
#[derive(Default)]
struct Tally {
    files: u64,
    blocks: u64,
    exact: u64,
    refused: u64,
    /// Damage in a log read as a crash's torn tail (an earlier prefix).
    torn: u64,
}

/// Damages every `stride`-th block of every file of the index of `case`
/// and checks `query` and `verify` on each.
fn damage(case: &Case, dir: &Path, windows: &Path, stride: usize, tally: &mut Tally) {
    let (idx, k) = build(case, dir, windows);
    let want = oracle(k, case.points);
    let mut files: Vec<_> = std::fs::read_dir(&idx)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.file_name().unwrap() != "LOCK")
        .collect();
    files.sort();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let original = std::fs::read(&file).unwrap();
        let block = if name == "manifest.json" { 32 } else { BLOCK };
        let blocks = original.len().div_ceil(block);
        // Every block holding data; of a sparse file's zero blocks (the
        // unused room of a placement map or a log), 64 spread over them.
        let (data, zero): (Vec<usize>, Vec<usize>) = (0..blocks).partition(|&b| {
            original[b * block..((b + 1) * block).min(original.len())]
                .iter()
                .any(|&x| x != 0)
        });
        let mut picked = data;
        picked.extend(zero.iter().step_by((zero.len() / 64).max(1)));
        picked.sort_unstable();
        tally.files += 1;
        let handle = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        for &b in picked.iter().step_by(stride) {
            // An offset that moves from block to block, 4-byte aligned.
            let at = (b * block + (b * 44 + 4) % block) & !3;
            let at = at.min(original.len().saturating_sub(4));
            let end = (at + 4).min(original.len());
            let flipped: Vec<u8> = original[at..end].iter().map(|x| x ^ 0xa5).collect();
            handle.write_all_at(&flipped, at as u64).unwrap();
            let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
            let torn_before = tally.torn;
            // The objects the answers held (fewer for a torn log tail).
            let mut seen = k;
            let what = format!("{}: {name} byte {at} (block {b} of {blocks})", case.name);
            let refused = match query(&idx, windows) {
                Ok(got) if got != want && name == "log.dat" => {
                    // Not promised yet (docs/reliability.md): damage to the
                    // last pages of a log reads as a crash's torn tail,
                    // which ends it before the last operations. Counted
                    // apart, and only ever a prefix the oracle answers.
                    let k2 = got[0].len() as u64;
                    assert!(
                        k2 < k && got == oracle(k2, case.points),
                        "{what}: exit 0 with another answer"
                    );
                    tally.torn += 1;
                    seen = k2;
                    false
                }
                Ok(got) => {
                    assert!(got == want, "{what}: exit 0 with another answer");
                    false
                }
                Err((code, err)) => {
                    assert_eq!(code, Some(1), "{what}: query: {err}");
                    assert!(
                        err.contains(&name),
                        "{what}: query does not name {name}: {err}"
                    );
                    true
                }
            };
            let v = geoflash(&["verify", "--index", s(&idx)]);
            let err = String::from_utf8_lossy(&v.stderr);
            let stdout = String::from_utf8_lossy(&v.stdout);
            if v.status.success() {
                assert!(
                    stdout.contains(&format!("ok: {seen} records")),
                    "{what}: verify passed with another count: {stdout}"
                );
            } else {
                assert_eq!(v.status.code(), Some(1), "{what}: verify: {err}");
                assert!(
                    err.contains(&name),
                    "{what}: verify does not name {name}: {err}"
                );
            }
            tally.blocks += 1;
            if refused {
                tally.refused += 1;
            } else if tally.torn == torn_before {
                tally.exact += 1;
            }
            // Readers write nothing.
            assert_eq!(
                std::fs::metadata(&file).unwrap().modified().unwrap(),
                modified,
                "{what}: a reader wrote"
            );
            handle.write_all_at(&original[at..end], at as u64).unwrap();
        }
    }
    assert_eq!(
        query(&idx, windows).unwrap(),
        want,
        "{}: restored",
        case.name
    );
}

fn campaign(stride: usize) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let windows_csv = dir.path().join("windows.csv");
    let mut text = String::from("minx,miny,maxx,maxy\n");
    for w in windows() {
        text.push_str(&format!("{},{},{},{}\n", w[0], w[1], w[2], w[3]));
    }
    std::fs::write(&windows_csv, text).unwrap();
    let mut tally = Tally::default();
    for case in CASES {
        damage(case, dir.path(), &windows_csv, stride, &mut tally);
    }
    println!(
        "torture: damage: {} indexes, {} files, {} pages damaged (every {stride}th 512-byte block; the manifest every 32 bytes): {} answered exactly, {} refused with exit 1 naming the file, {} read as a torn log tail (an earlier prefix)",
        CASES.len(),
        tally.files,
        tally.blocks,
        tally.exact,
        tally.refused,
        tally.torn
    );
}

/// Every 16th block (`GEOFLASH_CLI_DAMAGE_STRIDE`), in `make test`.
#[test]
fn damage_to_pages_of_every_file_gives_the_exact_answer_or_exit_1_naming_it() {
    let stride = std::env::var("GEOFLASH_CLI_DAMAGE_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    campaign(stride);
}

/// Every block of every file (`make torture`).
#[test]
#[ignore = "the torture tier: make torture"]
fn damage_to_every_page_of_every_file_gives_the_exact_answer_or_exit_1_naming_it() {
    campaign(1);
}
