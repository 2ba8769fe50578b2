//! One request, one response: the contract's routes and workloads, run on
//! the event loop that read the request.
//!
//! The sqrt loop of `/cpu` and `/work` runs right here, inside
//! `workloads::start`, on the loop thread: it blocks every other connection
//! of this loop while it runs, as JavaScript does in Node.js. `/sleep` is a
//! timer and `/db` an I/O wait: the loop serves others meanwhile.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{
    HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, SEC_WEBSOCKET_ACCEPT,
    SERVER, UPGRADE,
};
use hyper::{Request, Response, StatusCode, Version};
use workloads::{Action, Body};

use crate::db::Db;
use crate::io::Handled;
use crate::SERVER_NAME;

/// What every connection of one loop shares.
pub struct Loop {
    /// The `/config` body, rendered once.
    pub config_json: &'static [u8],
    pub db: Db,
    /// The WebSocket rooms, shared by every loop.
    pub rooms: Arc<workloads::ws::Rooms>,
}

const SERVER_VALUE: HeaderValue = HeaderValue::from_static(SERVER_NAME);
const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");
const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Serves one request. hyper adds `Date` and `Content-Length` (from the
/// body's exact length, also on HEAD, where it then sends no body).
pub async fn handle(
    state: Arc<Loop>,
    req: Request<Incoming>,
    handled: Handled,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.version() == Version::HTTP_2 {
        let head = req.method() == hyper::Method::HEAD;
        let resp = serve(state, req, handled).await?;
        return Ok(for_http2(resp, head));
    }
    serve(state, req, handled).await
}

/// What hyper's HTTP/1 path does by itself and its HTTP/2 path does not:
/// `Content-Length` on every answer (an empty body too), and no body on a
/// HEAD answer (DATA after a HEAD is a protocol error to the client).
fn for_http2(resp: Response<Full<Bytes>>, head: bool) -> Response<Full<Bytes>> {
    let len = resp.body().size_hint().exact().unwrap_or(0);
    let (mut parts, body) = resp.into_parts();
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    let body = if head { Full::new(Bytes::new()) } else { body };
    Response::from_parts(parts, body)
}

async fn serve(
    state: Arc<Loop>,
    req: Request<Incoming>,
    handled: Handled,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if !host_is_valid(&req) {
        let mut resp = into_hyper(
            workloads::Response::text(400, b"Host missing, repeated or invalid"),
            workloads::ALLOW,
        );
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return Ok(resp);
    }
    let target = req.uri().path_and_query().map_or("/", |pq| pq.as_str());
    if let Some(ws) = workloads::ws::route(target) {
        return Ok(upgrade(&state, req, ws));
    }
    // Parts and body apart, so the method and target are borrowed, not
    // copied, while the body is read.
    let (parts, body) = req.into_parts();
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let (resp, allow, refused) =
        answer(&state, parts.method.as_str(), target, || read_body(body)).await;
    let mut resp = into_hyper(resp, allow);
    if refused {
        // The rest of the body is left unread: close, gently.
        handled.linger();
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(resp)
}

/// The contract's answer to `method target`, whatever protocol carried it
/// (HTTP/1.1 and HTTP/2 here, HTTP/3 in [`crate::quic`]): the response, the
/// `Allow` value for a 405, and whether the body was refused unread
/// (`/echo` over its bound or broken framing). `read_body` is called only
/// by a route that wants the body.
pub async fn answer<F>(
    state: &Loop,
    method: &str,
    target: &str,
    read_body: impl FnOnce() -> F,
) -> (workloads::Response, &'static str, bool)
where
    F: std::future::Future<Output = Result<Vec<u8>, workloads::Response>>,
{
    let route = workloads::route(method, target);
    let allow = workloads::allow(target);
    let resp = match route {
        Err(rejection) => rejection.into_response(),
        Ok(route) => match workloads::start(route.endpoint, state.config_json) {
            Action::Respond(resp) => resp,
            Action::Echo => match read_body().await {
                Ok(bytes) => workloads::echo::echo(bytes),
                Err(refusal) => return (refusal, allow, true),
            },
            Action::Sleep { ms } => {
                tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
                workloads::slept(ms)
            }
            Action::Query { query, conn, then } => {
                workloads::finish(then, state.db.run(query, conn).await)
            }
        },
    };
    (resp, allow, false)
}

/// The body of `/echo`, at most [`workloads::echo::MAX_BYTES`]: hyper
/// frames it (Content-Length, or chunked; Transfer-Encoding wins over a
/// Content-Length beside it, and hyper then closes the connection after
/// the answer, as RFC 9112 §6.1 requires). `Err`: the refusal, 413 for a
/// body over the bound (before reading it, when Content-Length says so),
/// 400 for one that breaks its framing (a bad chunk size).
async fn read_body(body: Incoming) -> Result<Vec<u8>, workloads::Response> {
    let max = workloads::echo::MAX_BYTES;
    if body.size_hint().lower() > max as u64 {
        return Err(workloads::echo::too_large());
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes().to_vec()),
        Err(e) if e.is::<LengthLimitError>() => Err(workloads::echo::too_large()),
        Err(_) => Err(workloads::Response::text(
            400,
            b"request body does not match its framing",
        )),
    }
}

/// `/ws` and `/ws/room`: the `101` once the handshake is valid (the
/// connection is then [`crate::ws`]'s), else 400 with the reason.
fn upgrade(
    state: &Loop,
    mut req: Request<Incoming>,
    route: Result<workloads::ws::WsRoute, String>,
) -> Response<Full<Bytes>> {
    let headers = req
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()));
    let accepted = route
        .and_then(|r| workloads::ws::accept(req.method().as_str(), headers).map(|key| (r, key)));
    let (route, key) = match accepted {
        Ok(ok) => ok,
        Err(why) => return into_hyper(workloads::ws::bad_handshake(why), workloads::ALLOW),
    };
    let Ok(accept) = HeaderValue::from_str(&key) else {
        return into_hyper(
            workloads::Response::text(500, b"bad accept key"),
            workloads::ALLOW,
        );
    };
    crate::ws::spawn(hyper::upgrade::on(&mut req), route, &state.rooms);
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(SERVER, SERVER_VALUE);
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(SEC_WEBSOCKET_ACCEPT, accept);
    resp
}

/// RFC 9112 §3.2: Host exactly once in HTTP/1.1 (at most once in 1.0), with
/// a valid value; hyper leaves this to the service.
fn host_is_valid<B>(req: &Request<B>) -> bool {
    let mut hosts = req.headers().get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => false,
        (Some(host), None) => server_common::http1::valid_host(host.as_bytes()),
        (None, _) => req.version() != Version::HTTP_11,
    }
}

/// The contract's response as hyper's, `Server` first (see [`crate::io`]).
/// `allow`: the `Allow` value of a 405 ([`workloads::allow`] of the target).
pub fn into_hyper(resp: workloads::Response, allow: &'static str) -> Response<Full<Bytes>> {
    let body = match resp.body {
        Body::Static(b) => Bytes::from_static(b),
        Body::Owned(v) => Bytes::from(v),
    };
    let mut out = Response::new(Full::new(body));
    *out.status_mut() =
        StatusCode::from_u16(resp.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = out.headers_mut();
    headers.insert(SERVER, SERVER_VALUE);
    let content_type = match resp.content_type {
        "text/plain" => TEXT_PLAIN,
        "application/json" => APPLICATION_JSON,
        other => HeaderValue::from_static(other),
    };
    headers.insert(CONTENT_TYPE, content_type);
    if resp.status == 405 {
        headers.insert(ALLOW, HeaderValue::from_static(allow));
    }
    out
}
