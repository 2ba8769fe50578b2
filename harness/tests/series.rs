//! Interval histograms over time (issue 10): the `.hlog` read back by an
//! independent implementation (PyPI `hdrhistogram`), `harness merge` exact,
//! and several agents started together with `--start-at`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use harness::report::json::{Document, HistogramDoc};
use harness::stats::latency_histogram;
use testkit::process::ServerProcess;

use crate::util::{harness, harness_bin, in_ci, sibling_binary, skip_without, stdout, tmp};
use crate::util::{Behaviour, TestServer};

fn json(text: &str) -> Document {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not a run document: {e}\n{text}"))
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The venv scripts/install-deps makes for PyPI `hdrhistogram`.
fn hdrhistogram_python() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    let python = cache.join("benchlab/pytools/bin/python");
    python.exists().then_some(python)
}

/// Sums every interval of an .hlog with PyPI `hdrhistogram`'s own reader;
/// prints `intervals total p50 p99 max`, then each recorded bucket as
/// `value count`. The percentiles are taken at the rank Rust's
/// `value_at_quantile` uses, ceil(q × total) (Java's and Python's own
/// `get_value_at_percentile` round q × total instead, which picks the
/// neighbouring bucket when the fraction is under one half).
const READ_HLOG_PY: &str = r#"
import math, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 60_000_000, 3))
total = HdrHistogram(1, 60_000_000, 3)
n = 0
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    total.add(h)
    n += 1
count = total.get_total_count()
at = lambda q: total.get_value_at_percentile(100.0 * max(1, math.ceil(q * count)) / count)
print(n, count, at(0.5), at(0.99), total.get_max_value())
for item in total.get_recorded_iterator():
    print(item.value_iterated_to, item.count_at_value_iterated_to)
"#;

#[test]
fn the_hlog_is_read_back_by_pypi_hdrhistogram_with_our_totals_and_p99() {
    let Some(python) = hdrhistogram_python() else {
        assert!(
            !in_ci(),
            "CI=true and the PyPI hdrhistogram venv of scripts/install-deps is missing"
        );
        skip_without("PyPI hdrhistogram (scripts/install-deps makes its venv)");
        return;
    };
    let server = TestServer::start(Behaviour::Hello);
    let dir = tmp("hlog-python");
    let hlog = dir.path().join("run.hlog");
    let url = server.url("/hello");
    let h = hlog.to_str().unwrap();
    let out = harness(&[
        "run", &url, "-c", "4", "-d", "2s", "--tag", "t1", "--hlog", h, "--format", "json",
    ]);
    let doc = json(&stdout(&out));
    assert!(doc.requests.ok > 0);
    let read = Command::new(&python)
        .args(["-c", READ_HLOG_PY, h])
        .output()
        .expect("run python");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let text = String::from_utf8_lossy(&read.stdout);
    let mut lines = text.lines();
    let fields: Vec<u64> = lines
        .next()
        .expect("a summary line")
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    // Bucket for bucket, the histogram of our JSON.
    let buckets: Vec<[u64; 2]> = lines
        .map(|l| {
            let (v, c) = l.split_once(' ').expect("value count");
            [v.parse().unwrap(), c.parse().unwrap()]
        })
        .collect();
    assert_eq!(buckets, doc.histogram.buckets);
    let l = &doc.latency_us;
    assert_eq!(
        fields,
        vec![
            doc.intervals.len() as u64,
            doc.requests.ok,
            l.p50,
            l.p99,
            l.max
        ],
        "PyPI hdrhistogram reads (intervals, count, p50, p99, max) of our .hlog"
    );
    assert!(doc.intervals.len() >= 2, "a 2 s run has two intervals");
    // Tagged lines, µs values, ms max column.
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(text.contains("#[MaxValueDivisor: 1000.000]"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("Tag=t1,0.000,1.000,")),
        "{text}"
    );
}

