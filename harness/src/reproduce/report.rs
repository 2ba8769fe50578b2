//! A reproduction's printers: the terminal text, report.md and report.html
//! (a chart of our figures beside the seed's), all from the document alone.

use std::path::Path;

use plotters::prelude::*;

use super::document::Reproduction;
use crate::report::align;
use crate::report::page::{html_page, html_table, md_table, write_files};
use crate::report::svg::{builder, escape, svg};

const HEADER: [&str; 13] = [
    "server",
    "env",
    "tool",
    "condition",
    "req/s",
    "valid req/s",
    "p50 ms",
    "p99 ms",
    "max ms",
    "CPU µs/req",
    "doc bytes",
    "failed",
    "error",
];

fn rows(doc: &Reproduction) -> Vec<Vec<String>> {
    let mut out = vec![HEADER.map(String::from).to_vec()];
    for c in doc
        .cells
        .iter()
        .filter(|c| !c.server.is_empty() && !c.tool.is_empty())
    {
        let dash = |v: Option<String>| v.unwrap_or_else(|| "—".into());
        out.push(vec![
            c.server.clone(),
            c.environment.clone(),
            c.tool.clone(),
            // The condition's name; the whole of it is under "conditions".
            format!(
                "{}{}{}",
                c.condition.split([':', '(']).next().unwrap_or("").trim(),
                c.offered_rps
                    .map_or(String::new(), |r| format!(" {r:.0}/s")),
                c.repeat.map_or(String::new(), |k| format!(", run {k}"))
            ),
            format!("{:.0}", c.rps),
            dash(c.valid_rps.map(|v| format!("{v:.0}"))),
            format!("{:.1}", c.p50_ms),
            format!("{:.1}", c.p99_ms),
            format!("{:.1}", c.max_ms),
            dash(c.cpu_us_per_request.map(|v| format!("{v:.0}"))),
            dash(c.document_length_bytes.map(|b| b.to_string())),
            c.failed.to_string(),
            c.error.clone().unwrap_or_default(),
        ]);
    }
    out
}

fn seed_rows(doc: &Reproduction) -> Vec<Vec<String>> {
    let mut out = vec![[
        "server",
        "published as",
        "req/s",
        "p50 ms",
        "p99 ms",
        "doc bytes",
    ]
    .map(String::from)
    .to_vec()];
    let dash = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.0}"));
    for f in &doc.seed.figures {
        out.push(vec![
            f.server.clone(),
            format!(
                "{}{}",
                f.published_as,
                if f.derived { " (derived)" } else { "" }
            ),
            format!("{:.0}", f.rps),
            dash(f.p50_ms),
            dash(f.p99_ms),
            f.document_length_bytes
                .map_or("—".into(), |b| b.to_string()),
        ]);
    }
    out
}

/// Ours over the seed's, for each seed figure we have a cell for (ab, as the
/// seed ran it): the machines differ, so the ratio's spread across servers
/// says more than its level.
fn ratio_rows(doc: &Reproduction) -> Vec<Vec<String>> {
    let mut out = vec![[
        "server",
        "env",
        "ours (ab) req/s",
        "seed req/s",
        "ours / seed",
    ]
    .map(String::from)
    .to_vec()];
    for f in &doc.seed.figures {
        let seed = "as the seed ran it";
        let ours = doc
            .median_rps(&f.server, &f.environment, "ab", seed)
            .map(|m| (f.environment.as_str(), m))
            .or_else(|| {
                (f.environment == "bridge")
                    .then(|| doc.median_rps(&f.server, "bridge-proxy", "ab", seed))
                    .flatten()
                    .map(|m| ("bridge-proxy", m))
            });
        if let Some((env, (rps, runs))) = ours {
            out.push(vec![
                f.server.clone(),
                env.to_string(),
                if runs > 1 {
                    format!("{rps:.0} (median of {runs})")
                } else {
                    format!("{rps:.0}")
                },
                format!("{:.0}", f.rps),
                format!("{:.2}", rps / f.rps),
            ]);
        }
    }
    out
}

fn findings_lines(doc: &Reproduction) -> Vec<String> {
    doc.findings
        .iter()
        .map(|f| format!("{} — {}: {}", f.claim, f.verdict.words(), f.evidence))
        .collect()
}

/// The terminal report.
/// Each server an environment has no cell of, and why (not runnable here,
/// cannot be placed, did not start there), one line each.
pub fn missing(doc: &Reproduction) -> Vec<String> {
    doc.cells
        .iter()
        .filter(|c| !c.server.is_empty() && c.tool.is_empty())
        .map(|c| {
            format!(
                "{} in {}: not measured: {}",
                c.server,
                c.environment,
                c.error.as_deref().unwrap_or("no reason recorded")
            )
        })
        .collect()
}

pub fn text(doc: &Reproduction) -> String {
    let mut o = format!(
        "harness reproduce {} — {}\nseed: {}; load: {}\n\nours:\n",
        doc.experiment, doc.seed.title, doc.seed.setup, doc.seed.load
    );
    o += &align(&rows(doc), &[4, 5, 6, 7, 8, 9, 10]);
    for l in missing(doc) {
        o += &format!("{l}\n");
    }
    o += "\nthe seed's figures:\n";
    o += &align(&seed_rows(doc), &[2, 3, 4, 5]);
    let ratios = ratio_rows(doc);
    if ratios.len() > 1 {
        o += "\nours / seed (different machines: compare the ratios between servers):\n";
        o += &align(&ratios, &[2, 3, 4]);
    }
    o += "\nthe seed's claims:\n";
    for l in findings_lines(doc) {
        o += &format!("  - {l}\n");
    }
    o += &conditions_note(doc);
    o
}

