//! Pass/fail thresholds in k6's syntax (`p(99)<20ms`, `avg<5ms`,
//! `rate<0.01`, `rps>10000`), parsed once and judged against a run's
//! [`Summary`]. `run --threshold`, compare's cells and SLOs, models and
//! calibrate all judge with this one module, so an expression means the same
//! everywhere.
//!
//! Metrics: `p(N)` (any percentile, 0 < N ≤ 100), `avg`, `med`, `min`, `max`
//! of the successful requests' latency; `rate`, the share of requests that
//! failed (k6's `http_req_failed`); `rps`, finished requests per second.
//! Operators: `<`, `<=`, `>`, `>=`, `==`, `!=`. A latency bound takes a unit
//! (`us`, `µs`, `ms`, `s`); bare, it is milliseconds, as in k6. A rate is a
//! share (`0.01`) or a percentage (`1%`).
//!
//! A latency threshold of a run with no successful request fails: there is
//! no latency to hold under the bound, and a CI gate must not pass a server
//! that answered nothing.

use std::fmt;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The exit code when a threshold failed (k6's).
pub const EXIT_FAILED: u8 = 99;

/// What a threshold measures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    /// The latency at this percentile (0 < p ≤ 100).
    Percentile(f64),
    Avg,
    Min,
    Max,
    /// The share of finished requests that failed.
    FailureRate,
    /// Finished requests (or messages) per second.
    Rps,
}

impl Metric {
    fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::Percentile(_) | Metric::Avg | Metric::Min | Metric::Max
        )
    }
}

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, observed: f64, bound: f64) -> bool {
        match self {
            Op::Lt => observed < bound,
            Op::Le => observed <= bound,
            Op::Gt => observed > bound,
            Op::Ge => observed >= bound,
            Op::Eq => observed == bound,
            Op::Ne => observed != bound,
        }
    }
}

/// One parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// The expression as given, spaces removed (how reports name it).
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    /// The bound: µs for latency, a share (0..1) for `rate`, per second for `rps`.
    pub bound: f64,
}

/// Why an expression did not parse, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad threshold {text:?}: {why} (e.g. 'p(99)<20ms', 'avg<5ms', 'rate<0.01', 'rps>10000')")]
pub struct ParseError {
    text: String,
    why: String,
}

/// What a run did, as much as a threshold needs.
#[derive(Clone, Copy, Debug)]
pub struct Summary<'a> {
    /// The successful requests' latency, in µs.
    pub latency_us: &'a Histogram<u64>,
    /// Finished requests: successes and failures.
    pub requests: u64,
    pub failures: u64,
    /// The measured time, in seconds.
    pub seconds: f64,
}

/// A threshold judged against one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// The expression.
    pub threshold: String,
    pub pass: bool,
    /// What the run did, in the threshold's unit (µs, a share, per second);
    /// `None` for a latency threshold of a run without successes.
    pub observed: Option<f64>,
}

impl Verdict {
    /// `PASS p(99)<20ms (p(99) = 1.25ms)`.
    pub fn line(&self, threshold: &Threshold) -> String {
        format!(
            "{} {} ({})",
            if self.pass { "PASS" } else { "FAIL" },
            self.threshold,
            threshold.observed_in_words(self.observed)
        )
    }
}

