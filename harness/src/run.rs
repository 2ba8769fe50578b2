//! `harness run`: command-line arguments → a [`Plan`] → the engine → a report.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::cli::RunArgs;
use crate::engine::{self, Check, Control, End, Pace, Plan, Request, Snapshot, Stop};
use crate::report;
use crate::target::Target;

/// The hard bound of a `-n` run without `-d`.
const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(600);

/// How responses to `method path` are judged: the contract's exact status
/// and body for its endpoints; any 2xx for other paths or with `--no-verify`.
pub fn check_for(method: &str, path: &str, verify: bool) -> Check {
    if !verify || workloads::route(method, path).is_err() {
        return Check::Success;
    }
    let expected = workloads::expect(method, path);
    match expected.exact_body() {
        Some(body) => Check::Exact {
            status: expected.status,
            body: Arc::from(body),
        },
        None => Check::Status(expected.status),
    }
}

/// The plan for `args`.
pub fn plan(args: &RunArgs) -> anyhow::Result<Plan> {
    let target = Target::parse(&args.url).context("bad URL")?;
    let headers = args
        .headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
                .filter(|(n, _)| !n.is_empty())
                .with_context(|| format!("bad header {h:?}: expected `Name: value`"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let method = args.method.to_ascii_uppercase();
    let keepalive = !args.no_keepalive;
    let request = Request::encode(
        &method,
        &target.path,
        &target.authority,
        &headers,
        keepalive,
    );
    let check = check_for(&method, &target.path, !args.no_verify);
    let mut plan = Plan::new(&target.url, target.addr, request, check);
    plan.connections = args.connections;
    if let Some(t) = args.threads {
        if t == 0 {
            bail!("--threads must be at least 1");
        }
        plan.threads = t;
    }
    plan.keepalive = keepalive;
    plan.timeout = args.timeout;
    plan.warmup = args.warmup;
    (plan.stop, plan.max_duration) = match (args.requests, args.duration) {
        (Some(n), d) => (Stop::Count(n), d.unwrap_or(DEFAULT_MAX_DURATION)),
        (None, Some(d)) => (Stop::Duration(d), d),
        (None, None) => {
            let d = Duration::from_secs(10);
            (Stop::Duration(d), d)
        }
    };
    if let Some(rate) = args.rate {
        plan.pace = Pace::Rate(rate);
    }
    Ok(plan)
}

/// The `run` command.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let plan = plan(&args)?;
    raise_fd_limit(plan.connections as u64 + 64)?;

    let control = Control::default();
    // Ctrl-C once: stop sending, drain, report. Twice: exit at once.
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&control.interrupt))
            .context("cannot install the Ctrl-C handler")?;
        signal_hook::flag::register(sig, Arc::clone(&control.interrupt))
            .context("cannot install the Ctrl-C handler")?;
    }

    let live = std::io::stderr().is_terminal();
    let mut last = (Duration::ZERO, 0u64);
    let mut progress = |s: &Snapshot| {
        if !live {
            return;
        }
        let dt = (s.elapsed.saturating_sub(last.0)).as_secs_f64();
        let rate = if dt > 0.0 {
            (s.requests.saturating_sub(last.1)) as f64 / dt
        } else {
            0.0
        };
        last = (s.elapsed, s.requests);
        let phase = if s.warming_up {
            "warming up"
        } else {
            "running"
        };
        eprint!(
            "\r\x1b[2K{phase} {:>6.1}s  {:>12} requests  {:>10.0}/s  {} errors",
            s.elapsed.as_secs_f64(),
            report::thousands(s.requests),
            rate,
            report::thousands(s.errors)
        );
        let _ = std::io::stderr().flush();
    };
    let result = engine::run(&plan, &control, &mut progress).context("the run failed to start")?;
    if live {
        eprint!("\r\x1b[2K");
    }

    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report::render(args.format, &result).as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the report")?;
    if let Some(path) = &args.hist {
        std::fs::write(path, report::hgrm::render(&result.stats.latency_us))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(m) = &result.message {
        eprintln!("harness: {m}");
    }
    if result.stats.ok == 0
        && result.stats.requests() > 0
        && matches!(plan.check, Check::Exact { .. })
    {
        eprintln!(
            "harness: no response matched the contract's answer for {} {}; \
             for a server outside the contract use --no-verify",
            plan.request.method, plan.request.target
        );
    }
    Ok(match result.end {
        End::ServerGone => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// Raises the soft limit on open files to `need` (up to the hard limit).
fn raise_fd_limit(need: u64) -> anyhow::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Ok(());
        }
        if lim.rlim_cur >= need {
            return Ok(());
        }
        let want = need.min(lim.rlim_max);
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: lim.rlim_max,
        };
        libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        if want < need {
            bail!(
                "{need} open files are needed but the hard limit is {} (raise it: ulimit -Hn)",
                lim.rlim_max
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_paths_are_checked_exactly() {
        match check_for("GET", "/hello", true) {
            Check::Exact { status, body } => {
                assert_eq!((status, &*body), (200, &b"Hello World"[..]))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(check_for("GET", "/config", true), Check::Status(200));
        assert_eq!(check_for("GET", "/index.html", true), Check::Success);
        assert_eq!(check_for("POST", "/hello", true), Check::Success);
        assert_eq!(check_for("GET", "/hello", false), Check::Success);
        match check_for("HEAD", "/work", true) {
            Check::Exact { body, .. } => assert!(body.is_empty()),
            other => panic!("{other:?}"),
        }
    }
}
