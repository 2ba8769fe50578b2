//! ApacheBench and wrk as load tools (`compare --load-tool ab|wrk`,
//! `reproduce`): the same runs driven by the tools the seed benchmarks used, their output parsed into
//! the same numbers, as a cross-check of the built-in engine. Neither checks
//! bodies (ab compares each body's length with the first one's; wrk counts
//! non-2xx only): the report says so.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::catalog::supervise::{log_tail, Child, Stdout};
use crate::catalog::{find_program, version_of};
use crate::stats::FailureCounts;

/// What drives the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadTool {
    /// The built-in engine: every response checked against the contract.
    Harness,
    /// ApacheBench (`ab`), single-threaded, checks only status and length.
    Ab,
    /// wrk, one thread per core, checks only the status.
    Wrk,
}

impl LoadTool {
    pub fn name(self) -> &'static str {
        match self {
            LoadTool::Harness => "harness",
            LoadTool::Ab => "ab",
            LoadTool::Wrk => "wrk",
        }
    }
}

/// What a tool run reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolRun {
    pub duration_s: f64,
    /// Complete requests (responses).
    pub requests: u64,
    pub failures: FailureCounts,
    pub requests_per_s: f64,
    /// Latency percentiles in µs: (percentile, value).
    pub percentiles_us: Vec<(f64, u64)>,
    pub mean_us: f64,
    pub max_us: u64,
    /// ab's `Document Length` (the first response's body size): what the
    /// run timed, as ab saw it.
    pub document_length_bytes: Option<u64>,
}

impl ToolRun {
    pub fn failed(&self) -> u64 {
        self.failures.total()
    }

    pub fn ok(&self) -> u64 {
        self.requests
            .saturating_sub(self.failures.status + self.failures.length + self.failures.exception)
    }

    pub fn percentile(&self, p: f64) -> u64 {
        self.percentiles_us
            .iter()
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map_or(0, |(_, v)| *v)
    }
}

/// The tool's binary, or why it cannot be used.
pub fn find(tool: LoadTool) -> anyhow::Result<std::path::PathBuf> {
    let (names, pkg): (&[&str], &str) = match tool {
        LoadTool::Harness => return Ok(std::env::current_exe()?),
        LoadTool::Ab => (&["ab", "ab2"], "apache2-utils"),
        LoadTool::Wrk => (&["wrk"], "wrk"),
    };
    find_program(names).with_context(|| {
        format!(
            "--load-tool {}: not installed (apt-get install {pkg})",
            tool.name()
        )
    })
}

/// `ab -V` / `wrk -v`, first line.
pub fn version(tool: LoadTool) -> Option<String> {
    let bin = find(tool).ok()?;
    match tool {
        LoadTool::Harness => None,
        LoadTool::Ab => version_of(&bin, &["-V"]),
        LoadTool::Wrk => version_of(&bin, &["-v"]),
    }
}

/// One run of `tool` against `url` for `duration` (or, for ab, exactly
/// `requests` requests with `duration` as the bound); the process is
/// supervised like a server (killed on Ctrl-C) and its output kept in `dir`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    tool: LoadTool,
    url: &str,
    connections: usize,
    duration: Duration,
    requests: Option<u64>,
    threads: usize,
    keepalive: bool,
    timeout: Duration,
    dir: &Path,
    interrupt: &AtomicBool,
) -> anyhow::Result<ToolRun> {
    let bin = find(tool)?;
    let secs = duration.as_secs().max(1);
    let mut cmd = Command::new(&bin);
    match tool {
        LoadTool::Ab => {
            // -t implies -n 50000: give it room for the whole duration
            // (ab allocates per request; untouched pages cost nothing).
            cmd.arg("-q").args(["-c", &connections.to_string()]);
            match requests {
                Some(n) => cmd.args(["-n", &n.to_string()]),
                None => {
                    let n = (secs * 400_000).max(100_000);
                    cmd.args(["-t", &secs.to_string()])
                        .args(["-n", &n.to_string()])
                }
            };
            cmd.args(["-s", &timeout.as_secs().max(1).to_string()]);
            if keepalive {
                cmd.arg("-k");
            }
        }
        LoadTool::Wrk => {
            cmd.args(["-t", &threads.clamp(1, connections.max(1)).to_string()])
                .args(["-c", &connections.to_string()])
                .args(["-d", &format!("{secs}s")])
                .args(["--timeout", &format!("{}s", timeout.as_secs().max(1))])
                .arg("--latency");
            if !keepalive {
                cmd.args(["-H", "Connection: close"]);
            }
        }
        LoadTool::Harness => bail!("the built-in engine is not an external tool"),
    }
    cmd.arg(url);
    let log = dir.join(format!("{}.out", tool.name()));
    let _ = std::fs::remove_file(&log);
    let (mut child, _) = Child::spawn(tool.name(), cmd, &log, Stdout::Log)?;
    let deadline = Instant::now() + duration + timeout + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.exited() {
            break status;
        }
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            child.stop(Duration::from_secs(2));
            bail!("interrupted");
        }
        if Instant::now() > deadline {
            child.stop(Duration::from_secs(2));
            bail!(
                "{} did not finish in time:\n{}",
                tool.name(),
                log_tail(&log, 10)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let parsed = match tool {
        LoadTool::Ab => parse_ab(&text),
        LoadTool::Wrk => parse_wrk(&text),
        LoadTool::Harness => None,
    };
    parsed.with_context(|| {
        format!(
            "cannot read {}'s report ({status}):\n{}",
            tool.name(),
            log_tail(&log, 15)
        )
    })
}

fn field<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .map(str::trim)
}

