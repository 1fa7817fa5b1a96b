//! The report's names, units and tables: what each metric is called and
//! measured in, how a value is printed ("—" where it does not apply), the
//! pivoted tables (configurations × page sizes) and the full table of a
//! step in HTML and Markdown.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{without_page_size, Panel};

/// Shown where a value does not apply (simulated time on a real file, a
/// gain without a baseline).
pub const NOT_APPLICABLE: &str = "—";

pub use crate::results::simulator_only;

/// The divisor from stored value to shown value (`_ns` times in ms).
pub fn scale(metric: &str) -> f64 {
    if metric.ends_with("_ns") {
        1e6
    } else {
        1.0
    }
}

/// A metric's name for people, with its unit: `sim_time_ns` → "simulated
/// time (ms)", `pages_written` → "pages written (pages)".
pub fn label(metric: &str) -> String {
    let known = match metric {
        "sim_time_ns" => Some("simulated time (ms)"),
        "wall_time_ns" => Some("wall time (ms)"),
        "cpu_time_ns" => Some("CPU time (ms)"),
        "pages_written" => Some("pages written (pages)"),
        "pages_read" => Some("pages read (pages)"),
        "nand_erases" => Some("NAND erases (blocks)"),
        "nand_reads" => Some("NAND reads (flash pages)"),
        "nand_programs" => Some("NAND programs (flash pages)"),
        "gc_copies" => Some("GC copies (flash pages)"),
        "device_write_amplification" => Some("device write amplification (×)"),
        "build_rewrite_factor" => Some("rewrite factor (×)"),
        _ => None,
    };
    if let Some(k) = known {
        return k.to_string();
    }
    if let Some(base) = metric.strip_suffix("_ns") {
        return format!("{} (ms)", base.replace('_', " "));
    }
    let unit = if metric.contains("bytes") {
        "bytes"
    } else {
        "count"
    };
    format!("{} ({unit})", metric.replace('_', " "))
}

/// A metric's name without its unit ("simulated time").
pub fn short_label(metric: &str) -> String {
    let l = label(metric);
    match l.rfind(" (") {
        Some(i) => l[..i].to_string(),
        None => l,
    }
}

/// A number with four significant digits (integers as they are).
pub fn number(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let digits = if v == 0.0 {
        0
    } else {
        (3 - v.abs().log10().floor() as i32).clamp(0, 9) as usize
    };
    format!("{v:.digits$}")
}

/// A stored value in the metric's unit ([`scale`]), or "—".
pub fn value(metric: &str, v: Option<f64>) -> String {
    match v {
        Some(v) => number(v / scale(metric)),
        None => NOT_APPLICABLE.into(),
    }
}

/// A gain as a signed percentage, or "—".
pub fn gain(g: Option<f64>) -> String {
    match g {
        Some(g) => format!("{:+.1} %", g * 100.0),
        None => NOT_APPLICABLE.into(),
    }
}

