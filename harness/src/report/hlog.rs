//! HdrHistogram interval logs (`.hlog`, as Java's `HistogramLogWriter`
//! writes them and every HdrHistogram implementation reads them): one line
//! per interval, `[Tag=NAME,]start,length,max,histogram`, the histogram V2
//! deflate-compressed and base64-encoded.
//!
//! Our conventions: values are **microseconds** of latency of successful
//! requests; `#[StartTime]` and `#[BaseTime]` are both the Unix time at which
//! measuring began (warm-up excluded), so each line's start is seconds since
//! then; `#[MaxValueDivisor: 1000.000]` makes the (informational) max column
//! milliseconds, as Java's default ratio does for nanosecond logs. Failures
//! are not in the histograms; each interval's counts are in a comment line
//! before it (`#failures ...`), which other readers skip.

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use crate::engine::RunResult;
use crate::intervals::{decode, decode_base64, Interval};
use crate::stats::FailureCounts;

/// The divisor of the max column: µs → ms.
const MAX_VALUE_DIVISOR: f64 = 1000.0;
/// A year of seconds: Java's reader treats smaller line starts as offsets
/// from StartTime when there is no BaseTime.
const YEAR_S: f64 = 365.25 * 86_400.0;

/// `result`'s intervals as an interval log, each line tagged with `tag`
/// (the run's `--tag`) when there is one.
pub fn render(result: &RunResult) -> Result<Vec<u8>, String> {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs_f64(result.started_unix_s.max(0.0));
    let tag = match &result.plan.tag {
        Some(t) => Some(Tag::new(t).ok_or_else(|| format!("{t:?} cannot be an .hlog tag"))?),
        None => None,
    };
    let mut out = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "harness {} run of {}: latency of successful requests in microseconds",
            env!("CARGO_PKG_VERSION"),
            result.plan.url
        ))
        .with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(MAX_VALUE_DIVISOR)
        .begin_log_with(&mut out, &mut serializer)
        .map_err(|e| format!("cannot write the log: {e}"))?;
    let interval = result.plan.interval;
    for i in &result.intervals {
        let offset = interval * i.index;
        // The last interval ends with the run.
        let length = result.duration.saturating_sub(offset).min(interval);
        let h = i.histogram()?;
        writer
            .write_comment(&failures_comment(&i.failures))
            .map_err(|e| format!("cannot write the log: {e}"))?;
        writer
            .write_histogram(&h, offset, length, tag)
            .map_err(|e| format!("cannot write the log: {e}"))?;
    }
    Ok(out)
}

/// `#failures connect=0 write=0 …`: an interval's failure counts.
fn failures_comment(f: &FailureCounts) -> String {
    let kinds: Vec<String> = f
        .named()
        .iter()
        .map(|(name, n)| format!("{name}={n}"))
        .collect();
    format!("failures {}", kinds.join(" "))
}

/// The counts of a `#failures` comment, if `line` is one.
fn parse_failures(line: &str) -> Option<FailureCounts> {
    let rest = line.strip_prefix("#failures ")?;
    let mut f = FailureCounts::default();
    for pair in rest.split_whitespace() {
        let (name, n) = pair.split_once('=')?;
        let n: u64 = n.parse().ok()?;
        let slot = match name {
            "connect" => &mut f.connect,
            "write" => &mut f.write,
            "receive" => &mut f.receive,
            "length" => &mut f.length,
            "exception" => &mut f.exception,
            "status" => &mut f.status,
            "body" => &mut f.body,
            "timeout" => &mut f.timeout,
            "handshake" => &mut f.handshake,
            "reset" => &mut f.reset,
            "goaway" => &mut f.goaway,
            "order" => &mut f.order,
            "interleave" => &mut f.interleave,
            _ => continue,
        };
        *slot = n;
    }
    Some(f)
}

/// One interval read from a log.
#[derive(Clone, Debug)]
pub struct LoggedInterval {
    pub tag: Option<String>,
    /// Its start, seconds since the Unix epoch.
    pub start_unix_s: f64,
    pub length: Duration,
    pub histogram: Histogram<u64>,
    /// From the `#failures` comment before it (zero in logs of other tools).
    pub failures: FailureCounts,
}

