//! The report's figures: grouped bars (one group per category on the x
//! axis, one bar per series) in small multiples (facets, a grid of panels
//! sharing series), drawn by `plotters` as SVG. The legend has its own
//! column right of the facets, never over the data; colours come from the
//! Okabe–Ito palette (safe for the common colour-vision deficiencies) and
//! each series also carries a marker shape above its bars, so that series
//! stay apart in grey-scale print.
use std::path::Path;

use geoflash::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Okabe and Ito's eight colours ("Color Universal Design", 2002): orange,
/// sky blue, bluish green, yellow, blue, vermillion, reddish purple, black.
pub const OKABE_ITO: [RGBColor; 8] = [
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xF0, 0xE4, 0x42),
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x00, 0x00, 0x00),
];

/// The marker shapes, cycled independently of the colours (5 shapes × 8
/// colours: 40 series before a pair repeats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
}

const MARKERS: [Marker; 5] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
    Marker::Cross,
];

/// Colour and marker of the series with style number `i`.
fn style(i: usize) -> (RGBColor, Marker) {
    (OKABE_ITO[i % OKABE_ITO.len()], MARKERS[i % MARKERS.len()])
}

/// One panel of a figure: its title and its bars as (group, series, value).
#[derive(Debug, Clone, Default)]
pub struct Facet {
    /// Title above the panel (e.g. "order: random · durability: none").
    pub title: String,
    /// (x-axis group, series, value) of every bar.
    pub bars: Vec<(usize, usize, f64)>,
}

/// A figure of grouped bars in a grid of facets.
#[derive(Debug, Clone, Default)]
pub struct GroupedBars {
    /// Labels of the x-axis groups (e.g. "2 KiB", "4 KiB").
    pub groups: Vec<String>,
    /// Series: (legend label, style number). The style number fixes colour
    /// and marker, so a configuration looks the same in every figure.
    pub series: Vec<(String, usize)>,
    /// Facets, row by row.
    pub facets: Vec<Facet>,
    /// Facet columns (rows = facets / columns, rounded up).
    pub columns: usize,
    /// X-axis description, with its unit.
    pub x_desc: String,
    /// Y-axis description, with its unit.
    pub y_desc: String,
}

impl GroupedBars {
    /// True if no facet holds a bar.
    pub fn is_empty(&self) -> bool {
        self.facets.iter().all(|f| f.bars.is_empty())
    }
}

/// A y-axis tick: at most 3 decimals, trailing zeros dropped.
fn tick(v: f64) -> String {
    let s = if v.abs() >= 1000.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// Pixel width of `text` at 13 px sans-serif, estimated.
fn text_width(text: &str) -> u32 {
    (text.chars().count() as u32) * 7 + 4
}

/// A marker of shape `m` centred `dy` pixels below (`dy` > 0) or above the
/// data point `at`.
fn marker<'a, DB: DrawingBackend + 'a, C: Clone + 'a>(
    at: C,
    m: Marker,
    dy: i32,
    color: RGBColor,
) -> DynElement<'a, DB, C> {
    let fill = color.filled();
    let edge = BLACK.stroke_width(1);
    let base = EmptyElement::at(at);
    match m {
        Marker::Circle => {
            (base + Circle::new((0, dy), 4, fill) + Circle::new((0, dy), 4, edge)).into_dyn()
        }
        Marker::Square => (base
            + Rectangle::new([(-4, dy - 4), (4, dy + 4)], fill)
            + Rectangle::new([(-4, dy - 4), (4, dy + 4)], edge))
        .into_dyn(),
        Marker::Triangle => (base
            + Polygon::new(vec![(0, dy - 5), (5, dy + 4), (-5, dy + 4)], fill)
            + PathElement::new(
                vec![(0, dy - 5), (5, dy + 4), (-5, dy + 4), (0, dy - 5)],
                edge,
            ))
        .into_dyn(),
        Marker::Diamond => (base
            + Polygon::new(vec![(0, dy - 5), (5, dy), (0, dy + 5), (-5, dy)], fill)
            + PathElement::new(
                vec![(0, dy - 5), (5, dy), (0, dy + 5), (-5, dy), (0, dy - 5)],
                edge,
            ))
        .into_dyn(),
        Marker::Cross => (base
            + PathElement::new(vec![(-4, dy - 4), (4, dy + 4)], color.stroke_width(3))
            + PathElement::new(vec![(-4, dy + 4), (4, dy - 4)], color.stroke_width(3)))
        .into_dyn(),
    }
}

