//! The WebSocket rows of the contract: what `harness verify` and each
//! server's tests send to `/ws` and `/ws/room`, through tungstenite's
//! client (which masks as RFC 6455 requires of a client); raw bytes only
//! for the handshakes that must be refused.
//!
//! They run against a server whose `/config` says it serves WebSocket
//! ([`served`]); for one that does not, its reason is reported instead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tungstenite::protocol::frame::Frame;
use tungstenite::{Message, WebSocket};

use super::{MAX_MESSAGE, TOO_BIG};
use crate::ServerConfig;

/// What a row exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    Text,
    Binary,
    Fragmented,
    Ping,
    Close,
    Largest,
    TooBig,
    NoKey,
    Room,
}

/// One WebSocket row: a stable name, why the contract requires it.
#[derive(Clone, Copy, Debug)]
pub struct WsRow {
    pub name: &'static str,
    pub why: &'static str,
    pub case: Case,
}

/// Why a row failed, in one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WsFailure(pub String);

fn fail<T>(what: impl Into<String>) -> Result<T, WsFailure> {
    Err(WsFailure(what.into()))
}

/// Every WebSocket row, in the order of the contract's table.
pub fn rows() -> Vec<WsRow> {
    let row = |name, why, case| WsRow { name, why, case };
    vec![
        row(
            "WS /ws text echoed",
            "a text message comes back unchanged: the echo a WebSocket load measures",
            Case::Text,
        ),
        row(
            "WS /ws binary echoed",
            "a binary message (every byte value) comes back unchanged",
            Case::Binary,
        ),
        row(
            "WS /ws fragmented message reassembled",
            "a message sent in three frames comes back as one message",
            Case::Fragmented,
        ),
        row(
            "WS /ws ping → pong",
            "a ping is answered with a pong carrying its payload (RFC 6455 §5.5.3)",
            Case::Ping,
        ),
        row(
            "WS /ws close handshake completed",
            "a close is answered with a close, then the connection ends (RFC 6455 §5.5.1)",
            Case::Close,
        ),
        row(
            "WS /ws 64 KiB message echoed",
            "the largest message the contract allows comes back whole",
            Case::Largest,
        ),
        row(
            "WS /ws message over 64 KiB → close 1009",
            "a message over the limit closes with 1009, so a connection's memory is bounded",
            Case::TooBig,
        ),
        row(
            "WS /ws handshake without a key → 400",
            "a bad opening handshake is refused with 400 and never upgraded",
            Case::NoKey,
        ),
        row(
            "WS /ws/room two members each receive both messages in order",
            "every member gets every member's message, the sender's own too, in one order",
            Case::Room,
        ),
    ]
}

/// Whether a server serves WebSocket, from its `/config`: `Err` with the
/// reason it gives (or that it gives none) where it does not.
pub fn served(config: &ServerConfig) -> Result<(), String> {
    if config.websocket.is_some() {
        return Ok(());
    }
    Err(config
        .websocket_unsupported
        .clone()
        .unwrap_or_else(|| "its /config does not say it serves WebSocket".into()))
}

type Ws = WebSocket<TcpStream>;

fn connect(addr: SocketAddr, target: &str, timeout: Duration) -> Result<Ws, WsFailure> {
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| WsFailure(format!("connect: {e}")))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let _ = stream.set_nodelay(true);
    match tungstenite::client(format!("ws://{addr}{target}"), stream) {
        Ok((ws, _)) => Ok(ws),
        Err(e) => fail(format!("handshake for {target}: {e}")),
    }
}

/// The next data message (tungstenite answers pings by itself).
fn next_data(ws: &mut Ws) -> Result<Message, WsFailure> {
    loop {
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => return Ok(m),
            Ok(Message::Close(c)) => return fail(format!("closed by the server: {c:?}")),
            Ok(_) => {}
            Err(e) => return fail(format!("read: {e}")),
        }
    }
}

fn send(ws: &mut Ws, m: Message) -> Result<(), WsFailure> {
    ws.send(m).map_err(|e| WsFailure(format!("send: {e}")))
}

