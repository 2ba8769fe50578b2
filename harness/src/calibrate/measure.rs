//! The phases of `harness calibrate`, each on the [`Lab`]: the reference
//! servers' ceilings on bare loopback, the noise of identical runs and the
//! floors, the database's raw rate, and each environment's cost.

use std::time::Duration;

use anyhow::bail;

use super::report::{Ceiling, EnvDoc, EnvStatus, EnvWorkload, Floors, Noise, RunDoc};
use super::{facts, floors, CalibrateArgs, DB_CONNECTIONS, QUIET_CV_PCT};
use crate::catalog::{Entry, Running};
use crate::engine::{self, Control};
use crate::env::{Environment, Setup};
use crate::lab::driver::Placed;
use crate::lab::{load, Lab, Started};
use crate::stats::{mean_sd, Percentiles};

/// What every measurement of one calibration shares.
pub struct Ctx<'a> {
    pub args: &'a CalibrateArgs,
    pub lab: &'a Lab,
    pub threads: usize,
    /// Outside CPU of every run, for the contamination summary.
    pub outside: Vec<f64>,
    /// (label, pid, autogroup) of every process of the run, for the autogroup table.
    pub processes: Vec<(String, i32, String)>,
    pub notes: Vec<String>,
    /// The database process of the environment being measured, where it
    /// has its own (Docker's bridge); else the session's is metered.
    pub env_db_pid: Option<u32>,
    /// The processes between the load and the server being measured
    /// (docker-proxy), metered per run.
    pub path_pids: Vec<u32>,
}

impl Ctx<'_> {
    pub fn interrupted(&self) -> bool {
        self.lab.interrupted()
    }

    pub fn say(&self, line: &str) {
        say(line);
    }

    /// Starts `entry` on bare loopback (the ceilings, the noise).
    fn start(&mut self, entry: &Entry) -> anyhow::Result<Started> {
        let started = self.lab.start(entry, None)?;
        self.adopt(entry, &started);
        Ok(started)
    }

    /// Records a started server's notes and its processes (for the
    /// autogroup table).
    fn adopt(&mut self, entry: &Entry, started: &Started) {
        for n in &started.running.notes {
            if !self.notes.contains(n) {
                self.notes.push(n.clone());
            }
        }
        for s in crate::procfs::tree(&started.running.pids()) {
            self.processes.push(facts::member(&entry.name, s.pid));
        }
    }

    /// One closed-loop run of `GET path` for `length`.
    fn measure(
        &mut self,
        running: &Running,
        path: &str,
        connections: usize,
        threads: usize,
        length: Duration,
    ) -> anyhow::Result<RunDoc> {
        let shape = load::Shape {
            connections,
            threads,
            keepalive: true,
            timeout: Duration::from_secs(10),
            io: self.lab.io,
            gather: self.lab.gather,
        };
        let plan = load::plan(running, path, &shape, length);
        let control = Control {
            interrupt: self.lab.interrupt.clone(),
        };
        let path_ns = |pids: &[u32]| -> Option<u64> {
            (!pids.is_empty()).then(|| {
                pids.iter()
                    .filter_map(|&p| crate::procfs::cpu_ns(p as i32))
                    .sum()
            })
        };
        let path_before = path_ns(&self.path_pids);
        let (r, sample) = load::metered(
            running,
            self.env_db_pid.or_else(|| self.lab.database.pid()),
            || engine::run(&plan, &control, &mut |_| {}),
        );
        let path_after = path_ns(&self.path_pids);
        let r = r.map_err(|e| anyhow::anyhow!("load on {}: {e}", plan.url))?;
        if let Some(m) = &r.message {
            if !r.interrupted() {
                bail!("{}: {m}", plan.url);
            }
        }
        let p = Percentiles::of(&r.stats.latency_us);
        let sample = sample.unwrap_or_default();
        let doc = RunDoc {
            rps: r.ok_per_s(),
            p50_us: p.p50,
            p99_us: p.p99,
            failures: r.stats.failures.total(),
            outside_cpu_pct: sample.outside_cpu_pct,
            steal_pct: sample.steal_pct,
            proxy_cpu_us_per_request: match (path_before, path_after) {
                (Some(b), Some(a)) if r.stats.ok > 0 => {
                    Some(a.saturating_sub(b) as f64 / 1e3 / r.stats.ok as f64)
                }
                _ => None,
            },
        };
        self.outside.push(doc.outside_cpu_pct);
        if doc.failures > 0 {
            self.notes.push(format!(
                "{}: {} failed requests in one run",
                plan.url, doc.failures
            ));
        }
        Ok(doc)
    }

    /// A warm-up run, not counted anywhere.
    fn warm(&mut self, running: &Running, path: &str, threads: usize) -> anyhow::Result<()> {
        if !self.args.warmup.is_zero() {
            let w = self.args.warmup;
            self.measure(running, path, self.args.connections, threads, w)?;
            self.outside.pop();
        }
        Ok(())
    }
}

