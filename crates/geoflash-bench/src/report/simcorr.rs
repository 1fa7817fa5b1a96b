//! The simulator-vs-device view of a report: does the flash simulator rank
//! index configurations as the real device does? (The simulator paper's
//! question, answered there only by eye.)
//!
//! A configuration run on both a `flashsim:` device and a real `file`
//! device is one whose workload varies `device` over both (`device =
//! ["flashsim:preset=seed-tc58", "file"]`): its two expanded names differ
//! only in `device=`. Per workload step (and selectivity or k) and dataset
//! (order), over the configurations (index, split, store, page size, …)
//! present on both, the Spearman rank correlation of each simulator count
//! (simulated time, NAND reads, programs and erases, host pages read and
//! written) with the real device's elapsed wall time, each value the median
//! over repetitions. ρ = 1: the simulator orders the configurations exactly
//! as the device does; ρ is left out ("–") for fewer than 3 configurations
//! or when either side is constant.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use geoflash::engine::device::DeviceSpec;
use geoflash::Result;

use super::{median, without_param};
use crate::results::sql::Value;
use crate::results::ResultsStore;

/// The simulator's metrics correlated with the real device's wall time.
pub const SIM_METRICS: &[&str] = &[
    "sim_time_ns",
    "nand_reads",
    "nand_programs",
    "nand_erases",
    "pages_read",
    "pages_written",
];

/// The real device's metric.
pub const REAL_METRIC: &str = "wall_time_ns";

/// The average ranks (1-based) of `v`, ties sharing the mean of their ranks.
pub fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut out = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        // positions i..=j share ranks i+1..=j+1
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            out[k] = r;
        }
        i = j + 1;
    }
    out
}

/// Spearman's rank correlation of `x` and `y`: Pearson's correlation of
/// their average ranks. `None` when the lengths differ, for fewer than 3
/// pairs, or when either side is constant.
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 3 {
        return None;
    }
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in rx.iter().zip(&ry) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// One row of the view.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Correlation {
    /// Workload name.
    pub workload: String,
    /// Scale.
    pub scale: String,
    /// Step position.
    pub step_index: i64,
    /// Step kind.
    pub step_kind: String,
    /// The row's varied parameter (`selectivity=0.1%;predicate=intersects`).
    pub parameter: String,
    /// Dataset and insertion order: `name (order)`.
    pub dataset: String,
    /// The simulator's device spec.
    pub simulator: String,
    /// The real device's spec.
    pub device: String,
    /// Configurations run on both.
    pub configurations: usize,
    /// ρ of each of [`SIM_METRICS`] with the real wall time.
    pub rho: Vec<Option<f64>>,
}

/// Which side of the view a device spec is on.
fn side(device: &str) -> Option<bool> {
    match DeviceSpec::parse(device).ok()? {
        DeviceSpec::FlashSim { .. } => Some(true),
        DeviceSpec::File { .. } => Some(false),
        _ => None,
    }
}

/// (workload, scale, step index, step kind, parameter, dataset (order), simulator, device)
type Group = (String, String, i64, String, String, String, String, String);

/// (workload, scale, step index, step kind, parameter, dataset (order), configuration without device)
type ConfigKey = (String, String, i64, String, String, String, String);

/// A [`ConfigKey`] and a device spec.
type Key = (String, String, i64, String, String, String, String, String);

