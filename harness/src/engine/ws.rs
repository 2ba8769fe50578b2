//! WebSocket (RFC 6455) as a framing of the one request loop: a connection
//! opens with the HTTP/1.1 upgrade (its `Sec-WebSocket-Accept` checked; the
//! head ends at the `101`, nothing is read until close), then each
//! "request" is one message, sent as a client frame masked with a key of
//! its own, and its "response" is the server's echo, compared byte for
//! byte with what was sent as it streams past. Echoes come back in order,
//! so a connection's messages are answered oldest first like pipelined
//! HTTP/1.1 (`framing::Ring::pop`).
//!
//! Nothing here allocates per message: a frame is built in a buffer the
//! caller lends (one per thread: a held connection carries none), and the
//! reader keeps a few integers of state, comparing a pong's payload with
//! the ping's as it streams past as it does an echo's. The handshake's key
//! and expected accept are made once per socket.

use std::mem::MaybeUninit;

use crate::stats::Failure;

/// What a WebSocket run sends (`harness run ws://`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsPlan {
    /// The upgrade's request target (`/ws`).
    pub target: String,
    /// Its `Host` header.
    pub host: String,
    /// Binary messages (opcode 2) or text (opcode 1).
    pub binary: bool,
    /// What each connection does once upgraded.
    pub mode: WsMode,
}

/// What a WebSocket run's connections do: one of three runs, never two at
/// once (a held connection is in no room).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum WsMode {
    /// Each message is echoed back and compared with what was sent.
    #[default]
    Echo,
    /// `--hold`: each "message" is a ping, its "echo" the pong (RFC 6455
    /// §5.5.3: the same payload), paced once per interval per connection.
    Hold,
    /// `--room`: room fan-out rather than echo (`ws_room`).
    Room(super::ws_room::RoomPlan),
}

impl WsPlan {
    /// `--hold`: pings and their pongs.
    pub fn hold(&self) -> bool {
        self.mode == WsMode::Hold
    }

    /// `--room`: the rooms.
    pub fn room(&self) -> Option<&super::ws_room::RoomPlan> {
        match &self.mode {
            WsMode::Room(room) => Some(room),
            _ => None,
        }
    }
}

/// The default message size (`--ws-size`).
pub const DEFAULT_MESSAGE: usize = 64;

/// A message of `size` bytes: ASCII letters, valid as text and as binary.
pub fn message(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Where a connection's WebSocket is.
pub(crate) struct WsConn {
    /// The `101` has been read and verified.
    pub upgraded: bool,
    /// The status the upgrade was answered with, once its head is read
    /// (0 before): a refusal's `503` is counted with the statuses.
    pub answered: u16,
    /// The `Sec-WebSocket-Accept` the server must answer (base64 of a
    /// SHA-1: 28 bytes, kept inline rather than in a heap string).
    accept: [u8; 28],
    /// A response head split across reads; once upgraded, the payload of
    /// a ping from the server, to be answered (both rare: empty, no heap).
    head: Vec<u8>,
    /// The frame being read.
    frame: Frame,
    /// A ping's payload, in `head`, is to be answered by a pong.
    ping: bool,
    /// `--hold`: pongs are the answers judged.
    pub pongs_answer: bool,
    /// The masking keys' generator (xorshift64*).
    rng: u64,
    /// A room member's own state (`None` outside a room run: an echo or
    /// a held connection carries none of it).
    pub member: Option<Box<Member>>,
}

/// A room member's WebSocket state.
pub(crate) struct Member {
    /// Its room's upgrade target.
    pub target: String,
    /// A message's first bytes are its header, kept here rather than
    /// compared (`ws_room`).
    pub captured: [u8; super::ws_room::HEADER],
}

#[derive(Clone, Copy, Debug)]
enum Frame {
    /// Reading the 2 to 10 bytes of a frame header.
    Header { got: u8, bytes: [u8; 10] },
    /// Reading a data frame's payload: `remaining` bytes; `last`: FIN.
    Data { remaining: u64, last: bool },
    /// Reading a control frame's payload.
    Control {
        opcode: u8,
        // Bytes (a control frame carries at most 125): a frame of 16 bytes.
        remaining: u8,
        got: u8,
    },
}

const FRESH: Frame = Frame::Header {
    got: 0,
    bytes: [0; 10],
};

/// What a chunk of received bytes did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WsFeed {
    /// Nothing complete: all of it was used.
    More,
    /// A message ended after `used` bytes; `verdict` is its check's.
    Message {
        used: usize,
        verdict: Option<Failure>,
        len: u64,
    },
    /// A control frame (ping, pong) ended after `used` bytes.
    Control {
        used: usize,
    },
    /// The server closed the WebSocket (a close frame).
    Closed,
    Fail(Failure),
}

