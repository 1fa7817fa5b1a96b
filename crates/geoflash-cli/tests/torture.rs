//! The torture matrix of `docs/reliability.md` (issue 44): geoflash
//! commands killed with SIGKILL at a random moment, then `recover` (or
//! `checkpoint`), `verify` and queries, checked against an oracle that
//! knows nothing of the store.
//!
//! - `geoflash build` over stores × tree kinds × durability × memory budget
//!   × build mode: the ids inserted are `1..=n` in input order, so a build
//!   by insertion must come back as `1..=k` with `k` at least the last
//!   `acked K` it printed (exactly a checkpoint for the stores written in
//!   place, whose acknowledgements are checkpoints), and a bulk load as
//!   nothing or all; so must a build by insertion without `--ack-every`
//!   (one batch), which on eFIND with the default durability is not logged
//!   (issue 47) and must come back empty or whole. Every other kill also
//!   kills the first `recover` at a random moment; every third kill lands
//!   near the end of the build, when the index is checkpointed and
//!   published (renamed onto its name). The point kinds build from points
//!   on every store they take: the xBR+-tree on the plain store, eFIND and
//!   FAST, the grid files (GFFM, LB-Grid, the Grid File; the H-Grid on a
//!   hybrid of two files). After `recover`, `verify` passes, the ids are
//!   `1..=k` and a grid of windows answers what a brute force over
//!   objects `1..=k` does.
//! - `geoflash build --ack-every` on every device form an index directory
//!   takes (`file:PATH`, `hybrid:` tiers of files and simulators,
//!   `flashsim:`), the same oracle; `mem:` is refused.
//! - `geoflash update --input moves.csv --ack-every`: the moves alternate
//!   between a jump far away and a small move in place (boxes, or points
//!   for the xBR+-tree and the grid files); the index must come back as the
//!   state after the first `k` moves, `k` at least the last acknowledged
//!   (exactly a checkpoint for the structures written in place), answers
//!   compared window by window with a brute-force oracle. After the kill,
//!   `checkpoint` or `recover` is killed too at a random moment (kills of
//!   the `checkpoint` command), then run whole.
//!
//! `make torture` runs the whole matrices (`--include-ignored`, with
//! `GEOFLASH_TORTURE_KILLS` kills per configuration, default 3); `make
//! test` runs a slice of each, one kill per configuration.
mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Objects per build of the build matrix.
const N: u64 = 30_000;

/// Objects per build of the device matrix.
const DEVICE_N: u64 = 10_000;

/// `--ack-every` of the builds by insertion.
const ACK_EVERY: u64 = 500;

/// The point kinds (the xBR+-tree and the grid files): their builds and
/// updates read points, the others small boxes.
fn is_point_kind(kind: &str) -> bool {
    matches!(kind, "xbr" | "grid" | "gffm" | "lbgrid" | "hgrid")
}

/// The grid files, which take no `--store` (they keep their own buffers
/// and write in place under the rollback journal).
fn is_grid(kind: &str) -> bool {
    matches!(kind, "grid" | "gffm" | "lbgrid" | "hgrid")
}

/// The "store" of a grid file in [`Config`] and [`UpdateConfig`]: no
/// `--store` flag is given.
const GRID_STORE: &str = "grid";

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy)]
struct Config {
    /// `plain`, `efind`, `fast`, or [`GRID_STORE`] for a grid file.
    store: &'static str,
    kind: &'static str,
    /// `None`: the store's default (and the only choice of the plain store).
    durability: Option<&'static str>,
    buffer: &'static str,
    /// `insertion` (with `--ack-every`), `batch` (insertion without it:
    /// one batch), `str`, or `external` (Hilbert packing in bounded memory).
    mode: &'static str,
    /// The `--device` spec; `{ext}` stands for a file outside the index
    /// directory (a `file:PATH` device).
    device: &'static str,
}

