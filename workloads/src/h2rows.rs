//! The contract over HTTP/2 (feature `h2`): the rows of [`crate::contract`]
//! whose exchange is requests and answers (not HTTP/1.1's own bytes), each
//! sent as HTTP/2 streams with the `h2` crate as the client, and judged by
//! the same [`crate::verify`]; plus the rows only HTTP/2 has (many streams
//! in flight on one connection). HTTP/1.1's framing rows (pipelining,
//! HTTP/1.0, chunked, malformed heads) have no HTTP/2 counterpart: DATA
//! frames carry a body whatever its size, so a chunked and a
//! Content-Length `/echo` row are one row here.
//!
//! Each row runs on a connection of its own, made by a [`Connect`]: plain
//! TCP for h2c with prior knowledge ([`Cleartext`]), or the caller's TLS
//! stream with ALPN `h2`. Not the hot path: the load engine has its own
//! codec.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::contract::{rows as contract_rows, Exchange};
use crate::probe::RawResponse;
use crate::{expect, Expected};

/// How a row gets its connection.
pub trait Connect: Sync {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn connect(&self) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// h2c with prior knowledge: a TCP connection to this address.
pub struct Cleartext(pub SocketAddr);

impl Connect for Cleartext {
    type Io = tokio::net::TcpStream;
    fn connect(&self) -> impl Future<Output = io::Result<Self::Io>> + Send {
        let addr = self.0;
        async move {
            let s = tokio::net::TcpStream::connect(addr).await?;
            s.set_nodelay(true)?;
            Ok(s)
        }
    }
}

/// One request of a row.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: &'static str,
    pub target: String,
    pub body: Vec<u8>,
    pub expected: Expected,
}

impl Request {
    fn new(method: &'static str, target: &str) -> Request {
        Request {
            method,
            target: target.to_string(),
            body: Vec::new(),
            expected: expect(method, target),
        }
    }

    fn echo(len: usize) -> Request {
        let body = crate::echo::pattern(len);
        Request {
            method: "POST",
            target: crate::echo::PATH.to_string(),
            expected: crate::echo::expect(&body),
            body,
        }
    }
}

/// A row: its requests go out at once, as streams of one connection.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub requests: Vec<Request>,
    /// Whether an answer needs the database (503 is then right without one).
    pub needs_db: bool,
}

/// Streams in flight in the multiplexing row.
pub const STREAMS_IN_FLIGHT: usize = 100;

/// The HTTP/2 rows: the contract's single requests and slow requests, its
/// `/echo` bodies (one row per size), then many streams at once.
pub fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    let mut echo_lens = Vec::new();
    for row in contract_rows() {
        if row.conformance.is_some() {
            continue;
        }
        let needs_db = row.needs_db();
        let requests = match &row.exchange {
            Exchange::Request { method, target } => vec![Request::new(method, target)],
            Exchange::Slow { target, .. } => vec![Request::new("GET", target)],
            Exchange::Echo(e) if !echo_lens.contains(&e.len) => {
                echo_lens.push(e.len);
                vec![Request::echo(e.len)]
            }
            _ => continue,
        };
        let name = match &row.exchange {
            Exchange::Echo(e) => format!("h2 POST /echo ({} bytes)", e.len),
            _ => format!("h2 {}", row.name),
        };
        rows.push(Row {
            name,
            requests,
            needs_db,
        });
    }
    let mut mixed = Vec::with_capacity(STREAMS_IN_FLIGHT);
    for i in 0..STREAMS_IN_FLIGHT {
        mixed.push(match i % 4 {
            0 => Request::new("GET", "/hello"),
            1 => Request::new("GET", &format!("/cpu?n={}", i + 1)),
            2 => Request::echo(i * 97),
            _ => Request::new("HEAD", "/hello"),
        });
    }
    rows.push(Row {
        name: format!(
            "h2 {STREAMS_IN_FLIGHT} streams in flight on one connection (GET, HEAD, POST /echo)"
        ),
        requests: mixed,
        needs_db: false,
    });
    rows
}

