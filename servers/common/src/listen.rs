//! Binding listeners the way a benchmarked server should.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Listen backlog: large, so that connection bursts (ab without keep-alive,
/// `-c 1000`) queue in the kernel instead of being reset. The kernel caps it
/// at `net.core.somaxconn`.
pub const BACKLOG: i32 = 4096;

/// Binds a blocking TCP listener with `SO_REUSEADDR`, and `SO_REUSEPORT`
/// when several listeners share the port (one per event loop).
pub fn bind(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind {addr}: {e}")))?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// Binds `n` listeners on one port with `SO_REUSEPORT` (the kernel spreads
/// connections across them). Port 0 is resolved by the first bind.
pub fn bind_many(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpListener>> {
    if n <= 1 {
        return Ok(vec![bind(addr, false)?]);
    }
    let first = bind(addr, true)?;
    let bound = first.local_addr()?;
    let mut all = vec![first];
    for _ in 1..n {
        all.push(bind(bound, true)?);
    }
    Ok(all)
}

/// Prints `listening on ADDR` on stdout and flushes: the harness and the
/// tests wait for this line to learn the port.
pub fn announce(addr: SocketAddr) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "listening on {addr}");
    let _ = out.flush();
}
