//! The load engine: per-thread event loops (epoll through mio,
//! edge-triggered, like wrk's ae loop, or io_uring) driving non-blocking
//! connections of one protocol (HTTP/1.1, pipelined HTTP/1.1, HTTP/2,
//! WebSocket) over one transport (plain TCP or TLS).
//!
//! - [`Plan`]: what to run. [`run`] splits it over threads and merges what
//!   they counted into a [`RunResult`]; it never formats anything.
//! - `worker`: one thread's loop — the only request loop, parameterised by
//!   how it stops ([`Stop`]) and how it paces ([`Pace`]); `worker/h2.rs`
//!   and `worker/ws.rs` apply those protocols' answers to its slots, rooms
//!   and counts.
//! - `conn`: one connection's state machine (connect, write, read), with
//!   its protocol's state and its transport's.
//! - `framing`: how many requests a connection has in flight, and the ring
//!   of slots that holds them.
//! - `proto`: each protocol's per-connection state and glue (`h1`: the
//!   HTTP/1 response reader; `h2`: the HTTP/2 codec's connection);
//!   `h2` and `ws` (beside it) are the sans-IO codecs.
//! - `transport`: plain TCP or TLS for a thread (`tls`: rustls, sans-IO).
//! - `io`: the two I/O backends; `schedule`: which path of a mix each
//!   connection sends next; `timer`: sub-millisecond wake-ups for `--rate`.
//!
//! Per request on a kept-alive HTTP/1.1 connection the engine makes one
//! `write` and one `read` (plus a share of an `epoll_wait`): the next
//! request is written as soon as the previous response is complete, on a
//! socket registered once for both directions, so there is no `epoll_ctl`
//! per request.
//!
//! Over 500 lines on purpose: the plan, the judging of a response and the
//! result are the engine's one interface, kept in one place.

mod conn;
pub mod framing;
/// The HTTP/2 client codec (`Framing::H2c`, `Framing::H2`).
pub mod h2;
mod h3;
mod huffman;
mod io;
mod proto;
pub mod quic;
mod schedule;
mod timer;
pub mod tls;
mod transport;
mod worker;
pub mod ws;
pub mod ws_room;

/// The HTTP/1 response reader (the fuzz targets drive it).
#[cfg(feature = "fuzzing")]
pub(crate) use proto::h1;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::intervals::{Interval, IntervalSink};
use crate::stats::{SecondPoint, Stats};

pub use framing::{Framing, MAX_PIPELINE};
pub use io::{resolve as resolve_io, Io};
pub use schedule::{MAX_CYCLE, MAX_PATHS};
pub use tls::{Negotiated, TlsPlan, TlsVersion, Trust};
pub use ws::{WsMode, WsPlan};

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// After exactly this many requests (successes and failures).
    Count(u64),
    /// After this long (requests in flight at the end are dropped, not failed).
    Duration(Duration),
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Closed loop: each connection sends its next request as soon as the
    /// previous response is complete.
    Closed,
    /// Open loop at this many requests per second over all connections
    /// (wrk2's `-R`); latency counts from each request's intended send time.
    Rate(f64),
}

/// How each response is judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Any 2xx status.
    Success,
    /// Exactly this status, any body.
    Status(u16),
    /// Exactly this status and exactly this body (a contract endpoint).
    Exact { status: u16, body: Arc<[u8]> },
}

impl Check {
    /// How responses to `method path` are judged: the contract's exact status
    /// and body for its endpoints; any 2xx for other paths or with `--no-verify`.
    pub fn for_request(method: &str, path: &str, verify: bool) -> Check {
        Check::for_body(method, path, None, verify)
    }

    /// As [`Check::for_request`], for a request that carries `body`: the
    /// contract's `POST /echo` answers it back (the expected body is the
    /// sent one), or 413 when it is over the contract's bound.
    pub fn for_body(method: &str, path: &str, body: Option<&Body>, verify: bool) -> Check {
        let route = match workloads::route(method, path) {
            Ok(route) if verify => route,
            _ => return Check::Success,
        };
        if route.endpoint == workloads::Endpoint::Echo {
            let sent = body.map_or(&[][..], |b| &b.bytes[..]);
            let expected = workloads::echo::expect(sent);
            return match expected.exact_body() {
                Some(_) => Check::Exact {
                    status: expected.status,
                    body: Arc::from(sent),
                },
                None => Check::Status(expected.status),
            };
        }
        let expected = workloads::expect(method, path);
        match expected.exact_body() {
            Some(body) => Check::Exact {
                status: expected.status,
                body: Arc::from(body),
            },
            None => Check::Status(expected.status),
        }
    }

