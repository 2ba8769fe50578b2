//! QUIC as a transport of the engine (`--h3`): quinn-proto's sans-IO
//! connection driven from the one loop. Each engine connection is a QUIC
//! connection on a UDP socket of its own (connected to the server, so the
//! kernel hands it only that server's datagrams and epoll names its
//! connection by the socket's token), with its own quinn-proto endpoint
//! (a few hash maps: it routes the socket's datagrams to the connection
//! and goes with it). TLS is rustls inside quinn-proto, configured as TCP's
//! is (`tls.rs`: `--cacert`, `--insecure`), offering ALPN `h3`.
//!
//! The loop meets it at four points: a socket readable
//! ([`QuicConn::receive`]), datagrams to send ([`QuicConn::transmit`],
//! after every change), its timers ([`QuicConn::timer_ns`], folded into
//! the loop's wait, and [`QuicConn::expire`]), and what the connection
//! says happened ([`QuicConn::poll`]). Datagrams go one `send` each
//! (no GSO yet); a send that would block drops its datagram, which QUIC's
//! loss recovery resends.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig,
    TransportConfig,
};

use super::tls::TlsPlan;
use crate::stats::QuicCounts;

/// A connection with no answer this long after its first Initial fails
/// (and, with none ever established, ends the run).
pub(crate) const HANDSHAKE_WAIT: Duration = Duration::from_secs(2);

/// Each UDP socket's send and receive buffers asked for (the kernel caps
/// them at `net.core.wmem_max` / `rmem_max`).
const SOCKET_BUF: usize = 2 << 20;

/// The largest UDP payload read at once.
const DATAGRAM_MAX: usize = 64 * 1024;

/// QUIC for one thread: the client configuration every connection is
/// made from, and the clock quinn-proto's `Instant`s are measured on.
pub(crate) struct Quic {
    config: ClientConfig,
    endpoint_config: Arc<EndpointConfig>,
    pub server_name: String,
    /// The engine's clock reading at `base`.
    base_ns: u64,
    base: Instant,
    /// Scratch for one datagram in and one out.
    recv_buf: Box<[u8]>,
    send_buf: Vec<u8>,
    /// Handshakes that failed in a row with none completed yet, and those
    /// completed.
    pub fails: u32,
    pub completed: u64,
    /// Datagrams dropped because a socket's send buffer was full.
    pub send_dropped: u64,
}

