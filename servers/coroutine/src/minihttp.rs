//! `--engine minihttp`: `may_minihttp` 0.1.11 itself, the TechEmpower
//! reference, serving the contract's endpoints through its `HttpService`.
//!
//! It is for keep-alive clients. may_minihttp parses with `httparse` and,
//! on any parse error, closes the connection without a word; it never
//! closes a connection otherwise, never reads a body the service does not
//! read, and knows no Transfer-Encoding. Its API gives a service no hook
//! before its parser and no say over its write buffer, but
//! `HttpServiceFactory` hands each connection's service the socket, so
//! this module adds a small check around it (RFC 9112):
//! - every parsed request's fields go through the shared codec's
//!   [`check_fields`] (Host, Content-Length, Transfer-Encoding) and a head
//!   size bound (431), and a body with Content-Length is read (echoed by
//!   `POST /echo`, dropped by the other routes), so a request hidden in a
//!   body is never answered; a chunked body is declined with 501 and the
//!   connection closed: may_minihttp cannot frame it, and RFC 9112 §6.1
//!   has a server answer 501 to a transfer coding it does not implement
//!   (the close leaves no body bytes behind to be read as a request);
//! - a request that ends its connection (refused, `Connection: close`,
//!   HTTP/1.0 without keep-alive) and comes first on its connection is
//!   answered by the shared codec's encoder on the socket, which is then
//!   shut down: nothing pipelined after it is processed or answered;
//! - a connection may_minihttp drops on a parse error before any request
//!   was answered gets a 400 (written when its service is dropped, if the
//!   client is still there);
//! - a request that asks for an upgrade (an `Upgrade` field, or `upgrade`
//!   in `Connection`) is answered as if the field were absent (RFC 9110
//!   §7.8), and its connection closed after the answer. may_minihttp parses
//!   every request in what it read before it writes any answer, and a parse
//!   error ends the connection with the answers unwritten: the new
//!   protocol's bytes a client sends right behind its upgrade request
//!   would take the request's answer with them. Closing after the answer
//!   means those bytes are never parsed (on a connection's first request,
//!   as above: answered here, then shut down);
//! - a response to HEAD carries no content (RFC 9110 §9.3.2), error
//!   responses included.
//!
//! What remains (`/config` lists it as `http_limits`, [`HTTP_LIMITS`]; the
//! conformance tests in tests/model.rs pin each one):
//! - after requests answered on the connection, a malformed one is still
//!   dropped without an answer, and one that ends the connection is
//!   answered by may_minihttp with `Connection: close`, then the read side
//!   is shut down: requests pipelined after it in the same read are
//!   answered too;
//! - a client that half-closes right after its request gets no answer when
//!   the request and the end of input arrive in one read
//!   (may_minihttp ends the connection on the end of input before parsing);
//! - may_minihttp's own answers say `HTTP/1.1` and `Server: M`, with its
//!   own reason phrase for 200 (`Ok`); it states the length of what it
//!   sends, so its answers to HEAD say `Content-Length: 0` (a GET's length
//!   is what RFC 9110 §8.6 asks for: no content and a length that frames
//!   the connection right is the closer of the two it allows);
//! - a parse error of may_minihttp also drops the answers to the requests
//!   it parsed from the same read, not written yet (an upgrade request that
//!   is not its connection's first, with the new protocol's bytes right
//!   behind it, among them); and the 400 of a connection's first request
//!   that may_minihttp cannot parse carries its reason even to a HEAD (the
//!   request's bytes are in may_minihttp's buffer, out of our sight);
//! - it has no read timeout: a slowloris client holds its coroutine forever;
//! - a chunked body is declined (501, then close), so `POST /echo` takes
//!   Content-Length bodies only: RFC 9112 §7.1 has every HTTP/1.1
//!   recipient decode chunked, and this engine does not.
//!
//! A request stays in flight until its answer is written: may_minihttp
//! writes a batch of answers after `call` returns, so the guard of the last
//! one is kept in the connection's service and released when the next
//! request is read or the connection ends (a pipelined batch is written
//! together, and its last guard covers it). Shutdown therefore never exits between an answer and
//! its write; a client that keeps an idle keep-alive connection open delays
//! it, by at most `server_common::shutdown::GRACE`.
//!
//! may_minihttp binds its own listener from an address; to learn the port
//! of `--addr` with port 0, we bind first with `SO_REUSEPORT` (as
//! may_minihttp does), hand it the bound address, and close ours before
//! announcing, so every connection goes to its listener.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::RawFd;

use may::coroutine::JoinHandle;
use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};
use server_common::http1::{
    self, check_fields, Connection, ParseError, RequestBody, MAX_HEAD_BYTES,
};
use server_common::shutdown::InFlight;
use workloads::Body;

use crate::app::App;

