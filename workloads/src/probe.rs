//! A raw, blocking HTTP/1 client for judging a server: it sends exactly the
//! bytes it is given and reports exactly what came back, including whether
//! the server closed. [`crate::contract`] runs its rows over it, and the
//! servers' own tests use it through `testkit::client`;
//! [`RawResponse::verify`] applies [`crate::verify`].

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a caller waits for any single response unless it sets another bound.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A response as received.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of a header, case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The headers in the shape `workloads::verify` takes.
    pub fn header_pairs(&self) -> Vec<(&str, &[u8])> {
        self.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect()
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Judges this response against the contract's expectation.
    pub fn verify(&self, expected: &crate::Expected) -> Result<(), crate::Mismatch> {
        crate::verify(expected, self.status, &self.header_pairs(), &self.body)
    }
}

/// One client connection; responses are read in order (pipelining works).
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The bound of [`Conn::read_response`]; [`READ_TIMEOUT`] unless set.
    read_timeout: Duration,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> io::Result<Conn> {
        Conn::connect_within(addr, Duration::from_secs(5), READ_TIMEOUT)
    }

    /// Connects within `connect`; reads and writes then wait up to `io`.
    pub fn connect_within(addr: SocketAddr, connect: Duration, io: Duration) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, connect)?;
        stream.set_read_timeout(Some(io))?;
        stream.set_write_timeout(Some(io))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            read_timeout: io,
        })
    }

    /// This end's address: with the server's, it names the connection.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// How long [`Conn::read_response`] waits for a response.
    pub fn set_read_timeout(&mut self, t: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(t))?;
        self.read_timeout = t;
        Ok(())
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Shuts down the sending side (a half-close): the server reads the
    /// end of the stream, and can still answer.
    pub fn shutdown_write(&self) -> io::Result<()> {
        self.stream.shutdown(std::net::Shutdown::Write)
    }

    /// Sends `METHOD target HTTP/1.1` with a Host header.
    pub fn send_request(&mut self, method: &str, target: &str) -> io::Result<()> {
        self.send(format!("{method} {target} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes())
    }

    /// Reads one response; `head` says the request was HEAD (no body follows).
    /// Waits at most the read timeout ([`READ_TIMEOUT`] unless set).
    pub fn read_response(&mut self, head: bool) -> io::Result<RawResponse> {
        self.read_response_within(head, self.read_timeout)
    }

    /// Reads one response, waiting at most `wait` for all of it.
    ///
    /// `Err` of kind `TimedOut` when no complete response came in time (what
    /// did arrive is kept: a later read continues with it), `UnexpectedEof`
    /// when the server closed before a complete response. For tests that
    /// assert a server does *not* answer (yet), e.g. a starved connection.
    pub fn read_response_within(&mut self, head: bool, wait: Duration) -> io::Result<RawResponse> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some((resp, used)) = parse(&self.buf, head, false)? {
                self.buf.drain(..used);
                return Ok(resp);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(no_response_within(wait));
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 16 * 1024];
            let n = match self.stream.read(&mut chunk) {
                Ok(n) => n,
                // A read with a timeout is never restarted after a signal
                // (signal(7)), even one that stops and resumes the process
                // without a handler: read again, within the same deadline.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A socket read timeout is `WouldBlock` on Unix.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(no_response_within(wait))
                }
                Err(e) => return Err(e),
            };
            if n == 0 {
                // Closed: a response delimited by the close is complete now.
                if let Some((resp, used)) = parse(&self.buf, head, true)? {
                    self.buf.drain(..used);
                    return Ok(resp);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed after {} bytes of a response",
                        self.buf.len()
                    ),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// `send_request` then `read_response`.
    pub fn request(&mut self, method: &str, target: &str) -> io::Result<RawResponse> {
        self.send_request(method, target)?;
        self.read_response(method == "HEAD")
    }

    /// `GET target` on this connection.
    pub fn get(&mut self, target: &str) -> io::Result<RawResponse> {
        self.request("GET", target)
    }

    /// Whether anything (response bytes, or the close) has arrived and waits
    /// to be read. Never blocks: for asserting that no answer came *yet*.
    pub fn has_data(&self) -> bool {
        if !self.buf.is_empty() {
            return true;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let ready = !matches!(
            self.stream.peek(&mut [0u8; 1]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock
        );
        let _ = self.stream.set_nonblocking(false);
        ready
    }

    /// Reads every response until the server closes the connection (a
    /// reset counts as a close), waiting at most `wait` in all: for
    /// exchanges the server ends itself, e.g. an error answer that closes,
    /// or `Connection: close` among pipelined requests. Responses to HEAD
    /// are not told apart: send no HEAD requests before such a read.
    ///
    /// `Err` of kind `TimedOut` when the server did not close within
    /// `wait`, `UnexpectedEof` when it closed inside a response (the
    /// complete responses before it are lost with the error).
    pub fn read_until_close(&mut self, wait: Duration) -> io::Result<Vec<RawResponse>> {
        let deadline = Instant::now() + wait;
        let mut chunk = [0u8; 16 * 1024];
        let read = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(not_closed_within(wait));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break Ok(()),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break Err(not_closed_within(wait))
                }
                Err(e) => break Err(e),
            }
        };
        let _ = self.stream.set_read_timeout(Some(self.read_timeout));
        read?;
        let mut responses = Vec::new();
        while !self.buf.is_empty() {
            let Some((resp, used)) = parse(&self.buf, false, true)? else {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed after {} bytes of a response (after {} complete)",
                        self.buf.len(),
                        responses.len()
                    ),
                ));
            };
            self.buf.drain(..used);
            responses.push(resp);
        }
        Ok(responses)
    }

    /// Whether the server has closed the connection (waits up to `within`).
    pub fn is_closed(&mut self, within: Duration) -> bool {
        let _ = self.stream.set_read_timeout(Some(within));
        let mut b = [0u8; 1];
        let closed = match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => {
                self.buf.push(b[0]);
                false
            }
            Err(e) => e.kind() == io::ErrorKind::ConnectionReset,
        };
        let _ = self.stream.set_read_timeout(Some(self.read_timeout));
        closed
    }
}

