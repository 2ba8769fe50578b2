//! `harness reproduce`: the two published benchmarks this lab redoes, one
//! command each, their figures printed beside ours with the conditions of
//! each side named ([`seeds`]), and each of their claims judged from our
//! numbers ([`findings`]).
//!
//! - `swoole-vs-node` (seed B): hello world under `ab -c 100 -n 5000`, as
//!   the seed ran it (no keep-alive), as it should run (`ab -k`), and by the
//!   built-in engine with every body checked; ab's Document Length shown.
//! - `docker-vs-bare` (seed A): `/work` on php-fpm, Swoole (RoadRunner,
//!   FrankenPHP when present) × bare, pinned, bridge, bridge-proxy, by
//!   `ab -c 100 -t T` and the engine side by side; then the seed's own
//!   failure mode: the database unreachable and the seed's error
//!   handling (HTTP 200 with an error body), which ab counts as success;
//!   and fixed-rate cells, which judge its latency and migration claims.
//!
//! Both stand on the [`lab`](crate::lab) and write results.json,
//! report.md and report.html like `compare`.

pub mod document;
pub mod findings;
mod measure;
pub mod report;
pub mod seeds;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Subcommand};

use crate::catalog::{supervise, Entry, Placement};
use crate::env::Environment;
use crate::lab::args::LabArgs;
use crate::lab::driver::{servers_only, Selection};
use crate::lab::record::{self, Database, Header, ServerDoc, ServerStatus};
use crate::lab::Lab;
use crate::units::parse_duration;
use document::{Cell, Reproduction, SCHEMA};
use measure::{Length, Tool};

#[derive(Debug, Args)]
pub struct ReproduceArgs {
    #[command(subcommand)]
    pub experiment: Experiment,
}

#[derive(Debug, Subcommand)]
pub enum Experiment {
    /// Seed B: Swoole vs Node.js, hello world under `ab -c 100 -n 5000`.
    SwooleVsNode(SwooleVsNodeArgs),
    /// Seed A: php-fpm, Swoole (RoadRunner, FrankenPHP) on /work in bare,
    /// pinned, bridge and bridge-proxy, ab and the engine side by side; then
    /// the seed's failing-database runs.
    DockerVsBare(DockerVsBareArgs),
}

/// What both experiments take.
#[derive(Debug, Args, Clone)]
pub struct Common {
    #[command(flatten)]
    pub lab: LabArgs,

    /// A server started elsewhere, NAME=URL (repeatable): measured on bare only.
    #[arg(long = "target", value_name = "NAME=URL")]
    pub targets: Vec<String>,

