//! Experiment 6, waiting at fixed rates: the capacity search of
//! `compare --slo` ([`crate::capacity`]) on `/sleep?ms=20`, under
//! `p(99)<100ms`. Little's law predicts, before the numbers: a worker pool
//! of W workers holds W × 1000 ÷ 20 req/s and no more (20 workers: 1,000);
//! an event loop or coroutines have no such bound (a timer holds no
//! worker) and hold more than that. The search finds the highest rate
//! held (≥ 95 % achieved, none failed, the SLO passed), then the finding
//! judges the prediction against it.

use std::time::Duration;

use super::document::{Finding, RateCapacity, RateStep};
use super::measure::{in_flight, quiesce, TIMEOUT};
use super::WAIT_MS;
use crate::capacity;
use crate::catalog::Running;
use crate::engine::{self, Control, Pace};
use crate::lab::{load, Lab};
use crate::thresholds::{self, Threshold};

/// The SLO every step is held to.
pub const SLO: &str = "p(99)<100ms";
/// A worker pool's capacity matches Little's law within this share.
pub const TOLERANCE: f64 = 0.05;
/// Where no workers bound it, the search's ceiling: this many times the
/// pool's bound at 20 workers.
const UNBOUNDED_CEILING: f64 = 4000.0;
/// A bounded model's reference: 20 workers.
const REFERENCE_BOUND: f64 = 20.0 * 1000.0 / WAIT_MS as f64;

/// The search on one server.
pub fn measure(
    lab: &Lab,
    running: &Running,
    model: &str,
    config: Option<&workloads::ServerConfig>,
    length: Duration,
) -> RateCapacity {
    let path = format!("/sleep?ms={WAIT_MS}");
    let (w, _) = in_flight(model, config, false);
    let bound = w.map(|w| f64::from(w) * 1000.0 / f64::from(WAIT_MS));
    let prediction = match bound {
        Some(b) => format!(
            "{} workers × 1000 ÷ {WAIT_MS} ms: holds {b:.0} req/s and no more",
            w.unwrap_or(0)
        ),
        None => format!(
            "no worker bound (a timer holds no worker): holds more than {REFERENCE_BOUND:.0} req/s"
        ),
    };
    let slo = [Threshold::parse(SLO).expect("a valid SLO")];
    let (start, ceiling) = match bound {
        Some(b) => (b / 4.0, b * 4.0),
        None => (REFERENCE_BOUND / 4.0, UNBOUNDED_CEILING),
    };
    let mut steps = Vec::new();
    let mut error = None;
    quiesce(running);
    let search = capacity::search(start, ceiling, |rate| {
        if lab.interrupted() || error.is_some() {
            return None;
        }
        let shape = load::Shape {
            connections: ((rate * 0.05).ceil() as usize).clamp(50, 2000),
            threads: engine::default_threads(),
            keepalive: true,
            timeout: TIMEOUT,
            io: lab.io,
            gather: lab.gather,
        };
        let mut plan = load::plan(running, &path, &shape, length);
        plan.pace = Pace::Rate(rate);
        plan.warmup = capacity::RATE_WARMUP;
        let control = Control {
            interrupt: lab.interrupt.clone(),
        };
        let r = match engine::run(&plan, &control, &mut |_| {}) {
            Ok(r) => r,
            Err(e) => {
                error = Some(format!("{e:#}"));
                return None;
            }
        };
        let s = &r.stats;
        let achieved = r.ok_per_s();
        let failed = s.failures.total();
        let summary = thresholds::Summary {
            latency_us: &s.latency_us,
            requests: s.requests(),
            failures: failed,
            seconds: r.duration.as_secs_f64(),
        };
        let within = thresholds::judge(&slo, &summary).1;
        let held = achieved >= 0.95 * rate && failed == 0 && within && !r.interrupted();
        steps.push(RateStep {
            offered_per_s: rate,
            achieved_per_s: achieved,
            p99_ms: s.latency_us.value_at_quantile(0.99) as f64 / 1000.0,
            failed,
            held,
        });
        if !held {
            // The queue a failed step left behind drains first.
            quiesce(running);
        }
        Some(held)
    });
    RateCapacity {
        server: running.name.clone(),
        model: model.into(),
        path,
        slo: SLO.into(),
        workers: w,
        predicted_per_s: bound,
        prediction,
        capacity_per_s: search.capacity_per_s,
        failed_at_per_s: search.failed_at_per_s,
        steps,
        error,
    }
}

