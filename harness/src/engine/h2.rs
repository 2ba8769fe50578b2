//! The engine's HTTP/2 client codec (RFC 9113), sans-IO: bytes in, bytes
//! and events out, no socket, no clock. The request loop drives it through
//! a connection's `proto::h2::H2Conn` (`Framing::H2c`, `Framing::H2`;
//! `worker/h2.rs` applies its answers):
//!
//! - [`H2Client::new`] takes the run's request [`Template`]s (each path of
//!   the plan's mix, its header block HPACK-encoded once, literal without
//!   indexing, so every send is byte-identical and nothing is encoded per
//!   request), and a [`Config`].
//! - [`H2Client::opening`] writes the connection preface, our SETTINGS and
//!   the connection's WINDOW_UPDATE.
//! - [`H2Client::encode`] writes one request (HEADERS, then DATA for a body
//!   as far as the peer's windows allow; the rest goes out as WINDOW_UPDATEs
//!   come) and returns its stream id. Call it only while
//!   [`H2Client::can_open`].
//! - [`H2Client::feed`] takes bytes read, writes what the protocol owes in
//!   reply (SETTINGS ACK, PING ACK, WINDOW_UPDATE, pending DATA) and
//!   reports [`Event`]s: a complete [`Response`] (status, Content-Length,
//!   whether Content-Type and body matched the template's expectation,
//!   checked as the bytes pass, never buffered), the peer's SETTINGS,
//!   GOAWAY and RST_STREAM with their codes.
//!
//! Flow control: we advertise [`Config::stream_window`] per stream and
//! grow the connection's window to [`Config::connection_window`]; consumed
//! DATA is returned by WINDOW_UPDATE once half a window is used (the
//! connection's always; a stream's only while it is still open). Sending
//! respects the peer's INITIAL_WINDOW_SIZE, its WINDOW_UPDATEs and
//! MAX_FRAME_SIZE; opening respects its MAX_CONCURRENT_STREAMS (until its
//! SETTINGS arrive: [`Config::max_streams`], RFC 9113 §6.5.2 advises no
//! fewer than 100).
//!
//! HPACK (RFC 7541) is decoded here: integers, the static table, the
//! dynamic table (entries' buffers recycled, so a server that indexes a
//! new `date` every second costs no allocation) and Huffman strings
//! (`engine::huffman`, into reused buffers: no allocation either).
//! Values of fields we do not read and do not index are not decoded at
//! all. Chosen by measurement against the HPACK crates (the ignored test
//! `hpack_timing`, run by `harness/bench/h2-vs-h2load.sh`; the figures are
//! in docs/ARCHITECTURE.md, HTTP/2).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// The streams of a connection by id. The ids are the client's own odd
/// counter, so a multiply spreads them; SipHash's resistance to chosen
/// keys buys nothing here and cost 4% of the engine's CPU over TLS.
type Streams = HashMap<u32, Stream, BuildHasherDefault<StreamIdHasher>>;

#[derive(Default)]
struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b) ^ (self.0 as u32));
        }
    }

    #[inline]
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    /// The product's high half folded into its low one: the table's index
    /// takes the low bits, which of an odd id times an odd constant would
    /// end in 1 every time.
    #[inline]
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Frame types (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
const SETTINGS_ENABLE_PUSH: u16 = 0x2;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;

/// The RST_STREAM code reported for streams a GOAWAY leaves unprocessed.
pub const REFUSED_STREAM: u32 = 0x7;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The window every stream and the connection start with (RFC 9113 §6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;
/// The frame size every peer accepts (RFC 9113 §4.2); we never ask for more.
const DEFAULT_MAX_FRAME: u32 = 16_384;
/// The largest window (RFC 9113 §6.9.1).
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The HPACK table size we allow the server (the default: RFC 9113 §6.5.2).
const HEADER_TABLE_SIZE: usize = 4096;

/// A protocol error: the connection cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum H2Error {
    #[error("HTTP/2 frame of {0} bytes, over the 16384 we allow")]
    FrameTooLarge(usize),
    #[error("HTTP/2: the server's first frame is not SETTINGS")]
    NoSettingsFirst,
    #[error("HTTP/2 {0} frame malformed")]
    Malformed(&'static str),
    #[error("HPACK: {0}")]
    Hpack(&'static str),
    #[error("HTTP/2: PUSH_PROMISE though we disabled push")]
    Push,
    #[error("HTTP/2: a window grew over 2^31 - 1")]
    WindowOverflow,
    #[error("HTTP/2: a request opened beyond the server's stream limit")]
    TooManyStreams,
    #[error("HTTP/2: request template {0} does not exist")]
    NoTemplate(usize),
}

/// What the codec asks of the connection.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Streams in flight we open at most (`--streams`), and the limit we
    /// assume until the server's SETTINGS say otherwise.
    pub max_streams: u32,
    /// Our SETTINGS_INITIAL_WINDOW_SIZE: what a server may send on one
    /// stream before we return it.
    pub stream_window: u32,
    /// The connection window we grow to at the opening.
    pub connection_window: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_streams: 100,
            stream_window: 1 << 20,
            connection_window: 16 << 20,
        }
    }
}

/// One request the run sends, encoded once.
#[derive(Clone, Debug)]
pub struct Template {
    /// The HPACK header block (every field literal without indexing or
    /// static-indexed: the dynamic table is never touched).
    block: Vec<u8>,
    body: Vec<u8>,
    /// The body a correct response carries (None: any).
    pub expected_body: Option<Vec<u8>>,
    /// The media type a correct response has (before any `;`), or None.
    pub expected_content_type: Option<Vec<u8>>,
}

