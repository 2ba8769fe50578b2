//! `harness models`: how the concurrency models differ, demonstrated and
//! explained from measurements. A preset of four experiments over the
//! catalog, each chosen because the models must differ for a known reason:
//!
//! 1. **Waiting** — `/sleep?ms=20` (a timer) and `/db?sleep_ms=20` (the wait
//!    in the database, through the pool) at rising concurrency, read against
//!    Little's law: a server that holds W requests in flight serves at most
//!    W / 20 ms; an event loop or coroutines follow c / 20 ms until the CPU
//!    saturates.
//! 2. **A stall in the CPU** — mostly `/hello` with a share of `/cpu`
//!    requests of about 50 ms each: latency per route ([`stall`]).
//! 3. **Connection cost** — `/work` with keep-alive, a new HTTP connection
//!    per request, a new database connection per request.
//! 4. **Memory per connection** — RSS with 0, 1,000 and 10,000 idle
//!    connections held open, and `/hello` still answered; then 10,000
//!    WebSocket connections upgraded and held ([`ws_held`]).
//! 5. **Multiplexing** — the same 64 requests in flight over 64 HTTP/1.1
//!    connections, 4 pipelined 16 deep, and 4 HTTP/2 connections × 16
//!    streams, on `/hello` and on `/cpu` ([`multiplex`]).
//! 6. **Waiting at fixed rates** (`--experiments rate`, not by default) —
//!    the highest rate held on the wait, against Little's law ([`at_rate`]).
//! 7. **Head-of-line blocking** (`--experiments head-of-line`, not by
//!    default) — the same requests in flight as h2 over TLS and as h3, at
//!    0 %, 0.5 % and 2 % packet loss, in a network namespace ([`hol`]).
//!
//! Each finding is a sentence computed from the numbers ([`findings`]),
//! saying plainly where a measurement does not match its prediction.

mod at_rate;
pub mod document;
mod evidence;
pub mod findings;
mod held;
pub mod hol;
mod measure;
mod multiplex;
pub mod report;
mod stall;
mod ws_held;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;

use crate::catalog::{supervise, Entry, Running};
use crate::lab::args::LabArgs;
use crate::lab::driver::Selection;
use crate::lab::profile::Profiler;
use crate::lab::record::{self, Database, Header, ServerStatus};
use crate::lab::Lab;
use crate::units::parse_duration;
use document::{Models, SCHEMA};

/// The wait of experiment 1, in ms.
pub const WAIT_MS: u32 = 20;

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Five experiments, each server started once per experiment:
  1. waiting      /sleep?ms=20 and /db?sleep_ms=20 at c = 1 .. 1000, read against
                  Little's law (W in flight / 20 ms, W from each server's /config)
  2. stall        /hello:99 + /cpu?n=N:1 (N sized to ~50 ms here), /hello's p99
                  against /hello alone
  3. connections  /work with keep-alive, a new HTTP connection per request, a
                  new database connection per request (conn=new)
  4. memory       RSS with 0, 1,000 and 10,000 idle connections, /hello at 10,000;
                  then 10,000 WebSocket connections upgraded on /ws and held
                  (--quick: 1,000), a ping on each every second
                  (`websocket` runs that part alone)
  5. multiplexing 64 requests in flight three ways: 64 HTTP/1.1 connections,
                  4 pipelined 16 deep, 4 HTTP/2 (h2c) × 16 streams; on /hello
                  and on /cpu?n=N (N sized to ~2 ms here), in interleaved
                  rounds, with the server's CPU per request

  6. rate         (not in the default list: --experiments rate) /sleep?ms=20 at
                  fixed rates: the highest offered rate held under p(99)<100ms
                  (ramp, then bisection to 5%; as compare --slo)
  7. head-of-line (not in the default list: --experiments head-of-line, or hol)
                  1 connection × 16 streams of /hello as h2 over TLS and as h3,
                  at 0%, 0.5% and 2% packet loss: the event loop (the servers
                  that serve h3) in a network namespace the run builds and
                  removes, loss by nftables (numgen random, both directions);
                  p50, p99, req/s, failed, the rule's dropped packets, QUIC's
                  lost packets, the server's TCP retransmissions. Six cells
                  of -d (3 s; --quick 1 s): under a minute. Needs root, ip
                  and nft (refused in one line otherwise)

