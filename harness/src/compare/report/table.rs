//! The side-by-side table, like the seed benchmarks' "key metrics
//! comparison": on the terminal (aligned text) and in report.md (Markdown).

use std::collections::BTreeMap;

use super::super::results::{Results, Row, RowStatus, ServerStatus};
use crate::report::page::md_table;
use crate::report::{align, bytes, latency, thousands};

/// The table's header.
pub const HEADER: [&str; 14] = [
    "server",
    "model",
    "tool",
    "workload",
    "c",
    "RPS (mean ± sd)",
    "p50",
    "p99",
    "max",
    "failed",
    "CPU %",
    "CPU µs/req",
    "RSS",
    "ratio",
];
/// Right-aligned columns.
const RIGHT: [usize; 10] = [4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

/// What the CPU cells of a server started elsewhere say when its
/// processes were not named (`--target-pid`, `--target-container`).
pub const NOT_MEASURED: &str = "not measured";

/// The server's CPU per verified response, µs: CPU % (100 = one core)
/// over RPS.
pub fn cpu_us_per_request(cpu_pct: f64, rps: f64) -> Option<f64> {
    (rps > 0.0).then(|| cpu_pct / 100.0 * 1e6 / rps)
}

fn us_cell(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}")
    } else {
        thousands(us.round() as u64)
    }
}

/// One table line per row.
pub fn cells(results: &Results) -> Vec<Vec<String>> {
    results.rows.iter().map(|r| row_cells(r, results)).collect()
}

fn row_cells(r: &Row, results: &Results) -> Vec<String> {
    // A server from its image ran in a container: its name says so.
    let in_container = results
        .servers
        .iter()
        .any(|s| s.name == r.server && s.runs_in.is_some());
    let mut v = vec![
        if in_container {
            format!("{} [container]", r.server)
        } else {
            r.server.clone()
        },
        r.model.clone(),
        r.tool.clone(),
        workload_cell(r),
        r.connections.to_string(),
    ];
    match &r.summary {
        Some(s) if r.status != RowStatus::Failed => {
            let sd = if results.settings.runs > 1 || r.runs.len() > 1 {
                format!(" ± {}", thousands(s.rps_sd.round() as u64))
            } else {
                String::new()
            };
            v.push(format!("{}{sd}", thousands(s.rps_mean.round() as u64)));
            v.push(latency(s.p50_us));
            v.push(latency(s.p99_us));
            v.push(latency(s.max_us));
            v.push(thousands(s.failed));
            let unmetered = if r.model == "external" {
                NOT_MEASURED
            } else {
                "—"
            };
            v.push(
                s.server_cpu_pct
                    .map_or(unmetered.into(), |c| format!("{c:.0}")),
            );
            v.push(
                s.server_cpu_pct
                    .and_then(|c| cpu_us_per_request(c, s.rps_mean))
                    .map_or(unmetered.into(), us_cell),
            );
            v.push(s.server_rss_peak_bytes.map_or(unmetered.into(), bytes));
            v.push(s.ratio.map_or("—".into(), |x| format!("{x:.2}×")));
        }
        _ if r.status == RowStatus::NotServed => {
            v.push(format!(
                "NOT SERVED: {}",
                r.error
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            ));
            v.resize(v.len() + 8, String::new());
        }
        _ => {
            v.push(format!(
                "FAILED: {}",
                r.error
                    .as_deref()
                    .unwrap_or("no result")
                    .lines()
                    .next()
                    .unwrap_or("")
            ));
            v.resize(v.len() + 8, String::new());
        }
    }
    v
}

/// The workload, with the framing its runs spoke when it is not plain
/// HTTP/1.1 (`hello h2c ×100`: the streams the server allowed).
fn workload_cell(r: &Row) -> String {
    let spoke: Vec<_> = r
        .runs
        .iter()
        .filter_map(|run| run.framing.clone())
        .collect();
    let phrase = crate::compare::protocol::phrase(r.protocol.as_deref(), &spoke);
    if phrase.is_empty() {
        r.workload.clone()
    } else {
        format!("{} {phrase}", r.workload)
    }
}

/// The terminal table.
pub fn terminal(results: &Results) -> String {
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    rows.extend(cells(results));
    let mut out = align(&rows, &RIGHT);
    out.push_str(&footnotes(results, false));
    out
}

fn baseline_note(results: &Results) -> String {
    match &results.settings.baseline {
        Some(b) => format!("ratio: RPS over {b}'s for the same workload and c"),
        None => "ratio: no baseline".into(),
    }
}

