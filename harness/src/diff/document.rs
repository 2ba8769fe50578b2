//! What `harness diff` finds (`--format json`, schema `harness.diff/1`):
//! per cell, each metric's runs on both sides, the change, its interval,
//! the p-value and the verdict, and why a cell is not comparable.

use serde::{Deserialize, Serialize};

use super::load::Key;

pub const SCHEMA: &str = "harness.diff/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    pub schema: String,
    pub base: Side,
    pub candidate: Side,
    pub alpha: f64,
    /// A change smaller than this (in %) is "~" however significant.
    pub threshold_pct: f64,
    /// The test and the interval, in a sentence.
    pub method: String,
    /// The fewest runs per side with which the test can reach `alpha` at all.
    pub min_runs_per_side: usize,
    /// What makes every cell not comparable (machine facts, load settings).
    pub not_comparable: Vec<String>,
    pub cells: Vec<CellDiff>,
    pub only_in_base: Vec<Key>,
    pub only_in_candidate: Vec<Key>,
    /// Cells with a metric significantly worse by at least the threshold.
    pub regressions: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub file: String,
    pub schema: String,
}

/// One cell present on both sides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellDiff {
    #[serde(flatten)]
    pub key: Key,
    /// No reason below: the two sides measured the same thing the same way.
    pub comparable: bool,
    /// Why not (a contaminated side, different `/config`, …).
    pub not_comparable: Vec<String>,
    /// Warnings that do not bar the comparison (too few runs, runs dropped).
    pub warnings: Vec<String>,
    /// Verified responses per second: higher is better.
    pub rps: MetricDiff,
    /// 99th percentile latency, µs: lower is better.
    pub p99_us: MetricDiff,
}

impl CellDiff {
    /// A metric significantly worse by at least the threshold.
    pub fn regressed(&self) -> bool {
        self.rps.verdict == Verdict::Worse || self.p99_us.verdict == Verdict::Worse
    }
}

/// One metric of one cell, base against candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricDiff {
    /// One value per counted run.
    pub base: Vec<f64>,
    pub candidate: Vec<f64>,
    pub base_median: Option<f64>,
    pub candidate_median: Option<f64>,
    /// The Hodges-Lehmann estimate of the change, % of the base.
    pub change_pct: Option<f64>,
    /// Its `1 − alpha` confidence interval, %; absent when the runs are too
    /// few for one.
    pub ci_low_pct: Option<f64>,
    pub ci_high_pct: Option<f64>,
    /// Two-sided Mann-Whitney U.
    pub p_value: Option<f64>,
    /// `exact` or `normal approximation`.
    pub test: Option<String>,
    pub verdict: Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    #[serde(rename = "better")]
    Better,
    #[serde(rename = "worse")]
    Worse,
    /// No significant difference, or one below the threshold.
    #[serde(rename = "~")]
    Same,
    /// A side has no counted run.
    #[serde(rename = "unmeasured")]
    Unmeasured,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "~",
            Verdict::Unmeasured => "unmeasured",
        }
    }
}

impl Diff {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a diff serializes")
    }
}
