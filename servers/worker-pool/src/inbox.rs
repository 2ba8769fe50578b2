//! A connection's read buffer and the requests framed in it, shared by the
//! event-loop front and the per-connection workers.

use server_common::http1::{self, Connection, ParseError, MAX_REQUEST_BYTES};
use workloads::{Endpoint, Rejection, Response};

/// Initial read buffer: many pipelined benchmark requests fit.
const INITIAL_CAPACITY: usize = 4096;
/// The most a request occupies before the codec accepts or refuses it
/// (head, body, chunked framing), plus one byte so that an over-long head
/// is seen as such.
const MAX_CAPACITY: usize = MAX_REQUEST_BYTES + 1;

/// A request taken out of the buffer, owning what the rest of its life needs.
#[derive(Debug)]
pub struct Parsed {
    /// The endpoint, or why the router refused it.
    pub routed: Result<Endpoint, Rejection>,
    /// `HEAD`: the response goes out without its body.
    pub head: bool,
    /// The `Connection` header of the response; `Close` ends the connection.
    pub connection: Connection,
    /// The `Allow` value of a 405 for its target ([`workloads::allow`]).
    pub allow: &'static str,
    /// The body, for the route that reads it (`/echo`; empty, unallocated,
    /// for the others): it travels to the worker with the request, as
    /// nginx hands a body to an FPM child.
    pub body: Vec<u8>,
    /// A WebSocket route (`/ws`, `/ws/room`): its handshake's route and
    /// `Sec-WebSocket-Accept`, or why it is refused (400).
    pub upgrade: Option<Result<(workloads::ws::WsRoute, String), String>>,
}

impl Parsed {
    pub fn keep_alive(&self) -> bool {
        self.connection != Connection::Close
    }
}

/// Encodes `response` into `out` after what is already there; `true` when
/// the connection ends after it (the client asked, or the server is
/// stopping).
pub fn encode_reply(
    out: &mut Vec<u8>,
    name: &str,
    response: &Response,
    head: bool,
    connection: Connection,
    allow: &str,
    stopping: bool,
) -> bool {
    let closing = connection == Connection::Close || stopping;
    let connection = if closing {
        Connection::Close
    } else {
        connection
    };
    http1::encode_allowing(out, name, response, head, connection, allow);
    closing
}

/// Bytes read from a connection and not yet consumed: `buf[start..end]`.
pub struct Inbox {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::new()
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        Inbox {
            buf: vec![0; INITIAL_CAPACITY],
            start: 0,
            end: 0,
        }
    }

    /// No unconsumed bytes: the connection is between requests.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Takes the next complete request, routed. `Ok(None)`: read more.
    pub fn next_request(&mut self) -> Result<Option<Parsed>, ParseError> {
        let Some(req) = http1::parse(&self.buf[self.start..self.end])? else {
            return Ok(None);
        };
        let head = req.method == "HEAD";
        let routed = workloads::route(req.method, req.target).map(|r| r.endpoint);
        let upgrade = workloads::ws::route(req.target).map(|route| {
            workloads::ws::accept_head(
                req.method,
                &self.buf[self.start..self.start + req.len],
                route,
            )
        });
        let connection = Connection::for_request(&req);
        let allow = workloads::allow(req.target);
        let body = match routed {
            Ok(Endpoint::Echo) => req.body().into_owned(),
            _ => Vec::new(),
        };
        self.start += req.len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(Parsed {
            routed,
            head,
            connection,
            allow,
            body,
            upgrade,
        }))
    }

    /// Takes every unconsumed byte (what followed a WebSocket handshake).
    pub fn take_pending(&mut self) -> Vec<u8> {
        let rest = self.buf[self.start..self.end].to_vec();
        self.start = 0;
        self.end = 0;
        rest
    }

    /// The unconsumed bytes start a HEAD request: the answer to a refused
    /// one then carries no content (RFC 9110 §9.3.2).
    pub fn pending_is_head(&self) -> bool {
        http1::requests_head(&self.buf[self.start..self.end])
    }

    /// Free space to read into, after moving or growing the buffer if needed.
    /// Never empty: the codec refuses a request before the buffer is full.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = (self.buf.len() * 2).min(MAX_CAPACITY);
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Records `n` bytes read into [`Inbox::spare`].
    pub fn filled(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use server_common::http1::MAX_HEAD_BYTES;

    fn feed(inbox: &mut Inbox, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let spare = inbox.spare();
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            inbox.filled(n);
            rest = &rest[n..];
        }
    }

    #[test]
    fn frames_pipelined_requests_in_order() {
        let mut inbox = Inbox::new();
        feed(
            &mut inbox,
            b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nHEAD /cpu?n=5 HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.0\r\n\r\nGET /",
        );
        let a = inbox.next_request().unwrap().unwrap();
        assert_eq!(a.routed, Ok(Endpoint::Hello));
        assert!(!a.head && a.keep_alive());
        let b = inbox.next_request().unwrap().unwrap();
        assert_eq!(b.routed, Ok(Endpoint::Cpu { n: 5 }));
        assert!(b.head);
        let c = inbox.next_request().unwrap().unwrap();
        assert_eq!(c.routed, Err(Rejection::NotFound));
        assert!(!c.keep_alive(), "HTTP/1.0 without keep-alive closes");
        assert!(inbox.next_request().unwrap().is_none());
        assert!(!inbox.is_empty());
        feed(&mut inbox, b"hello HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(inbox.next_request().unwrap().is_some());
        assert!(inbox.is_empty());
    }

    #[test]
    fn grows_for_large_heads_and_refuses_oversized_ones() {
        let mut inbox = Inbox::new();
        let mut req = b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 6000));
        req.extend_from_slice(b"\r\n\r\n");
        feed(&mut inbox, &req);
        assert!(inbox.next_request().unwrap().is_some());

        let mut inbox = Inbox::new();
        let mut big = b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES));
        feed(&mut inbox, &big);
        assert_eq!(inbox.next_request().unwrap_err(), ParseError::HeadTooLarge);
        assert!(!inbox.pending_is_head());
    }

    #[test]
    fn a_refused_request_is_known_as_head() {
        let mut inbox = Inbox::new();
        feed(
            &mut inbox,
            b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\nHEAD /url HTTP/1.1\r\n\r\n",
        );
        assert!(!inbox.pending_is_head());
        inbox.next_request().unwrap().unwrap();
        assert!(inbox.pending_is_head(), "the refused one is the HEAD");
        assert_eq!(inbox.next_request().unwrap_err(), ParseError::Malformed);
    }

    #[test]
    fn skips_bodies() {
        let mut inbox = Inbox::new();
        let mut req = b"POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n".to_vec();
        req.extend(std::iter::repeat_n(b'x', 10000));
        req.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        feed(&mut inbox, &req);
        let post = inbox.next_request().unwrap().unwrap();
        assert_eq!(post.routed, Err(Rejection::MethodNotAllowed));
        let get = inbox.next_request().unwrap().unwrap();
        assert_eq!(get.routed, Ok(Endpoint::Hello));
    }
}
