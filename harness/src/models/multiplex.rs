//! Experiment 5, multiplexing: one server at the same number of requests
//! in flight ([`IN_FLIGHT`]), reached three ways — that many HTTP/1.1
//! connections with one request each, a few connections pipelined deep, a
//! few HTTP/2 connections with many streams — on a path whose cost is the
//! front's (`/hello`) and on one whose cost is the workers' (`/cpu`).
//!
//! The shapes run in interleaved rounds (h1, pipelined, h2c, h1, …) so
//! that a change in the machine's load falls on all three alike; each run
//! is metered for the server's CPU per verified response.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::document::{Multiplexing, MuxRun, MuxShape};
use super::measure::{profiled, quiesce, stem, TIMEOUT};
use crate::catalog::Running;
use crate::engine::{self, Control, Framing, ProtoPlan, TransportPlan};
use crate::lab::profile::Profiler;
use crate::lab::{load, Lab};
use crate::stats::Percentiles;

/// Requests in flight in every shape.
pub const IN_FLIGHT: u32 = 64;
/// Connections of the pipelined and HTTP/2 shapes (16 requests each).
pub const FEW: u32 = 4;
/// What one `/cpu` request of the workers' path should cost here: long
/// enough that the workers, not the front, are the cost; short enough for
/// thousands of responses in a one-second run.
pub const CPU_TARGET_MS: f64 = 2.0;

/// The three shapes, in the order of each round.
fn shapes() -> [(Framing, u32); 3] {
    let deep = (IN_FLIGHT / FEW) as u16;
    [
        (Framing::H1, IN_FLIGHT),
        (Framing::Pipelined(deep), FEW),
        (Framing::H2c(deep), FEW),
    ]
}

/// Where `running` serves h2c: the listener of its own it was started
/// with ([`Running::h2c`]), else from its `/config`'s protocols its own
/// port (`h2c`) or another (`h2c on ADDR`), or why not.
pub fn h2c_addr(running: &Running) -> Result<SocketAddr, String> {
    if let Some(addr) = running.h2c {
        return Ok(addr);
    }
    let config = running
        .config()
        .map_err(|e| format!("its /config could not be read: {e}"))?;
    for p in &config.protocols {
        if p == "h2c" {
            return Ok(running.addr);
        }
        if let Some(addr) = p.strip_prefix("h2c on ") {
            return addr
                .trim()
                .parse()
                .map_err(|_| format!("its /config names h2c on {addr:?}, not an address"));
        }
    }
    Err(config.http2_unsupported.unwrap_or_else(|| {
        if config.protocols.is_empty() {
            "its /config does not say it serves h2c".into()
        } else {
            format!("its /config lists {}", config.protocols.join(", "))
        }
    }))
}

/// The time of one `GET path` on an idle server.
fn time_get(running: &Running, path: &str) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let r = running.get(path, Duration::from_secs(30))?;
    if r.status != 200 {
        anyhow::bail!("{path} answered {}", r.status);
    }
    Ok(t0.elapsed().as_secs_f64() * 1000.0)
}

/// The `/cpu?n=N` that costs about [`CPU_TARGET_MS`] here (warmed first:
/// a JIT compiles the loop on its first calls).
pub fn cpu_path(running: &Running) -> anyhow::Result<String> {
    for _ in 0..3 {
        time_get(running, "/cpu?n=100000")?;
    }
    let probe = 1_000_000u64;
    let mut t = [0.0; 3];
    for x in &mut t {
        *x = time_get(running, &format!("/cpu?n={probe}"))?;
    }
    t.sort_by(f64::total_cmp);
    let n = ((probe as f64 * CPU_TARGET_MS / t[1].max(0.1)) as u64)
        .clamp(1000, u64::from(workloads::CPU_N_MAX));
    Ok(format!("/cpu?n={n}"))
}

