//! The front (nginx's role): one event-loop thread that owns every client
//! connection, reads and parses requests, queues each one for a worker, and
//! writes the responses back in order. With `--tls-cert` it terminates TLS
//! too (tokio-rustls; the handshake is a task of the front, bounded by
//! [`READ_TIMEOUT`]), as an nginx in front of PHP-FPM does: the workers
//! never see it, but for a WebSocket's, which takes the session with the
//! connection ([`Client::into_socket`]).

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use server_common::http1;
use server_common::shutdown::{InFlight, Shutdown, GRACE};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::{sleep, timeout, Instant};
use workloads::Response;

use crate::inbox::{encode_reply, Inbox, Parsed};
use crate::pool::Queue;
use crate::{READ_TIMEOUT, WRITE_TIMEOUT};

/// What every connection task shares.
struct Front {
    queue: Queue,
    shutdown: Shutdown,
    name: &'static str,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Runs the front on this thread until `stop` is notified, then lets queued
/// and in-flight requests finish (bounded by [`GRACE`]) and returns; open
/// connections are closed when the event loop is dropped.
pub fn run(
    listener: std::net::TcpListener,
    queue: Queue,
    name: &'static str,
    shutdown: Shutdown,
    stop: Arc<Notify>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let front = Arc::new(Front {
            queue,
            shutdown,
            name,
            tls,
        });
        accept_until(listener, &front, &stop).await;
        drain(&front.shutdown).await;
        Ok(())
    })
}

/// Accepts connections until `stop`; dropping the listener then refuses new ones.
async fn accept_until(listener: TcpListener, front: &Arc<Front>, stop: &Notify) {
    let stopped = stop.notified();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            biased;
            () = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let front = Arc::clone(front);
                    match front.tls.clone() {
                        None => drop(tokio::spawn(serve(stream, front))),
                        Some(tls) => drop(tokio::spawn(async move {
                            // A failed or stalled handshake ends the connection only.
                            if let Ok(Ok(stream)) = timeout(READ_TIMEOUT, tls.accept(stream)).await {
                                serve(stream, front).await;
                            }
                        })),
                    }
                }
                // Out of descriptors or an aborted handshake: never the
                // accept loop's end, never a log line.
                Err(_) => sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// Waits until no request is queued, being worked on or being written.
async fn drain(shutdown: &Shutdown) {
    let deadline = Instant::now() + GRACE;
    while shutdown.in_flight() > 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(5)).await;
    }
}

/// One client connection: requests answered one at a time and in order, as
/// nginx does with pipelined requests.
async fn serve<S: Client>(mut stream: S, front: Arc<Front>) {
    let mut inbox = Inbox::new();
    let mut out = Vec::with_capacity(256);
    // Keeps shutdown waiting while a response is encoded but not yet written.
    let mut _unsent: Option<InFlight> = None;
    let deadline = sleep(READ_TIMEOUT);
    tokio::pin!(deadline);
    loop {
        loop {
            let Parsed {
                routed,
                head,
                connection,
                allow,
                body,
                upgrade,
            } = match inbox.next_request() {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(e) => {
                    // The front answers what it cannot parse, as nginx does.
                    http1::encode_error(&mut out, front.name, e, inbox.pending_is_head());
                    if write(&mut stream, &out).await.is_ok() {
                        linger(stream).await;
                    }
                    return;
                }
            };
            match upgrade {
                None => {}
                Some(Ok((route, accept))) => {
                    return hand_over(stream, out, inbox.take_pending(), route, accept, &front)
                        .await
                }
                Some(Err(why)) => {
                    let resp = workloads::ws::bad_handshake(why);
                    encode_reply(
                        &mut out,
                        front.name,
                        &resp,
                        false,
                        http1::Connection::Close,
                        workloads::ALLOW,
                        true,
                    );
                    let _ = write(&mut stream, &out).await;
                    return;
                }
            }
            let in_flight = front.shutdown.request();
            let response = match front.queue.submit(routed, body) {
                Some(reply) => {
                    // Earlier pipelined answers go out while this one is worked on.
                    if !out.is_empty() {
                        if write(&mut stream, &out).await.is_err() {
                            return;
                        }
                        out.clear();
                    }
                    reply
                        .await
                        .unwrap_or_else(|_| Response::text(500, b"worker failed"))
                }
                None => Response::busy(),
            };
            let stopping = front.shutdown.is_stopping();
            if encode_reply(
                &mut out, front.name, &response, head, connection, allow, stopping,
            ) {
                let _ = write(&mut stream, &out).await;
                return;
            }
            _unsent = Some(in_flight);
            deadline.as_mut().reset(Instant::now() + READ_TIMEOUT);
        }
        if !out.is_empty() {
            if write(&mut stream, &out).await.is_err() {
                return;
            }
            out.clear();
            _unsent = None;
        }
        if front.shutdown.is_stopping() {
            return;
        }
        tokio::select! {
            biased;
            read = stream.read(inbox.spare()) => match read {
                Ok(n) if n > 0 => inbox.filled(n),
                _ => return,
            },
            // Idle too long, or a request stalled half-way (slowloris).
            () = &mut deadline => return,
        }
    }
}

