//! The examples of `README.md` and `docs/*.md` run as written, and the links
//! between those documents resolve.
//!
//! Every fenced block carries a language, and each language has its runner:
//! - ```` ```sh ````: run here by `bash` in a fresh directory, with the
//!   `geoflash` of this build first on `PATH` and the repository's
//!   `workloads/` linked in; its commands must be `geoflash` or a few file
//!   helpers (`printf`, `echo`, `cat`, `head`, `ls`, `mkdir`, `test`);
//! - ```` ```toml ````: a workload file, checked here by `geoflash bench
//!   --check`;
//! - ```` ```json ````: parsed here;
//! - ```` ```rust ````: the README's, compiled and run as doctests of the
//!   `geoflash` crate (`readme_examples` in `lib.rs`); nowhere else;
//! - ```` ```python ````: run by the Python tier
//!   (`crates/geoflash-py/tests/test_readme.py`);
//! - ```` ```sql ````: `docs/results-schema.md`'s, run on SQLite and
//!   PostgreSQL by `crates/geoflash-bench/tests/results_schema.rs`;
//! - ```` ```text ````: output, synopses and other text, not run.
//!
//! A block that is not meant to run in the tests (`make bench`, the
//! benchmarks' long commands, `pip install`, a PostgreSQL URL) says so in its
//! info string: ```` ```sh no-run ````. The runners skip those and only those.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md, as (path relative to the root, text).
fn documents() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| {
            e.expect("read docs/")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(root().join(&n))
                .unwrap_or_else(|e| panic!("cannot read {n}: {e}"));
            (n, text)
        })
        .collect()
}

/// One fenced block of a document.
#[derive(Debug)]
struct Block {
    /// `file:line` of its opening fence.
    place: String,
    /// The first word of the info string.
    lang: String,
    /// The info string holds `no-run`.
    no_run: bool,
    /// The block's lines, the fence's indentation removed.
    text: String,
}

/// The fenced blocks of a document; an unclosed fence is an error.
fn blocks(file: &str, doc: &str) -> Vec<Block> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        if let Some(info) = rest.strip_prefix("```") {
            let mut words = info.split_whitespace();
            let lang = words.next().unwrap_or("").to_string();
            let no_run = words.any(|w| w == "no-run");
            let start = i + 1;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                let l = lines[i];
                body.push(
                    l.get(indent.min(l.len() - l.trim_start().len())..)
                        .unwrap_or(""),
                );
                i += 1;
            }
            assert!(
                i < lines.len(),
                "{file}:{start}: a fenced block is never closed"
            );
            out.push(Block {
                place: format!("{file}:{start}"),
                lang,
                no_run,
                text: body.join("\n") + "\n",
            });
        }
        i += 1;
    }
    out
}

fn all_blocks() -> Vec<Block> {
    documents().iter().flat_map(|(f, d)| blocks(f, d)).collect()
}

/// A fresh directory for one example (under the target directory, whose
/// file system takes direct I/O), with `bin/geoflash` and `workloads/`.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("doc-example-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("create a directory for the example");
    std::fs::create_dir(dir.path().join("bin")).expect("create bin/");
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_geoflash"),
        dir.path().join("bin/geoflash"),
    )
    .expect("link bin/geoflash");
    std::os::unix::fs::symlink(root().join("workloads"), dir.path().join("workloads"))
        .expect("link workloads/");
    dir
}

