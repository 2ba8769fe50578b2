//! HTTP/1.1 (one request at a time, or pipelined): the streaming response
//! reader. The head is parsed in place with `httparse` (copied aside only
//! when it straddles two reads), the body is skipped by Content-Length or
//! chunk sizes without copying, and compared byte for byte with the
//! expected body as it streams past. A response is complete at its end;
//! what follows it is the next response's (pipelined) or unasked for.
//!
//! A server's heads repeat byte for byte (only `Date` moves, once a
//! second), so each thread keeps the last head it parsed and what it said
//! ([`HeadMemo`]): a head that starts with those exact bytes is that head,
//! read by one comparison instead of a parse (on `/hello` httparse was 40%
//! of the engine's user-space instructions per pipelined response). The
//! status, length and connection rules applied to it are the same; only
//! identical bytes are taken for the memo's, so nothing is judged less.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use crate::engine::Check;
use crate::stats::Failure;

/// Largest response head accepted before calling the response malformed.
const MAX_HEAD: usize = 64 * 1024;
/// Headers parsed per response (more is a malformed response).
const MAX_HEADERS: usize = 64;
/// Longest head kept in the memo (a longer one is parsed every time).
const MEMO_MAX: usize = 512;

/// What a final response head says about reading the response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    /// Content-Length, if given (and consistent).
    length: Option<u64>,
    /// The last transfer coding is chunked.
    chunked: bool,
    /// The connection closes after this response (by `Connection` and the
    /// version; a body delimited by the close is decided later).
    close: bool,
}

/// The last final head this thread parsed (from a head with no interim
/// response before it), its bytes up to and with the blank line, and what
/// they said.
struct HeadMemo {
    bytes: Vec<u8>,
    head: Head,
}

impl HeadMemo {
    /// The memo's head and length if `buf` starts with its exact bytes.
    #[inline]
    fn matches(&self, buf: &[u8]) -> Option<(Head, usize)> {
        let n = self.bytes.len();
        (n > 0 && buf.len() >= n && buf[..n] == self.bytes[..]).then_some((self.head, n))
    }

    fn keep(&mut self, bytes: &[u8], head: Head) {
        self.bytes.clear();
        self.bytes.extend_from_slice(bytes);
        self.head = head;
    }
}

thread_local! {
    static MEMO: RefCell<HeadMemo> = const {
        RefCell::new(HeadMemo {
            bytes: Vec::new(),
            head: Head { status: 0, length: None, chunked: false, close: false },
        })
    };
}

/// What a chunk of bytes did to the response being read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Feed {
    /// The response is not complete yet.
    More,
    /// The response is complete; `leftover` bytes of the input follow it.
    Done { leftover: usize },
    /// The response is broken; the connection cannot be reused.
    Fail(Failure),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size; `ext` once a `;` extension (or space) started.
    Size {
        size: u64,
        digits: u8,
        ext: bool,
    },
    SizeLf {
        size: u64,
    },
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk: at the start of a trailer line.
    TrailerStart,
    /// Inside a trailer field line.
    TrailerLine,
    /// The `\r` of the final empty line was read.
    EndLf,
}

/// The reader of one response at a time on one connection.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    phase: Phase,
    /// A response head split across reads, kept until it is complete.
    carry: Vec<u8>,
    /// The request was HEAD: no body follows the head.
    head_request: bool,
    /// Status of the response being read (0 before its head).
    pub status: u16,
    /// The connection closes after this response.
    pub close: bool,
    /// Body bytes seen so far.
    pub body_len: u64,
    /// The first way this response failed its check, if any.
    pub verdict: Option<Failure>,
    /// The `Server` header of this response is wanted (once per thread).
    pub want_server: bool,
    /// Boxed `str`, not `String`: 8 bytes less in every connection.
    pub server: Option<Box<str>>,
}

