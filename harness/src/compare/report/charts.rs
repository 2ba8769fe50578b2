//! SVG charts drawn with `plotters` (SVG backend only: text stays `<text>`,
//! rendered by the browser): RPS bars with error bars per workload, latency
//! percentile curves on log scales, RPS against concurrency when sweeping.

use plotters::prelude::*;

use super::super::results::{CurvePoint, Results, Row, RowStatus};
pub use crate::report::svg::escape;
use crate::report::svg::{builder, svg};

/// The color of server `name` (stable across the charts of one report).
pub(super) fn color(results: &Results, name: &str) -> RGBColor {
    let i = results
        .servers
        .iter()
        .position(|s| s.name == name)
        .unwrap_or(0);
    let c = Palette99::pick(i).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// A row's name in a legend: its server, with the framing asked for
/// (`--protocol`) and the tool when they are not the defaults.
fn label(r: &Row) -> String {
    let mut s = r.server.clone();
    if let Some(p) = &r.protocol {
        s.push(' ');
        s.push_str(p);
    }
    if r.tool != "harness" {
        s.push_str(&format!(" ({})", r.tool));
    }
    s
}

fn ok_rows<'a>(results: &'a Results, workload: &str, c: u64) -> Vec<&'a Row> {
    results
        .rows
        .iter()
        .filter(|r| {
            r.workload == workload
                && r.connections == c
                && r.summary.is_some()
                && r.status != RowStatus::Failed
        })
        .collect()
}

/// Bars: mean RPS per server, error bars from the slowest to the fastest run.
pub fn rps_bars(results: &Results, workload: &str, c: u64) -> Option<String> {
    let rows = ok_rows(results, workload, c);
    if rows.is_empty() {
        return None;
    }
    let labels: Vec<String> = rows.iter().map(|r| label(r)).collect();
    let ymax = rows
        .iter()
        .filter_map(|r| r.summary.as_ref())
        .map(|s| s.rps_max.max(s.rps_mean + s.rps_sd))
        .fold(1.0, f64::max)
        * 1.15;
    let n = rows.len();
    Some(svg(|root| {
        let mut chart = builder(
            root,
            format!("{workload}: requests/s at c={c} (mean, runs min–max)"),
        )
        // An integer range is inclusive as a discrete axis: 0..n-1 is n slots.
        .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("requests/s")
            .y_label_formatter(&|v| crate::report::thousands(*v as u64))
            .draw()?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let v = r.summary.as_ref().map_or(0.0, |s| s.rps_mean);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), v),
                ],
                color(results, &r.server).filled(),
            );
            bar.set_margin(0, 0, 14, 14);
            bar
        }))?;
        chart.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
            let s = r.summary.as_ref()?;
            Some(ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                s.rps_min,
                s.rps_mean,
                s.rps_max,
                BLACK.stroke_width(2),
                12,
            ))
        }))?;
        Ok(())
    }))
}

/// A millisecond axis label with the digits its size needs.
fn ms_label(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Percentile → x on a "nines" axis: 90% → 1, 99% → 2, 99.9% → 3.
fn nines(p: f64) -> f64 {
    -(1.0 - (p / 100.0).min(0.99999)).log10()
}

/// Latency against percentile, one curve per server, both axes logarithmic.
pub fn latency_curves(results: &Results, workload: &str, c: u64) -> Option<String> {
    let lines: Vec<PercentileLine> = ok_rows(results, workload, c)
        .into_iter()
        .map(|r| PercentileLine {
            server: &r.server,
            label: label(r),
            curve: &r.latency_curve,
        })
        .collect();
    percentile_chart(
        results,
        format!("{workload}: latency by percentile at c={c}"),
        &lines,
    )
}

/// One curve of [`percentile_chart`]: its server (the colour), its legend
/// and HdrHistogram's percentile distribution.
pub(super) struct PercentileLine<'a> {
    pub server: &'a str,
    pub label: String,
    pub curve: &'a [CurvePoint],
}

