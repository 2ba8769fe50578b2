//! `harness compare`: the lab's main job (docs/ARCHITECTURE.md §4, §5). Every selected
//! server that can run here is started by the [`lab`](crate::lab),
//! its `/config` read and audited for fairness ([`audit`]), then each
//! server × workload × concurrency cell is run by [`runner`]: start,
//! verify, warm up, `--runs` measured runs with the server's process tree
//! metered from /proc ([`crate::lab::meter`]), stop. Without `--mysql-url` a private
//! MariaDB serves every server of the run and is removed at the end.
//! Results: one table on stdout and `results/<UTC time>/` with results.json
//! ([`results`]), report.md and report.html ([`report`]).
//!
//! Ctrl-C / SIGTERM: the run stops, every child is stopped in order, the
//! database removed, what was measured written; a second signal (or a stuck
//! cleanup) kills whatever is registered ([`crate::catalog::supervise`]).

pub mod args;
pub mod audit;
pub mod fixed_rate;
pub mod plan;
mod prepass;
pub mod progress;
pub mod protocol;
pub mod rate_results;
pub mod rate_spec;
pub mod report;
pub mod results;
pub mod runner;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};

use crate::catalog::{supervise, Entry};
use crate::engine::Framing;
use crate::env::Environment;
use crate::lab::driver::Selection;
use crate::lab::record::Header;
use crate::lab::{tools, Lab};
use args::{CompareArgs, LoadTool, Order, ReportArgs};
use plan::Workload;
use results::{Database, Results, RowStatus, ServerDoc, ServerStatus, Settings, WorkloadDoc};

/// The `compare` command.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    args.validate()?;
    if args.load_tool != LoadTool::Harness {
        tools::find(args.load_tool)?;
    }
    let environment = Environment::parse(&args.env).context("bad --env")?;
    if let Err(why) = environment.availability() {
        bail!("--env {}: not available here: {why}", environment.name());
    }
    if args.tls && matches!(environment, Environment::TlsProxy | Environment::TlsServer) {
        bail!(
            "--tls with --env {}: either every server terminates TLS (--tls) or the \
             environment arranges it, not both",
            environment.name()
        );
    }
    let mut workloads = plan::workloads(&args.workloads)?;
    let progress = progress::Progress::new();
    let mut lab = Lab::open(&args.lab)?;
    lab.php_jit = args.php_jit;
    lab.h2c = args.protocol.contains(&args::Protocol::H2c);
    lab.h3 = args.protocol.contains(&args::Protocol::H3);
    if args.tls {
        lab.use_tls(args.tls_version)?;
    }
    let selection = Selection::of(&lab, &args.lab.servers, &args.targets)?
        .with_target_processes(&args.target_pids, &args.target_containers)?;
    let entries = selection.selected.clone();
    let mut header = Header::start(results::SCHEMA);
    let machine = results::machine();
    let mut docs = server_docs(&selection, environment, args.tls);
    for d in docs.iter().filter(|d| d.status == ServerStatus::Skipped) {
        let why = d.reason.as_deref().unwrap_or("");
        progress.line(&format!("{}: cannot run here: {why}", d.name));
    }
    if !docs.iter().any(|d| d.status == ServerStatus::Ran) {
        bail!("none of the selected servers can run here (see `harness servers`)");
    }
    start_database(&mut lab, &args, &mut workloads, &progress)?;
    // The environment, after the database (a namespace reaches it by DNAT);
    // pinned: this thread (and so the engine's, and ab's or wrk's) on the
    // load generator's CPUs.
    let placed = lab.place(environment, args.threads)?;
    if let Some(detail) = placed.detail() {
        for d in docs.iter_mut().filter(|d| d.status == ServerStatus::Ran) {
            d.notes
                .push(format!("environment {}: {detail}", environment.name()));
        }
    }
    let scratch = supervise::TempDir::new("benchlab-compare-")?;
    let ctx = runner::Ctx {
        lab: &lab,
        args: &args,
        threads: placed.threads,
        progress: &progress,
        scratch: scratch.path(),
        placed: &placed,
        clock: std::time::Instant::now(),
        profiles: args.profile.then(|| {
            crate::lab::profile::Profiler::new(args.lab.out_dir().join(header.dir_name("")))
        }),
    };
    if let Some(why) = ctx.profiles.as_ref().and_then(|p| p.unavailable()) {
        progress.line(&format!(
            "--profile: no profiles: {why}; the runs go on without"
        ));
    }

    // Start each once: /config, placement, contract, each workload's answer.
    let preflight_failures = prepass::run(&ctx, &entries, &mut docs, &workloads);
    let fairness = audit::audit(&docs, lab.database.max_connections);
    progress.line(&format!("\nsettings (/config):\n{}", audit::table(&docs)));
    for w in &fairness.warnings {
        progress.line(&format!("warning: {w}"));
    }
    let framings = protocol::framings(&args);
    let cells = cells(&entries, &docs, &workloads, &args.connections, &framings);
    progress.line(&eta(&args, cells.len()));
    let (rows, closed_loop_verdicts) =
        run_cells(&ctx, &entries, &mut docs, &preflight_failures, cells);
    let at_rate = at_rate(&ctx, &entries, &workloads, &rows, closed_loop_verdicts);
    let threads = placed.threads;
    header.finish(lab.interrupted());
    drop((placed, scratch));
    let database = Database::of(&lab.database);
    drop(lab);

    let baseline = pick_baseline(&args, &docs);
    let mut results = Results {
        header,
        settings: settings(&args, &workloads, threads, baseline, environment),
        machine,
        database,
        servers: docs,
        fairness,
        rows,
        at_rate,
    };
    finish(&args, &mut results)
}

