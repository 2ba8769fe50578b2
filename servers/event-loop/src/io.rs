//! A client connection's byte stream as hyper sees it, with two fixes that
//! make hyper's answers to unparseable requests meet the contract.
//!
//! hyper answers a request it cannot parse by itself, before any service
//! runs: `400 Bad Request` (bad request line or header) or `431 Request
//! Header Fields Too Large` (head over `max_header_size`, or more than 100
//! header fields), as a bare head (`content-length: 0`, `date`, no `Server`,
//! no `Content-Type`, no reason in the body), then drops the connection.
//! This wrapper recognises that head in the write stream (it is the last
//! thing hyper ever writes on the connection, and the only head without
//! our `server:` line first) and sends the contract's response instead:
//! `Server`, `Date`, `Content-Type`, `Content-Length`, `Connection: close`
//! and a one-line reason. Then, because closing a socket with unread input
//! (the rest of an oversized head) makes the kernel send a RST that can
//! destroy the response before the client reads it, the close lingers: the
//! write side is shut down and the input drained for up to [`LINGER`].
//!
//! The check costs one `ends_with` per write: a head without a body is the
//! only thing that ends in `\r\n\r\n`.
//!
//! A response to HEAD carries no content, error responses included (RFC
//! 9110 §9.3.2), so the replacement of an answer to a HEAD request has no
//! reason after its head. hyper does not say which request it refused: it
//! is the first one it did not hand to the service (requests are parsed in
//! order and the service counts the ones it gets, [`Handled`]), and the
//! read side notes whether each request read says HEAD ([`RequestStarts`],
//! one pass over the bytes read, skipping Content-Length bodies).
//!
//! The same pass frames chunked bodies and checks their size lines and
//! trailers against RFC 9112's grammar ([`server_common::chunks`]), which hyper's
//! decoder does not: the bytes before one that breaks it go to hyper, and
//! its next read gets an error in its place. hyper hands that error to the
//! body the service reads, and the service answers 400 and closes.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::TokioIo;
use server_common::chunks::{ChunkedBody, Step};
use server_common::http1::{encode_error, ParseError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::SERVER_NAME;

/// How long a connection closed after an error keeps draining its input.
pub const LINGER: Duration = Duration::from_secs(2);

/// A connection's byte stream under hyper: a TCP socket, or the TLS
/// session over one (`--tls-cert`).
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Stream for S {}

/// The stream of one client connection, handed to hyper.
pub struct ConnIo<S: Stream = TcpStream> {
    /// `None` only once handed to the lingering close in `drop`.
    stream: Option<TokioIo<S>>,
    /// Our answer, being written in place of hyper's automatic one.
    replacement: Option<Replacement>,
    /// Our error answer was sent: close gently.
    linger: bool,
    /// Which requests read say HEAD.
    starts: RequestStarts,
    /// How many requests hyper handed to the service.
    handled: Handled,
    /// A `101` went out: what follows is WebSocket frames, never a head.
    upgraded: bool,
    /// A chunked body broke its grammar: hyper's next read gets this.
    refused: Option<io::Error>,
}

/// The number of requests of one connection that hyper handed to the
/// service: counted by the service, read by [`ConnIo`]; and whether the
/// service refused a body it did not read (then the close lingers too).
#[derive(Clone, Default, Debug)]
pub struct Handled(Arc<(AtomicU64, AtomicBool)>);

impl Handled {
    /// One more request reached the service.
    pub fn count(&self) {
        self.0 .0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0 .0.load(Ordering::Relaxed)
    }

    /// The service answered with a close and left input unread (a body
    /// over the bound, or one that broke its framing): close gently, or
    /// the kernel's reset may destroy the answer before the client reads it.
    pub fn linger(&self) {
        self.0 .1.store(true, Ordering::Relaxed);
    }

    fn lingers(&self) -> bool {
        self.0 .1.load(Ordering::Relaxed)
    }
}

struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// Length of hyper's head it stands for.
    replaces: usize,
}