    #[inline]
    pub(crate) fn status_ok(&self, status: u16) -> bool {
        match self {
            Check::Success => (200..300).contains(&status),
            Check::Status(s) | Check::Exact { status: s, .. } => status == *s,
        }
    }

    #[inline]
    pub(crate) fn body(&self) -> Option<&[u8]> {
        match self {
            Check::Exact { body, .. } => Some(body),
            _ => None,
        }
    }
}

/// A request body (`harness run --body`, `--body-file`): sent with every
/// request, inside the bytes encoded once ([`Request::encode_with_body`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Body {
    pub bytes: Vec<u8>,
    /// `Content-Type` (unless a header given with the request sets it).
    pub content_type: String,
    /// `Transfer-Encoding: chunked` (in chunks of [`CHUNK_BYTES`]) rather
    /// than `Content-Length`.
    pub chunked: bool,
}

/// The chunk size of a chunked body: 16 KiB, a typical client write.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// One request, encoded once for the whole run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// Path and query, as sent on the request line.
    pub target: String,
    pub bytes: Arc<[u8]>,
    /// The body's length (decoded), if it carries one.
    pub body_bytes: Option<usize>,
    /// The body is sent chunked.
    pub chunked: bool,
}

impl Request {
    /// `METHOD target HTTP/1.1`, `Host`, the extra headers, and
    /// `Connection: close` when connections are not kept alive. An extra
    /// `Host` header replaces the default one.
    pub fn encode(
        method: &str,
        target: &str,
        host: &str,
        headers: &[(String, String)],
        keepalive: bool,
    ) -> Request {
        Request::encode_with_body(method, target, host, headers, keepalive, None)
    }

    /// As [`Request::encode`], with `body` after the head, framed by
    /// `Content-Length` or chunked, and its `Content-Type` unless `headers`
    /// has one. Still encoded once: every request of the run writes these
    /// bytes, so a body costs no allocation per request.
    pub fn encode_with_body(
        method: &str,
        target: &str,
        host: &str,
        headers: &[(String, String)],
        keepalive: bool,
        body: Option<&Body>,
    ) -> Request {
        let mut s = format!("{method} {target} HTTP/1.1\r\n");
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        if !has("host") {
            s.push_str(&format!("Host: {host}\r\n"));
        }
        for (name, value) in headers {
            s.push_str(&format!("{name}: {value}\r\n"));
        }
        if !keepalive {
            s.push_str("Connection: close\r\n");
        }
        if let Some(b) = body {
            if !has("content-type") {
                s.push_str(&format!("Content-Type: {}\r\n", b.content_type));
            }
            if b.chunked {
                s.push_str("Transfer-Encoding: chunked\r\n");
            } else {
                s.push_str(&format!("Content-Length: {}\r\n", b.bytes.len()));
            }
        }
        s.push_str("\r\n");
        let mut bytes = s.into_bytes();
        if let Some(b) = body {
            if b.chunked {
                for chunk in b.bytes.chunks(CHUNK_BYTES) {
                    bytes.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                    bytes.extend_from_slice(chunk);
                    bytes.extend_from_slice(b"\r\n");
                }
                bytes.extend_from_slice(b"0\r\n\r\n");
            } else {
                bytes.extend_from_slice(&b.bytes);
            }
        }
        Request {
            method: method.to_string(),
            target: target.to_string(),
            bytes: Arc::from(bytes),
            body_bytes: body.map(|b| b.bytes.len()),
            chunked: body.is_some_and(|b| b.chunked),
        }
    }

    /// A HEAD request: responses carry no body.
    pub fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }
}

/// One path of a run: its request, how its responses are judged, and its
/// share of the requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub request: Request,
    pub check: Check,
    /// Requests go to the paths in proportion to their weights (each >= 1).
    pub weight: u32,
    /// What reports call it: the target, unless the caller names it.
    pub label: String,
}

impl Route {
    pub fn new(request: Request, check: Check, weight: u32) -> Route {
        let label = request.target.clone();
        Route {
            request,
            check,
            weight,
            label,
        }
    }

    /// `GET target` on `authority`, judged by the contract (as every
    /// command's load is).
    pub fn get(target: &str, authority: &str, weight: u32, keepalive: bool) -> Route {
        Route::new(
            Request::encode("GET", target, authority, &[], keepalive),
            Check::for_request("GET", target, true),
            weight,
        )
    }
}

