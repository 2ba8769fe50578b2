//! Experiment 7, head-of-line blocking: the same requests in flight as
//! HTTP/2 over TLS and as HTTP/3 over QUIC, at 0 %, 0.5 % and 2 % packet
//! loss.
//!
//! HTTP/2 puts every stream of a connection behind one TCP byte stream: a
//! lost segment holds back every byte after it, whichever streams they
//! belong to, until it is resent. QUIC delivers each stream on its own, so
//! a lost packet holds back only the streams it carried. The load is one
//! connection of each protocol with [`STREAMS`] streams in flight, the
//! shape a browser uses (one connection per origin) and the one where
//! every stream shares the loss: with more connections each lost segment
//! stalls a smaller share of the requests in flight, the effect the same
//! in kind and smaller in the tail.
//!
//! The server runs in a network namespace the experiment builds
//! (`env::bridge`, as `--env bridge-direct`: veth + Linux bridge, 198.18.x.2),
//! started with TLS and `--h3`; the load goes from the host to that address
//! only. The loss is nftables' `numgen random mod 1000 < N drop` in the
//! bridge's own table, on both directions, TCP and UDP alike (netem is not
//! in every kernel; this one's is not), and its counters are the evidence
//! that the loss was applied: packets crossed and dropped per cell, from
//! the loss's start, after the handshakes, within the warm-up. Beside
//! them, what each transport saw: QUIC's lost packets (quinn-proto's
//! count, the generator's side) and the server's TCP retransmissions,
//! timeouts and tail-loss probes (the namespace's own counters, which only
//! the server uses). Namespace, links and table are removed after, also on
//! error and on Ctrl-C (the bridge's teardown and signal path).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use super::document::{HeadOfLine, HolCell};
use super::measure::{quiesce, TIMEOUT};
use crate::catalog::{Entry, Running};
use crate::engine::{self, Control, ProtoPlan, RunResult, TlsVersion};
use crate::env::Environment;
use crate::lab::{load, Lab};
use crate::stats::Percentiles;

/// Connections of each protocol.
pub const CONNECTIONS: u32 = 1;
/// Streams in flight on each.
pub const STREAMS: u16 = 16;
/// The losses, in packets per thousand, each direction.
pub const LOSS_PER_MILLE: [u32; 3] = [0, 5, 20];
/// The path loaded: the smallest response, so that a response is one
/// packet and the stall, not the transfer, is what the tail shows.
pub const PATH: &str = "/hello";
/// A response slower than this was held back by a loss: above the p99
/// without loss here (1-11 ms on a busy 2-core VM), below QUIC's probe
/// timeout at loopback RTTs (~25 ms: the peer's max ACK delay) and far
/// below TCP's 200 ms floor, so both protocols' stalls are counted.
pub const STALL_MS: f64 = 20.0;
/// Before the measured `length` (the engine adds it): the handshakes stay
/// out of the figures.
const WARMUP: Duration = Duration::from_millis(500);
/// When the loss starts, within the warm-up: after the handshakes. A lost
/// SYN waits 1 s, a lost first flight a timeout with no RTT sample yet
/// (TCP's 1 s, QUIC's ~1 s from its 333 ms initial RTT): one connection
/// losing its handshake would spend a short run waiting for it, which is
/// the cost of a handshake, not head-of-line blocking.
const LOSS_AFTER: Duration = Duration::from_millis(250);

/// The prediction, stated before the numbers.
pub const PREDICTION: &str = "with loss, h2's p99 grows with the streams sharing its connection \
     (one lost segment stalls all of them behind TCP's in-order delivery); h3's grows less \
     (QUIC stalls only the stream that lost it)";

/// Whether the experiment can run here, or why not (root, `ip`, `nft`).
pub fn availability() -> Result<(), String> {
    Environment::BridgeDirect.availability()
}

fn say(line: &str) {
    super::say(line);
}

fn empty(entry: &Entry, network: &str) -> HeadOfLine {
    HeadOfLine {
        server: entry.name.clone(),
        model: entry.model.into(),
        path: PATH.into(),
        connections: CONNECTIONS,
        streams: u32::from(STREAMS),
        prediction: PREDICTION.into(),
        stall_ms: STALL_MS,
        network: network.into(),
        cells: Vec::new(),
        error: None,
    }
}

