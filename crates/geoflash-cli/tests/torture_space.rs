//! ENOSPC in the torture tier (issue 44, `docs/reliability.md`): an
//! `insert` into an index on a file system that fills up (a tmpfs of
//! 16 MiB mounted in a private mount namespace, `unshare -m`, filled to
//! 256 KiB of free space) must fail with an error naming the file and
//! "No space left on device", and never lose acknowledged data: readers
//! (before any space is freed, without recovery) and, once space is freed,
//! `recover`, `verify` and a further `insert` all see the objects `1..=k`
//! with `k` at least the objects built (`insert` prints no
//! acknowledgements). The oracle is the input's id order, independent of
//! the store.
//!
//! Only in `make torture` (ignored otherwise): it needs root for the mount;
//! without root it says so and passes (outside CI; in CI it fails).
mod common;
use common::*;

use std::path::Path;
use std::process::Command;

/// Objects built before the file system is filled.
const BUILT: u64 = 5_000;
/// Objects the failing insert tries to add (ids after `BUILT`).
const MORE: u64 = 25_000;

/// Whether this process runs as root (`id -u`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Objects `first..=last` of `write_rects`'s layout in a CSV file.
fn write_range(path: &Path, first: u64, last: u64) {
    let all = path.with_extension("all.csv");
    write_rects(&all, last);
    let text = std::fs::read_to_string(&all).unwrap();
    let mut lines = text.lines();
    let mut out = format!("{}\n", lines.next().unwrap());
    for line in lines.skip(first as usize - 1) {
        out.push_str(line);
        out.push('\n');
    }
    std::fs::write(path, out).unwrap();
    std::fs::remove_file(all).unwrap();
}

