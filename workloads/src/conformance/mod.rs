//! The contract's conformance section: how a server treats HTTP/1.1 itself,
//! beyond our routes. Each row is one requirement of RFC 9112 (HTTP/1.1) or
//! RFC 9110 (HTTP Semantics), named by its section, and says what it
//! requires (MUST: a deviation fails; SHOULD: a deviation warns) and what
//! was found.
//!
//! The rows ask for `/hello` (every server here serves it), and the
//! body-framing rows of `bodies.rs` post to `/echo`. What a
//! benchmark origin may answer: a 404/405/501 for a route or method it does
//! not serve is fine (a `POST /hello` with a body may get 405, as long as
//! the body was framed right: the request pipelined after it is answered);
//! silence, or a 2xx to a malformed or ambiguous request, is not.
//!
//! A body-framing row hides a `GET /nope` where a server that frames the
//! body wrongly would read it as the next request: a 404 among the answers
//! is request smuggling, made visible.
//!
//! The rows are part of [`crate::contract::rows`] (one list), with
//! [`crate::contract::Row::conformance`] set; `harness verify` runs them
//! with `--conformance`.

mod bodies;
mod build;
pub mod probe;

pub use probe::{Conformance, End, Group, Probe, Requirement, Section, Seen};

use crate::contract::row::Row;
use build::*;

/// The conformance section, in the order of its groups (the body-framing
/// rows of `POST /echo`, `bodies.rs`, among the bodies).
pub fn rows() -> Vec<Row> {
    let mut rows = own_rows();
    rows.extend(bodies::rows());
    // Stable: each group's rows keep their order.
    rows.sort_by_key(|r| r.conformance.map(|c| c.group));
    rows
}