/// Each search judged against its prediction.
pub fn findings(runs: &[RateCapacity]) -> Vec<Finding> {
    runs.iter().map(finding).collect()
}

fn finding(r: &RateCapacity) -> Finding {
    let n = |x: f64| crate::report::thousands(x.round().max(0.0) as u64);
    let above = |r: &RateCapacity| {
        r.failed_at_per_s
            .and_then(|f| r.steps.iter().find(|s| s.offered_per_s == f))
            .map_or(String::new(), |s| {
                format!(
                    "; at {}/s it did not hold: {} achieved ({:.0}%), p99 {:.0} ms",
                    n(s.offered_per_s),
                    n(s.achieved_per_s),
                    100.0 * s.achieved_per_s / s.offered_per_s,
                    s.p99_ms
                )
            })
    };
    let (sentence, matches) = match (&r.error, r.capacity_per_s, r.predicted_per_s) {
        (Some(e), ..) => (format!("the search broke off: {e}"), None),
        (None, None, _) => (
            format!(
                "predicted: {}. It held no rate within {} down to {}/s{}",
                r.prediction,
                r.slo,
                n(r.steps.last().map_or(0.0, |s| s.offered_per_s)),
                above(r)
            ),
            Some(false),
        ),
        (None, Some(c), Some(b)) => {
            let ok = (c - b).abs() <= TOLERANCE * b;
            (
                format!(
                    "predicted: {}. Held {}/s within {} ({:+.1}% of the bound){}: {}",
                    r.prediction,
                    n(c),
                    r.slo,
                    100.0 * (c - b) / b,
                    above(r),
                    if ok {
                        "Little's law holds"
                    } else {
                        "off Little's law by more than 5%"
                    }
                ),
                Some(ok),
            )
        }
        (None, Some(c), None) => {
            let ok = c > REFERENCE_BOUND * (1.0 + TOLERANCE);
            (
                format!(
                    "predicted: {}. Held {}/s within {}{}{}",
                    r.prediction,
                    n(c),
                    r.slo,
                    if r.failed_at_per_s.is_none() {
                        " (the search's ceiling)".to_string()
                    } else {
                        above(r)
                    },
                    if ok {
                        ": not bound by workers"
                    } else {
                        ": no more than a 20-worker pool here (the CPU or the generator bounds it first)"
                    }
                ),
                Some(ok),
            )
        }
    };
    Finding {
        experiment: "waiting at a rate".into(),
        server: r.server.clone(),
        sentence,
        matches_prediction: matches,
        evidence: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(predicted: Option<f64>, capacity: Option<f64>) -> RateCapacity {
        RateCapacity {
            server: "s".into(),
            model: "m".into(),
            path: "/sleep?ms=20".into(),
            slo: SLO.into(),
            workers: predicted.map(|p| (p / 50.0) as u32),
            predicted_per_s: predicted,
            prediction: "p".into(),
            capacity_per_s: capacity,
            failed_at_per_s: capacity.map(|c| c * 1.04),
            steps: Vec::new(),
            error: None,
        }
    }

    #[test]
    fn a_pool_matches_within_five_percent_and_a_loop_above_the_pool() {
        assert_eq!(
            finding(&run(Some(1000.0), Some(980.0))).matches_prediction,
            Some(true)
        );
        assert_eq!(
            finding(&run(Some(1000.0), Some(800.0))).matches_prediction,
            Some(false)
        );
        assert_eq!(
            finding(&run(None, Some(3000.0))).matches_prediction,
            Some(true)
        );
        assert_eq!(
            finding(&run(None, Some(900.0))).matches_prediction,
            Some(false)
        );
        let none = finding(&run(Some(1000.0), None));
        assert_eq!(none.matches_prediction, Some(false));
        assert!(none.sentence.contains("held no rate"), "{}", none.sentence);
    }
}