/// Facet panel size in pixels (width grows with the bars it holds).
fn facet_size(fig: &GroupedBars) -> (u32, u32) {
    let per_group = fig
        .facets
        .iter()
        .map(|f| {
            let mut s: Vec<usize> = f.bars.iter().map(|b| b.1).collect();
            s.sort_unstable();
            s.dedup();
            s.len()
        })
        .max()
        .unwrap_or(1)
        .max(1) as u32;
    let longest_group = fig.groups.iter().map(|g| text_width(g)).max().unwrap_or(0);
    let group_px = (per_group * 16 + 12).max(longest_group + 8).max(60);
    let width = (90 + group_px * fig.groups.len().max(1) as u32).clamp(360, 1400);
    (width, 300)
}

/// Draws `fig` into the SVG file `path`.
pub fn draw(path: &Path, fig: &GroupedBars) -> Result<()> {
    let plot_err =
        |e: &dyn std::fmt::Display| Error::invalid(format!("plot {}: {e}", path.display()));
    let columns = fig.columns.clamp(1, fig.facets.len().max(1));
    let rows = fig.facets.len().div_ceil(columns).max(1);
    let (fw, fh) = facet_size(fig);
    let legend_w = fig
        .series
        .iter()
        .map(|s| text_width(&s.0))
        .max()
        .unwrap_or(0)
        + 60;
    let legend_h = 24 + 22 * fig.series.len() as u32;
    let width = fw * columns as u32 + legend_w;
    let height = (fh * rows as u32).max(legend_h);
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let (grid, legend) = root.split_horizontally(fw * columns as u32);
    let cells = grid.split_evenly((rows, columns));
    let (lo, hi) = fig
        .facets
        .iter()
        .flat_map(|f| f.bars.iter().map(|b| b.2))
        .fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let span = if hi - lo > 0.0 { hi - lo } else { 1.0 };
    let (ylo, yhi) = (
        if lo < 0.0 { lo - 0.12 * span } else { 0.0 },
        if hi > 0.0 || lo == 0.0 {
            hi + 0.12 * span
        } else {
            0.0
        },
    );
    let n = fig.groups.len().max(1);
    for (facet, cell) in fig.facets.iter().zip(&cells) {
        draw_facet(cell, fig, facet, n, (ylo, yhi)).map_err(|e| plot_err(&e))?;
    }
    draw_legend(&legend, fig).map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

type DrawResult = std::result::Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw_facet(
    cell: &DrawingArea<SVGBackend<'_>, Shift>,
    fig: &GroupedBars,
    facet: &Facet,
    n: usize,
    (ylo, yhi): (f64, f64),
) -> DrawResult {
    let mut chart = ChartBuilder::on(cell)
        .caption(&facet.title, ("sans-serif", 14))
        .margin(8)
        .margin_right(14)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), ylo..yhi)?;
    let groups = &fig.groups;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            groups.get(i as usize).cloned().unwrap_or_default()
        })
        .y_label_formatter(&|v| tick(*v))
        .x_desc(fig.x_desc.as_str())
        .y_desc(fig.y_desc.as_str())
        .axis_desc_style(("sans-serif", 13))
        .label_style(("sans-serif", 12))
        .draw()?;
    // The series drawn in this facet, in legend order: each takes one slot of every group.
    let mut present: Vec<usize> = facet.bars.iter().map(|b| b.1).collect();
    present.sort_unstable();
    present.dedup();
    let k = present.len().max(1) as f64;
    let w = 0.8 / k;
    for &(g, s, v) in &facet.bars {
        let slot = present.iter().position(|&p| p == s).unwrap_or(0) as f64;
        let x0 = g as f64 - 0.4 + slot * w;
        let (color, m) = style(fig.series.get(s).map_or(s, |x| x.1));
        let corners = [(x0 + 0.06 * w, 0.0), (x0 + 0.94 * w, v)];
        chart.draw_series([
            Rectangle::new(corners, color.filled()),
            Rectangle::new(corners, BLACK.stroke_width(1)),
        ])?;
        let dy = if v < 0.0 { 9 } else { -9 };
        // The marker in pixels, relative to this facet's area.
        let (px, py) = chart.backend_coord(&(x0 + 0.5 * w, v));
        let (bx, by) = cell.get_base_pixel();
        cell.draw(&marker((px - bx, py - by), m, dy, color))?;
    }
    if ylo < 0.0 {
        chart.draw_series([PathElement::new(
            vec![(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
            BLACK.stroke_width(1),
        )])?;
    }
    if facet.bars.is_empty() {
        chart.draw_series([Text::new(
            "no value applies",
            (n as f64 / 2.0 - 0.9, (ylo + yhi) / 2.0),
            ("sans-serif", 13),
        )])?;
    }
    Ok(())
}

fn draw_legend(area: &DrawingArea<SVGBackend<'_>, Shift>, fig: &GroupedBars) -> DrawResult {
    for (row, (label, st)) in fig.series.iter().enumerate() {
        let y = 24 + 22 * row as i32;
        let (color, m) = style(*st);
        area.draw(&Rectangle::new([(12, y - 6), (28, y + 6)], color.filled()))?;
        area.draw(&Rectangle::new(
            [(12, y - 6), (28, y + 6)],
            BLACK.stroke_width(1),
        ))?;
        area.draw(&marker((38, y), m, 0, color))?;
        area.draw(&Text::new(
            label.as_str(),
            (50, y - 7),
            ("sans-serif", 13).into_font(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(-0.0), "0");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(12000.0), "12000");
        assert_eq!(tick(-25.0), "-25");
    }

    #[test]
    fn styles_differ_for_forty_series() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..40 {
            let (c, m) = style(i);
            assert!(seen.insert((c.0, c.1, c.2, m as u8)), "style {i} repeats");
        }
    }

    #[test]
    fn a_figure_has_one_filled_rect_per_bar_and_its_legend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        let fig = GroupedBars {
            groups: vec!["2 KiB".into(), "4 KiB".into()],
            series: vec![("a".into(), 0), ("b".into(), 1)],
            facets: vec![
                Facet {
                    title: "order: random".into(),
                    bars: vec![(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0)],
                },
                Facet {
                    title: "order: sessions".into(),
                    bars: vec![(1, 1, -1.0)],
                },
            ],
            columns: 2,
            x_desc: "page size (KiB)".into(),
            y_desc: "gain (%)".into(),
        };
        draw(&path, &fig).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap().to_uppercase();
        let fills = |c: RGBColor| {
            svg.matches(&format!("FILL=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2))
                .count()
        };
        // Series a: 2 bars + 2 markers + legend swatch and marker; b the same.
        assert!(fills(OKABE_ITO[0]) >= 2 + 2 + 2, "{svg}");
        assert!(fills(OKABE_ITO[1]) >= 2 + 2 + 2, "{svg}");
        for t in [
            "2 KIB",
            "4 KIB",
            "PAGE SIZE (KIB)",
            "GAIN (%)",
            "ORDER: RANDOM",
        ] {
            assert!(svg.contains(t), "{t}");
        }
    }
}
