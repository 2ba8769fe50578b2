//! Experiment 5's findings: each shape against 64 HTTP/1.1 connections, as
//! the ratio of its RPS in the same round (median and the range over the
//! rounds), its server CPU per request, and the predictions judged:
//!
//! - where the workers are the bottleneck (a worker pool on `/cpu`), every
//!   shape within the run-to-run spread of HTTP/1.1's RPS;
//! - where the front's cost dominates (the event loop on `/hello`),
//!   pipelining and h2 above HTTP/1.1 in every round, at less CPU per
//!   request;
//! - p99 under h2 worse than under HTTP/1.1.

use super::super::document::{Finding, Multiplexing, MuxRun, MuxShape};
use super::super::evidence;
use super::{finding, thousands};

/// The least spread allowed for "the same RPS": two short runs on a
/// shared machine differ by this much with nothing changed.
pub const SPREAD_FLOOR: f64 = 0.10;
/// Beyond this spread of HTTP/1.1's own rounds "the same RPS" cannot be
/// told from noise: the prediction is not judged (a busy machine).
pub const SPREAD_CAP: f64 = 0.25;

/// Servers whose throughput prediction is stated (by name, the catalog's
/// reference of each model); the others are measured against them.
const FRONT_BOUND: [&str; 2] = ["event-loop", "event-loop-x2"];
const WORKER_BOUND: [&str; 2] = ["worker-pool", "php-fpm"];

pub fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// A ratio's median over the rounds and its range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Ratio {
    fn of(xs: Vec<f64>) -> Option<Ratio> {
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Ratio {
            median: median(xs)?,
            lo,
            hi,
        })
    }

    pub fn text(&self) -> String {
        format!("{:.2}× [{:.2}–{:.2}]", self.median, self.lo, self.hi)
    }
}

/// `f(shape's run) / f(HTTP/1.1's run)`, round by round.
pub fn per_round(
    shape: &MuxShape,
    h1: &MuxShape,
    f: impl Fn(&MuxRun) -> Option<f64>,
) -> Option<Ratio> {
    let xs: Vec<f64> = shape
        .runs
        .iter()
        .zip(&h1.runs)
        .filter_map(|(a, b)| Some(f(a)? / f(b).filter(|x| *x > 0.0)?))
        .collect();
    Ratio::of(xs)
}

/// HTTP/1.1's own run-to-run spread (max / min − 1), at least the floor.
pub fn spread(h1: &MuxShape) -> f64 {
    let lo = h1.runs.iter().map(|r| r.rps).fold(f64::INFINITY, f64::min);
    let hi = h1.runs.iter().map(|r| r.rps).fold(0.0, f64::max);
    if lo > 0.0 && lo.is_finite() {
        (hi / lo - 1.0).max(SPREAD_FLOOR)
    } else {
        SPREAD_FLOOR
    }
}

fn shape_name(s: &MuxShape) -> String {
    match s.protocol.as_str() {
        "http/1.1" => format!("{} × HTTP/1.1", s.connections),
        "h2c" => format!("{} × h2c × {} streams", s.connections, s.per_connection),
        _ => format!("{} × pipelined {} deep", s.connections, s.per_connection),
    }
}

fn cpu(r: &MuxRun) -> Option<f64> {
    r.server_cpu_us_per_request
}

/// One shape in words: its RPS, or its ratio to HTTP/1.1, its CPU.
fn shape_words(s: &MuxShape, h1: &MuxShape) -> String {
    let name = shape_name(s);
    if let Some(why) = &s.not_served {
        return format!("{name}: not served ({why})");
    }
    if let Some(e) = &s.error {
        return format!("{name}: failed ({e})");
    }
    let rps = median(s.runs.iter().map(|r| r.rps).collect()).unwrap_or(0.0);
    let cpu_us = median(s.runs.iter().filter_map(cpu).collect());
    let cpu_text = cpu_us.map_or("CPU not metered".into(), |u| {
        format!("{u:.0} µs server CPU per request")
    });
    if std::ptr::eq(s, h1) {
        return format!("{name} {} req/s, {cpu_text}", thousands(rps));
    }
    let ratio = per_round(s, h1, |r| Some(r.rps)).map_or("—".into(), |r| r.text());
    let cpu_ratio =
        per_round(s, h1, cpu).map_or(String::new(), |r| format!(" ({:.2}× HTTP/1.1's)", r.median));
    format!(
        "{name} {} req/s, {ratio} of HTTP/1.1, {cpu_text}{cpu_ratio}",
        thousands(rps)
    )
}

