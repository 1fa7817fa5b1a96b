//! Parsing a `[[step]]` entry into a [`Step`]: the keys each kind takes,
//! their defaults and ranges, and windows files relative to the workload.
use std::path::Path;

use geoflash::engine::BulkMethod;
use geoflash::engine::Predicate;
use geoflash::{Error, Result};

use super::values::{as_selectivity, as_uint, Ctx};
use super::{RawStep, Val};
use crate::windows::Placement;
use crate::workload::model::{step_operations, BuildMethod, MixedQuery, Step, WindowSource};

/// Every step kind with the keys it takes.
const STEP_KEYS: &[(&str, &[&str])] = &[
    ("build", &["method", "bulk", "fill", "fraction"]),
    (
        "range_queries",
        &[
            "selectivity",
            "windows",
            "count",
            "aspect",
            "placement",
            "predicate",
            "repetitions",
            "seed",
        ],
    ),
    ("knn", &["k", "count", "placement", "seed"]),
    (
        "mixed",
        &[
            "operations",
            "insert_ratio",
            "selectivity",
            "predicate",
            "query",
            "seed",
        ],
    ),
    ("point_queries", &["group", "count", "seed"]),
    ("delete", &["fraction", "seed"]),
    ("checkpoint", &[]),
    (
        "move",
        &[
            "objects",
            "moves_per_commit",
            "commits",
            "step",
            "queries_between",
            "window",
            "seed",
        ],
    ),
    ("crash_and_recover", &["operations"]),
];

