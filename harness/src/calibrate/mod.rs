//! `harness calibrate` (DESIGN.md §6): what this machine and environment
//! cost, before any server comparison is believed.
//!
//! 1. Machine facts ([`facts`]): CPU, cores, governor, kernel, memory, load
//!    and steal before and after, timer resolution, perf counters, the
//!    scheduler's autogroups and which of the run's processes share one, and
//!    the CPU taken by processes outside the run during each run.
//! 2. Reference ceilings: each reference server's `/hello` and `/work` on
//!    bare loopback; the best of each is the server every environment is
//!    measured with.
//! 3. Noise: `--noise-runs` identical runs of the fastest `/hello`; the
//!    coefficient of variation decides "quiet" (< 3%) or "noisy".
//! 4. Floors ([`floors`]): the loopback round trip at one connection (raw
//!    TCP and `GET /hello`), the database's raw `SELECT 1` rate at 20
//!    connections.
//! 5. Environments ([`crate::env`]): `--runs` runs of `/hello` and `/work`
//!    in each, reported as a ratio to `bare` with its run-to-run spread.
//!
//! The text report goes to stdout (`--json`: the document of
//! `harness/schema/calibrate.schema.json` instead), progress to stderr.
//! Ctrl-C stops the run; servers, the database and every namespace, link
//! and NAT rule are removed on every exit path.

pub mod facts;
pub mod floors;
pub mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use crate::catalog::embedded::Embedded;
use crate::catalog::{self, supervise, Availability, Db, Entry, Running, StartCtx};
use crate::cli::parse_duration;
use crate::compare::results::mean_sd;
use crate::engine::{self, Control, Plan, Request, Stop};
use crate::env::{Environment, Setup};
use crate::stats::Percentiles;
use facts::CpuMeter;
use report::{
    Calibration, Ceiling, Contamination, EnvDoc, EnvWorkload, Floors, Noise, RunDoc, Settings,
};

/// The noise verdict's threshold: CV below it is "quiet".
pub const QUIET_CV_PCT: f64 = 3.0;
/// Connections of the database's `SELECT 1` ceiling.
pub const DB_CONNECTIONS: u32 = 20;

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Measures the machine and each environment before any server comparison is
believed: machine facts (CPU, cores, governor, kernel, memory, load and
steal time, timer resolution, perf counters, scheduler autogroups, CPU
taken by other processes during each run); the reference servers' /hello
and /work on bare loopback (the ceilings every other server here is read
against); run-to-run noise (CV of --noise-runs runs: quiet below 3%);
the loopback round trip at 1 connection; the database's raw SELECT 1 rate
at 20 connections; and each --env as a ratio to bare, with its spread.

Environments:
  bare           loopback
  pinned         server and load generator on disjoint CPU sets
  bridge-direct  server in a network namespace behind veth + Linux bridge,
                 reached at its own address, no NAT (the bridge alone)
  bridge         server in a network namespace, veth + Linux bridge, port
                 published by nftables DNAT from 127.0.0.1 (Docker's bridge
                 with userland-proxy: false); needs root, ip and nft
  bridge-proxy   the same through a userland TCP proxy (docker-proxy, the
                 default for clients on the host itself)
  docker-bridge, docker-host   listed; not driven by this harness yet
Namespaces use 198.18.0.0/15 (RFC 2544); everything is removed at exit.

Examples:
  harness calibrate
  harness calibrate --env bare,pinned,bridge-direct,bridge,bridge-proxy --json > env.json
  harness calibrate --env bare,bridge,bridge-proxy --env-servers php-fpm,node
  harness calibrate --env bare,bridge -d 5s --runs 5")]