/// What a run speaks on each connection: one protocol, carrying only its
/// own settings, so that no plan pairs settings of two (a WebSocket
/// upgrade with HTTP/2 streams, pipelining without keep-alive). Whether
/// HTTP/2 is h2c or h2 is the transport's to say ([`Plan::framing`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoPlan {
    /// HTTP/1.1, one request in flight per connection; `keepalive: false`
    /// opens a connection per request.
    H1 { keepalive: bool },
    /// HTTP/1.1 pipelining on kept-alive connections: up to `depth` (2 to
    /// [`MAX_PIPELINE`]) requests in flight, answered in order.
    Pipelined { depth: u16 },
    /// HTTP/2: up to `streams` in flight per connection (`--streams`),
    /// fewer if the server's SETTINGS say so. Over plain TCP it is h2c by
    /// prior knowledge; over TLS the engine offers `h2` alone by ALPN.
    H2 { streams: u16 },
    /// HTTP/3: up to `streams` requests in flight per QUIC connection,
    /// fewer if the server's stream credit says so. Its transport is QUIC
    /// (UDP, TLS 1.3 inside) with the plan's TLS settings, so it needs
    /// [`TransportPlan::Tls`] (the one pairing [`Plan::validate`] checks).
    H3 { streams: u16 },
    /// WebSocket: the upgrade of `ws`, then up to `depth` messages in
    /// flight per connection; each route's request bytes are a message's
    /// payload, its check's body the echo expected.
    Ws { depth: u16, ws: ws::WsPlan },
}

impl ProtoPlan {
    /// HTTP/1.1 as `--pipeline depth` asks: one request in flight for a
    /// depth of 1 (or 0), pipelined beyond.
    pub fn http1(depth: u16, keepalive: bool) -> ProtoPlan {
        if depth <= 1 {
            ProtoPlan::H1 { keepalive }
        } else {
            ProtoPlan::Pipelined { depth }
        }
    }

    /// The protocol of `framing`, for the framings that need no other
    /// settings (all but WebSocket, which needs its upgrade: `None`).
    /// HTTP/2's transport is the plan's ([`Plan::framing`] says which).
    pub fn from_framing(framing: Framing) -> Option<ProtoPlan> {
        Some(match framing {
            Framing::H1 => ProtoPlan::H1 { keepalive: true },
            Framing::Pipelined(depth) => ProtoPlan::http1(depth, true),
            Framing::H2c(streams) | Framing::H2(streams) => ProtoPlan::H2 { streams },
            Framing::H3(streams) => ProtoPlan::H3 { streams },
            Framing::Ws(_) => return None,
        })
    }
}

/// How a run's connections carry their bytes.
#[derive(Clone, Debug)]
pub enum TransportPlan {
    /// Plain TCP (an http:// or ws:// URL).
    Tcp,
    /// TLS over TCP (https://, wss://): one handshake per connection.
    Tls(TlsPlan),
}

impl TransportPlan {
    /// TLS when `tls` is given, else plain TCP.
    pub fn from_tls(tls: Option<TlsPlan>) -> TransportPlan {
        tls.map_or(TransportPlan::Tcp, TransportPlan::Tls)
    }
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The URL, for reports.
    pub url: String,
    pub addr: SocketAddr,
    /// The request of a single-path run; in a mix, the first path's (the
    /// engine sends `mix`).
    pub request: Request,
    /// How its responses are judged.
    pub check: Check,
    /// A weighted mix, sent instead of `request` alone; empty for a
    /// single-path run (which runs as a mix of one). See [`Plan::mixed`].
    pub mix: Vec<Route>,
    /// Connections, spread over the threads.
    pub connections: usize,
    pub threads: usize,
    /// The I/O backend (`--io`); io_uring falls back to epoll where refused.
    pub io: Io,
    /// io_uring, closed loop: how long a wait may hold out for half the
    /// requests in flight (`--gather`; zero: a wait ends at the first
    /// completion). Needs kernel 6.13's `min_wait`; ignored elsewhere.
    pub gather: Duration,
    pub stop: Stop,
    pub pace: Pace,
    /// What each connection speaks, with that protocol's settings only
    /// (`--pipeline`, `--h2c`/`--h2`, a ws:// URL, `--no-keepalive`).
    pub proto: ProtoPlan,
    /// How each connection carries its bytes (an https:// URL: TLS).
    pub transport: TransportPlan,
    /// HTTP/2's `:authority` (the URL's host and port).
    pub authority: String,
    /// A request without a complete response after this long fails.
    pub timeout: Duration,
    /// Requests sent during this first stretch are not counted.
    pub warmup: Duration,
    /// The hard bound of a [`Stop::Count`] run, warm-up excluded.
    pub max_duration: Duration,
    /// The length of the series' intervals, each with its own histogram: a
    /// whole number of seconds (see `intervals`).
    pub interval: Duration,
    /// What this agent is called in a merge (`--tag`); for reports.
    pub tag: Option<String>,
    /// When all agents of a multi-machine run were told to begin (`--start-at`,
    /// Unix seconds); the caller waits for it. For reports.
    pub start_at_unix_s: Option<f64>,
}

