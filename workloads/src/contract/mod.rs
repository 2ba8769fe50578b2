//! The contract's rows: the one list that `harness verify` runs against any
//! server in any language and that `testkit::contract_tests!` runs in every
//! Rust server's tests.
//!
//! A [`Row`] is a stable name, one line on why the contract requires it,
//! and an [`Exchange`]: the request (or short exchange) to send. [`Row::run`]
//! sends it over [`crate::probe`] and judges each answer with [`crate::verify`].
//!
//! # Adding a route
//!
//! 1. Here, in `workloads`: the path in [`crate::PATHS`] and [`crate::route`],
//!    its work in [`crate::start`], its answer in [`crate::expect`], and its
//!    rows in [`rows`] (a unit test fails while a path has no row).
//! 2. The servers: the Rust adapters in `servers/` when the route needs a new
//!    [`crate::Action`], and the PHP and Node.js stacks in `compose/`.
//!
//! Nothing else: `harness verify`, `harness compare`'s contract check and
//! every server's `contract_tests!` read this list.
//!
//! This file is the list itself, one row per contract requirement, and
//! [`rows`], which joins it to the `/echo` rows and the conformance section.
//! A row and the code that runs one are in `row.rs`, how a row fails in
//! `error.rs`: the rows' files name those, never this one.

pub(crate) mod error;
pub(crate) mod row;

use std::time::Duration;

pub use error::RowError;
pub use row::{Checked, Exchange, Outcome, Row};

/// Targets whose HEAD must be the GET's status and headers without the body.
const HEAD_TARGETS: &[&str] = &[
    "/",
    "/hello",
    "/cpu?n=10",
    "/db",
    "/work",
    "/config",
    "/nope",
];
/// Paths that are not the contract's: 404.
const NOT_FOUND_TARGETS: &[&str] = &["/nope", "/hello/", "/hello/x", "/HELLO", "/index.php"];
/// A contract path with a method other than GET or HEAD: 405.
const WRONG_METHODS: &[(&str, &str)] = &[
    ("POST", "/hello"),
    ("PUT", "/work"),
    ("DELETE", "/"),
    ("PATCH", "/db"),
];
/// Query values out of range, not integers, or missing: 400.
const BAD_QUERY_TARGETS: &[&str] = &[
    "/cpu?n=abc",
    "/cpu?n=0",
    "/cpu?n=10000001",
    "/cpu?n=-5",
    "/work?n=1.5",
    "/db?sleep_ms=10001",
    "/db?conn=sometimes",
    "/sleep?ms=-1",
    "/sleep",
];

fn request(method: &'static str, target: &str, why: &'static str) -> Row {
    Row {
        name: format!("{method} {target}"),
        why,
        exchange: Exchange::Request {
            method,
            target: target.to_string(),
        },
        conformance: None,
    }
}

fn reject(name: &str, why: &'static str, raw: Vec<u8>, statuses: &'static [u16]) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Reject { raw, statuses },
        conformance: None,
    }
}

fn row(name: &str, why: &'static str, exchange: Exchange) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange,
        conformance: None,
    }
}

/// Every row: the contract's, in the order of its table, then the
/// conformance section ([`crate::conformance::rows`]).
pub fn rows() -> Vec<Row> {
    let mut rows = contract_rows();
    rows.extend(crate::conformance::rows());
    rows
}

