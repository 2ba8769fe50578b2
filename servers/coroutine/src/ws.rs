//! WebSocket in the coroutine model: the connection's own coroutine, on
//! may's socket, runs tungstenite for the connection's lifetime (an idle
//! connection is a parked coroutine and its small stack).
//!
//! Rooms are one [`workloads::ws::Rooms`] in the process, shared by every
//! may worker thread. A member is two coroutines: its reader runs
//! tungstenite on the socket and broadcasts what it reads; its writer
//! blocks on the member's may channel and writes each room message the
//! moment it is queued. Both write the one socket (tungstenite its pongs
//! and closes), each a whole frame at a time under one may mutex
//! ([`Shared`]). Over TLS the session is one object that cannot be split,
//! so a member there still reads with a [`ROOM_POLL`] timeout and sends
//! its queue between reads.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

use std::sync::Arc;

use may::net::TcpStream;
use tungstenite::protocol::Role;
use tungstenite::{Error, WebSocket};
use workloads::ws::{close_for, limits, Message, Rooms, WsRoute};

/// How long a room member's read waits before it sends what is queued.
pub const ROOM_POLL: Duration = Duration::from_millis(5);
/// How long a closing connection waits for the peer's close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How this server holds WebSocket connections, for `/config`.
pub fn holding() -> workloads::WebSocketHolding {
    workloads::WebSocketHolding {
        connection: "its own may coroutine on may's socket, tungstenite for its lifetime; a room \
                     member adds a writer coroutine woken by its queue (over TLS it polls the \
                     queue every 5 ms between reads)"
            .into(),
        rooms: workloads::RoomScope::SharedAcrossWorkers,
        room_spans_workers: true,
    }
}

/// What a WebSocket runs over: may's socket, or a TLS session on it
/// (`--tls-cert`: `wss://`); the socket's own timeouts pace the reads.
pub trait Socket: Read + Write + Sized {
    fn tcp(&self) -> &TcpStream;

    /// The plain socket, which a room member can split into a reader and
    /// a writer; a TLS session is handed back.
    fn into_plain(self) -> Result<TcpStream, Self> {
        Err(self)
    }
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }

    fn into_plain(self) -> Result<TcpStream, Self> {
        Ok(self)
    }
}

impl Socket for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn tcp(&self) -> &TcpStream {
        &self.sock
    }
}

/// Runs an upgraded connection (its `101` already sent) to its end.
/// `leftover`: bytes read after the handshake's head. A room member is
/// joined by the caller before the `101`: see [`join`].
pub fn serve<S: Socket>(stream: S, leftover: Vec<u8>, route: WsRoute, member: Option<Member>) {
    let _ = stream.tcp().set_write_timeout(Some(CLOSE_WAIT));
    let stream = match (&route, member) {
        (WsRoute::Room(_), Some(m)) => match stream.into_plain() {
            Ok(plain) => return room_split(plain, leftover, m),
            Err(tls) => {
                let ws =
                    WebSocket::from_partially_read(tls, leftover, Role::Server, Some(limits()));
                return room(ws, &m);
            }
        },
        _ => stream,
    };
    echo(WebSocket::from_partially_read(
        stream,
        leftover,
        Role::Server,
        Some(limits()),
    ));
}

type Ws<S> = WebSocket<S>;

fn is_timeout(e: &Error) -> bool {
    matches!(e, Error::Io(io) if matches!(io.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock))
}

/// After a read error: the close it calls for (1009 over the limit), then
/// the peer's close awaited, so the close frame is not reset away.
fn end<S: Socket>(mut ws: Ws<S>, e: &Error) {
    if let Some(frame) = close_for(e) {
        let _ = ws.get_ref().tcp().set_read_timeout(Some(CLOSE_WAIT));
        if ws.close(Some(frame)).is_ok() {
            while ws.read().is_ok() {}
        }
    }
}

