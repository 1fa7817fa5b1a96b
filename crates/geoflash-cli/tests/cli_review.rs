//! A review of the command line's contract as a demanding user meets it:
//! bad inputs to `insert`, `delete`, `update`, `query` and `knn` (exit 2,
//! the file and record named, no panic, the index unchanged); read-only
//! commands that change no byte of the index, even one a killed writer
//! left; query and kNN answers against a brute-force oracle after build,
//! insert, delete and update on every store; the `--json` records; Ctrl-C
//! during long changes (a prefix of the input that holds every
//! acknowledged operation); WKT geometries inserted into an index with an
//! object heap.
mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Standard error of `out`, after checking that it holds no panic.
fn stderr_of(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "a panic: {err}"
    );
    err
}

/// Runs `args`, which must fail with `code`, naming every one of `needles`.
fn fails(args: &[&str], code: i32, needles: &[&str]) -> String {
    let out = geoflash(args);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in: {err}");
    }
    err
}

/// Every file under `dir` with its bytes (compared whole).
fn files_of(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files_of(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

/// Asserts that `dir` holds exactly `before` (names and bytes).
fn unchanged(dir: &Path, before: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let now = files_of(dir);
    let names: Vec<&PathBuf> = now.keys().collect();
    let was: Vec<&PathBuf> = before.keys().collect();
    assert_eq!(names, was, "{what} added or removed files");
    for (p, bytes) in &now {
        assert!(bytes == &before[p], "{what} changed {}", p.display());
    }
}

/// A CSV `id,minx,miny,maxx,maxy` of `rows`.
fn write_boxes(path: &Path, rows: &[(u64, [f64; 4])]) {
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for (id, b) in rows {
        text.push_str(&format!("{id},{},{},{},{}\n", b[0], b[1], b[2], b[3]));
    }
    std::fs::write(path, text).unwrap();
}

fn build(input: &Path, idx: &Path, extra: &[&str]) {
    let mut args = vec![
        "build",
        "--input",
        s(input),
        "--index",
        s(idx),
        "--device",
        "file?direct=false",
        "--quiet",
    ];
    args.extend(extra);
    ok(geoflash(&args));
}

/// Every bad input file of `insert`, `delete` and `update` exits 2 naming
/// the file and its record, panics nowhere and leaves every byte of the
/// index as it was; ids already in the index, duplicated in the file or
/// unknown stop the command at that record with the records before it
/// applied (said in the message); k = 0, a negative k, reversed or
/// non-finite windows and points, a missing file and a directory that is
/// not an index are bad input too.
#[test]
fn bad_inputs_exit_2_naming_the_file_and_record_and_change_nothing() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let base = d.join("base.csv");
    write_boxes(
        &base,
        &[
            (1, [0.0, 0.0, 1.0, 1.0]),
            (2, [2.0, 2.0, 3.0, 3.0]),
            (3, [5.0, 5.0, 6.0, 6.0]),
        ],
    );
    let idx = d.join("idx");
    build(&base, &idx, &[]);
    let header = "id,minx,miny,maxx,maxy\n";
    // (file, contents, the record named: 0 for the header)
    let bad: Vec<(&str, String, u64)> = vec![
        ("empty.csv", String::new(), 0),
        ("few.csv", format!("{header}10,1,1\n"), 1),
        ("many.csv", format!("{header}10,1,1,2,2,3\n"), 1),
        ("text.csv", format!("{header}10,1,a,2,2\n"), 1),
        ("nan.csv", format!("{header}10,NaN,1,2,2\n"), 1),
        ("inf.csv", format!("{header}10,1,1,inf,2\n"), 1),
        ("huge.csv", format!("{header}10,-1e308,0,1e308,1\n"), 1),
        ("reversed.csv", format!("{header}10,5,5,1,1\n"), 1),
        ("negid.csv", format!("{header}-5,1,1,2,2\n"), 1),
        ("fracid.csv", format!("{header}1.5,1,1,2,2\n"), 1),
        (
            "bigid.csv",
            format!("{header}18446744073709551616,1,1,2,2\n"),
            1,
        ),
        (
            "late.csv",
            format!("{header}10,1,1,2,2\n11,1,1,2,2\n12,x,1,2,2\n"),
            3,
        ),
        ("noheader.csv", "10,1,1,2,2\n".into(), 0),
    ];
    let before = files_of(&idx);
    for (name, text, record) in &bad {
        let f = d.join(name);
        std::fs::write(&f, text).unwrap();
        for cmd in ["insert", "delete", "update"] {
            let err = fails(
                &["-q", cmd, "--index", s(&idx), "--input", s(&f)],
                2,
                &[name],
            );
            let named = match record {
                0 => err.contains("line 1") || err.contains("empty"),
                n => err.contains(&format!("record {n}")),
            };
            assert!(named, "{cmd} of {name}: record {record} not named: {err}");
            unchanged(&idx, &before, &format!("{cmd} of {name}"));
        }
    }
    // A missing input and a directory that is not an index.
    let nope = d.join("nope.csv");
    let not_index = d.join("not-index");
    std::fs::create_dir(&not_index).unwrap();
    for cmd in ["insert", "delete", "update"] {
        fails(
            &[cmd, "--index", s(&idx), "--input", s(&nope)],
            2,
            &["nope.csv"],
        );
        fails(
            &[cmd, "--index", s(&not_index), "--input", s(&base)],
            2,
            &["not-index", "not an index"],
        );
    }
    unchanged(&idx, &before, "a missing input");
    for args in [
        vec!["query", "--window", "0,0,1,1"],
        vec!["knn", "--point", "0,0"],
        vec!["inspect"],
        vec!["verify"],
        vec!["checkpoint"],
        vec!["recover"],
    ] {
        let mut a = args.clone();
        a.extend(["--index", s(&not_index)]);
        fails(&a, 2, &["not-index"]);
    }
    // Query and kNN arguments.
    let q = |extra: &[&str]| {
        let mut a = vec!["query", "--index", s(&idx)];
        a.extend(extra);
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()
    };
    let k = |extra: &[&str]| {
        let mut a = vec!["knn", "--index", s(&idx)];
        a.extend(extra);
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()
    };
    let wfile = d.join("w.csv");
    std::fs::write(&wfile, "minx,miny,maxx,maxy\n0,0,1,1\n3,3,1,1\n").unwrap();
    let pfile = d.join("p.csv");
    std::fs::write(&pfile, "x,y\n0,0\n1,nan\n").unwrap();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (q(&["--window", "5,5,1,1"]), vec!["inverted"]),
        (q(&["--window", "nan,0,1,1"]), vec!["NaN"]),
        (q(&["--window", "0,0,1"]), vec!["window"]),
        (
            q(&["--window", "0,0,1,1", "--predicate", "overlaps"]),
            vec!["overlaps"],
        ),
        (q(&["--windows", s(&wfile)]), vec!["w.csv", "window 2"]),
        (q(&["--windows", s(&nope)]), vec!["nope.csv"]),
        (q(&[]), vec!["--window"]),
        (k(&["--point", "0,0", "--k", "0"]), vec!["--k"]),
        (k(&["--point", "0,0", "--k", "-1"]), vec!["-1"]),
        (
            k(&["--point", "0,0", "--k", "99999999999999999999"]),
            vec!["--k"],
        ),
        (k(&["--point", "inf,0"]), vec!["inf"]),
        (k(&["--point", "0,0,0"]), vec!["point"]),
        (k(&["--points", s(&pfile)]), vec!["p.csv", "point 2"]),
    ];
    for (args, needles) in &cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        fails(&a, 2, needles);
    }
    // A k larger than any count answers every object.
    let out = last_json(&ok(geoflash(
        &k(&["--point", "0,0", "--k", "18446744073709551615", "--json"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    )));
    assert_eq!(out["neighbors"].as_array().unwrap().len(), 3);
    unchanged(&idx, &before, "bad queries");

    // Rows with blanks around fields and CRLF line ends are read.
    let crlf = d.join("crlf.csv");
    std::fs::write(
        &crlf,
        "id,minx,miny,maxx,maxy\r\n10, 1 , 1 ,2 , 2\r\n11,-0.0,-0.0,0,0\r\n",
    )
    .unwrap();
    change("insert", &idx, &crlf);
    assert_eq!(window_ids(&idx, "1.5,1.5,1.5,1.5"), vec![10]);
    assert_eq!(window_ids(&idx, "0,0,0,0"), vec![1, 11]);
    assert_eq!(all_ids(&idx), vec![1, 2, 3, 10, 11]);

    // Ids: one already in the index, one twice in the file, unknown ones.
    let rows = |name: &str, rows: &[(u64, [f64; 4])]| {
        let p = d.join(name);
        write_boxes(&p, rows);
        p
    };
    let dup_in_index = rows(
        "dup-index.csv",
        &[(20, [7.0, 7.0, 8.0, 8.0]), (2, [9.0, 9.0, 9.0, 9.0])],
    );
    let err = fails(
        &[
            "-q",
            "insert",
            "--index",
            s(&idx),
            "--input",
            s(&dup_in_index),
        ],
        2,
        &[
            "dup-index.csv",
            "object 2",
            "record 2",
            "the 1 records before it",
        ],
    );
    assert!(err.contains("already"), "{err}");
    assert_eq!(all_ids(&idx), vec![1, 2, 3, 10, 11, 20]);
    let dup_in_file = rows(
        "dup-file.csv",
        &[(21, [7.0, 7.0, 8.0, 8.0]), (21, [9.0, 9.0, 9.0, 9.0])],
    );
    fails(
        &[
            "-q",
            "insert",
            "--index",
            s(&idx),
            "--input",
            s(&dup_in_file),
        ],
        2,
        &["dup-file.csv", "object 21", "record 2"],
    );
    assert_eq!(all_ids(&idx), vec![1, 2, 3, 10, 11, 20, 21]);
    // A delete of an unknown id, or of a known id with another rectangle.
    let unknown = rows(
        "unknown.csv",
        &[(21, [7.0, 7.0, 8.0, 8.0]), (99, [7.0, 7.0, 8.0, 8.0])],
    );
    fails(
        &["-q", "delete", "--index", s(&idx), "--input", s(&unknown)],
        2,
        &["unknown.csv", "object 99", "record 2", "not in the index"],
    );
    assert_eq!(all_ids(&idx), vec![1, 2, 3, 10, 11, 20]);
    let wrong_box = rows("wrong-box.csv", &[(20, [0.0, 0.0, 8.0, 8.0])]);
    fails(
        &["-q", "delete", "--index", s(&idx), "--input", s(&wrong_box)],
        2,
        &["wrong-box.csv", "object 20", "record 1"],
    );
    let moves = rows(
        "moves.csv",
        &[(20, [30.0, 30.0, 31.0, 31.0]), (77, [1.0, 1.0, 2.0, 2.0])],
    );
    fails(
        &["-q", "update", "--index", s(&idx), "--input", s(&moves)],
        2,
        &["moves.csv", "object 77", "record 2", "not in the index"],
    );
    assert_eq!(window_ids(&idx, "29,29,32,32"), vec![20]);
    assert_eq!(all_ids(&idx), vec![1, 2, 3, 10, 11, 20]);
    ok(geoflash(&["verify", "--index", s(&idx)]));
}

/// Objects with small integer coordinates (many ties of distance, shared
/// edges, points, duplicate boxes under different ids).
fn grid_boxes(first: u64, n: u64, seed: u64) -> Vec<(u64, [f64; 4])> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    (first..first + n)
        .map(|id| {
            let (a, b) = (next(40) as f64, next(40) as f64);
            // a quarter points, the rest boxes of sides 0 to 3
            let (w, h) = if next(4) == 0 {
                (0.0, 0.0)
            } else {
                (next(4) as f64, next(4) as f64)
            };
            (id, [a, b, a + w, b + h])
        })
        .collect()
}