impl Plan {
    /// A plan with the engine's defaults: 50 connections, one thread per core,
    /// keep-alive, closed loop, 10 s, 10 s timeout, no warm-up.
    pub fn new(url: &str, addr: SocketAddr, request: Request, check: Check) -> Plan {
        Plan {
            url: url.to_string(),
            addr,
            request,
            check,
            mix: Vec::new(),
            connections: 50,
            threads: default_threads(),
            io: Io::default(),
            gather: DEFAULT_GATHER,
            stop: Stop::Duration(Duration::from_secs(10)),
            pace: Pace::Closed,
            proto: ProtoPlan::H1 { keepalive: true },
            transport: TransportPlan::Tcp,
            authority: addr.to_string(),
            timeout: Duration::from_secs(10),
            warmup: Duration::ZERO,
            max_duration: Duration::from_secs(600),
            interval: Duration::from_secs(1),
            tag: None,
            start_at_unix_s: None,
        }
    }

    /// A plan with [`Plan::new`]'s defaults that sends `routes` in
    /// proportion to their weights, each judged by its own check; `url` is
    /// for reports.
    pub fn mixed(url: &str, addr: SocketAddr, routes: Vec<Route>) -> Result<Plan, EngineError> {
        let Some(first) = routes.first() else {
            return Err(EngineError::Plan("a mix needs at least one path".into()));
        };
        let mut plan = Plan::new(url, addr, first.request.clone(), first.check.clone());
        plan.mix = routes;
        plan.validate()?;
        Ok(plan)
    }

    /// The paths this plan sends, in order: `mix`, or `request` alone.
    pub fn routes(&self) -> Cow<'_, [Route]> {
        if self.mix.is_empty() {
            Cow::Owned(vec![Route::new(
                self.request.clone(),
                self.check.clone(),
                1,
            )])
        } else {
            Cow::Borrowed(&self.mix)
        }
    }

    /// More than one path.
    pub fn is_mixed(&self) -> bool {
        self.mix.len() > 1
    }

    /// How requests are framed on each connection: the protocol, and for
    /// HTTP/2 whether it runs over TLS (h2) or not (h2c).
    pub fn framing(&self) -> Framing {
        match &self.proto {
            ProtoPlan::H1 { .. } => Framing::H1,
            ProtoPlan::Pipelined { depth } => Framing::Pipelined(*depth),
            ProtoPlan::H2 { streams } => match self.transport {
                TransportPlan::Tcp => Framing::H2c(*streams),
                TransportPlan::Tls(_) => Framing::H2(*streams),
            },
            ProtoPlan::H3 { streams } => Framing::H3(*streams),
            ProtoPlan::Ws { depth, .. } => Framing::Ws(*depth),
        }
    }

    /// Connections are reused (HTTP keep-alive): every protocol but
    /// HTTP/1.1 with `keepalive: false`.
    pub fn keepalive(&self) -> bool {
        !matches!(self.proto, ProtoPlan::H1 { keepalive: false })
    }

    /// The TLS settings, over TLS.
    pub fn tls(&self) -> Option<&TlsPlan> {
        match &self.transport {
            TransportPlan::Tls(tls) => Some(tls),
            TransportPlan::Tcp => None,
        }
    }

    /// A WebSocket run's upgrade and mode.
    pub fn ws(&self) -> Option<&ws::WsPlan> {
        match &self.proto {
            ProtoPlan::Ws { ws, .. } => Some(ws),
            _ => None,
        }
    }

    /// Frames the plan as `framing` over its transport: the HTTP/1.1,
    /// pipelined and HTTP/2 framings (keep-alive on); an error for a
    /// WebSocket framing (it needs its upgrade: set [`ProtoPlan::Ws`]) and
    /// for h2 without TLS or h2c over it.
    pub fn set_framing(&mut self, framing: Framing) -> Result<(), EngineError> {
        let bad = |why: &str| Err(EngineError::Plan(why.to_string()));
        match (framing, &self.transport) {
            (Framing::H2(_), TransportPlan::Tcp) => return bad("h2 is HTTP/2 over TLS"),
            (Framing::H2c(_), TransportPlan::Tls(_)) => {
                return bad("h2c is HTTP/2 over plaintext: no TLS")
            }
            (Framing::H3(_), TransportPlan::Tcp) => {
                return bad("h3 runs over QUIC, which is always encrypted: it needs TLS")
            }
            _ => {}
        }
        match ProtoPlan::from_framing(framing) {
            Some(proto) => {
                self.proto = proto;
                Ok(())
            }
            None => bad("a WebSocket framing needs its upgrade (ProtoPlan::Ws)"),
        }
    }

    /// Threads actually used: never more than connections.
    pub fn effective_threads(&self) -> usize {
        // A room's members share one thread (its table is the thread's).
        self.threads
            .clamp(1, self.room().map_or(self.connections, |r| r.rooms).max(1))
    }

    /// A room fan-out run's rooms.
    pub fn room(&self) -> Option<&ws_room::RoomPlan> {
        self.ws().and_then(|w| w.room())
    }

    fn validate(&self) -> Result<(), EngineError> {
        let bad = |why: &str| Err(EngineError::Plan(why.to_string()));
        if self.connections == 0 {
            return bad("at least one connection is needed");
        }
        if let Stop::Count(0) = self.stop {
            return bad("the request count must be at least 1");
        }
        if let Pace::Rate(r) = self.pace {
            if !(r.is_finite() && r > 0.0) {
                return bad("the rate must be a positive number of requests per second");
            }
        }
        if let Some(room) = self.room() {
            if room.size == 0 || room.size > ws_room::MAX_MEMBERS {
                return bad("a room has 1 to 1024 members (--room-size)");
            }
            if room.size * room.rooms != self.connections {
                return bad("the connections must be a whole number of rooms (-c a multiple of --room-size)");
            }
        }
        // The protocol's own numbers; which protocols and transports go
        // together is the types' to say (`ProtoPlan`, `TransportPlan`),
        // but for one pair: HTTP/3 rides QUIC, always encrypted.
        if matches!(self.proto, ProtoPlan::H3 { .. }) && self.tls().is_none() {
            return bad("h3 runs over QUIC, which is always encrypted: it needs TLS");
        }
        if self.framing().capacity() > usize::from(MAX_PIPELINE) {
            return bad("the pipeline is deeper than 1024");
        }
        if self.timeout.is_zero() {
            return bad("the timeout must be positive");
        }
        if self.interval.is_zero() || self.interval.subsec_nanos() != 0 {
            return bad("the interval must be a whole number of seconds, at least 1 s");
        }
        self.cycle().map(drop)
    }

    /// The order connections walk the paths in (see `schedule`).
    fn cycle(&self) -> Result<Vec<u16>, EngineError> {
        let weights: Vec<u32> = self.routes().iter().map(|r| r.weight).collect();
        schedule::cycle(&weights).map_err(EngineError::Plan)
    }
}

