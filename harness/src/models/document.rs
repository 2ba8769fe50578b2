//! What `harness models` writes (results.json, schema `harness.models/1`):
//! each experiment's measurements, and the findings computed from them.

use serde::{Deserialize, Serialize};

use crate::lab::profile::{Breakdown, Profile};
use crate::lab::record::{Database, Header, Machine, ServerDoc};

pub const SCHEMA: &str = "harness.models/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Models {
    #[serde(flatten)]
    pub header: Header,
    pub quick: bool,
    pub machine: Machine,
    pub database: Database,
    pub servers: Vec<ServerDoc>,
    /// Experiment 1: throughput against concurrency on a wait.
    pub waiting: Vec<WaitCurve>,
    /// Experiment 2: a heavy request among light ones.
    pub stall: Vec<Stall>,
    /// Experiment 3: what a new connection per request costs.
    pub connection_cost: Vec<ConnectionCost>,
    /// Experiment 4: memory per idle connection.
    pub memory: Vec<Memory>,
    /// Experiment 4 with WebSocket: memory per held, upgraded connection.
    #[serde(default)]
    pub websocket_held: Vec<WsHeld>,
    /// Experiment 5: the same requests in flight over many HTTP/1.1
    /// connections, a few pipelined ones, a few HTTP/2 ones.
    #[serde(default)]
    pub multiplexing: Vec<Multiplexing>,
    /// Experiment 6: the highest rate held on a wait, against Little's law.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_at_rate: Vec<RateCapacity>,
    /// Experiment 7: the same requests in flight as h2 over TLS and as
    /// h3, under packet loss.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_of_line: Vec<HeadOfLine>,
    pub findings: Vec<Finding>,
}

/// One server under packet loss, as h2 over TLS and as h3 (experiment 7).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadOfLine {
    pub server: String,
    pub model: String,
    pub path: String,
    /// Connections of each protocol, and streams in flight on each.
    pub connections: u32,
    pub streams: u32,
    /// The prediction in words, stated before the numbers.
    pub prediction: String,
    /// A response slower than this was stalled ([`HolCell::stalled`]).
    pub stall_ms: f64,
    /// How the loss was made and where the server ran, in words.
    pub network: String,
    /// One per protocol and loss, in the order run.
    pub cells: Vec<HolCell>,
    /// Why nothing was measured (no root, `ip` or `nft`; the server does
    /// not serve h3; the namespace could not be built).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One protocol at one loss.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolCell {
    /// `h2` (over TLS) or `h3`.
    pub protocol: String,
    /// Packets dropped, each direction, in percent (0, 0.5, 2).
    pub loss_pct: f64,
    /// Verified responses.
    pub ok: u64,
    /// Verified responses per second.
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Responses slower than [`HeadOfLine::stall_ms`]: the requests a
    /// loss held back (at 0 %: the machine's own tail).
    pub stalled: u64,
    pub failed: u64,
    /// What the failures were, where there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<String>,
    /// The loss rules' counters over the run: packets between host and
    /// namespace (both directions) and those dropped.
    pub path_packets: u64,
    pub dropped_packets: u64,
    /// h3: the packets QUIC declared lost and the ones it sent (the
    /// generator's side, as quinn-proto counts them).
    pub quic_lost_packets: Option<u64>,
    pub quic_sent_packets: Option<u64>,
    /// h2: the server's TCP retransmissions, retransmission timeouts and
    /// tail-loss probes over the run (the namespace's own counters, which
    /// only the server uses: /proc/PID/net/snmp and netstat).
    pub tcp_retransmits: Option<u64>,
    pub tcp_timeouts: Option<u64>,
    pub tcp_loss_probes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One server's capacity search on a wait (experiment 6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateCapacity {
    pub server: String,
    pub model: String,
    pub path: String,
    /// Every step is held to it.
    pub slo: String,
    /// Its workers (`/config`), where they bound what is in flight.
    pub workers: Option<u32>,
    /// Little's law: workers × 1000 ÷ wait; `None`: no worker bound.
    pub predicted_per_s: Option<f64>,
    /// The prediction in words, stated before the search.
    pub prediction: String,
    /// The highest offered rate held; `None`: none held.
    pub capacity_per_s: Option<f64>,
    /// The lowest that did not hold.
    pub failed_at_per_s: Option<f64>,
    pub steps: Vec<RateStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One fixed-rate step of a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    pub offered_per_s: f64,
    /// Verified responses per second.
    pub achieved_per_s: f64,
    /// From the intended send.
    pub p99_ms: f64,
    pub failed: u64,
    /// ≥ 95 % achieved, none failed, the SLO passed.
    pub held: bool,
}