Predictions, stated before the numbers and judged in the findings:
  head-of-line  with loss, h2's p99 grows with the streams sharing a
                connection (one lost segment stalls all of them behind TCP's
                in-order delivery); h3's grows less (QUIC stalls only the
                stream that lost it)
  rate          Little's law: a worker pool of W workers holds W × 1000 ÷ 20
                req/s and no more (20 workers: 1,000), within 5%; an event
                loop and coroutines have no such bound and hold more
  memory        the event loop and coroutines hold N WebSocket connections at a
                few KiB each; the worker pool holds --workers of them and the
                rest wait for their 101 (the model's limit, not a failure);
                Node.js is measured against those lines; php-fpm and
                nginx-static do not serve WebSocket (their /config says why)
  multiplexing  where the workers are the bottleneck (php-fpm, worker-pool on
                /cpu) the three shapes give the same req/s within the
                run-to-run spread: multiplexing saves connections and
                syscalls, not worker time; where the front's cost per request
                dominates (event-loop on /hello) pipelining and h2 raise req/s
                and cut the server's CPU per request; p99 under h2 is worse
                than under HTTP/1.1 at the same requests in flight

About 13 minutes on 2 cores; --quick about 3.

Examples:
  harness models --quick
  harness models --servers event-loop,worker-pool,php-fpm --experiments waiting,stall
  harness models --servers event-loop,worker-pool --experiments websocket --workers 2
  sudo harness models --experiments head-of-line --servers event-loop")]
#[command(mut_arg("servers", |a| a.default_value("event-loop,coroutine,worker-pool,node,swoole,php-fpm")))]
pub struct ModelsArgs {
    #[command(flatten)]
    pub lab: LabArgs,

    /// Experiments, comma-separated: waiting, stall, connections, memory,
    /// multiplexing, rate, head-of-line (`hol`); `websocket` is memory's
    /// WebSocket part alone.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "waiting,stall,connections,memory,multiplexing",
        value_name = "LIST"
    )]
    pub experiments: Vec<String>,

    /// Fewer levels, 1 s runs, 2 rounds of multiplexing and 1,000
    /// WebSocket connections held: about 3 minutes.
    #[arg(long)]
    pub quick: bool,

    /// Record the waiting curves', the stall's and each multiplexing
    /// shape's last round's runs with `perf record`
    /// (as `compare --profile`: flame graphs in profiles/, a breakdown per
    /// run); a prediction that misses then shows where that run's CPU went.
    #[arg(long)]
    pub profile: bool,

    /// The worker-pool server's workers (default: the seed's 20): as many
    /// WebSocket connections as it can hold at once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub workers: Option<u32>,

    /// WebSocket connections the memory experiment holds (default 10,000;
    /// 1,000 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=50_000))]
    pub ws_connections: Option<u64>,

    /// Length of each run (default 3s, 1s with --quick).
    #[arg(short = 'd', long, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
}

/// The experiments by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Experiment {
    Waiting,
    Stall,
    Connections,
    Memory,
    /// Memory's WebSocket part.
    WsHeld,
    Multiplexing,
    /// Waiting at fixed rates: the capacity search against Little's law.
    Rate,
    /// h2 over TLS against h3 under packet loss, in a namespace of its own.
    HeadOfLine,
}

/// Experiments that hold many connections: run before any load (see [`plan`]).
fn holds(x: Experiment) -> bool {
    matches!(x, Experiment::Memory | Experiment::WsHeld)
}

fn experiments(names: &[String]) -> anyhow::Result<Vec<Experiment>> {
    let mut out = Vec::new();
    for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e: &[Experiment] = match n {
            "waiting" => &[Experiment::Waiting],
            "stall" => &[Experiment::Stall],
            "connections" => &[Experiment::Connections],
            "memory" => &[Experiment::Memory, Experiment::WsHeld],
            "websocket" => &[Experiment::WsHeld],
            "multiplexing" => &[Experiment::Multiplexing],
            "rate" => &[Experiment::Rate],
            "head-of-line" | "hol" => &[Experiment::HeadOfLine],
            other => {
                bail!(
                    "unknown experiment {other:?}; known: waiting, stall, connections, memory, \
                     multiplexing, websocket, rate, head-of-line"
                )
            }
        };
        for e in e {
            if !out.contains(e) {
                out.push(*e);
            }
        }
    }
    if out.is_empty() {
        bail!("no experiment selected");
    }
    Ok(out)
}

