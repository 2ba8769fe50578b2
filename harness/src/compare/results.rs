//! The results of one comparison: a versioned document
//! (`harness/schema/results.schema.json`, checked by a test) holding the
//! settings, the machine, the database, every server's `/config`, the
//! fairness warnings and every run's full numbers. `harness report`
//! re-renders the reports from it alone. Units are in the field names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use super::rate_results::{AtRate, CurvePoint};
use crate::stats::{FailureCounts, SecondPoint};

pub use crate::lab::record::{
    machine, ConformanceCheck, ConformanceDeviation, ContractCheck, Database, GroupTally, Header,
    Machine, RowFailure, ServerDoc, ServerStatus, TlsDoc,
};

/// The schema identifier; bumped on any incompatible change.
pub const SCHEMA: &str = "harness.compare/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Results {
    #[serde(flatten)]
    pub header: Header,
    pub settings: Settings,
    pub machine: Machine,
    pub database: Database,
    pub servers: Vec<ServerDoc>,
    pub fairness: Fairness,
    pub rows: Vec<Row>,
    /// `--rate`, `--slo`, `--threshold`: fixed-rate cells, capacity under
    /// the SLO, verdicts (absent without those flags).
    #[serde(default, skip_serializing_if = "AtRate::is_empty")]
    pub at_rate: AtRate,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub workloads: Vec<WorkloadDoc>,
    pub connections: Vec<u64>,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub runs: u32,
    pub keepalive: bool,
    /// `--protocol` other than h1 alone: every framing the rows ran with,
    /// comma-separated (`h1, h2c 16`; `h1-pipelined 16`, `h2c 100`, `h2 100`:
    /// requests or streams in flight per connection asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `ws-echo`, `ws-room`: messages in flight per connection (`--pipeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_in_flight: Option<u64>,
    /// Engine threads (the built-in engine and wrk).
    pub threads: u64,
    pub timeout_s: f64,
    /// `harness`, `ab` or `wrk`.
    pub load_tool: String,
    pub baseline: Option<String>,
    /// Where the servers ran (`--env`: `bare`, `pinned`, `bridge`, …);
    /// absent in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// `interleaved` (run k of every cell before run k+1 of any, each
    /// server restarted, re-verified and warmed up for each turn) or
    /// `sequential` (a cell's runs back to back); absent in results
    /// written before runs were interleaved (they were sequential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// `--seed`: each round's cells shuffled with it (absent: in order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The load engine's I/O backend (`uring`, `epoll`) when it drove the
    /// load; absent for ab and wrk, and in results written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// Why it is not the one asked for (io_uring refused here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_note: Option<String>,
    /// How long its io_uring waits gathered (`--gather`), if they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gather_us: Option<f64>,
    /// `--tls`: every server terminated TLS itself, and the load spoke it
    /// (absent over plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,
}

/// How a comparison over TLS was run: the same for every server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// The one protocol version the clients speak: `1.2` or `1.3`.
    pub version: String,
    /// Clients resume sessions (tickets, session IDs) as browsers do.
    pub resume: bool,
    /// The certificate every server terminates with, in words.
    pub certificate: String,
}

impl Settings {
    /// The engine's I/O, in words for the reports (`None` when it did not
    /// drive the load).
    pub fn io_phrase(&self) -> Option<String> {
        let io = self.io.as_deref()?;
        let mut s = match (io, self.gather_us) {
            ("uring", Some(g)) => format!("the engine on io_uring, gathering {g:.0} µs"),
            ("uring", None) => "the engine on io_uring, not gathering".to_string(),
            (other, _) => format!("the engine on {other}"),
        };
        if let Some(note) = &self.io_note {
            s.push_str(&format!(" ({note})"));
        }
        Some(s)
    }

