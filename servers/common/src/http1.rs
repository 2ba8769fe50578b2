//! A minimal, strict HTTP/1.1 server codec: enough for the contract, fast on
//! the hot path (no allocation per request), shared by the coroutine and
//! worker-pool servers.
//!
//! Parsing is `httparse` on the connection's read buffer; a request borrows
//! from that buffer, its body included (framed by Content-Length or
//! chunked, RFC 9112 §6, §7.1; a chunked body is checked in place and
//! decoded only when a route reads it, [`Request::body`]). Encoding appends
//! to the connection's write buffer, so pipelined requests are answered
//! with one write.

use std::borrow::Cow;
use std::io::Write;

use workloads::{Response, ALLOW};

use crate::date;

/// Largest request head (request line + headers) accepted: 8 KiB. Beyond it: 431.
pub const MAX_HEAD_BYTES: usize = 8 * 1024;
/// Most header fields accepted in one request. Beyond it: 431.
pub const MAX_HEADERS: usize = 64;
/// Largest request body accepted (decoded): the contract's `/echo` bound,
/// 1 MiB. Beyond it: 413, and the connection closed.
pub const MAX_BODY_BYTES: usize = workloads::echo::MAX_BYTES;
/// What a chunked body's framing (size lines, extensions, trailers) may
/// add on the wire to [`MAX_BODY_BYTES`]: 64 KiB, a 1 MiB body in chunks
/// of 1 KiB or more. Beyond it: 413 as well.
pub const MAX_CHUNK_FRAMING_BYTES: usize = 64 * 1024;
/// The most bytes one request occupies in a read buffer before it is
/// either complete or refused: a connection's buffer never needs more
/// (plus one byte, so that an over-long head is seen as such).
pub const MAX_REQUEST_BYTES: usize = MAX_HEAD_BYTES + MAX_BODY_BYTES + MAX_CHUNK_FRAMING_BYTES + 16;
/// Longest chunk-size line (size and extensions) accepted.
pub const MAX_CHUNK_LINE: usize = 1024;

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
    /// The body's length, decoded.
    pub body_len: usize,
    /// The body as it lies in the buffer.
    pub body: RequestBody<'b>,
}

/// A request body as framed in the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody<'b> {
    /// Content-Length (or none: empty): the bytes themselves.
    Plain(&'b [u8]),
    /// Chunked, already checked: the chunked section as received.
    Chunked(&'b [u8]),
}

impl<'b> RequestBody<'b> {
    /// The body's bytes: borrowed, or decoded from its chunks.
    pub fn bytes(&self) -> Cow<'b, [u8]> {
        match *self {
            RequestBody::Plain(b) => Cow::Borrowed(b),
            RequestBody::Chunked(raw) => {
                let mut out = Vec::new();
                scan_chunked(raw, |data| out.extend_from_slice(data))
                    .expect("a chunked body is checked when its request is parsed");
                Cow::Owned(out)
            }
        }
    }
}

impl Request<'_> {
    /// The body's bytes ([`RequestBody::bytes`]).
    pub fn body(&self) -> Cow<'_, [u8]> {
        self.body.bytes()
    }
}

/// Why a request cannot be served; the connection is closed after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// 400: not HTTP/1.x, a bad header, a bad or conflicting Content-Length,
    /// Host missing (HTTP/1.1), repeated or invalid, Transfer-Encoding with
    /// Content-Length or in HTTP/1.0, chunked not the last coding.
    Malformed,
    /// 431: head over [`MAX_HEAD_BYTES`] or more than [`MAX_HEADERS`] fields.
    HeadTooLarge,
    /// 413: a body over [`MAX_BODY_BYTES`] (or its chunked framing over
    /// [`MAX_CHUNK_FRAMING_BYTES`] more).
    BodyTooLarge,
    /// 501: a transfer coding other than chunked (RFC 9112 §6.1), or
    /// chunked from a server that does not implement it (may_minihttp).
    UnknownCoding,
}

