//! `harness compare`: the lab's main job (DESIGN.md §4, §5). Every selected
//! server that can run here is started from the [`catalog`](crate::catalog),
//! its `/config` read and audited for fairness ([`audit`]), then each
//! server × workload × concurrency cell is run by [`runner`]: start,
//! verify, warm up, `--runs` measured runs with the server's process tree
//! sampled from /proc ([`sampler`]), stop. Without `--mysql-url` a private
//! MariaDB serves every server of the run and is removed at the end.
//! Results: one table on stdout and `results/<UTC time>/` with results.json
//! ([`results`]), report.md and report.html ([`report`]).
//!
//! Ctrl-C / SIGTERM: the run stops, every child is stopped in order, the
//! database removed, what was measured written; a second signal (or a stuck
//! cleanup) kills whatever is registered ([`crate::catalog::supervise`]).

pub mod args;
pub mod audit;
pub mod plan;
pub mod progress;
pub mod report;
pub mod results;
pub mod runner;

pub mod tools;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::catalog::embedded::Embedded;
use crate::catalog::{self, supervise, Availability, Db, Entry, Env};
use crate::procfs;
use args::{CompareArgs, LoadTool, ReportArgs};
use plan::Workload;
use results::{ContractCheck, Database, Results, ServerDoc, Settings, WorkloadDoc};

/// The embedded MariaDB's `max_connections`: room for any server's pool
/// plus `conn=new` bursts.
const EMBEDDED_MAX_CONNECTIONS: u32 = 1000;

