use super::gains::{gains, headline_markdown, headline_rows};
use super::*;
use crate::runner::{run, RunOptions};
use crate::workload::{Scale, Workload};

/// Two orders, two page sizes; plain on the simulator and on a real file,
/// eFIND with two durabilities: facets in both directions, and simulated
/// time that does not apply to the file.
const W: &str = include_str!("../../tests/data/workloads/report.toml");

/// The report's options for eFIND's gains over the plain store, every
/// metric.
fn gains_against_plain() -> ReportOptions {
    ReportOptions {
        metrics: vec![],
        baseline: Some("plain".into()),
        headline: Some("efind".into()),
    }
}

/// Runs [`W`] at smoke scale into `dir/r.sqlite` and reports it into `dir/report`.
fn small_report(dir: &Path, opts: &ReportOptions) -> ReportSummary {
    let db = dir.join("r.sqlite");
    let w = Workload::parse(W, Path::new("w.toml"), Scale::Smoke).unwrap();
    let mut st = ResultsStore::open(&db).unwrap();
    let ro = RunOptions {
        workdir: Some(dir.to_path_buf()),
        ..RunOptions::default()
    };
    run(&w, &mut st, &ro).unwrap();
    drop(st);
    write_report(&ResultsLocation::Sqlite(db), &dir.join("report"), opts).unwrap()
}

fn bar(name: &str, v: Option<f64>) -> Bar {
    Bar {
        index_name: name.into(),
        order: "o".into(),
        device: String::new(),
        group: "d (o)".into(),
        page_size: 4096,
        repetitions: 3,
        values: vec![v],
        samples: vec![v.into_iter().collect()],
    }
}

#[test]
fn medians_and_baseline_variants() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(vec![]), 0.0);
    let panel = Panel {
        workload: "w".into(),
        scale: "smoke".into(),
        step_index: 0,
        step_kind: "build".into(),
        parameter: String::new(),
        bars: vec![
            bar("fast[device=mem:,fast.durability=none]", Some(10.0)),
            bar("fast[device=file,fast.durability=none]", Some(20.0)),
            bar("fast[device=file,fast.durability=group]", Some(40.0)),
            bar("efind[device=file,efind.durability=group]", Some(30.0)),
            bar("plain[device=file]", Some(50.0)),
            bar("efind[device=file,efind.durability=none]", None),
        ],
    };
    let rows = headline_rows(
        std::slice::from_ref(&panel),
        &["sim_time_ns".into()],
        "efind",
        "fast",
    );
    // The eFIND configuration whose value does not apply has no row.
    assert_eq!(rows.len(), 1);
    let table = headline_markdown(&rows, "efind", "fast");
    assert!(
        table.contains("| build | d (o) | device=file, store.durability=group | 4 KiB | simulated time (ms) | 0.00004000 | 0.00003000 | +25.0 % |"),
        "{table}"
    );
    let g = gains(&panel, 0, "fast");
    // eFIND on file with group commit against FAST on file with group commit
    assert_eq!(g[3], Some(0.25));
    // plain (no durability) against a FAST configuration on the same device
    assert!(g[4].is_some_and(|x| x < 0.0));
    assert_eq!(g[0], Some(0.0));
    assert_eq!(g[5], None);
    // The gains figure: one step, one series (device=file · simulated time),
    // one facet (order o, durability group), +25 %.
    let fig = gains::headline_figure(&rows, "efind", "fast");
    assert_eq!(fig.groups, vec!["build".to_string()]);
    assert_eq!(fig.facets.len(), 1);
    assert_eq!(fig.facets[0].title, "order: o · durability: group");
    assert_eq!(fig.facets[0].bars, vec![figure::Mark::new(0, 0, 25.0)]);
    assert_eq!(fig.y_desc, "gain of efind over fast (%)");
}