impl CompareArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if self.runs == 0 {
            bail!("--runs must be at least 1");
        }
        use args::Protocol;
        if self.protocol.iter().any(|&p| p != Protocol::H1) {
            if self.load_tool != LoadTool::Harness {
                bail!("--protocol h1-pipelined, h2c, h2 and h3 load only with the built-in engine (--load-tool harness)");
            }
            if self.no_keepalive {
                bail!("--protocol h1-pipelined, h2c, h2 and h3 need kept-alive connections: drop --no-keepalive");
            }
        }
        if self.protocol.contains(&Protocol::H2) && !self.tls {
            bail!("--protocol h2 is HTTP/2 by ALPN over TLS: add --tls (or --protocol h2c for HTTP/2 in the clear)");
        }
        if self.protocol.contains(&Protocol::H3) && !self.tls {
            bail!("--protocol h3 is HTTP/3 over QUIC, always encrypted: add --tls");
        }
        if self.protocol.contains(&Protocol::H3)
            && self.tls_version != crate::engine::TlsVersion::Tls13
        {
            bail!("--protocol h3: QUIC carries TLS 1.3 only: drop --tls-version 1.2");
        }
        if self.tls && self.protocol.contains(&Protocol::H2c) {
            bail!("--protocol h2c is HTTP/2 in the clear: with --tls, use --protocol h2");
        }
        if self.tls && self.protocol.contains(&Protocol::H1Pipelined) {
            bail!("--protocol h1-pipelined runs over plaintext: drop --tls");
        }
        if let Some(ws) = self.workloads.iter().find(|w| w.starts_with("ws-")) {
            if self.load_tool != LoadTool::Harness {
                bail!("{ws} loads only with the built-in engine: drop --load-tool (ab and wrk speak no WebSocket)");
            }
        }
        let pipelined = self.protocol.contains(&Protocol::H1Pipelined);
        let least = if pipelined { 2 } else { 1 };
        if self.pipeline.iter().any(|n| !(least..=1024).contains(n))
            || self.streams.iter().any(|n| !(1..=1024).contains(n))
        {
            bail!("--pipeline takes 1 to 1024 (depths of 2 to 1024 with h1-pipelined) and --streams counts of 1 to 1024");
        }
        let ws_in_flight = self
            .workloads
            .iter()
            .any(|w| w == "ws-echo" || w == "ws-room");
        if ws_in_flight && self.pipeline.len() > 1 {
            bail!("with ws-echo or ws-room, --pipeline is one count of messages in flight per connection, not a list");
        }
        if self.connections.is_empty() || self.connections.contains(&0) {
            bail!("-c needs levels of at least 1 connection");
        }
        if self.duration.is_zero() {
            bail!("-d must be positive");
        }
        if self.threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        if (!self.rates.is_empty() || !self.slo.is_empty()) && self.load_tool != LoadTool::Harness {
            bail!("--rate and --slo load on the built-in engine's open loop: drop --load-tool");
        }
        if self.rate_duration.is_zero() {
            bail!("--rate-duration must be positive");
        }
        Ok(())
    }
}