/// The number of cores, the default number of engine threads.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("invalid plan: {0}")]
    Plan(String),
    #[error("cannot set up an engine thread: {0}")]
    Setup(#[from] std::io::Error),
}

/// How the caller steers a running engine.
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// Set it (Ctrl-C) to stop sending; in-flight requests get up to
    /// [`DRAIN`] to finish, then the run reports what it measured.
    pub interrupt: Arc<AtomicBool>,
}

/// How long an interrupted run waits for requests in flight.
pub const DRAIN: Duration = Duration::from_secs(1);

/// [`Plan::gather`]'s default, by measurement (harness/bench/engine-vs-wrk.sh,
/// 2 shared cores, event-loop server, c = 50, 100, 1000): at 200 µs the
/// engine's CPU per request on io_uring was 0.71-0.76x wrk's, at 400 µs
/// 0.69-0.71x, with no rise in p99 (the server, fed in batches, also wakes
/// less); without gathering 0.82-0.88x.
pub const DEFAULT_GATHER: Duration = Duration::from_micros(400);

/// What the progress callback sees, at most 4 times a second.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    /// Since measuring started (negative during warm-up: zero).
    pub elapsed: Duration,
    pub requests: u64,
    pub errors: u64,
    pub warming_up: bool,
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// All `-n` requests finished.
    Count,
    /// The `-d` duration passed.
    Duration,
    /// Interrupted (Ctrl-C): partial results.
    Interrupted,
    /// The server stopped accepting connections: partial results.
    ServerGone,
    /// Every TLS handshake failed (a refused certificate, no common
    /// version): partial results, and the reason in the message.
    TlsRefused,
    /// A `-n` run hit its hard time bound: partial results.
    Deadline,
}

impl End {
    pub fn name(self) -> &'static str {
        match self {
            End::Count => "count",
            End::Duration => "duration",
            End::Interrupted => "interrupted",
            End::ServerGone => "server_gone",
            End::TlsRefused => "tls_refused",
            End::Deadline => "deadline",
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub plan: Plan,
    /// Threads used.
    pub threads: usize,
    /// The I/O backend used (the plan's, or epoll where io_uring was refused).
    pub io: Io,
    /// Why it is not the plan's, in one line.
    pub io_note: Option<String>,
    /// How long its waits gathered (see [`Plan::gather`]), if they did:
    /// io_uring, closed loop, a kernel with `min_wait`, a non-zero plan.
    pub gather: Option<Duration>,
    /// Wall-clock start of the measurement, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// The measured interval (warm-up excluded).
    pub duration: Duration,
    pub end: End,
    /// Why the run ended early, in words.
    pub message: Option<String>,
    pub stats: Stats,
    /// One point per interval, derived from `intervals`.
    pub series: Vec<SecondPoint>,
    /// Every interval of the measured time, with its histogram; their sum is
    /// `stats.latency_us`.
    pub intervals: Vec<Interval>,
    /// A run made by `harness merge`: the names of the runs it adds up
    /// (empty for a run of the engine).
    pub merged: Vec<String>,
}

impl RunResult {
    pub fn interrupted(&self) -> bool {
        self.end == End::Interrupted
    }