impl Config {
    /// The arguments of `geoflash build` for this configuration; `ext` is
    /// the file a `file:PATH` device uses.
    fn args(&self, data: &Path, idx: &Path, ext: &Path) -> Vec<String> {
        let mut a: Vec<String> = [
            "build",
            "--input",
            s(data),
            "--index",
            s(idx),
            "--kind",
            self.kind,
            "--buffer",
            self.buffer,
            "--page-size",
            "1024",
            "--device",
            &self.device.replace("{ext}", s(ext)),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let mut more = |x: &[&str]| a.extend(x.iter().map(|a| a.to_string()));
        if self.store != GRID_STORE {
            more(&["--store", self.store]);
        }
        if let Some(d) = self.durability {
            more(&["--durability", d]);
        }
        if self.device.starts_with("hybrid:") && !is_grid(self.kind) {
            // Internal nodes on the fast tier, so pages move between the tiers.
            more(&["--placement", "internal-fast"]);
        }
        match self.mode {
            "insertion" => more(&["--ack-every", &ACK_EVERY.to_string()]),
            "batch" => {}
            "str" => more(&["--bulk", "str"]),
            "external-str" => more(&["--bulk", "str", "--memory", "1MiB"]),
            _ => more(&["--bulk", "hilbert", "--memory", "1MiB"]),
        }
        if self.kind == "hilbert" {
            more(&["--hilbert-domain", "0,0,1010,1010"]);
        }
        a
    }
}

/// The whole matrix: every store, tree kind, durability the store takes,
/// two memory budgets (64 KiB included) and five build modes (the
/// bounded-memory STR load at one budget); then the point kinds
/// ([`point_matrix`]).
fn matrix() -> Vec<Config> {
    let mut out = Vec::new();
    for store in ["plain", "efind", "fast"] {
        let kinds: &[&str] = if store == "plain" {
            &["rtree", "rstar", "hilbert", "fortree"]
        } else {
            &["rtree", "rstar", "hilbert"]
        };
        let durabilities: &[Option<&str>] = if store == "plain" {
            &[None]
        } else {
            &[Some("sync"), Some("group"), Some("none")]
        };
        for &kind in kinds {
            for &durability in durabilities {
                for buffer in ["64KiB", "1MiB"] {
                    for mode in ["insertion", "batch", "str", "external", "external-str"] {
                        if kind == "fortree" && !matches!(mode, "insertion" | "batch") {
                            continue; // the FOR-tree is built by insertion only
                        }
                        if mode == "external-str" && (buffer != "64KiB" || kind == "hilbert") {
                            continue; // one budget; a Hilbert R-tree packs by Hilbert value
                        }
                        out.push(Config {
                            store,
                            kind,
                            durability,
                            buffer,
                            mode,
                            device: "file?direct=false",
                        });
                    }
                }
            }
        }
    }
    out.extend(point_matrix());
    out
}

/// The point kinds on every store they take (the command line refuses the
/// others): the xBR+-tree on the plain store, eFIND and FAST (every
/// durability), built by insertion with `--ack-every`, as one batch and by
/// its own bulk load (`--bulk str`, the only bulk load it takes); the grid
/// files (no `--store`: their own buffers, on the rollback journal; the
/// H-Grid on a hybrid of two files), built by insertion with and without
/// `--ack-every` (they take no bulk load). Both memory budgets each.
fn point_matrix() -> Vec<Config> {
    let file = "file?direct=false";
    let mut out = Vec::new();
    for (store, durabilities) in [
        ("plain", &[None][..]),
        ("efind", &[Some("sync"), Some("group"), Some("none")][..]),
        ("fast", &[Some("sync"), Some("group"), Some("none")][..]),
    ] {
        for &durability in durabilities {
            for buffer in ["64KiB", "1MiB"] {
                for mode in ["insertion", "batch", "str"] {
                    out.push(Config {
                        store,
                        kind: "xbr",
                        durability,
                        buffer,
                        mode,
                        device: file,
                    });
                }
            }
        }
    }
    for kind in ["grid", "gffm", "lbgrid", "hgrid"] {
        for buffer in ["64KiB", "1MiB"] {
            for mode in ["insertion", "batch"] {
                out.push(Config {
                    store: GRID_STORE,
                    kind,
                    durability: None,
                    buffer,
                    mode,
                    device: if kind == "hgrid" { DEVICES[1] } else { file },
                });
            }
        }
    }
    out
}

/// The devices an index directory takes, for [`device_matrix`]: a file
/// outside the directory, hybrids of files, of a file and a simulator and
/// of two simulators (two images and the placement map saved at each
/// checkpoint), their internal nodes placed on the fast tier, and the
/// flash simulator alone.
const DEVICES: [&str; 6] = [
    "file:{ext}?direct=false",
    "hybrid:fast=(file?direct=false)&slow=(file?direct=false)",
    "hybrid:fast=(flashsim:)&slow=(file?direct=false)",
    "hybrid:fast=(file?direct=false)&slow=(flashsim:)",
    "hybrid:fast=(flashsim:)&slow=(flashsim:)",
    "flashsim:",
];

/// Builds by insertion with `--ack-every` on every device of [`DEVICES`]
/// × the plain store (R-tree and FOR-tree), eFIND with `sync` and FAST
/// with `group`.
fn device_matrix() -> Vec<Config> {
    let mut out = Vec::new();
    for device in DEVICES {
        for (store, kind, durability) in [
            ("plain", "rtree", None),
            ("plain", "fortree", None),
            ("efind", "rtree", Some("sync")),
            ("fast", "rstar", Some("group")),
        ] {
            out.push(Config {
                store,
                kind,
                durability,
                // Hybrids: a small buffer, so nodes reach the tiers between checkpoints.
                buffer: if device.starts_with("hybrid:") {
                    "16KiB"
                } else {
                    "64KiB"
                },
                mode: "insertion",
                device,
            });
        }
    }
    out
}

/// A pseudo-random number from the clock and `seed`.
fn random(seed: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    (nanos ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11
}

/// A pseudo-random delay in `0..max_ms` milliseconds (the kill's moment).
fn jitter(seed: u64, max_ms: u64) -> Duration {
    Duration::from_millis(random(seed) % max_ms.max(1))
}

/// The moment of kill number `seed` within a run that takes `span`: every
/// third one near the end (from 80 % to 110 % of the span: the final
/// checkpoint and the publication of a build), the others anywhere.
fn kill_moment(seed: u64, span: Duration) -> Duration {
    let ms = span.as_millis() as u64 + 1;
    if seed % 3 == 2 {
        Duration::from_millis(ms * 8 / 10) + jitter(seed, ms * 3 / 10)
    } else {
        jitter(seed, ms)
    }
}

/// Runs `geoflash args`, kills it (SIGKILL) after `delay` unless it ended
/// before, and returns the last `acked K` it printed and how it ended.
fn run_killed(args: &[String], delay: Duration) -> (u64, ExitStatus) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut acked = 0u64;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(k) = line.strip_prefix("acked ") {
                acked = k.trim().parse().unwrap();
            }
        }
        acked
    });
    std::thread::sleep(delay);
    let _ = child.kill(); // SIGKILL (the command may have finished)
    let status = child.wait().unwrap();
    (reader.join().unwrap(), status)
}

