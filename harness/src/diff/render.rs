//! `harness diff` as text (the terminal), Markdown (a pull-request
//! comment) or JSON: one table of the cells on both sides, then why cells
//! are not comparable, the warnings, and the cells on one side only.

use crate::report::page::md_table;
use crate::report::{align, latency, thousands};

use super::document::{CellDiff, Diff, MetricDiff, Verdict};

/// The table's rows, header first.
fn rows(diff: &Diff) -> Vec<Vec<String>> {
    let ci = format!("{}% CI", confidence(diff.alpha));
    let mut rows = vec![[
        "server",
        "workload",
        "c",
        "env",
        "tool",
        "RPS base",
        "RPS cand",
        "change",
        &ci,
        "p",
        "verdict",
        "p99 base",
        "p99 cand",
        "change",
        &ci,
        "p",
        "verdict",
        "comparable",
    ]
    .map(String::from)
    .to_vec()];
    for c in &diff.cells {
        let mut r = vec![
            c.key.server.clone(),
            c.key.workload.clone(),
            c.key.connections.to_string(),
            c.key.environment.clone(),
            c.key.tool.clone(),
        ];
        r.extend(metric(&c.rps, |v| thousands(v.round() as u64)));
        r.extend(metric(&c.p99_us, |v| latency(v.round() as u64)));
        r.push(if c.comparable { "yes" } else { "NO" }.into());
        rows.push(r);
    }
    rows
}

/// base median, candidate median, change, interval, p, verdict.
fn metric(m: &MetricDiff, value: impl Fn(f64) -> String) -> [String; 6] {
    let runs = |median: Option<f64>, n: usize| match median {
        Some(v) => format!("{} ({n})", value(v)),
        None => "—".into(),
    };
    [
        runs(m.base_median, m.base.len()),
        runs(m.candidate_median, m.candidate.len()),
        m.change_pct.map_or("—".into(), signed_pct),
        match (m.ci_low_pct, m.ci_high_pct) {
            (Some(lo), Some(hi)) => format!("[{}, {}]", signed_pct(lo), signed_pct(hi)),
            _ => "—".into(),
        },
        m.p_value.map_or("—".into(), p_value),
        m.verdict.word().into(),
    ]
}

/// Three decimals; below 0.001 as `<0.001` (not a misleading `0.000`).
fn p_value(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn signed_pct(v: f64) -> String {
    format!("{v:+.1}%")
}

fn confidence(alpha: f64) -> String {
    let c = 100.0 * (1.0 - alpha);
    if (c - c.round()).abs() < 1e-9 {
        format!("{c:.0}")
    } else {
        format!("{c}")
    }
}

/// What the table means, in two sentences; `tilde` is how `~` is quoted.
fn legend(diff: &Diff, tilde: &str) -> String {
    format!(
        "{}. Median of the runs (their count in brackets). {tilde}: no significant \
         difference at α = {} or a change under {}%.",
        diff.method, diff.alpha, diff.threshold_pct
    )
}

/// The notes under the table, one per line (without a bullet).
fn notes(diff: &Diff) -> Vec<(String, Vec<String>)> {
    let mut sections = Vec::new();
    let cell_lines = |pick: &dyn Fn(&CellDiff) -> &Vec<String>| -> Vec<String> {
        diff.cells
            .iter()
            .flat_map(|c| pick(c).iter().map(move |w| format!("{}: {w}", c.key)))
            .collect()
    };
    let mut not_comparable: Vec<String> = diff
        .not_comparable
        .iter()
        .map(|r| format!("every cell: {r}"))
        .collect();
    not_comparable.extend(cell_lines(&|c| &c.not_comparable));
    sections.push(("Not comparable".to_string(), not_comparable));
    sections.push(("Warnings".to_string(), cell_lines(&|c| &c.warnings)));
    let keys = |v: &[super::load::Key]| v.iter().map(|k| k.to_string()).collect();
    sections.push(("Only in base".to_string(), keys(&diff.only_in_base)));
    sections.push((
        "Only in candidate".to_string(),
        keys(&diff.only_in_candidate),
    ));
    sections.retain(|(_, lines)| !lines.is_empty());
    sections
}

/// One sentence counting the verdicts.
fn summary(diff: &Diff) -> String {
    let count = |v: Verdict| {
        diff.cells
            .iter()
            .filter(|c| c.rps.verdict == v || c.p99_us.verdict == v)
            .count()
    };
    let same = diff
        .cells
        .iter()
        .filter(|c| c.rps.verdict == Verdict::Same && c.p99_us.verdict == Verdict::Same)
        .count();
    let not_comparable = diff.cells.iter().filter(|c| !c.comparable).count();
    format!(
        "{} cells on both sides: {} with a metric better, {} with a metric worse, {} with both ~, \
         {} unmeasured; {} not comparable; {} only in base, {} only in candidate.",
        diff.cells.len(),
        count(Verdict::Better),
        count(Verdict::Worse),
        same,
        count(Verdict::Unmeasured),
        not_comparable,
        diff.only_in_base.len(),
        diff.only_in_candidate.len()
    )
}

pub fn text(diff: &Diff) -> String {
    let mut out = format!(
        "base:      {} ({})\ncandidate: {} ({})\n\n",
        diff.base.file, diff.base.schema, diff.candidate.file, diff.candidate.schema
    );
    if diff.cells.is_empty() {
        out.push_str("No cell is on both sides.\n");
    } else {
        out.push_str(&align(&rows(diff), &[2, 5, 6, 7, 9, 11, 12, 13, 15]));
    }
    out.push('\n');
    out.push_str(&legend(diff, "\"~\""));
    out.push('\n');
    for (title, lines) in notes(diff) {
        out.push_str(&format!("\n{title}:\n"));
        for l in lines {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out.push('\n');
    out.push_str(&summary(diff));
    out.push('\n');
    out
}

pub fn markdown(diff: &Diff) -> String {
    let mut out = format!(
        "### harness diff\n\nbase `{}` → candidate `{}` ({})\n\n",
        diff.base.file, diff.candidate.file, diff.base.schema
    );
    if diff.cells.is_empty() {
        out.push_str("No cell is on both sides.\n");
    } else {
        out.push_str(&md_table(&rows(diff)));
    }
    out.push('\n');
    out.push_str(&legend(diff, "`~`"));
    out.push('\n');
    for (title, lines) in notes(diff) {
        out.push_str(&format!("\n**{title}**\n\n"));
        for l in lines {
            out.push_str(&format!("- {l}\n"));
        }
    }
    out.push('\n');
    out.push_str(&summary(diff));
    out.push('\n');
    out
}

pub fn json(diff: &Diff) -> String {
    diff.to_json() + "\n"
}
