//! Fixed-rate cells (`compare --rate`) and capacity under an SLO
//! (`compare --slo`): each server loaded at a held rate on the engine's
//! open loop, latency counted from each request's intended send (so a
//! stall or a queue shows), beside its CPU per request. Run after the
//! closed-loop cells, whose RPS are the capacity that `--rate 25%` takes a
//! share of; each server is started once for all its rates and searches.
//!
//! A cell holds its rate when it achieved ≥ 95 % of it with nothing
//! failed (HttpArena's acceptance rule); under `--slo` a step holds when
//! it also passes every SLO threshold.

use std::time::Duration;

use super::plan::{Kind, Workload};
use super::protocol;
use super::rate_results::{CapacityRow, RateCell, RateLatency};
pub use super::rate_spec::RateSpec;
use super::results::CurvePoint;
use super::results::{Row, RowStatus};
use super::runner::{self, Ctx, CURVE};
use crate::capacity::{self, Search};
use crate::catalog::{Entry, Running};
use crate::engine::{self, Control, Framing, Pace};
use crate::lab::load;
use crate::stats::Percentiles;
use crate::thresholds::{self, Threshold};

/// A cell holds its rate at this share of it achieved, with 0 failed.
pub const HELD_SHARE: f64 = 0.95;

/// The generator, not the server, is the limit when its own CPU reached
/// this share of the cores it runs on.
const GENERATOR_BUSY_SHARE: f64 = 0.9;

/// After a step that did not hold: time for the server's queue to drain.
const SETTLE: Duration = Duration::from_secs(1);

/// Everything `--rate` and `--slo` measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub cells: Vec<RateCell>,
    pub capacity: Vec<CapacityRow>,
}

/// What the fixed-rate phase asks for.
pub struct Asked<'a> {
    pub rates: &'a [RateSpec],
    pub slo: &'a [Threshold],
    pub thresholds: &'a [Threshold],
    /// Connections the open loop sends on.
    pub connections: usize,
    /// Each fixed-rate run.
    pub length: Duration,
    /// `--slo`: searches per server and workload (`--runs`).
    pub searches: u32,
}

/// The closed-loop RPS of `server` × `workload` over `protocol` (`None`:
/// HTTP/1.1) at `c` in `rows`, else at another c.
fn closed_loop(
    rows: &[Row],
    server: &str,
    workload: &str,
    c: usize,
    protocol: &Option<String>,
) -> Option<f64> {
    let mine = |r: &&Row| {
        r.server == server
            && r.workload == workload
            && r.protocol == *protocol
            && r.status != RowStatus::Failed
    };
    rows.iter()
        .filter(mine)
        .filter(|r| r.connections == c as u64)
        .chain(rows.iter().filter(mine))
        .find_map(|r| r.summary.as_ref().map(|s| s.rps_mean))
        .filter(|&r| r > 0.0)
}