/// `geoflash <command> --index idx` killed at a random moment of its first
/// `max_ms` milliseconds (a `recover` or a `checkpoint` after a crash).
fn kill_command(command: &str, idx: &Path, seed: u64, max_ms: u64) {
    let args = [command.to_string(), "--index".into(), s(idx).into()];
    run_killed(&args, jitter(seed, max_ms));
}

/// The file a `file:PATH` device of the index in `idx` uses (outside it).
fn ext_file(idx: &Path) -> PathBuf {
    idx.with_extension("ext.dat")
}

/// Removes the index in `idx` and its `file:PATH` file.
fn remove_index(idx: &Path) {
    let _ = std::fs::remove_dir_all(idx);
    let _ = std::fs::remove_file(ext_file(idx));
}

/// The inputs of the build matrices: `n` small boxes and `n` points (the
/// point kinds'), ids `1..=n` in input order (see [`object_of`]), and the
/// windows every recovered index is queried with.
struct Inputs {
    boxes: PathBuf,
    points: PathBuf,
    windows: Vec<[f64; 4]>,
    windows_csv: PathBuf,
}

impl Inputs {
    /// Writes the inputs of `n` objects in `dir`.
    fn new(dir: &Path, n: u64) -> Inputs {
        let boxes = dir.join("d.csv");
        write_objects(&boxes, n, false);
        let points = dir.join("p.csv");
        write_objects(&points, n, true);
        let windows = grid_windows();
        let windows_csv = dir.join("windows.csv");
        write_windows(&windows_csv, &windows);
        Inputs {
            boxes,
            points,
            windows,
            windows_csv,
        }
    }

    /// The input of a build of `c`.
    fn data(&self, c: &Config) -> &Path {
        if is_point_kind(c.kind) {
            &self.points
        } else {
            &self.boxes
        }
    }
}

/// How long a whole build of `c` takes (the kills are spread over it).
fn whole_build(c: Config, data: &Path, dir: &Path, n: u64) -> Duration {
    let idx = dir.join("whole");
    let start = std::time::Instant::now();
    let args = c.args(data, &idx, &ext_file(&idx));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(geoflash(&args));
    let took = start.elapsed();
    assert_eq!(all_ids(&idx).len() as u64, n, "{c:?}");
    remove_index(&idx);
    took
}

/// Checks the `k` objects a killed build of `c` (of `n`) came back with
/// against what it acknowledged and what its store promises.
fn check_recovered(c: &Config, what: &str, k: u64, acked: u64, n: u64) {
    match c.mode {
        "insertion" | "batch" => {
            assert!(k >= acked, "{what}: recovered {k} < acked {acked}");
            if c.mode == "batch" && c.store == "efind" && c.durability == Some("group") {
                // Not logged: the checkpoint before the batch or after it.
                assert!(
                    k == 0 || k == n,
                    "{what}: {k} of {n} objects from an unlogged build"
                );
            }
            if c.mode == "insertion" && matches!(c.store, "plain" | GRID_STORE) {
                // Written in place under the rollback journal: exactly the
                // last checkpoint, one every `ACK_EVERY` operations (each
                // printed as `acked K` once made: the kill may come between).
                assert!(
                    k == n || (k.is_multiple_of(ACK_EVERY) && k <= acked + ACK_EVERY),
                    "{what}: recovered {k}, not the last checkpoint (one every {ACK_EVERY} operations)"
                );
            }
        }
        _ => assert_eq!(k, n, "{what}: a bulk load published in part"),
    }
}