impl Threshold {
    /// Parses a k6-style expression; see the module's documentation.
    pub fn parse(s: &str) -> Result<Threshold, ParseError> {
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let err = |why: &str| ParseError {
            text: s.to_string(),
            why: why.to_string(),
        };
        let at = text
            .find(['<', '>', '=', '!'])
            .ok_or_else(|| err("no comparison (<, <=, >, >=, ==, !=)"))?;
        let (name, rest) = text.split_at(at);
        let (op, value) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find_map(|(sym, op)| rest.strip_prefix(sym).map(|v| (op, v)))
        .ok_or_else(|| err("no comparison (<, <=, >, >=, ==, !=)"))?;
        let metric = match name {
            "avg" => Metric::Avg,
            "min" => Metric::Min,
            "max" => Metric::Max,
            "med" => Metric::Percentile(50.0),
            "rate" => Metric::FailureRate,
            "rps" => Metric::Rps,
            _ => {
                let p = name
                    .strip_prefix("p(")
                    .and_then(|n| n.strip_suffix(')'))
                    .ok_or_else(|| {
                        err(&format!(
                            "unknown metric {name:?}: one of p(N), avg, med, min, max, rate, rps"
                        ))
                    })?;
                match p.parse::<f64>() {
                    Ok(p) if p > 0.0 && p <= 100.0 => Metric::Percentile(p),
                    _ => return Err(err(&format!("p({p}): a percentile above 0, at most 100"))),
                }
            }
        };
        if value.is_empty() {
            return Err(err("no value after the comparison"));
        }
        let bound = if metric.is_latency() {
            latency_us(value).map_err(|why| err(&why))?
        } else if metric == Metric::FailureRate {
            let (num, scale) = match value.strip_suffix('%') {
                Some(n) => (n, 0.01),
                None => (value, 1.0),
            };
            match num.parse::<f64>() {
                Ok(v) if v.is_finite() && (0.0..=1.0).contains(&(v * scale)) => v * scale,
                _ => {
                    return Err(err(&format!(
                        "rate {value:?}: a share 0..1 or a percentage"
                    )))
                }
            }
        } else {
            match value.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => v,
                _ => return Err(err(&format!("rps {value:?}: requests per second"))),
            }
        };
        Ok(Threshold {
            text,
            metric,
            op,
            bound,
        })
    }

    /// The bound of a latency threshold, in µs (`None` for `rate` and `rps`).
    pub fn latency_bound_us(&self) -> Option<f64> {
        self.metric.is_latency().then_some(self.bound)
    }

    /// What `summary` shows for this threshold's metric.
    pub fn observe(&self, summary: &Summary) -> Option<f64> {
        let h = summary.latency_us;
        match self.metric {
            Metric::FailureRate => Some(if summary.requests == 0 {
                0.0
            } else {
                summary.failures as f64 / summary.requests as f64
            }),
            Metric::Rps => Some(if summary.seconds > 0.0 {
                summary.requests as f64 / summary.seconds
            } else {
                0.0
            }),
            _ if h.is_empty() => None,
            Metric::Percentile(p) => Some(h.value_at_quantile(p / 100.0) as f64),
            Metric::Avg => Some(h.mean()),
            Metric::Min => Some(h.min() as f64),
            Metric::Max => Some(h.max() as f64),
        }
    }

    /// This threshold judged against `summary`.
    pub fn evaluate(&self, summary: &Summary) -> Verdict {
        let observed = self.observe(summary);
        Verdict {
            threshold: self.text.clone(),
            pass: observed.is_some_and(|v| self.op.holds(v, self.bound)),
            observed,
        }
    }

    /// `p(99) = 1.25ms`, `rate = 0.20%`, `rps = 9,876`.
    pub fn observed_in_words(&self, observed: Option<f64>) -> String {
        let name = self.text.split(['<', '>', '=', '!']).next().unwrap_or("");
        match (observed, self.metric) {
            (None, _) => format!("{name}: no successful request"),
            (Some(v), Metric::FailureRate) => format!("{name} = {:.2}%", 100.0 * v),
            (Some(v), Metric::Rps) => format!("{name} = {v:.0}/s"),
            (Some(v), _) => format!("{name} = {}", latency_words(v)),
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// For clap's `value_parser`: the expression or its one-line error.
pub fn parse_arg(s: &str) -> Result<Threshold, String> {
    Threshold::parse(s).map_err(|e| e.to_string())
}

/// Every threshold judged against `summary`; `true` when all pass.
pub fn judge(thresholds: &[Threshold], summary: &Summary) -> (Vec<Verdict>, bool) {
    let verdicts: Vec<Verdict> = thresholds.iter().map(|t| t.evaluate(summary)).collect();
    let pass = verdicts.iter().all(|v| v.pass);
    (verdicts, pass)
}

/// `20ms`, `500us`, `1.5s`, `20` (ms) → µs.
fn latency_us(value: &str) -> Result<f64, String> {
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (num, unit) = value.split_at(split);
    let scale = match unit {
        "" | "ms" => 1e3,
        "us" | "µs" => 1.0,
        "s" => 1e6,
        other => return Err(format!("unknown unit {other:?} (use us, ms or s)")),
    };
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v * scale),
        _ => Err(format!("{value:?} is not a latency (try 20ms)")),
    }
}