/// The database, if a workload needs one; without MariaDB installed (and
/// no `--mysql-url`) those workloads are dropped, with why.
fn start_database(
    lab: &mut Lab,
    args: &CompareArgs,
    workloads: &mut Vec<Workload>,
    progress: &progress::Progress,
) -> anyhow::Result<()> {
    if !workloads.iter().any(|w| w.needs_db) {
        return Ok(());
    }
    lab.start_database(args.lab.mysql_url.as_deref(), &|l| progress.line(l))?;
    if let Some(why) = &lab.database.unavailable {
        let dropped: Vec<&str> = workloads
            .iter()
            .filter(|w| w.needs_db)
            .map(|w| w.name.as_str())
            .collect();
        progress.line(&format!(
            "harness: {why}. The workloads {} need a database: skipped (or pass --mysql-url)",
            dropped.join(", ")
        ));
        workloads.retain(|w| !w.needs_db);
        if workloads.is_empty() {
            bail!("no workload left to run without a database");
        }
    }
    Ok(())
}

/// One document per selected server: `ran` (so far) if it can run here and
/// be placed in `environment`, else `skipped` with why.
fn server_docs(selection: &Selection, environment: Environment, tls: bool) -> Vec<ServerDoc> {
    let mut docs = selection.docs();
    if tls {
        for doc in docs.iter_mut().filter(|d| d.status == ServerStatus::Ran) {
            // What will be started (a server from its image, where the
            // host lacks it), else what was asked for.
            let Some(e) = selection
                .ready
                .iter()
                .map(|(e, _)| e)
                .chain(&selection.selected)
                .find(|e| e.name == doc.name)
            else {
                continue;
            };
            if let Err(why) = crate::catalog::tls::support(e) {
                doc.status = ServerStatus::Skipped;
                doc.reason = Some(why);
            }
        }
    }
    if environment != Environment::Bare {
        for doc in docs.iter_mut().filter(|d| d.status == ServerStatus::Ran) {
            let Some((e, _)) = selection.ready.iter().find(|(e, _)| e.name == doc.name) else {
                continue;
            };
            if let Err(why) = crate::lab::driver::placeable_in(e, environment) {
                doc.status = ServerStatus::Skipped;
                doc.reason = Some(format!("--env {}: {why}", environment.name()));
            }
        }
    }
    docs
}

/// A cell: server (index), workload, c, framing.
type Cell<'w> = (usize, &'w Workload, usize, Framing);

/// Every server × workload × c × framing cell to run, workload-major (a
/// WebSocket workload frames its own messages: one cell per c).
fn cells<'w>(
    entries: &[Entry],
    docs: &[ServerDoc],
    workloads: &'w [Workload],
    connections: &[usize],
    framings: &[Framing],
) -> Vec<Cell<'w>> {
    let mut cells = Vec::new();
    for w in workloads {
        let framings = if w.kind.is_ws() {
            &[Framing::H1][..]
        } else {
            framings
        };
        for &c in connections {
            for &f in framings {
                for (i, e) in entries.iter().enumerate() {
                    if docs[i].status == ServerStatus::Ran && e.serves(&w.path) {
                        cells.push((i, w, c, f));
                    }
                }
            }
        }
    }
    cells
}