impl WsConn {
    /// A connection's WebSocket state; `seed` makes its keys its own.
    pub(crate) fn new(seed: u64) -> WsConn {
        WsConn {
            upgraded: false,
            answered: 0,
            accept: [0; 28],
            head: Vec::new(),
            frame: FRESH,
            ping: false,
            pongs_answer: false,
            rng: seed | 1,
            member: None,
        }
    }

    fn next_u32(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// A new socket: the upgrade request, with a fresh key.
    pub(crate) fn opening(&mut self, plan: &WsPlan) -> String {
        use base64::Engine;
        let mut raw = [0u8; 16];
        for chunk in raw.chunks_mut(4) {
            chunk.copy_from_slice(&self.next_u32().to_le_bytes());
        }
        let key = base64::engine::general_purpose::STANDARD.encode(raw);
        let accept = workloads::ws::accept_key(key.as_bytes());
        let n = accept.len().min(self.accept.len());
        self.accept[..n].copy_from_slice(&accept.as_bytes()[..n]);
        self.upgraded = false;
        self.answered = 0;
        self.head.clear();
        self.frame = FRESH;
        self.ping = false;
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
            self.member.as_ref().map_or(&plan.target, |m| &m.target),
            plan.host
        )
    }

    /// The payload of the ping just read (`WsFeed::Control`), once.
    pub(crate) fn take_ping(&mut self) -> Option<([u8; 125], usize)> {
        if !std::mem::take(&mut self.ping) {
            return None;
        }
        let n = self.head.len().min(125);
        let mut payload = [0; 125];
        payload[..n].copy_from_slice(&self.head[..n]);
        self.head.clear();
        Some((payload, n))
    }

    /// A client frame of `payload` in `s` (cleared first): FIN, `opcode`,
    /// masked with a key of its own (RFC 6455 §5.3).
    pub(crate) fn frame(&mut self, s: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
        self.frame_parts(s, opcode, &[], payload);
    }

    /// A client frame in `s` whose payload is `head` then `rest` (a room
    /// message: its header, then the plan's message after it).
    pub(crate) fn frame_parts(&mut self, s: &mut Vec<u8>, opcode: u8, head: &[u8], rest: &[u8]) {
        let key = self.next_u32().to_le_bytes();
        s.clear();
        s.push(0x80 | opcode);
        let len = head.len() + rest.len();
        if len < 126 {
            s.push(0x80 | len as u8);
        } else if len <= 0xffff {
            s.push(0x80 | 126);
            s.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            s.push(0x80 | 127);
            s.extend_from_slice(&(len as u64).to_be_bytes());
        }
        s.extend_from_slice(&key);
        let at = s.len();
        s.extend_from_slice(head);
        s.extend_from_slice(rest);
        for (i, b) in s[at..].iter_mut().enumerate() {
            *b ^= key[i & 3];
        }
    }

