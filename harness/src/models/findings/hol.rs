//! Experiment 7's finding: each protocol's p99 at each loss against its own
//! p99 without loss, h2 over TLS beside h3, and the prediction judged:
//! with loss, h2's p99 grows more than h3's (every stream of the TCP
//! connection waits for a lost segment; QUIC stalls only the streams of
//! the lost packet).
//!
//! Growth is judged as the milliseconds added to each protocol's own p99
//! at 0 % (the two start from different floors: the same server, two
//! stacks). A lossy cell whose nft counter dropped nothing, or a cell that
//! failed, leaves the prediction unjudged and says why.

use super::super::document::{Finding, HeadOfLine, HolCell};
use super::{finding, thousands};

/// Linux TCP's minimum retransmission timeout, ms (`TCP_RTO_MIN`), which
/// a tail-loss probe with one segment in flight also adds: a segment whose
/// loss no duplicate ACK reveals waits about this long at any RTT.
pub const TCP_RTO_MIN_MS: f64 = 200.0;

const EXPERIMENT: &str = "head-of-line blocking";

/// h3's responses held back per packet dropped at this share of h2's or
/// more: about as many streams waited.
pub const SAME_SHARE: f64 = 0.5;

/// Without loss at most this share of responses over the stall threshold:
/// beyond it the machine's own tail hides the stalls a loss adds.
pub const QUIET_SHARE: f64 = 0.001;

/// Responses over the stall threshold beyond those the cell's rate would
/// have had without loss (`base`: the same protocol at 0 %, the machine's
/// own tail).
fn excess_stalled(c: &HolCell, base: &HolCell) -> f64 {
    let floor = if base.ok > 0 {
        base.stalled as f64 * c.ok as f64 / base.ok as f64
    } else {
        0.0
    };
    (c.stalled as f64 - floor).max(0.0)
}

fn cell<'a>(h: &'a HeadOfLine, protocol: &str, loss: f64) -> Option<&'a HolCell> {
    h.cells
        .iter()
        .find(|c| c.protocol == protocol && (c.loss_pct - loss).abs() < 1e-9)
}

/// Why a cell cannot be judged, if it cannot.
fn unusable(c: &HolCell) -> Option<String> {
    if let Some(e) = &c.error {
        return Some(format!("{} at {}%: {e}", c.protocol, c.loss_pct));
    }
    if c.ok == 0 {
        return Some(format!(
            "{} at {}%: nothing verified",
            c.protocol, c.loss_pct
        ));
    }
    if c.loss_pct > 0.0 && c.dropped_packets == 0 {
        return Some(format!(
            "{} at {}%: the nft rule dropped nothing ({} packets crossed): the loss was not applied",
            c.protocol, c.loss_pct, c.path_packets
        ));
    }
    None
}

/// One loss: h2's and h3's p99 added to their own at 0 %.
struct Growth {
    loss: f64,
    h2_ms: f64,
    h3_ms: f64,
}

impl Growth {
    fn holds(&self) -> bool {
        self.h2_ms > 0.0 && self.h2_ms > self.h3_ms
    }
}

fn ms(x: f64) -> String {
    if x.abs() >= 10.0 {
        format!("{x:.0} ms")
    } else {
        format!("{x:.1} ms")
    }
}

fn signed(x: f64) -> String {
    if x >= 0.0 {
        format!("+{}", ms(x))
    } else {
        format!("−{}", ms(-x))
    }
}

/// The finding of each server measured.
pub fn findings(runs: &[HeadOfLine]) -> Vec<Finding> {
    runs.iter().filter_map(judge).collect()
}

