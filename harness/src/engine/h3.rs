//! HTTP/3's framing and the part of QPACK a load generator needs, sans-IO
//! (RFC 9114, RFC 9204): a request encoded once per path as a HEADERS
//! frame (and a DATA frame for a body), and a response read from its
//! stream's bytes as they come — its status, Content-Length and body
//! checked against the path's expectation without keeping the body.
//!
//! QPACK here is the static table and literals only: the client's SETTINGS
//! leave the dynamic table's capacity at 0, so a conforming server's field
//! sections reference nothing else (one that does is a malformed response).
//! Huffman-coded strings are decoded by `engine::huffman` (HPACK's code,
//! which QPACK shares).

use super::huffman;

/// Frame types (RFC 9114 §7.2).
const DATA: u64 = 0x00;
const HEADERS: u64 = 0x01;
const SETTINGS: u64 = 0x04;
/// The unidirectional stream type of a control stream.
const CONTROL_STREAM: u64 = 0x00;

/// Bigger frames than this in a response are refused (a field section
/// is read whole; DATA never is).
const MAX_HEADERS: usize = 64 * 1024;

/// QPACK static table (RFC 9204 Appendix A): the indices used here.
const STATIC_AUTHORITY: u64 = 0;
const STATIC_PATH_SLASH: u64 = 1;
const STATIC_CONTENT_LENGTH: u64 = 4;
const STATIC_CONTENT_TYPE: u64 = 44;
const STATIC_SCHEME_HTTPS: u64 = 23;
const STATIC_METHOD_CONNECT: u64 = 15;

/// The static table's `:status` entries: (index, status).
const STATIC_STATUS: [(u64, u16); 14] = [
    (24, 103),
    (25, 200),
    (26, 304),
    (27, 404),
    (28, 503),
    (63, 100),
    (64, 204),
    (65, 206),
    (66, 302),
    (67, 400),
    (68, 403),
    (69, 421),
    (70, 425),
    (71, 500),
];

/// The static table's `:method` entries.
const STATIC_METHOD: [(u64, &str); 7] = [
    (15, "CONNECT"),
    (16, "DELETE"),
    (17, "GET"),
    (18, "HEAD"),
    (19, "OPTIONS"),
    (20, "POST"),
    (21, "PUT"),
];

/// A QUIC variable-length integer (RFC 9000 §16).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Reads a varint at the start of `b`: its value and length, or `None`
/// when `b` holds only part of it.
pub(crate) fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for &x in &b[1..len] {
        v = (v << 8) | u64::from(x);
    }
    Some((v, len))
}

