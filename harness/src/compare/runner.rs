//! One cell of a comparison (server × workload × concurrency): start the
//! server, verify the workload's answer, warm up, run `--runs` times while
//! sampling the server's processes, stop it. Never panics and never bails
//! out of the comparison: what goes wrong is written into the row.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::args::{CompareArgs, LoadTool};
use super::plan::{Kind, Workload};
use super::progress::Progress;
use super::protocol;
use super::results::{
    CurvePoint, HeldDoc, LatencyDoc, RoomRunDoc, Row, RowStatus, RunDoc, RunTls, Summary,
};
use crate::catalog::{Entry, Running};
use crate::engine::{self, Control, End, Framing, Plan};
use crate::lab::driver::Placed;
use crate::lab::load::{self, Shape};
use crate::lab::meter::Sample;
use crate::lab::profile;
use crate::lab::tools::{self, ToolRun};
use crate::lab::Lab;
use crate::stats::{latency_histogram, mean_sd, FailureCounts, Percentiles};

/// Percentiles of the latency curves.
pub const CURVE: [f64; 14] = [
    0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100.0,
];

/// What every cell shares.
pub struct Ctx<'a> {
    pub lab: &'a Lab,
    pub args: &'a CompareArgs,
    pub threads: usize,
    pub progress: &'a Progress,
    /// For the load tools' output.
    pub scratch: &'a Path,
    /// `--env`: where servers are placed and how they are reached.
    pub placed: &'a Placed,
    /// Since the comparison began: when each run was taken.
    pub clock: std::time::Instant,
    /// `--profile`: where the profiles go, or why none can be taken.
    pub profiles: Option<profile::Profiler>,
}

impl Ctx<'_> {
    fn interrupted(&self) -> bool {
        self.lab.interrupted()
    }

    /// Starts `entry` placed and published in the run's environment.
    pub fn start(&self, entry: &Entry) -> anyhow::Result<Running> {
        Ok(self.placed.start(self.lab, entry)?.running)
    }

    fn control(&self) -> Control {
        Control {
            interrupt: self.lab.interrupt.clone(),
        }
    }
}

/// Checks `GET path` once against the contract: status, headers, body.
pub fn preflight(running: &Running, path: &str) -> Result<(), String> {
    let expected = workloads::expect("GET", path);
    let r = running
        .get(path, Duration::from_secs(10))
        .map_err(|e| format!("GET {path}: {e}"))?;
    workloads::verify(&expected, r.status, &r.header_refs(), &r.body).map_err(|m| {
        let hint = if r.status == 503 {
            " (the server cannot reach its database)"
        } else {
            ""
        };
        format!("GET {path} does not answer the contract: {m}{hint}")
    })
}

fn empty_row(entry: &Entry, w: &Workload, c: usize, f: Framing, tool: LoadTool) -> Row {
    Row {
        server: entry.name.clone(),
        model: entry.model.to_string(),
        workload: w.name.clone(),
        path: w.path.clone(),
        connections: c as u64,
        protocol: (f != Framing::H1).then(|| protocol::name(f)),
        http2_front: None,
        tool: tool.name().to_string(),
        bodies_verified: tool == LoadTool::Harness,
        status: RowStatus::Ok,
        error: None,
        runs: Vec::new(),
        summary: None,
        latency_curve: Vec::new(),
    }
}

/// A row for a cell that was not run: its check failed before loading.
pub fn failed_row(
    entry: &Entry,
    w: &Workload,
    c: usize,
    f: Framing,
    tool: LoadTool,
    error: String,
) -> Row {
    let mut row = empty_row(entry, w, c, f, tool);
    row.status = RowStatus::Failed;
    row.error = Some(error);
    row
}

