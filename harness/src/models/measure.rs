//! The measurements of `harness models`, each on a server the lab started:
//! closed-loop runs of one path ([`run_path`]), the waiting curve, the
//! connection cost (the connections held are [`super::held`]'s).

use std::time::{Duration, Instant};

use super::document::{ConnectionCost, WaitCurve, WaitPoint};
use crate::catalog::Running;
use crate::engine::{self, Control, RunResult};
use crate::lab::profile::{Profile, Profiler};
use crate::lab::{load, Lab};
use crate::stats::Percentiles;

pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until the server is idle again: a `/hello` answered within 100 ms
/// (at most 15 s). A run that ends closes its connections, but a server may
/// still work through what they left queued (php-fpm runs every request
/// nginx already handed it), and the next run must not inherit that.
pub fn quiesce(running: &Running) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let t0 = Instant::now();
        let ok = running
            .get("/hello", Duration::from_secs(5))
            .is_ok_and(|r| r.status == 200);
        if ok && t0.elapsed() < Duration::from_millis(100) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One closed-loop run of `GET path`, on an idle server.
pub fn run_path(
    lab: &Lab,
    running: &Running,
    path: &str,
    connections: usize,
    keepalive: bool,
    length: Duration,
) -> anyhow::Result<RunResult> {
    Ok(run_path_profiled(lab, running, path, connections, keepalive, length, None)?.0)
}

/// [`run_path`], recorded by `profiler` as `profiles/<stem>.*` when given.
pub fn run_path_profiled(
    lab: &Lab,
    running: &Running,
    path: &str,
    connections: usize,
    keepalive: bool,
    length: Duration,
    profiler: Option<(&Profiler, &str)>,
) -> anyhow::Result<(RunResult, Option<Profile>)> {
    let shape = load::Shape {
        connections,
        threads: crate::engine::default_threads(),
        keepalive,
        timeout: TIMEOUT,
        io: lab.io,
        gather: lab.gather,
    };
    let plan = load::plan(running, path, &shape, length);
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    quiesce(running);
    profiled(running, profiler, path, || {
        Ok(engine::run(&plan, &control, &mut |_| {})?)
    })
}

/// Runs `run` under `profiler` when given (title: the server and `what`).
pub fn profiled(
    running: &Running,
    profiler: Option<(&Profiler, &str)>,
    what: &str,
    run: impl FnOnce() -> anyhow::Result<RunResult>,
) -> anyhow::Result<(RunResult, Option<Profile>)> {
    let Some((profiler, stem)) = profiler else {
        return Ok((run()?, None));
    };
    let recording = profiler.start(running);
    let result = run()?;
    let title = format!("{} {what}", running.name);
    let profile = profiler.finish(recording, running, stem, &title, result.stats.ok);
    Ok((result, Some(profile)))
}

