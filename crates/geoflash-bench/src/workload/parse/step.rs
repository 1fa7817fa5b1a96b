//! Parsing a `[[step]]` entry into a [`Step`]: the keys each kind takes,
//! their defaults and ranges, and windows files relative to the workload.
use std::path::Path;

use geoflash::engine::BulkMethod;
use geoflash::engine::Predicate;
use geoflash::{Error, Result};

use toml::Spanned;

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
    let p = StepParser { cx, s, i };
    let kind = s.kind.get_ref().as_str();
    let Some((_, allowed)) = STEP_KEYS.iter().find(|(k, _)| *k == kind) else {
        let kinds: Vec<&str> = STEP_KEYS.iter().map(|(k, _)| *k).collect();
        return Err(p.err(
            &s.kind.span(),
            "kind",
            format!("unknown step kind {kind:?} (use {})", kinds.join(", ")),
        ));
    };
    p.check_keys(kind, allowed)?;
    Ok(match kind {
        "build" => p.build()?,
        "range_queries" => p.range_queries(base)?,
        "knn" => Step::Knn {
            k: p.positive_list(&s.k, "k", "k must be at least 1", "k too large")?,
            count: p.count(100)?,
            placement: p.placement()?,
            seed: p.seed()?,
        },
        "mixed" => p.mixed()?,
        "point_queries" => Step::PointQueries {
            group: p.positive_list(
                &s.group,
                "group",
                "a group holds at least 1 point",
                "group too large",
            )?,
            count: p.count(100)?,
            seed: p.seed()?,
        },
        "delete" => Step::Delete {
            fraction: p.float_in(&s.fraction, "fraction", 0.1, 0.0, 1.0)?,
            seed: p.seed()?,
        },
        "checkpoint" => Step::Checkpoint,
        "move" => p.moving()?,
        _ => Step::CrashAndRecover {
            operations: p.operations()?.unwrap_or(0),
        },
    })
}

/// One `[[step]]` entry being parsed: its values, each error naming
/// `step[i].KEY` and its line.
struct StepParser<'a> {
    cx: &'a Ctx<'a>,
    s: &'a RawStep,
    i: usize,
}

