//! `harness calibrate` (docs/ARCHITECTURE.md §6): what this machine and environment
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

pub mod attribution;
pub mod emulation;
pub mod facts;
pub mod fixed_rate;
pub mod floors;
mod measure;
pub mod report;
pub mod tax;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use crate::catalog::Entry;
use crate::env::Environment;
use crate::lab::args::LabArgs;
use crate::lab::driver::Selection;
use crate::lab::record::Header;
use crate::lab::Lab;
use crate::units::parse_duration;
pub use measure::{apply_ratios, spread, summarize, verdict};
use measure::{say, Ctx};
use report::{Calibration, Contamination, Settings};

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
at 20 connections; and each --env as a ratio to bare, RPS and the
server's CPU per request (its process tree and the proxies on its path),
each with its spread, every row marked where other processes took 10% of
the machine or more during a run of it (contaminated). Each keep-alive row
(HTTP/1.1, and tls-server's h2 and h3) is also run at one fixed offered
rate (--rate: 10% of bare's req/s per server and workload by default),
the same in every environment: p50 and p99 from each request's intended
send and the µs they add to bare's at that rate, the server's CPU per request and its ratio to bare's, whether
the rate was held and below the row's knee, and the generator's lateness,
beside the saturation ratios.

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
  docker         the real Docker Engine: the same program, build and config
                 in a container on a bridge network of the lab's, its port
                 published on 127.0.0.1 (docker-proxy); the database in a
                 container of the same network
  docker-host    a container with --network host (database on loopback)
  docker-host-pinned  the same with --cpuset-cpus, the load on the other CPUs
  tls-server     loopback, the server terminating TLS 1.3 itself (a
                 certificate made for the run), HTTP/1.1 kept alive; brings
                 two rows in other protocols, kept alive, read against bare
                 (plaintext HTTP/1.1) and against tls-server's HTTP/1.1:
                 tls-server/h2 (h2 by ALPN) and tls-server/h3 (HTTP/3 over
                 QUIC on the UDP port of the TCP one's number; event-loop is
                 started with --h3), each with --streams requests in flight
                 per connection; a server that does not serve one gets a row
                 saying why. And three with a new connection per request:
                 tls-server/new-conn (a resumed handshake each),
                 tls-server/new-conn-full (a full one), both read against
                 bare/new-conn (plaintext), with handshakes/s and the
                 server's CPU per handshake
  tls-proxy      loopback behind an nginx terminating TLS, plain HTTP/1.1 to
                 the server; nginx's CPU counts as the server's
Namespaces use 198.18.0.0/15 (RFC 2544); everything is removed at exit. The
Docker image is made once from Debian's packages (no registry needed) and
cached; beside each Docker figure the report says how well the emulated
bridge-proxy and bridge predicted it, and docker-proxy's CPU per request.
With tls-server, tls-proxy or docker, a sentence per server and workload
says which costs it the most CPU per request and why (--profile: the
share of its CPU in TLS and crypto code, handshakes, the proxy's nginx),
and with tls-server what h2 and h3 cost it beside HTTP/1.1 over TLS.

Examples:
  harness calibrate
  harness calibrate --env bare,pinned,bridge-direct,bridge,bridge-proxy --json > env.json
  harness calibrate --env bare,bridge,bridge-proxy --env-servers php-fpm,node
  harness calibrate --env bare,bridge -d 5s --runs 5
  harness calibrate --env bare,docker,docker-host,tls-server,tls-proxy --rate 2000
  harness calibrate --env bare,tls-server,tls-proxy,docker --env-servers event-loop,php-fpm --profile
  harness calibrate --env bare,tls-server --env-servers event-loop,caddy-static,node --streams 16")]
#[command(mut_arg("servers", |a| a
    .default_value("event-loop,event-loop-x2,coroutine,worker-pool")
    .help("Reference servers from the catalog, comma-separated")))]
#[command(mut_arg("out", |a| a.help(
    "Also write calibration.json and calibration.txt to DIR/<UTC time>-calibrate/ \
     (default: print only)"
)))]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub lab: LabArgs,

    /// Environments, comma-separated (bare is always measured: ratios are to it).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bare,pinned,bridge-direct,bridge,bridge-proxy,docker,docker-host,docker-host-pinned",
        value_name = "LIST"
    )]
    pub env: Vec<String>,

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

    /// The fixed-rate runs' offered rate (the engine's open loop, latency
    /// from each request's intended send), the same in every environment
    /// per server and workload: req/s (2000), a share of bare's
    /// closed-loop req/s (10%), or off. --runs runs each, keep-alive rows.
    #[arg(long, default_value = "10%", value_name = "RATE")]
    pub rate: fixed_rate::RateChoice,

    /// Requests in flight per connection in tls-server's h2 and h3 rows
    /// (HTTP/1.1's rows have one).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub streams: u16,

    /// Print the JSON document (calibrate.schema.json) instead of the text.
    #[arg(long)]
    pub json: bool,

    /// After the counted runs of each TLS row (tls-server, its handshake
    /// rows, tls-proxy), one more run under perf: the share of the server's
    /// CPU in TLS and crypto code, in handshakes and in the proxy's nginx,
    /// and the flame graphs, in profiles/ of the calibration's directory
    /// (--out, default results/).
    #[arg(long)]
    pub profile: bool,
}