/// The ids of the last `query --ids --json` output in `file`.
fn ids_in(file: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text.lines().last().unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{}: {e}: {text}", file.display()));
    let mut ids: Vec<u64> = v["windows"][0]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

/// The script run in a private mount namespace: mount, build, fill,
/// insert (failing), read, free, recover, verify, insert again; each
/// command's output, error and exit code in `out`.
const SCRIPT: &str = r#"
set -u
G=$1; MNT=$2; OUT=$3; FIRST=$4; REST=$5; AFTER=$6; shift 6
mount -t tmpfs -o size=16m tmpfs "$MNT" || exit 90
run() { name=$1; shift; "$G" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; echo $? > "$OUT/$name.rc"; }
Q="--window -10,-10,2000,2000 --ids --json"
run build build --input "$FIRST" --index "$MNT/idx" --page-size 1024 --buffer 64KiB "$@"
dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null
truncate -s -256K "$MNT/filler"
run insert insert --index "$MNT/idx" --input "$REST"
run read query --index "$MNT/idx" $Q
rm "$MNT/filler"
run recover recover --index "$MNT/idx"
run after query --index "$MNT/idx" $Q
run verify verify --index "$MNT/idx"
run again insert --index "$MNT/idx" --input "$AFTER"
run last query --index "$MNT/idx" $Q
umount "$MNT"
"#;

fn rc(out: &Path, name: &str) -> i32 {
    std::fs::read_to_string(out.join(format!("{name}.rc")))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn text(out: &Path, name: &str, ext: &str) -> String {
    std::fs::read_to_string(out.join(format!("{name}.{ext}"))).unwrap()
}

#[test]
#[ignore = "the torture tier: make torture (needs root for a tmpfs)"]
fn a_full_file_system_never_loses_acknowledged_data_and_the_index_recovers() {
    if !is_root() {
        assert!(
            std::env::var("CI").is_err(),
            "CI: the ENOSPC campaign needs root (a tmpfs in a mount namespace)"
        );
        println!("torture: space: skipped (not root: no tmpfs can be mounted)");
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let first = dir.path().join("first.csv");
    let rest = dir.path().join("rest.csv");
    let after = dir.path().join("after.csv");
    write_rects(&first, BUILT);
    write_range(&rest, BUILT + 1, BUILT + MORE);
    write_range(&after, BUILT + MORE + 1, BUILT + MORE + 500);
    let script = dir.path().join("space.sh");
    std::fs::write(&script, SCRIPT).unwrap();
    const FILE: &str = "file?direct=false";
    // A log inside a hybrid device (no `log.dat`): its space reserved on
    // the tiers' files.
    const HYBRID: &str = "hybrid:fast=(file?direct=false)&slow=(file?direct=false)";
    let configs: [&[&str]; 8] = [
        &["--store", "plain", "--kind", "rtree", "--device", FILE],
        &["--store", "plain", "--kind", "fortree", "--device", FILE],
        &["--store", "efind", "--durability", "sync", "--device", FILE],
        &["--store", "efind", "--device", FILE],
        &["--store", "fast", "--durability", "group", "--device", FILE],
        &["--store", "fast", "--durability", "none", "--device", FILE],
        &[
            "--store",
            "efind",
            "--durability",
            "sync",
            "--device",
            HYBRID,
        ],
        &[
            "--store",
            "fast",
            "--durability",
            "group",
            "--device",
            HYBRID,
        ],
    ];
    let mut durable_total = 0;
    for (i, config) in configs.iter().enumerate() {
        let mnt = dir.path().join(format!("mnt{i}"));
        let out = dir.path().join(format!("out{i}"));
        std::fs::create_dir_all(&mnt).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let status = Command::new("unshare")
            .args(["-m", "bash"])
            .arg(&script)
            .args([
                env!("CARGO_BIN_EXE_geoflash"),
                s(&mnt),
                s(&out),
                s(&first),
                s(&rest),
                s(&after),
            ])
            .args(*config)
            .status()
            .unwrap();
        let what = format!("{config:?}");
        assert!(status.success(), "{what}: the script: {status}");
        assert_eq!(
            rc(&out, "build"),
            0,
            "{what}: {}",
            text(&out, "build", "err")
        );
        // The insert ran out of space, and says so naming the file.
        let err = text(&out, "insert", "err");
        assert!(
            matches!(rc(&out, "insert"), 1 | 2),
            "{what}: insert exit {} (the file system did not fill?): {err}",
            rc(&out, "insert")
        );
        assert!(
            err.contains("No space left on device") && err.contains("idx/"),
            "{what}: {err}"
        );
        let acked: u64 = text(&out, "insert", "out")
            .lines()
            .filter_map(|l| l.strip_prefix("acked "))
            .map(|k| k.trim().parse().unwrap())
            .next_back()
            .unwrap_or(0);
        let prefix = |name: &str| {
            assert_eq!(
                rc(&out, name),
                0,
                "{what}: {name}: {}",
                text(&out, name, "err")
            );
            let ids = ids_in(&out.join(format!("{name}.out")));
            let k = ids.len() as u64;
            assert_eq!(
                ids,
                (1..=k).collect::<Vec<_>>(),
                "{what}: {name}: not a prefix"
            );
            assert!(
                k >= BUILT + acked,
                "{what}: {name}: {k} objects, {acked} acknowledged after {BUILT}"
            );
            k
        };
        // A reader, on the full file system, without recovery.
        let read = prefix("read");
        assert_eq!(
            rc(&out, "recover"),
            0,
            "{what}: recover: {}",
            text(&out, "recover", "err")
        );
        let after_recover = prefix("after");
        // What the insert said it applied is what survives (item 3: it
        // said N, and `recover` applied N + 1).
        let applied: u64 = err
            .split(" operations")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{what}: no count of operations applied: {err}"));
        // When the checkpoint after the failure failed too, the insert
        // says how many of them are durable: recover keeps those, and
        // maybe more of them (their operations in the log).
        let durable: u64 = err
            .split(" of them are durable")
            .next()
            .filter(|head| head.len() < err.len())
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(applied);
        durable_total += durable;
        assert!(
            (BUILT + durable..=BUILT + applied).contains(&after_recover),
            "{what}: {after_recover} objects after recover; the insert said it applied {applied}, {durable} durable: {err}"
        );
        assert!(
            after_recover >= read,
            "{what}: recover lost what readers saw"
        );
        assert_eq!(
            rc(&out, "verify"),
            0,
            "{what}: verify: {}",
            text(&out, "verify", "err")
        );
        assert_eq!(
            rc(&out, "again"),
            0,
            "{what}: the next insert: {}",
            text(&out, "again", "err")
        );
        let mut want: Vec<u64> = (1..=after_recover).collect();
        want.extend(BUILT + MORE + 1..=BUILT + MORE + 500);
        assert_eq!(
            ids_in(&out.join("last.out")),
            want,
            "{what}: after the next insert"
        );
    }
    println!(
        "torture: space: {} stores filled a 16 MiB tmpfs during an insert (ENOSPC named, the {durable_total} objects the failed inserts called durable kept, readers without recovery, recover, verify and a next insert after freeing space)",
        configs.len()
    );
}