/// One server on one waiting path, at each concurrency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitCurve {
    pub server: String,
    pub model: String,
    pub path: String,
    pub wait_ms: u32,
    /// Requests it can hold in flight (workers, or the DB pool), as its
    /// `/config` reports; `None` when nothing but the CPU bounds it.
    pub in_flight: Option<u32>,
    /// Where `in_flight` comes from (`workers`, `db_pool`) or why there is none.
    pub in_flight_source: String,
    pub points: Vec<WaitPoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitPoint {
    pub connections: u64,
    /// Verified responses per second.
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub failed: u64,
    /// Little's law: min(c, in-flight) / wait.
    pub predicted_rps: f64,
    /// `--profile`: where this run's CPU went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

/// `/hello` alone, then `/hello` with a share of heavy `/cpu` requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    pub server: String,
    pub model: String,
    /// The `/cpu?n=N` chosen so one costs about the target here.
    pub cpu_n: u32,
    /// One such request on an idle server.
    pub cpu_ms: f64,
    /// Weights: `/hello` : `/cpu`.
    pub mix: String,
    pub hello_alone_p50_ms: f64,
    pub hello_alone_p99_ms: f64,
    pub hello_mixed_p50_ms: f64,
    pub hello_mixed_p99_ms: f64,
    pub cpu_mixed_p99_ms: f64,
    pub failed: u64,
    pub error: Option<String>,
    /// The mixed run's verified requests per second (both routes).
    #[serde(default)]
    pub mixed_rps: f64,
    /// `--profile`: where the mixed run's CPU went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed_profile: Option<Profile>,
}

/// `/work` three ways, each as RPS.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionCost {
    pub server: String,
    pub model: String,
    pub keepalive_rps: f64,
    /// A new HTTP connection per request (ab's default).
    pub new_http_connection_rps: f64,
    /// A new database connection per request (`conn=new`, classic PHP).
    pub new_db_connection_rps: f64,
    pub failed: u64,
    pub error: Option<String>,
}

/// The server's memory with idle keep-alive connections held open.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    pub server: String,
    pub model: String,
    pub points: Vec<MemoryPoint>,
    /// (RSS at the most connections − RSS at none) / connections accepted;
    /// `None` where that is not a measurement (see `kib_not_measured`).
    pub kib_per_connection: Option<f64>,
    /// Why `kib_per_connection` is `None`: an RSS not read (the server's
    /// processes gone), nothing accepted, or RSS that fell as connections
    /// were opened (a negative delta is no per-connection cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kib_not_measured: Option<String>,
    /// Why fewer connections than requested were accepted: the server's own
    /// limit (with its setting where its log or /proc names it), a crash,
    /// or a limit of the harness's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_of_target: Option<String>,
    /// A `/hello` on a new connection answered with every connection held.
    pub hello_answered_at_most: Option<bool>,
    pub error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryPoint {
    pub requested: u64,
    /// Connections the harness holds open (the kernel completed them).
    pub held: u64,
    /// Of those, still waiting in the listening socket's accept queue when
    /// RSS was read: a server at its connection limit leaves them there.
    pub not_accepted: u64,
    /// Of those, closed by the server while idle (an idle timeout).
    #[serde(default)]
    pub closed_by_server: u64,
    /// The server's process tree, summed; `None` when it could not be read
    /// (the processes are gone): never a 0 that reads as a measurement.
    pub rss_bytes: Option<u64>,
}

impl MemoryPoint {
    /// Connections the server accepted and still holds.
    pub fn accepted(&self) -> u64 {
        self.held
            .saturating_sub(self.not_accepted)
            .saturating_sub(self.closed_by_server)
    }
}