pub struct CalibrateArgs {
    /// Environments, comma-separated (bare is always measured: ratios are to it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bare,pinned,bridge-direct,bridge,bridge-proxy,docker-bridge,docker-host",
        value_name = "LIST"
    )]
    pub env: Vec<String>,

    /// Reference servers from the catalog, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "event-loop,event-loop-x2,coroutine,worker-pool",
        value_name = "NAMES"
    )]
    pub servers: Vec<String>,

    /// Servers measured in every environment, comma-separated, any in the
    /// catalog (php-fpm, node, ...): how much Docker's network costs *them*.
    /// Default: the fastest reference server, per workload.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub env_servers: Vec<String>,

    /// Connections of every loaded run.
    #[arg(short = 'c', long, default_value_t = 100, value_name = "N")]
    pub connections: usize,

    /// Length of each measured run.
    #[arg(short = 'd', long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Load before each server's runs, not counted.
    #[arg(long, default_value = "500ms", value_parser = parse_duration, value_name = "DURATION")]
    pub warmup: Duration,

    /// Runs per environment and workload.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub runs: u32,

    /// Runs of the noise measurement.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub noise_runs: u32,

    /// Engine threads (default: the number of cores; pinned: its CPU set's).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// Use this database instead of starting a private MariaDB.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// Print the JSON document (calibrate.schema.json) instead of the text.
    #[arg(long)]
    pub json: bool,

    /// The repository (target/ with the server binaries).
    #[arg(long, value_name = "DIR")]
    pub repo_dir: Option<PathBuf>,
}

/// What every measurement shares.
struct Ctx<'a> {
    args: &'a CalibrateArgs,
    env: catalog::Env,
    db: Option<Db>,
    db_pid: Option<u32>,
    interrupt: Arc<AtomicBool>,
    threads: usize,
    /// Outside CPU of every run, for the contamination summary.
    outside: Vec<f64>,
    /// (label, pid) of every process of the run, for the autogroup table.
    processes: Vec<(String, i32, String)>,
    notes: Vec<String>,
}

impl Ctx<'_> {
    fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }

    fn say(&self, line: &str) {
        eprintln!("calibrate: {line}");
    }

    fn start(&mut self, entry: &Entry, setup: Option<&Setup>) -> anyhow::Result<Running> {
        let placement = setup.map(Setup::placement).unwrap_or_default();
        let running = entry.start_placed(
            &StartCtx {
                env: &self.env,
                db: self.db.as_ref(),
                interrupt: &self.interrupt,
            },
            &placement,
        )?;
        for n in &running.notes {
            if !self.notes.contains(n) {
                self.notes.push(n.clone());
            }
        }
        for s in catalog::procfs::tree(&running.pids()) {
            self.processes.push(facts::member(&entry.name, s.pid));
        }
        Ok(running)
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
        let url = format!("http://{}{path}", running.authority);
        let request = Request::encode("GET", path, &running.authority, &[], true);
        let mut plan = Plan::new(
            &url,
            running.addr,
            request,
            crate::run::check_for("GET", path, true),
        );
        plan.connections = connections;
        plan.threads = threads;
        plan.stop = Stop::Duration(length);
        plan.max_duration = length;
        let control = Control {
            interrupt: self.interrupt.clone(),
        };
        let pids = running.pids();
        let meter = CpuMeter::start(&pids, self.db_pid);
        let r =
            engine::run(&plan, &control, &mut |_| {}).with_context(|| format!("load on {url}"))?;
        let share = meter.finish(&pids, self.db_pid);
        if let Some(m) = &r.message {
            if !r.interrupted() {
                bail!("{url}: {m}");
            }
        }
        let p = Percentiles::of(&r.stats.latency_us);
        let doc = RunDoc {
            rps: r.ok_per_s(),
            p50_us: p.p50,
            p99_us: p.p99,
            failures: r.stats.failures.total(),
            outside_cpu_pct: share.outside_cpu_pct,
            steal_pct: share.steal_pct,
        };
        self.outside.push(doc.outside_cpu_pct);
        if doc.failures > 0 {
            self.notes.push(format!(
                "{url}: {} failed requests in one run",
                doc.failures
            ));
        }
        Ok(doc)
    }

    fn warm(&mut self, running: &Running, path: &str, threads: usize) -> anyhow::Result<()> {
        if !self.args.warmup.is_zero() {
            let w = self.args.warmup;
            self.measure(running, path, self.args.connections, threads, w)?;
            self.outside.pop();
        }
        Ok(())
    }
}

