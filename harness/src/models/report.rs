//! `harness models`' printers: the terminal text, report.md and
//! report.html (RPS and p99 against c on log axes with each server's
//! predicted bound, `/hello` under the stall, KiB per connection), all from
//! the document alone.

use std::path::Path;

use plotters::prelude::*;

use super::document::{Evidence, Models};
use crate::report::align;
use crate::report::page::{html_page, html_table, md_table, write_files};
use crate::report::svg::{builder, escape, svg};

/// An experiment's findings, each marked, with the evidence of a miss
/// (`--profile`) beside it.
fn findings_of<'a>(
    doc: &'a Models,
    experiment: &'a str,
) -> impl Iterator<Item = (String, Option<&'a Evidence>)> + 'a {
    doc.findings
        .iter()
        .filter(move |f| f.experiment == experiment)
        .map(|f| {
            let mark = match f.matches_prediction {
                Some(true) => "as predicted: ",
                Some(false) => "NOT as predicted: ",
                None => "",
            };
            (format!("{mark}{}", f.sentence), f.evidence.as_ref())
        })
}

/// "where the CPU went: …", for the terminal and markdown.
fn evidence_line(e: &Evidence) -> String {
    format!(
        "where the CPU went: {}{}",
        e.sentence,
        e.flame_graph
            .as_ref()
            .map_or(String::new(), |f| format!(" (flame graph: {f})"))
    )
}

fn waiting_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "path",
        "c",
        "req/s",
        "predicted",
        "p50 ms",
        "p99 ms",
        "failed",
    ]
    .map(String::from)
    .to_vec()];
    for w in &doc.waiting {
        for p in &w.points {
            rows.push(vec![
                w.server.clone(),
                w.path.clone(),
                p.connections.to_string(),
                format!("{:.0}", p.rps),
                format!("{:.0}", p.predicted_rps),
                format!("{:.1}", p.p50_ms),
                format!("{:.1}", p.p99_ms),
                p.failed.to_string(),
            ]);
        }
    }
    rows
}

fn stall_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "/cpu n",
        "≈ ms",
        "/hello p99 alone",
        "/hello p99 mixed",
        "×",
        "/cpu p99",
        "error",
    ]
    .map(String::from)
    .to_vec()];
    for s in &doc.stall {
        rows.push(vec![
            s.server.clone(),
            s.cpu_n.to_string(),
            format!("{:.0}", s.cpu_ms),
            format!("{:.1}", s.hello_alone_p99_ms),
            format!("{:.1}", s.hello_mixed_p99_ms),
            if s.hello_alone_p99_ms > 0.0 {
                format!("{:.1}", s.hello_mixed_p99_ms / s.hello_alone_p99_ms)
            } else {
                "—".into()
            },
            format!("{:.1}", s.cpu_mixed_p99_ms),
            s.error.clone().unwrap_or_default(),
        ]);
    }
    rows
}

fn cost_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "keep-alive req/s",
        "new HTTP conn ×",
        "new DB conn ×",
        "error",
    ]
    .map(String::from)
    .to_vec()];
    for c in &doc.connection_cost {
        let r = |x: f64| {
            if c.keepalive_rps > 0.0 {
                format!("{:.2}", x / c.keepalive_rps)
            } else {
                "—".into()
            }
        };
        rows.push(vec![
            c.server.clone(),
            format!("{:.0}", c.keepalive_rps),
            r(c.new_http_connection_rps),
            r(c.new_db_connection_rps),
            c.error.clone().unwrap_or_default(),
        ]);
    }
    rows
}

fn memory_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "model",
        "connections held",
        "RSS MiB",
        "KiB / connection",
        "/hello at most",
    ]
    .map(String::from)
    .to_vec()];
    for m in &doc.memory {
        let top = m.points.last();
        rows.push(vec![
            m.server.clone(),
            m.model.clone(),
            top.map_or("—".into(), |p| {
                format!("{} of {}", p.accepted(), p.requested)
            }),
            top.and_then(|p| p.rss_bytes)
                .map_or("not measured".into(), |b| {
                    format!("{:.1}", b as f64 / 1048576.0)
                }),
            m.kib_per_connection
                .map_or("not measured".into(), |k| format!("{k:.1}")),
            match m.hello_answered_at_most {
                Some(true) => "answered".into(),
                Some(false) => "NOT answered".into(),
                None => "—".into(),
            },
        ]);
    }
    rows
}

