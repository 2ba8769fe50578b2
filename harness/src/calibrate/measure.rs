//! The phases of `harness calibrate`, each on the [`Lab`]: the reference
//! servers' ceilings on bare loopback, the noise of identical runs and the
//! floors, the database's raw rate, and each environment's cost.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use super::fixed_rate::{self, RateChoice};
use super::report::{
    Ceiling, EnvDoc, EnvStatus, EnvWorkload, FixedRun, Floors, Noise, RowProfile, RunDoc, Versus,
};
use super::{facts, floors, CalibrateArgs, DB_CONNECTIONS, QUIET_CV_PCT};
use crate::catalog::{Entry, Running};
use crate::engine::{self, Control, Framing, Pace, TransportPlan};
use crate::env::{Environment, Setup};
use crate::lab::driver::Placed;
use crate::lab::meter::CONTAMINATED_PCT;
use crate::lab::profile::Profiler;
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
    /// (docker-proxy, tls-proxy's nginx), metered per run.
    pub path_pids: Vec<u32>,
    /// `--profile`: where the profiles go (the calibration's directory),
    /// or why none can be taken.
    pub profiler: Option<(Profiler, PathBuf)>,
    /// `--rate`, and bare's closed-loop req/s per (server, path), which a
    /// share of bare is taken of.
    pub rate: RateChoice,
    pub bare_rps: Vec<(String, String, f64)>,
}

/// How the load connects in a row: kept-alive connections (HTTP/1.1, or
/// over TLS h2 and h3 with `--streams` requests in flight on each), or a
/// new connection per request (with TLS, a handshake per request:
/// resumed, or full with resumption off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conn {
    KeepAlive,
    /// HTTP/2 over TLS (h2 by ALPN), kept alive.
    H2,
    /// HTTP/3 over QUIC, kept alive.
    H3,
    New,
    NewFull,
}

impl Conn {
    /// The row's name: the environment's, with the protocol or the
    /// connection policy after a slash.
    pub fn row(self, env: Environment) -> String {
        match self {
            Conn::KeepAlive => env.name().into(),
            Conn::H2 => format!("{}/h2", env.name()),
            Conn::H3 => format!("{}/h3", env.name()),
            Conn::New => format!("{}/new-conn", env.name()),
            Conn::NewFull => format!("{}/new-conn-full", env.name()),
        }
    }

    /// The row its ratios are to: plaintext HTTP/1.1 on bare, kept alive
    /// or a connection per request as the row's.
    pub fn baseline(self) -> &'static str {
        match self {
            Conn::KeepAlive | Conn::H2 | Conn::H3 => "bare",
            Conn::New | Conn::NewFull => "bare/new-conn",
        }
    }

    /// The second row its ratios are read against: HTTP/1.1 over TLS in
    /// the same environment, for h2 and h3.
    pub fn also_against(self, env: Environment) -> Option<String> {
        matches!(self, Conn::H2 | Conn::H3).then(|| Conn::KeepAlive.row(env))
    }

    /// Whether its connections are kept alive (it has a fixed-rate figure).
    pub fn keeps_alive(self) -> bool {
        matches!(self, Conn::KeepAlive | Conn::H2 | Conn::H3)
    }

    /// The engine's framing of an h2 or h3 row, `streams` per connection.
    pub fn framing(self, streams: u16) -> Option<Framing> {
        match self {
            Conn::H2 => Some(Framing::H2(streams)),
            Conn::H3 => Some(Framing::H3(streams)),
            _ => None,
        }
    }

    fn describe(self, env: Environment, streams: u16) -> String {
        match self {
            Conn::KeepAlive => env.describe().into(),
            Conn::H2 => format!(
                "{}; HTTP/2 (h2 by ALPN) instead of HTTP/1.1, {streams} streams per connection",
                env.describe()
            ),
            Conn::H3 => format!(
                "loopback, HTTP/3 over QUIC (TLS 1.3 inside QUIC) on the UDP port of the \
                 server's TCP one's number, {streams} streams per connection"
            ),
            Conn::New if env == Environment::Bare => {
                "loopback, plaintext, a new connection per request (--no-keepalive): the \
                 baseline of the handshake-per-request rows"
                    .into()
            }
            Conn::New => format!(
                "{}; a new connection per request (--no-keepalive), so a TLS handshake per \
                 request, resumed (the default)",
                env.describe()
            ),
            Conn::NewFull => format!(
                "{}; a new connection per request (--no-keepalive), so a full TLS handshake \
                 per request (--tls-no-resume)",
                env.describe()
            ),
        }
    }

    /// The rows measured in `env` when `handshakes` (tls-server is asked for).
    pub fn of(env: Environment, handshakes: bool) -> &'static [Conn] {
        match env {
            Environment::Bare if handshakes => &[Conn::KeepAlive, Conn::New],
            Environment::TlsServer => &[
                Conn::KeepAlive,
                Conn::H2,
                Conn::H3,
                Conn::New,
                Conn::NewFull,
            ],
            _ => &[Conn::KeepAlive],
        }
    }
}

