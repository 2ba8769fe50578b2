//! Reports: everything that turns a [`RunResult`] into text. The engine
//! never formats; these modules never measure.

pub mod ab;
pub mod csv;
pub mod hgrm;
pub mod hlog;
pub mod json;
pub mod markdown;
pub mod page;
pub mod series;
pub mod svg;
pub mod text;

use crate::engine::{Check, Pace, Route, RunResult, Stop};
use crate::stats::{FailureCounts, PathStats, Percentiles};

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A compact human summary.
    Text,
    /// ApacheBench's report layout (ab 2.3).
    Ab,
    /// The versioned JSON document (harness/schema/run.schema.json).
    Json,
    /// One header line and one row.
    Csv,
    /// A Markdown table.
    Markdown,
}

/// The report of `result` in `format`.
pub fn render(format: Format, result: &RunResult) -> String {
    match format {
        Format::Text => text::render(result),
        Format::Ab => ab::render(result),
        Format::Json => json::render(result),
        Format::Csv => csv::render(result),
        Format::Markdown => markdown::render(result),
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string().into_bytes();
    let groups: Vec<&str> = digits
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).expect("ASCII digits"))
        .collect();
    groups.join(",")
}

/// p50, p75, p90, p99, p99.9, max, mean and standard deviation, as [`latency`].
pub fn latencies(p: &Percentiles) -> [String; 8] {
    [
        p.p50,
        p.p75,
        p.p90,
        p.p99,
        p.p99_9,
        p.max,
        p.mean.round() as u64,
        p.stdev.round() as u64,
    ]
    .map(latency)
}

/// The failure kinds that occurred, as `timeout 3`.
pub fn failure_kinds(failures: &FailureCounts) -> Vec<String> {
    failures
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(name, n)| format!("{name} {}", thousands(*n)))
        .collect()
}

/// p50, p90, p99 and max, as [`latency`]; `-` without samples.
pub fn short_latencies(p: &Percentiles) -> [String; 4] {
    [p.p50, p.p90, p.p99, p.max].map(|v| {
        if p.count == 0 {
            "-".to_string()
        } else {
            latency(v)
        }
    })
}

/// A share as a percentage: `99.00%`.
pub fn percent(share: f64) -> String {
    format!("{:.2}%", 100.0 * share)
}

/// A failure count with its kinds: `0`, or `12 (status 12)`.
pub fn failures_in_words(failures: &FailureCounts) -> String {
    let total = failures.total();
    if total == 0 {
        "0".to_string()
    } else {
        format!(
            "{} ({})",
            thousands(total),
            failure_kinds(failures).join(", ")
        )
    }
}

/// A latency in µs, in the unit that reads best: `480µs`, `1.25ms`, `2.50s`.
pub fn latency(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 10_000_000 {
        format!("{:.2}ms", us as f64 / 1e3)
    } else {
        format!("{:.2}s", us as f64 / 1e6)
    }
}

/// A byte count: `812 B`, `12.3 KiB`, `4.56 MiB`, `1.20 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[unit])
    }
}

/// One path of a mixed run, summarised for the printers.
pub struct PathSummary<'a> {
    pub route: &'a Route,
    pub stats: &'a PathStats,
    /// Its weight's part of all the weights: the share asked for.
    pub weight_share: f64,
    /// Its part of the requests the run finished: the share sent.
    pub share: f64,
    pub per_s: f64,
    pub ok_per_s: f64,
    pub latency: Percentiles,
}

/// Each path of a mixed run, in the plan's order; empty for a single path.
pub fn paths(r: &RunResult) -> Vec<PathSummary<'_>> {
    if !r.plan.is_mixed() {
        return Vec::new();
    }
    let weights: u64 = r.plan.mix.iter().map(|m| u64::from(m.weight)).sum();
    let requests = r.stats.requests();
    let part = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    r.plan
        .mix
        .iter()
        .zip(&r.stats.paths)
        .map(|(route, stats)| PathSummary {
            route,
            stats,
            weight_share: part(u64::from(route.weight), weights),
            share: part(stats.requests(), requests),
            per_s: r.per_s(stats.requests()),
            ok_per_s: r.per_s(stats.ok),
            latency: Percentiles::of(&stats.latency_us),
        })
        .collect()
}

/// The paths of a mix as `--path` takes them, space-separated
/// (`/hello:99 /cpu?n=200000:1`); the target of a single-path run.
pub fn mix_spec(r: &RunResult) -> String {
    if !r.plan.is_mixed() {
        return r.plan.request.target.clone();
    }
    let each: Vec<String> = r
        .plan
        .mix
        .iter()
        .map(|m| {
            if m.request.method == r.plan.request.method {
                format!("{}:{}", m.request.target, m.weight)
            } else {
                format!("{} {}:{}", m.request.method, m.request.target, m.weight)
            }
        })
        .collect();
    each.join(" ")
}