/// Whether each request in the bytes read says HEAD, by its place on the
/// connection: a request starts with its first byte that is not part of an
/// empty line (RFC 9112 §2.2), its head ends at an empty line, and its
/// body (if any) is skipped: by its Content-Length, or chunk by chunk
/// ([`ChunkedBody`]) when its last transfer coding is chunked, which wins
/// over a Content-Length beside it as it does in hyper.
#[derive(Default, Debug)]
struct RequestStarts {
    /// HEAD or not, for the requests from the `first`-th on.
    heads: VecDeque<bool>,
    first: u64,
    /// The first bytes of the current request's request line.
    start: [u8; 5],
    start_len: usize,
    /// The current header line's first bytes, lower-cased.
    line: [u8; LINE_KEPT],
    line_len: usize,
    /// The last byte read ended a line (only CRs after it).
    line_start: bool,
    /// The current head's Content-Length, and body bytes still to skip.
    content_length: u64,
    body_left: u64,
    /// The current header line's last 8 bytes that are not whitespace,
    /// lower-cased, one per byte of a shift register (`:chunked` or
    /// `,chunked` ends a Transfer-Encoding whose last coding is chunked).
    tail: u64,
    /// The current head's last Transfer-Encoding ends in chunked.
    chunked: bool,
    /// In a chunked body.
    chunked_body: Option<ChunkedBody>,
}

/// Bytes of a header line kept: `content-length:` and a value of 17 digits.
const LINE_KEPT: usize = 32;

impl RequestStarts {
    /// Reads the next bytes of the connection. `Some(i)`: the byte at `i`
    /// breaks a chunked body's grammar (the rest is not read).
    fn feed(&mut self, all: &[u8]) -> Option<usize> {
        let mut bytes = all;
        while let Some((&b, rest)) = bytes.split_first() {
            if let Some(body) = &mut self.chunked_body {
                let at = all.len() - bytes.len();
                match body.feed(bytes) {
                    Step::More => return None,
                    Step::Refused(i) => return Some(at + i),
                    Step::Ended(n) => bytes = &bytes[n..],
                    Step::Unchecked => bytes = &[],
                }
                self.chunked_body = None;
                continue;
            }
            if self.body_left > 0 {
                let skip = self.body_left.min(bytes.len() as u64) as usize;
                self.body_left -= skip as u64;
                bytes = &bytes[skip..];
                continue;
            }
            bytes = rest;
            if self.start_len == 0 && (b == b'\r' || b == b'\n') {
                continue;
            }
            if self.start_len < self.start.len() {
                if self.start_len == 0 {
                    self.heads.push_back(false);
                }
                self.start[self.start_len] = b;
                self.start_len += 1;
                if self.start_len == self.start.len() && &self.start == b"HEAD " {
                    if let Some(last) = self.heads.back_mut() {
                        *last = true;
                    }
                }
            }
            match b {
                b'\n' if self.line_start => {
                    // An empty line: the head ends, its body (if any) follows.
                    self.start_len = 0;
                    self.line_start = false;
                    self.body_left = std::mem::take(&mut self.content_length);
                    if std::mem::take(&mut self.chunked) {
                        self.body_left = 0;
                        self.chunked_body = Some(ChunkedBody::default());
                    }
                }
                b'\n' => {
                    self.line_start = true;
                    self.header_line_ended();
                    self.line_len = 0;
                    self.tail = 0;
                }
                b'\r' => {}
                _ => {
                    self.line_start = false;
                    if self.line_len < LINE_KEPT {
                        self.line[self.line_len] = b.to_ascii_lowercase();
                        self.line_len += 1;
                    }
                    if b != b' ' && b != b'\t' {
                        self.tail = self.tail << 8 | u64::from(b.to_ascii_lowercase());
                    }
                }
            }
        }
        None
    }

    fn header_line_ended(&mut self) {
        let line = &self.line[..self.line_len];
        if line.starts_with(b"transfer-encoding:") {
            const LAST: [u64; 2] = [
                u64::from_be_bytes(*b":chunked"),
                u64::from_be_bytes(*b",chunked"),
            ];
            self.chunked = LAST.contains(&self.tail);
        }
        if let Some(value) = line.strip_prefix(b"content-length:") {
            let value = value.trim_ascii();
            if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                self.content_length = value.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0'));
            }
        }
    }

    /// Whether the `n`-th request of the connection (from 0) says HEAD;
    /// forgets the ones before it.
    fn is_head(&mut self, n: u64) -> bool {
        while self.first < n {
            if self.heads.pop_front().is_none() {
                // Fewer requests seen than hyper parsed (a body framed
                // otherwise than hyper did): count from here.
                self.first = n;
                break;
            }
            self.first += 1;
        }
        n == self.first && self.heads.front() == Some(&true)
    }
}