/// WebSocket connections upgraded on `/ws` and held, a ping on each
/// every second (the engine's `--hold`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsHeld {
    pub server: String,
    pub model: String,
    /// Connections asked for.
    pub requested: u64,
    /// What holds one connection, from its `/config`.
    pub holder: Option<String>,
    /// Its workers, from its `/config`.
    pub workers: Option<u32>,
    /// Why it does not serve WebSocket (its `/config`'s
    /// `websocket_unsupported`): nothing was measured, and nothing failed.
    pub not_served: Option<String>,
    /// Upgrades answered with 101.
    pub upgraded: u64,
    /// Of those, still up and answering pings when the hold ended.
    pub stayed_up: u64,
    /// Connections still waiting for their 101 when the hold ended (their
    /// upgrade in flight): a worker per connection, and every worker busy.
    pub waiting: u64,
    /// Connections neither up nor waiting at the end: answered without an
    /// upgrade, refused or reset (the engine opened them again and again).
    pub not_held: u64,
    /// Failed attempts (each reopening counts), by kind, with the statuses
    /// answered instead of a 101.
    pub failed: u64,
    pub failures: Vec<String>,
    /// The server's RSS before the hold and its peak during it; `None`
    /// when it could not be read (the processes are gone).
    pub rss_before_bytes: Option<u64>,
    pub rss_held_bytes: Option<u64>,
    /// (peak − before) / connections that stayed up; `None` where that is
    /// not a measurement (see `kib_not_measured`).
    pub kib_per_connection: Option<f64>,
    pub kib_not_measured: Option<String>,
    /// Why fewer than asked stayed up: the model's limit (waiting), the
    /// server's limit, a crash, or a limit of the harness's own.
    pub short_of_target: Option<String>,
    pub error: Option<String>,
}

impl WsHeld {
    /// Whether the server has a worker per connection (its `/config`'s
    /// holder says so): connections beyond its workers wait.
    pub fn worker_per_connection(&self) -> bool {
        self.holder
            .as_deref()
            .is_some_and(|h| h.starts_with("a worker") || h.contains("connection's lifetime"))
    }
}

/// One server on one path at the same requests in flight, reached each
/// way ([`MuxShape`]), in interleaved rounds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Multiplexing {
    pub server: String,
    pub model: String,
    /// `/hello` (the front's parsing and syscalls are the cost) or
    /// `/cpu?n=N` (the workers are).
    pub path: String,
    /// `front` or `workers`: which cost the path is chosen to show.
    pub cost: String,
    /// Requests in flight, the same in every shape.
    pub in_flight: u32,
    pub shapes: Vec<MuxShape>,
    pub error: Option<String>,
}

/// One way of putting `in_flight` requests on the wire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MuxShape {
    /// `http/1.1`, `http/1.1-pipelined`, `h2c`.
    pub protocol: String,
    pub connections: u32,
    /// Requests in flight on each (pipeline depth, or streams).
    pub per_connection: u32,
    /// Where it was loaded, when not the server's own port (an h2c
    /// listener of its own).
    pub addr: Option<String>,
    /// Why this shape was not run (the server does not serve it, from its
    /// `/config`): not a failure.
    pub not_served: Option<String>,
    /// One entry per round.
    pub runs: Vec<MuxRun>,
    pub error: Option<String>,
    /// `--profile`: where the last round's run of this shape spent its CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MuxRun {
    /// Verified responses per second.
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub failed: u64,
    /// The server's CPU (user + system, its process tree, from the lab's
    /// meter) per verified response; `None` where it was not metered.
    pub server_cpu_us_per_request: Option<f64>,
}

/// A sentence computed from the measurements, and whether the measurement
/// matches the model's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// `waiting`, `stall`, `connection cost`, `memory`, `websocket held`,
    /// `multiplexing`, `waiting at a rate`, `head-of-line blocking`.
    pub experiment: String,
    pub server: String,
    pub sentence: String,
    /// `None` where the experiment predicts nothing (it only measures).
    pub matches_prediction: Option<bool>,
    /// Where a measurement missed its prediction and the run was
    /// profiled: where that run's CPU went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
}

/// A profiled run's account of a missed prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// Which run (`c = 200`, `the mixed run`).
    pub run: String,
    /// The server's breakdown in that run.
    pub server: Breakdown,
    /// The server's CPU over the run, in cores (µs per request × req/s).
    pub server_cores: f64,
    /// The load generator's CPU per request, µs.
    pub generator_us_per_request: f64,
    /// The server's flame graph, relative to the results directory.
    pub flame_graph: Option<String>,
    /// What it shows, in a sentence.
    pub sentence: String,
}

impl Models {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a models document serializes")
    }

    pub fn from_json(text: &str) -> Result<Models, serde_json::Error> {
        serde_json::from_str(text)
    }
}