/// The experiment on `path`: `rounds` rounds of the three shapes;
/// `profiler` records each shape's last round.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    lab: &Lab,
    running: &Running,
    model: &str,
    path: &str,
    cost: &str,
    rounds: u32,
    length: Duration,
    profiler: Option<&Profiler>,
) -> Multiplexing {
    let h2c = h2c_addr(running);
    let mut out = Multiplexing {
        server: running.name.clone(),
        model: model.into(),
        path: path.into(),
        cost: cost.into(),
        in_flight: IN_FLIGHT,
        shapes: shapes()
            .iter()
            .map(|&(framing, connections)| MuxShape {
                protocol: framing.protocol().into(),
                connections,
                per_connection: framing.capacity() as u32,
                addr: match (framing, &h2c) {
                    (Framing::H2c(_), Ok(a)) if *a != running.addr => Some(a.to_string()),
                    _ => None,
                },
                not_served: match (framing, &h2c) {
                    (Framing::H2c(_), Err(why)) => Some(why.clone()),
                    _ => None,
                },
                ..MuxShape::default()
            })
            .collect(),
        error: None,
    };
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    for round in 1..=rounds {
        for (i, (framing, connections)) in shapes().into_iter().enumerate() {
            let shape = &mut out.shapes[i];
            if lab.interrupted() || shape.not_served.is_some() || shape.error.is_some() {
                continue;
            }
            let load_shape = load::Shape {
                connections: connections as usize,
                threads: engine::default_threads().min(connections as usize),
                keepalive: true,
                timeout: TIMEOUT,
                io: lab.io,
                gather: lab.gather,
            };
            let mut plan = load::plan(running, path, &load_shape, length);
            if matches!(framing, Framing::H2c(_)) {
                plan.transport = TransportPlan::Tcp;
            }
            if let Some(proto) = ProtoPlan::from_framing(framing) {
                plan.proto = proto;
            }
            if let (Framing::H2c(_), Ok(addr)) = (framing, &h2c) {
                plan.addr = *addr;
                plan.url = format!("http://{addr}{path}");
            }
            quiesce(running);
            let what = format!("{path} {}", shape.protocol);
            let stem = stem(&running.name, &format!("mux {what}"), connections as usize);
            let profiler = profiler
                .filter(|_| round == rounds)
                .map(|p| (p, stem.as_str()));
            let mut sample = None;
            let result = profiled(running, profiler, &what, || {
                let (r, s) = load::metered(running, &[], lab.db_pid(None), || {
                    engine::run(&plan, &control, &mut |_| {})
                });
                sample = s;
                Ok(r?)
            });
            match result {
                Ok((r, profile)) if r.stats.ok > 0 => {
                    if profile.is_some() {
                        shape.profile = profile;
                    }
                    let p = Percentiles::of(&r.stats.latency_us);
                    let run = MuxRun {
                        rps: r.ok_per_s(),
                        p50_ms: p.p50 as f64 / 1000.0,
                        p99_ms: p.p99 as f64 / 1000.0,
                        failed: r.stats.failures.total(),
                        server_cpu_us_per_request: sample
                            .filter(|s| s.server_cpu_s > 0.0)
                            .map(|s| s.server_cpu_s * 1e6 / r.stats.ok as f64),
                    };
                    super::say(&format!(
                        "  {} {path} {} × {}: {:.0} req/s, p99 {:.1} ms, {} µs server CPU per request, {} failed",
                        running.name,
                        shape.connections,
                        shape.protocol,
                        run.rps,
                        run.p99_ms,
                        run.server_cpu_us_per_request
                            .map_or("—".into(), |u| format!("{u:.0}")),
                        run.failed
                    ));
                    shape.runs.push(run);
                }
                Ok((r, _)) => {
                    shape.error = Some(format!(
                        "nothing verified: {} failed{}",
                        r.stats.failures.total(),
                        r.message
                            .as_deref()
                            .map_or(String::new(), |m| format!("; {m}"))
                    ))
                }
                Err(e) => shape.error = Some(format!("{e:#}")),
            }
            if let Some(e) = &shape.error {
                super::say(&format!(
                    "  {} {path} {}: {e}",
                    running.name, shape.protocol
                ));
            }
        }
    }
    out
}
