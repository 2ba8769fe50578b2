//! The conformance section's body-framing rows on a route that reads its
//! body (`POST /echo`, [`crate::echo`]): RFC 9112 §6 and §7.1 on
//! Content-Length against Transfer-Encoding, repeated Content-Length,
//! malformed chunk-size lines, and chunk extensions and trailer sections
//! that break §7.1.1's and §7.1.2's grammar (the lines request-smuggling
//! scanners send: a proxy and an origin that parse them differently
//! disagree on where the body ends). Where the rows of [`crate::conformance`]
//! post to `/hello` (which may refuse a body unread), these are answered
//! by a route that echoes what it framed, so a wrong framing shows in the
//! echo itself; each hides a `GET /nope` that only a misframing server
//! answers (404: request smuggling, made visible).
//!
//! A server that does not serve `/echo` (nginx-static) is judged by the
//! same rules: its refusal must still come first and the connection close.

use super::build::{closing, many, row, section, HIDDEN, HOST};
use super::probe::{Group, Requirement, Seen};
use crate::contract::row::Row;

/// The first answer is a 4xx (or the 501 of a server that declines every
/// chunked body, RFC 9112 §6.1), nothing in or after the body was served
/// (at most an error answer more), and the connection closed.
fn refused_first(s: &Seen) -> bool {
    s.answers
        .first()
        .is_some_and(|r| (400..500).contains(&r.status) || r.status == 501)
        && s.closed_without_smuggling()
}

/// Exactly one answer, a 400, then the close: a chunk line the grammar
/// refuses is refused, and nothing in or after the body answered. A server
/// that declines every chunked body (411, RFC 9112 §6.3; 501, §6.1) and
/// closes reads no chunk line at all, which misframes nothing either.
fn only_400(s: &Seen) -> bool {
    s.refused_and_closed(&[400, 411, 501])
}

/// The bare LF read as the end of the trailer section (RFC 9112 §2.2
/// lets a recipient): the body echoed (or `/echo` not served: 404, 405),
/// then the request after it answered.
fn trailer_read_as_ended(s: &Seen) -> bool {
    match s.answers.as_slice() {
        [first, second] => {
            (is_echo(s, 0, b"hello") || matches!(first.status, 404 | 405))
                && second.status == 200
                && second.body == b"Hello World"
        }
        _ => false,
    }
}

/// What [`only_400`] expects, as printed with a deviation.
const REFUSED: &str =
    "400, then close (nothing else answered; 411 or 501 from a server that declines chunked)";

fn is_echo(s: &Seen, i: usize, body: &[u8]) -> bool {
    s.answers
        .get(i)
        .is_some_and(|r| r.status == 200 && r.body == body)
}

/// `POST /echo` with these framing header lines and raw body.
fn echo(framing: &str, body: &str) -> String {
    format!("POST /echo HTTP/1.1\r\n{HOST}{framing}\r\n{body}")
}

/// A chunked `POST /echo` whose first chunk-size line is `size_line` and
/// whose data is the hidden request.
fn chunked(size_line: &str) -> String {
    echo(
        "Transfer-Encoding: chunked\r\n",
        &format!("{size_line}\r\n{HIDDEN}\r\n0\r\n\r\n"),
    )
}

