//! Errors of the command line: exit code 2 for bad input and 1 for a
//! failure, in every command, with a message naming the offending file,
//! flag, page or record; and a failed `build` leaves no directory behind.
use std::path::Path;
use std::process::Output;

mod common;
use common::{geoflash, ok, s};

/// Standard error of `out`.
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `args` exit with `code` and a message holding every `needle`.
fn fails(args: &[&str], code: i32, needles: &[&str]) {
    let out = geoflash(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: {n:?} not in {err}");
    }
}

/// `n` small boxes, ids 1..=n, as CSV.
fn write_rects(path: &Path, n: u64) {
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for i in 1..=n {
        let x = (i * 7919 % 1000) as f64;
        let y = (i * 104_729 % 997) as f64;
        text.push_str(&format!("{i},{x},{y},{},{}\n", x + 2.0, y + 2.0));
    }
    std::fs::write(path, text).unwrap();
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Overwrites 16 bytes of `page` (of `page_size` bytes) in `file`.
fn damage(file: &Path, page: u64, page_size: u64) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.seek(SeekFrom::Start(page * page_size + 100)).unwrap();
    f.write_all(&[0xA5; 16]).unwrap();
}

#[test]
fn a_failed_build_leaves_no_directory_and_the_previous_index_untouched() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 1500);
    // Object 1 again at record 1,001.
    let dup = dir.path().join("dup.csv");
    let mut text = std::fs::read_to_string(&data).unwrap();
    let lines: Vec<&str> = text.lines().take(1001).collect();
    text = format!("{}\n1,0,0,1,1\n", lines.join("\n"));
    std::fs::write(&dup, text).unwrap();
    let idx = work.join("idx");
    // (A build on hddsim:, which lives only in its process, is refused
    // before it starts: `builds_on_in_process_devices_are_refused` in cli.rs.)
    for device in ["file?direct=false", "flashsim:preset=seed-tc58"] {
        for store in ["efind", "fast", "plain"] {
            fails(
                &[
                    "build",
                    "--input",
                    s(&dup),
                    "--index",
                    s(&idx),
                    "--store",
                    store,
                    "--device",
                    device,
                ],
                2,
                &["record 1001 of", "dup.csv", "object 1"],
            );
            assert_eq!(entries(&work), Vec::<String>::new(), "{device} {store}");
        }
    }
    // Boxes for the xBR+-tree of points: refused, nothing left either.
    fails(
        &[
            "build",
            "--input",
            s(&data),
            "--index",
            s(&idx),
            "--kind",
            "xbr",
        ],
        2,
        &["record 1 of", "d.csv"],
    );
    assert_eq!(entries(&work), Vec::<String>::new());
    // A device that fills up is a failure (exit 1), and leaves nothing.
    fails(
        &[
            "build",
            "--input",
            s(&data),
            "--index",
            s(&idx),
            "--store",
            "plain",
            "--page-size",
            "1024",
            "--device",
            "file?direct=false&capacity=16KiB",
        ],
        1,
        &["d.csv"],
    );
    assert_eq!(entries(&work), Vec::<String>::new());
    // An explicit device file the failed build created is removed with it.
    let dev = work.join("dev.dat");
    let spec = format!("file:{}?direct=false", dev.display());
    fails(
        &[
            "build",
            "--input",
            s(&dup),
            "--index",
            s(&idx),
            "--device",
            &spec,
        ],
        2,
        &["record 1001"],
    );
    assert_eq!(entries(&work), Vec::<String>::new());
    // Over an existing index: refused before anything is read or written.
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
    ]));
    let before = std::fs::read(idx.join("pages.dat")).unwrap();
    fails(
        &["build", "--input", s(&dup), "--index", s(&idx)],
        2,
        &["already holds an index", s(&idx)],
    );
    assert_eq!(std::fs::read(idx.join("pages.dat")).unwrap(), before);
    assert_eq!(entries(&work), vec!["idx".to_string()]);
    ok(geoflash(&["verify", "--index", s(&idx)]));
}

