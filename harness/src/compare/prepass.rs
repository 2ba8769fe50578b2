//! The pre-pass of a comparison: each runnable server started once, its
//! `/config` read, its processes' scheduler autogroup checked, the whole
//! contract run (`harness verify`) with its conformance section (`harness
//! verify --conformance`), over HTTP/2 the contract's HTTP/2 rows (`harness
//! verify --h2c` / `--h2`, where it serves the protocol), each workload's
//! own answer checked (over each protocol of the run), and stopped, before
//! anything is loaded.

use std::time::Duration;

use super::plan::Workload;
use super::protocol;
use super::results::{ConformanceCheck, ContractCheck, ServerDoc, ServerStatus};
use super::runner;
use crate::catalog::{Entry, Running};
use crate::engine::Framing;
use crate::lab::record::TlsDoc;
use crate::lab::tls_relay::{handshake, Relay};
use crate::procfs;

/// `harness verify` over a started server, printed as it goes. Without a
/// database in the run, the rows that need one are left out (503 is then
/// the right answer).
fn check_contract(
    ctx: &runner::Ctx,
    addr: std::net::SocketAddr,
    core: Option<&crate::catalog::deviations::Core>,
) -> ContractCheck {
    let has_db = ctx.lab.db().is_some();
    let rows: Vec<_> = crate::lab::contract::contract_rows()
        .into_iter()
        .filter(|r| has_db || !r.needs_db())
        .collect();
    let contract = ContractCheck::from_verdicts(
        &crate::lab::contract::check(addr, Duration::from_secs(5), rows),
        core,
    );
    ctx.progress.line(&format!(
        "  contract (harness verify): {}/{} rows pass{}{}",
        contract.passed,
        contract.rows,
        if has_db {
            ""
        } else {
            " (no database in this run: its rows not checked)"
        },
        contract
            .failed
            .iter()
            .map(|f| format!("\n    FAIL {}: {}", f.row, f.why))
            .chain(
                contract
                    .known
                    .iter()
                    .map(|k| format!("\n    CORE {}: {}", k.row, k.why))
            )
            .collect::<String>()
    ));
    contract
}

/// The conformance section over a started server (it asks only for
/// `/hello`), printed as it goes: the tally, then each row not passed.
/// A row its core (`core`) is known to fail as it did reads CORE, its
/// reason beside what was found (the document keeps its RFC outcome and
/// the reason, `core`).
fn check_conformance(
    ctx: &runner::Ctx,
    addr: std::net::SocketAddr,
    core: Option<&crate::catalog::deviations::Core>,
) -> ConformanceCheck {
    let verdicts = crate::lab::contract::check_conformance(addr, Duration::from_secs(5));
    let check = ConformanceCheck::from_verdicts(&verdicts, core);
    ctx.progress.line(&format!(
        "  HTTP/1.1 conformance (harness verify --conformance): {}{}",
        check.summary(),
        check
            .deviations
            .iter()
            .map(|d| format!(
                "\n    {} {} ({} {}): {}{}",
                if d.core.is_some() {
                    "CORE".to_string()
                } else {
                    d.outcome.to_ascii_uppercase()
                },
                d.row,
                d.section,
                d.requirement,
                d.found,
                d.core
                    .as_ref()
                    .map(|why| format!(" (listed: {why})"))
                    .unwrap_or_default()
            ))
            .collect::<String>()
    ));
    check
}