impl ParseError {
    pub fn status(self) -> u16 {
        match self {
            ParseError::Malformed => 400,
            ParseError::HeadTooLarge => 431,
            ParseError::BodyTooLarge => 413,
            ParseError::UnknownCoding => 501,
        }
    }

    pub fn reason(self) -> &'static [u8] {
        match self {
            ParseError::Malformed => b"malformed request",
            ParseError::HeadTooLarge => b"request header fields too large",
            ParseError::BodyTooLarge => b"request body over 1 MiB",
            ParseError::UnknownCoding => b"transfer coding not implemented",
        }
    }
}

/// Whether a Host value is `uri-host [ ":" port ]` as far as its characters
/// go (RFC 9110 §7.2, RFC 3986 §3.2.2: unreserved, percent-encoded,
/// sub-delims, an IP literal's brackets and colons). Empty is not: an
/// `http` URI with an empty host is invalid (RFC 9110 §4.2.1), and this
/// server's resources are `http` ones.
pub fn valid_host(value: &[u8]) -> bool {
    !value.is_empty()
        && value
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b))
}

/// A Content-Length value: `1*DIGIT`, or a list of equal ones (`5, 5`,
/// which RFC 9112 §6.3 lets a recipient read as one). `None`: invalid
/// (a sign, a non-digit, conflicting values, an overflow).
pub fn content_length(value: &[u8]) -> Option<usize> {
    let mut length = None;
    for item in value.split(|&b| b == b',') {
        let digits = item.trim_ascii();
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        match length {
            Some(m) if m != n => return None,
            _ => length = Some(n),
        }
    }
    length
}

/// What the Transfer-Encoding fields of a request say, in order.
#[derive(Default)]
struct Codings {
    present: bool,
    chunked: usize,
    other: bool,
    last_is_chunked: bool,
}

impl Codings {
    fn add(&mut self, value: &[u8]) {
        self.present = true;
        for coding in value.split(|&b| b == b',') {
            let coding = coding.trim_ascii();
            if coding.is_empty() {
                continue;
            }
            let chunked = coding.eq_ignore_ascii_case(b"chunked");
            self.chunked += usize::from(chunked);
            self.other |= !chunked;
            self.last_is_chunked = chunked;
        }
    }

    /// The refusal of a request with these codings (RFC 9112 §6.1, §6.3);
    /// `None` for a body that is chunked and nothing else.
    fn refusal(&self, http10: bool, content_length: bool) -> Option<ParseError> {
        if http10 || content_length || !self.last_is_chunked || self.chunked > 1 {
            Some(ParseError::Malformed)
        } else if self.other {
            Some(ParseError::UnknownCoding)
        } else {
            None
        }
    }
}

/// What a request's header fields say of its framing and its connection,
/// checked as RFC 9112 requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields {
    /// From Content-Length (0 without one, or when chunked).
    pub body_len: usize,
    /// `Transfer-Encoding: chunked`: the body's length is known only as
    /// its chunks come.
    pub chunked: bool,
    /// `Connection: close`.
    pub close: bool,
    /// `Connection: keep-alive`.
    pub keep_alive_token: bool,
}

impl Fields {
    /// Whether the connection stays open after the answer: HTTP/1.1 unless
    /// `close`; HTTP/1.0 only with `keep-alive`.
    pub fn keep_alive(&self, http10: bool) -> bool {
        !self.close && (!http10 || self.keep_alive_token)
    }
}