/// Kills one build of `c` (of `n` objects) at a moment of `span` chosen
/// by [`kill_moment`] and checks what is left: `recover` and `verify`
/// pass, the ids are `1..=k` (see [`check_recovered`]), and every window
/// of the inputs answers what a brute force over objects `1..=k` does.
/// Returns the objects recovered.
fn kill_once(c: Config, inputs: &Inputs, dir: &Path, n: u64, seed: u64, span: Duration) -> u64 {
    let idx = dir.join(format!("idx-{seed}"));
    let (acked, status) = run_killed(
        &c.args(inputs.data(&c), &idx, &ext_file(&idx)),
        kill_moment(seed, span),
    );
    let what = format!("{c:?} kill {seed} (acked {acked}, {status})");
    if seed % 2 == 1 && idx.join("manifest.json").is_file() {
        // A recovery killed too, at a random moment of its own.
        kill_command("recover", &idx, seed ^ 0x5a5a, 60);
    }
    let r = geoflash(&["recover", "--index", s(&idx)]);
    if !idx.join("manifest.json").is_file() {
        // Nothing published: nothing may have been acknowledged.
        assert_eq!(acked, 0, "{what}: acknowledged, then no index: {r:?}");
        remove_index(&idx);
        return 0;
    }
    assert!(r.status.success(), "{what}: recover failed: {r:?}");
    let v = geoflash(&["verify", "--index", s(&idx)]);
    assert!(v.status.success(), "{what}: verify: {v:?}");
    let ids = all_ids(&idx);
    let k = ids.len() as u64;
    assert_eq!(ids, (1..=k).collect::<Vec<_>>(), "{what}: not a prefix");
    check_recovered(&c, &what, k, acked, n);
    let got = answers(&idx, &inputs.windows_csv).unwrap_or_else(|e| panic!("{what}: {e}"));
    let objects: Vec<[f64; 4]> = (0..=k)
        .map(|i| object_of(i, is_point_kind(c.kind)))
        .collect();
    for (w, ids) in inputs.windows.iter().zip(&got) {
        assert_eq!(*ids, brute_force(&objects, w), "{what}: window {w:?}");
    }
    remove_index(&idx);
    k
}

/// Kills builds of `n` objects, `kills` per configuration of `configs`.
fn run(label: &str, configs: &[Config], n: u64, kills: u64) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let inputs = Inputs::new(dir.path(), n);
    let mut recovered = 0;
    let mut whole = 0;
    let mut late = 0;
    for (i, c) in configs.iter().enumerate() {
        let span = whole_build(*c, inputs.data(c), dir.path(), n);
        for k in 0..kills {
            let seed = (i as u64) << 8 | k;
            let got = kill_once(*c, &inputs, dir.path(), n, seed, span);
            recovered += got;
            whole += u64::from(got == n);
            late += u64::from(seed % 3 == 2);
        }
    }
    println!(
        "torture: {label}: {} configurations, {} kills ({late} near the end, {whole} after the whole build), {recovered} objects recovered and checked",
        configs.len(),
        configs.len() as u64 * kills
    );
}