/// The load of one run; `on`: where and how HTTP is framed.
pub(super) fn plan(
    ctx: &Ctx,
    running: &Running,
    w: &Workload,
    c: usize,
    on: (Framing, std::net::SocketAddr),
    length: Duration,
) -> Plan {
    let shape = Shape {
        connections: c,
        threads: ctx.threads,
        keepalive: !ctx.args.no_keepalive,
        timeout: ctx.args.timeout,
        io: ctx.lab.io,
        gather: ctx.lab.gather,
    };
    match w.kind {
        Kind::Http => {
            let mut p = load::plan(running, &w.path, &shape, length);
            protocol::apply(&mut p, running, on.0, on.1, &w.path);
            p
        }
        Kind::WsEcho => {
            let ws = load::WsShape::Echo {
                in_flight: ctx.args.ws_in_flight(),
            };
            load::ws_plan(running, &w.path, &shape, ws, length)
        }
        Kind::WsRoom => {
            let ws = load::WsShape::Room {
                in_flight: ctx.args.ws_in_flight(),
                members: super::plan::room_size(c),
            };
            load::ws_plan(running, &w.path, &shape, ws, length)
        }
        Kind::WsHold => {
            let ws = load::WsShape::Hold { every: HOLD_PING };
            load::ws_plan(running, &w.path, &shape, ws, length)
        }
    }
}

/// `ws-hold`: a ping on each held connection this often.
const HOLD_PING: Duration = Duration::from_secs(1);

/// A WebSocket workload on `running`: `Ok(Ok(what holds a connection))`
/// where its `/config` serves WebSocket, `Ok(Err(why not))` where it says
/// it cannot.
fn websocket_served(running: &Running) -> Result<Result<(String, bool), String>, String> {
    let config = running.config()?;
    Ok(match config.websocket {
        Some(h) => Ok((h.connection, h.room_spans_workers)),
        None => Err(config
            .websocket_unsupported
            .unwrap_or_else(|| "its /config does not say it serves WebSocket".into())),
    })
}

/// The server's RSS now (its whole process tree), 0 if it is gone.
fn rss_now(running: &Running) -> u64 {
    crate::procfs::tree(&running.pids())
        .iter()
        .map(|s| s.rss_pages)
        .sum::<u64>()
        * crate::procfs::page_size()
}

/// `ws-hold`'s figures from a run: never a negative or a gone server's RSS.
fn held_doc(
    r: &engine::RunResult,
    asked: usize,
    rss_before: Option<u64>,
    rss_peak: Option<u64>,
    alive: bool,
    holder: &str,
) -> HeldDoc {
    let (opened, stayed_up) = (r.stats.ws_upgraded, r.stats.ws_up_at_end);
    let (rss_per_held_bytes, rss_note) = match (rss_before, rss_peak) {
        _ if !alive => (None, Some("the server is gone: no RSS to read".to_string())),
        _ if stayed_up == 0 => (None, Some("no connection stayed up".to_string())),
        (Some(b), Some(p)) if p > b => (Some((p - b) as f64 / stayed_up as f64), None),
        (Some(b), Some(p)) => (
            None,
            Some(format!(
                "RSS did not grow ({} KiB before, {} KiB during the hold): no figure per connection",
                b / 1024,
                p / 1024
            )),
        ),
        _ => (None, Some("the server's RSS was not sampled (not started by the harness)".to_string())),
    };
    let per_connection = holder.contains("per connection")
        || holder.contains("connection's lifetime")
        || holder.starts_with("a worker");
    let waiting_note = (stayed_up < asked as u64 && per_connection)
        .then(|| format!("{stayed_up} of {asked} held (the rest wait: a worker per connection)"));
    HeldDoc {
        opened,
        stayed_up,
        rss_per_held_bytes,
        rss_note,
        waiting_note,
    }
}

