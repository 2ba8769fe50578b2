//! `harness verify --h3`: the contract over HTTP/3. The rows are HTTP/2's
//! ([`workloads::h2rows`]: the single requests, `/echo` bodies up to and
//! over 1 MiB, 100 streams in flight on one connection), for the same
//! reason: HTTP/1.1's framing rows have no counterpart once frames carry
//! the body. Each row runs on a QUIC connection of its own, quinn as the
//! QUIC stack and hyperium's `h3` as the client; outside the load engine,
//! as verify_h2 is.
//!
//! Before the rows, one handshake: a server that does not answer QUIC on
//! the port within [`QUIC_ANSWER`] (no UDP listener: QUIC has no refusal
//! to wait for) or whose certificate this client does not trust is one
//! line, not a page of failed rows.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::{Buf, Bytes};
use workloads::h2rows::{self, Row, Verdict};
use workloads::probe::RawResponse;

use crate::engine::TlsPlan;

/// How long the first handshake may take before the port counts as not
/// serving QUIC.
pub const QUIC_ANSWER: Duration = Duration::from_secs(2);

/// Where and how to reach the server.
pub struct Peer {
    pub addr: SocketAddr,
    /// The `:authority` of each request (host and port of the URL).
    pub authority: String,
    pub tls: TlsPlan,
}

/// The HTTP/3 rows: HTTP/2's, named h3.
pub fn rows() -> Vec<Row> {
    h2rows::rows()
        .into_iter()
        .map(|mut row| {
            if let Some(rest) = row.name.strip_prefix("h2 ") {
                row.name = format!("h3 {rest}");
            }
            row
        })
        .collect()
}