    /// Connections, as the seeds used.
    #[arg(short = 'c', long, default_value_t = 100, value_name = "N")]
    pub connections: usize,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Each server three ways: ab -c 100 -n 5000 without keep-alive (as the seed
ran it), ab -k (keep-alive, as ab uses it when the server says so), and the
built-in engine with every body checked; --repeats rounds of them,
interleaved (round k runs every server each way once). One ab run of 5000
requests takes under a second and varies by half between runs, so each
claim is judged from the 95% interval of the ratio over the rounds
(Hodges-Lehmann, as harness diff): supported or not when the interval
excludes 1, undecided when it holds it. The report shows ab's Document
Length beside each figure (the seed's Swoole answered 0-byte bodies) and the
seed's figures beside ours (medians), as ratios.

Example:
  harness reproduce swoole-vs-node")]
#[command(mut_arg("servers", |a| a.default_value("swoole,node")))]
pub struct SwooleVsNodeArgs {
    #[command(flatten)]
    pub common: Common,

    /// Requests of each run (the seed: 5000).
    #[arg(short = 'n', long, default_value_t = 5000, value_name = "N")]
    pub requests: u64,

    /// Runs of each server × way, interleaved (round k runs every server
    /// each way once, each server started afresh): the verdicts rest on
    /// the interval of the ratio, which needs at least 4 a side at 95%.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub repeats: u32,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
The seed's matrix on /work (1000 sqrt iterations + SELECT 1, 20 workers,
tracing JIT): each server in each environment, ab -c 100 -t T and the
built-in engine for T each. bare is loopback; pinned puts server and load
generator on disjoint CPUs (the seed's cpuset without a container);
bridge publishes the server's port by DNAT; bridge-proxy through a
userland proxy (docker-proxy's role for clients on the host). Those are
emulated; docker, docker-host and docker-host-pinned are the real Docker
Engine (the seed's default bridge with a published port, host networking,
host networking + cpuset), the same programs and configs in a container of
an image made from Debian's packages. The verdicts rest on the real cells
where an engine answers, on the emulated ones (named so) where not. What
cannot be built here is reported.

Then the seed's failure mode: each server with its database unreachable
(refused at 127.0.0.2; the seed's host=mysql did not resolve under host
networking) and the seed's error handling (HTTP 200 {\"db\":\"error\"}): ab counts it as success, the
engine counts 0 valid responses.

At a fixed rate (the seed's latency and migration claims are about a
server that keeps up): --rate-runs runs of --rate-duration per server and
environment by the engine's open loop at --rate req/s, latency from each
request's intended send, the server's CPU per request metered (docker-proxy
included). From them: the bridge's added latency (docker - docker-host, else
the emulated bridge - bare) at p50 and p99 with its 95% interval, beside the
seed's 8-12 ms; and the server's CPU per request unpinned over pinned
(docker-host / docker-host-pinned, else bare / pinned), beside its 10-30%.

Examples:
  harness reproduce docker-vs-bare                 # 60 s runs, as the seed
  harness reproduce docker-vs-bare -d 10s --env bare,pinned
  harness reproduce docker-vs-bare -d 10s --rate 1000 --rate-runs 8")]
#[command(mut_arg("servers", |a| a.default_value("php-fpm,swoole,roadrunner,frankenphp")))]
pub struct DockerVsBareArgs {
    #[command(flatten)]
    pub common: Common,

    /// Length of each run, ab's -t (the seed: 60 s).
    #[arg(short = 'd', long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Environments, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bare,pinned,bridge,bridge-proxy,docker,docker-host,docker-host-pinned",
        value_name = "LIST"
    )]
    pub env: Vec<String>,

    /// Leave out the failing-database runs.
    #[arg(long)]
    pub no_failure_mode: bool,

    /// The fixed-rate cells' offered rate (req/s): the same in every
    /// environment, below every environment's knee (the seed's latency and
    /// migration claims are about a server that keeps up).
    #[arg(long, default_value_t = 500.0, value_parser = positive_rate, value_name = "REQ_PER_S")]
    pub rate: f64,

    /// Fixed-rate runs per server and environment (the claims' 95%
    /// intervals need at least 4); 0 leaves them out.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub rate_runs: u32,

    /// Length of each fixed-rate run.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    pub rate_duration: Duration,
}

/// The condition of the fixed-rate cells (the findings find them by it).
pub const FIXED_RATE: &str = "at a fixed rate";

/// `--rate`: a positive, finite number of requests per second.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?}: a positive number of requests per second (500)"
        )),
    }
}

/// The `reproduce` command.
pub fn run(args: ReproduceArgs) -> anyhow::Result<ExitCode> {
    match args.experiment {
        Experiment::SwooleVsNode(a) => swoole_vs_node(a),
        Experiment::DockerVsBare(a) => docker_vs_bare(a),
    }
}

fn say(line: &str) {
    eprintln!("reproduce: {line}");
}

/// The servers to run: `--servers` and the targets, those that cannot run
/// here documented as skipped.
fn servers(common: &Common, lab: &Lab) -> anyhow::Result<(Vec<Entry>, Vec<ServerDoc>)> {
    let selection = Selection::of(lab, &common.lab.servers, &common.targets)?;
    selection.say_missing(&say);
    selection.require_runnable()?;
    Ok((selection.runnable(), selection.docs()))
}

fn new_document(experiment: &str, seed: seeds::Seed, servers: Vec<ServerDoc>) -> Reproduction {
    Reproduction {
        header: Header::start(SCHEMA),
        experiment: experiment.into(),
        machine: record::machine(),
        database: Database {
            kind: "none".into(),
            url: None,
            version: None,
            max_connections: None,
        },
        servers,
        seed,
        cells: Vec::new(),
        findings: Vec::new(),
    }
}