    /// Latency is counted from intended send times (open loop).
    pub fn latency_corrected(&self) -> bool {
        matches!(self.plan.pace, Pace::Rate(_))
    }

    /// Finished requests per second (successes and failures).
    pub fn requests_per_s(&self) -> f64 {
        per_s(self.stats.requests(), self.duration)
    }

    /// Successful requests per second.
    pub fn ok_per_s(&self) -> f64 {
        per_s(self.stats.ok, self.duration)
    }

    /// `n` over the measured interval, per second.
    pub fn per_s(&self, n: u64) -> f64 {
        per_s(n, self.duration)
    }
}

fn per_s(n: u64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// Nanoseconds since the run's start, from the monotonic clock.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

pub(crate) fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u128::from(u64::MAX / 4)) as u64
}

/// What one thread publishes for the progress line, once per loop turn.
#[derive(Default)]
pub(crate) struct ThreadProgress {
    requests: AtomicU64,
    errors: AtomicU64,
}

/// A path as the request loop sees it.
pub(crate) struct Wire<'a> {
    bytes: &'a [u8],
    check: &'a Check,
    head: bool,
}

/// State shared by the threads of one run (read-mostly).
pub(crate) struct Shared<'a> {
    plan: &'a Plan,
    /// The I/O backend every thread uses.
    io: Io,
    /// How long its io_uring waits gather, if they do.
    gather: Option<Duration>,
    /// The plan's paths, by index.
    wires: Vec<Wire<'a>>,
    /// Path indices in the order each connection walks them.
    cycle: Vec<u16>,
    clock: Clock,
    /// Requests whose start is before this are warm-up.
    measure_start_ns: u64,
    /// Everything stops here (the `-d` end, or the hard bound of `-n`).
    end_ns: u64,
    interrupt: &'a AtomicBool,
    /// Set by any thread that finds the server gone: all stop.
    abort: AtomicBool,
    abort_message: Mutex<Option<String>>,
    /// The abort is for TLS handshakes that all failed.
    tls_refused: AtomicBool,
    sink: IntervalSink,
    /// One per thread.
    progress: Vec<ThreadProgress>,
    /// Threads whose loop has ended: each keeps its connections open
    /// until all have (see `worker::EndTogether`).
    threads_ended: std::sync::atomic::AtomicUsize,
}