#[test]
fn every_command_refuses_bad_input_with_exit_2_naming_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 200);
    let nope = dir.path().join("nope.csv");
    let no_index = dir.path().join("no-index");
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
    ]));
    let out = dir.path().join("out.csv");
    let build = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = ["build", "--input", s(&data), "--index"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        v.push(dir.path().join("new").display().to_string());
        v.extend(extra.iter().map(|a| a.to_string()));
        v
    };
    let owned: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            build(&["--store", "fast", "--buffer-policy", "lru"]),
            vec!["--buffer-policy"],
        ),
        (
            build(&["--kind", "fortree", "--buffer-policy", "lru"]),
            vec!["--buffer-policy"],
        ),
        (build(&["--fill", "0.5"]), vec!["--fill"]),
        (build(&["--bulk", "str", "--fill", "1.5"]), vec!["--fill"]),
        (
            build(&["--bulk", "str", "--ack-every", "10"]),
            vec!["--ack-every"],
        ),
        (build(&["--buffer", "0"]), vec!["--buffer 0"]),
        (
            build(&["--store", "fast", "--buffer", "0"]),
            vec!["--buffer 0"],
        ),
    ];
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = owned
        .iter()
        .map(|(a, n)| (a.iter().map(String::as_str).collect(), n.clone()))
        .collect();
    cases.extend([
        (
            vec![
                "generate",
                "--distribution",
                "zipf",
                "--count",
                "5",
                "--out",
                s(&out),
            ],
            vec!["zipf"],
        ),
        (
            vec!["import", "--input", s(&nope), "--out", s(&out)],
            vec!["nope.csv"],
        ),
        (
            vec![
                "windows",
                "--input",
                s(&nope),
                "--selectivity",
                "1%",
                "--out",
                s(&out),
            ],
            vec!["nope.csv"],
        ),
        (
            vec!["build", "--input", s(&nope), "--index", s(&no_index)],
            vec!["nope.csv"],
        ),
        (
            vec!["insert", "--input", s(&nope), "--index", s(&idx)],
            vec!["nope.csv"],
        ),
        (
            vec!["delete", "--input", s(&nope), "--index", s(&idx)],
            vec!["nope.csv"],
        ),
        (
            vec!["insert", "--input", s(&data), "--index", s(&no_index)],
            vec!["no-index"],
        ),
        (
            vec!["query", "--index", s(&idx), "--windows", s(&nope)],
            vec!["nope.csv"],
        ),
        (
            vec!["query", "--index", s(&no_index), "--window", "0,0,1,1"],
            vec!["no-index"],
        ),
        (
            vec!["knn", "--index", s(&no_index), "--point", "0,0"],
            vec!["no-index"],
        ),
        (
            vec!["knn", "--index", s(&idx), "--point", "nan,1"],
            vec!["point"],
        ),
        (vec!["knn", "--index", s(&idx)], vec!["--points"]),
        (
            vec!["knn", "--index", s(&idx), "--points", s(&nope)],
            vec!["nope.csv"],
        ),
        (
            vec![
                "knn",
                "--index",
                s(&idx),
                "--point",
                "0,0",
                "--reads",
                "sideways",
            ],
            vec!["sideways"],
        ),
        (vec!["inspect", "--index", s(&no_index)], vec!["no-index"]),
        (vec!["verify", "--index", s(&no_index)], vec!["no-index"]),
        (
            vec!["checkpoint", "--index", s(&no_index)],
            vec!["no-index"],
        ),
        (vec!["recover", "--index", s(&no_index)], vec!["no-index"]),
        (
            vec!["devbench", "--device", "mem:", "--trace", s(&nope)],
            vec!["nope.csv"],
        ),
        (vec!["devbench", "--device", "tape:"], vec!["tape"]),
        (
            vec!["bench", s(&nope), "--results", s(&out), "--scale", "smoke"],
            vec!["nope.csv"],
        ),
        (
            vec!["report", "--results", s(&nope), "--out", s(&out)],
            vec!["nope.csv"],
        ),
    ]);
    for (args, needles) in cases {
        fails(&args, 2, &needles);
    }
    // Nothing was created by the refused builds.
    assert!(!dir.path().join("new").exists() && !no_index.exists());
}

#[test]
fn corrupt_pages_and_logs_exit_1_naming_the_file_and_page() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 2000);
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--store",
        "plain",
        "--page-size",
        "1024",
        "--device",
        "file?direct=false",
    ]));
    let pages = idx.join("pages.dat");
    // A damaged node: every command reading it fails, naming file and page.
    damage(&pages, 1, 1024);
    let want = ["pages.dat, page 1", "checksum"];
    let all = "-1e9,-1e9,1e9,1e9";
    fails(&["verify", "--index", s(&idx)], 1, &want);
    fails(&["inspect", "--index", s(&idx)], 1, &want);
    fails(&["query", "--index", s(&idx), "--window", all], 1, &want);
    fails(
        &["knn", "--index", s(&idx), "--point", "0,0", "--k", "3000"],
        1,
        &want,
    );
    fails(
        &["delete", "--index", s(&idx), "--input", s(&data)],
        1,
        &want,
    );
    fails(
        &["insert", "--index", s(&idx), "--input", s(&data)],
        1,
        &want,
    );
    // A damaged header: opening fails, naming file and page 0.
    damage(&pages, 0, 1024);
    let want = ["pages.dat, page 0"];
    for cmd in ["checkpoint", "recover", "verify", "inspect"] {
        fails(&[cmd, "--index", s(&idx)], 1, &want);
    }
    // A damaged log (both superblocks): recovery names log.dat.
    let logged = dir.path().join("logged");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&logged),
        "--store",
        "efind",
        "--page-size",
        "1024",
        "--device",
        "file?direct=false",
    ]));
    damage(&logged.join("log.dat"), 0, 1024);
    damage(&logged.join("log.dat"), 1, 1024);
    fails(&["recover", "--index", s(&logged)], 1, &["log.dat, page"]);
}

