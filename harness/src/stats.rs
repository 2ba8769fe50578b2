//! What a run counts. Each engine thread owns one [`Stats`] (plain fields,
//! no locks, no atomics) and the engine merges them once at the end with
//! `+=`, as wrk sums its per-thread counters after `pthread_join`.
//!
//! The time series (per interval, with full histograms) is in `intervals`.

use std::ops::AddAssign;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Lowest latency the histograms tell apart: 1 µs.
pub const HIST_LOW_US: u64 = 1;
/// Highest latency the histograms hold (larger values saturate): 60 s.
pub const HIST_HIGH_US: u64 = 60_000_000;
/// Significant digits of the run's histograms.
pub const HIST_SIGFIG: u8 = 3;

/// A latency histogram in µs: 1 µs .. 60 s, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_US, HIST_HIGH_US, HIST_SIGFIG).expect("valid bounds")
}

/// Why a request did not count as a success. Every variant is a counter;
/// none of them stops the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Failure {
    /// `connect()` failed (refused, unreachable, no ports left).
    #[error("connect failed")]
    Connect,
    /// Sending the request failed (reset, broken pipe).
    #[error("sending the request failed")]
    Write,
    /// Reading failed, or the connection closed before a complete response head.
    #[error("the connection was reset or closed before a complete response")]
    Receive,
    /// The body is shorter or longer than announced, or than the contract's.
    #[error("the body length differs from the announced or expected length")]
    Length,
    /// The response could not be parsed as HTTP/1.
    #[error("the response is not valid HTTP/1")]
    Exception,
    /// The status is not the expected one (non-2xx for arbitrary URLs).
    #[error("unexpected status")]
    Status,
    /// The body differs from the contract's exact body.
    #[error("the body differs from the contract's")]
    Body,
    /// No complete response within `--timeout`.
    #[error("timed out")]
    Timeout,
    /// The TLS handshake failed (a refused certificate, no common version
    /// or cipher suite, the server closing during it).
    #[error("the TLS handshake failed")]
    Handshake,
    /// HTTP/2: the server reset the request's stream (RST_STREAM).
    #[error("the server reset the HTTP/2 stream")]
    Reset,
    /// HTTP/2: the server's GOAWAY left the request unprocessed.
    #[error("the server's HTTP/2 GOAWAY left the request unprocessed")]
    GoAway,
    /// WebSocket room: a delivery out of its sender's order (skipped, a
    /// duplicate, or from no member).
    #[error("a room delivery came out of its sender's order, twice, or from no member")]
    Order,
    /// WebSocket room: a member received the room's messages in another
    /// order than another member.
    #[error("a room member received the room's messages in another order than another member")]
    Interleave,
}

/// Counters of [`Failure`]s, one field per variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureCounts {
    pub connect: u64,
    pub write: u64,
    pub receive: u64,
    pub length: u64,
    pub exception: u64,
    pub status: u64,
    pub body: u64,
    pub timeout: u64,
    /// Absent from documents written before TLS: none then.
    #[serde(default)]
    pub handshake: u64,
    /// HTTP/2 streams the server reset; absent before HTTP/2.
    #[serde(default)]
    pub reset: u64,
    /// HTTP/2 requests a GOAWAY left unprocessed; absent before HTTP/2.
    #[serde(default)]
    pub goaway: u64,
    /// Room deliveries out of their sender's order; absent before rooms.
    #[serde(default)]
    pub order: u64,
    /// Room deliveries out of the room's one order; absent before rooms.
    #[serde(default)]
    pub interleave: u64,
}

impl FailureCounts {
    #[inline]
    pub fn count(&mut self, failure: Failure) {
        *match failure {
            Failure::Connect => &mut self.connect,
            Failure::Write => &mut self.write,
            Failure::Receive => &mut self.receive,
            Failure::Length => &mut self.length,
            Failure::Exception => &mut self.exception,
            Failure::Status => &mut self.status,
            Failure::Body => &mut self.body,
            Failure::Timeout => &mut self.timeout,
            Failure::Handshake => &mut self.handshake,
            Failure::Reset => &mut self.reset,
            Failure::GoAway => &mut self.goaway,
            Failure::Order => &mut self.order,
            Failure::Interleave => &mut self.interleave,
        } += 1;
    }

    pub fn total(&self) -> u64 {
        self.connect
            + self.write
            + self.receive
            + self.length
            + self.exception
            + self.status
            + self.body
            + self.timeout
            + self.handshake
            + self.reset
            + self.goaway
            + self.order
            + self.interleave
    }