fn latency_words(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else if us < 10_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency_histogram;

    fn summary(h: &Histogram<u64>, requests: u64, failures: u64) -> Summary<'_> {
        Summary {
            latency_us: h,
            requests,
            failures,
            seconds: 2.0,
        }
    }

    #[test]
    fn parses_k6_expressions_into_units() {
        let t = Threshold::parse("p(99) < 20ms").unwrap();
        assert_eq!(
            (t.text.as_str(), t.metric, t.op, t.bound),
            ("p(99)<20ms", Metric::Percentile(99.0), Op::Lt, 20_000.0)
        );
        assert_eq!(
            Threshold::parse("p(99.9)<=1.5s").unwrap().bound,
            1_500_000.0
        );
        assert_eq!(Threshold::parse("avg<500us").unwrap().bound, 500.0);
        assert_eq!(Threshold::parse("avg<500µs").unwrap().bound, 500.0);
        assert_eq!(Threshold::parse("max<20").unwrap().bound, 20_000.0);
        assert_eq!(
            Threshold::parse("med<5ms").unwrap().metric,
            Metric::Percentile(50.0)
        );
        let r = Threshold::parse("rate<1%").unwrap();
        assert_eq!((r.metric, r.bound), (Metric::FailureRate, 0.01));
        assert_eq!(Threshold::parse("rate<0.001").unwrap().bound, 0.001);
        let q = Threshold::parse("rps>=10000").unwrap();
        assert_eq!((q.metric, q.op, q.bound), (Metric::Rps, Op::Ge, 10_000.0));
    }

    #[test]
    fn bad_expressions_are_one_line_errors() {
        for bad in [
            "",
            "p99<20ms",
            "p(0)<1ms",
            "p(101)<1ms",
            "p(x)<1ms",
            "avg",
            "avg<",
            "avg<5parsecs",
            "rate<2",
            "rate<-1",
            "rps>fast",
            "latency<5ms",
            "p(99)=>5ms",
        ] {
            let e = Threshold::parse(bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.starts_with("bad threshold"), "{bad}: {e}");
        }
    }

    #[test]
    fn judges_latency_failures_and_rate() {
        let mut h = latency_histogram();
        for us in 1..=1000 {
            h.record(us).unwrap();
        }
        let s = summary(&h, 1000, 10);
        let judge1 = |e: &str| Threshold::parse(e).unwrap().evaluate(&s);
        assert!(judge1("p(99)<2ms").pass);
        assert!(!judge1("p(99)<900us").pass);
        assert!(judge1("p(50)<=501us").pass);
        assert!(judge1("avg<1ms").pass);
        assert!(!judge1("max<999us").pass);
        assert!(judge1("min<2us").pass);
        // 10 of 1000 failed: 1%.
        assert!(judge1("rate<=0.01").pass);
        assert!(!judge1("rate<0.01").pass);
        assert_eq!(judge1("rate<0.01").observed, Some(0.01));
        // 1000 requests in 2 s.
        assert!(judge1("rps>499").pass);
        assert!(!judge1("rps>500").pass);
        let (verdicts, all) = judge(
            &[
                Threshold::parse("p(99)<2ms").unwrap(),
                Threshold::parse("rps>500").unwrap(),
            ],
            &s,
        );
        assert_eq!((verdicts.len(), all), (2, false));
    }

    #[test]
    fn a_run_without_successes_fails_its_latency_thresholds() {
        let h = latency_histogram();
        let s = summary(&h, 100, 100);
        let t = Threshold::parse("p(99)<1s").unwrap();
        let v = t.evaluate(&s);
        assert_eq!((v.pass, v.observed), (false, None));
        assert!(v.line(&t).starts_with("FAIL p(99)<1s"), "{}", v.line(&t));
        assert!(!Threshold::parse("rate<0.5").unwrap().evaluate(&s).pass);
    }
}