fn conditions_note(doc: &Reproduction) -> String {
    let mut o = String::from("\nconditions:\n");
    let mut seen: Vec<&str> = Vec::new();
    for c in doc.cells.iter().filter(|c| !c.condition.is_empty()) {
        if !seen.contains(&c.condition.as_str()) {
            seen.push(&c.condition);
            o += &format!("  - {}\n", c.condition);
        }
    }
    for cav in &doc.seed.caveats {
        o += &format!("  - the seed: {cav}\n");
    }
    o
}

pub fn markdown(doc: &Reproduction) -> String {
    let mut o = format!(
        "# harness reproduce {}\n\nSeed: **{}** — {}; load: `{}`.\n\n## Ours\n\n",
        doc.experiment, doc.seed.title, doc.seed.setup, doc.seed.load
    );
    o += &md_table(&rows(doc));
    for l in missing(doc) {
        o += &format!("- {l}\n");
    }
    o += "\n## The seed's figures\n\n";
    o += &md_table(&seed_rows(doc));
    let ratios = ratio_rows(doc);
    if ratios.len() > 1 {
        o += "\n## Ours over the seed's\n\n";
        o += &md_table(&ratios);
    }
    o += "\n## The seed's claims\n\n";
    for l in findings_lines(doc) {
        o += &format!("- {l}\n");
    }
    o += &conditions_note(doc)
        .replace("\nconditions:\n", "\n## Conditions\n\n")
        .replace("  - ", "- ");
    o
}

/// Our ab figures (as the seed ran it) beside the seed's, per server and environment.
fn chart(doc: &Reproduction) -> Option<String> {
    let pairs: Vec<(String, f64, f64)> = doc
        .seed
        .figures
        .iter()
        .filter_map(|f| {
            let (rps, _) = doc.median_rps(&f.server, &f.environment, "ab", "as the seed ran it")?;
            Some((format!("{} {}", f.server, f.environment), rps, f.rps))
        })
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let ymax = pairs.iter().map(|p| p.1.max(p.2)).fold(1.0, f64::max) * 1.15;
    let n = pairs.len();
    Some(svg(|root| {
        let mut chart = builder(
            root,
            "requests/s: ours (ab, as the seed ran it) and the seed's".into(),
        )
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                pairs.get(i).map_or(String::new(), |p| p.0.clone())
            })
            .y_desc("requests/s")
            .draw()?;
        let ours = RGBColor(40, 110, 180);
        let seed = RGBColor(200, 120, 40);
        chart
            .draw_series(pairs.iter().enumerate().map(|(i, p)| {
                Rectangle::new(
                    [(i as f64 + 0.1, 0.0), (i as f64 + 0.48, p.1)],
                    ours.filled(),
                )
            }))?
            .label("ours")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], ours.filled()));
        chart
            .draw_series(pairs.iter().enumerate().map(|(i, p)| {
                Rectangle::new(
                    [(i as f64 + 0.52, 0.0), (i as f64 + 0.9, p.2)],
                    seed.filled(),
                )
            }))?
            .label("the seed (its machine)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], seed.filled()));
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        Ok(())
    }))
}

pub fn html(doc: &Reproduction) -> String {
    let mut b = format!(
        "<h1>harness reproduce {}</h1>\n<p>Seed: <b>{}</b> — {}; load: <code>{}</code>. Here: {} · {} cores · kernel {}.</p>\n",
        escape(&doc.experiment),
        escape(&doc.seed.title),
        escape(&doc.seed.setup),
        escape(&doc.seed.load),
        escape(&doc.machine.cpu_model),
        doc.machine.cores,
        escape(&doc.machine.kernel)
    );
    b += "<h2>The seed's claims</h2>\n<ul>\n";
    for l in findings_lines(doc) {
        b += &format!("<li>{}</li>\n", escape(&l));
    }
    b += "</ul>\n";
    if let Some(c) = chart(doc) {
        b += &format!("<figure>{c}</figure>\n");
    }
    b += "<h2>Ours</h2>\n";
    b += &html_table(&rows(doc));
    b += "<h2>The seed's figures</h2>\n";
    b += &html_table(&seed_rows(doc));
    let ratios = ratio_rows(doc);
    if ratios.len() > 1 {
        b += "<h2>Ours over the seed's</h2>\n";
        b += &html_table(&ratios);
    }
    b += &format!(
        "<pre class=\"note\">{}</pre>\n",
        escape(&conditions_note(doc))
    );
    html_page(&format!("harness reproduce {}", doc.experiment), &b)
}

/// results.json, report.md and report.html into `dir`.
pub fn write_all(dir: &Path, doc: &Reproduction) -> anyhow::Result<()> {
    write_files(
        dir,
        &[
            ("results.json", doc.to_json()),
            ("report.md", markdown(doc)),
            ("report.html", html(doc)),
        ],
    )
}