/// Runs the cells (a cell whose workload failed its check in the pre-pass
/// is a failed row) in `--order`, until done or interrupted: interleaved,
/// round k takes run k of every cell still open (shuffled by `--seed`);
/// sequential, each cell's runs back to back. Rows come back in the cells'
/// order; a cell never reached (interrupted) has none.
fn run_cells(
    ctx: &runner::Ctx,
    entries: &[Entry],
    docs: &mut [ServerDoc],
    preflight_failures: &[Vec<(String, String)>],
    cells: Vec<Cell>,
) -> (Vec<results::Row>, Vec<rate_results::RowVerdicts>) {
    let tool = ctx.args.load_tool;
    let mut rows: Vec<Option<results::Row>> = vec![None; cells.len()];
    let mut open = Vec::new();
    for (k, &(i, w, c, f)) in cells.iter().enumerate() {
        let over = prepass::over(w, f);
        match preflight_failures[i]
            .iter()
            .find(|(n, _)| n == &w.name || n == &over)
        {
            Some((_, msg)) => {
                rows[k] = Some(runner::failed_row(&entries[i], w, c, f, tool, msg.clone()))
            }
            None => open.push((k, runner::CellRun::new(ctx, i, &entries[i], w, c, f))),
        }
    }
    let mut verdicts = Vec::new();
    let runs = ctx.args.runs;
    match ctx.args.order {
        Order::Sequential => {
            for (_, cell) in open.iter_mut() {
                if ctx.lab.interrupted() {
                    break;
                }
                runner::turn(ctx, cell, 1..=runs);
            }
        }
        Order::Interleaved => {
            let mut rng = ctx.args.seed.map(fastrand::Rng::with_seed);
            for round in 1..=runs {
                let mut turns: Vec<usize> = (0..open.len()).collect();
                if let Some(rng) = rng.as_mut() {
                    rng.shuffle(&mut turns);
                }
                for t in turns {
                    if ctx.lab.interrupted() {
                        break;
                    }
                    if open[t].1.open() {
                        runner::turn(ctx, &mut open[t].1, round..=round);
                    }
                }
            }
        }
    }
    for (k, cell) in open {
        if ctx.lab.interrupted() && !cell.has_runs() && cell.open() {
            continue; // never reached
        }
        let server = cell.server;
        if !ctx.args.thresholds.is_empty() && cell.has_runs() {
            verdicts.push(rate_results::RowVerdicts {
                server: cell.entry.name.clone(),
                workload: cell.workload.name.clone(),
                connections: cell.c as u64,
                protocol: (cell.framing != Framing::H1).then(|| protocol::name(cell.framing)),
                verdicts: cell.judge(&ctx.args.thresholds),
            });
        }
        let (row, notes) = cell.finish(ctx);
        for n in notes {
            if !docs[server].notes.contains(&n) {
                docs[server].notes.push(n);
            }
        }
        rows[k] = Some(row);
    }
    (rows.into_iter().flatten().collect(), verdicts)
}

