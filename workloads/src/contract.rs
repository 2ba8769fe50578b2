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
//! Over 500 lines on purpose: it is the list itself, one row per contract
//! requirement, and the code that runs a row.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use crate::probe::{Conn, RawResponse};
use crate::{expect, Expected, ExpectedBody, Mismatch};

/// What a row sends, and so how its answers are judged.
#[derive(Clone, Debug)]
pub enum Exchange {
    /// `METHOD target HTTP/1.1` on a fresh connection: the contract's
    /// answer. For HEAD, a GET of the same target on another connection
    /// must have the same status and `Content-Length`.
    Request {
        method: &'static str,
        target: String,
    },
    /// As `Request` with GET, and the answer takes at least this long (`/sleep`).
    Slow { target: String, at_least: Duration },
    /// Raw bytes: the answer has one of these statuses (a one-line reason,
    /// the usual headers) and the connection is closed after it. The first
    /// status is the contract's; any other is also correct HTTP (505 for a
    /// version the server does not speak).
    Reject {
        raw: Vec<u8>,
        statuses: &'static [u16],
    },
    /// HTTP/1.0 without keep-alive: answered, then closed.
    Http10Close,
    /// HTTP/1.0 with `Connection: keep-alive`, three times on one
    /// connection: each answer says `Connection: keep-alive`.
    Http10KeepAlive,
    /// These requests one after the other on one connection.
    KeepAlive(Vec<(&'static str, &'static str)>),
    /// These GETs written at once on one connection; answered in order.
    Pipelined(Vec<&'static str>),
    /// The `Date` header is within 2 s of this machine's clock.
    DateFresh,
    /// A `POST /echo` body and its echo ([`crate::echo`]).
    Echo(crate::echo::rows::EchoProbe),
    /// A conformance row's probe ([`crate::conformance`]).
    Conformance(crate::conformance::Probe),
}

/// One row of the contract.
#[derive(Clone, Debug)]
pub struct Row {
    /// Stable: reports and comparisons key on it.
    pub name: String,
    /// What the contract requires here and why it matters, in one line.
    pub why: &'static str,
    pub exchange: Exchange,
    /// Set for the rows of the conformance section: the RFC section, what
    /// it requires, the group; `None` for the contract's own rows.
    pub conformance: Option<crate::conformance::Conformance>,
}

/// A row's verdict: pass, warn (a SHOULD of the conformance section not
/// met) or fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Pass,
    Warn,
    Fail,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Warn => "WARN",
            Outcome::Fail => "FAIL",
        }
    }
}

/// What [`Row::check`] found.
#[derive(Clone, Debug)]
pub struct Checked {
    pub outcome: Outcome,
    /// What came back (conformance rows, always), and on a deviation what
    /// was expected; for a contract row, why it failed (empty on a pass).
    pub found: String,
    /// The answer that did not match (a contract row), or the first answer
    /// (a conformance row), to show what came.
    pub response: Option<RawResponse>,
}