impl Template {
    /// `method path` to `authority` over `scheme` (`http` for h2c,
    /// `https` for h2), with `body` (and `content-type` when given);
    /// the response's expectations are set with the public fields.
    pub fn new(
        method: &str,
        scheme: &str,
        authority: &str,
        path: &str,
        body: &[u8],
        content_type: Option<&str>,
    ) -> Template {
        let mut block = Vec::with_capacity(32 + authority.len() + path.len());
        match method {
            "GET" => block.push(0x80 | 2),
            "POST" => block.push(0x80 | 3),
            m => literal(&mut block, 2, m.as_bytes()),
        }
        match scheme {
            "https" => block.push(0x80 | 7),
            _ => block.push(0x80 | 6),
        }
        match path {
            "/" => block.push(0x80 | 4),
            p => literal(&mut block, 4, p.as_bytes()),
        }
        literal(&mut block, 1, authority.as_bytes());
        if !body.is_empty() || method == "POST" {
            literal(&mut block, 28, body.len().to_string().as_bytes());
        }
        if let Some(ct) = content_type {
            literal(&mut block, 31, ct.as_bytes());
        }
        Template {
            block,
            body: body.to_vec(),
            expected_body: None,
            expected_content_type: None,
        }
    }

    /// The encoded header block.
    pub fn header_block(&self) -> &[u8] {
        &self.block
    }
}

/// A literal field without indexing, its name from the static table
/// (RFC 7541 §6.2.2), its value not Huffman-coded.
fn literal(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    encode_int(out, 0x00, 4, name_index);
    encode_int(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// An HPACK integer with an `n`-bit prefix after `first`'s high bits.
fn encode_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// A complete response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub stream: u32,
    /// Index of the template the request was made from.
    pub template: usize,
    pub status: u16,
    pub content_length: Option<u64>,
    /// Whether Content-Type matched the template's expectation (true when
    /// it has none).
    pub content_type_ok: bool,
    /// DATA bytes received (padding excluded).
    pub body_len: u64,
    /// Whether the body equalled the template's expected body (true when
    /// it has none).
    pub body_ok: bool,
}

/// What [`H2Client::feed`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Response(Response),
    /// The server's SETTINGS (already acknowledged).
    Settings {
        max_concurrent_streams: u32,
    },
    /// The server will serve no stream above `last_stream`.
    GoAway {
        last_stream: u32,
        code: u32,
    },
    /// The server reset this stream, or (code [`REFUSED_STREAM`]) its
    /// GOAWAY left it unprocessed; its request has no response.
    Reset {
        stream: u32,
        template: usize,
        code: u32,
    },
}

/// One open stream.
#[derive(Clone, Copy, Debug)]
struct Stream {
    template: usize,
    status: u16,
    content_length: Option<u64>,
    content_type_ok: bool,
    body_len: u64,
    body_ok: bool,
    /// The final (non-1xx) head has come.
    headed: bool,
    /// What the peer lets us send on this stream.
    send_window: i64,
    /// Body bytes already sent.
    body_sent: usize,
    /// DATA consumed and not yet returned by WINDOW_UPDATE.
    unreturned: u32,
}

/// The HPACK decoder's dynamic table (RFC 7541 §2.3.2): newest first.
#[derive(Debug, Default)]
struct DynamicTable {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// Buffers of evicted entries, reused for the next insertions.
    spare: Vec<Vec<u8>>,
}

impl DynamicTable {
    fn new(max: usize) -> DynamicTable {
        DynamicTable {
            max,
            ..DynamicTable::default()
        }
    }

    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries
            .get(i)
            .map(|(n, v)| (n.as_slice(), v.as_slice()))
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some((n, v)) = self.entries.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
            self.spare.push(n);
            self.spare.push(v);
        }
    }

    fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        self.evict_to(self.max.saturating_sub(size));
        if size > self.max {
            return; // RFC 7541 §4.4: the table is left empty
        }
        let (mut n, mut v) = (self.buffer(), self.buffer());
        n.extend_from_slice(name);
        v.extend_from_slice(value);
        self.entries.push_front((n, v));
        self.size += size;
    }
}

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The fields of a response head we read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Status,
    ContentLength,
    ContentType,
    Other,
}

fn field_of(name: &[u8]) -> Field {
    match name {
        b":status" => Field::Status,
        b"content-length" => Field::ContentLength,
        b"content-type" => Field::ContentType,
        _ => Field::Other,
    }
}

/// What a decoded head says.
#[derive(Clone, Copy, Debug, Default)]
struct Head {
    status: u16,
    content_length: Option<u64>,
    /// Content-Type matched the expectation given to the decoder.
    content_type_ok: Option<bool>,
}

/// The HPACK decoder: the dynamic table and scratch buffers.
#[derive(Debug)]
pub struct HpackDecoder {
    table: DynamicTable,
    /// Huffman output of names, and of values we read or index.
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

impl Default for HpackDecoder {
    fn default() -> HpackDecoder {
        HpackDecoder::new()
    }
}

impl HpackDecoder {
    pub fn new() -> HpackDecoder {
        HpackDecoder {
            table: DynamicTable::new(HEADER_TABLE_SIZE),
            name_buf: Vec::with_capacity(64),
            value_buf: Vec::with_capacity(256),
        }
    }

