//! The two-sample rank statistics of `harness diff` and of the verdicts of
//! `reproduce`: the Mann-Whitney U test and
//! the Hodges-Lehmann shift with its distribution-free confidence interval.
//!
//! Why these: a side has a handful of runs (3 to 10), and a run on a shared
//! machine is sometimes hit by a neighbour (one run 20% slow while a build
//! ran). A t-test assumes normal runs and lets that one outlier move the
//! mean and inflate the spread; a bootstrap needs more runs than we have to
//! cover its nominal level. A rank test assumes nothing about the shape,
//! an outlier only moves one rank, and its exact null distribution gives
//! honest p-values at n = 4. It is what Go's benchstat uses.
//!
//! The shift is estimated on the log scale: `ln(candidate) − ln(base)`.
//! A new setting scales throughput (×0.9), it does not subtract a constant,
//! so the "candidate = base shifted by Δ" model the interval rests on holds
//! for logs; `exp(Δ) − 1` is then the change in %, and ×1.1 and ÷1.1 are
//! the same size of change. The test is the same on either scale (ranks do
//! not change under a monotone map).
//!
//! Exact distribution when there are no ties and each side has at most
//! [`EXACT_MAX`] values; otherwise the normal approximation with the tie
//! correction and a continuity correction (as scipy's `mannwhitneyu`).

/// Above this many values on a side, the normal approximation is used.
pub const EXACT_MAX: usize = 50;

/// How the p-value and the interval were computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The exact null distribution of U (no ties, small samples).
    Exact,
    /// The normal approximation with tie and continuity corrections.
    Normal,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::Normal => "normal approximation",
        }
    }
}

/// The result of the test of `candidate` against `base`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// Pairs where the candidate is larger, ties counted one half.
    pub u_candidate: f64,
    /// Two-sided.
    pub p: f64,
    pub method: Method,
}

/// The Hodges-Lehmann estimate of `ln(candidate) − ln(base)` and its
/// `1 − α` interval; the interval is `None` when the samples are too small
/// for any interval at that level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shift {
    pub log_estimate: f64,
    pub log_interval: Option<(f64, f64)>,
}

impl Shift {
    /// The change as a percentage of the base: `exp(Δ) − 1`.
    pub fn change_pct(&self) -> f64 {
        pct(self.log_estimate)
    }

    pub fn interval_pct(&self) -> Option<(f64, f64)> {
        self.log_interval.map(|(lo, hi)| (pct(lo), pct(hi)))
    }
}

fn pct(log_ratio: f64) -> f64 {
    100.0 * (log_ratio.exp() - 1.0)
}

/// The median of `v` (the mean of the middle two for an even count);
/// `None` for no values.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// The two-sided Mann-Whitney U test. Both samples must be non-empty.
pub fn mann_whitney(base: &[f64], candidate: &[f64]) -> MannWhitney {
    let (n1, n2) = (base.len(), candidate.len());
    assert!(n1 > 0 && n2 > 0, "mann_whitney needs two non-empty samples");
    let u_candidate = u_statistic(base, candidate);
    let u_max = u_candidate.max((n1 * n2) as f64 - u_candidate);
    let ties = tie_term(base, candidate);
    if ties == 0.0 && n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        let dist = UDistribution::new(n1, n2);
        let p = (2.0 * dist.at_least(u_max.round() as usize)).min(1.0);
        return MannWhitney {
            u_candidate,
            p,
            method: Method::Exact,
        };
    }
    let mean = (n1 * n2) as f64 / 2.0;
    let sd = normal_sd(n1, n2, ties);
    let p = if sd == 0.0 {
        1.0
    } else {
        let z = (u_max - mean - 0.5) / sd;
        (2.0 * normal_sf(z)).min(1.0)
    };
    MannWhitney {
        u_candidate,
        p,
        method: Method::Normal,
    }
}

/// The Hodges-Lehmann shift of the logs with its `1 − alpha` interval:
/// the median of every `ln(c) − ln(b)`, and the order statistics of those
/// differences that the U distribution puts `alpha / 2` outside on each
/// side. Values must be positive.
pub fn hodges_lehmann(base: &[f64], candidate: &[f64], alpha: f64) -> Shift {
    let (n1, n2) = (base.len(), candidate.len());
    assert!(
        n1 > 0 && n2 > 0,
        "hodges_lehmann needs two non-empty samples"
    );
    let mut d: Vec<f64> = base
        .iter()
        .flat_map(|b| candidate.iter().map(move |c| c.ln() - b.ln()))
        .collect();
    d.sort_by(f64::total_cmp);
    let n = d.len();
    let log_estimate = if n % 2 == 1 {
        d[n / 2]
    } else {
        (d[n / 2 - 1] + d[n / 2]) / 2.0
    };
    // k differences are cut from each end: the interval is [d(k), d(n−1−k)]
    // (0-based), covering 1 − 2·P(U < k).
    let k = if tie_term(base, candidate) == 0.0 && n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        let dist = UDistribution::new(n1, n2);
        // The largest k with P(U ≤ k − 1) ≤ α/2, if any.
        (1..=n / 2)
            .take_while(|&k| dist.at_most(k - 1) <= alpha / 2.0)
            .last()
    } else {
        let sd = normal_sd(n1, n2, tie_term(base, candidate));
        let cut = (n as f64 / 2.0 - 0.5 - normal_quantile(1.0 - alpha / 2.0) * sd).floor() + 1.0;
        (cut >= 1.0).then_some(cut as usize)
    };
    Shift {
        log_estimate,
        log_interval: k.map(|k| (d[k - 1], d[n - k])),
    }
}