/// Issue 44, item 3: LB-Grid refuses a second object at a point it holds,
/// as GFFM does (exit 2), in a build and in an insertion into an index,
/// and the first object stays.
#[test]
fn lbgrid_refuses_a_second_object_at_a_point_like_gffm() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dup = dir.path().join("dup.csv");
    std::fs::write(
        &dup,
        "id,minx,miny,maxx,maxy\n1,5,5,5,5\n2,6,6,6,6\n3,5,5,5,5\n",
    )
    .unwrap();
    let first = dir.path().join("first.csv");
    std::fs::write(&first, "id,minx,miny,maxx,maxy\n1,5,5,5,5\n2,6,6,6,6\n").unwrap();
    let again = dir.path().join("again.csv");
    std::fs::write(&again, "id,minx,miny,maxx,maxy\n7,5,5,5,5\n").unwrap();
    for kind in ["gffm", "lbgrid"] {
        let idx = dir.path().join(kind);
        let build = |input: &Path| {
            geoflash(&[
                "build",
                "--input",
                s(input),
                "--index",
                s(&idx),
                "--kind",
                kind,
                "--device",
                "file?direct=false",
            ])
        };
        let out = build(&dup);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{kind}: {err}");
        assert!(err.contains("already in the grid file"), "{kind}: {err}");
        assert!(!idx.exists(), "{kind}: a failed build leaves nothing");
        ok(build(&first));
        fails(
            &["insert", "--index", s(&idx), "--input", s(&again)],
            2,
            &["already in the grid file"],
        );
        let q = common::last_json(&ok(geoflash(&[
            "query",
            "--index",
            s(&idx),
            "--window",
            "4,4,7,7",
            "--ids",
            "--json",
        ])));
        let mut ids: Vec<u64> = q["windows"][0]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 2], "{kind}: {q}");
    }
}

/// Issue 44, item 12: a CSV input, windows or points file without its
/// header line is refused (exit 2, naming the file and line 1) instead of
/// silently losing its first row.
#[test]
fn csv_files_without_a_header_are_refused_naming_file_and_line() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 50);
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
    ]));
    let nohead = dir.path().join("nohead.csv");
    std::fs::write(&nohead, "101,0,0,1,1\n102,2,2,3,3\n103,4,4,5,5\n").unwrap();
    let want = [
        "nohead.csv",
        "line 1",
        "not a header",
        "id,minx,miny,maxx,maxy",
    ];
    let new = dir.path().join("new");
    let new_s = new.display().to_string();
    for args in [
        vec![
            "build",
            "--input",
            s(&nohead),
            "--index",
            &new_s,
            "--device",
            "file?direct=false",
        ],
        vec![
            "build",
            "--input",
            s(&nohead),
            "--index",
            &new_s,
            "--bulk",
            "hilbert",
            "--memory",
            "1MiB",
            "--device",
            "file?direct=false",
        ],
        vec!["insert", "--index", s(&idx), "--input", s(&nohead)],
        vec!["delete", "--index", s(&idx), "--input", s(&nohead)],
    ] {
        fails(&args, 2, &want);
        assert!(!new.exists(), "{args:?}");
    }
    let windows = dir.path().join("w.csv");
    std::fs::write(&windows, "0,0,500,500\n").unwrap();
    fails(
        &["query", "--index", s(&idx), "--windows", s(&windows)],
        2,
        &["w.csv", "line 1", "minx,miny,maxx,maxy"],
    );
    let points = dir.path().join("p.csv");
    std::fs::write(&points, "10,10\n20,20\n").unwrap();
    fails(
        &[
            "knn",
            "--index",
            s(&idx),
            "--points",
            s(&points),
            "--k",
            "3",
        ],
        2,
        &["p.csv", "line 1", "x,y"],
    );
    // A 0-byte file has no header either (it built an empty index, exit 0).
    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "").unwrap();
    for (args, header) in [
        (
            vec!["build", "--input", s(&empty), "--index", &new_s],
            "id,minx,miny,maxx,maxy",
        ),
        (
            vec!["insert", "--index", s(&idx), "--input", s(&empty)],
            "id,minx,miny,maxx,maxy",
        ),
        (
            vec!["query", "--index", s(&idx), "--windows", s(&empty)],
            "minx,miny,maxx,maxy",
        ),
        (
            vec!["knn", "--index", s(&idx), "--points", s(&empty)],
            "x,y",
        ),
    ] {
        fails(&args, 2, &["empty.csv", "the file is empty", header]);
        assert!(!new.exists(), "{args:?}");
    }
    // --k 0 asks for nothing (it printed nothing, exit 0).
    fails(
        &["knn", "--index", s(&idx), "--point", "1,1", "--k", "0"],
        2,
        &["--k", "0"],
    );
    // With their headers, the same files are read whole.
    std::fs::write(&windows, "minx,miny,maxx,maxy\n0,0,500,500\n").unwrap();
    ok(geoflash(&[
        "query",
        "--index",
        s(&idx),
        "--windows",
        s(&windows),
    ]));
    // A line of blanks is skipped as an empty one is (it was "found record
    // with 1 fields"); a short record names its line.
    std::fs::write(&windows, "minx,miny,maxx,maxy\n  \n0,0,500,500\n\t\n").unwrap();
    let q = common::last_json(&ok(geoflash(&[
        "query",
        "--index",
        s(&idx),
        "--windows",
        s(&windows),
        "--json",
    ])));
    assert_eq!(q["windows"].as_array().map(Vec::len), Some(1), "{q}");
    std::fs::write(&windows, "minx,miny,maxx,maxy\n0,0,500,500\n0,0\n").unwrap();
    fails(
        &["query", "--index", s(&idx), "--windows", s(&windows)],
        2,
        &[
            "w.csv",
            "record 2 (line 3) has 2 fields, but the header has 4",
        ],
    );
}

