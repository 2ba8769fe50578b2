//! One connection's state machine: connect, write the pre-encoded request,
//! read the response into the thread's buffer. What the outcomes mean for
//! the statistics and the schedule is the worker's business.
//!
//! A connection carries only its own protocol's state (`proto`, see
//! `engine::proto`) and its own transport's: `tls`, `None` on plain TCP,
//! or the socket's TLS session (QUIC's connection and socket are in
//! `Proto::H3`, HTTP/3 being the only protocol over it), through which every byte written and read
//! goes (`tls.rs`); the state machine is the same for all of them.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, IntoRawFd};

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::framing::Ring;
use super::io::{Backend, TAG_MASK};
use super::proto::h1::{Feed, ResponseReader};
use super::proto::Proto;
use super::tls::{self, Handshake, Session};
use super::ws::WsPlan;
use super::{Check, Clock};
use crate::stats::Failure;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// No request in flight (between requests, or waiting for its schedule).
    Idle,
    /// A request is waiting for its connection to be established.
    Connecting,
    /// The request is partly written.
    Writing,
    /// The request is written; its response is being read.
    Reading,
}

pub(crate) struct Conn {
    pub stream: Option<TcpStream>,
    pub state: State,
    /// Bytes of the request written so far (a buffered framing: of the
    /// connection's out buffer, since the connect).
    pub written: usize,
    pub connect_ns: u64,
    /// The requests in flight, oldest first (see `framing`).
    pub ring: Ring,
    /// A byte of the response being read has been read.
    pub first_byte: bool,
    /// Next intended send time (`--rate`).
    pub due_ns: u64,
    /// A wake-up of this connection is in the worker's queue.
    pub wake_pending: bool,
    /// The protocol's own state (none for HTTP/1.1).
    pub proto: Proto,
    /// Where this connection is in the cycle of paths.
    pub cursor: u32,
    pub reader: ResponseReader,
    /// io_uring: which socket of this connection a receive's completion is
    /// for (bumped at each close), and which request a send's.
    pub epoch: u32,
    pub seq: u32,
    /// TLS: the session of the open socket (`None`: plaintext).
    pub tls: Option<Box<Session>>,
    /// The connection's own bytes on their way out (TLS, or a buffered
    /// framing; `None` for plain HTTP/1.1, whose requests go out from the
    /// plan's bytes).
    pub out: Option<Box<Outbox>>,
}

/// What reading did.
pub(crate) enum Outcome {
    /// Nothing complete yet.
    Pending,
    /// A complete response, with `leftover` unexpected bytes after it.
    Done {
        leftover: usize,
    },
    Failed(Failure),
}

pub(crate) struct Received {
    pub outcome: Outcome,
    pub bytes: u64,
    /// When the response's first byte was read, if it was in this call.
    pub first_byte_ns: Option<u64>,
    /// The time of the last read.
    pub now: u64,
    /// TLS: the handshake ended in this read.
    pub handshake: Option<Handshake>,
    /// TLS: why the handshake failed, when the outcome is that failure.
    pub tls_error: Option<rustls::Error>,
}

impl Received {
    pub(crate) fn new() -> Received {
        Received {
            outcome: Outcome::Pending,
            bytes: 0,
            first_byte_ns: None,
            now: 0,
            handshake: None,
            tls_error: None,
        }
    }
}

impl Conn {
    /// A connection of protocol `proto` with up to `capacity` requests in
    /// flight, each at most `request_max` bytes: its ring and out buffers
    /// are allocated here, once (io_uring's `staged` at its first use; a
    /// WebSocket's out buffer at its first upgrade, `queue_opening`).
    /// `tls`: its bytes go through TLS.
    pub(crate) fn new(proto: Proto, capacity: usize, request_max: usize, tls: bool) -> Conn {
        let buffered = proto.buffered();
        let room = if buffered { capacity * request_max } else { 0 };
        let opens = matches!(proto, Proto::Ws(_));
        let out = (buffered || tls).then(|| {
            Box::new(Outbox {
                bytes: Vec::with_capacity(if opens { 0 } else { room }),
                at: 0,
                busy: false,
                epoch: 0,
                staged: Vec::new(),
                room: room as u32,
            })
        });
        Conn {
            stream: None,
            state: State::Idle,
            written: 0,
            connect_ns: 0,
            ring: Ring::new(capacity),
            first_byte: false,
            due_ns: 0,
            wake_pending: false,
            proto,
            cursor: 0,
            reader: ResponseReader::new(),
            epoch: 0,
            seq: 0,
            tls: None,
            out,
        }
    }

