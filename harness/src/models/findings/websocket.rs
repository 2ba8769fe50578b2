//! Experiment 4's WebSocket findings: RSS per held WebSocket connection
//! beside RSS per idle HTTP keep-alive connection, how many were upgraded
//! and stayed up, and the prediction judged:
//!
//! - the event loop and coroutines hold N at a few KiB each;
//! - the worker pool holds as many as its workers, the rest wait for
//!   their 101 (the model's limit: waiting, not failed);
//! - php-fpm and nginx-static do not serve WebSocket (their `/config`
//!   says why);
//! - every other server is measured against those lines.

use super::super::document::{Finding, Memory, WsHeld};
use super::{finding, thousands};

/// "A few KiB": the most RSS per held connection the event loop and
/// coroutines are predicted to take.
pub const FEW_KIB: f64 = 16.0;

const HOLD_ALL: [&str; 3] = ["event-loop", "event-loop-x2", "coroutine"];
const HOLD_WORKERS: [&str; 1] = ["worker-pool"];
const NOT_SERVED: [&str; 2] = ["php-fpm", "nginx-static"];

fn kib(w: &WsHeld) -> String {
    match (w.kib_per_connection, &w.kib_not_measured) {
        (Some(k), _) => format!("{k:.1} KiB per held WebSocket connection"),
        (None, Some(why)) => format!("KiB per WebSocket connection not measured: {why}"),
        (None, None) => "KiB per WebSocket connection not measured".into(),
    }
}

fn http_kib(memory: &[Memory], server: &str) -> String {
    match memory.iter().find(|m| m.server == server) {
        Some(m) => match (m.kib_per_connection, &m.kib_not_measured) {
            (Some(k), _) => format!("{k:.1} KiB per idle HTTP keep-alive connection"),
            (None, Some(why)) => format!("per HTTP connection not measured: {why}"),
            (None, None) => "per HTTP connection not measured".into(),
        },
        None => "HTTP keep-alive not held in this run".into(),
    }
}

/// The lines a server without a prediction is measured against: the
/// event loop's KiB per connection and the worker pool's count held.
fn lines(all: &[WsHeld]) -> String {
    let mut out = Vec::new();
    for w in all
        .iter()
        .filter(|w| w.not_served.is_none() && w.error.is_none())
    {
        if HOLD_ALL.contains(&w.server.as_str()) {
            out.push(match w.kib_per_connection {
                Some(k) => format!("{}'s {k:.1} KiB each", w.server),
                None => format!("{}'s {} held", w.server, thousands(w.stayed_up as f64)),
            });
        } else if HOLD_WORKERS.contains(&w.server.as_str()) {
            out.push(format!(
                "{}'s {} held and {} waiting",
                w.server,
                thousands(w.stayed_up as f64),
                thousands(w.waiting as f64)
            ));
        }
    }
    if out.is_empty() {
        "measured against the event loop's and the worker pool's lines, neither run here".into()
    } else {
        format!(
            "measured against {} (no prediction of its own)",
            out.join(", ")
        )
    }
}

/// The prediction for `w`, in words, and whether it held.
fn verdict(w: &WsHeld, all: &[WsHeld]) -> (String, Option<bool>) {
    let server = w.server.as_str();
    if NOT_SERVED.contains(&server) {
        let ok = w.not_served.is_some();
        return (
            format!(
                "predicted: not served — {}",
                if ok {
                    "as predicted"
                } else {
                    "NOT as predicted: it served"
                }
            ),
            Some(ok),
        );
    }
    if HOLD_ALL.contains(&server) {
        let all = w.stayed_up == w.requested;
        let few = w.kib_per_connection.is_some_and(|k| k <= FEW_KIB);
        let mut misses = Vec::new();
        if !all {
            misses.push(format!(
                "{} of {} stayed up",
                thousands(w.stayed_up as f64),
                thousands(w.requested as f64)
            ));
        }
        if !few {
            misses.push(match w.kib_per_connection {
                Some(k) => format!("{k:.1} KiB each"),
                None => "its KiB per connection is not a measurement".into(),
            });
        }
        return (
            format!(
                "predicted: all {} held at ≤ {FEW_KIB:.0} KiB each — {}",
                thousands(w.requested as f64),
                if misses.is_empty() {
                    "as predicted".to_string()
                } else {
                    format!("NOT as predicted: {}", misses.join(", "))
                }
            ),
            Some(misses.is_empty()),
        );
    }
    if HOLD_WORKERS.contains(&server) {
        let Some(workers) = w.workers.map(u64::from) else {
            return (
                "predicted: as many held as its workers, but its /config names no worker count"
                    .into(),
                None,
            );
        };
        let expected = workers.min(w.requested);
        let ok = w.stayed_up == expected && w.waiting == w.requested - expected;
        return (
            format!(
                "predicted: {expected} held (its workers) and {} waiting for their 101 — {}",
                thousands((w.requested - expected) as f64),
                if ok {
                    "as predicted".to_string()
                } else {
                    format!(
                        "NOT as predicted: {} held, {} waiting, {} neither",
                        w.stayed_up, w.waiting, w.not_held
                    )
                }
            ),
            Some(ok),
        );
    }
    (lines(all), None)
}

