//! One metric of one cell judged: the test, the shift and its interval,
//! and the verdict with the threshold applied.

use super::document::{MetricDiff, Verdict};
use crate::ranks as stats;
use crate::ranks::median;

/// Which way is good for a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Throughput.
    Higher,
    /// Latency.
    Lower,
}

/// What decides a verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// The significance level of the two-sided test (and `1 − alpha` the
    /// interval's confidence).
    pub alpha: f64,
    /// A change smaller than this, in %, is "~".
    pub threshold_pct: f64,
}

/// Base against candidate, each a value per run (positive).
pub fn judge(base: &[f64], candidate: &[f64], better: Better, rule: Rule) -> MetricDiff {
    let mut out = MetricDiff {
        base: base.to_vec(),
        candidate: candidate.to_vec(),
        base_median: median(base),
        candidate_median: median(candidate),
        change_pct: None,
        ci_low_pct: None,
        ci_high_pct: None,
        p_value: None,
        test: None,
        verdict: Verdict::Unmeasured,
    };
    if base.is_empty() || candidate.is_empty() {
        return out;
    }
    let test = stats::mann_whitney(base, candidate);
    let shift = stats::hodges_lehmann(base, candidate, rule.alpha);
    let change = shift.change_pct();
    out.change_pct = Some(change);
    if let Some((lo, hi)) = shift.interval_pct() {
        out.ci_low_pct = Some(lo);
        out.ci_high_pct = Some(hi);
    }
    out.p_value = Some(test.p);
    out.test = Some(test.method.name().into());
    let significant = test.p < rule.alpha && change.abs() >= rule.threshold_pct;
    out.verdict = match (significant, change > 0.0, better) {
        (false, _, _) => Verdict::Same,
        (true, true, Better::Higher) | (true, false, Better::Lower) => Verdict::Better,
        (true, _, _) => Verdict::Worse,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule {
        alpha: 0.05,
        threshold_pct: 2.0,
    };

    /// xorshift64*: a small seeded generator, so every trial is repeatable.
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
            ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        /// A standard normal (Box-Muller).
        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }

        /// `n` runs around `median` with a relative spread `sd` (log-normal).
        fn runs(&mut self, n: usize, median: f64, sd: f64) -> Vec<f64> {
            (0..n)
                .map(|_| median * (sd * self.normal()).exp())
                .collect()
        }
    }

    #[test]
    fn a_ten_percent_drop_in_ten_runs_is_worse_and_inside_the_interval() {
        let mut rng = Rng(0x5eed_0001);
        let base = rng.runs(10, 20_000.0, 0.03);
        let cand = rng.runs(10, 18_000.0, 0.03);
        let d = judge(&base, &cand, Better::Higher, RULE);
        assert_eq!(d.verdict, Verdict::Worse, "{d:?}");
        let (lo, hi) = (d.ci_low_pct.unwrap(), d.ci_high_pct.unwrap());
        assert!(lo <= -10.0 && -10.0 <= hi, "{lo} .. {hi}");
        assert!(d.p_value.unwrap() < 0.05);
        // The same shift in a latency is an improvement.
        assert_eq!(
            judge(&base, &cand, Better::Lower, RULE).verdict,
            Verdict::Better
        );
    }

    #[test]
    fn same_distribution_is_no_difference_in_at_least_95_percent_of_trials() {
        let mut rng = Rng(0x5eed_0002);
        let trials = 10_000;
        let mut same_at_threshold = 0;
        let mut same_at_zero = 0;
        for _ in 0..trials {
            let base = rng.runs(10, 20_000.0, 0.03);
            let cand = rng.runs(10, 20_000.0, 0.03);
            let d = judge(&base, &cand, Better::Higher, RULE);
            if d.verdict == Verdict::Same {
                same_at_threshold += 1;
            }
            // Without the threshold, the verdict is the test's alone.
            if d.p_value.unwrap() >= RULE.alpha {
                same_at_zero += 1;
            }
        }
        eprintln!(
            "same distribution, 10 runs a side, {trials} trials: \"~\" in {same_at_threshold} \
             (threshold 2%), p >= alpha in {same_at_zero}"
        );
        assert!(
            same_at_threshold * 100 >= 95 * trials,
            "{same_at_threshold} of {trials}"
        );
        // The test alone, without the threshold, holds its level: the exact
        // test at 10 and 10 runs rejects 4.33% of the time under the null
        // (sd of the rate over 10,000 trials: 0.2%); a test at 10% would
        // leave 90% here.
        assert!(
            same_at_zero * 1000 >= 945 * trials,
            "{same_at_zero} of {trials}"
        );
    }

    #[test]
    fn a_significant_change_below_the_threshold_is_no_difference() {
        let base = [100.0, 100.1, 100.2, 100.3, 100.4];
        let cand = [101.0, 101.1, 101.2, 101.3, 101.4]; // +1%, every run above
        let d = judge(&base, &cand, Better::Higher, RULE);
        assert!(d.p_value.unwrap() < 0.05);
        assert_eq!(d.verdict, Verdict::Same);
        let strict = Rule {
            threshold_pct: 0.5,
            ..RULE
        };
        assert_eq!(
            judge(&base, &cand, Better::Higher, strict).verdict,
            Verdict::Better
        );
    }

    #[test]
    fn a_side_without_runs_is_unmeasured() {
        let d = judge(&[], &[1.0, 2.0], Better::Higher, RULE);
        assert_eq!(d.verdict, Verdict::Unmeasured);
        assert_eq!(d.candidate_median, Some(1.5));
        assert_eq!(d.change_pct, None);
    }
}
