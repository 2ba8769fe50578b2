//! One connection's state machine: connect, write the pre-encoded request,
//! read the response into the thread's buffer. What the outcomes mean for
//! the statistics and the schedule is the worker's business.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::http::{Feed, ResponseReader};
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
    /// Bytes of the request written so far.
    pub written: usize,
    /// Where the request's latency counts from: its intended send time
    /// (`--rate`), its connect (a fresh connection per request) or its write.
    pub origin_ns: u64,
    pub connect_ns: u64,
    pub sent_ns: u64,
    /// The request fails with a timeout after this.
    pub deadline_ns: u64,
    /// Not a warm-up request.
    pub measured: bool,
    /// A byte of the response has been read.
    pub first_byte: bool,
    /// Next intended send time (`--rate`).
    pub due_ns: u64,
    /// The path of the request in flight (an index into the plan's paths).
    pub path: u16,
    /// Where this connection is in the cycle of paths.
    pub cursor: u32,
    pub reader: ResponseReader,
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
}

impl Conn {
    pub(crate) fn new() -> Conn {
        Conn {
            stream: None,
            state: State::Idle,
            written: 0,
            origin_ns: 0,
            connect_ns: 0,
            sent_ns: 0,
            deadline_ns: u64::MAX,
            measured: false,
            first_byte: false,
            due_ns: 0,
            path: 0,
            cursor: 0,
            reader: ResponseReader::new(),
        }
    }

    /// Starts a non-blocking connect; the socket is registered once for both
    /// directions (edge-triggered), for its whole life. `nodelay` for
    /// connections that carry more than one request.
    pub(crate) fn open(
        &mut self,
        addr: SocketAddr,
        registry: &Registry,
        token: Token,
        nodelay: bool,
    ) -> io::Result<()> {
        let mut stream = TcpStream::connect(addr)?;
        if nodelay {
            stream.set_nodelay(true)?;
        }
        registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        self.stream = Some(stream);
        Ok(())
    }

    /// Writes the rest of `request`: `Ok(true)` once all of it is written.
    #[inline]
    pub(crate) fn write(&mut self, request: &[u8]) -> io::Result<bool> {
        let Some(mut stream) = self.stream.as_ref() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
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
        let mut r = Received {
            outcome: Outcome::Pending,
            bytes: 0,
            first_byte_ns: None,
            now: 0,
        };
        let Some(mut stream) = self.stream.as_ref() else {
            r.outcome = Outcome::Failed(Failure::Receive);
            r.now = clock.now();
            return r;
        };
        loop {
            match stream.read(buf) {
                Ok(0) => {
                    r.now = clock.now();
                    r.outcome = match self.reader.eof(check) {
                        Feed::Done { .. } => Outcome::Done { leftover: 0 },
                        Feed::Fail(f) => Outcome::Failed(f),
                        Feed::More => Outcome::Failed(Failure::Receive),
                    };
                    return r;
                }
                Ok(n) => {
                    r.now = clock.now();
                    r.bytes += n as u64;
                    if !self.first_byte {
                        self.first_byte = true;
                        r.first_byte_ns = Some(r.now);
                    }
                    match self.reader.feed(&buf[..n], check) {
                        Feed::More if n < buf.len() && !closing => return r,
                        Feed::More => {}
                        Feed::Done { leftover } => {
                            r.outcome = Outcome::Done { leftover };
                            return r;
                        }
                        Feed::Fail(f) => {
                            r.outcome = Outcome::Failed(f);
                            return r;
                        }
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

    /// On an event while idle: the server closed the connection (keep-alive
    /// timeout) or sent something unasked. Either way the connection is
    /// dropped quietly; the next request opens a new one. `Ok(true)` if the
    /// connection is still usable.
    pub(crate) fn idle_event(&mut self, buf: &mut [u8]) -> bool {
        let Some(mut stream) = self.stream.as_ref() else {
            return true;
        };
        loop {
            match stream.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => {
                    self.close();
                    return false;
                }
            }
        }
    }

    #[inline]
    pub(crate) fn close(&mut self) {
        // Closing the socket removes it from the epoll set.
        self.stream = None;
    }
}