/// Runs `program args` in `dir` with its `bin/` first on `PATH`: Ok, or
/// the exit status with both outputs.
fn run_in(dir: &Path, program: &str, args: &[&str]) -> Result<String, String> {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{}\n--- stdout\n{stdout}--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The commands of a shell block: continued lines joined, comments and
/// blank lines left out.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head.trim_end());
            cur.push(' ');
        } else {
            cur.push_str(t);
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// What a runnable shell example may call besides `geoflash`.
const SHELL_HELPERS: &[&str] = &["printf", "echo", "cat", "head", "ls", "mkdir", "test"];

const LANGUAGES: &[&str] = &["sh", "toml", "json", "rust", "python", "sql", "text"];

#[test]
fn every_block_names_a_language_with_a_runner() {
    let blocks = all_blocks();
    assert!(
        blocks.len() > 20,
        "only {} fenced blocks found",
        blocks.len()
    );
    let mut wrong = Vec::new();
    for b in &blocks {
        if !LANGUAGES.contains(&b.lang.as_str()) {
            wrong.push(format!(
                "{}: language `{}`: use one of {LANGUAGES:?} (`text` for output and synopses)",
                b.place, b.lang
            ));
        } else if b.lang == "rust" && !b.place.starts_with("README.md:") {
            wrong.push(format!(
                "{}: a ```rust example outside README.md is run by no doctest",
                b.place
            ));
        } else if b.lang == "sql" && !b.place.starts_with("docs/results-schema.md:") {
            wrong.push(format!(
                "{}: a ```sql example outside docs/results-schema.md is run by no test",
                b.place
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_shell_examples_run() {
    let mut ran = 0;
    let mut failed = Vec::new();
    for b in all_blocks().iter().filter(|b| b.lang == "sh" && !b.no_run) {
        let cmds = commands(&b.text);
        let refused: Vec<&String> = cmds
            .iter()
            .filter(|c| {
                let first = c.split_whitespace().next().unwrap_or("");
                first != "geoflash" && !SHELL_HELPERS.contains(&first)
            })
            .collect();
        if !refused.is_empty() {
            failed.push(format!(
                "{}: {refused:?} is neither `geoflash` nor one of {SHELL_HELPERS:?}: \
                 mark the block ```sh no-run if it is not meant to run in the tests",
                b.place
            ));
            continue;
        }
        let dir = workdir();
        let script = format!("set -euo pipefail\n{}", b.text);
        let start = std::time::Instant::now();
        let outcome = run_in(dir.path(), "bash", &["-c", &script]);
        eprintln!("{}: {:.1} s", b.place, start.elapsed().as_secs_f64());
        match outcome {
            Ok(_) => ran += 1,
            Err(e) => failed.push(format!("{}: the example failed: {e}", b.place)),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    assert!(ran >= 2, "only {ran} shell examples ran");
}

#[test]
fn the_workload_examples_pass_the_check() {
    let mut checked = 0;
    let mut failed = Vec::new();
    for b in all_blocks()
        .iter()
        .filter(|b| b.lang == "toml" && !b.no_run)
    {
        let dir = workdir();
        let file = dir.path().join("example.toml");
        std::fs::write(&file, &b.text).expect("write example.toml");
        match run_in(
            dir.path(),
            "geoflash",
            &["bench", "example.toml", "--check", "--results", "r.sqlite"],
        ) {
            Ok(_) => checked += 1,
            Err(e) => failed.push(format!(
                "{}: `geoflash bench --check` refused it: {e}",
                b.place
            )),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
    assert!(checked >= 1, "no workload example found");
}

#[test]
fn the_json_examples_parse() {
    for b in all_blocks()
        .iter()
        .filter(|b| b.lang == "json" && !b.no_run)
    {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&b.text) {
            panic!(
                "{}: not JSON ({e}); mark it ```json no-run if it elides parts",
                b.place
            );
        }
    }
}

/// The anchor GitHub gives a heading: lower case, punctuation other than
/// `-` and `_` dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings (outside fenced blocks); a
/// repeated heading gets `-1`, `-2`, … as on GitHub.
fn anchors(doc: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(&line[hashes..]);
            let n = seen.entry(s.clone()).or_insert(0);
            out.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// The targets of a document's inline links `](target)` outside fenced
/// blocks and code spans, with their line numbers.
fn links(doc: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans hold no links: drop them first.
        let mut text = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                text.push_str(part);
            }
        }
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            if let Some(end) = tail.find(')') {
                out.push((n + 1, tail[..end].to_string()));
                rest = &tail[end..];
            } else {
                break;
            }
        }
    }
    out
}

#[test]
fn links_between_the_documents_resolve() {
    let docs = documents();
    let mut checked = 0;
    let mut broken = Vec::new();
    for (file, doc) in &docs {
        let base = root().join(file).parent().expect("a parent").to_path_buf();
        for (line, target) in links(doc) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let (target_file, target_text) = if path.is_empty() {
                (root().join(file), doc.clone())
            } else {
                let p = base.join(path);
                match std::fs::read_to_string(&p) {
                    Ok(t) => (p, t),
                    Err(_) if p.is_dir() => (p, String::new()),
                    Err(e) => {
                        broken.push(format!("{file}:{line}: `{target}`: {e}"));
                        continue;
                    }
                }
            };
            if let Some(a) = anchor {
                if !anchors(&target_text).contains(a) {
                    broken.push(format!(
                        "{file}:{line}: `{target}`: no heading of {} has the anchor `{a}`",
                        target_file.display()
                    ));
                    continue;
                }
            }
            checked += 1;
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(checked >= 10, "only {checked} links checked");
}

#[test]
fn the_anchor_rules_match_the_documents_headings() {
    assert_eq!(
        slug("Python: geoflash vs rtree"),
        "python-geoflash-vs-rtree"
    );
    assert_eq!(
        slug("I/O trace of an R*-tree build (`ftl=page` vs `ftl=flashdbsim`)"),
        "io-trace-of-an-r-tree-build-ftlpage-vs-ftlflashdbsim"
    );
    let a = anchors("# A\n```\n# not a heading\n```\n## A\n#nope\n");
    assert_eq!(a, BTreeSet::from(["a".to_string(), "a-1".to_string()]));
    assert_eq!(
        links("see [x](docs/a.md#b) and `[y](c.md)` and [z](#d)\n"),
        vec![(1, "docs/a.md#b".to_string()), (1, "#d".to_string())]
    );
    assert_eq!(
        commands("# c\ngeoflash a \\\n  --b\n\nprintf x\n"),
        vec!["geoflash a --b".to_string(), "printf x".to_string()]
    );
}
