//! WebSocket in the worker-pool model: a worker thread takes the
//! connection and holds it for its whole life, as an Apache prefork child
//! holds its connection. So `--workers` connections are served at once;
//! the next handshake waits (queued behind them in the default shape, in
//! the accept queue with `--per-connection`) and gets its `101` only when
//! a worker is free: the model's limit, shown, not hidden.
//!
//! The `101` is written by the worker that takes the connection, after a
//! room member has joined. Rooms are one [`workloads::ws::Rooms`] for the
//! process. A member's worker waits in `poll(2)` on two descriptors: its
//! socket, and a wake-up pipe the room writes a byte to with each message
//! it queues for the member. So a room message is written the moment it
//! is queued, and the one worker still does all of its connection's I/O
//! (the socket is non-blocking while it serves a member).
//!
//! Over TLS (`--tls-cert`, `wss://`) the front hands over the session with
//! its socket ([`Tls`]) and the worker runs tungstenite on that instead:
//! the same model, the session's records sealed and opened by the worker.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;
use std::time::Duration;

use tungstenite::protocol::Role;
use tungstenite::{Error, WebSocket};
use workloads::ws::{close_for, limits, Message, Rooms, WsRoute};

/// How long a closing connection waits for the peer's close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How this server holds WebSocket connections, for `/config`.
pub fn holding() -> workloads::WebSocketHolding {
    workloads::WebSocketHolding {
        connection: "a worker thread for the connection's lifetime (tungstenite, blocking): \
                     connections beyond --workers wait for their 101 until a worker is free; \
                     a room member's worker polls its socket and a wake-up pipe its room writes to; \
                     over TLS the worker holds the session the front handed over"
            .into(),
        rooms: workloads::RoomScope::SharedAcrossWorkers,
        room_spans_workers: true,
    }
}

/// The process's rooms, for every worker.
fn rooms() -> &'static Rooms {
    static ROOMS: OnceLock<Rooms> = OnceLock::new();
    ROOMS.get_or_init(Rooms::new)
}

/// What a held WebSocket runs over: the plain socket, or the TLS session
/// on it ([`Tls`]).
pub trait Socket: Read + Write + Send {
    /// The TCP socket under it: its timeouts, blocking mode and descriptor.
    fn tcp(&self) -> &TcpStream;

    /// Whether input waits that `poll(2)` on the socket would not show: a
    /// TLS session can take in records while it writes (rustls reads when
    /// a write blocks), so plaintext, or the peer's `close_notify`, may
    /// wait in the session after the reads ran dry.
    fn holds_input(&mut self) -> bool {
        false
    }
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

/// A `wss://` connection: the TLS session the front's handshake made, on
/// the std socket. What this module relies on in rustls 0.23's
/// `StreamOwned` (`src/stream.rs`):
/// - a read returns buffered plaintext first, without I/O; with none it
///   writes pending records, reads and opens records until it has
///   plaintext, and on a non-blocking socket with nothing to read it
///   returns `WouldBlock` (also when the pending write blocked and nothing
///   was read). So tungstenite reading until `WouldBlock` leaves no
///   plaintext in the session;
/// - a write takes the plaintext into the session and tries the socket
///   once, ignoring its error; a write or flush that blocked reads the
///   socket too (`complete_io`), which is what [`Socket::holds_input`]
///   looks for;
/// - a flush writes every pending record or fails (`WouldBlock` when the
///   socket is full): a failed flush means wait for `POLLOUT`;
/// - a write takes nothing (`Ok(0)`, which tungstenite reads as a reset)
///   when 64 KiB of records wait unsent: [`tls`] lifts that limit, so a
///   slow reader's backlog waits in the session as it waits in
///   tungstenite's unbounded write buffer on a plain socket.
pub type Tls = rustls::StreamOwned<rustls::ServerConnection, TcpStream>;

/// The worker's side of a session the front handed over: `conn` keeps the
/// plaintext it already opened, read before the socket's next bytes.
pub fn tls(mut conn: rustls::ServerConnection, sock: TcpStream) -> Tls {
    conn.set_buffer_limit(None);
    Tls::new(conn, sock)
}

impl Socket for Tls {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }

    fn holds_input(&mut self) -> bool {
        // Reads nothing from the socket: it opens the complete records the
        // session holds (the reads' `complete_io` already did) and reports
        // what waits. rustls keeps an error, and the next read returns it.
        match self.conn.process_new_packets() {
            Ok(state) => state.plaintext_bytes_to_read() > 0 || state.peer_has_closed(),
            Err(_) => true,
        }
    }
}

/// A handshake that passed, waiting for a worker: the socket or session,
/// bytes read after the head, the route and its `Sec-WebSocket-Accept`.
pub struct Upgrade {
    pub stream: Box<dyn Socket>,
    pub leftover: Vec<u8>,
    pub route: WsRoute,
    pub accept: String,
}