/// Each server with each experiment: every server's connections-held
/// experiment first, before any load run. It opens 10,000 connections
/// from this process, which needs the descriptors a load run can leave
/// behind: the io_uring backend's closes of the sockets still open when a
/// run ends are queued, not awaited, and were seen to leave ~2,400
/// descriptors per server's load experiments open, until the 4th server
/// could hold only 9,228 (limit 20,000) and read no RSS.
fn plan(servers: &[Entry], which: &[Experiment]) -> Vec<(Entry, Experiment)> {
    let pairs = || {
        servers
            .iter()
            .flat_map(|e| which.iter().map(move |&x| (e.clone(), x)))
    };
    // The head-of-line experiment runs apart, in a namespace of its own.
    let pairs = || pairs().filter(|(_, x)| *x != Experiment::HeadOfLine);
    pairs()
        .filter(|(_, x)| holds(*x))
        .chain(pairs().filter(|(_, x)| !holds(*x)))
        .collect()
}

fn say(line: &str) {
    eprintln!("models: {line}");
}

/// The `models` command.
pub fn run(args: ModelsArgs) -> anyhow::Result<ExitCode> {
    let which = experiments(&args.experiments)?;
    let length = args
        .duration
        .unwrap_or(Duration::from_secs(if args.quick { 1 } else { 3 }));
    if length.is_zero() {
        bail!("-d must be positive");
    }
    let levels: &[usize] = if args.quick {
        &[1, 20, 200, 1000]
    } else {
        &[1, 10, 20, 50, 100, 200, 500, 1000]
    };
    let mut lab = Lab::open(&args.lab)?;
    // Servers whose h2c needs a listener of its own (node, php-fpm's
    // nginx) start one for the multiplexing experiment.
    lab.h2c = which.contains(&Experiment::Multiplexing);
    let selection = Selection::named(&lab, &args.lab.servers)?;
    selection.say_missing(&say);
    selection.require_runnable()?;
    let mut doc = Models {
        header: Header::start(SCHEMA),
        quick: args.quick,
        machine: record::machine(),
        database: Database::of(&lab.database),
        servers: selection.docs(),
        waiting: Vec::new(),
        stall: Vec::new(),
        connection_cost: Vec::new(),
        memory: Vec::new(),
        websocket_held: Vec::new(),
        multiplexing: Vec::new(),
        waiting_at_rate: Vec::new(),
        head_of_line: Vec::new(),
        findings: Vec::new(),
    };
    // The head-of-line experiment loads /hello alone: no database for it.
    if which.iter().any(|&x| x != Experiment::HeadOfLine) {
        lab.start_database(args.lab.mysql_url.as_deref(), &say)?;
    }
    doc.database = Database::of(&lab.database);
    let has_db = lab.db().is_some();
    let _scratch = supervise::TempDir::new("benchlab-models-")?;
    // Each server started afresh for each experiment, so that one
    // experiment's state (idle connections, a warm cache) does not leak
    // into the next.
    let servers: Vec<Entry> = selection
        .runnable()
        .into_iter()
        .map(|e| with_workers(e, args.workers))
        .collect();
    let plan = plan(&servers, &which);
    let dir = args.lab.out_dir().join(doc.header.dir_name("-models"));
    let profiler = args.profile.then(|| Profiler::new(dir.clone()));
    if let Some(why) = profiler.as_ref().and_then(|p| p.unavailable()) {
        say(&format!(
            "--profile: no profiles: {why}; the runs go on without"
        ));
    }
    let runs = Runs {
        lab: &lab,
        levels,
        length,
        has_db,
        profiler: profiler.as_ref(),
        quick: args.quick,
        ws_connections: args
            .ws_connections
            .map_or(if args.quick { WS_HELD_QUICK } else { WS_HELD }, |n| {
                n as usize
            }),
    };
    let bare = lab.loopback();
    bare.each(&lab, &plan, |e, &x, started| {
        say(&format!("{} — {x:?}", e.name));
        match started {
            Ok(s) => experiment(&runs, e, x, s.running, &mut doc),
            Err(err) => {
                say(&format!("{}: did not start: {err:#}", e.name));
                if let Some(s) = doc.servers.iter_mut().find(|s| s.name == e.name) {
                    s.status = ServerStatus::Failed;
                    s.reason = Some(format!("did not start: {err:#}"));
                }
            }
        }
    });
    drop(bare);
    // Last: it turns the session to TLS and h3, and builds its namespace.
    if which.contains(&Experiment::HeadOfLine) && !lab.interrupted() {
        say("head-of-line blocking: h2 over TLS against h3 under packet loss");
        say(&format!("  prediction: {}", hol::PREDICTION));
        doc.head_of_line = hol::measure_all(&mut lab, &servers, length);
    }
    doc.findings = findings::all(&doc);
    doc.header.finish(lab.interrupted());
    drop(lab);
    report::write_all(&dir, &doc)?;
    println!("{}", report::text(&doc));
    println!("results: {}", dir.display());
    Ok(if doc.header.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--workers N` given to the worker-pool server.
fn with_workers(mut e: Entry, n: Option<u32>) -> Entry {
    if let (
        Some(n),
        crate::catalog::Recipe::Workspace {
            binary: "worker-pool",
            workers,
            ..
        },
    ) = (n, &mut e.recipe)
    {
        *workers = n;
    }
    e
}

/// How every experiment of this command runs: its lab, levels, run length,
/// whether a database answers, the profiler under `--profile`, `--quick`.
struct Runs<'a> {
    lab: &'a Lab,
    levels: &'a [usize],
    length: Duration,
    has_db: bool,
    profiler: Option<&'a Profiler>,
    quick: bool,
    /// WebSocket connections held.
    ws_connections: usize,
}

/// WebSocket connections held (`--quick`: fewer).
const WS_HELD: usize = 10_000;
const WS_HELD_QUICK: usize = 1_000;

/// Rounds of the multiplexing experiment's three shapes.
const MUX_ROUNDS: u32 = 3;
const MUX_ROUNDS_QUICK: u32 = 2;

/// One experiment on one started server, stopped at the end.
fn experiment(runs: &Runs, e: &Entry, x: Experiment, mut running: Running, doc: &mut Models) {
    let Runs {
        lab,
        levels,
        length,
        has_db,
        profiler,
        quick,
        ws_connections,
    } = *runs;
    let config = running.config().ok();
    if let Some(s) = doc.servers.iter_mut().find(|s| s.name == e.name) {
        if s.config.is_none() {
            s.config = config.clone();
            s.versions = running.versions.clone();
        }
    }
    match x {
        Experiment::Waiting => {
            let sleep = format!("/sleep?ms={WAIT_MS}");
            let db = format!("/db?sleep_ms={WAIT_MS}");
            let paths: Vec<&str> = if has_db {
                vec![&sleep, &db]
            } else {
                vec![&sleep]
            };
            for path in paths {
                doc.waiting.push(measure::waiting(
                    lab,
                    &running,
                    e.model,
                    config.as_ref(),
                    path,
                    WAIT_MS,
                    levels,
                    length,
                    profiler,
                ));
            }
        }
        Experiment::Stall => doc
            .stall
            .push(stall::measure(lab, &running, e.model, length, profiler)),
        Experiment::Connections if has_db => doc
            .connection_cost
            .push(measure::connection_cost(lab, &running, e.model, 50, length)),
        Experiment::Connections => {}
        Experiment::Memory => {
            doc.memory
                .push(held::memory(lab, &mut running, e.model, &[1000, 10_000]))
        }
        Experiment::WsHeld => {
            doc.websocket_held
                .push(ws_held::measure(lab, &mut running, e.model, ws_connections))
        }
        Experiment::Rate => doc.waiting_at_rate.push(at_rate::measure(
            lab,
            &running,
            e.model,
            config.as_ref(),
            length.max(Duration::from_secs(2)),
        )),
        // Run apart ([`hol::measure_all`]), never from the plan.
        Experiment::HeadOfLine => {}
        Experiment::Multiplexing => {
            let rounds = if quick { MUX_ROUNDS_QUICK } else { MUX_ROUNDS };
            let front = multiplex::measure(
                lab, &running, e.model, "/hello", "front", rounds, length, profiler,
            );
            doc.multiplexing.push(front);
            match multiplex::cpu_path(&running) {
                Ok(cpu) => doc.multiplexing.push(multiplex::measure(
                    lab, &running, e.model, &cpu, "workers", rounds, length, profiler,
                )),
                Err(err) => doc.multiplexing.push(document::Multiplexing {
                    server: e.name.clone(),
                    model: e.model.into(),
                    path: "/cpu".into(),
                    cost: "workers".into(),
                    in_flight: multiplex::IN_FLIGHT,
                    shapes: Vec::new(),
                    error: Some(format!("sizing /cpu: {err:#}")),
                }),
            }
        }
    }
    running.stop();
}