fn own_rows() -> Vec<Row> {
    use Group::*;
    use Requirement::*;
    let s2_2 = section(9112, "2.2", "Message Parsing");
    let s3 = section(9112, "3", "Request Line");
    let s3_2 = section(9112, "3.2", "Request Target");
    let s5_1 = section(9112, "5.1", "Field Line Parsing");
    let s6_1 = section(9112, "6.1", "Transfer-Encoding");
    let s6_3 = section(9112, "6.3", "Message Body Length");
    let s7_1 = section(9112, "7.1", "Chunked Transfer Coding");
    let s9_6 = section(9112, "9.6", "Tear-down");
    let methods = section(9110, "9.1", "Methods: Overview");
    // Statuses a chunked body may not be refused with: chunked MUST be
    // decoded (§7.1); a refusal of the body (411, §6.3), of the coding by
    // a server that does not implement it (501, §6.1) or of its size (413),
    // then the close, declines it rather than misframes it.
    const NOT_FOR_CHUNKED: &[u16] = &[400];
    let hidden_len = HIDDEN.len();

    vec![
        // --- request line -------------------------------------------------
        row(RequestLine, s2_2, Should, true,
            "empty line before the request line → ignored, answered",
            "robustness: a server SHOULD ignore at least one CRLF before the request line (left over from a client's previous body)",
            one(format!("\r\n{}", hello_with("")), Seen::first_is_hello, "200 Hello World")),
        row(RequestLine, methods, Should, true,
            "lowercase method (get) → not served as GET",
            "methods are case-sensitive tokens: `get` is an unknown method (501 or 405), never GET",
            one(format!("get /hello HTTP/1.1\r\n{HOST}\r\n"), |s| s.first_is(&[400, 404, 405, 501]), "405 or 501 (an unknown method)")),
        row(RequestLine, methods, Should, true,
            "unknown method token (PURGE) → 501 or 405",
            "a method the origin does not implement SHOULD get 501 (405 if it knows it but not here)",
            one(format!("PURGE /hello HTTP/1.1\r\n{HOST}\r\n"), |s| s.first_is(&[405, 501]), "501 or 405")),
        row(RequestLine, s3, Should, false,
            "method with a non-token character → 400, closed",
            "an invalid request line SHOULD get 400 and the connection closed (§2.2), not a guess",
            closing(format!("GE(T /hello HTTP/1.1\r\n{HOST}\r\n"), 1, |s| s.refused_and_closed(&[400]), "400, then close")),
        row(RequestLine, s3, Should, false,
            "space inside the request target → 400",
            "no whitespace is allowed in the target (§3.2): 400 (or a 301), never an autocorrected answer",
            one(format!("GET /hel lo HTTP/1.1\r\n{HOST}\r\n"), |s| s.first_is(&[400, 301]), "400")),
        row(RequestLine, section(9112, "3.2.4", "asterisk-form"), Should, false,
            "asterisk-form target with GET (GET *) → 400",
            "`*` is a target for a server-wide OPTIONS only: another method with it is an invalid request line, which SHOULD get 400 (§3)",
            one(format!("GET * HTTP/1.1\r\n{HOST}\r\n"), |s| s.first_is(&[400]), "400")),
        row(RequestLine, s3_2, Should, false,
            "raw byte above 0x7F in the request target → 400",
            "a target is a URI, ASCII by definition (RFC 3986 §2: other octets are percent-encoded): an invalid request line SHOULD get 400 (§3); a proxy and an origin may decode it differently",
            one(b"GET /hello\xff HTTP/1.1\r\nHost: verify\r\n\r\n".to_vec(), |s| s.first_is(&[400]), "400")),
        row(RequestLine, section(9112, "3.2.2", "absolute-form"), Must, true,
            "absolute-form target (http://verify/hello) → served",
            "a server MUST accept the absolute-form, the target a client sends to a proxy",
            one(format!("GET http://verify/hello HTTP/1.1\r\n{HOST}\r\n"), Seen::first_is_hello, "200 Hello World")),
        row(RequestLine, section(9110, "2.5", "Protocol Version"), Should, true,
            "higher minor version (HTTP/1.2) → served as HTTP/1.1",
            "a recipient SHOULD process a higher minor version as the highest it implements",
            one(format!("GET /hello HTTP/1.2\r\n{HOST}\r\n"), Seen::first_is_hello, "200 Hello World")),
        row(RequestLine, s3, Should, false,
            "HTTP/0.9 request line (no version) → 400",
            "HTTP/0.9 is not spoken any more: a request line without a version SHOULD get 400, not a bare body",
            one("GET /hello\r\n\r\n", |s| s.first_is(&[400, 505]), "400 (or 505)")),
        // --- header fields ------------------------------------------------
        row(HeaderFields, s5_1, Must, false,
            "whitespace between field name and colon → 400",
            "a server MUST reject it with 400: a proxy may read `Host :` otherwise than the origin",
            one(hello_with("X-Test : 1\r\n"), |s| s.first_is(&[400]), "400")),
        row(HeaderFields, section(9112, "5.2", "Obsolete Line Folding"), Must, true,
            "obs-fold in a header → 400, or unfolded and served",
            "a server MUST reject obs-fold with 400 or replace it with spaces, never drop the request",
            one(hello_with("X-Folded: a\r\n b\r\n"), |s| s.first_is(&[400]) || s.first_is_hello(), "400, or 200 Hello World")),
        row(HeaderFields, section(9110, "5.1", "Field Names"), Should, false,
            "field name with a non-token character → 400",
            "field names are tokens; a line that is not a field SHOULD get 400 (RFC 9112 §2.2)",
            one(hello_with("X(Bad): 1\r\n"), |s| s.first_is(&[400]), "400")),
        row(HeaderFields, s2_2, Must, false,
            "bare CR in a field value → 400, or replaced and served",
            "a recipient MUST treat a bare CR as invalid or replace it with SP: it splits lines differently elsewhere",
            one(hello_with("X-Test: a\rb\r\n"), |s| s.first_is(&[400]) || s.first_is_hello(), "400, or 200 Hello World")),
        row(HeaderFields, section(9110, "5.5", "Field Values"), Must, false,
            "NUL in a field value → 400, or replaced and served",
            "a recipient MUST reject CR, LF or NUL in a value, or replace each with SP",
            one(hello_with("X-Test: a\0b\r\n"), |s| s.first_is(&[400]) || s.first_is_hello(), "400, or 200 Hello World")),
        row(HeaderFields, s3_2, Must, false,
            "HTTP/1.1 request without Host → 400",
            "a server MUST answer 400 to an HTTP/1.1 request that lacks Host",
            one("GET /hello HTTP/1.1\r\n\r\n", |s| s.first_is(&[400]), "400")),
        row(HeaderFields, s3_2, Must, false,
            "two Host fields → 400",
            "a server MUST answer 400 to a request with more than one Host: which one routes it is ambiguous",
            one("GET /hello HTTP/1.1\r\nHost: verify\r\nHost: other\r\n\r\n", |s| s.first_is(&[400]), "400")),
        row(HeaderFields, s3_2, Must, false,
            "Host with an invalid value (a space) → 400",
            "a server MUST answer 400 to a Host field with an invalid value",
            one("GET /hello HTTP/1.1\r\nHost: ver ify\r\n\r\n", |s| s.first_is(&[400]), "400")),
        row(HeaderFields, s3_2, Must, false,
            "Host with an empty value → 400",
            "an `http` URI with an empty host is invalid (RFC 9110 §4.2.1, §7.2): a server MUST answer 400 to a Host with an invalid value",
            one("GET /hello HTTP/1.1\r\nHost:\r\n\r\n", |s| s.first_is(&[400]), "400")),
        row(HeaderFields, s3_2, Should, true,
            "Host with an underscore (a valid reg-name) → served",
            "`_` is unreserved in a URI host (RFC 3986 §3.2.2): a valid Host is served, not refused",
            one("GET /hello HTTP/1.1\r\nHost: my_host\r\n\r\n", Seen::first_is_hello, "200 Hello World")),
        row(HeaderFields, s6_3, Must, true,
            "two equal Content-Length fields → one body, or 400",
            "equal values MAY be read as one (or refused); either way the body is framed by that length",
            many(post_then_hello(&format!("Content-Length: {hidden_len}\r\nContent-Length: {hidden_len}\r\n"), HIDDEN),
                2, |s| s.framed(&[]), "the body framed by its length (the next request answered), or 400")),
        row(HeaderFields, s6_3, Must, false,
            "two different Content-Length values → 400, closed",
            "conflicting lengths are an unrecoverable framing error: a server MUST answer 400 and close (smuggling)",
            many(post_then_hello(&format!("Content-Length: 1\r\nContent-Length: {hidden_len}\r\n"), HIDDEN),
                2, |s| s.refused_and_closed(&[400]), "400, then close")),
        row(HeaderFields, s6_3, Must, false,
            "Content-Length not a plain number (+N) → 400, closed",
            "Content-Length is 1*DIGIT: any other value is a framing error, 400 and close (a `+` is read by some parsers, not by others)",
            many(post_then_hello(&format!("Content-Length: +{hidden_len}\r\n"), HIDDEN),
                2, |s| s.refused_and_closed(&[400]), "400, then close")),
        row(HeaderFields, s6_1, Must, false,
            "Content-Length with Transfer-Encoding → one answer, closed",
            "a server MAY reject it or frame by Transfer-Encoding alone, and MUST close the connection after answering (smuggling)",
            many(format!("POST /hello HTTP/1.1\r\n{HOST}Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{HIDDEN}", 5 + hidden_len),
                2, |s| s.answers.len() == 1 && s.closed(), "one answer (400 preferred), then close")),
        row(HeaderFields, s6_3, Must, false,
            "chunked not the last transfer coding → 400, closed",
            "a request body's length cannot be known: a server MUST answer 400 and close (a 501 for the coding, §6.1, refuses as well)",
            many(post_then_hello("Transfer-Encoding: chunked, gzip\r\n", &format!("0\r\n\r\n{HIDDEN}")),
                2, |s| s.refused_and_closed(&[400, 501]), "400, then close")),
        row(HeaderFields, s6_1, Should, false,
            "unknown transfer coding (foo, chunked) → 501",
            "a server SHOULD answer 501 to a transfer coding it does not understand",
            one(post_then_hello("Transfer-Encoding: foo, chunked\r\n", "0\r\n\r\n"), |s| s.first_is(&[501]), "501")),
        row(HeaderFields, s6_1, Must, false,
            "Transfer-Encoding in an HTTP/1.0 request → closed after the answer",
            "an HTTP/1.0 message with Transfer-Encoding MUST be treated as faulty framing and the connection closed",
            closing(format!("POST /hello HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{HIDDEN}"),
                2, Seen::closed_without_smuggling, "one answer, then close (the request hidden after it never answered)")),
        // --- bodies -------------------------------------------------------
        row(Bodies, s6_3, Must, true,
            "body framed by Content-Length → next request answered",
            "the body is exactly Content-Length octets: what follows is the next request, what is inside is not",
            many(post_then_hello(&format!("Content-Length: {hidden_len}\r\n"), HIDDEN),
                2, |s| s.framed(&[]), "the next request answered 200 Hello World")),
        row(Bodies, s7_1, Must, true,
            "chunked body (upper-case hex size) → decoded, next request answered",
            "recipients MUST decode chunked (or refuse a body without Content-Length with 411, §6.3)",
            many(chunked_hidden(&format!("{hidden_len:X}"), ""),
                2, |s| s.framed(NOT_FOR_CHUNKED), "the next request answered 200 Hello World, or 411 or 501 and close")),
        row(Bodies, section(9112, "7.1.1", "Chunk Extensions"), Must, true,
            "chunk extension → ignored, next request answered",
            "a recipient MUST ignore unrecognised chunk extensions",
            many(chunked_hidden(&format!("{hidden_len:x};name=value"), ""),
                2, |s| s.framed(NOT_FOR_CHUNKED), "the next request answered 200 Hello World, or 411 or 501 and close")),
        row(Bodies, section(9112, "7.1.2", "Chunked Trailer Section"), Must, true,
            "trailer field after the last chunk → next request answered",
            "the trailer section is part of the chunked body: it ends at its empty line",
            many(chunked_hidden(&format!("{hidden_len:x}"), "X-Trailer: 1\r\n"),
                2, |s| s.framed(NOT_FOR_CHUNKED), "the next request answered 200 Hello World, or 411 or 501 and close")),
        row(Bodies, s7_1, Should, false,
            "chunk size line ended by a bare LF → refused, closed",
            "chunk lines end in CRLF (the bare-LF leniency of §2.2 is for the head): parsers that differ here smuggle",
            closing(post_then_hello("Transfer-Encoding: chunked\r\n", &format!("{hidden_len:x}\n{HIDDEN}\r\n0\r\n\r\n")),
                2, Seen::refused_without_smuggling, "a 400, then close (the body never served)")),
        row(Bodies, s7_1, Must, false,
            "chunk size that overflows 64 bits → 4xx, closed",
            "recipients MUST guard against integer overflow in chunk sizes: a wrapped size smuggles",
            closing(chunked_hidden(&format!("1{hidden_len:016x}"), ""),
                2, Seen::refused_without_smuggling, "a 4xx (400), then close (the body never served)")),
        // --- connections --------------------------------------------------
        row(Connections, section(9112, "9.3.2", "Pipelining"), Must, true,
            "three pipelined requests → answered in order",
            "a server MUST send the answers to pipelined requests in the order received",
            many(format!("{FOLLOW}GET /nope HTTP/1.1\r\n{HOST}\r\n{FOLLOW}"), 3,
                |s| s.answers.iter().map(|r| r.status).eq([200, 404, 200]), "200, 404, 200")),
        row(Connections, s9_6, Must, true,
            "Connection: close → answered, then closed",
            "a server MUST close the connection after answering a request with the close option",
            closing(hello_with("Connection: close\r\n"), 1, |s| s.first_is_hello() && s.closed(), "200 Hello World, then close")),
        row(Connections, s9_6, Must, true,
            "request pipelined after Connection: close → not processed",
            "a server MUST NOT process any further request received on a connection it is closing",
            many(format!("{}GET /nope HTTP/1.1\r\n{HOST}\r\n", hello_with("Connection: close\r\n")), 2,
                |s| s.answers.len() == 1 && s.first_is_hello() && s.closed(), "200 Hello World only, then close")),
        row(Connections, s9_6, Should, true,
            "Connection: close → the answer says close",
            "a server SHOULD send the close option in its final answer",
            one(hello_with("Connection: close\r\n"),
                |s| s.answers.first().and_then(|r| r.header("connection")).is_some_and(|v| v.to_ascii_lowercase().contains("close")),
                "Connection: close in the answer")),
        row(Connections, section(9112, "9.3", "Persistence"), Should, true,
            "HTTP/1.0 without keep-alive → answered, then closed",
            "an HTTP/1.0 connection without keep-alive closes after the answer; clients reading to the close wait otherwise",
            closing("GET /hello HTTP/1.0\r\n\r\n", 1, |s| s.first_is_hello() && s.closed(), "200 Hello World, then close")),
        row(Connections, section(9110, "7.8", "Upgrade"), Must, true,
            "Upgrade: h2c → ignored (answered) or 101",
            "a server MAY ignore Upgrade and answer as if it were absent, or switch with 101: never neither",
            one(hello_with("Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"),
                |s| s.first_is_hello() || s.first_is(&[101]), "200 Hello World, or 101")),
        row(Connections, section(9110, "7.8", "Upgrade"), Must, true,
            "Upgrade in an HTTP/1.0 request → ignored",
            "a server MUST ignore Upgrade in an HTTP/1.0 request",
            one("GET /hello HTTP/1.0\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", Seen::first_is_hello, "200 Hello World")),
        row(Connections, section(9110, "9.3.6", "CONNECT"), Should, true,
            "CONNECT to an origin → 501 or 405",
            "an origin that is not a proxy does not implement CONNECT: 501 (SHOULD, §9.1), or 405; never served as a GET of its authority, never silent",
            one("CONNECT verify:443 HTTP/1.1\r\nHost: verify:443\r\n\r\n", |s| s.first_is(&[405, 501]), "501 or 405")),
        row(Connections, section(9293, "3.6", "Closing a Connection"), Should, true,
            "request then half-close (FIN) → still answered",
            "a TCP half-close ends the client's sending only: it may still receive (nc -N, some scripts and proxies do this)",
            Probe { raw: hello_with("").into_bytes(), half_close: true, answers: 1, needs_close: false,
                    judge: Seen::first_is_hello, expected: "200 Hello World" }),
    ]
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::probe::RawResponse;

    fn resp(status: u16, body: &str) -> RawResponse {
        RawResponse {
            status,
            version: 1,
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
        }
    }

    fn seen(answers: Vec<RawResponse>, end: End) -> Seen {
        Seen {
            answers,
            end,
            waited: Duration::from_secs(2),
        }
    }

    #[test]
    fn framing_is_judged_by_the_request_that_follows() {
        let hello = || resp(200, "Hello World");
        assert!(seen(vec![resp(405, "no"), hello()], End::NotChecked).framed(&[]));
        // The hidden /nope answered: smuggled.
        assert!(!seen(vec![resp(405, "no"), resp(404, "no")], End::NotChecked).framed(&[]));
        assert!(seen(vec![resp(411, "len")], End::Closed).framed(&[400]));
        assert!(!seen(vec![resp(400, "bad")], End::Closed).framed(&[400]));
        assert!(!seen(vec![resp(405, "no")], End::Silent).framed(&[]));
        assert!(!seen(vec![], End::Closed).framed(&[]));
    }

    #[test]
    fn smuggling_is_told_from_a_refusal() {
        let closed = |statuses: &[u16]| {
            seen(
                statuses.iter().map(|&s| resp(s, "x")).collect(),
                End::Closed,
            )
        };
        assert!(
            closed(&[405, 400]).refused_without_smuggling(),
            "answered, then refused the body"
        );
        assert!(closed(&[400]).refused_without_smuggling());
        assert!(
            !closed(&[405, 404]).closed_without_smuggling(),
            "the hidden request answered"
        );
        assert!(
            !closed(&[405, 200]).closed_without_smuggling(),
            "the next request served"
        );
        assert!(closed(&[200]).closed_without_smuggling());
        assert!(!closed(&[200]).refused_without_smuggling());
        let open = seen(vec![resp(400, "x")], End::Open);
        assert!(!open.refused_without_smuggling(), "left open");
    }

    #[test]
    fn describes_what_came() {
        let s = seen(vec![resp(200, "Hello World"), resp(404, "x")], End::Closed);
        assert_eq!(s.describe(), "200 \"Hello World\", 404, then closed");
        assert_eq!(seen(vec![], End::Silent).describe(), "no answer within 2s");
        assert_eq!(
            seen(vec![], End::Closed).describe(),
            "no answer, then closed"
        );
    }

    #[test]
    fn every_group_has_rows_and_sections_are_cited() {
        let rows = rows();
        for g in Group::ALL {
            assert!(
                rows.iter()
                    .any(|r| r.conformance.is_some_and(|c| c.group == g)),
                "{g:?}"
            );
        }
        for r in &rows {
            let c = r.conformance.expect("a conformance row");
            assert!(matches!(c.section.rfc, 9110 | 9112 | 9293), "{}", r.name);
            assert!(c
                .section
                .number
                .chars()
                .all(|ch| ch.is_ascii_digit() || ch == '.'));
        }
        assert!(rows
            .iter()
            .any(|r| r.conformance.unwrap().requirement == Requirement::Must));
        assert!(rows
            .iter()
            .any(|r| r.conformance.unwrap().requirement == Requirement::Should));
    }

    #[test]
    fn section_prints_as_cited() {
        let s = section(9112, "6.3", "Message Body Length");
        assert_eq!(s.to_string(), "RFC 9112 §6.3 (Message Body Length)");
    }
}
