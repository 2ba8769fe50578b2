//! The default engine: our own connection loop on may coroutines and
//! `may::net`, with the strict HTTP/1 codec of `server_common::http1`.
//!
//! One accept coroutine spawns one coroutine per connection. A connection
//! reads into its buffer, answers every complete request in it in order
//! (pipelining; the work runs right here, in the coroutine), appends the
//! responses to its write buffer, and writes them with one call per batch.
//!
//! Timeouts: may applies a socket's read timeout to each blocking read
//! (a timer armed while the coroutine waits, `ErrorKind::TimedOut` on
//! expiry). An idle or stalled connection is therefore dropped after
//! [`READ_TIMEOUT`]; a client trickling a request byte by byte is dropped
//! once its request has been incomplete for longer than that (checked
//! between reads), so a slowloris client holds a coroutine at most about
//! twice [`READ_TIMEOUT`].
//!
//! TLS (`--tls-cert`): the same loop over `rustls::StreamOwned`, a session
//! over the coroutine's socket: its blocking reads and writes park the
//! coroutine as the plain socket's do, and the handshake happens in the
//! connection's first read, under the same read timeout.
//!
//! Shutdown: [`Server::stop_accepting`] sets the flag, then connects to the
//! listener to wake the accept coroutine, which sees the flag and drops the
//! listener. Responses written while stopping say `Connection: close`, and
//! their connections close after them.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{FromRawFd, IntoRawFd};
use std::time::{Duration, Instant};

use may::net::{TcpListener, TcpStream};
use server_common::http1::{self, Connection, MAX_REQUEST_BYTES};

use crate::app::App;

/// How long a read may wait: the slowloris and idle keep-alive bound.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write may wait for a client that does not read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Initial size of a connection's read and write buffers.
const INITIAL_BUF: usize = 4096;
/// The read buffer never needs more: the codec refuses a request before it
/// occupies more ([`MAX_REQUEST_BYTES`]: a head, a 1 MiB body, its chunked
/// framing).
const MAX_READ_BUF: usize = MAX_REQUEST_BYTES;
/// After an error response, how long to drain what the client still sends
/// before closing, so that the close does not reset the response away.
const LINGER: Duration = Duration::from_millis(500);

/// A running accept coroutine.
pub struct Server {
    addr: SocketAddr,
    app: &'static App,
}

/// Serves `listener` (bound, listening) on may coroutines.
pub fn start(listener: std::net::TcpListener, app: &'static App) -> io::Result<Server> {
    let addr = listener.local_addr()?;
    // SAFETY: the descriptor comes from a listener we own and give up here.
    let listener = unsafe { TcpListener::from_raw_fd(listener.into_raw_fd()) };
    may::go!(
        may::coroutine::Builder::new().name("accept".into()),
        move || accept_loop(listener, app)
    )?;
    Ok(Server { addr, app })
}

impl Server {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting: flags the shutdown (if not done yet) and wakes the
    /// accept coroutine with a connection of our own.
    pub fn stop_accepting(&self) {
        self.app.shutdown.begin();
        let wake = SocketAddr::new(reachable(self.addr.ip()), self.addr.port());
        // Under load the next accepted client wakes it anyway; do not hang.
        let _ = std::net::TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }
}

/// An address to reach a listener bound to `ip` (the unspecified address
/// is reached through loopback).
fn reachable(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    }
}

fn accept_loop(listener: TcpListener, app: &'static App) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if app.shutdown.is_stopping() {
                    return; // drops the listener: new connections are refused
                }
                may::go!(move || serve(stream, app));
            }
            Err(e) => {
                if app.shutdown.is_stopping() {
                    return;
                }
                // Out of descriptors or memory: back off instead of spinning.
                // Anything else (a client's aborted connect): go on.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    may::coroutine::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

/// A connection's read buffer: `buf[start..end]` holds received bytes not
/// yet consumed by a request.
struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuf {
    fn new() -> ReadBuf {
        ReadBuf {
            buf: vec![0; INITIAL_BUF],
            start: 0,
            end: 0,
        }
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Room to read into: moves pending bytes to the front or grows the
    /// buffer when less than a quarter of it is free. `None` only when the
    /// buffer is full at its maximum, which the parser never lets happen.
    fn spare(&mut self) -> Option<&mut [u8]> {
        if self.buf.len() - self.end < self.buf.len() / 4 {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < self.buf.len() / 4 && self.buf.len() < MAX_READ_BUF {
                let len = (self.buf.len() * 2).min(MAX_READ_BUF);
                self.buf.resize(len, 0);
            }
        }
        let spare = &mut self.buf[self.end..];
        (!spare.is_empty()).then_some(spare)
    }

    fn filled(&mut self, n: usize) {
        self.end += n;
    }
}

/// How a batch of requests ends the connection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    /// Keep reading.
    No,
    /// Close after the write (`Connection: close`, nothing else pending).
    Now,
    /// An error answer, or unread requests behind a `Connection: close`:
    /// close gently so the client reads the answer before any reset.
    Linger,
}

/// A connection's byte stream: the socket, or a TLS session over it.
trait Stream: Read + Write + crate::ws::Socket {
    /// Closes after an error answer without resetting it away.
    fn linger(self);
}

impl Stream for TcpStream {
    fn linger(self) {
        linger(self)
    }
}

impl Stream for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn linger(mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
        linger(self.sock)
    }
}

