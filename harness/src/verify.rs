//! `harness verify`: every row of the contract (DESIGN.md §2), one request
//! (or one short exchange) per row over `workloads::probe`, each answer
//! judged by `workloads::verify`. Prints PASS/FAIL per row with what
//! differed; the exit code is non-zero if any row fails.

use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use workloads::probe::{samples, Conn, RawResponse};
use workloads::{expect, Expected, ExpectedBody};

use crate::cli::VerifyArgs;
use crate::target::Target;

/// What a row sends and what it expects back.
#[derive(Clone, Debug)]
pub enum Probe {
    /// `METHOD target HTTP/1.1` on a fresh connection: the contract's answer.
    Request {
        method: &'static str,
        target: String,
    },
    /// As `Request`, and the answer takes at least this long (`/sleep`).
    Slow { target: String, at_least: Duration },
    /// Raw bytes: the answer has this status (a one-line reason, the usual
    /// headers) and the connection is closed after it.
    /// The first status is the contract's; any other listed one is also
    /// correct HTTP (505 for a version the server does not speak).
    Reject {
        raw: Vec<u8>,
        statuses: &'static [u16],
    },
    /// HTTP/1.0 without keep-alive: answered, then closed.
    Http10Close,
    /// HTTP/1.0 with `Connection: keep-alive`, three times on one connection:
    /// each answer says `Connection: keep-alive` (ab -k needs it).
    Http10KeepAlive,
    /// These requests one after the other on one connection.
    KeepAlive(Vec<(&'static str, &'static str)>),
    /// These requests written at once; answered in order.
    Pipelined(Vec<&'static str>),
    /// The `Date` header is within 2 s of this machine's clock.
    DateFresh,
}

/// One row of the contract.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub probe: Probe,
}

/// A row's verdict.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub name: String,
    pub result: Result<(), String>,
}

fn request(method: &'static str, target: &str) -> Row {
    Row {
        name: format!("{method} {target}"),
        probe: Probe::Request {
            method,
            target: target.to_string(),
        },
    }
}

fn reject(name: &str, raw: Vec<u8>, statuses: &'static [u16]) -> Row {
    Row {
        name: name.to_string(),
        probe: Probe::Reject { raw, statuses },
    }
}

/// Every row, in the order of the contract table.
pub fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for t in [
        "/",
        "/hello",
        "/cpu",
        "/cpu?n=1",
        "/cpu?n=250000",
        "/db",
        "/db?sleep_ms=30",
        "/db?conn=new",
        "/db?sleep_ms=5&conn=new",
        "/work",
        "/work?n=10",
        "/work?conn=new",
    ] {
        rows.push(request("GET", t));
    }
    rows.push(Row {
        name: "GET /sleep?ms=50 (waits 50 ms)".into(),
        probe: Probe::Slow {
            target: "/sleep?ms=50".into(),
            at_least: Duration::from_millis(50),
        },
    });
    rows.push(request("GET", "/sleep?ms=0"));
    rows.push(request("GET", "/config"));
    for t in samples::HEAD_TARGETS {
        rows.push(request("HEAD", t));
    }
    for t in samples::NOT_FOUND_TARGETS {
        rows.push(request("GET", t));
    }
    for (m, t) in samples::WRONG_METHODS {
        rows.push(request(m, t));
    }
    for t in samples::BAD_QUERY_TARGETS {
        rows.push(request("GET", t));
    }
    rows.push(reject(
        "malformed request line → 400, closed",
        b"GARBAGE\r\n\r\n".to_vec(),
        &[400],
    ));
    rows.push(reject(
        "malformed header line → 400, closed",
        b"GET /hello HTTP/1.1\r\nBad Header Line\r\n\r\n".to_vec(),
        &[400],
    ));
    rows.push(reject(
        "unknown HTTP version → 400 or 505, closed",
        b"GET /hello HTTP/9.9\r\nHost: t\r\n\r\n".to_vec(),
        &[400, 505],
    ));
    let mut big = b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    big.extend_from_slice(b"\r\n\r\n");
    rows.push(reject("header over 8 KiB → 431, closed", big, &[431]));
    rows.push(Row {
        name: "HTTP/1.0 without keep-alive → answered, closed".into(),
        probe: Probe::Http10Close,
    });
    rows.push(Row {
        name: "HTTP/1.0 with keep-alive → Connection: keep-alive".into(),
        probe: Probe::Http10KeepAlive,
    });
    rows.push(Row {
        name: "keep-alive: 8 requests on one connection".into(),
        probe: Probe::KeepAlive(vec![
            ("GET", "/hello"),
            ("GET", "/cpu?n=3"),
            ("GET", "/db"),
            ("GET", "/work"),
            ("GET", "/nope"),
            ("HEAD", "/hello"),
            ("GET", "/hello"),
            ("GET", "/cpu?n=abc"),
        ]),
    });
    rows.push(Row {
        name: "pipelined: 8 requests in one write, answered in order".into(),
        probe: Probe::Pipelined(samples::PIPELINED_TARGETS.to_vec()),
    });
    rows.push(Row {
        name: "Date is fresh (within 2 s)".into(),
        probe: Probe::DateFresh,
    });
    rows
}

