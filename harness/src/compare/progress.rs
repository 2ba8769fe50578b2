//! Progress while a comparison runs: an `indicatif` bar per run (server,
//! workload, elapsed, live RPS) on a terminal; one plain line per run
//! otherwise (CI logs, pipes). Everything goes to stderr: stdout keeps the
//! table.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::Snapshot;

pub struct Progress {
    live: bool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            live: std::io::stderr().is_terminal(),
        }
    }

    /// A line of its own (between bars).
    pub fn line(&self, text: &str) {
        eprintln!("{text}");
    }

    /// A bar for one run of `length`.
    pub fn run(&self, label: String, length: Duration) -> RunBar {
        let bar = if self.live {
            let b = ProgressBar::new(length.as_millis().max(1) as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix:<34} [{bar:24}] {elapsed:>4} / {len_s}  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key(
                    "len_s",
                    move |_s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0}s", length.as_secs_f64());
                    },
                )
                .progress_chars("=> "),
            );
            b.set_prefix(label.clone());
            b.enable_steady_tick(Duration::from_millis(250));
            Some(b)
        } else {
            eprintln!("{label} ...");
            None
        };
        RunBar {
            bar,
            label,
            last: (Duration::ZERO, 0),
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Progress::new()
    }
}

pub struct RunBar {
    bar: Option<ProgressBar>,
    label: String,
    last: (Duration, u64),
}

impl RunBar {
    /// The engine's progress callback.
    pub fn update(&mut self, s: &Snapshot) {
        let Some(bar) = &self.bar else { return };
        let dt = s.elapsed.saturating_sub(self.last.0).as_secs_f64();
        let rate = if dt > 0.0 {
            s.requests.saturating_sub(self.last.1) as f64 / dt
        } else {
            0.0
        };
        self.last = (s.elapsed, s.requests);
        bar.set_position(s.elapsed.as_millis() as u64);
        bar.set_message(format!(
            "{:>9} req/s  {} failed",
            crate::report::thousands(rate as u64),
            crate::report::thousands(s.errors)
        ));
    }

    /// Ends the bar and prints the run's one-line result.
    pub fn finish(self, result: &str) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{}  {result}", self.label);
    }
}