/// Issue 44, item 10: a WKT value of 10,000 nested geometry collections is
/// refused with exit 2 naming the record by `build`, `import` and
/// `insert` (it used to overflow the stack: exit 134), and `POINT(NaN 1)`
/// says its coordinate is not a finite number.
#[test]
fn deeply_nested_or_non_finite_wkt_is_bad_input_naming_the_record() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let deep = dir.path().join("deep.csv");
    let nested = format!(
        "{}POINT(1 2){}",
        "GEOMETRYCOLLECTION(".repeat(10_000),
        ")".repeat(10_000)
    );
    std::fs::write(&deep, format!("id,wkt\n1,POINT(0 0)\n2,\"{nested}\"\n")).unwrap();
    let nan = dir.path().join("nan.csv");
    std::fs::write(&nan, "id,wkt\n1,POINT(0 0)\n2,POINT(NaN 1)\n").unwrap();
    let good = dir.path().join("good.csv");
    std::fs::write(&good, "id,wkt\n1,POINT(0 0)\n2,POINT(3 4)\n").unwrap();
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&good),
        "--index",
        s(&idx),
        "--device",
        "file?direct=false",
    ]));
    let new = dir.path().join("new").display().to_string();
    let out = dir.path().join("out.geojson").display().to_string();
    for (input, want) in [
        (&deep, "nested more than 128"),
        (&nan, "\"NaN\" is not a finite number"),
    ] {
        let needles = [s(input), "record 2", want];
        fails(
            &[
                "build",
                "--input",
                s(input),
                "--index",
                &new,
                "--device",
                "file?direct=false",
            ],
            2,
            &needles,
        );
        fails(&["import", "--input", s(input), "--out", &out], 2, &needles);
        fails(
            &["insert", "--index", s(&idx), "--input", s(input)],
            2,
            &needles,
        );
    }
}

/// Issue 44, item 11: `bench --check` applies the run's limit on a step's
/// operations (a mixed step of 10^14 operations passed the check, then the
/// run aborted allocating 100 TB): exit 2 naming file, line and key, and
/// the run refuses the same file the same way.
#[test]
fn bench_check_refuses_a_step_the_run_would_refuse() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = dir.path().join("huge.toml");
    std::fs::write(
        &w,
        "name = \"huge\"\n\
         [[dataset]]\nname = \"u\"\ngenerator = \"uniform\"\ngeometry = \"box\"\ncount = 100\n\
         [[index]]\nname = \"r\"\nstore = \"plain\"\ndevice = \"mem:\"\n\
         [[step]]\nkind = \"build\"\nfraction = 0.5\n\
         [[step]]\nkind = \"mixed\"\noperations = 100000000000000\ninsert_ratio = 0.0\n",
    )
    .unwrap();
    let results = dir.path().join("r.sqlite");
    let want = ["huge.toml", "line 16", "operations", "one step may run"];
    fails(
        &["bench", s(&w), "--results", s(&results), "--check"],
        2,
        &want,
    );
    fails(&["bench", s(&w), "--results", s(&results)], 2, &want);
}

/// Issue 44, messages: a duplicate id in a bounded-memory bulk load names
/// the input file and both records; a buffer whose automatic log does not
/// fit the log file talks about the buffer, not about a log never sized.
#[test]
fn external_bulk_duplicates_and_huge_buffers_are_named() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("dup.csv");
    write_rects(&data, 3000);
    let mut text = std::fs::read_to_string(&data).unwrap();
    text.push_str("17,5,5,6,6\n");
    std::fs::write(&data, text).unwrap();
    let idx = dir.path().join("idx");
    fails(
        &[
            "build",
            "--input",
            s(&data),
            "--index",
            s(&idx),
            "--bulk",
            "hilbert",
            "--memory",
            "64KiB",
            "--device",
            "file?direct=false",
        ],
        2,
        &[
            "dup.csv: record 3001: object id 17 appears twice",
            "also record 17",
        ],
    );
    assert!(!idx.exists());
    let one = dir.path().join("one.csv");
    write_rects(&one, 10);
    for store in ["efind", "fast"] {
        fails(
            &[
                "build",
                "--input",
                s(&one),
                "--index",
                s(&idx),
                "--store",
                store,
                "--buffer",
                "1TiB",
                "--device",
                "file?direct=false",
            ],
            2,
            &[
                "buffer (memory budget) is too large",
                "give a buffer of at most",
            ],
        );
        assert!(!idx.exists(), "{store}");
    }
}