impl Shared<'_> {
    fn abort_with(&self, message: String) {
        let mut m = self.abort_message.lock().unwrap_or_else(|e| e.into_inner());
        if m.is_none() {
            *m = Some(message);
        }
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// One thread's share of the plan.
pub(crate) struct Share {
    thread: usize,
    /// Global index of its first connection (spreads the `--rate` schedule).
    first_conn: usize,
    conns: usize,
    /// Its part of `-n`.
    permits: Option<u64>,
}

/// Runs `plan` to its end; `progress` is called from this thread about every
/// 250 ms.
pub fn run(
    plan: &Plan,
    control: &Control,
    progress: &mut dyn FnMut(&Snapshot),
) -> Result<RunResult, EngineError> {
    plan.validate()?;
    let routes = plan.routes();
    let cycle = plan.cycle()?;
    let threads = plan.effective_threads();
    let (io, io_note, can_gather) = if plan.framing().is_h3() && plan.io == Io::Uring {
        // QUIC's datagrams move through epoll only (`engine::quic`); the
        // report names the backend, `run --help` says why.
        (Io::Epoll, None, false)
    } else {
        io::resolve(plan.io)
    };
    let gather = Some(plan.gather)
        .filter(|g| can_gather && !g.is_zero() && matches!(plan.pace, Pace::Closed));
    let clock = Clock::new();
    let started = SystemTime::now();
    let measure_start_ns = ns(plan.warmup);
    let end_ns = measure_start_ns
        + match plan.stop {
            Stop::Duration(d) => ns(d),
            Stop::Count(_) => ns(plan.max_duration),
        };
    // Connections are split in whole rooms (of one, without rooms).
    let unit = plan.room().map_or(1, |r| r.size);
    let units = (plan.connections / unit) as u64;
    let shares: Vec<Share> = (0..threads)
        .map(|t| Share {
            thread: t,
            first_conn: split_before(units, threads, t) as usize * unit,
            conns: split(units, threads, t) as usize * unit,
            permits: match plan.stop {
                Stop::Count(n) => Some(split(n, threads, t)),
                Stop::Duration(_) => None,
            },
        })
        .collect();
    let shared = Shared {
        plan,
        io,
        gather,
        wires: routes
            .iter()
            .map(|r| Wire {
                bytes: &r.request.bytes,
                check: &r.check,
                head: r.request.is_head(),
            })
            .collect(),
        cycle,
        clock,
        measure_start_ns,
        end_ns,
        interrupt: &control.interrupt,
        abort: AtomicBool::new(false),
        abort_message: Mutex::new(None),
        tls_refused: AtomicBool::new(false),
        sink: IntervalSink::new(threads),
        progress: (0..threads).map(|_| ThreadProgress::default()).collect(),
        threads_ended: std::sync::atomic::AtomicUsize::new(0),
    };

    let outputs = std::thread::scope(|s| -> Result<Vec<_>, EngineError> {
        let mut handles = Vec::with_capacity(threads);
        for share in shares {
            let shared = &shared;
            let h = std::thread::Builder::new()
                .name(format!("harness-{}", share.thread))
                .spawn_scoped(s, move || worker::run(shared, share))?;
            handles.push(h);
        }
        let mut last_report = Instant::now();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            // Compressing settled intervals is this thread's job, not the engine's.
            shared.sink.encode_settled();
            if last_report.elapsed() >= Duration::from_millis(250) {
                last_report = Instant::now();
                let now = shared.clock.now();
                let snap = Snapshot {
                    elapsed: Duration::from_nanos(now.saturating_sub(measure_start_ns)),
                    requests: sum(&shared.progress, |p| &p.requests),
                    errors: sum(&shared.progress, |p| &p.errors),
                    warming_up: now < measure_start_ns,
                };
                progress(&snap);
            }
        }
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r.map_err(EngineError::from),
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })?;

    let mut stats = Stats::default();
    let mut last_ns = measure_start_ns;
    let mut ends = Vec::new();
    for out in &outputs {
        stats += &out.stats;
        last_ns = last_ns.max(out.last_ns);
        ends.push(out.end);
    }
    let last_ns = last_ns.min(end_ns);
    let duration = Duration::from_nanos(last_ns.saturating_sub(measure_start_ns));
    let message = shared
        .abort_message
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let end = if message.is_some() && shared.tls_refused.load(Ordering::Relaxed) {
        End::TlsRefused
    } else if message.is_some() {
        End::ServerGone
    } else if control.interrupt.load(Ordering::Relaxed) && ends.contains(&End::Interrupted) {
        End::Interrupted
    } else if ends.contains(&End::Deadline) {
        End::Deadline
    } else {
        match plan.stop {
            Stop::Count(_) => End::Count,
            Stop::Duration(_) => End::Duration,
        }
    };
    let message = message.or_else(|| match end {
        End::Interrupted => Some("interrupted: the report covers what was measured".into()),
        End::Deadline => Some(format!(
            "stopped after {:?} before all requests finished",
            plan.max_duration
        )),
        _ => None,
    });
    let count = (duration.as_nanos()).div_ceil(plan.interval.as_nanos()) as u32;
    // The run's latency is the sum of its intervals (each success was
    // recorded once, in its interval): the two agree by construction.
    let (intervals, latency_us) = shared.sink.finish(count);
    stats.latency_us = latency_us;
    let series = series(&intervals, plan.interval);
    let started_unix_s = started
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        + plan.warmup.as_secs_f64();
    Ok(RunResult {
        plan: plan.clone(),
        threads,
        io,
        io_note,
        gather,
        started_unix_s,
        duration,
        end,
        message,
        stats,
        series,
        intervals,
        merged: Vec::new(),
    })
}

/// The chart points of `intervals`.
pub fn series(intervals: &[Interval], interval: Duration) -> Vec<SecondPoint> {
    intervals
        .iter()
        .map(|i| SecondPoint {
            second: i.index * interval.as_secs() as u32,
            requests: i.requests(),
            errors: i.failures.total(),
            p50_us: i.p50_us,
            p99_us: i.p99_us,
            max_us: i.max_us,
        })
        .collect()
}

fn sum(slots: &[ThreadProgress], f: impl Fn(&ThreadProgress) -> &AtomicU64) -> u64 {
    slots.iter().map(|p| f(p).load(Ordering::Relaxed)).sum()
}

/// Thread `t`'s part when `n` is split over `parts` as evenly as possible.
fn split(n: u64, parts: usize, t: usize) -> u64 {
    let parts = parts as u64;
    let t = t as u64;
    n / parts + u64::from(t < n % parts)
}

