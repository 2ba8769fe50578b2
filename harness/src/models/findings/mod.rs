//! The findings of `harness models`, each a sentence computed from the
//! measurements with the number and the prediction it is checked against.
//! Pure functions of the document: a test changes the numbers and watches
//! the sentences follow.

use super::document::{ConnectionCost, Finding, Memory, Models, Stall, WaitCurve};
use super::evidence;

pub mod hol;
pub mod multiplexing;
pub mod websocket;

/// How close a plateau must come to Little's law to match it.
pub const PLATEAU_TOLERANCE: f64 = 0.15;
/// An unbounded model at the largest c against a worker pool's plateau.
pub const UNBOUNDED_FACTOR: f64 = 10.0;
/// Under the stall, one loop's `/hello` p99 rises to at least this share of
/// one heavy request's cost (a `/hello` queued behind it waits it out)…
pub const LOOP_STALL_SHARE: f64 = 0.8;
/// … while a worker pool keeps it within this factor of `/hello` alone.
pub const POOL_STALL_FACTOR: f64 = 3.0;

fn thousands(x: f64) -> String {
    crate::report::thousands(x.round().max(0.0) as u64)
}

fn finding(experiment: &str, server: &str, sentence: String, matches: Option<bool>) -> Finding {
    Finding {
        experiment: experiment.into(),
        server: server.into(),
        sentence,
        matches_prediction: matches,
        evidence: None,
    }
}

/// The plateau of a bounded curve: the best RPS from c = in-flight on.
fn plateau(curve: &WaitCurve) -> Option<(f64, u64)> {
    let w = u64::from(curve.in_flight?);
    let from = curve
        .points
        .iter()
        .filter(|p| p.connections >= w)
        .map(|p| p.connections)
        .min()?;
    let best = curve
        .points
        .iter()
        .filter(|p| p.connections >= w)
        .map(|p| p.rps)
        .fold(0.0, f64::max);
    Some((best, from))
}

/// The requests a bounded server refused or dropped beyond its capacity.
fn refused(curve: &WaitCurve) -> String {
    match curve
        .points
        .iter()
        .filter(|p| p.failed > 0)
        .max_by_key(|p| p.connections)
    {
        Some(p) => format!(
            "; at c = {} it failed {} requests (a full queue answers 503, as an overflowing FPM backlog)",
            p.connections,
            thousands(p.failed as f64)
        ),
        None => String::new(),
    }
}

/// Experiment 1: bounded servers level off at W / wait; unbounded ones
/// follow c / wait until the CPU saturates. A miss carries the profile of
/// the point that missed most (the largest c for an unbounded model), on a
/// machine of `cores`.
pub fn waiting(curves: &[WaitCurve], cores: u32) -> Vec<Finding> {
    let mut out = Vec::new();
    for curve in curves {
        let wait_s = f64::from(curve.wait_ms) / 1000.0;
        let sentence_path = format!("{} ({})", curve.path, curve.in_flight_source);
        match (curve.in_flight, plateau(curve)) {
            (Some(w), Some((_, from))) => {
                let predicted = f64::from(w) / wait_s;
                out.push(bounded(curve, &sentence_path, w, predicted, from, cores));
            }
            _ => {
                // Unbounded: how far it follows c / wait.
                let followed = curve
                    .points
                    .iter()
                    .filter(|p| p.rps >= (1.0 - PLATEAU_TOLERANCE) * p.connections as f64 / wait_s)
                    .map(|p| p.connections)
                    .max();
                let top = curve.points.iter().max_by_key(|p| p.connections);
                let Some(top) = top else { continue };
                let pool = curves
                    .iter()
                    .filter(|c| {
                        c.path == curve.path && c.in_flight.is_some() && c.model == "worker-pool"
                    })
                    .filter_map(|c| plateau(c).map(|(p, _)| (c.server.clone(), p)))
                    .fold(None, |acc: Option<(String, f64)>, (s, p)| match acc {
                        Some((_, q)) if q >= p => acc,
                        _ => Some((s, p)),
                    });
                let versus = match &pool {
                    Some((name, p)) if *p > 0.0 => format!(
                        "; at c = {} it serves {} req/s, {:.1}× {name}'s plateau",
                        top.connections,
                        thousands(top.rps),
                        top.rps / p
                    ),
                    _ => format!(
                        "; at c = {} it serves {} req/s",
                        top.connections,
                        thousands(top.rps)
                    ),
                };
                let ok = match &pool {
                    Some((_, p)) if *p > 0.0 => top.rps >= UNBOUNDED_FACTOR * p,
                    _ => followed.is_some(),
                };
                let mut f = finding(
                    "waiting",
                    &curve.server,
                    format!(
                        "{} on {} holds no worker while it waits: it follows c / {} ms {}{versus}",
                        curve.server,
                        curve.path,
                        curve.wait_ms,
                        match followed {
                            Some(c) => format!(
                                "up to c = {c} (within {:.0}%), then the CPU saturates",
                                100.0 * PLATEAU_TOLERANCE
                            ),
                            None => "at no c measured".to_string(),
                        }
                    ),
                    Some(ok),
                );
                if !ok {
                    let profiled = evidence::profiled(top.profile.as_ref());
                    evidence::attach(&mut f, evidence::of_point(top, cores), profiled);
                }
                out.push(f);
            }
        }
    }
    out
}