/// Kills per configuration of the whole matrices.
fn torture_kills() -> u64 {
    std::env::var("GEOFLASH_TORTURE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// A slice of the matrix, one kill each (`make test`).
#[test]
fn a_slice_of_the_torture_matrix_survives_sigkill() {
    let all = matrix();
    let pick = |store: &str, kind: &str, mode: &str, buffer: &str| {
        *all.iter()
            .find(|c| c.store == store && c.kind == kind && c.mode == mode && c.buffer == buffer)
            .unwrap()
    };
    // The unlogged build (eFIND, default durability, no --ack-every).
    let unlogged = *all
        .iter()
        .find(|c| {
            c.store == "efind"
                && c.kind == "rstar"
                && c.mode == "batch"
                && c.buffer == "64KiB"
                && c.durability == Some("group")
        })
        .unwrap();
    // The point kinds: the xBR+-tree on FAST (logged, group commits) and
    // two grid files (the H-Grid on a hybrid of two files), by insertion.
    let point = |store: &str, kind: &str, durability: Option<&str>| {
        *all.iter()
            .find(|c| {
                (c.store, c.kind, c.durability, c.mode, c.buffer)
                    == (store, kind, durability, "insertion", "64KiB")
            })
            .unwrap()
    };
    run(
        "builds",
        &[
            pick("plain", "fortree", "insertion", "64KiB"),
            pick("efind", "hilbert", "insertion", "64KiB"),
            pick("fast", "rtree", "external", "1MiB"),
            pick("plain", "rstar", "external-str", "64KiB"),
            unlogged,
            point("fast", "xbr", Some("group")),
            point(GRID_STORE, "lbgrid", None),
            point(GRID_STORE, "hgrid", None),
        ],
        N,
        1,
    );
}

/// The whole matrix (`make torture`).
#[test]
#[ignore = "the torture tier: make torture"]
fn the_torture_matrix_survives_sigkill() {
    run("builds", &matrix(), N, torture_kills());
}

/// Every device form with acknowledgements: `file:PATH` and hybrids with a
/// file tier keep the rollback journal of the stores written in place, and
/// an index on a simulator acknowledges only what its saved image holds
/// (issue 44: killed plain builds on `file:PATH` and hybrids failed
/// `verify`; eFIND and FAST builds on `flashsim:` came back empty after
/// thousands of acknowledged operations). `mem:` is refused with exit 2.
/// `make test` runs the plain store on `file:PATH`, eFIND on `flashsim:`
/// and eFIND on a file in front of a simulator (its nodes on the file
/// tier: refused after a kill before the rollback journal covered it), one
/// kill each.
#[test]
fn a_slice_of_the_device_matrix_survives_sigkill() {
    let all = device_matrix();
    let pick = |store: &str, device: &str| {
        *all.iter()
            .find(|c| c.store == store && c.kind == "rtree" && c.device.starts_with(device))
            .unwrap()
    };
    run(
        "devices",
        &[
            pick("plain", "file:"),
            pick("efind", "flashsim:"),
            pick("efind", "hybrid:fast=(file"),
        ],
        DEVICE_N,
        1,
    );
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, 100);
    for store in ["plain", "efind"] {
        let idx = dir.path().join(store);
        let out = geoflash(&[
            "build",
            "--input",
            s(&data),
            "--index",
            s(&idx),
            "--store",
            store,
            "--device",
            "mem:",
            "--ack-every",
            "10",
        ]);
        assert_eq!(out.status.code(), Some(2), "{store} on mem:: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("lives only in its process"), "{err}");
        assert!(!idx.exists());
    }
}

/// The whole device matrix (`make torture`).
#[test]
#[ignore = "the torture tier: make torture"]
fn the_device_matrix_survives_sigkill() {
    run("devices", &device_matrix(), DEVICE_N, torture_kills());
}

/// Objects of the indexes `update` moves.
const UPDATE_N: u64 = 5_000;
/// Moves per `update` command (row `j` moves object [`moved_id`]`(j)`).
const UPDATE_M: u64 = 3_000;

/// One configuration of the update campaign.
#[derive(Debug, Clone, Copy)]
struct UpdateConfig {
    /// `plain`, `efind`, `fast`, or [`GRID_STORE`] for a grid file.
    store: &'static str,
    kind: &'static str,
    durability: Option<&'static str>,
    buffer: &'static str,
}

/// The update campaign: the plain store (R*-tree, FOR-tree), eFIND and FAST
/// in every durability mode, both memory budgets, every R-tree kind; the
/// xBR+-tree on the three stores and the four grid files (the H-Grid on a
/// hybrid of two files), moving points.
fn update_matrix() -> Vec<UpdateConfig> {
    let c = |store, kind, durability, buffer| UpdateConfig {
        store,
        kind,
        durability,
        buffer,
    };
    vec![
        c("plain", "rstar", None, "64KiB"),
        c("plain", "fortree", None, "64KiB"),
        c("plain", "rtree", None, "1MiB"),
        c("efind", "rtree", Some("sync"), "64KiB"),
        c("efind", "rstar", Some("group"), "1MiB"),
        c("efind", "hilbert", Some("none"), "64KiB"),
        c("fast", "rstar", Some("sync"), "1MiB"),
        c("fast", "rtree", Some("group"), "64KiB"),
        c("fast", "hilbert", Some("none"), "1MiB"),
        c("plain", "xbr", None, "64KiB"),
        c("efind", "xbr", Some("group"), "64KiB"),
        c("efind", "xbr", Some("sync"), "1MiB"),
        c("fast", "xbr", Some("none"), "64KiB"),
        c(GRID_STORE, "grid", None, "64KiB"),
        c(GRID_STORE, "gffm", None, "64KiB"),
        c(GRID_STORE, "lbgrid", None, "64KiB"),
        c(GRID_STORE, "lbgrid", None, "1MiB"),
        c(GRID_STORE, "hgrid", None, "64KiB"),
        c(GRID_STORE, "hgrid", None, "1MiB"),
    ]
}

/// The object row `j` (from 1) of the moves moves: a permutation of the ids.
fn moved_id(j: u64) -> u64 {
    (j - 1) * 7 % UPDATE_N + 1
}

/// Object `i` of the inputs: a box of side 0.5 at a point that
/// `i` scatters over `[0, 1000) × [0, 997.3)`, or that point (`points`;
/// distinct for distinct ids below 99,730,000).
fn object_of(i: u64, points: bool) -> [f64; 4] {
    let x = (i * 7919 % 10_000) as f64 / 10.0;
    let y = (i * 104_729 % 9_973) as f64 / 10.0;
    if points {
        [x, y, x, y]
    } else {
        [x, y, x + 0.5, y + 0.5]
    }
}

/// Writes objects `1..=n` ([`object_of`]) as a CSV of boxes (points have
/// min = max).
fn write_objects(path: &Path, n: u64, points: bool) {
    let mut text = String::from("id,minx,miny,maxx,maxy\n");
    for i in 1..=n {
        let b = object_of(i, points);
        text.push_str(&format!("{i},{},{},{},{}\n", b[0], b[1], b[2], b[3]));
    }
    std::fs::write(path, text).unwrap();
}

/// Writes `windows` as the CSV `query --windows` reads.
fn write_windows(path: &Path, windows: &[[f64; 4]]) {
    let mut text = String::from("minx,miny,maxx,maxy\n");
    for w in windows {
        text.push_str(&format!("{},{},{},{}\n", w[0], w[1], w[2], w[3]));
    }
    std::fs::write(path, text).unwrap();
}

/// The new box (or point) of row `j`: odd rows jump 2,000 units east (out
/// of the data's extent, a delete and an insert; inside the domain the
/// point kinds are given), even rows move 0.05 (in place while the box
/// stays in its leaf).
fn moved_object(j: u64, points: bool) -> [f64; 4] {
    let b = object_of(moved_id(j), points);
    let d = if j % 2 == 1 {
        [2000.0, 0.0]
    } else {
        [0.05, 0.05]
    };
    [b[0] + d[0], b[1] + d[1], b[2] + d[0], b[3] + d[1]]
}

/// The objects after the first `k` moves.
fn state_after(k: u64, points: bool) -> Vec<[f64; 4]> {
    let mut boxes: Vec<[f64; 4]> = (0..=UPDATE_N).map(|i| object_of(i, points)).collect();
    for j in 1..=k {
        boxes[moved_id(j) as usize] = moved_object(j, points);
    }
    boxes
}

/// A grid of 10 × 10 windows over the data, their edges on coordinates
/// that points of the inputs lie on.
fn grid_windows() -> Vec<[f64; 4]> {
    let mut w = Vec::new();
    for gx in 0..10 {
        for gy in 0..10 {
            let (x, y) = (gx as f64 * 100.0, gy as f64 * 100.0);
            w.push([x, y, x + 37.0, y + 53.0]);
        }
    }
    w
}

/// The windows the update campaign queries: the region east of the data
/// (the jumped objects), then beside each box of an even row, where only
/// its moved box reaches (around the moved point: no point of the inputs
/// nor another moved one lies within 0.01 of it), then [`grid_windows`].
fn update_windows(points: bool) -> Vec<[f64; 4]> {
    let mut w = vec![[1500.0, -10.0, 3100.0, 2000.0]];
    for j in (2..=UPDATE_M).step_by(2) {
        let b = object_of(moved_id(j), points);
        w.push(if points {
            [b[0] + 0.04, b[1] + 0.04, b[0] + 0.06, b[1] + 0.06]
        } else {
            [b[2] + 0.01, b[1] + 0.1, b[2] + 0.02, b[3] - 0.1]
        });
    }
    w.extend(grid_windows());
    w
}

/// The ids of `boxes` (indexed by id) intersecting `w`, sorted.
fn brute_force(boxes: &[[f64; 4]], w: &[f64; 4]) -> Vec<u64> {
    (1..boxes.len())
        .filter(|&i| {
            let b = boxes[i];
            b[0] <= w[2] && w[0] <= b[2] && b[1] <= w[3] && w[1] <= b[3]
        })
        .map(|i| i as u64)
        .collect()
}

/// The answers of `query --windows` on the index in `idx`, each sorted;
/// `Err` with the command's output when it fails.
fn answers(idx: &Path, windows: &Path) -> Result<Vec<Vec<u64>>, String> {
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
        return Err(format!("{out:?}"));
    }
    Ok(windows_ids(&last_json(&out)))
}

/// The `k` (moves applied) the answers show, at least `acked`: the count of
/// jumped objects bounds it to two values, and the answers of every window
/// must equal the brute-force oracle's for one of them.
fn moves_applied(got: &[Vec<u64>], windows: &[[f64; 4]], acked: u64, points: bool) -> Option<u64> {
    let jumped = got[0].len() as u64;
    let candidates = if jumped == 0 {
        vec![0]
    } else {
        vec![2 * jumped - 1, 2 * jumped]
    };
    candidates
        .into_iter()
        .filter(|&k| k >= acked && k <= UPDATE_M)
        .find(|&k| {
            let boxes = state_after(k, points);
            windows
                .iter()
                .zip(got)
                .all(|(w, ids)| brute_force(&boxes, w) == *ids)
        })
}

/// Copies the files of the index directory `from` into `to`.
fn copy_index(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// `--ack-every` of the update campaign.
const UPDATE_ACK_EVERY: u64 = 250;

/// The inputs of the update campaign, of boxes or of points: the objects,
/// the moves (row `j` moves [`moved_id`]`(j)` to [`moved_object`]`(j)`)
/// and the windows queried.
struct UpdateInputs {
    points: bool,
    data: PathBuf,
    moves: PathBuf,
    windows: Vec<[f64; 4]>,
    windows_csv: PathBuf,
}

impl UpdateInputs {
    /// Writes the inputs in `dir`.
    fn new(dir: &Path, points: bool) -> UpdateInputs {
        let name = if points { "points" } else { "boxes" };
        let data = dir.join(format!("{name}.csv"));
        write_objects(&data, UPDATE_N, points);
        let moves = dir.join(format!("{name}-moves.csv"));
        let mut text = String::from("id,minx,miny,maxx,maxy\n");
        for j in 1..=UPDATE_M {
            let b = moved_object(j, points);
            let id = moved_id(j);
            text.push_str(&format!("{id},{},{},{},{}\n", b[0], b[1], b[2], b[3]));
        }
        std::fs::write(&moves, text).unwrap();
        let windows = update_windows(points);
        let windows_csv = dir.join(format!("{name}-windows.csv"));
        write_windows(&windows_csv, &windows);
        UpdateInputs {
            points,
            data,
            moves,
            windows,
            windows_csv,
        }
    }

    /// `geoflash update --ack-every` of the moves on the index in `idx`.
    fn update(&self, idx: &Path) -> Vec<String> {
        let every = UPDATE_ACK_EVERY.to_string();
        let args = ["update", "--index", s(idx), "--input", s(&self.moves)];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(["--ack-every".to_string(), every]);
        args
    }

    /// The `k` the answers `got` show (see [`moves_applied`]).
    fn applied(&self, got: &[Vec<u64>], acked: u64) -> Option<u64> {
        moves_applied(got, &self.windows, acked, self.points)
    }
}

/// Builds the index of `c` in `base` from `inputs` (the point kinds in a
/// domain that holds the jumped points; the H-Grid on a hybrid of two files).
fn build_update_base(c: &UpdateConfig, inputs: &UpdateInputs, base: &Path) {
    let device = if c.kind == "hgrid" {
        DEVICES[1]
    } else {
        "file?direct=false"
    };
    let mut build = vec![
        "build",
        "--input",
        s(&inputs.data),
        "--index",
        s(base),
        "--kind",
        c.kind,
        "--buffer",
        c.buffer,
        "--page-size",
        "1024",
        "--device",
        device,
    ];
    if c.store != GRID_STORE {
        build.extend_from_slice(&["--store", c.store]);
    }
    if let Some(d) = c.durability {
        build.extend_from_slice(&["--durability", d]);
    }
    if c.kind == "hilbert" {
        build.extend_from_slice(&["--hilbert-domain", "0,0,1010,1010"]);
    }
    if inputs.points {
        build.extend_from_slice(&["--hilbert-domain", "0,0,3100,1010"]);
    }
    ok(geoflash(&build));
}

/// Kills `geoflash update` on a copy of `base` (index of `c`) at a
/// moment of `span`; then `checkpoint` (kill seeds ≡ 1 mod 3) or
/// `recover` (the others) is killed at a random moment and run whole, and
/// the answers of every window must be the oracle's after `k` moves, `k`
/// at least the last acknowledged (and exactly a checkpoint for the
/// structures written in place). Returns `k` and whether `checkpoint` ran.
fn kill_update(
    c: &UpdateConfig,
    inputs: &UpdateInputs,
    base: &Path,
    idx: &Path,
    seed: u64,
    span: Duration,
) -> (u64, bool) {
    copy_index(base, idx);
    let (acked, status) = run_killed(&inputs.update(idx), kill_moment(seed, span));
    let what = format!("{c:?} kill {seed} (acked {acked}, {status})");
    if seed % 3 == 1 {
        // The checkpoint command killed, then run whole: it
        // recovers what the update left and checkpoints it.
        kill_command("checkpoint", idx, seed ^ 0x77, 80);
        let r = geoflash(&["checkpoint", "--index", s(idx)]);
        assert!(r.status.success(), "{what}: checkpoint: {r:?}");
    } else {
        if seed % 3 == 2 {
            kill_command("recover", idx, seed ^ 0x33, 80);
        }
        let r = geoflash(&["recover", "--index", s(idx)]);
        assert!(r.status.success(), "{what}: recover: {r:?}");
    }
    let got = answers(idx, &inputs.windows_csv).unwrap_or_else(|e| panic!("{what}: {e}"));
    let k = inputs.applied(&got, acked).unwrap_or_else(|| {
        panic!(
            "{what}: the answers are not the state after any k >= {acked} moves ({} jumped)",
            got[0].len()
        )
    });
    if matches!(c.store, "plain" | GRID_STORE) {
        // Written in place under the rollback journal: the last checkpoint.
        assert!(
            k == UPDATE_M || (k.is_multiple_of(UPDATE_ACK_EVERY) && k <= acked + UPDATE_ACK_EVERY),
            "{what}: {k} moves recovered, not the last checkpoint (one every {UPDATE_ACK_EVERY})"
        );
    }
    let v = geoflash(&["verify", "--index", s(idx)]);
    assert!(v.status.success(), "{what}: verify: {v:?}");
    std::fs::remove_dir_all(idx).unwrap();
    (k, seed % 3 == 1)
}

/// Kills `geoflash update --ack-every 250` on a copy of each index of
/// `configs` `kills` times (see [`kill_update`]), the point kinds moving
/// points and the others boxes.
fn run_updates(configs: &[UpdateConfig], kills: u64) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let inputs = [
        UpdateInputs::new(dir.path(), false),
        UpdateInputs::new(dir.path(), true),
    ];
    let (mut applied, mut in_place, mut checkpoints) = (0u64, 0u64, 0u64);
    for (i, c) in configs.iter().enumerate() {
        let inputs = &inputs[usize::from(is_point_kind(c.kind))];
        let base = dir.path().join(format!("base-{i}"));
        build_update_base(c, inputs, &base);
        // The whole run: its length spreads the kills, and the moves in
        // place must be there to be killed.
        let whole = dir.path().join("whole");
        copy_index(&base, &whole);
        let start = std::time::Instant::now();
        let mut args = inputs.update(&whole);
        args.push("--json".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stats = last_json(&ok(geoflash(&args)));
        let span = start.elapsed();
        // Only the R-tree and the R*-tree update in place (the Hilbert
        // R-tree, the FOR-tree and the point kinds delete and insert).
        if matches!(c.kind, "rtree" | "rstar") {
            assert!(
                stats["updates_in_place"].as_u64().unwrap() > 0,
                "{c:?}: {stats}"
            );
        }
        in_place += stats["updates_in_place"].as_u64().unwrap();
        let got = answers(&whole, &inputs.windows_csv).unwrap();
        assert_eq!(
            inputs.applied(&got, UPDATE_M),
            Some(UPDATE_M),
            "{c:?}: the whole update"
        );
        std::fs::remove_dir_all(&whole).unwrap();
        for k in 0..kills {
            let seed = (i as u64) << 8 | k;
            let idx = dir.path().join(format!("u-{seed}"));
            let (k, checkpointed) = kill_update(c, inputs, &base, &idx, seed, span);
            applied += k;
            checkpoints += u64::from(checkpointed);
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
    println!(
        "torture: updates: {} configurations, {} kills of update ({checkpoints} followed by a killed checkpoint), {applied} moves recovered and checked against the oracle ({in_place} of the whole runs' moves in place)",
        configs.len(),
        configs.len() as u64 * kills
    );
}

/// A slice of the update campaign, one kill each (`make test`): the
/// FOR-tree, eFIND's R-tree and its xBR+-tree (whose update was a deletion
/// and an insertion committed apart: a kill between them lost the point).
#[test]
fn a_slice_of_the_update_campaign_survives_sigkill() {
    let all = update_matrix();
    let xbr = all
        .iter()
        .find(|c| (c.store, c.kind) == ("efind", "xbr"))
        .unwrap();
    run_updates(&[all[1], all[3], *xbr], 1);
}

/// The whole update campaign (`make torture`).
#[test]
#[ignore = "the torture tier: make torture"]
fn the_update_campaign_survives_sigkill() {
    run_updates(&update_matrix(), torture_kills());
}
