//! `POST /echo`: the contract's one route with a request body
//! (docs/ARCHITECTURE.md §2). A body of up to [`MAX_BYTES`], framed by
//! Content-Length or chunked, is answered 200 `application/octet-stream`
//! with the same bytes; a longer one 413; a body that disagrees with its
//! framing (a chunk size that is not hex, chunk data longer than its size)
//! 400, and the connection closed: reading a body is where request
//! smuggling lives, and this route is where a server's body framing shows.
//!
//! Here: the route's bounds, the answer, what `verify` expects, and the
//! request a client sends. The router's side (POST only) is in
//! `endpoint.rs`; the contract's `/echo` rows are in [`rows`], run by
//! [`probe::EchoProbe`].

pub mod probe;
pub mod rows;

use std::borrow::Cow;

use crate::response::{Body, Response};
use crate::verify::{Expected, ExpectedBody};

/// The route's path.
pub const PATH: &str = crate::endpoint::ECHO_PATH;
/// The largest body echoed: 1 MiB. One byte more: 413.
pub const MAX_BYTES: usize = 1 << 20;
/// The `Allow` value of its 405.
pub const ALLOW: &str = crate::endpoint::ECHO_ALLOW;
/// The content type of an echoed body.
pub const CONTENT_TYPE: &str = crate::response::ECHO_CONTENT_TYPE;

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
pub enum BodyFraming {
    /// `Content-Length`.
    Length,
    /// `Transfer-Encoding: chunked`, in chunks of this size (the last one shorter).
    Chunked { chunk: usize },
}

/// `POST /echo` with `body`, framed as `framing`, ready to send.
pub fn request(body: &[u8], framing: BodyFraming) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(b"POST /echo HTTP/1.1\r\nHost: verify\r\n");
    out.extend_from_slice(format!("Content-Type: {CONTENT_TYPE}\r\n").as_bytes());
    match framing {
        BodyFraming::Length => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        }
        BodyFraming::Chunked { chunk } => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{Endpoint, Rejection};

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
        let raw = request(b"hello", BodyFraming::Length);
        assert!(raw.ends_with(b"Content-Length: 5\r\n\r\nhello"));
        let raw = request(b"hello", BodyFraming::Chunked { chunk: 2 });
        assert!(raw.ends_with(b"chunked\r\n\r\n2\r\nhe\r\n2\r\nll\r\n1\r\no\r\n0\r\n\r\n"));
        let raw = request(b"", BodyFraming::Chunked { chunk: 2 });
        assert!(raw.ends_with(b"chunked\r\n\r\n0\r\n\r\n"));
    }
}