/// Runs every server × workload's rates and search, one server start each.
pub fn run(
    ctx: &Ctx,
    entries: &[Entry],
    workloads: &[Workload],
    rows: &[Row],
    asked: &Asked,
) -> Measured {
    let mut out = Measured::default();
    let framings = protocol::framings(ctx.args).len().max(1);
    let pairs = entries
        .iter()
        .flat_map(|e| workloads.iter().map(move |w| (e, w)))
        .filter(|(e, w)| {
            !matches!(w.kind, Kind::WsHold | Kind::WsRoom)
                && rows
                    .iter()
                    .any(|r| r.server == e.name && r.workload == w.name)
        })
        .map(|(_, w)| if w.kind.is_ws() { 1 } else { framings })
        .sum::<usize>();
    let per_pair = asked.rates.len()
        + if asked.slo.is_empty() {
            0
        } else {
            // A search takes about 8 to 12 steps, and one at half its capacity.
            10 * asked.searches.max(1) as usize + 1
        };
    let eta = asked.length.as_secs_f64() * (pairs * per_pair) as f64;
    ctx.progress.line(&format!(
        "\nfixed rates: {pairs} server × workload × protocol, {} rate(s){}, {:.0}s a run: about {}",
        asked.rates.len(),
        if asked.slo.is_empty() {
            String::new()
        } else {
            format!(" and {} SLO search(es) each", asked.searches.max(1))
        },
        asked.length.as_secs_f64(),
        if eta >= 90.0 {
            format!("{:.0} min", eta / 60.0)
        } else {
            format!("{eta:.0} s")
        }
    ));
    for entry in entries {
        for w in workloads {
            if ctx.lab.interrupted() {
                return out;
            }
            if matches!(w.kind, Kind::WsHold | Kind::WsRoom) {
                ctx.progress.line(&format!(
                    "{} {}: no fixed rate (a held or fan-out workload has no rate of its own)",
                    entry.name, w.name
                ));
                continue;
            }
            // Only servers whose closed-loop cells were loaded (not skipped).
            if !rows
                .iter()
                .any(|r| r.server == entry.name && r.workload == w.name)
            {
                continue;
            }
            server_rates(ctx, entry, w, rows, asked, &mut out);
        }
    }
    out
}

/// The rates and the search of one server × workload, over each framing
/// of the run (`--protocol`), on one start of the server.
fn server_rates(
    ctx: &Ctx,
    entry: &Entry,
    w: &Workload,
    rows: &[Row],
    asked: &Asked,
    out: &mut Measured,
) {
    let closed_c = ctx.args.connections.iter().copied().max().unwrap_or(1);
    // WebSocket workloads have their own framing; the others one per protocol.
    let framings = if w.kind.is_ws() {
        vec![Framing::H1]
    } else {
        protocol::framings(ctx.args)
    };
    let of = |f: Framing| ForFraming {
        protocol: (f != Framing::H1 && !w.kind.is_ws()).then(|| protocol::name(f)),
        framing: f,
    };
    let mut running = match ctx.start(entry) {
        Ok(r) => r,
        Err(e) => {
            for &f in &framings {
                let p = of(f);
                let closed = closed_loop(rows, &entry.name, &w.name, closed_c, &p.protocol);
                unmeasured(
                    entry,
                    w,
                    &p,
                    closed,
                    asked,
                    out,
                    format!("did not start: {e:#}"),
                );
            }
            return;
        }
    };
    for &f in &framings {
        if ctx.lab.interrupted() {
            break;
        }
        let p = of(f);
        let closed = closed_loop(rows, &entry.name, &w.name, closed_c, &p.protocol);
        framing_rates(ctx, &running, entry, w, &p, closed, asked, out);
    }
    for n in running.stop() {
        ctx.progress.line(&format!("{}: {n}", entry.name));
    }
}

/// One framing of a server × workload's fixed-rate phase.
struct ForFraming {
    framing: Framing,
    /// As the cells name it (`None`: plain HTTP/1.1).
    protocol: Option<String>,
}

/// Neither rates nor a search: each asked-for cell and the SLO row say why.
fn unmeasured(
    entry: &Entry,
    w: &Workload,
    p: &ForFraming,
    closed: Option<f64>,
    asked: &Asked,
    out: &mut Measured,
    why: String,
) {
    for &spec in asked.rates {
        out.cells.push(RateCell {
            error: Some(why.clone()),
            protocol: p.protocol.clone(),
            ..empty_cell(&entry.name, &w.name, spec.label(), asked.connections, 0.0)
        });
    }
    if !asked.slo.is_empty() {
        out.capacity.push(CapacityRow {
            server: entry.name.clone(),
            workload: w.name.clone(),
            protocol: p.protocol.clone(),
            capacity_per_s: None,
            failed_at_per_s: None,
            closed_loop_rps: closed,
            searches_capacity_per_s: Vec::new(),
            range_per_s: None,
            at_half: None,
            steps: Vec::new(),
            note: Some(why),
        });
    }
}