fn first_number<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.split_whitespace().next()?.parse().ok()
}

/// ApacheBench 2.3's report.
pub fn parse_ab(text: &str) -> Option<ToolRun> {
    let requests: u64 = first_number(field(text, "Complete requests:")?)?;
    let failed_line = field(text, "Failed requests:")?;
    let duration_s: f64 = first_number(field(text, "Time taken for tests:")?)?;
    let rps: f64 = first_number(field(text, "Requests per second:")?)?;
    let mut failures = FailureCounts::default();
    // "Failed requests:        12" then, if any, an indented line
    // "   (Connect: 0, Receive: 0, Length: 12, Exceptions: 0)".
    let total_failed: u64 = first_number(failed_line).unwrap_or(0);
    if let Some(detail) = text
        .lines()
        .find(|l| l.trim_start().starts_with("(Connect:"))
    {
        for part in detail.trim().trim_matches(['(', ')']).split(',') {
            let (k, v) = part.split_once(':')?;
            let v: u64 = v.trim().parse().ok()?;
            match k.trim() {
                "Connect" => failures.connect = v,
                "Receive" => failures.receive = v,
                "Length" => failures.length = v,
                "Exceptions" => failures.exception = v,
                _ => {}
            }
        }
    } else {
        failures.exception = total_failed;
    }
    failures.status = field(text, "Non-2xx responses:")
        .and_then(first_number)
        .unwrap_or(0);
    let mean_ms: f64 = field(text, "Time per request:")
        .and_then(first_number)
        .unwrap_or(0.0);
    let mut percentiles_us = Vec::new();
    let mut max_us = 0;
    if let Some(i) = text.find("Percentage of the requests served within") {
        for l in text[i..].lines().skip(1) {
            let mut it = l.split_whitespace();
            let (Some(p), Some(v)) = (it.next(), it.next()) else {
                continue;
            };
            let (Some(p), Ok(ms)) = (p.strip_suffix('%'), v.parse::<u64>()) else {
                continue;
            };
            let Ok(p) = p.parse::<f64>() else { continue };
            percentiles_us.push((p, ms * 1000));
            if p >= 100.0 {
                max_us = ms * 1000;
            }
        }
    }
    Some(ToolRun {
        duration_s,
        requests,
        failures,
        requests_per_s: rps,
        percentiles_us,
        mean_us: mean_ms * 1000.0,
        max_us,
        document_length_bytes: field(text, "Document Length:").and_then(first_number),
    })
}

/// `1.23ms`, `456.00us`, `2.01s`, `1.5m` → µs.
fn wrk_time_us(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some((v * scale).round() as u64)
}

