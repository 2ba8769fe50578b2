//! `--engine minihttp`: `may_minihttp` 0.1.11 itself, the TechEmpower
//! reference, serving the contract's endpoints through its `HttpService`.
//!
//! It is for keep-alive clients only. As may_minihttp is, not fixed here
//! (`harness verify` lists these as deviations):
//! - it never closes a connection: an HTTP/1.0 request, or one that says
//!   `Connection: close`, is answered and the connection stays open
//!   (ApacheBench without `-k` waits for the close and stalls);
//! - it always answers `HTTP/1.1`, with `Server: M` and its own reason
//!   phrase for 200 (`Ok`), without `Connection: keep-alive` for HTTP/1.0;
//! - it sends the body on HEAD;
//! - it drops a request with more than 16 headers, and closes the
//!   connection on a malformed one, without answering; a head over 8 KiB is
//!   not refused with 431;
//! - it has no read timeout: a slowloris client holds its coroutine forever.
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

use std::io;
use std::net::SocketAddr;

use may::coroutine::JoinHandle;
use may_minihttp::{HttpServer, HttpService, Request, Response};
use server_common::shutdown::InFlight;
use workloads::Body;

use crate::app::App;

/// The `Allow` header line of a 405 (`workloads::ALLOW`).
const ALLOW_HEADER: &str = "Allow: GET, HEAD";

/// The running may_minihttp server.
pub struct Server {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

/// Starts may_minihttp on `addr`.
pub fn start(addr: SocketAddr, app: &'static App) -> io::Result<Server> {
    let reserve = server_common::listen::bind(addr, true)?;
    let addr = reserve.local_addr()?;
    let accept = HttpServer(Service {
        app,
        answered: None,
    })
    .start(addr)?;
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

/// The contract as an `HttpService`: one per connection, all sharing the app.
struct Service {
    app: &'static App,
    /// The last answer's request, in flight until may_minihttp has written
    /// it: released when the next request is read or the connection ends.
    answered: Option<InFlight>,
}

impl Clone for Service {
    /// A new connection's service: nothing answered yet.
    fn clone(&self) -> Service {
        Service {
            app: self.app,
            answered: None,
        }
    }
}

impl HttpService for Service {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        let app = self.app;
        let in_flight = app.shutdown.request();
        // A new request was read: the earlier answers are written, or (in a
        // pipelined batch) wait in the same buffer as this one, whose guard
        // now covers them.
        self.answered = None;
        let resp = app.respond(req.method(), req.path());
        rsp.status_code(
            usize::from(resp.status),
            workloads::Response::reason(resp.status),
        );
        rsp.header(content_type_header(resp.content_type));
        if resp.status == 405 {
            rsp.header(ALLOW_HEADER);
        }
        match resp.body {
            Body::Static(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => rsp.body(text),
                Err(_) => rsp.body_vec(bytes.to_vec()),
            },
            Body::Owned(bytes) => rsp.body_vec(bytes),
        }
        self.answered = Some(in_flight);
        Ok(())
    }
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
