//! A minimal blocking HTTP/1.1 GET, for readiness probes, `/config` and the
//! pre-run check of each workload (not for load: that is the engine's job).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One complete response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Response {
    /// Headers as `workloads::verify` takes them.
    pub fn header_refs(&self) -> Vec<(&str, &[u8])> {
        self.headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect()
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// `GET target` on a fresh connection with `Connection: close`.
pub fn get(addr: SocketAddr, host: &str, target: &str, timeout: Duration) -> io::Result<Response> {
    let deadline = Instant::now() + timeout;
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_write_timeout(Some(timeout))?;
    exchange(s, |s| s, host, target, deadline)
}

/// [`get`] over TLS as `tls` says (its CAs, its version).
pub fn get_tls(
    addr: SocketAddr,
    host: &str,
    target: &str,
    timeout: Duration,
    tls: &crate::engine::TlsPlan,
) -> io::Result<Response> {
    let deadline = Instant::now() + timeout;
    let config = std::sync::Arc::new(tls.client_config().map_err(bad)?);
    let conn = rustls::ClientConnection::new(config, tls.name().map_err(bad)?)
        .map_err(|e| bad(format!("TLS: {e}")))?;
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_write_timeout(Some(timeout))?;
    let stream = rustls::StreamOwned::new(conn, s);
    exchange(stream, |s| &s.sock, host, target, deadline)
}

/// Writes the request on `s` and reads its answer until `deadline`; `sock`
/// is the socket under `s` (for its read timeout).
fn exchange<S: Read + Write>(
    mut s: S,
    sock: impl Fn(&S) -> &TcpStream,
    host: &str,
    target: &str,
    deadline: Instant,
) -> io::Result<Response> {
    s.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    s.flush()?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no complete answer in time",
            ));
        }
        sock(&s).set_read_timeout(Some(left))?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            // A read with a timeout is not restarted after a signal: again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // TLS: the server closed without close_notify (the answer
            // itself says whether it was complete).
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e),
        };
        if n > 0 {
            buf.extend_from_slice(&chunk[..n]);
        }
        if let Some(r) = parse(&buf, n == 0)? {
            return Ok(r);
        }
        if n == 0 {
            return Err(bad("the connection closed before a complete response"));
        }
    }
}

/// A complete response from `buf`, `None` if more bytes are needed.
fn parse(buf: &[u8], eof: bool) -> io::Result<Option<Response>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp
        .parse(buf)
        .map_err(|e| bad(format!("bad response: {e}")))?
    {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let status = resp.code.unwrap_or(0);
    let headers: Vec<(String, Vec<u8>)> = resp
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).trim().to_ascii_lowercase())
    };
    let rest = &buf[head_len..];
    let body = if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        match dechunk(rest)? {
            Some(b) => b,
            None => return Ok(None),
        }
    } else if let Some(cl) = find("content-length") {
        let n: usize = cl.parse().map_err(|_| bad("bad Content-Length"))?;
        if rest.len() < n {
            return Ok(None);
        }
        rest[..n].to_vec()
    } else if eof {
        rest.to_vec()
    } else {
        return Ok(None);
    };
    Ok(Some(Response {
        status,
        headers,
        body,
    }))
}

fn dechunk(mut b: &[u8]) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&b[..eol]).map_err(|_| bad("bad chunk size"))?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad("bad chunk size"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if b.len() < size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_chunked_and_eof_bodies() {
        let r = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
            .unwrap()
            .unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
        assert!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", false)
                .unwrap()
                .is_none()
        );
        let r = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n6\r\n World\r\n0\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.body, b"Hello World");
        let r = parse(b"HTTP/1.0 200 OK\r\n\r\nabc", true).unwrap().unwrap();
        assert_eq!(r.body, b"abc");
    }
}