    /// Decodes one header block, calling `field` with every field
    /// (`value` is `None` for a value left undecoded: a Huffman value of a
    /// field we do not read ([`field_of`]) and do not index).
    fn decode(
        &mut self,
        mut block: &[u8],
        mut field: impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<(), H2Error> {
        let mut name_buf = std::mem::take(&mut self.name_buf);
        let mut value_buf = std::mem::take(&mut self.value_buf);
        let mut first = true;
        let mut result = Ok(());
        while let Some(&b) = block.first() {
            let step = if b & 0x80 != 0 {
                // Indexed field (§6.1).
                decode_int(block, 7).and_then(|(i, rest)| {
                    block = rest;
                    let (n, v) = lookup(&self.table, i)?;
                    field(n, Some(v));
                    Ok(())
                })
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only at a block's start.
                decode_int(block, 5).and_then(|(size, rest)| {
                    block = rest;
                    if size > HEADER_TABLE_SIZE || !first {
                        return Err(H2Error::Hpack("bad dynamic table size update"));
                    }
                    self.table.max = size;
                    self.table.evict_to(size);
                    Ok(())
                })
            } else {
                // Literal (§6.2): with incremental indexing (01), without
                // (0000) or never indexed (0001).
                let indexing = b & 0x40 != 0;
                self.literal(
                    &mut block,
                    indexing,
                    &mut name_buf,
                    &mut value_buf,
                    &mut field,
                )
            };
            if let Err(e) = step {
                result = Err(e);
                break;
            }
            first = b & 0xe0 == 0x20 && first;
        }
        self.name_buf = name_buf;
        self.value_buf = value_buf;
        result
    }

    fn literal(
        &mut self,
        block: &mut &[u8],
        indexing: bool,
        name_buf: &mut Vec<u8>,
        value_buf: &mut Vec<u8>,
        field: &mut impl FnMut(&[u8], Option<&[u8]>),
    ) -> Result<(), H2Error> {
        let (i, rest) = decode_int(block, if indexing { 6 } else { 4 })?;
        *block = rest;
        let name: &[u8] = if i == 0 {
            let (s, rest) = string(block)?;
            *block = rest;
            if s.huffman {
                name_buf.clear();
                huffman(s.bytes, name_buf)?;
                name_buf
            } else {
                s.bytes
            }
        } else if i <= STATIC.len() {
            STATIC[i - 1].0.as_bytes()
        } else {
            // A copy, so that the table may change while we hold it.
            let (n, _) = lookup(&self.table, i)?;
            name_buf.clear();
            name_buf.extend_from_slice(n);
            name_buf
        };
        let (s, rest) = string(block)?;
        *block = rest;
        let value: Option<&[u8]> = if !s.huffman {
            Some(s.bytes)
        } else if indexing || field_of(name) != Field::Other {
            value_buf.clear();
            huffman(s.bytes, value_buf)?;
            Some(value_buf)
        } else {
            None
        };
        field(name, value);
        if indexing {
            self.table.insert(name, value.unwrap_or_default());
        }
        Ok(())
    }

    /// Decodes a head, reading status, Content-Length and whether
    /// Content-Type's media type is `expected_type`.
    fn head(&mut self, block: &[u8], expected_type: Option<&[u8]>) -> Result<Head, H2Error> {
        let mut head = Head::default();
        let mut bad = None;
        self.decode(block, |name, value| {
            let Some(value) = value else { return };
            match field_of(name) {
                Field::Status => match parse_u64(value) {
                    Some(s @ 100..=999) => head.status = s as u16,
                    _ => bad = Some("bad :status"),
                },
                Field::ContentLength => match parse_u64(value) {
                    Some(n) => head.content_length = Some(n),
                    None => bad = Some("bad content-length"),
                },
                Field::ContentType => {
                    let mime = value.split(|&b| b == b';').next().unwrap_or(b"");
                    head.content_type_ok = Some(
                        expected_type.is_none_or(|t| mime.trim_ascii().eq_ignore_ascii_case(t)),
                    );
                }
                Field::Other => {}
            }
        })?;
        if let Some(why) = bad {
            return Err(H2Error::Hpack(why));
        }
        if head.status == 0 {
            return Err(H2Error::Hpack("a response head without :status"));
        }
        Ok(head)
    }
}

/// Field `i` (from 1) of the static table, then the dynamic one.
fn lookup(table: &DynamicTable, i: usize) -> Result<(&[u8], &[u8]), H2Error> {
    match i {
        0 => Err(H2Error::Hpack("index 0")),
        i if i <= STATIC.len() => {
            let (n, v) = STATIC[i - 1];
            Ok((n.as_bytes(), v.as_bytes()))
        }
        i => table
            .get(i - STATIC.len() - 1)
            .ok_or(H2Error::Hpack("index beyond the dynamic table")),
    }
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1), bounded so
/// that it cannot overflow.
fn decode_int(block: &[u8], n: u32) -> Result<(usize, &[u8]), H2Error> {
    let max = (1usize << n) - 1;
    let (&first, mut rest) = block
        .split_first()
        .ok_or(H2Error::Hpack("truncated integer"))?;
    let mut v = usize::from(first) & max;
    if v < max {
        return Ok((v, rest));
    }
    let mut shift = 0;
    loop {
        let (&b, r) = rest
            .split_first()
            .ok_or(H2Error::Hpack("truncated integer"))?;
        rest = r;
        if shift > 28 {
            return Err(H2Error::Hpack("integer too large"));
        }
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok((v, rest));
        }
    }
}

struct HpackString<'a> {
    huffman: bool,
    bytes: &'a [u8],
}

/// A string literal (RFC 7541 §5.2), still Huffman-coded if it was.
fn string(block: &[u8]) -> Result<(HpackString<'_>, &[u8]), H2Error> {
    let huffman = block.first().is_some_and(|b| b & 0x80 != 0);
    let (len, rest) = decode_int(block, 7)?;
    if len > rest.len() {
        return Err(H2Error::Hpack("truncated string"));
    }
    let (bytes, rest) = rest.split_at(len);
    Ok((HpackString { huffman, bytes }, rest))
}