/// Sets the socket up and serves it, over TLS when the server has a
/// certificate.
fn serve(stream: TcpStream, app: &'static App) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    match &app.tls {
        None => connection(stream, app),
        Some(config) => {
            let Ok(session) = rustls::ServerConnection::new(std::sync::Arc::clone(config)) else {
                return;
            };
            connection(rustls::StreamOwned::new(session, stream), app)
        }
    }
}

/// Serves one connection until the client closes it, a `Connection: close`,
/// an error answer, a timeout, or shutdown.
fn connection<S: Stream>(mut stream: S, app: &'static App) {
    let mut input = ReadBuf::new();
    let mut out: Vec<u8> = Vec::with_capacity(INITIAL_BUF);
    // Since when the request at the front of `input` has been incomplete.
    let mut incomplete_since: Option<Instant> = None;
    loop {
        let mut close = Close::No;
        let mut in_flight = None;
        let mut upgrade = None;
        loop {
            let req = match http1::parse(input.pending()) {
                Ok(Some(req)) => req,
                Ok(None) => break,
                Err(e) => {
                    let head_only = http1::requests_head(input.pending());
                    http1::encode_error(&mut out, app.server, e, head_only);
                    close = Close::Linger;
                    break;
                }
            };
            if let Some(route) = workloads::ws::route(req.target) {
                let head = &input.pending()[..req.len];
                match workloads::ws::accept_head(req.method, head, route) {
                    Ok(accepted) => {
                        input.consume(req.len);
                        upgrade = Some(accepted);
                    }
                    Err(why) => {
                        let resp = workloads::ws::bad_handshake(why);
                        http1::encode(&mut out, app.server, &resp, false, Connection::Close);
                        close = Close::Linger;
                    }
                }
                break;
            }
            in_flight.get_or_insert_with(|| app.shutdown.request());
            let conn = if app.shutdown.is_stopping() {
                Connection::Close
            } else {
                Connection::for_request(&req)
            };
            let resp = app.respond(req.method, req.target, req.body);
            let allow = workloads::allow(req.target);
            http1::encode_allowing(
                &mut out,
                app.server,
                &resp,
                req.method == "HEAD",
                conn,
                allow,
            );
            let len = req.len;
            input.consume(len);
            incomplete_since = None;
            if conn == Connection::Close {
                close = if input.is_empty() {
                    Close::Now
                } else {
                    Close::Linger
                };
                break;
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        drop(in_flight);
        if let Some((route, accept)) = upgrade {
            // Joined before the 101 goes out: every message sent from then
            // on reaches this member.
            let member = match &route {
                workloads::ws::WsRoute::Room(name) => Some(crate::ws::join(&app.rooms, name)),
                workloads::ws::WsRoute::Echo => None,
            };
            let head = workloads::ws::switching_protocols(&accept);
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            return crate::ws::serve(stream, input.pending().to_vec(), route, member);
        }
        match close {
            Close::No => {}
            Close::Now => return,
            Close::Linger => return stream.linger(),
        }
        if !input.is_empty() {
            let now = Instant::now();
            if now.duration_since(*incomplete_since.get_or_insert(now)) > READ_TIMEOUT {
                return; // slowloris: a request trickling in for too long
            }
        }
        let Some(spare) = input.spare() else {
            return;
        };
        match stream.read(spare) {
            Ok(0) | Err(_) => return, // closed, reset, or timed out
            Ok(n) => input.filled(n),
        }
    }
}

/// Closes after an error answer without resetting it away: shut down our
/// side, then drain what the client still sends (bounded in time and size)
/// until it closes, so the kernel does not answer unread data with a reset.
fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 1024];
    let mut drained = 0;
    while drained < MAX_READ_BUF && Instant::now() < deadline {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_buf_compacts_and_grows_to_the_maximum() {
        let mut b = ReadBuf::new();
        let n = b.spare().unwrap().len();
        assert_eq!(n, INITIAL_BUF);
        b.filled(n);
        b.consume(n - 10);
        assert_eq!(b.pending().len(), 10);
        // Compacted: the 10 pending bytes moved to the front.
        assert_eq!(b.spare().unwrap().len(), INITIAL_BUF - 10);
        assert_eq!(b.start, 0);
        while let Some(s) = b.spare() {
            let n = s.len();
            b.filled(n);
        }
        assert_eq!(b.pending().len(), MAX_READ_BUF);
        b.consume(MAX_READ_BUF);
        assert!(b.is_empty());
        assert_eq!(b.spare().unwrap().len(), MAX_READ_BUF);
    }

    #[test]
    fn wakes_the_listener_through_loopback() {
        assert_eq!(
            reachable("0.0.0.0".parse().unwrap()),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(
            reachable("::".parse().unwrap()),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(reachable(ip), ip);
    }
}
