//! calibrate at a fixed offered rate (issue 44, item 4): each keep-alive
//! row's server loaded by the engine's open loop at one rate per server and
//! workload, the same in every environment, so an environment's added
//! latency (p50, p99, from each request's intended send) and CPU per
//! request are read against bare at the same load, below saturation,
//! where people run their servers, beside the saturation ratios.
//!
//! The rate is `--rate`: absolute, or a share of bare's closed-loop
//! req/s for that server and workload (bare is measured first), rounded
//! to two significant digits. A row's figure is comparable only where the
//! rate was held (achieved ≥ [`HELD_SHARE`] of offered, nothing failed)
//! and at most [`KNEE_SHARE`] of the row's own closed-loop req/s: below
//! its knee.

use std::str::FromStr;

use super::report::{EnvDoc, EnvStatus, FixedRate, FixedRun};
pub use super::report::{HELD_SHARE, KNEE_SHARE};

/// `--rate`: the offered rate of the fixed-rate runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RateChoice {
    /// This many requests per second.
    PerSecond(f64),
    /// This share (0–1) of bare's closed-loop req/s, per server and workload.
    ShareOfBare(f64),
    /// No fixed-rate runs.
    Off,
}

impl FromStr for RateChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "off" {
            return Ok(RateChoice::Off);
        }
        let bad = || {
            format!(
                "--rate {s:?}: a positive rate (2000), a share of bare's closed-loop req/s \
                 (10%), or off"
            )
        };
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad());
            }
            return Ok(RateChoice::ShareOfBare(p / 100.0));
        }
        let r: f64 = s.trim_end_matches("/s").parse().map_err(|_| bad())?;
        if !(r.is_finite() && r > 0.0) {
            return Err(bad());
        }
        Ok(RateChoice::PerSecond(r))
    }
}

impl RateChoice {
    /// The offered rate for a server whose bare closed-loop req/s is
    /// `bare_rps` (None: bare not measured); None: no fixed-rate run.
    pub fn offered(self, bare_rps: Option<f64>) -> Option<f64> {
        match self {
            RateChoice::Off => None,
            RateChoice::PerSecond(r) => Some(r),
            RateChoice::ShareOfBare(s) => bare_rps
                .filter(|&r| r > 0.0)
                .map(|r| two_digits(r * s).max(1.0)),
        }
    }

    /// The choice in words, for the report's heading.
    pub fn describe(self) -> String {
        match self {
            RateChoice::Off => "off".into(),
            RateChoice::PerSecond(r) => format!("{r:.0} req/s"),
            RateChoice::ShareOfBare(s) => format!(
                "{:.0}% of bare's closed-loop req/s per server and workload",
                s * 100.0
            ),
        }
    }
}

/// `x` rounded to two significant digits (5,834 → 5,800).
fn two_digits(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / scale).round() * scale
}

/// The row's fixed-rate figure from its runs: achieved rate (mean), held,
/// the medians of the runs' p50, p99 and generator lateness, the mean CPU
/// per request, whether the rate was below the row's knee.
pub fn summarize(offered_per_s: f64, runs: Vec<FixedRun>, closed_rps: f64) -> FixedRate {
    let achieved: Vec<f64> = runs.iter().map(|r| r.achieved_per_s).collect();
    let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_us_per_request).collect();
    let held = !runs.is_empty()
        && runs
            .iter()
            .all(|r| r.failures == 0 && r.achieved_per_s >= HELD_SHARE * offered_per_s);
    FixedRate {
        offered_per_s,
        achieved_per_s: mean(&achieved),
        held,
        below_knee: closed_rps > 0.0 && offered_per_s <= KNEE_SHARE * closed_rps,
        p50_us: median(runs.iter().map(|r| r.p50_us as f64)),
        p99_us: median(runs.iter().map(|r| r.p99_us as f64)),
        lateness_p99_us: median(runs.iter().map(|r| r.lateness_p99_us as f64)),
        cpu_us_per_request: (!cpu.is_empty()).then(|| mean(&cpu)),
        p50_added_us: None,
        p99_added_us: None,
        cpu_ratio_to_bare: None,
        runs,
    }
}

