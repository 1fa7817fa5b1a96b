//! Progress bars on a terminal, shared by the workbench and the command
//! line: one style whose rate reads as people write rates (`142,763/s`,
//! `12.5/s`, not indicatif's `142,762.8514/s`), and a restart that never
//! shows a position beyond the bar's new length.
use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// A rate per second for people: thousands separated, no decimals from 100
/// up, one decimal from 1 to 100, three significant digits below 1.
pub fn rate(per_sec: f64) -> String {
    if !per_sec.is_finite() || per_sec <= 0.0 {
        return "0/s".into();
    }
    if per_sec >= 100.0 {
        // Below 2^53 every integer is exact; a rate beyond it is absurd anyway.
        let digits = format!("{:.0}", per_sec.min(9.0e15));
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{out}/s")
    } else if per_sec >= 1.0 {
        format!("{per_sec:.1}/s")
    } else {
        let decimals = (-per_sec.log10().floor()) as usize + 2;
        format!("{per_sec:.decimals$}/s")
    }
}

/// A bar style with indicatif's `template`, drawn `=> `, where `{rate}` is
/// the bar's rate as [`rate`] prints it.
pub fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .map(|s| {
            s.progress_chars("=> ").with_key(
                "rate",
                |st: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&rate(st.per_sec()));
                },
            )
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// Starts `bar` over for `len` steps: the position goes to 0 before the
/// length changes (the other way round, a frame drawn between the two calls
/// showed the last step's position against the new length, such as
/// `range_queries … 1792/20`), and the rate and ETA start afresh.
pub fn restart(bar: &ProgressBar, len: u64) {
    bar.set_position(0);
    bar.set_length(len);
    bar.reset_eta();
    bar.reset_elapsed();
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::{ProgressDrawTarget, TermLike};
    use std::sync::{Arc, Mutex};

    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(rate(142_762.851_4), "142,763/s");
        assert_eq!(rate(999.4), "999/s");
        assert_eq!(rate(1000.0), "1,000/s");
        assert_eq!(rate(1_234_567.0), "1,234,567/s");
        assert_eq!(rate(12.54), "12.5/s");
        assert_eq!(rate(0.01234), "0.0123/s");
        assert_eq!(rate(0.5), "0.500/s");
        assert_eq!(rate(0.0), "0/s");
        assert_eq!(rate(f64::NAN), "0/s");
    }

    /// A terminal that keeps every line drawn.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl TermLike for Recorder {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            if !s.trim().is_empty() {
                if let Ok(mut v) = self.0.lock() {
                    v.push(s.to_string());
                }
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_restarted_bar_never_draws_a_position_beyond_its_length() {
        let rec = Recorder::default();
        let bar = ProgressBar::with_draw_target(
            Some(2000),
            ProgressDrawTarget::term_like_with_hz(Box::new(rec.clone()), 250),
        );
        bar.set_style(style("{msg} {pos}/{len} ({rate})"));
        for step in ["build", "range_queries", "knn"] {
            bar.set_message(step);
            restart(&bar, 20);
            for _ in 0..20 {
                bar.inc(1);
                bar.tick();
            }
            bar.set_position(1792);
            restart(&bar, 2000);
            bar.tick();
        }
        let lines = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
        assert!(!lines.is_empty());
        for l in &lines {
            let counts = l.split_whitespace().nth(1).unwrap_or("");
            let (pos, len) = counts.split_once('/').unwrap_or(("0", "0"));
            let (pos, len): (u64, u64) = (pos.parse().unwrap(), len.parse().unwrap());
            assert!(pos <= len, "drew {l:?}");
        }
    }
}
