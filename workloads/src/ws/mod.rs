//! WebSocket in the contract (RFC 6455): `GET /ws`, an echo, and
//! `GET /ws/room?name=R`, a fan-out to every member of room R.
//!
//! What every server shares lives here: the routes ([`route`]), the
//! handshake's validation and its `101` ([`accept`], [`switching_protocols`]),
//! the message limit and the close code past it ([`limits`], [`close_for`]),
//! and the rooms ([`Rooms`]). The framing, masking and close handshake are
//! tungstenite's: each server hands it the upgraded stream
//! (`from_raw_socket`), in its own runtime. [`rows`] is the verification
//! (`harness verify`, each server's tests).
//!
//! A member is in its room once its `101` is sent: a server joins it before
//! it answers, so a client that has its `101` knows every message sent
//! from then on reaches it.

pub mod rows;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use base64::Engine;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, WebSocketConfig};
pub use tungstenite::Message;

use crate::response::{Body, Response};

/// The echo.
pub const ECHO_PATH: &str = "/ws";
/// The fan-out.
pub const ROOM_PATH: &str = "/ws/room";
/// The largest message (and frame) a server takes: 64 KiB.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The close code for a message over [`MAX_MESSAGE`] (RFC 6455 §7.4.1).
pub const TOO_BIG: u16 = 1009;
/// Longest room name.
pub const ROOM_NAME_MAX: usize = 64;

/// A WebSocket route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsRoute {
    Echo,
    Room(String),
}

/// The WebSocket route of a request target, if it names one: `Some(Err)`
/// for `/ws/room` without a valid `name` (letters, digits, `-`, `_`; 1 to
/// 64 of them).
pub fn route(target: &str) -> Option<Result<WsRoute, String>> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        ECHO_PATH => Some(Ok(WsRoute::Echo)),
        ROOM_PATH => {
            let name = query.split('&').find_map(|p| p.strip_prefix("name="));
            Some(match name {
                Some(n)
                    if !n.is_empty()
                        && n.len() <= ROOM_NAME_MAX
                        && n.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
                {
                    Ok(WsRoute::Room(n.to_string()))
                }
                _ => Err(format!(
                    "name must be 1 to {ROOM_NAME_MAX} letters, digits, '-' or '_'"
                )),
            })
        }
        _ => None,
    }
}

/// Whether a comma-separated header value lists `token` (case-insensitively).
fn lists(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// [`accept`] from a request's raw head, for servers whose HTTP/1 codec
/// keeps no headers (the shared codec of the coroutine and worker-pool
/// servers): httparse reads them again for this one request. The route and
/// the `Sec-WebSocket-Accept`, or the reason for the 400.
pub fn accept_head(
    method: &str,
    head: &[u8],
    route: Result<WsRoute, String>,
) -> Result<(WsRoute, String), String> {
    let route = route?;
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).map_err(|e| format!("bad head: {e}"))?;
    let pairs = req.headers.iter().map(|h| (h.name, h.value));
    accept(method, pairs).map(|key| (route, key))
}

/// Validates an opening handshake (RFC 6455 §4.2.1) from its method and
/// headers: the `Sec-WebSocket-Accept` to send, or the one-line reason for
/// the 400.
pub fn accept<'a>(
    method: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<String, String> {
    if method != "GET" {
        return Err("a WebSocket handshake is a GET".into());
    }
    let (mut upgrade, mut connection, mut version, mut key) = (false, false, None, None);
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("upgrade") {
            upgrade |= lists(value, "websocket");
        } else if name.eq_ignore_ascii_case("connection") {
            connection |= lists(value, "upgrade");
        } else if name.eq_ignore_ascii_case("sec-websocket-version") {
            version = Some(value.trim_ascii().to_vec());
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            key = Some(value.trim_ascii().to_vec());
        }
    }
    if !upgrade {
        return Err("no Upgrade: websocket".into());
    }
    if !connection {
        return Err("no Connection: Upgrade".into());
    }
    if version.as_deref() != Some(b"13") {
        return Err("Sec-WebSocket-Version must be 13".into());
    }
    let key = key.ok_or("no Sec-WebSocket-Key")?;
    match base64::engine::general_purpose::STANDARD.decode(&key) {
        Ok(raw) if raw.len() == 16 => Ok(tungstenite::handshake::derive_accept_key(&key)),
        _ => Err("Sec-WebSocket-Key is not 16 bytes in base64".into()),
    }
}

/// The `Sec-WebSocket-Accept` a server answers to `key` (RFC 6455 §4.2.2):
/// what a client checks.
pub fn accept_key(key: &[u8]) -> String {
    tungstenite::handshake::derive_accept_key(key)
}

/// The `101` that completes a handshake, without `Date` and `Server`
/// (whatever the server adds after it is its own).
pub fn switching_protocols(accept: &str) -> String {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
}

/// The 400 for a handshake that [`accept`] refused, or a bad room name.
pub fn bad_handshake(reason: String) -> Response {
    Response {
        status: 400,
        content_type: "text/plain",
        body: Body::Owned(reason.into_bytes()),
    }
}

/// The largest frame a server reads whole (1 MiB): a message over
/// [`MAX_MESSAGE`] in a frame under this is read to its end and answered
/// with a clean close 1009; a frame over it is refused from its header.
pub const MAX_FRAME: usize = 1 << 20;

/// The read buffer each connection starts with: 4 KiB.
///
/// tungstenite allocates it whole when a connection opens, 128 KiB by
/// default, which made a held WebSocket cost the event loop and the
/// coroutine server about 140 KiB each (Node.js's `ws`: 7.5 KiB), so that
/// `harness models` measured tungstenite's default rather than the model.
/// 4 KiB is what tungstenite's own documentation suggests for many
/// connections; a larger message still arrives whole, the buffer growing
/// to hold it.
pub const READ_BUFFER: usize = 4 * 1024;