/// A short description of a message for a failure line.
fn brief(m: &Message) -> String {
    match m {
        Message::Text(t) if t.len() <= 40 => format!("text {:?}", t.as_str()),
        m => format!("{} of {} bytes", kind(m), m.len()),
    }
}

fn kind(m: &Message) -> &'static str {
    match m {
        Message::Text(_) => "text",
        Message::Binary(_) => "binary",
        Message::Ping(_) => "ping",
        Message::Pong(_) => "pong",
        Message::Close(_) => "close",
        Message::Frame(_) => "frame",
    }
}

fn echoed(ws: &mut Ws, m: Message) -> Result<(), WsFailure> {
    send(ws, m.clone())?;
    let got = next_data(ws)?;
    if got != m {
        return fail(format!("sent {}, got {}", brief(&m), brief(&got)));
    }
    Ok(())
}

/// Reads until the server's close frame: its code.
fn close_code(ws: &mut Ws) -> Result<Option<CloseCode>, WsFailure> {
    match ws.read() {
        Ok(Message::Close(c)) => Ok(c.map(|c| c.code)),
        Ok(m) => fail(format!("expected a close, got {}", brief(&m))),
        Err(e) => fail(format!("expected a close: {e}")),
    }
}

/// After the close handshake the server ends the TCP connection.
fn ends(ws: &mut Ws) -> Result<(), WsFailure> {
    match ws.read() {
        Err(tungstenite::Error::ConnectionClosed) => {}
        Err(tungstenite::Error::AlreadyClosed) => {}
        Ok(m) => return fail(format!("after the close: {}", brief(&m))),
        Err(e) => return fail(format!("after the close: {e}")),
    }
    // tungstenite reports the handshake done; the socket itself must reach
    // end of stream (a server that never closes it fails here).
    let mut byte = [0u8; 1];
    match ws.get_mut().read(&mut byte) {
        Ok(0) => Ok(()),
        Ok(_) => fail("bytes after the close"),
        Err(e) => fail(format!(
            "the connection was left open after the close ({e})"
        )),
    }
}

fn bytes_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

impl WsRow {
    /// Runs the row against `addr`, each step bounded by `timeout`.
    pub fn run(&self, addr: SocketAddr, timeout: Duration) -> Result<(), WsFailure> {
        match self.case {
            Case::Text => echoed(
                &mut connect(addr, "/ws", timeout)?,
                Message::text("Hello WebSocket ✓"),
            ),
            Case::Binary => echoed(
                &mut connect(addr, "/ws", timeout)?,
                Message::binary((0..=255u8).collect::<Vec<u8>>()),
            ),
            Case::Fragmented => {
                let mut ws = connect(addr, "/ws", timeout)?;
                let parts = [
                    ("one ", OpCode::Data(Data::Text)),
                    ("two ", OpCode::Data(Data::Continue)),
                ];
                for (text, op) in parts {
                    send(
                        &mut ws,
                        Message::Frame(Frame::message(text.as_bytes().to_vec(), op, false)),
                    )?;
                }
                send(
                    &mut ws,
                    Message::Frame(Frame::message(
                        b"three".to_vec(),
                        OpCode::Data(Data::Continue),
                        true,
                    )),
                )?;
                let got = next_data(&mut ws)?;
                if got != Message::text("one two three") {
                    return fail(format!(
                        "sent \"one two three\" in 3 frames, got {}",
                        brief(&got)
                    ));
                }
                Ok(())
            }
            Case::Ping => {
                let mut ws = connect(addr, "/ws", timeout)?;
                send(&mut ws, Message::Ping(b"are you there".to_vec().into()))?;
                match ws.read() {
                    Ok(Message::Pong(p)) if p.as_ref() == b"are you there" => Ok(()),
                    Ok(Message::Pong(p)) => fail(format!("pong with {p:?}")),
                    Ok(m) => fail(format!("expected a pong, got {}", brief(&m))),
                    Err(e) => fail(format!("expected a pong: {e}")),
                }
            }
            Case::Close => {
                let mut ws = connect(addr, "/ws", timeout)?;
                echoed(&mut ws, Message::text("before the close"))?;
                ws.close(None)
                    .map_err(|e| WsFailure(format!("close: {e}")))?;
                match close_code(&mut ws)? {
                    Some(CloseCode::Normal) | None => ends(&mut ws),
                    Some(c) => fail(format!("answered the close with {c}")),
                }
            }
            Case::Largest => echoed(
                &mut connect(addr, "/ws", timeout)?,
                Message::binary(bytes_of(MAX_MESSAGE)),
            ),
            Case::TooBig => {
                let mut ws = connect(addr, "/ws", timeout)?;
                // The server may close before it has read all of it: a
                // write error then is the close racing the message.
                let _ = ws.send(Message::binary(bytes_of(MAX_MESSAGE + 1)));
                match close_code(&mut ws) {
                    Ok(Some(c)) if u16::from(c) == TOO_BIG => Ok(()),
                    Ok(c) => fail(format!("closed with {c:?}, not {TOO_BIG}")),
                    Err(e) => Err(e),
                }
            }
            Case::NoKey => no_key(addr, timeout),
            Case::Room => room(addr, timeout),
        }
    }
}

