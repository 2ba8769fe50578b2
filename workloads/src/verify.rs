//! Judging a response from any server against the contract.
//!
//! Like TechEmpower's `verifications.py`: the status, the headers every
//! response must carry (`Server`, a parseable `Date`, `Content-Type`,
//! `Content-Length` that matches) and the exact body.

use std::borrow::Cow;

use crate::endpoint::{route, Endpoint};
use crate::response::ECHO_CONTENT_TYPE;
use crate::{format_sum, sqrt_sum, ServerConfig};

/// What a correct body looks like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectedBody {
    /// Exactly these bytes.
    Exact(Cow<'static, [u8]>),
    /// A `/config` JSON document (any values, all fields present).
    Config,
    /// A one-line, non-empty reason (400/404/405/503 bodies).
    Reason,
}

/// The contract's answer to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub status: u16,
    pub content_type: &'static str,
    pub body: ExpectedBody,
    /// A HEAD request: same status and headers, no body.
    pub head: bool,
}

impl Expected {
    /// The exact body bytes, when the contract fixes them (for the load
    /// engine's cheap per-response comparison).
    pub fn exact_body(&self) -> Option<&[u8]> {
        match &self.body {
            ExpectedBody::Exact(b) if !self.head => Some(b),
            _ if self.head => Some(b""),
            _ => None,
        }
    }

    /// `503 db unavailable`: what `/db` and `/work` answer while the database is down.
    pub fn db_unavailable() -> Expected {
        Expected {
            status: 503,
            content_type: "text/plain",
            body: ExpectedBody::Exact(Cow::Borrowed(b"db unavailable")),
            head: false,
        }
    }

    fn ok(content_type: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Expected {
        Expected {
            status: 200,
            content_type,
            body: ExpectedBody::Exact(body.into()),
            head: false,
        }
    }
}

/// The response the contract prescribes for `method target` while the
/// database is up.
pub fn expect(method: &str, target: &str) -> Expected {
    match route(method, target) {
        Ok(r) => {
            let mut e = match r.endpoint {
                Endpoint::Hello => Expected::ok("text/plain", &b"Hello World"[..]),
                Endpoint::Cpu { n } => {
                    Expected::ok("text/plain", format_sum(sqrt_sum(n)).into_bytes())
                }
                Endpoint::Db { .. } => Expected::ok("text/plain", &b"1"[..]),
                Endpoint::Work { n, .. } => Expected::ok(
                    "application/json",
                    format!("{{\"sum\":{},\"db\":1}}", format_sum(sqrt_sum(n))).into_bytes(),
                ),
                Endpoint::Sleep { ms } => {
                    Expected::ok("text/plain", format!("slept {ms}").into_bytes())
                }
                Endpoint::Echo => Expected::ok(ECHO_CONTENT_TYPE, &b""[..]),
                Endpoint::Config => Expected {
                    status: 200,
                    content_type: "application/json",
                    body: ExpectedBody::Config,
                    head: false,
                },
            };
            e.head = r.head;
            e
        }
        Err(rejection) => Expected {
            status: rejection.status(),
            content_type: "text/plain",
            body: ExpectedBody::Reason,
            head: method == "HEAD",
        },
    }
}

/// How a response differs from the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("status {got}, expected {expected}")]
    Status { expected: u16, got: u16 },
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("header {name}: {value:?} {problem}")]
    BadHeader {
        name: &'static str,
        value: String,
        problem: &'static str,
    },
    #[error("body {got:?}, expected {expected:?}")]
    Body { expected: String, got: String },
    #[error("HEAD response carries a {0}-byte body")]
    HeadBody(usize),
    #[error("/config is not the expected JSON: {0}")]
    Config(String),
}

fn lossy(b: &[u8]) -> String {
    const MAX: usize = 200;
    let s = String::from_utf8_lossy(&b[..b.len().min(MAX)]).into_owned();
    if b.len() > MAX {
        s + "…"
    } else {
        s
    }
}

fn header<'a>(headers: &[(&str, &'a [u8])], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// Checks the headers every response of the contract carries: `Server`, a
/// parseable `Date`, the expected `Content-Type` (parameters such as
/// `; charset=utf-8` allowed), and a `Content-Length` equal to the body
/// length (`body_len` is `None` for HEAD, where the length is the GET one).
pub fn verify_headers(
    expected: &Expected,
    headers: &[(&str, &[u8])],
    body_len: Option<usize>,
) -> Result<(), Mismatch> {
    header(headers, "server").ok_or(Mismatch::MissingHeader("Server"))?;
    let date = header(headers, "date").ok_or(Mismatch::MissingHeader("Date"))?;
    let date_str = std::str::from_utf8(date).unwrap_or("");
    if httpdate::parse_http_date(date_str).is_err() {
        return Err(Mismatch::BadHeader {
            name: "Date",
            value: lossy(date),
            problem: "is not an HTTP date",
        });
    }
    let ct = header(headers, "content-type").ok_or(Mismatch::MissingHeader("Content-Type"))?;
    let mime = ct.split(|&b| b == b';').next().unwrap_or(b"");
    if !mime
        .trim_ascii()
        .eq_ignore_ascii_case(expected.content_type.as_bytes())
    {
        return Err(Mismatch::BadHeader {
            name: "Content-Type",
            value: lossy(ct),
            problem: match expected.content_type {
                "application/json" => "is not application/json",
                ECHO_CONTENT_TYPE => "is not application/octet-stream",
                _ => "is not text/plain",
            },
        });
    }
    let cl = header(headers, "content-length").ok_or(Mismatch::MissingHeader("Content-Length"))?;
    let cl_value: Option<usize> = std::str::from_utf8(cl)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    match (cl_value, body_len) {
        (None, _) => Err(Mismatch::BadHeader {
            name: "Content-Length",
            value: lossy(cl),
            problem: "is not a number",
        }),
        (Some(n), Some(len)) if n != len => Err(Mismatch::BadHeader {
            name: "Content-Length",
            value: lossy(cl),
            problem: "differs from the body length",
        }),
        _ => Ok(()),
    }
}

