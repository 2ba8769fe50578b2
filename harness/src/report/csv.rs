//! One header line and one data row: the headline numbers of a run, for
//! spreadsheets and for appending runs to one file. A mix adds a row per
//! path after the run's: its `url` is the path's URL, its counters the
//! path's, and what is not counted per path (`aborted`, `non_2xx`, bytes)
//! is empty.

use super::{check_kind, paths, run_check_kind};
use crate::engine::{Pace, RunResult};
use crate::stats::{FailureCounts, Percentiles};

/// The column names, in order.
pub const COLUMNS: &[&str] = &[
    "url",
    "method",
    "connections",
    "threads",
    "keepalive",
    "rate_per_s",
    "latency_corrected",
    "check",
    "end",
    "duration_s",
    "requests",
    "ok",
    "failed",
    "aborted",
    "requests_per_s",
    "ok_per_s",
    "latency_min_us",
    "latency_mean_us",
    "latency_stdev_us",
    "latency_p50_us",
    "latency_p75_us",
    "latency_p90_us",
    "latency_p99_us",
    "latency_p99_9_us",
    "latency_max_us",
    "connect",
    "write",
    "receive",
    "length",
    "exception",
    "status",
    "body",
    "timeout",
    "non_2xx",
    "bytes_received",
    "bytes_sent",
];

/// What differs between the run's row and a path's.
struct Counted<'a> {
    url: String,
    check: &'static str,
    ok: u64,
    failures: &'a FailureCounts,
    latency: Percentiles,
    /// `aborted`, `non_2xx`, `bytes_received`, `bytes_sent`: the run's only.
    totals: Option<[u64; 4]>,
}

pub fn render(r: &RunResult) -> String {
    let s = &r.stats;
    let mut out = format!("{}\n", COLUMNS.join(","));
    let run = Counted {
        url: r.plan.url.clone(),
        check: run_check_kind(r),
        ok: s.ok,
        failures: &s.failures,
        latency: Percentiles::of(&s.latency_us),
        totals: Some([
            s.aborted,
            s.status.non_2xx(),
            s.bytes_received,
            s.bytes_sent,
        ]),
    };
    out.push_str(&row(r, &run));
    for p in paths(r) {
        let path = Counted {
            url: format!(
                "{}{}",
                r.plan.url.trim_end_matches('/'),
                p.route.request.target
            ),
            check: check_kind(&p.route.check),
            ok: p.stats.ok,
            failures: &p.stats.failures,
            latency: p.latency,
            totals: None,
        };
        out.push_str(&row(r, &path));
    }
    out
}

fn row(r: &RunResult, c: &Counted) -> String {
    let l = &c.latency;
    let f = c.failures;
    let requests = c.ok + f.total();
    let total = |i: usize| c.totals.map_or(String::new(), |t| t[i].to_string());
    let row: Vec<String> = vec![
        field(&c.url),
        field(&r.plan.request.method),
        r.plan.connections.to_string(),
        r.threads.to_string(),
        r.plan.keepalive().to_string(),
        match r.plan.pace {
            Pace::Closed => String::new(),
            Pace::Rate(rate) => rate.to_string(),
        },
        r.latency_corrected().to_string(),
        c.check.to_string(),
        r.end.name().to_string(),
        format!("{:.6}", r.duration.as_secs_f64()),
        requests.to_string(),
        c.ok.to_string(),
        f.total().to_string(),
        total(0),
        format!("{:.2}", r.per_s(requests)),
        format!("{:.2}", r.per_s(c.ok)),
        l.min.to_string(),
        format!("{:.1}", l.mean),
        format!("{:.1}", l.stdev),
        l.p50.to_string(),
        l.p75.to_string(),
        l.p90.to_string(),
        l.p99.to_string(),
        l.p99_9.to_string(),
        l.max.to_string(),
        f.connect.to_string(),
        f.write.to_string(),
        f.receive.to_string(),
        f.length.to_string(),
        f.exception.to_string(),
        f.status.to_string(),
        f.body.to_string(),
        f.timeout.to_string(),
        total(1),
        total(2),
        total(3),
    ];
    debug_assert_eq!(row.len(), COLUMNS.len());
    format!("{}\n", row.join(","))
}

/// Quotes a field when it needs it (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(super::field("http://h/a?x=1"), "http://h/a?x=1");
        assert_eq!(super::field("a,b"), "\"a,b\"");
        assert_eq!(super::field("a\"b"), "\"a\"\"b\"");
    }
}
