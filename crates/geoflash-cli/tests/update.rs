//! `geoflash update`: objects moved by id to the rectangles of a CSV file,
//! answers checked against the expected boxes; an unknown id stops the
//! command with the updates before it applied.
mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::Path;

/// The rectangles `write_rects` gives ids `1..=n`.
fn rects(n: u64) -> BTreeMap<u64, [f64; 4]> {
    (1..=n)
        .map(|i| {
            let x = (i * 7919 % 10_000) as f64 / 10.0;
            let y = (i * 104_729 % 9_973) as f64 / 10.0;
            (i, [x, y, x + 0.5, y + 0.5])
        })
        .collect()
}

fn write_moves(path: &Path, moves: &[(u64, [f64; 4])]) {
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for (id, b) in moves {
        text.push_str(&format!("{id},{},{},{},{}\n", b[0], b[1], b[2], b[3]));
    }
    std::fs::write(path, text).unwrap();
}

fn build(dir: &Path, kind: &str, n: u64) -> std::path::PathBuf {
    let data = dir.join(format!("{kind}.csv"));
    write_rects(&data, n);
    let idx = dir.join(kind);
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--kind",
        kind,
        "--device",
        "file?direct=false",
        "--page-size",
        "1KiB",
    ]));
    idx
}

/// The ids of `boxes` intersecting `w`, sorted.
fn expected(boxes: &BTreeMap<u64, [f64; 4]>, w: [f64; 4]) -> Vec<u64> {
    boxes
        .iter()
        .filter(|(_, b)| b[0] <= w[2] && w[0] <= b[2] && b[1] <= w[3] && w[1] <= b[3])
        .map(|(id, _)| *id)
        .collect()
}

fn window(w: [f64; 4]) -> String {
    format!("{},{},{},{}", w[0], w[1], w[2], w[3])
}

#[test]
fn update_moves_objects_by_id_and_queries_find_them_at_their_new_boxes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let n = 2000;
    for kind in ["rstar", "rtree", "hilbert", "fortree"] {
        let idx = build(dir.path(), kind, n);
        let mut boxes = rects(n);
        // Small moves (a tenth of a unit), then 50 objects across the plane.
        let mut moves: Vec<(u64, [f64; 4])> = (1..=1000u64)
            .map(|i| {
                let b = boxes[&i];
                let d = if i % 2 == 0 { 0.1 } else { -0.1 };
                (i, [b[0] + d, b[1] - d, b[2] + d, b[3] - d])
            })
            .collect();
        moves.extend((1001..=1050u64).map(|i| {
            let x = 1500.0 + (i - 1000) as f64;
            (i, [x, 1500.0, x + 0.5, 1500.5])
        }));
        // An object moved twice: the second row wins.
        moves.push((7, [1600.0, 1600.0, 1601.0, 1601.0]));
        for (id, b) in &moves {
            boxes.insert(*id, *b);
        }
        let moves_csv = dir.path().join(format!("{kind}-moves.csv"));
        write_moves(&moves_csv, &moves);
        let out = ok(geoflash(&[
            "update",
            "--index",
            s(&idx),
            "--input",
            s(&moves_csv),
            "--json",
        ]));
        let stats = last_json(&out);
        assert_eq!(stats["operations"], 1051, "{kind}");
        let in_place = stats["updates_in_place"].as_u64().unwrap();
        if matches!(kind, "rstar" | "rtree") {
            assert!(in_place > 300, "{kind}: {in_place} of 1051 in place");
        } else {
            assert_eq!(in_place, 0, "{kind}");
        }
        let far = [1400.0, 1400.0, 1700.0, 1700.0];
        let mut want: Vec<u64> = (1001..=1050).collect();
        want.insert(0, 7);
        assert_eq!(window_ids(&idx, &window(far)), want, "{kind}");
        assert_eq!(all_ids(&idx).len() as u64, n, "{kind}");
        for k in 0..12 {
            let x = f64::from(k) * 80.0;
            let w = [x, x / 2.0, x + 60.0, x / 2.0 + 300.0];
            assert_eq!(
                window_ids(&idx, &window(w)),
                expected(&boxes, w),
                "{kind}: {w:?}"
            );
        }
        ok(geoflash(&["verify", "--index", s(&idx)]));
    }
}

