//! The protocols of a comparison (`--protocol`, `--pipeline`, `--streams`):
//! the framings its rows run with, the contract's HTTP/2 rows over each
//! before anything is loaded, and what each run really spoke, read from
//! the engine's result rather than from the arguments. Where a started
//! server serves each, and the answer over it, are the lab's
//! ([`crate::lab::protocol`]), which calibrate's h2 and h3 rows share.

use std::net::SocketAddr;

use workloads::h2rows;

use super::args::{CompareArgs, Protocol};
use super::results::RunFraming;
use crate::engine::{self, Framing};
use crate::lab::protocol::check;
pub use crate::lab::protocol::{apply, check_answer, served};

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

/// The contract's HTTP/2 rows (`harness verify --h2c` / `--h2`, or over
/// HTTP/3 `--h3` for `f` h3) at `addr`, those needing a database only with
/// `has_db`: a one-line tally, and the rows that failed, each with why.
pub fn check_rows(
    running: &crate::catalog::Running,
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
            let allowed = crate::lab::protocol::h2_spoken(r)?;
            let h2 = matches!(r.plan.framing(), Framing::H2(_));
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
