//! The command line (clap derive). Flags follow ab, wrk and oha where they
//! agree: `-c`, `-n`, `-d`, `-k`, `-m`, `-H`.

use clap::{Parser, Subcommand};

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
  harness run http://127.0.0.1:8082/hello -d 30s --start-at 2026-12-01T01:00:00Z --tag a1 --hlog a1.hlog
  harness merge a1.hlog a2.hlog a3.hlog a4.hlog
  harness run https://127.0.0.1:8443/hello --cacert certs/ca.pem -c 100 -d 10s
  harness certs certs/
  harness verify http://127.0.0.1:8082
  harness servers
  harness compare
  harness calibrate --env bare,pinned,bridge-direct,bridge,bridge-proxy
  harness compare --servers coroutine,node,php-fpm --workloads work -c 100 -d 30s --baseline php-fpm
  harness diff results/BEFORE results/AFTER --format markdown --fail-on regression

`harness <command> --help` explains each command."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load one URL and report throughput, latency percentiles and failures.
    Run(crate::run::RunArgs),
    /// Check a server against every row of the contract (docs/ARCHITECTURE.md §2).
    Verify(crate::verify::VerifyArgs),
    /// Start every server that can run here, load each the same way, print one table.
    Compare(crate::compare::args::CompareArgs),
    /// The catalog: every server `compare` can start, and whether it can run here.
    Servers(crate::servers_cmd::ServersArgs),
    /// Re-render report.md and report.html of a comparison from its results.json.
    Report(crate::compare::args::ReportArgs),
    /// Measure the machine and each environment (bare, pinned, bridge, proxy) before comparing.
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Demonstrate how the concurrency models differ: waiting, a CPU stall, connection cost, memory, multiplexing.
    Models(crate::models::ModelsArgs),
    /// Redo a published benchmark (swoole-vs-node, docker-vs-bare): its figures beside ours.
    Reproduce(crate::reproduce::ReproduceArgs),
    /// Is the candidate really faster? Two result sets, cell by cell: change, interval, verdict.
    Diff(crate::diff::DiffArgs),
    /// Add several runs (.hlog or run JSON, e.g. one per load machine) into one exact report.
    Merge(crate::merge::MergeArgs),
    /// Make a private CA and a server certificate for 127.0.0.1/localhost, for TLS runs.
    Certs(crate::certs::CertsArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Format;
    use clap::CommandFactory;
    use std::time::Duration;

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