/// Seed B.
fn swoole_vs_node(args: SwooleVsNodeArgs) -> anyhow::Result<ExitCode> {
    let lab = Lab::open(&args.common.lab)?;
    let (entries, docs) = servers(&args.common, &lab)?;
    let mut doc = new_document("swoole-vs-node", seeds::swoole_vs_node(), docs);
    let scratch = supervise::TempDir::new("benchlab-reproduce-")?;
    let c = args.common.connections;
    let n = Length::Count(args.requests);
    let ways = [
        (
            Tool::Ab { keepalive: false },
            format!(
                "as the seed ran it: ab -c {c} -n {}, no keep-alive",
                args.requests
            ),
        ),
        (
            Tool::Ab { keepalive: true },
            format!(
                "as it should run: ab -k -c {c} -n {}, keep-alive",
                args.requests
            ),
        ),
        (
            Tool::Engine { keepalive: true },
            "verified: the built-in engine, keep-alive, every body checked".to_string(),
        ),
    ];
    if args.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    let bare = lab.loopback();
    let plan: Vec<(Entry, u32)> = (1..=args.repeats)
        .flat_map(|round| entries.iter().map(move |e| (e.clone(), round)))
        .collect();
    bare.each(&lab, &plan, |e, &round, started| {
        say(&format!("{} ({round} of {}) ...", e.name, args.repeats));
        match started {
            Ok(started) => {
                measure::record_settings(&mut doc, &e.name, &started.running);
                for (tool, condition) in &ways {
                    let cell = measure::cell(
                        &lab,
                        &started.running,
                        "/hello",
                        *tool,
                        c,
                        bare.threads,
                        n,
                        scratch.path(),
                    );
                    doc.cells.push(Cell {
                        environment: "bare".into(),
                        condition: condition.clone(),
                        repeat: (args.repeats > 1).then_some(round),
                        ..cell
                    });
                }
            }
            Err(err) => measure::failed_to_start(&mut doc, &e.name, &err),
        }
    });
    doc.findings = findings::swoole_vs_node(&doc);
    finish(&args.common, doc, lab.interrupted())
}

/// Seed A.
fn docker_vs_bare(args: DockerVsBareArgs) -> anyhow::Result<ExitCode> {
    if args.duration.is_zero() || args.rate_duration.is_zero() {
        bail!("-d and --rate-duration must be positive");
    }
    let envs = Environment::parse_list(&args.env)?;
    let mut lab = Lab::open(&args.common.lab)?;
    let (entries, docs) = servers(&args.common, &lab)?;
    let mut doc = new_document("docker-vs-bare", seeds::docker_vs_bare(), docs);
    lab.start_database(args.common.lab.mysql_url.as_deref(), &say)?;
    if let Some(why) = &lab.database.unavailable {
        bail!("/work needs a database: {why} (or pass --mysql-url)");
    }
    doc.database = Database::of(&lab.database);
    let scratch = supervise::TempDir::new("benchlab-reproduce-")?;
    let (c, d) = (args.common.connections, Length::Duration(args.duration));
    let secs = args.duration.as_secs_f64();
    let ways = [
        (
            Tool::Ab { keepalive: false },
            format!("as the seed ran it: ab -c {c} -t {secs:.0}"),
        ),
        (
            Tool::Engine { keepalive: false },
            format!(
                "as the seed ran it, verified: the engine -c {c} -d {secs:.0}s, no keep-alive \
                 like ab, every body checked"
            ),
        ),
    ];
    let plan = servers_only(&entries);
    lab.each_environment(&envs, None, |env, placed| {
        let placed = match placed {
            Ok(p) => p,
            Err(err) => {
                say(&format!("{}: {err:#}", env.name()));
                doc.cells.push(Cell {
                    environment: env.name().into(),
                    error: Some(format!("{err:#}")),
                    ..Cell::default()
                });
                return;
            }
        };
        let mut not_started: Vec<(String, String)> = Vec::new();
        placed.each(&lab, &plan, |e, _, started| {
            say(&format!("{} in {} ...", e.name, env.name()));
            match started {
                Ok(started) => {
                    measure::record_settings(&mut doc, &e.name, &started.running);
                    for (tool, condition) in &ways {
                        let cell = measure::cell(
                            &lab,
                            &started.running,
                            "/work",
                            *tool,
                            c,
                            placed.threads,
                            d,
                            scratch.path(),
                        );
                        doc.cells.push(Cell {
                            environment: env.name().into(),
                            condition: condition.clone(),
                            ..cell
                        });
                    }
                    let setup = placed.setup.as_ref();
                    let path_pids = setup
                        .map(|s| s.path_pids(&started.running))
                        .unwrap_or_default();
                    let db_pid = setup.and_then(crate::env::Setup::db_pid);
                    for k in 1..=args.rate_runs {
                        if lab.interrupted() {
                            break;
                        }
                        let cell = measure::fixed_rate_cell(
                            &lab,
                            &started.running,
                            &path_pids,
                            db_pid,
                            "/work",
                            c,
                            placed.threads,
                            args.rate,
                            args.rate_duration,
                        );
                        doc.cells.push(Cell {
                            environment: env.name().into(),
                            condition: format!(
                                "{FIXED_RATE}: the engine --rate {:.0} -c {c}, keep-alive, latency \
                                 from each request's intended send, every body checked",
                                args.rate
                            ),
                            repeat: Some(k),
                            ..cell
                        });
                    }
                }
                Err(err) => {
                    not_started.push((e.name.clone(), format!("did not start: {err:#}")));
                    measure::failed_to_start(&mut doc, &e.name, &err)
                }
            }
        });
        missing_cells(&mut doc, env, &entries, &not_started);
    });
    if !args.no_failure_mode {
        failing_database(
            &lab,
            &entries,
            &mut doc,
            c,
            args.duration.min(Duration::from_secs(10)),
            scratch.path(),
        );
    }
    doc.findings = findings::docker_vs_bare(&doc);
    doc.database = Database::of(&lab.database);
    finish(&args.common, doc, lab.interrupted())
}