/// A bounded server's plateau, claimed from the points: it levels off at
/// W / wait only if every point from c = W on is within the tolerance of
/// that bound (the range of those points is the interval the sentence
/// rests on); otherwise the sentence says it does not, with each point's
/// distance from the bound.
fn bounded(
    curve: &WaitCurve,
    path: &str,
    w: u32,
    predicted: f64,
    from: u64,
    cores: u32,
) -> Finding {
    let mut on: Vec<_> = curve
        .points
        .iter()
        .filter(|p| p.connections >= u64::from(w))
        .collect();
    on.sort_by_key(|p| p.connections);
    let off = |rps: f64| rps / predicted - 1.0;
    let misses = on
        .iter()
        .filter(|p| off(p.rps).abs() > PLATEAU_TOLERANCE)
        .count();
    let (lo, hi) = on.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
        (lo.min(p.rps), hi.max(p.rps))
    });
    let tolerance = 100.0 * PLATEAU_TOLERANCE;
    let bound = format!(
        "{w} in flight / {} ms = {} predicted",
        curve.wait_ms,
        thousands(predicted)
    );
    let sentence = if misses == 0 {
        let level = on.iter().map(|p| p.rps).sum::<f64>() / on.len().max(1) as f64;
        format!(
            "{} on {path} levels off at {} req/s from c = {from} (every point from c = {from} on: \
             {}–{} req/s, within {tolerance:.0}% of the bound): {bound}{}",
            curve.server,
            thousands(level),
            thousands(lo),
            thousands(hi),
            refused(curve),
        )
    } else {
        let points: Vec<String> = on
            .iter()
            .map(|p| {
                format!(
                    "c = {}: {} ({:+.0}%)",
                    thousands(p.connections as f64),
                    thousands(p.rps),
                    100.0 * off(p.rps)
                )
            })
            .collect();
        format!(
            "{} on {path} does not level off at the bound ({bound}): {misses} of {} points from \
             c = {from} on are beyond ±{tolerance:.0}% of it — {}{}",
            curve.server,
            on.len(),
            points.join(", "),
            refused(curve),
        )
    };
    let mut f = finding("waiting", &curve.server, sentence, Some(misses == 0));
    if misses > 0 {
        // The worst point that has evidence: a short run of an idle server
        // (a worker pool sleeping at low c) may hold no sample of it at all,
        // and its neighbour's profile still says where the CPU went.
        let found = on
            .iter()
            .filter_map(|p| evidence::of_point(p, cores).map(|e| (off(p.rps).abs(), e)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, e)| e);
        let profiled = on.iter().any(|p| evidence::profiled(p.profile.as_ref()));
        evidence::attach(&mut f, found, profiled);
    }
    f
}

/// What the stall should do to `/hello` in each model, in words, and
/// whether `ratio` matches it.
fn stall_prediction(s: &Stall, loops: Option<u32>, ratio: f64) -> (String, Option<bool>) {
    match (s.model.as_str(), loops) {
        ("event-loop", Some(1)) => (
            format!(
                "one loop runs the heavy request and every /hello behind it waits it out \
                 (predicted: p99 ≥ {:.0}% of one heavy request, {:.0} ms)",
                100.0 * LOOP_STALL_SHARE,
                LOOP_STALL_SHARE * s.cpu_ms
            ),
            Some(s.hello_mixed_p99_ms >= LOOP_STALL_SHARE * s.cpu_ms),
        ),
        ("event-loop", _) => ("several loops share the stall".into(), None),
        ("worker-pool", _) => (
            format!("the pool isolates /hello from the heavy requests until all its workers are busy (predicted ≤ {POOL_STALL_FACTOR:.0}×)"),
            Some(ratio <= POOL_STALL_FACTOR),
        ),
        ("coroutine", _) => (
            "coroutines are not preemptive: a heavy one holds its carrier thread, and the /hello queued on that thread waits (predicted worse than alone)".into(),
            Some(ratio > 1.0),
        ),
        _ => ("no prediction for this model".into(), None),
    }
}