fn no_response_within(wait: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no complete response within {wait:?}"),
    )
}

fn not_closed_within(wait: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the server did not close the connection within {wait:?}"),
    )
}

/// Parses one response from `buf`: `Ok(None)` if incomplete.
fn parse(buf: &[u8], head: bool, eof: bool) -> io::Result<Option<(RawResponse, usize)>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let head_len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad response ({e}): {:?}", String::from_utf8_lossy(buf)),
            ))
        }
    };
    let mut resp = RawResponse {
        status: r.code.unwrap_or(0),
        version: r.version.unwrap_or(1),
        headers: r
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        body: Vec::new(),
    };
    // RFC 9112 §6.3: a response to HEAD, a 1xx (a 101 included: what
    // follows is the new protocol's), 204 and 304 end at their head.
    if ends_at_head(head, resp.status) {
        return Ok(Some((resp, head_len)));
    }
    if let Some(cl) = resp.header("content-length") {
        let cl: usize = cl.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad Content-Length {cl:?}"),
            )
        })?;
        if buf.len() < head_len + cl {
            return Ok(None);
        }
        resp.body = buf[head_len..head_len + cl].to_vec();
        return Ok(Some((resp, head_len + cl)));
    }
    if resp
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
    {
        return dechunk(buf, head_len).map(|o| {
            o.map(|(body, used)| {
                resp.body = body;
                (resp, used)
            })
        });
    }
    // Delimited by the close.
    if eof {
        resp.body = buf[head_len..].to_vec();
        return Ok(Some((resp, buf.len())));
    }
    Ok(None)
}

/// Whether a response has no body, whatever its header fields say.
fn ends_at_head(head_request: bool, status: u16) -> bool {
    head_request || (100..200).contains(&status) || status == 204 || status == 304
}

/// A chunked body from `pos`, trailer fields skipped: `Ok(None)` while incomplete.
fn dechunk(buf: &[u8], mut pos: usize) -> io::Result<Option<(Vec<u8>, usize)>> {
    let line_end = |pos: usize| buf[pos..].windows(2).position(|w| w == b"\r\n");
    let mut body = Vec::new();
    loop {
        let Some(eol) = line_end(pos) else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&buf[pos..pos + eol]);
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).map_err(
            |_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad chunk size {line:?}"),
                )
            },
        )?;
        pos += eol + 2;
        if size == 0 {
            // Trailer fields, then an empty line.
            loop {
                let Some(eol) = line_end(pos) else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, pos)));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[pos..pos + size]);
        pos += size + 2;
    }
}

/// One request on a fresh connection.
pub fn request(addr: SocketAddr, method: &str, target: &str) -> io::Result<RawResponse> {
    Conn::connect(addr)?.request(method, target)
}

/// `GET target` on a fresh connection.
pub fn get(addr: SocketAddr, target: &str) -> io::Result<RawResponse> {
    request(addr, "GET", target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_chunked_and_close_delimited() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
        let (r, used) = parse(raw, false, false).unwrap().unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), used),
            (200, &b"ok"[..], raw.len() - 8)
        );
        let raw =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n1\r\n!\r\n0\r\n\r\n";
        let (r, used) = parse(raw, false, false).unwrap().unwrap();
        assert_eq!((r.body.as_slice(), used), (&b"ok!"[..], raw.len()));
        let raw =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n!\r\n0\r\nX-T: v\r\n\r\n";
        let (r, used) = parse(raw, false, false).unwrap().unwrap();
        assert_eq!(
            (r.body.as_slice(), used),
            (&b"!"[..], raw.len()),
            "trailers skipped"
        );
        // A 101 ends at its head: what follows is the new protocol's.
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n\0\0\0\x04\0\0\0\0\0";
        let (r, used) = parse(raw, false, false).unwrap().unwrap();
        assert_eq!((r.status, used), (101, raw.len() - 9));
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        let (r, used) = parse(raw, false, false).unwrap().unwrap();
        assert_eq!((r.status, used), (100, 25));
        let raw = b"HTTP/1.0 200 OK\r\n\r\nbye";
        assert!(parse(raw, false, false).unwrap().is_none());
        assert_eq!(parse(raw, false, true).unwrap().unwrap().0.body, b"bye");
    }
}