/// The selected entries: `--servers` names (all if none), then `--target`s.
fn select(args: &CompareArgs) -> anyhow::Result<Vec<Entry>> {
    let all = catalog::catalog();
    let targets = args
        .targets
        .iter()
        .map(|t| catalog::external(t))
        .collect::<anyhow::Result<Vec<Entry>>>()?;
    let mut out = Vec::new();
    let names: Vec<&str> = args
        .servers
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if names.is_empty() || names == ["all"] {
        if args.targets.is_empty() || names == ["all"] {
            out = all;
        }
    } else {
        // A name given by --target is selected by it (below).
        for n in names
            .into_iter()
            .filter(|n| !targets.iter().any(|t| t.name == *n))
        {
            match all.iter().find(|e| e.name == n) {
                Some(e) if !out.contains(e) => out.push(e.clone()),
                Some(_) => {}
                None => bail!(
                    "unknown server {n:?}; the catalog has: {} (or use --target NAME=URL)",
                    all.iter()
                        .map(|e| e.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
    }
    for e in targets {
        if out.iter().any(|o| o.name == e.name) {
            bail!("--target {}: the name is already taken", e.name);
        }
        out.push(e);
    }
    if out.is_empty() {
        bail!("no server selected");
    }
    Ok(out)
}

/// `SELECT VERSION(), @@max_connections` through the `mariadb`/`mysql`
/// client, best effort (an external database).
fn probe_external(db: &Db) -> (Option<String>, Option<u64>) {
    let Some(client) = catalog::find_program(&["mariadb", "mysql"]) else {
        return (None, None);
    };
    let out = Command::new(client)
        .args([
            "--no-defaults",
            "-h",
            &db.host,
            "-P",
            &db.port.to_string(),
            "-u",
            &db.user,
        ])
        .args(["--batch", "--skip-column-names", "--connect-timeout=3"])
        .args(["-e", "SELECT VERSION(), @@max_connections"])
        .arg(&db.name)
        .env("MYSQL_PWD", &db.password)
        .stdin(std::process::Stdio::null())
        .output();
    parse_probe(out.ok().filter(|o| o.status.success()).map(|o| o.stdout))
}

fn parse_probe(out: Option<Vec<u8>>) -> (Option<String>, Option<u64>) {
    let Some(out) = out else { return (None, None) };
    let text = String::from_utf8_lossy(&out);
    let mut it = text.trim().split('\t');
    let version = it
        .next()
        .filter(|v| !v.is_empty())
        .map(|v| format!("MariaDB/MySQL {v}"));
    (version, it.next().and_then(|n| n.trim().parse().ok()))
}

/// `harness verify` over a started server, printed as it goes. Without a
/// database in the run, the rows that need one are left out (503 is then
/// the right answer).
fn check_contract(ctx: &runner::Ctx, running: &catalog::Running) -> ContractCheck {
    let rows: Vec<_> = crate::verify::rows()
        .into_iter()
        .filter(|r| ctx.db.is_some() || !r.needs_db())
        .collect();
    let contract = ContractCheck::from_verdicts(&crate::verify::check(
        running.addr,
        Duration::from_secs(5),
        rows,
    ));
    ctx.progress.line(&format!(
        "  contract (harness verify): {}/{} rows pass{}{}",
        contract.passed,
        contract.rows,
        if ctx.db.is_none() {
            " (no database in this run: its rows not checked)"
        } else {
            ""
        },
        contract
            .failed
            .iter()
            .map(|f| format!("\n    FAIL {}: {}", f.row, f.why))
            .collect::<String>()
    ));
    contract
}

/// The pre-pass: start each runnable server once, read its `/config`,
/// check its scheduler placement and each workload's answer, stop it.
/// Returns per server the workloads that failed their check.
fn prepass(
    ctx: &runner::Ctx,
    entries: &[Entry],
    docs: &mut [ServerDoc],
    workloads: &[Workload],
) -> Vec<Vec<(String, String)>> {
    let mut failed = vec![Vec::new(); entries.len()];
    let own_group = procfs::effective_autogroup(std::process::id() as i32);
    for (i, e) in entries.iter().enumerate() {
        if docs[i].status != "ran" || ctx.interrupt.load(Ordering::Relaxed) {
            continue;
        }
        ctx.progress.line(&format!("starting {} ...", e.name));
        let mut running = match ctx.start(e) {
            Ok(r) => r,
            Err(err) => {
                docs[i].status = "failed".into();
                docs[i].reason = Some(format!("did not start: {err:#}"));
                continue;
            }
        };
        docs[i].versions = running.versions.clone();
        docs[i].notes.extend(running.notes.iter().cloned());
        docs[i].config = match running.config() {
            Ok(c) => Some(c),
            Err(why) => {
                docs[i].notes.push(format!("{}: {why}", e.name));
                None
            }
        };
        if e.serves_whole_contract() {
            docs[i].contract = Some(check_contract(ctx, &running));
        }
        if running.managed() {
            let tree = procfs::tree(&running.pids());
            docs[i].same_autogroup = own_group.as_ref().map(|own| {
                tree.iter()
                    .all(|s| !matches!(procfs::effective_autogroup(s.pid), Some(g) if g != *own))
            });
        }
        for w in workloads.iter().filter(|w| e.serves(&w.path)) {
            if let Err(msg) = runner::preflight(&running, &w.path) {
                failed[i].push((w.name.clone(), msg));
            }
        }
        docs[i].notes.extend(running.stop());
    }
    failed
}

/// The `compare` command.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if args.connections.is_empty() || args.connections.contains(&0) {
        bail!("-c needs levels of at least 1 connection");
    }
    if args.duration.is_zero() {
        bail!("-d must be positive");
    }
    if args.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if args.load_tool != LoadTool::Harness {
        tools::find(args.load_tool)?;
    }
    let entries = select(&args)?;
    let environment = crate::env::Environment::parse(&args.env).context("bad --env")?;
    if let Err(why) = environment.availability() {
        bail!("--env {}: not available here: {why}", environment.name());
    }
    let mut workloads = plan::workloads(&args.workloads)?;
    let env = Env::discover(args.repo_dir.as_deref());
    let progress = progress::Progress::new();
    let interrupt = Arc::new(AtomicBool::new(false));
    supervise::install_signal_handlers(interrupt.clone())?;
    crate::machine::raise_nofile();
    let started_utc = crate::units::now_utc();
    let machine = results::machine();

    // What can run here.
    let mut docs: Vec<ServerDoc> = entries
        .iter()
        .map(|e| {
            let (status, reason, detail) = match e.availability(&env) {
                Availability::Ready(d) => ("ran", None, Some(d)),
                Availability::Missing { reason, fix } => {
                    ("skipped", Some(format!("{reason}; to run it: {fix}")), None)
                }
            };
            ServerDoc {
                name: e.name.clone(),
                model: e.model.to_string(),
                language: e.language.to_string(),
                status: status.into(),
                reason,
                detail,
                config: None,
                versions: Vec::new(),
                same_autogroup: None,
                notes: Vec::new(),
                contract: None,
            }
        })
        .collect();
    if environment != crate::env::Environment::Bare {
        for (d, e) in docs.iter_mut().zip(&entries) {
            if d.status == "ran" && !e.placeable() {
                d.status = "skipped".into();
                d.reason = Some(format!(
                    "--env {}: a server started elsewhere (--target) cannot be placed",
                    environment.name()
                ));
            }
        }
    }
    for d in docs.iter().filter(|d| d.status == "skipped") {
        progress.line(&format!(
            "{}: cannot run here: {}",
            d.name,
            d.reason.as_deref().unwrap_or("")
        ));
    }
    if !docs.iter().any(|d| d.status == "ran") {
        bail!("none of the selected servers can run here (see `harness servers`)");
    }

    // The database.
    let mut embedded = Embedded::default();
    let mut database = Database {
        kind: "none".into(),
        url: None,
        version: None,
        max_connections: None,
    };
    let mut db: Option<Db> = None;
    if workloads.iter().any(|w| w.needs_db) {
        if let Some(url) = &args.mysql_url {
            let d = Db::parse(url).context("bad --mysql-url")?;
            let (version, max) = probe_external(&d);
            database = Database {
                kind: "external".into(),
                url: Some(d.redacted()),
                version,
                max_connections: max,
            };
            db = Some(d);
        } else if let Err(e) = embedded_mariadb::availability() {
            let dropped: Vec<String> = workloads
                .iter()
                .filter(|w| w.needs_db)
                .map(|w| w.name.clone())
                .collect();
            progress.line(&format!(
                "harness: {e}. The workloads {} need a database: skipped (or pass --mysql-url)",
                dropped.join(", ")
            ));
            workloads.retain(|w| !w.needs_db);
            if workloads.is_empty() {
                bail!("no workload left to run without a database");
            }
        } else {
            progress.line("starting a private MariaDB ...");
            let opts = embedded_mariadb::Options {
                port: None,
                max_connections: EMBEDDED_MAX_CONNECTIONS,
            };
            // mariadb-install-db shares /tmp with whatever else runs: one retry.
            let m = match embedded_mariadb::MariaDb::start(opts.clone()) {
                Ok(m) => m,
                Err(e) if !interrupt.load(Ordering::Relaxed) => {
                    let first = e.to_string();
                    progress.line(&format!(
                        "the private MariaDB did not start ({}); retrying once",
                        first.lines().next().unwrap_or("")
                    ));
                    embedded_mariadb::MariaDb::start(opts)
                        .with_context(|| format!("first attempt: {first}"))
                        .context("cannot start the private MariaDB")?
                }
                Err(e) => return Err(e).context("cannot start the private MariaDB"),
            };
            let (d, version) = embedded.adopt(m)?;
            database = Database {
                kind: "embedded".into(),
                url: Some(d.redacted()),
                version,
                max_connections: Some(u64::from(EMBEDDED_MAX_CONNECTIONS)),
            };
            db = Some(d);
        }
    }
    let db_pid = embedded.pid();

    // The environment, after the database (a namespace reaches it by DNAT).
    let setup = if environment == crate::env::Environment::Bare {
        None
    } else {
        let db_port = db
            .as_ref()
            .filter(|d| d.host == "127.0.0.1" || d.host == "localhost")
            .map(|d| d.port);
        let s = crate::env::Setup::build(environment, db_port)?;
        for d in docs.iter_mut().filter(|d| d.status == "ran") {
            d.notes.push(format!(
                "environment {}: {}",
                environment.name(),
                s.detail()
            ));
        }
        Some(s)
    };
    // pinned: this thread (and so the engine's threads, and ab or wrk) on
    // the load generator's CPUs.
    let _pin = match &setup {
        Some(s) => s.pin_load()?,
        None => None,
    };
    let threads = args.threads.unwrap_or_else(|| {
        setup
            .as_ref()
            .and_then(|s| s.load_cpus())
            .map_or_else(crate::engine::default_threads, <[usize]>::len)
    });
    let scratch = supervise::TempDir::new("benchlab-compare-")?;
    let ctx = runner::Ctx {
        env: &env,
        db: db.as_ref(),
        db_pid,
        interrupt: &interrupt,
        args: &args,
        threads,
        progress: &progress,
        scratch: scratch.path(),
        setup: setup.as_ref(),
    };

    // Start each once: /config, placement, each workload's answer.
    let preflight_failures = prepass(&ctx, &entries, &mut docs, &workloads);
    let fairness = audit::audit(&docs, database.max_connections);
    progress.line(&format!("\nsettings (/config):\n{}", audit::table(&docs)));
    for w in &fairness.warnings {
        progress.line(&format!("warning: {w}"));
    }

    // The cells.
    let mut cells: Vec<(usize, &Workload, usize)> = Vec::new();
    for w in &workloads {
        for &c in &args.connections {
            for (i, e) in entries.iter().enumerate() {
                if docs[i].status == "ran" && e.serves(&w.path) {
                    cells.push((i, w, c));
                }
            }
        }
    }
    let eta = plan::estimate(cells.len(), args.warmup, args.runs, args.duration);
    let eta = if eta.as_secs() >= 90 {
        format!("{:.0} min", eta.as_secs_f64() / 60.0)
    } else {
        format!("{} s", eta.as_secs())
    };
    progress.line(&format!(
        "\n{} runs to do: {} cell(s) of server × workload × c, each {} × {:.0}s after {:.0}s warm-up, \
         driven by {}: about {eta}\n",
        cells.len() * args.runs as usize,
        cells.len(),
        args.runs,
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        args.load_tool.name(),
    ));

    let mut rows = Vec::new();
    for (i, w, c) in cells {
        if interrupt.load(Ordering::Relaxed) {
            break;
        }
        let e = &entries[i];
        if let Some((_, msg)) = preflight_failures[i].iter().find(|(n, _)| n == &w.name) {
            rows.push(runner::failed_row(e, w, c, args.load_tool, msg.clone()));
            continue;
        }
        let (row, notes) = runner::run_cell(&ctx, e, w, c);
        for n in notes {
            if !docs[i].notes.contains(&n) {
                docs[i].notes.push(n);
            }
        }
        rows.push(row);
    }
    let interrupted = interrupt.load(Ordering::Relaxed);
    drop(setup);
    drop(scratch);
    drop(embedded);

    let baseline = pick_baseline(&args, &docs);
    let mut results = Results {
        schema: results::SCHEMA.into(),
        harness_version: env!("CARGO_PKG_VERSION").into(),
        started_utc,
        finished_utc: crate::units::now_utc(),
        interrupted,
        command: std::env::args().collect(),
        settings: Settings {
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
            threads: threads as u64,
            timeout_s: args.timeout.as_secs_f64(),
            load_tool: args.load_tool.name().into(),
            baseline,
        },
        machine,
        database,
        servers: docs,
        fairness,
        rows,
    };
    if interrupted {
        for d in results.servers.iter_mut() {
            if d.status == "ran" && !results.rows.iter().any(|r| r.server == d.name) {
                d.status = "skipped".into();
                d.reason = Some("not reached: interrupted".into());
            }
        }
    }
    apply_ratios(&mut results);
    let dir = args.out.join(results.started_utc.replace(':', "-"));
    report::write_all(&dir, &results)?;
    println!("{}", report::table::terminal(&results));
    println!("results: {}", dir.display());
    Ok(if interrupted {
        ExitCode::from(130)
    } else if !results.rows.iter().any(|r| r.status != "failed") {
        eprintln!("harness: nothing was measured: every selected server failed (see above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn pick_baseline(args: &CompareArgs, docs: &[ServerDoc]) -> Option<String> {
    let ran: Vec<&str> = docs
        .iter()
        .filter(|d| d.status == "ran")
        .map(|d| d.name.as_str())
        .collect();
    match &args.baseline {
        Some(b) => Some(b.clone()),
        None if ran.contains(&"php-fpm") => Some("php-fpm".into()),
        None => ran.first().map(|s| s.to_string()),
    }
}

/// Each row's RPS over the baseline's, same workload, level and tool.
pub fn apply_ratios(results: &mut Results) {
    let Some(base) = results.settings.baseline.clone() else {
        return;
    };
    let lookup: Vec<(String, u64, String, f64)> = results
        .rows
        .iter()
        .filter(|r| r.server == base && r.status != "failed")
        .filter_map(|r| {
            Some((
                r.workload.clone(),
                r.connections,
                r.tool.clone(),
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
            .find(|(w, c, t, _)| *w == r.workload && *c == r.connections && *t == r.tool)
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
    if results.schema != results::SCHEMA {
        bail!(
            "{}: schema {:?}, this harness reads {:?}",
            path.display(),
            results.schema,
            results::SCHEMA
        );
    }
    std::fs::write(dir.join("report.md"), report::table::markdown(&results))
        .context("cannot write report.md")?;
    std::fs::write(dir.join("report.html"), report::html::render(&results))
        .context("cannot write report.html")?;
    println!("{}", report::table::terminal(&results));
    println!(
        "rendered: {} and {}",
        dir.join("report.md").display(),
        dir.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_output_parses() {
        let (v, m) = parse_probe(Some(b"10.11.19-MariaDB-0+deb12u1\t151\n".to_vec()));
        assert_eq!(
            v.as_deref(),
            Some("MariaDB/MySQL 10.11.19-MariaDB-0+deb12u1")
        );
        assert_eq!(m, Some(151));
        assert_eq!(parse_probe(None), (None, None));
    }
}
