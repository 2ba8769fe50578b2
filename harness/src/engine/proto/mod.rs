//! A connection's protocol — what goes on the wire and how what comes back
//! is matched to requests — as a type the loop dispatches on.
//!
//! [`Proto`] is the per-connection half: each connection carries only the
//! state of its own protocol (plain HTTP/1.1 carries nothing beyond its
//! response reader; HTTP/2 a boxed [`h2::H2Conn`]; WebSocket a boxed
//! [`WsConn`]; HTTP/3 a boxed [`h3::H3Conn`], with its QUIC connection
//! (the transport's state, so no other connection carries it), met by the
//! worker in `worker/h3.rs` rather than at the points below, since QUIC
//! moves its own bytes). The plan-level half is [`ProtoPlan`], one variant
//! per protocol with only its own settings (a WebSocket's upgrade, HTTP/2's
//! streams), beside the plan's `TransportPlan`: no plan can pair two
//! protocols' settings, and `Proto::new` makes each connection's state
//! from it without checking anything.
//!
//! The loop (`worker`) meets a protocol at these points, each a `match` on
//! `Proto`:
//!
//! - **open** (`Worker::start_buffered` on a new socket): the opening
//!   bytes — HTTP/2's preface and SETTINGS ([`h2::H2Conn::open`]), a
//!   WebSocket upgrade (`Conn::queue_opening`).
//! - **encode** (`Worker::start_buffered`): a request's bytes — straight
//!   from the plan (HTTP/1.1 one at a time, see `Framing::buffered`), or
//!   into the connection's out buffer (pipelined requests, HTTP/2 frames,
//!   WebSocket frames).
//! - **feed** (`Worker::dispatch`): received plaintext (TLS already
//!   removed, both backends) — [`h1::ResponseReader`] in order,
//!   [`h2::H2Conn::feed`] by stream id, `WsConn::feed` (`engine::ws`) by
//!   message — whose answers settle a slot of the ring, fail one slot
//!   (an HTTP/2 reset), lower the ring's limit (SETTINGS) or drain the
//!   socket (GOAWAY).
//! - **close** ([`Proto::close`]): per-socket state (an HTTP/2 codec) ends
//!   with the socket.
//!
//! What is left to send is the connection's (`Conn::out`, flushed once per
//! read); writing, io_uring's sends, the transport, timeouts, pacing and
//! counting need nothing from a protocol. `docs/ARCHITECTURE.md` ("Where
//! to add a protocol") lists the files a new one touches.

pub(crate) mod h1;
pub(crate) mod h2;
pub(crate) mod h3;

use super::quic::QuicConn;
use super::ws::{WsConn, WsPlan};
use super::ProtoPlan;

/// A connection's protocol and its state.
pub(crate) enum Proto {
    /// HTTP/1.1, one request in flight.
    H1,
    /// HTTP/1.1 pipelining, answered in order.
    Pipelined,
    /// HTTP/2 (h2c or over TLS).
    H2(Box<h2::H2Conn>),
    /// A WebSocket echo or room member.
    Ws(Box<WsConn>),
    /// HTTP/3, with the QUIC connection it runs over.
    H3(Box<h3::H3Conn>),
}

impl Proto {
    /// A connection's protocol state for the plan's protocol: the
    /// WebSocket's made by `ws` from its upgrade (the worker knows its
    /// room), HTTP/2's codec for requests of at most `request_max` bytes.
    pub(crate) fn new(
        plan: &ProtoPlan,
        request_max: usize,
        ws: impl FnOnce(&WsPlan) -> WsConn,
    ) -> Proto {
        match plan {
            ProtoPlan::H1 { .. } => Proto::H1,
            ProtoPlan::Pipelined { .. } => Proto::Pipelined,
            ProtoPlan::H2 { streams } => Proto::H2(Box::new(h2::H2Conn::new(
                usize::from(*streams),
                request_max,
            ))),
            ProtoPlan::H3 { .. } => Proto::H3(Box::default()),
            ProtoPlan::Ws { ws: plan, .. } => Proto::Ws(Box::new(ws(plan))),
        }
    }

    /// Requests go through the connection's out buffer, not straight
    /// from the plan.
    #[inline]
    pub(crate) fn buffered(&self) -> bool {
        !matches!(self, Proto::H1)
    }

    #[inline]
    pub(crate) fn ws(&self) -> Option<&WsConn> {
        match self {
            Proto::Ws(ws) => Some(ws),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn ws_mut(&mut self) -> Option<&mut WsConn> {
        match self {
            Proto::Ws(ws) => Some(ws),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn h2_mut(&mut self) -> Option<&mut h2::H2Conn> {
        match self {
            Proto::H2(h2) => Some(h2),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn h3_mut(&mut self) -> Option<&mut h3::H3Conn> {
        match self {
            Proto::H3(h3) => Some(h3),
            _ => None,
        }
    }

    /// HTTP/3: the open QUIC connection.
    #[inline]
    pub(crate) fn quic(&self) -> Option<&QuicConn> {
        match self {
            Proto::H3(h3) => h3.quic.as_deref(),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn quic_mut(&mut self) -> Option<&mut QuicConn> {
        match self {
            Proto::H3(h3) => h3.quic.as_deref_mut(),
            _ => None,
        }
    }

    /// HTTP/2 after a GOAWAY: no new stream on this socket.
    #[inline]
    pub(crate) fn draining(&self) -> bool {
        matches!(self, Proto::H2(h2) if h2.draining)
    }

    /// The socket closed: its per-socket state goes with it.
    pub(crate) fn close(&mut self) {
        if let Proto::H2(h2) = self {
            h2.close();
        }
    }
}
