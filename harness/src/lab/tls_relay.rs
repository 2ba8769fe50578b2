//! `harness verify https://…`: a loopback relay that speaks plaintext to the
//! contract's raw client and TLS to the server, so that every row runs
//! unchanged over TLS. Each connection the client opens is one TLS
//! connection to the server, byte for byte both ways: the client's
//! half-close becomes `close_notify` (the server still answers), the
//! server's close (or `close_notify`) the client's end of file, an error
//! on either side the end of both.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};

use crate::engine::TlsPlan;

/// A running relay; dropping it stops accepting (connections in flight
/// end with their peers).
pub struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on 127.0.0.1 (a free port) and relays each connection to
    /// `target` over TLS as `tls` says.
    pub fn start(target: SocketAddr, tls: &TlsPlan) -> anyhow::Result<Relay> {
        let config = Arc::new(tls.client_config().map_err(anyhow::Error::msg)?);
        let name = tls.name().map_err(anyhow::Error::msg)?;
        let listener = TcpListener::bind("127.0.0.1:0").context("the TLS relay's listener")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let accept = std::thread::Builder::new()
            .name("tls-relay".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let (config, name) = (Arc::clone(&config), name.clone());
                            let _ = std::thread::Builder::new()
                                .name("tls-relay-conn".into())
                                .spawn(move || relay(client, target, config, name));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })?;
        Ok(Relay {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// Where the contract's client connects.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One handshake with `target`, blocking: `Err` with the one line that
/// says why it failed (a refused certificate: which, and what to give).
pub fn check_handshake(target: SocketAddr, tls: &TlsPlan, timeout: Duration) -> anyhow::Result<()> {
    handshake(target, tls, timeout).map(drop)
}

/// [`check_handshake`], returning what the handshake negotiated (version,
/// cipher suite, key exchange, ALPN).
pub fn handshake(
    target: SocketAddr,
    tls: &TlsPlan,
    timeout: Duration,
) -> anyhow::Result<crate::engine::Negotiated> {
    let config = Arc::new(tls.client_config().map_err(anyhow::Error::msg)?);
    let mut conn = ClientConnection::new(config, tls.name().map_err(anyhow::Error::msg)?)?;
    let mut sock = TcpStream::connect_timeout(&target, timeout)
        .with_context(|| format!("cannot connect to {target}"))?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            let why = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .map(|tls_error| crate::engine::tls::explain(&tls.server_name, tls_error))
                .unwrap_or_else(|| {
                    format!("the TLS handshake with {} failed: {e}", tls.server_name)
                });
            anyhow::bail!(why);
        }
    }
    let name = |s: Option<&'static str>, d: &dyn std::fmt::Debug| {
        s.map_or_else(|| format!("{d:?}"), str::to_string)
    };
    let negotiated = crate::engine::Negotiated {
        version: conn
            .protocol_version()
            .map(|v| name(v.as_str(), &v))
            .unwrap_or_default(),
        cipher_suite: conn
            .negotiated_cipher_suite()
            .map(|s| name(s.suite().as_str(), &s.suite()))
            .unwrap_or_default(),
        key_exchange: conn
            .negotiated_key_exchange_group()
            .map(|g| name(g.name().as_str(), &g.name()))
            .unwrap_or_default(),
        alpn: conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
    };
    conn.send_close_notify();
    let _ = conn.complete_io(&mut sock);
    Ok(negotiated)
}

/// How much of the client's plaintext the relay holds before it stops
/// reading from the client.
const RELAY_BACKLOG: usize = 256 * 1024;

/// One connection, until both sides are done or either fails.
fn relay(
    mut client: TcpStream,
    target: SocketAddr,
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
) {
    let Ok(mut server) = TcpStream::connect_timeout(&target, Duration::from_secs(10)) else {
        return;
    };
    let Ok(mut tls) = ClientConnection::new(config, name) else {
        return;
    };
    for s in [&client, &server] {
        if s.set_nonblocking(true).is_err() || s.set_nodelay(true).is_err() {
            return;
        }
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut to_client: Vec<u8> = Vec::new();
    // The client's bytes rustls has not taken yet: it holds at most its
    // buffer limit (64 KiB) of plaintext until the handshake ends, and a
    // 1 MiB body arrives before that on a busy machine.
    let mut to_server: Vec<u8> = Vec::new();
    let (mut client_open, mut server_open) = (true, true);
    // The client's half-close, not yet passed on: its close_notify waits
    // for the end of the handshake. Sent during it, the alert goes out
    // ahead of the request rustls holds until the handshake ends, and the
    // server reads the end of the connection before the request it was
    // sent behind (the conformance half-close row warned over TLS).
    let mut close_pending = false;
    loop {
        let mut fds = [
            libc::pollfd {
                fd: client.as_raw_fd(),
                events: (if client_open && to_server.len() < RELAY_BACKLOG {
                    libc::POLLIN
                } else {
                    0
                }) | (if to_client.is_empty() {
                    0
                } else {
                    libc::POLLOUT
                }),
                revents: 0,
            },
            libc::pollfd {
                fd: server.as_raw_fd(),
                events: (if server_open && to_client.len() < RELAY_BACKLOG {
                    libc::POLLIN
                } else {
                    0
                }) | (if tls.wants_write() { libc::POLLOUT } else { 0 }),
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds on open sockets.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
        // The client's bytes into the session.
        while client_open && to_server.len() < RELAY_BACKLOG {
            match client.read(&mut buf) {
                Ok(0) => {
                    client_open = false;
                    close_pending = true;
                }
                Ok(n) => to_server.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
        while !to_server.is_empty() {
            match tls.writer().write(&to_server) {
                Ok(0) => break,
                Ok(n) => drop(to_server.drain(..n)),
                Err(_) => return,
            }
        }
        if close_pending && to_server.is_empty() && !tls.is_handshaking() {
            // The request's records are queued ahead of it by now.
            close_pending = false;
            tls.send_close_notify();
        }
        // The session's records to the server.
        while tls.wants_write() {
            match tls.write_tls(&mut server) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
        // The server's records into the session, its plaintext to the
        // client: drained after every read, since rustls refuses to read
        // more records while it holds 64 KiB of plaintext (a 1 MiB echo).
        while server_open && to_client.len() < RELAY_BACKLOG {
            match tls.read_tls(&mut server) {
                Ok(0) => server_open = false,
                Ok(_) => {
                    if tls.process_new_packets().is_err() {
                        let _ = tls.write_tls(&mut server);
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
            drain_plaintext(&mut tls, &mut buf, &mut to_client, &mut server_open);
        }
        drain_plaintext(&mut tls, &mut buf, &mut to_client, &mut server_open);
        while !to_client.is_empty() {
            match client.write(&to_client) {
                Ok(n) => drop(to_client.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
        if !server_open && to_client.is_empty() {
            // The server is done: so is the client's side of it.
            let _ = client.shutdown(Shutdown::Write);
            return;
        }
    }
}

/// Moves the session's plaintext to `to_client`; the server's
/// `close_notify` (or a broken session) ends its side.
fn drain_plaintext(
    tls: &mut ClientConnection,
    buf: &mut [u8],
    to_client: &mut Vec<u8>,
    server_open: &mut bool,
) {
    loop {
        match tls.reader().read(buf) {
            Ok(0) => {
                *server_open = false;
                return;
            }
            Ok(n) => to_client.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => {
                *server_open = false;
                return;
            }
        }
    }
}