/// Experiment 2. A miss carries the mixed run's profile.
pub fn stall(stalls: &[Stall], loops: &dyn Fn(&str) -> Option<u32>, cores: u32) -> Vec<Finding> {
    stalls
        .iter()
        .filter(|s| s.error.is_none() && s.hello_alone_p99_ms > 0.0)
        .map(|s| {
            let ratio = s.hello_mixed_p99_ms / s.hello_alone_p99_ms;
            let (why, ok) = stall_prediction(s, loops(&s.server), ratio);
            let mut f = finding(
                "stall",
                &s.server,
                format!(
                    "{}: /hello p99 {:.1} ms with {} (/cpu?n={} ≈ {:.0} ms each) against {:.1} ms alone, {ratio:.1}×: {why}",
                    s.server, s.hello_mixed_p99_ms, s.mix, s.cpu_n, s.cpu_ms, s.hello_alone_p99_ms
                ),
                ok,
            );
            if ok == Some(false) {
                let found =
                    evidence::of_run("the mixed run", s.mixed_profile.as_ref(), s.mixed_rps, cores);
                let profiled = evidence::profiled(s.mixed_profile.as_ref());
                evidence::attach(&mut f, found, profiled);
            }
            f
        })
        .collect()
}

/// Experiment 3: no prediction, the ratios themselves.
pub fn connection_cost(costs: &[ConnectionCost]) -> Vec<Finding> {
    costs
        .iter()
        .filter(|c| c.error.is_none() && c.keepalive_rps > 0.0)
        .map(|c| {
            finding(
                "connection cost",
                &c.server,
                format!(
                    "{}: a new HTTP connection per request keeps {:.2}× of its keep-alive /work rate ({} req/s), a new database connection per request {:.2}×",
                    c.server,
                    c.new_http_connection_rps / c.keepalive_rps,
                    thousands(c.keepalive_rps),
                    c.new_db_connection_rps / c.keepalive_rps
                ),
                None,
            )
        })
        .collect()
}

/// Experiment 4: what one idle connection costs each model, and why a
/// server holds fewer than asked; a figure that is not a measurement says
/// so instead of printing.
pub fn memory(memory: &[Memory]) -> Vec<Finding> {
    memory
        .iter()
        .filter(|m| m.error.is_none())
        .filter_map(|m| {
            let top = m.points.iter().max_by_key(|p| p.requested)?;
            let cost = match (m.kib_per_connection, &m.kib_not_measured) {
                (Some(kib), _) => format!("{kib:.1} KiB per idle connection"),
                (None, Some(why)) => format!("KiB per idle connection not measured: {why}"),
                (None, None) => "KiB per idle connection not measured".to_string(),
            };
            Some(finding(
                "memory",
                &m.server,
                format!(
                    "{} ({}): {cost}, {} of {} connections accepted{}{}",
                    m.server,
                    m.model,
                    thousands(top.accepted() as f64),
                    thousands(top.requested as f64),
                    m.short_of_target
                        .as_deref()
                        .map_or(String::new(), |why| format!(" ({why})")),
                    match m.hello_answered_at_most {
                        Some(true) => ", /hello still answered".to_string(),
                        Some(false) => ", /hello NOT answered with them held".to_string(),
                        None => String::new(),
                    }
                ),
                None,
            ))
        })
        .collect()
}

/// Every finding of a document.
pub fn all(doc: &Models) -> Vec<Finding> {
    let loops = |server: &str| {
        doc.servers
            .iter()
            .find(|s| s.name == server)
            .and_then(|s| s.config.as_ref())
            .and_then(|c| c.workers)
    };
    let cores = doc.machine.cores;
    let mut out = waiting(&doc.waiting, cores);
    out.extend(stall(&doc.stall, &loops, cores));
    out.extend(connection_cost(&doc.connection_cost));
    out.extend(memory(&doc.memory));
    out.extend(websocket::findings(&doc.websocket_held, &doc.memory));
    out.extend(multiplexing::findings(&doc.multiplexing, cores));
    out.extend(super::at_rate::findings(&doc.waiting_at_rate));
    out.extend(hol::findings(&doc.head_of_line));
    out
}