/// The ids of `objects` a window `w` selects with `predicate` (MBRs,
/// boundaries included).
fn oracle_query(objects: &BTreeMap<u64, [f64; 4]>, w: [f64; 4], predicate: &str) -> Vec<u64> {
    objects
        .iter()
        .filter(|(_, b)| match predicate {
            "intersects" => b[0] <= w[2] && w[0] <= b[2] && b[1] <= w[3] && w[1] <= b[3],
            "contains" => w[0] <= b[0] && b[2] <= w[2] && w[1] <= b[1] && b[3] <= w[3],
            _ => b[0] <= w[0] && w[2] <= b[2] && b[1] <= w[1] && w[3] <= b[3],
        })
        .map(|(id, _)| *id)
        .collect()
}

/// The distance from `(px, py)` to box `b` (0 inside).
fn distance(b: &[f64; 4], px: f64, py: f64) -> f64 {
    let dx = (b[0] - px).max(0.0).max(px - b[2]);
    let dy = (b[1] - py).max(0.0).max(py - b[3]);
    (dx * dx + dy * dy).sqrt()
}

/// Checks one kNN answer `(id, distance)` of point `p` against the oracle.
fn check_knn(
    objects: &BTreeMap<u64, [f64; 4]>,
    p: (f64, f64),
    k: usize,
    ties: bool,
    found: &[(u64, f64)],
    what: &str,
) {
    let mut all: Vec<f64> = objects.values().map(|b| distance(b, p.0, p.1)).collect();
    all.sort_by(f64::total_cmp);
    let want = k.min(all.len());
    let eps = 1e-9;
    let ids: BTreeSet<u64> = found.iter().map(|f| f.0).collect();
    assert_eq!(ids.len(), found.len(), "{what}: an id twice: {found:?}");
    for (id, d) in found {
        let b = objects
            .get(id)
            .unwrap_or_else(|| panic!("{what}: {id} is not in the index"));
        assert!(
            (distance(b, p.0, p.1) - d).abs() < eps,
            "{what}: {id} at {d}, not {}",
            distance(b, p.0, p.1)
        );
    }
    assert!(
        found.windows(2).all(|w| w[0].1 <= w[1].1 + eps),
        "{what}: not in order of distance: {found:?}"
    );
    if want == 0 {
        assert!(found.is_empty());
        return;
    }
    let kth = all[want - 1];
    if ties {
        let expect: BTreeSet<u64> = objects
            .iter()
            .filter(|(_, b)| distance(b, p.0, p.1) <= kth + eps)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids, expect, "{what}: with --ties");
    } else {
        assert_eq!(found.len(), want, "{what}: {found:?}");
        for (got, exp) in found.iter().zip(&all) {
            assert!(
                (got.1 - exp).abs() < eps,
                "{what}: {found:?} against {all:?}"
            );
        }
    }
}