/// Each fixed-rate figure against its baseline row's (bare, same server,
/// path and offered rate): the latency it adds at p50 and p99 (µs) and
/// its CPU per request as a ratio.
pub fn apply_added(envs: &mut [EnvDoc]) {
    let bases: Vec<(String, String, String, FixedRate)> = envs
        .iter()
        .filter(|e| e.name == e.baseline && e.status == EnvStatus::Measured)
        .flat_map(|e| {
            e.workloads.iter().filter_map(|w| {
                let f = w.fixed_rate.clone()?;
                Some((e.name.clone(), w.server.clone(), w.path.clone(), f))
            })
        })
        .collect();
    for e in envs.iter_mut() {
        for w in &mut e.workloads {
            let Some(f) = w.fixed_rate.as_mut() else {
                continue;
            };
            let Some((_, _, _, base)) = bases.iter().find(|(n, s, p, b)| {
                *n == e.baseline
                    && *s == w.server
                    && *p == w.path
                    && b.offered_per_s == f.offered_per_s
            }) else {
                continue;
            };
            if base.runs.is_empty() || f.runs.is_empty() {
                continue;
            }
            f.p50_added_us = Some(f.p50_us - base.p50_us);
            f.p99_added_us = Some(f.p99_us - base.p99_us);
            f.cpu_ratio_to_bare = match (f.cpu_us_per_request, base.cpu_us_per_request) {
                (Some(c), Some(b)) if b > 0.0 => Some(c / b),
                _ => None,
            };
        }
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::report::EnvWorkload;

    #[test]
    fn rates_parse_as_absolute_shares_or_off() {
        assert_eq!("2000".parse(), Ok(RateChoice::PerSecond(2000.0)));
        assert_eq!("2000/s".parse(), Ok(RateChoice::PerSecond(2000.0)));
        assert_eq!("10%".parse(), Ok(RateChoice::ShareOfBare(0.1)));
        assert_eq!("off".parse(), Ok(RateChoice::Off));
        for bad in ["0", "-5", "0%", "150%", "fast", "", "nan"] {
            assert!(bad.parse::<RateChoice>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_share_of_bare_is_rounded_to_two_digits() {
        let c = RateChoice::ShareOfBare(0.1);
        assert_eq!(c.offered(Some(58_345.0)), Some(5_800.0));
        assert_eq!(c.offered(Some(951.0)), Some(95.0));
        assert_eq!(c.offered(None), None);
        assert_eq!(RateChoice::PerSecond(300.0).offered(None), Some(300.0));
        assert_eq!(RateChoice::Off.offered(Some(1.0)), None);
    }

    fn run(achieved: f64, p50: u64, p99: u64, failures: u64, cpu: f64) -> FixedRun {
        FixedRun {
            achieved_per_s: achieved,
            p50_us: p50,
            p99_us: p99,
            failures,
            requests: achieved as u64,
            cpu_us_per_request: Some(cpu),
            lateness_p99_us: 10,
            outside_cpu_pct: 0.0,
        }
    }

    #[test]
    fn held_needs_every_run_at_95_percent_and_nothing_failed() {
        let f = summarize(1000.0, vec![run(999.0, 1, 2, 0, 1.0); 3], 10_000.0);
        assert!(f.held && f.below_knee);
        let f = summarize(
            1000.0,
            vec![run(999.0, 1, 2, 0, 1.0), run(940.0, 1, 2, 0, 1.0)],
            10_000.0,
        );
        assert!(!f.held);
        let f = summarize(1000.0, vec![run(1000.0, 1, 2, 1, 1.0)], 10_000.0);
        assert!(!f.held);
        // Above half the row's closed-loop capacity: past its knee.
        assert!(!summarize(1000.0, vec![run(1000.0, 1, 2, 0, 1.0)], 1_900.0).below_knee);
    }

    #[test]
    fn added_latency_is_read_against_bare_at_the_same_rate() {
        let row = |name: &str, p50: u64, p99: u64, cpu: f64| {
            let mut w = EnvWorkload::new("s", "/hello");
            w.fixed_rate = Some(summarize(
                1000.0,
                vec![run(1000.0, p50, p99, 0, cpu); 3],
                10_000.0,
            ));
            EnvDoc::measured(name, vec![w])
        };
        let mut envs = vec![row("bare", 100, 300, 10.0), row("docker", 160, 700, 15.0)];
        apply_added(&mut envs);
        let f = envs[1].workloads[0].fixed_rate.as_ref().unwrap();
        assert_eq!((f.p50_added_us, f.p99_added_us), (Some(60.0), Some(400.0)));
        assert_eq!(f.cpu_ratio_to_bare, Some(1.5));
        let b = envs[0].workloads[0].fixed_rate.as_ref().unwrap();
        assert_eq!(b.p99_added_us, Some(0.0));
    }
}