/// The experiment on each of `servers` that serves HTTP/3; the others are
/// named with the catalog's reason. `lab` is turned to TLS and h3 for the
/// rest of the session (run it last).
pub fn measure_all(lab: &mut Lab, servers: &[Entry], length: Duration) -> Vec<HeadOfLine> {
    let mut out = Vec::new();
    if let Err(why) = availability() {
        say(&format!("head-of-line: refused: it {why}"));
        for e in servers {
            let mut h = empty(e, "");
            h.error = Some(format!("refused: it {why}"));
            out.push(h);
        }
        return out;
    }
    let (serving, not): (Vec<&Entry>, Vec<&Entry>) =
        servers.iter().partition(|e| e.http3().is_ok());
    for e in not {
        let why = e.http3().err().unwrap_or_default();
        say(&format!(
            "head-of-line: {}: does not serve h3: {why}",
            e.name
        ));
        let mut h = empty(e, "");
        h.error = Some(format!("does not serve h3: {why}"));
        out.push(h);
    }
    if serving.is_empty() {
        return out;
    }
    // Every server from here on terminates TLS and serves h3 when asked.
    let placed = match lab.use_tls(TlsVersion::Tls13) {
        Ok(()) => {
            lab.h3 = true;
            lab.place(Environment::BridgeDirect, Some(1))
                .map_err(|e| format!("{e:#}"))
        }
        Err(e) => Err(format!("{e:#}")),
    };
    let placed = match placed {
        Ok(p) => p,
        Err(why) => {
            say(&format!("head-of-line: the namespace: {why}"));
            for e in serving {
                let mut h = empty(e, "");
                h.error = Some(format!("the namespace could not be built: {why}"));
                out.push(h);
            }
            return out;
        }
    };
    let detail = placed.detail().unwrap_or_default();
    for e in serving {
        if lab.interrupted() {
            break;
        }
        let mut h = empty(e, &detail);
        match placed.start(lab, e) {
            Ok(started) => {
                let mut running = started.running;
                let bridge = placed
                    .setup
                    .as_ref()
                    .and_then(crate::env::Setup::bridge)
                    .expect("bridge-direct has a bridge");
                h.network = format!(
                    "{detail}; server at {}, TCP and UDP; loss by nft numgen in table ip {} \
                     on {}, both ways",
                    started.route, bridge.table, bridge.bridge
                );
                match h3_addr(&running) {
                    Ok(_) => cells(lab, bridge, &running, length, &mut h),
                    Err(why) => h.error = Some(why),
                }
                // Back to no loss before the server is stopped.
                let _ = bridge.set_loss(0);
                for n in running.stop() {
                    say(&format!("  {}: {n}", e.name));
                }
            }
            Err(err) => h.error = Some(format!("did not start: {err:#}")),
        }
        if let Some(why) = &h.error {
            say(&format!("head-of-line: {}: {why}", e.name));
        }
        out.push(h);
    }
    for err in placed.close() {
        say(&format!("head-of-line: teardown: {err}"));
    }
    out
}

/// Where `running` serves h3: its `/config`'s `h3 on udp ADDR`, which must
/// be its TCP port's number (where the engine's QUIC goes).
fn h3_addr(running: &Running) -> Result<SocketAddr, String> {
    let config = running
        .config()
        .map_err(|e| format!("its /config could not be read: {e}"))?;
    let udp = config
        .protocols
        .iter()
        .find_map(|p| p.strip_prefix("h3 on udp "))
        .and_then(|a| a.split_whitespace().next())
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .ok_or_else(|| {
            format!(
                "does not serve h3 as started: its /config lists {:?}",
                config.protocols
            )
        })?;
    if udp.port() != running.addr.port() {
        return Err(format!(
            "serves h3 on udp {udp}, not on its TCP port's number {}",
            running.addr.port()
        ));
    }
    Ok(udp)
}

/// Each loss, each protocol: the loss set (its counters at 0), one run,
/// the counters read.
fn cells(
    lab: &Lab,
    bridge: &crate::env::bridge::Bridge,
    running: &Running,
    length: Duration,
    h: &mut HeadOfLine,
) {
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    let server_pid = running.pids().first().copied();
    for per_mille in LOSS_PER_MILLE {
        for protocol in ["h2", "h3"] {
            if lab.interrupted() {
                return;
            }
            let mut cell = HolCell {
                protocol: protocol.into(),
                loss_pct: f64::from(per_mille) / 10.0,
                ..HolCell::default()
            };
            // Probes, handshakes and the previous cell's closes at no loss.
            let _ = bridge.set_loss(0);
            quiesce(running);
            let tcp_before = server_pid.map(tcp_counters);
            let plan = plan(lab, running, protocol, length);
            let (result, lossy) = std::thread::scope(|s| {
                let lossy = s.spawn(|| {
                    std::thread::sleep(LOSS_AFTER);
                    bridge.set_loss(per_mille)
                });
                let r = engine::run(&plan, &control, &mut |_| {});
                (r, lossy.join())
            });
            if let Err(e) =
                lossy.unwrap_or_else(|_| Err(anyhow::anyhow!("the loss thread panicked")))
            {
                cell.error = Some(format!("{e:#}"));
            }
            let counters = bridge.loss_counters();
            let _ = bridge.set_loss(0);
            let tcp_after = server_pid.map(tcp_counters);
            match counters {
                Ok(c) => {
                    cell.path_packets = c.packets;
                    cell.dropped_packets = c.dropped;
                }
                Err(e) => cell.error = Some(format!("the loss counters: {e:#}")),
            }
            if protocol == "h2" {
                if let (Some(a), Some(b)) = (&tcp_before, &tcp_after) {
                    let d = |k: &str| Some(b.get(k)?.saturating_sub(*a.get(k)?));
                    cell.tcp_retransmits = d("RetransSegs");
                    cell.tcp_timeouts = d("TCPTimeouts");
                    cell.tcp_loss_probes = d("TCPLossProbes");
                }
            }
            match result {
                Ok(r) if cell.error.is_none() => fill(&mut cell, &r),
                Ok(_) => {}
                Err(e) => cell.error = Some(format!("{e:#}")),
            }
            say(&format!(
                "  {} {PATH} {protocol} {CONNECTIONS} × {STREAMS} at {}% loss: {:.0} req/s, \
                 p50 {:.2} ms, p99 {:.1} ms, {} over {STALL_MS} ms, {} failed; \
                 nft dropped {} of {} packets{}{}",
                running.name,
                cell.loss_pct,
                cell.rps,
                cell.p50_ms,
                cell.p99_ms,
                cell.stalled,
                cell.failed,
                cell.dropped_packets,
                cell.path_packets,
                cell.quic_lost_packets
                    .map_or(String::new(), |n| format!(", QUIC lost {n}")),
                cell.tcp_retransmits
                    .map_or(String::new(), |n| format!(", server TCP retransmitted {n}")),
            ));
            if let Some(e) = &cell.error {
                say(&format!("    {e}"));
            }
            h.cells.push(cell);
        }
    }
}