/// `(id, distance)` pairs of a JSON `neighbors` array.
fn neighbors(v: &serde_json::Value) -> Vec<(u64, f64)> {
    v.as_array()
        .expect("a `neighbors` array")
        .iter()
        .map(|n| (n["id"].as_u64().unwrap(), n["distance"].as_f64().unwrap()))
        .collect()
}

/// Checks every predicate and kNN of the index `idx` against `objects`.
fn check_answers(d: &Path, idx: &Path, objects: &BTreeMap<u64, [f64; 4]>, what: &str) {
    let mut windows: Vec<[f64; 4]> = vec![
        [-100.0, -100.0, 100.0, 100.0],
        [0.0, 0.0, 0.0, 0.0],
        [10.0, 10.0, 10.0, 10.0],
        [5.0, 0.0, 5.0, 45.0],
        [-3.0, -3.0, -1.0, -1.0],
        [20.0, 20.0, 21.0, 21.0],
    ];
    for i in 0..30u64 {
        let a = (i * 7 % 40) as f64;
        let b = (i * 13 % 40) as f64;
        windows.push([a, b, a + (i % 9) as f64, b + (i % 5) as f64]);
    }
    let wf = d.join("windows.csv");
    let mut text = String::from("minx,miny,maxx,maxy\n");
    for w in &windows {
        text.push_str(&format!("{},{},{},{}\n", w[0], w[1], w[2], w[3]));
    }
    std::fs::write(&wf, text).unwrap();
    for predicate in ["intersects", "contains", "within"] {
        for reads in ["batched", "single"] {
            let out = last_json(&ok(geoflash(&[
                "query",
                "--index",
                s(idx),
                "--windows",
                s(&wf),
                "--predicate",
                predicate,
                "--reads",
                reads,
                "--ids",
                "--json",
            ])));
            let found = windows_ids(&out);
            for (i, w) in windows.iter().enumerate() {
                let expect = oracle_query(objects, *w, predicate);
                assert_eq!(
                    found[i], expect,
                    "{what}: {predicate} {w:?} ({reads} reads)"
                );
                assert_eq!(out["windows"][i]["count"], expect.len());
            }
        }
    }
    let points: Vec<(f64, f64)> = (0..12u64)
        .map(|i| ((i * 11 % 44) as f64 - 2.0, (i * 5 % 44) as f64 / 2.0))
        .chain([(20.5, 20.5), (-50.0, 3.0)])
        .collect();
    let pf = d.join("points.csv");
    let mut text = String::from("x,y\n");
    for p in &points {
        text.push_str(&format!("{},{}\n", p.0, p.1));
    }
    std::fs::write(&pf, text).unwrap();
    for k in [1usize, 3, 10, objects.len() + 5] {
        for ties in [false, true] {
            let ks = k.to_string();
            let mut args = vec![
                "knn",
                "--index",
                s(idx),
                "--points",
                s(&pf),
                "--k",
                &ks,
                "--json",
            ];
            if ties {
                args.push("--ties");
            }
            let out = last_json(&ok(geoflash(&args)));
            for (i, p) in points.iter().enumerate() {
                let found = neighbors(&out["points"][i]["neighbors"]);
                check_knn(
                    objects,
                    *p,
                    k,
                    ties,
                    &found,
                    &format!("{what}: knn {p:?} k={k}"),
                );
            }
            // One point alone: the same answer.
            let pt = format!("{},{}", points[0].0, points[0].1);
            let mut args = vec![
                "knn",
                "--index",
                s(idx),
                "--point",
                &pt,
                "--k",
                &ks,
                "--json",
            ];
            if ties {
                args.push("--ties");
            }
            let one = neighbors(&last_json(&ok(geoflash(&args)))["neighbors"]);
            check_knn(
                objects,
                points[0],
                k,
                ties,
                &one,
                &format!("{what}: knn --point"),
            );
        }
    }
}