/// What the closed-loop rows' latency is: c connections each sending the
/// moment its last answer arrives keep the server saturated, so p50 is
/// about c ÷ RPS, the queue they build, not what a user sees at a load the
/// server keeps up with.
pub fn closed_loop_note(results: &Results) -> String {
    let then = if results.at_rate.cells.is_empty() && results.at_rate.capacity.is_empty() {
        "use --rate for latency at your load"
    } else {
        "latency at a held load is in the fixed-rate tables (--rate, --slo)"
    };
    format!(
        "closed loop: each of c connections sends when its last answer arrives, so p50/p99/max \
         are the queue c connections build at saturation (p50 ≈ c ÷ RPS); {then}"
    )
}

pub use crate::lab::meter::CONTAMINATED_PCT;

/// The notes under the table.
pub fn footnotes(results: &Results, markdown: bool) -> String {
    let bullet = if markdown { "- " } else { "  " };
    let mut out = String::new();
    let mut line = |s: &str| {
        out.push_str(bullet);
        out.push_str(s);
        out.push('\n');
    };
    line(&format!(
        "RPS: responses that matched the contract, per second, {} runs of {:.0}s after {:.0}s warm-up; \
         p50/p99/max over all runs; CPU %: the server's process tree (100 = one core); \
         CPU µs/req: that CPU per response; RSS: its peak; {}",
        results.settings.runs,
        results.settings.duration_s,
        results.settings.warmup_s,
        baseline_note(results)
    ));
    line(&closed_loop_note(results));
    if let Some(io) = results.settings.io_phrase() {
        line(&format!("load: {io}"));
    }
    if results.rows.iter().any(|r| r.protocol.is_some()) {
        line(
            "framing, as each run spoke it (read from the engine, not the arguments): \
             h2c ×N is HTTP/2 by prior knowledge, h2 ×N HTTP/2 by ALPN over TLS, with N streams \
             in flight per connection as the server's SETTINGS allowed; h3 ×N HTTP/3 over QUIC \
             (UDP, the TCP port's number), N streams in flight per connection; h1-pipelined ×N, \
             N requests in flight; none, HTTP/1.1 one at a time",
        );
        for r in results.rows.iter().filter(|r| r.http2_front.is_some()) {
            line(&format!(
                "{} {} c={}: HTTP/2 terminated by {}",
                r.server,
                workload_cell(r),
                r.connections,
                r.http2_front.as_deref().unwrap_or("")
            ));
        }
    }
    let mut unmetered: Vec<&str> = results
        .rows
        .iter()
        .filter(|r| r.model == "external")
        .filter(|r| {
            r.summary
                .as_ref()
                .is_some_and(|s| s.server_cpu_pct.is_none())
        })
        .map(|r| r.server.as_str())
        .collect();
    unmetered.dedup();
    for name in unmetered {
        line(&format!(
            "{name}: started elsewhere, its CPU, RSS and the machine's other load were not \
             measured: name its processes with --target-pid {name}=PID or \
             --target-container {name}=CONTAINER"
        ));
    }
    if results.rows.iter().any(|r| !r.bodies_verified) {
        line("ab and wrk do not check bodies (ab compares lengths, wrk only statuses): their rows cannot catch a server answering 200 with an error");
    }
    for r in &results.rows {
        if let Some(s) = &r.summary {
            if s.failed > 0 {
                let kinds = crate::report::failure_kinds(&s.failures);
                let answered = if s.failures.status > 0 {
                    // A WebSocket's status is its upgrade's, once per
                    // connection; each message in flight on it failed.
                    let what = if r.path.starts_with("/ws") {
                        "upgrades answered"
                    } else {
                        "answered"
                    };
                    format!(
                        "; {what} {}",
                        statuses(r.runs.iter().map(|run| &run.status_codes))
                    )
                } else {
                    String::new()
                };
                line(&format!(
                    "{} {} c={}: {} failed ({}{answered})",
                    r.server,
                    workload_cell(r),
                    r.connections,
                    thousands(s.failed),
                    kinds.join(", ")
                ));
            }
        }
        if let Some(pct) = r
            .summary
            .as_ref()
            .and_then(|s| s.outside_cpu_pct_max)
            .filter(|&p| p >= CONTAMINATED_PCT)
        {
            line(&format!(
                "{} {} c={}: other processes took up to {pct:.0}% of the machine during its runs: \
                 its figures are contaminated (harness calibrate measures the machine's noise)",
                r.server,
                workload_cell(r),
                r.connections
            ));
        }
        let path_cpu: Vec<f64> = r.runs.iter().filter_map(|run| run.path_cpu_pct).collect();
        if let Some(max) = path_cpu.iter().copied().reduce(f64::max) {
            let min = path_cpu.iter().copied().fold(max, f64::min);
            let range = if max - min >= 0.5 {
                format!("{min:.0}-{max:.0}%")
            } else {
                format!("{max:.0}%")
            };
            line(&format!(
                "{} {} c={}: docker-proxy, on the path to the server, took {range} of a core \
                 beside the server's CPU % (harness calibrate counts it in the server's CPU per request)",
                r.server,
                workload_cell(r),
                r.connections
            ));
        }
        if let Some(note) = websocket_note(r) {
            line(&format!(
                "{} {} c={}: {note}",
                r.server,
                workload_cell(r),
                r.connections
            ));
        }
        if r.status == RowStatus::Failed {
            if let Some(e) = &r.error {
                line(&format!(
                    "{} {} c={}: {}",
                    r.server,
                    workload_cell(r),
                    r.connections,
                    e.replace('\n', " ")
                ));
            }
        }
    }
    for s in &results.servers {
        if s.status != ServerStatus::Ran {
            line(&format!(
                "{} {}: {}",
                s.name,
                s.status.name(),
                s.reason.as_deref().unwrap_or("").replace('\n', " ")
            ));
        }
    }
    for s in &results.servers {
        if let Some(where_) = &s.runs_in {
            line(&format!("{} ran in {where_}", s.name));
        }
    }
    for s in &results.servers {
        if let Some(c) = s.contract.as_ref().filter(|c| !c.failed.is_empty()) {
            line(&format!(
                "{} fails {} of {} contract rows (harness verify): {}",
                s.name,
                c.failed.len(),
                c.rows,
                c.failed
                    .iter()
                    .map(|f| f.row.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if let Some(c) = s.contract.as_ref().filter(|c| !c.known.is_empty()) {
            line(&format!(
                "{}: {} of {} contract rows fail as its core is known to, not by our code: {}",
                s.name,
                c.known.len(),
                c.rows,
                c.known
                    .iter()
                    .map(|k| k.row.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    for summary in super::conformance::summaries(&results.servers) {
        line(&summary);
    }
    for w in &results.fairness.warnings {
        line(&format!("warning: {w}"));
    }
    if results.header.interrupted {
        line("interrupted: the table covers what was measured before Ctrl-C/SIGTERM");
    }
    out
}

/// report.md.
pub fn markdown(results: &Results) -> String {
    let m = &results.machine;
    let mut out = format!(
        "# harness compare — {}\n\n{} · {} cores · kernel {} · {} · {} RAM · load {:.2} at start · \
         sched_autogroup_enabled={}\n\n",
        results.header.started_utc,
        m.cpu_model,
        m.cores,
        m.kernel,
        m.os,
        bytes(m.memory_bytes),
        m.load_avg_1m,
        m.sched_autogroup_enabled.map_or("n/a".into(), |b| u8::from(b).to_string()),
    );
    let s = &results.settings;
    out.push_str(&format!(
        "Load: {}{} (`{}`), c = {}, {} × {:.0}s runs after {:.0}s warm-up, {}, {}, {} threads. Database: {} {}{}.\n\n",
        s.load_tool,
        s.io_phrase().map_or(String::new(), |io| format!(", {io}")),
        results.header.command.join(" "),
        s.connections.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        s.runs,
        s.duration_s,
        s.warmup_s,
        s.order_phrase(),
        if s.keepalive { "keep-alive" } else { "a connection per request" },
        s.threads,
        results.database.kind,
        results.database.version.as_deref().unwrap_or(""),
        results.database.max_connections.map_or(String::new(), |n| format!(", max_connections {n}")),
    ));
    out.push_str("## Results\n\n");
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    rows.extend(cells(results));
    out.push_str(&md_table(&rows));
    out.push('\n');
    out.push_str(&footnotes(results, true));
    out.push_str(&super::conformance::markdown(&results.servers));
    out.push_str("\n## Settings of each server (`/config`)\n\n");
    let cfg = super::settings::rows(&results.servers, super::settings::View::Report);
    out.push_str(&md_table(&cfg));
    if !results.fairness.warnings.is_empty() {
        out.push_str("\nFairness warnings:\n\n");
        for w in &results.fairness.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out.push_str(&format!("\nScheduling: {}.\n", m.scheduling));
    out
}

/// A WebSocket row's own figures: server CPU per echoed message (`ws-echo`);
/// connections held and server RSS per held one (`ws-hold`), or why there
/// is no such figure.
/// The statuses a row's runs were answered with, summed over its runs:
/// `200 × 9,120, 503 × 4,212` (a failure "status 4,212" alone does not say
/// that the server turned the load away).
fn statuses<'a>(runs: impl Iterator<Item = &'a BTreeMap<String, u64>>) -> String {
    let mut sum: BTreeMap<&str, u64> = BTreeMap::new();
    for codes in runs {
        for (code, n) in codes {
            *sum.entry(code).or_default() += n;
        }
    }
    if sum.is_empty() {
        return "with no status recorded".into();
    }
    sum.iter()
        .map(|(code, n)| format!("{code} × {}", thousands(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn websocket_note(r: &Row) -> Option<String> {
    if !r.path.starts_with("/ws") || r.status == RowStatus::NotServed {
        return None;
    }
    let last = r.runs.last()?;
    let room = last.room.as_ref();
    if let Some(h) = &last.held {
        let held = match &h.waiting_note {
            Some(w) => w.clone(),
            None => format!("held {} opened, {} stayed up", h.opened, h.stayed_up),
        };
        let rss = match (h.rss_per_held_bytes, &h.rss_note) {
            (Some(b), _) => format!("{:.1} KiB of server RSS per held connection", b / 1024.0),
            (None, Some(n)) => format!("no RSS per held connection: {n}"),
            (None, None) => "no RSS per held connection".into(),
        };
        return Some(format!("{held}; {rss}"));
    }
    let waiting = waiting_upgrades(
        r.runs
            .iter()
            .map(|run| run.status_codes.get("101").copied().unwrap_or(0)),
        r.connections,
    );
    let (cpu, n) = r.runs.iter().fold((0.0, 0u64), |(cpu, n), run| {
        (
            cpu + run.server_cpu_pct.unwrap_or(0.0) / 100.0 * run.duration_s,
            n + run.ok,
        )
    });
    let Some(room) = room else {
        let cpu = (n > 0 && cpu > 0.0).then(|| {
            format!(
                "{:.1} µs of server CPU per echoed message",
                cpu * 1e6 / n as f64
            )
        });
        return match (waiting, cpu) {
            (Some(w), Some(c)) => Some(format!("{w}; {c}")),
            (w, c) => w.or(c),
        };
    };
    let mut note = waiting.map_or_else(String::new, |w| format!("{w}; "));
    note.push_str(&format!(
        "rooms of {}: {} deliveries per message",
        room.members, room.members
    ));
    if n > 0 && cpu > 0.0 {
        note.push_str(&format!(
            "; {:.1} µs of server CPU per delivery",
            cpu * 1e6 / n as f64
        ));
    }
    if let Some(spans) = &room.spans_note {
        note.push_str(&format!("; {spans}"));
    }
    Some(note)
}

/// An echo or room run whose upgrades (`101`s) numbered fewer than its
/// connections: the rest waited for theirs all run (a worker pool's
/// connections beyond its workers), so the figures are those of the
/// upgraded ones. Named from the run that upgraded the fewest.
fn waiting_upgrades(upgrades: impl Iterator<Item = u64>, connections: u64) -> Option<String> {
    let fewest = upgrades.min()?;
    (fewest < connections).then(|| {
        format!(
            "{fewest} of {connections} connections upgraded (101 × {fewest}); the rest waited \
             for theirs all run, so these figures are {fewest} connections'"
        )
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    #[test]
    fn connections_never_upgraded_are_named_as_waiting() {
        let w = |ups: &[u64], c| super::waiting_upgrades(ups.iter().copied(), c);
        assert_eq!(w(&[100, 100], 100), None);
        assert_eq!(w(&[], 100), None);
        assert_eq!(
            w(&[20, 21], 100).as_deref(),
            Some(
                "20 of 100 connections upgraded (101 × 20); the rest waited for theirs all run, \
                 so these figures are 20 connections'"
            )
        );
    }

    #[test]
    fn a_status_failure_names_the_statuses_answered() {
        let run = |pairs: &[(&str, u64)]| {
            pairs
                .iter()
                .map(|(c, n)| (c.to_string(), *n))
                .collect::<BTreeMap<_, _>>()
        };
        let runs = [
            run(&[("200", 9_000), ("503", 4_000)]),
            run(&[("503", 212), ("200", 120)]),
        ];
        assert_eq!(super::statuses(runs.iter()), "200 × 9,120, 503 × 4,212");
        assert_eq!(
            super::statuses([BTreeMap::new()].iter()),
            "with no status recorded"
        );
    }
}
