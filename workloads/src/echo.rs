//! `POST /echo`: the contract's one route with a request body
//! (docs/ARCHITECTURE.md §2). A body of up to [`MAX_BYTES`], framed by
//! Content-Length or chunked, is answered 200 `application/octet-stream`
//! with the same bytes; a longer one 413; a body that disagrees with its
//! framing (a chunk size that is not hex, chunk data longer than its size)
//! 400, and the connection closed: reading a body is where request
//! smuggling lives, and this route is where a server's body framing shows.
//!
//! Here: the route, the answer, what `verify` expects, and the contract's
//! `/echo` rows ([`rows`], run by [`EchoProbe`]).

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use crate::contract::{Exchange, Row, RowError};
use crate::endpoint::{Endpoint, Rejection, Route};
use crate::probe::{Conn, RawResponse};
use crate::response::{Body, Response};
use crate::verify::{Expected, ExpectedBody};

/// The route's path.
pub const PATH: &str = "/echo";
/// The largest body echoed: 1 MiB. One byte more: 413.
pub const MAX_BYTES: usize = 1 << 20;
/// The `Allow` value of its 405.
pub const ALLOW: &str = "POST";
/// The content type of an echoed body.
pub const CONTENT_TYPE: &str = "application/octet-stream";

/// Routes a request for [`PATH`]: POST only.
pub(crate) fn route(method: &str) -> Result<Route, Rejection> {
    match method {
        "POST" => Ok(Route {
            endpoint: Endpoint::Echo,
            head: false,
        }),
        _ => Err(Rejection::MethodNotAllowed),
    }
}

/// The answer to `POST /echo` with this body: 200 with the same bytes, or
/// 413 beyond [`MAX_BYTES`] (a server's codec refuses such a body before
/// reading it; this is the bound for one that hands it over whole).
pub fn echo(body: Vec<u8>) -> Response {
    if body.len() > MAX_BYTES {
        return too_large();
    }
    Response {
        status: 200,
        content_type: CONTENT_TYPE,
        body: Body::Owned(body),
    }
}

/// 413: a body over [`MAX_BYTES`].
pub fn too_large() -> Response {
    Response::text(413, b"request body over 1 MiB")
}

/// What `verify` expects for `POST /echo` with `body`.
pub fn expect(body: &[u8]) -> Expected {
    if body.len() > MAX_BYTES {
        return Expected {
            status: 413,
            content_type: "text/plain",
            body: ExpectedBody::Reason,
            head: false,
        };
    }
    Expected {
        status: 200,
        content_type: CONTENT_TYPE,
        body: ExpectedBody::Exact(Cow::Owned(body.to_vec())),
        head: false,
    }
}

/// `len` bytes of a fixed pattern that holds every octet, CR, LF and NUL
/// among them: an echo that is not binary-safe, or that frames by a line,
/// shows.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 8)) as u8)
        .collect()
}

/// How a row frames its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length`.
    Length,
    /// `Transfer-Encoding: chunked`, in chunks of this size (the last one shorter).
    Chunked { chunk: usize },
}

/// `POST /echo` with `body`, framed as `framing`, ready to send.
pub fn request(body: &[u8], framing: Framing) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(b"POST /echo HTTP/1.1\r\nHost: verify\r\n");
    out.extend_from_slice(format!("Content-Type: {CONTENT_TYPE}\r\n").as_bytes());
    match framing {
        Framing::Length => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        }
        Framing::Chunked { chunk } => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for piece in body.chunks(chunk.max(1)) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// An `/echo` row's exchange: one body, framed one way, its answer judged
/// against the body sent; then, on the same connection, a `GET /hello`
/// (the body was framed right if that is answered).
#[derive(Clone, Debug)]
pub struct EchoProbe {
    pub len: usize,
    pub framing: Framing,
    pub then_hello: bool,
}

impl EchoProbe {
    /// Sends the request and judges the answer; a 413 must close the
    /// connection. A server may answer 413 before reading the whole body
    /// and close: a write that fails then is not the row's failure, the
    /// answer decides.
    pub fn run(&self, addr: SocketAddr, timeout: Duration) -> Result<(), RowError> {
        let body = pattern(self.len);
        let expected = expect(&body);
        let mut c = Conn::connect_within(addr, timeout, timeout).map_err(RowError::Connect)?;
        let mut raw = request(&body, self.framing);
        if self.then_hello {
            raw.extend_from_slice(b"GET /hello HTTP/1.1\r\nHost: verify\r\n\r\n");
        }
        let sent = c.send(&raw);
        let r = match c.read_response(false) {
            Ok(r) => r,
            Err(e) => {
                return Err(match sent {
                    Err(se) => RowError::Send(se),
                    Ok(()) => RowError::Receive(e),
                })
            }
        };
        let r = judge(r, &expected)?;
        if r.status == 413 {
            return if c.is_closed(Duration::from_secs(5)) {
                Ok(())
            } else {
                Err(RowError::LeftOpen)
            };
        }
        sent.map_err(RowError::Send)?;
        if self.then_hello {
            let hello = c
                .read_response(false)
                .map_err(RowError::Receive)
                .and_then(|r| judge(r, &crate::expect("GET", "/hello")))
                .map_err(|e| RowError::Step {
                    step: "GET /hello after the body".into(),
                    source: Box::new(e),
                })?;
            drop(hello);
        }
        Ok(())
    }
}