impl<S: Stream> ConnIo<S> {
    /// `handled`: counted by the connection's service.
    pub fn new(stream: S, handled: Handled) -> ConnIo<S> {
        ConnIo {
            stream: Some(TokioIo::new(stream)),
            replacement: None,
            linger: false,
            starts: RequestStarts::default(),
            handled,
            upgraded: false,
            refused: None,
        }
    }

    fn stream(&mut self) -> Pin<&mut TokioIo<S>> {
        Pin::new(self.stream.as_mut().expect("stream present until drop"))
    }

    /// Writes the pending replacement; `Ready(Ok(n))` reports hyper's `n`
    /// bytes as written once all of ours are.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut stream = Pin::new(self.stream.as_mut().expect("stream present until drop"));
        let r = self.replacement.as_mut().expect("a replacement is pending");
        while r.written < r.bytes.len() {
            let n = ready!(stream.as_mut().poll_write(cx, &r.bytes[r.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            r.written += n;
        }
        let replaces = r.replaces;
        self.replacement = None;
        self.linger = true;
        Poll::Ready(Ok(replaces))
    }
}

impl<S: Stream> Read for ConnIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(refused) = this.refused.take() {
            return Poll::Ready(Err(refused));
        }
        let stream = this
            .stream
            .as_mut()
            .expect("stream present until drop")
            .inner_mut();
        // SAFETY: as hyper-util's TokioIo does: tokio's ReadBuf writes only
        // initialised bytes into the cursor's memory, and the cursor is
        // advanced by exactly the bytes it filled.
        let n = unsafe {
            let mut tbuf = tokio::io::ReadBuf::uninit(buf.as_mut());
            ready!(tokio::io::AsyncRead::poll_read(
                Pin::new(stream),
                cx,
                &mut tbuf
            ))?;
            let filled = tbuf.filled();
            // Forget the requests the service got (their answers are ours).
            this.starts.is_head(this.handled.get());
            // After a `101` the bytes are the new protocol's.
            let refused = (!this.upgraded).then(|| this.starts.feed(filled)).flatten();
            match refused {
                None => filled.len(),
                Some(at) => {
                    let error = io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a chunk line or trailer breaks RFC 9112 §7.1's grammar",
                    );
                    if at == 0 {
                        return Poll::Ready(Err(error));
                    }
                    // hyper decodes what came before it first.
                    this.refused = Some(error);
                    at
                }
            }
        };
        // SAFETY: the `n` bytes were filled above.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<S: Stream> Write for ConnIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacement.is_some() {
            // hyper retries with the same buffer after `Pending`.
            return this.poll_replacement(cx);
        }
        // Frames after a `101` are echoed data: a message that ends like a
        // head must not read as hyper's error answer.
        this.upgraded |= buf.starts_with(b"HTTP/1.1 101 ");
        if this.upgraded {
            return this.stream().poll_write(cx, buf);
        }
        if let Some((start, error)) = find_automatic_error(buf) {
            if start > 0 {
                // Our responses before it go out first, unchanged.
                return this.stream().poll_write(cx, &buf[..start]);
            }
            let mut bytes = Vec::with_capacity(192);
            // The refused request: the first one not handed to the service.
            let head = this.starts.is_head(this.handled.get());
            encode_error(&mut bytes, SERVER_NAME, error, head);
            this.replacement = Some(Replacement {
                bytes,
                written: 0,
                replaces: buf.len(),
            });
            return this.poll_replacement(cx);
        }
        this.stream().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_shutdown(cx)
    }
}

impl<S: Stream> Drop for ConnIo<S> {
    fn drop(&mut self) {
        if !self.linger && !self.handled.lingers() {
            return;
        }
        if let (Some(stream), Ok(rt)) = (self.stream.take(), tokio::runtime::Handle::try_current())
        {
            rt.spawn(linger(stream.into_inner()));
        }
    }
}

/// Shuts the write side down (the client sees the end of our answer) and
/// reads until the client closes, or [`LINGER`] passes.
async fn linger<S: Stream>(mut stream: S) {
    let _ = tokio::time::timeout(LINGER, async {
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    })
    .await;
}