/// One server × workload × c cell being measured: its row so far, taken
/// in one turn (`--order sequential`) or one run per turn (`interleaved`).
pub struct CellRun<'e> {
    /// Index of its server in the selection (and the server documents).
    pub server: usize,
    pub entry: &'e Entry,
    pub workload: &'e Workload,
    pub c: usize,
    /// How its HTTP requests are framed (`--protocol`).
    pub framing: Framing,
    row: Row,
    /// Every measured run's latency, merged (the built-in engine's).
    merged: Histogram<u64>,
    /// Notes for the server's document (from its start and stop).
    notes: Vec<String>,
    /// Failed: no more turns.
    over: bool,
}

impl<'e> CellRun<'e> {
    pub fn new(
        ctx: &Ctx,
        server: usize,
        entry: &'e Entry,
        workload: &'e Workload,
        c: usize,
        framing: Framing,
    ) -> CellRun<'e> {
        CellRun {
            server,
            entry,
            workload,
            c,
            framing,
            row: empty_row(entry, workload, c, framing, ctx.args.load_tool),
            merged: latency_histogram(),
            notes: Vec::new(),
            over: false,
        }
    }

    /// Whether another turn can be taken (it has not failed).
    pub fn open(&self) -> bool {
        !self.over
    }

    pub fn has_runs(&self) -> bool {
        !self.row.runs.is_empty()
    }

    /// Ends the cell with `error` (interrupted, if Ctrl-C caused it).
    fn fail(&mut self, ctx: &Ctx, error: String) {
        self.row.status = if ctx.interrupted() {
            RowStatus::Interrupted
        } else {
            RowStatus::Failed
        };
        self.row.error = Some(error);
        self.over = true;
    }

    /// `--threshold` judged on the runs so far, their latency merged (the
    /// built-in engine's; ab's and wrk's have no histogram: their latency
    /// thresholds fail).
    pub fn judge(
        &self,
        thresholds: &[crate::thresholds::Threshold],
    ) -> Vec<crate::thresholds::Verdict> {
        let runs = &self.row.runs;
        let summary = crate::thresholds::Summary {
            latency_us: &self.merged,
            requests: runs.iter().map(|r| r.requests).sum(),
            failures: runs.iter().map(|r| r.failed).sum(),
            seconds: runs.iter().map(|r| r.duration_s).sum(),
        };
        crate::thresholds::judge(thresholds, &summary).0
    }

    /// The row with its summary and latency curve, and the notes for the
    /// server's document.
    pub fn finish(mut self, ctx: &Ctx) -> (Row, Vec<String>) {
        let tool = ctx.args.load_tool;
        self.row.summary = summarize(&self.row.runs, &self.merged, tool);
        if self.row.status == RowStatus::Ok {
            self.row.latency_curve = curve(&self.row.runs, &self.merged, tool);
            if ctx.interrupted() && self.row.runs.len() < ctx.args.runs as usize {
                self.row.status = RowStatus::Interrupted;
            }
        }
        (self.row, self.notes)
    }
}