/// The served shapes other than HTTP/1.1, with runs.
fn others<'a>(m: &'a Multiplexing, h1: &'a MuxShape) -> impl Iterator<Item = &'a MuxShape> {
    m.shapes
        .iter()
        .filter(move |s| !std::ptr::eq(*s, h1))
        .filter(|s| s.not_served.is_none() && s.error.is_none() && !s.runs.is_empty())
}

/// The throughput prediction for `m`, in words, and whether it held.
fn verdict(m: &Multiplexing, h1: &MuxShape) -> (String, Option<bool>) {
    let server = m.server.as_str();
    if m.cost == "workers" && WORKER_BOUND.contains(&server) {
        let tol = spread(h1);
        if tol > SPREAD_CAP {
            return (
                format!(
                    "predicted: the workers are the bottleneck, so every shape gives HTTP/1.1's \
                     req/s within the run-to-run spread — NOT judged: HTTP/1.1's own rounds \
                     spread {:.0}%, beyond the {:.0}% within which the same req/s can be told \
                     from noise (a busy machine: run it again on a quiet one)",
                    100.0 * tol,
                    100.0 * SPREAD_CAP
                ),
                None,
            );
        }
        let off: Vec<String> = others(m, h1)
            .filter_map(|s| {
                let r = per_round(s, h1, |r| Some(r.rps))?;
                ((r.median - 1.0).abs() > tol)
                    .then(|| format!("{} at {:.2}×", shape_name(s), r.median))
            })
            .collect();
        let ok = off.is_empty();
        let words = format!(
            "predicted: the workers are the bottleneck, so every shape gives HTTP/1.1's req/s \
             within the run-to-run spread (±{:.0}%); multiplexing saves connections and \
             syscalls, not worker time — {}",
            100.0 * tol,
            if ok {
                "as predicted".to_string()
            } else {
                format!("NOT as predicted: {}", off.join(", "))
            }
        );
        return (words, Some(ok));
    }
    if m.cost == "front" && FRONT_BOUND.contains(&server) {
        let mut misses = Vec::new();
        let mut judged = 0;
        for s in others(m, h1) {
            judged += 1;
            match per_round(s, h1, |r| Some(r.rps)) {
                Some(r) if r.lo > 1.0 => {}
                Some(r) => misses.push(format!(
                    "{} reached {:.2}× of HTTP/1.1's req/s in its worst round",
                    shape_name(s),
                    r.lo
                )),
                None => misses.push(format!("{} has no round beside HTTP/1.1's", shape_name(s))),
            }
            match per_round(s, h1, cpu) {
                Some(r) if r.median < 1.0 => {}
                Some(r) => misses.push(format!(
                    "{} used {:.2}× HTTP/1.1's CPU per request",
                    shape_name(s),
                    r.median
                )),
                None => misses.push(format!("{}: CPU not metered", shape_name(s))),
            }
        }
        let ok = judged > 0 && misses.is_empty();
        let words = format!(
            "predicted: the front's cost per request dominates, so pipelining and h2 raise req/s \
             in every round and cut the server's CPU per request — {}",
            if ok {
                "as predicted".to_string()
            } else if judged == 0 {
                "NOT judged: no shape but HTTP/1.1 ran".to_string()
            } else {
                format!("NOT as predicted: {}", misses.join("; "))
            }
        );
        return (words, (judged > 0).then_some(ok));
    }
    (
        "measured against the event loop's and the worker pool's lines (no prediction of its own)"
            .into(),
        None,
    )
}