/// The rows of the view from the `ok` results of `store`.
pub fn correlations(store: &mut ResultsStore) -> Result<Vec<Correlation>> {
    let metrics: Vec<String> = SIM_METRICS
        .iter()
        .chain(std::iter::once(&REAL_METRIC))
        .map(|m| format!("CAST({m} AS DOUBLE PRECISION)"))
        .collect();
    let rows = store.query(
        &format!(
            "SELECT workload, scale, step_index, step_kind, parameter, dataset, insertion_order,
                    index_name, device, {}
             FROM results_full WHERE status = 'ok'",
            metrics.join(", ")
        ),
        &[],
    )?;
    // (panel, dataset, configuration without device, device) -> samples of each metric
    let mut samples: BTreeMap<Key, Vec<Vec<f64>>> = BTreeMap::new();
    for r in &rows {
        let text = |i: usize| r.get(i).and_then(Value::as_str).unwrap_or("").to_string();
        let device = text(8);
        if side(&device).is_none() {
            continue;
        }
        let key = (
            text(0),
            text(1),
            r.get(2).and_then(Value::as_i64).unwrap_or(0),
            text(3),
            text(4),
            format!("{} ({})", text(5), text(6)),
            without_param(&text(7), "device"),
            device,
        );
        let values = (9..9 + SIM_METRICS.len() + 1)
            .map(|i| r.get(i).and_then(Value::as_f64).unwrap_or(0.0))
            .collect();
        samples.entry(key).or_default().push(values);
    }
    // medians over repetitions; each configuration's simulator and real runs side by side
    type Pair = (Vec<(String, Vec<f64>)>, Vec<(String, f64)>);
    let mut configs: BTreeMap<ConfigKey, Pair> = BTreeMap::new();
    for ((workload, scale, step, kind, param, dataset, config, device), reps) in samples {
        let med: Vec<f64> = (0..=SIM_METRICS.len())
            .map(|m| median(reps.iter().filter_map(|v| v.get(m).copied()).collect()))
            .collect();
        let (sim, real) = configs
            .entry((workload, scale, step, kind, param, dataset, config))
            .or_default();
        match side(&device) {
            Some(true) => sim.push((device, med)),
            Some(false) => real.push((device, med.last().copied().unwrap_or(0.0))),
            None => {}
        }
    }
    let mut groups: BTreeMap<Group, Vec<(Vec<f64>, f64)>> = BTreeMap::new();
    for ((workload, scale, step, kind, param, dataset, _), (sims, reals)) in configs {
        for (sd, sv) in &sims {
            for (rd, rv) in &reals {
                let g = (
                    workload.clone(),
                    scale.clone(),
                    step,
                    kind.clone(),
                    param.clone(),
                    dataset.clone(),
                    sd.clone(),
                    rd.clone(),
                );
                groups.entry(g).or_default().push((sv.clone(), *rv));
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(g, pairs)| {
            let real: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            let rho = (0..SIM_METRICS.len())
                .map(|m| {
                    let sim: Vec<f64> = pairs
                        .iter()
                        .map(|p| p.0.get(m).copied().unwrap_or(0.0))
                        .collect();
                    spearman(&sim, &real)
                })
                .collect();
            Correlation {
                workload: g.0,
                scale: g.1,
                step_index: g.2,
                step_kind: g.3,
                parameter: g.4,
                dataset: g.5,
                simulator: g.6,
                device: g.7,
                configurations: pairs.len(),
                rho,
            }
        })
        .collect())
}

fn fmt_rho(r: Option<f64>) -> String {
    r.map(|r| format!("{r:+.2}")).unwrap_or_else(|| "–".into())
}

/// The header cells of the table.
fn header() -> Vec<String> {
    let mut h: Vec<String> = [
        "workload",
        "step",
        "dataset (order)",
        "simulator",
        "device",
        "configurations",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    h.extend(SIM_METRICS.iter().map(|m| format!("ρ {m}")));
    h
}

fn cells(c: &Correlation) -> Vec<String> {
    let step = if c.parameter.is_empty() {
        format!("{} {}", c.step_index, c.step_kind)
    } else {
        format!("{} {} [{}]", c.step_index, c.step_kind, c.parameter)
    };
    let mut v = vec![
        format!("{} ({})", c.workload, c.scale),
        step,
        c.dataset.clone(),
        super::gains::device_label(&c.simulator),
        super::gains::device_label(&c.device),
        c.configurations.to_string(),
    ];
    v.extend(c.rho.iter().map(|r| fmt_rho(*r)));
    v
}

/// The view as a Markdown table.
pub fn markdown(rows: &[Correlation]) -> String {
    let h = header();
    let mut md = format!("| {} |\n|{}\n", h.join(" | "), "---|".repeat(h.len()));
    for c in rows {
        let _ = writeln!(md, "| {} |", cells(c).join(" | "));
    }
    md
}

/// The view as an HTML table (cells escaped by `escape`).
pub fn html(rows: &[Correlation], escape: impl Fn(&str) -> String) -> String {
    let mut s = String::from("<div class=\"wide\"><table><tr>");
    for h in header() {
        let _ = write!(s, "<th>{}</th>", escape(&h));
    }
    s.push_str("</tr>\n");
    for c in rows {
        s.push_str("<tr>");
        for cell in cells(c) {
            let _ = write!(s, "<td>{}</td>", escape(&cell));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table></div>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{ConfigRow, StepRow};
    use geoflash::metrics::Stats;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(ranks(&[3.0, 1.0, 2.0, 2.0]), vec![4.0, 1.0, 2.5, 2.5]);
        let r = spearman(&[1.0, 2.0, 3.0, 4.0], &[10.0, 20.0, 40.0, 30.0]).unwrap();
        assert!((r - 0.8).abs() < 1e-12, "{r}");
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[9.0, 5.0, 1.0]), Some(-1.0));
        // ties: Pearson on average ranks, 4.5 / sqrt(4.5 * 5)
        let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((r - 4.5 / (4.5f64 * 5.0).sqrt()).abs() < 1e-12, "{r}");
        assert_eq!(spearman(&[1.0, 2.0], &[1.0, 2.0]), None);
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman(&[1.0, 2.0, 3.0], &[1.0, 2.0]), None);
    }

    /// A permutation of 0..n from random keys.
    fn permutation(keys: &[u32]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..keys.len()).collect();
        idx.sort_by_key(|&i| (keys[i], i));
        let mut out = vec![0.0; keys.len()];
        for (rank, &i) in idx.iter().enumerate() {
            out[i] = rank as f64;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(geoflash::testenv::proptest_cases()))]

        /// Without ties, ρ = 1 − 6 Σd² / (n(n² − 1)); monotone transforms
        /// change nothing; ρ is symmetric and reversing one side negates it.
        #[test]
        fn matches_the_textbook_formula(keys in proptest::collection::vec((any::<u32>(), any::<u32>()), 3..40)) {
            let x = permutation(&keys.iter().map(|k| k.0).collect::<Vec<_>>());
            let y = permutation(&keys.iter().map(|k| k.1).collect::<Vec<_>>());
            let n = x.len() as f64;
            let d2: f64 = x.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum();
            let want = 1.0 - 6.0 * d2 / (n * (n * n - 1.0));
            let got = spearman(&x, &y).unwrap();
            prop_assert!((got - want).abs() < 1e-9, "{got} vs {want}");
            let warped: Vec<f64> = x.iter().map(|v| (v * 0.37).exp() + 5.0).collect();
            prop_assert!((spearman(&warped, &y).unwrap() - got).abs() < 1e-9);
            prop_assert!((spearman(&y, &x).unwrap() - got).abs() < 1e-9);
            let neg: Vec<f64> = y.iter().map(|v| -v).collect();
            prop_assert!((spearman(&x, &neg).unwrap() + got).abs() < 1e-9);
        }

        /// With ties: the brute-force definition (Pearson on average ranks
        /// computed by counting) and the bounds.
        #[test]
        fn ties_by_brute_force(v in proptest::collection::vec((0u8..5, 0u8..5), 3..25)) {
            let x: Vec<f64> = v.iter().map(|p| f64::from(p.0)).collect();
            let y: Vec<f64> = v.iter().map(|p| f64::from(p.1)).collect();
            let brute_rank = |s: &[f64], i: usize| {
                let less = s.iter().filter(|w| **w < s[i]).count() as f64;
                let equal = s.iter().filter(|w| **w == s[i]).count() as f64;
                less + (equal + 1.0) / 2.0
            };
            let rx: Vec<f64> = (0..x.len()).map(|i| brute_rank(&x, i)).collect();
            let ry: Vec<f64> = (0..y.len()).map(|i| brute_rank(&y, i)).collect();
            prop_assert_eq!(&ranks(&x), &rx);
            let n = rx.len() as f64;
            let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
            let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
            let vx: f64 = rx.iter().map(|a| (a - mx).powi(2)).sum();
            let vy: f64 = ry.iter().map(|b| (b - my).powi(2)).sum();
            match spearman(&x, &y) {
                None => prop_assert!(vx == 0.0 || vy == 0.0),
                Some(r) => {
                    prop_assert!((r - cov / (vx * vy).sqrt()).abs() < 1e-9);
                    prop_assert!((-1.0..=1.0).contains(&r));
                }
            }
        }
    }

    /// Records configuration `name` on `device` with the build step's
    /// simulated and wall times, once per repetition.
    fn add(
        st: &mut ResultsStore,
        run: i64,
        name: &str,
        device: &str,
        page: u64,
        reps: &[(u64, u64)],
    ) {
        for (rep, &(sim, wall)) in reps.iter().enumerate() {
            let key = format!("{name}/{device}/{page}/{rep}");
            let c = st
                .begin_configuration(
                    run,
                    &ConfigRow {
                        key: &key,
                        workload: "w",
                        scale: "smoke",
                        dataset: "d",
                        insertion_order: "random",
                        dataset_count: 10,
                        index_name: &format!("{name}[page_size={page},device={device}]"),
                        index_kind: "rstar",
                        split: "quadratic",
                        page_size: page,
                        store: "plain",
                        buffer_bytes: 1024,
                        buffer_policy: "lru",
                        device,
                        repetition: rep as u32,
                        config_json: "{}",
                    },
                )
                .unwrap();
            let mut s = Stats::new("build");
            // (a real device's row stores NULL for the simulator's metrics)
            s.device_simulated = device.starts_with("flashsim");
            s.sim.sim_time_ns = sim;
            s.sim.nand_erases = sim % 3;
            s.wall_time_ns = wall;
            st.record(run, c, &StepRow::ok("build", &s)).unwrap();
        }
    }

    #[test]
    fn synthetic_results_with_a_known_answer() {
        let sim = "flashsim:preset=seed-tc58";
        let mut st = ResultsStore::in_memory().unwrap();
        let run = st.begin_run("w", "w.toml", "", "smoke", "test").unwrap();
        // Four configurations on both devices: simulated times rank 1 2 3 4,
        // real times (medians of three repetitions) 10 20 40 30: ρ = 0.8.
        add(&mut st, run, "a", sim, 2048, &[(100, 10)]);
        add(
            &mut st,
            run,
            "a",
            "file",
            2048,
            &[(0, 9), (0, 10), (0, 500)],
        );
        add(&mut st, run, "b", sim, 2048, &[(200, 1)]);
        add(&mut st, run, "b", "file", 2048, &[(0, 20)]);
        add(&mut st, run, "a", sim, 4096, &[(300, 1)]);
        add(&mut st, run, "a", "file", 4096, &[(0, 40)]);
        add(&mut st, run, "c", sim, 4096, &[(400, 1)]);
        add(&mut st, run, "c", "file", 4096, &[(0, 30)]);
        // only on one device, or on neither kind: left out
        add(&mut st, run, "d", sim, 2048, &[(50, 1)]);
        add(&mut st, run, "e", "file", 2048, &[(0, 1)]);
        add(&mut st, run, "a", "mem:", 2048, &[(0, 1)]);
        let rows = correlations(&mut st).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!(
            (r.simulator.as_str(), r.device.as_str(), r.configurations),
            (sim, "file", 4)
        );
        assert!((r.rho[0].unwrap() - 0.8).abs() < 1e-12, "{:?}", r.rho);
        // the simulator's NAND reads are all 0: no correlation
        assert_eq!(r.rho[1], None);
        let md = markdown(&rows);
        assert!(md.contains("| w (smoke) | 0 build | d (random) | simulator (seed-tc58) | file | 4 | +0.80 | – |"), "{md}");
        // in the report
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.sqlite");
        let mut file = ResultsStore::open(&db).unwrap();
        let run = file.begin_run("w", "w.toml", "", "smoke", "test").unwrap();
        add(&mut file, run, "a", sim, 2048, &[(1, 3)]);
        add(&mut file, run, "a", "file", 2048, &[(0, 3)]);
        add(&mut file, run, "b", sim, 2048, &[(2, 3)]);
        add(&mut file, run, "b", "file", 2048, &[(0, 2)]);
        add(&mut file, run, "c", sim, 2048, &[(3, 3)]);
        add(&mut file, run, "c", "file", 2048, &[(0, 1)]);
        drop(file);
        let out = dir.path().join("report");
        let s = crate::report::write_report(
            &crate::results::ResultsLocation::Sqlite(db),
            &out,
            &crate::report::ReportOptions::default(),
        )
        .unwrap();
        assert_eq!(s.sim_vs_device, 1);
        let html = std::fs::read_to_string(&s.html).unwrap();
        assert!(
            html.contains("Simulator vs device") && html.contains("<td>-1.00</td>"),
            "{html}"
        );
        let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
        assert!(md.contains("## Simulator vs device"));
    }
}