/// After an error answer (the rest of a refused body, say, left unread):
/// shut our side, then drain what the client still sends, bounded in time
/// and size, so that the close does not reset the answer away before the
/// client reads it (RFC 9112 §9.6).
pub async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    let _ = timeout(LINGER, async {
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < LINGER_MAX_BYTES {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<(), io::Error>(())
    })
    .await;
}

/// How long, and for how many bytes, a close after an error answer drains.
pub const LINGER: Duration = Duration::from_millis(500);
pub const LINGER_MAX_BYTES: usize = http1::MAX_REQUEST_BYTES;

async fn write<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> io::Result<()> {
    // The flush matters over TLS: a record sealed while the socket was full
    // waits in the session until then.
    let written = async {
        stream.write_all(bytes).await?;
        stream.flush().await
    };
    match timeout(WRITE_TIMEOUT, written).await {
        Ok(result) => result,
        Err(_) => Err(io::ErrorKind::TimedOut.into()),
    }
}

/// A client connection: the socket, or a TLS session over it. A WebSocket
/// goes to a worker as the std socket, or the session with it
/// ([`crate::ws::Socket`]).
pub trait Client: AsyncRead + AsyncWrite + Unpin {
    /// The connection as a worker holds it: the socket blocking again is
    /// the worker's to set ([`crate::ws::run`]).
    fn into_socket(self) -> io::Result<Box<dyn crate::ws::Socket>>;
}

impl Client for TcpStream {
    fn into_socket(self) -> io::Result<Box<dyn crate::ws::Socket>> {
        Ok(Box::new(self.into_std()?))
    }
}

impl Client for tokio_rustls::server::TlsStream<TcpStream> {
    /// The session goes with the socket: the plaintext it opened beyond
    /// what the front read stays in it, and the bytes the front read after
    /// the head are the upgrade's `leftover`.
    fn into_socket(self) -> io::Result<Box<dyn crate::ws::Socket>> {
        let (tcp, conn) = self.into_inner();
        Ok(Box::new(crate::ws::tls(conn, tcp.into_std()?)))
    }
}

/// A WebSocket handshake: earlier answers out, then the connection to the
/// next free worker ([`crate::ws`]), which sends the `101`; a full queue
/// answers `503 server busy`.
async fn hand_over<S: Client>(
    mut stream: S,
    mut out: Vec<u8>,
    leftover: Vec<u8>,
    route: workloads::ws::WsRoute,
    accept: String,
    front: &Front,
) {
    if !out.is_empty() && write(&mut stream, &out).await.is_err() {
        return;
    }
    let Ok(stream) = stream.into_socket() else {
        return;
    };
    let up = crate::ws::Upgrade {
        stream,
        leftover,
        route,
        accept,
    };
    if let Err(up) = front.queue.submit_websocket(up) {
        out.clear();
        encode_reply(
            &mut out,
            front.name,
            &Response::busy(),
            false,
            http1::Connection::Close,
            workloads::ALLOW,
            true,
        );
        let mut s = up.stream;
        let _ = s.tcp().set_nonblocking(false);
        let _ = s.tcp().set_write_timeout(Some(WRITE_TIMEOUT));
        let _ = s.write_all(&out).and_then(|()| s.flush());
    }
}
