//! The fixed-rate part of a comparison's reports (`--rate`, `--slo`,
//! `--threshold`): the cells' table, the capacity table, and their charts —
//! latency against offered rate per workload (p50 and p99, log scale, the
//! SLO's line, each server's knee marked) and, per fixed rate, each
//! server's percentile distribution. All empty without those flags.

use std::path::Path;

use plotters::prelude::*;

use super::super::rate_results::{CapacityRow, RateCell};
use super::super::results::Results;
use super::charts::{color, percentile_chart, PercentileLine};
use crate::report::page::{html_table, md_table};
use crate::report::svg::{builder, escape, svg};
use crate::report::{align, bytes, latency};
use crate::thresholds::Threshold;

const CELL_HEADER: [&str; 17] = [
    "server",
    "workload",
    "asked",
    "offered/s",
    "achieved/s",
    "held",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
    "CPU µs/req",
    "cores",
    "RSS",
    "gen CPU",
    "late p99",
    "notes",
];

const CAPACITY_HEADER: [&str; 8] = [
    "server",
    "workload",
    "capacity/s",
    "closed-loop RPS",
    "capacity ÷ RPS",
    "CPU µs/req at ½",
    "p99 at ½",
    "notes",
];

/// A held cell: `held`, else `no (62.1%)` or `no (3 failed)`.
fn held(c: &RateCell) -> String {
    if c.error.is_some() {
        "-".into()
    } else if c.held {
        "held".into()
    } else if c.failed > 0 {
        format!("no ({} failed)", c.failed)
    } else {
        format!("no ({:.1}%)", 100.0 * c.achieved_share)
    }
}

fn cell_row(c: &RateCell) -> Vec<String> {
    let dash = || "-".to_string();
    let l = &c.latency_us;
    let lat = |v: u64| {
        if c.requests == c.failed {
            dash()
        } else {
            latency(v)
        }
    };
    let mut notes = Vec::new();
    if let Some(e) = &c.error {
        notes.push(e.lines().next().unwrap_or("").to_string());
    }
    if let Some(n) = &c.generator_note {
        notes.push(n.clone());
    }
    for v in c.thresholds.iter().filter(|v| !v.pass) {
        notes.push(format!("FAIL {}", v.threshold));
    }
    vec![
        c.server.clone(),
        c.workload_label(),
        c.asked.clone(),
        format!("{:.0}", c.offered_per_s),
        format!("{:.0}", c.achieved_per_s),
        held(c),
        lat(l.p50),
        lat(l.p90),
        lat(l.p99),
        lat(l.p99_9),
        lat(l.max),
        c.server_cpu_us_per_request
            .map_or_else(dash, |v| format!("{v:.1}")),
        c.server_cores.map_or_else(dash, |v| format!("{v:.2}")),
        c.server_rss_peak_bytes.map_or_else(dash, bytes),
        c.generator_cpu_pct
            .map_or_else(dash, |v| format!("{v:.0}%")),
        latency(c.lateness_p99_us),
        notes.join("; "),
    ]
}

fn capacity_row(r: &CapacityRow) -> Vec<String> {
    let dash = || "-".to_string();
    let half = r.at_half.as_ref();
    let note = match (r.capacity_per_s, &r.note) {
        (_, Some(n)) => n.clone(),
        (Some(_), None) => format!(
            "{} steps; did not hold at {:.0}/s",
            r.steps.len(),
            r.failed_at_per_s.unwrap_or(0.0)
        ),
        (None, None) => "held no rate".into(),
    };
    vec![
        r.server.clone(),
        r.workload_label(),
        match (r.capacity_per_s, r.range_per_s) {
            (None, _) => "none held".into(),
            (Some(c), Some([lo, hi])) => format!("{c:.0} ({lo:.0}–{hi:.0})"),
            (Some(c), None) => format!("{c:.0}"),
        },
        r.closed_loop_rps.map_or_else(dash, |c| format!("{c:.0}")),
        match (r.capacity_per_s, r.closed_loop_rps) {
            (Some(c), Some(m)) if m > 0.0 => format!("{:.2}", c / m),
            _ => dash(),
        },
        half.and_then(|h| h.server_cpu_us_per_request)
            .map_or_else(dash, |v| format!("{v:.1}")),
        half.filter(|h| h.requests > h.failed)
            .map_or_else(dash, |h| latency(h.latency_us.p99)),
        note,
    ]
}

fn cells_table(results: &Results) -> Vec<Vec<String>> {
    let mut rows = vec![CELL_HEADER.map(String::from).to_vec()];
    rows.extend(results.at_rate.cells.iter().map(cell_row));
    rows
}