/// A cell for every selected server that `env` has none of, with why:
/// not runnable here at all (its skip reason: binary, module, image), a
/// server started elsewhere that cannot be placed, or its start there
/// failed. Printed as it is found and under the table, so a missing cell
/// is never silent.
fn missing_cells(
    doc: &mut Reproduction,
    env: Environment,
    entries: &[Entry],
    not_started: &[(String, String)],
) {
    let env_name = env.name();
    let reasons: Vec<(String, String)> = doc
        .servers
        .iter()
        .filter(|s| {
            !doc.cells
                .iter()
                .any(|c| c.server == s.name && c.environment == env_name)
        })
        .map(|s| {
            let placeable = entries
                .iter()
                .find(|e| e.name == s.name)
                .map(|e| e.placeable());
            let why = if let Some((_, err)) = not_started.iter().find(|(n, _)| *n == s.name) {
                err.clone()
            } else if s.status != ServerStatus::Ran && placeable.is_none() {
                format!(
                    "{}: {}",
                    s.status.name(),
                    s.reason.as_deref().unwrap_or("not runnable here")
                )
            } else if placeable == Some(false) && (env != Environment::Bare || runs_in_container(s))
            {
                format!(
                    "a server started elsewhere (--target) or run from its compose image \
                     cannot be placed in {env_name}"
                )
            } else {
                "not reached (interrupted, or an earlier start failed)".to_string()
            };
            (s.name.clone(), why)
        })
        .collect();
    for (server, why) in reasons {
        say(&format!("{server}: no cell in {env_name}: {why}"));
        doc.cells.push(Cell {
            server,
            environment: env_name.into(),
            error: Some(why),
            ..Cell::default()
        });
    }
}

/// Whether the server ran from its compose image (a container), which
/// no environment of a reproduction measures.
fn runs_in_container(s: &ServerDoc) -> bool {
    s.runs_in.is_some()
}

/// The seed's failure mode on bare: a database the servers cannot reach
/// (127.0.0.2 refuses at once, where the seed's `host=mysql` failed to
/// resolve under host networking; a name that does not resolve here would
/// wait for the resolver's timeout instead) and the seed's error handling.
fn failing_database(
    lab: &Lab,
    entries: &[Entry],
    doc: &mut Reproduction,
    c: usize,
    length: Duration,
    scratch: &std::path::Path,
) {
    let placement = Placement {
        db_host: Some("127.0.0.2".into()),
        env: vec![("BENCH_SEED_ERROR_BODIES".into(), "1".into())],
        ..Placement::default()
    };
    let condition = "database unreachable (refused at 127.0.0.2, as the seed's host=mysql did not \
                     resolve), the seed's error handling: HTTP 200 {\"db\":\"error\"}";
    for e in entries.iter().filter(|e| e.placeable()) {
        if lab.interrupted() {
            break;
        }
        say(&format!("{} with its database unreachable ...", e.name));
        match lab.start_with(e, &placement) {
            Ok(running) => {
                for tool in [
                    Tool::Ab { keepalive: false },
                    Tool::Engine { keepalive: false },
                ] {
                    let cell = measure::cell(
                        lab,
                        &running,
                        "/work",
                        tool,
                        c,
                        crate::engine::default_threads(),
                        Length::Duration(length),
                        scratch,
                    );
                    doc.cells.push(Cell {
                        environment: "bare".into(),
                        condition: condition.into(),
                        ..cell
                    });
                }
            }
            Err(err) => measure::failed_to_start(doc, &e.name, &err),
        }
    }
}

/// The files and the table; exit 130 when interrupted, 1 when nothing was measured.
fn finish(common: &Common, mut doc: Reproduction, interrupted: bool) -> anyhow::Result<ExitCode> {
    doc.header.finish(interrupted);
    let dir = common
        .lab
        .out_dir()
        .join(doc.header.dir_name(&format!("-{}", doc.experiment)));
    report::write_all(&dir, &doc)?;
    println!("{}", report::text(&doc));
    println!("results: {}", dir.display());
    Ok(if interrupted {
        ExitCode::from(130)
    } else if !doc.cells.iter().any(Cell::ok) {
        eprintln!("harness: nothing was measured (see above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
