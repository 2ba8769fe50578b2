//! Where a started server serves HTTP/2 and HTTP/3, shared by the
//! commands that load over them (`compare --protocol`, calibrate's
//! `tls-server/h2` and `tls-server/h3` rows): h2c on its HTTP/1.1 port or
//! on a port of its own, h2 by ALPN over TLS, h3 over QUIC on the UDP port
//! of its TCP one's number; the contract's answer over it before anything
//! is loaded; a plan pointed and framed for it.

use std::net::SocketAddr;
use std::time::Duration;

use workloads::h2rows;

use crate::catalog::{Entry, Running};
use crate::engine::{Framing, Plan, ProtoPlan, RunResult, TransportPlan};

/// Where `running` is loaded with `f`: `Ok(addr)`, or why it does not
/// serve it (the row is then `not_served`). h2c: its port of its own
/// ([`Running::h2c`]), else its HTTP/1.1 port where its `/config` lists
/// `h2c`. h2: its TLS port, where a handshake offering only `h2` by ALPN
/// gets `h2` back. h3: where the catalog says `entry` serves HTTP/3
/// ([`Entry::http3`]) and its `/config` lists h3 on the UDP port of its
/// TCP one's number (the engine's QUIC goes to that number). `loopback`:
/// whether the run's environment reaches a server's second port (bare and
/// pinned).
pub fn served(
    entry: &Entry,
    running: &Running,
    f: Framing,
    loopback: bool,
) -> Result<SocketAddr, String> {
    match f {
        Framing::H3(_) => served_h3(entry, running),
        Framing::H2c(_) => {
            if let Some(addr) = running.h2c {
                if !loopback {
                    return Err("does not serve h2c here: its h2c has a port of its own, \
                                which only --env bare and pinned reach"
                        .into());
                }
                return Ok(addr);
            }
            match running.config() {
                Ok(c) if c.protocols.iter().any(|p| p == "h2c") => Ok(running.addr),
                Ok(c) => Err(format!(
                    "does not serve h2c: {}",
                    c.http2_unsupported
                        .unwrap_or_else(|| format!("its /config lists {:?}", c.protocols))
                )),
                Err(e) => Err(format!("does not serve h2c: its /config: {e}")),
            }
        }
        Framing::H2(_) => {
            let Some(tls) = &running.tls else {
                return Err("h2 is HTTP/2 over TLS: the server does not terminate TLS".into());
            };
            let mut h2 = tls.clone();
            h2.h2 = true;
            let alpn = crate::lab::tls_relay::handshake(running.addr, &h2, Duration::from_secs(5))
                .map(|n| n.alpn);
            match alpn {
                Ok(Some(a)) if a == "h2" => Ok(running.addr),
                other => {
                    let picked = match other {
                        Ok(Some(a)) => format!("its TLS picked {a} by ALPN, not h2"),
                        Ok(None) => {
                            "its TLS picked no protocol by ALPN when offered only h2".into()
                        }
                        Err(e) => format!("offered only h2 by ALPN, its TLS refused: {e:#}"),
                    };
                    let why = running.config().ok().and_then(|c| c.http2_unsupported);
                    Err(match why {
                        Some(why) => format!("does not serve h2: {why} ({picked})"),
                        None => format!("does not serve h2: {picked}"),
                    })
                }
            }
        }
        _ => Ok(running.addr),
    }
}

/// h3: the catalog's word on `entry`, then its `/config`'s `h3 on udp
/// ADDR`, whose port must be `running`'s TCP one.
fn served_h3(entry: &Entry, running: &Running) -> Result<SocketAddr, String> {
    if let Err(why) = entry.http3() {
        return Err(format!("does not serve h3: {why}"));
    }
    if running.tls.is_none() {
        return Err("h3 is HTTP/3 over QUIC: the server does not terminate TLS".into());
    }
    let config = running
        .config()
        .map_err(|e| format!("does not serve h3: its /config: {e}"))?;
    let udp = config
        .protocols
        .iter()
        .find_map(|p| p.strip_prefix("h3 on udp "))
        .map(|rest| rest.split_whitespace().next().unwrap_or(""));
    match udp.map(str::parse::<SocketAddr>) {
        Some(Ok(udp)) if udp.port() == running.addr.port() => Ok(running.addr),
        Some(Ok(udp)) => Err(format!(
            "does not serve h3 where it is reached: its QUIC is on udp {udp}, \
             the engine's goes to udp port {}",
            running.addr.port()
        )),
        Some(Err(_)) | None => Err(format!(
            "does not serve h3 as started here: its /config lists {:?}",
            config.protocols
        )),
    }
}