/// The check every path shares, or `None` when a mix judges its paths
/// differently.
pub fn common_check(r: &RunResult) -> Option<&Check> {
    let routes = &r.plan.mix;
    match routes.first() {
        Some(first) if r.plan.is_mixed() => routes
            .iter()
            .all(|m| m.check == first.check)
            .then_some(&first.check),
        _ => Some(&r.plan.check),
    }
}

/// How responses were judged, in words.
pub fn describe_check(r: &RunResult) -> String {
    if r.plan.is_mixed() {
        return "each response by its own path's check: the contract's exact status and \
                body for its endpoints, any 2xx for other paths or with --no-verify"
            .to_string();
    }
    if let Some(ws) = r.plan.ws() {
        if ws.room().is_some() {
            return match &r.plan.check {
                Check::Exact { body, .. } => format!(
                    "the upgrade's 101 and Sec-WebSocket-Accept, then each delivery: the {}-byte {} message after its header byte for byte, its sender's order, and the room's one order",
                    body.len(),
                    if ws.binary { "binary" } else { "text" }
                ),
                _ => "the upgrade's 101 and Sec-WebSocket-Accept, then each delivery's sender's order and the room's one order (--no-verify: not its bytes)".to_string(),
            };
        }
        if ws.hold() {
            return "the upgrade's 101 and Sec-WebSocket-Accept, then that each ping's pong carries its payload".to_string();
        }
        return match &r.plan.check {
            Check::Exact { body, .. } => format!(
                "the upgrade's 101 and Sec-WebSocket-Accept, then each echo of a {}-byte {} message byte for byte",
                body.len(),
                if ws.binary { "binary" } else { "text" }
            ),
            _ => "the upgrade's 101 and Sec-WebSocket-Accept, then that each message is echoed (--no-verify: not its bytes)".to_string(),
        };
    }
    let what = format!("{} {}", r.plan.request.method, r.plan.request.target);
    match &r.plan.check {
        Check::Success => "status 2xx (not a contract endpoint, or --no-verify)".to_string(),
        Check::Status(s) => format!("status {s} (the contract's for {what})"),
        Check::Exact { status, body } => format!(
            "status {status} and the exact {}-byte body of {what} (the contract's)",
            body.len()
        ),
    }
}

/// The check of the whole run as a short token: its paths' common
/// [`check_kind`], or `mixed`.
pub fn run_check_kind(r: &RunResult) -> &'static str {
    common_check(r).map_or("mixed", |c| check_kind(c))
}

/// The check as a short token: `exact`, `status`, `2xx`.
pub fn check_kind(check: &Check) -> &'static str {
    match check {
        Check::Success => "2xx",
        Check::Status(_) => "status",
        Check::Exact { .. } => "exact",
    }
}

/// The load shape in words: `100 connections on 2 threads (io_uring), keep-alive, closed loop`.
pub fn describe_load(r: &RunResult) -> String {
    let p = &r.plan;
    if p.connections == 0 && !r.merged.is_empty() {
        // `harness merge` of .hlog files: the logs do not say how they loaded.
        return format!(
            "{} runs merged from interval logs (which do not record their load settings)",
            r.merged.len()
        );
    }
    let pace = match p.pace {
        Pace::Closed => "closed loop".to_string(),
        Pace::Rate(rate) => format!("open loop at {rate} req/s"),
    };
    let stop = match p.stop {
        Stop::Count(n) => format!("-n {}", thousands(n)),
        Stop::Duration(d) => format!("-d {:.1}s", d.as_secs_f64()),
    };
    let io = if r.merged.is_empty() {
        match (r.io, r.gather) {
            (crate::engine::Io::Uring, Some(g)) => {
                format!(" (io_uring, gathering {} µs)", g.as_micros())
            }
            (crate::engine::Io::Uring, None) => " (io_uring)".to_string(),
            (crate::engine::Io::Epoll, _) => " (epoll)".to_string(),
        }
    } else {
        String::new()
    };
    format!(
        "{} connections on {} thread{}{io}, {}, {pace}, {stop}",
        p.connections,
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        match (p.keepalive(), p.framing()) {
            (true, crate::engine::Framing::Pipelined(n)) => {
                format!("keep-alive, HTTP/1.1 pipelined {n} deep")
            }
            (true, crate::engine::Framing::H2c(n)) => {
                format!("HTTP/2 by prior knowledge (h2c), up to {n} streams per connection")
            }
            (true, crate::engine::Framing::H2(n)) => {
                format!("HTTP/2 over TLS by ALPN (h2), up to {n} streams per connection")
            }
            (true, crate::engine::Framing::H3(n)) => {
                format!("HTTP/3 over QUIC (h3), up to {n} streams per connection")
            }
            (true, crate::engine::Framing::Ws(_)) if p.ws().is_some_and(|w| w.hold()) => {
                format!(
                    "WebSocket connections held, a ping every {:.1}s each (a request is a ping and its pong)",
                    match p.pace {
                        Pace::Rate(r) => p.connections as f64 / r,
                        Pace::Closed => 0.0,
                    }
                )
            }
            (true, crate::engine::Framing::Ws(n)) if p.room().is_some() => {
                let room = p.room().map_or(0, |r| r.size);
                format!(
                    "WebSocket room fan-out of {}-byte {} messages, {} room{} of {room} members, {n} in flight per member (a request is a delivery: {room} per message)",
                    p.request.bytes.len(),
                    if p.ws().is_some_and(|w| w.binary) { "binary" } else { "text" },
                    p.room().map_or(0, |r| r.rooms),
                    if p.room().is_some_and(|r| r.rooms == 1) { "" } else { "s" },
                )
            }
            (true, crate::engine::Framing::Ws(n)) => format!(
                "WebSocket echo of {}-byte {} messages, {n} in flight per connection (a request is a message)",
                p.request.bytes.len(),
                if p.ws().is_some_and(|w| w.binary) {
                    "binary"
                } else {
                    "text"
                }
            ),
            (true, _) => "keep-alive".to_string(),
            (false, _) => "a connection per request".to_string(),
        },
    )
}