/// Issue 45, item 4: the exit code follows the kind of the error, as the
/// table of `exit_code` (main.rs) and `docs/architecture.md` state: bad
/// input 2; damage, I/O and the results database 1 (a results store that
/// is not a database, or of a newer schema, used to exit 2 as if the user
/// had made a mistake).
#[test]
fn every_kind_of_error_has_its_exit_code() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 300);
    let idx = dir.path().join("idx");
    let page = "1024";
    let build = |extra: &[&str]| {
        let mut args = vec!["build", "--input", s(&data), "--index", s(&idx)];
        args.extend_from_slice(extra);
        geoflash(&args)
    };
    // Bad input, 2: an unknown flag, a bad setting, a missing input file.
    fails(
        &["query", "--index", s(&idx), "--no-such-flag"],
        2,
        &["--no-such-flag"],
    );
    let out = build(&["--store", "tape"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("tape"), "{}", stderr(&out));
    let missing = dir.path().join("missing.csv");
    fails(
        &["insert", "--index", s(&idx), "--input", s(&missing)],
        2,
        &["missing.csv"],
    );
    // I/O, 1: a device that fills up.
    let out = build(&[
        "--store",
        "plain",
        "--page-size",
        page,
        "--device",
        "file?direct=false&capacity=4KiB",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // Damage, 1: a damaged page.
    ok(build(&[
        "--store",
        "plain",
        "--page-size",
        page,
        "--device",
        "file?direct=false",
    ]));
    damage(&idx.join("pages.dat"), 1, 1024);
    fails(&["verify", "--index", s(&idx)], 1, &["pages.dat, page 1"]);
    // The results database, 1: not a database, a newer schema, a file that
    // cannot be opened; the message names the store.
    let w = dir.path().join("w.toml");
    std::fs::write(
        &w,
        "name = \"w\"\n\
         [[dataset]]\nname = \"u\"\ngenerator = \"uniform\"\ngeometry = \"box\"\ncount = 100\n\
         [[index]]\nname = \"r\"\nstore = \"plain\"\ndevice = \"mem:\"\n\
         [[step]]\nkind = \"build\"\n",
    )
    .unwrap();
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, b"not a database ".repeat(100)).unwrap();
    let want = ["results store", "junk.sqlite", "not a database"];
    fails(&["bench", s(&w), "--results", s(&junk)], 1, &want);
    let out_dir = dir.path().join("report");
    fails(&["report", s(&junk), "--out", s(&out_dir)], 1, &want);
    let newer = dir.path().join("newer.sqlite");
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    fails(
        &["bench", s(&w), "--results", s(&newer)],
        1,
        &["results store", "newer.sqlite", "schema version 99"],
    );
    let nowhere = dir.path().join("no-such-dir").join("r.sqlite");
    fails(
        &["bench", s(&w), "--results", s(&nowhere)],
        1,
        &["results store", "r.sqlite"],
    );
    #[cfg(feature = "postgres")]
    fails(
        &[
            "bench",
            s(&w),
            "--results",
            "postgresql://bench:hunter2@127.0.0.1:1/results",
        ],
        1,
        &["postgresql://bench@127.0.0.1:1/results", "cannot connect"],
    );
}

/// The offsets of the `ps`-byte pages of `bytes` that start with `magic`.
fn pages_starting_with(bytes: &[u8], magic: &[u8], ps: usize) -> Vec<usize> {
    (0..bytes.len() / ps)
        .map(|p| p * ps)
        .filter(|&at| bytes[at..].starts_with(magic))
        .collect()
}

/// CRC-32C of `buf` with its four bytes at `at` read as zeros (the
/// checksum of a page, a log superblock and a journal header).
fn crc_skipping(buf: &[u8], at: usize) -> u32 {
    let c = crc32c::crc32c(&buf[..at]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &buf[at + 4..])
}

/// The journal of the index in `idx` (pages of `ps` bytes, if it has
/// one) as the newer build that wrote its forged `pages.dat` would have
/// left it: each header slot's witnesses (the last pages its commit wrote,
/// with their CRC-32C: a count at byte 48, then a page id `u64` and a
/// CRC `u32` each from byte 56) give the CRC-32C of those pages as they
/// read now, and the slot's checksum is recomputed. Without it the open
/// refuses the journal as older than the pages, before the store's
/// header is read.
fn rewitness(idx: &Path, ps: usize) {
    let journal = idx.join("journal.dat");
    let (Ok(mut j), Ok(pages)) = (
        std::fs::read(&journal),
        std::fs::read(idx.join("pages.dat")),
    ) else {
        return;
    };
    for slot in j.chunks_exact_mut(ps).take(2) {
        if slot.iter().all(|&b| b == 0) {
            continue;
        }
        let count = u32::from_le_bytes(slot[48..52].try_into().unwrap()) as usize;
        for i in 0..count {
            let at = 56 + i * 12;
            let page = u64::from_le_bytes(slot[at..at + 8].try_into().unwrap()) as usize;
            if let Some(bytes) = pages.get(page * ps..(page + 1) * ps) {
                slot[at + 8..at + 12].copy_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
            }
        }
        let sum = crc_skipping(slot, 8);
        slot[8..12].copy_from_slice(&sum.to_le_bytes());
    }
    std::fs::write(&journal, j).unwrap();
}

/// How a newer build's file is forged from this build's: the version
/// field rewritten, and the checksum over it recomputed as the newer build
/// would have written it.
enum Bump {
    /// `format_version` of the manifest (and its checksum field dropped:
    /// manifests without one are read).
    Manifest,
    /// In every `ps`-byte page starting with `magic`: the `width`-byte
    /// version at `version`, then the page's own CRC at `crc` if any.
    Pages {
        magic: &'static [u8],
        version: usize,
        width: usize,
        crc: Option<usize>,
    },
    /// The store header in page 0 (its magic is found in the page): its
    /// version, then the page's CRC.
    StoreHeader(&'static [u8]),
    /// A grid page: version byte 4, CRC at 12 over the header's first 12
    /// bytes and the payload (its length at 8).
    GridPages,
    /// In every `ps`-byte node page holding the bytes `from`: `to` in their
    /// place, then the page's CRC (at 20).
    Replace { from: Vec<u8>, to: Vec<u8> },
    /// A whole file: the `width`-byte version at `version`, then the CRC of
    /// everything before the last four bytes if `tail_crc`.
    File {
        version: usize,
        width: usize,
        tail_crc: bool,
    },
}

/// Rewrites the version of `path` as `bump` says to `newer`.
fn bump_version(path: &Path, bump: &Bump, ps: usize, newer: u64) {
    let mut b = std::fs::read(path).unwrap();
    let put = |b: &mut [u8], at: usize, width: usize| {
        b[at..at + width].copy_from_slice(&newer.to_le_bytes()[..width]);
    };
    match *bump {
        Bump::Manifest => {
            let mut m: serde_json::Value = serde_json::from_slice(&b).unwrap();
            m["format_version"] = newer.into();
            m.as_object_mut().unwrap().remove("checksum");
            b = serde_json::to_vec_pretty(&m).unwrap();
        }
        Bump::Pages {
            magic,
            version,
            width,
            crc,
        } => {
            let pages = pages_starting_with(&b, magic, ps);
            assert!(
                !pages.is_empty(),
                "{}: no page starts with {magic:?}",
                path.display()
            );
            for at in pages {
                let page = &mut b[at..at + ps];
                put(page, version, width);
                if let Some(c) = crc {
                    let sum = crc_skipping(page, c);
                    page[c..c + 4].copy_from_slice(&sum.to_le_bytes());
                }
            }
        }
        Bump::StoreHeader(magic) => {
            let page = &mut b[..ps];
            let at = page.windows(magic.len()).position(|w| w == magic).unwrap();
            put(page, at + magic.len(), 2);
            let sum = crc_skipping(page, 20);
            page[20..24].copy_from_slice(&sum.to_le_bytes());
        }
        Bump::GridPages => {
            for at in pages_starting_with(&b, b"GFGR", ps) {
                let page = &mut b[at..at + ps];
                put(page, 4, 1);
                let len = u32::from_le_bytes(page[8..12].try_into().unwrap()) as usize;
                let sum = crc32c::crc32c_append(crc32c::crc32c(&page[..12]), &page[16..16 + len]);
                page[12..16].copy_from_slice(&sum.to_le_bytes());
            }
        }
        Bump::Replace { ref from, ref to } => {
            let mut found = false;
            for page in b.chunks_exact_mut(ps) {
                if let Some(at) = page.windows(from.len()).position(|w| w == &from[..]) {
                    page[at..at + to.len()].copy_from_slice(to);
                    let sum = crc_skipping(page, 20);
                    page[20..24].copy_from_slice(&sum.to_le_bytes());
                    found = true;
                }
            }
            assert!(found, "{}: no page holds {from:?}", path.display());
        }
        Bump::File {
            version,
            width,
            tail_crc,
        } => {
            put(&mut b, version, width);
            if tail_crc {
                let n = b.len() - 4;
                let sum = crc32c::crc32c(&b[..n]);
                b[n..].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }
    std::fs::write(path, b).unwrap();
}

/// A case of the test below: its name, its build's flags, the file forged,
/// how, the command that reads it and what carries the version.
type VersionCase<'a> = (&'a str, Vec<&'a str>, &'a str, Bump, &'a str, &'a str);

/// Issue 45, item 4: a file of a format version this build does not read
/// (written by a newer geoflash) is refused with exit code 1, the one of
/// `UnsupportedVersion` everywhere, and a message naming the file, what
/// carries the version and the version found; for every kind of file an
/// index or a command reads.
#[test]
fn every_file_of_a_newer_format_exits_1_naming_the_file_and_version() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let boxes = dir.path().join("d.csv");
    write_rects(&boxes, 300);
    let shapes = dir.path().join("g.geojson");
    let features: Vec<String> = (0..50)
        .map(|i| {
            let (x, y) = (f64::from(i % 10) * 10.0, f64::from(i / 10) * 10.0);
            format!(
                r#"{{"type":"Feature","id":{i},"properties":{{}},"geometry":{{"type":"Polygon","coordinates":[[[{x},{y}],[{},{y}],[{x},{}],[{x},{y}]]]}}}}"#,
                x + 5.0,
                y + 5.0
            )
        })
        .collect();
    std::fs::write(
        &shapes,
        format!(
            r#"{{"type":"FeatureCollection","features":[{}]}}"#,
            features.join(",")
        ),
    )
    .unwrap();
    let points = dir.path().join("p.csv");
    let text: String = (0..300)
        .map(|i| format!("{i},{},{},{},{}\n", i % 20, i / 20, i % 20, i / 20))
        .collect();
    std::fs::write(&points, format!("id,minx,miny,maxx,maxy\n{text}")).unwrap();
    let trace = dir.path().join("build.trace");
    let file = "file?direct=false";
    let page = |magic, version, width, crc| Bump::Pages {
        magic,
        version,
        width,
        crc,
    };
    let cases: Vec<VersionCase> = vec![
        (
            "manifest",
            vec!["--device", file],
            "manifest.json",
            Bump::Manifest,
            "inspect",
            "manifest",
        ),
        (
            "node page",
            vec!["--store", "plain", "--device", file],
            "pages.dat",
            page(b"GFPG", 4, 2, Some(20)),
            "inspect",
            "page",
        ),
        (
            "store header",
            vec!["--store", "plain", "--device", file],
            "pages.dat",
            Bump::StoreHeader(b"GFPLAIN\0"),
            "inspect",
            "store header",
        ),
        (
            "log superblock",
            vec!["--store", "efind", "--device", file],
            "log.dat",
            page(b"GFLS", 4, 2, Some(8)),
            "recover",
            "log superblock",
        ),
        (
            "journal",
            vec!["--store", "plain", "--device", file],
            "journal.dat",
            page(b"GFJRNL01", 12, 4, Some(8)),
            "checkpoint",
            "journal header",
        ),
        (
            "flash simulator",
            vec!["--store", "plain", "--device", "flashsim:preset=seed-tc58"],
            "device.img",
            Bump::File {
                version: 12,
                width: 4,
                tail_crc: true,
            },
            "inspect",
            "flash simulator image",
        ),
        (
            "placement map",
            vec![
                "--store",
                "plain",
                "--device",
                "hybrid:fast=(file?direct=false);slow=(file?direct=false)",
            ],
            "tiers.map",
            page(b"GFTIERMP", 8, 4, None),
            "inspect",
            "placement map",
        ),
        (
            "grid",
            vec!["--kind", "gffm", "--device", file],
            "pages.dat",
            Bump::GridPages,
            "inspect",
            "grid page",
        ),
        (
            "FOR-tree",
            vec!["--kind", "fortree", "--device", file],
            "pages.dat",
            // The head page's format entry, the point ("FOR", version) as
            // the rectangle (minx, miny, maxx, maxy) it is stored as.
            Bump::Replace {
                from: [f64::from(0x46_4F52), 1.0, f64::from(0x46_4F52), 1.0]
                    .map(f64::to_le_bytes)
                    .concat(),
                to: [f64::from(0x46_4F52), 99.0, f64::from(0x46_4F52), 99.0]
                    .map(f64::to_le_bytes)
                    .concat(),
            },
            "inspect",
            "FOR-tree head page",
        ),
        (
            "object heap",
            vec!["--device", file],
            "objects.dat",
            Bump::File {
                version: 8,
                width: 2,
                tail_crc: false,
            },
            "query",
            "object heap",
        ),
    ];
    for (case, flags, name, bump, cmd, what) in &cases {
        let idx = dir.path().join(case.replace(' ', "-"));
        // Objects come from a file of geometries; a grid file holds points.
        let input = match *case {
            "object heap" => &shapes,
            "grid" => &points,
            _ => &boxes,
        };
        let mut args = vec![
            "build",
            "--input",
            s(input),
            "--index",
            s(&idx),
            "--page-size",
            "1024",
        ];
        args.extend_from_slice(flags);
        ok(geoflash(&args));
        let path = idx.join(name);
        bump_version(&path, bump, 1024, 99);
        if *name == "pages.dat" {
            rewitness(&idx, 1024);
        }
        let mut args = vec![*cmd, "--index", s(&idx)];
        if *cmd == "query" {
            args.extend_from_slice(&["--window", "0,0,100,100", "--refine"]);
        }
        let want = format!("{what} format version 99");
        fails(&args, 1, &[s(&path), &want]);
    }
    // A trace recorded by a newer build, read by `devbench`.
    ok(geoflash(&[
        "build",
        "--input",
        s(&boxes),
        "--index",
        s(&dir.path().join("traced")),
        "--store",
        "plain",
        "--device",
        "flashsim:preset=seed-tc58",
        "--record-trace",
        s(&trace),
    ]));
    let forge = Bump::File {
        version: 8,
        width: 2,
        tail_crc: false,
    };
    bump_version(&trace, &forge, 1024, 99);
    fails(
        &["devbench", "--trace", s(&trace), "--device", "mem:"],
        1,
        &[s(&trace), "trace format version 99"],
    );
}

/// A bad record deep in a CSV of boxes: the build by insertion as one
/// batch (read once, the record found when the operations reach it), with
/// `--ack-every` and of a Hilbert R-tree (both read the file a first time
/// to check it, the Hilbert R-tree for its extent too) all exit 2 naming
/// the file and the record, and leave no directory behind.
#[test]
fn a_bad_record_deep_in_the_input_fails_every_build_and_leaves_nothing() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let good = dir.path().join("good.csv");
    write_rects(&good, 3000);
    let text = std::fs::read_to_string(&good).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2500, "99999,1.0,abc,2.0,3.0");
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let idx = dir.path().join("idx");
    for extra in [&[][..], &["--ack-every", "100"], &["--kind", "hilbert"]] {
        let mut args = vec!["build", "--input", s(&bad), "--index", s(&idx)];
        args.extend_from_slice(extra);
        fails(
            &args,
            2,
            &["bad.csv", "record 2500", "\"abc\" is not a number"],
        );
        assert!(
            !idx.exists(),
            "{extra:?}: a failed build left {}",
            idx.display()
        );
        assert_eq!(entries(dir.path()), ["bad.csv", "good.csv"], "{extra:?}");
    }
    // The same file without its bad record builds in one pass, every record in.
    ok(geoflash(&[
        "build",
        "--input",
        s(&good),
        "--index",
        s(&idx),
    ]));
    assert_eq!(common::all_ids(&idx).len(), 3000);
}