/// Checks a request's header fields (name, value): Host exactly once in
/// HTTP/1.1 and at most once in 1.0, with a valid value (RFC 9112 §3.2);
/// Content-Length digits only and never conflicting (§6.3); over
/// [`MAX_BODY_BYTES`] 413; Transfer-Encoding chunked alone is a chunked
/// body, another coding 501, and 400 with Content-Length, in HTTP/1.0 or
/// with chunked not last (§6.1, §6.3).
pub fn check_fields<'a>(
    http10: bool,
    fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Fields, ParseError> {
    let mut close = false;
    let mut keep_alive_token = false;
    let mut length: Option<usize> = None;
    let mut codings = Codings::default();
    let mut hosts = 0;
    for (name, value) in fields {
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive_token = true;
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let n = content_length(value).ok_or(ParseError::Malformed)?;
            if length.is_some_and(|m| m != n) {
                return Err(ParseError::Malformed);
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            codings.add(value);
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            if !valid_host(value) {
                return Err(ParseError::Malformed);
            }
        }
    }
    if hosts > 1 || (hosts == 0 && !http10) {
        return Err(ParseError::Malformed);
    }
    if codings.present {
        if let Some(refusal) = codings.refusal(http10, length.is_some()) {
            return Err(refusal);
        }
    }
    let body_len = length.unwrap_or(0);
    if body_len > MAX_BODY_BYTES {
        return Err(ParseError::BodyTooLarge);
    }
    Ok(Fields {
        body_len,
        chunked: codings.present,
        close,
        keep_alive_token,
    })
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
        // A head over the limit is refused as too large as soon as more
        // than the limit is read without its end: answer it so when its
        // error lies after the limit, however it was split into reads.
        Err(_) if buf.len() > MAX_HEAD_BYTES && incomplete(&buf[..=MAX_HEAD_BYTES]) => {
            return Err(ParseError::HeadTooLarge)
        }
        Err(_) => return Err(ParseError::Malformed),
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(ParseError::HeadTooLarge);
    }
    let http10 = req.version == Some(0);
    let fields = check_fields(http10, req.headers.iter().map(|h| (h.name, h.value)))?;
    let rest = &buf[head_len..];
    let (body, body_len) = if fields.chunked {
        match scan_chunked(rest, |_| {})? {
            Some((wire, decoded)) => (RequestBody::Chunked(&rest[..wire]), decoded),
            None => return Ok(None),
        }
    } else {
        match rest.get(..fields.body_len) {
            Some(b) => (RequestBody::Plain(b), fields.body_len),
            None => return Ok(None),
        }
    };
    let len = head_len + body_len_on_wire(&body);
    let keep_alive = fields.keep_alive(http10);
    Ok(Some(Request {
        method: req.method.ok_or(ParseError::Malformed)?,
        target: req.path.ok_or(ParseError::Malformed)?,
        http10,
        keep_alive,
        len,
        body_len,
        body,
    }))
}

fn body_len_on_wire(body: &RequestBody<'_>) -> usize {
    match body {
        RequestBody::Plain(b) | RequestBody::Chunked(b) => b.len(),
    }
}

/// Scans a chunked body at the start of `buf` (RFC 9112 §7.1), handing
/// each chunk's data to `data`: `Ok(Some((wire, decoded)))` once it is
/// complete (its last chunk and trailer section included), `Ok(None)`
/// while it is not. Refused (400, the connection to close): a size line
/// that is not [`chunk_size`]'s grammar (bare hex, then only well-formed
/// extensions) or not ended by CRLF, chunk data not followed by CRLF, a
/// trailer line without a colon or not ended by CRLF. 413 once the decoded
/// body passes [`MAX_BODY_BYTES`] or its framing
/// [`MAX_CHUNK_FRAMING_BYTES`]. A chunk's size is judged as soon as its
/// line is in, before its data arrives.
pub fn scan_chunked(
    buf: &[u8],
    mut data: impl FnMut(&[u8]),
) -> Result<Option<(usize, usize)>, ParseError> {
    let too_much = |pos: usize, decoded: usize| pos - decoded > MAX_CHUNK_FRAMING_BYTES;
    let mut pos = 0;
    let mut decoded = 0;
    loop {
        let Some(line) = crlf_line(&buf[pos..], MAX_CHUNK_LINE)? else {
            return if too_much(buf.len(), decoded) {
                Err(ParseError::BodyTooLarge)
            } else {
                Ok(None)
            };
        };
        let size = chunk_size(&buf[pos..pos + line])?;
        pos += line + 2;
        // After every line, as while it was incomplete: the answer is the
        // same however the bytes were split into reads.
        if too_much(pos, decoded) {
            return Err(ParseError::BodyTooLarge);
        }
        if size == 0 {
            // The trailer section: field lines up to an empty line.
            loop {
                let Some(line) = crlf_line(&buf[pos..], MAX_HEAD_BYTES)? else {
                    return if too_much(buf.len(), decoded) {
                        Err(ParseError::BodyTooLarge)
                    } else {
                        Ok(None)
                    };
                };
                let field = &buf[pos..pos + line];
                pos += line + 2;
                if !field.is_empty()
                    && (!field.contains(&b':') || field[0] == b' ' || field[0] == b'\t')
                {
                    return Err(ParseError::Malformed);
                }
                if too_much(pos, decoded) {
                    return Err(ParseError::BodyTooLarge);
                }
                if field.is_empty() {
                    return Ok(Some((pos, decoded)));
                }
            }
        }
        if size > MAX_BODY_BYTES - decoded {
            return Err(ParseError::BodyTooLarge);
        }
        let Some(chunk) = buf.get(pos..pos + size + 2) else {
            // The data may still come; what came must not be a CRLF early.
            return Ok(None);
        };
        if &chunk[size..] != b"\r\n" {
            return Err(ParseError::Malformed);
        }
        data(&chunk[..size]);
        decoded += size;
        pos += size + 2;
    }
}