fn websocket_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "model",
        "upgraded",
        "stayed up",
        "waiting",
        "neither",
        "KiB / WebSocket",
        "KiB / HTTP",
        "note",
    ]
    .map(String::from)
    .to_vec()];
    for w in &doc.websocket_held {
        let http = doc
            .memory
            .iter()
            .find(|m| m.server == w.server)
            .map_or("—".into(), |m| {
                m.kib_per_connection
                    .map_or("not measured".into(), |k| format!("{k:.1}"))
            });
        let served = w.not_served.is_none() && w.error.is_none();
        let n = |x: u64| if served { x.to_string() } else { "—".into() };
        rows.push(vec![
            w.server.clone(),
            w.model.clone(),
            if served {
                format!("{} of {}", w.upgraded, w.requested)
            } else {
                "—".into()
            },
            n(w.stayed_up),
            n(w.waiting),
            n(w.not_held),
            match (served, w.kib_per_connection) {
                (false, _) => "—".into(),
                (true, Some(k)) => format!("{k:.1}"),
                (true, None) => "not measured".into(),
            },
            http,
            w.not_served
                .as_ref()
                .map(|why| format!("not served: {why}"))
                .or_else(|| w.error.clone())
                .unwrap_or_default(),
        ]);
    }
    rows
}

fn multiplexing_rows(doc: &Models) -> Vec<Vec<String>> {
    use super::findings::multiplexing::{median, per_round};
    let mut rows = vec![[
        "server",
        "path",
        "shape",
        "req/s",
        "× HTTP/1.1 [range]",
        "CPU µs / req",
        "p99 ms",
        "note",
    ]
    .map(String::from)
    .to_vec()];
    for m in &doc.multiplexing {
        if let Some(e) = &m.error {
            rows.push(vec![
                m.server.clone(),
                m.path.clone(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                e.clone(),
            ]);
            continue;
        }
        let h1 = m.shapes.iter().find(|s| s.protocol == "http/1.1");
        for s in &m.shapes {
            let med = |f: &dyn Fn(&super::document::MuxRun) -> Option<f64>, digits: usize| {
                median(s.runs.iter().filter_map(f).collect())
                    .map_or("—".into(), |x| format!("{x:.digits$}"))
            };
            let ratio = h1
                .filter(|h| !std::ptr::eq(*h, s))
                .and_then(|h| per_round(s, h, |r| Some(r.rps)))
                .map_or("—".into(), |r| r.text());
            rows.push(vec![
                m.server.clone(),
                m.path.clone(),
                format!("{} × {} {}", s.connections, s.protocol, s.per_connection),
                med(&|r| Some(r.rps), 0),
                ratio,
                med(&|r| r.server_cpu_us_per_request, 0),
                med(&|r| Some(r.p99_ms), 2),
                s.not_served
                    .as_ref()
                    .map(|why| format!("not served: {why}"))
                    .or_else(|| s.error.clone())
                    .unwrap_or_default(),
            ]);
        }
    }
    rows
}

const SECTIONS: [(&str, &str); 8] = [
    ("waiting", "1. Waiting: Little's law"),
    ("stall", "2. A stall in the CPU"),
    ("connection cost", "3. Connection cost"),
    ("memory", "4. Memory per connection"),
    ("websocket held", "4b. WebSocket connections held"),
    (
        "multiplexing",
        "5. Multiplexing: the same requests in flight, three ways",
    ),
    (
        "waiting at a rate",
        "6. Waiting at fixed rates: the highest rate held (Little's law)",
    ),
    (
        "head-of-line blocking",
        "7. Head-of-line blocking: h2 over TLS and h3 under packet loss",
    ),
];

/// What a section states before its numbers: experiment 7's prediction
/// and where it ran.
fn preface(doc: &Models, experiment: &str) -> Vec<String> {
    if experiment != "head-of-line blocking" {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(h) = doc.head_of_line.first() {
        out.push(format!("prediction: {}", h.prediction));
    }
    for h in doc.head_of_line.iter().filter(|h| !h.network.is_empty()) {
        out.push(format!(
            "{}: {} connection × {} streams of {}, a closed loop (each stream sends when \
             its last answer arrives, so p50/p99 include the queue {} in flight build; \
             read each loss against 0% at the same shape); {}",
            h.server,
            h.connections,
            h.streams,
            h.path,
            h.connections * h.streams,
            h.network
        ));
    }
    if let Some(h) = doc.head_of_line.iter().find(|h| !h.cells.is_empty()) {
        out.push(format!(
            "stalled: responses slower than {} ms, the requests a loss held back",
            h.stall_ms
        ));
    }
    out
}

/// Experiment 7: each protocol at each loss, with the evidence the loss
/// was applied.
fn hol_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "protocol",
        "loss",
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "stalled",
        "failed",
        "nft dropped/packets",
        "QUIC lost/sent",
        "TCP retrans (RTO, TLP)",
        "note",
    ]
    .map(String::from)
    .to_vec()];
    for h in &doc.head_of_line {
        if let Some(e) = &h.error {
            let mut row = vec![String::new(); 13];
            row[0].clone_from(&h.server);
            row[1] = "-".into();
            row[12].clone_from(e);
            rows.push(row);
            continue;
        }
        for c in &h.cells {
            rows.push(vec![
                h.server.clone(),
                if c.protocol == "h2" {
                    "h2 (TLS)".into()
                } else {
                    c.protocol.clone()
                },
                format!("{}%", c.loss_pct),
                format!("{:.0}", c.rps),
                format!("{:.2}", c.p50_ms),
                format!("{:.1}", c.p99_ms),
                format!("{:.0}", c.max_ms),
                c.stalled.to_string(),
                c.failed.to_string(),
                format!("{}/{}", c.dropped_packets, c.path_packets),
                match (c.quic_lost_packets, c.quic_sent_packets) {
                    (Some(l), Some(s)) => format!("{l}/{s}"),
                    _ => "-".into(),
                },
                match (c.tcp_retransmits, c.tcp_timeouts, c.tcp_loss_probes) {
                    (Some(r), Some(t), Some(p)) => format!("{r} ({t}, {p})"),
                    (Some(r), _, _) => r.to_string(),
                    _ => "-".into(),
                },
                c.error
                    .clone()
                    .or_else(|| c.failures.clone())
                    .unwrap_or_default(),
            ]);
        }
    }
    rows
}

