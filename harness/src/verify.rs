//! `harness verify`: every row of the contract (docs/ARCHITECTURE.md §2), as listed and
//! run by [`workloads::contract`], and with `--conformance` the section on
//! HTTP/1.1 itself ([`workloads::conformance`]). Prints a verdict per row
//! with what differed (for conformance rows, what was found and the RFC
//! section), then the conformance table: pass / warn / fail per group. The
//! exit code is non-zero if any contract row or MUST row fails.

use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use workloads::contract::Outcome;

use crate::catalog::deviations::{self, Reading};
use crate::engine::{TlsPlan, Trust};
use crate::lab::contract::{check_all, check_conformance, Verdict};
use crate::lab::record::ConformanceCheck;
use crate::lab::tls_relay::{check_handshake, Relay};
use crate::report::align;
use crate::target::Target;
use crate::units::parse_duration;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sends one request per contract row (every endpoint, HEAD, 404, 405, bad
query values, a malformed request, an oversized header, HTTP/1.0 with and
without keep-alive, keep-alive reuse, pipelining, POST /echo bodies up to
1 MiB by Content-Length and chunked, 413 beyond, bad chunk framing) and
judges each answer (an echo byte for byte against the body sent)
with workloads::verify. Prints PASS or FAIL per row, with what differed.
/db and /work rows need the server's database to be up.

--conformance adds the conformance section: how the server treats HTTP/1.1
itself (RFC 9112 and RFC 9110), in four groups — request line, header
fields, bodies (Content-Length, chunked), connections (pipelining, close,
Upgrade, CONNECT, half-close). Each row cites its section: a deviation from
a MUST fails, from a SHOULD warns; every row says what the server did. It
asks for /hello (GET *, a raw byte above 0x7F in the target, CONNECT and an
empty Host among its rows), and its body-framing rows post to /echo
(Content-Length with Transfer-Encoding, repeated Content-Length, bad
chunk-size lines, chunk extensions outside RFC 9112 §7.1.1's grammar, a
trailer section ended by a bare LF),
where the echo shows which framing won; a server without /echo is judged
by its refusal, so it runs against any server. Not run by default:
it judges the HTTP layer, not the contract, and a server you did not write
(Swoole, Node.js) is reported, not patched around.