/// Review finding (devbench): a run that writes (the write and mixed
/// patterns, a read pattern's prefill, a trace with writes) refused a
/// device file holding data, or lying in an index directory, only with
/// `--overwrite` (exit 2 naming the file and the flag); before, `devbench
/// --device "file:idx/pages.dat?direct=false" --pattern random-write`
/// exited 0 and destroyed the index.
#[test]
fn devbench_writes_over_a_file_or_an_index_only_with_overwrite() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 400);
    let idx = dir.path().join("idx");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
    ]));
    let pages = idx.join("pages.dat");
    let before = std::fs::read(&pages).unwrap();
    let dev = |p: &Path| format!("file:{}?direct=false", p.display());
    let run = |device: &str, more: &[&str]| {
        let mut args = vec!["devbench", "--device", device, "--count", "8", "-q"];
        args.extend_from_slice(more);
        geoflash(&args)
    };
    let refused = |device: &str, more: &[&str], needles: &[&str]| {
        let mut more = more.to_vec();
        more.extend(["--region", "64KiB"]);
        let out = run(device, &more);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{device} {more:?}: {err}");
        for n in needles.iter().chain(&["--overwrite", "--device"]) {
            assert!(err.contains(n), "{device} {more:?}: {n:?} not in {err}");
        }
    };
    for pattern in [
        "random-write",
        "seq-write",
        "mixed",
        "random-read",
        "seq-read",
    ] {
        refused(
            &dev(&pages),
            &["--pattern", pattern],
            &["pages.dat", "index directory", "manifest.json"],
        );
    }
    // a new file inside the index directory
    let inside = idx.join("new.dat");
    refused(&dev(&inside), &["--pattern", "seq-write"], &["new.dat"]);
    assert!(!inside.exists());
    // a hybrid's file tier
    refused(
        &format!("hybrid:fast=(mem:);slow=({})", dev(&pages)),
        &["--pattern", "seq-write"],
        &["pages.dat"],
    );
    assert_eq!(
        std::fs::read(&pages).unwrap(),
        before,
        "the index was written"
    );
    ok(geoflash(&["verify", "--index", s(&idx)]));

    // a file holding data elsewhere
    let precious = dir.path().join("precious.dat");
    std::fs::write(&precious, vec![0x5A; 16384]).unwrap();
    for pattern in ["random-write", "random-read"] {
        refused(
            &dev(&precious),
            &["--pattern", pattern],
            &["precious.dat", "16384 bytes"],
        );
    }
    // a trace that writes, replayed
    let trace = dir.path().join("t.bin");
    ok(run(
        "mem:",
        &[
            "--pattern",
            "seq-write",
            "--region",
            "16KiB",
            "--record-trace",
            s(&trace),
        ],
    ));
    let out = geoflash(&[
        "devbench",
        "--trace",
        s(&trace),
        "--device",
        &dev(&precious),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("precious.dat") && stderr(&out).contains("--overwrite"));
    assert_eq!(std::fs::read(&precious).unwrap(), vec![0x5A; 16384]);
    // reading without the prefill writes nothing, and runs
    ok(run(
        &dev(&precious),
        &[
            "--pattern",
            "random-read",
            "--no-prefill",
            "--region",
            "16KiB",
        ],
    ));
    assert_eq!(std::fs::read(&precious).unwrap(), vec![0x5A; 16384]);
    // --overwrite writes over it
    ok(run(
        &dev(&precious),
        &["--pattern", "seq-write", "--region", "16KiB", "--overwrite"],
    ));
    assert_ne!(std::fs::read(&precious).unwrap(), vec![0x5A; 16384]);
    ok(geoflash(&[
        "devbench",
        "--trace",
        s(&trace),
        "--device",
        &dev(&precious),
        "--overwrite",
    ]));

    // plain `file` is ./devbench.dat: a second run would write over the first's
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let plain = [
        "devbench",
        "--device",
        "file?direct=false",
        "--count",
        "8",
        "--region",
        "64KiB",
        "-q",
    ];
    ok(common::geoflash_in(&plain, &cwd));
    let out = common::geoflash_in(&plain, &cwd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("devbench.dat") && stderr(&out).contains("--overwrite"));
    let mut again = plain.to_vec();
    again.push("--overwrite");
    ok(common::geoflash_in(&again, &cwd));

    // --help documents the flag
    let help = ok(geoflash(&["devbench", "--help"]));
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--overwrite") && help.contains("manifest.json"),
        "{help}"
    );
}

/// `build --record-trace` to a file that cannot be written is refused
/// before the build, leaving no index: before, the build published its
/// index and then failed, and the same build again was refused (found by
/// a review).
#[test]
fn a_trace_file_that_cannot_be_written_is_refused_before_the_build() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 100);
    let idx = dir.path().join("idx");
    for trace in [
        dir.path().join("absent").join("t.trace"),
        dir.path().to_path_buf(),
    ] {
        let out = geoflash(&[
            "build",
            "--input",
            s(&data),
            "--index",
            s(&idx),
            "--record-trace",
            s(&trace),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("--record-trace"), "{err}");
        assert!(!idx.exists(), "an index was published: {err}");
    }
}