/// One turn of a cell: its server started afresh (placed and published
/// in the run's environment), its answer checked again, warmed up, the
/// runs `runs` measured, and stopped. A failure ends the cell.
pub fn turn(ctx: &Ctx, cell: &mut CellRun, runs: std::ops::RangeInclusive<u32>) {
    let label = match cell.framing {
        Framing::H1 => format!("{} {} c={}", cell.entry.name, cell.workload.name, cell.c),
        f => format!(
            "{} {} c={} {}",
            cell.entry.name,
            cell.workload.name,
            cell.c,
            protocol::name(f)
        ),
    };
    let mut running = match ctx.start(cell.entry) {
        Ok(r) => r,
        Err(e) => return cell.fail(ctx, format!("did not start: {e:#}")),
    };
    for n in &running.notes {
        if !cell.notes.contains(n) {
            cell.notes.push(n.clone());
        }
    }
    let mut at = running.addr;
    if !cell.workload.kind.is_ws() {
        match protocol::served(
            cell.entry,
            &running,
            cell.framing,
            matches!(
                ctx.placed.environment,
                crate::env::Environment::Bare | crate::env::Environment::Pinned
            ),
        ) {
            Ok(addr) => {
                at = addr;
                if protocol::is_h2(cell.framing) {
                    cell.row.http2_front.clone_from(&running.http2_front);
                }
            }
            Err(why) => {
                cell.row.status = RowStatus::NotServed;
                cell.row.error = Some(why);
                cell.over = true;
            }
        }
    }
    let mut holder = String::new();
    let mut spans = true;
    if cell.workload.kind.is_ws() {
        match websocket_served(&running) {
            Ok(Ok((h, s))) => (holder, spans) = (h, s),
            Ok(Err(why)) => {
                cell.row.status = RowStatus::NotServed;
                cell.row.error = Some(format!("does not serve WebSocket: {why}"));
                cell.over = true;
            }
            Err(e) => cell.fail(ctx, format!("its /config: {e}")),
        }
        if ctx.args.load_tool != LoadTool::Harness && !cell.over {
            cell.fail(
                ctx,
                format!(
                    "{} loads only with the built-in engine (--load-tool harness)",
                    cell.workload.name
                ),
            );
        }
    }
    if !cell.over {
        let served = Served { at, holder, spans };
        if let Err(e) = load(ctx, &mut running, cell, runs, &label, &served) {
            cell.fail(ctx, e);
        }
    }
    for n in running.stop() {
        if !cell.notes.contains(&n) {
            cell.notes.push(n);
        }
    }
}

/// How a started server serves a cell: where its framing is loaded (its
/// own h2c port, or its address) and, for WebSocket, what holds a
/// connection and whether a room spans its workers (its `/config`).
struct Served {
    at: std::net::SocketAddr,
    holder: String,
    spans: bool,
}