    /// Feeds bytes of the upgrade's response: `Ok(Some(used))` once the
    /// `101` is complete and its accept is right.
    pub(crate) fn handshake(&mut self, data: &[u8]) -> Result<Option<usize>, Failure> {
        let carried = self.head.len();
        let buf: &[u8] = if carried == 0 {
            data
        } else {
            self.head.extend_from_slice(data);
            &self.head
        };
        let mut headers = [MaybeUninit::<httparse::Header>::uninit(); 32];
        let mut resp = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            buf,
            &mut headers,
        ) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if buf.len() > 16 * 1024 {
                    return Err(Failure::Exception);
                }
                if carried == 0 {
                    self.head.extend_from_slice(data);
                }
                return Ok(None);
            }
            Err(_) => return Err(Failure::Exception),
        };
        self.answered = resp.code.unwrap_or(0);
        if resp.code != Some(101) {
            return Err(Failure::Status);
        }
        let (mut upgrade, mut accept) = (false, false);
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("upgrade") {
                upgrade = h.value.eq_ignore_ascii_case(b"websocket");
            } else if h.name.eq_ignore_ascii_case("sec-websocket-accept") {
                accept = h.value.trim_ascii() == self.accept;
            }
        }
        if !(upgrade && accept) {
            return Err(Failure::Handshake);
        }
        self.upgraded = true;
        self.head.clear();
        Ok(Some(n - carried))
    }

    /// Feeds bytes after the upgrade, judging the message being read
    /// against `want` (the sent payload; `None`: not compared); `seen` is
    /// how much of it was read so far, `verdict` its first failure.
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        want: Option<&[u8]>,
        seen: &mut u64,
        verdict: &mut Option<Failure>,
    ) -> WsFeed {
        let mut at = 0;
        loop {
            match &mut self.frame {
                Frame::Header { got, bytes } => {
                    while *got < 2 || usize::from(*got) < header_len(bytes) {
                        let Some(&b) = data.get(at) else {
                            return WsFeed::More;
                        };
                        bytes[usize::from(*got)] = b;
                        *got += 1;
                        at += 1;
                    }
                    let (fin, opcode, masked) =
                        (bytes[0] & 0x80 != 0, bytes[0] & 0x0f, bytes[1] & 0x80 != 0);
                    if masked || bytes[0] & 0x70 != 0 {
                        return WsFeed::Fail(Failure::Exception); // servers never mask; no extensions
                    }
                    let len = payload_len(bytes);
                    self.frame = match opcode {
                        0..=2 => Frame::Data {
                            remaining: len,
                            last: fin,
                        },
                        8..=10 if len <= 125 => Frame::Control {
                            opcode,
                            remaining: len as u8,
                            got: 0,
                        },
                        _ => return WsFeed::Fail(Failure::Exception),
                    };
                }
                Frame::Data { remaining, last } => {
                    let take = (*remaining).min((data.len() - at) as u64) as usize;
                    let mut bytes = &data[at..at + take];
                    let mut seen_now = *seen;
                    let header = super::ws_room::HEADER;
                    if let Some(m) = self
                        .member
                        .as_mut()
                        .filter(|_| (seen_now as usize) < header)
                    {
                        // A room message's header: kept, judged by `ws_room`.
                        let from = seen_now as usize;
                        let n = (header - from).min(bytes.len());
                        m.captured[from..from + n].copy_from_slice(&bytes[..n]);
                        bytes = &bytes[n..];
                        seen_now += n as u64;
                    }
                    let take_cmp = bytes.len();
                    if let (None, Some(want)) = (*verdict, want) {
                        let from = (seen_now as usize).min(want.len());
                        let expected = &want[from..want.len().min(from + take_cmp)];
                        if bytes[..expected.len()] != *expected {
                            *verdict = Some(Failure::Body);
                        } else if expected.len() < take_cmp {
                            *verdict = Some(Failure::Length);
                        }
                    }
                    *seen += take as u64;
                    *remaining -= take as u64;
                    at += take;
                    if *remaining > 0 {
                        return WsFeed::More;
                    }
                    let last = *last;
                    self.frame = FRESH;
                    if last {
                        if verdict.is_none() && want.is_some_and(|w| *seen != w.len() as u64) {
                            *verdict = Some(Failure::Length);
                        }
                        return WsFeed::Message {
                            used: at,
                            verdict: *verdict,
                            len: *seen,
                        };
                    }
                }
                Frame::Control {
                    opcode,
                    remaining,
                    got,
                } => {
                    let (op, start, len) = (*opcode, usize::from(*got), usize::from(*remaining));
                    let take = (len - start).min(data.len() - at);
                    let chunk = &data[at..at + take];
                    match op {
                        // A ping's payload is kept for its pong.
                        9 => {
                            if start == 0 {
                                self.head.clear();
                            }
                            self.head.extend_from_slice(chunk);
                        }
                        // A pong judged: compared with the ping's payload
                        // as it streams past.
                        10 if self.pongs_answer => {
                            if let (None, Some(w)) = (*verdict, want) {
                                if w.len() != len || w[start..start + take] != *chunk {
                                    *verdict = Some(Failure::Body);
                                }
                            }
                        }
                        _ => {}
                    }
                    *got += take as u8;
                    at += take;
                    if *got < *remaining {
                        return WsFeed::More;
                    }
                    self.frame = FRESH;
                    match op {
                        8 => return WsFeed::Closed,
                        9 => self.ping = true,
                        10 if self.pongs_answer => {
                            return WsFeed::Message {
                                used: at,
                                verdict: *verdict,
                                len: len as u64,
                            };
                        }
                        _ => {}
                    }
                    return WsFeed::Control { used: at };
                }
            }
        }
    }
}

/// The length of a frame header whose first two bytes are `b`.
fn header_len(b: &[u8; 10]) -> usize {
    match b[1] & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    }
}