/// What this engine's HTTP layer is known not to do, as `/config` reports
/// it (`http_limits`): the gaps may_minihttp leaves that the module's
/// check cannot close (see the module documentation).
pub const HTTP_LIMITS: &[&str] = &[
    "a malformed request after others on its connection is dropped without an answer, with the unwritten answers to the requests read with it (RFC 9112 §2.2)",
    "requests pipelined in one write after a Connection: close that is not the connection's first request are answered (RFC 9112 §9.6)",
    "a request followed at once by the client's half-close gets no answer when both arrive in one read",
    "answers to HEAD on a kept-alive connection say Content-Length: 0, not the GET's length (RFC 9110 §8.6)",
    "no read timeout: a stalled request holds its coroutine",
    "a chunked request body is declined with 501 and the connection closed: may_minihttp knows no Transfer-Encoding (RFC 9112 §6.1's answer to a coding a server does not implement, where §7.1 has every recipient decode chunked); POST /echo takes Content-Length bodies only",
];

/// The `Server` value may_minihttp sends, used on the answers this module
/// writes itself.
const SERVER: &str = "M";

/// The `Allow` header line of a 405 (`workloads::ALLOW`).
const ALLOW_HEADER: &str = "Allow: GET, HEAD";
/// The `Allow` header line of a 405 for `/echo` (`workloads::echo::ALLOW`).
const ECHO_ALLOW_HEADER: &str = "Allow: POST";

/// The running may_minihttp server.
pub struct Server {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

/// Starts may_minihttp on `addr`.
pub fn start(addr: SocketAddr, app: &'static App) -> io::Result<Server> {
    let reserve = server_common::listen::bind(addr, true)?;
    let addr = reserve.local_addr()?;
    let accept = Factory { app }.start(addr)?;
    drop(reserve);
    Ok(Server { addr, accept })
}

impl Server {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting: cancels may_minihttp's accept coroutine (its accept
    /// loop never ends by itself), which drops its listener.
    pub fn stop_accepting(&self) {
        // SAFETY: the accept coroutine owns only its listener and the
        // service factory; unwinding it (may's cancellation) drops both.
        unsafe { self.accept.coroutine().cancel() };
    }
}

/// Makes each connection's service, with the connection's socket.
struct Factory {
    app: &'static App,
}

impl HttpServiceFactory for Factory {
    type Service = Service;

    /// may_minihttp passes the connection's file descriptor as `id`.
    fn new_service(&self, id: usize) -> Service {
        Service {
            app: self.app,
            fd: id as RawFd,
            answered: None,
            requests: 0,
            done: false,
        }
    }
}

/// The contract as an `HttpService`: one per connection, all sharing the app.
struct Service {
    app: &'static App,
    /// The connection's socket, open while may_minihttp runs the service.
    fd: RawFd,
    /// The last answer's request, in flight until may_minihttp has written
    /// it: released when the next request is read or the connection ends.
    answered: Option<InFlight>,
    /// Requests read on this connection.
    requests: u64,
    /// The connection was answered and shut down here: whatever may_minihttp
    /// still parses from its buffer is neither processed nor answered.
    done: bool,
}

impl HttpService for Service {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        let app = self.app;
        let in_flight = app.shutdown.request();
        // A new request was read: the earlier answers are written, or (in a
        // pipelined batch) wait in the same buffer as this one, whose guard
        // now covers them.
        self.answered = None;
        let first = self.requests == 0;
        self.requests += 1;
        let http10 = req.version() == 0;
        let head_only = req.method() == "HEAD";
        let upgrade = asks_upgrade(&req);
        let allow = workloads::allow(req.path());
        let (resp, keep_alive) = match check(&req, http10) {
            Err(refusal) => (
                workloads::Response::text(refusal.status(), refusal.reason()),
                false,
            ),
            Ok(fields) => {
                // Read the body, so nothing in it is parsed as a request;
                // `/echo` answers it back, the other routes drop it.
                let resp = if fields.body_len == 0 {
                    app.respond(req.method(), req.path(), RequestBody::Plain(b""))
                } else {
                    // `body()` takes the request: its method and target first.
                    let (method, target) = (req.method().to_owned(), req.path().to_owned());
                    let mut body = Vec::with_capacity(fields.body_len);
                    req.body()
                        .take(fields.body_len as u64)
                        .read_to_end(&mut body)?;
                    app.respond(&method, &target, RequestBody::Plain(&body))
                };
                (resp, fields.keep_alive(http10) && !upgrade)
            }
        };
        if !keep_alive && first {
            // Nothing answered before on this connection: answer here and
            // shut the socket, so nothing after this request is processed.
            let mut out = Vec::with_capacity(256 + resp.body.as_bytes().len());
            http1::encode_allowing(&mut out, SERVER, &resp, head_only, Connection::Close, allow);
            send_all(self.fd, &out);
            // SAFETY: `fd` is this connection's socket, open while its
            // service runs; may_minihttp's next write then fails and it
            // ends the connection.
            unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
            self.done = true;
            self.answered = Some(in_flight);
            return Ok(());
        }
        fill(rsp, resp, head_only, allow);
        if !keep_alive {
            rsp.header("Connection: close");
            // SAFETY: as above. may_minihttp writes this batch of answers,
            // reads the end of input and closes.
            unsafe { libc::shutdown(self.fd, libc::SHUT_RD) };
        } else if http10 {
            rsp.header("Connection: keep-alive");
        }
        self.answered = Some(in_flight);
        Ok(())
    }
}