    /// `(name, count)` for every counter, in a fixed order.
    pub fn named(&self) -> [(&'static str, u64); 13] {
        [
            ("connect", self.connect),
            ("write", self.write),
            ("receive", self.receive),
            ("length", self.length),
            ("exception", self.exception),
            ("status", self.status),
            ("body", self.body),
            ("timeout", self.timeout),
            ("handshake", self.handshake),
            ("reset", self.reset),
            ("goaway", self.goaway),
            ("order", self.order),
            ("interleave", self.interleave),
        ]
    }
}

impl AddAssign<&FailureCounts> for FailureCounts {
    fn add_assign(&mut self, o: &FailureCounts) {
        self.connect += o.connect;
        self.write += o.write;
        self.receive += o.receive;
        self.length += o.length;
        self.exception += o.exception;
        self.status += o.status;
        self.body += o.body;
        self.timeout += o.timeout;
        self.handshake += o.handshake;
        self.reset += o.reset;
        self.goaway += o.goaway;
        self.order += o.order;
        self.interleave += o.interleave;
    }
}

/// Responses by status code (100..=599 counted exactly; others in slot 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCounts(Box<[u64; 600]>);

impl Default for StatusCounts {
    fn default() -> Self {
        StatusCounts(Box::new([0; 600]))
    }
}

impl StatusCounts {
    #[inline]
    pub fn count(&mut self, status: u16) {
        let i = if (100..600).contains(&status) {
            status as usize
        } else {
            0
        };
        self.0[i] += 1;
    }

    /// Counts `n` responses of `status` at once (a merge of runs).
    pub fn count_n(&mut self, status: u16, n: u64) {
        let i = if (100..600).contains(&status) {
            status as usize
        } else {
            0
        };
        self.0[i] += n;
    }

    /// `(status, count)` of every status seen; status 0 stands for codes
    /// outside 100..=599.
    pub fn seen(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(s, &n)| (s as u16, n))
    }

    /// Responses whose status is not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.seen()
            .filter(|(s, _)| !(200..300).contains(s))
            .map(|(_, n)| n)
            .sum()
    }
}

impl AddAssign<&StatusCounts> for StatusCounts {
    fn add_assign(&mut self, o: &StatusCounts) {
        for (a, b) in self.0.iter_mut().zip(o.0.iter()) {
            *a += b;
        }
    }
}

/// What a TLS connection negotiated (`engine::tls`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// `TLSv1_3`, `TLSv1_2`.
    pub version: String,
    /// e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher_suite: String,
    /// e.g. `X25519`.
    pub key_exchange: String,
    /// The ALPN protocol the server chose, if it chose one.
    pub alpn: Option<String>,
}

/// Everything one thread (or, merged, the whole run) counted.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Requests answered as expected.
    pub ok: u64,
    /// Requests that failed, by cause. `ok + failures.total()` is the number
    /// of requests the run finished.
    pub failures: FailureCounts,
    /// Complete responses, whatever their status or body.
    pub responses: u64,
    /// Responses by status.
    pub status: StatusCounts,
    /// Requests in flight when the run stopped (deadline, Ctrl-C): neither
    /// success nor failure, as oha's "aborted due to deadline".
    pub aborted: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Body bytes of complete responses (ab's "HTML transferred").
    pub body_bytes: u64,
    /// Connections established.
    pub connections: u64,
    /// Responses after which the connection stayed open for the next request.
    pub keepalive_responses: u64,
    /// WebSocket: upgrades completed, and connections still upgraded and
    /// open when the run ended (`--hold` reports them as held).
    pub ws_upgraded: u64,
    pub ws_up_at_end: u64,
    /// WebSocket rooms: messages sent, and those all members received
    /// (each arrival is a delivery, counted as a response).
    pub room_messages: u64,
    pub room_messages_complete: u64,
    /// Latency of successful requests: from the intended send time (`--rate`)
    /// or the request's start (its connect, with `--no-keepalive`) to the
    /// complete response.
    pub latency_us: Histogram<u64>,
    /// From the request's write to the complete response (ab's "Processing";
    /// wrk2's uncorrected latency).
    pub service_us: Histogram<u64>,
    /// From the request's write to the response's first byte (ab's "Waiting").
    pub waiting_us: Histogram<u64>,
    /// `connect()` to established, per connection opened.
    pub connect_us: Histogram<u64>,
    /// `--rate`: how late each request left after its intended send time
    /// (the generator's own delay: its loop, its timer, a busy connection),
    /// so it can be told from the server's share of `latency_us`.
    pub schedule_lateness_us: Histogram<u64>,
    /// The `Server` header of the first successful response.
    pub server_software: Option<String>,
    /// TLS: handshakes completed, full and resumed (one per connection
    /// with keep-alive, one per request without).
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// TLS: from the connect's completion (the ClientHello's send) to the
    /// handshake's end, per handshake.
    pub handshake_us: Histogram<u64>,
    /// TLS: what the first handshake negotiated.
    pub tls: Option<Negotiated>,
    /// TLS: why the first failed handshake failed, in words.
    pub tls_error: Option<String>,
    /// The body length of the first successful response (ab's "Document Length").
    pub document_length: Option<u64>,
    /// HTTP/2: the fewest streams in flight a connection was allowed (the
    /// run's `--streams`, lowered by the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS), over every SETTINGS received;
    /// `None` when no connection received one (no HTTP/2 was spoken).
    pub h2_streams: Option<u32>,
    /// HTTP/3: what the QUIC connections counted (packets sent, lost).
    pub quic: Option<QuicCounts>,
    /// Per path of the plan, in its order (one for a single-path run): the
    /// same requests as the totals above, split by path.
    pub paths: Vec<PathStats>,
}

