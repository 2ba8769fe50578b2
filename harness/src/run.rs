//! `harness run`: command-line arguments → a [`Plan`] → the engine → a report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::engine::{
    self, Body, Check, Control, End, Io, Pace, Plan, ProtoPlan, Request, Route, Snapshot, Stop,
    TlsPlan, TlsVersion, TransportPlan, Trust, WsMode,
};
use crate::report::{self, Format};
use crate::target::Target;
use crate::thresholds::{self, Threshold};
use crate::units::parse_duration;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Stopping: -n stops after exactly N requests (successes and failures; the
report's count equals N), -d after a duration; with neither, -d 10s. With -n,
-d is a hard bound (default 10m). Every request is bounded by --timeout.

Pacing: by default each connection sends its next request as soon as the
previous response is complete (closed loop, like wrk and ab). Closed-loop
latency hides a server's stalls (coordinated omission): while it stalls, no
requests are sent. --rate R sends R requests per second on a fixed schedule
(open loop, like wrk2 -R) and counts latency from each request's intended
send time, so stalls show in the percentiles.

Verification: when the path is a contract endpoint (/hello, /cpu?n=N, /db,
/work, /sleep?ms=M, ...), every response's status and body are compared with
the contract's, and a mismatch is a failure: a server answering 200 with an
error body does not look faster. Other paths: any 2xx passes. --no-verify:
only the status class is checked.

Latency counts from the request's write (keep-alive), its connect
(--no-keepalive: connect time is also reported apart) or its intended send
time (--rate). Only successful requests enter the latency histogram.

Over time: the run is cut into intervals (--interval, 1 s), each with its
own full latency histogram; the run's histogram is their exact sum.
--hlog FILE writes them as an HdrHistogram interval log (V2 compressed,
values in µs, tagged with --tag), which HdrHistogram's Java, Python and Go
tools read; --series FILE.csv writes one row per interval (requests,
failures by kind, p50/p90/p99/max). The JSON report carries them too.

TLS (https:// URLs): every connection speaks TLS 1.3 (--tls-version 1.2
for TLS 1.2; exactly that version either way), offers ALPN http/1.1 and
sends the URL's host as the server name. The certificate must be valid for
that host and issued by a public CA (Mozilla's list, built in) or, with
--cacert FILE, by one of the CAs in that PEM file (a private or lab CA:
nothing is read from or added to the system's trust store); --insecure
accepts any certificate. Sessions are resumed as browsers do (the server's
tickets or session IDs); --tls-no-resume makes every handshake a full one.
With keep-alive there is one handshake per connection; with --no-keepalive
one per request, which is then what the run measures: the report counts
handshakes (full / resumed), their latency (ClientHello sent to handshake
done) in a histogram of its own, and the negotiated version, cipher suite
and key exchange. A failed handshake is a failure of its own kind; when
every connection's fails (a refused certificate), the run stops with one
line that says why and exits 1. Request latency includes the handshake on
a new connection.

Many load machines: give every agent the same --start-at (Unix seconds or
RFC 3339) and its own --tag; they wait and begin together, each with its
share of the connections and of --rate. An agent that starts late says so
on stderr and in its JSON (recording.late_s) and still runs its whole
duration. `harness merge` adds their .hlog or JSON files exactly.

Bodies: --body STRING or --body-file FILE sends that body with every
request whose method carries one (not GET or HEAD; in a mix, see Mixes),
framed by Content-Length, or chunked with --chunked; the method becomes
POST unless -m says otherwise. The flag is --body, not -d: -d is the
duration, as in wrk (oha and h2load use -d for the body). The request is
still encoded once. Responses to the contract's POST /echo are verified
byte for byte against the body sent (over 1 MiB: its 413).

Mixes: --path [METHOD ]TARGET[:WEIGHT] (repeatable) loads the URL's server with
several paths in one run instead of the URL's path (give the URL without
one). Each path gets WEIGHT parts of the requests (a positive integer,
default 1), in a fixed interleaved order per connection; each response is
verified against its own path's answer; the report keeps the totals and
adds each path's share, rate, latency and failures. The last `:N` is the
weight only when N is all digits: `/x?a=1:2` is /x?a=1 with weight 2, and a
target that itself ends in `:N` needs an explicit weight (`/t?at=12:30:1`).
A path may name its method ('POST /echo:1'); the others use -m (GET when
some path names one). The body goes with every request whose method is not
GET or HEAD.

Pipelining: --pipeline N keeps up to N requests in flight on each
kept-alive HTTP/1.1 connection (N x -c in all), written back to back and
answered in order: each response is matched to its request and verified,
and each request is timed from its own write (with --rate, from its
intended send time; a request due while N are in flight waits, and its
wait counts). A connection that closes with requests in flight fails each
of them once.

HTTP/2: --h2c (http:// URLs, prior knowledge) and --h2 (https:// URLs,
ALPN h2; a server that does not pick it ends the run saying so) keep up to
--streams N (default 100, like h2load -m) streams in flight on each
connection, fewer if the server's SETTINGS_MAX_CONCURRENT_STREAMS says so
(until its SETTINGS arrive, one). Every response is verified like
HTTP/1.1's (status, Content-Length against the body, the exact body); a
stream the server resets fails alone (failures: reset), and after a GOAWAY
the streams it left unprocessed fail (failures: goaway), the others finish
and the next requests go on a new connection. -H headers and --chunked
are not sent over HTTP/2 (refused).

HTTP/3: --h3 (https:// URLs; QUIC over UDP to the URL's port, ALPN h3)
keeps up to --streams N request streams in flight on each QUIC connection
(a request waits, never fails, while the server's stream credit is
spent). Responses are verified as over HTTP/2; a reset stream fails alone
(failures: reset). The report adds the QUIC handshakes and the packets
sent and declared lost (their frames resent). A server with no QUIC
answer within 2 s ends the run; --cacert and --insecure work as for TLS.
It runs on epoll (io_uring does not carry QUIC's datagrams yet), one UDP
socket per connection, and sends -H headers and --chunked as HTTP/2 does
(refused).

WebSocket (ws:// and wss:// URLs): each connection sends the HTTP/1.1
upgrade (its 101 and Sec-WebSocket-Accept are checked), then echo messages
of --ws-size bytes (default 64; binary, or --ws-text), each masked with a
key of its own as RFC 6455 requires, with --pipeline N of them in flight
per connection (default 1). A request of the report is a message: each echo
is compared byte for byte with what was sent, counted ok or failed by kind,
and timed from its send (with --rate R, R messages per second, from their
intended send times). The contract's servers echo on /ws.

Rooms (--room, on the contract's /ws/room?name=R): every connection is a
member of a room, one room of all -c members, or rooms of --room-size K
(named R-0, R-1, ...). A room starts once all its members are upgraded;
each member then sends --pipeline N messages in flight (or its share of
--rate R messages per second), and every member receives every message,
its own included: K deliveries per message. A request of the report is a
delivery, timed at its receiver from its message's send (or intended
send): each is checked for the message's bytes (after a 24-byte header
naming its sender, sequence and the room's epoch), for its sender's order
(failures: order, also for one skipped) and for the room's one order, the
same at every member (failures: interleave). A message ends once every
member has it; a member whose connection fails fails its room's owed
deliveries and the room rejoins. Deliveries grow as K^2: keep K small.

Thresholds (CI gates, k6's syntax): --threshold 'p(99)<20ms' (repeatable)
judges the run after it ends; metrics are p(N), avg, med, min and max of
the successful requests' latency (a bare number is ms; us, ms, s), rate
(the share that failed: 0.01 or 1%) and rps (finished requests per
second); operators <, <=, >, >=, ==, !=. Each is printed PASS or FAIL with
what the run showed; any FAIL makes the exit code 99. A run without a
successful request fails every latency threshold.

Examples:
  harness run http://127.0.0.1:8082/hello -c 100 -d 10s
  harness run http://127.0.0.1:8082/hello -d 10s --rate 2000 --threshold 'p(99)<5ms' --threshold 'rate<0.001'
  harness run http://127.0.0.1:8082/hello -c 16 -d 10s --pipeline 16
  harness run http://127.0.0.1:8082/hello -c 4 -d 10s --h2c --streams 100
  harness run https://127.0.0.1:8443/hello --cacert lab-ca.pem -c 4 -d 10s --h2
  harness run https://127.0.0.1:8443/hello --cacert lab-ca.pem -c 4 -d 10s --h3 --streams 32
  harness run ws://127.0.0.1:8082/ws -c 50 -d 10s --pipeline 8 --ws-size 64
  harness run 'ws://127.0.0.1:8082/ws/room?name=lab' -c 50 --room --room-size 10 -d 10s
  harness run http://127.0.0.1:8082/work -c 100 -n 20000 --no-keepalive --format ab
  harness run 'http://127.0.0.1:8082/sleep?ms=20' -c 50 -d 10s --rate 2000
  harness run http://127.0.0.1:8082/hello -d 5s --format json --hist run.hgrm > run.json
  harness run https://127.0.0.1:8443/hello --cacert lab-ca.pem -c 50 -d 10s
  harness run https://127.0.0.1:8443/hello --cacert lab-ca.pem --no-keepalive --tls-no-resume -d 10s
  harness run http://127.0.0.1:8082 --path /hello:99 --path '/cpu?n=200000:1' -d 10s
  harness run http://127.0.0.1:8082/echo -m POST --body-file 64k.bin -c 50 -d 10s
  harness run http://127.0.0.1:8082/echo --body 'hello' --chunked -T text/plain -n 1000
  harness run http://127.0.0.1:8082 --path /hello:9 --path 'POST /echo:1' --body-file 64k.bin -d 10s
  harness run http://example.test/ --no-verify -H 'Accept: text/html'
  harness run http://127.0.0.1:8082/hello -d 30s --hlog run.hlog --series run.csv
  harness run http://10.0.0.5:8082/hello -c 25 -d 60s --start-at 2026-12-01T01:00:00Z --tag agent-1 --hlog agent-1.hlog")]
pub struct RunArgs {
    /// The URL to load: http[s]://host[:port]/path[?query] (without a path
    /// when --path gives the paths).
    pub url: String,

    /// Connections kept open (or, with --no-keepalive, requests in flight).
    #[arg(short = 'c', long, default_value_t = 50, value_name = "N")]
    pub connections: usize,

    /// Stop after exactly this many requests.
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,

    /// Stop after this long (10s, 500ms, 2m; a bare number is seconds).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Keep connections alive (the default; accepted for ab compatibility).
    #[arg(short = 'k', long, overrides_with = "no_keepalive")]
    pub keepalive: bool,

    /// A new connection per request, as ab does without -k.
    #[arg(long)]
    pub no_keepalive: bool,

    /// HTTP/1.1 pipelining: up to N requests in flight per connection,
    /// written back to back; responses are matched to requests in order,
    /// each verified, each timed from its own send (or, with --rate, its
    /// intended send). 1: no pipelining. For ws:// and wss://: messages in
    /// flight per connection.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::engine::MAX_PIPELINE)))]
    pub pipeline: u16,

    /// HTTP/2 by prior knowledge over plaintext (an http:// URL): many
    /// requests in flight per connection as streams (--streams), each
    /// response verified. GOAWAY and RST_STREAM count as failures by kind.
    #[arg(long, conflicts_with = "h2")]
    pub h2c: bool,

    /// HTTP/2 over TLS (an https:// URL), offered by ALPN; a server that
    /// does not pick h2 ends the run saying so.
    #[arg(long)]
    pub h2: bool,

    /// HTTP/3 over QUIC (an https:// URL; UDP to the URL's port), ALPN h3:
    /// many requests in flight per connection as streams (--streams), each
    /// response verified. Runs on epoll.
    #[arg(long, conflicts_with_all = ["h2", "h2c"])]
    pub h3: bool,

    /// --h2c, --h2 and --h3: streams in flight per connection (like
    /// h2load -m), fewer if the server's SETTINGS_MAX_CONCURRENT_STREAMS
    /// (HTTP/2) or stream credit (HTTP/3) is lower.
    #[arg(long, default_value_t = 100, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=i64::from(crate::engine::MAX_PIPELINE)))]
    pub streams: u16,

    /// Engine threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// The I/O backend: uring (io_uring: batched submissions, multishot
    /// receive, gathering waits; where the kernel or a seccomp filter
    /// refuses it, epoll, saying why) or epoll.
    #[arg(long, value_enum, default_value_t = Io::default(), value_name = "BACKEND")]
    pub io: Io,

    /// io_uring, closed loop: a wait may hold out this long for half the
    /// requests in flight to complete, so that one wake-up reads many
    /// responses (fewer context switches: less of the machine taken from
    /// the server). A response read late by it counts the wait in its
    /// latency. 0 turns it off; needs kernel 6.13 (`min_wait`), else off.
    #[arg(long, default_value = "400us", value_name = "DURATION", value_parser = parse_duration)]
    pub gather: Duration,

    /// Open loop: this many requests per second from this process (with
    /// several agents, each agent's share), latency from the intended send
    /// times.
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,

    /// A request without a complete response after this long fails.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Load for this long first, without counting.
    #[arg(long, default_value = "0s", value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Duration,

    /// The request method (default GET; POST when a body is given).
    #[arg(short = 'm', long)]
    pub method: Option<String>,

    /// Send this body with every request (the flag is --body: -d is the
    /// duration here, as in wrk, not oha's and h2load's body).
    #[arg(long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Send this file's bytes as the body of every request.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,

    /// The body's Content-Type (default application/octet-stream; a
    /// Content-Type given with -H wins).
    #[arg(short = 'T', long, value_name = "TYPE")]
    pub content_type: Option<String>,

    /// Send the body with Transfer-Encoding: chunked (16 KiB chunks)
    /// rather than Content-Length.
    #[arg(long)]
    pub chunked: bool,

    /// ws:// and wss://: the size of each message, in bytes (default 64,
    /// at most 65536); each is echoed and compared byte for byte.
    #[arg(long, value_name = "BYTES")]
    pub ws_size: Option<usize>,

    /// ws:// and wss://: text messages (opcode 1) rather than binary.
    #[arg(long)]
    pub ws_text: bool,

    /// ws:// and wss://: hold the connections instead of loading them:
    /// each sends a ping every INTERVAL (its pong checked and timed as a
    /// request) and the report says how many were opened and stayed up
    /// (JSON: connections.held).
    #[arg(long, value_name = "INTERVAL", value_parser = parse_duration)]
    pub hold: Option<Duration>,

    /// ws:// and wss://: room fan-out on a room URL (`/ws/room?name=R`):
    /// every member receives every member's messages, each arrival a
    /// delivery timed and checked at its receiver (see above).
    #[arg(long)]
    pub room: bool,

    /// --room: rooms of K members each (-c a multiple of K, K at most
    /// 1024) rather than one room of all -c.
    #[arg(long, value_name = "K", requires = "room")]
    pub room_size: Option<usize>,

    /// An extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,

    /// A path (and query) of a weighted mix, instead of the URL's, e.g.
    /// --path /hello:99 --path '/cpu?n=200000:1' (repeatable; see Mixes).
    #[arg(long = "path", value_name = "[METHOD ]TARGET[:WEIGHT]", value_parser = parse_path)]
    pub paths: Vec<PathArg>,

    /// How the report is printed on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Also write the latency distribution in HdrHistogram's .hgrm format.
    #[arg(long, value_name = "FILE")]
    pub hist: Option<PathBuf>,

    /// Do not compare bodies with the contract's: only the status class.
    #[arg(long)]
    pub no_verify: bool,

    /// The length of the series' intervals, each with its own histogram
    /// (whole seconds).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_interval)]
    pub interval: Duration,

    /// Also write every interval's histogram as an HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,

    /// Also write the interval series as CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub series: Option<PathBuf>,

    /// Begin at this time (Unix seconds or RFC 3339), with the other agents
    /// given the same time.
    #[arg(long, value_name = "TIME", value_parser = crate::units::parse_time)]
    pub start_at: Option<f64>,

    /// This agent's name in .hlog lines, the JSON and `harness merge`
    /// (letters, digits, `-`, `_`, `.`).
    #[arg(long, value_name = "NAME", value_parser = parse_tag)]
    pub tag: Option<String>,

    /// https: the TLS version spoken, exactly (1.3 or 1.2).
    #[arg(long, value_enum, default_value_t = TlsVersion::Tls13, value_name = "VERSION")]
    pub tls_version: TlsVersion,

    /// https: no session resumption: every handshake is a full one (to
    /// measure what full handshakes cost a server).
    #[arg(long)]
    pub tls_no_resume: bool,

    /// https: trust only the CAs in this PEM file (e.g. the lab's private
    /// CA, or your company's), instead of the public CAs built in.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,

    /// A pass/fail criterion in k6's syntax (repeatable): `p(99)<20ms`,
    /// `p(50)<5ms`, `avg<2ms`, `max<1s`, `rate<0.01` (the share of requests
    /// that failed), `rps>10000`. Each is printed PASS or FAIL after the
    /// report (and in the JSON's `thresholds`); when one fails, the exit
    /// code is 99, as k6's is. A bare latency is in ms.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = crate::thresholds::parse_arg)]
    pub thresholds: Vec<Threshold>,

    /// https: accept any server certificate, unchecked (its handshake
    /// signature is still verified). For a server whose CA you do not have.
    #[arg(long, conflicts_with = "cacert")]
    pub insecure: bool,
}

/// Parses `--interval`: a whole number of seconds, at least 1.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() || d.subsec_nanos() != 0 {
        return Err(format!(
            "{s:?}: the interval must be whole seconds (1s, 5s, 1m)"
        ));
    }
    Ok(d)
}

/// Parses `--tag`: what an `.hlog` tag can hold.
fn parse_tag(s: &str) -> Result<String, String> {
    if s.is_empty()
        || s.len() > 64
        || !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(format!(
            "{s:?}: a tag is 1 to 64 letters, digits, `-`, `_` or `.` (e.g. agent-1)"
        ));
    }
    Ok(s.to_string())
}

/// How late an agent may begin after `--start-at` without a warning.
const START_TOLERANCE_S: f64 = 0.1;

/// The hard bound of a `-n` run without `-d`.
const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(600);

/// One `--path`: a request target and its weight in the mix, and its
/// own method if it names one (`POST /echo:1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathArg {
    pub method: Option<String>,
    pub target: String,
    pub weight: u32,
}

/// Parses `[METHOD ]TARGET[:WEIGHT]`: the last `:N` is the weight when N
/// is all digits; a suffix that looks like a number but is not a positive
/// integer (`:0`, `:-1`, `:1.5`) is an error rather than part of the target.
pub fn parse_path(s: &str) -> Result<PathArg, String> {
    let (method, s) = match s.split_once(' ') {
        Some((m, rest))
            if !m.is_empty()
                && m.bytes().all(|b| b.is_ascii_alphabetic())
                && rest.starts_with('/') =>
        {
            (Some(m.to_ascii_uppercase()), rest)
        }
        _ => (None, s),
    };
    let (target, weight) = match s.rsplit_once(':') {
        Some((t, w)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => {
            match w.parse::<u32>() {
                Ok(n) if n > 0 => (t, n),
                _ => {
                    return Err(format!(
                        "weight {w} in {s:?} must be a positive integer up to {}",
                        u32::MAX
                    ))
                }
            }
        }
        Some((_, w))
            if w.bytes().any(|b| b.is_ascii_digit())
                && w.bytes().all(|b| b.is_ascii_digit() || b"+-.".contains(&b)) =>
        {
            return Err(format!(
                "weight {w} in {s:?} must be a positive integer (a target ending in \
                 such a suffix needs its own weight: {s}:1)"
            ))
        }
        _ => (s, 1),
    };
    if !target.starts_with('/') {
        return Err(format!(
            "{target:?} must start with / (e.g. /hello or '/cpu?n=1000:3')"
        ));
    }
    if target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "{target:?} contains a space or control character (percent-encode it)"
        ));
    }
    Ok(PathArg {
        method,
        target: target.to_string(),
        weight,
    })
}

