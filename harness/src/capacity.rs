//! The highest offered rate a server holds: a ramp, then bisection. Each
//! step is one fixed-rate run, judged by the caller (held: achieved ≥ 95 %
//! of offered, nothing failed, every SLO threshold passed); this module
//! only chooses the rates, so `compare --slo` and `models` search alike.
//!
//! The ramp doubles from a starting rate until a step does not hold (or a
//! ceiling is reached); the bisection then narrows the held and the
//! failed rate until they are within [`TOLERANCE`] of each other. When
//! the first step does not hold, the ramp goes down instead (halving) to
//! a floor: a server that holds none of those rates holds no rate.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The search ends once the failed rate is within this share above the held one.
pub const TOLERANCE: f64 = 0.05;

/// Each fixed-rate run (a step, or a cell of `compare --rate`) first sends
/// at its rate this long, uncounted: its connections open (hundreds at a
/// high rate) and the schedule settles, so the count starts on a loop under
/// way rather than on a connect storm (requests meant for that time are not
/// counted: `engine::Plan::warmup`).
pub const RATE_WARMUP: Duration = Duration::from_secs(1);

/// How far down a failing start is halved: start ÷ 2^DOWN_STEPS.
pub const DOWN_STEPS: u32 = 5;

/// One fixed-rate step of a search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub offered_per_s: f64,
    pub held: bool,
}

/// Where a search ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// Every step, in the order taken.
    pub steps: Vec<Step>,
    /// The highest rate held; `None` when none was.
    pub capacity_per_s: Option<f64>,
    /// The lowest rate that did not hold (the capacity lies below it);
    /// `None` when every step up to the ceiling held.
    pub failed_at_per_s: Option<f64>,
    /// The search stopped before it was done (Ctrl-C).
    pub interrupted: bool,
}

/// Searches from `start` (> 0) up to `ceiling`; `probe(rate)` runs one
/// step and says whether it held, or `None` to stop (interrupted).
pub fn search(start: f64, ceiling: f64, mut probe: impl FnMut(f64) -> Option<bool>) -> Search {
    let mut out = Search::default();
    let mut step = |rate: f64, out: &mut Search| -> Option<bool> {
        let mut held = None;
        // A failure is confirmed by a second run (the module's comment).
        for _ in 0..2 {
            held = probe(rate);
            match held {
                Some(h) => out.steps.push(Step {
                    offered_per_s: rate,
                    held: h,
                }),
                None => out.interrupted = true,
            }
            if held != Some(false) {
                break;
            }
        }
        held
    };
    let ceiling = ceiling.max(start);
    // The ramp: (held, failed).
    let (mut lo, mut hi) = (None::<f64>, None::<f64>);
    let mut rate = start;
    match step(rate, &mut out) {
        None => return out,
        Some(true) => {
            lo = Some(rate);
            while rate < ceiling {
                rate = (rate * 2.0).min(ceiling);
                match step(rate, &mut out) {
                    None => return finish(out, lo, hi),
                    Some(true) => lo = Some(rate),
                    Some(false) => {
                        hi = Some(rate);
                        break;
                    }
                }
            }
        }
        Some(false) => {
            hi = Some(rate);
            for _ in 0..DOWN_STEPS {
                rate /= 2.0;
                match step(rate, &mut out) {
                    None => return finish(out, lo, hi),
                    Some(true) => {
                        lo = Some(rate);
                        break;
                    }
                    Some(false) => hi = Some(rate),
                }
            }
        }
    }
    // The bisection, between a held and a failed rate.
    while let (Some(l), Some(h)) = (lo, hi) {
        if h <= l * (1.0 + TOLERANCE) {
            break;
        }
        let mid = (l + h) / 2.0;
        match step(mid, &mut out) {
            None => break,
            Some(true) => lo = Some(mid),
            Some(false) => hi = Some(mid),
        }
    }
    finish(out, lo, hi)
}

fn finish(mut out: Search, lo: Option<f64>, hi: Option<f64>) -> Search {
    out.capacity_per_s = lo;
    out.failed_at_per_s = hi;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that holds every rate up to `bound`.
    fn bounded(bound: f64) -> impl FnMut(f64) -> Option<bool> {
        move |r| Some(r <= bound)
    }

    #[test]
    fn ramps_then_bisects_to_within_five_percent() {
        let s = search(250.0, 1e6, bounded(1000.0));
        let cap = s.capacity_per_s.unwrap();
        let failed = s.failed_at_per_s.unwrap();
        assert!(cap <= 1000.0 && failed > 1000.0, "{s:?}");
        assert!(failed <= cap * (1.0 + TOLERANCE), "{s:?}");
        assert!(cap >= 1000.0 / (1.0 + TOLERANCE), "{s:?}");
        // Doubling 250 → 500 → 1000 → 2000, then a few halvings.
        assert_eq!(
            s.steps[..4]
                .iter()
                .map(|x| x.offered_per_s)
                .collect::<Vec<_>>(),
            [250.0, 500.0, 1000.0, 2000.0]
        );
        // Each failed rate run twice (confirmed), each held one once.
        assert!(s.steps.len() <= 16, "{}", s.steps.len());
        for x in &s.steps {
            let runs = s
                .steps
                .iter()
                .filter(|y| y.offered_per_s == x.offered_per_s);
            assert_eq!(runs.count(), if x.held { 1 } else { 2 }, "{s:?}");
        }
    }

    /// One run stalled by a neighbour (the first at 2,000/s) does not end
    /// the search below the server's capacity: its second run holds.
    #[test]
    fn a_failure_is_confirmed_before_it_bounds_the_search() {
        let mut stalled = false;
        let s = search(500.0, 1e6, |rate| {
            if rate == 2000.0 && !stalled {
                stalled = true;
                return Some(false);
            }
            Some(rate <= 5000.0)
        });
        let cap = s.capacity_per_s.unwrap();
        assert!(cap > 4000.0 && cap <= 5000.0, "{s:?}");
        assert_eq!(
            s.steps[..4]
                .iter()
                .map(|x| (x.offered_per_s, x.held))
                .collect::<Vec<_>>(),
            [
                (500.0, true),
                (1000.0, true),
                (2000.0, false),
                (2000.0, true)
            ]
        );
    }

    #[test]
    fn a_failing_start_goes_down_and_a_server_that_holds_nothing_says_so() {
        let s = search(1000.0, 1e6, bounded(300.0));
        assert!(s.capacity_per_s.unwrap() <= 300.0);
        assert!(s.capacity_per_s.unwrap() >= 300.0 / (1.0 + TOLERANCE));
        let none = search(1000.0, 1e6, |_| Some(false));
        assert_eq!(none.capacity_per_s, None);
        assert_eq!(none.steps.len(), 2 * (1 + DOWN_STEPS as usize));
    }

    #[test]
    fn holding_to_the_ceiling_ends_there_and_an_interrupt_keeps_what_was_found() {
        let s = search(100.0, 700.0, |_| Some(true));
        assert_eq!((s.capacity_per_s, s.failed_at_per_s), (Some(700.0), None));
        let mut n = 0;
        let s = search(100.0, 1e6, |r| {
            n += 1;
            (n < 3).then_some(r < 1e5)
        });
        assert!(s.interrupted);
        assert_eq!(s.capacity_per_s, Some(200.0));
        assert_eq!(s.steps.len(), 2);
    }
}