#[test]
fn figures_facet_by_order_and_durability() {
    let mut panel = Panel {
        workload: "w".into(),
        scale: "smoke".into(),
        step_index: 0,
        step_kind: "build".into(),
        parameter: String::new(),
        bars: Vec::new(),
    };
    for (name, order, size, v) in [
        ("plain[device=file,page_size=2048]", "random", 2048, 5.0),
        ("plain[device=file,page_size=4096]", "random", 4096, 6.0),
        (
            "efind[efind.durability=none,page_size=2048]",
            "random",
            2048,
            1.0,
        ),
        (
            "efind[efind.durability=group,page_size=4096]",
            "sessions",
            4096,
            2e6,
        ),
    ] {
        panel.bars.push(Bar {
            index_name: name.into(),
            order: order.into(),
            device: String::new(),
            group: format!("d ({order})"),
            page_size: size,
            repetitions: 1,
            values: vec![Some(v)],
            samples: vec![vec![v]],
        });
    }
    let styles: BTreeMap<String, usize> =
        [("plain · file".to_string(), 3), ("efind".to_string(), 5)].into();
    let (fig, _) = panel_figure(&panel, 0, "wall_time_ns", &styles, None);
    assert_eq!(fig.groups, vec!["2 KiB", "4 KiB"]);
    assert_eq!(
        (fig.x_desc.as_str(), fig.y_desc.as_str()),
        ("page size (KiB)", "wall time (ms)")
    );
    // Series in style order, with their styles.
    assert_eq!(
        fig.series,
        vec![("plain · file".to_string(), 3), ("efind".to_string(), 5)]
    );
    // Rows: durability group, none; columns: random, sessions.
    let titles: Vec<&str> = fig.facets.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(
        titles,
        vec![
            "order: random · durability: group",
            "order: sessions · durability: group",
            "order: random · durability: none",
            "order: sessions · durability: none",
        ]
    );
    // plain (no durability) appears in both rows; values in ms.
    let triples = |f: &Facet| f.bars.iter().map(Mark::triple).collect::<Vec<_>>();
    assert_eq!(triples(&fig.facets[0]), vec![(0, 0, 5e-6), (1, 0, 6e-6)]);
    assert_eq!(triples(&fig.facets[1]), vec![(1, 1, 2.0)]);
    assert_eq!(
        triples(&fig.facets[2]),
        vec![(0, 0, 5e-6), (1, 0, 6e-6), (0, 1, 1e-6)]
    );
    // each bar carries its runs (in ms)
    assert_eq!(fig.facets[1].bars[0].runs, vec![2.0]);
    assert!(fig.facets[3].bars.is_empty());
}

