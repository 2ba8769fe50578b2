//! HdrHistogram's percentile distribution format (`.hgrm`, as Java's
//! `outputPercentileDistribution` and wrk2 print it, values in ms), which
//! HdrHistogram's online plotter reads.

use std::fmt::Write;

use hdrhistogram::Histogram;

/// Iteration steps per half-distance to 100%, as HdrHistogram's default.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The distribution of `h` (µs), printed in ms.
pub fn render(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    if !h.is_empty() {
        for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / 1000.0;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:>12.3} {q:>2.12} {total:>10} {:>14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>2.12} {total:>10}");
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (
            h.mean() / 1000.0,
            h.stdev() / 1000.0,
            h.max() as f64 / 1000.0,
        )
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:>12.3}, StdDeviation   = {sd:>12.3}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:>12.3}, Total count    = {:>12}]",
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency_histogram;

    #[test]
    fn distribution_has_the_hdrhistogram_shape() {
        let mut h = latency_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 10).unwrap();
        }
        let text = render(&h);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("Value") && lines[0].contains("1/(1-Percentile)"));
        assert_eq!(lines[1], "");
        let rows: Vec<Vec<&str>> = lines[2..]
            .iter()
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(rows.len() > 20);
        let last = rows.last().unwrap();
        assert_eq!(last[1], "1.000000000000");
        assert_eq!(last[2], "10000");
        assert!((last[0].parse::<f64>().unwrap() - 100.0).abs() < 0.1);
        let mut prev = 0.0;
        for r in &rows {
            let q: f64 = r[1].parse().unwrap();
            assert!(q >= prev);
            prev = q;
        }
        assert!(text.contains("#[Mean    ="));
        assert!(text.contains("Total count    =        10000]"));
    }
}