pub fn findings(held: &[WsHeld], memory: &[Memory]) -> Vec<Finding> {
    held.iter()
        .map(|w| {
            let (why, ok) = verdict(w, held);
            let sentence = if let Some(reason) = &w.not_served {
                format!(
                    "{} ({}): {why}. WebSocket not served: {reason}",
                    w.server, w.model
                )
            } else if let Some(e) = &w.error {
                format!(
                    "{} ({}): {why}. WebSocket hold not measured: {e}",
                    w.server, w.model
                )
            } else {
                format!(
                    "{} ({}): {why}. {} of {} WebSocket connections upgraded, {} stayed up{}{}; {} \
                     against {}{}",
                    w.server,
                    w.model,
                    thousands(w.upgraded as f64),
                    thousands(w.requested as f64),
                    thousands(w.stayed_up as f64),
                    if w.waiting > 0 {
                        format!(", {} waiting for their 101", thousands(w.waiting as f64))
                    } else {
                        String::new()
                    },
                    if w.not_held > 0 {
                        format!(
                            ", {} neither held nor waiting ({} failed attempts)",
                            thousands(w.not_held as f64),
                            thousands(w.failed as f64)
                        )
                    } else {
                        String::new()
                    },
                    kib(w),
                    http_kib(memory, &w.server),
                    w.short_of_target
                        .as_deref()
                        .map_or(String::new(), |s| format!(" ({s})")),
                )
            };
            finding("websocket held", &w.server, sentence, ok)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(server: &str, upgraded: u64, waiting: u64, kib: Option<f64>) -> WsHeld {
        WsHeld {
            server: server.into(),
            model: "m".into(),
            requested: 1000,
            workers: Some(2),
            upgraded,
            stayed_up: upgraded,
            waiting,
            kib_per_connection: kib,
            kib_not_measured: kib.is_none().then(|| "its RSS did not grow".into()),
            ..WsHeld::default()
        }
    }

    #[test]
    fn each_model_is_judged_against_its_own_line() {
        let f = findings(
            &[
                held("event-loop", 1000, 0, Some(3.2)),
                held("event-loop", 1000, 0, Some(40.0)),
                held("worker-pool", 2, 998, Some(100.0)),
                WsHeld {
                    not_held: 98,
                    ..held("worker-pool", 2, 900, Some(100.0))
                },
                held("node", 1000, 0, None),
            ],
            &[],
        );
        let ok: Vec<_> = f.iter().map(|f| f.matches_prediction).collect();
        assert_eq!(
            ok,
            [Some(true), Some(false), Some(true), Some(false), None],
            "{f:?}"
        );
        assert!(
            f[0].sentence
                .contains("3.2 KiB per held WebSocket connection against HTTP keep-alive not held"),
            "{}",
            f[0].sentence
        );
        assert!(
            f[1].sentence.contains("NOT as predicted: 40.0 KiB each"),
            "{}",
            f[1].sentence
        );
        assert!(
            f[2].sentence.contains("998 waiting for their 101"),
            "{}",
            f[2].sentence
        );
        assert!(
            f[4].sentence.contains("not measured: its RSS did not grow"),
            "{}",
            f[4].sentence
        );
    }

    #[test]
    fn a_server_without_websocket_is_not_served_never_failed() {
        let mut fpm = held("php-fpm", 0, 0, None);
        fpm.not_served = Some("a worker per request".into());
        let f = &findings(&[fpm], &[])[0];
        assert_eq!(f.matches_prediction, Some(true));
        assert!(
            f.sentence
                .contains("WebSocket not served: a worker per request"),
            "{}",
            f.sentence
        );
    }
}