/// A profile's file stem for `server` on `what` (a path, an experiment)
/// at `c`: letters, digits and dashes.
pub fn stem(server: &str, what: &str, c: usize) -> String {
    let what: String = what
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
        .collect();
    format!("{server}-{}-c{c}", what.trim_matches('-'))
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// What bounds the requests in flight on `path` for a server of `model`,
/// from its `/config`: (W, where it comes from).
pub fn in_flight(
    model: &str,
    config: Option<&workloads::ServerConfig>,
    db_wait: bool,
) -> (Option<u32>, String) {
    let workers = config.and_then(|c| c.workers);
    let pool = config.and_then(|c| c.db_pool);
    match (db_wait, model) {
        (false, "worker-pool") => (workers, "workers".into()),
        (false, _) => (None, "nothing but the CPU: a timer holds no worker".into()),
        (true, "worker-pool") => match (workers, pool) {
            (Some(w), Some(p)) => (Some(w.min(p)), "min(workers, db_pool)".into()),
            (w, p) => (w.or(p), "workers or db_pool".into()),
        },
        (true, _) => (pool, "db_pool".into()),
    }
}

/// Experiment 1 on one path: RPS, p50, p99 at each concurrency.
#[allow(clippy::too_many_arguments)]
pub fn waiting(
    lab: &Lab,
    running: &Running,
    model: &str,
    config: Option<&workloads::ServerConfig>,
    path: &str,
    wait_ms: u32,
    levels: &[usize],
    length: Duration,
    profiler: Option<&Profiler>,
) -> WaitCurve {
    let db_wait = path.starts_with("/db");
    let (w, source) = in_flight(model, config, db_wait);
    let wait_s = f64::from(wait_ms) / 1000.0;
    // Warm-up, not counted: pools fill their connections, PHP workers open
    // their persistent ones, a JIT compiles.
    let _ = run_path(
        lab,
        running,
        path,
        20,
        true,
        length.min(Duration::from_secs(1)),
    );
    let mut points = Vec::new();
    for &c in levels {
        if lab.interrupted() {
            break;
        }
        let predicted = w.map_or(c, |w| c.min(w as usize)) as f64 / wait_s;
        // Little's law: at c connections each request takes c / X; a run
        // shorter than a few of those measures the queue filling, not the
        // level (at c = 1000 on a pool of 20 × 20 ms, one request waits 1 s).
        let length = length.max(Duration::from_secs_f64(
            (3.0 * c as f64 / predicted).min(10.0),
        ));
        let stem = stem(&running.name, path, c);
        let profiler = profiler.map(|p| (p, stem.as_str()));
        match run_path_profiled(lab, running, path, c, true, length, profiler) {
            Ok((r, profile)) => {
                let p = Percentiles::of(&r.stats.latency_us);
                super::say(&format!(
                    "  {} {path} c={c}: {:.0} req/s (predicted {:.0}), p99 {:.1} ms, {} failed",
                    running.name,
                    r.ok_per_s(),
                    predicted,
                    ms(p.p99),
                    r.stats.failures.total()
                ));
                points.push(WaitPoint {
                    connections: c as u64,
                    rps: r.ok_per_s(),
                    p50_ms: ms(p.p50),
                    p99_ms: ms(p.p99),
                    failed: r.stats.failures.total(),
                    predicted_rps: predicted,
                    profile,
                });
            }
            Err(e) => super::say(&format!("  {} {path} c={c}: {e:#}", running.name)),
        }
    }
    WaitCurve {
        server: running.name.clone(),
        model: model.into(),
        path: path.into(),
        wait_ms,
        in_flight: w,
        in_flight_source: source,
        points,
    }
}

/// Experiment 3: `/work` with keep-alive, a new HTTP connection per
/// request, and a new database connection per request.
pub fn connection_cost(
    lab: &Lab,
    running: &Running,
    model: &str,
    c: usize,
    length: Duration,
) -> ConnectionCost {
    let mut out = ConnectionCost {
        server: running.name.clone(),
        model: model.into(),
        ..ConnectionCost::default()
    };
    let ways: [(&str, bool); 3] = [("/work", true), ("/work", false), ("/work?conn=new", true)];
    for (i, (path, keepalive)) in ways.into_iter().enumerate() {
        match run_path(lab, running, path, c, keepalive, length) {
            Ok(r) => {
                out.failed += r.stats.failures.total();
                if r.stats.ok == 0 {
                    // Nothing verified: an error with what was answered,
                    // not a rate of 0.
                    out.error = Some(format!("{path}: {}", failures(&r)));
                    super::say(&format!(
                        "  {} {path}: nothing verified; the server's log:\n{}",
                        running.name,
                        running.logs()
                    ));
                }
                let rps = r.ok_per_s();
                match i {
                    0 => out.keepalive_rps = rps,
                    1 => out.new_http_connection_rps = rps,
                    _ => out.new_db_connection_rps = rps,
                }
            }
            Err(e) => out.error = Some(format!("{path}: {e:#}")),
        }
    }
    super::say(&format!(
        "  {}: keep-alive {:.0}, new HTTP connection {:.0}, new DB connection {:.0} req/s{}",
        out.server,
        out.keepalive_rps,
        out.new_http_connection_rps,
        out.new_db_connection_rps,
        out.error
            .as_deref()
            .map_or(String::new(), |e| format!(" — {e}"))
    ));
    out
}

/// "0 verified, 130 failed: status 130 (503 ×130)": what a run that
/// failed answered, by failure kind and status.
fn failures(r: &RunResult) -> String {
    let f = &r.stats.failures;
    let kinds: Vec<String> = f
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let statuses: Vec<String> = r
        .stats
        .status
        .seen()
        .map(|(s, n)| format!("{s} ×{n}"))
        .collect();
    format!(
        "{} verified, {} failed: {} (statuses {}){}",
        r.stats.ok,
        f.total(),
        kinds.join(", "),
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        },
        r.message
            .as_deref()
            .map_or(String::new(), |m| format!("; {m}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_bounds_the_requests_in_flight() {
        let cfg = workloads::ServerConfig {
            server: "x".into(),
            model: "worker-pool".into(),
            runtime: "r".into(),
            workers: Some(20),
            db_pool: Some(10),
            opcache: None,
            jit: None,
            debug: false,
            http_limits: Vec::new(),
            tls: None,
            websocket: None,
            websocket_unsupported: None,
            protocols: Vec::new(),
            http2_unsupported: None,
        };
        assert_eq!(in_flight("worker-pool", Some(&cfg), false).0, Some(20));
        assert_eq!(in_flight("worker-pool", Some(&cfg), true).0, Some(10));
        assert_eq!(in_flight("event-loop", Some(&cfg), false).0, None);
        assert_eq!(in_flight("coroutine", Some(&cfg), true).0, Some(10));
    }
}