An https:// target is checked over TLS: each row's connection is one TLS
connection to the server (through a relay on loopback that turns the rows'
bytes into TLS records and back, the client's half-close into close_notify),
trusting --cacert FILE's CAs, the public CAs, or with --insecure any
certificate.

A server whose /config names a core with known deviations (swoole:
Swoole's reactor; roadrunner, frankenphp: Go's net/http) has the rows
that core is known to fail marked CORE, with the core's reason: reported,
not counted as failures of the server's code. Likewise in the conformance
section for php-fpm (nginx 1.22.1 in front): a row nginx is listed to fail
says so, and does not fail the exit code.

Then the WebSocket rows (/ws echo: text, binary, fragmented, ping/pong,
close handshake, 64 KiB, over 64 KiB -> close 1009, a bad handshake -> 400;
/ws/room: two members, both messages, one order) where the server's /config
says it serves WebSocket; where it does not, the reason its /config gives.

Exits non-zero if any contract, WebSocket or MUST row fails (warnings and
CORE rows do not).

--h2c (http://) and --h2 (https://, ALPN h2) run the contract over HTTP/2
instead: its single requests, /echo bodies up to 1 MiB and 413 beyond, and
100 streams in flight on one connection, each row on a connection of its
own; HTTP/1.1's framing rows have no HTTP/2 counterpart.

--h3 (https://) runs the same rows over HTTP/3: QUIC to the UDP port of the
URL's number, ALPN h3, --cacert/--insecure as for TLS. A port with no QUIC
answer within 2 s, or a certificate not trusted, is one line and exit 1.

Examples:
  harness verify http://127.0.0.1:8082
  harness verify --h2c http://127.0.0.1:8082
  harness verify --h3 https://127.0.0.1:8443 --cacert lab/ca.pem
  harness verify --conformance http://127.0.0.1:8082
  harness verify --conformance --timeout 3s http://127.0.0.1:9501
  harness verify https://127.0.0.1:8443 --cacert lab/ca.pem")]
pub struct VerifyArgs {
    /// The server: http://host:port (a path, if any, is ignored).
    pub target: String,

    /// How long each row waits for its answer.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Also run the conformance section (RFC 9112 / 9110): pass / warn /
    /// fail per group.
    #[arg(long)]
    pub conformance: bool,

    /// https: trust only the CAs in this PEM file (e.g. `harness certs`' ca.pem).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,

    /// https: accept any server certificate.
    #[arg(long)]
    pub insecure: bool,

    /// Run the contract over HTTP/2 by prior knowledge (h2c) instead, on
    /// an http:// target (crate::verify_h2).
    #[arg(long, conflicts_with_all = ["h2", "conformance"])]
    pub h2c: bool,

    /// Run the contract over HTTP/2 by ALPN (h2) instead, on an https://
    /// target.
    #[arg(long, conflicts_with = "conformance")]
    pub h2: bool,

    /// Run the contract over HTTP/3 (QUIC, ALPN h3) instead, on an https://
    /// target's UDP port of that number (crate::verify_h3).
    #[arg(long, conflicts_with_all = ["h2", "h2c", "conformance"])]
    pub h3: bool,
}

/// The `verify` command.
pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let target = Target::parse(&args.target).context("bad verify target")?;
    if args.h3 {
        return verify_h3(&target, &args);
    }
    TcpStream::connect_timeout(&target.addr, args.timeout)
        .with_context(|| format!("cannot connect to {}", target.addr))?;
    if args.h2c || args.h2 {
        return verify_h2(&target, &args);
    }
    // Over TLS the rows go through a relay on loopback (lab::tls_relay).
    let relay = if target.tls {
        let mut tls = TlsPlan::new(&target.host);
        tls.trust = match (&args.cacert, args.insecure) {
            (Some(path), _) => TlsPlan::cas_from_file(path).map_err(anyhow::Error::msg)?,
            (None, true) => Trust::Any,
            (None, false) => Trust::Public,
        };
        check_handshake(target.addr, &tls, args.timeout)?;
        Some(Relay::start(target.addr, &tls)?)
    } else {
        if args.cacert.is_some() || args.insecure {
            anyhow::bail!("--cacert and --insecure are for https:// targets");
        }
        None
    };
    let addr = relay.as_ref().map_or(target.addr, Relay::addr);
    let scheme = if target.tls { "https" } else { "http" };
    println!(
        "verify {scheme}://{} against the contract",
        target.authority
    );
    let core = server_core(addr);
    if let Some(c) = core {
        println!(
            "its /config names a server built on {}: the rows its core is known to fail \
             are marked CORE, not FAIL (harness/src/catalog/deviations.rs; {})",
            c.name, c.source
        );
    }
    let verdicts = check_all(addr, args.timeout);
    let width = verdicts.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let (mut passed, mut failed, mut known) = (0, 0, 0);
    for v in &verdicts {
        match deviations::read(core, &v.name, &v.result) {
            Reading::Pass => {
                passed += 1;
                println!("PASS  {}", v.name)
            }
            Reading::Fail(why) => {
                failed += 1;
                println!("FAIL  {:<width$}  {why}", v.name);
            }
            Reading::Known(d) => {
                known += 1;
                println!(
                    "CORE  {:<width$}  {} ({})",
                    v.name,
                    v.result.as_ref().err().map_or("", String::as_str),
                    core.map(|c| c.explain(d)).unwrap_or_default()
                );
            }
            Reading::KnownButOtherwise(d, why) => {
                failed += 1;
                println!(
                    "FAIL  {:<width$}  {why} (its core is known to fail this row otherwise: {})",
                    v.name, d.symptom
                );
            }
            Reading::KnownNowPasses(d) => {
                passed += 1;
                println!(
                    "PASS  {:<width$}  (listed as its core's known deviation: {}; fixed upstream?)",
                    v.name, d.reason
                );
            }
        }
    }
    println!(
        "{} rows: {passed} passed, {failed} failed{}",
        verdicts.len(),
        match core {
            Some(c) if known > 0 => format!(", {known} known deviations of {}'s core", c.name),
            _ => String::new(),
        }
    );
    let (text, ws_failed) = websocket(addr, args.timeout);
    print!("{text}");
    failed += ws_failed;
    if args.conformance {
        println!(
            "\nconformance of {scheme}://{} to HTTP/1.1 (RFC 9112, RFC 9110)",
            target.authority
        );
        let verdicts = check_conformance(addr, args.timeout);
        // nginx's rows where nginx fronts the server, else the core the
        // contract's rows were read against (RoadRunner's http plugin).
        let core = conformance_core(addr).or(core);
        print!("{}", conformance_text(&verdicts, core));
        failed += ConformanceCheck::from_verdicts(&verdicts, core).own_failures();
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--h2c` / `--h2`: the contract's HTTP/2 rows.
fn verify_h2(target: &Target, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let tls = match (target.tls, args.h2c, args.h2) {
        (false, true, _) => None,
        (true, _, true) => {
            let mut tls = TlsPlan::new(&target.host);
            tls.trust = match (&args.cacert, args.insecure) {
                (Some(path), _) => TlsPlan::cas_from_file(path).map_err(anyhow::Error::msg)?,
                (None, true) => Trust::Any,
                (None, false) => Trust::Public,
            };
            Some(tls)
        }
        (false, _, _) => anyhow::bail!(
            "--h2 is HTTP/2 by ALPN over TLS: give an https:// target (--h2c for http://)"
        ),
        (true, _, _) => anyhow::bail!(
            "--h2c is HTTP/2 in the clear: give an http:// target (--h2 for https://)"
        ),
    };
    println!(
        "verify {}://{} against the contract over HTTP/2 ({})",
        if target.tls { "https" } else { "http" },
        target.authority,
        if tls.is_some() {
            "h2 by ALPN"
        } else {
            "h2c by prior knowledge"
        }
    );
    crate::verify_h2::run(target.addr, tls.as_ref(), args.timeout)
}

/// `--h3`: the contract's rows over HTTP/3, on the UDP port of the URL's.
fn verify_h3(target: &Target, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    if !target.tls {
        anyhow::bail!("--h3 is HTTP/3 over QUIC, always TLS: give an https:// target");
    }
    let mut tls = TlsPlan::new(&target.host);
    tls.trust = match (&args.cacert, args.insecure) {
        (Some(path), _) => TlsPlan::cas_from_file(path).map_err(anyhow::Error::msg)?,
        (None, true) => Trust::Any,
        (None, false) => Trust::Public,
    };
    println!(
        "verify https://{} against the contract over HTTP/3 (QUIC, udp {})",
        target.authority, target.addr
    );
    let peer = crate::verify_h3::Peer {
        addr: target.addr,
        authority: target.authority.clone(),
        tls,
    };
    crate::verify_h3::run(&peer, args.timeout)
}

/// The core the server is built on, by the `server` of its `/config`
/// (none when it has no `/config` or names no core we list).
fn server_core(addr: std::net::SocketAddr) -> Option<&'static deviations::Core> {
    let r = workloads::probe::get(addr, "/config").ok()?;
    let config = workloads::ServerConfig::from_json(&r.body).ok()?;
    deviations::core_of(&config.server)
}

/// The WebSocket rows ([`workloads::ws::rows`]) where the server's
/// `/config` says it serves WebSocket; where it does not, the reason it
/// gives, and a check that `/ws` is not upgraded. The text and how many
/// rows failed.
pub fn websocket(addr: std::net::SocketAddr, timeout: Duration) -> (String, usize) {
    use workloads::ws::rows;
    let mut out = String::from("\nWebSocket (/ws, /ws/room, RFC 6455)\n");
    let config = workloads::probe::get(addr, "/config")
        .map_err(|e| format!("GET /config: {e}"))
        .and_then(|r| {
            workloads::ServerConfig::from_json(&r.body).map_err(|e| format!("/config: {e}"))
        });
    let config = match config {
        Ok(c) => c,
        Err(why) => {
            out += &format!("FAIL  not judged: {why}\n");
            return (out, 1);
        }
    };
    if let Err(why) = rows::served(&config) {
        return match rows::not_upgraded(addr, timeout) {
            Ok(status) => {
                out += &format!(
                    "NOT SERVED  {}: {why} (its /config); GET /ws answered {status}, not upgraded\n",
                    config.server
                );
                (out, 0)
            }
            Err(e) => {
                out += &format!("FAIL  GET /ws: {e}\n");
                (out, 1)
            }
        };
    }
    let all = rows::rows();
    let width = all.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let mut failed = 0;
    for r in &all {
        match r.run(addr, timeout) {
            Ok(()) => out += &format!("PASS  {}\n", r.name),
            Err(e) => {
                failed += 1;
                out += &format!("FAIL  {:<width$}  {e}\n", r.name);
            }
        }
    }
    out += &format!(
        "{} WebSocket rows: {} passed, {failed} failed\n",
        all.len(),
        all.len() - failed
    );
    (out, failed)
}

/// The core whose conformance deviations are listed, by the `server` of
/// the target's `/config` (php-fpm: nginx in front).
fn conformance_core(addr: std::net::SocketAddr) -> Option<&'static deviations::Core> {
    let r = workloads::probe::get(addr, "/config").ok()?;
    let config = workloads::ServerConfig::from_json(&r.body).ok()?;
    deviations::conformance_core_of(&config.server)
}

/// Each conformance row (verdict, group, name, section and requirement,
/// what was found), then the table of pass / warn / fail per group. A
/// row `core` is known to fail as it did reads CORE, its reason beside
/// what was found (not counted as a failure of the server's own code).
pub fn conformance_text(verdicts: &[Verdict], core: Option<&deviations::Core>) -> String {
    let mut lines = vec![["verdict", "group", "row", "requirement", "what was found"]
        .map(String::from)
        .to_vec()];
    for v in verdicts {
        let Some(c) = v.conformance else { continue };
        let listed = match v.outcome {
            Outcome::Pass => None,
            _ => crate::lab::record::core_reason(core, &v.name, &v.found),
        };
        let (verdict, found) = match listed {
            Some(why) => ("CORE".to_string(), format!("{} (listed: {why})", v.found)),
            None => (v.outcome.name().to_string(), v.found.clone()),
        };
        lines.push(vec![
            verdict,
            c.group.name().to_string(),
            v.name.clone(),
            format!("{} {}", c.section, c.requirement.name()),
            found,
        ]);
    }
    let mut out = align(&lines, &[]);
    let check = ConformanceCheck::from_verdicts(verdicts, core);
    out.push('\n');
    out.push_str(&align(&check.tally_rows(), &[1, 2, 3]));
    out.push_str(&format!(
        "{} conformance rows: {} (a MUST not met fails, a SHOULD warns)\n",
        check.rows,
        check.summary()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conformance row RoadRunner's http plugin is known to fail (its own
    /// 500 for a chunk size that is not hex) reads CORE with the reason;
    /// the same verdict from a server with no core listed stays FAIL.
    #[test]
    fn a_conformance_row_of_the_cores_reads_core_not_fail() {
        let name = "/echo: chunk size not hex (zz) → 4xx, closed";
        let row = crate::lab::contract::conformance_rows()
            .into_iter()
            .find(|r| r.name == name)
            .expect("the row");
        let found = "500, then closed".to_string();
        let v = Verdict {
            name: name.into(),
            result: Err(found.clone()),
            outcome: Outcome::Fail,
            found,
            conformance: row.conformance,
        };
        let rr = deviations::core_of("roadrunner");
        let text = conformance_text(std::slice::from_ref(&v), rr);
        let line = text.lines().find(|l| l.contains(name)).unwrap();
        assert!(
            line.starts_with("CORE") && line.contains("http plugin"),
            "{line}"
        );
        let plain = conformance_text(std::slice::from_ref(&v), None);
        let line = plain.lines().find(|l| l.contains(name)).unwrap();
        assert!(line.starts_with("FAIL"), "{line}");
        let go = conformance_text(std::slice::from_ref(&v), deviations::core_of("frankenphp"));
        let line = go.lines().find(|l| l.contains(name)).unwrap();
        assert!(line.starts_with("FAIL"), "{line}");
    }
}
