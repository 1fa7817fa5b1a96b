//! No function of the workspace's production code is longer than
//! [`MAX_LINES`] lines (issue 45: code is read more than written). Test
//! files and `#[cfg(test)]` modules are left out. The test reads the
//! sources of every crate and names each function over the limit with its
//! file, line and length.
use std::path::{Path, PathBuf};

/// The longest function allowed, from its `fn` line to its closing brace.
const MAX_LINES: usize = 120;

/// Every `.rs` file under `dir` that is not a test file.
fn production_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if name != "tests" {
                production_files(&p, out);
            }
        } else if name.ends_with(".rs") && !name.contains("test") {
            out.push(p);
        }
    }
}

/// The name of the function a line declares, if it does (`fn name`,
/// with any visibility and qualifiers before it).
fn declared_fn(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let at = t.find("fn ")?;
    let before = &t[..at];
    let qualifiers_only = before.split_whitespace().all(|w| {
        w.starts_with("pub") || matches!(w, "const" | "async" | "unsafe" | "extern" | "\"C\"")
    });
    if !qualifiers_only || t.starts_with("//") {
        return None;
    }
    let rest = &t[at + 3..];
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The functions of `text` longer than [`MAX_LINES`]: (line, name, length).
/// A function ends at the first line that is its indentation and `}`; a
/// `#[cfg(test)]` module ends the scan of the file.
fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        let Some(name) = declared_fn(line) else {
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The signature may run over several lines; a declaration without
        // a body (a trait's) ends in `;`.
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        if let Some(close) = (open + 1..lines.len()).find(|&j| lines[j] == format!("{indent}}}")) {
            let len = close - i + 1;
            if len > MAX_LINES {
                out.push((i + 1, name.to_string(), len));
            }
        }
    }
    out
}

#[test]
fn no_production_function_is_longer_than_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in ["geoflash", "geoflash-cli", "geoflash-bench", "geoflash-py"] {
        production_files(&root.join(krate).join("src"), &mut files);
    }
    assert!(
        files.len() > 50,
        "found only {} source files under {}",
        files.len(),
        root.display()
    );
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a source file reads");
        for (line, name, len) in long_functions(&text) {
            long.push(format!("{}:{line}: fn {name} has {len} lines", f.display()));
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_scan_finds_a_long_function_and_skips_test_modules() {
    let body = "    let x = 1;\n".repeat(MAX_LINES);
    let long = format!("pub(crate) fn long(\n    a: u8,\n) -> u8 {{\n{body}}}\n");
    assert_eq!(
        long_functions(&long),
        vec![(1, "long".to_string(), MAX_LINES + 4)]
    );
    let short = "fn short() {\n    let x = 1;\n}\n";
    assert!(long_functions(short).is_empty());
    let in_tests = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert!(long_functions(&in_tests).is_empty());
    let trait_decl = "    fn declared(&self) -> u8;\n";
    assert!(long_functions(trait_decl).is_empty());
}