/// On the worker that took it: joins a room member, sends the `101`, then
/// serves the connection until it ends.
pub fn run(up: Upgrade) {
    let Upgrade {
        mut stream,
        leftover,
        route,
        accept,
    } = up;
    let _ = stream.tcp().set_nonblocking(false);
    let _ = stream.tcp().set_write_timeout(Some(CLOSE_WAIT));
    let member = match &route {
        WsRoute::Room(name) => match join(name) {
            Some(m) => Some(m),
            None => return,
        },
        WsRoute::Echo => None,
    };
    let head = workloads::ws::switching_protocols(&accept);
    // The flush sends a TLS session's record; a plain socket's is a no-op.
    if stream.write_all(head.as_bytes()).is_err() || stream.flush().is_err() {
        return;
    }
    let ws = WebSocket::from_partially_read(stream, leftover, Role::Server, Some(limits()));
    match member {
        Some(m) => room(ws, &m),
        None => echo(ws),
    }
}

type Ws = WebSocket<Box<dyn Socket>>;

fn is_timeout(e: &Error) -> bool {
    matches!(e, Error::Io(io) if matches!(io.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock))
}

/// After a read error: the close it calls for (1009 over the limit), then
/// the peer's close awaited, so the close frame is not reset away.
fn end(mut ws: Ws, e: &Error) {
    let _ = ws.get_ref().tcp().set_nonblocking(false);
    if let Some(frame) = close_for(e) {
        let _ = ws.get_ref().tcp().set_read_timeout(Some(CLOSE_WAIT));
        if ws.close(Some(frame)).is_ok() {
            while ws.read().is_ok() {}
        }
    }
}

fn echo(mut ws: Ws) {
    // Idle is fine: the worker is the connection's for as long as it lasts.
    let _ = ws.get_ref().tcp().set_read_timeout(None);
    loop {
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                if ws.send(m).is_err() {
                    return;
                }
            }
            // Pings are answered and closes completed by tungstenite.
            Ok(_) => {}
            Err(e) => return end(ws, &e),
        }
    }
}

/// A member of a room: its queue, the pipe's end that wakes its worker,
/// and leaving the room when dropped.
struct Member {
    name: String,
    id: u64,
    queue: std::sync::mpsc::Receiver<Message>,
    wake: UnixStream,
}

impl Drop for Member {
    fn drop(&mut self) {
        rooms().leave(&self.name, self.id);
    }
}

/// Joins room `name`: each message queued for the member is followed by
/// a byte on its wake-up pipe (never blocking the room: a full pipe
/// already wakes the worker). `None` if the pipe cannot be made.
fn join(name: &str) -> Option<Member> {
    let (wake, signal) = UnixStream::pair().ok()?;
    wake.set_nonblocking(true).ok()?;
    signal.set_nonblocking(true).ok()?;
    let (tx, queue) = std::sync::mpsc::channel();
    let id = rooms().join(
        name,
        Box::new(move |m| {
            let queued = tx.send(m).is_ok();
            let _ = (&signal).write(&[1]);
            queued
        }),
    );
    Some(Member {
        name: name.to_string(),
        id,
        queue,
        wake,
    })
}

/// Waits until the socket is readable (or writable, with `write`) or
/// the room woke the member.
fn wait(socket: &TcpStream, wake: &UnixStream, write: bool) -> std::io::Result<()> {
    let out = if write { libc::POLLOUT } else { 0 };
    let mut fds = [
        libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN | out,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfds, for the length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A room member, event-driven: the wake-up pipe drained first (a message
/// queued after that wakes the next poll), then every message the socket
/// holds (tungstenite's buffer included) read and broadcast, then the
/// room's queue written, then one poll (or none, when the writes left
/// input in a TLS session: [`Socket::holds_input`]).
fn room(mut ws: Ws, member: &Member) {
    if ws.get_ref().tcp().set_nonblocking(true).is_err() {
        return;
    }
    let mut sink = [0u8; 64];
    loop {
        while matches!((&member.wake).read(&mut sink), Ok(n) if n > 0) {}
        loop {
            match ws.read() {
                Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                    rooms().broadcast(&member.name, &m)
                }
                Ok(_) => {}
                Err(e) if is_timeout(&e) => break,
                Err(e) => return end(ws, &e),
            }
        }
        for m in member.queue.try_iter() {
            match ws.write(m) {
                Ok(()) => {}
                Err(e) if is_timeout(&e) => {}
                Err(e) => return end(ws, &e),
            }
        }
        let unsent = match ws.flush() {
            Ok(()) => false,
            Err(e) if is_timeout(&e) => true,
            Err(e) => return end(ws, &e),
        };
        if ws.get_mut().holds_input() {
            continue;
        }
        if wait(ws.get_ref().tcp(), &member.wake, unsent).is_err() {
            return;
        }
    }
}