    /// How the runs were ordered, in words for the reports.
    pub fn order_phrase(&self) -> String {
        match (self.order.as_deref(), self.seed) {
            (Some("interleaved"), Some(seed)) => {
                format!("interleaved (run k of every cell before run k+1 of any, shuffled by seed {seed})")
            }
            (Some("interleaved"), None) => {
                "interleaved (run k of every cell before run k+1 of any)".into()
            }
            _ => "each cell's runs back to back".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDoc {
    pub name: String,
    pub path: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    Ok,
    /// Not measured, or not to the end: `error` says why.
    Failed,
    /// Ctrl-C stopped it: its runs so far are kept.
    Interrupted,
    /// The server does not serve this workload (its `/config` says so,
    /// e.g. `websocket_unsupported`): `error` says why. Not a failure.
    #[serde(rename = "not_served")]
    NotServed,
}

/// `harness verify` over a server: how many rows, which failed and why.
/// A failing row is reported; only a workload whose own answer fails is
/// kept from being loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fairness {
    pub warnings: Vec<String>,
    /// The sum of the servers' DB pools (they run one at a time).
    pub db_pool_total: Option<u64>,
    pub db_max_connections: Option<u64>,
}

/// One server × workload × concurrency level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub server: String,
    pub model: String,
    pub workload: String,
    pub path: String,
    pub connections: u64,
    /// The framing asked for when it is not plain HTTP/1.1 (`--protocol`):
    /// `h1-pipelined 16`, `h2c 100`, `h2 100`. What each run really spoke is
    /// its `framing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Over HTTP/2, where it was terminated when not by the server's own
    /// code (php-fpm: its nginx, in front of the FastCGI pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_front: Option<String>,
    /// What drove the load: `harness`, `ab` or `wrk`.
    pub tool: String,
    /// Whether every response's status and body were checked (the built-in
    /// engine); ab checks status and length only, wrk the status only.
    pub bodies_verified: bool,
    /// `ok`, `failed` (did not start, did not verify, or a run broke) or `interrupted`.
    pub status: RowStatus,
    pub error: Option<String>,
    pub runs: Vec<RunDoc>,
    pub summary: Option<Summary>,
    /// The latency distribution of all runs together.
    pub latency_curve: Vec<CurvePoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunDoc {
    pub duration_s: f64,
    /// Finished requests: ok + failed.
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub failures: FailureCounts,
    /// Responses by status code.
    pub status_codes: BTreeMap<String, u64>,
    /// Successful (verified) responses per second.
    pub ok_per_s: f64,
    /// Finished requests per second.
    pub requests_per_s: f64,
    pub latency_us: LatencyDoc,
    pub server_cpu_pct: Option<f64>,
    pub server_rss_peak_bytes: Option<u64>,
    pub generator_cpu_pct: Option<f64>,
    pub db_cpu_pct: Option<f64>,
    /// Busy CPU of processes outside the run (not the server, the load
    /// generator or the database), % of the whole machine; absent for
    /// servers started elsewhere and in results written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_cpu_pct: Option<f64>,
    /// The CPU of the processes on the load's path outside the server's
    /// tree (docker-proxy in `--env docker`), % of one core: the run's, so
    /// not in `outside_cpu_pct`, and not the server's, so not in
    /// `server_cpu_pct`. Absent where the path has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_cpu_pct: Option<f64>,
    /// `duration`, `interrupted`, `server_gone`, …
    pub end: String,
    pub message: Option<String>,
    pub series: Vec<SecondPoint>,
    /// When the run began, in seconds since the comparison began (runs of
    /// different cells interleave); absent in results written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_s: Option<f64>,
    /// `--profile`: where the run's CPU went (flame graphs, breakdown),
    /// or why there is no profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::lab::profile::Profile>,
    /// Over TLS: the run's handshakes (the built-in engine's count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RunTls>,
    /// `ws-hold`: the connections held and what they cost the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<HeldDoc>,
    /// What the run really spoke, from the built-in engine's result (absent
    /// for ab and wrk, and in results written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framing: Option<RunFraming>,
    /// `ws-room`: the rooms, the messages sent and the deliveries made
    /// (the run's requests are its deliveries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomRunDoc>,
}

/// The framing a run spoke, as the engine saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunFraming {
    /// `http/1.1`, `http/1.1-pipelined`, `h2c` (HTTP/2 by prior knowledge:
    /// the server answered with SETTINGS) or `h2` (HTTP/2, ALPN picked h2).
    pub protocol: String,
    /// Requests in flight allowed per connection: 1, the pipeline depth,
    /// or the streams the server's SETTINGS_MAX_CONCURRENT_STREAMS left
    /// of those asked for (the fewest any connection was allowed).
    pub in_flight: u32,
    /// HTTP/2: the streams per connection asked for (`--streams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams_asked: Option<u32>,
    /// Over TLS: the protocol ALPN picked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
}

/// `ws-room`: rooms of `members`, messages sent, deliveries counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomRunDoc {
    pub rooms: u64,
    pub members: u64,
    pub messages_sent: u64,
    pub deliveries: u64,
    /// The server's `/config` says its rooms do not span its workers.
    pub spans_note: Option<String>,
}

/// `ws-hold`: connections upgraded, still up at the end, and the server's
/// RSS per held one (its peak during the hold minus its RSS before).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeldDoc {
    pub opened: u64,
    pub stayed_up: u64,
    /// Absent when it would be ≤ 0 or could not be read: `rss_note` says why.
    pub rss_per_held_bytes: Option<f64>,
    pub rss_note: Option<String>,
    /// Fewer held than connections asked for, because each takes a worker
    /// (from `/config`): the rest wait, which is the model, not a failure.
    pub waiting_note: Option<String>,
}

/// A run's TLS handshakes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunTls {
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// The median handshake, ClientHello sent to handshake done.
    pub handshake_p50_us: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyDoc {
    pub mean: f64,
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    /// Mean and sample standard deviation of the runs' `ok_per_s`.
    pub rps_mean: f64,
    pub rps_sd: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    /// Over all runs' successful requests.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub requests: u64,
    pub failed: u64,
    pub failures: FailureCounts,
    pub server_cpu_pct: Option<f64>,
    pub server_rss_peak_bytes: Option<u64>,
    pub generator_cpu_pct: Option<f64>,
    /// The largest `outside_cpu_pct` of the runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_cpu_pct_max: Option<f64>,
    /// `rps_mean` over the baseline's for the same workload and level.
    pub ratio: Option<f64>,
}

impl Results {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize")
    }

    pub fn from_json(text: &str) -> Result<Results, serde_json::Error> {
        serde_json::from_str(text)
    }
}