/// The shape that missed most, for its profile.
fn worst<'a>(m: &'a Multiplexing, h1: &'a MuxShape) -> Option<&'a MuxShape> {
    others(m, h1)
        .filter_map(|s| Some((s, per_round(s, h1, |r| Some(r.rps))?)))
        .max_by(|a, b| {
            (a.1.median - 1.0)
                .abs()
                .total_cmp(&(b.1.median - 1.0).abs())
        })
        .map(|(s, _)| s)
}

/// The experiment's findings: one per server and path (the shapes and
/// the throughput prediction), one per server and path that served h2
/// (its p99 against HTTP/1.1's).
pub fn findings(mux: &[Multiplexing], cores: u32) -> Vec<Finding> {
    let mut out = Vec::new();
    for m in mux {
        if let Some(e) = &m.error {
            out.push(finding(
                "multiplexing",
                &m.server,
                format!("{} on {}: not measured: {e}", m.server, m.path),
                None,
            ));
            continue;
        }
        let Some(h1) = m
            .shapes
            .iter()
            .find(|s| s.protocol == "http/1.1" && !s.runs.is_empty())
        else {
            out.push(finding(
                "multiplexing",
                &m.server,
                format!(
                    "{} on {}: not measured: HTTP/1.1, the reference shape, has no run{}",
                    m.server,
                    m.path,
                    m.shapes
                        .iter()
                        .find_map(|s| s.error.as_deref())
                        .map_or(String::new(), |e| format!(" ({e})"))
                ),
                None,
            ));
            continue;
        };
        let (why, ok) = verdict(m, h1);
        let shapes: Vec<String> = m.shapes.iter().map(|s| shape_words(s, h1)).collect();
        let mut f = finding(
            "multiplexing",
            &m.server,
            format!(
                "{} ({}) on {}, {} requests in flight, {} rounds: {why}. {}",
                m.server,
                m.model,
                m.path,
                m.in_flight,
                h1.runs.len(),
                shapes.join("; ")
            ),
            ok,
        );
        if ok == Some(false) {
            let found = worst(m, h1).and_then(|s| {
                let rps = s.runs.last()?.rps;
                evidence::of_run(&shape_name(s), s.profile.as_ref(), rps, cores)
            });
            let profiled = worst(m, h1).is_some_and(|s| evidence::profiled(s.profile.as_ref()));
            evidence::attach(&mut f, found, profiled);
        }
        out.push(f);
        if let Some(h2) = others(m, h1).find(|s| s.protocol == "h2c") {
            if let Some(r) = per_round(h2, h1, |r| Some(r.p99_ms)) {
                let p99 = |s: &MuxShape| median(s.runs.iter().map(|r| r.p99_ms).collect());
                out.push(finding(
                    "multiplexing",
                    &m.server,
                    format!(
                        "{} on {}: p99 {:.2} ms under h2c against {:.2} ms under HTTP/1.1, {} — \
                         predicted worse under h2 at the same requests in flight (HttpArena's \
                         observation): {}",
                        m.server,
                        m.path,
                        p99(h2).unwrap_or(0.0),
                        p99(h1).unwrap_or(0.0),
                        r.text(),
                        if r.median > 1.0 {
                            "as predicted"
                        } else {
                            "NOT as predicted"
                        }
                    ),
                    Some(r.median > 1.0),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(protocol: &str, connections: u32, rps: &[f64], cpu: &[f64]) -> MuxShape {
        MuxShape {
            protocol: protocol.into(),
            connections,
            per_connection: if connections == 64 { 1 } else { 16 },
            runs: rps
                .iter()
                .zip(cpu)
                .map(|(&rps, &c)| MuxRun {
                    rps,
                    p50_ms: 1.0,
                    p99_ms: if protocol == "h2c" { 3.0 } else { 2.0 },
                    failed: 0,
                    server_cpu_us_per_request: Some(c),
                })
                .collect(),
            ..MuxShape::default()
        }
    }

    fn mux(server: &str, cost: &str, shapes: Vec<MuxShape>) -> Multiplexing {
        Multiplexing {
            server: server.into(),
            model: "m".into(),
            path: "/p".into(),
            cost: cost.into(),
            in_flight: 64,
            shapes,
            error: None,
        }
    }

    #[test]
    fn a_worker_bound_server_matches_within_the_spread_and_misses_beyond_it() {
        let m = mux(
            "worker-pool",
            "workers",
            vec![
                shape("http/1.1", 64, &[1000.0, 1040.0], &[900.0, 900.0]),
                shape("http/1.1-pipelined", 4, &[1020.0, 1000.0], &[880.0, 880.0]),
                MuxShape {
                    protocol: "h2c".into(),
                    connections: 4,
                    per_connection: 16,
                    not_served: Some("a worker per connection".into()),
                    ..MuxShape::default()
                },
            ],
        );
        let f = findings(std::slice::from_ref(&m), 2);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].matches_prediction, Some(true), "{}", f[0].sentence);
        for words in [
            "64 × HTTP/1.1 1,020 req/s",
            "4 × pipelined 16 deep 1,010 req/s, 0.99× [0.96–1.02] of HTTP/1.1",
            "4 × h2c × 16 streams: not served (a worker per connection)",
            "±10%",
        ] {
            assert!(f[0].sentence.contains(words), "{words}: {}", f[0].sentence);
        }
        let mut off = m;
        off.shapes[1].runs[0].rps = 1500.0;
        off.shapes[1].runs[1].rps = 1500.0;
        let f = findings(std::slice::from_ref(&off), 2);
        assert_eq!(f[0].matches_prediction, Some(false), "{}", f[0].sentence);
        assert!(
            f[0].sentence.contains("pipelined 16 deep at 1.47×"),
            "{}",
            f[0].sentence
        );
        // HTTP/1.1's own rounds 2× apart: nothing can be told, nothing judged.
        let mut noisy = off;
        noisy.shapes[0].runs[1].rps = 2000.0;
        let f = findings(&[noisy], 2);
        assert_eq!(f[0].matches_prediction, None, "{}", f[0].sentence);
        assert!(
            f[0].sentence
                .contains("NOT judged: HTTP/1.1's own rounds spread 100%"),
            "{}",
            f[0].sentence
        );
    }

    #[test]
    fn a_front_bound_server_must_gain_in_every_round_at_less_cpu() {
        let m = mux(
            "event-loop",
            "front",
            vec![
                shape("http/1.1", 64, &[10_000.0, 11_000.0], &[100.0, 100.0]),
                shape(
                    "http/1.1-pipelined",
                    4,
                    &[30_000.0, 32_000.0],
                    &[30.0, 30.0],
                ),
                shape("h2c", 4, &[15_000.0, 16_000.0], &[60.0, 60.0]),
            ],
        );
        let f = findings(std::slice::from_ref(&m), 2);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].matches_prediction, Some(true), "{}", f[0].sentence);
        assert!(
            f[0].sentence.contains("(0.30× HTTP/1.1's)"),
            "{}",
            f[0].sentence
        );
        // p99: 3 ms under h2c against 2 ms.
        assert_eq!(f[1].matches_prediction, Some(true), "{}", f[1].sentence);
        assert!(
            f[1].sentence.contains("1.50× [1.50–1.50]"),
            "{}",
            f[1].sentence
        );
        // One round where h2c fell below HTTP/1.1: a miss, said.
        let mut slow = m;
        slow.shapes[2].runs[1].rps = 10_000.0;
        let f = findings(&[slow], 2);
        assert_eq!(f[0].matches_prediction, Some(false), "{}", f[0].sentence);
        assert!(
            f[0].sentence
                .contains("h2c × 16 streams reached 0.91× of HTTP/1.1's req/s in its worst round"),
            "{}",
            f[0].sentence
        );
    }

    #[test]
    fn other_servers_are_measured_and_a_missing_reference_is_said() {
        let m = mux(
            "node",
            "front",
            vec![shape("http/1.1", 64, &[5000.0], &[50.0])],
        );
        assert_eq!(findings(&[m], 2)[0].matches_prediction, None);
        let mut none = mux("event-loop", "front", vec![shape("http/1.1", 64, &[], &[])]);
        none.shapes[0].error = Some("refused".into());
        let f = findings(&[none], 2);
        assert!(f[0].sentence.contains("not measured"), "{}", f[0].sentence);
        assert_eq!(f[0].matches_prediction, None);
    }
}