/// The pre-pass: start each runnable server once, read its `/config`,
/// check its scheduler placement, the contract and each workload's answer,
/// stop it. Returns per server the workloads that failed their check.
pub fn run(
    ctx: &runner::Ctx,
    entries: &[Entry],
    docs: &mut [ServerDoc],
    workloads: &[Workload],
) -> Vec<Vec<(String, String)>> {
    let mut failed = vec![Vec::new(); entries.len()];
    let own_group = procfs::effective_autogroup(std::process::id() as i32);
    for (i, e) in entries.iter().enumerate() {
        if docs[i].status != ServerStatus::Ran || ctx.lab.interrupted() {
            continue;
        }
        ctx.progress.line(&format!("starting {} ...", e.name));
        let mut running = match ctx.start(e) {
            Ok(r) => r,
            Err(err) => {
                docs[i].status = ServerStatus::Failed;
                docs[i].reason = Some(format!("did not start: {err:#}"));
                continue;
            }
        };
        docs[i].versions = running.versions.clone();
        docs[i].notes.extend(running.notes.iter().cloned());
        docs[i].config = match running.config() {
            Ok(c) => Some(c),
            Err(why) => {
                docs[i].notes.push(format!("{}: {why}", e.name));
                None
            }
        };
        // Over TLS: what it negotiated, and the rows through a relay that
        // makes each of their connections one TLS connection to it.
        let relay = match over_tls(ctx, &running) {
            Ok(Some((negotiated, relay))) => {
                docs[i].tls = Some(negotiated);
                Some(relay)
            }
            Ok(None) => None,
            Err(why) => {
                docs[i].status = ServerStatus::Failed;
                docs[i].reason = Some(why);
                docs[i].notes.extend(running.stop());
                continue;
            }
        };
        let addr = relay.as_ref().map_or(running.addr, Relay::addr);
        // The core by the catalog's name, else by what /config says (a
        // --target names its own server).
        let core = crate::catalog::deviations::core_of(&e.name).or_else(|| {
            docs[i]
                .config
                .as_ref()
                .and_then(|c| crate::catalog::deviations::core_of(&c.server))
        });
        if e.serves_whole_contract() {
            docs[i].contract = Some(check_contract(ctx, addr, core));
        }
        if e.serves("/hello") {
            // nginx under nginx-static and php-fpm: its listed deviations;
            // else the core the contract's rows were read against.
            let core = crate::catalog::deviations::conformance_core_of(&e.name)
                .or_else(|| {
                    docs[i]
                        .config
                        .as_ref()
                        .and_then(|c| crate::catalog::deviations::conformance_core_of(&c.server))
                })
                .or(core);
            docs[i].conformance = Some(check_conformance(ctx, addr, core));
        }
        drop(relay);
        if running.managed() {
            let tree = procfs::tree(&running.pids());
            docs[i].same_autogroup = own_group.as_ref().map(|own| {
                tree.iter()
                    .all(|s| !matches!(procfs::effective_autogroup(s.pid), Some(g) if g != *own))
            });
        }
        for w in workloads
            .iter()
            .filter(|w| !w.kind.is_ws() && e.serves(&w.path))
        {
            if let Err(msg) = runner::preflight(&running, &w.path) {
                failed[i].push((w.name.clone(), msg));
            }
        }
        over_http2(ctx, e, &running, &mut docs[i], workloads, &mut failed[i]);
        docs[i].notes.extend(running.stop());
    }
    failed
}

/// The key of a workload's failed check over `f`'s protocol (its check
/// over HTTP/1.1 is keyed by its name alone).
pub fn over(w: &Workload, f: Framing) -> String {
    format!("{} over {}", w.name, f.protocol())
}

/// Over each HTTP/2 or HTTP/3 protocol of the run that the server serves: the
/// contract's HTTP/2 rows over it (printed, failures noted in its document) and
/// each workload's answer (a failure keeps that workload from being
/// loaded over that protocol). Where it does not serve it, nothing: its
/// rows say why.
fn over_http2(
    ctx: &runner::Ctx,
    e: &Entry,
    running: &Running,
    doc: &mut ServerDoc,
    workloads: &[Workload],
    failed: &mut Vec<(String, String)>,
) {
    let mut seen = Vec::new();
    let loopback = matches!(
        ctx.placed.environment,
        crate::env::Environment::Bare | crate::env::Environment::Pinned
    );
    for f in protocol::framings(ctx.args) {
        if !protocol::is_multiplexed(f) || seen.contains(&f.protocol()) {
            continue;
        }
        seen.push(f.protocol());
        let addr = match protocol::served(e, running, f, loopback) {
            Ok(addr) => addr,
            Err(why) => {
                ctx.progress.line(&format!("  {}: {why}", f.protocol()));
                continue;
            }
        };
        if e.serves_whole_contract() {
            let (tally, failures) = protocol::check_rows(running, f, addr, ctx.lab.db().is_some());
            ctx.progress.line(&format!(
                "  {tally}{}",
                failures
                    .iter()
                    .map(|f| format!("\n    FAIL {f}"))
                    .collect::<String>()
            ));
            if !failures.is_empty() {
                doc.notes.push(format!(
                    "{}: {tally}; failing: {}",
                    e.name,
                    failures.join("; ")
                ));
            }
        }
        for w in workloads
            .iter()
            .filter(|w| !w.kind.is_ws() && e.serves(&w.path))
        {
            if let Err(msg) = protocol::check_answer(running, f, addr, &w.path) {
                failed.push((over(w, f), msg));
            }
        }
    }
}

/// For a server over TLS: one handshake (what it negotiated, printed) and
/// a relay for the rows; `None` over plain HTTP; `Err` why the handshake
/// or the relay failed.
fn over_tls(ctx: &runner::Ctx, running: &Running) -> Result<Option<(TlsDoc, Relay)>, String> {
    let Some(tls) = &running.tls else {
        return Ok(None);
    };
    let negotiated = handshake(running.addr, tls, Duration::from_secs(5))
        .map_err(|e| format!("TLS handshake: {e:#}"))?;
    let doc = TlsDoc::of(&negotiated);
    ctx.progress.line(&format!(
        "  TLS: {}{}",
        doc.short(),
        doc.alpn
            .as_deref()
            .map_or(String::new(), |a| format!(", ALPN {a}"))
    ));
    let relay =
        Relay::start(running.addr, tls).map_err(|e| format!("the TLS relay for verify: {e:#}"))?;
    Ok(Some((doc, relay)))
}