impl ResponseReader {
    pub(crate) fn new() -> ResponseReader {
        ResponseReader {
            phase: Phase::Head,
            carry: Vec::new(),
            head_request: false,
            status: 0,
            close: false,
            body_len: 0,
            verdict: None,
            want_server: false,
            server: None,
        }
    }

    /// Prepares for the response to a new request.
    #[inline]
    pub(crate) fn reset(&mut self, head_request: bool) {
        self.phase = Phase::Head;
        self.carry.clear();
        self.head_request = head_request;
        self.status = 0;
        self.close = false;
        self.body_len = 0;
        self.verdict = None;
    }

    /// Whether any byte of the response has been read.
    #[cfg(test)]
    pub(crate) fn started(&self) -> bool {
        self.phase != Phase::Head || !self.carry.is_empty()
    }

    /// Feeds the next bytes read from the connection.
    #[inline]
    pub(crate) fn feed(&mut self, data: &[u8], check: &Check) -> Feed {
        if self.phase != Phase::Head {
            return self.body(data, check);
        }
        if self.carry.is_empty() {
            match self.head(data, check) {
                Ok(Some(n)) => self.body(&data[n..], check),
                Ok(None) => {
                    if data.len() > MAX_HEAD {
                        return Feed::Fail(Failure::Exception);
                    }
                    self.carry.extend_from_slice(data);
                    Feed::More
                }
                Err(f) => Feed::Fail(f),
            }
        } else {
            self.carry.extend_from_slice(data);
            let carry = std::mem::take(&mut self.carry);
            let feed = match self.head(&carry, check) {
                Ok(Some(n)) => {
                    // Everything after the head is this response's body; the
                    // part that came from `data` is what `leftover` counts.
                    match self.body(&carry[n..], check) {
                        Feed::Done { leftover } => Feed::Done {
                            leftover: leftover.min(data.len()),
                        },
                        other => other,
                    }
                }
                Ok(None) if carry.len() > MAX_HEAD => Feed::Fail(Failure::Exception),
                Ok(None) => {
                    self.carry = carry;
                    return Feed::More;
                }
                Err(f) => Feed::Fail(f),
            };
            // Keep the allocation for the next split head.
            self.carry = carry;
            self.carry.clear();
            feed
        }
    }

    /// The connection reached end of file.
    pub(crate) fn eof(&mut self, check: &Check) -> Feed {
        match self.phase {
            Phase::UntilClose => {
                self.phase = Phase::Done;
                self.finish(check);
                Feed::Done { leftover: 0 }
            }
            Phase::Head => Feed::Fail(Failure::Receive),
            // Fewer body bytes than announced.
            Phase::Length(_) | Phase::Chunked(_) => Feed::Fail(Failure::Length),
            Phase::Done => Feed::Done { leftover: 0 },
        }
    }