/// The contract's own rows (what `harness verify` runs without
/// `--conformance`).
fn contract_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for (t, why) in [
        (
            "/",
            "`/` answers as `/hello`: the baseline, HTTP and nothing else",
        ),
        (
            "/hello",
            "the baseline: an exact body proves the server answered, not an error page",
        ),
        (
            "/cpu",
            "n defaults to 1000; the sum printed with 6 decimals, so every language agrees",
        ),
        (
            "/cpu?n=1",
            "the smallest n is accepted: the range is inclusive",
        ),
        (
            "/cpu?n=250000",
            "a long loop: CPU work that holds whatever runs it",
        ),
        (
            "/db",
            "SELECT 1 on a pooled connection: one database round trip",
        ),
        (
            "/db?sleep_ms=30",
            "a slow query: the database waits, the server should not hold a CPU",
        ),
        (
            "/db?conn=new",
            "a connection opened per request, as classic PHP: its cost is measured",
        ),
        (
            "/db?sleep_ms=5&conn=new",
            "query parameters combine: a slow query on a fresh connection",
        ),
        (
            "/work",
            "the realistic mix: the sqrt loop, then SELECT 1, as JSON",
        ),
        ("/work?n=10", "n sets /work's loop as it sets /cpu's"),
        (
            "/work?conn=new",
            "/work on a connection opened per request, as classic PHP",
        ),
    ] {
        rows.push(request("GET", t, why));
    }
    rows.push(row(
        "GET /sleep?ms=50 (waits 50 ms)",
        "a timer: answered no sooner than asked, the latency floor of a load test",
        Exchange::Slow {
            target: "/sleep?ms=50".into(),
            at_least: Duration::from_millis(50),
        },
    ));
    rows.push(request(
        "GET",
        "/sleep?ms=0",
        "ms=0 is a valid wait, answered at once",
    ));
    rows.push(request(
        "GET",
        "/config",
        "the server reports its effective settings, so a comparison shows what differed",
    ));
    for t in HEAD_TARGETS {
        rows.push(request(
            "HEAD",
            t,
            "HEAD is GET without the body: same status, headers and Content-Length",
        ));
    }
    for t in NOT_FOUND_TARGETS {
        rows.push(request(
            "GET",
            t,
            "only the contract's paths exist: no trailing-slash, case or file aliases",
        ));
    }
    for (m, t) in WRONG_METHODS {
        rows.push(request(
            m,
            t,
            "another method on a contract path is 405 with Allow listing GET",
        ));
    }
    rows.push(request(
        "GET",
        "/echo",
        "a method /echo does not serve is 405 with Allow listing POST, its one method",
    ));
    for t in BAD_QUERY_TARGETS {
        rows.push(request(
            "GET",
            t,
            "a bad query value is 400 with a one-line reason, never clamped or defaulted",
        ));
    }
    rows.push(reject(
        "malformed request line → 400, closed",
        "bytes that are not a request line are refused, not guessed at",
        b"GARBAGE\r\n\r\n".to_vec(),
        &[400],
    ));
    rows.push(reject(
        "malformed header line → 400, closed",
        "a header line without a colon is refused, not skipped",
        b"GET /hello HTTP/1.1\r\nBad Header Line\r\n\r\n".to_vec(),
        &[400],
    ));
    rows.push(reject(
        "unknown HTTP version → 400 or 505, closed",
        "only HTTP/1.0 and 1.1 are spoken",
        b"GET /hello HTTP/9.9\r\nHost: t\r\n\r\n".to_vec(),
        &[400, 505],
    ));
    let mut big = b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    big.extend_from_slice(b"\r\n\r\n");
    rows.push(reject(
        "header over 8 KiB → 431, closed",
        "request heads are bounded (8 KiB, as nginx), so is a connection's memory",
        big,
        &[431],
    ));
    rows.push(row(
        "HTTP/1.0 without keep-alive → answered, closed",
        "HTTP/1.0 closes by default: ab without -k waits for the close",
        Exchange::Http10Close,
    ));
    rows.push(row(
        "HTTP/1.0 with keep-alive → Connection: keep-alive",
        "ab -k sends HTTP/1.0 keep-alive and reuses the connection only if told so",
        Exchange::Http10KeepAlive,
    ));
    rows.push(row(
        "keep-alive: 8 requests on one connection",
        "one connection serves many requests, errors and HEAD among them, in step",
        Exchange::KeepAlive(vec![
            ("GET", "/hello"),
            ("GET", "/cpu?n=3"),
            ("GET", "/db"),
            ("GET", "/work"),
            ("GET", "/nope"),
            ("HEAD", "/hello"),
            ("GET", "/hello"),
            ("GET", "/cpu?n=abc"),
        ]),
    ));
    rows.push(row(
        "pipelined: 8 requests in one write, answered in order",
        "pipelined requests are answered in order, the slow first one not overtaken",
        Exchange::Pipelined(vec![
            "/sleep?ms=30",
            "/hello",
            "/cpu?n=5",
            "/db",
            "/work?n=7",
            "/nope",
            "/cpu?n=abc",
            "/",
        ]),
    ));
    rows.extend(crate::echo::rows::rows());
    rows.push(row(
        "Date is fresh (within 2 s)",
        "Date is the current time, as HTTP requires: a stale cache shows here",
        Exchange::DateFresh,
    ));
    rows
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::probe::RawResponse;
    use crate::{expect, Mismatch};

    #[test]
    fn names_are_unique() {
        let rows = rows();
        let mut seen = HashSet::new();
        for r in &rows {
            assert!(seen.insert(r.name.as_str()), "two rows named {:?}", r.name);
        }
    }

    #[test]
    fn every_route_has_a_row_that_it_answers() {
        let rows = rows();
        for &path in crate::PATHS {
            let served = rows
                .iter()
                .flat_map(Row::requests)
                .any(|(m, t)| t.split('?').next() == Some(path) && expect(m, t).status == 200);
            assert!(served, "no row requests {path} and expects 200");
        }
    }

    #[test]
    fn every_row_says_why_in_one_line() {
        for r in rows() {
            assert!(
                !r.why.is_empty() && !r.why.contains('\n'),
                "{}: {:?}",
                r.name,
                r.why
            );
        }
    }

    #[test]
    fn rows_that_need_the_database_are_known() {
        let rows = rows();
        let needing: Vec<&str> = rows
            .iter()
            .filter(|r| r.needs_db())
            .map(|r| r.name.as_str())
            .collect();
        for name in ["GET /work", "HEAD /db", "GET /db?conn=new"] {
            assert!(needing.contains(&name), "{name}: {needing:?}");
        }
        // a connection carrying one /db request among others needs it too
        assert!(
            needing.iter().any(|n| n.starts_with("keep-alive")),
            "{needing:?}"
        );
        for n in &needing {
            assert!(
                n.contains("/db") || n.contains("/work") || n.contains("requests"),
                "{n}"
            );
        }
        let free: Vec<&str> = rows
            .iter()
            .filter(|r| !r.needs_db())
            .map(|r| r.name.as_str())
            .collect();
        for name in ["GET /hello", "GET /cpu", "PUT /work", "GET /work?n=1.5"] {
            assert!(free.contains(&name), "{name}: {free:?}");
        }
    }

    #[test]
    fn the_table_has_every_kind_of_row() {
        let rows = rows();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        for want in [
            "GET /hello",
            "HEAD /hello",
            "GET /nope",
            "POST /hello",
            "GET /config",
        ] {
            assert!(names.contains(&want), "{want}");
        }
        assert!(names.iter().any(|n| n.contains("431")));
        assert!(names.iter().any(|n| n.starts_with("malformed")));
    }

    #[test]
    fn a_step_error_keeps_the_response_and_says_where() {
        let resp = RawResponse {
            status: 200,
            version: 1,
            headers: Vec::new(),
            body: b"x".to_vec(),
        };
        let e = RowError::Mismatch {
            mismatch: Mismatch::Status {
                expected: 404,
                got: 200,
            },
            response: Box::new(resp),
        }
        .at("answer 6 (GET /nope)".into());
        assert_eq!(
            e.to_string(),
            "answer 6 (GET /nope): status 200, expected 404"
        );
        assert_eq!(e.response().map(|r| r.status), Some(200));
    }
}
