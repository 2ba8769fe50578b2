//! One event loop: a tokio `current_thread` runtime on its own thread, its
//! own listener, its own database pool; hyper serves each connection as a
//! task of this loop. Stopping: the listener closes, open connections get
//! hyper's graceful shutdown (in-flight requests finish, idle keep-alive
//! connections close), bounded by `shutdown::GRACE`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use mysql_async::Opts;
use server_common::http1::MAX_HEAD_BYTES;
use server_common::shutdown::GRACE;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::db::Db;
use crate::h2::Sniffed;
use crate::io::{ConnIo, Handled};
use crate::service::{self, Loop};

/// A client that starts a request head and does not finish it within this
/// time is dropped (slowloris). hyper's timer also runs while a keep-alive
/// connection waits for its next request: idle connections close after it
/// too (Node.js closes them after 5 s).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause after a failed `accept` (out of file descriptors), so that the
/// loop keeps serving the connections it has instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// What every loop gets from `run`.
pub struct Shared {
    pub config_json: &'static [u8],
    pub db_opts: Opts,
    /// `--tls-cert`: every connection is TLS, terminated here.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// One map of WebSocket rooms for every loop: a room spans them.
    pub rooms: Arc<workloads::ws::Rooms>,
}

/// Runs one event loop on the calling thread until `stop` turns true.
pub fn run_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the event loop's runtime")?;
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    runtime.block_on(serve(listener, shared, stop))
}

async fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let listener = TcpListener::from_std(listener).context("registering the listener")?;
    let state = Arc::new(Loop {
        config_json: shared.config_json,
        db: Db::new(shared.db_opts.clone()),
        rooms: Arc::clone(&shared.rooms),
    });
    let http = builder();
    // Every connection task holds a clone; all dropped: all finished.
    let (open_tx, mut open_rx) = tokio::sync::mpsc::channel::<()>(1);
    let stop_each = stop.clone();

    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopping| *stopping) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => serve_connection(
                    &http,
                    &state,
                    shared.tls.as_ref(),
                    stream,
                    stop_each.clone(),
                    open_tx.clone(),
                ),
                // A client error never reaches further than this.
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
        }
    }

    drop(listener);
    drop(open_tx);
    let _ = tokio::time::timeout(GRACE, open_rx.recv()).await;
    if let Ok(state) = Arc::try_unwrap(state) {
        state.db.close().await;
    }
    Ok(())
}

/// hyper's HTTP/1 settings for the contract (docs/ARCHITECTURE.md §2).
fn builder() -> http1::Builder {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        // A client that half-closes after its request (shutdown(SHUT_WR),
        // as `nc -N` does) still gets its answer (the conformance section's
        // half-close row): without it, hyper may read the end of input
        // before answering and drop the request.
        .half_close(true)
        // A head not ended within 8 KiB: 431 (hyper's answer, completed by
        // crate::io). Not max_buf_size, which would cap the write buffer too.
        .max_header_size(MAX_HEAD_BYTES)
        // Pipelined requests are answered in order, one write each. Not
        // pipeline_flush(true) (hyper 1.12, "experimental"): it holds
        // answers back while more requests are buffered and loses them when
        // the connection then closes (HTTP/1.0, `Connection: close`, a
        // malformed request after good ones); it also lifts the cap on the
        // write buffer. See tests/model.rs.
        .pipeline_flush(false)
        // Small responses: one copy into one buffer beats writev of pieces,
        // and crate::io then sees every head in a single write.
        .writev(false);
    http
}

/// hyper's connection over `stream`, its service counting what it gets.
fn connection<S: crate::io::Stream>(
    http: &http1::Builder,
    state: &Arc<Loop>,
    stream: S,
) -> hyper::server::conn::http1::Connection<
    ConnIo<S>,
    impl hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<http_body_util::Full<bytes::Bytes>>,
            Error = std::convert::Infallible,
            Future: Send,
        > + Send
        + 'static,