/// Experiment 6: each server's search.
fn rate_rows(doc: &Models) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "server",
        "model",
        "path",
        "SLO",
        "predicted/s",
        "held/s",
        "did not hold at/s",
        "steps",
    ]
    .map(String::from)
    .to_vec()];
    let n = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in &doc.waiting_at_rate {
        rows.push(vec![
            r.server.clone(),
            r.model.clone(),
            r.path.clone(),
            r.slo.clone(),
            r.predicted_per_s
                .map_or("no bound".to_string(), |v| format!("{v:.0}")),
            r.capacity_per_s
                .map_or("none held".to_string(), |v| format!("{v:.0}")),
            n(r.failed_at_per_s),
            r.steps.len().to_string(),
        ]);
    }
    rows
}

fn section_rows(doc: &Models, experiment: &str) -> Vec<Vec<String>> {
    match experiment {
        "waiting" => waiting_rows(doc),
        "stall" => stall_rows(doc),
        "connection cost" => cost_rows(doc),
        "websocket held" => websocket_rows(doc),
        "multiplexing" => multiplexing_rows(doc),
        "waiting at a rate" => rate_rows(doc),
        "head-of-line blocking" => hol_rows(doc),
        _ => memory_rows(doc),
    }
}

pub fn text(doc: &Models) -> String {
    let mut o = format!(
        "harness models{}\n",
        if doc.quick { " --quick" } else { "" }
    );
    for (key, title) in SECTIONS {
        let rows = section_rows(doc, key);
        if rows.len() < 2 {
            continue;
        }
        o += &format!("\n{title}\n");
        for line in preface(doc, key) {
            o += &format!("{line}\n");
        }
        o += &align(&rows, &[]);
        for (f, evidence) in findings_of(doc, key) {
            o += &format!("  - {f}\n");
            if let Some(e) = evidence {
                o += &format!("      {}\n", evidence_line(e));
            }
        }
    }
    o
}

pub fn markdown(doc: &Models) -> String {
    let mut o = String::from("# harness models\n");
    for (key, title) in SECTIONS {
        let rows = section_rows(doc, key);
        if rows.len() < 2 {
            continue;
        }
        o += &format!("\n## {title}\n\n");
        for line in preface(doc, key) {
            o += &format!("{line}\n\n");
        }
        o += &md_table(&rows);
        o += "\n";
        for (f, evidence) in findings_of(doc, key) {
            o += &format!("- {f}\n");
            if let Some(e) = evidence {
                o += &format!("  - {}\n", evidence_line(e));
            }
        }
    }
    o
}

