//! Experiment 4 with WebSocket: N connections upgraded on `/ws` and held,
//! each answering a ping every second (the engine's `--hold`, one request
//! loop: the harness holds them in its own bounded buffers, one descriptor
//! each), and the server's RSS per connection that stayed up.
//!
//! A worker pool holds one connection per worker for the connection's
//! lifetime: the rest wait for their 101, which is the model's limit and
//! is reported as waiting, not as failed. A server that cannot serve
//! WebSocket at all says why from its `/config`.

use std::time::Duration;

use super::document::WsHeld;
use super::held;
use crate::catalog::Running;
use crate::engine::{self, Control};
use crate::lab::load::{self, WsShape};
use crate::lab::Lab;

/// A ping on each held connection this often.
const PING: Duration = Duration::from_secs(1);

/// Held this long, with time to open them all first.
fn hold_length(n: usize) -> Duration {
    Duration::from_secs(3) + Duration::from_millis(n as u64 / 2)
}

/// The experiment: `n` connections upgraded and held.
pub fn measure(lab: &Lab, running: &mut Running, model: &str, n: usize) -> WsHeld {
    let mut out = WsHeld {
        server: running.name.clone(),
        model: model.into(),
        requested: n as u64,
        ..WsHeld::default()
    };
    match running.config() {
        Ok(c) => match c.websocket {
            Some(h) => out.holder = Some(h.connection),
            None => {
                out.not_served = Some(
                    c.websocket_unsupported
                        .unwrap_or_else(|| "its /config does not say it serves WebSocket".into()),
                );
                super::say(&format!(
                    "  {}: does not serve WebSocket: {}",
                    running.name,
                    out.not_served.as_deref().unwrap_or_default()
                ));
                return out;
            }
        },
        Err(e) => {
            out.error = Some(format!("its /config: {e}"));
            return out;
        }
    }
    let workers = running.config().ok().and_then(|c| c.workers);
    out.workers = workers;
    let before_fds = held::own_descriptors();
    out.rss_before_bytes = held::rss(running).ok();
    let length = hold_length(n);
    let shape = load::Shape {
        connections: n,
        threads: engine::default_threads(),
        keepalive: true,
        // Longer than the hold: a connection waiting for its 101 is
        // waiting, not timed out.
        timeout: length + Duration::from_secs(10),
        io: lab.io,
        gather: lab.gather,
    };
    let plan = load::ws_plan(
        running,
        "/ws",
        &shape,
        WsShape::Hold { every: PING },
        length,
    );
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    let (result, sample) = load::metered(running, &[], None, || {
        engine::run(&plan, &control, &mut |_| {})
    });
    let alive = running.check_alive();
    match result {
        Ok(r) => {
            out.upgraded = r.stats.ws_upgraded;
            out.stayed_up = r.stats.ws_up_at_end;
            out.failed = r.stats.failures.total();
            out.failures = r
                .stats
                .failures
                .named()
                .iter()
                .filter(|(_, k)| *k > 0)
                .map(|(kind, k)| format!("{kind} {k}"))
                .chain(r.stats.status.seen().map(|(s, k)| format!("{s} ×{k}")))
                .collect();
            // In flight at the end: an upgrade not yet answered (a ping
            // in flight on a held connection is rare at one a second).
            let not_up = (n as u64).saturating_sub(out.stayed_up);
            out.waiting = r.stats.aborted.min(not_up);
            out.not_held = not_up - out.waiting;
        }
        Err(e) => out.error = Some(format!("{e:#}")),
    }
    if alive.is_ok() {
        out.rss_held_bytes = sample.map(|s| s.server_rss_peak_bytes).filter(|&b| b > 0);
    }
    out.kib_not_measured = None;
    match per_connection(&out, alive.is_ok()) {
        Ok(k) => out.kib_per_connection = Some(k),
        Err(why) => out.kib_not_measured = Some(why),
    }
    if out.error.is_none() && out.stayed_up < out.requested {
        out.short_of_target = Some(short_of_target(
            running,
            &out,
            alive.err(),
            workers,
            before_fds,
        ));
    }
    super::say(&format!(
        "  {}: {} of {n} WebSocket connections upgraded, {} stayed up, {} waiting, {} neither \
         ({} failed attempts); {}",
        running.name,
        out.upgraded,
        out.stayed_up,
        out.waiting,
        out.not_held,
        out.failed,
        out.kib_per_connection.map_or_else(
            || format!(
                "not measured: {}",
                out.kib_not_measured.as_deref().unwrap_or("")
            ),
            |k| format!("{k:.1} KiB per connection")
        )
    ));
    out
}