/// Latency (ms, log) against percentile on a "nines" axis, a curve per
/// line with two points or more; `None` where no line has.
pub(super) fn percentile_chart(
    results: &Results,
    title: String,
    lines: &[PercentileLine],
) -> Option<String> {
    let lines: Vec<&PercentileLine> = lines.iter().filter(|l| l.curve.len() >= 2).collect();
    if lines.is_empty() {
        return None;
    }
    let points = |l: &PercentileLine| -> Vec<(f64, f64)> {
        l.curve
            .iter()
            .filter(|p| p.percentile < 100.0 && p.latency_us > 0)
            .map(|p| (nines(p.percentile), p.latency_us as f64 / 1000.0))
            .collect()
    };
    let all: Vec<f64> = lines.iter().flat_map(|l| points(l)).map(|p| p.1).collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.001) / 1.5;
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 1.5;
    Some(svg(|root| {
        let mut chart = builder(root, title).build_cartesian_2d(0f64..5.0, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&|x| {
                let k = x.round() as i32;
                match k {
                    0 => "0%".into(),
                    1 => "90%".into(),
                    _ => format!("{}%", 100.0 - 10f64.powi(2 - k)),
                }
            })
            .x_desc("percentile")
            .y_desc("latency (ms, log)")
            .y_label_formatter(&|v| ms_label(*v))
            .draw()?;
        for l in &lines {
            let c = color(results, l.server);
            chart
                .draw_series(LineSeries::new(points(l), c.stroke_width(2)))?
                .label(l.label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }))
}

/// What an over-time chart draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverTime {
    /// Finished requests per second, interval by interval.
    Rps,
    /// Each interval's p99 latency.
    P99,
}

/// One run's `(second, value)` points.
type Segment = Vec<(f64, f64)>;

/// `(second, value)` of each of a row's runs, one segment a run: placed
/// at the second of the comparison it was taken (`started_s`: runs of
/// different servers interleave), or, in results without it, laid end to
/// end (run 2's first second follows run 1's last), so a warm-up, a JIT
/// kicking in or a step in the machine shows where it happened.
fn over_time_points(row: &Row, what: OverTime) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut offset = 0.0;
    for run in &row.runs {
        let interval = run
            .series
            .windows(2)
            .map(|w| f64::from(w[1].second - w[0].second))
            .find(|d| *d > 0.0)
            .unwrap_or(1.0);
        let start = run.started_s.unwrap_or(offset);
        let mut points = Vec::new();
        for p in &run.series {
            let at = f64::from(p.second);
            // The last interval ends with the run.
            let length = (run.duration_s - at).min(interval);
            let value = match what {
                OverTime::Rps if length > 0.05 => p.requests as f64 / length,
                OverTime::Rps => continue,
                OverTime::P99 if p.p99_us > 0 => p.p99_us as f64 / 1000.0,
                OverTime::P99 => continue,
            };
            points.push((start + at, value));
        }
        offset += run.duration_s.max(interval * run.series.len() as f64);
        if !points.is_empty() {
            segments.push(points);
        }
    }
    segments
}