    /// Parses a complete head from `buf`; `Ok(None)` if it is incomplete.
    /// Returns the bytes it used (interim 1xx heads included). A head
    /// identical to the thread's memo is read from it (not while the
    /// `Server` header is wanted: the memo keeps no header values).
    fn head(&mut self, buf: &[u8], check: &Check) -> Result<Option<usize>, Failure> {
        if !self.want_server {
            if let Some((head, n)) = MEMO.with_borrow(|m| m.matches(buf)) {
                self.apply(head, check);
                return Ok(Some(n));
            }
        }
        let mut at = 0;
        loop {
            let mut headers = [MaybeUninit::<httparse::Header>::uninit(); MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut []);
            let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
                &mut resp,
                &buf[at..],
                &mut headers,
            ) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => return Ok(None),
                Err(_) => return Err(Failure::Exception),
            };
            let status = resp.code.unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                at += n;
                continue; // 100 Continue and friends: the real head follows.
            }
            let mut length: Option<u64> = None;
            let mut chunked = false;
            let mut conn_close = false;
            let mut conn_keep_alive = false;
            for h in resp.headers.iter() {
                let name = h.name.as_bytes();
                if name.eq_ignore_ascii_case(b"content-length") {
                    let v = parse_decimal(h.value).ok_or(Failure::Exception)?;
                    if length.is_some_and(|l| l != v) {
                        return Err(Failure::Exception);
                    }
                    length = Some(v);
                } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                    chunked = ends_with_token(h.value, b"chunked");
                } else if name.eq_ignore_ascii_case(b"connection") {
                    conn_close |= has_token(h.value, b"close");
                    conn_keep_alive |= has_token(h.value, b"keep-alive");
                } else if self.want_server && name.eq_ignore_ascii_case(b"server") {
                    self.server = Some(String::from_utf8_lossy(h.value).into());
                }
            }
            let head = Head {
                status,
                length,
                chunked,
                close: if resp.version == Some(0) {
                    !conn_keep_alive
                } else {
                    conn_close
                },
            };
            if at == 0 && n <= MEMO_MAX {
                MEMO.with_borrow_mut(|m| m.keep(&buf[..n], head));
            }
            self.apply(head, check);
            return Ok(Some(at + n));
        }
    }

    /// Takes in a final head: its status judged, its body's framing set.
    #[inline]
    fn apply(&mut self, head: Head, check: &Check) {
        let Head {
            status,
            length,
            chunked,
            close,
        } = head;
        self.status = status;
        self.close = close;
        if self.verdict.is_none() && !check.status_ok(status) {
            self.verdict = Some(Failure::Status);
        }
        self.phase = if self.head_request || status == 204 || status == 304 {
            Phase::Done
        } else if chunked {
            Phase::Chunked(Chunk::Size {
                size: 0,
                digits: 0,
                ext: false,
            })
        } else if let Some(len) = length {
            if let Some(want) = check.body() {
                if self.verdict.is_none() && len != want.len() as u64 {
                    self.verdict = Some(Failure::Length);
                }
            }
            if len == 0 {
                Phase::Done
            } else {
                Phase::Length(len)
            }
        } else {
            self.close = true;
            Phase::UntilClose
        };
    }

    /// Consumes body bytes; `data` starts right after what was consumed so far.
    #[inline]
    fn body(&mut self, data: &[u8], check: &Check) -> Feed {
        match self.phase {
            Phase::Length(remaining) => {
                let take = remaining.min(data.len() as u64) as usize;
                self.content(&data[..take], check);
                if remaining == take as u64 {
                    self.phase = Phase::Done;
                    self.finish(check);
                    Feed::Done {
                        leftover: data.len() - take,
                    }
                } else {
                    self.phase = Phase::Length(remaining - take as u64);
                    Feed::More
                }
            }
            Phase::Chunked(state) => self.chunked(state, data, check),
            Phase::UntilClose => {
                self.content(data, check);
                Feed::More
            }
            Phase::Done => {
                self.finish(check);
                Feed::Done {
                    leftover: data.len(),
                }
            }
            Phase::Head => unreachable!("body before head"),
        }
    }

    fn chunked(&mut self, mut state: Chunk, data: &[u8], check: &Check) -> Feed {
        let mut i = 0;
        while i < data.len() {
            let b = data[i];
            state = match state {
                Chunk::Size { size, digits, ext } => match b {
                    b'\r' => Chunk::SizeLf { size },
                    b'\n' => after_size(size),
                    _ if ext => state,
                    b';' | b' ' | b'\t' => Chunk::Size {
                        size,
                        digits,
                        ext: true,
                    },
                    _ => {
                        let Some(d) = (b as char).to_digit(16) else {
                            return Feed::Fail(Failure::Exception);
                        };
                        if digits >= 15 {
                            return Feed::Fail(Failure::Exception);
                        }
                        Chunk::Size {
                            size: size * 16 + u64::from(d),
                            digits: digits + 1,
                            ext,
                        }
                    }
                },
                Chunk::SizeLf { size } => {
                    if b != b'\n' {
                        return Feed::Fail(Failure::Exception);
                    }
                    after_size(size)
                }
                Chunk::Data(remaining) => {
                    let take = remaining.min((data.len() - i) as u64) as usize;
                    self.content(&data[i..i + take], check);
                    i += take;
                    let left = remaining - take as u64;
                    state = if left == 0 {
                        Chunk::DataCr
                    } else {
                        Chunk::Data(left)
                    };
                    continue;
                }
                Chunk::DataCr => match b {
                    b'\r' => Chunk::DataLf,
                    b'\n' => Chunk::Size {
                        size: 0,
                        digits: 0,
                        ext: false,
                    },
                    _ => return Feed::Fail(Failure::Exception),
                },
                Chunk::DataLf => {
                    if b != b'\n' {
                        return Feed::Fail(Failure::Exception);
                    }
                    Chunk::Size {
                        size: 0,
                        digits: 0,
                        ext: false,
                    }
                }
                Chunk::TrailerStart => match b {
                    b'\r' => Chunk::EndLf,
                    b'\n' => {
                        return self.chunked_done(i + 1, data.len(), check);
                    }
                    _ => Chunk::TrailerLine,
                },
                Chunk::TrailerLine => {
                    if b == b'\n' {
                        Chunk::TrailerStart
                    } else {
                        state
                    }
                }
                Chunk::EndLf => {
                    if b != b'\n' {
                        return Feed::Fail(Failure::Exception);
                    }
                    return self.chunked_done(i + 1, data.len(), check);
                }
            };
            i += 1;
        }
        self.phase = Phase::Chunked(state);
        Feed::More
    }

    fn chunked_done(&mut self, used: usize, len: usize, check: &Check) -> Feed {
        self.phase = Phase::Done;
        self.finish(check);
        Feed::Done {
            leftover: len - used,
        }
    }

    /// Body bytes: counted, and compared with the expected body. The first
    /// byte that differs makes it a wrong body, a body that matches and goes
    /// on past the expected one a wrong length, however the bytes were
    /// split into reads.
    #[inline]
    fn content(&mut self, bytes: &[u8], check: &Check) {
        if let (None, Some(want)) = (self.verdict, check.body()) {
            let at = (self.body_len as usize).min(want.len());
            let expected = &want[at..want.len().min(at.saturating_add(bytes.len()))];
            if bytes[..expected.len()] != *expected {
                self.verdict = Some(Failure::Body);
            } else if expected.len() < bytes.len() {
                self.verdict = Some(Failure::Length);
            }
        }
        self.body_len += bytes.len() as u64;
    }

    fn finish(&mut self, check: &Check) {
        if let (None, Some(want)) = (self.verdict, check.body()) {
            if !self.head_request && self.body_len != want.len() as u64 {
                self.verdict = Some(Failure::Length);
            }
        }
    }
}