/// Every interval of an interval log, in file order.
pub fn parse(text: &[u8]) -> Result<Vec<LoggedInterval>, String> {
    let mut start_time: Option<f64> = None;
    let mut base_time: Option<f64> = None;
    let mut out = Vec::new();
    // The failure comments, by line, to pair with the interval after each.
    let text_str = std::str::from_utf8(text).map_err(|_| "the file is not UTF-8 text")?;
    let mut failures = text_str
        .lines()
        .filter(|l| !l.starts_with('#') || l.starts_with("#failures ") || l.starts_with("#["))
        .filter(|l| !l.trim().is_empty() && !l.starts_with("\"StartTimestamp\""));
    for entry in IntervalLogIterator::new(text) {
        let entry = entry.map_err(|e| format!("not an HdrHistogram interval log ({e:?})"))?;
        match entry {
            LogEntry::StartTime(t) => start_time = Some(t.as_secs_f64()),
            LogEntry::BaseTime(t) => base_time = Some(t.as_secs_f64()),
            LogEntry::Interval(h) => {
                let mut counts = FailureCounts::default();
                // Skip to this interval's line, keeping the last comment before it.
                for line in failures.by_ref() {
                    if let Some(f) = parse_failures(line) {
                        counts = f;
                    } else if !line.starts_with('#') {
                        break;
                    }
                }
                let ts = h.start_timestamp().as_secs_f64();
                let base = match (base_time, start_time) {
                    (Some(b), _) => b,
                    (None, Some(s)) if ts < s - YEAR_S => s,
                    _ => 0.0,
                };
                let bytes = decode_base64(h.encoded_histogram())?;
                out.push(LoggedInterval {
                    tag: h.tag().map(|t| t.as_str().to_string()),
                    start_unix_s: base + ts,
                    length: h.duration(),
                    histogram: decode(&bytes)?,
                    failures: counts,
                });
            }
        }
    }
    if out.is_empty() {
        return Err("no interval histogram in it: not an HdrHistogram interval log".into());
    }
    Ok(out)
}

/// `logged` (of one agent) as a run's intervals of `interval` each, counted
/// from `start_unix_s`.
pub fn to_intervals(
    logged: &[LoggedInterval],
    start_unix_s: f64,
    interval: Duration,
) -> Vec<Interval> {
    logged
        .iter()
        .map(|l| {
            let index = ((l.start_unix_s - start_unix_s) / interval.as_secs_f64())
                .round()
                .max(0.0) as u32;
            Interval::of(index, l.histogram.len(), l.failures, &l.histogram)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_comments_round_trip() {
        let f = FailureCounts {
            timeout: 3,
            connect: 1,
            ..FailureCounts::default()
        };
        let line = format!("#{}", failures_comment(&f));
        assert_eq!(parse_failures(&line), Some(f));
        assert_eq!(parse_failures("#other"), None);
    }

    /// fuzz/'s hlog crash: a log whose one interval counts more than
    /// 2^64 - 1 requests is refused, not turned into intervals whose
    /// percentiles overflow.
    #[test]
    fn a_log_counting_past_u64_is_refused() {
        let mut h = crate::stats::latency_histogram();
        for v in [100, 200, 300, 400] {
            h.record_n(v, 1 << 62).unwrap();
        }
        let log = format!(
            "#[StartTime: 1.0]\nTag=A,1.134,1.999,0.442,{}\n",
            crate::intervals::encode_base64(&h)
        );
        let err = parse(log.as_bytes()).unwrap_err();
        assert!(err.contains("past 2^64"), "{err}");
    }

    #[test]
    fn a_log_of_another_tool_is_read_and_garbage_is_refused() {
        let mut h = crate::stats::latency_histogram();
        h.record_n(250, 9).unwrap();
        let b64 = crate::intervals::encode_base64(&h);
        let log = format!("#[StartTime: 1700000000.000 (seconds since epoch)]\n0.000,1.000,0.250,{b64}\n1.000,1.000,0.250,{b64}\n");
        let read = parse(log.as_bytes()).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].start_unix_s, 1_700_000_001.0);
        assert_eq!(read[1].histogram, h);
        assert!(parse(b"hello\nworld\n").is_err());
        assert!(parse(b"").is_err());
        assert!(parse(b"0.0,1.0,2.0,AAAA\n").is_err());
    }
}