/// The sum of the parts of the threads before `t`.
fn split_before(n: u64, parts: usize, t: usize) -> u64 {
    (0..t).map(|i| split(n, parts, i)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_are_exact() {
        for n in [0u64, 1, 7, 100, 20_001] {
            for parts in 1..=5 {
                let total: u64 = (0..parts).map(|t| split(n, parts, t)).sum();
                assert_eq!(total, n);
                assert_eq!(split_before(n, parts, parts), n);
            }
        }
    }

    #[test]
    fn requests_are_encoded_once_with_host_and_close() {
        let r = Request::encode("GET", "/hello", "127.0.0.1:8080", &[], true);
        assert_eq!(
            &*r.bytes,
            b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
        let h = vec![
            ("Host".to_string(), "x".to_string()),
            ("A".into(), "b".into()),
        ];
        let r = Request::encode("HEAD", "/", "h", &h, false);
        assert_eq!(
            &*r.bytes,
            b"HEAD / HTTP/1.1\r\nHost: x\r\nA: b\r\nConnection: close\r\n\r\n"
        );
        assert!(r.is_head());
    }

    #[test]
    fn plans_are_validated() {
        let req = Request::encode("GET", "/", "h", &[], true);
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut p = Plan::new("http://h/", addr, req, Check::Success);
        p.stop = Stop::Count(0);
        assert!(p.validate().is_err());
        p.stop = Stop::Count(1);
        p.pace = Pace::Rate(0.0);
        assert!(p.validate().is_err());
        p.pace = Pace::Rate(10.0);
        p.validate().unwrap();
        p.connections = 3;
        p.threads = 8;
        assert_eq!(p.effective_threads(), 3);
    }

    #[test]
    fn the_protocol_and_the_transport_say_the_framing() {
        let req = Request::encode("GET", "/", "h", &[], true);
        let addr = "127.0.0.1:1".parse().unwrap();
        let mut p = Plan::new("http://h/", addr, req, Check::Success);
        assert_eq!((p.framing(), p.keepalive()), (Framing::H1, true));
        p.proto = ProtoPlan::H2 { streams: 8 };
        assert_eq!(p.framing(), Framing::H2c(8));
        assert!(p.set_framing(Framing::H2(8)).is_err(), "h2 needs TLS");
        p.transport = TransportPlan::Tls(TlsPlan::new("h"));
        assert_eq!(p.framing(), Framing::H2(8));
        assert!(p.set_framing(Framing::H2c(8)).is_err(), "h2c is plaintext");
        assert!(
            p.set_framing(Framing::Ws(1)).is_err(),
            "a WebSocket needs its upgrade"
        );
        p.set_framing(Framing::Pipelined(4)).unwrap();
        assert_eq!((p.framing(), p.keepalive()), (Framing::Pipelined(4), true));
        assert_eq!(
            ProtoPlan::http1(1, false),
            ProtoPlan::H1 { keepalive: false }
        );
        p.proto = ProtoPlan::Ws {
            depth: 2,
            ws: ws::WsPlan {
                target: "/ws".into(),
                host: "h".into(),
                binary: true,
                mode: WsMode::Hold,
            },
        };
        assert_eq!(p.framing(), Framing::Ws(2));
        assert!(p.ws().is_some_and(|w| w.hold()) && p.room().is_none());
        p.validate().unwrap();
    }

    #[test]
    fn a_single_path_is_a_mix_of_one() {
        let req = Request::encode("GET", "/hello", "h", &[], true);
        let addr = "127.0.0.1:1".parse().unwrap();
        let p = Plan::new("http://h/hello", addr, req.clone(), Check::Success);
        assert!(!p.is_mixed());
        let routes = p.routes();
        assert_eq!(routes.len(), 1);
        assert_eq!((routes[0].weight, routes[0].label.as_str()), (1, "/hello"));
        assert_eq!(p.cycle().unwrap(), vec![0]);

        let mix = vec![
            Route::get("/hello", "h", 3, true),
            Route::get("/cpu?n=10", "h", 1, true),
        ];
        let p = Plan::mixed("http://h", addr, mix).unwrap();
        assert!(p.is_mixed());
        assert_eq!(p.request.target, "/hello");
        assert_eq!(p.routes()[1].label, "/cpu?n=10");
        assert!(matches!(p.routes()[1].check, Check::Exact { .. }));
        assert_eq!(p.cycle().unwrap().len(), 4);

        assert!(Plan::mixed("http://h", addr, Vec::new()).is_err());
        let zero = vec![Route::get("/", "h", 0, true)];
        let e = Plan::mixed("http://h", addr, zero).unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
    }
}