/// Query (every predicate, both read modes) and kNN (with and without
/// ties, k beyond the count) answers agree with a brute-force oracle after
/// a build, an insert, a delete and an update, on the default store, the
/// plain store and FAST, on a small page size (trees of several levels).
#[test]
fn answers_agree_with_brute_force_after_build_insert_delete_update_on_every_store() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let first = grid_boxes(1, 400, 7);
    let second = grid_boxes(401, 250, 8);
    // duplicates of boxes of the first part under new ids
    let dups: Vec<(u64, [f64; 4])> = first[..30]
        .iter()
        .enumerate()
        .map(|(i, (_, b))| (1000 + i as u64, *b))
        .collect();
    let gone: Vec<(u64, [f64; 4])> = first
        .iter()
        .chain(&second)
        .filter(|(id, _)| id % 5 == 0)
        .copied()
        .collect();
    let moves: Vec<(u64, [f64; 4])> = grid_boxes(0, 200, 9)
        .into_iter()
        .map(|(i, b)| {
            // ids still in the index after the delete (never a multiple of 5)
            let id = 1 + (i * 37 % 649);
            let id = if id % 5 == 0 { id + 1 } else { id };
            (id, b)
        })
        .collect();
    let (f1, f2, f3, f4, f5) = (
        d.join("first.csv"),
        d.join("second.csv"),
        d.join("dups.csv"),
        d.join("gone.csv"),
        d.join("moves.csv"),
    );
    write_boxes(&f1, &first);
    write_boxes(&f2, &second);
    write_boxes(&f3, &dups);
    write_boxes(&f4, &gone);
    write_boxes(&f5, &moves);
    let objects: BTreeMap<u64, [f64; 4]> = first.iter().copied().collect();
    let stores: [&[&str]; 3] = [&[], &["--store", "plain"], &["--store", "fast"]];
    for (n, store) in stores.iter().enumerate() {
        let idx = d.join(format!("idx{n}"));
        let mut extra = vec!["--page-size", "512"];
        extra.extend(store.iter());
        build(&f1, &idx, &extra);
        let mut objects = objects.clone();
        check_answers(d, &idx, &objects, &format!("{store:?} after build"));
        for f in [&f2, &f3] {
            change("insert", &idx, f);
        }
        objects.extend(second.iter().chain(&dups).copied());
        change("delete", &idx, &f4);
        for (id, _) in &gone {
            objects.remove(id);
        }
        check_answers(d, &idx, &objects, &format!("{store:?} after delete"));
        let stats = last_json(&ok(geoflash(&[
            "-q",
            "update",
            "--index",
            s(&idx),
            "--input",
            s(&f5),
            "--json",
        ])));
        assert_eq!(stats["operations"], moves.len());
        objects.extend(moves.iter().copied());
        check_answers(d, &idx, &objects, &format!("{store:?} after update"));
        ok(geoflash(&["verify", "--index", s(&idx)]));
    }
}

