//! The report's figures: grouped bars (one group per category on the x
//! axis, one bar per series) in small multiples (facets, a grid of panels
//! sharing series), drawn by `plotters` as SVG at the size the page shows
//! them (at most [`PAGE_WIDTH`] pixels wide, text 13–16 px).
//!
//! Each series has a colour (colour-blind-safe hues that stand out on white:
//! Okabe–Ito's without its yellow; one hue per configuration, a light tint
//! for every other variant such as its device) and a marker shape, drawn in the legend
//! and under each of its bars, below the axis (never above a bar, where it
//! would read as a value), so that series stay apart in grey-scale print.
//! The repeated runs behind each bar's median are drawn on it as dots. The
//! legend sits under the facets, never over the data. A figure whose x axis
//! would hold one category has no x axis labels (its caption names it).
use std::path::Path;

use geoflash::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The widest a figure is drawn, in pixels: the width of the report's text
/// column, so that a figure is shown at the size it is drawn.
pub const PAGE_WIDTH: u32 = 960;

/// The series colours: Okabe and Ito's ("Color Universal Design", 2002)
/// without yellow (too little contrast on white), most distinct first:
/// blue, vermillion, bluish green, reddish purple, sky blue, orange, black,
/// and grey.
pub const OKABE_ITO: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0x99, 0x99, 0x99),
];

/// The marker shapes, one per variant of a configuration ([`style`]): 8
/// hues × 7 markers, 56 series before a pair repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
    Cross,
    TriangleDown,
    Plus,
}

const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::Triangle,
    Marker::Diamond,
    Marker::Cross,
    Marker::TriangleDown,
    Marker::Plus,
];

/// Colour and marker of the series with style number `i` = hue + 8 ×
/// variant: the hue is one of [`OKABE_ITO`] (the report gives one to each
/// configuration), the variant picks the marker (the report gives one to
/// each device or other varied setting), and odd variants are drawn in a
/// light tint of the hue, so a configuration's variants side by side differ
/// in lightness as well as in marker.
fn style(i: usize) -> (RGBColor, Marker) {
    let hue = OKABE_ITO[i % OKABE_ITO.len()];
    let variant = i / OKABE_ITO.len();
    let color = if variant % 2 == 1 { tint(hue) } else { hue };
    (color, MARKERS[variant % MARKERS.len()])
}

/// `c` mixed half and half with white.
fn tint(c: RGBColor) -> RGBColor {
    let mix = |v: u8| ((u16::from(v) + 255) / 2) as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// The style number of hue `hue` (a configuration) and variant `variant`
/// (a device or other setting) for [`GroupedBars::series`].
pub fn style_number(hue: usize, variant: usize) -> usize {
    hue % OKABE_ITO.len() + OKABE_ITO.len() * variant
}

/// One bar: its x-axis group, its series, its value (the median) and the
/// values of the runs behind it (drawn as dots; empty for none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mark {
    /// Index into [`GroupedBars::groups`].
    pub group: usize,
    /// Index into [`GroupedBars::series`].
    pub series: usize,
    /// The bar's height.
    pub value: f64,
    /// The repeated runs' values (the bar is their median).
    pub runs: Vec<f64>,
}

impl Mark {
    /// A bar without runs.
    pub fn new(group: usize, series: usize, value: f64) -> Mark {
        Mark {
            group,
            series,
            value,
            runs: Vec::new(),
        }
    }

    /// (group, series, value): for comparisons in tests.
    pub fn triple(&self) -> (usize, usize, f64) {
        (self.group, self.series, self.value)
    }
}

/// One panel of a figure: its title and its bars.
#[derive(Debug, Clone, Default)]
pub struct Facet {
    /// Title above the panel (e.g. "order: random · durability: none").
    pub title: String,
    /// The bars.
    pub bars: Vec<Mark>,
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
    /// X-axis description, with its unit; empty for a figure without an x
    /// axis (one category, named by the caption): no labels are drawn.
    pub x_desc: String,
    /// Y-axis description, with its unit.
    pub y_desc: String,
}