/// A page size in KiB ("4 KiB"; sizes below 1 KiB in bytes).
pub fn page_size(bytes: i64) -> String {
    if bytes >= 1024 && bytes % 1024 == 0 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

/// Escapes text for HTML.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Quotes a CSV field when it needs it.
pub fn csv_field(s: &str) -> String {
    if s.contains(',') || s.contains('"') || s.contains('\n') {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A table: header cells and rows of cells (the first column left-aligned).
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Header cells.
    pub header: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The table in HTML, with a caption when one is given.
    pub fn html(&self, caption: Option<&str>) -> String {
        // A wide table scrolls in its own box rather than being cut off.
        let mut h = String::from("<div class=\"wide\"><table>");
        if let Some(c) = caption {
            let _ = write!(h, "<caption>{}</caption>", html_escape(c));
        }
        h.push_str("<thead><tr>");
        for c in &self.header {
            let _ = write!(h, "<th>{}</th>", html_escape(c));
        }
        h.push_str("</tr></thead><tbody>\n");
        for r in &self.rows {
            h.push_str("<tr>");
            for c in r {
                let _ = write!(h, "<td>{}</td>", html_escape(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
        h
    }

    /// The table in Markdown.
    pub fn markdown(&self) -> String {
        let mut m = format!("| {} |\n|", self.header.join(" | "));
        m.push_str(&"---|".repeat(self.header.len()));
        m.push('\n');
        for r in &self.rows {
            let _ = writeln!(m, "| {} |", r.join(" | "));
        }
        m
    }
}

/// The pivoted table of metric `m` of a panel: one row per configuration
/// (name without page size · dataset (order)), one column per page size.
pub fn pivot(panel: &Panel, m: usize, metric: &str) -> Table {
    let sizes: BTreeSet<i64> = panel.bars.iter().map(|b| b.page_size).collect();
    let mut header = vec!["configuration · dataset (order)".to_string()];
    header.extend(sizes.iter().map(|&s| page_size(s)));
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for b in &panel.bars {
        let name = format!("{} · {}", without_page_size(&b.index_name), b.group);
        let col = sizes.iter().position(|&s| s == b.page_size).unwrap_or(0);
        let cell = value(metric, b.values.get(m).copied().flatten());
        match rows.iter_mut().find(|(n, _)| *n == name) {
            Some((_, cells)) => cells[col] = cell,
            None => {
                let mut cells = vec![NOT_APPLICABLE.to_string(); sizes.len()];
                cells[col] = cell;
                rows.push((name, cells));
            }
        }
    }
    Table {
        header,
        rows: rows
            .into_iter()
            .map(|(n, cells)| std::iter::once(n).chain(cells).collect())
            .collect(),
    }
}

/// The full table of a panel: one row per configuration and page size, the
/// shown metrics and (with a baseline) their gains.
pub fn full(
    panel: &Panel,
    shown: &[usize],
    metrics: &[String],
    gains: Option<&[Vec<Option<f64>>]>,
) -> Table {
    let mut header = vec![
        "configuration · dataset (order)".to_string(),
        "page size".into(),
        "runs".into(),
    ];
    for &m in shown {
        let name = metrics.get(m).map(String::as_str).unwrap_or("");
        header.push(label(name));
        if gains.is_some() {
            header.push(format!("{} gain", short_label(name)));
        }
    }
    let rows = panel
        .bars
        .iter()
        .enumerate()
        .map(|(bi, b)| {
            let mut cells = vec![
                format!("{} · {}", without_page_size(&b.index_name), b.group),
                page_size(b.page_size),
                b.repetitions.to_string(),
            ];
            for &m in shown {
                let name = metrics.get(m).map(String::as_str).unwrap_or("");
                cells.push(value(name, b.values.get(m).copied().flatten()));
                if let Some(g) = gains {
                    cells.push(gain(g.get(m).and_then(|g| g.get(bi).copied().flatten())));
                }
            }
            cells
        })
        .collect();
    Table { header, rows }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_units_and_values() {
        assert_eq!(label("sim_time_ns"), "simulated time (ms)");
        assert_eq!(label("wall_read_ns"), "wall read (ms)");
        assert_eq!(label("log_bytes"), "log bytes (bytes)");
        assert_eq!(label("splits"), "splits (count)");
        assert_eq!(short_label("pages_written"), "pages written");
        assert!(simulator_only("sim_time_ns") && simulator_only("nand_erases"));
        assert!(!simulator_only("wall_time_ns") && !simulator_only("pages_written"));
        assert_eq!(value("sim_time_ns", Some(2_263_000_000.0)), "2263");
        assert_eq!(value("sim_time_ns", Some(30.0)), "0.00003000");
        assert_eq!(value("sim_time_ns", Some(1_234_567.0)), "1.235");
        assert_eq!(value("pages_written", Some(7124.0)), "7124");
        assert_eq!(value("sim_time_ns", None), "—");
        assert_eq!(gain(Some(0.25)), "+25.0 %");
        assert_eq!(gain(None), "—");
        assert_eq!(page_size(2048), "2 KiB");
        assert_eq!(page_size(32768), "32 KiB");
        assert_eq!(page_size(512), "512 B");
    }
}
