//! A minimal, strict HTTP/1.1 server codec: enough for the contract, fast on
//! the hot path (no allocation per request), shared by the coroutine and
//! worker-pool servers.
//!
//! Parsing is `httparse` on the connection's read buffer; a request borrows
//! from that buffer. Encoding appends to the connection's write buffer, so
//! pipelined requests are answered with one write.

use std::io::Write;

use workloads::{Response, ALLOW};

use crate::date;

/// Largest request head (request line + headers) accepted: 8 KiB. Beyond it: 431.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Most header fields accepted in one request. Beyond it: 431.
pub const MAX_HEADERS: usize = 64;
/// Largest request body accepted (and skipped: no endpoint reads a body).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A parsed request head, borrowing from the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'b> {
    pub method: &'b str,
    pub target: &'b str,
    /// The request said HTTP/1.0.
    pub http10: bool,
    /// The connection stays open after the response: HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// Bytes of the buffer this request occupies, head and body.
    pub len: usize,
}

/// Why a request cannot be served; the connection is closed after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// 400: not HTTP/1.x, a bad header, a bad Content-Length, a chunked body.
    Malformed,
    /// 431: head over [`MAX_HEAD_BYTES`] or more than [`MAX_HEADERS`] fields.
    HeadTooLarge,
}

impl ParseError {
    pub fn status(self) -> u16 {
        match self {
            ParseError::Malformed => 400,
            ParseError::HeadTooLarge => 431,
        }
    }

    pub fn reason(self) -> &'static [u8] {
        match self {
            ParseError::Malformed => b"malformed request",
            ParseError::HeadTooLarge => b"request header fields too large",
        }
    }
}

/// Parses one request at the start of `buf`. `Ok(None)`: incomplete, read more.
pub fn parse(buf: &[u8]) -> Result<Option<Request<'_>>, ParseError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > MAX_HEAD_BYTES {
                Err(ParseError::HeadTooLarge)
            } else {
                Ok(None)
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(_) => return Err(ParseError::Malformed),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(ParseError::HeadTooLarge);
    }
    let http10 = req.version == Some(0);
    let mut close = false;
    let mut keep_alive_token = false;
    let mut body_len = 0usize;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive_token = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            body_len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .ok_or(ParseError::Malformed)?;
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // No endpoint takes a body; a chunked one cannot be skipped cheaply.
            return Err(ParseError::Malformed);
        }
    }
    if body_len > MAX_BODY_BYTES {
        return Err(ParseError::Malformed);
    }
    let len = head_len + body_len;
    if buf.len() < len {
        return Ok(None);
    }
    let keep_alive = if http10 {
        keep_alive_token && !close
    } else {
        !close
    };
    Ok(Some(Request {
        method: req.method.ok_or(ParseError::Malformed)?,
        target: req.path.ok_or(ParseError::Malformed)?,
        http10,
        keep_alive,
        len,
    }))
}

/// The `Connection` header a response carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// None: HTTP/1.1 keep-alive is implied.
    Implied,
    /// `Connection: keep-alive`: an HTTP/1.0 client asked for it (ApacheBench
    /// `-k` reuses a connection only when it sees this).
    KeepAlive,
    /// `Connection: close`: the server closes after this response.
    Close,
}

impl Connection {
    /// The header for a response to `req`.
    pub fn for_request(req: &Request<'_>) -> Connection {
        match (req.keep_alive, req.http10) {
            (false, _) => Connection::Close,
            (true, true) => Connection::KeepAlive,
            (true, false) => Connection::Implied,
        }
    }
}

fn status_line(status: u16) -> &'static [u8] {
    match status {
        200 => b"HTTP/1.1 200 OK\r\n",
        400 => b"HTTP/1.1 400 Bad Request\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        405 => b"HTTP/1.1 405 Method Not Allowed\r\n",
        408 => b"HTTP/1.1 408 Request Timeout\r\n",
        431 => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        500 => b"HTTP/1.1 500 Internal Server Error\r\n",
        503 => b"HTTP/1.1 503 Service Unavailable\r\n",
        _ => b"HTTP/1.1 500 Internal Server Error\r\n",
    }
}

/// Appends a complete response to `out`: status line, `Server`, `Date`,
/// `Content-Type`, `Content-Length`, `Connection` when needed, `Allow` on
/// 405, then the body unless `head_only`.
pub fn encode(out: &mut Vec<u8>, server: &str, resp: &Response, head_only: bool, conn: Connection) {
    let body = resp.body.as_bytes();
    out.reserve(160 + body.len());
    out.extend_from_slice(status_line(resp.status));
    out.extend_from_slice(b"Server: ");
    out.extend_from_slice(server.as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    date::with_date(|d| out.extend_from_slice(d));
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(resp.content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(Digits::of(body.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    match conn {
        Connection::Implied => {}
        Connection::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Connection::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
    if resp.status == 405 {
        let _ = write!(out, "Allow: {ALLOW}\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// Appends the answer to a request that could not be parsed (always closes).
pub fn encode_error(out: &mut Vec<u8>, server: &str, err: ParseError) {
    let resp = Response::text(err.status(), err.reason());
    encode(out, server, &resp, false, Connection::Close);
}

/// Decimal digits of `n` without allocating.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn of(mut n: usize) -> Digits {
        let mut buf = [0u8; 20];
        let mut start = buf.len();
        loop {
            start -= 1;
            buf[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Digits { buf, start }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_keep_alive_request() {
        let buf = b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /";
        let r = parse(buf).unwrap().unwrap();
        assert_eq!(
            (r.method, r.target, r.http10, r.keep_alive),
            ("GET", "/hello", false, true)
        );
        assert_eq!(r.len, buf.len() - 5);
        assert_eq!(parse(&buf[r.len..]), Ok(None));
    }

    #[test]
    fn connection_semantics() {
        let r = parse(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!r.keep_alive);
        assert_eq!(Connection::for_request(&r), Connection::Close);
        let r = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive);
        let r = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.keep_alive && r.http10);
        assert_eq!(Connection::for_request(&r), Connection::KeepAlive);
    }

    #[test]
    fn bodies_are_skipped() {
        let buf = b"POST /hello HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET";
        let r = parse(buf).unwrap().unwrap();
        assert_eq!(&buf[r.len..], b"GET");
        assert_eq!(parse(&buf[..buf.len() - 5]), Ok(None));
    }

    #[test]
    fn malformed_and_oversized() {
        assert_eq!(parse(b"GARBAGE\r\n\r\n"), Err(ParseError::Malformed));
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"),
            Err(ParseError::Malformed)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Err(ParseError::Malformed)
        );
        let mut big = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert_eq!(parse(&big), Err(ParseError::HeadTooLarge));
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn encodes_a_response() {
        let mut out = Vec::new();
        encode(
            &mut out,
            "t",
            &Response::text(200, b"Hello World"),
            false,
            Connection::KeepAlive,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\nServer: t\r\nDate: "),
            "{text}"
        );
        assert!(text.ends_with(
            "\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: keep-alive\r\n\r\nHello World"
        ));
        let mut out = Vec::new();
        encode(
            &mut out,
            "t",
            &Response::text(405, b"no"),
            true,
            Connection::Implied,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Allow: GET, HEAD\r\n") && text.contains("Content-Length: 2\r\n"));
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body: {text}");
    }
}