/// Starts `geoflash args` with standard output and error piped; returns the
/// child and a receiver of its standard output's lines, and a thread
/// collecting its standard error.
fn spawn(
    args: &[&str],
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<String>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    (child, rx, err)
}

/// The read-only commands run on `idx` (with and without `--json`).
fn read_commands(idx: &Path, points: &Path) -> Vec<Vec<String>> {
    let i = s(idx).to_string();
    let mut v: Vec<Vec<&str>> = vec![
        vec!["query", "--window", "-1,-1,2,2", "--ids"],
        vec![
            "query",
            "--window",
            "0.2,0.2,0.4,0.4",
            "--predicate",
            "contains",
        ],
        vec![
            "query",
            "--window",
            "0.3,0.3,0.3,0.3",
            "--predicate",
            "within",
            "--reads",
            "single",
        ],
        vec!["knn", "--point", "0.5,0.5", "--k", "7", "--ties"],
        vec!["knn", "--points", s(points), "--k", "3"],
        vec!["inspect"],
        vec!["verify"],
    ];
    let with_json: Vec<Vec<&str>> = v
        .iter()
        .map(|a| {
            let mut a = a.clone();
            a.push("--json");
            a
        })
        .collect();
    v.extend(with_json);
    v.into_iter()
        .map(|a| {
            let mut a: Vec<String> = a.iter().map(|x| x.to_string()).collect();
            a.extend(["--index".to_string(), i.clone()]);
            a
        })
        .collect()
}

/// `query`, `knn`, `inspect` and `verify` change no byte and no file of an
/// index directory: a clean one, and one whose `update --ack-every` was
/// killed (SIGKILL) after its first acknowledgement, on every store (the
/// readers see the last durable state without a writer's recovery). The
/// answers of the killed index hold every acknowledged update.
#[test]
fn read_only_commands_change_no_byte_even_of_an_index_a_killed_writer_left() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let seed = d.join("seed.csv");
    let rows: Vec<(u64, [f64; 4])> = (0..1000u64)
        .map(|i| {
            let x = (i * 7919 % 1000) as f64 / 1000.0;
            let y = (i * 104_729 % 997) as f64 / 1000.0;
            (i, [x, y, x + 0.001, y + 0.001])
        })
        .collect();
    write_boxes(&seed, &rows);
    // Every move puts its object in the row y = 10 (+ its op number in x):
    // those acknowledged are found there after the kill.
    let n = 30_000u64;
    let moves: Vec<(u64, [f64; 4])> = (0..n)
        .map(|i| (i % 1000, [i as f64, 10.0, i as f64 + 0.5, 10.5]))
        .collect();
    let mf = d.join("moves.csv");
    write_boxes(&mf, &moves);
    let points = d.join("p.csv");
    std::fs::write(&points, "x,y\n0.1,0.1\n0.9,0.5\n").unwrap();
    for store in ["efind", "plain", "fast"] {
        let idx = d.join(store);
        // FAST's log is sized for its buffer and kept sparse: 4.3 GB at the
        // default 256 MiB, which every comparison of the directory's bytes
        // reads whole (20 s of this test); 4 MiB gives a log of 72 MB.
        let buffer: &[&str] = if store == "fast" {
            &["--buffer", "4MiB"]
        } else {
            &[]
        };
        build(&seed, &idx, &[&["--store", store], buffer].concat());
        let before = files_of(&idx);
        for args in read_commands(&idx, &points) {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ok(geoflash(&a));
            stderr_of(&out);
            if a.contains(&"--json") {
                last_json(&out);
            }
        }
        unchanged(
            &idx,
            &before,
            &format!("read-only commands on a clean {store} index"),
        );

        let (mut child, acks, err) = spawn(&[
            "update",
            "--index",
            s(&idx),
            "--input",
            s(&mf),
            "--ack-every",
            "100",
        ]);
        let Ok(first) = acks.recv_timeout(std::time::Duration::from_secs(120)) else {
            let _ = child.kill();
            panic!("{store}: no acknowledgement: {}", err.join().unwrap());
        };
        child.kill().unwrap(); // SIGKILL (a no-op if it finished)
        let status = child.wait().unwrap();
        let mut acked: u64 = first.strip_prefix("acked ").unwrap().parse().unwrap();
        for line in acks.iter() {
            if let Some(k) = line.strip_prefix("acked ") {
                acked = k.parse().unwrap();
            }
        }
        stderr_of(&Output {
            status,
            stdout: Vec::new(),
            stderr: err.join().unwrap().into_bytes(),
        });
        let before = files_of(&idx);
        for args in read_commands(&idx, &points) {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ok(geoflash(&a));
            stderr_of(&out);
        }
        unchanged(
            &idx,
            &before,
            &format!("read-only commands on a killed {store} index"),
        );
        // Every acknowledged move is there (the moves of the first `acked`
        // operations, the latest of each object).
        let moved = window_ids(&idx, &format!("-1,9,{},11", n + 1));
        let expect: BTreeSet<u64> = (0..acked).map(|i| i % 1000).collect();
        let got: BTreeSet<u64> = moved.into_iter().collect();
        assert!(
            got.is_superset(&expect),
            "{store}: acked {acked}, moved only {} objects",
            got.len()
        );
        unchanged(&idx, &before, &format!("a query of a killed {store} index"));
        ok(geoflash(&["-q", "recover", "--index", s(&idx)]));
        ok(geoflash(&["verify", "--index", s(&idx)]));
    }
}