impl GroupedBars {
    /// True if no facet holds a bar.
    pub fn is_empty(&self) -> bool {
        self.facets.iter().all(|f| f.bars.is_empty())
    }

    /// The figure's size in pixels, as [`draw`] draws it.
    pub fn size(&self) -> (u32, u32) {
        let (fw, fh, columns, rows) = self.grid();
        let width = fw * columns;
        (width, fh * rows + legend_height(self, width))
    }

    /// Facet width and height, columns and rows.
    fn grid(&self) -> (u32, u32, u32, u32) {
        let columns = self.columns.clamp(1, self.facets.len().max(1)) as u32;
        let per_group = self
            .facets
            .iter()
            .map(|f| {
                let mut s: Vec<usize> = f.bars.iter().map(|b| b.series).collect();
                s.sort_unstable();
                s.dedup();
                s.len()
            })
            .max()
            .unwrap_or(1)
            .max(1) as u32;
        // a group label wraps at its spaces: its longest word must fit
        let longest_word = self
            .groups
            .iter()
            .flat_map(|g| g.split(' '))
            .map(|w| text_width(w, 14))
            .max()
            .unwrap_or(0);
        let group_px = (per_group * 26 + 20).max(longest_word + 16).max(70);
        let natural = 100 + group_px * self.groups.len().max(1) as u32;
        // fewer columns (more rows) rather than labels running into each other
        let columns = columns.min((PAGE_WIDTH / natural).max(1));
        let rows = self.facets.len().div_ceil(columns as usize).max(1) as u32;
        let fw = natural.clamp(300, (PAGE_WIDTH / columns).max(220));
        (fw, 320, columns, rows)
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

/// A sans-serif font `px` pixels high in the SVG (plotters writes a font
/// size of size / 1.24).
fn font(px: f64) -> FontDesc<'static> {
    ("sans-serif", px * 1.24).into_font()
}

/// Pixel width of `text` at `px` px sans-serif, estimated (0.6 em a character).
fn text_width(text: &str, px: u32) -> u32 {
    (text.chars().count() as u32) * px * 6 / 10 + 4
}

/// `label` in lines of at most `max_px` pixels at 14 px, broken at spaces
/// (a word longer than that stays whole).
fn wrap(label: &str, max_px: u32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in label.split(' ') {
        match lines.last_mut() {
            Some(l) if text_width(&format!("{l} {word}"), 14) <= max_px => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The legend's entries laid out in rows of at most `width` pixels: per
/// entry, (row, x offset).
fn legend_layout(fig: &GroupedBars, width: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(fig.series.len());
    let (mut row, mut x) = (0u32, 12u32);
    for (label, _) in &fig.series {
        let w = 48 + text_width(label, 14) + 18;
        if x > 12 && x + w > width {
            row += 1;
            x = 12;
        }
        out.push((row, x));
        x += w;
    }
    out
}

/// Height of the legend under the facets of a figure `width` pixels wide.
fn legend_height(fig: &GroupedBars, width: u32) -> u32 {
    let rows = legend_layout(fig, width)
        .last()
        .map_or(0, |&(row, _)| row + 1);
    if rows == 0 {
        0
    } else {
        12 + 26 * rows
    }
}

/// A marker of shape `m` centred on `at` (pixels), of half-size 6.
fn marker<'a, DB: DrawingBackend + 'a>(
    at: (i32, i32),
    m: Marker,
    color: RGBColor,
) -> DynElement<'a, DB, (i32, i32)> {
    let fill = color.filled();
    let edge = BLACK.stroke_width(1);
    let base = EmptyElement::at(at);
    match m {
        Marker::Circle => {
            (base + Circle::new((0, 0), 6, fill) + Circle::new((0, 0), 6, edge)).into_dyn()
        }
        Marker::Square => (base
            + Rectangle::new([(-5, -5), (5, 5)], fill)
            + Rectangle::new([(-5, -5), (5, 5)], edge))
        .into_dyn(),
        Marker::Triangle => (base
            + Polygon::new(vec![(0, -7), (7, 5), (-7, 5)], fill)
            + PathElement::new(vec![(0, -7), (7, 5), (-7, 5), (0, -7)], edge))
        .into_dyn(),
        Marker::TriangleDown => (base
            + Polygon::new(vec![(0, 7), (7, -5), (-7, -5)], fill)
            + PathElement::new(vec![(0, 7), (7, -5), (-7, -5), (0, 7)], edge))
        .into_dyn(),
        Marker::Diamond => (base
            + Polygon::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0)], fill)
            + PathElement::new(vec![(0, -7), (7, 0), (0, 7), (-7, 0), (0, -7)], edge))
        .into_dyn(),
        Marker::Cross => (base
            + PathElement::new(vec![(-5, -5), (5, 5)], color.stroke_width(4))
            + PathElement::new(vec![(-5, 5), (5, -5)], color.stroke_width(4)))
        .into_dyn(),
        Marker::Plus => (base
            + PathElement::new(vec![(-6, 0), (6, 0)], color.stroke_width(4))
            + PathElement::new(vec![(0, -6), (0, 6)], color.stroke_width(4)))
        .into_dyn(),
    }
}

