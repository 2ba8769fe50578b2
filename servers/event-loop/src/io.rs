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

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::TokioIo;
use server_common::http1::{encode_error, ParseError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::SERVER_NAME;

/// How long a connection closed after an error keeps draining its input.
pub const LINGER: Duration = Duration::from_secs(2);

/// The stream of one client connection, handed to hyper.
pub struct ConnIo {
    /// `None` only once handed to the lingering close in `drop`.
    stream: Option<TokioIo<TcpStream>>,
    /// Our answer, being written in place of hyper's automatic one.
    replacement: Option<Replacement>,
    /// Our error answer was sent: close gently.
    linger: bool,
}

struct Replacement {
    bytes: Vec<u8>,
    written: usize,
    /// Length of hyper's head it stands for.
    replaces: usize,
}

impl ConnIo {
    pub fn new(stream: TcpStream) -> ConnIo {
        ConnIo {
            stream: Some(TokioIo::new(stream)),
            replacement: None,
            linger: false,
        }
    }

    fn stream(&mut self) -> Pin<&mut TokioIo<TcpStream>> {
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

impl Read for ConnIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        self.stream().poll_read(cx, buf)
    }
}

impl Write for ConnIo {
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
        if let Some((start, error)) = find_automatic_error(buf) {
            if start > 0 {
                // Our responses before it go out first, unchanged.
                return this.stream().poll_write(cx, &buf[..start]);
            }
            let mut bytes = Vec::with_capacity(192);
            encode_error(&mut bytes, SERVER_NAME, error);
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

impl Drop for ConnIo {
    fn drop(&mut self) {
        if !self.linger {
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
async fn linger(mut stream: TcpStream) {
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