impl Quic {
    /// `now_ns`: the engine's clock now.
    pub(crate) fn new(plan: &TlsPlan, now_ns: u64) -> io::Result<Quic> {
        let mut crypto = plan.client_config().map_err(io::Error::other)?;
        crypto.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = QuicClientConfig::try_from(crypto).map_err(io::Error::other)?;
        let mut transport = TransportConfig::default();
        transport
            .max_idle_timeout(Some(
                Duration::from_secs(30)
                    .try_into()
                    .map_err(io::Error::other)?,
            ))
            // A slow --rate leaves a connection idle between requests:
            // a PING now and then keeps the server (quic-go and quinn idle
            // out after 30 s) from closing it.
            .keep_alive_interval(Some(Duration::from_secs(10)))
            // The server opens its control and QPACK streams: let it.
            .max_concurrent_uni_streams(16u32.into());
        let mut config = ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport));
        Ok(Quic {
            config,
            endpoint_config: Arc::new(EndpointConfig::default()),
            server_name: plan.server_name.clone(),
            base_ns: now_ns,
            base: Instant::now(),
            recv_buf: vec![0u8; DATAGRAM_MAX].into_boxed_slice(),
            send_buf: Vec::with_capacity(1500),
            fails: 0,
            completed: 0,
            send_dropped: 0,
        })
    }

    /// quinn-proto's time for the engine's `ns`.
    #[inline]
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        self.base + Duration::from_nanos(ns.saturating_sub(self.base_ns))
    }

    #[inline]
    fn ns(&self, t: Instant) -> u64 {
        self.base_ns + t.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// Opens a QUIC connection to `addr` on a new UDP socket, registered
    /// (readable, edge-triggered) as connection `index`; its first
    /// Initial is sent.
    pub(crate) fn connect(
        &mut self,
        addr: SocketAddr,
        registry: &Registry,
        index: usize,
        now_ns: u64,
    ) -> io::Result<QuicConn> {
        let local: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().expect("an address")
        } else {
            "[::]:0".parse().expect("an address")
        };
        let socket = UdpSocket::bind(local)?;
        // Room for a window's worth of datagrams each way: a send that
        // would block drops its datagram (resent, but counted lost).
        let s2 = socket2::SockRef::from(&socket);
        let _ = s2.set_send_buffer_size(SOCKET_BUF);
        let _ = s2.set_recv_buffer_size(SOCKET_BUF);
        socket.connect(addr)?;
        socket.set_nonblocking(true)?;
        registry.register(
            &mut SourceFd(&socket.as_raw_fd()),
            Token(index),
            Interest::READABLE,
        )?;
        let mut endpoint = Endpoint::new(Arc::clone(&self.endpoint_config), None, false, None);
        let (handle, conn) = endpoint
            .connect(
                self.instant(now_ns),
                self.config.clone(),
                addr,
                &self.server_name,
            )
            .map_err(io::Error::other)?;
        let mut q = QuicConn {
            endpoint,
            handle,
            conn,
            socket,
            addr,
            started_ns: now_ns,
            established: false,
        };
        self.transmit(&mut q, now_ns);
        Ok(q)
    }

    /// Reads every datagram waiting on `q`'s socket into its connection:
    /// the bytes read.
    pub(crate) fn receive(&mut self, q: &mut QuicConn, now_ns: u64) -> u64 {
        let now = self.instant(now_ns);
        let mut bytes = 0;
        loop {
            let n = match q.socket.recv(&mut self.recv_buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Would block, or an ICMP error (no listener): the
                // handshake's timer decides what that means.
                Err(_) => break,
            };
            bytes += n as u64;
            let data = BytesMut::from(&self.recv_buf[..n]);
            self.send_buf.clear();
            match q
                .endpoint
                .handle(now, q.addr, None, None, data, &mut self.send_buf)
            {
                Some(DatagramEvent::ConnectionEvent(h, ev)) if h == q.handle => {
                    q.conn.handle_event(ev);
                }
                Some(DatagramEvent::Response(t)) => {
                    let _ = q.socket.send(&self.send_buf[..t.size]);
                }
                _ => {}
            }
        }
        bytes
    }

    /// Sends what `q`'s connection has to send now, and hands its
    /// endpoint what it owes it.
    pub(crate) fn transmit(&mut self, q: &mut QuicConn, now_ns: u64) {
        let now = self.instant(now_ns);
        while let Some(ev) = q.conn.poll_endpoint_events() {
            if let Some(back) = q.endpoint.handle_event(q.handle, ev) {
                q.conn.handle_event(back);
            }
        }
        loop {
            self.send_buf.clear();
            let Some(t) = q.conn.poll_transmit(now, 1, &mut self.send_buf) else {
                break;
            };
            // Would block: dropped, and resent by loss recovery.
            if q.socket.send(&self.send_buf[..t.size]).is_err() {
                self.send_dropped += 1;
            }
        }
    }

    /// When `q`'s next timer fires, on the engine's clock.
    pub(crate) fn timer_ns(&self, q: &mut QuicConn) -> Option<u64> {
        q.conn.poll_timeout().map(|t| self.ns(t))
    }

    /// `q`'s timers that are due at `now_ns` fire.
    pub(crate) fn expire(&mut self, q: &mut QuicConn, now_ns: u64) {
        q.conn.handle_timeout(self.instant(now_ns));
    }
}

/// One QUIC connection and its socket.
pub(crate) struct QuicConn {
    endpoint: Endpoint,
    handle: ConnectionHandle,
    pub conn: Connection,
    socket: UdpSocket,
    addr: SocketAddr,
    /// When its first Initial left.
    pub started_ns: u64,
    /// The handshake completed.
    pub established: bool,
}

impl QuicConn {
    /// Closes the connection: its CONNECTION_CLOSE is sent, best effort
    /// (the server need not wait out its idle timeout); the socket closes
    /// when this is dropped, which takes it out of the epoll set too.
    pub(crate) fn shut(&mut self) {
        if self.conn.is_closed() {
            return;
        }
        let now = Instant::now();
        self.conn.close(now, 0u32.into(), Bytes::new());
        let mut buf = Vec::with_capacity(1500);
        while let Some(t) = self.conn.poll_transmit(now, 1, &mut buf) {
            let _ = self.socket.send(&buf[..t.size]);
            buf.clear();
        }
    }
}

/// Adds what `conn` counted (packets sent and lost) to `counts`.
pub(crate) fn count(counts: &mut QuicCounts, conn: &Connection) {
    let p = conn.stats().path;
    counts.sent_packets += p.sent_packets;
    counts.lost_packets += p.lost_packets;
    counts.lost_bytes += p.lost_bytes;
    counts.congestion_events += p.congestion_events;
}

/// A connection that was lost, in one line for the run's end.
pub(crate) fn explain(server_name: &str, reason: &quinn_proto::ConnectionError) -> String {
    let text = reason.to_string();
    let hint = if text.contains("certificate") {
        " (the server's certificate was refused: give the CA that issued it with \
         --cacert FILE, or skip the check with --insecure)"
    } else if text.contains("no application protocol") || text.contains("ALPN") {
        " (the server does not offer h3 by ALPN)"
    } else {
        ""
    };
    format!("the QUIC handshake with {server_name} failed: {text}{hint}")
}