/// Runs the HTTP/3 rows against `peer`, prints a verdict per row; fails if
/// any row does. `Err`: no QUIC answer, or a refused certificate.
pub fn run(peer: &Peer, timeout: Duration) -> anyhow::Result<ExitCode> {
    let verdicts = check(peer, &rows(), timeout)?;
    print!("{}", text(&verdicts));
    Ok(if verdicts.iter().all(|v| v.result.is_ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// PASS or FAIL per row (with what differed), then the count.
pub fn text(verdicts: &[Verdict]) -> String {
    let width = verdicts.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for v in verdicts {
        match &v.result {
            Ok(()) => out.push_str(&format!("PASS  {}\n", v.name)),
            Err(why) => out.push_str(&format!("FAIL  {:<width$}  {why}\n", v.name)),
        }
    }
    let failed = verdicts.iter().filter(|v| v.result.is_err()).count();
    out.push_str(&format!(
        "{} HTTP/3 rows: {} passed, {failed} failed\n",
        verdicts.len(),
        verdicts.len() - failed
    ));
    out
}

/// `rows` against `peer`, each on a QUIC connection of its own, every row
/// bounded by `timeout`, after one handshake bounded by [`QUIC_ANSWER`].
pub fn check(peer: &Peer, rows: &[Row], timeout: Duration) -> anyhow::Result<Vec<Verdict>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building verify's runtime")?;
    rt.block_on(async {
        let client = Client::new(peer)?;
        match tokio::time::timeout(QUIC_ANSWER, client.connect()).await {
            Err(_) => anyhow::bail!(
                "no QUIC answer from {} within {} s",
                peer.addr,
                QUIC_ANSWER.as_secs()
            ),
            Ok(Err(e)) => anyhow::bail!("{}: {e}", peer.addr),
            Ok(Ok(conn)) => conn.close(0u32.into(), b"checked"),
        }
        let mut verdicts = Vec::with_capacity(rows.len());
        for row in rows {
            let result = match tokio::time::timeout(timeout, client.run_row(row)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no complete answer within {timeout:?}")),
            };
            verdicts.push(Verdict {
                name: row.name.clone(),
                result,
            });
        }
        client.endpoint.close(0u32.into(), b"done");
        client.endpoint.wait_idle().await;
        Ok(verdicts)
    })
}

/// A quinn client endpoint on an ephemeral UDP port, ALPN h3.
struct Client<'p> {
    peer: &'p Peer,
    endpoint: quinn::Endpoint,
}

impl<'p> Client<'p> {
    fn new(peer: &'p Peer) -> anyhow::Result<Client<'p>> {
        let mut crypto = peer.tls.client_config().map_err(anyhow::Error::msg)?;
        crypto.alpn_protocols = vec![b"h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto)
            .context("a QUIC client needs TLS 1.3")?;
        let local: SocketAddr = if peer.addr.is_ipv6() {
            "[::]:0".parse()?
        } else {
            "0.0.0.0:0".parse()?
        };
        let mut endpoint = quinn::Endpoint::client(local).context("binding a UDP socket")?;
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
        Ok(Client { peer, endpoint })
    }

    /// A QUIC connection, its handshake done; errors in one line (a
    /// refused certificate reads as rustls says it).
    async fn connect(&self) -> Result<quinn::Connection, String> {
        let connecting = self
            .endpoint
            .connect(self.peer.addr, &self.peer.tls.server_name)
            .map_err(|e| format!("QUIC connect: {e}"))?;
        connecting.await.map_err(|e| match e {
            quinn::ConnectionError::TransportError(t) => {
                format!("QUIC handshake refused by this client: {}", t.reason)
            }
            quinn::ConnectionError::ConnectionClosed(c) => {
                format!("QUIC handshake refused by the server: {c}")
            }
            other => format!("QUIC handshake: {other}"),
        })
    }

    /// Every request of `row` as a stream of one HTTP/3 connection, all in
    /// flight at once (quinn holds those beyond the server's stream limit),
    /// each answer judged.
    async fn run_row(&self, row: &Row) -> Result<(), String> {
        let conn = self.connect().await?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| format!("HTTP/3 connection: {e}"))?;
        let drive = tokio::spawn(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let mut pending = Vec::with_capacity(row.requests.len());
        for req in &row.requests {
            let send = send.clone();
            let authority = self.peer.authority.clone();
            let req = req.clone();
            pending.push(tokio::spawn(async move {
                let what = format!("{} {}", req.method, req.target);
                let answer = exchange(send, &authority, &req)
                    .await
                    .map_err(|e| format!("{what}: {e}"))?;
                answer
                    .verify(&req.expected)
                    .map_err(|m| format!("{what}: {m} (status {})", answer.status))
            }));
        }
        let mut result = Ok(());
        for p in pending {
            let r = p.await.unwrap_or_else(|e| Err(e.to_string()));
            if result.is_ok() {
                result = r;
            }
        }
        drive.abort();
        conn.close(0u32.into(), b"row done");
        result
    }
}

/// One request on a stream of its own: the body sent beside reading the
/// answer (a server may answer, 413, before the body is all sent, and stop
/// the rest with STOP_SENDING).
async fn exchange(
    mut send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    authority: &str,
    req: &h2rows::Request,
) -> Result<RawResponse, String> {
    let mut http_req = http::Request::builder()
        .method(req.method)
        .uri(format!("https://{authority}{}", req.target));
    if req.method == "POST" {
        http_req = http_req.header("content-length", req.body.len());
    }
    let http_req = http_req.body(()).map_err(|e| e.to_string())?;
    let stream = send
        .send_request(http_req)
        .await
        .map_err(|e| format!("opening the stream: {e}"))?;
    let (mut tx, mut rx) = stream.split();
    let body = Bytes::from(req.body.clone());
    let sender = tokio::spawn(async move {
        if !body.is_empty() {
            tx.send_data(body).await?;
        }
        tx.finish().await
    });
    let response = rx
        .recv_response()
        .await
        .map_err(|e| format!("no response: {e}"))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    let mut body = Vec::new();
    while let Some(mut chunk) = rx
        .recv_data()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
    {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            body.extend_from_slice(piece);
            let n = piece.len();
            chunk.advance(n);
        }
    }
    // A body refused by STOP_SENDING fails to send: the answer is what counts.
    sender.abort();
    Ok(RawResponse {
        status,
        version: 3,
        headers,
        body,
    })
}
