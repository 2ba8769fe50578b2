//! One header line and one data row: the headline numbers of a run, for
//! spreadsheets and for appending runs to one file.

use super::check_kind;
use crate::engine::{Pace, RunResult};
use crate::stats::Percentiles;

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

pub fn render(r: &RunResult) -> String {
    let s = &r.stats;
    let l = Percentiles::of(&s.latency_us);
    let f = &s.failures;
    let row: Vec<String> = vec![
        field(&r.plan.url),
        field(&r.plan.request.method),
        r.plan.connections.to_string(),
        r.threads.to_string(),
        r.plan.keepalive.to_string(),
        match r.plan.pace {
            Pace::Closed => String::new(),
            Pace::Rate(rate) => rate.to_string(),
        },
        r.latency_corrected().to_string(),
        check_kind(&r.plan.check).to_string(),
        r.end.name().to_string(),
        format!("{:.6}", r.duration.as_secs_f64()),
        s.requests().to_string(),
        s.ok.to_string(),
        f.total().to_string(),
        s.aborted.to_string(),
        format!("{:.2}", r.requests_per_s()),
        format!("{:.2}", r.ok_per_s()),
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
        s.status.non_2xx().to_string(),
        s.bytes_received.to_string(),
        s.bytes_sent.to_string(),
    ];
    debug_assert_eq!(row.len(), COLUMNS.len());
    format!("{}\n{}\n", COLUMNS.join(","), row.join(","))
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