#[test]
fn report_has_figures_first_pivots_and_gains() {
    let dir = tempfile::tempdir().unwrap();
    let s = small_report(dir.path(), &gains_against_plain());
    let out = dir.path().join("report");
    assert_eq!(s.panels, 2);
    let html = std::fs::read_to_string(&s.html).unwrap();
    // The headline figure comes first, then each step's figures before its tables.
    assert!(s.plots[0].ends_with("headline.svg"), "{:?}", s.plots);
    let first = |what: &str| html.find(what).unwrap_or(usize::MAX);
    assert!(first("<figure") < first("<table"), "figures first");
    assert!(html.contains("<details><summary>Full table"));
    assert!(html.contains("simulated time (ms) (configurations × page size)"));
    // Simulated time does not apply to the file device: "—", never 0.
    assert!(html.contains("<td>—</td>"));
    assert!(!html.contains("0.000 ms"));
    // Every plot is an SVG with data marks (Okabe–Ito fills) and axis
    // units, linked from the page.
    for p in &s.plots {
        let text = std::fs::read_to_string(p).unwrap();
        let upper = text.to_uppercase();
        assert!(text.contains("<svg"), "{}", p.display());
        assert!(
            figure::OKABE_ITO
                .iter()
                .any(|c| upper.contains(&format!("FILL=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))),
            "{} has no data mark",
            p.display()
        );
        assert!(
            text.contains("(ms)")
                || text.contains("(pages)")
                || text.contains("(%)")
                || text.contains("(blocks)"),
            "{}: no unit",
            p.display()
        );
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(html.contains(&format!("plots/{name}")), "{name} not linked");
    }
    let build_fig = s
        .plots
        .iter()
        .find(|p| p.to_str().unwrap().contains("build-pages_written"))
        .unwrap();
    let svg = std::fs::read_to_string(build_fig).unwrap();
    for t in [
        "1 KiB",
        "2 KiB",
        "page size (KiB)",
        "order: hilbert · durability: group",
    ] {
        assert!(svg.contains(t), "{t} missing from {}", build_fig.display());
    }
    // gains: (ref - v)/ref against the plain row of the same page size,
    // device and order (eFIND ran on the simulator only); 0 for plain
    // itself; empty where it does not apply.
    // Parsed as CSV: configuration names hold quoted commas.
    let mut reader = csv::Reader::from_path(out.join("summary.csv")).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let col = |h: &str| header.iter().position(|x| x == h).unwrap();
    let (gi, vi, ci, pi, si) = (
        col("pages_written_gain"),
        col("pages_written"),
        col("configuration"),
        col("page_size"),
        col("sim_time_ns"),
    );
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect::<Vec<String>>())
        .filter(|r| r.iter().any(|f| f == "build"))
        .collect();
    let device = |c: &str| {
        if c.contains("device=file") {
            "file"
        } else {
            "sim"
        }
    };
    let order = |c: &str| {
        if c.contains("(random)") {
            "random"
        } else {
            "hilbert"
        }
    };
    let mut seen = 0;
    for f in &rows {
        let reference = rows
            .iter()
            .find(|r| {
                r[ci].starts_with("plain")
                    && r[pi] == f[pi]
                    && order(&r[ci]) == order(&f[ci])
                    && device(&r[ci]) == device(&f[ci])
            })
            .unwrap();
        let rv: f64 = reference[vi].parse().unwrap();
        let v: f64 = f[vi].parse().unwrap();
        let g: f64 = f[gi].parse().unwrap();
        assert!((g - (rv - v) / rv).abs() < 1e-12, "{f:?}");
        if f[ci].starts_with("plain") {
            assert_eq!(g, 0.0);
        }
        assert_eq!(f[si].is_empty(), device(&f[ci]) == "file", "{f:?}");
        seen += 1;
    }
    assert_eq!(seen, 16);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        md.contains("| configuration · dataset (order) | 1 KiB | 2 KiB |"),
        "{md}"
    );
    assert!(std::fs::read_to_string(out.join("headline.md"))
        .unwrap()
        .contains("| step | dataset (order) | efind configuration |"));
}

#[test]
fn bad_metric_and_missing_store() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |db: &Path, opts: &ReportOptions| -> String {
        write_report(&ResultsLocation::Sqlite(db.to_path_buf()), dir.path(), opts)
            .unwrap_err()
            .to_string()
    };
    let e = refused(&dir.path().join("none.sqlite"), &ReportOptions::default());
    assert!(e.contains("does not exist"), "{e}");
    let db = dir.path().join("r.sqlite");
    ResultsStore::open(&db).unwrap();
    let e = refused(
        &db,
        &ReportOptions {
            metrics: vec!["pages_written; DROP TABLE results".into()],
            baseline: None,
            headline: None,
        },
    );
    assert!(e.contains("unknown metric"), "{e}");
    let e = refused(&db, &ReportOptions::default());
    assert!(e.contains("no successful result"), "{e}");
    let e = refused(
        &db,
        &ReportOptions {
            metrics: vec![],
            baseline: None,
            headline: Some("efind".into()),
        },
    );
    assert!(e.contains("needs a baseline"), "{e}");
    // Another program's SQLite file, or an empty file, is refused as not a
    // results store and left as it was (a report used to create the
    // results tables and set `user_version` in it).
    let other = dir.path().join("other.sqlite");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE mine (x); INSERT INTO mine VALUES (1);")
        .unwrap();
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    for db in [&other, &empty] {
        let before = std::fs::read(db).unwrap();
        let e = write_report(
            &ResultsLocation::Sqlite(db.clone()),
            &dir.path().join("rep"),
            &ReportOptions::default(),
        )
        .unwrap_err();
        assert!(e.is_user_error(), "{e}");
        assert!(
            e.to_string().contains("not a geoflash results store"),
            "{e}"
        );
        assert_eq!(std::fs::read(db).unwrap(), before, "{}", db.display());
    }
    assert_eq!(without_page_size("a[page_size=1024,store=x]"), "a[store=x]");
    assert_eq!(without_page_size("a[page_size=1024]"), "a");
}

