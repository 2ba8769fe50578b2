//! The servers' HTTP/1 codec (`server_common::http1`) on one request, as
//! a connection reads it: whole, and split at every byte.
//!
//! Invariants:
//! - `parse` never reads past what it was given: an accepted request's
//!   `len` is at most the input's, its method and target lie inside it;
//! - split at any byte, the first part is incomplete (`Ok(None)`) when it
//!   is shorter than the request, and the request itself once it holds it
//!   all: the same answer whatever the reads were; an input the codec
//!   refuses is never accepted from a prefix of it that ends before the
//!   refusal could be seen, and an incomplete one stays incomplete;
//! - an accepted request re-encodes (method, target, version, the
//!   connection's fate, the body, decoded if chunked) to bytes the codec parses to the same
//!   request, of exactly their length;
//! - the answer to it (or to a refused one) is framed right: a head that
//!   parses, `Content-Length` equal to the body that follows, and no body
//!   at all for HEAD (RFC 9110 §9.3.2), refusals included.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server_common::http1::{self, Connection, ParseError, Request};

fuzz_target!(|data: &[u8]| check(data));

/// Split points tried: every byte up to here, then every 61st and the last 32.
const EVERY_BYTE_UP_TO: usize = 1024;

fn check(data: &[u8]) {
    let whole = http1::parse(data);
    match &whole {
        Ok(Some(r)) => {
            assert!(
                r.len > 0 && r.len <= data.len(),
                "len {} of {}",
                r.len,
                data.len()
            );
            assert!(r.body_len < r.len);
            assert!(inside(r.method, &data[..r.len]) && inside(r.target, &data[..r.len]));
            reencodes(r);
            answer_is_framed(Some(r), None, data);
        }
        Ok(None) => {}
        Err(e) => answer_is_framed(None, Some(*e), data),
    }
    for k in splits(data.len()) {
        let part = http1::parse(&data[..k]);
        match (&whole, &part) {
            (Ok(Some(r)), Ok(None)) if k < r.len => {}
            (Ok(Some(r)), Ok(Some(p))) if k >= r.len => assert_eq!(r, p, "split at {k}"),
            (Ok(None), Ok(None)) => {}
            // A prefix may be refused only where the whole is refused too.
            (Err(_), Ok(None) | Err(_)) => {}
            (Err(_), Ok(Some(_))) => panic!("a prefix of {k} bytes is accepted, the whole refused"),
            _ => panic!("split at {k}: whole {whole:?}, first part {part:?}"),
        }
    }
}

/// Whether `s` is a slice of `buf`.
fn inside(s: &str, buf: &[u8]) -> bool {
    let (start, end) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
    let p = s.as_ptr() as usize;
    p >= start && p + s.len() <= end
}

fn splits(len: usize) -> impl Iterator<Item = usize> {
    (0..len).filter(move |&k| k <= EVERY_BYTE_UP_TO || k % 61 == 0 || k + 32 >= len)
}

/// The request as a canonical client would send it.
fn reencodes(r: &Request<'_>) {
    let version = if r.http10 { "1.0" } else { "1.1" };
    let connection = match (r.http10, r.keep_alive) {
        (true, true) => "Connection: keep-alive\r\n",
        (false, false) => "Connection: close\r\n",
        _ => "",
    };
    let mut bytes = format!(
        "{} {} HTTP/{version}\r\nHost: fuzz\r\n{connection}",
        r.method, r.target
    )
    .into_bytes();
    if r.body_len > 0 {
        bytes.extend_from_slice(format!("Content-Length: {}\r\n", r.body_len).as_bytes());
    }
    bytes.extend_from_slice(b"\r\n");
    // The body decoded (a chunked one re-encoded with its length).
    bytes.extend_from_slice(&r.body());
    let again = http1::parse(&bytes)
        .unwrap_or_else(|e| {
            panic!(
                "re-encoded {:?} refused: {e:?}",
                String::from_utf8_lossy(&bytes)
            )
        })
        .unwrap_or_else(|| {
            panic!(
                "re-encoded {:?} incomplete",
                String::from_utf8_lossy(&bytes)
            )
        });
    assert_eq!(
        (
            again.method,
            again.target,
            again.http10,
            again.keep_alive,
            again.body_len,
            again.len
        ),
        (
            r.method,
            r.target,
            r.http10,
            r.keep_alive,
            r.body_len,
            bytes.len()
        ),
        "re-encoded {:?}",
        String::from_utf8_lossy(&bytes)
    );
}

/// The answer the servers send: to an accepted request, its route's; to a
/// refused one, the refusal. Parsed back as a client reads it.
fn answer_is_framed(req: Option<&Request<'_>>, refused: Option<ParseError>, data: &[u8]) {
    let mut out = Vec::new();
    let head_only = match (req, refused) {
        (Some(r), _) => {
            // The route's refusal, or a fixed body (no endpoint's work is run).
            let resp = match workloads::route(r.method, r.target) {
                Ok(_) => workloads::Response::text(200, b"Hello World"),
                Err(rejection) => rejection.into_response(),
            };
            let head = r.method == "HEAD";
            http1::encode(&mut out, "fuzz", &resp, head, Connection::for_request(r));
            head
        }
        (None, Some(e)) => {
            let head = http1::requests_head(data);
            http1::encode_error(&mut out, "fuzz", e, head);
            head
        }
        (None, None) => return,
    };
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut resp = httparse::Response::new(&mut headers);
    let n = match resp.parse(&out) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!(
            "our answer does not parse: {other:?}: {:?}",
            String::from_utf8_lossy(&out)
        ),
    };
    let length: usize = resp
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
        .expect("Content-Length in every answer");
    let body = out.len() - n;
    if head_only {
        assert_eq!(body, 0, "an answer to HEAD with content");
    } else {
        assert_eq!(body, length, "Content-Length {length}, body {body}");
    }
}
