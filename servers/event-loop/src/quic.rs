//! `--h3`: HTTP/3 over QUIC on the UDP port of the same number as the TCP
//! one (as Caddy does), with the certificate of `--tls-cert`. quinn is the
//! QUIC stack (TLS 1.3 by the same rustls/ring as TCP's TLS, ALPN `h3`),
//! hyperium's `h3` the HTTP/3 layer; each request is a task, answered by the
//! same [`service::answer`] as HTTP/1.1 and HTTP/2.
//!
//! One loop of its own serves every QUIC connection: a quinn endpoint is
//! one UDP socket, and spreading one socket's datagrams across the
//! `--workers` loops would need connection-ID routing that `SO_REUSEPORT`
//! does not do. Its database pool is its own, `--db-pool` like each loop's.

use std::net::UdpSocket;
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::{Buf, Bytes};
use h3::server::RequestStream;
use http_body_util::BodyExt;
use hyper::header::{HeaderValue, CONTENT_LENGTH, DATE};
use server_common::shutdown::GRACE;
use tokio::sync::watch;

use crate::db::Db;
use crate::service::{self, Loop};

/// Streams one client may have open at once (the h2 port's bound).
pub const MAX_CONCURRENT_STREAMS: u32 = crate::h2::MAX_CONCURRENT_STREAMS;

/// What `/config` says of the h3 port.
pub fn protocol(udp: std::net::SocketAddr) -> String {
    format!("h3 on udp {udp} (quinn 0.11, h3 0.0.8; one loop of its own)")
}

type Stream = RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// quinn's server configuration over `tls` (the `--tls-cert` one), ALPN h3.
pub fn server_config(tls: &rustls::ServerConfig) -> Result<quinn::ServerConfig> {
    let mut crypto = tls.clone();
    crypto.alpn_protocols = vec![b"h3".to_vec()];
    crypto.max_early_data_size = 0;
    let quic = quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
        .context("--tls-cert cannot serve QUIC (it needs TLS 1.3)")?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(quic));
    let transport = Arc::get_mut(&mut config.transport).context("quinn transport config")?;
    transport
        .max_concurrent_bidi_streams(MAX_CONCURRENT_STREAMS.into())
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(crate::server::HEADER_READ_TIMEOUT)
                .context("idle timeout")?,
        ));
    Ok(config)
}

/// Runs the h3 loop on the calling thread until `stop` turns true.
pub fn run_loop(
    socket: UdpSocket,
    config: quinn::ServerConfig,
    shared: Arc<crate::server::Shared>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the h3 loop's runtime")?;
    runtime.block_on(serve(socket, config, shared, stop))
}

async fn serve(
    socket: UdpSocket,
    config: quinn::ServerConfig,
    shared: Arc<crate::server::Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .context("starting the QUIC endpoint")?;
    let state = Arc::new(Loop {
        config_json: shared.config_json,
        db: Db::new(shared.db_opts.clone()),
        rooms: Arc::clone(&shared.rooms),
    });
    let stop_each = stop.clone();
    loop {
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopping| *stopping) => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    tokio::spawn(connection(incoming, Arc::clone(&state), stop_each.clone()));
                }
                None => break,
            },
        }
    }
    // Connections got GOAWAY from their tasks; the endpoint lingers until
    // they are done, bounded as TCP's connections are.
    endpoint.set_server_config(None);
    let _ = tokio::time::timeout(GRACE, endpoint.wait_idle()).await;
    endpoint.close(0u32.into(), b"shutting down");
    if let Ok(state) = Arc::try_unwrap(state) {
        state.db.close().await;
    }
    Ok(())
}

/// One QUIC connection: its handshake (bounded as TCP's TLS one), then its
/// requests, each a task. A failed handshake ends it and nothing else.
async fn connection(incoming: quinn::Incoming, state: Arc<Loop>, mut stop: watch::Receiver<bool>) {
    let Ok(Ok(conn)) = tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, incoming).await else {
        return;
    };
    let built = h3::server::builder()
        .max_field_section_size(server_common::http1::MAX_HEAD_BYTES as u64)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await;
    let Ok(mut h3) = built else {
        return;
    };
    loop {
        let stopping = tokio::select! {
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        if let Ok((req, stream)) = resolver.resolve_request().await {
                            request(&state, req, stream).await;
                        }
                    });
                    false
                }
                // The client closed, or broke the protocol: done.
                _ => return,
            },
            _ = stop.wait_for(|stopping| *stopping) => true,
        };
        if stopping {
            // GOAWAY: streams in flight finish, no new one starts.
            let _ = h3.shutdown(0).await;
            return;
        }
    }
}

/// One request: the contract's answer, with `Date`, `Content-Length` (also
/// on HEAD, with no body) and `Server` as over HTTP/1.1 and HTTP/2.
async fn request(state: &Loop, req: http::Request<()>, mut stream: Stream) {
    let head = req.method() == http::Method::HEAD;
    let method = req.method().as_str().to_string();
    let target = req
        .uri()
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let (resp, allow, refused) =
        service::answer(state, &method, &target, || read_body(&mut stream, declared)).await;
    let (mut parts, body) = service::into_hyper(resp, allow).into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    if let Ok(date) = server_common::date::with_date(|d| HeaderValue::from_bytes(d)) {
        parts.headers.insert(DATE, date);
    }
    if refused {
        // RFC 9114 §4.1.2: the answer before the whole request, then
        // STOP_SENDING with H3_NO_ERROR for the rest of its body.
        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
    if stream
        .send_response(http::Response::from_parts(parts, ()))
        .await
        .is_err()
    {
        return;
    }
    if !head && !body.is_empty() && stream.send_data(body).await.is_err() {
        return;
    }
    let _ = stream.finish().await;
}

/// The body of `/echo`, at most [`workloads::echo::MAX_BYTES`] (413 beyond,
/// before reading it when Content-Length says so; 400 for a stream that
/// breaks, or a body unlike its Content-Length).
async fn read_body(
    stream: &mut Stream,
    declared: Option<u64>,
) -> Result<Vec<u8>, workloads::Response> {
    let max = workloads::echo::MAX_BYTES;
    if declared.is_some_and(|n| n > max as u64) {
        return Err(workloads::echo::too_large());
    }
    let broken = || workloads::Response::text(400, b"request body does not match its framing");
    let mut body = Vec::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => {
                if body.len() + chunk.remaining() > max {
                    return Err(workloads::echo::too_large());
                }
                while chunk.has_remaining() {
                    let piece = chunk.chunk();
                    body.extend_from_slice(piece);
                    let n = piece.len();
                    chunk.advance(n);
                }
            }
            Ok(None) => break,
            Err(_) => return Err(broken()),
        }
    }
    match declared {
        Some(n) if n != body.len() as u64 => Err(broken()),
        _ => Ok(body),
    }
}