    /// Requests go through `out` (a buffered framing, see `framing`).
    #[inline]
    pub(crate) fn buffered(&self) -> bool {
        self.proto.buffered()
    }

    /// A buffered framing: appends a request's bytes to what goes out
    /// (TLS: hands them to the session). io_uring (`uring`): while a send
    /// of `out` is out, they wait in `staged`.
    #[inline]
    pub(crate) fn queue(&mut self, bytes: &[u8], uring: bool) {
        if let Some(session) = &mut self.tls {
            session.queue_more(bytes);
        } else if let Some(out) = &mut self.out {
            out.queue(bytes, uring);
        }
    }

    /// A WebSocket framing: queues a frame of `payload` (masked; see
    /// `ws.rs`), built in `frame`, the thread's buffer for it.
    #[inline]
    pub(crate) fn queue_frame(
        &mut self,
        frame: &mut Vec<u8>,
        opcode: u8,
        payload: &[u8],
        uring: bool,
    ) {
        let Some(ws) = self.proto.ws_mut() else {
            return;
        };
        ws.frame(frame, opcode, payload);
        self.queue(frame, uring);
    }

    /// A WebSocket framing, a new socket: queues the upgrade request.
    pub(crate) fn queue_opening(&mut self, plan: &WsPlan, uring: bool) {
        let Some(ws) = self.proto.ws_mut() else {
            return;
        };
        let opening = ws.opening(plan);
        // Sized once for the larger of the upgrade and a ring of messages:
        // sized for the messages alone, it would grow for the upgrade and
        // leave the smaller buffer behind as a hole in the heap, per
        // connection (19,000 held: megabytes).
        if let Some(out) = self.out.as_deref_mut().filter(|o| o.bytes.capacity() == 0) {
            out.bytes
                .reserve_exact((out.room as usize).max(opening.len()));
        }
        self.queue(opening.as_bytes(), uring);
    }

    /// Starts a non-blocking connect. epoll: the socket is registered once
    /// for both directions (edge-triggered), for its whole life; io_uring:
    /// its multishot receive is armed, for its whole life. `nodelay` for
    /// connections that carry more than one request. `tls`: the thread's
    /// TLS client, for a session of its own.
    pub(crate) fn open(
        &mut self,
        addr: SocketAddr,
        io: &mut Backend,
        index: usize,
        nodelay: bool,
        tls: Option<&tls::Client>,
    ) -> io::Result<()> {
        self.tls = match tls {
            Some(client) => Some(Box::new(Session::new(client)?)),
            None => None,
        };
        let mut stream = connect(addr)?;
        if nodelay {
            stream.set_nodelay(true)?;
        }
        match io {
            Backend::Epoll(e) => e.poll.registry().register(
                &mut stream,
                Token(index),
                Interest::READABLE | Interest::WRITABLE,
            )?,
            Backend::Uring(u) => u.recv(index, self.epoch & TAG_MASK, stream.as_raw_fd()),
        }
        self.stream = Some(stream);
        Ok(())
    }