fn capacity_table(results: &Results) -> Vec<Vec<String>> {
    let mut rows = vec![CAPACITY_HEADER.map(String::from).to_vec()];
    rows.extend(results.at_rate.capacity.iter().map(capacity_row));
    rows
}

fn legend(results: &Results) -> String {
    let a = &results.at_rate;
    format!(
        "Open loop, {:.0}s a run: latency from each request's intended send; held = achieved ≥ 95% of \
         offered with 0 failed; CPU µs/req = the server's CPU over its successful requests; \
         gen CPU = the generator's own (% of a core); late p99 = how late it sent.{}",
        a.duration_s,
        if a.slo.is_empty() {
            String::new()
        } else {
            format!(
                " Capacity: the highest offered rate held within SLO {} (a ramp, then bisection to 5%; \
                 with several searches, their median and range).",
                a.slo.join(" and ")
            )
        }
    )
}

/// The tables for the terminal (empty without `--rate` and `--slo`).
pub fn terminal(results: &Results) -> String {
    let a = &results.at_rate;
    let mut out = String::new();
    if !a.cells.is_empty() {
        out.push_str("\nAt fixed rates:\n");
        out.push_str(&align(&cells_table(results), &(3..16).collect::<Vec<_>>()));
    }
    if !a.capacity.is_empty() {
        out.push_str(&format!("\nCapacity under SLO {}:\n", a.slo.join(" and ")));
        out.push_str(&align(&capacity_table(results), &[2, 3, 4, 5, 6]));
    }
    if !out.is_empty() {
        out.push_str(&format!("{}\n", legend(results)));
    }
    out
}

/// report.md's sections.
pub fn markdown(results: &Results) -> String {
    let a = &results.at_rate;
    let mut out = String::new();
    if !a.cells.is_empty() {
        out.push_str("\n## At fixed rates\n\n");
        out.push_str(&md_table(&cells_table(results)));
    }
    if !a.capacity.is_empty() {
        out.push_str(&format!(
            "\n## Capacity under SLO `{}`\n\n",
            a.slo.join(" and ")
        ));
        out.push_str(&md_table(&capacity_table(results)));
    }
    if !out.is_empty() {
        out.push_str(&format!("\n{}\n", legend(results)));
    }
    let failed = a.failures();
    if !a.thresholds.is_empty() {
        out.push_str(&format!(
            "\nThresholds {}: {}\n",
            a.thresholds.join(", "),
            if failed.is_empty() {
                "every cell passed".to_string()
            } else {
                failed.join("; ")
            }
        ));
    }
    out
}

/// report.html's section, charts inline.
pub fn html(results: &Results) -> String {
    let a = &results.at_rate;
    let mut out = String::new();
    if !a.cells.is_empty() {
        out.push_str("<h2>At fixed rates</h2>\n");
        out.push_str(&html_table(&cells_table(results)));
    }
    if !a.capacity.is_empty() {
        out.push_str(&format!(
            "<h2>Capacity under SLO <code>{}</code></h2>\n",
            escape(&a.slo.join(" and "))
        ));
        out.push_str(&html_table(&capacity_table(results)));
    }
    if out.is_empty() {
        return out;
    }
    out.push_str(&format!(
        "<p class=\"note\">{}</p>\n",
        escape(&legend(results))
    ));
    for (_, chart) in charts(results) {
        out.push_str(&format!("<figure>{chart}</figure>\n"));
    }
    out
}