impl Row {
    /// Whether its answer needs the database (a /db or /work request, alone
    /// or among others on one connection): without one, 503 is right.
    pub fn needs_db(&self) -> bool {
        let needs = |method: &str, target: &str| {
            workloads::route(method, target).is_ok_and(|r| r.endpoint.needs_db())
        };
        match &self.probe {
            Probe::Request { method, target } => needs(method, target),
            Probe::Slow { target, .. } => needs("GET", target),
            Probe::KeepAlive(reqs) => reqs.iter().any(|(m, t)| needs(m, t)),
            Probe::Pipelined(targets) => targets.iter().any(|t| needs("GET", t)),
            Probe::Reject { .. }
            | Probe::Http10Close
            | Probe::Http10KeepAlive
            | Probe::DateFresh => false,
        }
    }
}

/// Runs every row against `addr`.
pub fn check_all(addr: SocketAddr, timeout: Duration) -> Vec<Verdict> {
    check(addr, timeout, rows())
}

/// Runs `rows` against `addr`, in order.
pub fn check(addr: SocketAddr, timeout: Duration, rows: Vec<Row>) -> Vec<Verdict> {
    rows.into_iter()
        .map(|row| Verdict {
            result: probe(addr, &row.probe, timeout),
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

fn probe(addr: SocketAddr, probe: &Probe, timeout: Duration) -> Result<(), String> {
    let mut c = Client::connect(addr, timeout).map_err(|e| format!("connect: {e}"))?;
    match probe {
        Probe::Request { method, target } => c.exchange(method, target).map(|_| ()),
        Probe::Slow { target, at_least } => {
            let t0 = Instant::now();
            c.exchange("GET", target)?;
            let took = t0.elapsed();
            if took < *at_least {
                return Err(format!("answered in {took:?}, before {at_least:?}"));
            }
            Ok(())
        }
        Probe::Reject { raw, statuses } => {
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
            judge(&r, &expected)?;
            c.expect_closed()
        }
        Probe::Http10Close => {
            c.send(b"GET /hello HTTP/1.0\r\n\r\n")?;
            judge(&c.response(false)?, &expect("GET", "/hello"))?;
            c.expect_closed()
        }
        Probe::Http10KeepAlive => {
            for i in 0..3 {
                c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")?;
                let r = c
                    .response(false)
                    .map_err(|e| format!("request {}: {e}", i + 1))?;
                judge(&r, &expect("GET", "/hello"))?;
                let ka = r.header("connection").unwrap_or("");
                if !ka.eq_ignore_ascii_case("keep-alive") {
                    return Err(format!(
                        "answer {} carries Connection: {ka:?}, ab -k needs keep-alive",
                        i + 1
                    ));
                }
            }
            Ok(())
        }
        Probe::KeepAlive(requests) => {
            for (i, (m, t)) in requests.iter().enumerate() {
                c.exchange(m, t)
                    .map_err(|e| format!("request {} ({m} {t}): {e}", i + 1))?;
            }
            Ok(())
        }
        Probe::Pipelined(targets) => {
            let mut raw = Vec::new();
            for t in targets {
                raw.extend_from_slice(
                    format!("GET {t} HTTP/1.1\r\nHost: verify\r\n\r\n").as_bytes(),
                );
            }
            c.send(&raw)?;
            for (i, t) in targets.iter().enumerate() {
                c.response(false)
                    .and_then(|r| judge(&r, &expect("GET", t)))
                    .map_err(|e| format!("answer {} (GET {t}): {e}", i + 1))?;
            }
            Ok(())
        }
        Probe::DateFresh => {
            let r = c.exchange("GET", "/hello")?;
            let date = r.header("date").ok_or("no Date header")?;
            let t = workloads::parse_http_date(date).ok_or(format!("bad Date {date:?}"))?;
            let skew = SystemTime::now()
                .duration_since(t)
                .unwrap_or_else(|e| e.duration());
            if skew > Duration::from_secs(2) {
                return Err(format!("Date {date} is {skew:?} off"));
            }
            Ok(())
        }
    }
}

/// Whether a response is the contract's answer; a 405 must also list GET in `Allow`.
fn judge(r: &RawResponse, expected: &Expected) -> Result<(), String> {
    r.verify(expected).map_err(|m| m.to_string())?;
    if expected.status == 405 {
        let allow = r.header("allow").ok_or("405 without an Allow header")?;
        if !allow.contains("GET") {
            return Err(format!("Allow: {allow:?} does not list GET"));
        }
    }
    Ok(())
}

/// The contract's raw client ([`workloads::probe`]) with one-line errors.
struct Client(Conn);

impl Client {
    fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<Client> {
        Conn::connect_within(addr, timeout, timeout).map(Client)
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.send(bytes).map_err(|e| format!("send: {e}"))
    }

    /// Sends `method target` and judges the answer against the contract.
    fn exchange(&mut self, method: &str, target: &str) -> Result<RawResponse, String> {
        let body = if matches!(method, "GET" | "HEAD") {
            ""
        } else {
            "Content-Length: 0\r\n"
        };
        self.send(format!("{method} {target} HTTP/1.1\r\nHost: verify\r\n{body}\r\n").as_bytes())?;
        let r = self.response(method == "HEAD")?;
        judge(&r, &expect(method, target))?;
        Ok(r)
    }

    /// Reads one response; `head`: no body follows.
    fn response(&mut self, head: bool) -> Result<RawResponse, String> {
        self.0.read_response(head).map_err(|e| e.to_string())
    }

    /// The server must close the connection (within 5 s).
    fn expect_closed(&mut self) -> Result<(), String> {
        if self.0.is_closed(Duration::from_secs(5)) {
            Ok(())
        } else {
            Err("the connection was left open".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_that_need_the_database_are_known() {
        let needing: Vec<String> = rows()
            .into_iter()
            .filter(Row::needs_db)
            .map(|r| r.name)
            .collect();
        for name in ["GET /work", "HEAD /db", "GET /db?conn=new"] {
            assert!(needing.iter().any(|n| n == name), "{name}: {needing:?}");
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
        let free: Vec<String> = rows()
            .into_iter()
            .filter(|r| !r.needs_db())
            .map(|r| r.name)
            .collect();
        for name in ["GET /hello", "GET /cpu", "PUT /work", "GET /work?n=1.5"] {
            assert!(free.iter().any(|n| n == name), "{name}: {free:?}");
        }
    }

    #[test]
    fn every_contract_row_is_there() {
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
}
