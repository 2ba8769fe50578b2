//! `harness diff BASE CANDIDATE`: is the candidate really faster? Two
//! result sets of one kind (compare, models or reproduce) are read into
//! cells ([`load`]); each cell on both sides gets, for RPS and p99, the
//! Mann-Whitney U test and the Hodges-Lehmann change with its interval
//! ([`crate::ranks`], [`judge`]), a verdict (better, worse, `~`), and the reasons
//! it is not comparable if any ([`comparable`]). Printed as text, Markdown
//! or JSON ([`render`], [`document`]); `--fail-on regression` gates CI.

pub mod comparable;
pub mod document;
pub mod judge;
pub mod load;
pub mod render;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use document::{CellDiff, Diff, Side};
use judge::{Better, Rule};
use load::ResultSet;

use crate::ranks;

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Each cell found in both sets (server, workload, concurrency, environment,
load tool) gets, for RPS (verified responses per second: higher is better)
and p99 latency (lower is better): the median of each side's runs, the
change in %, its confidence interval, the p-value and a verdict:
  better / worse   significant at --alpha and at least --threshold
  ~                no significant difference, or a smaller change

The test is Mann-Whitney U, two-sided (as Go's benchstat): it assumes no
shape for the runs, and one run hit by a neighbour's build moves one rank,
not the mean. The change is the Hodges-Lehmann estimate of the shift of
ln(value) (a setting scales throughput; ×1.1 and ÷1.1 are the same size),
with the distribution-free interval the same U distribution gives. With n
runs a side the smallest p the test can reach is 2/C(2n, n): 3 runs a side
can never be significant at 0.05, 4 can. Cells with too few runs say so.

A cell is marked not comparable (its verdict is still shown) when a side
was contaminated (other processes took 10% of the machine or more), the
server's failing contract rows differ, its /config differs (workers, DB
pool, OPcache, JIT, debug), or the machines or load settings differ (CPU,
cores, kernel, autogroup, harness build; run length, keep-alive, threads).
Cells on one side only are listed.

Exit status: 0; 1 with --fail-on regression when a cell is significantly
worse by at least the threshold (in RPS or p99, comparable or not: a gate
errs toward failing), 1 when an input cannot be read (the message says
which and why), 2 for a malformed flag.

Examples:
  harness diff results/2026-11-30T02-40-00Z results/2026-11-30T03-10-00Z
  harness diff before/results.json after/results.json --format markdown > comment.md
  harness diff main-run/ pr-run/ --threshold 5 --fail-on regression
  harness diff a/ b/ --alpha 0.01 --format json | jq '.cells[] | select(.rps.verdict != \"~\")'")]
pub struct DiffArgs {
    /// The results before the change: a results directory of compare,
    /// models or reproduce, or its results.json.
    #[arg(value_name = "BASE")]
    pub base: PathBuf,

    /// The results after the change, of the same kind as BASE.
    #[arg(value_name = "CANDIDATE")]
    pub candidate: PathBuf,

    /// Significance level of the two-sided test; the interval is 1 − alpha.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha, value_name = "P")]
    pub alpha: f64,

    /// The smallest change, in %, that counts as better or worse.
    #[arg(long, default_value = "2", value_parser = parse_threshold, value_name = "PCT")]
    pub threshold: f64,

    /// Output: an aligned table, Markdown for a pull-request comment, or JSON (harness.diff/1).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Exit 1 when any cell is significantly worse by at least the threshold.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Markdown,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// A cell significantly worse in RPS or p99 by at least the threshold.
    Regression,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 1.0 => Ok(a),
        _ => Err(format!(
            "{s:?}: the level is a probability strictly between 0 and 1 (0.05)"
        )),
    }
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(t) if t >= 0.0 && t.is_finite() => Ok(t),
        _ => Err(format!(
            "{s:?}: the threshold is a percentage of at least 0 (2 or 2%)"
        )),
    }
}

