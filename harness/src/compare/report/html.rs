//! report.html: one self-contained page (inline CSS, inline SVG charts, no
//! JavaScript, nothing fetched): the table, the charts, every server's
//! settings and the fairness warnings, the machine.

use super::super::results::{Results, RowStatus};
use super::charts::{self, escape};
use super::settings::{self, View};
use super::table;

const CSS: &str = "
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f3f3f3; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { background: #fdecea; }
.warn { background: #fff6e0; border-left: 4px solid #f0a000; padding: 0.4em 0.8em; margin: 0.3em 0; }
.note { color: #555; font-size: 0.9em; }
figure { margin: 1em 0; } .error { color: #b00; }
.wide { overflow-x: auto; }
";

fn html_table(rows: &[Vec<String>], right_from: usize, failed: &[bool]) -> String {
    let mut out = String::from("<div class=\"wide\"><table>\n");
    for (i, r) in rows.iter().enumerate() {
        let class = if i > 0 && failed.get(i - 1).copied().unwrap_or(false) {
            " class=\"failed\""
        } else {
            ""
        };
        out.push_str(&format!("<tr{class}>"));
        for (c, cell) in r.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("<th>{}</th>", escape(cell)));
            } else if c >= right_from && !crate::report::spans(cell) {
                out.push_str(&format!("<td class=\"n\">{}</td>", escape(cell)));
            } else {
                out.push_str(&format!("<td>{}</td>", escape(cell)));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table></div>\n");
    out
}

pub fn render(results: &Results) -> String {
    let m = &results.machine;
    let s = &results.settings;
    let mut body = format!(
        "<h1>harness compare — {}</h1>\n<p>{} · {} cores · kernel {} · {} · load {:.2} at start · \
         sched_autogroup_enabled={} · harness {} ({})</p>\n",
        escape(&results.header.started_utc),
        escape(&m.cpu_model),
        m.cores,
        escape(&m.kernel),
        escape(&m.os),
        m.load_avg_1m,
        m.sched_autogroup_enabled
            .map_or("n/a".into(), |b| u8::from(b).to_string()),
        escape(&results.header.harness_version),
        escape(&m.harness_build),
    );
    body.push_str(&format!(
        "<p>Load: <b>{}</b>, c = {}, {} × {:.0}s runs after {:.0}s warm-up, {}, {}. Database: {} {}{}. \
         Command: <code>{}</code></p>\n",
        escape(&s.load_tool),
        s.connections.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        s.runs,
        s.duration_s,
        s.warmup_s,
        escape(&s.order_phrase()),
        if s.keepalive { "keep-alive" } else { "a connection per request" },
        escape(&results.database.kind),
        escape(results.database.version.as_deref().unwrap_or("")),
        results.database.max_connections.map_or(String::new(), |n| format!(", max_connections {n}")),
        escape(&results.header.command.join(" ")),
    ));
    if results.header.interrupted {
        body.push_str("<p class=\"warn\">Interrupted: the results cover what was measured before Ctrl-C/SIGTERM.</p>\n");
    }

    body.push_str("<h2>Results</h2>\n");
    let mut rows = vec![table::HEADER.map(String::from).to_vec()];
    rows.extend(table::cells(results));
    let failed: Vec<bool> = results
        .rows
        .iter()
        .map(|r| r.status == RowStatus::Failed)
        .collect();
    body.push_str(&html_table(&rows, 4, &failed));
    body.push_str("<div class=\"note\"><ul>\n");
    for line in table::footnotes(results, true).lines() {
        let line = line.trim_start_matches("- ");
        if line.starts_with("warning: ") {
            continue;
        }
        body.push_str(&format!("<li>{}</li>\n", escape(line)));
    }
    body.push_str("</ul></div>\n");

    body.push_str(&super::profiles::html(results));
    body.push_str(&super::rates::html(results));

    if !results.fairness.warnings.is_empty() {
        body.push_str("<h2>Fairness warnings</h2>\n");
        for w in &results.fairness.warnings {
            body.push_str(&format!("<p class=\"warn\">{}</p>\n", escape(w)));
        }
    }

    let conformance = super::conformance::rows(&results.servers);
    if !conformance.is_empty() {
        body.push_str(
            "<h2>HTTP/1.1 conformance (<code>harness verify --conformance</code>)</h2>\n",
        );
        body.push_str(&html_table(&conformance, 1, &[]));
        body.push_str(&format!(
            "<p class=\"note\">{}.</p>\n",
            escape(super::conformance::LEGEND)
        ));
        let mut deviations = super::conformance::deviations(&results.servers);
        deviations.extend(super::conformance::limits(&results.servers));
        if !deviations.is_empty() {
            body.push_str("<div class=\"note\"><ul>\n");
            for d in deviations {
                body.push_str(&format!("<li>{}</li>\n", escape(&d)));
            }
            body.push_str("</ul></div>\n");
        }
    }

    body.push_str("<h2>Charts</h2>\n");
    for w in &s.workloads {
        for &c in &s.connections {
            for chart in [
                charts::rps_bars(results, &w.name, c),
                charts::latency_curves(results, &w.name, c),
                charts::over_time(results, &w.name, c, charts::OverTime::Rps),
                charts::over_time(results, &w.name, c, charts::OverTime::P99),
            ]
            .into_iter()
            .flatten()
            {
                body.push_str(&format!("<figure>{chart}</figure>\n"));
            }
        }
        if let Some(chart) = charts::sweep(results, &w.name) {
            body.push_str(&format!("<figure>{chart}</figure>\n"));
        }
    }

    body.push_str("<h2>Settings of each server (<code>/config</code>)</h2>\n");
    let cfg = settings::rows(&results.servers, View::Report);
    body.push_str(&html_table(&cfg, 99, &[]));
    body.push_str(&format!(
        "<p class=\"note\">DB pools: {} in total (servers run one at a time); database max_connections: {}. \
         Scheduling: {}.</p>\n",
        results.fairness.db_pool_total.map_or("—".into(), |n| n.to_string()),
        results.fairness.db_max_connections.map_or("—".into(), |n| n.to_string()),
        escape(&m.scheduling),
    ));

    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>harness compare {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(&results.header.started_utc)
    )
}