/// Progress, on stderr (stdout carries the report).
pub fn say(line: &str) {
    eprintln!("calibrate: {line}");
}

/// The workloads measured: `/work` only with a database.
pub fn workloads(lab: &Lab) -> Vec<(&'static str, &'static str)> {
    if lab.db().is_some() {
        vec![("hello", "/hello"), ("work", "/work")]
    } else {
        vec![("hello", "/hello")]
    }
}

/// Every reference server's `/hello` and `/work` on bare loopback.
pub fn ceilings(ctx: &mut Ctx, entries: &[Entry]) -> Vec<Ceiling> {
    let mut ceilings = Vec::new();
    for e in entries {
        if ctx.interrupted() {
            break;
        }
        let mut c = Ceiling {
            server: e.name.clone(),
            hello_rps: None,
            work_rps: None,
            note: None,
        };
        match ctx.start(e) {
            Ok(Started { mut running, .. }) => {
                for (name, path) in workloads(ctx.lab) {
                    if !e.serves(path) || ctx.interrupted() {
                        continue;
                    }
                    let (connections, threads, duration) =
                        (ctx.args.connections, ctx.threads, ctx.args.duration);
                    let r = ctx
                        .warm(&running, path, threads)
                        .and_then(|()| ctx.measure(&running, path, connections, threads, duration));
                    match r {
                        Ok(run) => {
                            ctx.say(&format!("ceiling {} {path}: {:.0} req/s", e.name, run.rps));
                            if name == "hello" {
                                c.hello_rps = Some(run.rps);
                            } else {
                                c.work_rps = Some(run.rps);
                            }
                        }
                        Err(err) => c.note = Some(format!("{path}: {err:#}")),
                    }
                }
                running.stop();
            }
            Err(err) => c.note = Some(format!("did not start: {err:#}")),
        }
        ceilings.push(c);
    }
    ceilings
}

/// The placeable entry with the highest figure `f`.
pub fn best(
    ceilings: &[Ceiling],
    entries: &[Entry],
    f: fn(&Ceiling) -> Option<f64>,
) -> Option<Entry> {
    ceilings
        .iter()
        .filter(|c| f(c).is_some())
        .filter(|c| entries.iter().any(|e| e.name == c.server && e.placeable()))
        .max_by(|a, b| f(a).unwrap_or(0.0).total_cmp(&f(b).unwrap_or(0.0)))
        .and_then(|c| entries.iter().find(|e| e.name == c.server).cloned())
}