/// The rates and the search of one server × workload over one framing.
#[allow(clippy::too_many_arguments)]
fn framing_rates(
    ctx: &Ctx,
    running: &Running,
    entry: &Entry,
    w: &Workload,
    p: &ForFraming,
    closed: Option<f64>,
    asked: &Asked,
    out: &mut Measured,
) {
    let framing = p.framing;
    let blank = |asked_as: String, error: String| RateCell {
        error: Some(error),
        protocol: p.protocol.clone(),
        ..empty_cell(&entry.name, &w.name, asked_as, asked.connections, 0.0)
    };
    let at = if w.kind.is_ws() {
        Ok(running.addr)
    } else {
        protocol::served(
            entry,
            running,
            framing,
            matches!(
                ctx.placed.environment,
                crate::env::Environment::Bare | crate::env::Environment::Pinned
            ),
        )
        .and_then(|addr| {
            runner::preflight(running, &w.path)?;
            Ok(addr)
        })
    };
    let at = match at {
        Ok(a) => a,
        Err(why) => return unmeasured(entry, w, p, closed, asked, out, why),
    };
    let step = |running: &Running, rate: f64, asked_as: String| -> Option<RateCell> {
        if ctx.lab.interrupted() {
            return None;
        }
        let mut cell = one_rate(ctx, running, w, (framing, at), rate, asked_as, asked);
        cell.protocol = p.protocol.clone();
        Some(cell)
    };
    for &spec in asked.rates {
        let rate = match (spec, closed) {
            (RateSpec::PerSecond(r), _) => r,
            (RateSpec::OfCapacity(s), Some(c)) => s * c,
            (RateSpec::OfCapacity(_), None) => {
                out.cells.push(blank(
                    spec.label(),
                    "no closed-loop capacity was measured to take a share of".into(),
                ));
                continue;
            }
        };
        match step(running, rate, spec.label()) {
            Some(cell) => out.cells.push(cell),
            None => break,
        }
    }
    if !asked.slo.is_empty() && !ctx.lab.interrupted() {
        let mut steps = Vec::new();
        let start = closed.map_or(100.0, |c| (c / 4.0).max(1.0));
        let ceiling = closed.map_or(1e6, |c| c * 4.0);
        // --runs searches, each from the same start: their spread is the
        // capacity's interval.
        let mut searches: Vec<Search> = Vec::new();
        for k in 1..=asked.searches.max(1) {
            if ctx.lab.interrupted() {
                break;
            }
            let label = if asked.searches > 1 {
                format!("slo search {k}")
            } else {
                "slo step".to_string()
            };
            searches.push(capacity::search(start, ceiling, |rate| {
                let cell = step(running, rate, label.clone())?;
                let within = cell.held && cell.within_slo == Some(true);
                steps.push(cell);
                Some(within)
            }));
        }
        let found: Vec<Option<f64>> = searches.iter().map(|s| s.capacity_per_s).collect();
        let (capacity_per_s, range) = across_runs(&found);
        // The lowest rate a search failed above the capacity.
        let failed_at_per_s = searches
            .iter()
            .filter_map(|s| s.failed_at_per_s)
            .filter(|&f| capacity_per_s.is_none_or(|c| f > c))
            .reduce(f64::min);
        let at_half = capacity_per_s.and_then(|c| step(running, c / 2.0, "half capacity".into()));
        let note = if searches.iter().any(|s| s.interrupted) || searches.is_empty() {
            Some("interrupted: the capacity is the highest rate held so far".to_string())
        } else if capacity_per_s.is_none() {
            Some(format!(
                "held no rate within the SLO, down to {:.0}/s",
                steps.last().map_or(0.0, |s: &RateCell| s.offered_per_s)
            ))
        } else if searches.iter().all(|s| s.failed_at_per_s.is_none()) {
            Some("held every rate up to the search's ceiling (4× its closed-loop RPS)".into())
        } else if found.iter().any(Option::is_none) {
            Some(format!(
                "{} of {} searches held no rate",
                found.iter().filter(|f| f.is_none()).count(),
                found.len()
            ))
        } else {
            None
        };
        out.capacity.push(CapacityRow {
            server: entry.name.clone(),
            workload: w.name.clone(),
            protocol: p.protocol.clone(),
            capacity_per_s,
            failed_at_per_s,
            closed_loop_rps: closed,
            searches_capacity_per_s: if found.len() > 1 { found } else { Vec::new() },
            range_per_s: range,
            at_half,
            steps,
            note,
        });
    }
}

