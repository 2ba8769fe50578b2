//! `harness verify`: every row of the contract (DESIGN.md §2), as listed and
//! run by [`workloads::contract`]. Prints PASS/FAIL per row with what
//! differed; the exit code is non-zero if any row fails.

use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::cli::VerifyArgs;
use crate::target::Target;

pub use workloads::contract::{rows, Exchange, Row};

/// A row's verdict: `Err` holds the one-line reason.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub name: String,
    pub result: Result<(), String>,
}

/// Runs every row against `addr`.
pub fn check_all(addr: SocketAddr, timeout: Duration) -> Vec<Verdict> {
    check(addr, timeout, rows())
}

/// Runs `rows` against `addr`, in order.
pub fn check(addr: SocketAddr, timeout: Duration, rows: Vec<Row>) -> Vec<Verdict> {
    rows.into_iter()
        .map(|row| Verdict {
            result: row.run(addr, timeout).map_err(|e| e.to_string()),
            name: row.name,
        })
        .collect()
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
