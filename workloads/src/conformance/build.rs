//! What the conformance rows are built from: a row, its section, the
//! probes that send one request or several, and the requests they share.

use super::probe::{Conformance, Group, Probe, Requirement, Section, Seen};
use crate::contract::row::{Exchange, Row};

pub(crate) const HOST: &str = "Host: verify\r\n";
/// The request pipelined after a body: answered `200 Hello World` if the
/// body was framed right.
pub(super) const FOLLOW: &str = "GET /hello HTTP/1.1\r\nHost: verify\r\n\r\n";
/// Hidden in a body: answered (404) only by a server that misframes it.
pub(crate) const HIDDEN: &str = "GET /nope HTTP/1.1\r\nHost: verify\r\n\r\n";

pub(crate) fn section(rfc: u16, number: &'static str, title: &'static str) -> Section {
    Section { rfc, number, title }
}

/// One conformance row.
pub(crate) fn row(
    group: Group,
    section: Section,
    requirement: Requirement,
    well_formed: bool,
    name: &str,
    why: &'static str,
    probe: Probe,
) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Conformance(probe),
        conformance: Some(Conformance {
            group,
            section,
            requirement,
            well_formed,
        }),
    }
}

/// A probe read for one answer, the close not looked at.
pub(super) fn one(
    raw: impl Into<Vec<u8>>,
    judge: fn(&Seen) -> bool,
    expected: &'static str,
) -> Probe {
    many(raw, 1, judge, expected)
}

/// A probe read for up to `answers` answers, each within the timeout (a
/// conforming server that answers fewer closes, which ends the reading).
pub(crate) fn many(
    raw: impl Into<Vec<u8>>,
    answers: usize,
    judge: fn(&Seen) -> bool,
    expected: &'static str,
) -> Probe {
    Probe {
        raw: raw.into(),
        half_close: false,
        answers,
        needs_close: false,
        judge,
        expected,
    }
}

/// A probe whose judge needs the close after its last answer: up to
/// `answers` answers, then whether the server closed (a server that
/// answers fewer is read to its close or its silence anyway).
pub(crate) fn closing(
    raw: impl Into<Vec<u8>>,
    answers: usize,
    judge: fn(&Seen) -> bool,
    expected: &'static str,
) -> Probe {
    Probe {
        needs_close: true,
        ..many(raw, answers, judge, expected)
    }
}

/// `GET /hello HTTP/1.1` with these extra header lines (each ending in CRLF).
pub(super) fn hello_with(headers: &str) -> String {
    format!("GET /hello HTTP/1.1\r\n{HOST}{headers}\r\n")
}

/// `POST /hello` with these framing headers and body, then [`FOLLOW`].
pub(super) fn post_then_hello(framing: &str, body: &str) -> String {
    format!("POST /hello HTTP/1.1\r\n{HOST}{framing}\r\n{body}{FOLLOW}")
}

/// A chunked body whose only chunk is [`HIDDEN`], then [`FOLLOW`].
pub(super) fn chunked_hidden(size_line: &str, after_last: &str) -> String {
    post_then_hello(
        "Transfer-Encoding: chunked\r\n",
        &format!("{size_line}\r\n{HIDDEN}\r\n0\r\n{after_last}\r\n"),
    )
}
