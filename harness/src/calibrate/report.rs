//! The calibration document (`harness/schema/calibrate.schema.json`) and
//! its text rendering. Measuring never formats: `super` fills the document,
//! this file only prints it.

use serde::{Deserialize, Serialize};

use super::facts::Facts;
use super::floors::{DbCeiling, Latency};
use crate::lab::record::Header;
use crate::report::thousands;

pub const SCHEMA: &str = "harness.calibrate/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    #[serde(flatten)]
    pub header: Header,
    pub settings: Settings,
    pub machine: Facts,
    pub noise: Option<Noise>,
    pub floors: Floors,
    pub ceilings: Vec<Ceiling>,
    pub database: DbCeiling,
    pub environments: Vec<EnvDoc>,
    pub contamination: Contamination,
    pub notes: Vec<String>,
    /// The Docker engine, when a Docker environment was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_engine: Option<String>,
    /// How well the emulated bridge predicted real Docker, per server and workload.
    #[serde(default)]
    pub emulation: Vec<Prediction>,
    /// What TLS and Docker cost each server, per workload, in a sentence
    /// ([`super::tax`]).
    #[serde(default)]
    pub tax: Vec<Tax>,
}

/// Which costs a server more, TLS at the server, TLS at a proxy or Docker,
/// and why, for one workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tax {
    pub server: String,
    pub path: String,
    /// Each environment measured: (row, CPU µs per request over bare's).
    pub cpu_us_over_bare: Vec<(String, f64)>,
    /// The costliest, or None where the rows cannot tell (too few, too noisy).
    pub costliest: Option<String>,
    /// The server's CPU in TLS and crypto per request with TLS at the
    /// server (µs, keep-alive), from the profile.
    pub tls_us_per_request: Option<f64>,
    pub sentence: String,
}

/// One server × workload read in both Docker and the emulation
/// ([`super::emulation`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub server: String,
    pub path: String,
    /// `docker`'s ratio to bare and its spread.
    pub docker_ratio: f64,
    pub docker_ratio_sd: f64,
    /// Each emulated environment measured: (name, ratio, spread).
    pub emulated: Vec<(String, f64, f64)>,
    /// docker-proxy's CPU per valid response, mean of the runs (µs).
    pub proxy_cpu_us_per_request: Option<f64>,
    /// The sentence the report prints.
    pub sentence: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub environments: Vec<String>,
    pub servers: Vec<String>,
    /// Servers measured in every environment (`--env-servers`); empty:
    /// the fastest reference server per workload.
    #[serde(default)]
    pub env_servers: Vec<String>,
    pub connections: u64,
    pub threads: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub runs: u32,
    pub noise_runs: u32,
    /// `--rate`: the fixed-rate runs' offered rate, in words.
    #[serde(default)]
    pub fixed_rate: String,
    /// `--streams`: requests in flight per connection in the h2 and h3
    /// rows (`tls-server/h2`, `tls-server/h3`).
    #[serde(default)]
    pub streams: u32,
}

/// One measured run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    /// Responses that matched the contract, per second.
    pub rps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub failures: u64,
    /// CPU taken by processes outside the run, % of the machine.
    pub outside_cpu_pct: f64,
    pub steal_pct: f64,
    /// CPU of the processes between the load and the server (docker-proxy
    /// on Docker's bridge, tls-proxy's nginx), µs per valid response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_cpu_us_per_request: Option<f64>,
    /// Valid responses.
    #[serde(default)]
    pub requests: u64,
    /// The server's CPU per valid response, µs: its whole process tree
    /// (with tls-proxy's nginx) and the path's processes outside it
    /// (docker-proxy). Absent where the run was not metered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// TLS handshakes the load made, full and resumed.
    #[serde(default)]
    pub handshakes_full: u64,
    #[serde(default)]
    pub handshakes_resumed: u64,
}