/// tungstenite's settings for a server of the contract: messages up to
/// [`MAX_MESSAGE`], frames up to [`MAX_FRAME`], a [`READ_BUFFER`] per
/// connection.
pub fn limits() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_FRAME))
        .read_buffer_size(READ_BUFFER)
}

/// The close frame a server sends for a read error: 1009 for a message
/// over the limit, 1002 for a protocol error, 1007 for text that is not
/// UTF-8; `None` where the connection is simply gone.
pub fn close_for(e: &tungstenite::Error) -> Option<CloseFrame> {
    let (code, reason) = match e {
        tungstenite::Error::Capacity(_) => (CloseCode::Size, "message over 64 KiB"),
        tungstenite::Error::Protocol(_) => (CloseCode::Protocol, "protocol error"),
        tungstenite::Error::Utf8(_) => (CloseCode::Invalid, "text is not UTF-8"),
        _ => return None,
    };
    Some(CloseFrame {
        code,
        reason: reason.into(),
    })
}

/// Delivers one message to one member: `false` once it is gone.
pub type Deliver = Box<dyn Fn(Message) -> bool + Send + Sync>;

/// The rooms of a server, shared by every connection of every worker that
/// holds the same `Rooms`. One lock is taken per message: a message is
/// queued to every member before the next one is, so every member receives
/// the room's messages in the one order the server received them.
#[derive(Default)]
pub struct Rooms {
    rooms: Mutex<HashMap<String, Vec<(u64, Deliver)>>>,
    next: AtomicU64,
}

impl Rooms {
    pub fn new() -> Rooms {
        Rooms::default()
    }

    /// Adds a member to room `name`; its id, for [`Rooms::leave`].
    pub fn join(&self, name: &str, deliver: Deliver) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        rooms
            .entry(name.to_string())
            .or_default()
            .push((id, deliver));
        id
    }

    pub fn leave(&self, name: &str, id: u64) {
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(members) = rooms.get_mut(name) {
            members.retain(|(m, _)| *m != id);
            if members.is_empty() {
                rooms.remove(name);
            }
        }
    }

    /// Queues `msg` to every member of room `name`, the sender included;
    /// members that are gone are dropped.
    pub fn broadcast(&self, name: &str, msg: &Message) {
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(members) = rooms.get_mut(name) {
            members.retain(|(_, deliver)| deliver(msg.clone()));
        }
    }

    /// Members of room `name` now.
    pub fn members(&self, name: &str) -> usize {
        let rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        rooms.get(name).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(pairs: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static [u8])> {
        pairs.iter().map(|(n, v)| (*n, v.as_bytes())).collect()
    }

    const GOOD: &[(&str, &str)] = &[
        ("Host", "t"),
        ("Upgrade", "websocket"),
        ("Connection", "keep-alive, Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];

    #[test]
    fn the_rfcs_sample_handshake_is_accepted() {
        // RFC 6455 §1.3's example key and accept value.
        assert_eq!(
            accept("GET", hs(GOOD)),
            Ok("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".to_string())
        );
        assert!(switching_protocols("x").starts_with("HTTP/1.1 101 "));
    }

    #[test]
    fn a_bad_handshake_says_why() {
        assert!(accept("POST", hs(GOOD)).is_err());
        for drop in [
            "Upgrade",
            "Connection",
            "Sec-WebSocket-Key",
            "Sec-WebSocket-Version",
        ] {
            let h: Vec<_> = GOOD.iter().copied().filter(|(n, _)| *n != drop).collect();
            let why = accept("GET", hs(&h)).unwrap_err();
            assert!(why.contains(drop), "{drop}: {why}");
        }
        let mut h = GOOD.to_vec();
        h[3] = ("Sec-WebSocket-Key", "c2hvcnQ=");
        assert!(accept("GET", hs(&h)).unwrap_err().contains("16 bytes"));
        assert_eq!(bad_handshake("x".into()).status, 400);
    }

    #[test]
    fn routes_and_room_names() {
        assert_eq!(route("/ws"), Some(Ok(WsRoute::Echo)));
        assert_eq!(
            route("/ws/room?name=chat-1"),
            Some(Ok(WsRoute::Room("chat-1".into())))
        );
        assert!(matches!(route("/ws/room"), Some(Err(_))));
        assert!(matches!(route("/ws/room?name=a%20b"), Some(Err(_))));
        assert_eq!(route("/hello"), None);
    }

    #[test]
    fn a_room_delivers_in_one_order_to_every_member_and_drops_the_gone() {
        let rooms = Rooms::new();
        let (a_tx, a_rx) = std::sync::mpsc::channel();
        let (b_tx, b_rx) = std::sync::mpsc::channel::<Message>();
        let a = rooms.join("r", Box::new(move |m| a_tx.send(m).is_ok()));
        rooms.join("r", Box::new(move |m| b_tx.send(m).is_ok()));
        rooms.join("other", Box::new(|_| panic!("another room")));
        rooms.broadcast("r", &Message::text("one"));
        rooms.broadcast("r", &Message::text("two"));
        let got =
            |rx: &std::sync::mpsc::Receiver<Message>| -> Vec<Message> { rx.try_iter().collect() };
        let want = vec![Message::text("one"), Message::text("two")];
        assert_eq!(got(&a_rx), want);
        assert_eq!(got(&b_rx), want);
        drop(b_rx);
        rooms.broadcast("r", &Message::text("three"));
        assert_eq!(rooms.members("r"), 1, "the gone member is dropped");
        rooms.leave("r", a);
        assert_eq!(rooms.members("r"), 0);
    }
}