/// The capacity over several searches: their median (of those that held
/// a rate), and the lowest and highest found where there are two or more.
pub fn across_runs(found: &[Option<f64>]) -> (Option<f64>, Option<[f64; 2]>) {
    let mut held: Vec<f64> = found.iter().flatten().copied().collect();
    held.sort_by(f64::total_cmp);
    let n = held.len();
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => Some(held[n / 2]),
        _ => Some((held[n / 2 - 1] + held[n / 2]) / 2.0),
    };
    let range = (n >= 2).then(|| [held[0], held[n - 1]]);
    (median, range)
}

/// A cell with nothing measured yet.
fn empty_cell(
    server: &str,
    workload: &str,
    asked: String,
    connections: usize,
    offered_per_s: f64,
) -> RateCell {
    RateCell {
        server: server.to_string(),
        workload: workload.to_string(),
        protocol: None,
        asked,
        connections: connections as u64,
        offered_per_s,
        achieved_per_s: 0.0,
        achieved_share: 0.0,
        requests: 0,
        failed: 0,
        held: false,
        latency_us: RateLatency::default(),
        latency_curve: Vec::new(),
        server_cpu_us_per_request: None,
        server_cores: None,
        server_rss_peak_bytes: None,
        generator_cpu_pct: None,
        lateness_p99_us: 0,
        generator_note: None,
        within_slo: None,
        thresholds: Vec::new(),
        error: None,
    }
}

/// The most connections an open loop opens.
const MAX_OPEN_LOOP_CONNECTIONS: usize = 2000;

/// Connections for an open loop at `rate`: at least `-c`, and enough for
/// 50 ms of the rate in flight, so that the generator's own connections
/// (Little's law on the client side: in flight = rate × latency) do not
/// cap what a server that answers in tens of ms can achieve.
pub fn open_loop_connections(c: usize, rate: f64) -> usize {
    let needed = (rate * 0.05).ceil() as usize;
    c.max(needed.min(MAX_OPEN_LOOP_CONNECTIONS)).max(1)
}

