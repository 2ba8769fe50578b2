//! WebSocket in the worker-pool model: a worker thread takes the
//! connection and holds it for its whole life, as an Apache prefork child
//! holds its connection. So `--workers` connections are served at once;
//! the next handshake waits (queued behind them in the default shape, in
//! the accept queue with `--per-connection`) and gets its `101` only when
//! a worker is free: the model's limit, shown, not hidden.
//!
//! The `101` is written by the worker that takes the connection, after a
//! room member has joined. Rooms are one [`workloads::ws::Rooms`] for the
//! process. tungstenite's `WebSocket` reads and writes as one object, so a
//! member reads with a short timeout and sends what its room queued
//! between reads (a room message waits up to [`ROOM_POLL`]).

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::Duration;

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
        connection: "a worker thread for the connection's lifetime (tungstenite, blocking): \
                     connections beyond --workers wait for their 101 until a worker is free"
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

/// A handshake that passed, waiting for a worker: the blocking socket,
/// bytes read after the head, the route and its `Sec-WebSocket-Accept`.
pub struct Upgrade {
    pub stream: TcpStream,
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
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(CLOSE_WAIT));
    let member = match &route {
        WsRoute::Room(name) => Some(join(name)),
        WsRoute::Echo => None,
    };
    let head = workloads::ws::switching_protocols(&accept);
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let ws = WebSocket::from_partially_read(stream, leftover, Role::Server, Some(limits()));
    match member {
        Some(m) => room(ws, &m),
        None => echo(ws),
    }
}

type Ws = WebSocket<TcpStream>;

fn is_timeout(e: &Error) -> bool {
    matches!(e, Error::Io(io) if matches!(io.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock))
}

/// After a read error: the close it calls for (1009 over the limit), then
/// the peer's close awaited, so the close frame is not reset away.
fn end(mut ws: Ws, e: &Error) {
    if let Some(frame) = close_for(e) {
        let _ = ws.get_mut().set_read_timeout(Some(CLOSE_WAIT));
        if ws.close(Some(frame)).is_ok() {
            while ws.read().is_ok() {}
        }
    }
}

fn echo(mut ws: Ws) {
    // Idle is fine: the worker is the connection's for as long as it lasts.
    let _ = ws.get_mut().set_read_timeout(None);
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
struct Member {
    name: String,
    id: u64,
    queue: std::sync::mpsc::Receiver<Message>,
}

impl Drop for Member {
    fn drop(&mut self) {
        rooms().leave(&self.name, self.id);
    }
}

fn join(name: &str) -> Member {
    let (tx, queue) = std::sync::mpsc::channel();
    let id = rooms().join(name, Box::new(move |m| tx.send(m).is_ok()));
    Member {
        name: name.to_string(),
        id,
        queue,
    }
}

fn room(mut ws: Ws, member: &Member) {
    let _ = ws.get_mut().set_read_timeout(Some(ROOM_POLL));
    loop {
        for m in member.queue.try_iter() {
            if ws.send(m).is_err() {
                return;
            }
        }
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => rooms().broadcast(&member.name, &m),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(e) => return end(ws, &e),
        }
    }
}