/// `GET path` once over HTTP/2 at `addr` (h2 by ALPN when `running`
/// terminates TLS), or over HTTP/3 for `f` h3, judged by the contract: a
/// cell is loaded over HTTP/2 or HTTP/3 only after its answer over it is
/// right.
pub fn check_answer(
    running: &Running,
    f: Framing,
    addr: SocketAddr,
    path: &str,
) -> Result<(), String> {
    let row = h2rows::Row {
        name: format!("h2 GET {path}"),
        requests: vec![h2rows::Request {
            method: "GET",
            target: path.to_string(),
            body: Vec::new(),
            expected: workloads::expect("GET", path),
        }],
        needs_db: false,
    };
    let over = if matches!(f, Framing::H3(_)) {
        "HTTP/3"
    } else {
        "HTTP/2"
    };
    let verdicts = check(running, f, addr, &[row]).map_err(|e| format!("over {over}: {e}"))?;
    match verdicts.into_iter().next().map(|v| v.result) {
        Some(Ok(())) => Ok(()),
        Some(Err(why)) => Err(format!("over {over} at {addr}: {why}")),
        None => Err(format!("over {over} at {addr}: no verdict")),
    }
}

/// `rows` at `addr`: over HTTP/3 ([`crate::verify_h3`]) for h3, else over
/// HTTP/2 ([`crate::verify_h2`]).
pub fn check(
    running: &Running,
    f: Framing,
    addr: SocketAddr,
    rows: &[h2rows::Row],
) -> Result<Vec<h2rows::Verdict>, String> {
    let timeout = Duration::from_secs(10);
    match (f, &running.tls) {
        (Framing::H3(_), Some(tls)) => {
            let peer = crate::verify_h3::Peer {
                addr,
                authority: running.authority.clone(),
                tls: tls.clone(),
            };
            crate::verify_h3::check(&peer, rows, timeout)
        }
        (Framing::H3(_), None) => Err(anyhow::anyhow!("h3 needs TLS")),
        _ => crate::verify_h2::check(addr, running.tls.as_ref(), rows, timeout),
    }
    .map_err(|e| format!("{e:#}"))
}

/// Points `plan` (built for `running`'s HTTP/1.1 port) at `addr` and frames
/// it as `f`; over TLS, h2 is offered alone by ALPN.
pub fn apply(plan: &mut Plan, running: &Running, f: Framing, addr: SocketAddr, path: &str) {
    // h2c runs over the server's plaintext port: the transport follows.
    if matches!(f, Framing::H2c(_)) {
        plan.transport = TransportPlan::Tcp;
    }
    // Every framing the rows sweep is one that needs no other settings.
    if let Some(proto) = ProtoPlan::from_framing(f) {
        plan.proto = proto;
    }
    if addr != running.addr {
        plan.addr = addr;
        plan.authority = addr.to_string();
        plan.url = format!("http://{addr}{path}");
    }
}

/// Whether a run asked to speak HTTP/2 did, from the engine's result: a
/// SETTINGS frame came back and, over TLS, ALPN picked `h2`. The streams
/// the server allowed, or why no HTTP/2 was spoken.
pub fn h2_spoken(r: &RunResult) -> Result<u32, String> {
    let Some(allowed) = r.stats.h2_streams else {
        return Err(format!(
            "no HTTP/2 was spoken: the server sent no SETTINGS frame{}",
            r.stats
                .tls_error
                .as_deref()
                .map_or(String::new(), |e| format!(" ({e})"))
        ));
    };
    let alpn = r.stats.tls.as_ref().and_then(|t| t.alpn.as_deref());
    if matches!(r.plan.framing(), Framing::H2(_)) && alpn != Some("h2") {
        return Err(format!(
            "no h2 was spoken: ALPN picked {}",
            alpn.unwrap_or("nothing")
        ));
    }
    Ok(allowed)
}