fn payload_len(b: &[u8; 10]) -> u64 {
    match b[1] & 0x7f {
        126 => u64::from(u16::from_be_bytes([b[2], b[3]])),
        127 => u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]),
        n => u64::from(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unmasks a client frame built by [`WsConn::frame`].
    fn unmask(frame: &[u8]) -> Vec<u8> {
        let (len, at) = match frame[1] & 0x7f {
            126 => (usize::from(u16::from_be_bytes([frame[2], frame[3]])), 4),
            n => (usize::from(n), 2),
        };
        assert!(frame[1] & 0x80 != 0, "client frames are masked");
        let key = &frame[at..at + 4];
        frame[at + 4..at + 4 + len]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i & 3])
            .collect()
    }

    #[test]
    fn client_frames_are_masked_with_a_key_each() {
        let mut ws = WsConn::new(7);
        let msg = message(200);
        let mut out = Vec::new();
        ws.frame(&mut out, 2, &msg);
        let first = out.clone();
        assert_eq!(first[0], 0x82);
        assert_eq!(unmask(&first), msg);
        ws.frame(&mut out, 2, &msg);
        assert_ne!(first[4..8], out[4..8], "a new key per frame");
        assert_eq!(unmask(&out), msg);
    }

    /// `--hold`: a pong is judged against the ping's payload as it
    /// streams past, however it is split, with no buffer of its own.
    #[test]
    fn pongs_are_judged_against_the_ping_however_they_are_split() {
        let ping = message(100);
        let mut wrong = ping.clone();
        wrong[60] ^= 1;
        let cases: [(&[u8], Option<Failure>); 3] = [
            (&ping, None),
            (&wrong, Some(Failure::Body)),
            (&ping[..99], Some(Failure::Body)),
        ];
        for (pong, expected) in cases {
            let wire = server_frame(10, true, pong);
            for split in [1, 2, 5, wire.len()] {
                let mut ws = WsConn::new(1);
                ws.upgraded = true;
                ws.pongs_answer = true;
                let (mut seen, mut verdict, mut got) = (0, None, None);
                for piece in wire.chunks(split) {
                    match ws.feed(piece, Some(&ping), &mut seen, &mut verdict) {
                        WsFeed::More => {}
                        WsFeed::Message { verdict, len, .. } => got = Some((verdict, len)),
                        other => panic!("{other:?}"),
                    }
                }
                assert_eq!(got, Some((expected, pong.len() as u64)), "split {split}");
                assert!(ws.take_ping().is_none(), "a pong is not a ping");
            }
        }
    }

    fn server_frame(opcode: u8, fin: bool, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![if fin { 0x80 } else { 0 } | opcode];
        if payload.len() < 126 {
            f.push(payload.len() as u8);
        } else {
            f.push(126);
            f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn echoes_are_judged_byte_for_byte_however_they_are_split() {
        let msg = message(300);
        let mut wire = server_frame(9, true, b"hi"); // a ping first
        wire.extend(server_frame(2, false, &msg[..100]));
        wire.extend(server_frame(0, true, &msg[100..]));
        for split in [1, 3, 7, wire.len()] {
            let mut ws = WsConn::new(1);
            ws.upgraded = true;
            let (mut seen, mut verdict, mut got) = (0, None, None);
            for piece in wire.chunks(split) {
                let mut at = 0;
                while at < piece.len() {
                    match ws.feed(&piece[at..], Some(&msg), &mut seen, &mut verdict) {
                        WsFeed::More => break,
                        WsFeed::Control { used } => at += used,
                        WsFeed::Message { used, verdict, len } => {
                            got = Some((verdict, len));
                            at += used;
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
            assert_eq!(got, Some((None, 300)), "split {split}");
            assert_eq!(
                ws.take_ping().map(|(p, n)| p[..n].to_vec()),
                Some(b"hi".to_vec())
            );
        }
        let mut ws = WsConn::new(1);
        let mut wrong = msg.clone();
        wrong[150] ^= 1;
        let (mut seen, mut verdict) = (0, None);
        let r = ws.feed(
            &server_frame(2, true, &wrong),
            Some(&msg),
            &mut seen,
            &mut verdict,
        );
        assert!(
            matches!(
                r,
                WsFeed::Message {
                    verdict: Some(Failure::Body),
                    ..
                }
            ),
            "{r:?}"
        );
    }

    #[test]
    fn the_handshake_ends_at_the_101_and_checks_the_accept() {
        let plan = WsPlan {
            target: "/ws".into(),
            host: "h".into(),
            binary: true,
            mode: WsMode::Echo,
        };
        let mut ws = WsConn::new(3);
        let req = ws.opening(&plan);
        let key = req
            .lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap()
            .to_string();
        let accept = workloads::ws::accept_key(key.as_bytes());
        let head = workloads::ws::switching_protocols(&accept);
        let mut bytes = head.clone().into_bytes();
        bytes.extend_from_slice(b"\x82\x01x");
        let (a, b) = bytes.split_at(10);
        assert_eq!(ws.handshake(a), Ok(None));
        assert_eq!(ws.handshake(b), Ok(Some(b.len() - 3)));
        assert!(ws.upgraded);
        let mut other = WsConn::new(4);
        other.opening(&plan);
        assert_eq!(other.handshake(head.as_bytes()), Err(Failure::Handshake));
        let mut refused = WsConn::new(5);
        refused.opening(&plan);
        let r = refused.handshake(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(r, Err(Failure::Status));
    }
}