impl Ctx<'_> {
    /// The offered rate of `server`'s `path` in `env`, whose closed-loop
    /// rows are `rows` (one per `conns`); bare's closed-loop figure (its
    /// HTTP/1.1 keep-alive row's) is kept for the other environments.
    fn fixed_rate_for(
        &mut self,
        env: Environment,
        conns: &[Conn],
        server: &str,
        path: &str,
        rows: &[EnvWorkload],
    ) -> Option<f64> {
        let keepalive = conns.iter().position(|&c| c == Conn::KeepAlive)?;
        if rows[keepalive].runs.is_empty() {
            return None;
        }
        if env == Environment::Bare {
            let closed = spread(&rows[keepalive].runs).0;
            self.bare_rps.push((server.into(), path.into(), closed));
        }
        let bare = self
            .bare_rps
            .iter()
            .find(|(s, p, _)| s == server && p == path)
            .map(|(_, _, r)| *r);
        self.rate.offered(bare)
    }

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
        self.measure_as(running, path, connections, threads, length, Conn::KeepAlive)
    }

    /// One closed-loop run of `GET path` for `length`, connecting as `conn`.
    fn measure_as(
        &mut self,
        running: &Running,
        path: &str,
        connections: usize,
        threads: usize,
        length: Duration,
        conn: Conn,
    ) -> anyhow::Result<RunDoc> {
        let (doc, _) = self.measure_paced(
            running,
            path,
            connections,
            threads,
            length,
            conn,
            Pace::Closed,
        )?;
        Ok(doc)
    }

    /// One keep-alive open-loop run at `rate` req/s ([`super::fixed_rate`]),
    /// connecting as `conn` (HTTP/1.1, h2 or h3).
    fn measure_at_rate(
        &mut self,
        running: &Running,
        path: &str,
        threads: usize,
        rate: f64,
        conn: Conn,
    ) -> anyhow::Result<FixedRun> {
        let (connections, length) = (self.args.connections, self.args.duration);
        let (r, late) = self.measure_paced(
            running,
            path,
            connections,
            threads,
            length,
            conn,
            Pace::Rate(rate),
        )?;
        Ok(FixedRun {
            achieved_per_s: r.rps,
            p50_us: r.p50_us,
            p99_us: r.p99_us,
            failures: r.failures,
            requests: r.requests,
            cpu_us_per_request: r.cpu_us_per_request,
            lateness_p99_us: late,
            outside_cpu_pct: r.outside_cpu_pct,
        })
    }

    /// One run of `GET path` for `length`, connecting as `conn`, paced by
    /// `pace`; with the generator's schedule lateness at p99 (µs, 0 in a
    /// closed loop).
    #[allow(clippy::too_many_arguments)]
    fn measure_paced(
        &mut self,
        running: &Running,
        path: &str,
        connections: usize,
        threads: usize,
        length: Duration,
        conn: Conn,
        pace: Pace,
    ) -> anyhow::Result<(RunDoc, u64)> {
        let shape = load::Shape {
            connections,
            threads,
            keepalive: conn.keeps_alive(),
            timeout: Duration::from_secs(10),
            io: self.lab.io,
            gather: self.lab.gather,
        };
        let mut plan = load::plan(running, path, &shape, length);
        if let Some(f) = conn.framing(self.args.streams) {
            // h2 by ALPN on the TLS port, h3 on the UDP port of its
            // number: both where `served` found them, the server's address.
            crate::lab::protocol::apply(&mut plan, running, f, running.addr, path);
        }
        plan.pace = pace;
        if let TransportPlan::Tls(tls) = &mut plan.transport {
            tls.resume = conn != Conn::NewFull;
        }
        let control = Control {
            interrupt: self.lab.interrupt.clone(),
        };
        let (r, sample) = load::metered(
            running,
            &self.path_pids,
            self.env_db_pid.or_else(|| self.lab.database.pid()),
            || engine::run(&plan, &control, &mut |_| {}),
        );
        let r = r.map_err(|e| anyhow::anyhow!("load on {}: {e}", plan.url))?;
        if let Some(m) = &r.message {
            if !r.interrupted() {
                bail!("{}: {m}", plan.url);
            }
        }
        if conn == Conn::H2 && !r.interrupted() {
            // h3: the engine speaks nothing else over QUIC.
            if let Err(why) = crate::lab::protocol::h2_spoken(&r) {
                bail!("{}: {why}", plan.url);
            }
        }
        let p = Percentiles::of(&r.stats.latency_us);
        let metered = sample.is_some();
        let sample = sample.unwrap_or_default();
        let ok = r.stats.ok;
        // The path's processes outside the server's tree (docker-proxy)
        // add to its CPU; those inside it (tls-proxy's nginx) are in
        // `server_cpu_s` already (the meter counts each process once).
        let path_cpu_us = sample.path_cpu_s.map(|s| s * 1e6);
        let cpu_us = (sample.server_cpu_s + sample.path_beside_server_cpu_s.unwrap_or(0.0)) * 1e6;
        let doc = RunDoc {
            rps: r.ok_per_s(),
            p50_us: p.p50,
            p99_us: p.p99,
            failures: r.stats.failures.total(),
            outside_cpu_pct: sample.outside_cpu_pct,
            steal_pct: sample.steal_pct,
            proxy_cpu_us_per_request: path_cpu_us.filter(|_| ok > 0).map(|c| c / ok as f64),
            requests: ok,
            cpu_us_per_request: (metered && ok > 0).then(|| cpu_us / ok as f64),
            handshakes_full: r.stats.handshakes_full,
            handshakes_resumed: r.stats.handshakes_resumed,
        };
        self.outside.push(doc.outside_cpu_pct);
        if doc.failures > 0 {
            self.notes.push(format!(
                "{}: {} failed requests in one run",
                plan.url, doc.failures
            ));
        }
        let late = match pace {
            Pace::Closed => 0,
            Pace::Rate(_) => r.stats.schedule_lateness_us.value_at_quantile(0.99),
        };
        Ok((doc, late))
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

/// One environment: built, each (path, server) of `plan` measured in it
/// as each of `conns` (one document per row: `tls-server`,
/// `tls-server/new-conn`, …), torn down.
pub fn environment(
    ctx: &mut Ctx,
    env: Environment,
    conns: &[Conn],
    plan: &[(Entry, &str)],
) -> Vec<EnvDoc> {
    let streams = ctx.args.streams;
    let mut docs: Vec<EnvDoc> = conns
        .iter()
        .map(|&c| EnvDoc {
            name: c.row(env),
            baseline: c.baseline().into(),
            protocol: c.framing(streams).map(|f| f.protocol().to_string()),
            streams: c.framing(streams).map(|_| u32::from(streams)),
            also_against: c.also_against(env),
            description: c.describe(env, streams),
            status: EnvStatus::Measured,
            reason: None,
            detail: None,
            checks: Vec::new(),
            workloads: Vec::new(),
        })
        .collect();
    let set = |docs: &mut Vec<EnvDoc>, status: EnvStatus, reason: Option<String>| {
        for d in docs.iter_mut() {
            d.status = status;
            d.reason.clone_from(&reason);
        }
    };
    if let Err(why) = env.availability() {
        set(&mut docs, EnvStatus::NotAvailable, Some(why));
        return docs;
    }
    if ctx.interrupted() {
        set(&mut docs, EnvStatus::Interrupted, None);
        return docs;
    }
    ctx.say(&format!("environment {}", env.name()));
    let lab = ctx.lab;
    let placed = match lab.place(env, ctx.args.threads) {
        Ok(p) => p,
        Err(err) => {
            set(&mut docs, EnvStatus::Failed, Some(format!("{err:#}")));
            return docs;
        }
    };
    let detail = placed.detail().unwrap_or_else(|| "127.0.0.1".into());
    ctx.env_db_pid = placed.setup.as_ref().and_then(Setup::db_pid);
    let mut checks = Vec::new();
    placed.each(lab, plan, |entry, path, started| {
        let rows = measure_in(ctx, &placed, env, conns, entry, path, started, &mut checks);
        for (d, w) in docs.iter_mut().zip(rows) {
            d.workloads.push(w);
        }
    });
    ctx.env_db_pid = None;
    for e in placed.close() {
        ctx.notes.push(format!("{}: teardown: {e}", env.name()));
    }
    let interrupted = ctx.interrupted();
    for d in &mut docs {
        d.detail = Some(detail.clone());
        d.checks.clone_from(&checks);
        if interrupted {
            d.status = EnvStatus::Interrupted;
        }
    }
    docs
}

/// One workload in one environment on a server the driver started placed:
/// the placement's checks, warm-up, `--runs` rounds of a run per row
/// (`conns`, interleaved), with `--profile` one more profiled run per row,
/// stop. One [`EnvWorkload`] per row.
#[allow(clippy::too_many_arguments)]
fn measure_in(
    ctx: &mut Ctx,
    placed: &Placed,
    env: Environment,
    conns: &[Conn],
    entry: &Entry,
    path: &str,
    started: anyhow::Result<Started>,
    checks: &mut Vec<String>,
) -> Vec<EnvWorkload> {
    let mut rows: Vec<EnvWorkload> = conns
        .iter()
        .map(|_| EnvWorkload::new(&entry.name, path))
        .collect();
    let result = (|| -> anyhow::Result<()> {
        let mut started = started?;
        ctx.adopt(entry, &started);
        ctx.path_pids = match env {
            Environment::TlsProxy => crate::env::tls_proxy::front_pids(&started.running),
            _ => placed
                .setup
                .as_ref()
                .map(|s| s.path_pids(&started.running))
                .unwrap_or_default(),
        };
        for w in &mut rows {
            w.route.clone_from(&started.route);
        }
        for c in started.checks.drain(..) {
            if !checks.contains(&c) {
                checks.push(c);
            }
        }
        let threads = placed.threads;
        let running = &started.running;
        // h2 and h3: where the server serves them and its answer over
        // them, before anything is loaded; a row it does not serve says why.
        for (w, &conn) in rows.iter_mut().zip(conns) {
            if let Some(f) = conn.framing(ctx.args.streams) {
                match multiplexed(entry, running, f, path) {
                    Ok(()) => {}
                    Err(Refused::NotServed(why)) => w.not_served = Some(why),
                    Err(Refused::Failed(why)) => w.error = Some(why),
                }
            }
        }
        ctx.warm(running, path, threads)?;
        let (connections, duration) = (ctx.args.connections, ctx.args.duration);
        for _ in 0..ctx.args.runs {
            for (w, &conn) in rows.iter_mut().zip(conns) {
                if ctx.interrupted() {
                    break;
                }
                if w.not_served.is_some() || (conn.framing(1).is_some() && w.error.is_some()) {
                    continue;
                }
                match ctx.measure_as(running, path, connections, threads, duration, conn) {
                    Ok(r) => w.runs.push(r),
                    Err(e) if conn == Conn::KeepAlive => return Err(e),
                    Err(e) => {
                        w.error.get_or_insert_with(|| format!("{e:#}"));
                    }
                }
            }
        }
        if let Some(rate) = ctx.fixed_rate_for(env, conns, &entry.name, path, &rows) {
            for (w, &conn) in rows.iter_mut().zip(conns) {
                if conn.keeps_alive() && w.measured() && !w.runs.is_empty() {
                    w.fixed_rate =
                        Some(ctx.at_fixed_rate(env, conn, entry, running, w, threads, rate));
                }
            }
        }
        if ctx.profiler.is_some() && profiled(env) {
            for (w, &conn) in rows.iter_mut().zip(conns) {
                if !ctx.interrupted() && w.measured() {
                    w.profile = Some(ctx.profile(running, env, conn, entry, path, threads));
                }
            }
        }
        started.running.stop();
        Ok(())
    })();
    ctx.path_pids.clear();
    if let Err(e) = result {
        rows[0].error = Some(format!("{e:#}"));
    }
    for (w, &conn) in rows.iter_mut().zip(conns) {
        summarize(w);
        if let Some(why) = &w.not_served {
            ctx.say(&format!("  {} {} {path}: {why}", conn.row(env), entry.name));
            continue;
        }
        ctx.say(&format!(
            "  {} {} {path}: {:.0} ± {:.0} req/s{}{}",
            conn.row(env),
            entry.name,
            w.rps_mean,
            w.rps_sd,
            w.cpu_us_per_request
                .map_or(String::new(), |c| format!(", {c:.1} µs CPU per request")),
            w.error
                .as_deref()
                .map_or(String::new(), |e| format!(" (error: {e})"))
        ));
    }
    rows
}

/// Why an h2 or h3 row is not loaded: the server does not serve the
/// protocol (the row says so), or it does and answered wrong (an error).
enum Refused {
    NotServed(String),
    Failed(String),
}

/// Whether `running` serves `f` ([`crate::lab::protocol::served`]: h2 by
/// ALPN, h3 where the catalog and its `/config` say) and answers `path`
/// over it as the contract says.
fn multiplexed(entry: &Entry, running: &Running, f: Framing, path: &str) -> Result<(), Refused> {
    let addr = crate::lab::protocol::served(entry, running, f, true).map_err(|why| {
        // The row already names the protocol.
        let prefix = format!("does not serve {}: ", f.protocol());
        Refused::NotServed(why.strip_prefix(&prefix).unwrap_or(&why).to_string())
    })?;
    crate::lab::protocol::check_answer(running, f, addr, path)
        .map_err(|why| Refused::Failed(format!("its answer {why}")))
}

impl Ctx<'_> {
    /// `--runs` runs of `conn`'s row `w` at `rate` req/s with `threads`,
    /// summarized.
    #[allow(clippy::too_many_arguments)]
    fn at_fixed_rate(
        &mut self,
        env: Environment,
        conn: Conn,
        entry: &Entry,
        running: &Running,
        w: &EnvWorkload,
        threads: usize,
        rate: f64,
    ) -> super::report::FixedRate {
        let path = w.path.as_str();
        let closed = spread(&w.runs).0;
        let mut runs = Vec::new();
        for _ in 0..self.args.runs {
            if self.interrupted() {
                break;
            }
            match self.measure_at_rate(running, path, threads, rate, conn) {
                Ok(r) => runs.push(r),
                Err(e) => self.notes.push(format!(
                    "{} {} {path} at {rate:.0} req/s: {e:#}",
                    conn.row(env),
                    entry.name
                )),
            }
        }
        let f = fixed_rate::summarize(rate, runs, closed);
        self.say(&format!(
            "  {} {} {path} at {rate:.0} req/s: {:.0} achieved{}, p50 {:.0} µs, p99 {:.0} µs{}",
            conn.row(env),
            entry.name,
            f.achieved_per_s,
            if f.held { "" } else { " (not held)" },
            f.p50_us,
            f.p99_us,
            f.cpu_us_per_request
                .map_or(String::new(), |c| format!(", {c:.1} µs CPU per request"))
        ));
        f
    }
}