/// Requests/s or p99 over time, one line per server and run, in the order
/// the runs were taken.
pub fn over_time(results: &Results, workload: &str, c: u64, what: OverTime) -> Option<String> {
    let rows: Vec<(&Row, Vec<Segment>)> = ok_rows(results, workload, c)
        .into_iter()
        .map(|r| (r, over_time_points(r, what)))
        .filter(|(_, segs)| segs.iter().map(Vec::len).sum::<usize>() >= 2)
        .collect();
    if rows.is_empty() {
        return None;
    }
    let points = || rows.iter().flat_map(|(_, segs)| segs.iter().flatten());
    let xmin = points().map(|p| p.0).fold(f64::INFINITY, f64::min).min(0.0);
    let xmax = points().map(|p| p.0).fold(1.0, f64::max) + 1.0;
    let values = || points().map(|p| p.1);
    let vmax = values().fold(0.0, f64::max);
    let timed = rows
        .iter()
        .any(|(r, _)| r.runs.iter().any(|run| run.started_s.is_some()));
    let (order, x_desc) = if timed {
        (
            "runs as they were taken",
            "seconds since the comparison began",
        )
    } else {
        ("runs end to end", "seconds of measurement")
    };
    let (caption, y_desc) = match what {
        OverTime::Rps => (
            format!("{workload}: requests/s over time at c={c} ({order})"),
            "requests/s",
        ),
        OverTime::P99 => (
            format!("{workload}: p99 latency over time at c={c} ({order})"),
            "p99 (ms, log)",
        ),
    };
    Some(svg(|root| {
        let b = builder(root, caption);
        macro_rules! draw_lines {
            ($chart:expr) => {{
                for (r, segs) in &rows {
                    let c = color(results, &r.server);
                    for (k, seg) in segs.iter().enumerate() {
                        let drawn =
                            $chart.draw_series(LineSeries::new(seg.clone(), c.stroke_width(2)))?;
                        if k == 0 {
                            drawn.label(label(r)).legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                            });
                        }
                    }
                }
                $chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerLeft)
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .draw()?;
            }};
        }
        match what {
            OverTime::Rps => {
                let mut chart = { b }.build_cartesian_2d(xmin..xmax, 0f64..vmax.max(1.0) * 1.15)?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .y_label_formatter(&|v| crate::report::thousands(*v as u64))
                    .draw()?;
                draw_lines!(chart);
            }
            OverTime::P99 => {
                let lo = values().fold(f64::INFINITY, f64::min).max(0.001) / 1.5;
                let hi = vmax.max(lo * 10.0) * 1.5;
                let mut chart = { b }.build_cartesian_2d(xmin..xmax, (lo..hi).log_scale())?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .y_label_formatter(&|v| ms_label(*v))
                    .draw()?;
                draw_lines!(chart);
            }
        }
        Ok(())
    }))
}

/// RPS against concurrency, one line per server (sweeps only).
pub fn sweep(results: &Results, workload: &str) -> Option<String> {
    let levels = &results.settings.connections;
    if levels.len() < 2 {
        return None;
    }
    // One line per server and framing.
    let mut servers: Vec<(String, &str)> = Vec::new();
    for r in results
        .rows
        .iter()
        .filter(|r| r.workload == workload && r.summary.is_some())
    {
        if !servers.iter().any(|(l, _)| *l == label(r)) {
            servers.push((label(r), &r.server));
        }
    }
    if servers.is_empty() {
        return None;
    }
    let series = |name: &str| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = results
            .rows
            .iter()
            .filter(|r| r.workload == workload && label(r) == name && r.status != RowStatus::Failed)
            .filter_map(|r| Some((r.connections as f64, r.summary.as_ref()?.rps_mean)))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let cmin = *levels.iter().min().unwrap_or(&1) as f64;
    let cmax = *levels.iter().max().unwrap_or(&1) as f64;
    let ymax = servers
        .iter()
        .flat_map(|(s, _)| series(s))
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.15;
    Some(svg(|root| {
        let mut chart = builder(root, format!("{workload}: requests/s by concurrency"))
            .build_cartesian_2d((cmin.max(1.0) / 1.2..cmax * 1.2).log_scale(), 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("connections (log)")
            .y_desc("requests/s")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| crate::report::thousands(*v as u64))
            .draw()?;
        for (name, server) in &servers {
            let c = color(results, server);
            let pts = series(name);
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(name.to_string())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                });
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn nines_axis() {
        assert!((super::nines(90.0) - 1.0).abs() < 1e-9);
        assert!((super::nines(99.0) - 2.0).abs() < 1e-9);
        assert!(super::nines(0.0).abs() < 1e-9);
        assert!(super::nines(100.0) <= 5.0 + 1e-9);
    }
}