/// Where latency is measured from, in words.
pub fn describe_latency_origin(r: &RunResult) -> &'static str {
    match (r.latency_corrected(), r.plan.keepalive()) {
        (true, _) => "from each request's intended send time: coordinated omission corrected",
        (false, true) => {
            "from each request's write; closed loop: a server's stalls delay requests \
             instead of showing here (not corrected for coordinated omission; use --rate)"
        }
        (false, false) => {
            "from each request's connect; closed loop: not corrected for coordinated \
             omission (use --rate)"
        }
    }
}

/// A cell that says why a row has no figures (`FAILED: …`, `NOT SERVED:
/// …`): it runs on over the empty cells after it instead of widening its
/// column for every other row.
pub fn spans(cell: &str) -> bool {
    cell.starts_with("FAILED") || cell.starts_with("NOT SERVED")
}

/// Aligned plain text with a rule under the header (first row).
pub fn align(rows: &[Vec<String>], right: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter(|r| !(r.len() > c + 1 && spans(&r[c])))
            .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..cols).map(width).collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            let pad = w.saturating_sub(cell.chars().count());
            if c > 0 {
                line.push_str("  ");
            }
            if right.contains(&c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if i == 0 {
            // A last column of text is not padded: the rule ends where its
            // header does, not under its longest note.
            let last = match cols.checked_sub(1) {
                Some(c) if !right.contains(&c) => rows[0].get(c).map_or(0, |h| h.chars().count()),
                Some(c) => widths[c],
                None => 0,
            };
            let total: usize = widths[..cols.saturating_sub(1)].iter().sum::<usize>()
                + last
                + 2 * cols.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_without_figures_does_not_widen_the_columns() {
        let row = |cells: &[&str]| cells.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        for why in [
            "FAILED: the server exited",
            "NOT SERVED: does not serve WebSocket, and a long why",
        ] {
            let rows = [
                row(&["server", "c", "RPS", "p50"]),
                row(&["event-loop", "100", "218,740", "428µs"]),
                row(&["php-fpm", "100", why, ""]),
            ];
            let text = super::align(&rows, &[1, 2, 3]);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(
                lines[1],
                "-".repeat("event-loop  100  218,740  428µs".chars().count())
            );
            assert_eq!(lines[2], "event-loop  100  218,740  428µs", "{text}");
            assert_eq!(lines[3], format!("php-fpm     100  {why}"), "{text}");
        }
        // A last column of notes: the rule ends with its header.
        let rows = [
            row(&["server", "req/s", "note"]),
            row(&[
                "php-fpm",
                "16,465",
                "closed 2368 of the connections it accepted",
            ]),
        ];
        let text = super::align(&rows, &[1]);
        assert_eq!(
            text.lines().nth(1),
            Some("-".repeat("php-fpm  16,465  note".len()).as_str()),
            "{text}"
        );
    }

    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(latency(480), "480µs");
        assert_eq!(latency(1250), "1.25ms");
        assert_eq!(latency(25_000_000), "25.00s");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(2048), "2.00 KiB");
    }
}