/// The `diff` command.
pub fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let base = load::read(&args.base).context("BASE")?;
    let candidate = load::read(&args.candidate).context("CANDIDATE")?;
    if base.kind != candidate.kind {
        bail!(
            "{} is a {} document and {} a {} one: diff compares two result sets of one kind",
            base.file.display(),
            base.kind.schema(),
            candidate.file.display(),
            candidate.kind.schema()
        );
    }
    let rule = Rule {
        alpha: args.alpha,
        threshold_pct: args.threshold,
    };
    let d = diff(&base, &candidate, rule);
    let out = match args.format {
        Format::Text => render::text(&d),
        Format::Markdown => render::markdown(&d),
        Format::Json => render::json(&d),
    };
    print!("{out}");
    if args.fail_on == Some(FailOn::Regression) && d.regressions > 0 {
        eprintln!(
            "harness diff: {} cell(s) significantly worse by at least {}%",
            d.regressions, args.threshold
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// How the verdicts are reached, in a sentence.
fn method(alpha: f64) -> String {
    format!(
        "Mann-Whitney U test, two-sided (exact without ties and up to {} runs a side, \
         else the normal approximation with tie and continuity corrections); change: \
         the Hodges-Lehmann estimate of the shift of ln(value), in %, with its \
         distribution-free {}% confidence interval",
        ranks::EXACT_MAX,
        100.0 * (1.0 - alpha)
    )
}

/// Every cell of `base` and `candidate` judged.
pub fn diff(base: &ResultSet, candidate: &ResultSet, rule: Rule) -> Diff {
    let mut cells = Vec::new();
    let mut only_in_base = Vec::new();
    for (key, b) in &base.cells {
        let Some(c) = candidate.cells.get(key) else {
            only_in_base.push(key.clone());
            continue;
        };
        let not_comparable = comparable::cell_reasons(&key.server, (base, b), (candidate, c));
        let mut warnings = Vec::new();
        let (n1, n2) = (b.rps.len(), c.rps.len());
        if n1 > 0 && n2 > 0 && ranks::min_p(n1, n2) >= rule.alpha {
            warnings.push(format!(
                "too few runs to ever be significant: {n1} and {n2}; the smallest p the \
                 Mann-Whitney U test can give with them is {:.3} (α = {}): at least {} runs \
                 per side are needed",
                ranks::min_p(n1, n2),
                rule.alpha,
                ranks::min_runs_per_side(rule.alpha)
            ));
        }
        for (side, s) in [("base", b), ("candidate", c)] {
            warnings.extend(s.problems.iter().map(|p| format!("{side}: {p}")));
        }
        warnings.extend(comparable::runtime_note(&key.server, base, candidate));
        cells.push(CellDiff {
            key: key.clone(),
            comparable: false,
            not_comparable,
            warnings,
            rps: judge::judge(&b.rps, &c.rps, Better::Higher, rule),
            p99_us: judge::judge(&b.p99_us, &c.p99_us, Better::Lower, rule),
        });
    }
    let set_reasons = comparable::set_reasons(base, candidate);
    for c in &mut cells {
        c.comparable = set_reasons.is_empty() && c.not_comparable.is_empty();
    }
    let only_in_candidate = candidate
        .cells
        .keys()
        .filter(|k| !base.cells.contains_key(k))
        .cloned()
        .collect();
    let side = |s: &ResultSet| Side {
        file: s.file.display().to_string(),
        schema: s.kind.schema().into(),
    };
    Diff {
        schema: document::SCHEMA.into(),
        base: side(base),
        candidate: side(candidate),
        alpha: rule.alpha,
        threshold_pct: rule.threshold_pct,
        method: method(rule.alpha),
        min_runs_per_side: ranks::min_runs_per_side(rule.alpha),
        not_comparable: set_reasons,
        regressions: cells.iter().filter(|c| c.regressed()).count(),
        cells,
        only_in_base,
        only_in_candidate,
    }
}