/// The length of the line at the start of `buf` up to its CRLF (`None`:
/// not ended yet). A bare LF or CR in it, or a line over `max`, is refused.
fn crlf_line(buf: &[u8], max: usize) -> Result<Option<usize>, ParseError> {
    match buf.iter().take(max + 2).position(|&b| b == b'\n') {
        Some(i) if i > 0 && buf[i - 1] == b'\r' && !buf[..i - 1].contains(&b'\r') => {
            Ok(Some(i - 1))
        }
        Some(_) => Err(ParseError::Malformed),
        None if buf.len() > max + 1 => Err(ParseError::Malformed),
        None if buf
            .iter()
            .take(buf.len().saturating_sub(1))
            .any(|&b| b == b'\r') =>
        {
            Err(ParseError::Malformed)
        }
        None => Ok(None),
    }
}

/// A chunk-size line's size (the line without its CRLF), as RFC 9112
/// §7.1.1 writes it: `chunk-size [ chunk-ext ]`, `chunk-size = 1*HEXDIG`,
/// `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`,
/// a name a token, a value a token or a quoted-string. Extensions are
/// checked, then ignored as §7.1.1 requires. Anything else (a bare `;`, a
/// name that is not a token, a control character, whitespace not followed
/// by `;`) is [`ParseError::Malformed`]; a size over 64 bits
/// [`ParseError::BodyTooLarge`].
pub fn chunk_size(line: &[u8]) -> Result<usize, ParseError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || !chunk_extensions_valid(&line[digits..]) {
        return Err(ParseError::Malformed);
    }
    let hex = &line[..digits];
    let significant = &hex[hex.iter().take_while(|&&b| b == b'0').count()..];
    if significant.len() > 16 {
        return Err(ParseError::BodyTooLarge);
    }
    let size = significant.iter().fold(0u64, |n, &b| {
        n << 4 | u64::from((b as char).to_digit(16).unwrap_or(0))
    });
    Ok(usize::try_from(size).unwrap_or(usize::MAX))
}

/// Whether `ext` is a `chunk-ext` (RFC 9112 §7.1.1), empty included.
fn chunk_extensions_valid(ext: &[u8]) -> bool {
    fn bws(b: &[u8]) -> &[u8] {
        let n = b.iter().take_while(|&&c| c == b' ' || c == b'\t').count();
        &b[n..]
    }
    fn token(b: &[u8]) -> Option<&[u8]> {
        let n = b.iter().take_while(|&&c| is_tchar(c)).count();
        (n > 0).then_some(&b[n..])
    }
    fn extensions(mut ext: &[u8]) -> Option<()> {
        while !ext.is_empty() {
            let name = bws(bws(ext).strip_prefix(b";")?);
            let rest = token(name)?;
            ext = match bws(rest).strip_prefix(b"=") {
                None => rest,
                Some(value) if bws(value).first() == Some(&b'"') => quoted_string(bws(value))?,
                Some(value) => token(bws(value))?,
            };
        }
        Some(())
    }
    extensions(ext).is_some()
}

