//! `harness verify`: every row of the contract (docs/ARCHITECTURE.md §2), as listed and
//! run by [`workloads::contract`]. Prints PASS/FAIL per row with what
//! differed; the exit code is non-zero if any row fails.

use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::lab::contract::check_all;
use crate::target::Target;
use crate::units::parse_duration;

#[derive(Debug, clap::Args)]
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

/// The `verify` command.
pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let target = Target::parse(&args.target).context("bad verify target")?;
    TcpStream::connect_timeout(&target.addr, args.timeout)
        .with_context(|| format!("cannot connect to {}", target.addr))?;
    println!("verify http://{} against the contract", target.authority);
    let verdicts = check_all(target.addr, args.timeout);
    let width = verdicts.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut failed = 0;
    for v in &verdicts {
        match &v.result {
            Ok(()) => println!("PASS  {}", v.name),
            Err(why) => {
                failed += 1;
                println!("FAIL  {:<width$}  {why}", v.name);
            }
        }
    }
    println!(
        "{} rows: {} passed, {failed} failed",
        verdicts.len(),
        verdicts.len() - failed
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