fn huffman(src: &[u8], dst: &mut Vec<u8>) -> Result<(), H2Error> {
    super::huffman::decode(src, dst).map_err(|_| H2Error::Hpack("bad Huffman string"))
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// A frame header (RFC 9113 §4.1).
fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    frame_header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// One HTTP/2 connection's client side.
#[derive(Debug)]
pub struct H2Client {
    config: Config,
    templates: Vec<Template>,
    hpack: HpackDecoder,
    streams: Streams,
    next_stream: u32,
    /// The server's limit (ours until its SETTINGS come).
    peer_max_streams: u32,
    peer_initial_window: u32,
    peer_max_frame: u32,
    /// What the peer lets us send on the connection.
    send_window: i64,
    /// DATA consumed on the connection, not yet returned.
    unreturned: u32,
    /// Bytes of a frame not yet complete.
    partial: Vec<u8>,
    /// A header block being continued: its stream, flags and bytes.
    continuing: Option<(u32, u8)>,
    block: Vec<u8>,
    seen_settings: bool,
    /// The server sent GOAWAY: no stream opens any more.
    going_away: bool,
    /// Streams with body bytes left to send.
    blocked: VecDeque<u32>,
}

impl H2Client {
    /// A client for these requests. `config.max_streams` is also the
    /// capacity reserved for streams: no allocation per request after.
    pub fn new(templates: Vec<Template>, config: Config) -> H2Client {
        let cap = config.max_streams as usize;
        H2Client {
            config,
            templates,
            hpack: HpackDecoder::new(),
            streams: Streams::with_capacity_and_hasher(cap, BuildHasherDefault::default()),
            next_stream: 1,
            peer_max_streams: config.max_streams,
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME,
            send_window: i64::from(DEFAULT_WINDOW),
            unreturned: 0,
            partial: Vec::with_capacity(DEFAULT_MAX_FRAME as usize + 9),
            continuing: None,
            block: Vec::with_capacity(1024),
            seen_settings: false,
            going_away: false,
            blocked: VecDeque::with_capacity(cap),
        }
    }

    /// The preface, our SETTINGS (no push, our stream window, the default
    /// table and frame sizes) and the connection's WINDOW_UPDATE.
    pub fn opening(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(PREFACE);
        frame_header(out, 12, SETTINGS, 0, 0);
        for (id, v) in [
            (SETTINGS_ENABLE_PUSH, 0),
            (SETTINGS_INITIAL_WINDOW_SIZE, self.config.stream_window),
        ] {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&v.to_be_bytes());
        }
        if self.config.connection_window > DEFAULT_WINDOW {
            window_update(out, 0, self.config.connection_window - DEFAULT_WINDOW);
        }
    }

    /// How many streams may be in flight: the server's limit and ours.
    pub fn max_concurrent_streams(&self) -> u32 {
        self.peer_max_streams.min(self.config.max_streams)
    }

    /// Streams open now.
    pub fn in_flight(&self) -> usize {
        self.streams.len()
    }

    /// Whether another request may be opened.
    pub fn can_open(&self) -> bool {
        !self.going_away
            && (self.streams.len() as u32) < self.max_concurrent_streams()
            && self.next_stream < (1 << 31)
    }

    /// Writes the request made from template `template` and returns its
    /// stream id.
    pub fn encode(&mut self, template: usize, out: &mut Vec<u8>) -> Result<u32, H2Error> {
        if !self.can_open() {
            return Err(H2Error::TooManyStreams);
        }
        let t = self
            .templates
            .get(template)
            .ok_or(H2Error::NoTemplate(template))?;
        let id = self.next_stream;
        self.next_stream += 2;
        let has_body = !t.body.is_empty();
        let block = &t.block;
        // The header block fits one frame: templates are small.
        let flags = END_HEADERS | if has_body { 0 } else { END_STREAM };
        frame_header(out, block.len(), HEADERS, flags, id);
        out.extend_from_slice(block);
        self.streams.insert(
            id,
            Stream {
                template,
                status: 0,
                content_length: None,
                content_type_ok: true,
                body_len: 0,
                body_ok: true,
                headed: false,
                send_window: i64::from(self.peer_initial_window),
                body_sent: 0,
                unreturned: 0,
            },
        );
        if has_body {
            self.blocked.push_back(id);
            self.send_bodies(out);
        }
        Ok(id)
    }

    /// Sends what the windows allow of the bodies not yet sent, in the
    /// order their requests were opened.
    fn send_bodies(&mut self, out: &mut Vec<u8>) {
        let mut i = 0;
        while i < self.blocked.len() && self.send_window > 0 {
            let id = self.blocked[i];
            let Some(s) = self.streams.get_mut(&id) else {
                self.blocked.remove(i);
                continue;
            };
            let body = &self.templates[s.template].body;
            while s.body_sent < body.len() && s.send_window > 0 && self.send_window > 0 {
                let n = (body.len() - s.body_sent)
                    .min(self.peer_max_frame as usize)
                    .min(s.send_window as usize)
                    .min(self.send_window as usize);
                let last = s.body_sent + n == body.len();
                frame_header(out, n, DATA, if last { END_STREAM } else { 0 }, id);
                out.extend_from_slice(&body[s.body_sent..s.body_sent + n]);
                s.body_sent += n;
                s.send_window -= n as i64;
                self.send_window -= n as i64;
            }
            if s.body_sent == body.len() {
                self.blocked.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Takes bytes read from the connection: writes the replies owed to
    /// `out` and reports events to `on`. An `Err` ends the connection.
    pub fn feed(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        mut on: impl FnMut(Event),
    ) -> Result<(), H2Error> {
        // Finish a frame begun in an earlier read.
        if !self.partial.is_empty() {
            if self.partial.len() < 9 {
                let take = (9 - self.partial.len()).min(input.len());
                self.partial.extend_from_slice(&input[..take]);
                input = &input[take..];
            }
            let Some(len) = frame_len(&self.partial) else {
                return Ok(());
            };
            if len > DEFAULT_MAX_FRAME as usize {
                return Err(H2Error::FrameTooLarge(len));
            }
            let take = (9 + len - self.partial.len()).min(input.len());
            self.partial.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.partial.len() < 9 + len {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.partial);
            let r = self.frame(&frame, out, &mut on);
            self.partial = frame;
            self.partial.clear();
            r?;
        }
        while !input.is_empty() {
            let len = match frame_len(input) {
                Some(len) if len > DEFAULT_MAX_FRAME as usize => {
                    return Err(H2Error::FrameTooLarge(len))
                }
                Some(len) if input.len() >= 9 + len => len,
                _ => {
                    self.partial.extend_from_slice(input);
                    break;
                }
            };
            let (frame, rest) = input.split_at(9 + len);
            input = rest;
            self.frame(frame, out, &mut on)?;
        }
        self.send_bodies(out);
        Ok(())
    }

    /// One complete frame.
    fn frame(
        &mut self,
        frame: &[u8],
        out: &mut Vec<u8>,
        on: &mut impl FnMut(Event),
    ) -> Result<(), H2Error> {
        let (kind, flags) = (frame[3], frame[4]);
        let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[9..];
        if !self.seen_settings {
            if kind != SETTINGS || flags & ACK != 0 {
                return Err(H2Error::NoSettingsFirst);
            }
            self.seen_settings = true;
        }
        if let Some((continued, _)) = self.continuing {
            if kind != CONTINUATION || stream != continued {
                return Err(H2Error::Malformed("CONTINUATION expected"));
            }
        }
        match kind {
            DATA => self.data(stream, flags, payload, out, on),
            HEADERS => {
                let block = unpad(flags, payload, "HEADERS")?;
                let block = if flags & PRIORITY_FLAG != 0 {
                    block.get(5..).ok_or(H2Error::Malformed("HEADERS"))?
                } else {
                    block
                };
                if flags & END_HEADERS == 0 {
                    self.block.clear();
                    self.block.extend_from_slice(block);
                    self.continuing = Some((stream, flags));
                    return Ok(());
                }
                self.headers(stream, flags, block, on)
            }
            CONTINUATION => {
                let Some((stream, first_flags)) = self.continuing else {
                    return Err(H2Error::Malformed("CONTINUATION unexpected"));
                };
                self.block.extend_from_slice(payload);
                if flags & END_HEADERS == 0 {
                    return Ok(());
                }
                self.continuing = None;
                let block = std::mem::take(&mut self.block);
                let r = self.headers(stream, first_flags, &block, on);
                self.block = block;
                r
            }
            PRIORITY => Ok(()),
            RST_STREAM => {
                let code = be32(payload).ok_or(H2Error::Malformed("RST_STREAM"))?;
                if let Some(s) = self.streams.remove(&stream) {
                    on(Event::Reset {
                        stream,
                        template: s.template,
                        code,
                    });
                }
                Ok(())
            }
            SETTINGS => self.settings(flags, payload, out, on),
            PUSH_PROMISE => Err(H2Error::Push),
            PING => {
                if payload.len() != 8 {
                    return Err(H2Error::Malformed("PING"));
                }
                if flags & ACK == 0 {
                    frame_header(out, 8, PING, ACK, 0);
                    out.extend_from_slice(payload);
                }
                Ok(())
            }
            GOAWAY => {
                let last = be32(payload).ok_or(H2Error::Malformed("GOAWAY"))? & 0x7fff_ffff;
                let code = payload
                    .get(4..)
                    .and_then(be32)
                    .ok_or(H2Error::Malformed("GOAWAY"))?;
                on(Event::GoAway {
                    last_stream: last,
                    code,
                });
                // §6.8: streams above `last` were not processed and never
                // will be: reported as refused (safe to retry elsewhere).
                self.going_away = true;
                let mut above: Vec<u32> = Vec::new();
                above.extend(self.streams.keys().filter(|&&id| id > last));
                above.sort_unstable();
                for id in above {
                    if let Some(s) = self.streams.remove(&id) {
                        on(Event::Reset {
                            stream: id,
                            template: s.template,
                            code: REFUSED_STREAM,
                        });
                    }
                }
                Ok(())
            }
            WINDOW_UPDATE => {
                let inc = be32(payload).ok_or(H2Error::Malformed("WINDOW_UPDATE"))? & 0x7fff_ffff;
                let window = if stream == 0 {
                    Some(&mut self.send_window)
                } else {
                    self.streams.get_mut(&stream).map(|s| &mut s.send_window)
                };
                if let Some(w) = window {
                    *w += i64::from(inc);
                    if *w > MAX_WINDOW {
                        return Err(H2Error::WindowOverflow);
                    }
                }
                Ok(())
            }
            _ => Ok(()), // unknown frame types are ignored (§4.1)
        }
    }

    fn settings(
        &mut self,
        flags: u8,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut impl FnMut(Event),
    ) -> Result<(), H2Error> {
        if flags & ACK != 0 {
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(H2Error::Malformed("SETTINGS"));
        }
        for p in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([p[0], p[1]]);
            let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
            match id {
                SETTINGS_MAX_CONCURRENT_STREAMS => self.peer_max_streams = v,
                SETTINGS_INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > MAX_WINDOW {
                        return Err(H2Error::WindowOverflow);
                    }
                    // §6.9.2: open streams' windows move by the difference.
                    let delta = i64::from(v) - i64::from(self.peer_initial_window);
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                    }
                    self.peer_initial_window = v;
                }
                SETTINGS_MAX_FRAME_SIZE => {
                    if !(16_384..=16_777_215).contains(&v) {
                        return Err(H2Error::Malformed("SETTINGS_MAX_FRAME_SIZE"));
                    }
                    self.peer_max_frame = v;
                }
                // Our encoder never indexes: the server's table size does
                // not concern it.
                SETTINGS_HEADER_TABLE_SIZE => {}
                _ => {}
            }
        }
        frame_header(out, 0, SETTINGS, ACK, 0);
        on(Event::Settings {
            max_concurrent_streams: self.peer_max_streams,
        });
        Ok(())
    }

    fn headers(
        &mut self,
        stream: u32,
        flags: u8,
        block: &[u8],
        on: &mut impl FnMut(Event),
    ) -> Result<(), H2Error> {
        // The block is decoded even for a stream we no longer track: the
        // dynamic table must stay in step with the server's.
        let template = self.streams.get(&stream).map(|s| s.template);
        let expected = template.and_then(|t| self.templates[t].expected_content_type.as_deref());
        let head = self.hpack.head(block, expected);
        let expects_type = expected.is_some();
        let Some(s) = self.streams.get_mut(&stream) else {
            return head.map(|_| ());
        };
        if s.headed {
            // Trailers: decoded (above) for the table's sake, then ignored
            // (a trailer block has no :status).
            if flags & END_STREAM != 0 {
                self.finish(stream, on);
            }
            return Ok(());
        }
        let head = head?;
        if head.status < 200 {
            return Ok(()); // an interim response: the final head follows
        }
        s.headed = true;
        s.status = head.status;
        s.content_length = head.content_length;
        s.content_type_ok = head.content_type_ok.unwrap_or(!expects_type);
        if flags & END_STREAM != 0 {
            self.finish(stream, on);
        }
        Ok(())
    }

    fn data(
        &mut self,
        stream: u32,
        flags: u8,
        payload: &[u8],
        out: &mut Vec<u8>,
        on: &mut impl FnMut(Event),
    ) -> Result<(), H2Error> {
        // Flow control counts the whole payload, padding included (§6.9).
        let consumed = payload.len() as u32;
        let data = unpad(flags, payload, "DATA")?;
        self.unreturned += consumed;
        if self.unreturned >= self.config.connection_window / 2 {
            window_update(out, 0, self.unreturned);
            self.unreturned = 0;
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return Ok(()); // a stream reset or finished: counted, dropped
        };
        if s.body_ok {
            if let Some(want) = &self.templates[s.template].expected_body {
                let at = s.body_len as usize;
                s.body_ok = want.get(at..at + data.len()) == Some(data);
            }
        }
        s.body_len += data.len() as u64;
        if flags & END_STREAM != 0 {
            self.finish(stream, on);
            return Ok(());
        }
        s.unreturned += consumed;
        if s.unreturned >= self.config.stream_window / 2 {
            window_update(out, stream, s.unreturned);
            s.unreturned = 0;
        }
        Ok(())
    }

    /// The stream ended: its response is complete.
    fn finish(&mut self, stream: u32, on: &mut impl FnMut(Event)) {
        let Some(s) = self.streams.remove(&stream) else {
            return;
        };
        let t = &self.templates[s.template];
        let body_ok = s.body_ok
            && t.expected_body
                .as_ref()
                .is_none_or(|want| want.len() as u64 == s.body_len);
        on(Event::Response(Response {
            stream,
            template: s.template,
            status: s.status,
            content_length: s.content_length,
            content_type_ok: s.content_type_ok,
            body_len: s.body_len,
            body_ok,
        }));
    }
}