/// Checks, warms up and measures `runs` on a started server; the error
/// ends the cell.
fn load(
    ctx: &Ctx,
    running: &mut Running,
    cell: &mut CellRun,
    runs: std::ops::RangeInclusive<u32>,
    label: &str,
    served: &Served,
) -> Result<(), String> {
    let Served {
        at,
        ref holder,
        spans,
    } = *served;
    let (w, c, tool) = (cell.workload, cell.c, ctx.args.load_tool);
    let on = (cell.framing, at);
    if !w.kind.is_ws() {
        preflight(running, &w.path)?;
        if protocol::is_multiplexed(cell.framing) {
            protocol::check_answer(running, cell.framing, at, &w.path)?;
        }
    }
    let control = ctx.control();
    // ws-hold's baseline: the server's RSS before this turn holds anything.
    // Read after the warm-up, which holds the same connections, it already
    // had their memory (kept by the allocator once they closed), and a held
    // connection read about a tenth of its cost.
    let rss_before = running.managed().then(|| rss_now(running));
    if !ctx.args.warmup.is_zero() {
        let mut bar = ctx
            .progress
            .run(format!("{label} warm-up"), ctx.args.warmup);
        let p = plan(ctx, running, w, c, on, ctx.args.warmup);
        match engine::run(&p, &control, &mut |s| bar.update(s)) {
            Ok(r) => bar.finish(&format!(
                "{} req/s, {} failed",
                crate::report::thousands(r.requests_per_s() as u64),
                crate::report::thousands(r.stats.failures.total())
            )),
            Err(e) => {
                bar.finish("failed");
                return Err(format!("warm-up: {e:#}"));
            }
        }
    }
    let total = ctx.args.runs;
    for i in runs {
        if ctx.interrupted() {
            return Ok(());
        }
        let mut bar = ctx
            .progress
            .run(format!("{label} run {i}/{total}"), ctx.args.duration);
        let started_s = ctx.clock.elapsed().as_secs_f64();
        let recording = ctx.profiles.as_ref().map(|p| (p, p.start(running)));
        let path = ctx
            .placed
            .setup
            .as_ref()
            .map_or_else(Vec::new, |s| s.path_pids(running));
        let (outcome, sample) = load::metered(
            running,
            &path,
            ctx.lab.db_pid(ctx.placed.setup.as_ref()),
            || match tool {
                LoadTool::Harness => {
                    let p = plan(ctx, running, w, c, on, ctx.args.duration);
                    engine::run(&p, &control, &mut |s| bar.update(s))
                        .map(Ok)
                        .map_err(anyhow::Error::from)
                }
                _ => tools::run(
                    tool,
                    &running.url(&w.path),
                    c,
                    ctx.args.duration,
                    None,
                    ctx.threads,
                    !ctx.args.no_keepalive,
                    ctx.args.timeout,
                    ctx.scratch,
                    &ctx.lab.interrupt,
                )
                .map(Err),
            },
        );
        let mut doc = match outcome {
            Ok(Ok(result)) => {
                let _ = cell.merged.add(&result.stats.latency_us);
                let rss_peak = sample.as_ref().map(|s| s.server_rss_peak_bytes);
                let spoke = protocol::record(&result);
                let mut doc = engine_doc(&result, sample);
                match spoke {
                    Ok(f) => doc.framing = Some(f),
                    Err(why) if !w.kind.is_ws() => {
                        bar.finish("failed");
                        return Err(format!("run {i}: {why}"));
                    }
                    Err(_) => {}
                }
                if w.kind == Kind::WsHold {
                    let alive = running.check_alive().is_ok();
                    doc.held = Some(held_doc(&result, c, rss_before, rss_peak, alive, holder));
                }
                if let Some(room) = result.plan.room() {
                    doc.room = Some(RoomRunDoc {
                        rooms: room.rooms as u64,
                        members: room.size as u64,
                        messages_sent: result.stats.room_messages,
                        deliveries: result.stats.ok + result.stats.failures.total(),
                        spans_note: (!spans).then(|| {
                            "its /config says a room does not span its workers: members on other workers are in other rooms, so deliveries may fail (room_spans_workers: false)".to_string()
                        }),
                    });
                }
                doc
            }
            Ok(Err(t)) => tool_doc(&t, sample),
            Err(e) => {
                bar.finish("failed");
                return Err(format!("run {i}: {e:#}"));
            }
        };
        doc.started_s = Some(started_s);
        if let Some((profiler, recording)) = recording {
            // A row per framing: its own files (`…-c4-h2c16-run1`).
            let framing = match cell.framing {
                Framing::H1 => String::new(),
                f => format!("-{}", protocol::name(f).replace(' ', "")),
            };
            let stem = format!("{}-{}-c{c}{framing}-run{i}", cell.entry.name, w.name);
            let mut p = profiler.finish(recording, running, &stem, label, doc.requests);
            // CPU per request from the meter, split by the profile.
            let per_request = |pct: Option<f64>| {
                pct.filter(|_| doc.requests > 0).map_or(0.0, |p| {
                    p / 100.0 * doc.duration_s * 1e6 / doc.requests as f64
                })
            };
            p.server.scale_to(per_request(doc.server_cpu_pct));
            p.generator.scale_to(per_request(doc.generator_cpu_pct));
            doc.profile = Some(p);
        }
        bar.finish(&format!(
            "{} req/s, {} failed{}",
            crate::report::thousands(doc.ok_per_s as u64),
            crate::report::thousands(doc.failed),
            doc.server_cpu_pct
                .map_or(String::new(), |c| format!(", server CPU {c:.0}%"))
        ));
        let gone = doc.end == End::ServerGone.name();
        let message = doc.message.clone();
        cell.row.runs.push(doc);
        if gone {
            // How it died (its exit status or signal, with its log), when
            // it has exited; its log alone when it only stopped answering.
            let log = match running.check_alive() {
                Err(died) => format!("{died:#}"),
                Ok(()) => running.logs(),
            };
            return Err(format!("run {i}: {}\n{log}", message.unwrap_or_default()));
        }
    }
    running
        .check_alive()
        .map_err(|e| format!("the server died: {e:#}"))
}