/// `GET /ws` with everything but `Sec-WebSocket-Key`: a 400, no `101`.
fn no_key(addr: SocketAddr, timeout: Duration) -> Result<(), WsFailure> {
    let mut c = crate::probe::Conn::connect_within(addr, timeout, timeout)
        .map_err(|e| WsFailure(format!("connect: {e}")))?;
    c.send(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Version: 13\r\n\r\n",
    )
    .map_err(|e| WsFailure(format!("send: {e}")))?;
    let r = c
        .read_response(false)
        .map_err(|e| WsFailure(format!("no answer: {e}")))?;
    if r.status != 400 {
        return fail(format!("answered {} (expected 400, no upgrade)", r.status));
    }
    Ok(())
}

/// Two members of a fresh room: A's message, once A has it back, then
/// B's; both receive both, in that order.
fn room(addr: SocketAddr, timeout: Duration) -> Result<(), WsFailure> {
    let name = format!(
        "verify-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let target = format!("/ws/room?name={name}");
    let mut a = connect(addr, &target, timeout)?;
    let mut b = connect(addr, &target, timeout)?;
    let one = Message::text("one from a");
    let two = Message::binary(b"two from b".to_vec());
    send(&mut a, one.clone())?;
    let a1 = next_data(&mut a).map_err(|e| WsFailure(format!("a, 1st: {e}")))?;
    send(&mut b, two.clone())?;
    let got = [
        a1,
        next_data(&mut a).map_err(|e| WsFailure(format!("a, 2nd: {e}")))?,
        next_data(&mut b).map_err(|e| WsFailure(format!("b, 1st: {e}")))?,
        next_data(&mut b).map_err(|e| WsFailure(format!("b, 2nd: {e}")))?,
    ];
    let want = [one.clone(), two.clone(), one, two];
    if got != want {
        let seen: Vec<String> = got.iter().map(brief).collect();
        return fail(format!(
            "a then b received {seen:?}; each should get a's then b's"
        ));
    }
    let _ = (a.close(None), b.close(None));
    Ok(())
}

/// A server that does not serve WebSocket must not upgrade: `GET /ws` with
/// a valid handshake is answered, never with `101`.
pub fn not_upgraded(addr: SocketAddr, timeout: Duration) -> Result<u16, WsFailure> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| WsFailure(format!("connect: {e}")))?;
    let _ = s.set_read_timeout(Some(timeout));
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .map_err(|e| WsFailure(format!("send: {e}")))?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head)
        .map_err(|e| WsFailure(format!("no answer: {e}")))?;
    let status: u16 = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| WsFailure("not an HTTP answer".into()))?;
    if status == 101 {
        return fail("upgraded, though its /config says it does not serve WebSocket");
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_say_why_in_one_line() {
        let rows = rows();
        let mut names: Vec<&str> = rows.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), rows.len());
        assert!(rows
            .iter()
            .all(|r| !r.why.is_empty() && !r.why.contains('\n')));
    }
}