/// The smallest two-sided p-value the exact test can give with `n1` and
/// `n2` values (every candidate above every base value): `2 / C(n1+n2, n1)`.
pub fn min_p(n1: usize, n2: usize) -> f64 {
    (2.0 / binomial(n1 + n2, n1)).min(1.0)
}

/// The fewest runs per side (equal sides) with which a difference can be
/// significant at `alpha` at all.
pub fn min_runs_per_side(alpha: f64) -> usize {
    (1..=EXACT_MAX)
        .find(|&n| min_p(n, n) < alpha)
        .unwrap_or(EXACT_MAX)
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Pairs (b, c) with c > b, plus one half per tie.
fn u_statistic(base: &[f64], candidate: &[f64]) -> f64 {
    let mut u = 0.0;
    for b in base {
        for c in candidate {
            if c > b {
                u += 1.0;
            } else if c == b {
                u += 0.5;
            }
        }
    }
    u
}

/// Σ (t³ − t) over the groups of equal values in the pooled sample.
fn tie_term(base: &[f64], candidate: &[f64]) -> f64 {
    let mut all: Vec<f64> = base.iter().chain(candidate).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut sum = 0.0;
    let mut i = 0;
    while i < all.len() {
        let j = all[i..].iter().take_while(|&&v| v == all[i]).count();
        let t = j as f64;
        sum += t * t * t - t;
        i += j;
    }
    sum
}

/// The standard deviation of U under the null, corrected for ties.
fn normal_sd(n1: usize, n2: usize, ties: f64) -> f64 {
    let (a, b) = (n1 as f64, n2 as f64);
    let n = a + b;
    let var = a * b / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    var.max(0.0).sqrt()
}

/// The exact null distribution of U for `n1` and `n2` values without ties:
/// the number of orderings with each U (the coefficients of the Gaussian
/// binomial), over `C(n1+n2, n1)`.
struct UDistribution {
    /// `counts[u]`: orderings where U = u.
    counts: Vec<f64>,
    total: f64,
}

impl UDistribution {
    fn new(n1: usize, n2: usize) -> UDistribution {
        // f(i, j): U's counts with i values of one side and j of the other.
        // The largest of the i + j is either from the first side (above all
        // j: U + j) or from the second (U unchanged):
        // f(i, j) = q^j·f(i − 1, j) + f(i, j − 1), rolled over i.
        let max = n1 * n2;
        let mut row: Vec<Vec<f64>> = (0..=n2).map(|_| one(max)).collect(); // i = 0
        for _ in 1..=n1 {
            let mut next: Vec<Vec<f64>> = Vec::with_capacity(n2 + 1);
            next.push(one(max)); // j = 0
            for j in 1..=n2 {
                let mut f = next[j - 1].clone();
                for (u, &c) in row[j].iter().enumerate() {
                    if c != 0.0 && u + j <= max {
                        f[u + j] += c;
                    }
                }
                next.push(f);
            }
            row = next;
        }
        let counts = row.pop().unwrap_or_else(|| one(max));
        let total = counts.iter().sum();
        UDistribution { counts, total }
    }

    /// P(U ≤ u).
    fn at_most(&self, u: usize) -> f64 {
        self.counts.iter().take(u + 1).sum::<f64>() / self.total
    }

    /// P(U ≥ u).
    fn at_least(&self, u: usize) -> f64 {
        self.counts.iter().skip(u).sum::<f64>() / self.total
    }
}

/// The polynomial 1 with room for degree `max`.
fn one(max: usize) -> Vec<f64> {
    let mut v = vec![0.0; max + 1];
    v[0] = 1.0;
    v
}

/// P(Z > z) for a standard normal Z: `erfc(z/√2)/2`.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The complementary error function (Numerical Recipes' `erfcc`, a
/// Chebyshev fit with a relative error below 1.2e-7 everywhere).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// The standard normal quantile (P. J. Acklam's rational approximation,
/// relative error below 1.2e-9), for 0 < p < 1.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    const LOW: f64 = 0.024_25;
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    // The expected values below were computed with Python 3 and scipy 1.17.1:
    // `scipy.stats.mannwhitneyu(candidate, base, alternative='two-sided',
    // method='exact' | 'asymptotic')`, and the Hodges-Lehmann interval by
    // brute force (every placement enumerated with itertools.combinations
    // for the exact U distribution, the order statistics of the sorted
    // log differences), independently of the recurrence used here.

    #[test]
    fn exact_p_values_match_scipy() {
        let r = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(r.method, Method::Exact);
        assert_eq!(r.u_candidate, 25.0);
        assert!(close(r.p, 0.007_936_507_936_507_936, 1e-12), "{r:?}");

        let base = [10.1, 9.7, 10.4, 9.9, 10.0, 10.2];
        let cand = [9.1, 9.5, 9.8, 9.3, 8.9];
        let r = mann_whitney(&base, &cand);
        assert_eq!((r.method, r.u_candidate), (Method::Exact, 1.0));
        assert!(close(r.p, 0.008_658_008_658_008_658, 1e-12), "{r:?}");

        let r = mann_whitney(&[100.0, 102.0], &[90.0, 91.0]);
        assert!(close(r.p, 1.0 / 3.0, 1e-12), "{r:?}");
    }

    #[test]
    fn tied_samples_use_the_corrected_normal_approximation_as_scipy() {
        let r = mann_whitney(
            &[3.0, 3.0, 4.0, 5.0, 5.0, 6.0],
            &[5.0, 6.0, 6.0, 7.0, 8.0, 8.0],
        );
        assert_eq!((r.method, r.u_candidate), (Method::Normal, 33.0));
        assert!(close(r.p, 0.018_100_948_739_449_69, 1e-6), "{r:?}");
    }

    #[test]
    fn identical_samples_are_not_different() {
        let r = mann_whitney(&[5.0; 4], &[5.0; 4]);
        assert_eq!(r.p, 1.0);
        let s = hodges_lehmann(&[5.0; 4], &[5.0; 4], 0.05);
        assert_eq!(s.change_pct(), 0.0);
    }

    #[test]
    fn hodges_lehmann_interval_matches_brute_force() {
        let s = hodges_lehmann(
            &[1.0, 2.0, 3.0, 4.0, 5.0],
            &[6.0, 7.0, 8.0, 9.0, 10.0],
            0.05,
        );
        assert!(close(s.log_estimate, 0.980_829_253_011_726, 1e-12));
        let (lo, hi) = s.log_interval.unwrap();
        assert!(close(lo, 0.405_465_108_108_164_4, 1e-12), "{lo}");
        assert!(close(hi, 2.079_441_541_679_835_7, 1e-12), "{hi}");

        let base = [10.1, 9.7, 10.4, 9.9, 10.0, 10.2];
        let cand = [9.1, 9.5, 9.8, 9.3, 8.9];
        let s = hodges_lehmann(&base, &cand, 0.05);
        assert!(close(s.log_estimate, -0.077_545_858_261_419_46, 1e-12));
        let (lo, hi) = s.log_interval.unwrap();
        assert!(close(lo, -0.126_484_147_109_119_6, 1e-12), "{lo}");
        assert!(close(hi, -0.020_834_086_902_841_61, 1e-12), "{hi}");
        assert!(close(
            s.change_pct(),
            100.0 * ((-0.077_545_858_261_419_46f64).exp() - 1.0),
            1e-12
        ));

        // Two runs a side: no 95% interval exists.
        assert_eq!(
            hodges_lehmann(&[100.0, 102.0], &[90.0, 91.0], 0.05).log_interval,
            None
        );
    }

    #[test]
    fn the_fewest_runs_follow_from_the_smallest_p() {
        assert!(close(min_p(2, 2), 1.0 / 3.0, 1e-12));
        assert!(close(min_p(3, 3), 0.1, 1e-12));
        assert!(close(min_p(4, 4), 2.0 / 70.0, 1e-12));
        assert_eq!(min_runs_per_side(0.05), 4);
        assert_eq!(min_runs_per_side(0.01), 5); // 2/252 < 0.01 < 2/70
                                                // The exact distribution sums to C(n1+n2, n1) and is symmetric.
        let d = UDistribution::new(4, 6);
        assert_eq!(d.total, 210.0);
        assert!((0..=24).all(|u| d.counts[u] == d.counts[24 - u]));
    }

    #[test]
    fn normal_functions_match_scipy() {
        assert!(close(normal_quantile(0.975), 1.959_963_984_540_054, 1e-8));
        assert!(close(normal_sf(1.5), 0.066_807_201_268_858_07, 1e-6));
        assert!(close(normal_sf(-0.3), 0.617_911_422_188_952_6, 1e-6));
    }
}
