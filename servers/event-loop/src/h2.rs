//! HTTP/2 on the same port as HTTP/1.1: a connection whose first bytes are
//! the HTTP/2 connection preface (RFC 9113 §3.4) is served by hyper's
//! HTTP/2 server, any other by the HTTP/1 path ([`crate::server`]). Over
//! plaintext that is h2c with prior knowledge (no `Upgrade: h2c`, which
//! RFC 9113 deprecates); over TLS the client picks `h2` by ALPN and then
//! sends the same preface, so one test covers both.
//!
//! This is what hyper-util's `auto` builder does; we sniff ourselves so that
//! the HTTP/1 path keeps [`crate::io::ConnIo`] (which rewrites hyper's
//! HTTP/1 error heads and must never see HTTP/2 frames) and HTTP/2 runs on
//! the bare stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The client connection preface, RFC 9113 §3.4.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// hyper's default, said here so that `/config` can say it: the streams a
/// client may have open at once on one connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 200;

/// What the first bytes of a connection say.
#[derive(Debug, PartialEq, Eq)]
pub enum Sniffed {
    Http2,
    Http1,
}

/// A stream whose first bytes were read already: they are replayed, then
/// the stream is read on.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

/// Reads from `stream` until its first bytes are the preface, or are not;
/// the bytes read come back inside the [`Prefixed`] stream. A client that
/// closes first is HTTP/1 (hyper then sees the end of input).
pub async fn sniff<S: AsyncRead + Unpin>(mut stream: S) -> io::Result<(Sniffed, Prefixed<S>)> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        let n = stream.read(&mut buf[len..]).await?;
        len += n;
        let seen = len.min(PREFACE.len());
        let verdict = if buf[..seen] != PREFACE[..seen] || n == 0 {
            Some(Sniffed::Http1)
        } else if seen == PREFACE.len() {
            Some(Sniffed::Http2)
        } else {
            None
        };
        if let Some(v) = verdict {
            buf.truncate(len);
            return Ok((v, Prefixed::new(buf, stream)));
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.prefix.len() {
            let n = (this.prefix.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.prefix[this.at..this.at + n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn sniffed(chunks: &[&[u8]]) -> (Sniffed, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(64);
        let chunks: Vec<Vec<u8>> = chunks.iter().map(|c| c.to_vec()).collect();
        let writer = tokio::spawn(async move {
            for c in chunks {
                client.write_all(&c).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let (v, mut s) = sniff(server).await.unwrap();
        writer.await.unwrap();
        let mut all = Vec::new();
        s.read_to_end(&mut all).await.unwrap();
        (v, all)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_preface_means_http2_and_every_byte_is_replayed() {
        let (v, bytes) = sniffed(&[&PREFACE[..5], &PREFACE[5..], b"\0\0\0\x04"]).await;
        assert_eq!(v, Sniffed::Http2);
        assert_eq!(bytes, [&PREFACE[..], b"\0\0\0\x04"].concat());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn anything_else_is_http1_at_its_first_differing_byte() {
        let (v, bytes) = sniffed(&[b"GET / HTTP/1.1\r\n\r\n"]).await;
        assert_eq!(v, Sniffed::Http1);
        assert_eq!(bytes, b"GET / HTTP/1.1\r\n\r\n");
        let (v, bytes) = sniffed(&[b"PRI * HTTP/1.1\r\n"]).await;
        assert_eq!(v, Sniffed::Http1, "a near miss of the preface");
        assert_eq!(bytes, b"PRI * HTTP/1.1\r\n");
        let (v, bytes) = sniffed(&[b"PRI"]).await;
        assert_eq!(v, Sniffed::Http1, "closed inside the preface");
        assert_eq!(bytes, b"PRI");
    }
}