/// How a row failed. `Display` is the one-line reason `harness verify` prints.
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    #[error("connect: {0}")]
    Connect(#[source] io::Error),
    #[error("send: {0}")]
    Send(#[source] io::Error),
    /// No complete answer: timed out, closed early, or not HTTP.
    #[error("{0}")]
    Receive(#[source] io::Error),
    /// An answer that is not the contract's; `response` is what came.
    #[error("{mismatch}")]
    Mismatch {
        #[source]
        mismatch: Mismatch,
        response: Box<RawResponse>,
    },
    #[error("405 without an Allow header")]
    NoAllow,
    #[error("Allow: {got:?} does not list {method}")]
    AllowWithout { got: String, method: &'static str },
    #[error("the connection was left open")]
    LeftOpen,
    #[error("answered in {took:?}, before {at_least:?}")]
    TooSoon { took: Duration, at_least: Duration },
    #[error("answer {answer} carries Connection: {got:?}, ab -k needs keep-alive")]
    NotKeptAlive { answer: usize, got: String },
    #[error("HEAD answers {what} {head:?}, GET {get:?}")]
    HeadDiffers {
        what: &'static str,
        head: String,
        get: String,
    },
    #[error("no Date header")]
    NoDate,
    #[error("bad Date {0:?}")]
    BadDate(String),
    #[error("Date {date} is {skew:?} off")]
    StaleDate { date: String, skew: Duration },
    /// A conformance probe's answers do not meet its requirement.
    #[error("{found}; expected {expected}")]
    Nonconforming {
        found: String,
        expected: &'static str,
    },
    /// A failure at one step of a multi-request exchange.
    #[error("{step}: {source}")]
    Step {
        step: String,
        #[source]
        source: Box<RowError>,
    },
}

impl RowError {
    /// The response that did not match, if that is how the row failed.
    pub fn response(&self) -> Option<&RawResponse> {
        match self {
            RowError::Mismatch { response, .. } => Some(response),
            RowError::Step { source, .. } => source.response(),
            _ => None,
        }
    }

    fn at(self, step: String) -> RowError {
        RowError::Step {
            step,
            source: Box::new(self),
        }
    }
}

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

impl Row {
    /// Whether its answer needs the database (a /db or /work request, alone
    /// or among others on one connection): without one, 503 is right.
    pub fn needs_db(&self) -> bool {
        let needs = |method: &str, target: &str| {
            crate::route(method, target).is_ok_and(|r| r.endpoint.needs_db())
        };
        match &self.exchange {
            Exchange::Request { method, target } => needs(method, target),
            Exchange::Slow { target, .. } => needs("GET", target),
            Exchange::KeepAlive(reqs) => reqs.iter().any(|(m, t)| needs(m, t)),
            Exchange::Pipelined(targets) => targets.iter().any(|t| needs("GET", t)),
            Exchange::Reject { .. }
            | Exchange::Http10Close
            | Exchange::Http10KeepAlive
            | Exchange::DateFresh
            | Exchange::Echo(_)
            | Exchange::Conformance(_) => false,
        }
    }

    /// The requests it sends, as `(method, target)`; none for raw bytes.
    pub fn requests(&self) -> Vec<(&str, &str)> {
        match &self.exchange {
            Exchange::Request { method, target } => vec![(method, target.as_str())],
            Exchange::Slow { target, .. } => vec![("GET", target.as_str())],
            Exchange::KeepAlive(reqs) => reqs.clone(),
            Exchange::Pipelined(targets) => targets.iter().map(|t| ("GET", *t)).collect(),
            Exchange::Http10Close | Exchange::Http10KeepAlive | Exchange::DateFresh => {
                vec![("GET", "/hello")]
            }
            Exchange::Echo(e) if e.then_hello => vec![("POST", "/echo"), ("GET", "/hello")],
            Exchange::Echo(_) => vec![("POST", "/echo")],
            Exchange::Reject { .. } | Exchange::Conformance(_) => Vec::new(),
        }
    }

    /// Runs the row and judges it: a contract row passes or fails; a
    /// conformance row's deviation fails a MUST and warns a SHOULD, and
    /// its verdict always says what was found.
    pub fn check(&self, addr: SocketAddr, timeout: Duration) -> Checked {
        let deviation = match self.conformance {
            Some(c) if c.requirement == crate::conformance::Requirement::Should => Outcome::Warn,
            _ => Outcome::Fail,
        };
        if let Exchange::Conformance(probe) = &self.exchange {
            return match probe.run(addr, timeout) {
                Ok(seen) => {
                    let (outcome, found) = if (probe.judge)(&seen) {
                        (Outcome::Pass, seen.describe())
                    } else {
                        let found = format!("{}; expected {}", seen.describe(), probe.expected);
                        (deviation, found)
                    };
                    Checked {
                        outcome,
                        found,
                        response: seen.answers.into_iter().next(),
                    }
                }
                Err(e) => Checked {
                    outcome: deviation,
                    found: e.to_string(),
                    response: None,
                },
            };
        }
        match self.run(addr, timeout) {
            Ok(()) => Checked {
                outcome: Outcome::Pass,
                found: String::new(),
                response: None,
            },
            Err(e) => Checked {
                outcome: deviation,
                found: e.to_string(),
                response: e.response().cloned(),
            },
        }
    }

    /// Runs the exchange against `addr`: connecting, each write and each
    /// read wait at most `timeout`.
    /// A conformance row fails here on any deviation, SHOULD or MUST
    /// ([`Row::check`] tells them apart).
    pub fn run(&self, addr: SocketAddr, timeout: Duration) -> Result<(), RowError> {
        if let Exchange::Conformance(probe) = &self.exchange {
            let seen = probe.run(addr, timeout)?;
            return if (probe.judge)(&seen) {
                Ok(())
            } else {
                Err(RowError::Nonconforming {
                    found: seen.describe(),
                    expected: probe.expected,
                })
            };
        }
        if let Exchange::Echo(probe) = &self.exchange {
            return probe.run(addr, timeout);
        }
        let mut c = Client::connect(addr, timeout)?;
        match &self.exchange {
            Exchange::Request { method, target } => {
                let head = c.exchange(method, target)?;
                if *method == "HEAD" {
                    let get = Client::connect(addr, timeout)?
                        .exchange_raw("GET", target)
                        .map_err(|e| e.at(format!("GET {target}")))?;
                    // A body the contract fixes has one length; /config is
                    // read from whichever process answers, so two answers
                    // may differ in length (a worker's pid, its counts).
                    let fixed = crate::expect("GET", target).exact_body().is_some();
                    same_as_get(&head, &get, fixed)?;
                }
                Ok(())
            }
            Exchange::Slow { target, at_least } => {
                let t0 = Instant::now();
                c.exchange("GET", target)?;
                let took = t0.elapsed();
                if took < *at_least {
                    return Err(RowError::TooSoon {
                        took,
                        at_least: *at_least,
                    });
                }
                Ok(())
            }
            Exchange::Reject { raw, statuses } => {
                c.send(raw)?;
                let r = c.response(false)?;
                let status = if statuses.contains(&r.status) {
                    r.status
                } else {
                    statuses[0]
                };
                let expected = Expected {
                    status,
                    content_type: "text/plain",
                    body: ExpectedBody::Reason,
                    head: false,
                };
                judge(r, &expected)?;
                c.expect_closed()
            }
            Exchange::Http10Close => {
                c.send(b"GET /hello HTTP/1.0\r\n\r\n")?;
                judge(c.response(false)?, &expect("GET", "/hello"))?;
                c.expect_closed()
            }
            Exchange::Http10KeepAlive => {
                for answer in 1..=3 {
                    c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")?;
                    let r = c
                        .response(false)
                        .map_err(|e| e.at(format!("request {answer}")))?;
                    let r = judge(r, &expect("GET", "/hello"))?;
                    let ka = r.header("connection").unwrap_or("");
                    if !ka.eq_ignore_ascii_case("keep-alive") {
                        return Err(RowError::NotKeptAlive {
                            answer,
                            got: ka.to_string(),
                        });
                    }
                }
                Ok(())
            }
            Exchange::KeepAlive(requests) => {
                for (i, (m, t)) in requests.iter().enumerate() {
                    c.exchange(m, t)
                        .map_err(|e| e.at(format!("request {} ({m} {t})", i + 1)))?;
                }
                Ok(())
            }
            Exchange::Pipelined(targets) => {
                let mut raw = Vec::new();
                for t in targets {
                    raw.extend_from_slice(
                        format!("GET {t} HTTP/1.1\r\nHost: verify\r\n\r\n").as_bytes(),
                    );
                }
                c.send(&raw)?;
                for (i, t) in targets.iter().enumerate() {
                    c.response(false)
                        .and_then(|r| judge(r, &expect("GET", t)))
                        .map_err(|e| e.at(format!("answer {} (GET {t})", i + 1)))?;
                }
                Ok(())
            }
            Exchange::DateFresh => {
                let r = c.exchange("GET", "/hello")?;
                let date = r.header("date").ok_or(RowError::NoDate)?;
                let t = crate::parse_http_date(date)
                    .ok_or_else(|| RowError::BadDate(date.to_string()))?;
                let skew = SystemTime::now()
                    .duration_since(t)
                    .unwrap_or_else(|e| e.duration());
                if skew > Duration::from_secs(2) {
                    return Err(RowError::StaleDate {
                        date: date.to_string(),
                        skew,
                    });
                }
                Ok(())
            }
            Exchange::Conformance(_) | Exchange::Echo(_) => unreachable!("run above"),
        }
    }
}

/// A HEAD answer must carry the GET answer's status and, where the body is
/// fixed, its `Content-Length`.
fn same_as_get(head: &RawResponse, get: &RawResponse, fixed_body: bool) -> Result<(), RowError> {
    if head.status != get.status {
        return Err(RowError::HeadDiffers {
            what: "status",
            head: head.status.to_string(),
            get: get.status.to_string(),
        });
    }
    let (h, g) = (head.header("content-length"), get.header("content-length"));
    if fixed_body && h != g {
        return Err(RowError::HeadDiffers {
            what: "Content-Length",
            head: h.unwrap_or("none").to_string(),
            get: g.unwrap_or("none").to_string(),
        });
    }
    Ok(())
}

/// Whether a response is the contract's answer; a 405 must also list GET in `Allow`.
fn judge(r: RawResponse, expected: &Expected) -> Result<RawResponse, RowError> {
    judge_at(r, expected, "/")
}

/// As [`judge`], for `target`: a 405 must list in `Allow` the method its
/// path serves (GET, or POST for `/echo`: [`crate::allow`]).
fn judge_at(r: RawResponse, expected: &Expected, target: &str) -> Result<RawResponse, RowError> {
    if let Err(mismatch) = r.verify(expected) {
        return Err(RowError::Mismatch {
            mismatch,
            response: Box::new(r),
        });
    }
    if expected.status == 405 {
        let method = crate::allow(target)
            .split(',')
            .next()
            .unwrap_or("GET")
            .trim();
        let allow = r.header("allow").ok_or(RowError::NoAllow)?;
        if !allow.split(',').any(|m| m.trim() == method) {
            return Err(RowError::AllowWithout {
                got: allow.to_string(),
                method,
            });
        }
    }
    Ok(r)
}

/// [`Conn`] with the row's errors.
struct Client(Conn);

impl Client {
    fn connect(addr: SocketAddr, timeout: Duration) -> Result<Client, RowError> {
        Conn::connect_within(addr, timeout, timeout)
            .map(Client)
            .map_err(RowError::Connect)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), RowError> {
        self.0.send(bytes).map_err(RowError::Send)
    }

    /// Sends `method target` and reads the answer, unjudged.
    fn exchange_raw(&mut self, method: &str, target: &str) -> Result<RawResponse, RowError> {
        let body = if matches!(method, "GET" | "HEAD") {
            ""
        } else {
            "Content-Length: 0\r\n"
        };
        self.send(format!("{method} {target} HTTP/1.1\r\nHost: verify\r\n{body}\r\n").as_bytes())?;
        self.response(method == "HEAD")
    }

    /// Sends `method target` and judges the answer against the contract.
    fn exchange(&mut self, method: &str, target: &str) -> Result<RawResponse, RowError> {
        let r = self.exchange_raw(method, target)?;
        judge_at(r, &expect(method, target), target)
    }

    /// Reads one response; `head`: no body follows.
    fn response(&mut self, head: bool) -> Result<RawResponse, RowError> {
        self.0.read_response(head).map_err(RowError::Receive)
    }

    /// The server must close the connection (within 5 s).
    fn expect_closed(&mut self) -> Result<(), RowError> {
        if self.0.is_closed(Duration::from_secs(5)) {
            Ok(())
        } else {
            Err(RowError::LeftOpen)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

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
