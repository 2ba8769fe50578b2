//! `harness`: the benchmark lab's load generator (docs/ARCHITECTURE.md §4).
//!
//! - `harness run URL`: an ab/wrk-style load test. Per-thread mio event loops
//!   ([`engine`]), exact counts (`-n`), bounded runs (`-d`, `--timeout`),
//!   latency in HdrHistograms, open-loop pacing with coordinated-omission
//!   correction (`--rate`), every response checked against the contract
//!   ([`workloads::expect`]) when the path is one of its endpoints. Reports
//!   in text, ab's layout, JSON, CSV, Markdown and `.hgrm` ([`report`]).
//! - `harness verify URL`: every contract row, PASS/FAIL ([`verify`]).
//! - `harness compare`: every server of the [`catalog`] that runs here,
//!   verified, warmed up and loaded the same way, their `/config` audited
//!   side by side; one table, results.json, report.md and report.html
//!   ([`compare`]). `harness servers` lists the catalog ([`servers_cmd`]);
//!   `harness report DIR` re-renders a comparison's reports.
//! - `harness calibrate`: what the machine and each environment (bare,
//!   pinned, a Docker-like bridge, a userland proxy) cost ([`calibrate`],
//!   [`env`]).
//!
//! - `harness diff BASE CANDIDATE`: two result sets, cell by cell: the
//!   change, its confidence interval and a noise-aware verdict ([`diff`]).
//!
//! The binary is a thin wrapper around [`run_cli`]; tests drive the engine
//! in-process with [`engine::run`].
//!
//! ```no_run
//! use clap::Parser;
//! let cli = harness::cli::Cli::parse_from(["harness", "run", "http://127.0.0.1:8082/hello", "-n", "1000"]);
//! let code = harness::run_cli(cli).unwrap();
//! ```

pub mod calibrate;
pub mod capacity;
pub mod catalog;
pub mod certs;
pub mod cli;
pub mod compare;
pub mod diff;
pub mod engine;
pub mod env;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod intervals;
pub mod lab;
pub mod machine;
pub mod merge;
pub mod models;
pub mod procfs;
pub mod ranks;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod servers_cmd;
pub mod stats;
pub mod target;
pub mod thresholds;
pub mod units;
pub mod verify;
pub mod verify_h2;
pub mod verify_h3;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Runs one command line; the exit code says whether it passed.
pub fn run_cli(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Servers(args) => servers_cmd::run(args),
        Command::Report(args) => compare::report(args),
        Command::Calibrate(args) => calibrate::run(args),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Models(args) => models::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Certs(args) => certs::run(args),
    }
}
