//! Range-query steps: windows generated per selectivity or read from a
//! CSV file, each batch run `repetitions` times as one measured row.
use std::path::Path;

use geoflash::engine::Predicate;
use geoflash::geom::Rect;
use geoflash::metrics::Stats;
use geoflash::{Error, Result, SpatialIndex};
use indicatif::ProgressBar;

use super::exec::Exec;
use super::measure::{measure, ok_row, Row};
use crate::target::{Answer, Target};
use crate::windows::{windows, Placement};
use crate::workload::{predicate_name, WindowSource};

/// The windows of a CSV file with a header and rows `minx,miny,maxx,maxy`
/// (a first line of numbers is refused: it is a window, not a header).
fn read_windows_file(path: &Path) -> Result<Vec<Rect>> {
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        page: None,
        source,
    })?;
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(std::io::BufReader::new(file));
    let headers = rdr
        .headers()
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
    crate::formats::check_csv_header(path, headers, &crate::formats::WINDOW_COLUMNS)?;
    let width = headers.len();
    let mut out = Vec::new();
    for rec in rdr.records() {
        let rec = rec.map_err(|e| Error::invalid(format!("{}: {e}", path.display())))?;
        let n = out.len();
        // Lines of blanks are skipped, as empty lines are.
        if !crate::formats::csv_data_record(path, n + 1, rec.as_byte_record(), width)? {
            continue;
        }
        let v: Vec<f64> = rec
            .iter()
            .map(|x| x.parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::invalid(format!(
                    "{}: window {}: not four numbers minx,miny,maxx,maxy",
                    path.display(),
                    n + 1
                ))
            })?;
        let [a, b, c, d] = v.as_slice() else {
            return Err(Error::invalid(format!(
                "{}: window {}: expected minx,miny,maxx,maxy",
                path.display(),
                n + 1
            )));
        };
        out.push(Rect::new(*a, *b, *c, *d).map_err(|e| {
            let e = crate::formats::reason(&e);
            Error::invalid(format!("{}: window {}: {e}", path.display(), n + 1))
        })?);
    }
    if out.is_empty() {
        return Err(Error::invalid(format!("{}: no window", path.display())));
    }
    Ok(out)
}

/// Runs windows `ws` `reps` times with predicate `p`, counting into `s`.
fn run_queries(
    target: &dyn SpatialIndex,
    s: &mut Stats,
    ws: &[Rect],
    p: Predicate,
    reps: u32,
    bar: &ProgressBar,
) -> Result<()> {
    crate::progress::restart(bar, ws.len() as u64 * u64::from(reps));
    for _ in 0..reps {
        for w in ws {
            Answer::from(&target.query(*w, p)?).add_to(s);
            s.operations += 1;
            bar.inc(1);
        }
    }
    Ok(())
}

impl Exec<'_> {
    /// A range_queries step labelled `label`: windows from `source`, one row
    /// per selectivity (or one for a windows file).
    pub(super) fn range_queries(
        &mut self,
        index: &mut Target,
        label: &str,
        source: &WindowSource,
        predicate: &Predicate,
        repetitions: &u32,
        seed: &u64,
    ) -> Result<Vec<Row>> {
        let bar = self.bar.clone();
        let batches: Vec<(String, Vec<Rect>)> = match source {
            WindowSource::File(p) => vec![(
                format!(
                    "windows={}",
                    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
                ),
                read_windows_file(p)?,
            )],
            WindowSource::Generated {
                selectivities,
                labels,
                count,
                aspect,
                placement,
            } => {
                // Windows on data are centred on the objects in the index
                // at this step (not on deleted or not yet inserted ones).
                let data: Vec<Rect> = match placement {
                    Placement::OnData => self.live.iter().map(|(_, r)| *r).collect(),
                    Placement::Uniform => Vec::new(),
                };
                selectivities
                    .iter()
                    .zip(labels)
                    .map(|(sel, l)| {
                        windows(self.extent, *sel, *aspect, *count, *placement, &data, *seed)
                            .map(|w| (format!("selectivity={l}"), w))
                    })
                    .collect::<Result<_>>()?
            }
        };
        let mut rows = Vec::new();
        for (param, ws) in batches {
            let s = measure(index, label, |ix, s| {
                run_queries(ix, s, &ws, *predicate, *repetitions, &bar)
            })?;
            rows.push(ok_row(
                format!("{param};predicate={}", predicate_name(*predicate)),
                s,
            ));
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A windows file's lines of blanks are skipped as empty lines are (it
    /// was "found record with 1 fields"); a short record names its line.
    #[test]
    fn blank_lines_of_a_windows_file_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.csv");
        std::fs::write(&p, "minx,miny,maxx,maxy\n \n0,0,1,1\n\t\n2,2,3,3\n").unwrap();
        assert_eq!(read_windows_file(&p).unwrap().len(), 2);
        std::fs::write(&p, "minx,miny,maxx,maxy\n0,0,1,1\n0,0\n").unwrap();
        let e = read_windows_file(&p).unwrap_err().to_string();
        assert!(e.contains("record 2 (line 3) has 2 fields"), "{e}");
    }

    /// A bad window says "invalid input:" once (it was "invalid input:
    /// w.csv: window 2: invalid input: rectangle … is inverted").
    #[test]
    fn a_bad_window_says_invalid_input_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.csv");
        std::fs::write(&p, "minx,miny,maxx,maxy\n0,0,1,1\n2,0,1,1\n").unwrap();
        let e = read_windows_file(&p).unwrap_err().to_string();
        assert_eq!(e.matches("invalid input:").count(), 1, "{e}");
        assert!(e.contains("w.csv: window 2: rectangle"), "{e}");
    }
}
