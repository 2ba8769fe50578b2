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

use crate::lab::contract::{check_all, check_conformance, Verdict};
use crate::lab::record::ConformanceCheck;
use crate::report::align;
use crate::target::Target;
use crate::units::parse_duration;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Sends one request per contract row (every endpoint, HEAD, 404, 405, bad
query values, a malformed request, an oversized header, HTTP/1.0 with and
without keep-alive, keep-alive reuse, pipelining) and judges each answer
with workloads::verify. Prints PASS or FAIL per row, with what differed.
/db and /work rows need the server's database to be up.

--conformance adds the conformance section: how the server treats HTTP/1.1
itself (RFC 9112 and RFC 9110), in four groups — request line, header
fields, bodies (Content-Length, chunked), connections (pipelining, close,
Upgrade, CONNECT, half-close). Each row cites its section: a deviation from
a MUST fails, from a SHOULD warns; every row says what the server did. It
asks only for /hello, so it runs against any server. Not run by default:
it judges the HTTP layer, not the contract, and a server you did not write
(Swoole, Node.js) is reported, not patched around.

Then the WebSocket rows (/ws echo: text, binary, fragmented, ping/pong,
close handshake, 64 KiB, over 64 KiB -> close 1009, a bad handshake -> 400;
/ws/room: two members, both messages, one order) where the server's /config
says it serves WebSocket; where it does not, the reason its /config gives.

Exits non-zero if any contract row or MUST row fails (warnings do not).

Examples:
  harness verify http://127.0.0.1:8082
  harness verify --conformance http://127.0.0.1:8082
  harness verify --conformance --timeout 3s http://127.0.0.1:9501")]
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
}

/// The `verify` command.
pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let target = Target::parse(&args.target).context("bad verify target")?;
    TcpStream::connect_timeout(&target.addr, args.timeout)
        .with_context(|| format!("cannot connect to {}", target.addr))?;
    println!("verify http://{} against the contract", target.authority);
    let verdicts = check_all(target.addr, args.timeout);
    let width = verdicts.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut failed = 0;
    for v in &verdicts {
        match &v.result {
            Ok(()) => println!("PASS  {}", v.name),
            Err(why) => {
                failed += 1;
                println!("FAIL  {:<width$}  {why}", v.name);
            }
        }
    }
    println!(
        "{} rows: {} passed, {failed} failed",
        verdicts.len(),
        verdicts.len() - failed
    );
    let (text, ws_failed) = websocket(target.addr, args.timeout);
    print!("{text}");
    failed += ws_failed;
    if args.conformance {
        println!(
            "\nconformance of http://{} to HTTP/1.1 (RFC 9112, RFC 9110)",
            target.authority
        );
        let verdicts = check_conformance(target.addr, args.timeout);
        print!("{}", conformance_text(&verdicts));
        failed += verdicts
            .iter()
            .filter(|v| v.outcome == Outcome::Fail)
            .count();
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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

/// Each conformance row (verdict, group, name, section and requirement,
/// what was found), then the table of pass / warn / fail per group.
pub fn conformance_text(verdicts: &[Verdict]) -> String {
    let mut lines = vec![["verdict", "group", "row", "requirement", "what was found"]
        .map(String::from)
        .to_vec()];
    for v in verdicts {
        let Some(c) = v.conformance else { continue };
        lines.push(vec![
            v.outcome.name().to_string(),
            c.group.name().to_string(),
            v.name.clone(),
            format!("{} {}", c.section, c.requirement.name()),
            v.found.clone(),
        ]);
    }
    let mut out = align(&lines, &[]);
    let check = ConformanceCheck::from_verdicts(verdicts);
    out.push('\n');
    out.push_str(&align(&check.tally_rows(), &[1, 2, 3]));
    out.push_str(&format!(
        "{} conformance rows: {} (a MUST not met fails, a SHOULD warns)\n",
        check.rows,
        check.summary()
    ));
    out
}