/// Draws `fig` into the SVG file `path`, at [`GroupedBars::size`].
pub fn draw(path: &Path, fig: &GroupedBars) -> Result<()> {
    let plot_err =
        |e: &dyn std::fmt::Display| Error::invalid(format!("plot {}: {e}", path.display()));
    let (fw, fh, columns, rows) = fig.grid();
    let (width, height) = fig.size();
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let (grid, legend) = root.split_vertically(fh * rows);
    let cells = grid.split_evenly((rows as usize, columns as usize));
    let (lo, hi) = fig
        .facets
        .iter()
        .flat_map(|f| {
            f.bars
                .iter()
                .flat_map(|b| std::iter::once(b.value).chain(b.runs.iter().copied()))
        })
        .fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let span = if hi - lo > 0.0 { hi - lo } else { 1.0 };
    let (ylo, yhi) = (
        if lo < 0.0 { lo - 0.05 * span } else { 0.0 },
        if hi > 0.0 || lo == 0.0 {
            hi + 0.05 * span
        } else {
            0.0
        },
    );
    let n = fig.groups.len().max(1);
    for (facet, cell) in fig.facets.iter().zip(&cells) {
        draw_facet(cell, fig, facet, n, (ylo, yhi)).map_err(|e| plot_err(&e))?;
    }
    draw_legend(&legend, fig, fw * columns).map_err(|e| plot_err(&e))?;
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
    let axis = !fig.x_desc.is_empty();
    let mut chart = ChartBuilder::on(cell)
        .caption(&facet.title, font(15.0))
        .margin(8)
        .margin_right(14)
        .x_label_area_size(if axis { 80 } else { 26 })
        .y_label_area_size(78)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), ylo..yhi)?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(0)
        .y_label_formatter(&|v| tick(*v))
        .y_desc(fig.y_desc.as_str())
        .axis_desc_style(font(14.0))
        .label_style(font(13.0));
    if axis {
        mesh.x_desc(fig.x_desc.as_str());
    }
    mesh.draw()?;
    let (bx, by) = cell.get_base_pixel();
    // Under the axis: each bar's marker, then (with an axis) the group labels.
    let (_, bottom) = chart.backend_coord(&(0.0, ylo));
    if axis {
        let label = TextStyle::from(font(14.0)).pos(Pos::new(HPos::Center, VPos::Top));
        let (left, _) = chart.backend_coord(&(-0.5, ylo));
        let (right, _) = chart.backend_coord(&(n as f64 - 0.5, ylo));
        let group_px = ((right - left).max(1) as u32) / n as u32;
        for (i, g) in fig.groups.iter().enumerate() {
            let (px, _) = chart.backend_coord(&(i as f64, ylo));
            for (j, line) in wrap(g, group_px.saturating_sub(6)).into_iter().enumerate() {
                let y = bottom - by + 22 + 17 * j as i32;
                cell.draw(&Text::new(line, (px - bx, y), label.clone()))?;
            }
        }
    }
    // The series drawn in this facet, in legend order: each takes one slot of every group.
    let mut present: Vec<usize> = facet.bars.iter().map(|b| b.series).collect();
    present.sort_unstable();
    present.dedup();
    let k = present.len().max(1) as f64;
    let w = 0.8 / k;
    for b in &facet.bars {
        let slot = present.iter().position(|&p| p == b.series).unwrap_or(0) as f64;
        let x0 = b.group as f64 - 0.4 + slot * w;
        let (color, m) = style(fig.series.get(b.series).map_or(b.series, |x| x.1));
        let corners = [(x0 + 0.06 * w, 0.0), (x0 + 0.94 * w, b.value)];
        chart.draw_series([
            Rectangle::new(corners, color.filled()),
            Rectangle::new(corners, BLACK.stroke_width(1)),
        ])?;
        // The runs: white dots ringed in black, spread across the bar.
        let runs = b.runs.len();
        if runs > 1 {
            for (j, r) in b.runs.iter().enumerate() {
                let x = x0 + w * (0.3 + 0.4 * j as f64 / (runs - 1) as f64);
                chart.draw_series([
                    Circle::new((x, *r), 3, WHITE.filled()),
                    Circle::new((x, *r), 3, BLACK.stroke_width(1)),
                ])?;
            }
        }
        let (px, _) = chart.backend_coord(&(x0 + 0.5 * w, ylo));
        cell.draw(&marker((px - bx, bottom - by + 11), m, color))?;
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
            font(14.0),
        )])?;
    }
    Ok(())
}

fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    fig: &GroupedBars,
    width: u32,
) -> DrawResult {
    for ((label, st), (row, x)) in fig.series.iter().zip(legend_layout(fig, width)) {
        let (x, y) = (x as i32, 18 + 26 * row as i32);
        let (color, m) = style(*st);
        area.draw(&Rectangle::new(
            [(x, y - 8), (x + 18, y + 8)],
            color.filled(),
        ))?;
        area.draw(&Rectangle::new(
            [(x, y - 8), (x + 18, y + 8)],
            BLACK.stroke_width(1),
        ))?;
        area.draw(&marker((x + 32, y), m, color))?;
        area.draw(&Text::new(
            label.as_str(),
            (x + 46, y),
            TextStyle::from(font(14.0)).pos(Pos::new(HPos::Left, VPos::Center)),
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
                    bars: vec![
                        Mark {
                            runs: vec![0.9, 1.0, 1.2],
                            ..Mark::new(0, 0, 1.0)
                        },
                        Mark::new(0, 1, 2.0),
                        Mark::new(1, 0, 3.0),
                    ],
                },
                Facet {
                    title: "order: sessions".into(),
                    bars: vec![Mark::new(1, 1, -1.0)],
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
        // Drawn at most as wide as the page shows it, every text at least 13 px.
        let (w, h) = fig.size();
        assert!(w <= PAGE_WIDTH, "{w}");
        assert!(
            svg.contains(&format!("<SVG WIDTH=\"{w}\" HEIGHT=\"{h}\"")),
            "{svg}"
        );
        for size in svg.split("FONT-SIZE=\"").skip(1) {
            let px: f64 = size.split('"').next().unwrap().parse().unwrap();
            assert!(px >= 13.0, "text of {px} px");
        }
        // The three runs of the first bar: white dots.
        assert!(svg.matches("R=\"3\"").count() >= 3, "{svg}");
    }

    #[test]
    fn a_figure_of_one_category_has_no_x_axis_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.svg");
        let fig = GroupedBars {
            groups: vec!["4 KiB".into()],
            series: vec![("a".into(), 0)],
            facets: vec![Facet {
                title: "t".into(),
                bars: vec![Mark::new(0, 0, 1.0)],
            }],
            columns: 1,
            x_desc: String::new(),
            y_desc: "pages read (pages)".into(),
        };
        draw(&path, &fig).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(!svg.contains("4 KiB"), "{svg}");
        assert!(svg.contains("pages read (pages)"));
    }
}