/// Judges one response against what the contract expects.
pub fn verify(
    expected: &Expected,
    status: u16,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Result<(), Mismatch> {
    if status != expected.status {
        return Err(Mismatch::Status {
            expected: expected.status,
            got: status,
        });
    }
    if expected.head {
        if !body.is_empty() {
            return Err(Mismatch::HeadBody(body.len()));
        }
        return verify_headers(expected, headers, None);
    }
    verify_headers(expected, headers, Some(body.len()))?;
    match &expected.body {
        ExpectedBody::Exact(want) if body != want.as_ref() => Err(Mismatch::Body {
            expected: lossy(want),
            got: lossy(body),
        }),
        ExpectedBody::Exact(_) => Ok(()),
        ExpectedBody::Reason => {
            if body.is_empty() || body.trim_ascii().contains(&b'\n') {
                Err(Mismatch::Body {
                    expected: "a one-line reason".into(),
                    got: lossy(body),
                })
            } else {
                Ok(())
            }
        }
        ExpectedBody::Config => serde_json::from_slice::<ServerConfig>(body)
            .map(|_| ())
            .map_err(|e| Mismatch::Config(format!("{e}: {}", lossy(body)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"Mon, 30 Nov 2026 01:57:30 GMT";

    fn headers<'a>(ct: &'a [u8], cl: &'a [u8]) -> Vec<(&'static str, &'a [u8])> {
        vec![
            ("Server", b"t"),
            ("Date", DATE),
            ("Content-Type", ct),
            ("Content-Length", cl),
        ]
    }

    #[test]
    fn accepts_a_correct_hello() {
        let e = expect("GET", "/hello");
        verify(&e, 200, &headers(b"text/plain", b"11"), b"Hello World").unwrap();
        verify(
            &e,
            200,
            &headers(b"text/plain; charset=utf-8", b"11"),
            b"Hello World",
        )
        .unwrap();
    }

    #[test]
    fn rejects_wrong_status_body_and_headers() {
        let e = expect("GET", "/hello");
        assert!(matches!(
            verify(&e, 500, &headers(b"text/plain", b"11"), b"Hello World"),
            Err(Mismatch::Status {
                expected: 200,
                got: 500
            })
        ));
        assert!(matches!(
            verify(&e, 200, &headers(b"text/plain", b"11"), b"Hello Worle"),
            Err(Mismatch::Body { .. })
        ));
        assert!(matches!(
            verify(&e, 200, &headers(b"text/html", b"11"), b"Hello World"),
            Err(Mismatch::BadHeader {
                name: "Content-Type",
                ..
            })
        ));
        assert!(matches!(
            verify(&e, 200, &headers(b"text/plain", b"12"), b"Hello World"),
            Err(Mismatch::BadHeader {
                name: "Content-Length",
                ..
            })
        ));
        let no_date: Vec<(&str, &[u8])> = vec![
            ("Server", b"t"),
            ("Content-Type", b"text/plain"),
            ("Content-Length", b"11"),
        ];
        assert_eq!(
            verify(&e, 200, &no_date, b"Hello World"),
            Err(Mismatch::MissingHeader("Date"))
        );
    }

    #[test]
    fn a_db_error_answered_with_200_fails() {
        // The seed benchmark's repository answers {"sum":..,"db":"error"} with 200.
        let e = expect("GET", "/work");
        let body = br#"{"sum":21097.455887,"db":"error"}"#;
        let cl = body.len().to_string();
        assert!(matches!(
            verify(&e, 200, &headers(b"application/json", cl.as_bytes()), body),
            Err(Mismatch::Body { .. })
        ));
    }

    #[test]
    fn head_must_have_no_body() {
        let e = expect("HEAD", "/hello");
        verify(&e, 200, &headers(b"text/plain", b"11"), b"").unwrap();
        assert_eq!(
            verify(&e, 200, &headers(b"text/plain", b"11"), b"Hello World"),
            Err(Mismatch::HeadBody(11))
        );
    }

    #[test]
    fn rejections_expect_one_line_reasons() {
        let e = expect("GET", "/cpu?n=abc");
        assert_eq!(e.status, 400);
        verify(&e, 400, &headers(b"text/plain", b"5"), b"bad n").unwrap();
        assert!(verify(&e, 400, &headers(b"text/plain", b"0"), b"").is_err());
        assert_eq!(expect("PUT", "/hello").status, 405);
        assert_eq!(expect("GET", "/missing").status, 404);
    }

    #[test]
    fn config_must_parse() {
        let e = expect("GET", "/config");
        let good = br#"{"server":"x","model":"m","runtime":"r","workers":null,"db_pool":null,"opcache":null,"jit":null,"debug":false}"#;
        let cl = good.len().to_string();
        verify(&e, 200, &headers(b"application/json", cl.as_bytes()), good).unwrap();
        assert!(matches!(
            verify(&e, 200, &headers(b"application/json", b"2"), b"{}"),
            Err(Mismatch::Config(_))
        ));
    }

    #[test]
    fn exact_bodies_for_the_load_engine() {
        assert_eq!(
            expect("GET", "/work?n=1000").exact_body(),
            Some(&br#"{"sum":21097.455887,"db":1}"#[..])
        );
        assert_eq!(expect("HEAD", "/work").exact_body(), Some(&b""[..]));
        assert_eq!(expect("GET", "/config").exact_body(), None);
    }
}