impl RunDoc {
    /// Handshakes per second (the run's length is requests / rps).
    pub fn handshakes_per_s(&self) -> f64 {
        let n = (self.handshakes_full + self.handshakes_resumed) as f64;
        if self.requests == 0 {
            0.0
        } else {
            n * self.rps / self.requests as f64
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    pub server: String,
    pub path: String,
    pub runs: Vec<RunDoc>,
    pub rps_mean: f64,
    pub rps_sd: f64,
    pub cv_pct: f64,
    /// `quiet` (CV < 3%) or `noisy`.
    pub verdict: String,
    pub advice: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Floors {
    /// One byte there and back over 127.0.0.1.
    pub tcp_loopback_rtt: Option<Latency>,
    /// `GET /hello` at one connection on the fastest `/hello` server.
    pub http_hello_c1: Option<Latency>,
    pub http_hello_c1_server: Option<String>,
}

/// A reference server's best numbers on bare loopback.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub server: String,
    pub hello_rps: Option<f64>,
    pub work_rps: Option<f64>,
    pub note: Option<String>,
}

/// One workload in one environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvWorkload {
    pub workload: String,
    pub path: String,
    pub server: String,
    /// How the load reached the server.
    pub route: String,
    pub runs: Vec<RunDoc>,
    pub rps_mean: f64,
    pub rps_sd: f64,
    pub cv_pct: f64,
    /// `rps_mean` over bare's, and its spread (both runs' CVs combined).
    pub ratio_to_bare: Option<f64>,
    pub ratio_sd: Option<f64>,
    pub error: Option<String>,
    /// The server's CPU per valid response (µs), mean and sd of the runs.
    #[serde(default)]
    pub cpu_us_per_request: Option<f64>,
    #[serde(default)]
    pub cpu_us_per_request_sd: Option<f64>,
    /// `cpu_us_per_request` over the baseline row's, and its spread.
    #[serde(default)]
    pub cpu_ratio_to_bare: Option<f64>,
    #[serde(default)]
    pub cpu_ratio_sd: Option<f64>,
    /// `cpu_us_per_request` minus the baseline row's (µs): what the
    /// environment adds to each request.
    #[serde(default)]
    pub cpu_us_over_bare: Option<f64>,
    /// Handshakes per second and the server's CPU per handshake (µs), in
    /// rows whose load made TLS handshakes.
    #[serde(default)]
    pub handshakes_per_s: Option<f64>,
    #[serde(default)]
    pub cpu_us_per_handshake: Option<f64>,
    /// The most CPU other processes took during a run of the row, % of
    /// the machine; `contaminated` from [`crate::lab::meter::CONTAMINATED_PCT`].
    #[serde(default)]
    pub outside_cpu_pct_max: f64,
    #[serde(default)]
    pub contaminated: bool,
    /// `--profile`: where the server's CPU went in one more run, not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<RowProfile>,
    /// The row at a fixed offered rate ([`super::fixed_rate`]): keep-alive
    /// rows only (HTTP/1.1, h2, h3), absent with `--rate off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_rate: Option<FixedRate>,
    /// Why the server does not serve the row's protocol (h2, h3), in the
    /// catalog's or its own words: the row has no runs and no ratios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_served: Option<String>,
    /// The row's ratios to a second row of the same server and workload
    /// (h2 and h3 against HTTP/1.1 over TLS, `tls-server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<Versus>,
}

/// A row's RPS and CPU per request over another row's (its
/// [`EnvDoc::also_against`]), each with the spread of both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    /// The other row (`tls-server`).
    pub row: String,
    pub ratio: f64,
    pub ratio_sd: f64,
    pub cpu_ratio: Option<f64>,
    pub cpu_ratio_sd: Option<f64>,
    /// CPU µs per request over the other row's.
    pub cpu_us_over: Option<f64>,
}

/// A fixed-rate run held its rate when it achieved this share of it, with
/// 0 failed (HttpArena's acceptance rule).
pub const HELD_SHARE: f64 = 0.95;
/// A rate is below a row's knee when it is at most this share of the
/// row's closed-loop req/s.
pub const KNEE_SHARE: f64 = 0.5;