/// Noise (`--noise-runs` identical runs) and the HTTP floor at one
/// connection on the fastest `/hello`; the TCP loopback floor.
pub fn noise_and_floors(ctx: &mut Ctx, fastest: Option<&Entry>) -> (Option<Noise>, Floors) {
    let mut noise = None;
    let mut floors_doc = Floors {
        tcp_loopback_rtt: None,
        http_hello_c1: None,
        http_hello_c1_server: None,
    };
    if let Some(e) = fastest.filter(|_| !ctx.interrupted()) {
        match ctx.start(e) {
            Ok(Started { mut running, .. }) => {
                let (connections, threads, duration) =
                    (ctx.args.connections, ctx.threads, ctx.args.duration);
                let mut runs = Vec::new();
                let _ = ctx.warm(&running, "/hello", threads);
                for _ in 0..ctx.args.noise_runs {
                    if ctx.interrupted() {
                        break;
                    }
                    match ctx.measure(&running, "/hello", connections, threads, duration) {
                        Ok(r) => runs.push(r),
                        Err(err) => ctx.notes.push(format!("noise run: {err:#}")),
                    }
                }
                if runs.len() >= 2 {
                    let (m, sd, cv) = spread(&runs);
                    let (v, advice) = verdict(cv);
                    ctx.say(&format!("noise: CV {cv:.1}% ({v})"));
                    noise = Some(Noise {
                        server: e.name.clone(),
                        path: "/hello".into(),
                        runs,
                        rps_mean: m,
                        rps_sd: sd,
                        cv_pct: cv,
                        verdict: v.into(),
                        advice: advice.into(),
                    });
                }
                if !ctx.interrupted() {
                    if let Ok(r) = ctx.measure(&running, "/hello", 1, 1, Duration::from_secs(1)) {
                        floors_doc.http_hello_c1 = Some(floors::Latency {
                            samples: (r.rps as u64).max(1),
                            p50_us: r.p50_us as f64,
                            p99_us: r.p99_us as f64,
                        });
                        floors_doc.http_hello_c1_server = Some(e.name.clone());
                    }
                    ctx.outside.pop();
                }
                running.stop();
            }
            Err(err) => ctx
                .notes
                .push(format!("noise: {} did not start: {err:#}", e.name)),
        }
    }
    if !ctx.interrupted() {
        match floors::loopback_rtt(Duration::from_secs(1)) {
            Ok(l) => floors_doc.tcp_loopback_rtt = Some(l),
            Err(err) => ctx.notes.push(format!("loopback floor: {err:#}")),
        }
    }
    (noise, floors_doc)
}

/// The database's raw `SELECT 1` rate at [`DB_CONNECTIONS`] clients.
pub fn database(ctx: &Ctx) -> floors::DbCeiling {
    let database = &ctx.lab.database;
    let mut doc = floors::DbCeiling {
        kind: database.kind.name().into(),
        version: database.version.clone(),
        connections: DB_CONNECTIONS,
        select1_per_s: None,
        note: database
            .unavailable
            .as_ref()
            .map(|e| format!("{e}: /work is not measured (or pass --mysql-url)")),
    };
    if let Some(d) = ctx.lab.db().filter(|_| !ctx.interrupted()) {
        match floors::select1_rate(d, DB_CONNECTIONS, 200_000) {
            Ok(r) => {
                ctx.say(&format!("database: {r:.0} SELECT 1/s"));
                doc.select1_per_s = Some(r)
            }
            Err(err) => doc.note = Some(format!("{err:#}")),
        }
    }
    doc
}

