//! A contract row (what it sends, why, and the conformance it records) and
//! the code that runs one and judges its answers.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use super::error::RowError;
use crate::probe::{Conn, RawResponse};
use crate::{expect, Expected, ExpectedBody};

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
    Echo(crate::echo::probe::EchoProbe),
    /// A conformance row's probe ([`crate::conformance`]).
    Conformance(crate::conformance::probe::Probe),
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
    pub conformance: Option<crate::conformance::probe::Conformance>,
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
            Some(c) if c.requirement == crate::conformance::probe::Requirement::Should => {
                Outcome::Warn
            }
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