/// Runs `geoflash args`, sends it SIGINT at its first progress line on
/// standard error (`…: N% (…)`, about a tenth of the work done), and
/// returns its exit code, standard output's lines and standard error.
fn interrupted(args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let out = interrupted_at_first_progress(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    (out.status.code(), lines, err)
}

/// K of "interrupted: K of the N records of FILE were …" in `err`.
fn applied_count(err: &str, total: u64) -> u64 {
    assert!(
        err.contains(&format!("of the {total} records")) && err.contains("durable"),
        "{err}"
    );
    err.split("interrupted: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no count in: {err}"))
}

/// Ctrl-C during an `insert`, a `delete` and an `update --ack-every` of
/// 300,000 rows: exit code 130, a message saying how many records were
/// applied; the index verifies and holds exactly that prefix of the file's
/// operations, which includes every one acknowledged (`acked K`).
#[test]
fn ctrl_c_during_long_changes_leaves_exactly_the_prefix_it_reports() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let n = 300_000u64;
    // Objects 0..1000 in the unit square; the insert brings 300,000 more.
    let seed: Vec<(u64, [f64; 4])> = (0..1000u64)
        .map(|i| {
            let x = (i * 7919 % 1000) as f64 / 1000.0;
            let y = (i * 104_729 % 997) as f64 / 1000.0;
            (i, [x, y, x + 0.001, y + 0.001])
        })
        .collect();
    let more: Vec<(u64, [f64; 4])> = (0..n)
        .map(|i| {
            let x = (i * 7919 % 100_003) as f64 / 100.0;
            (10_000 + i, [x, 2.0, x + 0.01, 2.01])
        })
        .collect();
    let (seed_f, more_f) = (d.join("seed.csv"), d.join("more.csv"));
    write_boxes(&seed_f, &seed);
    write_boxes(&more_f, &more);
    let seed_ids: Vec<u64> = (0..1000).collect();
    let ids_of = |idx: &Path| window_ids(idx, "-1,-1,2000,2000");

    // Insert into the default store.
    let idx = d.join("ins");
    build(&seed_f, &idx, &[]);
    let (code, _, err) = interrupted(&["insert", "--index", s(&idx), "--input", s(&more_f)]);
    assert_eq!(code, Some(130), "{err}");
    let k = applied_count(&err, n);
    assert!(k < n, "{err}");
    let mut expect = seed_ids.clone();
    expect.extend((0..k).map(|i| 10_000 + i));
    assert_eq!(ids_of(&idx), expect, "{err}");
    ok(geoflash(&["verify", "--index", s(&idx)]));

    // Delete from the plain store.
    let idx = d.join("del");
    build(&seed_f, &idx, &["--store", "plain"]);
    change("insert", &idx, &more_f);
    let (code, _, err) = interrupted(&["delete", "--index", s(&idx), "--input", s(&more_f)]);
    assert_eq!(code, Some(130), "{err}");
    let k = applied_count(&err, n);
    assert!(k < n, "{err}");
    let mut expect = seed_ids.clone();
    expect.extend((k..n).map(|i| 10_000 + i));
    assert_eq!(ids_of(&idx), expect, "{err}");
    ok(geoflash(&["verify", "--index", s(&idx)]));

    // Update with acknowledgements, on each store: move i puts object
    // i % 1000 at x = i in the row y = 10, so where each object is tells
    // the last move applied to it.
    let moves: Vec<(u64, [f64; 4])> = (0..n)
        .map(|i| (i % 1000, [i as f64, 10.0, i as f64 + 0.5, 10.5]))
        .collect();
    let moves_f = d.join("moves.csv");
    write_boxes(&moves_f, &moves);
    // Windows of 1,000 moves each, in order.
    let wf = d.join("rows.csv");
    let mut text = String::from("minx,miny,maxx,maxy\n");
    for b in 0..n / 1000 {
        let x = (b * 1000) as f64;
        text.push_str(&format!("{x},9,{},11\n", x + 999.75));
    }
    std::fs::write(&wf, text).unwrap();
    for store in ["efind", "plain", "fast"] {
        let idx = d.join(format!("upd-{store}"));
        build(&seed_f, &idx, &["--store", store]);
        let (code, out, err) = interrupted(&[
            "update",
            "--index",
            s(&idx),
            "--input",
            s(&moves_f),
            "--ack-every",
            "1000",
        ]);
        assert_eq!(code, Some(130), "{store}: {err}");
        let k = applied_count(&err, n);
        assert!(k < n, "{store}: {err}");
        let acked = out
            .iter()
            .filter_map(|l| l.strip_prefix("acked "))
            .map(|a| a.parse::<u64>().unwrap())
            .max()
            .unwrap_or(0);
        assert!(acked <= k, "{store}: acked {acked} but applied {k}: {err}");
        ok(geoflash(&["verify", "--index", s(&idx)]));
        // The last move of each object, from the windows its box is in.
        let found = windows_ids(&last_json(&ok(geoflash(&[
            "query",
            "--index",
            s(&idx),
            "--windows",
            s(&wf),
            "--ids",
            "--json",
        ]))));
        let mut last: BTreeMap<u64, u64> = BTreeMap::new();
        for (b, ids) in found.iter().enumerate() {
            for id in ids {
                let op = b as u64 * 1000 + id;
                assert!(last.insert(*id, op).is_none(), "{store}: {id} twice");
            }
        }
        let expect: BTreeMap<u64, u64> =
            (k.saturating_sub(1000)..k).map(|i| (i % 1000, i)).collect();
        assert_eq!(last, expect, "{store}: not the prefix of {k} moves: {err}");
        // The objects not moved yet are where they were.
        let unmoved = window_ids(&idx, "-1,-1,2,2");
        let expect: Vec<u64> = (0..1000u64).filter(|i| *i >= k).collect();
        assert_eq!(unmoved, expect, "{store}");
    }
}

