//! The interval series as CSV (`--series FILE.csv`): one row per interval,
//! its absolute and relative start, requests, failures by kind and latency
//! percentiles in µs (from the interval's own full histogram).

use std::fmt::Write;

use crate::engine::RunResult;

/// The header line's columns, in order.
pub fn columns() -> Vec<&'static str> {
    let mut c = vec![
        "start_unix_s",
        "second",
        "interval_s",
        "requests",
        "ok",
        "failed",
    ];
    c.extend(
        crate::stats::FailureCounts::default()
            .named()
            .map(|(n, _)| n),
    );
    c.extend(["p50_us", "p90_us", "p99_us", "max_us"]);
    c
}

/// The series of `r`, header first.
pub fn render(r: &RunResult) -> Result<String, String> {
    let mut out = columns().join(",");
    out.push('\n');
    let interval = r.plan.interval;
    for i in &r.intervals {
        let offset = interval * i.index;
        let length = r.duration.saturating_sub(offset).min(interval);
        let _ = write!(
            out,
            "{:.3},{},{},{},{},{}",
            r.started_unix_s + offset.as_secs_f64(),
            offset.as_secs(),
            length.as_secs_f64(),
            i.requests(),
            i.ok,
            i.failures.total()
        );
        for (_, n) in i.failures.named() {
            let _ = write!(out, ",{n}");
        }
        let _ = writeln!(out, ",{},{},{},{}", i.p50_us, i.p90_us, i.p99_us, i.max_us);
    }
    Ok(out)
}