/// A run's CPU and memory figures, each absent without a sampled window.
#[derive(Default)]
struct CpuFields {
    server: Option<f64>,
    rss: Option<u64>,
    generator: Option<f64>,
    db: Option<f64>,
    outside: Option<f64>,
    path: Option<f64>,
}

fn cpu_fields(sample: Option<Sample>) -> CpuFields {
    match sample {
        Some(s) => CpuFields {
            server: Some(Sample::pct(s.server_cpu_s, s.wall_s)),
            rss: Some(s.server_rss_peak_bytes),
            generator: Some(Sample::pct(s.generator_cpu_s, s.wall_s)),
            db: s.db_cpu_s.map(|d| Sample::pct(d, s.wall_s)),
            outside: Some(s.outside_cpu_pct),
            path: s.path_beside_server_cpu_s.map(|p| Sample::pct(p, s.wall_s)),
        },
        None => CpuFields::default(),
    }
}

fn engine_doc(r: &engine::RunResult, sample: Option<Sample>) -> RunDoc {
    let p = Percentiles::of(&r.stats.latency_us);
    let cpu = cpu_fields(sample);
    let tls = r.plan.tls().map(|_| RunTls {
        handshakes_full: r.stats.handshakes_full,
        handshakes_resumed: r.stats.handshakes_resumed,
        handshake_p50_us: r.stats.handshake_us.value_at_quantile(0.5),
    });
    RunDoc {
        duration_s: r.duration.as_secs_f64(),
        requests: r.stats.requests(),
        ok: r.stats.ok,
        failed: r.stats.failures.total(),
        failures: r.stats.failures,
        status_codes: r
            .stats
            .status
            .seen()
            .map(|(s, n)| (s.to_string(), n))
            .collect::<BTreeMap<_, _>>(),
        ok_per_s: r.ok_per_s(),
        requests_per_s: r.requests_per_s(),
        latency_us: LatencyDoc {
            mean: p.mean,
            p50: p.p50,
            p75: p.p75,
            p90: p.p90,
            p99: p.p99,
            p99_9: p.p99_9,
            max: p.max,
        },
        server_cpu_pct: cpu.server,
        server_rss_peak_bytes: cpu.rss,
        generator_cpu_pct: cpu.generator,
        db_cpu_pct: cpu.db,
        outside_cpu_pct: cpu.outside,
        path_cpu_pct: cpu.path,
        end: r.end.name().to_string(),
        message: r.message.clone(),
        series: r.series.clone(),
        started_s: None,
        profile: None,
        tls,
        held: None,
        framing: None,
        room: None,
    }
}

fn tool_doc(t: &ToolRun, sample: Option<Sample>) -> RunDoc {
    let cpu = cpu_fields(sample);
    let ok = t.ok();
    RunDoc {
        duration_s: t.duration_s,
        requests: t.requests,
        ok,
        failed: t.failed(),
        failures: t.failures,
        status_codes: BTreeMap::new(),
        ok_per_s: if t.duration_s > 0.0 {
            ok as f64 / t.duration_s
        } else {
            0.0
        },
        requests_per_s: t.requests_per_s,
        latency_us: LatencyDoc {
            mean: t.mean_us,
            p50: t.percentile(50.0),
            p75: t.percentile(75.0),
            p90: t.percentile(90.0),
            p99: t.percentile(99.0),
            p99_9: 0,
            max: t.max_us,
        },
        server_cpu_pct: cpu.server,
        server_rss_peak_bytes: cpu.rss,
        // The tool, a child the harness waited for in the window.
        generator_cpu_pct: cpu.generator,
        db_cpu_pct: cpu.db,
        outside_cpu_pct: cpu.outside,
        path_cpu_pct: cpu.path,
        end: "duration".into(),
        message: None,
        series: Vec::new(),
        started_s: None,
        profile: None,
        tls: None,
        held: None,
        framing: None,
        room: None,
    }
}

