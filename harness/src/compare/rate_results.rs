//! What `compare --rate`, `--slo` and `--threshold` add to results.json:
//! the fixed-rate cells, each server's capacity under the SLO, and every
//! threshold's verdict per cell (all absent without those flags).

use serde::{Deserialize, Serialize};

use crate::thresholds::Verdict;

/// The fixed-rate part of a comparison.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AtRate {
    /// Each fixed-rate run's length, s.
    pub duration_s: f64,
    /// `--rate` as given (`25%`, `1000/s`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<String>,
    /// `--slo`'s thresholds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<String>,
    /// `--threshold`'s expressions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<String>,
    /// Server × workload × rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells: Vec<RateCell>,
    /// Server × workload under `--slo`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity: Vec<CapacityRow>,
    /// `--threshold` on each closed-loop row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_loop_verdicts: Vec<RowVerdicts>,
}

impl AtRate {
    pub fn is_empty(&self) -> bool {
        self.rates.is_empty() && self.slo.is_empty() && self.thresholds.is_empty()
    }

    /// Every failed threshold, as `server workload where: FAIL expr (…)`.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.closed_loop_verdicts {
            for v in r.verdicts.iter().filter(|v| !v.pass) {
                out.push(format!(
                    "{} {} c={}: FAIL {} ({})",
                    r.server,
                    r.workload,
                    r.connections,
                    v.threshold,
                    observed(v)
                ));
            }
        }
        for c in &self.cells {
            for v in c.thresholds.iter().filter(|v| !v.pass) {
                out.push(format!(
                    "{} {} at {:.0}/s ({}): FAIL {} ({})",
                    c.server,
                    c.workload_label(),
                    c.offered_per_s,
                    c.asked,
                    v.threshold,
                    observed(v)
                ));
            }
        }
        out
    }
}

fn observed(v: &Verdict) -> String {
    match crate::thresholds::Threshold::parse(&v.threshold) {
        Ok(t) => t.observed_in_words(v.observed),
        Err(_) => format!("{:?}", v.observed),
    }
}

/// A closed-loop row's verdicts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowVerdicts {
    pub server: String,
    pub workload: String,
    pub connections: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    pub verdicts: Vec<Verdict>,
}

/// p50 … max of a fixed-rate cell, from the intended send, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLatency {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
}

/// One server × workload at one offered rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateCell {
    pub server: String,
    pub workload: String,
    /// The framing asked for when it is not plain HTTP/1.1 (`--protocol`,
    /// as a closed-loop row's): `h2c 100`, `h1-pipelined 16`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// How it was asked for (`25%`, `1000/s`, `slo step`, `half capacity`).
    pub asked: String,
    /// Connections the open loop sends on.
    pub connections: u64,
    pub offered_per_s: f64,
    /// Successful requests (messages) per second.
    pub achieved_per_s: f64,
    /// achieved ÷ offered.
    pub achieved_share: f64,
    pub requests: u64,
    pub failed: u64,
    /// achieved ≥ 95 % of offered and nothing failed.
    pub held: bool,
    /// From each request's intended send time (coordinated omission corrected).
    pub latency_us: RateLatency,
    /// The latency distribution, for percentile curves.
    pub latency_curve: Vec<CurvePoint>,
    /// The server's CPU time per successful request, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_request: Option<f64>,
    /// The server's CPU over the run, in cores (1.0: one core busy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rss_peak_bytes: Option<u64>,
    /// The generator's own CPU, % of one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cpu_pct: Option<f64>,
    /// How late the generator sent, p99 (µs): its own delay, inside the latency.
    pub lateness_p99_us: u64,
    /// Where the generator, not the server, may have been the limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_note: Option<String>,
    /// `--slo`: whether this run passed every SLO threshold (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_slo: Option<bool>,
    /// `--threshold`, judged on this cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
    /// Why there are no figures (the server did not start, a run broke).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One server × workload's capacity under the SLO.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityRow {
    pub server: String,
    pub workload: String,
    /// As [`RateCell::protocol`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The highest offered rate held within the SLO (the median over the
    /// searches, with `--runs` > 1); `None`: none held.
    pub capacity_per_s: Option<f64>,
    /// `--runs` > 1: each search's capacity, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches_capacity_per_s: Vec<Option<f64>>,
    /// `--runs` > 1: the lowest and highest capacity the searches found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_per_s: Option<[f64; 2]>,
    /// The lowest rate that did not hold above the capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at_per_s: Option<f64>,
    /// The closed-loop RPS of the same server and workload, for scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_loop_rps: Option<f64>,
    /// A run at half the capacity: its CPU per request and p99.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_half: Option<RateCell>,
    /// Every step of the search, in the order taken.
    pub steps: Vec<RateCell>,
    /// Why the search could not run, or how it ended unusually.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A workload as the fixed-rate tables and charts name it: with its
/// protocol where it is not plain HTTP/1.1 (`hello h2c 100`).
pub fn workload_label(workload: &str, protocol: Option<&str>) -> String {
    match protocol {
        Some(p) => format!("{workload} {p}"),
        None => workload.to_string(),
    }
}

impl RateCell {
    /// [`workload_label`] of this cell.
    pub fn workload_label(&self) -> String {
        workload_label(&self.workload, self.protocol.as_deref())
    }
}

impl CapacityRow {
    /// [`workload_label`] of this row.
    pub fn workload_label(&self) -> String {
        workload_label(&self.workload, self.protocol.as_deref())
    }
}

/// One point of a latency distribution (HdrHistogram's percentile
/// distribution): closed-loop rows and fixed-rate cells alike. Here rather
/// than in `results`, which imports this file.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurvePoint {
    /// 0..=100.
    pub percentile: f64,
    pub latency_us: u64,
}