/// Writes each chart as an SVG file of its own into `dir`.
pub fn write_svgs(dir: &Path, results: &Results) -> anyhow::Result<()> {
    for (name, chart) in charts(results) {
        let p = dir.join(name);
        std::fs::write(&p, chart)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Every chart with its file name.
fn charts(results: &Results) -> Vec<(String, String)> {
    let mut out = Vec::new();
    // Per workload and protocol (`hello`, `hello h2c 100`).
    let mut workloads: Vec<String> = Vec::new();
    for c in all_cells(results) {
        let label = c.workload_label();
        if !workloads.contains(&label) {
            workloads.push(label);
        }
    }
    for w in &workloads {
        let w = w.as_str();
        let file = safe(w);
        if let Some(chart) = latency_vs_rate(results, w) {
            out.push((format!("rate-latency-{file}.svg"), chart));
        }
        let mut asked: Vec<&str> = Vec::new();
        for c in results
            .at_rate
            .cells
            .iter()
            .filter(|c| c.workload_label() == w)
        {
            if !asked.contains(&c.asked.as_str()) {
                asked.push(&c.asked);
            }
        }
        for a in asked {
            if let Some(chart) = percentile_curves(results, w, a) {
                out.push((format!("rate-percentiles-{file}-{}.svg", safe(a)), chart));
            }
        }
    }
    out
}

fn safe(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The fixed-rate cells and every search step.
fn all_cells(results: &Results) -> impl Iterator<Item = &RateCell> {
    let a = &results.at_rate;
    a.cells.iter().chain(
        a.capacity
            .iter()
            .flat_map(|r| r.steps.iter().chain(r.at_half.iter())),
    )
}

/// The SLO's latency bound, ms (its first latency threshold).
fn slo_line_ms(results: &Results) -> Option<f64> {
    results
        .at_rate
        .slo
        .iter()
        .filter_map(|s| Threshold::parse(s).ok())
        .find_map(|t| t.latency_bound_us())
        .map(|us| us / 1000.0)
}

/// Each server's knee: its capacity under the SLO, else its highest held rate.
fn knee(results: &Results, server: &str, workload: &str) -> Option<f64> {
    let a = &results.at_rate;
    a.capacity
        .iter()
        .find(|r| r.server == server && r.workload_label() == workload)
        .and_then(|r| r.capacity_per_s)
        .or_else(|| {
            a.cells
                .iter()
                .filter(|c| c.server == server && c.workload_label() == workload && c.held)
                .map(|c| c.offered_per_s)
                .reduce(f64::max)
        })
}

/// p50 and p99 against offered rate, one colour per server.
fn latency_vs_rate(results: &Results, workload: &str) -> Option<String> {
    let mut servers: Vec<&str> = Vec::new();
    let mut points: Vec<(&str, f64, f64, f64)> = Vec::new();
    for c in all_cells(results).filter(|c| c.workload_label() == workload && c.requests > c.failed)
    {
        if !servers.contains(&c.server.as_str()) {
            servers.push(&c.server);
        }
        points.push((
            &c.server,
            c.offered_per_s,
            c.latency_us.p50.max(1) as f64 / 1000.0,
            c.latency_us.p99.max(1) as f64 / 1000.0,
        ));
    }
    if points.is_empty() {
        return None;
    }
    points.sort_by(|a, b| a.1.total_cmp(&b.1));
    let slo = slo_line_ms(results);
    let x_hi = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let lo = points
        .iter()
        .map(|p| p.2)
        .fold(f64::INFINITY, f64::min)
        .max(0.001)
        / 1.5;
    let hi = points
        .iter()
        .map(|p| p.3)
        .chain(slo)
        .fold(0.0, f64::max)
        .max(lo * 10.0)
        * 1.5;
    Some(svg(|root| {
        let mut chart = builder(
            root,
            format!("{workload}: latency against offered rate (p50 thin, p99 thick)"),
        )
        .build_cartesian_2d(0f64..x_hi.max(1.0), (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("offered rate (per second)")
            .y_desc("latency (ms, log)")
            .draw()?;
        if let Some(ms) = slo {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, ms), (x_hi, ms)],
                    RED.stroke_width(1),
                ))?
                .label(format!("SLO {ms} ms"))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
        }
        for s in &servers {
            let c = color(results, s);
            let mine: Vec<_> = points.iter().filter(|p| p.0 == *s).collect();
            chart.draw_series(LineSeries::new(
                mine.iter().map(|p| (p.1, p.2)),
                c.stroke_width(1),
            ))?;
            chart
                .draw_series(LineSeries::new(
                    mine.iter().map(|p| (p.1, p.3)),
                    c.stroke_width(3),
                ))?
                .label(s.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3))
                });
            if let Some(k) = knee(results, s, workload) {
                let at = mine
                    .iter()
                    .min_by(|a, b| (a.1 - k).abs().total_cmp(&(b.1 - k).abs()))
                    .map_or(lo, |p| p.3);
                chart.draw_series(std::iter::once(Circle::new((k, at), 6, c.filled())))?;
                chart.draw_series(std::iter::once(Text::new(
                    format!("knee {k:.0}/s"),
                    (k, at),
                    ("sans-serif", 12),
                )))?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }))
}

/// At one fixed rate: each server's latency by percentile (HdrHistogram's
/// percentile distribution), both axes logarithmic.
fn percentile_curves(results: &Results, workload: &str, asked: &str) -> Option<String> {
    let lines: Vec<PercentileLine> = results
        .at_rate
        .cells
        .iter()
        .filter(|c| c.workload_label() == workload && c.asked == asked)
        .map(|c| PercentileLine {
            server: &c.server,
            label: format!("{} ({:.0}/s)", c.server, c.offered_per_s),
            curve: &c.latency_curve,
        })
        .collect();
    percentile_chart(
        results,
        format!("{workload} at {asked}: latency by percentile (from the intended send)"),
        &lines,
    )
}