/// KiB of RSS per connection that stayed up, or why that is no measurement.
fn per_connection(w: &WsHeld, alive: bool) -> Result<f64, String> {
    if !alive {
        return Err("the server is gone: no RSS to read".into());
    }
    let (Some(before), Some(held)) = (w.rss_before_bytes, w.rss_held_bytes) else {
        return Err("the server's RSS could not be read".into());
    };
    if w.stayed_up == 0 {
        return Err("no connection stayed up".into());
    }
    if held <= before {
        return Err(format!(
            "its RSS did not grow ({:.1} MiB before, {:.1} MiB at most while held): no cost per \
             connection to read",
            before as f64 / 1048576.0,
            held as f64 / 1048576.0
        ));
    }
    Ok((held - before) as f64 / 1024.0 / w.stayed_up as f64)
}

/// Connections still waiting for their 101 on a server that holds every
/// connection (no worker per connection): slow upgrades, or a limit its
/// processes or its log name.
fn not_upgraded_in_time(running: &Running, w: &WsHeld, length: Duration) -> String {
    let at_limit = crate::procfs::tree(&running.pids())
        .iter()
        .filter_map(|s| Some((s.pid, held::descriptors(s.pid)?)))
        .find(|(_, (open, soft))| *open + 8 >= *soft);
    let lines = held::limit_lines(&held::server_logs(running));
    let mut out = format!(
        "{} connections still waited for their 101 when the {:.1} s hold ended ({} upgraded \
         in that time)",
        w.waiting,
        length.as_secs_f64(),
        w.upgraded
    );
    if let Some((pid, (open, soft))) = at_limit {
        out += &format!(": process {pid} has {open} descriptors open, its RLIMIT_NOFILE is {soft}");
    } else if lines.is_empty() {
        out += ": no process of it is at its descriptor limit and its log names no limit (its \
                pace of upgrades on this machine, not a limit it states)";
    }
    if !lines.is_empty() {
        out += &format!("; its log: {}", lines.join(" | "));
    }
    out
}

/// Why fewer than asked stayed up: the model's limit, the server's, a
/// crash, or the harness's own.
fn short_of_target(
    running: &Running,
    w: &WsHeld,
    crashed: Option<anyhow::Error>,
    workers: Option<u32>,
    before_fds: Option<(u64, u64)>,
) -> String {
    if let Some(e) = crashed {
        let e = format!("{e:#}");
        return format!("the server crashed: {}", e.lines().next().unwrap_or(""));
    }
    let mut why = Vec::new();
    if w.waiting > 0 {
        if w.worker_per_connection() {
            why.push(format!(
                "the model's limit: a worker per connection for its lifetime, {} workers, and {} \
                 connections wait for their 101",
                workers.map_or("its".into(), |n| n.to_string()),
                w.waiting
            ));
        } else {
            why.push(not_upgraded_in_time(
                running,
                w,
                hold_length(w.requested as usize),
            ));
        }
    }
    if w.upgraded > w.stayed_up {
        let lines = held::limit_lines(&held::server_logs(running));
        why.push(if lines.is_empty() {
            format!(
                "it closed {} of the upgraded connections",
                w.upgraded - w.stayed_up
            )
        } else {
            format!(
                "it closed {} of the upgraded connections; its log: {}",
                w.upgraded - w.stayed_up,
                lines.join(" | ")
            )
        });
    }
    if w.not_held > 0 {
        let own = before_fds
            .filter(|(open, soft)| open + w.requested + 16 > *soft)
            .map_or(String::new(), |(open, soft)| {
                format!(
                    " (the harness's RLIMIT_NOFILE is {soft} with {open} already open: a limit \
                     of the lab's, not the server's)"
                )
            });
        let lines = held::limit_lines(&held::server_logs(running));
        why.push(format!(
            "{} connections neither held nor waiting: their attempts failed ({}){own}{}",
            w.not_held,
            w.failures.join(", "),
            if lines.is_empty() {
                String::new()
            } else {
                format!("; its log: {}", lines.join(" | "))
            }
        ));
    }
    if why.is_empty() {
        why.push("the hold ended before they were all upgraded".into());
    }
    why.join("; ")
}
