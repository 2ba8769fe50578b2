//! WebSocket on the event loop: hyper answers the handshake with its `101`
//! and hands the upgraded connection over; tokio-tungstenite frames it as
//! a task of the loop that accepted it (a few KiB while idle, as Node.js).
//!
//! Rooms are one [`workloads::ws::Rooms`] shared by every loop (a lock per
//! message), so a room spans `--workers`; each member's outgoing messages
//! wait in its own unbounded queue, drained by its task.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;
use workloads::ws::{close_for, limits, Message, Rooms, WsRoute};

type Ws = WebSocketStream<TokioIo<Upgraded>>;

/// How long a closing connection waits for the peer's close.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How this server holds WebSocket connections, for `/config`.
pub fn holding() -> workloads::WebSocketHolding {
    workloads::WebSocketHolding {
        connection: "a tokio task on the loop that accepted it (hyper upgrade + tokio-tungstenite)"
            .into(),
        rooms: workloads::RoomScope::SharedAcrossWorkers,
        room_spans_workers: true,
    }
}

/// Takes over an upgraded connection: its route's loop, run as a task.
/// A room member is joined now, before the `101` is sent.
pub fn spawn(on: hyper::upgrade::OnUpgrade, route: WsRoute, rooms: &Arc<Rooms>) {
    match route {
        WsRoute::Echo => {
            tokio::spawn(async move {
                if let Some(ws) = open(on).await {
                    echo(ws).await
                }
            });
        }
        WsRoute::Room(name) => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let id = rooms.join(&name, Box::new(move |m| tx.send(m).is_ok()));
            let member = Member {
                rooms: Arc::clone(rooms),
                name,
                id,
            };
            tokio::spawn(async move {
                if let Some(ws) = open(on).await {
                    room(ws, &member, rx).await
                }
            });
        }
    }
}

async fn open(on: hyper::upgrade::OnUpgrade) -> Option<Ws> {
    let upgraded = on.await.ok()?;
    Some(
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(limits()))
            .await,
    )
}

/// A read error: the close it calls for (1009 over the limit), then the
/// peer's close awaited, so the close frame is not lost to a reset.
async fn end(mut ws: Ws, e: &tokio_tungstenite::tungstenite::Error) {
    if let Some(frame) = close_for(e) {
        let _ = ws.close(Some(frame)).await;
        let _ = tokio::time::timeout(CLOSE_WAIT, async {
            while let Some(Ok(_)) = ws.next().await {}
        })
        .await;
    }
}

async fn echo(mut ws: Ws) {
    // Pings are answered and closes completed by tungstenite as it reads.
    while let Some(msg) = ws.next().await {
        match msg {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                if ws.send(m).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => return end(ws, &e).await,
        }
    }
}

/// A member of a room: leaves it when its task ends, however it ends.
struct Member {
    rooms: Arc<Rooms>,
    name: String,
    id: u64,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.rooms.leave(&self.name, self.id);
    }
}

async fn room(
    mut ws: Ws,
    member: &Member,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<Message>,
) {
    loop {
        tokio::select! {
            out = queue.recv() => match out {
                Some(m) => if ws.send(m).await.is_err() { return },
                None => return,
            },
            msg = ws.next() => match msg {
                Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                    member.rooms.broadcast(&member.name, &m)
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return end(ws, &e).await,
                None => return,
            },
        }
    }
}