/// The fixed-rate phase (`--rate`, `--slo`) after the closed-loop cells,
/// with the closed-loop rows' `--threshold` verdicts.
fn at_rate(
    ctx: &runner::Ctx,
    entries: &[Entry],
    workloads: &[Workload],
    rows: &[results::Row],
    closed_loop_verdicts: Vec<rate_results::RowVerdicts>,
) -> rate_results::AtRate {
    let args = ctx.args;
    let measured = if args.rates.is_empty() && args.slo.is_empty() {
        fixed_rate::Measured::default()
    } else {
        let asked = fixed_rate::Asked {
            rates: &args.rates,
            slo: &args.slo,
            thresholds: &args.thresholds,
            connections: args.connections.iter().copied().max().unwrap_or(1),
            length: args.rate_duration,
            searches: args.runs,
        };
        fixed_rate::run(ctx, entries, workloads, rows, &asked)
    };
    rate_results::AtRate {
        duration_s: args.rate_duration.as_secs_f64(),
        rates: args.rates.iter().map(|r| r.label()).collect(),
        slo: args.slo.iter().map(|t| t.text.clone()).collect(),
        thresholds: args.thresholds.iter().map(|t| t.text.clone()).collect(),
        cells: measured.cells,
        capacity: measured.capacity,
        closed_loop_verdicts,
    }
}

/// The plan in a line, with how long it will take.
fn eta(args: &CompareArgs, cells: usize) -> String {
    let turns = match args.order {
        Order::Interleaved => args.runs,
        Order::Sequential => 1,
    };
    let eta = plan::estimate(cells, args.warmup, args.runs, args.duration, turns);
    let eta = if eta.as_secs() >= 90 {
        format!("{:.0} min", eta.as_secs_f64() / 60.0)
    } else {
        format!("{} s", eta.as_secs())
    };
    format!(
        "\n{} runs to do: {} cell(s) of server × workload × c, each {} × {:.0}s after {:.0}s warm-up, \
         {}, driven by {}: about {eta}\n",
        cells * args.runs as usize,
        cells,
        args.runs,
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        match args.order {
            Order::Interleaved => "interleaved (run k of every cell before run k+1 of any; \
                                   each turn restarts, re-verifies and warms up its server)",
            Order::Sequential => "sequential (each cell's runs back to back)",
        },
        args.load_tool.name(),
    )
}