/// One metered open-loop run at `rate`.
fn one_rate(
    ctx: &Ctx,
    running: &Running,
    w: &Workload,
    on: (Framing, std::net::SocketAddr),
    rate: f64,
    asked_as: String,
    asked: &Asked,
) -> RateCell {
    let label = format!("{} {} at {rate:.0}/s ({asked_as})", running.name, w.name);
    let mut bar = ctx.progress.run(label, asked.length);
    let connections = open_loop_connections(asked.connections, rate);
    let mut plan = runner::plan(ctx, running, w, connections, on, asked.length);
    plan.pace = Pace::Rate(rate);
    plan.warmup = capacity::RATE_WARMUP;
    let control = Control {
        interrupt: ctx.lab.interrupt.clone(),
    };
    let path = ctx
        .placed
        .setup
        .as_ref()
        .map_or_else(Vec::new, |s| s.path_pids(running));
    let (outcome, sample) = load::metered(
        running,
        &path,
        ctx.lab.db_pid(ctx.placed.setup.as_ref()),
        || engine::run(&plan, &control, &mut |s| bar.update(s)),
    );
    let mut cell = empty_cell(&running.name, &w.name, asked_as, connections, rate);
    let r = match outcome {
        Ok(r) => r,
        Err(e) => {
            bar.finish("failed");
            cell.error = Some(format!("{e:#}"));
            return cell;
        }
    };
    let s = &r.stats;
    let p = Percentiles::of(&s.latency_us);
    cell.requests = s.requests();
    cell.failed = s.failures.total();
    cell.achieved_per_s = r.ok_per_s();
    cell.achieved_share = if rate > 0.0 {
        cell.achieved_per_s / rate
    } else {
        0.0
    };
    cell.held = cell.achieved_share >= HELD_SHARE && cell.failed == 0 && !r.interrupted();
    cell.latency_us = RateLatency {
        p50: p.p50,
        p90: p.p90,
        p99: p.p99,
        p99_9: p.p99_9,
        max: p.max,
    };
    if !s.latency_us.is_empty() {
        cell.latency_curve = CURVE
            .iter()
            .map(|&q| CurvePoint {
                percentile: q,
                latency_us: match q {
                    q if q >= 100.0 => s.latency_us.max(),
                    q if q <= 0.0 => s.latency_us.min(),
                    q => s.latency_us.value_at_quantile(q / 100.0),
                },
            })
            .collect();
    }
    cell.lateness_p99_us = s.schedule_lateness_us.value_at_quantile(0.99);
    if let Some(m) = sample {
        cell.server_cores = Some(m.server_cpu_s / m.wall_s.max(1e-9));
        cell.server_rss_peak_bytes = Some(m.server_rss_peak_bytes);
        cell.generator_cpu_pct = Some(crate::lab::meter::Sample::pct(m.generator_cpu_s, m.wall_s));
        if s.ok > 0 {
            cell.server_cpu_us_per_request = Some(m.server_cpu_s * 1e6 / s.ok as f64);
        }
        let busy = m.generator_cpu_s / m.wall_s.max(1e-9) / r.threads.max(1) as f64;
        if busy >= GENERATOR_BUSY_SHARE {
            cell.generator_note = Some(format!(
                "the generator was busy ({:.0}% of its {} threads' cores): it may not have driven this rate, lateness p99 {}",
                busy * 100.0,
                r.threads,
                crate::report::latency(cell.lateness_p99_us)
            ));
        }
    }
    let summary = thresholds::Summary {
        latency_us: &s.latency_us,
        requests: cell.requests,
        failures: cell.failed,
        seconds: r.duration.as_secs_f64(),
    };
    cell.thresholds = thresholds::judge(asked.thresholds, &summary).0;
    if !asked.slo.is_empty() {
        cell.within_slo = Some(thresholds::judge(asked.slo, &summary).1);
    }
    bar.finish(&format!(
        "{:.0}/s achieved ({:.1}%), p99 {}{}",
        cell.achieved_per_s,
        cell.achieved_share * 100.0,
        crate::report::latency(cell.latency_us.p99),
        if cell.held {
            ", held"
        } else {
            ", did not hold"
        }
    ));
    if !cell.held && !ctx.lab.interrupted() {
        std::thread::sleep(SETTLE);
    }
    cell
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_loop_has_enough_connections_for_its_rate() {
        assert_eq!(open_loop_connections(100, 1000.0), 100);
        assert_eq!(open_loop_connections(50, 3000.0), 150);
        assert_eq!(open_loop_connections(50, 1e7), MAX_OPEN_LOOP_CONNECTIONS);
    }

    #[test]
    fn several_searches_give_a_median_and_a_range() {
        assert_eq!(across_runs(&[Some(900.0)]), (Some(900.0), None));
        assert_eq!(
            across_runs(&[Some(900.0), Some(1000.0), None, Some(950.0)]),
            (Some(950.0), Some([900.0, 1000.0]))
        );
        assert_eq!(
            across_runs(&[Some(800.0), Some(1000.0)]),
            (Some(900.0), Some([800.0, 1000.0]))
        );
        assert_eq!(across_runs(&[None, None]), (None, None));
    }
}
