//! One cell of a reproduction: a started server loaded by ab or by the
//! built-in engine, for a count or a duration, its figures in one shape.

use std::path::Path;
use std::time::Duration;

use super::document::{Cell, Reproduction};
use crate::catalog::Running;

use crate::engine::{self, Control, Stop};
use crate::lab::record::ServerStatus;
use crate::lab::tools::{self, LoadTool};
use crate::lab::{load, Lab};
use crate::stats::Percentiles;

/// Who drives the load.
#[derive(Clone, Copy, Debug)]
pub enum Tool {
    Ab {
        keepalive: bool,
    },
    /// The built-in engine: every body checked against the contract.
    Engine {
        keepalive: bool,
    },
}

/// How long a run lasts.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    Count(u64),
    Duration(Duration),
}

/// The bound of a counted run.
const COUNT_BOUND: Duration = Duration::from_secs(300);

const TIMEOUT: Duration = Duration::from_secs(10);

fn ms(us: impl Into<f64>) -> f64 {
    us.into() / 1000.0
}

/// Loads `running` on `path` and returns what was measured (or the error,
/// in the cell).
#[allow(clippy::too_many_arguments)]
pub fn cell(
    lab: &Lab,
    running: &Running,
    path: &str,
    tool: Tool,
    c: usize,
    threads: usize,
    length: Length,
    scratch: &Path,
) -> Cell {
    let mut cell = Cell {
        server: running.name.clone(),
        connections: c as u64,
        ..Cell::default()
    };
    let (bound, count) = match length {
        Length::Count(n) => (COUNT_BOUND, Some(n)),
        Length::Duration(d) => (d, None),
    };
    match tool {
        Tool::Ab { keepalive } => {
            cell.tool = if keepalive { "ab -k" } else { "ab" }.into();
            let url = format!("http://{}{path}", running.authority);
            match tools::run(
                LoadTool::Ab,
                &url,
                c,
                bound,
                count,
                1,
                keepalive,
                TIMEOUT,
                scratch,
                &lab.interrupt,
            ) {
                Ok(t) => {
                    cell.requests = t.requests;
                    cell.failed = t.failed();
                    cell.rps = t.requests_per_s;
                    cell.mean_ms = t.mean_us / 1000.0;
                    cell.p50_ms = ms(t.percentile(50.0) as f64);
                    cell.p99_ms = ms(t.percentile(99.0) as f64);
                    cell.max_ms = ms(t.max_us as f64);
                    cell.document_length_bytes = t.document_length_bytes;
                }
                Err(e) => cell.error = Some(format!("{e:#}")),
            }
        }
        Tool::Engine { keepalive } => {
            cell.tool = "harness".into();
            cell.bodies_verified = true;
            let shape = load::Shape {
                connections: c,
                threads,
                keepalive,
                timeout: TIMEOUT,
                io: lab.io,
                gather: lab.gather,
            };
            let mut plan = load::plan(running, path, &shape, bound);
            if let Some(n) = count {
                plan.stop = Stop::Count(n);
            }
            let control = Control {
                interrupt: lab.interrupt.clone(),
            };
            match engine::run(&plan, &control, &mut |_| {}) {
                Ok(r) => {
                    let p = Percentiles::of(&r.stats.latency_us);
                    cell.requests = r.stats.requests();
                    cell.failed = r.stats.failures.total();
                    cell.rps = r.requests_per_s();
                    cell.valid_rps = Some(r.ok_per_s());
                    cell.mean_ms = p.mean / 1000.0;
                    cell.p50_ms = ms(p.p50 as f64);
                    cell.p99_ms = ms(p.p99 as f64);
                    cell.max_ms = ms(p.max as f64);
                }
                Err(e) => cell.error = Some(format!("{e:#}")),
            }
        }
    }
    say_cell(&cell);
    cell
}

fn say_cell(c: &Cell) {
    match &c.error {
        Some(e) => super::say(&format!("  {} {}: error: {e}", c.server, c.tool)),
        None => super::say(&format!(
            "  {} {}: {:.0} req/s{}, {} failed, p99 {:.1} ms",
            c.server,
            c.tool,
            c.rps,
            c.valid_rps
                .map_or(String::new(), |v| format!(" ({v:.0} valid)")),
            c.failed,
            c.p99_ms
        )),
    }
}

/// The server's `/config` and versions, once.
pub fn record_settings(doc: &mut Reproduction, name: &str, running: &Running) {
    if let Some(s) = doc.servers.iter_mut().find(|s| s.name == name) {
        if s.config.is_none() {
            s.config = running.config().ok();
            s.versions = running.versions.clone();
        }
    }
}

pub fn failed_to_start(doc: &mut Reproduction, name: &str, err: &anyhow::Error) {
    super::say(&format!("{name}: did not start: {err:#}"));
    if let Some(s) = doc.servers.iter_mut().find(|s| s.name == name) {
        s.notes.push(format!("did not start: {err:#}"));
        if s.config.is_none() {
            s.status = ServerStatus::Failed;
        }
    }
}

/// One fixed-rate run of `GET path` at `rate` req/s by the engine's open
/// loop (keep-alive, every body checked, latency from each request's
/// intended send), the server's CPU metered with the processes on `path_pids`
/// (`db_pid`: the environment's own database, else the session's).
#[allow(clippy::too_many_arguments)]
pub fn fixed_rate_cell(
    lab: &Lab,
    running: &Running,
    path_pids: &[u32],
    db_pid: Option<u32>,
    path: &str,
    c: usize,
    threads: usize,
    rate: f64,
    length: Duration,
) -> Cell {
    let mut cell = Cell {
        server: running.name.clone(),
        connections: c as u64,
        tool: "harness".into(),
        bodies_verified: true,
        offered_rps: Some(rate),
        ..Cell::default()
    };
    let shape = load::Shape {
        connections: c,
        threads,
        keepalive: true,
        timeout: TIMEOUT,
        io: lab.io,
        gather: lab.gather,
    };
    let mut plan = load::plan(running, path, &shape, length);
    plan.pace = engine::Pace::Rate(rate);
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    let (r, sample) = load::metered(
        running,
        path_pids,
        db_pid.or_else(|| lab.database.pid()),
        || engine::run(&plan, &control, &mut |_| {}),
    );
    match r {
        Ok(r) => {
            let p = Percentiles::of(&r.stats.latency_us);
            cell.requests = r.stats.requests();
            cell.failed = r.stats.failures.total();
            cell.rps = r.requests_per_s();
            cell.valid_rps = Some(r.ok_per_s());
            cell.mean_ms = p.mean / 1000.0;
            cell.p50_ms = ms(p.p50 as f64);
            cell.p99_ms = ms(p.p99 as f64);
            cell.max_ms = ms(p.max as f64);
            let ok = r.stats.ok;
            cell.cpu_us_per_request = sample.filter(|_| ok > 0).map(|s| {
                (s.server_cpu_s + s.path_beside_server_cpu_s.unwrap_or(0.0)) * 1e6 / ok as f64
            });
        }
        Err(e) => cell.error = Some(format!("{e:#}")),
    }
    say_cell(&cell);
    cell
}