/// The plan for `args`.
pub fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    if let Some(plan) = ws_plan(args)? {
        if args.h2 || args.h2c || args.h3 {
            bail!("--h2, --h2c and --h3 are for http:// and https:// URLs, not WebSocket");
        }
        return Ok(plan);
    }
    let target = Target::parse(&args.url).context("bad URL")?;
    check_h2(args, &target)?;
    let headers = args
        .headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .filter(|(n, _)| !n.is_empty())
                .with_context(|| format!("bad header {h:?}: expected `Name: value`"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let body = body(args)?;
    // -m, else POST for a body (unless the mix's paths name their own
    // methods: then the others GET), else GET.
    let method = match &args.method {
        Some(m) => m.to_ascii_uppercase(),
        None if body.is_some() && args.paths.iter().all(|p| p.method.is_none()) => {
            "POST".to_string()
        }
        None => "GET".to_string(),
    };
    let named = args.paths.iter().filter_map(|p| p.method.as_ref());
    for m in std::iter::once(&method).chain(named) {
        if m.is_empty()
            || !m
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        {
            bail!("bad method {m:?}: a token such as GET or POST");
        }
    }
    // The body goes with every request whose method carries one.
    let carries = |m: &str| !matches!(m, "GET" | "HEAD");
    let sent = if args.paths.is_empty() {
        carries(&method)
    } else {
        args.paths
            .iter()
            .any(|p| carries(p.method.as_deref().unwrap_or(&method)))
    };
    if body.is_some() && !sent {
        bail!(
            "the body goes with no request: GET and HEAD send none here; use -m POST (or PUT, \
             PATCH), or name a path's method in the mix (--path 'POST /echo:1')"
        );
    }
    let keepalive = !args.no_keepalive;
    let route = |method: &str, path: &str, weight: u32| {
        let body = body.as_ref().filter(|_| carries(method));
        Route::new(
            Request::encode_with_body(method, path, &target.authority, &headers, keepalive, body),
            Check::for_body(method, path, body, !args.no_verify),
            weight,
        )
    };
    if !args.paths.is_empty() && target.path != "/" {
        bail!(
            "{} has a path ({}) and --path gives the paths: pass the URL without one, \
             e.g. http://{} --path {}",
            target.url,
            target.path,
            target.authority,
            args.paths[0].target
        );
    }
    let base = target.url.trim_end_matches('/');
    let plan = match args.paths.as_slice() {
        [] => {
            let r = route(&method, &target.path, 1);
            Plan::new(&target.url, target.addr, r.request, r.check)
        }
        // One --path is the URL with that path.
        [one] => {
            let r = route(one.method.as_deref().unwrap_or(&method), &one.target, 1);
            Plan::new(
                &format!("{base}{}", one.target),
                target.addr,
                r.request,
                r.check,
            )
        }
        paths => {
            let routes = paths
                .iter()
                .map(|p| {
                    let mut r = route(p.method.as_deref().unwrap_or(&method), &p.target, p.weight);
                    if let Some(m) = &p.method {
                        r.label = format!("{m} {}", p.target);
                    }
                    r
                })
                .collect();
            Plan::mixed(base, target.addr, routes).context("bad --path weights")?
        }
    };
    settings(args, &target, plan)
}

/// A `ws://` or `wss://` URL: a WebSocket echo run (`None` for others).
fn ws_plan(args: &RunArgs) -> anyhow::Result<Option<Plan>> {
    let lower = args.url.to_ascii_lowercase();
    let http = if let Some(rest) = lower.strip_prefix("ws://").map(|_| &args.url[5..]) {
        format!("http://{rest}")
    } else if let Some(rest) = lower.strip_prefix("wss://").map(|_| &args.url[6..]) {
        format!("https://{rest}")
    } else {
        if args.ws_size.is_some() || args.ws_text || args.hold.is_some() || args.room {
            bail!("--ws-size, --ws-text, --hold and --room are for ws:// and wss:// URLs");
        }
        return Ok(None);
    };
    let target = Target::parse(&http).context("bad URL")?;
    if !args.paths.is_empty() || args.body.is_some() || args.body_file.is_some() {
        bail!("a WebSocket run sends messages to one URL: --path and --body do not apply (--ws-size sets the message)");
    }
    if args.no_keepalive {
        bail!("a WebSocket connection is kept for the whole run: drop --no-keepalive");
    }
    if args
        .method
        .as_deref()
        .is_some_and(|m| !m.eq_ignore_ascii_case("GET"))
    {
        bail!("a WebSocket upgrade is a GET: drop -m");
    }
    let size = args.ws_size.unwrap_or(engine::ws::DEFAULT_MESSAGE);
    if size > workloads::ws::MAX_MESSAGE {
        bail!(
            "--ws-size {size} is over the contract's {} bytes (its servers close with 1009 beyond)",
            workloads::ws::MAX_MESSAGE
        );
    }
    let room = if args.room {
        if args.hold.is_some() {
            bail!("--hold and --room are different runs: choose one");
        }
        if engine::ws_room::name(&target.path).is_none() {
            bail!(
                "--room joins the room the URL names: give it one, e.g. ws://{}/ws/room?name=lab",
                target.authority
            );
        }
        if size < engine::ws_room::HEADER {
            bail!(
                "--room messages start with a {}-byte header (sender, sequence, epoch): --ws-size {size} is too small",
                engine::ws_room::HEADER
            );
        }
        let k = args.room_size.unwrap_or(args.connections);
        if k == 0 || k > engine::ws_room::MAX_MEMBERS {
            bail!(
                "a room has 1 to {} members (its deliveries grow as K²): use --room-size",
                engine::ws_room::MAX_MEMBERS
            );
        }
        if !args.connections.is_multiple_of(k) {
            bail!(
                "-c {} is not a whole number of rooms of --room-size {k}",
                args.connections
            );
        }
        Some(engine::ws_room::RoomPlan {
            size: k,
            rooms: args.connections / k,
        })
    } else {
        None
    };
    if let Some(every) = args.hold {
        if size > 125 {
            bail!(
                "--hold pings carry at most 125 bytes (RFC 6455 §5.5): --ws-size {size} is too big"
            );
        }
        if args.rate.is_some() || args.pipeline > 1 {
            bail!("--hold paces one ping per connection per interval: drop --rate and --pipeline");
        }
        if every.is_zero() {
            bail!("--hold needs an interval above zero");
        }
    }
    let payload = engine::ws::message(size);
    let request = Request {
        method: "GET".into(),
        target: target.path.clone(),
        bytes: Arc::from(payload.clone()),
        body_bytes: None,
        chunked: false,
    };
    let check = if args.no_verify {
        Check::Success
    } else {
        Check::Exact {
            status: 101,
            body: Arc::from(payload),
        }
    };
    let plan = Plan::new(&args.url, target.addr, request, check);
    let mut plan = settings(args, &target, plan)?;
    let mode = match (room, args.hold) {
        (Some(room), _) => WsMode::Room(room),
        (None, Some(_)) => WsMode::Hold,
        (None, None) => WsMode::Echo,
    };
    plan.proto = ProtoPlan::Ws {
        depth: args.pipeline,
        ws: engine::ws::WsPlan {
            target: target.path.clone(),
            host: target.authority.clone(),
            binary: !args.ws_text,
            mode,
        },
    };
    if let Some(every) = args.hold {
        plan.pace = Pace::Rate(plan.connections as f64 / every.as_secs_f64());
    }
    Ok(Some(plan))
}

/// The settings every run takes from its arguments.
fn settings(args: &RunArgs, target: &Target, mut plan: Plan) -> anyhow::Result<Plan> {
    let keepalive = !args.no_keepalive;
    plan.connections = args.connections;
    if let Some(t) = args.threads {
        if t == 0 {
            bail!("--threads must be at least 1");
        }
        plan.threads = t;
    }
    if args.pipeline > 1 && !keepalive {
        bail!("--pipeline needs kept-alive connections: drop --no-keepalive");
    }
    // `check_h2` refused h2c over TLS and h2 without it; the transport
    // (the URL's scheme) says which of the two HTTP/2 is.
    plan.proto = if args.h2c || args.h2 {
        ProtoPlan::H2 {
            streams: args.streams,
        }
    } else if args.h3 {
        ProtoPlan::H3 {
            streams: args.streams,
        }
    } else {
        ProtoPlan::http1(args.pipeline, keepalive)
    };
    plan.transport = TransportPlan::from_tls(tls_plan(args, target)?);
    plan.authority.clone_from(&target.authority);
    plan.io = args.io;
    plan.gather = args.gather;
    plan.timeout = args.timeout;
    plan.warmup = args.warmup;
    (plan.stop, plan.max_duration) = match (args.requests, args.duration) {
        (Some(n), d) => (Stop::Count(n), d.unwrap_or(DEFAULT_MAX_DURATION)),
        (None, Some(d)) => (Stop::Duration(d), d),
        (None, None) => {
            let d = Duration::from_secs(10);
            (Stop::Duration(d), d)
        }
    };
    if let Some(rate) = args.rate {
        plan.pace = Pace::Rate(rate);
    }
    plan.interval = args.interval;
    plan.tag.clone_from(&args.tag);
    plan.start_at_unix_s = args.start_at;
    Ok(plan)
}

/// `--h2c` and `--h2`: the combinations that cannot work, each refused in
/// one line.
fn check_h2(args: &RunArgs, target: &Target) -> anyhow::Result<()> {
    if !(args.h2c || args.h2 || args.h3) {
        if args.streams != 100 {
            bail!(
                "--streams is for HTTP/2 and HTTP/3: add --h2c (http://), --h2 or --h3 (https://)"
            );
        }
        return Ok(());
    }
    let flag = if args.h2c {
        "--h2c"
    } else if args.h2 {
        "--h2"
    } else {
        "--h3"
    };
    if args.h3 && !target.tls {
        bail!("--h3 is HTTP/3 over QUIC, always encrypted: use an https:// URL");
    }
    if args.h3 && args.tls_version != TlsVersion::Tls13 {
        bail!("--h3: QUIC carries TLS 1.3 only: drop --tls-version");
    }
    if args.h2c && target.tls {
        bail!("--h2c is HTTP/2 over plaintext: use an http:// URL, or --h2 for https://");
    }
    if args.h2 && !target.tls {
        bail!("--h2 is HTTP/2 over TLS: use an https:// URL, or --h2c for http://");
    }
    if args.pipeline > 1 {
        bail!("{flag} multiplexes streams: use --streams N, not --pipeline");
    }
    if args.no_keepalive {
        bail!("{flag} keeps each connection for many streams: drop --no-keepalive");
    }
    if args.chunked {
        bail!("{flag}: HTTP/2 and HTTP/3 have no chunked encoding (bodies go in DATA frames): drop --chunked");
    }
    if !args.headers.is_empty() {
        bail!("{flag} does not send -H headers yet: drop -H");
    }
    Ok(())
}

/// How the run speaks TLS: `None` for an http:// URL (where the TLS
/// options are refused rather than ignored).
fn tls_plan(args: &RunArgs, target: &Target) -> anyhow::Result<Option<TlsPlan>> {
    if !target.tls {
        if args.cacert.is_some() || args.insecure || args.tls_no_resume {
            bail!(
                "--cacert, --insecure and --tls-no-resume are for https:// URLs; {} is plain HTTP",
                target.url
            );
        }
        return Ok(None);
    }
    let mut tls = TlsPlan::new(&target.host);
    tls.version = args.tls_version;
    tls.resume = !args.tls_no_resume;
    tls.trust = match (&args.cacert, args.insecure) {
        (Some(path), _) => TlsPlan::cas_from_file(path).map_err(anyhow::Error::msg)?,
        (None, true) => Trust::Any,
        (None, false) => Trust::Public,
    };
    // A bad name or CA file is a one-line error now, not a failure per connection.
    tls.name().map_err(anyhow::Error::msg)?;
    tls.client_config().map_err(anyhow::Error::msg)?;
    Ok(Some(tls))
}

/// The body of `--body` or `--body-file`, framed as `--chunked` says.
fn body(args: &RunArgs) -> anyhow::Result<Option<Body>> {
    let bytes = match (&args.body, &args.body_file) {
        (Some(s), _) => s.clone().into_bytes(),
        (None, Some(path)) => std::fs::read(path)
            .with_context(|| format!("cannot read --body-file {}", path.display()))?,
        (None, None) => {
            if args.chunked || args.content_type.is_some() {
                bail!("--chunked and -T/--content-type describe a body: give one with --body or --body-file");
            }
            return Ok(None);
        }
    };
    Ok(Some(Body {
        bytes,
        content_type: args
            .content_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".to_string()),
        chunked: args.chunked,
    }))
}

/// The `run` command.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let plan = plan(&args)?;
    raise_fd_limit(plan.connections as u64 + 64)?;

    let control = Control::default();
    // Ctrl-C once: stop sending, drain, report. Twice: exit at once.
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&control.interrupt))
            .context("cannot install the Ctrl-C handler")?;
        signal_hook::flag::register(sig, Arc::clone(&control.interrupt))
            .context("cannot install the Ctrl-C handler")?;
    }

    if let Some(at) = plan.start_at_unix_s {
        let late_s = wait_until(at, &control.interrupt);
        if late_s > START_TOLERANCE_S {
            eprintln!(
                "harness: warning: starting {late_s:.3} s after --start-at {at:.3} ({}): this agent's \
                 window ends that much later than the others'; it runs its full duration",
                crate::units::utc(at as u64)
            );
        }
    }

    let live = std::io::stderr().is_terminal();
    let mut last = (Duration::ZERO, 0u64);
    let mut progress = |s: &Snapshot| {
        if !live {
            return;
        }
        let dt = (s.elapsed.saturating_sub(last.0)).as_secs_f64();
        let rate = if dt > 0.0 {
            (s.requests.saturating_sub(last.1)) as f64 / dt
        } else {
            0.0
        };
        last = (s.elapsed, s.requests);
        let phase = if s.warming_up {
            "warming up"
        } else {
            "running"
        };
        eprint!(
            "\r\x1b[2K{phase} {:>6.1}s  {:>12} requests  {:>10.0}/s  {} errors",
            s.elapsed.as_secs_f64(),
            report::thousands(s.requests),
            rate,
            report::thousands(s.errors)
        );
        let _ = std::io::stderr().flush();
    };
    let result = engine::run(&plan, &control, &mut progress).context("the run failed to start")?;
    if live {
        eprint!("\r\x1b[2K");
    }
    if let Some(note) = &result.io_note {
        eprintln!("harness: {note}");
    }

    let summary = thresholds::Summary {
        latency_us: &result.stats.latency_us,
        requests: result.stats.requests(),
        failures: result.stats.failures.total(),
        seconds: result.duration.as_secs_f64(),
    };
    let (verdicts, thresholds_pass) = thresholds::judge(&args.thresholds, &summary);
    let mut text = match args.format {
        Format::Json => report::json::render_with(&result, verdicts.clone()),
        format => report::render(format, &result),
    };
    let lines: Vec<String> = verdicts
        .iter()
        .zip(&args.thresholds)
        .map(|(v, t)| v.line(t))
        .collect();
    match args.format {
        Format::Json => {}
        // A CSV stays one header and one row: its verdicts go to stderr.
        Format::Csv => lines
            .iter()
            .for_each(|l| eprintln!("harness: threshold {l}")),
        _ if !lines.is_empty() => {
            text.push_str("\nThresholds:\n");
            for l in &lines {
                text.push_str(&format!("  {l}\n"));
            }
        }
        _ => {}
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the report")?;
    if let Some(path) = &args.hist {
        std::fs::write(path, report::hgrm::render(&result.stats.latency_us))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    write_series_files(&result, args.hlog.as_deref(), args.series.as_deref())?;
    if let Some(m) = &result.message {
        eprintln!("harness: {m}");
    }
    let s = &result.stats;
    let refused_every_time =
        s.failures.handshake > 0 && s.handshakes_full + s.handshakes_resumed == 0;
    if refused_every_time {
        if result.message.is_none() {
            // A run too short to stop early: the same one line.
            if let Some(why) = &s.tls_error {
                eprintln!(
                    "harness: {why} ({} requests failed with their handshakes, none established)",
                    s.failures.handshake
                );
            }
        }
        return Ok(ExitCode::FAILURE);
    }
    for (route, counted) in plan.routes().iter().zip(&result.stats.paths) {
        if counted.ok == 0 && counted.requests() > 0 && matches!(route.check, Check::Exact { .. }) {
            eprintln!(
                "harness: no response matched the contract's answer for {} {}; \
                 for a server outside the contract use --no-verify",
                route.request.method, route.request.target
            );
        }
    }
    Ok(match result.end {
        End::ServerGone | End::TlsRefused => ExitCode::FAILURE,
        _ if !thresholds_pass => ExitCode::from(thresholds::EXIT_FAILED),
        _ => ExitCode::SUCCESS,
    })
}

/// Writes the `.hlog` and the series CSV, where asked for.
pub fn write_series_files(
    result: &engine::RunResult,
    hlog: Option<&std::path::Path>,
    series: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    if let Some(path) = hlog {
        let log = report::hlog::render(result).map_err(anyhow::Error::msg)?;
        std::fs::write(path, log).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = series {
        let csv = report::series::render(result).map_err(anyhow::Error::msg)?;
        std::fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Sleeps until `at` (Unix seconds) or an interrupt; returns how late it is
/// then (negative: early, when interrupted).
fn wait_until(at: f64, interrupt: &std::sync::atomic::AtomicBool) -> f64 {
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    loop {
        let left = at - now();
        if left <= 0.0 || interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            return -left;
        }
        // Short naps: Ctrl-C is honoured within 100 ms.
        std::thread::sleep(Duration::from_secs_f64(left.min(0.1)));
    }
}

/// Raises the soft limit on open files to `need` (up to the hard limit).
fn raise_fd_limit(need: u64) -> anyhow::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Ok(());
        }
        if lim.rlim_cur >= need {
            return Ok(());
        }
        let want = need.min(lim.rlim_max);
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        if want < need {
            bail!(
                "{need} open files are needed but the hard limit is {} (raise it: ulimit -Hn)",
                lim.rlim_max
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_with_their_weights() {
        let p = |s: &str| parse_path(s).map(|p| (p.target, p.weight));
        assert_eq!(p("/hello"), Ok(("/hello".into(), 1)));
        assert_eq!(p("/hello:99"), Ok(("/hello".into(), 99)));
        assert_eq!(p("/cpu?n=200000:1"), Ok(("/cpu?n=200000".into(), 1)));
        // The last `:N` is the weight; earlier colons belong to the target.
        assert_eq!(p("/x?a=1:2"), Ok(("/x?a=1".into(), 2)));
        assert_eq!(p("/t?at=12:30:1"), Ok(("/t?at=12:30".into(), 1)));
        assert_eq!(p("/a:b"), Ok(("/a:b".into(), 1)));
        assert_eq!(p("/a:"), Ok(("/a:".into(), 1)));
        // A method may lead the target.
        let with = parse_path("post /echo:3").unwrap();
        assert_eq!(
            (with.method.as_deref(), with.target.as_str(), with.weight),
            (Some("POST"), "/echo", 3)
        );
        assert_eq!(parse_path("/echo").unwrap().method, None);
        assert!(
            parse_path("POST echo").is_err(),
            "the target still starts with /"
        );
        for bad in ["/hello:0", "/hello:-1", "/hello:1.5", "/hello:99999999999"] {
            let e = parse_path(bad).unwrap_err();
            assert!(e.contains("positive integer"), "{bad}: {e}");
        }
        assert!(parse_path("hello:3").unwrap_err().contains("start with /"));
        assert!(parse_path(":3").unwrap_err().contains("start with /"));
        assert!(parse_path("/a b").unwrap_err().contains("space"));
    }

    #[test]
    fn contract_paths_are_checked_exactly() {
        match Check::for_request("GET", "/hello", true) {
            Check::Exact { status, body } => {
                assert_eq!((status, &*body), (200, &b"Hello World"[..]))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Check::for_request("GET", "/config", true),
            Check::Status(200)
        );
        assert_eq!(
            Check::for_request("GET", "/index.html", true),
            Check::Success
        );
        assert_eq!(Check::for_request("POST", "/hello", true), Check::Success);
        assert_eq!(Check::for_request("GET", "/hello", false), Check::Success);
        match Check::for_request("HEAD", "/work", true) {
            Check::Exact { body, .. } => assert!(body.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
