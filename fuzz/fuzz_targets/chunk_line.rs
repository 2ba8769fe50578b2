//! The chunk-line grammar of RFC 9112 §7.1.1 (`chunk-size [ chunk-ext ]`),
//! as the shared codec reads it (`server_common::http1::chunk_size`,
//! `scan_chunked`) and as event-loop's check in front of hyper reads it
//! (`server_common::chunks::ChunkedBody`).
//!
//! The input is a chunk-size line without its CRLF, then, after a NUL if
//! there is one, the rest of a chunked body (bytes that may or may not be
//! chunks and a trailer section).
//!
//! Invariants:
//! - `chunk_size` accepts the line exactly when a reference recognizer,
//!   written from the ABNF here, does (size bare hex, extensions `BWS ";"
//!   BWS token [ BWS "=" BWS ( token / quoted-string ) ]`), and its size is
//!   the hex value;
//! - on `line CRLF rest`, the codec and the streaming check agree: a body
//!   the codec accepts ends, for the check, at the same byte; one the codec
//!   refuses as malformed, the check refuses or still waits for a line end
//!   (the codec refuses a bare CR before its LF arrives); one the check
//!   refuses, the codec refuses or waits for data the check judged early;
//! - the check gives the same verdict in any reads (here: whole, and byte
//!   by byte).
#![no_main]

use libfuzzer_sys::fuzz_target;
use server_common::chunks::{ChunkedBody, Step};
use server_common::http1::{chunk_size, scan_chunked, ParseError};

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let (line, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let size = chunk_size(line);
    match (reference(line), size) {
        (Some(Some(n)), Ok(s)) => assert_eq!(n as usize, s, "{line:?}"),
        (Some(None), Err(ParseError::BodyTooLarge)) => {}
        (None, Err(ParseError::Malformed)) => {}
        (r, s) => panic!(
            "{:?}: reference {r:?}, codec {s:?}",
            String::from_utf8_lossy(line)
        ),
    }
    let mut body = line.to_vec();
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(rest);
    let codec = scan_chunked(&body, |_| {});
    let stream = streamed(&body, body.len());
    assert_eq!(stream, streamed(&body, 1), "whole and byte by byte");
    match (codec, stream) {
        (Err(ParseError::BodyTooLarge), _) | (_, Step::Unchecked) => {}
        (Ok(Some((wire, _))), Step::Ended(n)) => assert_eq!(wire, n),
        (Err(ParseError::Malformed), Step::Refused(_) | Step::More) => {}
        (Ok(None), Step::More | Step::Refused(_)) => {}
        (c, s) => panic!(
            "{:?}: codec {c:?}, stream {s:?}",
            String::from_utf8_lossy(&body)
        ),
    }
}

/// [`ChunkedBody`] over `body` in reads of `read` bytes: its verdict, an
/// index into `body`.
fn streamed(body: &[u8], read: usize) -> Step {
    let mut c = ChunkedBody::default();
    let mut at = 0;
    for piece in body.chunks(read.max(1)) {
        match c.feed(piece) {
            Step::More => at += piece.len(),
            Step::Ended(n) => return Step::Ended(at + n),
            Step::Refused(n) => return Step::Refused(at + n),
            Step::Unchecked => return Step::Unchecked,
        }
    }
    Step::More
}

/// The line by the ABNF: `None` not a chunk line, `Some(None)` a size over
/// 64 bits, `Some(Some(size))`.
fn reference(line: &[u8]) -> Option<Option<u64>> {
    let hex: Vec<u8> = line
        .iter()
        .copied()
        .take_while(u8::is_ascii_hexdigit)
        .collect();
    if hex.is_empty() {
        return None;
    }
    let mut p = Parser {
        s: &line[hex.len()..],
    };
    while !p.s.is_empty() {
        p.ows();
        p.eat(b';')?;
        p.ows();
        p.token()?;
        let before = p.s;
        p.ows();
        if p.eat(b'=').is_some() {
            p.ows();
            if p.s.first() == Some(&b'"') {
                p.quoted()?;
            } else {
                p.token()?;
            }
        } else {
            p.s = before;
        }
    }
    let digits = std::str::from_utf8(&hex).ok()?.trim_start_matches('0');
    if digits.len() > 16 {
        return Some(None);
    }
    Some(Some(if digits.is_empty() {
        0
    } else {
        u64::from_str_radix(digits, 16).ok()?
    }))
}

struct Parser<'a> {
    s: &'a [u8],
}

impl Parser<'_> {
    fn ows(&mut self) {
        while let [b' ' | b'\t', rest @ ..] = self.s {
            self.s = rest;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        let (&first, rest) = self.s.split_first()?;
        (first == c).then(|| self.s = rest)
    }

    fn token(&mut self) -> Option<()> {
        const TCHAR: &[u8] = b"!#$%&'*+-.^_`|~";
        let n = self
            .s
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || TCHAR.contains(c))
            .count();
        (n > 0).then(|| self.s = &self.s[n..])
    }

    /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`: qdtext is HTAB, SP,
    /// %x21, %x23-5B, %x5D-7E, obs-text; a quoted-pair `\` then HTAB, SP,
    /// VCHAR or obs-text.
    fn quoted(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let (&c, rest) = self.s.split_first()?;
            self.s = rest;
            match c {
                b'"' => return Some(()),
                b'\\' => {
                    let (&q, rest) = self.s.split_first()?;
                    if !(q == b'\t' || q == b' ' || (0x21..=0x7e).contains(&q) || q >= 0x80) {
                        return None;
                    }
                    self.s = rest;
                }
                b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..=0xff => {}
                _ => return None,
            }
        }
    }
}