/// A row's verdict: `Err` says what differed.
#[derive(Debug)]
pub struct Verdict {
    pub name: String,
    pub result: Result<(), String>,
}

/// Runs `rows`, each on a connection of its own, every wait bounded by
/// `timeout`; on a runtime of its own (the caller is not async).
pub fn check<C: Connect>(connect: &C, rows: &[Row], timeout: Duration) -> Vec<Verdict> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return rows
                .iter()
                .map(|r| Verdict {
                    name: r.name.clone(),
                    result: Err(format!("no runtime: {e}")),
                })
                .collect()
        }
    };
    rows.iter()
        .map(|row| Verdict {
            name: row.name.clone(),
            result: rt.block_on(async {
                match tokio::time::timeout(timeout, run_row(connect, row)).await {
                    Ok(r) => r,
                    Err(_) => Err(format!("no complete answer within {timeout:?}")),
                }
            }),
        })
        .collect()
}

/// Sends every request of `row` as a stream of one connection, all in
/// flight at once (the `h2` crate queues those beyond the server's
/// SETTINGS_MAX_CONCURRENT_STREAMS), and judges each answer.
pub async fn run_row<C: Connect>(connect: &C, row: &Row) -> Result<(), String> {
    let io = connect
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let answers = exchange(io, &row.requests).await?;
    for (req, answer) in row.requests.iter().zip(answers) {
        let what = format!("{} {}", req.method, req.target);
        let r = answer.map_err(|e| format!("{what}: {e}"))?;
        r.verify(&req.expected)
            .map_err(|m| format!("{what}: {m} (status {})", r.status))?;
    }
    Ok(())
}

/// The answers to `requests` on one HTTP/2 connection over `io`, in the
/// order of the requests.
pub async fn exchange<Io>(
    io: Io,
    requests: &[Request],
) -> Result<Vec<Result<RawResponse, String>>, String>
where
    Io: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, conn) = h2::client::handshake(io)
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let driver = tokio::spawn(conn);
    let mut pending = Vec::with_capacity(requests.len());
    for req in requests {
        let mut client = client
            .clone()
            .ready()
            .await
            .map_err(|e| format!("HTTP/2 connection: {e}"))?;
        let mut http_req = http::Request::builder()
            .method(req.method)
            .uri(format!("http://verify{}", req.target));
        if req.method == "POST" {
            http_req = http_req.header("content-length", req.body.len());
        }
        let http_req = http_req
            .body(())
            .map_err(|e| format!("{} {}: {e}", req.method, req.target))?;
        let has_body = !req.body.is_empty();
        let (response, mut send) = client
            .send_request(http_req, !has_body)
            .map_err(|e| format!("{} {}: {e}", req.method, req.target))?;
        let body = has_body.then(|| Bytes::from(req.body.clone()));
        pending.push(tokio::spawn(async move {
            if let Some(body) = body {
                // h2 holds the data until the peer's windows let it go.
                send.send_data(body, true).map_err(|e| e.to_string())?;
            }
            read(response).await
        }));
    }
    let mut answers = Vec::with_capacity(pending.len());
    for p in pending {
        answers.push(p.await.unwrap_or_else(|e| Err(e.to_string())));
    }
    driver.abort();
    Ok(answers)
}

async fn read(response: h2::client::ResponseFuture) -> Result<RawResponse, String> {
    let response = response.await.map_err(describe)?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let mut stream = response.into_body();
    let mut body = Vec::new();
    while let Some(chunk) = stream.data().await {
        let chunk = chunk.map_err(describe)?;
        body.extend_from_slice(&chunk);
        let _ = stream.flow_control().release_capacity(chunk.len());
    }
    Ok(RawResponse {
        status,
        version: 2,
        headers,
        body,
    })
}

/// An h2 error, with the RST_STREAM or GOAWAY code when there is one.
fn describe(e: h2::Error) -> String {
    match e.reason() {
        Some(r) if e.is_go_away() => format!("GOAWAY {r:?}: {e}"),
        Some(r) if e.is_reset() => format!("RST_STREAM {r:?}: {e}"),
        _ => e.to_string(),
    }
}
