//! The torture matrix of `docs/reliability.md` (issue 44): `geoflash build`
//! killed with SIGKILL at a random moment, over stores × tree kinds ×
//! durability × memory budget × build mode, then `recover`, `verify` and a
//! query over everything, checked against an oracle that knows nothing of
//! the store: the ids inserted are `1..=n` in input order, so a build by
//! insertion must come back as `1..=k` with `k` at least the last `acked K`
//! it printed (exactly a checkpoint for the stores written in place, whose
//! acknowledgements are checkpoints), and a bulk load as nothing or all.
//!
//! Every other kill also kills the first `recover` at a random moment.
//!
//! `make torture` runs the whole matrix (`--include-ignored`, with
//! `GEOFLASH_TORTURE_KILLS` kills per configuration, default 3); `make
//! test` runs a slice of three configurations, one kill each.
mod common;
use common::*;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Objects per build.
const N: u64 = 30_000;

/// One configuration of the matrix.
#[derive(Debug, Clone, Copy)]
struct Config {
    store: &'static str,
    kind: &'static str,
    /// `None`: the store's default (and the only choice of the plain store).
    durability: Option<&'static str>,
    buffer: &'static str,
    /// `insertion`, `str`, or `external` (Hilbert packing in bounded memory).
    mode: &'static str,
}

impl Config {
    fn args<'a>(&self, data: &'a str, idx: &'a str) -> Vec<&'a str>
    where
        'static: 'a,
    {
        let mut a = vec![
            "build",
            "--input",
            data,
            "--index",
            idx,
            "--store",
            self.store,
            "--kind",
            self.kind,
            "--buffer",
            self.buffer,
            "--page-size",
            "1024",
            "--device",
            "file?direct=false",
        ];
        if let Some(d) = self.durability {
            a.extend_from_slice(&["--durability", d]);
        }
        match self.mode {
            "insertion" => a.extend_from_slice(&["--ack-every", "500"]),
            "str" => a.extend_from_slice(&["--bulk", "str"]),
            _ => a.extend_from_slice(&["--bulk", "hilbert", "--memory", "1MiB"]),
        }
        if self.kind == "hilbert" {
            a.extend_from_slice(&["--hilbert-domain", "0,0,1010,1010"]);
        }
        a
    }
}

/// The whole matrix: every store, tree kind, durability the store takes,
/// two memory budgets (64 KiB included) and three build modes.
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
                    for mode in ["insertion", "str", "external"] {
                        if kind == "fortree" && mode != "insertion" {
                            continue; // the FOR-tree is built by insertion only
                        }
                        out.push(Config {
                            store,
                            kind,
                            durability,
                            buffer,
                            mode,
                        });
                    }
                }
            }
        }
    }
    out
}

/// A pseudo-random delay in `0..max_ms` milliseconds (the kill's moment).
fn jitter(seed: u64, max_ms: u64) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    Duration::from_millis((nanos ^ seed.wrapping_mul(0x9e37_79b9)) % max_ms.max(1))
}

/// How long a whole build of `c` takes (the kills are spread over it).
fn whole_build(c: Config, data: &Path, dir: &Path) -> Duration {
    let idx = dir.join("whole");
    let start = std::time::Instant::now();
    ok(geoflash(&c.args(s(data), s(&idx))));
    let took = start.elapsed();
    assert_eq!(all_ids(&idx).len() as u64, N, "{c:?}");
    std::fs::remove_dir_all(&idx).unwrap();
    took
}

/// Kills one build of `c` at a random moment within `span` and checks what
/// is left. Returns the objects recovered.
fn kill_once(c: Config, data: &Path, dir: &Path, seed: u64, span: Duration) -> u64 {
    let idx = dir.join(format!("idx-{seed}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_geoflash"))
        .args(c.args(s(data), s(&idx)))
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
    std::thread::sleep(jitter(seed, span.as_millis() as u64 + 1));
    let _ = child.kill(); // SIGKILL (the build may have finished)
    let status = child.wait().unwrap();
    let acked = reader.join().unwrap();
    let what = format!("{c:?} kill {seed} (acked {acked}, {status})");
    if seed % 2 == 1 && idx.join("manifest.json").is_file() {
        // A recovery killed too, at a random moment of its own.
        let mut rec = Command::new(env!("CARGO_BIN_EXE_geoflash"))
            .args(["recover", "--index", s(&idx)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(jitter(seed ^ 0x5a5a, 60));
        let _ = rec.kill();
        rec.wait().unwrap();
    }
    let r = geoflash(&["recover", "--index", s(&idx)]);
    if !idx.join("manifest.json").is_file() {
        // Nothing published: nothing may have been acknowledged.
        assert_eq!(acked, 0, "{what}: acknowledged, then no index: {r:?}");
        return 0;
    }
    assert!(r.status.success(), "{what}: recover failed: {r:?}");
    let ids = all_ids(&idx);
    let k = ids.len() as u64;
    match c.mode {
        "insertion" => {
            assert!(k >= acked, "{what}: recovered {k} < acked {acked}");
            assert_eq!(ids, (1..=k).collect::<Vec<_>>(), "{what}: not a prefix");
        }
        _ => assert_eq!(k, N, "{what}: a bulk load published in part"),
    }
    ok(geoflash(&["verify", "--index", s(&idx)]));
    std::fs::remove_dir_all(&idx).unwrap();
    k
}

fn run(configs: &[Config], kills: u64) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = dir.path().join("d.csv");
    write_rects(&data, N);
    let mut recovered = 0;
    let mut whole = 0;
    for (i, c) in configs.iter().enumerate() {
        let span = whole_build(*c, &data, dir.path());
        for k in 0..kills {
            let got = kill_once(*c, &data, dir.path(), (i as u64) << 8 | k, span);
            recovered += got;
            whole += u64::from(got == N);
        }
    }
    println!(
        "torture: {} configurations, {} kills ({whole} after the whole build), {recovered} objects recovered and checked",
        configs.len(),
        configs.len() as u64 * kills
    );
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
    run(
        &[
            pick("plain", "fortree", "insertion", "64KiB"),
            pick("efind", "hilbert", "insertion", "64KiB"),
            pick("fast", "rtree", "external", "1MiB"),
        ],
        1,
    );
}

/// The whole matrix (`make torture`).
#[test]
#[ignore = "the torture tier: make torture"]
fn the_torture_matrix_survives_sigkill() {
    let kills = std::env::var("GEOFLASH_TORTURE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    run(&matrix(), kills);
}