fn judge(h: &HeadOfLine) -> Option<Finding> {
    let say = |sentence: String, matches| {
        let sentence = format!("{}: {sentence}", h.server);
        Some(finding(EXPERIMENT, &h.server, sentence, matches))
    };
    if let Some(e) = &h.error {
        return say(format!("not measured: {e}"), None);
    }
    let (Some(h2_0), Some(h3_0)) = (cell(h, "h2", 0.0), cell(h, "h3", 0.0)) else {
        return say("not measured: no run without loss".into(), None);
    };
    if let Some(why) = unusable(h2_0).or_else(|| unusable(h3_0)) {
        return say(format!("not judged: {why}"), None);
    }
    let mut losses: Vec<f64> = h
        .cells
        .iter()
        .map(|c| c.loss_pct)
        .filter(|&l| l > 0.0)
        .collect();
    losses.sort_by(f64::total_cmp);
    losses.dedup();
    let mut growths = Vec::new();
    let mut parts = Vec::new();
    for &loss in &losses {
        let (Some(a), Some(b)) = (cell(h, "h2", loss), cell(h, "h3", loss)) else {
            continue;
        };
        if let Some(why) = unusable(a).or_else(|| unusable(b)) {
            parts.push(format!("not judged at {loss}%: {why}"));
            continue;
        }
        let g = Growth {
            loss,
            h2_ms: a.p99_ms - h2_0.p99_ms,
            h3_ms: b.p99_ms - h3_0.p99_ms,
        };
        let per_drop =
            |c: &HolCell, base: &HolCell| excess_stalled(c, base) / c.dropped_packets.max(1) as f64;
        parts.push(format!(
            "at {loss}% (nft dropped {} and {} packets) h2's p99 {} → {} ({}), h3's {} → {} ({}), \
             {} vs {} req/s, {} vs {} responses over {} ms ({:.1} vs {:.1} per packet dropped, \
             beyond the rate without loss){}",
            thousands(a.dropped_packets as f64),
            thousands(b.dropped_packets as f64),
            ms(h2_0.p99_ms),
            ms(a.p99_ms),
            signed(g.h2_ms),
            ms(h3_0.p99_ms),
            ms(b.p99_ms),
            signed(g.h3_ms),
            thousands(a.rps),
            thousands(b.rps),
            thousands(a.stalled as f64),
            thousands(b.stalled as f64),
            h.stall_ms,
            per_drop(a, h2_0),
            per_drop(b, h3_0),
            if g.holds() {
                String::new()
            } else if a.ok > 0 && (a.stalled as f64) < 0.01 * a.ok as f64 {
                format!(
                    ": here h2's grew no more than h3's, its {} stalled responses being {:.2}% \
                     of them, fewer than the 1% a p99 sees (its stalls are long and rare)",
                    thousands(a.stalled as f64),
                    100.0 * a.stalled as f64 / a.ok as f64
                )
            } else {
                ": here h2's grew no more than h3's".into()
            }
        ));
        growths.push((g, a, b, per_drop(a, h2_0), per_drop(b, h3_0)));
    }
    if growths.is_empty() {
        let why = if parts.is_empty() {
            "no loss was measured with both protocols (an interrupted run?)".to_string()
        } else {
            parts.join("; ")
        };
        return say(format!("not judged: {why}"), None);
    }
    let held = growths.iter().filter(|(g, ..)| g.holds()).count();
    let matches = held == growths.len();
    let verdict = if matches {
        "holds: with loss h2's p99 grew more than h3's at every loss".to_string()
    } else if held == 0 {
        "does not hold: h2's p99 grew no more than h3's at any loss".to_string()
    } else {
        let missed: Vec<String> = growths
            .iter()
            .filter(|(g, ..)| !g.holds())
            .map(|(g, ..)| format!("{}%", g.loss))
            .collect();
        format!(
            "holds in part: not at {} (h2's p99 grew no more than h3's there)",
            missed.join(", ")
        )
    };
    // What the worst loss says about the transports' timers.
    let (worst, a, b, h2_per, h3_per) = growths
        .iter()
        .max_by(|x, y| x.0.loss.total_cmp(&y.0.loss))
        .expect("not empty");
    let mut timers = Vec::new();
    if a.p99_ms >= TCP_RTO_MIN_MS * 0.9 {
        timers.push(format!(
            "h2's p99 at {}% is at TCP's 200 ms floor or above, the loopback-speed RTT \
             notwithstanding: a lost segment that no duplicate ACK reveals (a burst's last, \
             with 16 small responses in flight) waits for a tail-loss probe (2 × RTT + \
             200 ms with one segment in flight) or the retransmission timeout (at least \
             200 ms), and every stream waits with it",
            worst.loss
        ));
    }
    if let (Some(t), Some(p)) = (a.tcp_timeouts, a.tcp_loss_probes) {
        timers.push(format!(
            "the server's TCP retransmitted {} segments ({t} timeouts, {p} tail-loss probes)",
            a.tcp_retransmits.unwrap_or(0)
        ));
    }
    let quiet = |base: &HolCell| (base.stalled as f64) <= QUIET_SHARE * base.ok as f64;
    if !(quiet(h2_0) && quiet(h3_0)) {
        timers.push(format!(
            "how many streams each loss held back is not told: without loss {} and {} \
             responses were already over {} ms (the machine's own tail)",
            thousands(h2_0.stalled as f64),
            thousands(h3_0.stalled as f64),
            h.stall_ms
        ));
    } else if *h2_per > 0.0 && *h3_per >= h2_per * SAME_SHARE {
        timers.push(format!(
            "per packet dropped h3 held back about as many responses as h2 ({h3_per:.1} vs \
             {h2_per:.1}): a QUIC packet carries the frames of several streams, so the streams \
             that wait are those of the lost packet, and here h3's smaller tail comes from its \
             shorter timer more than from fewer streams waiting"
        ));
    } else if *h2_per > 0.0 {
        timers.push(format!(
            "per packet dropped h3 held back fewer responses than h2 ({h3_per:.1} vs \
             {h2_per:.1}): fewer streams waited"
        ));
    }
    if let Some(lost) = b.quic_lost_packets {
        timers.push(format!(
            "QUIC declared {lost} of the generator's {} packets lost, and resends after an \
             RTT-based probe timeout (RTT + 4 × its variance + the peer's ACK delay), not a 200 ms floor",
            b.quic_sent_packets.unwrap_or(0)
        ));
    }
    let sentence = format!(
        "{} × {} streams on {}: the prediction {verdict}; {}{}",
        h.connections,
        h.streams,
        h.path,
        parts.join("; "),
        if timers.is_empty() {
            String::new()
        } else {
            format!(". {}", timers.join("; "))
        }
    );
    say(sentence, Some(matches))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(protocol: &str, loss: f64, p99: f64, dropped: u64) -> HolCell {
        HolCell {
            protocol: protocol.into(),
            loss_pct: loss,
            ok: 1000,
            // h2: all 16 streams wait per loss; h3: one.
            stalled: dropped * if protocol == "h2" { 16 } else { 1 },
            rps: 10_000.0,
            p50_ms: 1.0,
            p99_ms: p99,
            path_packets: 10_000,
            dropped_packets: dropped,
            ..HolCell::default()
        }
    }

    fn run(cells: Vec<HolCell>) -> HeadOfLine {
        HeadOfLine {
            server: "event-loop".into(),
            model: "event-loop".into(),
            path: "/hello".into(),
            connections: 1,
            streams: 16,
            cells,
            ..HeadOfLine::default()
        }
    }

    #[test]
    fn the_verdict_follows_the_growth_of_each_p99() {
        let held = run(vec![
            c("h2", 0.0, 2.0, 0),
            c("h3", 0.0, 3.0, 0),
            c("h2", 0.5, 205.0, 50),
            c("h3", 0.5, 30.0, 50),
            c("h2", 2.0, 210.0, 200),
            c("h3", 2.0, 40.0, 200),
        ]);
        let f = judge(&held).unwrap();
        assert_eq!(f.matches_prediction, Some(true), "{}", f.sentence);
        assert!(f.sentence.contains("holds:"), "{}", f.sentence);
        assert!(f.sentence.contains("200 ms floor"), "{}", f.sentence);
        assert!(
            f.sentence.contains("fewer streams waited"),
            "{}",
            f.sentence
        );

        // As many responses held back per drop: said, not hidden.
        let mut same = held.clone();
        for c in same.cells.iter_mut().filter(|c| c.protocol == "h3") {
            c.stalled = c.dropped_packets * 12;
        }
        let f = judge(&same).unwrap();
        assert_eq!(f.matches_prediction, Some(true));
        assert!(f.sentence.contains("about as many"), "{}", f.sentence);

        // A machine whose own tail is over the threshold: not told.
        let mut noisy = held.clone();
        noisy.cells[0].stalled = 300;
        let f = judge(&noisy).unwrap();
        assert!(f.sentence.contains("is not told"), "{}", f.sentence);

        let part = run(vec![
            c("h2", 0.0, 2.0, 0),
            c("h3", 0.0, 3.0, 0),
            c("h2", 0.5, 4.0, 50),
            c("h3", 0.5, 30.0, 50),
            c("h2", 2.0, 210.0, 200),
            c("h3", 2.0, 40.0, 200),
        ]);
        let f = judge(&part).unwrap();
        assert_eq!(f.matches_prediction, Some(false));
        assert!(f.sentence.contains("not at 0.5%"), "{}", f.sentence);
        // 50 × 16 stalled of 1000: not why the p99 missed.
        assert!(!f.sentence.contains("fewer than the 1%"), "{}", f.sentence);
        let mut rare = part.clone();
        rare.cells[2].ok = 100_000;
        let f = judge(&rare).unwrap();
        assert!(
            f.sentence.contains("fewer than the 1% a p99 sees"),
            "{}",
            f.sentence
        );

        let none = run(vec![
            c("h2", 0.0, 2.0, 0),
            c("h3", 0.0, 3.0, 0),
            c("h2", 2.0, 3.0, 200),
            c("h3", 2.0, 40.0, 200),
        ]);
        let f = judge(&none).unwrap();
        assert_eq!(f.matches_prediction, Some(false));
        assert!(f.sentence.contains("does not hold"), "{}", f.sentence);
    }

    #[test]
    fn a_loss_that_was_not_applied_is_not_judged() {
        let h = run(vec![
            c("h2", 0.0, 2.0, 0),
            c("h3", 0.0, 3.0, 0),
            c("h2", 2.0, 210.0, 0),
            c("h3", 2.0, 40.0, 200),
        ]);
        let f = judge(&h).unwrap();
        assert_eq!(f.matches_prediction, None);
        assert!(f.sentence.contains("dropped nothing"), "{}", f.sentence);

        let mut refused = run(Vec::new());
        refused.error = Some("refused: it needs root".into());
        let f = judge(&refused).unwrap();
        assert_eq!(f.matches_prediction, None);
        assert!(f.sentence.starts_with("event-loop: not measured: refused"));
    }
}