/// A CSV of WKT geometries inserted into an index with an object heap
/// (built from GeoJSON) stores its geometries, as a GeoJSON file's are:
/// `query --refine` answers on the triangle, not on its box. Before the
/// fix the geometries were dropped and the box stood for the triangle.
#[test]
fn wkt_rows_inserted_into_an_index_with_an_object_heap_keep_their_geometry() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let gj = d.join("g.geojson");
    std::fs::write(
        &gj,
        r#"{"type":"FeatureCollection","features":[
{"type":"Feature","id":1,"properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[2,0],[0,2],[0,0]]]}},
{"type":"Feature","id":2,"properties":{},"geometry":{"type":"Point","coordinates":[5,5]}}]}"#,
    )
    .unwrap();
    let idx = d.join("idx");
    build(&gj, &idx, &[]);
    let wkt = d.join("more.csv");
    std::fs::write(
        &wkt,
        "id,wkt\n5,\"POLYGON ((10 10, 12 10, 10 12, 10 10))\"\n6,\"POINT (20 20)\"\n",
    )
    .unwrap();
    change("insert", &idx, &wkt);
    let refined = |w: &str| refined_ids(&idx, w);
    // The empty corner of each triangle's box.
    assert_eq!(refined("1.5,1.5,2,2"), Vec::<u64>::new());
    assert_eq!(refined("11.5,11.5,12,12"), Vec::<u64>::new());
    assert_eq!(refined("10.2,10.2,10.5,10.5"), vec![5]);
    assert_eq!(refined("-1,-1,30,30"), vec![1, 2, 5, 6]);
    let inspect = last_json(&ok(geoflash(&["inspect", "--index", s(&idx), "--json"])));
    assert_eq!(inspect["objects"]["objects"], 4, "{inspect}");
    // A delete by the same WKT rows takes them out of the tree and the heap.
    change("delete", &idx, &wkt);
    assert_eq!(refined("-1,-1,30,30"), vec![1, 2]);
    let inspect = last_json(&ok(geoflash(&["inspect", "--index", s(&idx), "--json"])));
    assert_eq!(inspect["objects"]["objects"], 2, "{inspect}");
    ok(geoflash(&["verify", "--index", s(&idx)]));
}

/// `geoflash -q CMD --index IDX --input INPUT`, which must succeed.
fn change(cmd: &str, idx: &Path, input: &Path) {
    ok(geoflash(&[
        "-q",
        cmd,
        "--index",
        s(idx),
        "--input",
        s(input),
    ]));
}

/// The ids `query --refine` gives for window `w` (`MINX,MINY,MAXX,MAXY`).
fn refined_ids(idx: &Path, w: &str) -> Vec<u64> {
    let out = last_json(&ok(geoflash(&[
        "query",
        "--index",
        s(idx),
        "--window",
        w,
        "--refine",
        "--ids",
        "--json",
    ])));
    windows_ids(&out).swap_remove(0)
}

