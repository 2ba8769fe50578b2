//! The protocols of a comparison (`--protocol`, `--pipeline`, `--streams`):
//! the framings its rows run with, where a started server serves each
//! (h2c on its HTTP/1.1 port or on a port of its own, h2 by ALPN over
//! TLS, h3 over QUIC on the UDP port of its TCP one's number), the check
//! over HTTP/2 or HTTP/3 before anything is loaded, and what each run
//! really spoke, read from the engine's result rather than from the
//! arguments.

use std::net::SocketAddr;
use std::time::Duration;

use workloads::h2rows;

use super::args::{CompareArgs, Protocol};
use super::results::RunFraming;
use crate::catalog::{Entry, Running};
use crate::engine::{self, Framing, Plan, ProtoPlan, TransportPlan};

/// Every framing the rows run with, in the order asked: one per protocol,
/// one per `--pipeline` depth or `--streams` count for those that take one.
pub fn framings(args: &CompareArgs) -> Vec<Framing> {
    let mut out = Vec::new();
    for &p in &args.protocol {
        let more: Vec<Framing> = match p {
            Protocol::H1 => vec![Framing::H1],
            Protocol::H1Pipelined => args
                .pipeline_depths()
                .into_iter()
                .map(Framing::Pipelined)
                .collect(),
            Protocol::H2c => args.streams.iter().map(|&n| Framing::H2c(n)).collect(),
            Protocol::H2 => args.streams.iter().map(|&n| Framing::H2(n)).collect(),
            Protocol::H3 => args.streams.iter().map(|&n| Framing::H3(n)).collect(),
        };
        for f in more {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// A framing as asked, for rows and settings: `h1`, `h1-pipelined 16`,
/// `h2c 100`, `h2 100`.
pub fn name(f: Framing) -> String {
    match f {
        Framing::H1 => "h1".into(),
        Framing::Pipelined(n) => format!("h1-pipelined {n}"),
        Framing::H2c(n) => format!("h2c {n}"),
        Framing::H2(n) => format!("h2 {n}"),
        Framing::Ws(n) => format!("websocket {n}"),
        Framing::H3(n) => format!("h3 {n}"),
    }
}

/// Whether it is HTTP/2.
pub fn is_h2(f: Framing) -> bool {
    matches!(f, Framing::H2c(_) | Framing::H2(_))
}

/// Whether it is checked by the contract's HTTP/2 rows before it is
/// loaded: HTTP/2 and HTTP/3 (whose rows are HTTP/2's).
pub fn is_multiplexed(f: Framing) -> bool {
    is_h2(f) || matches!(f, Framing::H3(_))
}

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
fn check(
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

/// The contract's HTTP/2 rows (`harness verify --h2c` / `--h2`, or over
/// HTTP/3 `--h3` for `f` h3) at `addr`, those needing a database only with
/// `has_db`: a one-line tally, and the rows that failed, each with why.
pub fn check_rows(
    running: &Running,
    f: Framing,
    addr: SocketAddr,
    has_db: bool,
) -> (String, Vec<String>) {
    let h3 = matches!(f, Framing::H3(_));
    let all = if h3 {
        crate::verify_h3::rows()
    } else {
        h2rows::rows()
    };
    let rows: Vec<h2rows::Row> = all.into_iter().filter(|r| has_db || !r.needs_db).collect();
    let what = if h3 {
        format!("h3 on udp {addr} (harness verify --h3)")
    } else if running.tls.is_some() {
        format!("h2 by ALPN on {addr} (harness verify --h2)")
    } else {
        format!("h2c on {addr} (harness verify --h2c)")
    };
    match check(running, f, addr, &rows) {
        Ok(verdicts) => {
            let failed: Vec<String> = verdicts
                .iter()
                .filter_map(|v| v.result.as_ref().err().map(|e| format!("{}: {e}", v.name)))
                .collect();
            (
                format!(
                    "{what}: {}/{} rows pass{}",
                    verdicts.len() - failed.len(),
                    verdicts.len(),
                    if has_db {
                        ""
                    } else {
                        " (no database in this run: its rows not checked)"
                    }
                ),
                failed,
            )
        }
        Err(e) => (format!("{what}: not checked: {e}"), Vec::new()),
    }
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

/// What a run really spoke, from the engine's result: HTTP/2 only where
/// a SETTINGS frame came back (and, over TLS, ALPN picked h2), with the
/// streams it allowed; `Err` why not, for a run asked to speak HTTP/2.
pub fn record(r: &engine::RunResult) -> Result<RunFraming, String> {
    let alpn = r.stats.tls.as_ref().and_then(|t| t.alpn.clone());
    let (protocol, in_flight, streams_asked) = match r.plan.framing() {
        Framing::H1 => ("http/1.1", 1, None),
        Framing::Ws(n) => ("websocket", u32::from(n), None),
        Framing::Pipelined(n) => ("http/1.1-pipelined", u32::from(n), None),
        Framing::H3(n) => ("h3", u32::from(n), Some(u32::from(n))),
        Framing::H2c(n) | Framing::H2(n) => {
            let Some(allowed) = r.stats.h2_streams else {
                return Err(format!(
                    "no HTTP/2 was spoken: the server sent no SETTINGS frame{}",
                    r.stats
                        .tls_error
                        .as_deref()
                        .map_or(String::new(), |e| format!(" ({e})"))
                ));
            };
            let h2 = matches!(r.plan.framing(), Framing::H2(_));
            if h2 && alpn.as_deref() != Some("h2") {
                return Err(format!(
                    "no h2 was spoken: ALPN picked {}",
                    alpn.as_deref().unwrap_or("nothing")
                ));
            }
            (if h2 { "h2" } else { "h2c" }, allowed, Some(u32::from(n)))
        }
    };
    Ok(RunFraming {
        protocol: protocol.into(),
        in_flight,
        streams_asked,
        alpn,
    })
}

/// A row's framing, for the table: `h2c ×16` (the streams the server's
/// SETTINGS allowed, fewest over the runs), `h1-pipelined ×16`; empty for
/// plain HTTP/1.1. `asked` where no run recorded one.
pub fn phrase(asked: Option<&str>, runs: &[RunFraming]) -> String {
    let Some(first) = runs.first() else {
        return asked.unwrap_or("").to_string();
    };
    if first.protocol == "http/1.1" {
        return String::new();
    }
    let fewest = runs
        .iter()
        .map(|r| r.in_flight)
        .min()
        .unwrap_or(first.in_flight);
    let proto = if first.protocol == "http/1.1-pipelined" {
        "h1-pipelined"
    } else {
        first.protocol.as_str()
    };
    match first.streams_asked.filter(|&a| a > fewest) {
        Some(a) => format!("{proto} ×{fewest} (of {a} asked)"),
        None => format!("{proto} ×{fewest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framings_sweep_each_protocol_over_its_list() {
        let mut args = <CompareArgs as clap::FromArgMatches>::from_arg_matches(
            &<CompareArgs as clap::Args>::augment_args(clap::Command::new("t")).get_matches_from([
                "t",
                "--protocol",
                "h1,h2c,h1-pipelined",
                "--streams",
                "1,16",
            ]),
        )
        .unwrap();
        assert_eq!(
            framings(&args),
            [
                Framing::H1,
                Framing::H2c(1),
                Framing::H2c(16),
                Framing::Pipelined(16)
            ]
        );
        args.protocol = vec![Protocol::H2, Protocol::H2];
        assert_eq!(framings(&args), [Framing::H2(1), Framing::H2(16)]);
        assert_eq!(name(Framing::H2c(16)), "h2c 16");
        args.protocol = vec![Protocol::H2, Protocol::H3];
        assert_eq!(
            framings(&args),
            [
                Framing::H2(1),
                Framing::H2(16),
                Framing::H3(1),
                Framing::H3(16)
            ]
        );
        assert!(is_multiplexed(Framing::H3(1)) && !is_h2(Framing::H3(1)));
        assert_eq!(name(Framing::H3(16)), "h3 16");
    }

    #[test]
    fn the_phrase_says_what_the_server_allowed() {
        let f = |p: &str, n, asked| RunFraming {
            protocol: p.into(),
            in_flight: n,
            streams_asked: asked,
            alpn: None,
        };
        assert_eq!(
            phrase(Some("h2c 100"), &[f("h2c", 100, Some(100))]),
            "h2c ×100"
        );
        assert_eq!(
            phrase(
                Some("h2c 200"),
                &[f("h2c", 128, Some(200)), f("h2c", 100, Some(200))]
            ),
            "h2c ×100 (of 200 asked)"
        );
        assert_eq!(phrase(None, &[f("http/1.1", 1, None)]), "");
        assert_eq!(phrase(Some("h2 16"), &[]), "h2 16");
    }
}