/// Finds hyper's automatic error head at the end of `buf`: its start and
/// which error it answers. Our own heads always start with `server:`.
fn find_automatic_error(buf: &[u8]) -> Option<(usize, ParseError)> {
    if !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let start = buf.windows(7).rposition(|w| w == b"HTTP/1.")?;
    let head = &buf[start..];
    let code = head.get(9..12)?;
    let line_end = head.windows(2).position(|w| w == b"\r\n")?;
    let next = &head[line_end + 2..];
    if next.len() >= 7 && next[..7].eq_ignore_ascii_case(b"server:") {
        return None;
    }
    let error = match code {
        b"400" => ParseError::Malformed,
        // 414 (a URI over hyper's limit) is a head over 8 KiB as well.
        b"431" | b"414" => ParseError::HeadTooLarge,
        _ => return None,
    };
    Some((start, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nserver: event-loop\r\ncontent-type: text/plain\r\ncontent-length: 5\r\ndate: Mon, 30 Nov 2026 01:57:30 GMT\r\n\r\nbad n";
    const OURS_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nserver: event-loop\r\ncontent-type: text/plain\r\ncontent-length: 11\r\ndate: Mon, 30 Nov 2026 01:57:30 GMT\r\n\r\n";
    const HYPER_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Mon, 30 Nov 2026 01:57:30 GMT\r\n\r\n";
    const HYPER_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Mon, 30 Nov 2026 01:57:30 GMT\r\n\r\n";

    fn starts(reads: &[&[u8]]) -> RequestStarts {
        let mut s = RequestStarts::default();
        for r in reads {
            s.feed(r);
        }
        s
    }

    #[test]
    fn each_request_is_known_as_head_or_not() {
        assert!(starts(&[b"HEAD /url HTTP/1.1\r\n\r\n"]).is_head(0));
        assert!(
            starts(&[b"\r\nHE", b"AD /url HTTP/1.1\r\nX-Pad: aaaa"]).is_head(0),
            "split, incomplete"
        );
        let mut s = starts(&[
            b"GET / HTTP/1.1\r\nHost: x\r\n\r",
            b"\n\r\nHEAD / HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nX: HEAD \r\n\r\n",
        ]);
        assert!(!s.is_head(0));
        assert!(s.is_head(1), "the second, with a request after it");
        assert!(!s.is_head(2), "a field is no request line");
        assert!(!s.is_head(1), "forgotten once a later one was asked for");
        assert!(!starts(&[b"HEADER / HTTP/1.1\r\n\r\n"]).is_head(0));
        assert!(!starts(&[]).is_head(0));
    }

    #[test]
    fn content_length_bodies_are_skipped() {
        let mut s = starts(&[
            b"POST / HTTP/1.1\r\nContent-Length: 19\r\n\r\nHEAD / HTTP/1.1\r\n\r\n",
            b"HEAD / HTTP/1.1\r\n\r\n",
        ]);
        assert!(!s.is_head(0));
        assert!(s.is_head(1), "the request after the 19-byte body");
        let mut s = starts(&[b"POST / HTTP/1.1\r\ncontent-length:  3 \r\n\r\nabcHEAD / "]);
        assert!(s.is_head(1));
    }

    #[test]
    fn chunked_bodies_are_framed_and_checked() {
        let mut s = starts(&[
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"13\r\nHEAD / HTTP/1.1\r\n\r\n\r\n0\r\nT: 1\r\n\r\nHEAD / ",
        ]);
        assert!(!s.is_head(0));
        assert!(
            s.is_head(1),
            "the request after the chunked body, not in it"
        );
        let mut s = RequestStarts::default();
        let head = b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(s.feed(head), None);
        assert_eq!(s.feed(b"5;\r\nhello"), Some(3), "the bare `;` line's LF");
        let mut s = RequestStarts::default();
        let not_last = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, x-chunked\r\n\r\n5;\r\n";
        assert_eq!(
            s.feed(not_last),
            None,
            "not chunked: hyper refuses the head"
        );
    }

    #[test]
    fn our_responses_pass_through() {
        assert_eq!(find_automatic_error(OURS), None);
        assert_eq!(find_automatic_error(OURS_HEAD), None);
        assert_eq!(find_automatic_error(&[OURS, OURS_HEAD].concat()), None);
        assert_eq!(find_automatic_error(b""), None);
    }

    #[test]
    fn hypers_automatic_answers_are_found() {
        assert_eq!(
            find_automatic_error(HYPER_431),
            Some((0, ParseError::HeadTooLarge))
        );
        assert_eq!(
            find_automatic_error(HYPER_400),
            Some((0, ParseError::Malformed))
        );
        let after = [OURS, OURS_HEAD, HYPER_400].concat();
        assert_eq!(
            find_automatic_error(&after),
            Some((OURS.len() + OURS_HEAD.len(), ParseError::Malformed))
        );
    }
}