/// wrk 4's report (with `--latency`).
pub fn parse_wrk(text: &str) -> Option<ToolRun> {
    // "  123456 requests in 10.00s, 15.00MB read"
    let line = text.lines().find(|l| l.contains(" requests in "))?;
    let mut it = line.split_whitespace();
    let requests: u64 = it.next()?.parse().ok()?;
    let duration_s = wrk_time_us(it.nth(2)?.trim_end_matches(','))? as f64 / 1e6;
    let rps: f64 = first_number(field(text, "Requests/sec:")?)?;
    let mut failures = FailureCounts::default();
    if let Some(errs) = field(text, "Socket errors:") {
        for part in errs.split(',') {
            let mut kv = part.split_whitespace();
            let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
                continue;
            };
            let v: u64 = v.parse().unwrap_or(0);
            match k {
                "connect" => failures.connect = v,
                "read" => failures.receive = v,
                "write" => failures.write = v,
                "timeout" => failures.timeout = v,
                _ => {}
            }
        }
    }
    failures.status = field(text, "Non-2xx or 3xx responses:")
        .and_then(first_number)
        .unwrap_or(0);
    let (mut mean_us, mut max_us) = (0.0, 0);
    if let Some(l) = text
        .lines()
        .find(|l| l.trim_start().starts_with("Latency "))
    {
        let v: Vec<&str> = l.split_whitespace().collect();
        mean_us = v.get(1).and_then(|s| wrk_time_us(s)).unwrap_or(0) as f64;
        max_us = v.get(3).and_then(|s| wrk_time_us(s)).unwrap_or(0);
    }
    let mut percentiles_us = Vec::new();
    if let Some(i) = text.find("Latency Distribution") {
        for l in text[i..].lines().skip(1) {
            let mut it = l.split_whitespace();
            let (Some(p), Some(v)) = (it.next(), it.next()) else {
                break;
            };
            let (Some(p), Some(us)) = (p.strip_suffix('%'), wrk_time_us(v)) else {
                break;
            };
            let Ok(p) = p.parse::<f64>() else { break };
            percentiles_us.push((p, us));
        }
    }
    if max_us > 0 {
        percentiles_us.push((100.0, max_us));
    }
    Some(ToolRun {
        duration_s,
        requests,
        failures,
        requests_per_s: rps,
        percentiles_us,
        mean_us,
        max_us,
        document_length_bytes: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AB: &str = "\
Server Software:        nginx
Server Hostname:        127.0.0.1
Server Port:            8080

Document Path:          /work
Document Length:        27 bytes

Concurrency Level:      100
Time taken for tests:   2.470 seconds
Complete requests:      20000
Failed requests:        7
   (Connect: 0, Receive: 0, Length: 7, Exceptions: 0)
Non-2xx responses:      3
Keep-Alive requests:    20000
Total transferred:      4220000 bytes
HTML transferred:       540000 bytes
Requests per second:    8097.17 [#/sec] (mean)
Time per request:       12.350 [ms] (mean)
Time per request:       0.124 [ms] (mean, across all concurrent requests)
Transfer rate:          1668.53 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%     11
  66%     12
  75%     13
  80%     14
  90%     16
  95%     19
  98%     23
  99%     27
 100%     61 (longest request)
";

    const WRK: &str = "\
Running 10s test @ http://127.0.0.1:8080/hello
  2 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     6.92ms    2.07ms  45.10ms   88.41%
    Req/Sec     7.28k   512.33     8.10k    71.00%
  Latency Distribution
     50%    6.60ms
     75%    7.50ms
     90%    8.90ms
     99%   14.20ms
  145032 requests in 10.01s, 25.04MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 5
Requests/sec:  14489.21
Transfer/sec:      2.50MB
";

    #[test]
    fn parses_ab() {
        let r = parse_ab(AB).unwrap();
        assert_eq!(r.requests, 20000);
        assert_eq!(r.failures.length, 7);
        assert_eq!(r.failures.status, 3);
        assert_eq!(r.failed(), 10);
        assert_eq!(r.ok(), 19990);
        assert!((r.requests_per_s - 8097.17).abs() < 1e-6);
        assert!((r.duration_s - 2.47).abs() < 1e-9);
        assert_eq!(r.percentile(50.0), 11_000);
        assert_eq!(r.percentile(99.0), 27_000);
        assert_eq!(r.max_us, 61_000);
        assert_eq!(r.document_length_bytes, Some(27));
        assert!(parse_ab("garbage").is_none());
    }

    #[test]
    fn parses_wrk() {
        let r = parse_wrk(WRK).unwrap();
        assert_eq!(r.requests, 145032);
        assert!((r.duration_s - 10.01).abs() < 1e-9);
        assert!((r.requests_per_s - 14489.21).abs() < 1e-6);
        assert_eq!(
            (r.failures.receive, r.failures.timeout, r.failures.status),
            (2, 1, 5)
        );
        assert_eq!(r.percentile(50.0), 6_600);
        assert_eq!(r.percentile(99.0), 14_200);
        assert_eq!(r.max_us, 45_100);
        assert_eq!(wrk_time_us("456.00us"), Some(456));
        assert_eq!(wrk_time_us("2.01s"), Some(2_010_000));
        assert!(parse_wrk("nothing").is_none());
    }
}