fn after_size(size: u64) -> Chunk {
    if size == 0 {
        Chunk::TrailerStart
    } else {
        Chunk::Data(size)
    }
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u64::from(b - b'0'))
    })
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// Whether the last coding of a Transfer-Encoding value is `token`.
fn ends_with_token(value: &[u8], token: &[u8]) -> bool {
    value
        .rsplit(|&b| b == b',')
        .next()
        .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn exact(body: &[u8]) -> Check {
        Check::Exact {
            status: 200,
            body: Arc::from(body),
        }
    }

    /// Found by fuzz/ (engine_response): a body that differs and is longer
    /// than the contract's was a wrong length read at once, a wrong body
    /// read byte by byte. The first differing byte decides, in any reads.
    #[test]
    fn a_wrong_body_is_the_same_failure_in_any_reads() {
        let raw = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nHello \r\nWorld";
        let check = exact(b"Hello World");
        for (out, status, verdict, len) in feed_split(raw, &check, false) {
            assert_eq!(
                (out, status, verdict, len),
                (Feed::More, 200, Some(Failure::Body), 13)
            );
        }
        let longer = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello World!!";
        for (_, _, verdict, _) in feed_split(longer, &check, false) {
            assert_eq!(verdict, Some(Failure::Length));
        }
    }

    /// Feeds `raw` split at every possible pair of points; all must agree.
    fn feed_split(raw: &[u8], check: &Check, head: bool) -> Vec<(Feed, u16, Option<Failure>, u64)> {
        let mut results = Vec::new();
        for a in 0..=raw.len() {
            for b in a..=raw.len() {
                let mut r = ResponseReader::new();
                r.reset(head);
                let mut out = Feed::More;
                for part in [&raw[..a], &raw[a..b], &raw[b..]] {
                    if part.is_empty() {
                        continue;
                    }
                    out = r.feed(part, check);
                    if out != Feed::More {
                        break;
                    }
                }
                results.push((out, r.status, r.verdict, r.body_len));
            }
        }
        results
    }

    /// A head read from the thread's memo is judged as the same bytes
    /// parsed: in any split, beside heads that differ from it in one byte
    /// (another status, another length, a close), and bodies that differ.
    #[test]
    fn a_remembered_head_is_judged_as_a_parsed_one() {
        let check = exact(b"Hello World");
        let ok = &b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 11\r\n\r\nHello World"[..];
        let heads: [&[u8]; 5] = [
            ok,
            b"HTTP/1.1 500 OK\r\nServer: t\r\nContent-Length: 11\r\n\r\nHello World",
            b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 12\r\n\r\nHello World!",
            b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 11\r\nConnection: close\r\n\r\nHello World",
            b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 11\r\n\r\nHello Worle",
        ];
        let fresh = |raw: &[u8]| {
            MEMO.with_borrow_mut(|m| m.bytes.clear());
            let mut r = ResponseReader::new();
            r.reset(false);
            let f = r.feed(raw, &check);
            (f, r.status, r.close, r.verdict, r.body_len)
        };
        let expected: Vec<_> = heads.iter().map(|raw| fresh(raw)).collect();
        assert_eq!(
            expected[0],
            (Feed::Done { leftover: 0 }, 200, false, None, 11)
        );
        assert_eq!(expected[1].3, Some(Failure::Status));
        assert_eq!(expected[2].3, Some(Failure::Length));
        assert!(expected[3].2, "Connection: close");
        assert_eq!(expected[4].3, Some(Failure::Body));
        for (raw, want) in heads.iter().zip(&expected) {
            // The memo holds `ok`'s head, then the last one parsed.
            fresh(ok);
            for (feed, status, verdict, len) in feed_split(raw, &check, false) {
                assert_eq!(
                    (&feed, status, verdict, len),
                    (&want.0, want.1, want.3, want.4)
                );
            }
            // Remembered, then read from the memo: the same.
            fresh(raw);
            let mut r = ResponseReader::new();
            r.reset(false);
            assert!(MEMO.with_borrow(|m| m.matches(raw).is_some()));
            let f = r.feed(raw, &check);
            assert_eq!((f, r.status, r.close, r.verdict, r.body_len), *want);
        }
        // While the `Server` header is wanted the head is parsed (the memo
        // keeps no header values).
        fresh(ok);
        let mut r = ResponseReader::new();
        r.reset(false);
        r.want_server = true;
        r.feed(ok, &check);
        assert_eq!(r.server.as_deref(), Some("t"));
    }

    #[test]
    fn content_length_response_in_any_split() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nServer: t\r\n\r\nHello World";
        for (feed, status, verdict, len) in feed_split(raw, &exact(b"Hello World"), false) {
            assert_eq!(feed, Feed::Done { leftover: 0 });
            assert_eq!((status, verdict, len), (200, None, 11));
        }
    }

    #[test]
    fn chunked_response_in_any_split() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nHello\r\n6\r\n World\r\n0\r\nX-Trailer: y\r\n\r\n";
        for (feed, status, verdict, len) in feed_split(raw, &exact(b"Hello World"), false) {
            assert_eq!(feed, Feed::Done { leftover: 0 });
            assert_eq!((status, verdict, len), (200, None, 11));
        }
        let wrong = feed_split(raw, &exact(b"Hello Worle"), false);
        assert!(wrong.iter().all(|r| r.2 == Some(Failure::Body)));
    }

    #[test]
    fn bodies_that_differ_are_judged() {
        let check = exact(b"Hello World");
        let mut r = ResponseReader::new();
        r.reset(false);
        let f = r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHello", &check);
        assert_eq!(
            (f, r.verdict),
            (Feed::Done { leftover: 0 }, Some(Failure::Length))
        );
        r.reset(false);
        let f = r.feed(
            b"HTTP/1.1 500 Oops\r\nContent-Length: 11\r\n\r\nHello World",
            &check,
        );
        assert_eq!(
            (f, r.verdict),
            (Feed::Done { leftover: 0 }, Some(Failure::Status))
        );
        r.reset(false);
        let f = r.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nHello Worldextra",
            &check,
        );
        assert_eq!(f, Feed::Done { leftover: 5 });
        // Only the status class for arbitrary URLs.
        r.reset(false);
        let f = r.feed(b"HTTP/1.1 204 No Content\r\n\r\n", &Check::Success);
        assert_eq!((f, r.verdict), (Feed::Done { leftover: 0 }, None));
        r.reset(false);
        r.feed(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            &Check::Success,
        );
        assert_eq!(r.verdict, Some(Failure::Status));
    }

    #[test]
    fn head_requests_have_no_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n";
        let check = Check::Exact {
            status: 200,
            body: Arc::from(&b""[..]),
        };
        for (feed, _, verdict, len) in feed_split(raw, &check, true) {
            assert_eq!((feed, verdict, len), (Feed::Done { leftover: 0 }, None, 0));
        }
    }

    #[test]
    fn close_delimited_and_truncated_bodies() {
        let check = Check::Success;
        let mut r = ResponseReader::new();
        r.reset(false);
        assert_eq!(r.feed(b"HTTP/1.0 200 OK\r\n\r\nabc", &check), Feed::More);
        assert!(r.close);
        assert_eq!(r.eof(&check), Feed::Done { leftover: 0 });
        assert_eq!(r.body_len, 3);

        r.reset(false);
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", &check),
            Feed::More
        );
        assert_eq!(r.eof(&check), Feed::Fail(Failure::Length));

        r.reset(false);
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\nContent-Le", &check), Feed::More);
        assert!(r.started());
        assert_eq!(r.eof(&check), Feed::Fail(Failure::Receive));
    }

    #[test]
    fn connection_semantics() {
        let check = Check::Success;
        let mut r = ResponseReader::new();
        for (raw, close) in [
            (&b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"[..], false),
            (
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                true,
            ),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            (
                b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                false,
            ),
        ] {
            r.reset(false);
            assert_eq!(r.feed(raw, &check), Feed::Done { leftover: 0 });
            assert_eq!(r.close, close, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn interim_and_garbage() {
        let check = Check::Success;
        let mut r = ResponseReader::new();
        r.reset(false);
        let f = r.feed(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            &check,
        );
        assert_eq!((f, r.status), (Feed::Done { leftover: 0 }, 200));
        r.reset(false);
        assert_eq!(
            r.feed(b"garbage\r\n\r\n", &check),
            Feed::Fail(Failure::Exception)
        );
        r.reset(false);
        let f = r.feed(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            &check,
        );
        assert_eq!(f, Feed::Fail(Failure::Exception));
        r.reset(false);
        let f = r.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            &check,
        );
        assert_eq!(f, Feed::Fail(Failure::Exception));
    }
}