fn start_database(
    args: &CalibrateArgs,
    embedded: &mut Embedded,
) -> anyhow::Result<(Option<Db>, floors::DbCeiling)> {
    let mut doc = floors::DbCeiling {
        kind: "none".into(),
        version: None,
        connections: DB_CONNECTIONS,
        select1_per_s: None,
        note: None,
    };
    if let Some(url) = &args.mysql_url {
        let d = Db::parse(url).context("bad --mysql-url")?;
        doc.kind = "external".into();
        doc.version = floors::version(&d);
        return Ok((Some(d), doc));
    }
    if let Err(e) = embedded_mariadb::availability() {
        doc.note = Some(format!("{e}: /work is not measured (or pass --mysql-url)"));
        return Ok((None, doc));
    }
    let opts = embedded_mariadb::Options {
        port: None,
        max_connections: 1000,
    };
    let m = embedded_mariadb::MariaDb::start(opts.clone())
        .or_else(|_| embedded_mariadb::MariaDb::start(opts))
        .context("cannot start the private MariaDB")?;
    let (d, version) = embedded.adopt(m)?;
    doc.kind = "embedded".into();
    doc.version = version;
    Ok((Some(d), doc))
}

/// Mean, sd, CV% of the runs' RPS.
fn spread(runs: &[RunDoc]) -> (f64, f64, f64) {
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

/// Catalog entries by name (a comma list already split by clap).
fn catalog_entries(names: &[String]) -> anyhow::Result<Vec<Entry>> {
    let all = catalog::catalog();
    let mut out: Vec<Entry> = Vec::new();
    for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = all.iter().find(|e| e.name == n).with_context(|| {
            format!(
                "unknown server {n:?}; the catalog has: {}",
                all.iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        if !out.iter().any(|o| o.name == e.name) {
            out.push(e.clone());
        }
    }
    Ok(out)
}

/// Each environment's ratio to bare, per server and workload, with the
/// spread of both.
pub fn apply_ratios(envs: &mut [EnvDoc]) {
    let bare: Vec<(String, String, f64, f64)> = envs
        .iter()
        .filter(|e| e.name == "bare" && e.status == "measured")
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

/// The `calibrate` command.
pub fn run(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    if args.runs == 0 || args.noise_runs < 2 {
        bail!("--runs must be at least 1 and --noise-runs at least 2");
    }
    if args.connections == 0 || args.duration.is_zero() || args.threads == Some(0) {
        bail!("-c, -d and --threads must be positive");
    }
    let mut envs = Environment::parse_list(&args.env)?;
    if !envs.contains(&Environment::Bare) {
        envs.insert(0, Environment::Bare);
    }
    let mut entries = catalog_entries(&args.servers)?;
    let mut env_entries = catalog_entries(&args.env_servers)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    supervise::install_signal_handlers(interrupt.clone())?;
    crate::machine::raise_nofile();
    let started_utc = crate::compare::results::now_utc();
    let (mut machine, ticks0) = facts::before();
    let cat_env = catalog::Env::discover(args.repo_dir.as_deref());
    let mut notes = Vec::new();
    for list in [&mut entries, &mut env_entries] {
        list.retain(|e| match e.availability(&cat_env) {
            Availability::Ready(_) => true,
            Availability::Missing { reason, fix } => {
                let note = format!("{}: not measured: {reason} ({fix})", e.name);
                if !notes.contains(&note) {
                    notes.push(note);
                }
                false
            }
        });
    }
    if !args.env_servers.is_empty() && env_entries.is_empty() {
        bail!("none of --env-servers can run here: {}", notes.join("; "));
    }
    if entries.is_empty() {
        bail!(
            "none of the reference servers can run here: {}",
            notes.join("; ")
        );
    }
    let mut embedded = Embedded::default();
    let (db, mut db_doc) = start_database(&args, &mut embedded)?;
    let db_pid = embedded.pid();
    let threads = args.threads.unwrap_or_else(engine::default_threads);
    let mut ctx = Ctx {
        args: &args,
        env: cat_env,
        db,
        db_pid,
        interrupt: interrupt.clone(),
        threads,
        outside: Vec::new(),
        processes: vec![facts::member("harness", std::process::id() as i32)],
        notes,
    };
    if let Some(pid) = db_pid {
        ctx.processes.push(facts::member("mariadbd", pid as i32));
    }
    let measured_envs = envs.iter().filter(|e| e.availability().is_ok()).count();
    let per_run = (args.duration + Duration::from_millis(100)).as_secs_f64();
    // server × workload pairs measured in each environment
    let db_workloads = if ctx.db.is_some() { 2 } else { 1 };
    let env_cells = db_workloads * env_entries.len().max(1);
    let eta = entries.len() as f64 * 2.0 * (per_run + args.warmup.as_secs_f64() + 0.5)
        + args.noise_runs as f64 * per_run
        + 4.0
        + measured_envs as f64
            * env_cells as f64
            * (args.runs as f64 * per_run + args.warmup.as_secs_f64() + 1.0);
    ctx.say(&format!(
        "{} reference servers, {} environments measurable here: about {:.0} s",
        entries.len(),
        measured_envs,
        eta
    ));

    // Ceilings: every reference server, bare.
    let workloads: Vec<(&str, &str)> = if ctx.db.is_some() {
        vec![("hello", "/hello"), ("work", "/work")]
    } else {
        vec![("hello", "/hello")]
    };
    let mut ceilings = Vec::new();
    for e in &entries {
        if ctx.interrupted() {
            break;
        }
        let mut c = Ceiling {
            server: e.name.clone(),
            hello_rps: None,
            work_rps: None,
            note: None,
        };
        match ctx.start(e, None) {
            Ok(mut running) => {
                for &(name, path) in &workloads {
                    if !e.serves(path) || ctx.interrupted() {
                        continue;
                    }
                    let r = ctx.warm(&running, path, threads).and_then(|()| {
                        ctx.measure(&running, path, args.connections, threads, args.duration)
                    });
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
    let best = |f: fn(&Ceiling) -> Option<f64>| -> Option<Entry> {
        ceilings
            .iter()
            .filter(|c| f(c).is_some())
            .filter(|c| entries.iter().any(|e| e.name == c.server && e.placeable()))
            .max_by(|a, b| f(a).unwrap_or(0.0).total_cmp(&f(b).unwrap_or(0.0)))
            .and_then(|c| entries.iter().find(|e| e.name == c.server).cloned())
    };
    let best_hello = best(|c| c.hello_rps);
    let best_work = best(|c| c.work_rps);

    // Noise and the HTTP floor on the fastest /hello; the TCP floor; the DB.
    let mut noise = None;
    let mut floors_doc = Floors {
        tcp_loopback_rtt: None,
        http_hello_c1: None,
        http_hello_c1_server: None,
    };
    if let Some(e) = best_hello.as_ref().filter(|_| !ctx.interrupted()) {
        match ctx.start(e, None) {
            Ok(mut running) => {
                let mut runs = Vec::new();
                let _ = ctx.warm(&running, "/hello", threads);
                for _ in 0..args.noise_runs {
                    if ctx.interrupted() {
                        break;
                    }
                    match ctx.measure(&running, "/hello", args.connections, threads, args.duration)
                    {
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
    if let Some(d) = ctx.db.as_ref().filter(|_| !ctx.interrupted()) {
        match floors::select1_rate(d, DB_CONNECTIONS, 200_000) {
            Ok(r) => {
                ctx.say(&format!("database: {r:.0} SELECT 1/s"));
                db_doc.select1_per_s = Some(r)
            }
            Err(err) => db_doc.note = Some(format!("{err:#}")),
        }
    }

    // Environments: the fastest reference server per workload, or each of
    // --env-servers on every workload it serves.
    let plan: Vec<(&str, Entry)> = if env_entries.is_empty() {
        [("/hello", best_hello.clone()), ("/work", best_work.clone())]
            .into_iter()
            .filter_map(|(p, e)| Some((p, e?)))
            .collect()
    } else {
        workloads
            .iter()
            .flat_map(|&(_, path)| {
                env_entries
                    .iter()
                    .filter(move |e| e.serves(path))
                    .map(move |e| (path, e.clone()))
            })
            .collect()
    };
    let mut env_docs = Vec::new();
    for env in &envs {
        let mut doc = EnvDoc {
            name: env.name().into(),
            description: env.describe().into(),
            status: "measured".into(),
            reason: None,
            detail: None,
            checks: Vec::new(),
            workloads: Vec::new(),
        };
        if let Err(why) = env.availability() {
            doc.status = "not_available".into();
            doc.reason = Some(why);
            env_docs.push(doc);
            continue;
        }
        if ctx.interrupted() {
            doc.status = "interrupted".into();
            env_docs.push(doc);
            continue;
        }
        ctx.say(&format!("environment {}", env.name()));
        let db_port = ctx
            .db
            .as_ref()
            .filter(|d| d.host == "127.0.0.1" || d.host == "localhost")
            .map(|d| d.port);
        let mut setup = match Setup::build(*env, db_port) {
            Ok(s) => s,
            Err(err) => {
                doc.status = "failed".into();
                doc.reason = Some(format!("{err:#}"));
                env_docs.push(doc);
                continue;
            }
        };
        doc.detail = Some(setup.detail());
        for (path, entry) in &plan {
            if ctx.interrupted() {
                break;
            }
            let w = measure_env(&mut ctx, &setup, entry, path, &mut doc.checks);
            doc.workloads.push(w);
        }
        for e in setup.teardown() {
            ctx.notes.push(format!("{}: teardown: {e}", env.name()));
        }
        drop(setup);
        if ctx.interrupted() {
            doc.status = "interrupted".into();
        }
        env_docs.push(doc);
    }
    apply_ratios(&mut env_docs);
    drop(embedded);

    facts::after(&mut machine, ticks0);
    machine.autogroups = facts::autogroups(&ctx.processes);
    let outside = &ctx.outside;
    let contamination = Contamination {
        runs: outside.len() as u64,
        outside_cpu_pct_mean: if outside.is_empty() {
            0.0
        } else {
            outside.iter().sum::<f64>() / outside.len() as f64
        },
        outside_cpu_pct_max: outside.iter().copied().fold(0.0, f64::max),
        note: "user+nice+system time of /proc/stat not charged to the harness, the servers' \
               process trees or the database, in % of all cores (kernel threads such as \
               ksoftirqd count as outside)"
            .into(),
    };
    let interrupted = ctx.interrupted();
    let doc = Calibration {
        schema: report::SCHEMA.into(),
        harness_version: env!("CARGO_PKG_VERSION").into(),
        started_utc,
        finished_utc: crate::compare::results::now_utc(),
        interrupted,
        command: std::env::args().collect(),
        settings: Settings {
            environments: envs.iter().map(|e| e.name().to_string()).collect(),
            servers: entries.iter().map(|e| e.name.clone()).collect(),
            env_servers: env_entries.iter().map(|e| e.name.clone()).collect(),
            connections: args.connections as u64,
            threads: threads as u64,
            duration_s: args.duration.as_secs_f64(),
            warmup_s: args.warmup.as_secs_f64(),
            runs: args.runs,
            noise_runs: args.noise_runs,
        },
        machine,
        noise,
        floors: floors_doc,
        ceilings,
        database: db_doc,
        environments: env_docs,
        contamination,
        notes: ctx.notes,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).context("cannot encode the document")?
        );
    } else {
        print!("{}", report::text(&doc));
    }
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// One workload in one environment: start the server placed, verify the
/// placement, publish it, warm up, `--runs` runs, stop.
fn measure_env(
    ctx: &mut Ctx,
    setup: &Setup,
    entry: &Entry,
    path: &str,
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
        let mut running = ctx.start(entry, Some(setup))?;
        let published = setup.publish(running.addr)?;
        w.route = published.path.clone();
        Setup::redirect(&mut running, &published);
        let threads = match (ctx.args.threads, setup.load_cpus()) {
            (None, Some(cpus)) => cpus.len(),
            _ => ctx.threads,
        };
        let _pin = setup.pin_load()?;
        for c in setup.verify(&running.pids())? {
            if !checks.contains(&c) {
                checks.push(c);
            }
        }
        ctx.warm(&running, path, threads)?;
        for _ in 0..ctx.args.runs {
            if ctx.interrupted() {
                break;
            }
            let r = ctx.measure(
                &running,
                path,
                ctx.args.connections,
                threads,
                ctx.args.duration,
            )?;
            w.runs.push(r);
        }
        running.stop();
        Ok(())
    })();
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
            status: "measured".into(),
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