fn echo<S: Socket>(mut ws: Ws<S>) {
    // Idle is fine: a held connection waits as long as the client likes.
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

/// A member of a room: its queue, and leaving the room when dropped.
pub struct Member {
    rooms: &'static Rooms,
    name: String,
    id: u64,
    /// A may channel: its writer coroutine parks on it, not the thread
    /// (taken by the writer).
    queue: Option<may::sync::mpsc::Receiver<Message>>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.rooms.leave(&self.name, self.id);
    }
}

/// Joins room `name` now (before the `101` goes out).
pub fn join(rooms: &'static Rooms, name: &str) -> Member {
    let (tx, queue) = may::sync::mpsc::channel();
    // may's sender is not `Sync`; the room's lock is held around each
    // delivery anyway, so this one is never contended.
    let tx = std::sync::Mutex::new(tx);
    let id = rooms.join(
        name,
        Box::new(move |m| tx.lock().is_ok_and(|tx| tx.send(m).is_ok())),
    );
    Member {
        rooms,
        name: name.to_string(),
        id,
        queue: Some(queue),
    }
}

/// The socket's write side, shared by a member's reader and writer: each
/// flush writes what was buffered since the last one (tungstenite flushes
/// after each frame it writes) under the lock, so frames never interleave.
struct Shared {
    read: TcpStream,
    write: Arc<may::sync::Mutex<TcpStream>>,
    pending: Vec<u8>,
}

impl Read for Shared {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.read.read(buf)
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut out = self
            .write
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let r = out.write_all(&self.pending);
        self.pending.clear();
        r
    }
}

impl Socket for Shared {
    fn tcp(&self) -> &TcpStream {
        &self.read
    }
}

/// A server frame (unmasked, FIN) of a room message.
fn frame(out: &mut Vec<u8>, m: &Message) -> bool {
    let (opcode, payload): (u8, &[u8]) = match m {
        Message::Text(t) => (1, t.as_bytes()),
        Message::Binary(b) => (2, b),
        _ => return false,
    };
    out.clear();
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= 0xffff => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    true
}

/// A room member on a plain socket: this coroutine reads (tungstenite,
/// no timeout: idle is fine) and broadcasts; a writer coroutine sends each
/// room message as soon as the room queues it. The writer ends when the
/// member leaves (its channel closes) or its write fails.
fn room_split(stream: TcpStream, leftover: Vec<u8>, mut member: Member) {
    let (Ok(clone), Some(queue)) = (stream.try_clone(), member.queue.take()) else {
        return;
    };
    let write = Arc::new(may::sync::Mutex::new(clone));
    let writer = {
        let write = write.clone();
        may::go!(move || {
            let mut buf = Vec::new();
            while let Ok(m) = queue.recv() {
                if !frame(&mut buf, &m) {
                    continue;
                }
                let Ok(mut out) = write.lock() else {
                    return;
                };
                if out.write_all(&buf).is_err() {
                    return;
                }
            }
        })
    };
    let _ = stream.set_read_timeout(None);
    let shared = Shared {
        read: stream,
        write,
        pending: Vec::new(),
    };
    let mut ws = WebSocket::from_partially_read(shared, leftover, Role::Server, Some(limits()));
    loop {
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                member.rooms.broadcast(&member.name, &m)
            }
            Ok(_) => {}
            Err(e) => {
                drop(member); // leaves the room: the writer's channel closes
                end(ws, &e);
                break;
            }
        }
    }
    let _ = writer.join();
}

fn room<S: Socket>(mut ws: Ws<S>, member: &Member) {
    let _ = ws.get_ref().tcp().set_read_timeout(Some(ROOM_POLL));
    let Some(queue) = &member.queue else {
        return;
    };
    loop {
        while let Ok(m) = queue.try_recv() {
            if ws.send(m).is_err() {
                return;
            }
        }
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                member.rooms.broadcast(&member.name, &m)
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(e) => return end(ws, &e),
        }
    }
}