> {
    let state = Arc::clone(state);
    let handled = Handled::default();
    let counted = handled.clone();
    let service = service_fn(move |req| {
        counted.count();
        service::handle(Arc::clone(&state), req, counted.clone())
    });
    http.serve_connection(ConnIo::new(stream, handled), service)
}

/// Serves one connection as a task of this loop: plain, or TLS once its
/// handshake (bounded by [`crate::tls::HANDSHAKE_TIMEOUT`]) is done; a
/// failed handshake (a client refusing our certificate) ends the connection
/// and nothing else. `open` is held until the connection ends.
fn serve_connection(
    http: &http1::Builder,
    state: &Arc<Loop>,
    tls: Option<&tokio_rustls::TlsAcceptor>,
    stream: TcpStream,
    stop: watch::Receiver<bool>,
    open: tokio::sync::mpsc::Sender<()>,
) {
    let _ = stream.set_nodelay(true);
    let (http, state, tls) = (http.clone(), Arc::clone(state), tls.cloned());
    tokio::spawn(async move {
        let _open = open;
        match tls {
            None => drive(&http, &state, stream, stop).await,
            Some(tls) => {
                let accepted =
                    tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, tls.accept(stream));
                if let Ok(Ok(stream)) = accepted.await {
                    drive(&http, &state, stream, stop).await;
                }
            }
        }
    });
}

/// The connection's protocol by its first bytes ([`crate::h2`]), then its
/// driver. A client that sends nothing within [`HEADER_READ_TIMEOUT`] is
/// dropped, as one that never finishes its head is.
async fn drive<S: crate::io::Stream>(
    http: &http1::Builder,
    state: &Arc<Loop>,
    stream: S,
    stop: watch::Receiver<bool>,
) {
    let sniffed = tokio::time::timeout(HEADER_READ_TIMEOUT, crate::h2::sniff(stream)).await;
    let Ok(Ok((protocol, stream))) = sniffed else {
        return;
    };
    match protocol {
        Sniffed::Http1 => drive_http1(http, state, stream, stop).await,
        Sniffed::Http2 => drive_http2(state, stream, stop).await,
    }
}

/// hyper over `stream` until the client is done. On `stop`, hyper's
/// graceful shutdown: the request in flight finishes, an idle keep-alive
/// connection closes. (hyper-util's `GracefulShutdown` cannot watch a
/// connection that may upgrade, hence this.) A WebSocket it upgraded to
/// runs as a task of its own ([`crate::ws`]), ended with the runtime.
async fn drive_http1<S: crate::io::Stream>(
    http: &http1::Builder,
    state: &Arc<Loop>,
    stream: S,
    mut stop: watch::Receiver<bool>,
) {
    let conn = connection(http, state, stream).with_upgrades();
    let mut conn = std::pin::pin!(conn);
    // Client errors (resets, timeouts, bad requests) end the connection
    // and nothing else; they are not logged.
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|stopping| *stopping) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// hyper's HTTP/2 server over `stream` (its preface already replayed):
/// each stream's request is a task of this loop (hyper spawns it on the
/// current runtime), served by the same [`service::handle`]. On `stop`,
/// GOAWAY: the streams in flight finish, no new one starts.
async fn drive_http2<S: crate::io::Stream>(
    state: &Arc<Loop>,
    stream: S,
    mut stop: watch::Receiver<bool>,
) {
    let mut http = http2::Builder::new(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .max_concurrent_streams(crate::h2::MAX_CONCURRENT_STREAMS);
    let state = Arc::clone(state);
    // Nothing to linger for: HTTP/2 refuses a body by RST_STREAM, not by
    // closing the connection with input unread.
    let handled = Handled::default();
    let service = service_fn(move |req| service::handle(Arc::clone(&state), req, handled.clone()));
    let conn = http.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|stopping| *stopping) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}