fn color(i: usize) -> RGBColor {
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// RPS (or p99) against c, log-log, one line per server, the predicted
/// bound dashed in the same color.
fn waiting_chart(doc: &Models, path: &str, p99: bool) -> Option<String> {
    let curves: Vec<_> = doc
        .waiting
        .iter()
        .filter(|w| w.path == path && !w.points.is_empty())
        .collect();
    if curves.is_empty() {
        return None;
    }
    let y = |p: &super::document::WaitPoint| if p99 { p.p99_ms } else { p.rps };
    let ymax = curves
        .iter()
        .flat_map(|w| {
            w.points
                .iter()
                .map(|p| y(p).max(if p99 { 0.0 } else { p.predicted_rps }))
        })
        .fold(1.0, f64::max)
        * 1.5;
    let cmax = curves
        .iter()
        .flat_map(|w| w.points.iter().map(|p| p.connections))
        .max()
        .unwrap_or(1) as f64;
    let caption = if p99 {
        format!("{path}: p99 latency (ms) against connections")
    } else {
        format!("{path}: requests/s against connections (dashed: predicted)")
    };
    Some(svg(|root| {
        let mut chart = builder(root, caption)
            .build_cartesian_2d((1f64..cmax * 1.2).log_scale(), (0.1f64..ymax).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("connections")
            .y_desc(if p99 { "p99 ms" } else { "requests/s" })
            .draw()?;
        for (i, w) in curves.iter().enumerate() {
            let col = color(i);
            chart
                .draw_series(LineSeries::new(
                    w.points
                        .iter()
                        .map(|p| (p.connections as f64, y(p).max(0.1))),
                    col.stroke_width(2),
                ))?
                .label(w.server.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], col.stroke_width(2))
                });
            if !p99 {
                chart.draw_series(DashedLineSeries::new(
                    w.points
                        .iter()
                        .map(|p| (p.connections as f64, p.predicted_rps.max(0.1))),
                    4,
                    4,
                    col.stroke_width(1),
                ))?;
            }
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        Ok(())
    }))
}

/// Bars, one per server.
fn bars(caption: &str, y_desc: &str, bars: Vec<(String, f64)>) -> Option<String> {
    if bars.is_empty() {
        return None;
    }
    let ymax = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.15;
    let n = bars.len();
    Some(svg(|root| {
        let mut chart =
            builder(root, caption.to_string()).build_cartesian_2d(0f64..n as f64, 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                bars.get(x.floor() as usize)
                    .map_or(String::new(), |b| b.0.clone())
            })
            .y_desc(y_desc)
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            Rectangle::new(
                [(i as f64 + 0.2, 0.0), (i as f64 + 0.8, b.1)],
                color(i).filled(),
            )
        }))?;
        Ok(())
    }))
}

pub fn html(doc: &Models) -> String {
    let mut b = format!(
        "<h1>harness models{}</h1>\n<p>{} · {} cores · kernel {} · harness {}</p>\n",
        if doc.quick { " --quick" } else { "" },
        escape(&doc.machine.cpu_model),
        doc.machine.cores,
        escape(&doc.machine.kernel),
        escape(&doc.machine.harness_build)
    );
    for (key, title) in SECTIONS {
        let rows = section_rows(doc, key);
        if rows.len() < 2 {
            continue;
        }
        b += &format!("<h2>{}</h2>\n", escape(title));
        for line in preface(doc, key) {
            b += &format!("<p>{}</p>\n", escape(&line));
        }
        b += "<ul>\n";
        for (f, evidence) in findings_of(doc, key) {
            b += &format!("<li>{}", escape(&f));
            if let Some(e) = evidence {
                b += &format!(
                    "<div class=\"evidence\">where the CPU went: {}{}</div>",
                    escape(&e.sentence),
                    e.flame_graph.as_ref().map_or(String::new(), |f| format!(
                        " <a href=\"{}\">flame graph</a>",
                        escape(f)
                    ))
                );
            }
            b += "</li>\n";
        }
        b += "</ul>\n";
        let charts: Vec<Option<String>> = match key {
            "waiting" => {
                let mut paths: Vec<&str> = doc.waiting.iter().map(|w| w.path.as_str()).collect();
                paths.dedup();
                paths
                    .iter()
                    .flat_map(|p| [waiting_chart(doc, p, false), waiting_chart(doc, p, true)])
                    .collect()
            }
            "stall" => vec![bars(
                "/hello p99 among heavy /cpu requests, × its p99 alone",
                "×",
                doc.stall
                    .iter()
                    .filter(|s| s.hello_alone_p99_ms > 0.0)
                    .map(|s| {
                        (
                            s.server.clone(),
                            s.hello_mixed_p99_ms / s.hello_alone_p99_ms,
                        )
                    })
                    .collect(),
            )],
            "memory" => vec![bars(
                "KiB per idle connection",
                "KiB",
                doc.memory
                    .iter()
                    .filter_map(|m| Some((m.server.clone(), m.kib_per_connection?)))
                    .collect(),
            )],
            _ => Vec::new(),
        };
        for c in charts.into_iter().flatten() {
            b += &format!("<figure>{c}</figure>\n");
        }
        b += &html_table(&rows);
    }
    html_page("harness models", &b)
}

/// results.json, report.md and report.html into `dir`.
pub fn write_all(dir: &Path, doc: &Models) -> anyhow::Result<()> {
    write_files(
        dir,
        &[
            ("results.json", doc.to_json()),
            ("report.md", markdown(doc)),
            ("report.html", html(doc)),
        ],
    )
}
