//! `harness merge FILE...`: several runs (agents on several machines, or
//! parts of one recording) added into one report, exactly.
//!
//! Inputs are `.hlog` interval logs (as `harness run --hlog` writes them;
//! a line's tag names its agent) or run JSON documents (`harness run
//! --format json`). Counts add; the latency histogram is the sum of the
//! inputs' histograms, so its percentiles are those of every sample
//! together, not an average of percentiles; intervals are aligned on
//! absolute time (each input's start plus the interval's offset), so the
//! merged series shows what the server saw each second from all agents.
//! The output is a run's, through the same printers as `harness run`.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;

use crate::engine::{
    self, Check, End, Pace, Plan, ProtoPlan, Request, RunResult, Stop, TlsPlan, TlsVersion,
    TransportPlan, Trust,
};
use crate::intervals::{self, Interval};
use crate::report::json::Document;
use crate::report::{self, hlog, Format};
use crate::stats::{latency_histogram, FailureCounts, Stats};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each FILE is an HdrHistogram interval log (.hlog, from `harness run --hlog`,
or any tool that writes the standard format) or a run document (`harness run
--format json`). The merged report says how many requests all of them
finished, and its latency percentiles come from the sum of their histograms:
exactly those of every sample together. Intervals are aligned on absolute
time, so every input must use the same interval length.

From .hlog files only successful requests' latencies are known, plus the
failure counts harness writes beside each interval; byte counts, status
codes and connect times come only from JSON inputs.

Examples:
  harness merge agent-1.hlog agent-2.hlog agent-3.hlog agent-4.hlog
  harness merge agent-*.json --format json > merged.json
  harness merge a.hlog b.hlog --hlog merged.hlog --series merged.csv")]
pub struct MergeArgs {
    /// The runs to add up: .hlog or run JSON files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// How the merged report is printed on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also write the merged intervals as an HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,

    /// Also write the merged interval series as CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub series: Option<PathBuf>,
}

/// One input, as what merging needs of it.
struct Source {
    name: String,
    start_unix_s: f64,
    duration: Duration,
    interval: Duration,
    /// Indexed from `start_unix_s`.
    intervals: Vec<Interval>,
    /// The run's latency histogram (the sum of `intervals` where there are any).
    latency_us: Histogram<u64>,
    /// The rest of the run's counters, where the input has them (JSON).
    doc: Option<Document>,
}