impl CalibrateArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if self.runs == 0 || self.noise_runs < 2 {
            bail!("--runs must be at least 1 and --noise-runs at least 2");
        }
        if self.connections == 0 || self.duration.is_zero() || self.threads == Some(0) {
            bail!("-c, -d and --threads must be positive");
        }
        if self.streams == 0 {
            bail!("--streams must be at least 1");
        }
        Ok(())
    }

    /// `--env`, with bare first (every ratio is to it).
    fn environments(&self) -> anyhow::Result<Vec<Environment>> {
        let mut envs = Environment::parse_list(&self.env)?;
        // Bare first: the fixed-rate runs' share is of its figure.
        envs.retain(|e| *e != Environment::Bare);
        envs.insert(0, Environment::Bare);
        Ok(envs)
    }
}

/// The `calibrate` command.
pub fn run(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    args.validate()?;
    let envs = args.environments()?;
    let mut lab = Lab::open(&args.lab)?;
    // tls-server's h3 row: a server that serves HTTP/3 only when asked
    // (event-loop's --h3) serves it, with TLS only (so not on bare).
    lab.h3 = envs.contains(&Environment::TlsServer);
    let mut header = Header::start(report::SCHEMA);
    let (mut machine, ticks0) = facts::before();
    let mut notes = Vec::new();
    let entries = runnable_here(Selection::named(&lab, &args.lab.servers)?, &mut notes);
    let env_entries = runnable_here(Selection::named(&lab, &args.env_servers)?, &mut notes);
    if !args.env_servers.is_empty() && env_entries.is_empty() {
        bail!("none of --env-servers can run here: {}", notes.join("; "));
    }
    if entries.is_empty() {
        bail!(
            "none of the reference servers can run here: {}",
            notes.join("; ")
        );
    }
    lab.start_database(args.lab.mysql_url.as_deref(), &say)?;
    let mut ctx = Ctx {
        args: &args,
        lab: &lab,
        threads: args.threads.unwrap_or_else(crate::engine::default_threads),
        outside: Vec::new(),
        processes: vec![facts::member("harness", std::process::id() as i32)],
        notes,
        env_db_pid: None,
        path_pids: Vec::new(),
        rate: args.rate,
        bare_rps: Vec::new(),
        profiler: args.profile.then(|| {
            let dir = args.lab.out_dir().join(header.dir_name("-calibrate"));
            (crate::lab::profile::Profiler::new(dir.clone()), dir)
        }),
    };
    if let Some(why) = ctx.profiler.as_ref().and_then(|(p, _)| p.unavailable()) {
        let note = format!("--profile: no profiles: {why}");
        ctx.say(&note);
        ctx.notes.push(note);
    }
    ctx.processes.extend(
        lab.database
            .pid()
            .map(|p| facts::member("mariadbd", p as i32)),
    );
    ctx.say(&eta(&args, &lab, &envs, entries.len(), env_entries.len()));

    let ceilings = measure::ceilings(&mut ctx, &entries);
    let best_hello = measure::best(&ceilings, &entries, |c| c.hello_rps);
    let best_work = measure::best(&ceilings, &entries, |c| c.work_rps);
    let (noise, floors_doc) = measure::noise_and_floors(&mut ctx, best_hello.as_ref());
    let db_doc = measure::database(&ctx);
    let plan = env_plan(&lab, &env_entries, best_hello, best_work);
    // A handshake per request beside keep-alive, where TLS at the server is asked for.
    let handshakes = envs.contains(&Environment::TlsServer);
    let mut env_docs: Vec<_> = envs
        .iter()
        .flat_map(|&e| measure::environment(&mut ctx, e, measure::Conn::of(e, handshakes), &plan))
        .collect();
    apply_ratios(&mut env_docs);
    fixed_rate::apply_added(&mut env_docs);
    let emulation = emulation::predictions(&env_docs);
    let tax = tax::sentences(&env_docs, args.profile);
    header.finish(ctx.interrupted());
    let (outside, processes, notes, threads) = (ctx.outside, ctx.processes, ctx.notes, ctx.threads);
    drop(lab);

    facts::after(&mut machine, ticks0);
    machine.autogroups = facts::autogroups(&processes);
    let doc = Calibration {
        header,
        settings: settings(&args, &envs, &entries, &env_entries, threads),
        machine,
        noise,
        floors: floors_doc,
        ceilings,
        database: db_doc,
        environments: env_docs,
        contamination: Contamination::of(&outside),
        notes,
        docker_engine: envs.iter().any(|e| e.is_docker()).then(|| {
            match crate::env::docker::Engine::probe() {
                Ok(e) => e.describe(),
                Err(why) => format!("not available: {why}"),
            }
        }),
        emulation,
        tax,
    };
    let json = serde_json::to_string_pretty(&doc).context("cannot encode the document")?;
    let text = report::text(&doc);
    if args.lab.out.is_some() || args.profile {
        let dir = args.lab.out_dir().join(doc.header.dir_name("-calibrate"));
        write_files(&dir, &json, &text)?;
        say(&format!("written: {}", dir.display()));
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{text}");
    }
    Ok(if doc.header.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// calibration.json and calibration.txt under `dir`.
fn write_files(dir: &std::path::Path, json: &str, text: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, body) in [("calibration.json", json), ("calibration.txt", text)] {
        let path = dir.join(name);
        std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// What each environment measures: the fastest reference server per
/// workload, or each of `--env-servers` on every workload it serves.
fn env_plan(
    lab: &Lab,
    env_entries: &[Entry],
    best_hello: Option<Entry>,
    best_work: Option<Entry>,
) -> Vec<(Entry, &'static str)> {
    if env_entries.is_empty() {
        return [("/hello", best_hello), ("/work", best_work)]
            .into_iter()
            .filter_map(|(p, e)| Some((e?, p)))
            .collect();
    }
    measure::workloads(lab)
        .into_iter()
        .flat_map(|(_, path)| {
            env_entries
                .iter()
                .filter(move |e| e.serves(path))
                .map(move |e| (e.clone(), path))
        })
        .collect()
}

/// The entries that can run here; a note for each that cannot.
fn runnable_here(selection: Selection, notes: &mut Vec<String>) -> Vec<Entry> {
    for m in &selection.missing {
        let note = format!("{}: not measured: {} ({})", m.name, m.reason, m.fix);
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    selection.runnable()
}

/// How long the calibration will take, in a line.
fn eta(
    args: &CalibrateArgs,
    lab: &Lab,
    envs: &[Environment],
    servers: usize,
    env_servers: usize,
) -> String {
    let measured_envs = envs.iter().filter(|e| e.availability().is_ok()).count();
    // Rows per environment: tls-server's handshake rows, and with
    // --profile one more run per TLS row.
    let handshakes = envs.contains(&Environment::TlsServer);
    let rows: f64 = envs
        .iter()
        .filter(|e| e.availability().is_ok())
        .map(|&e| {
            let conns = measure::Conn::of(e, handshakes);
            let n = conns.len() as f64;
            let tls = matches!(e, Environment::TlsServer | Environment::TlsProxy);
            let fixed = if args.rate == fixed_rate::RateChoice::Off {
                0.0
            } else {
                (args.runs as usize * conns.iter().filter(|c| c.keeps_alive()).count()) as f64
            };
            n * (args.runs as f64 + if args.profile && tls { 1.0 } else { 0.0 }) + fixed
        })
        .sum();
    let per_run = (args.duration + Duration::from_millis(100)).as_secs_f64();
    let warmup = args.warmup.as_secs_f64();
    // server × workload pairs measured in each environment
    let env_cells = measure::workloads(lab).len() * env_servers.max(1);
    let eta = servers as f64 * 2.0 * (per_run + warmup + 0.5)
        + args.noise_runs as f64 * per_run
        + 4.0
        + env_cells as f64 * (rows * per_run + measured_envs as f64 * (warmup + 1.0));
    format!("{servers} reference servers, {measured_envs} environments measurable here: about {eta:.0} s")
}

fn settings(
    args: &CalibrateArgs,
    envs: &[Environment],
    entries: &[Entry],
    env_entries: &[Entry],
    threads: usize,
) -> Settings {
    Settings {
        environments: envs.iter().map(|e| e.name().to_string()).collect(),
        servers: entries.iter().map(|e| e.name.clone()).collect(),
        env_servers: env_entries.iter().map(|e| e.name.clone()).collect(),
        connections: args.connections as u64,
        threads: threads as u64,
        duration_s: args.duration.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        runs: args.runs,
        noise_runs: args.noise_runs,
        fixed_rate: args.rate.describe(),
        streams: u32::from(args.streams),
    }
}