fn settings(
    args: &CompareArgs,
    workloads: &[Workload],
    threads: usize,
    baseline: Option<String>,
    environment: Environment,
) -> Settings {
    // What the engine runs on here, as `harness run` records it: resolved
    // once (every run of the session resolves the same way).
    let (io, io_note, gather_us) = if args.load_tool == LoadTool::Harness {
        let (io, note, can_gather) = crate::engine::resolve_io(args.lab.io);
        let gathers = io == crate::engine::Io::Uring && can_gather && !args.lab.gather.is_zero();
        let gather_us = gathers.then_some(args.lab.gather.as_secs_f64() * 1e6);
        (Some(io.name().to_string()), note, gather_us)
    } else {
        (None, None, None)
    };
    Settings {
        workloads: workloads
            .iter()
            .map(|w| WorkloadDoc {
                name: w.name.clone(),
                path: w.path.clone(),
            })
            .collect(),
        connections: args.connections.iter().map(|&c| c as u64).collect(),
        duration_s: args.duration.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        runs: args.runs,
        keepalive: !args.no_keepalive,
        protocol: match protocol::framings(args).as_slice() {
            [Framing::H1] => None,
            framings => Some(
                framings
                    .iter()
                    .map(|&f| protocol::name(f))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        },
        ws_in_flight: workloads
            .iter()
            .any(|w| matches!(w.kind, plan::Kind::WsEcho | plan::Kind::WsRoom))
            .then(|| u64::from(args.ws_in_flight())),
        threads: threads as u64,
        timeout_s: args.timeout.as_secs_f64(),
        load_tool: args.load_tool.name().into(),
        baseline,
        environment: Some(environment.name().into()),
        order: Some(args.order.name().into()),
        seed: args.seed.filter(|_| args.order == Order::Interleaved),
        io,
        io_note,
        gather_us,
        tls: args.tls.then(|| results::TlsSettings {
            version: match args.tls_version {
                crate::engine::TlsVersion::Tls12 => "1.2",
                crate::engine::TlsVersion::Tls13 => "1.3",
            }
            .into(),
            resume: true,
            certificate: "made for the run (labcert): a private CA and an ECDSA P-256 \
                          certificate for 127.0.0.1, ::1 and localhost; every server \
                          terminates TLS itself with it"
                .into(),
        }),
    }
}

/// Ratios, the files, the table; the exit code: 130 when interrupted, 1
/// when nothing was measured.
fn finish(args: &CompareArgs, results: &mut Results) -> anyhow::Result<ExitCode> {
    if results.header.interrupted {
        let measured: Vec<String> = results.rows.iter().map(|r| r.server.clone()).collect();
        for d in results.servers.iter_mut() {
            if d.status == ServerStatus::Ran && !measured.contains(&d.name) {
                d.status = ServerStatus::Skipped;
                d.reason = Some("not reached: interrupted".into());
            }
        }
    }
    apply_ratios(results);
    let dir = args.lab.out_dir().join(results.header.dir_name(""));
    report::write_all(&dir, results)?;
    println!("{}", report::table::terminal(results));
    print!("{}", report::rates::terminal(results));
    println!("results: {}", dir.display());
    let failed = results.at_rate.failures();
    for f in &failed {
        eprintln!("harness: threshold {f}");
    }
    Ok(if results.header.interrupted {
        ExitCode::from(130)
    } else if !results.rows.iter().any(|r| r.status != RowStatus::Failed) {
        eprintln!("harness: nothing was measured: every selected server failed (see above)");
        ExitCode::FAILURE
    } else if !failed.is_empty() {
        ExitCode::from(crate::thresholds::EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

fn pick_baseline(args: &CompareArgs, docs: &[ServerDoc]) -> Option<String> {
    let ran: Vec<&str> = docs
        .iter()
        .filter(|d| d.status == ServerStatus::Ran)
        .map(|d| d.name.as_str())
        .collect();
    match &args.baseline {
        Some(b) => Some(b.clone()),
        None if ran.contains(&"php-fpm") => Some("php-fpm".into()),
        None => ran.first().map(|s| s.to_string()),
    }
}

/// Each row's RPS over the baseline's, same workload, level, tool and
/// framing.
pub fn apply_ratios(results: &mut Results) {
    let Some(base) = results.settings.baseline.clone() else {
        return;
    };
    let lookup: Vec<(String, u64, String, Option<String>, f64)> = results
        .rows
        .iter()
        .filter(|r| r.server == base && r.status != RowStatus::Failed)
        .filter_map(|r| {
            Some((
                r.workload.clone(),
                r.connections,
                r.tool.clone(),
                r.protocol.clone(),
                r.summary.as_ref()?.rps_mean,
            ))
        })
        .collect();
    for r in results.rows.iter_mut() {
        let Some(s) = r.summary.as_mut() else {
            continue;
        };
        s.ratio = lookup
            .iter()
            .find(|(w, c, t, p, _)| {
                *w == r.workload && *c == r.connections && *t == r.tool && *p == r.protocol
            })
            .filter(|(.., b)| *b > 0.0)
            .map(|(.., b)| s.rps_mean / b);
    }
}

/// `harness report DIR`: re-renders report.md and report.html from results.json.
pub fn report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let path: PathBuf = if args.dir.is_dir() {
        args.dir.join("results.json")
    } else {
        args.dir.clone()
    };
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let results = Results::from_json(&text).with_context(|| {
        format!(
            "{} is not a harness.compare results document",
            path.display()
        )
    })?;
    if results.header.schema != results::SCHEMA {
        bail!(
            "{}: schema {:?}, this harness reads {:?}",
            path.display(),
            results.header.schema,
            results::SCHEMA
        );
    }
    report::write_reports(&dir, &results)?;
    println!("{}", report::table::terminal(&results));
    print!("{}", report::rates::terminal(&results));
    println!(
        "rendered: {} and {}",
        dir.join("report.md").display(),
        dir.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}