/// The `merge` command.
pub fn run(args: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut sources = Vec::new();
    for path in &args.files {
        sources.extend(read(path).with_context(|| format!("cannot merge {}", path.display()))?);
    }
    let result = merge(sources)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report::render(args.format, &result).as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the report")?;
    if let Some(path) = &args.hlog {
        let log = hlog::render(&result).map_err(anyhow::Error::msg)?;
        std::fs::write(path, log).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &args.series {
        let csv = report::series::render(&result).map_err(anyhow::Error::msg)?;
        std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(m) = &result.message {
        eprintln!("harness: {m}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The sources in `path`: one per tag of an .hlog (one if untagged), one
/// for a run document.
fn read(path: &Path) -> anyhow::Result<Vec<Source>> {
    let bytes = std::fs::read(path).context("cannot read it")?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    read_bytes(name, &bytes)
}

/// The sources in a file's bytes (see [`read`]); `name` names them.
fn read_bytes(name: String, bytes: &[u8]) -> anyhow::Result<Vec<Source>> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        let doc: Document =
            serde_json::from_slice(bytes).context("not a `harness run --format json` document")?;
        return Ok(vec![from_document(name, doc)?]);
    }
    let logged = hlog::parse(bytes).map_err(anyhow::Error::msg)?;
    let mut by_tag: BTreeMap<Option<String>, Vec<hlog::LoggedInterval>> = BTreeMap::new();
    for l in logged {
        by_tag.entry(l.tag.clone()).or_default().push(l);
    }
    by_tag
        .into_iter()
        .map(|(tag, lines)| {
            let name = tag.map_or_else(|| name.clone(), |t| format!("{t} ({name})"));
            from_log(name, &lines)
        })
        .collect()
}

fn from_log(name: String, lines: &[hlog::LoggedInterval]) -> anyhow::Result<Source> {
    let interval = lines[0].length;
    // The last interval may be shorter: the run ended in it.
    for l in &lines[..lines.len() - 1] {
        if l.length.abs_diff(interval) > Duration::from_millis(1) {
            bail!(
                "{name}: its intervals differ in length ({:.3} s and {:.3} s): \
                 harness merges logs of equal intervals",
                interval.as_secs_f64(),
                l.length.as_secs_f64()
            );
        }
    }
    let interval = whole_seconds(&name, interval)?;
    let start = lines
        .iter()
        .map(|l| l.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let end = lines
        .iter()
        .map(|l| l.start_unix_s + l.length.as_secs_f64())
        .fold(f64::NEG_INFINITY, f64::max);
    let intervals = hlog::to_intervals(lines, start, interval);
    let latency_us = Interval::sum(&intervals).map_err(anyhow::Error::msg)?;
    Ok(Source {
        name,
        start_unix_s: start,
        duration: Duration::from_secs_f64((end - start).max(0.0)),
        interval,
        intervals,
        latency_us,
        doc: None,
    })
}

fn from_document(name: String, doc: Document) -> anyhow::Result<Source> {
    let interval = doc.recording.as_ref().map_or(Duration::from_secs(1), |r| {
        Duration::from_secs_f64(r.interval_s)
    });
    let interval = whole_seconds(&name, interval)?;
    let intervals = doc
        .intervals
        .iter()
        .map(|i| {
            let h = intervals::decode(&intervals::decode_base64(&i.histogram_v2)?)?;
            let index = (i.start_s / interval.as_secs_f64()).round() as u32;
            Ok(Interval::of(index, i.ok, i.failures, &h))
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)?;
    let latency_us = doc
        .histogram
        .to_histogram()
        .map_err(|e| anyhow::anyhow!("its histogram: {e}"))?;
    let name = doc
        .recording
        .as_ref()
        .and_then(|r| r.tag.clone())
        .map_or(name.clone(), |t| format!("{t} ({name})"));
    Ok(Source {
        name,
        start_unix_s: doc.outcome.started_unix_s,
        duration: Duration::from_secs_f64(doc.outcome.duration_s.max(0.0)),
        interval,
        intervals,
        latency_us,
        doc: Some(doc),
    })
}

fn whole_seconds(name: &str, d: Duration) -> anyhow::Result<Duration> {
    let secs = d.as_secs_f64().round();
    if secs < 1.0 || (d.as_secs_f64() - secs).abs() > 0.001 {
        bail!(
            "{name}: intervals of {:.3} s: harness merges intervals of whole seconds",
            d.as_secs_f64()
        );
    }
    Ok(Duration::from_secs(secs as u64))
}

/// `sources` added into one run.
fn merge(sources: Vec<Source>) -> anyhow::Result<RunResult> {
    let Some(first) = sources.first() else {
        bail!("nothing to merge");
    };
    let interval = first.interval;
    if let Some(other) = sources.iter().find(|s| s.interval != interval) {
        bail!(
            "mismatched interval lengths: {} has {} s intervals, {} has {} s; \
             merge runs recorded with the same --interval",
            first.name,
            interval.as_secs(),
            other.name,
            other.interval.as_secs()
        );
    }
    let base = sources
        .iter()
        .map(|s| s.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let end = sources
        .iter()
        .map(|s| s.start_unix_s + s.duration.as_secs_f64())
        .fold(f64::NEG_INFINITY, f64::max);
    let duration = Duration::from_secs_f64((end - base).max(0.0));

    // Intervals on absolute time: an agent's interval k starts at its start
    // plus k intervals; agents started together share the slot.
    let mut slots: BTreeMap<u32, (u64, FailureCounts, Histogram<u64>)> = BTreeMap::new();
    let mut stats = Stats::default();
    let mut notes = Vec::new();
    for s in &sources {
        let shift = ((s.start_unix_s - base) / interval.as_secs_f64()).round() as u32;
        for i in &s.intervals {
            let slot = slots
                .entry(i.index + shift)
                .or_insert_with(|| (0, FailureCounts::default(), latency_histogram()));
            slot.0 += i.ok;
            slot.1 += &i.failures;
            intervals::add(&mut slot.2, &i.histogram().map_err(anyhow::Error::msg)?)
                .map_err(anyhow::Error::msg)?;
        }
        intervals::add(&mut stats.latency_us, &s.latency_us).map_err(anyhow::Error::msg)?;
        add_counts(&mut stats, s);
    }
    // Every slot up to the last any input has (quiet ones included).
    let count = slots.keys().max().map_or(0, |k| k + 1);
    let merged: Vec<Interval> = (0..count)
        .map(|index| {
            let (ok, failures, h) = slots
                .remove(&index)
                .unwrap_or_else(|| (0, FailureCounts::default(), latency_histogram()));
            Interval::of(index, ok, failures, &h)
        })
        .collect();

    let docs: Vec<&Document> = sources.iter().filter_map(|s| s.doc.as_ref()).collect();
    if docs.len() < sources.len() {
        notes.push("from .hlog inputs only successes, their latency and failure counts are known");
    }
    if !docs.is_empty() {
        notes.push("service, waiting and connect times are not merged (a run document keeps only their percentiles)");
    }
    if docs.iter().any(|d| !d.paths.is_empty()) {
        notes.push("the paths of mixes are not merged: only their totals");
    }
    let mut plan = plan_of(&docs, &sources)?;
    plan.stop = Stop::Duration(duration);
    plan.max_duration = duration;
    plan.interval = interval;
    let names: Vec<String> = sources.iter().map(|s| s.name.clone()).collect();
    Ok(RunResult {
        threads: docs.iter().map(|d| d.settings.threads as usize).sum(),
        io: plan.io,
        io_note: None,
        gather: None,
        plan,
        started_unix_s: base,
        duration,
        end: End::Duration,
        message: Some(format!(
            "merged {} runs ({}); {}",
            names.len(),
            names.join(", "),
            notes.join("; ")
        )),
        stats,
        series: engine::series(&merged, interval),
        intervals: merged,
        merged: names,
    })
}

/// Adds what `s` counted besides latency.
fn add_counts(stats: &mut Stats, s: &Source) {
    let Some(d) = &s.doc else {
        for i in &s.intervals {
            stats.ok += i.ok;
            stats.failures += &i.failures;
        }
        return;
    };
    stats.ok += d.requests.ok;
    stats.failures += &d.failures;
    stats.responses += d.requests.responses;
    stats.aborted += d.requests.aborted;
    for (code, n) in &d.status_codes {
        if let Ok(c) = code.parse::<u16>() {
            stats.status.count_n(c, *n);
        }
    }
    stats.bytes_sent += d.transfer.bytes_sent;
    stats.bytes_received += d.transfer.bytes_received;
    stats.body_bytes += d.transfer.body_bytes;
    stats.connections += d.connections.opened;
    stats.keepalive_responses += d.connections.keepalive_responses;
    if stats.server_software.is_none() {
        stats.server_software.clone_from(&d.server.software);
    }
    if stats.document_length.is_none() {
        stats.document_length = d.server.document_length;
    }
}

/// The plan the merged report describes: the first document's target and
/// settings with the connections, threads and rates of all added up.
fn plan_of(docs: &[&Document], sources: &[Source]) -> anyhow::Result<Plan> {
    let Some(d) = docs.first() else {
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        let request = Request::encode("GET", "/", "-", &[], true);
        let addr: SocketAddr = "0.0.0.0:0".parse().expect("a literal address");
        let mut plan = Plan::new(&names.join(" + "), addr, request, Check::Success);
        plan.connections = 0;
        return Ok(plan);
    };
    let addr: SocketAddr = d
        .target
        .addr
        .parse()
        .unwrap_or_else(|_| "0.0.0.0:0".parse().expect("a literal address"));
    let mut request = Request::encode(
        &d.target.method,
        &d.target.path,
        &d.target.addr,
        &[],
        d.settings.keepalive,
    );
    // What the agents sent, for the merged document (nothing is sent here).
    if let Some(body) = &d.target.body {
        request.body_bytes = Some(body.bytes as usize);
        request.chunked = body.framing == "chunked";
    }
    let check = if d.settings.check == "2xx" {
        Check::Success
    } else {
        Check::for_request(&d.target.method, &d.target.path, true)
    };
    let mut plan = Plan::new(&d.target.url, addr, request, check);
    plan.connections = docs.iter().map(|d| d.settings.connections as usize).sum();
    plan.proto = ProtoPlan::H1 {
        keepalive: d.settings.keepalive,
    };
    // The agents' TLS as asked (h2 and h3 run over it).
    plan.transport = TransportPlan::from_tls(d.tls.as_ref().map(tls_asked));
    if let (Some(proto @ ("h2c" | "h2" | "h3")), Some(n)) =
        (d.settings.protocol.as_deref(), d.settings.streams)
    {
        let streams = n.min(u64::from(u16::MAX)) as u16;
        plan.proto = if proto == "h3" {
            ProtoPlan::H3 { streams }
        } else {
            ProtoPlan::H2 { streams }
        };
        if proto != "h2c" && plan.tls().is_none() {
            plan.transport = TransportPlan::Tls(TlsPlan::new(&addr.ip().to_string()));
        }
    }
    if let (Some("http/1.1-pipelined"), Some(depth)) =
        (d.settings.protocol.as_deref(), d.settings.pipeline)
    {
        plan.proto = ProtoPlan::http1(depth.min(u64::from(u16::MAX)) as u16, true);
    }
    plan.timeout = Duration::from_secs_f64(d.settings.timeout_s.max(0.0));
    plan.warmup = Duration::from_secs_f64(d.settings.warmup_s.max(0.0));
    let rates: Vec<f64> = docs.iter().filter_map(|d| d.settings.rate_per_s).collect();
    if rates.len() == docs.len() {
        plan.pace = Pace::Rate(rates.iter().sum());
    }
    Ok(plan)
}

/// The TLS settings a document's agent asked for (its CAs are not in the
/// document: only that it trusted its own).
fn tls_asked(t: &crate::report::json::TlsDoc) -> TlsPlan {
    let mut tls = TlsPlan::new(&t.server_name);
    tls.version = if t.version_asked == "1.2" {
        TlsVersion::Tls12
    } else {
        TlsVersion::Tls13
    };
    tls.resume = t.resumption;
    tls.trust = match t.trust.as_str() {
        "any" => Trust::Any,
        "cacert" => Trust::Cas(Vec::new()),
        _ => Trust::Public,
    };
    tls
}

/// merge's reader of one input file, for the fuzz targets (fuzz/): each
/// source's name, requests counted (successes of its latency histogram)
/// and intervals, or why the file was refused.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_read(bytes: &[u8]) -> Result<Vec<(String, u64, usize)>, String> {
    let sources = read_bytes("fuzz".into(), bytes).map_err(|e| format!("{e:#}"))?;
    Ok(sources
        .iter()
        .map(|s| (s.name.clone(), s.latency_us.len(), s.intervals.len()))
        .collect())
}
