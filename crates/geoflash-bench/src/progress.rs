//! Progress bars on a terminal, shared by the workbench and the command
//! line: one style whose rate reads as people write rates (`142,763/s`,
//! `12.5/s`, not indicatif's `142,762.8514/s`), and a restart that never
//! shows a position beyond the bar's new length. Off a terminal, where the
//! bars draw nothing, [`Lines`] says the same in a few lines.
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// `n` with its thousands separated by commas (`1,234,567`).
pub fn count(n: u64) -> String {
    group_digits(&n.to_string())
}

/// A string of decimal digits with its thousands separated by commas.
fn group_digits(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate per second for people: thousands separated, no decimals from 100
/// up, one decimal from 1 to 100, three significant digits below 1.
pub fn rate(per_sec: f64) -> String {
    if !per_sec.is_finite() || per_sec <= 0.0 {
        return "0/s".into();
    }
    if per_sec >= 100.0 {
        // Below 2^53 every integer is exact; a rate beyond it is absurd anyway.
        let digits = format!("{:.0}", per_sec.min(9.0e15));
        format!("{}/s", group_digits(&digits))
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

/// Progress off a terminal (CI, `make demo > log`), where a bar draws
/// nothing: a line each time another tenth of the steps is done, and one
/// when [`Lines::EVERY`] has passed since the last line (a slow device can
/// take minutes per tenth); never one per step. The caller prints the lines
/// [`Lines::update`] and [`Lines::finish`] return (on standard error).
#[derive(Debug, Clone)]
pub struct Lines {
    what: String,
    total: u64,
    /// Tenths of `total` already announced.
    tenths: u64,
    started: Instant,
    last_line: Instant,
}

impl Lines {
    /// The most time between two lines while steps are being done.
    pub const EVERY: Duration = Duration::from_secs(5);

    /// Progress of `total` steps of `what` (`build`, `insert`…), started at `now`.
    pub fn new(what: &str, total: u64, now: Instant) -> Lines {
        Lines {
            what: what.to_string(),
            total,
            tenths: 0,
            started: now,
            last_line: now,
        }
    }

    /// The line to print when `done` steps are done at `now`, if any: when
    /// `done` reaches a tenth not yet announced (one line for several
    /// tenths passed at once), or [`Lines::EVERY`] after the last line.
    /// `build: 40% (8,192/20,000), 51,234/s, eta 3 s`.
    pub fn update(&mut self, done: u64, now: Instant) -> Option<String> {
        let done = done.min(self.total);
        let tenths = (done.saturating_mul(10))
            .checked_div(self.total)
            .unwrap_or(0);
        // The last tenth is the end, which `finish` announces.
        let new_tenth = tenths > self.tenths && tenths < 10;
        if !new_tenth && now.saturating_duration_since(self.last_line) < Self::EVERY {
            return None;
        }
        self.tenths = self.tenths.max(tenths);
        self.last_line = now;
        let secs = now.saturating_duration_since(self.started).as_secs_f64();
        let per_sec = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let eta = if per_sec > 0.0 {
            format!(", eta {:.0} s", (self.total - done) as f64 / per_sec)
        } else {
            String::new()
        };
        Some(format!(
            "{}: {}% ({}/{}), {}{eta}",
            self.what,
            done.saturating_mul(100)
                .checked_div(self.total)
                .unwrap_or(0),
            count(done),
            count(self.total),
            rate(per_sec)
        ))
    }

    /// The last line, when all `done` steps are done at `now`:
    /// `build: 20,000 done in 1.2 s (16,667/s)`.
    pub fn finish(&self, done: u64, now: Instant) -> String {
        let secs = now.saturating_duration_since(self.started).as_secs_f64();
        let per_sec = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        format!(
            "{}: {} done in {secs:.1} s ({})",
            self.what,
            count(done),
            rate(per_sec)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::{ProgressDrawTarget, TermLike};
    use std::sync::{Arc, Mutex};

    #[test]
    fn rates_read_as_people_write_them() {
        for (per_sec, shown) in [
            (142_762.851_4, "142,763/s"),
            (999.4, "999/s"),
            (1000.0, "1,000/s"),
            (1_234_567.0, "1,234,567/s"),
            (12.54, "12.5/s"),
            (0.01234, "0.0123/s"),
            (0.5, "0.500/s"),
            (0.0, "0/s"),
            (f64::NAN, "0/s"),
        ] {
            assert_eq!(rate(per_sec), shown, "{per_sec}");
        }
    }

    #[test]
    fn counts_are_grouped_by_thousands() {
        for (n, shown) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (20_000, "20,000"),
            (1_234_567, "1,234,567"),
        ] {
            assert_eq!(count(n), shown);
        }
    }

    #[test]
    fn lines_come_once_a_tenth_and_after_a_pause_never_per_step() {
        let t0 = Instant::now();
        let mut lines = Lines::new("build", 20_000, t0);
        let mut printed = Vec::new();
        // One step at a time, all within the first second: only the tenths.
        for done in 1..=20_000u64 {
            let now = t0 + Duration::from_micros(done * 50);
            printed.extend(lines.update(done, now));
        }
        let percents: Vec<&str> = printed
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
            .collect();
        assert_eq!(
            percents,
            ["10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%"],
            "{printed:?}"
        );
        assert!(
            printed[0].starts_with("build: 10% (2,000/20,000), "),
            "{printed:?}"
        );
        assert!(printed[0].contains("/s, eta "), "{printed:?}");
        assert_eq!(
            lines.finish(20_000, t0 + Duration::from_secs(2)),
            "build: 20,000 done in 2.0 s (10,000/s)"
        );

        // Several tenths at once: one line; no new tenth: a line only after EVERY.
        let mut lines = Lines::new("insert", 100, t0);
        assert!(lines
            .update(35, t0)
            .is_some_and(|l| l.starts_with("insert: 35% ")));
        assert_eq!(lines.update(36, t0 + Duration::from_secs(1)), None);
        let late = lines.update(37, t0 + Lines::EVERY + Duration::from_secs(1));
        assert!(late.is_some_and(|l| l.starts_with("insert: 37% ")));
        assert_eq!(
            lines.update(38, t0 + Lines::EVERY + Duration::from_secs(2)),
            None
        );
        // Nothing to do: no division by zero.
        let mut empty = Lines::new("delete", 0, t0);
        assert_eq!(empty.update(0, t0), None);
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
