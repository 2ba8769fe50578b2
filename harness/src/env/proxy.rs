//! `bridge-proxy`'s userland TCP proxy: what docker-proxy does for
//! connections from the host itself (listen on a host port, dial the
//! container's address, copy both ways; one goroutine per direction there,
//! one tokio task per connection here with `copy_bidirectional`). A
//! current-thread tokio runtime on its own thread; stopped and joined on drop.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use tokio::sync::oneshot;

/// A running proxy from `addr` (127.0.0.1, a free port) to `target`.
pub struct Proxy {
    pub addr: SocketAddr,
    pub target: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    pub fn start(target: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("the proxy cannot bind 127.0.0.1:0")?;
        listener
            .set_nonblocking(true)
            .context("the proxy's listener")?;
        let addr = listener.local_addr().context("the proxy's address")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .context("cannot build the proxy's runtime")?;
        let (stop, mut stopped) = oneshot::channel::<()>();
        let connections = Arc::new(AtomicU64::new(0));
        let counter = connections.clone();
        let thread = std::thread::Builder::new()
            .name("harness-proxy".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => {
                                let Ok((inbound, _)) = accepted else { continue };
                                counter.fetch_add(1, Ordering::Relaxed);
                                tokio::spawn(relay(inbound, target));
                            }
                        }
                    }
                });
                // Dropping the runtime cancels every relay: connections close.
                drop(runtime);
            })
            .context("cannot start the proxy's thread")?;
        Ok(Proxy {
            addr,
            target,
            connections,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

async fn relay(mut inbound: tokio::net::TcpStream, target: SocketAddr) {
    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
        return;
    };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn bytes_go_both_ways_and_the_proxy_stops() {
        let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = echo.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let p = Proxy::start(target).unwrap();
        let mut c = std::net::TcpStream::connect(p.addr).unwrap();
        c.write_all(b"hello").unwrap();
        let mut back = [0u8; 5];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"hello");
        server.join().unwrap();
        assert_eq!(p.connections.load(Ordering::Relaxed), 1);
        let addr = p.addr;
        drop(p);
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}
