//! The load engine's response reader (harness/src/engine/proto/h1.rs): a
//! server may send anything. The first byte picks the request (HEAD or
//! not) and the check (any 2xx, or the contract's `200 Hello World`) and
//! seeds the read sizes; the rest is what the server sent.
//!
//! Invariants:
//! - the reader never reads past what it was given: `leftover` is at most
//!   the chunk just fed;
//! - the same bytes in other reads give the same outcome (where the
//!   response ends, status, body length, verdict, close);
//! - a response it accepts has the length it declared: with a
//!   Content-Length (and no Transfer-Encoding, not HEAD, 204 or 304) the
//!   body counted is exactly that many bytes and the response ends right
//!   after them; with `Check::Exact`, a response without a verdict is the
//!   contract's status and body, to the byte.
#![no_main]

use std::sync::Arc;

use harness::fuzzing::{Check, Outcome, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let head = mode & 1 == 1;
    let check = if mode & 2 == 2 {
        Check::Exact {
            status: 200,
            body: Arc::from(&b"Hello World"[..]),
        }
    } else {
        Check::Success
    };
    let whole = read(stream, &[usize::MAX], head, &check);
    let sizes = benchlab_fuzz::read_sizes(mode, stream.len(), 64);
    assert_eq!(
        read(stream, &sizes, head, &check),
        whole,
        "reads of {sizes:?}"
    );
    assert_eq!(read(stream, &[1], head, &check), whole, "byte by byte");
    if let End::Done { consumed } = whole.end {
        declared_length_held(&stream[..consumed], head, &whole);
        if let (Check::Exact { status, body }, None) = (&check, whole.verdict) {
            assert_eq!(whole.status, *status);
            if !head {
                assert_eq!(whole.body_len, body.len() as u64);
                assert!(stream[..consumed].ends_with(body) || is_chunked(&stream[..consumed]));
            }
        }
    }
});

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The response ended after this many bytes of the stream.
    Done {
        consumed: usize,
    },
    Fail(harness::fuzzing::Failure),
}

#[derive(Debug, PartialEq, Eq)]
struct Read {
    end: End,
    status: u16,
    body_len: u64,
    verdict: Option<harness::fuzzing::Failure>,
    close: bool,
}

/// Feeds `stream` in reads of `sizes` (cycled), then the end of file.
fn read(stream: &[u8], sizes: &[usize], head: bool, check: &Check) -> Read {
    let mut r = Response::new(head);
    let mut at = 0;
    let mut i = 0;
    let end = loop {
        if at == stream.len() {
            break match r.eof(check) {
                Outcome::Done { leftover } => {
                    assert_eq!(leftover, 0);
                    End::Done { consumed: at }
                }
                Outcome::Fail(f) => End::Fail(f),
                Outcome::More => panic!("more wanted after the end of file"),
            };
        }
        let n = sizes[i % sizes.len()].max(1).min(stream.len() - at);
        i += 1;
        let chunk = &stream[at..at + n];
        at += n;
        match r.feed(chunk, check) {
            Outcome::More => {}
            Outcome::Done { leftover } => {
                assert!(
                    leftover <= chunk.len(),
                    "leftover {leftover} of a {}-byte read",
                    chunk.len()
                );
                break End::Done {
                    consumed: at - leftover,
                };
            }
            Outcome::Fail(f) => break End::Fail(f),
        }
    };
    Read {
        end,
        status: r.status(),
        body_len: r.body_len(),
        verdict: r.verdict(),
        close: r.close(),
    }
}

/// The final head of `response` (1xx interim heads skipped) parsed by
/// httparse: its length, status, Content-Length and whether it is chunked.
fn final_head(response: &[u8]) -> Option<(usize, u16, Option<u64>, bool)> {
    let mut at = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&response[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            _ => return None,
        };
        at += n;
        let status = resp.code?;
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let mut length = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = true;
            }
        }
        return Some((at, status, length, chunked));
    }
}

fn is_chunked(response: &[u8]) -> bool {
    final_head(response).is_some_and(|(_, _, _, chunked)| chunked)
}

/// A response accepted with a Content-Length: its body is exactly that long.
fn declared_length_held(response: &[u8], head: bool, seen: &Read) {
    let Some((head_len, status, Some(length), false)) = final_head(response) else {
        return;
    };
    assert_eq!(seen.status, status);
    if head || status == 204 || status == 304 {
        assert_eq!(
            response.len(),
            head_len,
            "a bodiless response ends with its head"
        );
        return;
    }
    assert_eq!(
        seen.body_len, length,
        "declared {length}, counted {}",
        seen.body_len
    );
    assert_eq!(
        response.len() as u64,
        head_len as u64 + length,
        "the response ends after its body"
    );
}