/// The payload length of the frame whose header starts `b`, once its 9 bytes are there.
fn frame_len(b: &[u8]) -> Option<usize> {
    (b.len() >= 9).then(|| (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
}

fn be32(b: &[u8]) -> Option<u32> {
    b.get(..4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// A payload without its padding (§6.1).
fn unpad<'a>(flags: u8, payload: &'a [u8], what: &'static str) -> Result<&'a [u8], H2Error> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload.split_first().ok_or(H2Error::Malformed(what))?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or(H2Error::Malformed(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn fields(d: &mut HpackDecoder, block: &[u8]) -> Vec<(String, String)> {
        let mut v = Vec::new();
        d.decode(block, |n, val| {
            v.push((
                String::from_utf8_lossy(n).into_owned(),
                val.map_or("<undecoded>".into(), |x| {
                    String::from_utf8_lossy(x).into_owned()
                }),
            ))
        })
        .unwrap();
        v
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn rfc7541_huffman_requests_decode_with_the_dynamic_table() {
        // RFC 7541 C.4.1 and C.4.2: Huffman strings, incremental indexing.
        let mut d = HpackDecoder::new();
        let first = fields(&mut d, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"));
        assert_eq!(
            first,
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ])
        );
        let second = fields(&mut d, &hex("8286 84be 5886 a8eb 1064 9cbf"));
        assert_eq!(
            second[3],
            (":authority".into(), "www.example.com".into()),
            "from the table"
        );
        assert_eq!(second[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.table.size, 110, "two entries: 57 + 53 bytes");
    }

    #[test]
    fn rfc7541_huffman_response_with_a_date() {
        // RFC 7541 C.6.1 (table size 256 there; 4096 here changes nothing).
        let mut d = HpackDecoder::new();
        let got = fields(
            &mut d,
            &hex(
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
                 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            ),
        );
        assert_eq!(
            got,
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                ("location", "https://www.example.com"),
            ])
        );
    }

    #[test]
    fn a_huffman_value_neither_read_nor_indexed_is_not_decoded() {
        // date (static 33) literal without indexing, Huffman value.
        let mut block = vec![0x0f, 33 - 15];
        let date = hex("d07abe941054d444a8200595040b8166e082a62d1bff");
        block.push(0x80 | date.len() as u8);
        block.extend_from_slice(&date);
        let mut d = HpackDecoder::new();
        assert_eq!(fields(&mut d, &block), pairs(&[("date", "<undecoded>")]));
    }

    #[test]
    fn bad_hpack_is_an_error_never_a_panic() {
        let mut d = HpackDecoder::new();
        for bad in [
            &[0xbe][..],
            &[0x80],
            &[0x0f],
            &[0x00, 0x85, 0x01],
            &[0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ] {
            assert!(d.decode(bad, |_, _| {}).is_err(), "{bad:02x?}");
        }
        // A size update after a field.
        assert!(d.decode(&[0x88, 0x20], |_, _| {}).is_err());
    }

    #[test]
    fn templates_are_static_indexed_or_literal_without_indexing() {
        let t = Template::new(
            "POST",
            "http",
            "127.0.0.1:8080",
            "/echo",
            b"abc",
            Some("text/plain"),
        );
        let mut d = HpackDecoder::new();
        assert_eq!(
            fields(&mut d, t.header_block()),
            pairs(&[
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/echo"),
                (":authority", "127.0.0.1:8080"),
                ("content-length", "3"),
                ("content-type", "text/plain"),
            ])
        );
        assert_eq!(
            d.table.entries.len(),
            0,
            "the server's table is never touched"
        );
        let long = "/".to_string() + &"x".repeat(300);
        let t = Template::new("GET", "https", "h", &long, b"", None);
        assert_eq!(
            fields(&mut d, t.header_block())[2].1,
            long,
            "a multi-byte length"
        );
    }

    /// A frame as a server writes it.
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        frame_header(&mut f, payload.len(), kind, flags, stream);
        f.extend_from_slice(payload);
        f
    }

    fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (id, v) in params {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        frame(SETTINGS, 0, 0, &p)
    }

    /// Every frame in `out`: (type, flags, stream, payload).
    fn frames(mut out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
        let mut v = Vec::new();
        while out.len() >= 9 {
            let len = frame_len(out).unwrap();
            let stream = u32::from_be_bytes([out[5], out[6], out[7], out[8]]);
            v.push((out[3], out[4], stream, out[9..9 + len].to_vec()));
            out = &out[9 + len..];
        }
        v
    }

    fn hello_client(config: Config) -> H2Client {
        let mut t = Template::new("GET", "http", "x", "/hello", b"", None);
        t.expected_body = Some(b"Hello World".to_vec());
        t.expected_content_type = Some(b"text/plain".to_vec());
        let echo = Template::new("POST", "http", "x", "/echo", &[7u8; 25], None);
        H2Client::new(vec![t, echo], config)
    }

    /// :status 200, content-type text/plain (indexed into the table), content-length 11.
    const HELLO_HEAD: &[u8] = b"\x88\x5f\x0atext/plain\x0f\x0d\x0211";

    fn feed_all(c: &mut H2Client, bytes: &[u8], out: &mut Vec<u8>) -> Vec<Event> {
        let mut events = Vec::new();
        c.feed(bytes, out, |e| events.push(e)).unwrap();
        events
    }

    #[test]
    fn the_opening_is_preface_settings_and_the_connection_window() {
        let mut c = hello_client(Config::default());
        let mut out = Vec::new();
        c.opening(&mut out);
        assert!(out.starts_with(PREFACE));
        let f = frames(&out[24..]);
        assert_eq!(f[0].0, SETTINGS);
        assert_eq!(
            f[0].3,
            hex("0002 00000000 0004 00100000"),
            "no push, a 1 MiB stream window"
        );
        assert_eq!(
            (
                f[1].0,
                f[1].2,
                u32::from_be_bytes(f[1].3[..4].try_into().unwrap())
            ),
            (WINDOW_UPDATE, 0, (16 << 20) - 65_535)
        );
    }

    #[test]
    fn responses_split_anywhere_are_verified_and_windows_returned() {
        let config = Config {
            max_streams: 10,
            stream_window: 8,
            connection_window: 20,
        };
        let mut c = hello_client(config);
        let mut out = Vec::new();
        c.opening(&mut out);
        out.clear();
        let mut server = settings(&[(SETTINGS_MAX_CONCURRENT_STREAMS, 2)]);
        let mut events = feed_all(&mut c, &server, &mut out);
        assert_eq!(
            events,
            [Event::Settings {
                max_concurrent_streams: 2
            }]
        );
        assert_eq!(
            frames(&out),
            [(SETTINGS, ACK, 0, vec![])],
            "SETTINGS acknowledged"
        );
        assert_eq!(c.max_concurrent_streams(), 2);
        out.clear();
        assert_eq!(c.encode(0, &mut out).unwrap(), 1);
        assert_eq!(c.encode(0, &mut out).unwrap(), 3);
        assert!(!c.can_open(), "the server's limit of 2");
        assert_eq!(c.encode(0, &mut out), Err(H2Error::TooManyStreams));
        let sent = frames(&out);
        assert_eq!(
            (sent[0].0, sent[0].1, sent[0].2),
            (HEADERS, END_HEADERS | END_STREAM, 1)
        );
        assert_eq!(
            sent[0].3,
            c.templates[0].header_block(),
            "byte-identical blocks"
        );
        assert_eq!(sent[1].3, sent[0].3);
        out.clear();
        // Stream 3's response first (with a body in two DATA, one padded),
        // then stream 1's, content-type from the dynamic table; fed a byte
        // at a time.
        server = frame(HEADERS, END_HEADERS, 3, HELLO_HEAD);
        server.extend(frame(DATA, 0, 3, b"Hello "));
        server.extend(frame(DATA, END_STREAM | PADDED, 3, b"\x02World\0\0"));
        server.extend(frame(HEADERS, END_HEADERS, 1, b"\x88\xbe\x0f\x0d\x0211"));
        server.extend(frame(DATA, END_STREAM, 1, b"Hello Wor1d"));
        events.clear();
        for b in &server {
            c.feed(std::slice::from_ref(b), &mut out, |e| events.push(e))
                .unwrap();
        }
        let ok = |stream, body_ok| {
            Event::Response(Response {
                stream,
                template: 0,
                status: 200,
                content_length: Some(11),
                content_type_ok: true,
                body_len: 11,
                body_ok,
            })
        };
        assert_eq!(
            events,
            [ok(3, true), ok(1, false)],
            "a wrong byte is caught"
        );
        let updates: Vec<_> = frames(&out)
            .into_iter()
            .filter(|f| f.0 == WINDOW_UPDATE)
            .map(|f| (f.2, u32::from_be_bytes(f.3[..4].try_into().unwrap())))
            .collect();
        // Stream 3's first 6 bytes (>= 8 / 2) are returned while it is open;
        // its padded last frame (8 bytes with the padding) is not: the
        // stream ended. The connection's (threshold 10): 6 + 8, then 11.
        assert_eq!(updates, [(3, 6), (0, 14), (0, 11)]);
        assert_eq!(c.in_flight(), 0);
        assert!(c.can_open());
    }

    #[test]
    fn a_body_waits_for_the_windows_and_settings_move_them() {
        let mut c = hello_client(Config::default());
        let mut out = Vec::new();
        feed_all(
            &mut c,
            &settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 10)]),
            &mut out,
        );
        out.clear();
        assert_eq!(c.encode(1, &mut out).unwrap(), 1);
        let f = frames(&out);
        assert_eq!((f[0].0, f[0].1), (HEADERS, END_HEADERS), "a body follows");
        assert_eq!(
            (f[1].0, f[1].1, f[1].3.len()),
            (DATA, 0, 10),
            "the stream window"
        );
        out.clear();
        // The initial window grows by 5 (§6.9.2), then the stream by 100.
        feed_all(
            &mut c,
            &settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 15)]),
            &mut out,
        );
        let f = frames(&out);
        assert_eq!((f[1].0, f[1].3.len()), (DATA, 5));
        out.clear();
        feed_all(
            &mut c,
            &frame(WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()),
            &mut out,
        );
        let f = frames(&out);
        assert_eq!(
            (f[0].0, f[0].1, f[0].3.len()),
            (DATA, END_STREAM, 10),
            "the rest, ended"
        );
    }

    #[test]
    fn ping_goaway_and_reset_are_answered_or_reported() {
        let mut c = hello_client(Config::default());
        let mut out = Vec::new();
        feed_all(&mut c, &settings(&[]), &mut out);
        c.encode(0, &mut out).unwrap();
        out.clear();
        let mut server = frame(PING, 0, 0, b"12345678");
        server.extend(frame(RST_STREAM, 0, 1, &8u32.to_be_bytes()));
        server.extend(frame(GOAWAY, 0, 0, &hex("00000001 00000002")));
        server.extend(frame(PING, ACK, 0, b"ignored!"));
        let events = feed_all(&mut c, &server, &mut out);
        assert_eq!(
            events,
            [
                Event::Reset {
                    stream: 1,
                    template: 0,
                    code: 8
                },
                Event::GoAway {
                    last_stream: 1,
                    code: 2
                },
            ]
        );
        assert_eq!(frames(&out), [(PING, ACK, 0, b"12345678".to_vec())]);
    }

    #[test]
    fn goaway_refuses_the_streams_above_its_last_and_closes_opening() {
        let mut c = hello_client(Config::default());
        let mut out = Vec::new();
        feed_all(&mut c, &settings(&[]), &mut out);
        for _ in 0..3 {
            c.encode(0, &mut out).unwrap();
        }
        let events = feed_all(
            &mut c,
            &frame(GOAWAY, 0, 0, &hex("00000001 00000000")),
            &mut out,
        );
        assert_eq!(
            events,
            [
                Event::GoAway {
                    last_stream: 1,
                    code: 0
                },
                Event::Reset {
                    stream: 3,
                    template: 0,
                    code: REFUSED_STREAM
                },
                Event::Reset {
                    stream: 5,
                    template: 0,
                    code: REFUSED_STREAM
                },
            ]
        );
        assert_eq!(c.in_flight(), 1, "stream 1 may still be answered");
        assert!(!c.can_open());
    }

    #[test]
    fn continuation_and_interim_heads_make_one_response() {
        let mut c = hello_client(Config::default());
        let mut out = Vec::new();
        feed_all(&mut c, &settings(&[]), &mut out);
        c.encode(0, &mut out).unwrap();
        let mut server = frame(HEADERS, END_HEADERS, 1, b"\x08\x03100"); // 100 Continue
        server.extend(frame(HEADERS, 0, 1, &HELLO_HEAD[..5]));
        server.extend(frame(CONTINUATION, END_HEADERS, 1, &HELLO_HEAD[5..]));
        server.extend(frame(DATA, END_STREAM, 1, b"Hello World"));
        let events = feed_all(&mut c, &server, &mut out);
        assert!(
            matches!(
                events[..],
                [Event::Response(Response {
                    status: 200,
                    body_ok: true,
                    content_type_ok: true,
                    ..
                })]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn protocol_violations_end_the_connection() {
        let mut out = Vec::new();
        let mut c = hello_client(Config::default());
        assert_eq!(
            c.feed(&frame(PING, 0, 0, b"12345678"), &mut out, |_| {}),
            Err(H2Error::NoSettingsFirst)
        );
        let mut c = hello_client(Config::default());
        let mut big = settings(&[]);
        big.extend(&[0x00, 0x40, 0x01, DATA, 0, 0, 0, 0, 1]);
        assert_eq!(
            c.feed(&big, &mut out, |_| {}),
            Err(H2Error::FrameTooLarge(16_385))
        );
        let mut c = hello_client(Config::default());
        let mut push = settings(&[]);
        push.extend(frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]));
        assert_eq!(c.feed(&push, &mut out, |_| {}), Err(H2Error::Push));
    }

    /// Not a test of speed (run by harness/bench/h2-hpack.sh): decodes a
    /// steady nginx-like block many times and prints the time per block.
    #[test]
    #[ignore]
    fn hpack_timing() {
        let mut d = HpackDecoder::new();
        // First block: indexes server, content-type; steady block:
        // :status 200, both from the table, date Huffman without indexing,
        // content-length literal.
        let first = b"\x88\x76\x05nginx\x5f\x0atext/plain";
        d.decode(first, |_, _| {}).unwrap();
        let mut steady = vec![0x88, 0xbf, 0xbe, 0x0f, 33 - 15];
        let date = hex("d07abe941054d444a8200595040b8166e082a62d1bff");
        steady.push(0x80 | date.len() as u8);
        steady.extend(&date);
        steady.extend(b"\x0f\x0d\x0211");
        let n: u32 = 2_000_000;
        let t = std::time::Instant::now();
        let mut seen = 0u64;
        for _ in 0..n {
            let h = d.head(std::hint::black_box(&steady), None).unwrap();
            seen += h.content_length.unwrap();
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
        assert_eq!(seen, 11 * u64::from(n));
        println!(
            "hpack: {ns:.1} ns per steady response block ({} bytes)",
            steady.len()
        );
    }
}