/// `GET /hello` on one connection with [`STREAMS`] streams, as h2 over the
/// server's TLS or as h3 on the UDP port of the same number.
fn plan(lab: &Lab, running: &Running, protocol: &str, length: Duration) -> engine::Plan {
    let shape = load::Shape {
        connections: CONNECTIONS as usize,
        threads: 1,
        keepalive: true,
        timeout: TIMEOUT,
        io: lab.io,
        gather: lab.gather,
    };
    let mut plan = load::plan(running, PATH, &shape, length);
    plan.warmup = WARMUP;
    plan.proto = if protocol == "h3" {
        ProtoPlan::H3 { streams: STREAMS }
    } else {
        ProtoPlan::H2 { streams: STREAMS }
    };
    plan
}

/// A run's figures into its cell.
fn fill(cell: &mut HolCell, r: &RunResult) {
    let p = Percentiles::of(&r.stats.latency_us);
    cell.ok = r.stats.ok;
    cell.rps = r.ok_per_s();
    cell.p50_ms = p.p50 as f64 / 1000.0;
    cell.p99_ms = p.p99 as f64 / 1000.0;
    cell.max_ms = p.max as f64 / 1000.0;
    let h = &r.stats.latency_us;
    let over = (STALL_MS * 1000.0) as u64;
    cell.stalled = if !h.is_empty() && h.max() >= over {
        h.count_between(over, h.max())
    } else {
        0
    };
    cell.failed = r.stats.failures.total();
    if cell.failed > 0 {
        let kinds: Vec<String> = r
            .stats
            .failures
            .named()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        cell.failures = Some(format!(
            "{}{}",
            kinds.join(", "),
            r.message
                .as_deref()
                .map_or(String::new(), |m| format!(" ({m})"))
        ));
    }
    if let Some(q) = &r.stats.quic {
        cell.quic_lost_packets = Some(q.lost_packets);
        cell.quic_sent_packets = Some(q.sent_packets);
    }
    if r.stats.ok == 0 && cell.error.is_none() {
        cell.error = Some(format!(
            "nothing verified{}",
            r.message
                .as_deref()
                .map_or(String::new(), |m| format!(": {m}"))
        ));
    }
}

/// The TCP counters of `pid`'s network namespace (`/proc/PID/net/snmp`'s
/// `Tcp:` and `net/netstat`'s `TcpExt:` lines), by name; empty where
/// unreadable.
fn tcp_counters(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (file, prefix) in [("snmp", "Tcp:"), ("netstat", "TcpExt:")] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).unwrap_or_default();
        out.extend(header_values(&text, prefix));
    }
    out
}

/// `/proc/net/snmp`'s layout: a line of names, then one of values, each
/// starting with `prefix`.
fn header_values(text: &str, prefix: &str) -> BTreeMap<String, u64> {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    let mut out = BTreeMap::new();
    if let [names, values, ..] = lines[..] {
        for (n, v) in names
            .split_whitespace()
            .skip(1)
            .zip(values.split_whitespace().skip(1))
        {
            if let Ok(v) = v.parse() {
                out.insert(n.to_string(), v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_counters_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RetransSegs\nTcp: 1 200 42\n";
        let c = header_values(snmp, "Tcp:");
        assert_eq!(c.get("RetransSegs"), Some(&42));
        assert_eq!(c.get("RtoMin"), Some(&200));
        assert!(header_values(snmp, "TcpExt:").is_empty());
        // Our own namespace's counters are there to read.
        let mine = tcp_counters(std::process::id());
        assert!(mine.contains_key("RetransSegs"), "{mine:?}");
    }
}