/// A row at a fixed offered rate: the engine's open loop, latency from
/// each request's intended send (coordinated-omission-correct).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedRate {
    /// Requests per second offered, the same in every environment for the
    /// server and workload.
    pub offered_per_s: f64,
    /// Valid responses per second, mean of the runs.
    pub achieved_per_s: f64,
    /// Every run achieved ≥ 95% of the offered rate with 0 failed.
    pub held: bool,
    /// The offered rate is at most half the row's closed-loop req/s.
    pub below_knee: bool,
    /// Medians of the runs' p50 and p99 (µs).
    pub p50_us: f64,
    pub p99_us: f64,
    /// The generator's own lateness, p99 (µs), median of the runs: how
    /// late it sent against the schedule (inside the latency above).
    pub lateness_p99_us: f64,
    /// The server's CPU per valid response (µs), mean of the runs.
    pub cpu_us_per_request: Option<f64>,
    /// p50 and p99 minus the baseline row's at the same rate (µs).
    pub p50_added_us: Option<f64>,
    pub p99_added_us: Option<f64>,
    /// `cpu_us_per_request` over the baseline row's at the same rate.
    pub cpu_ratio_to_bare: Option<f64>,
    pub runs: Vec<FixedRun>,
}

/// One fixed-rate run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedRun {
    pub achieved_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub failures: u64,
    pub requests: u64,
    pub cpu_us_per_request: Option<f64>,
    pub lateness_p99_us: u64,
    pub outside_cpu_pct: f64,
}

impl EnvWorkload {
    /// `server`'s `path`, nothing measured yet.
    pub fn new(server: &str, path: &str) -> EnvWorkload {
        EnvWorkload {
            workload: path.trim_start_matches('/').into(),
            path: path.into(),
            server: server.into(),
            route: String::new(),
            runs: Vec::new(),
            rps_mean: 0.0,
            rps_sd: 0.0,
            cv_pct: 0.0,
            ratio_to_bare: None,
            ratio_sd: None,
            error: None,
            cpu_us_per_request: None,
            cpu_us_per_request_sd: None,
            cpu_ratio_to_bare: None,
            cpu_ratio_sd: None,
            cpu_us_over_bare: None,
            handshakes_per_s: None,
            cpu_us_per_handshake: None,
            outside_cpu_pct_max: 0.0,
            contaminated: false,
            profile: None,
            fixed_rate: None,
            not_served: None,
            versus: None,
        }
    }

    /// Whether the row was loaded: no error and a protocol the server serves.
    pub fn measured(&self) -> bool {
        self.error.is_none() && self.not_served.is_none()
    }
}

/// Where a row's server CPU went, from one profiled run
/// ([`super::attribution`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowProfile {
    /// The server's flame graph and folded stacks, relative to the
    /// calibration's directory.
    pub svg: Option<String>,
    pub folded: Option<String>,
    /// The meter's CPU per request in the profiled run (µs).
    pub cpu_us_per_request: f64,
    /// Shares of the server's profiled CPU, %: in TLS and crypto code
    /// (rustls, ring, aws-lc, OpenSSL's libssl and libcrypto, by binary or
    /// symbol), in handshakes (by symbol, where the stacks show them), and
    /// in the processes put in front of the server (tls-proxy's nginx).
    pub tls_pct: f64,
    pub handshake_pct: f64,
    pub front_pct: Option<f64>,
    /// The same as µs of the meter's CPU per request.
    pub tls_us_per_request: f64,
    pub handshake_us_per_request: f64,
    /// Why there is no profile (perf missing, not permitted, failed).
    pub error: Option<String>,
}

fn bare() -> String {
    "bare".into()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvDoc {
    /// The environment's name, with the connection policy of its rows
    /// when it is not keep-alive (`tls-server/new-conn`).
    pub name: String,
    /// The row its ratios are to (`bare`, or `bare/new-conn` for rows with
    /// a new connection per request).
    #[serde(default = "bare")]
    pub baseline: String,
    /// What the load speaks, where it is not HTTP/1.1: `h2` or `h3`, with
    /// `streams` requests in flight per connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    /// A second row its ratios are also read against ([`Versus`]): HTTP/1.1
    /// over TLS (`tls-server`) for the h2 and h3 rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_against: Option<String>,
    pub description: String,
    pub status: EnvStatus,
    pub reason: Option<String>,
    /// What was built (addresses, CPU sets).
    pub detail: Option<String>,
    /// What was verified (Cpus_allowed_list, namespace membership).
    pub checks: Vec<String>,
    pub workloads: Vec<EnvWorkload>,
}

#[cfg(test)]
impl EnvDoc {
    /// A measured environment of `workloads`, read against bare: the
    /// calibrate tests' documents.
    pub fn measured(name: &str, workloads: Vec<EnvWorkload>) -> EnvDoc {
        EnvDoc {
            name: name.into(),
            baseline: "bare".into(),
            protocol: None,
            streams: None,
            also_against: None,
            description: String::new(),
            status: EnvStatus::Measured,
            reason: None,
            detail: None,
            checks: Vec::new(),
            workloads,
        }
    }
}

/// What became of an environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvStatus {
    Measured,
    /// It cannot be built here (`reason` says why).
    NotAvailable,
    /// Building it failed.
    Failed,
    Interrupted,
}