/// A QPACK/HPACK prefixed integer: `flags` in the bits above the
/// `prefix`-bit field.
fn put_prefixed(out: &mut Vec<u8>, flags: u8, prefix: u32, v: u64) {
    let max = (1u64 << prefix) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = v - max;
    while rest >= 0x80 {
        out.push((rest as u8 & 0x7f) | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Reads a prefixed integer from `b` (its first byte's low `prefix` bits
/// onwards): its value and length.
fn get_prefixed(b: &[u8], prefix: u32) -> Result<(u64, usize), Malformed> {
    let max = (1u64 << prefix) - 1;
    let first = u64::from(*b.first().ok_or(Malformed)?) & max;
    if first < max {
        return Ok((first, 1));
    }
    let mut v = max;
    for (k, &x) in b[1..].iter().enumerate() {
        if k > 8 {
            return Err(Malformed);
        }
        v += u64::from(x & 0x7f) << (7 * k);
        if x & 0x80 == 0 {
            return Ok((v, k + 2));
        }
    }
    Err(Malformed)
}

/// A string literal, not Huffman-coded: `flags` above a `prefix`-bit length.
fn put_string(out: &mut Vec<u8>, flags: u8, prefix: u32, s: &[u8]) {
    put_prefixed(out, flags, prefix, s.len() as u64);
    out.extend_from_slice(s);
}

/// Reads a string literal whose H bit is bit `prefix` of the first byte:
/// its bytes (decoded) and the length read.
fn get_string(b: &[u8], prefix: u32, scratch: &mut Vec<u8>) -> Result<usize, Malformed> {
    let huffman = b.first().ok_or(Malformed)? & (1 << prefix) != 0;
    let (len, n) = get_prefixed(b, prefix)?;
    let end = n.checked_add(len as usize).ok_or(Malformed)?;
    let raw = b.get(n..end).ok_or(Malformed)?;
    scratch.clear();
    if huffman {
        huffman::decode(raw, scratch).map_err(|_| Malformed)?;
    } else {
        scratch.extend_from_slice(raw);
    }
    Ok(end)
}

/// Skips a string literal (its H bit at bit `prefix` of the first byte)
/// without decoding it: the length read.
fn skip_string(b: &[u8], prefix: u32) -> Result<usize, Malformed> {
    let (len, n) = get_prefixed(b, prefix)?;
    let end = n.checked_add(len as usize).ok_or(Malformed)?;
    if end > b.len() {
        return Err(Malformed);
    }
    Ok(end)
}

/// The bytes of a frame: type, length, payload.
fn put_frame(out: &mut Vec<u8>, kind: u64, payload: &[u8]) {
    put_varint(out, kind);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// What the client's control stream carries: its type and an empty
/// SETTINGS frame (every setting at its default: no dynamic table, no
/// blocked streams).
pub(crate) fn control_stream() -> Vec<u8> {
    let mut out = Vec::with_capacity(3);
    put_varint(&mut out, CONTROL_STREAM);
    put_frame(&mut out, SETTINGS, &[]);
    out
}

/// A request's bytes on its stream: HEADERS (and DATA when it has a
/// body), encoded once per path. The stream is finished after them.
pub(crate) fn request(
    method: &str,
    authority: &str,
    target: &str,
    body: &[u8],
    content_type: Option<&str>,
) -> Vec<u8> {
    // Required Insert Count 0, Delta Base 0: the static table only.
    let mut fields = vec![0u8, 0u8];
    match STATIC_METHOD.iter().find(|(_, m)| *m == method) {
        Some((index, _)) => put_prefixed(&mut fields, 0xc0, 6, *index),
        None => {
            put_prefixed(&mut fields, 0x50, 4, STATIC_METHOD_CONNECT);
            put_string(&mut fields, 0, 7, method.as_bytes());
        }
    }
    put_prefixed(&mut fields, 0xc0, 6, STATIC_SCHEME_HTTPS);
    put_prefixed(&mut fields, 0x50, 4, STATIC_AUTHORITY);
    put_string(&mut fields, 0, 7, authority.as_bytes());
    if target == "/" {
        put_prefixed(&mut fields, 0xc0, 6, STATIC_PATH_SLASH);
    } else {
        put_prefixed(&mut fields, 0x50, 4, STATIC_PATH_SLASH);
        put_string(&mut fields, 0, 7, target.as_bytes());
    }
    if let Some(ct) = content_type {
        put_prefixed(&mut fields, 0x50, 4, STATIC_CONTENT_TYPE);
        put_string(&mut fields, 0, 7, ct.as_bytes());
    }
    if !body.is_empty() {
        put_prefixed(&mut fields, 0x50, 4, STATIC_CONTENT_LENGTH);
        put_string(&mut fields, 0, 7, body.len().to_string().as_bytes());
    }
    let mut out = Vec::with_capacity(fields.len() + body.len() + 16);
    put_frame(&mut out, HEADERS, &fields);
    if !body.is_empty() {
        put_frame(&mut out, DATA, body);
    }
    out
}

/// A response that breaks HTTP/3's or QPACK's rules (or uses QPACK's
/// dynamic table, which the client's SETTINGS did not allow).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Malformed;

/// A response as read so far from its request stream.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    /// Bytes of a frame header or a HEADERS payload not yet whole.
    pending: Vec<u8>,
    /// Payload bytes of the current DATA (or skipped) frame still to come.
    data_left: u64,
    skipping: bool,
    pub status: u16,
    pub content_length: Option<u64>,
    pub body_len: u64,
    /// The body so far equals the expected one (true without one).
    pub body_ok: bool,
    /// A final (non-1xx) HEADERS frame was read.
    pub headed: bool,
    /// A decoded field name and value (kept: no allocation per response
    /// once a reader is reused, see [`ResponseReader::reset`]).
    scratch: Vec<u8>,
    value: Vec<u8>,
}

impl ResponseReader {
    pub(crate) fn new() -> ResponseReader {
        ResponseReader {
            pending: Vec::new(),
            data_left: 0,
            skipping: false,
            status: 0,
            content_length: None,
            body_len: 0,
            body_ok: true,
            headed: false,
            scratch: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Ready for the next response, its buffers kept.
    pub(crate) fn reset(&mut self) {
        self.pending.clear();
        self.data_left = 0;
        self.skipping = false;
        self.status = 0;
        self.content_length = None;
        self.body_len = 0;
        self.body_ok = true;
        self.headed = false;
    }

    /// Reads `data`, the stream's next bytes; `expected`: the exact body
    /// the path's check wants, if any. A frame header or field section
    /// split across reads waits in `pending` (DATA never does).
    pub(crate) fn feed(&mut self, data: &[u8], expected: Option<&[u8]>) -> Result<(), Malformed> {
        if self.pending.is_empty() {
            let used = self.consume(data, expected)?;
            self.pending.extend_from_slice(&data[used..]);
        } else {
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(data);
            let used = self.consume(&buf, expected)?;
            buf.drain(..used);
            self.pending = buf;
        }
        Ok(())
    }

    /// Reads the whole frames (and DATA bytes) at the start of `data`:
    /// how many bytes it used.
    fn consume(&mut self, mut data: &[u8], expected: Option<&[u8]>) -> Result<usize, Malformed> {
        let total = data.len();
        loop {
            if self.data_left > 0 {
                let n = (self.data_left as usize).min(data.len());
                if n == 0 {
                    break;
                }
                if !self.skipping {
                    self.body(&data[..n], expected);
                }
                self.data_left -= n as u64;
                data = &data[n..];
                continue;
            }
            let Some((kind, len, used)) = frame_head(data) else {
                break;
            };
            if kind == HEADERS {
                let len = usize::try_from(len).map_err(|_| Malformed)?;
                if len > MAX_HEADERS {
                    return Err(Malformed);
                }
                if data.len() < used + len {
                    break; // the rest of the field section
                }
                self.headers(&data[used..used + len])?;
                data = &data[used + len..];
            } else {
                self.begin(kind, len)?;
                data = &data[used..];
            }
        }
        Ok(total - data.len())
    }

    /// A frame other than HEADERS begins: DATA is the body, the rest
    /// (reserved and unknown types) are skipped.
    fn begin(&mut self, kind: u64, len: u64) -> Result<(), Malformed> {
        if kind == DATA && !self.headed {
            return Err(Malformed); // DATA before the response's head
        }
        self.skipping = kind != DATA;
        self.data_left = len;
        Ok(())
    }

    fn body(&mut self, chunk: &[u8], expected: Option<&[u8]>) {
        if let Some(want) = expected {
            let at = self.body_len as usize;
            self.body_ok = self.body_ok && want.get(at..at + chunk.len()) == Some(chunk);
        }
        self.body_len += chunk.len() as u64;
    }

    /// A HEADERS frame's field section: the final status, Content-Length.
    /// A 1xx head is read and forgotten; trailers are read and ignored.
    fn headers(&mut self, mut b: &[u8]) -> Result<(), Malformed> {
        let (required_insert_count, n) = get_prefixed(b, 8)?;
        if required_insert_count != 0 {
            return Err(Malformed);
        }
        b = &b[n..];
        let (_, n) = get_prefixed(b, 7)?;
        b = &b[n..];
        let trailers = self.headed;
        let mut status = None;
        let mut content_length = None;
        // Only `:status` and Content-Length are decoded; other values
        // are skipped (Huffman decoding was a tenth of the client's CPU).
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut value = std::mem::take(&mut self.value);
        while let Some(&first) = b.first() {
            if first & 0x80 != 0 {
                // Indexed field line; T (0x40) set: the static table.
                if first & 0x40 == 0 {
                    return Err(Malformed);
                }
                let (index, n) = get_prefixed(b, 6)?;
                b = &b[n..];
                if let Some((_, s)) = STATIC_STATUS.iter().find(|(i, _)| *i == index) {
                    status = Some(*s);
                }
            } else if first & 0x40 != 0 {
                // Literal with a name reference; T (0x10): static.
                if first & 0x10 == 0 {
                    return Err(Malformed);
                }
                let (index, n) = get_prefixed(b, 4)?;
                b = &b[n..];
                let is_status = STATIC_STATUS.iter().any(|(i, _)| *i == index);
                if !is_status && index != STATIC_CONTENT_LENGTH {
                    b = &b[skip_string(b, 7)?..];
                    continue;
                }
                let n = get_string(b, 7, &mut value)?;
                b = &b[n..];
                if is_status {
                    status = Some(parse_number(&value)? as u16);
                } else {
                    content_length = Some(parse_number(&value)?);
                }
            } else if first & 0x20 != 0 {
                // Literal with a literal name (H at 0x08).
                let n = get_string(b, 3, &mut scratch)?;
                b = &b[n..];
                let wanted = scratch == b":status" || scratch == b"content-length";
                if !wanted {
                    b = &b[skip_string(b, 7)?..];
                    continue;
                }
                let n = get_string(b, 7, &mut value)?;
                b = &b[n..];
                if scratch == b":status" {
                    status = Some(parse_number(&value)? as u16);
                } else {
                    content_length = Some(parse_number(&value)?);
                }
            } else {
                // Post-base references: the dynamic table.
                return Err(Malformed);
            }
        }
        self.scratch = scratch;
        self.value = value;
        if trailers {
            return Ok(());
        }
        let status = status.ok_or(Malformed)?;
        if (100..200).contains(&status) {
            return Ok(()); // an interim response: the final one follows
        }
        self.status = status;
        self.content_length = content_length;
        self.headed = true;
        Ok(())
    }
}

/// A frame's type and length at the start of `b`, and their bytes.
fn frame_head(b: &[u8]) -> Option<(u64, u64, usize)> {
    let (kind, n) = get_varint(b)?;
    let (len, m) = get_varint(&b[n..])?;
    Some((kind, len, n + m))
}

fn parse_number(b: &[u8]) -> Result<u64, Malformed> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or(Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response as a server would send it: `:status` indexed (or as a
    /// literal with a name reference), a Content-Length literal, DATA.
    fn response(status_field: &[u8], body: &[u8]) -> Vec<u8> {
        let mut fields = vec![0, 0];
        fields.extend_from_slice(status_field);
        put_prefixed(&mut fields, 0x50, 4, STATIC_CONTENT_LENGTH);
        put_string(&mut fields, 0, 7, body.len().to_string().as_bytes());
        let mut out = Vec::new();
        put_frame(&mut out, HEADERS, &fields);
        put_frame(&mut out, 0x21, b"reserved"); // a reserved type, skipped
        put_frame(&mut out, DATA, body);
        out
    }

    #[test]
    fn varints_round_trip_at_each_length() {
        for v in [0, 63, 64, 16_383, 16_384, (1 << 30) - 1, 1 << 30, 1 << 61] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b), Some((v, b.len())));
            assert_eq!(get_varint(&b[..b.len() - 1]), None);
        }
    }

    #[test]
    fn a_response_read_whole_and_byte_by_byte_is_the_same() {
        let bytes = response(&[0xc0 | 25], b"Hello, World!");
        for step in [bytes.len(), 1, 2, 3, 7] {
            let mut r = ResponseReader::new();
            for chunk in bytes.chunks(step) {
                r.feed(chunk, Some(b"Hello, World!")).unwrap();
            }
            assert_eq!(
                (r.status, r.content_length, r.body_len, r.body_ok, r.headed),
                (200, Some(13), 13, true, true),
                "read {step} bytes at a time"
            );
        }
    }

    #[test]
    fn a_different_body_or_status_is_seen() {
        let mut r = ResponseReader::new();
        r.feed(
            &response(&[0xc0 | 25], b"Hello, world!"),
            Some(b"Hello, World!"),
        )
        .unwrap();
        assert!(!r.body_ok);
        // 418 is not in the static table: a literal with :status's name.
        let mut field = Vec::new();
        put_prefixed(&mut field, 0x50, 4, 24);
        put_string(&mut field, 0, 7, b"418");
        let mut r = ResponseReader::new();
        r.feed(&response(&field, b""), None).unwrap();
        assert_eq!(r.status, 418);
    }

    #[test]
    fn an_interim_head_is_skipped_and_the_dynamic_table_refused() {
        let mut b = Vec::new();
        // 100 Continue, then 204: indices 63 and 64 take two bytes each.
        let mut interim = vec![0, 0];
        put_prefixed(&mut interim, 0xc0, 6, 63);
        put_frame(&mut b, HEADERS, &interim);
        let mut no_content = Vec::new();
        put_prefixed(&mut no_content, 0xc0, 6, 64);
        b.extend_from_slice(&response(&no_content, b""));
        let mut r = ResponseReader::new();
        r.feed(&b, None).unwrap();
        assert_eq!(r.status, 204);
        let mut dynamic = Vec::new();
        put_frame(&mut dynamic, HEADERS, &[0, 0, 0x80]); // dynamic index 0
        assert_eq!(ResponseReader::new().feed(&dynamic, None), Err(Malformed));
        let mut early = Vec::new();
        put_frame(&mut early, DATA, b"x");
        assert_eq!(ResponseReader::new().feed(&early, None), Err(Malformed));
    }

    #[test]
    fn other_fields_are_skipped_and_a_reset_reader_reads_the_next_response() {
        // content-type (static 44) with a value that is no valid Huffman
        // code: skipped, never decoded.
        let mut field = vec![0xc0 | 25];
        put_prefixed(&mut field, 0x50, 4, STATIC_CONTENT_TYPE);
        field.extend_from_slice(&[0x81, 0x00]);
        let mut r = ResponseReader::new();
        r.feed(&response(&field, b"ok"), Some(b"ok")).unwrap();
        assert_eq!((r.status, r.body_len, r.body_ok), (200, 2, true));
        r.reset();
        r.feed(&response(&[0xc0 | 27], b"no"), Some(b"ok")).unwrap();
        assert_eq!((r.status, r.body_len, r.body_ok), (404, 2, false));
    }

    /// Bytes from a peer are untrusted: whatever they are, in whatever
    /// pieces, the reader answers or refuses, and never panics.
    #[test]
    fn arbitrary_bytes_never_panic_the_reader() {
        let valid = response(&[0xc0 | 25], b"Hello, World!");
        let mut rng = fastrand::Rng::with_seed(42);
        for _ in 0..20_000 {
            let mut bytes = valid.clone();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
            if rng.bool() {
                bytes.truncate(rng.usize(..bytes.len()));
            }
            let mut r = ResponseReader::new();
            for chunk in bytes.chunks(rng.usize(1..8)) {
                if r.feed(chunk, Some(b"Hello, World!")).is_err() {
                    break;
                }
            }
        }
    }

    #[test]
    fn a_request_reads_back_as_its_fields() {
        let req = request("GET", "127.0.0.1:8443", "/hello", b"", None);
        let (kind, len, n) = frame_head(&req).unwrap();
        assert_eq!((kind, n + len as usize), (HEADERS, req.len()));
        let fields = &req[n..];
        // prefix, GET, https, :authority literal, :path literal
        assert_eq!(&fields[..4], &[0, 0, 0xc0 | 17, 0xc0 | 23]);
        assert!(req.windows(6).any(|w| w == b"/hello"));
        let post = request("POST", "h", "/echo", b"abc", Some("text/plain"));
        assert!(post.ends_with(&[0x00, 3, b'a', b'b', b'c']));
        let odd = request("PATCH", "h", "/", b"", None);
        assert!(odd.windows(5).any(|w| w == b"PATCH"));
    }
}
