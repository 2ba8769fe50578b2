//! WebSocket in the coroutine model: the connection's own coroutine, on
//! may's socket, runs tungstenite for the connection's lifetime (an idle
//! connection is a parked coroutine and its small stack).
//!
//! Rooms are one [`workloads::ws::Rooms`] in the process, shared by every
//! may worker thread. tungstenite's `WebSocket` is one object that both
//! reads and writes (pongs, close replies), so a member's coroutine does
//! both: it reads with a short timeout and, between reads, sends what the
//! room queued for it. A room message therefore waits up to
//! [`ROOM_POLL`] for a member that is not itself sending.

use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

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
                     member polls its queue every 5 ms between reads"
            .into(),
        rooms: workloads::RoomScope::SharedAcrossWorkers,
        room_spans_workers: true,
    }
}

/// What a WebSocket runs over: may's socket, or a TLS session on it
/// (`--tls-cert`: `wss://`); the socket's own timeouts pace the reads.
pub trait Socket: Read + Write {
    fn tcp(&self) -> &TcpStream;
}

impl Socket for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
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
    let ws = WebSocket::from_partially_read(stream, leftover, Role::Server, Some(limits()));
    match (route, member) {
        (WsRoute::Room(_), Some(m)) => room(ws, &m),
        _ => echo(ws),
    }
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
    queue: std::sync::mpsc::Receiver<Message>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.rooms.leave(&self.name, self.id);
    }
}

/// Joins room `name` now (before the `101` goes out).
pub fn join(rooms: &'static Rooms, name: &str) -> Member {
    let (tx, queue) = std::sync::mpsc::channel();
    let id = rooms.join(name, Box::new(move |m| tx.send(m).is_ok()));
    Member {
        rooms,
        name: name.to_string(),
        id,
        queue,
    }
}

fn room<S: Socket>(mut ws: Ws<S>, member: &Member) {
    let _ = ws.get_ref().tcp().set_read_timeout(Some(ROOM_POLL));
    loop {
        for m in member.queue.try_iter() {
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