#[cfg(test)]
mod tests {
    use super::super::document::WaitPoint;
    use super::*;
    use crate::lab::profile::Profile;

    fn curve(server: &str, model: &str, w: Option<u32>, rps: &[(u64, f64)]) -> WaitCurve {
        WaitCurve {
            server: server.into(),
            model: model.into(),
            path: "/sleep?ms=20".into(),
            wait_ms: 20,
            in_flight: w,
            in_flight_source: if w.is_some() {
                "workers".into()
            } else {
                "none".into()
            },
            points: rps
                .iter()
                .map(|&(c, rps)| WaitPoint {
                    connections: c,
                    rps,
                    p50_ms: 0.0,
                    p99_ms: 0.0,
                    failed: 0,
                    predicted_rps: 0.0,
                    profile: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_plateau_sentence_follows_the_numbers() {
        let pool = curve(
            "worker-pool",
            "worker-pool",
            Some(20),
            &[(1, 49.0), (20, 996.0), (100, 990.0)],
        );
        let f = &waiting(&[pool], 2)[0];
        assert_eq!(f.matches_prediction, Some(true));
        assert!(
            f.sentence.contains(
                "levels off at 993 req/s from c = 20 (every point from c = 20 on: 990–996 req/s, \
                 within 15% of the bound): 20 in flight / 20 ms = 1,000 predicted"
            ),
            "{}",
            f.sentence
        );
        // Level off elsewhere, and the sentence says by how much.
        let pool = curve(
            "worker-pool",
            "worker-pool",
            Some(20),
            &[(20, 500.0), (100, 520.0)],
        );
        let f = &waiting(&[pool], 2)[0];
        assert_eq!(f.matches_prediction, Some(false));
        assert!(
            f.sentence.contains("c = 100: 520 (-48%)") && f.sentence.contains("2 of 2 points"),
            "{}",
            f.sentence
        );
    }

    /// The points straddle the bound: far below it at c = W, near it only
    /// at the largest c (Swoole on /db?sleep_ms=20, measured). The best
    /// point alone is within the tolerance; the plateau is not.
    #[test]
    fn a_plateau_reached_only_at_the_largest_c_is_a_miss() {
        let swoole = curve(
            "swoole",
            "coroutine",
            Some(20),
            &[(1, 48.0), (20, 336.0), (200, 425.0), (1000, 857.0)],
        );
        let f = &waiting(&[swoole], 2)[0];
        assert_eq!(f.matches_prediction, Some(false), "{}", f.sentence);
        assert!(
            f.sentence.contains("does not level off at the bound")
                && f.sentence.contains("2 of 3 points")
                && f.sentence.contains("c = 20: 336 (-66%)")
                && f.sentence.contains("c = 1,000: 857 (-14%)"),
            "{}",
            f.sentence
        );
        // Not profiled: no evidence.
        assert!(f.evidence.is_none());
    }

    /// A miss with profiled points carries the profile of the point that
    /// missed most; a match carries none.
    #[test]
    fn a_miss_shows_the_profile_of_the_point_that_missed_most() {
        let mut swoole = curve(
            "swoole",
            "coroutine",
            Some(20),
            &[(1, 48.0), (20, 336.0), (200, 425.0), (1000, 857.0)],
        );
        for p in &mut swoole.points {
            let mut profile = Profile::default();
            profile.server.cpu_ns = 1;
            // 100 µs a request: 0.03 cores at c = 20, the point furthest
            // from the bound.
            profile.server.user_us_per_request = 100.0;
            profile.server_svg = Some(format!("profiles/c{}.svg", p.connections));
            p.profile = Some(profile);
        }
        let f = &waiting(&[swoole.clone()], 2)[0];
        let e = f.evidence.as_ref().expect("evidence for a miss");
        assert_eq!(e.run, "c = 20");
        assert_eq!(e.flame_graph.as_deref(), Some("profiles/c20.svg"));
        assert!(e.sentence.contains("CPU was left idle"), "{}", e.sentence);
        // The same points on the bound: as predicted, nothing to explain.
        for p in &mut swoole.points {
            p.rps = p.rps.max(980.0);
        }
        let f = &waiting(&[swoole.clone()], 2)[0];
        assert_eq!(f.matches_prediction, Some(true), "{}", f.sentence);
        assert!(f.evidence.is_none());
        // A worst point whose profile caught no sample of the server (an
        // idle server's short run): the next worst one's evidence.
        for p in &mut swoole.points {
            p.rps = if p.connections == 20 { 336.0 } else { 700.0 };
        }
        swoole.points[1].profile.as_mut().unwrap().server.cpu_ns = 0;
        let f = &waiting(&[swoole.clone()], 2)[0];
        assert_eq!(f.matches_prediction, Some(false), "{}", f.sentence);
        let e = f.evidence.as_ref().expect("the next point's evidence");
        assert_ne!(e.run, "c = 20");
        assert!(
            !f.sentence.contains(evidence::TOO_FEW_SAMPLES),
            "{}",
            f.sentence
        );
        // No profile caught the server at all: the miss says so, bare of evidence.
        for p in &mut swoole.points {
            p.profile.as_mut().unwrap().server.cpu_ns = 0;
        }
        let f = &waiting(&[swoole], 2)[0];
        assert!(f.evidence.is_none());
        assert!(
            f.sentence.contains(evidence::TOO_FEW_SAMPLES),
            "{}",
            f.sentence
        );
    }

    #[test]
    fn an_unbounded_model_is_read_against_the_pools_plateau() {
        let pool = curve(
            "worker-pool",
            "worker-pool",
            Some(20),
            &[(20, 1000.0), (1000, 1000.0)],
        );
        let lp = curve(
            "event-loop",
            "event-loop",
            None,
            &[(1, 50.0), (100, 4900.0), (1000, 12000.0)],
        );
        let f = waiting(&[pool.clone(), lp], 2)[1].clone();
        assert_eq!(f.matches_prediction, Some(true), "{}", f.sentence);
        assert!(
            f.sentence.contains("up to c = 100") && f.sentence.contains("12.0×"),
            "{}",
            f.sentence
        );
        let slow = curve(
            "event-loop",
            "event-loop",
            None,
            &[(1, 50.0), (1000, 5000.0)],
        );
        let f = waiting(&[pool, slow], 2)[1].clone();
        assert_eq!(f.matches_prediction, Some(false), "{}", f.sentence);
    }

    #[test]
    fn the_stall_verdict_depends_on_the_model() {
        let s = |server: &str, model: &str, mixed: f64| Stall {
            server: server.into(),
            model: model.into(),
            cpu_ms: 50.0,
            hello_alone_p99_ms: 2.0,
            hello_mixed_p99_ms: mixed,
            ..Stall::default()
        };
        let loops = |name: &str| (name == "event-loop").then_some(1);
        let f = stall(
            &[
                s("event-loop", "event-loop", 60.0),
                s("worker-pool", "worker-pool", 60.0),
            ],
            &loops,
            2,
        );
        assert_eq!(f[0].matches_prediction, Some(true), "{}", f[0].sentence);
        assert_eq!(f[1].matches_prediction, Some(false), "{}", f[1].sentence);
        assert!(f[0].sentence.contains("30.0×"), "{}", f[0].sentence);
        assert!(f[1].evidence.is_none(), "not profiled");
        // The pool's miss, profiled: its mixed run used both cores.
        let mut pool = s("worker-pool", "worker-pool", 60.0);
        let mut profile = Profile::default();
        profile.server.cpu_ns = 1;
        profile.server.user_us_per_request = 95.0;
        pool.mixed_profile = Some(profile);
        pool.mixed_rps = 20_000.0;
        let f = stall(&[pool], &loops, 2);
        let e = f[0].evidence.as_ref().expect("the mixed run's evidence");
        assert_eq!(e.run, "the mixed run");
        assert!(
            e.sentence.contains("saturated (1.9 of 2 cores"),
            "{}",
            e.sentence
        );
        // A loop whose /hello never waited a heavy request out: not as predicted.
        let f = stall(
            &[
                s("event-loop", "event-loop", 10.0),
                s("worker-pool", "worker-pool", 4.0),
            ],
            &loops,
            2,
        );
        assert_eq!(f[0].matches_prediction, Some(false), "{}", f[0].sentence);
        assert_eq!(f[1].matches_prediction, Some(true), "{}", f[1].sentence);
    }
}