/// One environment: built, each (path, server) of `plan` measured in it,
/// torn down.
pub fn environment(ctx: &mut Ctx, env: Environment, plan: &[(Entry, &str)]) -> EnvDoc {
    let mut doc = EnvDoc {
        name: env.name().into(),
        description: env.describe().into(),
        status: EnvStatus::Measured,
        reason: None,
        detail: None,
        checks: Vec::new(),
        workloads: Vec::new(),
    };
    if let Err(why) = env.availability() {
        doc.status = EnvStatus::NotAvailable;
        doc.reason = Some(why);
        return doc;
    }
    if ctx.interrupted() {
        doc.status = EnvStatus::Interrupted;
        return doc;
    }
    ctx.say(&format!("environment {}", env.name()));
    let lab = ctx.lab;
    let placed = match lab.place(env, ctx.args.threads) {
        Ok(p) => p,
        Err(err) => {
            doc.status = EnvStatus::Failed;
            doc.reason = Some(format!("{err:#}"));
            return doc;
        }
    };
    doc.detail = Some(placed.detail().unwrap_or_else(|| "127.0.0.1".into()));
    ctx.env_db_pid = placed.setup.as_ref().and_then(Setup::db_pid);
    placed.each(lab, plan, |entry, path, started| {
        let w = measure_in(ctx, &placed, entry, path, started, &mut doc.checks);
        doc.workloads.push(w);
    });
    ctx.env_db_pid = None;
    for e in placed.close() {
        ctx.notes.push(format!("{}: teardown: {e}", env.name()));
    }
    if ctx.interrupted() {
        doc.status = EnvStatus::Interrupted;
    }
    doc
}

/// One workload in one environment on a server the driver started placed:
/// the placement's checks, warm-up, `--runs` runs, stop.
fn measure_in(
    ctx: &mut Ctx,
    placed: &Placed,
    entry: &Entry,
    path: &str,
    started: anyhow::Result<Started>,
    checks: &mut Vec<String>,
) -> EnvWorkload {
    let mut w = EnvWorkload {
        workload: path.trim_start_matches('/').into(),
        path: path.into(),
        server: entry.name.clone(),
        route: String::new(),
        runs: Vec::new(),
        rps_mean: 0.0,
        rps_sd: 0.0,
        cv_pct: 0.0,
        ratio_to_bare: None,
        ratio_sd: None,
        error: None,
    };
    let result = (|| -> anyhow::Result<()> {
        let mut started = started?;
        ctx.adopt(entry, &started);
        ctx.path_pids = placed
            .setup
            .as_ref()
            .map(|s| s.path_pids(&started.running))
            .unwrap_or_default();
        w.route = started.route.clone();
        for c in started.checks.drain(..) {
            if !checks.contains(&c) {
                checks.push(c);
            }
        }
        let threads = placed.threads;
        let running = &started.running;
        ctx.warm(running, path, threads)?;
        for _ in 0..ctx.args.runs {
            if ctx.interrupted() {
                break;
            }
            let (connections, duration) = (ctx.args.connections, ctx.args.duration);
            let r = ctx.measure(running, path, connections, threads, duration)?;
            w.runs.push(r);
        }
        started.running.stop();
        Ok(())
    })();
    ctx.path_pids.clear();
    if let Err(e) = result {
        w.error = Some(format!("{e:#}"));
    }
    let (m, sd, cv) = spread(&w.runs);
    (w.rps_mean, w.rps_sd, w.cv_pct) = (m, sd, cv);
    ctx.say(&format!(
        "  {} {path}: {:.0} ± {:.0} req/s{}",
        entry.name,
        m,
        sd,
        w.error
            .as_deref()
            .map_or(String::new(), |e| format!(" (error: {e})"))
    ));
    w
}

/// Mean, sd, CV% of the runs' RPS.
pub fn spread(runs: &[RunDoc]) -> (f64, f64, f64) {
    let xs: Vec<f64> = runs.iter().map(|r| r.rps).collect();
    let (m, sd) = mean_sd(&xs);
    (m, sd, if m > 0.0 { 100.0 * sd / m } else { 0.0 })
}

/// The noise verdict and its advice.
pub fn verdict(cv_pct: f64) -> (&'static str, &'static str) {
    if cv_pct < QUIET_CV_PCT {
        (
            "quiet",
            "differences above ~2 × this CV are real; 3 runs per cell are enough",
        )
    } else {
        (
            "noisy",
            "use more and longer runs (--runs 5, -d 10s), stop other work on the machine, \
             and consider --env pinned; treat differences below 2 × this CV as noise",
        )
    }
}