impl Drop for Service {
    /// may_minihttp drops the service when the connection ends. With no
    /// request read and the client still there, the end was a parse error
    /// (may_minihttp closes silently): answer it with 400.
    fn drop(&mut self) {
        if self.requests == 0 && client_still_there(self.fd) {
            let mut out = Vec::with_capacity(256);
            http1::encode_error(&mut out, SERVER, ParseError::Malformed, false);
            send_all(self.fd, &out);
        }
    }
}

/// What may_minihttp does not check in a parsed request: the shared
/// codec's field checks, a Content-Length it can read (digits only: it
/// parses the first one with `unwrap`), the body and head bounds.
fn check(req: &Request, http10: bool) -> Result<http1::Fields, ParseError> {
    let headers = req.headers();
    let head_bytes = req.method().len()
        + req.path().len()
        + 12
        + headers
            .iter()
            .map(|h| h.name.len() + h.value.len() + 4)
            .sum::<usize>();
    if head_bytes > MAX_HEAD_BYTES {
        return Err(ParseError::HeadTooLarge);
    }
    let plain_length = |v: &[u8]| !v.is_empty() && v.iter().all(u8::is_ascii_digit);
    if headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("content-length") && !plain_length(h.value))
    {
        return Err(ParseError::Malformed);
    }
    let fields = check_fields(http10, headers.iter().map(|h| (h.name, h.value)))?;
    if fields.chunked {
        return Err(ParseError::UnknownCoding);
    }
    Ok(fields)
}

/// Whether a request asks to switch protocols: an `Upgrade` field, or the
/// `upgrade` option in `Connection` (RFC 9110 §7.8).
fn asks_upgrade(req: &Request) -> bool {
    req.headers().iter().any(|h| {
        h.name.eq_ignore_ascii_case("upgrade")
            || (h.name.eq_ignore_ascii_case("connection")
                && h.value
                    .split(|&b| b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade")))
    })
}

/// The contract's response as may_minihttp's; without the body for HEAD
/// (may_minihttp then says `Content-Length: 0`).
fn fill(rsp: &mut Response, resp: workloads::Response, head_only: bool, allow: &str) {
    rsp.status_code(
        usize::from(resp.status),
        workloads::Response::reason(resp.status),
    );
    rsp.header(content_type_header(resp.content_type));
    if resp.status == 405 {
        rsp.header(if allow == workloads::echo::ALLOW {
            ECHO_ALLOW_HEADER
        } else {
            ALLOW_HEADER
        });
    }
    if head_only {
        rsp.body("");
        return;
    }
    match resp.body {
        Body::Static(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => rsp.body(text),
            Err(_) => rsp.body_vec(bytes.to_vec()),
        },
        Body::Owned(bytes) => rsp.body_vec(bytes),
    }
}

/// Writes `bytes` on the non-blocking socket as far as it takes them at
/// once (a fresh connection's send buffer holds any answer here).
fn send_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `fd` is open (see `Service::fd`); the pointer and length
        // describe `bytes`.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            return;
        }
    }
}

/// Whether the client has neither closed nor reset the connection: a
/// peek finds data, or nothing yet.
fn client_still_there(fd: RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: `fd` is open (see `Service::fd`); one byte into `byte`.
    let n = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n > 0 || (n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock)
}

/// may_minihttp takes whole header lines as `&'static str`.
fn content_type_header(content_type: &str) -> &'static str {
    match content_type {
        "application/json" => "Content-Type: application/json",
        "text/plain" => "Content-Type: text/plain",
        _ => "Content-Type: application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_header_matches_the_contract() {
        assert_eq!(ALLOW_HEADER, format!("Allow: {}", workloads::ALLOW));
        assert_eq!(
            ECHO_ALLOW_HEADER,
            format!("Allow: {}", workloads::echo::ALLOW)
        );
    }

    #[test]
    fn content_types_of_every_endpoint_have_a_header() {
        for target in ["/hello", "/cpu", "/config", "/nope"] {
            let resp = match workloads::route("GET", target) {
                Ok(r) => match workloads::start(r.endpoint, b"{}") {
                    workloads::Action::Respond(resp) => resp,
                    _ => unreachable!(),
                },
                Err(rejection) => rejection.into_response(),
            };
            assert_eq!(
                content_type_header(resp.content_type),
                format!("Content-Type: {}", resp.content_type)
            );
        }
        let work = workloads::finish(workloads::AfterQuery::Work { sum: 1.0 }, Some(1));
        assert_eq!(
            content_type_header(work.content_type),
            "Content-Type: application/json"
        );
    }
}