/// The header lines of an .hlog and its interval lines, each with the
/// comment lines just before it.
fn split_hlog(text: &str) -> (String, Vec<String>) {
    let mut header = String::new();
    let mut intervals = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        if line.starts_with('#') {
            if intervals.is_empty() && !line.starts_with("#failures") {
                header.push_str(line);
                header.push('\n');
            } else {
                pending.push_str(line);
                pending.push('\n');
            }
        } else {
            pending.push_str(line);
            pending.push('\n');
            intervals.push(std::mem::take(&mut pending));
        }
    }
    (header, intervals)
}

#[test]
fn merging_n_partial_logs_gives_exactly_the_histogram_of_all_samples() {
    let server = TestServer::start(Behaviour::Hello);
    let dir = tmp("merge-parts");
    let whole = dir.path().join("whole.hlog");
    let url = server.url("/hello");
    let out = harness(&[
        "run",
        &url,
        "-c",
        "3",
        "-d",
        "3s",
        "--hlog",
        whole.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let doc = json(&stdout(&out));
    let (header, lines) = split_hlog(&std::fs::read_to_string(&whole).unwrap());
    assert!(lines.len() >= 3, "{lines:?}");
    // Three partial logs: each interval in one of them, round robin.
    let mut parts = Vec::new();
    for p in 0..3 {
        let mut text = header.clone();
        for l in lines.iter().skip(p).step_by(3) {
            text.push_str(l);
        }
        let path = dir.path().join(format!("part{p}.hlog"));
        std::fs::write(&path, text).unwrap();
        parts.push(path.to_string_lossy().into_owned());
    }
    let mut args = vec!["merge", "--format", "json"];
    args.extend(parts.iter().map(String::as_str));
    let merged = json(&stdout(&harness(&args)));
    // Every sample, bucket for bucket, and so every percentile.
    assert_eq!(merged.histogram, doc.histogram);
    assert_eq!(merged.latency_us, doc.latency_us);
    assert_eq!(merged.requests.ok, doc.requests.ok);
    // And each interval in its place on the time axis.
    let per = |d: &Document| {
        d.intervals
            .iter()
            .map(|i| (i.start_s, i.ok, i.p99_us))
            .collect::<Vec<_>>()
    };
    assert_eq!(per(&merged), per(&doc));
    assert_eq!(merged.recording.unwrap().merged.len(), 3);
}

#[test]
fn four_agents_with_one_start_at_merge_to_their_sum_inside_the_common_window() {
    let server = ServerProcess::start(sibling_binary("event-loop").to_str().unwrap(), &[]);
    let url = format!("http://{}/hello", server.addr);
    let dir = tmp("agents");
    let duration_s = 2.0;
    // Two seconds for four processes to start: if one is later, it says so
    // and its own window is checked (never an early start, never shorter).
    let start_at = (now_s() + 2.0).ceil();
    let at = format!("{start_at}");
    let agents: Vec<_> = (1..=4)
        .map(|i| {
            let tag = format!("agent-{i}");
            let hlog = dir.path().join(format!("{tag}.hlog"));
            let child = Command::new(harness_bin())
                .args(["run", &url, "-c", "2", "--threads", "1", "-d", "2s"])
                .args(["--start-at", &at, "--tag", &tag, "--format", "json"])
                .arg("--hlog")
                .arg(&hlog)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start an agent");
            (hlog, child)
        })
        .collect();
    let mut docs = Vec::new();
    let mut hlogs = Vec::new();
    for (hlog, child) in agents {
        let out = child.wait_with_output().expect("agent ends");
        let doc = json(&stdout(&out));
        let rec = doc.recording.clone().expect("recording");
        let late = rec.late_s.expect("late_s with --start-at");
        assert_eq!(rec.start_at_unix_s, Some(start_at));
        assert!(late >= 0.0, "an agent began {late} s early");
        // A late start is said (the tolerance is 0.1 s; the engine's clock
        // is read a moment after the check).
        let warned = String::from_utf8_lossy(&out.stderr).contains("after --start-at");
        if !(0.05..=0.15).contains(&late) {
            assert_eq!(warned, late > 0.1, "late {late} s: warned {warned}");
        }
        // Its requests inside [start_at, start_at + late + d].
        let begin = doc.outcome.started_unix_s;
        let end = begin + doc.outcome.duration_s;
        assert!(begin >= start_at && end <= start_at + late + duration_s + 0.01);
        assert!(
            (doc.outcome.duration_s - duration_s).abs() < 0.01,
            "full duration"
        );
        for i in &doc.intervals {
            assert!(i.start_s + i.duration_s <= doc.outcome.duration_s + 1e-9);
        }
        docs.push(doc);
        hlogs.push(hlog.to_string_lossy().into_owned());
    }
    let mut args = vec!["merge", "--format", "json"];
    args.extend(hlogs.iter().map(String::as_str));
    let merged = json(&stdout(&harness(&args)));

    let ok_sum: u64 = docs.iter().map(|d| d.requests.ok).sum();
    assert!(ok_sum > 0);
    assert_eq!(merged.requests.ok, ok_sum);
    assert_eq!(
        merged.requests.total,
        docs.iter().map(|d| d.requests.total).sum::<u64>()
    );
    // The single combined recording: every agent's samples in one histogram.
    let mut combined = latency_histogram();
    for d in &docs {
        combined.add(d.histogram.to_histogram().unwrap()).unwrap();
    }
    assert_eq!(merged.histogram, HistogramDoc::of(&combined));
    // Aligned on absolute time: started together, they share their slots.
    let latest = docs
        .iter()
        .map(|d| d.outcome.started_unix_s)
        .fold(0.0, f64::max);
    if latest - start_at < 0.5 {
        assert_eq!(merged.intervals.len(), docs[0].intervals.len());
        for (k, i) in merged.intervals.iter().enumerate() {
            let sum: u64 = docs.iter().map(|d| d.intervals[k].ok).sum();
            assert_eq!(i.ok, sum, "interval {k}");
        }
    }
    assert!(merged.outcome.started_unix_s >= start_at);
}

#[test]
fn a_late_agent_warns_and_still_runs_its_whole_duration() {
    let server = TestServer::start(Behaviour::Hello);
    let url = server.url("/hello");
    let at = format!("{}", (now_s() - 5.0).floor());
    let out = harness(&[
        "run",
        &url,
        "-c",
        "1",
        "-d",
        "1s",
        "--start-at",
        &at,
        "--format",
        "json",
    ]);
    let doc = json(&stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: starting") && err.contains("after --start-at"),
        "{err}"
    );
    assert!(doc.recording.unwrap().late_s.unwrap() >= 5.0);
    assert!(
        (doc.outcome.duration_s - 1.0).abs() < 0.01,
        "{}",
        doc.outcome.duration_s
    );
}

#[test]
fn merge_refuses_bad_input_with_a_reason() {
    let dir = tmp("merge-bad");
    let mut h = latency_histogram();
    h.record_n(100, 5).unwrap();
    let b64 = harness::intervals::encode_base64(&h);
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let one = write(
        "one.hlog",
        format!("0.0,1.0,0.1,{b64}\n1.0,1.0,0.1,{b64}\n"),
    );
    let two = write(
        "two.hlog",
        format!("0.0,2.0,0.1,{b64}\n2.0,2.0,0.1,{b64}\n"),
    );
    let uneven = write(
        "uneven.hlog",
        format!("0.0,1.0,0.1,{b64}\n1.0,3.0,0.1,{b64}\n5.0,1.0,0.1,{b64}\n"),
    );
    let junk = write("junk.hlog", "hello, world\n".into());
    let missing = dir
        .path()
        .join("missing.hlog")
        .to_string_lossy()
        .into_owned();
    for (args, expect) in [
        (
            vec![one.as_str(), two.as_str()],
            "mismatched interval lengths",
        ),
        (vec![uneven.as_str()], "differ in length"),
        (vec![junk.as_str()], "not an HdrHistogram interval log"),
        (vec![missing.as_str()], "cannot read"),
    ] {
        let mut a = vec!["merge"];
        a.extend(args);
        let out = harness(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{a:?} succeeded");
        assert!(err.contains(expect), "{a:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Two untagged logs of equal intervals add up.
    let out = harness(&["merge", &one, &one, "--format", "json"]);
    assert_eq!(json(&stdout(&out)).requests.ok, 20);
}
