//! What one durable commit of moves costs as the index grows (issue 43,
//! item 2): per-commit wall time and the engine's counters per move.
//!
//! Opens an index built beforehand (ids `0 .. N`, e.g. `geoflash generate
//! --distribution uniform --geometry box --count N` then `geoflash build
//! --bulk hilbert`), reads every object's rectangle once, then runs
//! `COMMITS` commits of `MOVES` moves each, as the peer benchmark's moving
//! phase does through Python's `update_batch`: one
//! [`BatchDurability::Commit`] batch per commit, each move an
//! [`Index::update_by_id`] of a distinct random object shifted by a
//! uniform offset of at most `SHIFT` of the extent's width (height) in x
//! (y), its size unchanged. The first commit builds the id locator (one
//! query over the whole index) and is reported apart. Prints the
//! distribution of the other commits' wall times (and of their moves
//! alone, before the batch's end syncs the log) and the differences of
//! [`Index::stats`] per move over them; `--json` prints one JSON record.
//! `--no-warm` applies the moves without [`Index::warm_for_updates`] (for
//! comparison). `--crash` exits after the last commit without closing (a killed
//! writer: the commits are in the log, for the next open to replay).
//!
//! ```sh no-run
//! geoflash generate --distribution uniform --geometry box --count 10000000 --seed 7 --out /tmp/u10m.csv
//! geoflash build --input /tmp/u10m.csv --index /tmp/u10m --bulk hilbert
//! cargo run --release -p geoflash --example moving_commits -- --index /tmp/u10m --commits 200
//! ```
use std::path::PathBuf;
use std::time::Instant;

use geoflash::engine::{Access, Predicate};
use geoflash::geom::Rect;
use geoflash::{BatchDurability, Error, Index, Result};
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The counters reported per move (names of [`geoflash::metrics::Stats`]'s JSON fields).
const COUNTERS: &[&str] = &[
    "updates_in_place",
    "reinsertions",
    "splits",
    "node_gets",
    "buffer_misses",
    "node_reads",
    "pages_read",
    "pages_written",
    "bytes_written",
    "flushes",
    "flushed_nodes",
    "syncs",
    "log_syncs",
    "log_bytes",
    "page_images",
    "compactions",
    "forced_flushes",
];

struct Args {
    index: PathBuf,
    commits: usize,
    moves: usize,
    shift: f64,
    seed: u64,
    json: bool,
    crash: bool,
    no_warm: bool,
}

fn parse_args() -> Result<Args> {
    let mut a = Args {
        index: PathBuf::new(),
        commits: 100,
        moves: 1000,
        shift: 0.0005,
        seed: 11,
        json: false,
        crash: false,
        no_warm: false,
    };
    let mut it = std::env::args().skip(1);
    let bad = |flag: &str, v: &str| Error::invalid(format!("{flag}: cannot read {v:?}"));
    while let Some(flag) = it.next() {
        if flag == "--json" {
            a.json = true;
            continue;
        }
        if flag == "--crash" {
            a.crash = true;
            continue;
        }
        if flag == "--no-warm" {
            a.no_warm = true;
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| Error::invalid(format!("{flag} needs a value")))?;
        match flag.as_str() {
            "--index" => a.index = PathBuf::from(&v),
            "--commits" => a.commits = v.parse().map_err(|_| bad(&flag, &v))?,
            "--moves" => a.moves = v.parse().map_err(|_| bad(&flag, &v))?,
            "--shift" => a.shift = v.parse().map_err(|_| bad(&flag, &v))?,
            "--seed" => a.seed = v.parse().map_err(|_| bad(&flag, &v))?,
            _ => return Err(Error::invalid(format!("unknown flag {flag}"))),
        }
    }
    if a.index.as_os_str().is_empty() {
        return Err(Error::invalid(
            "usage: moving_commits --index DIR [--commits C] [--moves M] [--shift F] [--seed S] [--json] [--crash] [--no-warm]",
        ));
    }
    Ok(a)
}

/// The numeric fields of `index`'s counters.
fn counters(index: &Index) -> Result<serde_json::Map<String, serde_json::Value>> {
    let text = index.stats("moving").to_json()?;
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(Error::invalid("the index's counters are not a JSON object")),
    }
}

fn field(m: &serde_json::Map<String, serde_json::Value>, k: &str) -> f64 {
    m.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0)
}

/// The `p`-quantile of sorted `v` (nearest rank).
fn quantile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// One commit of `ids` moved to `boxes`: its wall time and that of its
/// moves alone (the rest is the batch's end: the log's sync), in ms.
/// `warm`: each `WARM_BATCH` moves are announced with
/// [`Index::warm_before_update`] first, as Python's `update_batch` does.
fn commit(index: &mut Index, ids: &[u64], boxes: &[Rect], warm: bool) -> Result<(f64, f64)> {
    let t = Instant::now();
    let mut moves_ms = 0.0;
    index.batch(BatchDurability::Commit, |index| {
        for (i, (&id, &r)) in ids.iter().zip(boxes).enumerate() {
            if warm {
                index.warm_before_update(i, ids);
            }
            index.update_by_id(id, r)?;
        }
        moves_ms = t.elapsed().as_secs_f64() * 1e3;
        Ok(())
    })?;
    Ok((t.elapsed().as_secs_f64() * 1e3, moves_ms))
}