/// `tchar` (RFC 9110 §5.6.2): the characters of a token.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The rest of `b` after the quoted-string it starts with (RFC 9110
/// §5.6.4): `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, no control
/// character but HTAB. `None`: not one.
fn quoted_string(b: &[u8]) -> Option<&[u8]> {
    let text = |c: u8| c == b'\t' || c == b' ' || (0x21..=0x7e).contains(&c) || c >= 0x80;
    let mut i = 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return Some(&b[i + 1..]),
            b'\\' => {
                if !b.get(i + 1).is_some_and(|&q| text(q)) {
                    return None;
                }
                i += 2;
            }
            c if text(c) => i += 1,
            _ => return None,
        }
    }
    None
}

/// Whether `buf` is the start of a request head, not yet complete.
fn incomplete(buf: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    matches!(
        httparse::Request::new(&mut headers).parse(buf),
        Ok(httparse::Status::Partial)
    )
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
        411 => b"HTTP/1.1 411 Length Required\r\n",
        413 => b"HTTP/1.1 413 Content Too Large\r\n",
        408 => b"HTTP/1.1 408 Request Timeout\r\n",
        431 => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        500 => b"HTTP/1.1 500 Internal Server Error\r\n",
        501 => b"HTTP/1.1 501 Not Implemented\r\n",
        503 => b"HTTP/1.1 503 Service Unavailable\r\n",
        _ => b"HTTP/1.1 500 Internal Server Error\r\n",
    }
}

/// Appends a complete response to `out`: status line, `Server`, `Date`,
/// `Content-Type`, `Content-Length`, `Connection` when needed, `Allow` on
/// 405, then the body unless `head_only`.
pub fn encode(out: &mut Vec<u8>, server: &str, resp: &Response, head_only: bool, conn: Connection) {
    encode_allowing(out, server, resp, head_only, conn, ALLOW);
}

