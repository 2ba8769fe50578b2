//! The contract check of a started server: every row of
//! [`workloads::contract`], in order, each with its verdict (what
//! `harness verify` prints and `compare` records beside the numbers).

use std::net::SocketAddr;
use std::time::Duration;

use workloads::contract::{rows, Row};

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