/// Each environment's ratio to bare, per server and workload, with the
/// spread of both.
pub fn apply_ratios(envs: &mut [EnvDoc]) {
    let bare: Vec<(String, String, f64, f64)> = envs
        .iter()
        .filter(|e| e.name == "bare" && e.status == EnvStatus::Measured)
        .flat_map(|e| e.workloads.iter())
        .filter(|w| w.error.is_none() && w.rps_mean > 0.0)
        .map(|w| (w.server.clone(), w.path.clone(), w.rps_mean, w.cv_pct))
        .collect();
    for e in envs.iter_mut() {
        for w in e.workloads.iter_mut().filter(|w| w.error.is_none()) {
            if let Some((.., base, base_cv)) = bare
                .iter()
                .find(|(s, p, ..)| *s == w.server && *p == w.path)
            {
                let r = w.rps_mean / base;
                let rel = if e.name == "bare" {
                    base_cv / 100.0
                } else {
                    ((w.cv_pct / 100.0).powi(2) + (base_cv / 100.0).powi(2)).sqrt()
                };
                w.ratio_to_bare = Some(r);
                w.ratio_sd = Some(r * rel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_doc(name: &str, path: &str, runs: &[f64]) -> EnvDoc {
        let runs: Vec<RunDoc> = runs
            .iter()
            .map(|&rps| RunDoc {
                rps,
                ..RunDoc::default()
            })
            .collect();
        let (m, sd, cv) = spread(&runs);
        EnvDoc {
            name: name.into(),
            description: String::new(),
            status: EnvStatus::Measured,
            reason: None,
            detail: None,
            checks: Vec::new(),
            workloads: vec![EnvWorkload {
                workload: path.into(),
                path: path.into(),
                server: "s".into(),
                route: String::new(),
                runs,
                rps_mean: m,
                rps_sd: sd,
                cv_pct: cv,
                ratio_to_bare: None,
                ratio_sd: None,
                error: None,
            }],
        }
    }

    #[test]
    fn ratios_carry_both_spreads() {
        let mut envs = vec![
            env_doc("bare", "/hello", &[100.0, 100.0, 100.0]),
            env_doc("bridge", "/hello", &[90.0, 91.0, 89.0]),
        ];
        apply_ratios(&mut envs);
        let b = &envs[0].workloads[0];
        assert_eq!((b.ratio_to_bare, b.ratio_sd), (Some(1.0), Some(0.0)));
        let w = &envs[1].workloads[0];
        assert!((w.ratio_to_bare.unwrap() - 0.9).abs() < 1e-9);
        assert!((w.ratio_sd.unwrap() - 0.01).abs() < 1e-9);
    }

    #[test]
    fn each_server_is_read_against_its_own_bare_figure() {
        let with_server = |mut d: EnvDoc, server: &str| {
            d.workloads[0].server = server.into();
            d
        };
        let mut bare = with_server(env_doc("bare", "/work", &[10.0, 10.0]), "php-fpm");
        bare.workloads
            .extend(with_server(env_doc("bare", "/work", &[100.0, 100.0]), "node").workloads);
        let mut bridge = with_server(env_doc("bridge", "/work", &[9.0, 9.0]), "php-fpm");
        bridge
            .workloads
            .extend(with_server(env_doc("bridge", "/work", &[50.0, 50.0]), "node").workloads);
        let mut envs = vec![bare, bridge];
        apply_ratios(&mut envs);
        let ratios: Vec<_> = envs[1]
            .workloads
            .iter()
            .map(|w| (w.server.as_str(), w.ratio_to_bare.unwrap()))
            .collect();
        assert_eq!(ratios, vec![("php-fpm", 0.9), ("node", 0.5)]);
    }

    #[test]
    fn the_noise_verdict_follows_the_cv() {
        assert_eq!(verdict(2.9).0, "quiet");
        assert_eq!(verdict(3.0).0, "noisy");
    }
}