/// What one path of a run counted.
#[derive(Clone, Debug)]
pub struct PathStats {
    pub ok: u64,
    pub failures: FailureCounts,
    /// As the run's `latency_us`, for this path's successes.
    pub latency_us: Histogram<u64>,
}

impl Default for PathStats {
    fn default() -> Self {
        PathStats {
            ok: 0,
            failures: FailureCounts::default(),
            latency_us: latency_histogram(),
        }
    }
}

impl PathStats {
    /// Requests finished: successes and failures.
    pub fn requests(&self) -> u64 {
        self.ok + self.failures.total()
    }
}

impl AddAssign<&PathStats> for PathStats {
    fn add_assign(&mut self, o: &PathStats) {
        self.ok += o.ok;
        self.failures += &o.failures;
        self.latency_us.add(&o.latency_us).expect("same bounds");
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            ok: 0,
            failures: FailureCounts::default(),
            responses: 0,
            status: StatusCounts::default(),
            aborted: 0,
            bytes_sent: 0,
            bytes_received: 0,
            body_bytes: 0,
            connections: 0,
            keepalive_responses: 0,
            ws_upgraded: 0,
            ws_up_at_end: 0,
            room_messages: 0,
            room_messages_complete: 0,
            latency_us: latency_histogram(),
            service_us: latency_histogram(),
            waiting_us: latency_histogram(),
            connect_us: latency_histogram(),
            schedule_lateness_us: latency_histogram(),
            server_software: None,
            handshakes_full: 0,
            handshakes_resumed: 0,
            handshake_us: latency_histogram(),
            tls: None,
            tls_error: None,
            document_length: None,
            h2_streams: None,
            quic: None,
            paths: Vec::new(),
        }
    }
}

impl Stats {
    /// Requests finished: successes and failures.
    pub fn requests(&self) -> u64 {
        self.ok + self.failures.total()
    }
}

impl AddAssign<&Stats> for Stats {
    fn add_assign(&mut self, o: &Stats) {
        self.ok += o.ok;
        self.failures += &o.failures;
        self.responses += o.responses;
        self.status += &o.status;
        self.aborted += o.aborted;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.body_bytes += o.body_bytes;
        self.connections += o.connections;
        self.keepalive_responses += o.keepalive_responses;
        // Same bounds on both sides: adding cannot fail.
        self.latency_us.add(&o.latency_us).expect("same bounds");
        self.service_us.add(&o.service_us).expect("same bounds");
        self.waiting_us.add(&o.waiting_us).expect("same bounds");
        self.connect_us.add(&o.connect_us).expect("same bounds");
        self.schedule_lateness_us
            .add(&o.schedule_lateness_us)
            .expect("same bounds");
        if self.server_software.is_none() {
            self.server_software.clone_from(&o.server_software);
        }
        self.handshakes_full += o.handshakes_full;
        self.ws_upgraded += o.ws_upgraded;
        self.ws_up_at_end += o.ws_up_at_end;
        self.room_messages += o.room_messages;
        self.room_messages_complete += o.room_messages_complete;
        self.handshakes_resumed += o.handshakes_resumed;
        self.handshake_us.add(&o.handshake_us).expect("same bounds");
        if self.tls.is_none() {
            self.tls.clone_from(&o.tls);
        }
        if self.tls_error.is_none() {
            self.tls_error.clone_from(&o.tls_error);
        }
        if self.document_length.is_none() {
            self.document_length = o.document_length;
        }
        if let Some(q) = &o.quic {
            *self.quic.get_or_insert_with(Default::default) += q;
        }
        self.h2_streams = match (self.h2_streams, o.h2_streams) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if self.paths.len() < o.paths.len() {
            self.paths.resize_with(o.paths.len(), PathStats::default);
        }
        for (a, b) in self.paths.iter_mut().zip(&o.paths) {
            *a += b;
        }
    }
}

