//! Query windows by selectivity, as in the seeds: square (or fixed aspect
//! ratio) windows whose area is a given share of the dataset's extent
//! (0.001%, 0.01%, 0.1%, 0.5%, 1% in the papers), placed uniformly in the
//! extent or centred on data objects, and saved to a CSV file
//! (`minx,miny,maxx,maxy` with a header) so runs repeat exactly.
use std::io::Write;
use std::path::Path;

use geoflash::geom::Rect;
use geoflash::{Error, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Where window centres come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Uniform in the extent (windows clipped to stay inside it).
    Uniform,
    /// Centred on the centre of a data object drawn uniformly.
    OnData,
}

from_names!(Placement, "placement", "uniform" => Uniform, "on-data" => OnData);

/// Parses a selectivity: `0.01%` (a percentage) or `0.0001` (a fraction), in (0, 1].
pub fn parse_selectivity(text: &str) -> Result<f64> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        Error::invalid(format!(
            "selectivity {text:?} is not a number or a percentage"
        ))
    })?;
    let f = v * scale;
    if !(f > 0.0 && f <= 1.0) {
        return Err(Error::invalid(format!(
            "selectivity {text:?} must be in (0, 100%]"
        )));
    }
    Ok(f)
}

/// `count` windows of area `selectivity × area(extent)` with width/height
/// ratio `aspect`, placed by `placement` (`data` is needed for `OnData`:
/// the objects to centre windows on; the runner gives those in the index
/// at the step).
pub fn windows(
    extent: Rect,
    selectivity: f64,
    aspect: f64,
    count: usize,
    placement: Placement,
    data: &[Rect],
    seed: u64,
) -> Result<Vec<Rect>> {
    if !(selectivity > 0.0 && selectivity <= 1.0) {
        return Err(Error::invalid(format!(
            "selectivity {selectivity} must be in (0, 1]"
        )));
    }
    if !(aspect > 0.0 && aspect.is_finite()) {
        return Err(Error::invalid(format!(
            "aspect ratio {aspect} must be positive"
        )));
    }
    if placement == Placement::OnData && data.is_empty() {
        return Err(Error::invalid(
            "windows centred on data need data objects: none given (an empty dataset, \
             or an index that earlier steps emptied)",
        ));
    }
    let area = extent.area() * selectivity;
    let w = (area * aspect).sqrt().min(extent.width());
    let h = if w > 0.0 {
        (area / w).min(extent.height())
    } else {
        0.0
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = geoflash::engine::reserve::vec_for(count, "window count")?;
    for _ in 0..count {
        let (cx, cy) = match placement {
            Placement::Uniform => (
                extent.min_x() + w / 2.0 + rng.gen::<f64>() * (extent.width() - w),
                extent.min_y() + h / 2.0 + rng.gen::<f64>() * (extent.height() - h),
            ),
            Placement::OnData => {
                let c = data[rng.gen_range(0..data.len())].center();
                (c.x, c.y)
            }
        };
        out.push(Rect::new(
            cx - w / 2.0,
            cy - h / 2.0,
            cx + w / 2.0,
            cy + h / 2.0,
        )?);
    }
    Ok(out)
}

/// Writes windows as CSV `minx,miny,maxx,maxy` with a header.
pub fn write_windows(path: &Path, windows: &[Rect]) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    writeln!(f, "minx,miny,maxx,maxy").map_err(io)?;
    for r in windows {
        writeln!(f, "{},{},{},{}", r.min_x(), r.min_y(), r.max_x(), r.max_y()).map_err(io)?;
    }
    f.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17, item 2: a window count the machine cannot hold is bad
    /// input, never an abort.
    #[test]
    fn impossible_counts_are_bad_input() {
        let extent = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        let err = windows(
            extent,
            0.01,
            1.0,
            usize::MAX / 4,
            Placement::Uniform,
            &[],
            1,
        )
        .unwrap_err();
        assert!(
            err.is_user_error() && err.to_string().contains("count"),
            "{err}"
        );
    }

    #[test]
    fn area_is_the_selectivity_of_the_extent() {
        let extent = Rect::new(-10.0, 0.0, 30.0, 20.0).unwrap();
        for sel in ["0.001%", "0.01%", "0.1%", "1%", "0.5"] {
            let f = parse_selectivity(sel).unwrap();
            let ws = windows(extent, f, 1.0, 50, Placement::Uniform, &[], 1).unwrap();
            for w in &ws {
                assert!(
                    (w.area() / extent.area() - f).abs() < 1e-9 * f.max(1e-9) + 1e-12,
                    "{sel}"
                );
                assert!(extent.contains(w));
                assert!((w.width() - w.height()).abs() < 1e-9 * w.width().max(1.0));
            }
        }
        let data = vec![Rect::new(1.0, 1.0, 2.0, 2.0).unwrap()];
        let ws = windows(extent, 1e-4, 2.0, 5, Placement::OnData, &data, 1).unwrap();
        for w in ws {
            assert!(
                (w.center().x - 1.5).abs() < 1e-12 && (w.width() / w.height() - 2.0).abs() < 1e-9
            );
        }
    }

    #[test]
    fn bad_input() {
        for s in ["0", "-1%", "101%", "abc", "2"] {
            assert!(parse_selectivity(s).is_err(), "{s}");
        }
        let e = Rect::new(0.0, 0.0, 1.0, 1.0).unwrap();
        assert!(windows(e, 0.1, 0.0, 1, Placement::Uniform, &[], 1).is_err());
        assert!(windows(e, 0.1, 1.0, 1, Placement::OnData, &[], 1).is_err());
        assert!("middle".parse::<Placement>().is_err());
    }
}