#[test]
fn update_acknowledges_every_n_updates() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let idx = build(dir.path(), "rstar", 500);
    let boxes = rects(500);
    let moves: Vec<(u64, [f64; 4])> = (1..=300u64)
        .map(|i| {
            let b = boxes[&i];
            (i, [b[0] + 0.05, b[1] + 0.05, b[2] - 0.05, b[3] - 0.05])
        })
        .collect();
    let csv = dir.path().join("moves.csv");
    write_moves(&csv, &moves);
    let out = ok(geoflash(&[
        "update",
        "--index",
        s(&idx),
        "--input",
        s(&csv),
        "--ack-every",
        "100",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    let acks: Vec<&str> = text.lines().filter(|l| l.starts_with("acked ")).collect();
    assert_eq!(acks.last(), Some(&"acked 300"), "{text}");
    assert!(text.contains("updates in place"), "{text}");
    ok(geoflash(&["verify", "--index", s(&idx)]));
}

#[test]
fn an_unknown_id_exits_2_naming_it_with_the_updates_before_it_applied() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let idx = build(dir.path(), "rstar", 500);
    let boxes = rects(500);
    let first = [1500.0, 1500.0, 1501.0, 1501.0];
    let csv = dir.path().join("moves.csv");
    write_moves(
        &csv,
        &[
            (1, first),
            (99_999, [0.0, 0.0, 1.0, 1.0]),
            (2, [1600.0, 1600.0, 1601.0, 1601.0]),
        ],
    );
    let out = geoflash(&["update", "--index", s(&idx), "--input", s(&csv)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("object 99999 is not in the index"), "{err}");
    assert!(err.contains("record 2 of"), "{err}");
    assert!(
        err.contains("the 1 records before it were updated in"),
        "{err}"
    );
    // The first row applied (and durable), the third not.
    assert_eq!(window_ids(&idx, &window(first)), vec![1]);
    assert_eq!(window_ids(&idx, "1599,1599,1602,1602"), Vec::<u64>::new());
    assert!(window_ids(&idx, &window(boxes[&2])).contains(&2));
    assert_eq!(all_ids(&idx).len(), 500);
    ok(geoflash(&["verify", "--index", s(&idx)]));
    // A file without the header is refused before the index is touched.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "3,1,1,2,2\n").unwrap();
    let out = geoflash(&["update", "--index", s(&idx), "--input", s(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(window_ids(&idx, &window(boxes[&3])).contains(&3));
}

/// An index as the Python package writes it: its entries keyed by a
/// record map in the store's log (`store`: eFIND) or with its own log
/// (`pyrecords.dat`: the plain store), holding user ids a command line's
/// ids cannot be (negative, repeated).
fn python_index(dir: &Path, store: &str) -> std::path::PathBuf {
    use geoflash::engine::records::Records;
    use geoflash::geom::Rect;
    let idx = dir.join(store);
    let mut spec = geoflash::IndexSpec::new(geoflash::KeyStyle::Key);
    for (k, v) in [("store", store), ("device", "file?direct=false")] {
        spec.set(k, v).unwrap();
    }
    let opts = spec.options().unwrap();
    let mut index = geoflash::Index::create(&idx, &opts).unwrap();
    let users = [(-5i64, 0.0), (7, 2.0), (7, 4.0)];
    let mut map = Records::new();
    if store == "plain" {
        for (id, x) in users {
            let key = map.add(id, None).unwrap();
            index
                .insert(key, Rect::new(x, x, x + 1.0, x + 1.0).unwrap())
                .unwrap();
        }
        map.save(&idx).unwrap();
        index.set_records(map);
    } else {
        assert!(index.log_records_in_store(map).unwrap());
        for (id, x) in users {
            let r = Rect::new(x, x, x + 1.0, x + 1.0).unwrap();
            index.insert_logged_record(id, r, None).unwrap();
        }
    }
    index.close().unwrap();
    idx
}

#[test]
fn an_index_the_python_package_wrote_answers_with_its_user_ids_and_refuses_writes_by_key() {
    let tmp = tempfile::tempdir().unwrap();
    // The user ids of the window (0,0)–(10,10).
    let ids_near_the_origin = |idx: &Path| {
        let out = ok(geoflash(&[
            "query",
            "--index",
            s(idx),
            "--window",
            "0,0,10,10",
            "--ids",
        ]));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for store in ["efind", "plain"] {
        let idx = python_index(tmp.path(), store);
        let text = ids_near_the_origin(&idx);
        assert!(text.contains("window 0: 3 [-5 7 7]"), "{store}: {text}");
        let out = ok(geoflash(&[
            "knn",
            "--index",
            s(&idx),
            "--point",
            "0.5,0.5",
            "--k",
            "1",
        ]));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("-5 0"), "{store}: {text}");
        // The command line's ids are not the map's keys: every write by
        // key is refused (exit 2) and changes nothing.
        let moves = tmp.path().join("moves.csv");
        write_moves(&moves, &[(1, [8.0, 8.0, 9.0, 9.0])]);
        for cmd in ["insert", "delete", "update"] {
            let out = geoflash(&[cmd, "--index", s(&idx), "--input", s(&moves)]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{store} {cmd}: {err}");
            assert!(
                err.contains("Python") && err.contains("pyrecords.dat"),
                "{store} {cmd}: {err}"
            );
        }
        ok(geoflash(&["checkpoint", "--index", s(&idx)]));
        ok(geoflash(&["verify", "--index", s(&idx)]));
        let text = ids_near_the_origin(&idx);
        assert!(
            text.contains("window 0: 3 [-5 7 7]"),
            "{store} after the refusals: {text}"
        );
    }
}

/// Issue 47, item 5: `update` streams its moves as `insert` streams its
/// rows, so a file of many moves of a small index stays within the memory
/// budget + 32 MB (the bound of the build's test in `cli.rs`). It read the
/// whole file first, 48 bytes a move: 1,000,000 moves of 1,000 objects
/// peaked at about 58 MB with a 2 MiB budget (400,000 at 29 MB).
#[test]
fn update_streams_its_moves_within_the_memory_budget() {
    if !peak_rss_is_known() {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 1000);
    let idx = dir.path().join("ix");
    ok(geoflash(&[
        "build",
        "--input",
        s(&data),
        "--index",
        s(&idx),
        "--buffer",
        "2MiB",
    ]));
    // Each object moved back and forth by a tenth, 1,000 times.
    let boxes = rects(1000);
    let n = 1_000_000u64;
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for i in 0..n {
        let id = i % 1000 + 1;
        let b = boxes[&id];
        let d = if (i / 1000) % 2 == 0 { 0.1 } else { 0.0 };
        text.push_str(&format!(
            "{id},{},{},{},{}\n",
            b[0] + d,
            b[1] + d,
            b[2] + d,
            b[3] + d
        ));
    }
    let moves = dir.path().join("moves.csv");
    std::fs::write(&moves, text).unwrap();
    let stats = last_json(&ok(geoflash(&[
        "-q",
        "update",
        "--index",
        s(&idx),
        "--input",
        s(&moves),
        "--json",
    ])));
    assert_eq!(stats["operations"].as_u64(), Some(n), "{stats}");
    let peak = stats["peak_rss_bytes"].as_u64().expect("peak_rss_bytes");
    let bound = (2 << 20) + 32_000_000;
    assert!(
        peak <= bound,
        "peak RSS {peak} bytes above the 2 MiB budget + 32 MB ({bound}): {stats}"
    );
    // The last moves put every object back where it was built.
    assert_eq!(all_ids(&idx).len(), 1000);
    let b = boxes[&7];
    assert_eq!(window_ids(&idx, &window(b)), vec![7]);
}
