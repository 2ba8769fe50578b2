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
asks for /hello, and its body-framing rows post to /echo (Content-Length
with Transfer-Encoding, repeated Content-Length, bad chunk-size lines),
where the echo shows which framing won; a server without /echo is judged
by its refusal, so it runs against any server. Not run by default:
it judges the HTTP layer, not the contract, and a server you did not write
(Swoole, Node.js) is reported, not patched around.

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