/// The rows whose CPU `--profile` breaks down: those with TLS, where the
/// question is how much of it is crypto (Docker's path is metered).
fn profiled(env: Environment) -> bool {
    matches!(env, Environment::TlsServer | Environment::TlsProxy)
}

impl Ctx<'_> {
    /// One more run as `conn`, not counted, under perf: the server's CPU
    /// split into TLS and crypto, handshakes and the front
    /// ([`super::attribution`]).
    fn profile(
        &mut self,
        running: &Running,
        env: Environment,
        conn: Conn,
        entry: &Entry,
        path: &str,
        threads: usize,
    ) -> RowProfile {
        let Some((profiler, dir)) = self.profiler.take() else {
            return RowProfile::default();
        };
        let p = self.profile_with(&profiler, &dir, running, env, conn, entry, path, threads);
        self.profiler = Some((profiler, dir));
        p
    }

    #[allow(clippy::too_many_arguments)]
    fn profile_with(
        &mut self,
        profiler: &Profiler,
        dir: &std::path::Path,
        running: &Running,
        env: Environment,
        conn: Conn,
        entry: &Entry,
        path: &str,
        threads: usize,
    ) -> RowProfile {
        let recording = profiler.start(running);
        let (connections, duration) = (self.args.connections, self.args.duration);
        let run = self.measure_as(running, path, connections, threads, duration, conn);
        self.outside.pop();
        let run = match run {
            Ok(r) if r.requests == 0 || r.cpu_us_per_request.is_none() => {
                // Nothing to divide by: the profile's shares would be of a
                // handful of samples.
                drop(recording);
                return RowProfile {
                    error: Some("the profiled run answered no request".into()),
                    ..RowProfile::default()
                };
            }
            Ok(r) => r,
            Err(e) => {
                return RowProfile {
                    error: Some(format!("the profiled run: {e:#}")),
                    ..RowProfile::default()
                }
            }
        };
        let stem = format!(
            "{}-{}-{}",
            conn.row(env).replace('/', "-"),
            entry.name,
            path.trim_start_matches('/')
        );
        let title = format!("{} {} {path}", conn.row(env), entry.name);
        let p = profiler.finish(recording, running, &stem, &title, run.requests);
        if let Some(why) = p.error {
            return RowProfile {
                error: Some(why),
                ..RowProfile::default()
            };
        }
        let folded = p
            .server_folded
            .as_ref()
            .and_then(|f| std::fs::read_to_string(dir.join(f)).ok())
            .unwrap_or_default();
        let front = match env {
            Environment::TlsProxy => crate::env::tls_proxy::front_pids(running),
            _ => Vec::new(),
        };
        let s = super::attribution::shares(folded.lines(), &front);
        let cpu = run.cpu_us_per_request.unwrap_or(0.0);
        RowProfile {
            svg: p.server_svg,
            folded: p.server_folded,
            cpu_us_per_request: cpu,
            tls_pct: s.pct(s.tls_ns),
            handshake_pct: s.pct(s.handshake_ns),
            front_pct: (!front.is_empty()).then(|| s.pct(s.front_ns)),
            tls_us_per_request: cpu * s.pct(s.tls_ns) / 100.0,
            handshake_us_per_request: cpu * s.pct(s.handshake_ns) / 100.0,
            error: None,
        }
    }
}