/// Parses `[[step]]` entry `i` (a windows file is relative to `base`).
pub(super) fn parse_step(cx: &Ctx, s: &RawStep, i: usize, base: &Path) -> Result<Step> {
    let key = |k: &str| format!("step[{i}].{k}");
    let kind = s.kind.get_ref().as_str();
    let Some((_, allowed)) = STEP_KEYS.iter().find(|(k, _)| *k == kind) else {
        let kinds: Vec<&str> = STEP_KEYS.iter().map(|(k, _)| *k).collect();
        return Err(cx.err(
            &s.kind.span(),
            &key("kind"),
            format!("unknown step kind {kind:?} (use {})", kinds.join(", ")),
        ));
    };
    let given: [(&str, &Val); 23] = [
        ("method", &s.method),
        ("bulk", &s.bulk),
        ("fill", &s.fill),
        ("fraction", &s.fraction),
        ("selectivity", &s.selectivity),
        ("windows", &s.windows),
        ("count", &s.count),
        ("aspect", &s.aspect),
        ("placement", &s.placement),
        ("predicate", &s.predicate),
        ("repetitions", &s.repetitions),
        ("seed", &s.seed),
        ("k", &s.k),
        ("operations", &s.operations),
        ("insert_ratio", &s.insert_ratio),
        ("query", &s.query),
        ("group", &s.group),
        ("objects", &s.objects),
        ("moves_per_commit", &s.moves_per_commit),
        ("commits", &s.commits),
        ("step", &s.step),
        ("queries_between", &s.queries_between),
        ("window", &s.window),
    ];
    for (k, v) in given {
        if let Some(v) = v {
            if !allowed.contains(&k) {
                return Err(cx.err(
                    &v.span(),
                    &key(k),
                    format!(
                        "does not apply to {kind} steps (they take: {})",
                        if allowed.is_empty() {
                            "nothing".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    let float_in = |v: &Val, k: &str, dflt: f64, lo: f64, hi: f64| -> Result<f64> {
        match v {
            None => Ok(dflt),
            Some(v) => {
                let f = cx.float(&v.span(), v.get_ref(), &key(k))?;
                if f > lo && f <= hi {
                    Ok(f)
                } else {
                    Err(cx.err(&v.span(), &key(k), format!("{f} must be in ({lo}, {hi}]")))
                }
            }
        }
    };
    let seed = match &s.seed {
        None => 1,
        Some(v) => cx.int(&v.span(), v.get_ref(), &key("seed"))?,
    };
    let predicate = match &s.predicate {
        None => Predicate::Intersects,
        Some(v) => {
            let p = cx.string(v, &key("predicate"))?;
            match p.as_str() {
                "intersects" => Predicate::Intersects,
                "contains" => Predicate::Contains,
                "within" => Predicate::Within,
                _ => {
                    return Err(cx.err(
                        &v.span(),
                        &key("predicate"),
                        format!("unknown predicate {p:?}: use intersects, contains or within"),
                    ))
                }
            }
        }
    };
    let placement = match &s.placement {
        None => Placement::Uniform,
        Some(v) => {
            let p = cx.string(v, &key("placement"))?;
            cx.at(&v.span(), &key("placement"), p.parse())?
        }
    };
    let count = |dflt: u64| -> Result<usize> {
        let n = match &s.count {
            None => dflt,
            Some(v) => cx.scaled(v, &key("count"))?,
        };
        let span = s.count.as_ref().map(|v| v.span()).unwrap_or(0..0);
        if n == 0 {
            return Err(cx.err(&span, &key("count"), "must be at least 1"));
        }
        cx.at(&span, &key("count"), step_operations(n, "count"))
    };
    Ok(match kind {
        "build" => {
            let method = match (&s.method, &s.bulk) {
                (None, None) => BuildMethod::Insert,
                (Some(m), b) => {
                    let m = cx.string(m, &key("method"))?;
                    match (m.as_str(), b) {
                        ("insert", None) => BuildMethod::Insert,
                        ("insert", Some(b)) => {
                            return Err(cx.err(
                                &b.span(),
                                &key("bulk"),
                                "applies to method = \"bulk\" only",
                            ))
                        }
                        ("bulk", None) => BuildMethod::Bulk(BulkMethod::Str),
                        ("bulk", Some(b)) => {
                            let bs = cx.string(b, &key("bulk"))?;
                            BuildMethod::Bulk(cx.at(&b.span(), &key("bulk"), bs.parse())?)
                        }
                        _ => {
                            let span = s.method.as_ref().map(|v| v.span()).unwrap_or(0..0);
                            return Err(cx.err(
                                &span,
                                &key("method"),
                                format!("unknown build method {m:?}: use insert or bulk"),
                            ));
                        }
                    }
                }
                (None, Some(b)) => {
                    let bs = cx.string(b, &key("bulk"))?;
                    BuildMethod::Bulk(cx.at(&b.span(), &key("bulk"), bs.parse())?)
                }
            };
            Step::Build {
                method,
                fill: float_in(&s.fill, "fill", 1.0, 0.0, 1.0)?,
                fraction: float_in(&s.fraction, "fraction", 1.0, 0.0, 1.0)?,
            }
        }
        "range_queries" => {
            let windows = match (&s.selectivity, &s.windows) {
                (Some(v), None) => {
                    let sels = cx.list(v, &key("selectivity"), as_selectivity)?;
                    let aspect = float_in(&s.aspect, "aspect", 1.0, 0.0, f64::MAX)?;
                    WindowSource::Generated {
                        selectivities: sels.iter().map(|x| x.0).collect(),
                        labels: sels.into_iter().map(|x| x.1).collect(),
                        count: count(100)?,
                        aspect,
                        placement,
                    }
                }
                (None, Some(w)) => {
                    for (k, v) in [
                        ("count", &s.count),
                        ("aspect", &s.aspect),
                        ("placement", &s.placement),
                    ] {
                        if let Some(v) = v {
                            return Err(cx.err(
                                &v.span(),
                                &key(k),
                                "applies to generated windows (selectivity), not to a windows file",
                            ));
                        }
                    }
                    let p = base.join(cx.string(w, &key("windows"))?);
                    if !p.is_file() {
                        return Err(cx.err(
                            &w.span(),
                            &key("windows"),
                            format!("windows file {} does not exist", p.display()),
                        ));
                    }
                    WindowSource::File(p)
                }
                (Some(v), Some(_)) => {
                    return Err(cx.err(
                        &v.span(),
                        &key("selectivity"),
                        "give either selectivity or windows, not both",
                    ))
                }
                (None, None) => {
                    return Err(cx.err(
                        &s.kind.span(),
                        &key("selectivity"),
                        "range_queries needs a selectivity (e.g. \"0.01%\") or a windows file",
                    ))
                }
            };
            let repetitions = match &s.repetitions {
                None => 1,
                Some(v) => {
                    let n = cx.scaled(v, &key("repetitions"))?;
                    u32::try_from(n)
                        .ok()
                        .filter(|n| (1..=10_000).contains(n))
                        .ok_or_else(|| {
                            cx.err(&v.span(), &key("repetitions"), "must be in 1..=10000")
                        })?
                }
            };
            Step::RangeQueries {
                windows,
                predicate,
                repetitions,
                seed,
            }
        }
        "knn" => {
            let k = match &s.k {
                None => vec![1],
                Some(v) => cx.list(v, &key("k"), |x| {
                    let n = as_uint(x)?;
                    if n == 0 {
                        return Err(Error::invalid("k must be at least 1"));
                    }
                    usize::try_from(n).map_err(|_| Error::invalid("k too large"))
                })?,
            };
            Step::Knn {
                k,
                count: count(100)?,
                placement,
                seed,
            }
        }
        "mixed" => {
            let operations = match &s.operations {
                None => {
                    return Err(cx.err(
                        &s.kind.span(),
                        &key("operations"),
                        "mixed needs a number of operations",
                    ))
                }
                Some(v) => {
                    let n = cx.scaled(v, &key("operations"))?;
                    cx.at(
                        &v.span(),
                        &key("operations"),
                        step_operations(n, "operations"),
                    )?
                }
            };
            let ratio = match &s.insert_ratio {
                None => 0.5,
                Some(v) => {
                    let f = cx.float(&v.span(), v.get_ref(), &key("insert_ratio"))?;
                    if !(0.0..=1.0).contains(&f) {
                        return Err(cx.err(&v.span(), &key("insert_ratio"), "must be in [0, 1]"));
                    }
                    f
                }
            };
            let selectivity = match &s.selectivity {
                None => 1e-4,
                Some(v) => {
                    cx.at(&v.span(), &key("selectivity"), as_selectivity(v.get_ref()))?
                        .0
                }
            };
            let query = match &s.query {
                None => MixedQuery::Range,
                Some(v) => match cx.string(v, &key("query"))?.as_str() {
                    "range" => MixedQuery::Range,
                    "point" => MixedQuery::Point,
                    other => {
                        return Err(cx.err(
                            &v.span(),
                            &key("query"),
                            format!("unknown query {other:?}: use range or point"),
                        ))
                    }
                },
            };
            Step::Mixed {
                operations,
                insert_ratio: ratio,
                selectivity,
                predicate,
                query,
                seed,
            }
        }
        "point_queries" => {
            let group = match &s.group {
                None => vec![1],
                Some(v) => cx.list(v, &key("group"), |x| {
                    let n = as_uint(x)?;
                    if n == 0 {
                        return Err(Error::invalid("a group holds at least 1 point"));
                    }
                    usize::try_from(n).map_err(|_| Error::invalid("group too large"))
                })?,
            };
            Step::PointQueries {
                group,
                count: count(100)?,
                seed,
            }
        }
        "delete" => Step::Delete {
            fraction: float_in(&s.fraction, "fraction", 0.1, 0.0, 1.0)?,
            seed,
        },
        "checkpoint" => Step::Checkpoint,
        "move" => {
            // A count of the step: absent is `dflt`; at least `min`.
            let n = |v: &Val, k: &str, dflt: Option<u64>, min: u64| -> Result<Option<usize>> {
                let Some(v) = v else {
                    return Ok(dflt.map(|d| d as usize));
                };
                let n = cx.scaled(v, &key(k))?;
                if n < min {
                    return Err(cx.err(&v.span(), &key(k), format!("must be at least {min}")));
                }
                cx.at(&v.span(), &key(k), step_operations(n, k)).map(Some)
            };
            let moves_per_commit =
                n(&s.moves_per_commit, "moves_per_commit", Some(1000), 1)?.unwrap_or(1000);
            let commits = n(&s.commits, "commits", None, 1)?.ok_or_else(|| {
                cx.err(
                    &s.kind.span(),
                    &key("commits"),
                    "move needs a number of commits",
                )
            })?;
            // The moves of the whole step, within the limit of one step.
            let total = (moves_per_commit as u64).saturating_mul(commits as u64);
            let span = s.commits.as_ref().map(|v| v.span()).unwrap_or(0..0);
            cx.at(
                &span,
                &key("commits"),
                step_operations(total, "moves_per_commit × commits"),
            )?;
            let window = match &s.window {
                None => 1e-4,
                Some(v) => {
                    cx.at(&v.span(), &key("window"), as_selectivity(v.get_ref()))?
                        .0
                }
            };
            Step::Move {
                objects: n(&s.objects, "objects", None, 1)?,
                moves_per_commit,
                commits,
                step: float_in(&s.step, "step", 0.0005, 0.0, 1.0)?,
                queries_between: n(&s.queries_between, "queries_between", Some(10), 0)?
                    .unwrap_or(10),
                window,
                seed,
            }
        }
        _ => {
            let operations = match &s.operations {
                None => 0,
                Some(v) => {
                    let n = cx.scaled(v, &key("operations"))?;
                    cx.at(
                        &v.span(),
                        &key("operations"),
                        step_operations(n, "operations"),
                    )?
                }
            };
            Step::CrashAndRecover { operations }
        }
    })
}