/// The row's summary over its complete runs (all runs if none completed).
pub fn summarize(runs: &[RunDoc], merged: &Histogram<u64>, tool: LoadTool) -> Option<Summary> {
    if runs.is_empty() {
        return None;
    }
    let complete: Vec<&RunDoc> = runs
        .iter()
        .filter(|r| r.end == "duration" || r.end == "count")
        .collect();
    let use_runs: Vec<&RunDoc> = if complete.is_empty() {
        runs.iter().collect()
    } else {
        complete
    };
    let rps: Vec<f64> = use_runs.iter().map(|r| r.ok_per_s).collect();
    let (rps_mean, rps_sd) = mean_sd(&rps);
    let mut failures = FailureCounts::default();
    for r in runs {
        failures += &r.failures;
    }
    let avg = |f: &dyn Fn(&RunDoc) -> Option<f64>| {
        let v: Vec<f64> = use_runs.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let (p50_us, p99_us, max_us) = if tool == LoadTool::Harness && !merged.is_empty() {
        (
            merged.value_at_quantile(0.5),
            merged.value_at_quantile(0.99),
            merged.max(),
        )
    } else {
        let n = use_runs.len() as u64;
        (
            use_runs.iter().map(|r| r.latency_us.p50).sum::<u64>() / n,
            use_runs.iter().map(|r| r.latency_us.p99).sum::<u64>() / n,
            use_runs.iter().map(|r| r.latency_us.max).max().unwrap_or(0),
        )
    };
    Some(Summary {
        rps_mean,
        rps_sd,
        rps_min: rps.iter().copied().fold(f64::INFINITY, f64::min),
        rps_max: rps.iter().copied().fold(0.0, f64::max),
        p50_us,
        p99_us,
        max_us,
        requests: runs.iter().map(|r| r.requests).sum(),
        failed: runs.iter().map(|r| r.failed).sum(),
        failures,
        server_cpu_pct: avg(&|r| r.server_cpu_pct),
        server_rss_peak_bytes: use_runs
            .iter()
            .filter_map(|r| r.server_rss_peak_bytes)
            .max(),
        generator_cpu_pct: avg(&|r| r.generator_cpu_pct),
        outside_cpu_pct_max: runs
            .iter()
            .filter_map(|r| r.outside_cpu_pct)
            .reduce(f64::max),
        ratio: None,
    })
}

fn curve(runs: &[RunDoc], merged: &Histogram<u64>, tool: LoadTool) -> Vec<CurvePoint> {
    if tool == LoadTool::Harness {
        if merged.is_empty() {
            return Vec::new();
        }
        return CURVE
            .iter()
            .map(|&p| CurvePoint {
                percentile: p,
                latency_us: if p >= 100.0 {
                    merged.max()
                } else if p <= 0.0 {
                    merged.min()
                } else {
                    merged.value_at_quantile(p / 100.0)
                },
            })
            .collect();
    }
    // The tools print a few percentiles: average them over the runs.
    let n = runs.len().max(1) as u64;
    let pick = |f: fn(&LatencyDoc) -> u64| runs.iter().map(|r| f(&r.latency_us)).sum::<u64>() / n;
    let max = runs.iter().map(|r| r.latency_us.max).max().unwrap_or(0);
    [
        (50.0, pick(|l| l.p50)),
        (75.0, pick(|l| l.p75)),
        (90.0, pick(|l| l.p90)),
        (99.0, pick(|l| l.p99)),
        (100.0, max),
    ]
    .into_iter()
    .filter(|&(_, latency_us)| latency_us > 0)
    .map(|(percentile, latency_us)| CurvePoint {
        percentile,
        latency_us,
    })
    .collect()
}
