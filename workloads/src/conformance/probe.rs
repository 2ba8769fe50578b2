//! A conformance row's record (its section, requirement and group) and its
//! probe: the bytes sent, what came back ([`Seen`]) and how that is judged.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::contract::error::RowError;
use crate::probe::{Conn, RawResponse};

/// Where a requirement is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// 9112 (HTTP/1.1), 9110 (HTTP Semantics) or 9293 (TCP).
    pub rfc: u16,
    /// `6.3`.
    pub number: &'static str,
    /// `Message Body Length`.
    pub title: &'static str,
}

impl fmt::Display for Section {
    /// `RFC 9112 §6.3 (Message Body Length)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RFC {} §{} ({})", self.rfc, self.number, self.title)
    }
}

/// How strongly the RFC asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// MUST / MUST NOT (or the only reading the grammar allows): a deviation fails.
    Must,
    /// SHOULD / RECOMMENDED: a deviation warns.
    Should,
}

impl Requirement {
    pub fn name(self) -> &'static str {
        match self {
            Requirement::Must => "MUST",
            Requirement::Should => "SHOULD",
        }
    }
}

/// The groups of the section, in the order they are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    RequestLine,
    HeaderFields,
    Bodies,
    Connections,
}

impl Group {
    pub const ALL: [Group; 4] = [
        Group::RequestLine,
        Group::HeaderFields,
        Group::Bodies,
        Group::Connections,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::RequestLine => "request line",
            Group::HeaderFields => "header fields",
            Group::Bodies => "bodies",
            Group::Connections => "connections",
        }
    }
}

/// What makes a row a conformance row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conformance {
    pub group: Group,
    pub section: Section,
    pub requirement: Requirement,
    /// The request is valid HTTP/1.1 (or valid obsolete syntax a server
    /// must handle): whatever else, it must get an answer, never a silent
    /// close.
    pub well_formed: bool,
}

/// What a conformance row sends and how it judges what came back.
#[derive(Clone, Debug)]
pub struct Probe {
    /// Written at once on a fresh connection.
    pub raw: Vec<u8>,
    /// Then the client shuts down its sending side (a half-close).
    pub half_close: bool,
    /// The most answers a conforming server sends (more are read as a deviation).
    pub answers: usize,
    /// The judge needs to know whether the server closed after its answers.
    pub needs_close: bool,
    /// Whether what was seen meets the requirement.
    pub judge: fn(&Seen) -> bool,
    /// What a conforming server does, in a few words (printed with a deviation).
    pub expected: &'static str,
}

/// How the exchange ended, after the answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// The server closed (or reset) the connection.
    Closed,
    /// Still open, nothing more within the wait.
    Open,
    /// No (further) complete answer within the row's timeout.
    Silent,
    /// Bytes that are not an HTTP response.
    NotHttp(String),
    /// All the answers came and the close did not matter.
    NotChecked,
}

/// What a server did with a probe.
#[derive(Clone, Debug)]
pub struct Seen {
    pub answers: Vec<RawResponse>,
    pub end: End,
    /// The row's timeout, for saying how long silence lasted.
    pub waited: Duration,
}

impl Seen {
    /// Exactly one answer, with one of these statuses, then the close.
    pub fn refused_and_closed(&self, statuses: &[u16]) -> bool {
        self.answers.len() == 1 && statuses.contains(&self.answers[0].status) && self.closed()
    }

    /// Answered, and nothing in or after the body served: the first answer
    /// (the request itself, or its refusal), then at most an error answer
    /// for the rest of the bytes (never the hidden 404, never a 2xx for the
    /// request that follows), then the close.
    pub fn closed_without_smuggling(&self) -> bool {
        let later_errors = self
            .answers
            .iter()
            .skip(1)
            .all(|r| r.status >= 400 && r.status != 404);
        matches!(self.answers.len(), 1 | 2) && later_errors && self.closed()
    }

    /// As [`Seen::closed_without_smuggling`], and refused: some answer is a 4xx or 5xx.
    pub fn refused_without_smuggling(&self) -> bool {
        self.closed_without_smuggling() && self.answers.iter().any(|r| r.status >= 400)
    }

    /// The first answer has one of these statuses (whatever followed).
    pub fn first_is(&self, statuses: &[u16]) -> bool {
        self.answers
            .first()
            .is_some_and(|r| statuses.contains(&r.status))
    }

    /// The first answer is `200 Hello World`.
    pub fn first_is_hello(&self) -> bool {
        self.answers.first().is_some_and(is_hello)
    }

    pub fn closed(&self) -> bool {
        self.end == End::Closed
    }

    /// The body was framed right: the request pipelined after it got
    /// `200 Hello World` and nothing hidden in the body was answered, or
    /// the server answered once (not with a status in `refusals_not_allowed`)
    /// and closed, which leaves nothing to misread.
    pub(super) fn framed(&self, refusals_not_allowed: &[u16]) -> bool {
        match self.answers.as_slice() {
            [_, second] => is_hello(second),
            [only] => self.closed() && !refusals_not_allowed.contains(&only.status),
            _ => false,
        }
    }

    /// One line: each answer's status (and a 2xx's body), then how it ended.
    pub fn describe(&self) -> String {
        let answers: Vec<String> = self.answers.iter().map(short).collect();
        let mut out = if answers.is_empty() {
            "no answer".to_string()
        } else {
            answers.join(", ")
        };
        match &self.end {
            End::Closed => out.push_str(", then closed"),
            End::Open => out.push_str(", connection left open"),
            End::Silent if self.answers.is_empty() => {
                out.push_str(&format!(" within {:?}", self.waited))
            }
            End::Silent => out.push_str(&format!(", then nothing within {:?}", self.waited)),
            End::NotHttp(what) => out.push_str(&format!(", then bytes that are not HTTP: {what}")),
            End::NotChecked => {}
        }
        out
    }
}

fn is_hello(r: &RawResponse) -> bool {
    r.status == 200 && r.body == b"Hello World"
}

/// `404`, or `200 "Hello World"` for a 2xx.
fn short(r: &RawResponse) -> String {
    if (200..300).contains(&r.status) {
        let body = r.body_str();
        let body: String = body.chars().take(40).collect();
        format!("{} {body:?}", r.status)
    } else {
        r.status.to_string()
    }
}

/// How long the judge waits for a close it needs to see.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

impl Probe {
    /// Sends the probe and collects the answers (at most `answers`, each
    /// within `timeout`), then, where it matters, whether the server closed.
    pub fn run(&self, addr: SocketAddr, timeout: Duration) -> Result<Seen, RowError> {
        let mut c = Conn::connect_within(addr, timeout, timeout).map_err(RowError::Connect)?;
        c.send(&self.raw).map_err(RowError::Send)?;
        if self.half_close {
            c.shutdown_write().map_err(RowError::Send)?;
        }
        let mut seen = Seen {
            answers: Vec::new(),
            end: End::NotChecked,
            waited: timeout,
        };
        for _ in 0..self.answers {
            match c.read_response(false) {
                Ok(r) => seen.answers.push(r),
                Err(e) => {
                    seen.end = match e.kind() {
                        io::ErrorKind::TimedOut => End::Silent,
                        io::ErrorKind::InvalidData => End::NotHttp(e.to_string()),
                        _ => End::Closed,
                    };
                    return Ok(seen);
                }
            }
        }
        if self.needs_close {
            seen.end = if c.is_closed(CLOSE_WAIT.min(timeout)) {
                End::Closed
            } else {
                End::Open
            };
        }
        Ok(seen)
    }
}