pub(crate) fn rows() -> Vec<Row> {
    use Group::Bodies;
    use Requirement::Must;
    let s6_1 = section(9112, "6.1", "Transfer-Encoding");
    let s6_3 = section(9112, "6.3", "Message Body Length");
    let s7_1 = section(9112, "7.1", "Chunked Transfer Coding");
    let s7_1_1 = section(9112, "7.1.1", "Chunk Extensions");
    let s7_1_2 = section(9112, "7.1.2", "Chunked Trailer Section");
    let chunked_hello = "5\r\nhello\r\n0\r\n\r\n";
    let hidden_len = HIDDEN.len();
    vec![
        row(Bodies, s6_1, Must, false,
            "/echo: Content-Length with Transfer-Encoding → 400 or the chunked body, closed",
            "Transfer-Encoding overrides Content-Length; a server MAY refuse, and MUST close after answering: the echo shows which framing won",
            closing(echo(&format!("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", chunked_hello.len() + hidden_len),
                    &format!("{chunked_hello}{HIDDEN}")),
                2, |s| s.answers.len() == 1 && (s.first_is(&[400]) || is_echo(s, 0, b"hello")) && s.closed(),
                "400 (or 200 \"hello\"), then close")),
        row(Bodies, s6_3, Must, false,
            "/echo: two different Content-Length values → 400, closed",
            "conflicting lengths are an unrecoverable framing error: 400 and close, never a body of either length",
            closing(echo(&format!("Content-Length: 5\r\nContent-Length: {}\r\n", 5 + hidden_len), &format!("hello{HIDDEN}")),
                2, |s| s.refused_and_closed(&[400]), "400, then close")),
        row(Bodies, s6_3, Must, true,
            "/echo: two equal Content-Length values → echoed once, or 400",
            "equal values MAY be read as one (or refused); either way the body is that length and what follows the next request",
            many(format!("{}GET /hello HTTP/1.1\r\n{HOST}\r\n", echo("Content-Length: 5\r\nContent-Length: 5\r\n", "hello")),
                2, |s| (is_echo(s, 0, b"hello") && s.answers.get(1).is_some_and(|r| r.status == 200 && r.body == b"Hello World"))
                    || s.refused_and_closed(&[400]),
                "200 \"hello\" then 200 Hello World, or 400 and close")),
        row(Bodies, s7_1, Must, false,
            "/echo: chunk size not hex (zz) → 4xx, closed",
            "chunk-size is 1*HEXDIG: a parser that reads `zz` as 0 ends the body early and serves its data as a request",
            closing(chunked("zz"), 2, refused_first, "a 4xx (400), then close (the chunk's data never served)")),
        row(Bodies, s7_1, Must, false,
            "/echo: chunk size with a 0x prefix → 4xx, closed",
            "chunk-size is bare hex: `0x26` read by strtol-like parsers as 0 or 38 differs between a proxy and an origin",
            closing(chunked(&format!("0x{hidden_len:x}")), 2, refused_first, "a 4xx (400), then close")),
        row(Bodies, s7_1, Must, false,
            "/echo: negative chunk size → 4xx, closed",
            "chunk-size has no sign: a signed parse wraps or reads backwards",
            closing(chunked(&format!("-{hidden_len:x}")), 2, refused_first, "a 4xx (400), then close")),
        row(Bodies, s7_1, Must, false,
            "/echo: empty chunk-size line → 4xx, closed",
            "a chunk starts with its size: an empty line is not a last chunk",
            closing(chunked(""), 2, refused_first, "a 4xx (400), then close")),
        row(Bodies, s7_1, Must, false,
            "/echo: chunk data longer than its size → 4xx, closed",
            "CRLF must follow exactly chunk-size octets: a parser that resyncs on the next CRLF frames otherwise than one that counts",
            closing(format!("{}GET /hello HTTP/1.1\r\n{HOST}\r\n", echo("Transfer-Encoding: chunked\r\n", "3\r\nhello\r\n0\r\n\r\n")),
                2, refused_first, "a 4xx (400), then close (the request after it never served)")),
        row(Bodies, s7_1_1, Must, false,
            "/echo: bare `;` after the chunk size → 400, closed",
            "chunk-ext is `BWS \";\" BWS chunk-ext-name ...`: a `;` with no name is no extension, and a parser that skips to the line end reads what a strict one refuses",
            closing(chunked(&format!("{hidden_len:x};")), 2, only_400, REFUSED)),
        row(Bodies, s7_1_1, Must, false,
            "/echo: chunk extension name not a token → 400, closed",
            "chunk-ext-name is a token: `n@me` is not one, and parsers that skip extensions unread disagree with those that parse them",
            closing(chunked(&format!("{hidden_len:x};n@me=v")), 2, only_400, REFUSED)),
        row(Bodies, s7_1_1, Must, false,
            "/echo: control character in a chunk extension → 400, closed",
            "a chunk-ext-val is a token or a quoted-string, neither of which holds a control character (here 0x01)",
            closing(chunked(&format!("{hidden_len:x};name=va\x01lue")), 2, only_400, REFUSED)),
        row(Bodies, s7_1, Must, false,
            "/echo: whitespace between chunk size and CRLF → 400, closed",
            "`chunk-size [ chunk-ext ] CRLF`: whitespace is allowed only before a `;` (BWS), not at the end of a size",
            closing(chunked(&format!("{hidden_len:x} ")), 2, only_400, REFUSED)),
        row(Bodies, s7_1_2, Must, false,
            "/echo: trailer section ended by a bare LF → 400 (or read as its end), never a wait",
            "the trailer section ends at its empty line (CRLF); a recipient MAY read a bare LF as a line end (§2.2) or refuse it, but it never waits for bytes that will not come",
            closing(format!("{}GET /hello HTTP/1.1\r\n{HOST}\r\n", echo("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\n")),
                2, |s| only_400(s) || trailer_read_as_ended(s),
                "400, then close; or 200 \"hello\" (404 where /echo is not served) and the next request answered")),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::probe::End;
    use super::*;
    use crate::probe::RawResponse;
    use std::time::Duration;

    fn resp(status: u16, body: &[u8]) -> RawResponse {
        RawResponse {
            status,
            version: 1,
            headers: Vec::new(),
            body: body.to_vec(),
        }
    }

    fn seen(answers: Vec<RawResponse>, end: End) -> Seen {
        Seen {
            answers,
            end,
            waited: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_refusal_comes_first_and_nothing_hidden_is_served() {
        assert!(refused_first(&seen(vec![resp(400, b"x")], End::Closed)));
        assert!(refused_first(&seen(
            vec![resp(405, b"x"), resp(400, b"x")],
            End::Closed
        )));
        assert!(!refused_first(&seen(vec![resp(400, b"x")], End::Open)));
        assert!(
            !refused_first(&seen(vec![resp(200, b""), resp(400, b"x")], End::Closed)),
            "an early end of the body echoed"
        );
        assert!(
            !refused_first(&seen(vec![resp(400, b"x"), resp(404, b"x")], End::Closed)),
            "the hidden request answered"
        );
    }

    #[test]
    fn a_bad_chunk_line_gets_one_refusal_then_the_close() {
        assert!(only_400(&seen(vec![resp(400, b"x")], End::Closed)));
        assert!(
            only_400(&seen(vec![resp(501, b"x")], End::Closed)),
            "chunked declined"
        );
        assert!(!only_400(&seen(vec![resp(400, b"x")], End::Open)));
        assert!(!only_400(&seen(vec![resp(200, b"")], End::Closed)));
        assert!(
            !only_400(&seen(vec![resp(400, b"x"), resp(400, b"x")], End::Closed)),
            "another answer on the connection"
        );
        assert!(refused_first(&seen(vec![resp(501, b"x")], End::Closed)));
        let hello = || resp(200, b"Hello World");
        assert!(trailer_read_as_ended(&seen(
            vec![resp(200, b"hello"), hello()],
            End::Open
        )));
        assert!(trailer_read_as_ended(&seen(
            vec![resp(404, b"x"), hello()],
            End::Open
        )));
        assert!(!trailer_read_as_ended(&seen(
            vec![resp(200, b"hel"), hello()],
            End::Open
        )));
        assert!(!trailer_read_as_ended(&seen(
            vec![resp(200, b"hello")],
            End::Silent
        )));
        assert!(!refused_first(&seen(vec![resp(500, b"x")], End::Closed)));
    }

    #[test]
    fn every_row_is_about_echo_bodies_and_unique() {
        let rows = rows();
        assert!(rows.len() >= 8);
        for r in &rows {
            assert!(r.name.starts_with("/echo: "), "{}", r.name);
            assert_eq!(r.conformance.unwrap().group, Group::Bodies);
        }
    }
}
