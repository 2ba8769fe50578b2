//! The contract check of a started server: every row of
//! [`workloads::contract`], in order, each with its verdict (what
//! `harness verify` prints and `compare` records beside the numbers), and
//! the conformance section ([`workloads::conformance`]) with its pass /
//! warn / fail per group.

use std::net::SocketAddr;
use std::time::Duration;

use workloads::conformance::Conformance;
use workloads::contract::{rows, Outcome, Row};

/// A row's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub name: String,
    /// `Err` holds the one-line reason when the row did not pass (a
    /// conformance row's warn included).
    pub result: Result<(), String>,
    pub outcome: Outcome,
    /// What was found (conformance rows: always; contract rows: why it failed).
    pub found: String,
    /// The RFC section and requirement of a conformance row.
    pub conformance: Option<Conformance>,
}

/// Runs every row of the contract (not the conformance section) against `addr`.
pub fn check_all(addr: SocketAddr, timeout: Duration) -> Vec<Verdict> {
    check(addr, timeout, contract_rows())
}

/// Runs the conformance section against `addr`.
pub fn check_conformance(addr: SocketAddr, timeout: Duration) -> Vec<Verdict> {
    check(addr, timeout, conformance_rows())
}

/// The contract's own rows.
pub fn contract_rows() -> Vec<Row> {
    rows()
        .into_iter()
        .filter(|r| r.conformance.is_none())
        .collect()
}

/// The rows of the conformance section.
pub fn conformance_rows() -> Vec<Row> {
    rows()
        .into_iter()
        .filter(|r| r.conformance.is_some())
        .collect()
}

/// Runs `rows` against `addr`, in order.
pub fn check(addr: SocketAddr, timeout: Duration, rows: Vec<Row>) -> Vec<Verdict> {
    rows.into_iter()
        .map(|row| {
            let checked = row.check(addr, timeout);
            Verdict {
                result: if checked.outcome == Outcome::Pass {
                    Ok(())
                } else {
                    Err(checked.found.clone())
                },
                outcome: checked.outcome,
                found: checked.found,
                conformance: row.conformance,
                name: row.name,
            }
        })
        .collect()
}