/// As [`encode`], with this `Allow` value on a 405 (the methods of the
/// request's target: [`workloads::allow`]).
pub fn encode_allowing(
    out: &mut Vec<u8>,
    server: &str,
    resp: &Response,
    head_only: bool,
    conn: Connection,
    allow: &str,
) {
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
        let _ = write!(out, "Allow: {allow}\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// Whether the request at the start of `buf` says `HEAD`, as far as its
/// request line has come (after the empty lines a server may skip, RFC
/// 9112 §2.2). For the answer to a request the codec refuses: a response
/// to HEAD carries no content, error responses included (RFC 9110 §9.3.2).
pub fn requests_head(buf: &[u8]) -> bool {
    let start = buf
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len());
    buf[start..].starts_with(b"HEAD ")
}

/// Appends the answer to a request that could not be parsed (always
/// closes). `head_only`: the request said HEAD ([`requests_head`]), so the
/// reason is not sent; Content-Length still states its length.
pub fn encode_error(out: &mut Vec<u8>, server: &str, err: ParseError, head_only: bool) {
    let resp = Response::text(err.status(), err.reason());
    encode(out, server, &resp, head_only, Connection::Close);
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
        let r = parse(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
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
    fn bodies_are_framed_by_content_length() {
        let buf = b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET";
        let r = parse(buf).unwrap().unwrap();
        assert_eq!(&buf[r.len..], b"GET");
        assert_eq!((r.body_len, &*r.body()), (3, &b"abc"[..]));
        assert_eq!(parse(&buf[..buf.len() - 5]), Ok(None));
        let r = parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(r.body, RequestBody::Plain(b""));
    }

    fn chunked(body: &str) -> String {
        format!("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
    }

    #[test]
    fn chunked_bodies_are_decoded_in_any_reads() {
        let raw = chunked("5\r\nhello\r\nA;ext=1\r\n, world!!!\r\n0\r\nX-Trailer: 1\r\n\r\nGET");
        let r = parse(raw.as_bytes()).unwrap().unwrap();
        assert_eq!(&raw.as_bytes()[r.len..], b"GET");
        assert_eq!((r.body_len, &*r.body()), (15, &b"hello, world!!!"[..]));
        for end in 0..r.len {
            assert_eq!(parse(&raw.as_bytes()[..end]), Ok(None), "{end} bytes read");
        }
        let empty = chunked("000\r\n\r\n");
        assert_eq!(parse(empty.as_bytes()).unwrap().unwrap().body_len, 0);
        assert_eq!(
            parse(chunked("1 ; a = b\r\nx\r\n0\r\n\r\n").as_bytes()).map(|r| r.map(|r| r.body_len)),
            Ok(Some(1)),
            "whitespace before an extension (BWS)"
        );
    }

    #[test]
    fn bad_chunk_framing_is_refused() {
        for bad in [
            "zz\r\nhello\r\n0\r\n\r\n",
            "\r\nhello\r\n0\r\n\r\n",
            "0x5\r\nhello\r\n0\r\n\r\n",
            "-5\r\nhello\r\n0\r\n\r\n",
            "+5\r\nhello\r\n0\r\n\r\n",
            "5 \r\nhello\r\n0\r\n\r\n",
            "3\r\nhello\r\n0\r\n\r\n",
            "5\nhello\r\n0\r\n\r\n",
            "5\r\nhello\n0\r\n\r\n",
            "5\rx\r\nhello\r\n0\r\n\r\n",
            "0\r\nno colon\r\n\r\n",
            "0\r\nA: b\n\r\n",
            "0\r\n\n",
        ] {
            assert_eq!(
                parse(chunked(bad).as_bytes()),
                Err(ParseError::Malformed),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse(chunked("10000000000000005\r\nhello").as_bytes()),
            Err(ParseError::BodyTooLarge),
            "a size over 64 bits"
        );
    }

    /// RFC 9112 §7.1.1: `chunk-size [ chunk-ext ]`, each extension
    /// `BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ]`.
    #[test]
    fn chunk_lines_follow_the_grammar_exactly() {
        for good in [
            "5",
            "05",
            "5;a",
            "5;a=1",
            "5 ; a = b",
            "5\t;\ta\t=\tb",
            "5;a;b=c;d=\"q\"",
            "5;a=\"sp ace, \\\" and \\\\\"",
            "5;a=\"\"",
            "5;!#$%&'*+-.^_`|~=x",
        ] {
            assert_eq!(chunk_size(good.as_bytes()), Ok(5), "{good:?}");
        }
        for bad in [
            "",
            "5 ",
            "5\t",
            "5;",
            "5 ;",
            "5;;a",
            "5;=x",
            "5;a=",
            "5;a b",
            "5;a(b",
            "5;a=b c",
            "5;a=\"open",
            "5;a=\"x\"y",
            "5;a\x01",
            "5;a=\x7f",
            "5;a=\"\x01\"",
            "5;a=\"\\\x00\"",
            "5;a\u{80}",
            "5x",
            "5,a",
        ] {
            assert_eq!(
                chunk_size(bad.as_bytes()),
                Err(ParseError::Malformed),
                "{bad:?}"
            );
            assert_eq!(
                parse(chunked(&format!("{bad}\r\nhello\r\n0\r\n\r\n")).as_bytes()),
                Err(ParseError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bodies_over_the_bound_are_413_before_they_are_read() {
        let over = MAX_BODY_BYTES + 1;
        let cl = format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {over}\r\n\r\n");
        assert_eq!(parse(cl.as_bytes()), Err(ParseError::BodyTooLarge));
        let cl =
            format!("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_BODY_BYTES}\r\n\r\n");
        assert_eq!(parse(cl.as_bytes()), Ok(None), "exactly the bound: read on");
        let at_bound = chunked(&format!("{:x}\r\n", MAX_BODY_BYTES));
        assert_eq!(parse(at_bound.as_bytes()), Ok(None));
        let mut raw = chunked(&format!("{:x}\r\n", MAX_BODY_BYTES)).into_bytes();
        raw.extend(std::iter::repeat_n(b'a', MAX_BODY_BYTES));
        raw.extend_from_slice(b"\r\n1\r\n");
        assert_eq!(parse(&raw), Err(ParseError::BodyTooLarge), "one more chunk");
        // Framing without end: tiny chunks beyond the framing allowance.
        let mut raw = chunked("").into_bytes();
        while raw.len() < 2 * MAX_CHUNK_FRAMING_BYTES {
            raw.extend_from_slice(b"1;padpadpadpadpad\r\nx\r\n");
        }
        assert_eq!(parse(&raw), Err(ParseError::BodyTooLarge));
        assert!(raw.len() < MAX_REQUEST_BYTES);
    }

    /// Whatever the reads: a prefix of a request the codec accepts is
    /// incomplete, and one of a request it refuses is incomplete or refused
    /// (never accepted), near the framing bound too (as fuzz/http1_request).
    #[test]
    fn chunked_answers_do_not_depend_on_the_reads() {
        // Tiny chunks up to 2 bytes below the framing bound: the last
        // chunk's line crosses it, the rest of the reads with it.
        let mut near_bound = chunked("").into_bytes();
        let head = near_bound.len();
        let framing = |raw: &[u8], chunks: usize| raw.len() - head - chunks;
        let mut chunks = 0;
        while framing(&near_bound, chunks) + 1 < MAX_CHUNK_FRAMING_BYTES - 2 {
            near_bound.extend_from_slice(b"1\r\nx\r\n");
            chunks += 1;
        }
        near_bound.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(parse(&near_bound), Err(ParseError::BodyTooLarge));
        for raw in [
            near_bound,
            chunked("5\r\nhello\r\n0\r\nA: b\r\n\r\nGET").into_bytes(),
            chunked("5\r\nhel\r\n0\r\n\r\n").into_bytes(),
            chunked("5\r\nhello\r\n0\r\nno colon\r\n\r\n").into_bytes(),
        ] {
            let whole = parse(&raw);
            for k in (0..raw.len()).filter(|k| *k < 256 || k % 61 == 0 || k + 64 > raw.len()) {
                match (&whole, parse(&raw[..k])) {
                    (Ok(Some(r)), Ok(None)) if k < r.len => {}
                    (Ok(Some(r)), Ok(Some(p))) if k >= r.len => assert_eq!(*r, p),
                    (Err(_), Ok(None) | Err(_)) => {}
                    (w, p) => panic!("{k} of {} bytes: whole {w:?}, prefix {p:?}", raw.len()),
                }
            }
        }
    }

    #[test]
    fn host_is_required_once_and_valid() {
        let req = |host: &str| {
            parse(format!("GET / HTTP/1.1\r\n{host}\r\n").as_bytes()).map(|r| r.is_some())
        };
        assert_eq!(req(""), Err(ParseError::Malformed), "missing in 1.1");
        assert_eq!(req("Host: a\r\nHost: b\r\n"), Err(ParseError::Malformed));
        assert_eq!(req("Host: a b\r\n"), Err(ParseError::Malformed));
        assert_eq!(req("Host: my_host:8080\r\n"), Ok(true));
        assert_eq!(req("Host: [::1]:80\r\n"), Ok(true));
        assert_eq!(req("Host:\r\n"), Err(ParseError::Malformed), "empty");
        assert_eq!(req("Host: \r\n"), Err(ParseError::Malformed), "empty");
        assert!(
            parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().is_some(),
            "1.0 needs none"
        );
    }

    #[test]
    fn content_length_is_digits_and_agrees_with_itself() {
        assert_eq!(content_length(b" 12 "), Some(12));
        assert_eq!(content_length(b"5, 5"), Some(5));
        for bad in [
            &b"+5"[..],
            b"-1",
            b"5, 6",
            b"",
            b"0x5",
            b"99999999999999999999999",
        ] {
            assert_eq!(
                content_length(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let two = |a: &str, b: &str| {
            let buf = format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {a}\r\nContent-Length: {b}\r\n\r\nabc"
            );
            // The whole buffer is the request: its body is the 3 octets.
            parse(buf.as_bytes()).map(|r| r.map(|r| r.len == buf.len()))
        };
        assert_eq!(two("3", "3"), Ok(Some(true)));
        assert_eq!(two("1", "3"), Err(ParseError::Malformed));
    }

    #[test]
    fn transfer_codings_are_refused_as_rfc_9112_says() {
        let te = |version: &str, fields: &str| {
            parse(format!("POST / HTTP/{version}\r\nHost: x\r\n{fields}\r\n").as_bytes())
                .map(|r| r.map(|r| r.len))
        };
        let chunked = "Transfer-Encoding: chunked\r\n";
        assert_eq!(te("1.1", chunked), Ok(None), "chunked: its chunks follow");
        assert_eq!(
            te(
                "1.1",
                "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
            ),
            Err(ParseError::UnknownCoding)
        );
        assert_eq!(
            te("1.1", "Transfer-Encoding: chunked, gzip\r\n"),
            Err(ParseError::Malformed)
        );
        assert_eq!(
            te("1.1", "Transfer-Encoding: chunked, chunked\r\n"),
            Err(ParseError::Malformed)
        );
        assert_eq!(
            te("1.1", &format!("Content-Length: 5\r\n{chunked}")),
            Err(ParseError::Malformed)
        );
        assert_eq!(te("1.0", chunked), Err(ParseError::Malformed));
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
    fn head_is_told_from_the_request_line() {
        assert!(requests_head(b"HEAD /url HTTP/1.1\r\n\r\n"));
        assert!(requests_head(b"\r\nHEAD /"), "after an empty line");
        assert!(requests_head(b"HEAD "), "a request line not complete yet");
        for not_head in [
            &b"GET / HTTP/1.1"[..],
            b"HEADX / HTTP/1.1",
            b"head /",
            b"HEA",
            b"",
        ] {
            assert!(!requests_head(not_head), "{not_head:?}");
        }
    }

    /// RFC 9110 §9.3.2: no content in a response to HEAD, error responses
    /// included; the codec refuses `HEAD /url HTTP/1.1` without Host.
    #[test]
    fn an_error_answer_to_head_has_no_content() {
        let req = b"HEAD /url HTTP/1.1\r\n\r\n";
        let err = parse(req).unwrap_err();
        let mut out = Vec::new();
        encode_error(&mut out, "t", err, requests_head(req));
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
        assert!(
            text.contains("Content-Length: 17\r\nConnection: close\r\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\r\n\r\n"),
            "no content after the head: {text}"
        );
        let mut out = Vec::new();
        encode_error(&mut out, "t", err, false);
        assert!(out.ends_with(b"\r\n\r\nmalformed request"));
    }

    /// Found by fuzz/ (http1_pipelined): a head over 8 KiB whose error (a
    /// field line without a colon) lies past the limit was 400 read at
    /// once and 431 read in pieces. The same answer now, in any reads.
    #[test]
    fn an_oversized_malformed_head_gets_one_answer_in_any_reads() {
        let mut req = b"GET /hello HTTP/1.1\r\nHost: verify\r\nX-Pa".to_vec();
        req.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        req.extend_from_slice(b"\r\n\r\nGET /hello HTTP/1.1\r\nHost: verify\r\n\r\n");
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge), "at once");
        for end in MAX_HEAD_BYTES + 1..req.len() {
            assert_eq!(
                parse(&req[..end]),
                Err(ParseError::HeadTooLarge),
                "{end} bytes read"
            );
        }
        // An error within the limit is a malformed request, read at once or not.
        let mut bad = b"GET /hello HTTP/1.1\r\nBad Header\r\nX-Pad: ".to_vec();
        bad.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        assert_eq!(parse(&bad), Err(ParseError::Malformed));
        bad.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse(&bad), Err(ParseError::Malformed));
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
