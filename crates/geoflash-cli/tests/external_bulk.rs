//! `geoflash build --bulk hilbert|str --memory SIZE`: the bounded-memory
//! bulk loads (external sorts) from the command line, on an input several
//! times larger than its memory budget.
mod common;
use common::*;

/// Ids of the input's boxes that intersect `w`, sorted (brute force).
fn oracle(records: &[(u64, geoflash::geom::Rect)], w: [f64; 4]) -> Vec<u64> {
    let mut ids: Vec<u64> = records
        .iter()
        .filter(|(_, r)| {
            r.min_x() <= w[2] && w[0] <= r.max_x() && r.min_y() <= w[3] && w[1] <= r.max_y()
        })
        .map(|(id, _)| *id)
        .collect();
    ids.sort_unstable();
    ids
}

/// `csv`, written with 20,000 uniform objects of `geometry` (`box` or
/// `point`) by `geoflash generate --seed SEED`.
fn generated(csv: &std::path::Path, geometry: &str, seed: &str) -> std::path::PathBuf {
    ok(geoflash(&[
        "generate",
        "--distribution",
        "uniform",
        "--geometry",
        geometry,
        "--count",
        "20000",
        "--seed",
        seed,
        "--out",
        s(csv),
    ]));
    csv.to_path_buf()
}

/// `geoflash build --memory 64KiB` of the 20,000 objects of `csv` into
/// `idx` (they cost over 1 MB while sorted: many runs); its standard error.
fn bounded_build(
    csv: &std::path::Path,
    idx: &std::path::Path,
    kind: &str,
    store: &str,
    method: &str,
) -> String {
    let out = ok(geoflash(&[
        "build",
        "--input",
        s(csv),
        "--index",
        s(idx),
        "--kind",
        kind,
        "--store",
        store,
        "--device",
        "file?direct=false",
        "--bulk",
        method,
        "--memory",
        "64KiB",
        "--json",
    ]));
    assert_eq!(last_json(&out)["operations"], 20000, "{kind} {store}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bulk_load_with_less_memory_than_the_input_answers_like_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(&dir.path().join("d.csv"), "box", "5");
    let records = geoflash_bench::formats::read_csv(&csv).unwrap();
    for (kind, store, method) in [
        ("rstar", "plain", "hilbert"),
        ("hilbert", "efind", "hilbert"),
        ("rtree", "fast", "hilbert"),
        ("rstar", "efind", "str"),
        ("rtree", "plain", "str"),
    ] {
        let idx = dir.path().join(format!("ext-{kind}-{store}-{method}"));
        let stderr = bounded_build(&csv, &idx, kind, store, method);
        let runs: u64 = stderr
            .split("records, ")
            .nth(1)
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no run count in: {stderr}"));
        assert!(
            runs > 1,
            "{kind}: {runs} runs: the input must exceed the budget"
        );
        verified_like_brute_force(&idx, &csv, &records, kind);
    }
}

/// `idx` passes `verify`, answers three windows as brute force over
/// `records` does, and no temporary run file is left beside it (in the
/// directory of the input `csv`, whose other entries are indexes `ext-*`).
fn verified_like_brute_force(
    idx: &std::path::Path,
    csv: &std::path::Path,
    records: &[(u64, geoflash::geom::Rect)],
    kind: &str,
) {
    ok(geoflash(&["verify", "--index", s(idx)]));
    let dir = csv.parent().unwrap();
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path() != csv && !e.file_name().to_string_lossy().starts_with("ext-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    for w in [
        [0.1, 0.1, 0.2, 0.25],
        [0.0, 0.0, 1.0, 1.0],
        [0.5, 0.5, 0.5001, 0.5001],
    ] {
        let wtext = format!("{},{},{},{}", w[0], w[1], w[2], w[3]);
        let out = last_json(&ok(geoflash(&[
            "query",
            "--index",
            s(idx),
            "--window",
            &wtext,
            "--ids",
            "--json",
        ])));
        let mut got: Vec<u64> = out["windows"][0]["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, oracle(records, w), "{kind} window {wtext}");
    }
}

/// The xBR+-tree's bounded-memory load (`--kind xbr --memory`): points
/// sorted by Z-order through temporary files, on every store; a box in
/// the input is an error naming the file and the record, and publishes
/// nothing.
#[test]
fn an_xbr_bulk_load_with_less_memory_than_the_input_answers_like_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(&dir.path().join("p.csv"), "point", "6");
    let records = geoflash_bench::formats::read_csv(&csv).unwrap();
    for store in ["plain", "efind", "fast"] {
        let idx = dir.path().join(format!("ext-xbr-{store}"));
        let stderr = bounded_build(&csv, &idx, "xbr", store, "str");
        assert!(
            stderr.contains("20000 records, 10 sorted runs, 1 merge passes"),
            "{stderr}"
        );
        verified_like_brute_force(&idx, &csv, &records, store);
    }
    let boxes = dir.path().join("b.csv");
    std::fs::write(
        &boxes,
        "id,minx,miny,maxx,maxy\n1,0.1,0.1,0.1,0.1\n2,0.2,0.2,0.3,0.3\n",
    )
    .unwrap();
    let idx = dir.path().join("ext-boxes");
    let out = geoflash(&[
        "build",
        "--input",
        s(&boxes),
        "--index",
        s(&idx),
        "--kind",
        "xbr",
        "--bulk",
        "str",
        "--memory",
        "64KiB",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("b.csv: ") && stderr.contains("object 2 is a box"),
        "{stderr}"
    );
    assert!(!idx.exists() || std::fs::read_dir(&idx).unwrap().next().is_none());
}

#[test]
fn memory_needs_a_bulk_load_on_a_csv_input() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("d.csv");
    std::fs::write(&csv, "id,minx,miny,maxx,maxy\n1,0,0,1,1\n").unwrap();
    let idx = dir.path().join("i");
    for extra in [
        vec!["--memory", "1MiB"],
        vec!["--bulk", "str", "--memory", "1KiB"],
        vec!["--bulk", "sorted", "--memory", "1MiB"],
        vec!["--bulk", "hilbert", "--memory", "lots"],
        vec!["--bulk", "hilbert", "--memory", "1KiB"],
        vec!["--kind", "xbr", "--bulk", "str", "--memory", "1KiB"],
    ] {
        let mut args = vec!["build", "-q", "--input", s(&csv), "--index", s(&idx)];
        args.extend(extra.iter().copied());
        let out = geoflash(&args);
        assert!(
            !String::from_utf8_lossy(&out.stderr).contains("d.csv: "),
            "{extra:?}: not the input's fault"
        );
        assert_eq!(
            out.status.code(),
            Some(2),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