impl EnvStatus {
    pub fn words(self) -> &'static str {
        match self {
            EnvStatus::Measured => "measured",
            EnvStatus::NotAvailable => "not available",
            EnvStatus::Failed => "failed",
            EnvStatus::Interrupted => "interrupted",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contamination {
    pub runs: u64,
    pub outside_cpu_pct_mean: f64,
    pub outside_cpu_pct_max: f64,
    pub note: String,
}

impl Contamination {
    /// The summary of every measured run's outside CPU %.
    pub fn of(outside: &[f64]) -> Contamination {
        Contamination {
            runs: outside.len() as u64,
            outside_cpu_pct_mean: if outside.is_empty() {
                0.0
            } else {
                outside.iter().sum::<f64>() / outside.len() as f64
            },
            outside_cpu_pct_max: outside.iter().copied().fold(0.0, f64::max),
            note: "user+nice+system+irq+softirq time of /proc/stat not charged to the harness, \
                   the servers' process trees or the database, in % of all cores (kernel \
                   threads such as ksoftirqd count as outside)"
                .into(),
        }
    }
}

fn rps(x: f64) -> String {
    thousands(x.round().max(0.0) as u64)
}

fn opt_rps(x: Option<f64>) -> String {
    x.map_or("—".into(), rps)
}

/// The human report.
pub fn text(c: &Calibration) -> String {
    let mut o = String::new();
    let m = &c.machine;
    let la = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    o += "machine\n";
    o += &format!(
        "  {} · {} cores online (allowed {}) · governor {} · kernel {} · {} · {:.1} GiB\n",
        m.cpu_model,
        m.cores_online,
        m.cpus_allowed,
        m.governor.as_deref().unwrap_or("not visible"),
        m.kernel,
        m.os,
        m.memory_bytes as f64 / (1u64 << 30) as f64
    );
    o += &format!(
        "  load {} → {} · steal {:.2}% during ({:.2}% since boot)\n",
        la(&m.load_avg_before),
        la(&m.load_avg_after),
        m.steal_pct_during,
        m.steal_pct_since_boot
    );
    o += &format!(
        "  timer: clock_getres {} ns, a 100 µs sleep wakes {:.0} µs late (median) · perf: {}\n",
        m.timer_resolution_ns, m.sleep_overshoot_us_p50, m.perf.note
    );
    match m.sched_autogroup_enabled {
        Some(true) => {
            o += "  kernel.sched_autogroup_enabled=1: every setsid() session gets an equal CPU \
                  share (a detached daemon gets as much CPU as the whole load generator)\n";
        }
        Some(false) => o += "  kernel.sched_autogroup_enabled=0\n",
        None => o += "  no scheduler autogroups in this kernel\n",
    }
    for g in &m.autogroups {
        o += &format!("    {}: {}\n", g.group, by_program(&g.processes));
    }
    if m.autogroups.len() > 1 {
        o += "    warning: the run's processes are in different autogroups: CPU is shared per group, not per process\n";
    }
    let k = &c.contamination;
    o += &format!(
        "  contamination: processes outside the run took {:.1}% of the machine on average, {:.1}% at most, over {} runs\n",
        k.outside_cpu_pct_mean, k.outside_cpu_pct_max, k.runs
    );

    if let Some(n) = &c.noise {
        o += &format!(
            "\nnoise: {} × {} {}: {} ± {} req/s, CV {:.1}% → {}: {}\n",
            n.runs.len(),
            n.server,
            n.path,
            rps(n.rps_mean),
            rps(n.rps_sd),
            n.cv_pct,
            n.verdict,
            n.advice
        );
    }

    o += "\nfloors\n";
    if let Some(l) = &c.floors.tcp_loopback_rtt {
        o += &format!(
            "  TCP loopback round trip, 1 connection: p50 {:.1} µs, p99 {:.1} µs ({} samples)\n",
            l.p50_us,
            l.p99_us,
            thousands(l.samples)
        );
    }
    if let (Some(l), Some(s)) = (&c.floors.http_hello_c1, &c.floors.http_hello_c1_server) {
        o += &format!(
            "  GET /hello, 1 connection ({s}): p50 {:.0} µs, p99 {:.0} µs\n",
            l.p50_us, l.p99_us
        );
    }
    let d = &c.database;
    o += &format!(
        "  database ({}{}): SELECT 1 at {} connections: {}\n",
        d.kind,
        d.version
            .as_deref()
            .map_or(String::new(), |v| format!(", {v}")),
        d.connections,
        match (d.select1_per_s, &d.note) {
            (Some(r), _) => format!("{} queries/s (the ceiling of /work)", rps(r)),
            (None, Some(n)) => format!("not measured: {n}"),
            (None, None) => "not measured".into(),
        }
    );

    if !c.ceilings.is_empty() {
        o += &format!(
            "\nreference ceilings (bare, -c {}, best of the runs)\n",
            c.settings.connections
        );
        o += &format!("  {:<16} {:>12} {:>12}\n", "server", "/hello", "/work");
        for r in &c.ceilings {
            o += &format!(
                "  {:<16} {:>12} {:>12}{}\n",
                r.server,
                opt_rps(r.hello_rps),
                opt_rps(r.work_rps),
                r.note
                    .as_deref()
                    .map_or(String::new(), |n| format!("  ({n})"))
            );
        }
    }

    o += &format!(
        "\nenvironments (-c {}, {} × {}s runs each, interleaved per row; × bare = the row's figure over \
         its baseline's (bare, or bare/new-conn for a new connection per request), ± their \
         run-to-run spread; CPU = the server's µs per request, its whole process tree and the \
         proxies on its path; outside = the most CPU other processes took during a run, \
         ! at {:.0}% or more: contaminated, do not quote the row)\n",
        c.settings.connections,
        c.settings.runs,
        c.settings.duration_s,
        crate::lab::meter::CONTAMINATED_PCT
    );
    if let Some(e) = c.environments.iter().find(|e| e.protocol.is_some()) {
        o += &format!(
            "  ({}/h2 and {}/h3: h2 and h3 over TLS, kept alive, {} streams per connection \
             against HTTP/1.1's one request at a time, × bare = over plaintext HTTP/1.1 on \
             bare; ↳ the same over HTTP/1.1 over TLS, the {} row)\n",
            e.also_against.as_deref().unwrap_or("tls-server"),
            e.also_against.as_deref().unwrap_or("tls-server"),
            e.streams.unwrap_or(c.settings.streams),
            e.also_against.as_deref().unwrap_or("tls-server"),
        );
    }
    o += &format!(
        "  {:<24} {:<7} {:<13} {:>16} {:>12} {:>12} {:>12} {:>8}  {}\n",
        "env",
        "path",
        "server",
        "req/s (± sd)",
        "× bare",
        "CPU µs/req",
        "CPU × bare",
        "outside",
        "route"
    );
    let pm = |r: Option<f64>, sd: Option<f64>| match (r, sd) {
        (Some(r), Some(sd)) => format!("{r:.2} ± {sd:.2}"),
        _ => "—".into(),
    };
    for e in &c.environments {
        if e.status != EnvStatus::Measured {
            o += &format!(
                "  {:<24} {}: {}\n",
                e.name,
                e.status.words(),
                e.reason.as_deref().unwrap_or("")
            );
            continue;
        }
        for w in &e.workloads {
            if let Some(why) = &w.not_served {
                o += &format!(
                    "  {:<24} {:<7} {:<13} not served: {why}\n",
                    e.name, w.path, w.server
                );
                continue;
            }
            if let Some(err) = &w.error {
                o += &format!(
                    "  {:<24} {:<7} {:<13} failed: {err}\n",
                    e.name, w.path, w.server
                );
                continue;
            }
            o += &format!(
                "  {:<24} {:<7} {:<13} {:>16} {:>12} {:>12} {:>12} {:>8}  {}\n",
                e.name,
                w.path,
                w.server,
                format!("{} ± {}", rps(w.rps_mean), rps(w.rps_sd)),
                pm(w.ratio_to_bare, w.ratio_sd),
                w.cpu_us_per_request
                    .map_or("—".into(), |c| format!("{c:.1}")),
                pm(w.cpu_ratio_to_bare, w.cpu_ratio_sd),
                format!(
                    "{:.0}%{}",
                    w.outside_cpu_pct_max,
                    if w.contaminated { " !" } else { "  " }
                ),
                w.route
            );
            if let Some(v) = &w.versus {
                o += &format!(
                    "  {:<24} ↳ × {}: req/s {}, CPU µs/req {}{}\n",
                    "",
                    v.row,
                    pm(Some(v.ratio), Some(v.ratio_sd)),
                    pm(v.cpu_ratio, v.cpu_ratio_sd),
                    v.cpu_us_over
                        .map_or(String::new(), |us| format!(" ({us:+.1} µs)"))
                );
            }
            if let (Some(hs), Some(per)) = (w.handshakes_per_s, w.cpu_us_per_handshake) {
                let (full, resumed) = w.runs.iter().fold((0, 0), |(f, r), x| {
                    (f + x.handshakes_full, r + x.handshakes_resumed)
                });
                if e.name.contains("/new-conn") {
                    o += &format!(
                        "  {:<24} ↳ {} handshakes/s ({} full, {} resumed in all), {per:.0} µs of server CPU per handshake\n",
                        "",
                        rps(hs),
                        thousands(full),
                        thousands(resumed)
                    );
                }
            }
            if let Some(p) = &w.profile {
                o += &format!("  {:<24} ↳ profile: ", "");
                o += &match &p.error {
                    Some(why) => format!("none: {why}\n"),
                    None => format!(
                        "{:.0}% TLS and crypto ({:.1} µs/req), {:.0}% handshakes{}{}\n",
                        p.tls_pct,
                        p.tls_us_per_request,
                        p.handshake_pct,
                        p.front_pct
                            .map_or(String::new(), |f| format!(", {f:.0}% the proxy's nginx")),
                        p.svg
                            .as_deref()
                            .map_or(String::new(), |f| format!(" ({f})"))
                    ),
                };
            }
        }
        for ch in &e.checks {
            o += &format!("  {:<14} checked: {ch}\n", "");
        }
    }
    o += &fixed_rate_table(c);
    o += "\n  reading Docker: bridge-direct is the veth and bridge alone, bridge adds the DNAT of \
          a published port. A published port costs ~0.9× bare when the kernel DNATs it \
          (userland-proxy: false, or a client from another host), ~0.25× when docker-proxy \
          relays it (the default for clients on the host itself). If your Docker numbers sit \
          near the bridge-proxy row, your clients go through docker-proxy. Both are costs per \
          request: the faster the server, the larger the share it loses (compare the rows of \
          one environment; --env-servers measures the servers you run).\n";
    if let Some(engine) = &c.docker_engine {
        o += &format!("\n  docker: {engine}\n");
    }
    if !c.tax.is_empty() {
        o += "\nwhat TLS costs each server, beside what Docker costs it\n";
        for t in &c.tax {
            o += &format!("  {}\n", t.sentence);
        }
    }
    if !c.emulation.is_empty() {
        o += "\nthe emulation against the real Docker Engine\n";
        for p in &c.emulation {
            o += &format!("  {}\n", p.sentence);
        }
    }
    for n in &c.notes {
        o += &format!("note: {n}\n");
    }
    o
}

/// The fixed-rate rows: each environment's added latency and CPU per
/// request against bare at the same offered rate, beside its saturation
/// ratios; empty with `--rate off`.
fn fixed_rate_table(c: &Calibration) -> String {
    let rows: Vec<(&EnvDoc, &EnvWorkload, &FixedRate)> = c
        .environments
        .iter()
        .filter(|e| e.status == EnvStatus::Measured)
        .flat_map(|e| {
            e.workloads
                .iter()
                .filter_map(move |w| Some((e, w, w.fixed_rate.as_ref()?)))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut o = format!(
        "\nat a fixed rate (--rate {}: the same offered rate in every environment, the engine's \
         open loop, -c {}, {} × {}s runs; p50 and p99 from each request's intended send, \
         medians of the runs; + bare = µs added to bare's at the same rate; held = achieved ≥ \
         {:.0}% of offered with 0 failed; knee! = the rate is above half the row's closed-loop \
         req/s, so its latency is a queue's, not the environment's; late = the generator's own \
         p99 lateness; beside them the saturation ratios above)\n",
        c.settings.fixed_rate,
        c.settings.connections,
        c.settings.runs,
        c.settings.duration_s,
        HELD_SHARE * 100.0,
    );
    o += &format!(
        "  {:<20} {:<7} {:<13} {:>8} {:>9} {:>6} {:>8} {:>9} {:>8} {:>9} {:>7} {:>8} {:>7} {:>7}\n",
        "env",
        "path",
        "server",
        "offered",
        "achieved",
        "held",
        "p50 µs",
        "+ bare",
        "p99 µs",
        "+ bare",
        "late",
        "CPU µs",
        "× bare",
        "sat ×"
    );
    let added = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:+.0}"));
    let mut generator_bound = false;
    for (e, w, f) in rows {
        // The generator's own lateness is half the p99 or more: the
        // machine's delay, not the environment's.
        let late = f.lateness_p99_us >= 0.5 * f.p99_us && f.p99_us > 0.0;
        generator_bound |= late;
        o += &format!(
            "  {:<20} {:<7} {:<13} {:>8} {:>9} {:>6} {:>8.0} {:>9} {:>8.0} {:>9} {:>7} {:>8} {:>7} {:>7}\n",
            e.name,
            w.path,
            w.server,
            rps(f.offered_per_s),
            rps(f.achieved_per_s),
            match (f.held, f.below_knee) {
                (true, true) => "yes",
                (true, false) => "knee!",
                (false, _) => "NO",
            },
            f.p50_us,
            added(f.p50_added_us),
            f.p99_us,
            added(f.p99_added_us),
            format!("{:.0}{}", f.lateness_p99_us, if late { " *" } else { "" }),
            f.cpu_us_per_request
                .map_or("—".into(), |c| format!("{c:.1}")),
            f.cpu_ratio_to_bare
                .map_or("—".into(), |r| format!("{r:.2}")),
            w.cpu_ratio_to_bare
                .map_or("—".into(), |r| format!("{r:.2}")),
        );
    }
    o += "  (sat × = the row's CPU per request over bare's at saturation, the closed-loop table's)\n";
    if generator_bound {
        o += "  * the generator's own lateness is half the row's p99 or more: that p99 is the \
              machine's delay of the load (a busy machine, too few cores), not the environment's; \
              read p50, or rerun on a quiet machine\n";
    }
    o
}

/// `harness (1), php-fpm (7), php-fpm (8)` → `harness, php-fpm ×2`: the
/// members of a group by program, in order of first appearance (the pids
/// are in the JSON).
fn by_program(processes: &[String]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for p in processes {
        let name = p.rsplit_once(" (").map_or(p.as_str(), |(name, _)| name);
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, k)) => *k += 1,
            None => counts.push((name, 1)),
        }
    }
    counts
        .iter()
        .map(|&(n, k)| {
            if k == 1 {
                n.to_string()
            } else {
                format!("{n} ×{k}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autogroup_members_are_counted_by_program() {
        let members: Vec<String> = ["harness (9)", "php-fpm (10)", "node (11)", "php-fpm (12)"]
            .map(String::from)
            .to_vec();
        assert_eq!(by_program(&members), "harness, php-fpm ×2, node");
        assert_eq!(
            by_program(&["php-fpm: pool (x) (7)".into()]),
            "php-fpm: pool (x)"
        );
    }
}
