//! The command line (clap derive). Flags follow ab, wrk and oha where they
//! agree: `-c`, `-n`, `-d`, `-k`, `-m`, `-H`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "harness",
    version,
    about = "The benchmark lab's load generator: honest latency, exact counts, verified responses.",
    after_help = "\
Examples:
  harness run http://127.0.0.1:8082/hello -c 100 -d 10s
  harness run http://127.0.0.1:8082/work -c 100 -n 20000 --no-keepalive --format ab
  harness run 'http://127.0.0.1:8082/sleep?ms=20' -c 50 -d 10s --rate 2000
  harness run http://127.0.0.1:8082/hello -c 100 -d 10s --format json > run.json
  harness verify http://127.0.0.1:8082
  harness servers
  harness compare
  harness calibrate --env bare,pinned,bridge-direct,bridge,bridge-proxy
  harness compare --servers coroutine,node,php-fpm --workloads work -c 100 -d 30s --baseline php-fpm

`harness <command> --help` explains each command."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one URL and report throughput, latency percentiles and failures.
    Run(RunArgs),
    /// Check a server against every row of the contract (DESIGN.md §2).
    Verify(VerifyArgs),
    /// Start every server that can run here, load each the same way, print one table.
    Compare(crate::compare::args::CompareArgs),
    /// The catalog: every server `compare` can start, and whether it can run here.
    Servers(crate::compare::args::ServersArgs),
    /// Re-render report.md and report.html of a comparison from its results.json.
    Report(crate::compare::args::ReportArgs),
    /// Measure the machine and each environment (bare, pinned, bridge, proxy) before comparing.
    Calibrate(crate::calibrate::CalibrateArgs),
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A compact human summary.
    Text,
    /// ApacheBench's report layout (ab 2.3).
    Ab,
    /// The versioned JSON document (harness/schema/run.schema.json).
    Json,
    /// One header line and one row.
    Csv,
    /// A Markdown table.
    Markdown,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Stopping: -n stops after exactly N requests (successes and failures; the
report's count equals N), -d after a duration; with neither, -d 10s. With -n,
-d is a hard bound (default 10m). Every request is bounded by --timeout.

Pacing: by default each connection sends its next request as soon as the
previous response is complete (closed loop, like wrk and ab). Closed-loop
latency hides a server's stalls (coordinated omission): while it stalls, no
requests are sent. --rate R sends R requests per second on a fixed schedule
(open loop, like wrk2 -R) and counts latency from each request's intended
send time, so stalls show in the percentiles.

Verification: when the path is a contract endpoint (/hello, /cpu?n=N, /db,
/work, /sleep?ms=M, ...), every response's status and body are compared with
the contract's, and a mismatch is a failure: a server answering 200 with an
error body does not look faster. Other paths: any 2xx passes. --no-verify:
only the status class is checked.

Latency counts from the request's write (keep-alive), its connect
(--no-keepalive: connect time is also reported apart) or its intended send
time (--rate). Only successful requests enter the latency histogram.

Examples:
  harness run http://127.0.0.1:8082/hello -c 100 -d 10s
  harness run http://127.0.0.1:8082/work -c 100 -n 20000 --no-keepalive --format ab
  harness run 'http://127.0.0.1:8082/sleep?ms=20' -c 50 -d 10s --rate 2000
  harness run http://127.0.0.1:8082/hello -d 5s --format json --hist run.hgrm > run.json
  harness run http://example.test/ --no-verify -H 'Accept: text/html'")]
pub struct RunArgs {
    /// The URL to load: http://host[:port]/path[?query].
    pub url: String,

    /// Connections kept open (or, with --no-keepalive, requests in flight).
    #[arg(short = 'c', long, default_value_t = 50, value_name = "N")]
    pub connections: usize,

    /// Stop after exactly this many requests.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Stop after this long (10s, 500ms, 2m; a bare number is seconds).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Keep connections alive (the default; accepted for ab compatibility).
    #[arg(short = 'k', long, overrides_with = "no_keepalive")]
    pub keepalive: bool,

    /// A new connection per request, as ab does without -k.
    #[arg(long)]
    pub no_keepalive: bool,

    /// Engine threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Open loop: this many requests per second in total, latency from the
    /// intended send times.
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,

    /// A request without a complete response after this long fails.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Load for this long first, without counting.
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Duration,

    /// The request method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,

    /// An extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,

    /// How the report is printed on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also write the latency distribution in HdrHistogram's .hgrm format.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<PathBuf>,

    /// Do not compare bodies with the contract's: only the status class.
    #[arg(long)]
    pub no_verify: bool,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Sends one request per contract row (every endpoint, HEAD, 404, 405, bad
query values, a malformed request, an oversized header, HTTP/1.0 with and
without keep-alive, keep-alive reuse, pipelining) and judges each answer
with workloads::verify. Prints PASS or FAIL per row, with what differed.
Exits non-zero if any row fails. /db and /work rows need the server's
database to be up.

Example:
  harness verify http://127.0.0.1:8082")]
pub struct VerifyArgs {
    /// The server: http://host:port (a path, if any, is ignored).
    pub target: String,

    /// How long each row waits for its answer.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Parses `10s`, `500ms`, `250us`, `2m`, `1h`, `1.5s`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 10s, 500ms, 2m)"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    let secs = value * scale;
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn cli_is_consistent_and_parses_the_issue_examples() {
        Cli::command().debug_assert();
        let cli = Cli::parse_from([
            "harness",
            "run",
            "http://127.0.0.1:8082/work",
            "-c",
            "100",
            "-n",
            "20000",
            "--no-keepalive",
            "--format",
            "ab",
        ]);
        let Command::Run(a) = cli.command else {
            panic!("run")
        };
        assert_eq!(
            (a.connections, a.requests, a.no_keepalive),
            (100, Some(20000), true)
        );
        assert_eq!(a.format, Format::Ab);
        let cli = Cli::parse_from([
            "harness",
            "run",
            "http://h/",
            "-d",
            "10s",
            "--rate",
            "2000",
            "-H",
            "A: b",
            "-k",
        ]);
        let Command::Run(a) = cli.command else {
            panic!("run")
        };
        assert_eq!(a.rate, Some(2000.0));
        assert_eq!(a.duration, Some(Duration::from_secs(10)));
        assert_eq!(a.headers, vec!["A: b".to_string()]);
    }
}