fn run() -> Result<()> {
    let a = parse_args()?;
    let mut index = Index::open(&a.index, Access::Write)?;
    let n = index.len();
    let all = index.query(Rect::world(), Predicate::Intersects)?;
    let mut rects = vec![None; n as usize];
    for h in all.hits {
        if let Some(slot) = rects.get_mut(h.id as usize) {
            *slot = Some(h.rect);
        }
    }
    let rects: Vec<Rect> = rects
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.ok_or_else(|| {
                Error::invalid(format!("the index has no object {i}: ids must be 0 .. {n}"))
            })
        })
        .collect::<Result<_>>()?;
    let extent = index
        .bounds()?
        .ok_or_else(|| Error::invalid("the index is empty"))?;
    let (dx, dy) = (
        (extent.max_x() - extent.min_x()) * a.shift,
        (extent.max_y() - extent.min_y()) * a.shift,
    );
    let mut rects = rects;
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    let mut plan = |rects: &mut Vec<Rect>| -> Result<(Vec<u64>, Vec<Rect>)> {
        let ids: Vec<u64> = sample(&mut rng, rects.len(), a.moves.min(rects.len()))
            .into_iter()
            .map(|i| i as u64)
            .collect();
        let mut boxes = Vec::with_capacity(ids.len());
        for &id in &ids {
            let r = rects[id as usize];
            let (ox, oy) = (rng.gen_range(-dx..=dx), rng.gen_range(-dy..=dy));
            let m = Rect::new(
                r.min_x() + ox,
                r.min_y() + oy,
                r.max_x() + ox,
                r.max_y() + oy,
            )?;
            rects[id as usize] = m;
            boxes.push(m);
        }
        Ok((ids, boxes))
    };
    let (ids, boxes) = plan(&mut rects)?;
    let (first_ms, _) = commit(&mut index, &ids, &boxes, !a.no_warm)?;
    let before = counters(&index)?;
    let (mut times, mut moves_times) = (Vec::with_capacity(a.commits), Vec::new());
    let t = Instant::now();
    for _ in 0..a.commits {
        let (ids, boxes) = plan(&mut rects)?;
        let (ms, moves_ms) = commit(&mut index, &ids, &boxes, !a.no_warm)?;
        times.push(ms);
        moves_times.push(moves_ms);
    }
    moves_times.sort_by(f64::total_cmp);
    let total_s = t.elapsed().as_secs_f64();
    let after = counters(&index)?;
    let moves = (a.commits * a.moves) as f64;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let per_move: Vec<(&str, f64)> = COUNTERS
        .iter()
        .map(|&k| (k, (field(&after, k) - field(&before, k)) / moves.max(1.0)))
        .collect();
    let by_level = |m: &serde_json::Map<String, serde_json::Value>| -> Vec<f64> {
        m.get("node_reads_by_level")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
            .unwrap_or_default()
    };
    let (b, e) = (by_level(&before), by_level(&after));
    let reads_by_level: Vec<f64> = e
        .iter()
        .enumerate()
        .map(|(i, x)| (x - b.get(i).copied().unwrap_or(0.0)) / moves.max(1.0))
        .collect();
    let tenth = (times.len() / 10).max(1).min(times.len());
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    if a.json {
        let mut rec = serde_json::Map::new();
        rec.insert("objects".into(), n.into());
        rec.insert("commits".into(), a.commits.into());
        rec.insert("moves_per_commit".into(), a.moves.into());
        rec.insert("first_commit_ms".into(), first_ms.into());
        rec.insert("median_ms".into(), quantile(&sorted, 0.5).into());
        rec.insert("p90_ms".into(), quantile(&sorted, 0.9).into());
        rec.insert("moves_median_ms".into(), quantile(&moves_times, 0.5).into());
        rec.insert("max_ms".into(), quantile(&sorted, 1.0).into());
        rec.insert("updates_per_s".into(), (moves / total_s).into());
        for (k, v) in &per_move {
            rec.insert(format!("{k}_per_move"), (*v).into());
        }
        rec.insert(
            "node_reads_by_level_per_move".into(),
            reads_by_level.clone().into(),
        );
        println!("{}", serde_json::Value::Object(rec));
    } else {
        println!(
            "{n} objects: {} commits of {} moves; first commit (locator built) {first_ms:.0} ms",
            a.commits, a.moves
        );
        println!(
            "per commit: median {:.1} ms (its moves {:.1} ms), p90 {:.1} ms, max {:.1} ms; first tenth mean {:.1} ms, last tenth mean {:.1} ms; {:.0} updates/s",
            quantile(&sorted, 0.5),
            quantile(&moves_times, 0.5),
            quantile(&sorted, 0.9),
            quantile(&sorted, 1.0),
            mean(&times[..tenth]),
            mean(&times[times.len() - tenth..]),
            moves / total_s
        );
        for (k, v) in &per_move {
            println!("  {k:>16} per move: {v:.3}");
        }
        let levels: Vec<String> = reads_by_level.iter().map(|x| format!("{x:.3}")).collect();
        println!(
            "  node reads per move by level (leaves first): {}",
            levels.join(" / ")
        );
    }
    if a.crash {
        // As if killed after the last commit: no checkpoint, the commits
        // are in the log for the next open (or `geoflash recover`) to replay.
        std::process::exit(0);
    }
    index.close()
}

fn main() {
    if let Err(e) = run() {
        eprintln!("moving_commits: {e}");
        std::process::exit(1);
    }
}