    /// A socket (TCP) or a QUIC connection is open.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.stream.is_some() || self.proto.quic().is_some()
    }

    /// The socket's descriptor (io_uring's operations name it).
    #[inline]
    pub(crate) fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.stream.as_ref().map(|s| s.as_raw_fd())
    }

    /// Writes the rest of `request`: `Ok(true)` once all of it is written.
    /// TLS: the request is handed to the session, and `written` counts the
    /// ciphertext that left (the handshake's first: the connect probe).
    #[inline]
    pub(crate) fn write(&mut self, request: &[u8]) -> io::Result<bool> {
        let Some(mut stream) = self.stream.as_ref() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        if let Some(session) = &mut self.tls {
            session.queue(request);
            let (n, done) = session.flush(&mut stream)?;
            self.written += n;
            return Ok(done);
        }
        if let Some(out) = self.out.as_deref_mut().filter(|_| self.proto.buffered()) {
            while !out.pending().is_empty() {
                match stream.write(out.pending()) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        self.written += n;
                        out.advance(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(true);
        }
        while self.written < request.len() {
            match stream.write(&request[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads what is there into `buf` and feeds it to the response reader.
    ///
    /// Edge-triggered: a short read means the socket is drained (a later
    /// arrival raises a new edge), unless the peer already closed
    /// (`closing`), in which case reading goes on to see the end of file.
    #[inline]
    pub(crate) fn read(
        &mut self,
        buf: &mut [u8],
        check: &Check,
        closing: bool,
        clock: &Clock,
    ) -> Received {
        let mut r = Received::new();
        if self.stream.is_none() {
            r.outcome = Outcome::Failed(Failure::Receive);
            r.now = clock.now();
            return r;
        }
        loop {
            // TLS: what the handshake still has to send goes first.
            if self.tls.as_ref().is_some_and(|s| s.wants_write()) && self.flush_tls().is_err() {
                r.now = clock.now();
                r.outcome = Outcome::Failed(Failure::Write);
                return r;
            }
            let Some(mut stream) = self.stream.as_ref() else {
                return r;
            };
            match stream.read(buf) {
                Ok(0) => {
                    r.now = clock.now();
                    r.outcome = self.end_of_file(check);
                    return r;
                }
                Ok(n) => {
                    let done = self.chunk(&buf[..n], check, clock.now(), &mut r);
                    if self.tls.as_ref().is_some_and(|s| s.wants_write()) {
                        let _ = self.flush_tls();
                    }
                    if done || (n < buf.len() && !closing) {
                        return r;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if r.now == 0 {
                        r.now = clock.now();
                    }
                    return r;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    r.now = clock.now();
                    r.outcome = Outcome::Failed(Failure::Receive);
                    return r;
                }
            }
        }
    }

    /// Feeds one chunk of the response, read at `now`: true once the
    /// response is complete or failed (`r.outcome` says which). TLS: `data`
    /// is ciphertext; its plaintext is fed, and any after a complete
    /// response counts as its leftover.
    #[inline]
    pub(crate) fn chunk(&mut self, data: &[u8], check: &Check, now: u64, r: &mut Received) -> bool {
        let Some(session) = &mut self.tls else {
            return feed_chunk(&mut self.reader, &mut self.first_byte, data, check, now, r);
        };
        let handshaking = session.is_handshaking();
        let (reader, first) = (&mut self.reader, &mut self.first_byte);
        let mut done = false;
        let t = session.receive(data, |plain| {
            if !done {
                done = feed_chunk(reader, first, plain, check, now, r);
            } else if let Outcome::Done { leftover } = &mut r.outcome {
                r.bytes += plain.len() as u64;
                *leftover += plain.len();
            }
        });
        r.now = now;
        r.handshake = t.handshake;
        if let Some(e) = t.error {
            if !done {
                r.outcome = Outcome::Failed(if handshaking {
                    Failure::Handshake
                } else {
                    Failure::Receive
                });
                // Only a handshake's failure is reported with its reason; a
                // broken record later is a receive failure like a reset.
                r.tls_error = handshaking.then_some(e);
            }
            return true;
        }
        if t.closed && !done {
            r.outcome = self.end_of_file(check);
            return true;
        }
        done
    }

    /// epoll, TLS: writes what the session has to send (its handshake's
    /// next flight, an alert): `Ok(true)` once all of it is out.
    pub(crate) fn flush_tls(&mut self) -> io::Result<bool> {
        match (&mut self.tls, self.stream.as_ref()) {
            (Some(session), Some(stream)) => session.flush(stream).map(|(_, done)| done),
            _ => Ok(true),
        }
    }

    /// The peer closed: the response is complete if it was delimited by the
    /// close, else a receive failure (a handshake failure, before the
    /// handshake ended).
    pub(crate) fn end_of_file(&mut self, check: &Check) -> Outcome {
        if self.tls.as_ref().is_some_and(|s| s.is_handshaking()) {
            return Outcome::Failed(Failure::Handshake);
        }
        match self.reader.eof(check) {
            Feed::Done { .. } => Outcome::Done { leftover: 0 },
            Feed::Fail(f) => Outcome::Failed(f),
            Feed::More => Outcome::Failed(Failure::Receive),
        }
    }

    /// On an event while idle: the server closed the connection (keep-alive
    /// timeout) or sent something unasked. Either way the connection is
    /// dropped quietly; the next request opens a new one. True if the
    /// connection is still usable (the caller closes it otherwise). TLS:
    /// records that carry no plaintext (a TLS 1.3 session ticket, a key
    /// update) keep it.
    pub(crate) fn idle_event(&mut self, buf: &mut [u8]) -> bool {
        loop {
            let Some(mut stream) = self.stream.as_ref() else {
                return true;
            };
            match stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return self.flush_tls().is_ok();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(n) if n > 0 && self.tls.is_some() => {
                    if !self.idle_tls(&buf[..n]) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }

    /// TLS: ciphertext that arrived while no request was in flight. True
    /// if it carried no plaintext, no close and no error.
    pub(crate) fn idle_tls(&mut self, data: &[u8]) -> bool {
        let Some(session) = &mut self.tls else {
            return false;
        };
        let mut unasked = false;
        let t = session.receive(data, |_| unasked = true);
        !unasked && !t.closed && t.error.is_none()
    }

    /// Drops the socket. epoll: closing it removes it from the epoll set;
    /// io_uring: its end is queued (the armed receive holds it until then),
    /// and completions still to come for it are stale from here on.
    #[inline]
    pub(crate) fn close(&mut self, io: &mut Backend) {
        if let Some(h3) = self.proto.h3_mut() {
            // Requests queued for a connection that failed to open go too.
            match h3.quic.take() {
                Some(mut q) => {
                    q.shut();
                    h3.requests.close(Some(&q.conn));
                    self.epoch = self.epoch.wrapping_add(1);
                }
                None => h3.requests.close(None),
            }
            return;
        }
        let Some(stream) = self.stream.take() else {
            return;
        };
        self.epoch = self.epoch.wrapping_add(1);
        self.tls = None;
        self.proto.close();
        if let Some(out) = &mut self.out {
            out.drop_pending();
        }
        match io {
            Backend::Epoll(_) => drop(stream),
            Backend::Uring(u) => u.close(stream.into_raw_fd()),
        }
    }
}

/// A connection's own bytes on their way out: TLS ciphertext (io_uring;
/// epoll writes the session's straight to the socket), or a buffered
/// framing's requests. io_uring: the kernel reads `bytes[at..]` until the
/// send's completion, so while `busy` nothing touches the buffer (it is
/// never moved or shrunk then; requests started meanwhile wait in
/// `staged`); at most one send per connection is in flight, across its
/// sockets too: a send still out for a closed socket (`epoch` is that
/// socket's) holds the next socket's first bytes back until it completes.
pub(crate) struct Outbox {
    pub bytes: Vec<u8>,
    /// u32 (and `room`): an out buffer is at most a ring of requests, and
    /// the box stays in jemalloc's 64-byte size class.
    pub at: u32,
    pub busy: bool,
    pub epoch: u32,
    /// io_uring: requests started while a send of `bytes` is out.
    /// Allocated at its first use, `room` bytes, then kept: a held
    /// connection never stages.
    staged: Vec<u8>,
    /// A buffered framing: what `staged` and `bytes` hold at most (every
    /// slot's request).
    room: u32,
}

impl Outbox {
    pub(crate) fn pending(&self) -> &[u8] {
        &self.bytes[self.at as usize..]
    }

    /// Appends a request's bytes; io_uring (`uring`), while a send is out,
    /// to `staged`.
    #[inline]
    fn queue(&mut self, bytes: &[u8], uring: bool) {
        if uring && self.busy {
            if self.staged.capacity() == 0 {
                self.staged.reserve(self.room as usize);
            }
            self.staged.extend_from_slice(bytes);
        } else {
            self.bytes.extend_from_slice(bytes);
        }
    }

    /// io_uring: moves staged requests into `bytes` once no send of it is
    /// out.
    #[inline]
    pub(crate) fn unstage(&mut self) {
        if !self.busy && self.pending().is_empty() && !self.staged.is_empty() {
            std::mem::swap(&mut self.bytes, &mut self.staged);
            self.at = 0;
        }
    }

    /// The socket closed: what was not sent is no longer wanted (the kernel
    /// may still be reading it, so the buffer stays where it is).
    fn drop_pending(&mut self) {
        if !self.busy {
            self.bytes.clear();
            self.at = 0;
        }
        self.staged.clear();
    }

    /// `n` more bytes went out.
    pub(crate) fn advance(&mut self, n: usize) {
        self.at = (self.at as usize + n).min(self.bytes.len()) as u32;
        if self.at as usize == self.bytes.len() {
            self.bytes.clear();
            self.at = 0;
        }
    }
}

/// `IP_LOCAL_PORT_RANGE` (Linux 6.3; not in the libc crate yet).
const IP_LOCAL_PORT_RANGE: libc::c_int = 51;

/// A non-blocking connect to `addr` whose source port the kernel picks from
/// the whole ephemeral range in one pass.
///
/// Without a per-socket range the kernel tries ports of one parity first
/// (half the range: 14,116 ports of 32768–60999) and, once those to `addr`
/// are taken, walks all of them on every further connect before trying the
/// other half: past about 14,000 connections to one server each connect
/// cost up to tens of milliseconds on a busy machine (`perf`: most of the
/// time in `__inet_check_established`), and 19,800 connections took minutes
/// to open. Any per-socket range, even the system's own, makes the kernel
/// search both parities in one pass. Older kernels refuse the option: the
/// connect goes on without it.
fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking().cloexec(),
        Some(Protocol::TCP),
    )?;
    if addr.is_ipv4() {
        // 1–65535, which the kernel clamps to the system's range.
        let whole: u32 = 0xffff << 16 | 1;
        // SAFETY: a valid socket and a 4-byte option value.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                IP_LOCAL_PORT_RANGE,
                (&whole as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            );
        }
    }
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

#[inline]
pub(crate) fn feed_chunk(
    reader: &mut ResponseReader,
    first_byte: &mut bool,
    data: &[u8],
    check: &Check,
    now: u64,
    r: &mut Received,
) -> bool {
    r.now = now;
    r.bytes += data.len() as u64;
    if !*first_byte {
        *first_byte = true;
        r.first_byte_ns = Some(now);
    }
    match reader.feed(data, check) {
        Feed::More => false,
        Feed::Done { leftover } => {
            r.outcome = Outcome::Done { leftover };
            true
        }
        Feed::Fail(f) => {
            r.outcome = Outcome::Failed(f);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ws::WsConn;
    use crate::engine::ProtoPlan;

    /// A held connection's memory is mostly its `Conn` (19,800 of them
    /// held from one process, `harness/bench/engine-vs-wrk.sh`): a plain
    /// HTTP/1.1 one carries no other protocol's or transport's state.
    #[test]
    fn a_plain_connection_carries_only_its_own_state() {
        let plain = Conn::new(Proto::H1, 1, 100, false);
        assert!(plain.out.is_none() && plain.tls.is_none());
        assert!(matches!(plain.proto, Proto::H1));
        let size = std::mem::size_of::<Conn>();
        eprintln!(
            "Conn {size} bytes, ResponseReader {}, Ring {}, Proto {}, Outbox {}, WsConn {}",
            std::mem::size_of::<ResponseReader>(),
            std::mem::size_of::<Ring>(),
            std::mem::size_of::<Proto>(),
            std::mem::size_of::<Outbox>(),
            std::mem::size_of::<WsConn>()
        );
        assert!(size <= 192, "a Conn grew to {size} bytes (192 before)");
        let ws = std::mem::size_of::<WsConn>();
        assert!(ws <= 96, "a WsConn grew to {ws} bytes (96 before)");
        // A slot a jemalloc size class of 32 bytes, the ring inline 32.
        assert!(std::mem::size_of::<crate::engine::framing::Slot>() <= 32);
        assert!(std::mem::size_of::<Ring>() <= 32);
        // The boxed out buffer in jemalloc's 64-byte class.
        assert!(std::mem::size_of::<Outbox>() <= 64);
        let h2 = Conn::new(
            Proto::new(&ProtoPlan::H2 { streams: 8 }, 100, |_| unreachable!()),
            8,
            100,
            false,
        );
        assert!(h2.out.is_some() && matches!(h2.proto, Proto::H2(_)));
        let tls = Conn::new(Proto::H1, 1, 100, true);
        assert!(tls.out.is_some() && matches!(tls.proto, Proto::H1));
        // QUIC's state is HTTP/3's, opened with its first request.
        let h3 = Conn::new(
            Proto::new(&ProtoPlan::H3 { streams: 8 }, 100, |_| unreachable!()),
            8,
            100,
            true,
        );
        assert!(matches!(h3.proto, Proto::H3(_)) && h3.proto.quic().is_none());
        assert!(!h3.is_open());
    }
}