/// The script the browser test appends to a copy of the page: once every
/// image has loaded (or failed), it records per plot image its natural
/// width and how many data marks (rectangles filled with an Okabe–Ito
/// colour) its SVG holds, as JSON in `<pre id="report-check">`.
const CHECK_SCRIPT: &str = r#"<script>
window.addEventListener('load', async () => {
  const palette = PALETTE;
  const out = [];
  for (const img of document.querySelectorAll('img')) {
    let marks = -1;
    try {
      const text = await (await fetch(img.src)).text();
      const svg = new DOMParser().parseFromString(text, 'image/svg+xml');
      marks = [...svg.querySelectorAll('rect')]
        .filter(r => palette.includes((r.getAttribute('fill') || '').toUpperCase())).length;
    } catch (e) { marks = -2; }
    out.push({src: img.getAttribute('src'), width: img.naturalWidth, marks});
  }
  const pre = document.createElement('pre');
  pre.id = 'report-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"#;

/// Renders the report of a small real run in headless Chromium: every plot
/// image loads (natural width > 0) and every plot holds data marks. Needs
/// Debian's `chromium` (scripts/setup.sh installs it); skipped without it,
/// except under `CI=true`, where a missing browser fails the test.
#[test]
fn the_page_renders_in_headless_chromium() {
    let Some(browser) = ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        geoflash::testenv::prerequisite_missing("chromium (headless), for the report page test")
            .unwrap();
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let s = small_report(dir.path(), &gains_against_plain());
    let html = std::fs::read_to_string(&s.html).unwrap();
    let palette: Vec<String> = figure::OKABE_ITO
        .iter()
        .map(|c| format!("\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))
        .collect();
    let script = CHECK_SCRIPT.replace("PALETTE", &format!("[{}]", palette.join(",")));
    let check = s.html.with_file_name("check.html");
    std::fs::write(&check, html.replace("</body>", &format!("{script}</body>"))).unwrap();
    let profile = dir.path().join("chromium-profile");
    let output = std::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
            "--virtual-time-budget=20000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", check.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let json = dom
        .split("<pre id=\"report-check\">")
        .nth(1)
        .and_then(|t| t.split("</pre>").next())
        .unwrap_or_else(|| {
            panic!(
                "no check result in the rendered page; stderr: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    let images: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    assert_eq!(images.len(), s.plots.len(), "{json}");
    for img in &images {
        assert!(img["width"].as_i64().unwrap() > 0, "did not load: {img}");
        assert!(img["marks"].as_i64().unwrap() > 0, "empty plot: {img}");
    }
}

/// A bar of configuration `name` on `device` with one metric's runs.
fn runs_bar(name: &str, device: &str, runs: &[f64]) -> Bar {
    Bar {
        index_name: name.into(),
        order: "sessions".into(),
        device: device.into(),
        group: "d (sessions)".into(),
        page_size: 4096,
        repetitions: runs.len(),
        values: vec![Some(median(runs.to_vec()))],
        samples: vec![runs.to_vec()],
    }
}

#[test]
fn the_headline_says_when_a_third_configuration_beats_both() {
    let sim = "flashsim:preset=seed-tc58";
    let mut panel = Panel {
        workload: "w".into(),
        scale: "small".into(),
        step_index: 0,
        step_kind: "build".into(),
        parameter: String::new(),
        bars: vec![
            runs_bar("plain[device=flashsim:preset=seed-tc58]", sim, &[770e6]),
            runs_bar(
                "efind[device=flashsim:preset=seed-tc58,efind.durability=none]",
                sim,
                &[2997e6],
            ),
            runs_bar(
                "efind[device=flashsim:preset=seed-tc58,efind.durability=group]",
                sim,
                &[3500e6],
            ),
            runs_bar(
                "fast[device=flashsim:preset=seed-tc58,fast.durability=none]",
                sim,
                &[3100e6],
            ),
        ],
    };
    let metrics = vec!["sim_time_ns".to_string()];
    let f = gains::findings(std::slice::from_ref(&panel), &metrics, "efind", "fast");
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].1,
        "build, d (sessions), simulator (seed-tc58), 4 KiB: plain beats both efind and fast on simulated time (770 ms against 2997 ms and 3100 ms)."
    );
    assert!(!f[0].0);
    // not when the plain store is slower than either
    panel.bars[0] = runs_bar("plain[device=flashsim:preset=seed-tc58]", sim, &[3000e6]);
    assert!(gains::findings(std::slice::from_ref(&panel), &metrics, "efind", "fast").is_empty());
}

#[test]
fn figures_draw_equal_numbers_once() {
    let sim = "flashsim:preset=seed-tc58";
    // a query step: pages read equal on both devices and both durabilities
    let panel = Panel {
        workload: "w".into(),
        scale: "small".into(),
        step_index: 1,
        step_kind: "range_queries".into(),
        parameter: "selectivity=0.1%".into(),
        bars: vec![
            runs_bar(
                "efind[device=flashsim:preset=seed-tc58,efind.durability=none]",
                sim,
                &[7.0, 7.0],
            ),
            runs_bar(
                "efind[device=flashsim:preset=seed-tc58,efind.durability=group]",
                sim,
                &[7.0, 7.0],
            ),
            runs_bar(
                "efind[device=file,efind.durability=none]",
                "file",
                &[7.0, 7.0],
            ),
            runs_bar(
                "efind[device=file,efind.durability=group]",
                "file",
                &[7.0, 7.0],
            ),
            runs_bar("plain[device=file]", "file", &[9.0, 9.0]),
            runs_bar("plain[device=flashsim:preset=seed-tc58]", sim, &[9.0, 9.0]),
        ],
    };
    let metrics = vec!["pages_read".to_string()];
    let pooled = pooled_durabilities(&panel, &metrics).unwrap();
    assert_eq!(pooled, vec!["none".to_string(), "group".to_string()]);
    let styles = BTreeMap::new();
    let (fig, notes) = panel_figure(&panel, 0, "pages_read", &styles, Some(&pooled));
    // one facet (no durability rows), one bar per configuration, its runs pooled
    assert_eq!(fig.facets.len(), 1);
    let labels: Vec<&str> = fig.series.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(labels, vec!["efind", "plain"]);
    let efind = &fig.facets[0].bars[0];
    assert_eq!((efind.value, efind.runs.len()), (7.0, 8));
    assert!(fig.x_desc.is_empty(), "one page size: no x axis");
    assert!(notes.iter().any(|n| n.contains("pooled")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("drawn once")), "{notes:?}");
    // a build: durability matters, and a device with other numbers is kept apart
    let mut build = panel.clone();
    build.step_kind = "build".into();
    build.bars[2].values[0] = Some(8.0);
    assert_eq!(pooled_durabilities(&build, &metrics), None);
    let (fig, _) = panel_figure(&build, 0, "pages_read", &styles, None);
    assert_eq!(fig.facets.len(), 2);
    assert!(
        fig.series.iter().any(|s| s.0 == "efind · file"),
        "{:?}",
        fig.series
    );
}