/// The summary of a latency histogram, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let q = |q: f64| h.value_at_quantile(q);
        Percentiles {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            stdev: h.stdev(),
            p50: q(0.50),
            p75: q(0.75),
            p90: q(0.90),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            max: h.max(),
        }
    }
}

/// One interval of the run (`--interval`, 1 s by default), for charts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondPoint {
    /// Seconds since measuring started at which this interval begins.
    pub second: u32,
    /// Requests finished in this interval (successes and failures).
    pub requests: u64,
    pub errors: u64,
    /// Latency of this interval's successes (0 when there were none).
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// Mean and sample standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// What a QUIC connection counted, summed over a thread's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuicCounts {
    /// Packets sent, and those declared lost (each lost packet's frames
    /// are retransmitted as QUIC retransmits: in new packets).
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    /// Datagrams the generator itself dropped: its socket's send buffer
    /// was full (QUIC resent what they carried).
    #[serde(default)]
    pub send_dropped: u64,
}

impl std::ops::AddAssign<&QuicCounts> for QuicCounts {
    fn add_assign(&mut self, o: &QuicCounts) {
        self.sent_packets += o.sent_packets;
        self.lost_packets += o.lost_packets;
        self.lost_bytes += o.lost_bytes;
        self.congestion_events += o.congestion_events;
        self.send_dropped += o.send_dropped;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_merge_adds_counters_and_histograms() {
        let mut a = Stats {
            ok: 3,
            ..Stats::default()
        };
        a.failures.count(Failure::Timeout);
        a.status.count(200);
        a.latency_us.record(100).unwrap();
        let mut b = Stats {
            ok: 2,
            ..Stats::default()
        };
        b.failures.count(Failure::Body);
        b.status.count(200);
        b.status.count(503);
        b.latency_us.record(300).unwrap();
        b.server_software = Some("x".into());
        a += &b;
        assert_eq!(a.ok, 5);
        assert_eq!(a.failures.total(), 2);
        assert_eq!(a.requests(), 7);
        assert_eq!(
            a.status.seen().collect::<Vec<_>>(),
            vec![(200, 2), (503, 1)]
        );
        assert_eq!(a.status.non_2xx(), 1);
        assert_eq!(a.latency_us.len(), 2);
        assert_eq!(a.server_software.as_deref(), Some("x"));
    }

    #[test]
    fn path_stats_merge_path_by_path() {
        let mut a = Stats::default();
        let mut b = Stats {
            paths: vec![PathStats::default(), PathStats::default()],
            ..Stats::default()
        };
        b.paths[0].ok = 2;
        b.paths[1].failures.count(Failure::Status);
        b.paths[1].latency_us.record(7).unwrap();
        a += &b;
        a += &b;
        assert_eq!(a.paths.len(), 2);
        assert_eq!(a.paths[0].requests(), 4);
        assert_eq!((a.paths[1].ok, a.paths[1].failures.status), (0, 2));
        assert_eq!(a.paths[1].latency_us.len(), 2);
    }

    #[test]
    fn odd_statuses_share_slot_zero() {
        let mut s = StatusCounts::default();
        s.count(42);
        s.count(999);
        assert_eq!(s.seen().collect::<Vec<_>>(), vec![(0, 2)]);
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = latency_histogram();
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!((p.count, p.min, p.max), (1000, 1, 1000));
        assert_eq!(p.p50, 500);
        assert_eq!(p.p99, 990);
        assert!((p.mean - 500.5).abs() < 0.01);
        assert_eq!(Percentiles::of(&latency_histogram()).count, 0);
    }

    #[test]
    fn mean_and_sd() {
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        assert_eq!(mean_sd(&[5.0]), (5.0, 0.0));
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-9);
        assert!((sd - 2.138).abs() < 1e-3);
    }
}