/// A row's figures from its runs: RPS and CPU per request (mean, sd),
/// handshakes per second and CPU per handshake, contamination.
pub fn summarize(w: &mut EnvWorkload) {
    let (m, sd, cv) = spread(&w.runs);
    (w.rps_mean, w.rps_sd, w.cv_pct) = (m, sd, cv);
    let cpu: Vec<f64> = w.runs.iter().filter_map(|r| r.cpu_us_per_request).collect();
    if !cpu.is_empty() {
        let (m, sd) = mean_sd(&cpu);
        (w.cpu_us_per_request, w.cpu_us_per_request_sd) = (Some(m), Some(sd));
    }
    let handshakes: u64 = w
        .runs
        .iter()
        .map(|r| r.handshakes_full + r.handshakes_resumed)
        .sum();
    if handshakes > 0 {
        let hs: Vec<f64> = w.runs.iter().map(RunDoc::handshakes_per_s).collect();
        w.handshakes_per_s = Some(mean_sd(&hs).0);
        let requests: u64 = w.runs.iter().map(|r| r.requests).sum();
        w.cpu_us_per_handshake = w
            .cpu_us_per_request
            .map(|c| c * requests as f64 / handshakes as f64);
    }
    w.outside_cpu_pct_max = w.runs.iter().map(|r| r.outside_cpu_pct).fold(0.0, f64::max);
    w.contaminated = w.outside_cpu_pct_max >= CONTAMINATED_PCT;
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

/// Each row's ratios to its baseline (`bare`, or `bare/new-conn`), per
/// server and workload, RPS and CPU per request, each with the spread of
/// both; and the CPU it adds per request. A row with a second row to be
/// read against (h2 and h3 against HTTP/1.1 over TLS) gets those ratios
/// too ([`super::report::Versus`]). A row not served has none.
pub fn apply_ratios(envs: &mut [EnvDoc]) {
    let bases: Vec<(String, EnvWorkload)> = envs
        .iter()
        .filter(|e| e.name == e.baseline && e.status == EnvStatus::Measured)
        .flat_map(|e| e.workloads.iter().map(|w| (e.name.clone(), w.clone())))
        .filter(|(_, w)| w.measured() && w.rps_mean > 0.0)
        .collect();
    for e in envs.iter_mut() {
        let own = e.name == e.baseline;
        for w in e.workloads.iter_mut().filter(|w| w.measured()) {
            let Some((_, base)) = bases
                .iter()
                .find(|(n, b)| *n == e.baseline && b.server == w.server && b.path == w.path)
            else {
                continue;
            };
            let r = ratios(w, base, own);
            (w.ratio_to_bare, w.ratio_sd) = (Some(r.ratio), Some(r.ratio_sd));
            (w.cpu_ratio_to_bare, w.cpu_ratio_sd, w.cpu_us_over_bare) =
                (r.cpu_ratio, r.cpu_ratio_sd, r.cpu_us_over);
        }
    }
    let seconds: Vec<(String, EnvWorkload)> = envs
        .iter()
        .filter(|e| e.status == EnvStatus::Measured)
        .filter(|e| {
            envs.iter()
                .any(|o| o.also_against.as_ref() == Some(&e.name))
        })
        .flat_map(|e| e.workloads.iter().map(|w| (e.name.clone(), w.clone())))
        .filter(|(_, w)| w.measured() && w.rps_mean > 0.0)
        .collect();
    for e in envs.iter_mut() {
        let Some(other) = e.also_against.clone() else {
            continue;
        };
        for w in e.workloads.iter_mut().filter(|w| w.measured()) {
            w.versus = seconds
                .iter()
                .find(|(n, b)| *n == other && b.server == w.server && b.path == w.path)
                .map(|(n, b)| Versus {
                    row: n.clone(),
                    ..ratios(w, b, false)
                });
        }
    }
}

/// `w`'s RPS and CPU per request over `base`'s, each with the spread of
/// both (`own`: `w` is the baseline itself, whose spread is its own).
fn ratios(w: &EnvWorkload, base: &EnvWorkload, own: bool) -> Versus {
    let combined = |cv: f64, base_cv: f64| {
        if own {
            base_cv
        } else {
            (cv.powi(2) + base_cv.powi(2)).sqrt()
        }
    };
    let r = w.rps_mean / base.rps_mean;
    let cv = |m: Option<f64>, sd: Option<f64>| match (m, sd) {
        (Some(m), Some(sd)) if m > 0.0 => Some(sd / m),
        _ => None,
    };
    let mut v = Versus {
        row: String::new(),
        ratio: r,
        ratio_sd: r * combined(w.cv_pct / 100.0, base.cv_pct / 100.0),
        cpu_ratio: None,
        cpu_ratio_sd: None,
        cpu_us_over: None,
    };
    if let (Some(c), Some(b), Some(ccv), Some(bcv)) = (
        w.cpu_us_per_request,
        base.cpu_us_per_request.filter(|&b| b > 0.0),
        cv(w.cpu_us_per_request, w.cpu_us_per_request_sd),
        cv(base.cpu_us_per_request, base.cpu_us_per_request_sd),
    ) {
        let r = c / b;
        v.cpu_ratio = Some(r);
        v.cpu_ratio_sd = Some(r * combined(ccv, bcv));
        v.cpu_us_over = Some(c - b);
    }
    v
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
        let mut w = EnvWorkload {
            runs,
            ..EnvWorkload::new("s", path)
        };
        summarize(&mut w);
        EnvDoc::measured(name, vec![w])
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
    fn h2_and_h3_rows_are_read_against_bare_and_http1_over_tls_and_a_row_not_served_has_no_ratio() {
        let with_cpu = |mut d: EnvDoc, cpu: f64| {
            for r in &mut d.workloads[0].runs {
                (r.cpu_us_per_request, r.requests) = (Some(cpu), 1000);
            }
            summarize(&mut d.workloads[0]);
            d
        };
        let mut h3 = with_cpu(env_doc("tls-server/h3", "/hello", &[40.0, 40.0]), 30.0);
        h3.also_against = Some("tls-server".into());
        let mut served_not = env_doc("tls-server/h3", "/hello", &[]);
        served_not.workloads[0].server = "other".into();
        served_not.workloads[0].not_served = Some("does not serve h3: no QUIC".into());
        h3.workloads.extend(served_not.workloads);
        let mut envs = vec![
            with_cpu(env_doc("bare", "/hello", &[100.0, 100.0]), 10.0),
            with_cpu(env_doc("tls-server", "/hello", &[80.0, 80.0]), 15.0),
            h3,
        ];
        apply_ratios(&mut envs);
        let w = &envs[2].workloads[0];
        assert!((w.ratio_to_bare.unwrap() - 0.4).abs() < 1e-9, "{w:?}");
        assert!((w.cpu_ratio_to_bare.unwrap() - 3.0).abs() < 1e-9, "{w:?}");
        let v = w.versus.as_ref().unwrap();
        assert_eq!(v.row, "tls-server");
        assert!((v.ratio - 0.5).abs() < 1e-9, "{v:?}");
        assert!((v.cpu_ratio.unwrap() - 2.0).abs() < 1e-9, "{v:?}");
        assert!((v.cpu_us_over.unwrap() - 15.0).abs() < 1e-9, "{v:?}");
        // Not served: no fake 0, no ratio at all.
        let n = &envs[2].workloads[1];
        assert_eq!((n.ratio_to_bare, n.versus.as_ref()), (None, None));
        // HTTP/1.1 over TLS has no second row.
        assert!(envs[1].workloads[0].versus.is_none());
    }

    #[test]
    fn tls_server_brings_its_h2_and_h3_rows_only_when_asked() {
        let rows: Vec<String> = Conn::of(Environment::TlsServer, true)
            .iter()
            .map(|c| c.row(Environment::TlsServer))
            .collect();
        assert_eq!(
            rows,
            [
                "tls-server",
                "tls-server/h2",
                "tls-server/h3",
                "tls-server/new-conn",
                "tls-server/new-conn-full"
            ]
        );
        assert_eq!(Conn::H3.baseline(), "bare");
        assert_eq!(
            Conn::H2.also_against(Environment::TlsServer).as_deref(),
            Some("tls-server")
        );
        assert_eq!(Conn::H3.framing(16), Some(Framing::H3(16)));
        assert!(Conn::of(Environment::Bare, true)
            .iter()
            .all(|c| c.framing(16).is_none()));
    }

    #[test]
    fn the_noise_verdict_follows_the_cv() {
        assert_eq!(verdict(2.9).0, "quiet");
        assert_eq!(verdict(3.0).0, "noisy");
    }
}