/// `build` from a CSV with a `wkt` column stores the geometries in the
/// object heap, as from GeoJSON (it kept only their boxes, so `query
/// --refine` was refused, "build it from a file with geometries"), and
/// `--ack-every` acknowledges a build from geometries as it does one from
/// boxes (it was ignored: no `acked` line, nothing said).
#[test]
fn builds_from_geometries_keep_them_and_acknowledge_with_ack_every() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let wkt = d.join("w.csv");
    let mut text = String::from("id,wkt\n1,\"POLYGON ((0 0, 2 0, 0 2, 0 0))\"\n");
    for i in 2..=3000u64 {
        text.push_str(&format!(
            "{i},\"POINT ({} {})\"\n",
            100 + i % 50,
            100 + i / 50
        ));
    }
    std::fs::write(&wkt, text).unwrap();
    let gj = d.join("g.geojson");
    ok(geoflash(&[
        "-q",
        "import",
        "--input",
        s(&wkt),
        "--out",
        s(&gj),
    ]));
    let no_acks: &[&str] = &[];
    let acks: &[&str] = &["--ack-every", "100"];
    for (name, input, extra) in [
        ("wkt", &wkt, no_acks),
        ("wkt-acked", &wkt, acks),
        ("geojson-acked", &gj, acks),
    ] {
        let idx = d.join(name);
        let out = ok(geoflash(
            &[&["build", "--input", s(input), "--index", s(&idx)], extra].concat(),
        ));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let acked: Vec<u64> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("acked "))
            .map(|n| n.trim().parse().unwrap())
            .collect();
        match extra.is_empty() {
            true => assert!(acked.is_empty(), "{stdout}"),
            false => {
                assert_eq!(acked.last(), Some(&3000), "{stdout}");
                assert!(acked.windows(2).all(|w| w[0] < w[1]), "{stdout}");
            }
        }
        let refined = |w: &str| refined_ids(&idx, w);
        // The empty corner of the triangle's box, then the triangle itself.
        assert_eq!(refined("1.5,1.5,2,2"), Vec::<u64>::new(), "{name}");
        assert_eq!(refined("0.2,0.2,0.5,0.5"), vec![1], "{name}");
        let inspect = last_json(&ok(geoflash(&["inspect", "--index", s(&idx), "--json"])));
        assert_eq!(inspect["objects"]["objects"], 3000, "{name}: {inspect}");
        ok(geoflash(&["verify", "--index", s(&idx)]));
    }
}

/// Every `--json` record of the index commands is the last line of
/// standard output, parses, and holds the fields scripts read.
#[test]
fn json_records_parse_and_hold_their_fields() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let data = d.join("d.csv");
    let gen = last_json(&ok(geoflash(&[
        "-q",
        "generate",
        "--distribution",
        "uniform",
        "--geometry",
        "box",
        "--count",
        "500",
        "--out",
        s(&data),
        "--json",
    ])));
    assert_eq!(gen["count"], 500);
    assert_eq!(gen["out"], s(&data));
    let idx = d.join("idx");
    let built = last_json(&ok(geoflash(&[
        "-q",
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
        "--json",
    ])));
    assert_eq!(built["operations"], 500);
    let more = d.join("more.csv");
    write_boxes(
        &more,
        &[(1000, [0.1, 0.1, 0.2, 0.2]), (1001, [0.3, 0.3, 0.3, 0.3])],
    );
    for cmd in ["insert", "update", "delete"] {
        let rec = last_json(&ok(geoflash(&[
            "-q",
            cmd,
            "--index",
            s(&idx),
            "--input",
            s(&more),
            "--json",
        ])));
        assert_eq!(rec["operations"], 2, "{cmd}: {rec}");
        assert!(rec["wall_time_ns"].is_u64(), "{cmd}: {rec}");
        assert!(rec["peak_rss_bytes"].is_u64(), "{cmd}: {rec}");
        if cmd == "update" {
            assert!(rec["updates_in_place"].is_u64(), "{rec}");
        }
    }
    let q = last_json(&ok(geoflash(&[
        "query",
        "--index",
        s(&idx),
        "--window",
        "0,0,1,1",
        "--ids",
        "--json",
    ])));
    assert_eq!(q["windows"][0]["count"], 500);
    assert_eq!(q["windows"][0]["ids"].as_array().unwrap().len(), 500);
    assert_eq!(q["stats"]["query_results"], 500, "{q}");
    let q = last_json(&ok(geoflash(&[
        "query",
        "--index",
        s(&idx),
        "--window",
        "0,0,1,1",
        "--json",
    ])));
    assert!(q["windows"][0].get("ids").is_none());
    let k = last_json(&ok(geoflash(&[
        "knn",
        "--index",
        s(&idx),
        "--point",
        "0.5,0.5",
        "--k",
        "4",
        "--json",
    ])));
    assert_eq!(neighbors(&k["neighbors"]).len(), 4);
    assert!(k["units"].is_string() && k["stats"].is_object(), "{k}");
    let i = last_json(&ok(geoflash(&["inspect", "--index", s(&idx), "--json"])));
    assert_eq!(i["tree"]["records"], 500, "{i}");
    assert!(i["manifest"].is_object(), "{i}");
    let v = last_json(&ok(geoflash(&["verify", "--index", s(&idx), "--json"])));
    assert_eq!(v["ok"], true);
    let c = last_json(&ok(geoflash(&["checkpoint", "--index", s(&idx), "--json"])));
    assert_eq!(c["ok"], true);
    let r = last_json(&ok(geoflash(&[
        "-q",
        "recover",
        "--index",
        s(&idx),
        "--json",
    ])));
    assert_eq!(r["recovered"], false, "{r}");
}