impl StepParser<'_> {
    /// `step[i].k`.
    fn key(&self, k: &str) -> String {
        format!("step[{}].{k}", self.i)
    }

    /// An error at `span` naming key `k`.
    fn err(&self, span: &std::ops::Range<usize>, k: &str, msg: impl std::fmt::Display) -> Error {
        self.cx.err(span, &self.key(k), msg)
    }

    /// Refuses a key given that steps of `kind` do not take.
    fn check_keys(&self, kind: &str, allowed: &[&str]) -> Result<()> {
        let s = self.s;
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
                    let takes = if allowed.is_empty() {
                        "nothing".to_string()
                    } else {
                        allowed.join(", ")
                    };
                    return Err(self.err(
                        &v.span(),
                        k,
                        format!("does not apply to {kind} steps (they take: {takes})"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A float in (`lo`, `hi`]; `dflt` when absent.
    fn float_in(&self, v: &Val, k: &str, dflt: f64, lo: f64, hi: f64) -> Result<f64> {
        match v {
            None => Ok(dflt),
            Some(v) => {
                let f = self.cx.float(&v.span(), v.get_ref(), &self.key(k))?;
                if f > lo && f <= hi {
                    Ok(f)
                } else {
                    Err(self.err(&v.span(), k, format!("{f} must be in ({lo}, {hi}]")))
                }
            }
        }
    }

    /// `seed`, 1 by default.
    fn seed(&self) -> Result<u64> {
        match &self.s.seed {
            None => Ok(1),
            Some(v) => self.cx.int(&v.span(), v.get_ref(), &self.key("seed")),
        }
    }

    /// `predicate`, intersects by default.
    fn predicate(&self) -> Result<Predicate> {
        let Some(v) = &self.s.predicate else {
            return Ok(Predicate::Intersects);
        };
        let p = self.cx.string(v, &self.key("predicate"))?;
        match p.as_str() {
            "intersects" => Ok(Predicate::Intersects),
            "contains" => Ok(Predicate::Contains),
            "within" => Ok(Predicate::Within),
            _ => Err(self.err(
                &v.span(),
                "predicate",
                format!("unknown predicate {p:?}: use intersects, contains or within"),
            )),
        }
    }

    /// `placement` of generated windows or points, uniform by default.
    fn placement(&self) -> Result<Placement> {
        match &self.s.placement {
            None => Ok(Placement::Uniform),
            Some(v) => {
                let p = self.cx.string(v, &self.key("placement"))?;
                self.cx.at(&v.span(), &self.key("placement"), p.parse())
            }
        }
    }

    /// `count` (scaled), `dflt` when absent; at least 1.
    fn count(&self, dflt: u64) -> Result<usize> {
        let n = match &self.s.count {
            None => dflt,
            Some(v) => self.cx.scaled(v, &self.key("count"))?,
        };
        let span = self.s.count.as_ref().map(|v| v.span()).unwrap_or(0..0);
        if n == 0 {
            return Err(self.err(&span, "count", "must be at least 1"));
        }
        self.cx
            .at(&span, &self.key("count"), step_operations(n, "count"))
    }

    /// `operations` (scaled), if given.
    fn operations(&self) -> Result<Option<usize>> {
        let Some(v) = &self.s.operations else {
            return Ok(None);
        };
        let k = self.key("operations");
        let n = self.cx.scaled(v, &k)?;
        self.cx
            .at(&v.span(), &k, step_operations(n, "operations"))
            .map(Some)
    }

    /// A selectivity (`"0.01%"` or a fraction), `dflt` when absent.
    fn selectivity(&self, v: &Val, k: &str, dflt: f64) -> Result<f64> {
        match v {
            None => Ok(dflt),
            Some(v) => Ok(self
                .cx
                .at(&v.span(), &self.key(k), as_selectivity(v.get_ref()))?
                .0),
        }
    }

    /// A list of positive integers (`k`, `group`), `[1]` when absent.
    fn positive_list(
        &self,
        v: &Val,
        k: &str,
        zero: &'static str,
        too_large: &'static str,
    ) -> Result<Vec<usize>> {
        match v {
            None => Ok(vec![1]),
            Some(v) => self.cx.list(v, &self.key(k), |x| {
                let n = as_uint(x)?;
                if n == 0 {
                    return Err(Error::invalid(zero));
                }
                usize::try_from(n).map_err(|_| Error::invalid(too_large))
            }),
        }
    }

    /// A `build` step: by insertion, or bulk loading by `bulk`.
    fn build(&self) -> Result<Step> {
        let s = self.s;
        let bulk = |b: &Spanned<toml::Value>| -> Result<BuildMethod> {
            let bs = self.cx.string(b, &self.key("bulk"))?;
            Ok(BuildMethod::Bulk(self.cx.at(
                &b.span(),
                &self.key("bulk"),
                bs.parse(),
            )?))
        };
        let method = match (&s.method, &s.bulk) {
            (None, None) => BuildMethod::Insert,
            (None, Some(b)) => bulk(b)?,
            (Some(m), b) => match (self.cx.string(m, &self.key("method"))?.as_str(), b) {
                ("insert", None) => BuildMethod::Insert,
                ("insert", Some(b)) => {
                    return Err(self.err(&b.span(), "bulk", "applies to method = \"bulk\" only"))
                }
                ("bulk", None) => BuildMethod::Bulk(BulkMethod::Str),
                ("bulk", Some(b)) => bulk(b)?,
                (m, _) => {
                    return Err(self.err(
                        &m_span(s),
                        "method",
                        format!("unknown build method {m:?}: use insert or bulk"),
                    ))
                }
            },
        };
        Ok(Step::Build {
            method,
            fill: self.float_in(&s.fill, "fill", 1.0, 0.0, 1.0)?,
            fraction: self.float_in(&s.fraction, "fraction", 1.0, 0.0, 1.0)?,
        })
    }

    /// A `range_queries` step: generated windows or a windows file.
    fn range_queries(&self, base: &Path) -> Result<Step> {
        let s = self.s;
        let windows = match (&s.selectivity, &s.windows) {
            (Some(v), None) => {
                let sels = self.cx.list(v, &self.key("selectivity"), as_selectivity)?;
                let aspect = self.float_in(&s.aspect, "aspect", 1.0, 0.0, f64::MAX)?;
                WindowSource::Generated {
                    selectivities: sels.iter().map(|x| x.0).collect(),
                    labels: sels.into_iter().map(|x| x.1).collect(),
                    count: self.count(100)?,
                    aspect,
                    placement: self.placement()?,
                }
            }
            (None, Some(w)) => self.windows_file(w, base)?,
            (Some(v), Some(_)) => {
                return Err(self.err(
                    &v.span(),
                    "selectivity",
                    "give either selectivity or windows, not both",
                ))
            }
            (None, None) => {
                return Err(self.err(
                    &s.kind.span(),
                    "selectivity",
                    "range_queries needs a selectivity (e.g. \"0.01%\") or a windows file",
                ))
            }
        };
        let repetitions = match &s.repetitions {
            None => 1,
            Some(v) => {
                let n = self.cx.scaled(v, &self.key("repetitions"))?;
                u32::try_from(n)
                    .ok()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or_else(|| self.err(&v.span(), "repetitions", "must be in 1..=10000"))?
            }
        };
        Ok(Step::RangeQueries {
            windows,
            predicate: self.predicate()?,
            repetitions,
            seed: self.seed()?,
        })
    }

    /// The windows file `w` (relative to `base`), which must exist; the keys
    /// of generated windows do not apply.
    fn windows_file(&self, w: &Spanned<toml::Value>, base: &Path) -> Result<WindowSource> {
        let s = self.s;
        for (k, v) in [
            ("count", &s.count),
            ("aspect", &s.aspect),
            ("placement", &s.placement),
        ] {
            if let Some(v) = v {
                return Err(self.err(
                    &v.span(),
                    k,
                    "applies to generated windows (selectivity), not to a windows file",
                ));
            }
        }
        let p = base.join(self.cx.string(w, &self.key("windows"))?);
        if !p.is_file() {
            return Err(self.err(
                &w.span(),
                "windows",
                format!("windows file {} does not exist", p.display()),
            ));
        }
        Ok(WindowSource::File(p))
    }

    /// A `mixed` step: insertions and queries.
    fn mixed(&self) -> Result<Step> {
        let s = self.s;
        let operations = self.operations()?.ok_or_else(|| {
            self.err(
                &s.kind.span(),
                "operations",
                "mixed needs a number of operations",
            )
        })?;
        if operations == 0 {
            let span = s.operations.as_ref().map(|v| v.span()).unwrap_or(0..0);
            return Err(self.err(&span, "operations", "must be at least 1"));
        }
        let insert_ratio = match &s.insert_ratio {
            None => 0.5,
            Some(v) => {
                let f = self
                    .cx
                    .float(&v.span(), v.get_ref(), &self.key("insert_ratio"))?;
                if !(0.0..=1.0).contains(&f) {
                    return Err(self.err(&v.span(), "insert_ratio", "must be in [0, 1]"));
                }
                f
            }
        };
        let query = match &s.query {
            None => MixedQuery::Range,
            Some(v) => match self.cx.string(v, &self.key("query"))?.as_str() {
                "range" => MixedQuery::Range,
                "point" => MixedQuery::Point,
                other => {
                    return Err(self.err(
                        &v.span(),
                        "query",
                        format!("unknown query {other:?}: use range or point"),
                    ))
                }
            },
        };
        Ok(Step::Mixed {
            operations,
            insert_ratio,
            selectivity: self.selectivity(&s.selectivity, "selectivity", 1e-4)?,
            predicate: self.predicate()?,
            query,
            seed: self.seed()?,
        })
    }

    /// A count of a `move` step: absent is `dflt`; at least `min`.
    fn move_count(&self, v: &Val, k: &str, dflt: Option<u64>, min: u64) -> Result<Option<usize>> {
        let Some(v) = v else {
            return Ok(dflt.map(|d| d as usize));
        };
        let n = self.cx.scaled(v, &self.key(k))?;
        if n < min {
            return Err(self.err(&v.span(), k, format!("must be at least {min}")));
        }
        self.cx
            .at(&v.span(), &self.key(k), step_operations(n, k))
            .map(Some)
    }

    /// A `move` step: commits of moves of objects.
    fn moving(&self) -> Result<Step> {
        let s = self.s;
        let moves_per_commit = self
            .move_count(&s.moves_per_commit, "moves_per_commit", Some(1000), 1)?
            .unwrap_or(1000);
        let commits = self
            .move_count(&s.commits, "commits", None, 1)?
            .ok_or_else(|| self.err(&s.kind.span(), "commits", "move needs a number of commits"))?;
        // The moves of the whole step, within the limit of one step.
        let total = (moves_per_commit as u64).saturating_mul(commits as u64);
        let span = s.commits.as_ref().map(|v| v.span()).unwrap_or(0..0);
        self.cx.at(
            &span,
            &self.key("commits"),
            step_operations(total, "moves_per_commit × commits"),
        )?;
        Ok(Step::Move {
            objects: self.move_count(&s.objects, "objects", None, 1)?,
            moves_per_commit,
            commits,
            step: self.float_in(&s.step, "step", 0.0005, 0.0, 1.0)?,
            queries_between: self
                .move_count(&s.queries_between, "queries_between", Some(10), 0)?
                .unwrap_or(10),
            window: self.selectivity(&s.window, "window", 1e-4)?,
            seed: self.seed()?,
        })
    }
}

/// The span of a step's `method`, if given.
fn m_span(s: &RawStep) -> std::ops::Range<usize> {
    s.method.as_ref().map(|v| v.span()).unwrap_or(0..0)
}