fn judge(r: RawResponse, expected: &Expected) -> Result<RawResponse, RowError> {
    match r.verify(expected) {
        Ok(()) => Ok(r),
        Err(mismatch) => Err(RowError::Mismatch {
            mismatch,
            response: Box::new(r),
        }),
    }
}

fn echo_row(name: &str, why: &'static str, len: usize, framing: Framing, then_hello: bool) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Echo(EchoProbe {
            len,
            framing,
            then_hello,
        }),
        conformance: None,
    }
}

fn refused(name: &str, why: &'static str, raw: String) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Reject {
            raw: raw.into_bytes(),
            statuses: &[400],
        },
        conformance: None,
    }
}

/// The contract's `/echo` rows.
pub fn rows() -> Vec<Row> {
    use Framing::*;
    let chunked = |raw_body: &str| {
        format!(
            "POST /echo HTTP/1.1\r\nHost: verify\r\nTransfer-Encoding: chunked\r\n\r\n{raw_body}"
        )
    };
    vec![
        echo_row(
            "POST /echo (11 bytes)",
            "a body framed by Content-Length is read and answered back, byte for byte",
            11,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (empty body)",
            "Content-Length: 0 is a body too: answered with an empty one",
            0,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (64 KiB, then GET /hello on the connection)",
            "the body ends where Content-Length says: the request after it is answered",
            64 << 10,
            Length,
            true,
        ),
        echo_row(
            "POST /echo (1 MiB exactly)",
            "the largest body the contract accepts is echoed whole",
            MAX_BYTES,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (chunked, 100 KiB in 4 KiB chunks)",
            "a chunked body is decoded, not refused: clients stream uploads this way",
            100 << 10,
            Chunked { chunk: 4096 },
            true,
        ),
        echo_row(
            "POST /echo (chunked, 1 MiB exactly)",
            "the bound is on the decoded body, whatever its framing",
            MAX_BYTES,
            Chunked { chunk: 64 << 10 },
            false,
        ),
        echo_row(
            "POST /echo (1 MiB + 1 byte) → 413, closed",
            "a body over 1 MiB is refused with 413, not read into memory without bound",
            MAX_BYTES + 1,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (chunked, 1 MiB + 1 byte) → 413, closed",
            "the bound holds for a chunked body, whose length is known only as it comes",
            MAX_BYTES + 1,
            Chunked { chunk: 64 << 10 },
            false,
        ),
        refused(
            "POST /echo, chunk size not hex → 400, closed",
            "a body that disagrees with its framing is refused and the connection closed",
            chunked("zz\r\nhello\r\n0\r\n\r\n"),
        ),
        refused(
            "POST /echo, chunk longer than its size → 400, closed",
            "chunk data must end where its size says (CRLF after it): anything else is refused",
            chunked("3\r\nhello\r\n0\r\n\r\n"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_up_to_the_bound_and_refuses_beyond() {
        let r = echo(b"abc".to_vec());
        assert_eq!(
            (r.status, r.content_type, r.body.as_bytes()),
            (200, CONTENT_TYPE, &b"abc"[..])
        );
        assert_eq!(echo(vec![0; MAX_BYTES]).status, 200);
        assert_eq!(echo(vec![0; MAX_BYTES + 1]).status, 413);
        assert_eq!(expect(&[0; 3]).exact_body(), Some(&[0u8; 3][..]));
        assert_eq!(expect(&vec![0; MAX_BYTES + 1]).status, 413);
    }

    #[test]
    fn only_post_is_routed() {
        assert_eq!(
            crate::route("POST", "/echo").map(|r| r.endpoint),
            Ok(Endpoint::Echo)
        );
        assert_eq!(
            crate::route("POST", "/echo?x=1").map(|r| r.endpoint),
            Ok(Endpoint::Echo)
        );
        assert_eq!(crate::allow("/echo?x"), "POST");
        assert_eq!(crate::allow("http://h/echo"), "POST");
        assert_eq!(crate::allow("/hello"), crate::ALLOW);
        for m in ["GET", "HEAD", "PUT"] {
            assert_eq!(
                crate::route(m, "/echo").map(|r| r.endpoint),
                Err(Rejection::MethodNotAllowed),
                "{m}"
            );
        }
    }

    #[test]
    fn the_pattern_holds_every_octet() {
        let p = pattern(4096);
        for b in [0u8, b'\r', b'\n', 0xff] {
            assert!(p.contains(&b), "{b}");
        }
    }

    #[test]
    fn requests_are_framed_as_asked() {
        let raw = request(b"hello", Framing::Length);
        assert!(raw.ends_with(b"Content-Length: 5\r\n\r\nhello"));
        let raw = request(b"hello", Framing::Chunked { chunk: 2 });
        assert!(raw.ends_with(b"chunked\r\n\r\n2\r\nhe\r\n2\r\nll\r\n1\r\no\r\n0\r\n\r\n"));
        let raw = request(b"", Framing::Chunked { chunk: 2 });
        assert!(raw.ends_with(b"chunked\r\n\r\n0\r\n\r\n"));
    }
}
