//! A reference server SIGKILLed in the middle of `harness run` (issue #20,
//! item 4): the run ends by itself, says the server is gone, exits 1, and
//! keeps everything measured before, in its JSON (marked `end:
//! server_gone`), its `.hlog` and its series. Against every reference
//! server (both coroutine engines): each dies differently mid-answer.
//! `compare`'s side is in compare.rs.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::report::json::Document;
use testkit::observe::wait_for;
use testkit::ServerProcess;

use crate::util::{harness_bin, sibling_binary, tmp, wait_exit};

/// Connections of the killed run.
const CONNECTIONS: usize = 8;

fn run_reports_a_server_killed_mid_run(name: &str, args: &[&str]) {
    let bin = sibling_binary(name);
    let mut all = args.to_vec();
    all.extend(["--mysql-url", testkit::db::shared()]);
    let mut server = ServerProcess::start(bin.to_str().unwrap(), &all);
    let fds_idle = server.open_fds();
    let dir = tmp("killed-run");
    let (json, hlog, series, err) = (
        dir.path().join("run.json"),
        dir.path().join("run.hlog"),
        dir.path().join("run.csv"),
        dir.path().join("stderr"),
    );
    let url = format!("http://{}/work", server.addr);
    let c = CONNECTIONS.to_string();
    let mut run = Command::new(harness_bin())
        .args(["run", &url, "-c", &c, "-d", "300s", "--format", "json"])
        .arg("--hlog")
        .arg(&hlog)
        .arg("--series")
        .arg(&series)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&json).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Killed mid-run: its connections accepted, the server busy serving them.
    wait_for("the run's connections to be accepted", || {
        server.open_fds() >= fds_idle + CONNECTIONS
    });
    let cpu = server.cpu_time();
    wait_for("the server to serve the run", || {
        server.cpu_time() >= cpu + Duration::from_millis(300)
    });
    server.signal(libc::SIGKILL);
    let died = server
        .wait_exit(Duration::from_secs(30))
        .expect("the server dies");
    assert_eq!(died.signal(), Some(libc::SIGKILL), "{name}: {died}");

    // Long before its 300 s: it ends by itself once the server is gone.
    let status = wait_exit(
        &mut run,
        Duration::from_secs(120),
        "harness run did not end after its server was killed",
    );
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(1), "{name}: {status}\n{stderr}");
    assert!(
        stderr.contains("refused") && stderr.contains("it is gone"),
        "{name}: {stderr}"
    );
    let text = std::fs::read_to_string(&json).unwrap();
    let doc: Document =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    assert_eq!(doc.outcome.end, "server_gone", "{name}");
    assert!(
        doc.outcome
            .message
            .as_deref()
            .is_some_and(|m| m.contains("refused")),
        "{name}: {:?}",
        doc.outcome.message
    );
    // What was measured before is all there: the answers, the failures
    // the kill caused (connections reset or closed mid-answer, then
    // refused), each interval summing to the totals.
    let r = &doc.requests;
    assert!(r.ok > 0, "{name}: {r:?}");
    assert!(r.failed > 0, "{name}: the kill failed no request? {r:?}");
    let in_intervals: u64 = doc.intervals.iter().map(|i| i.ok).sum();
    assert_eq!(in_intervals, r.ok, "{name}: intervals vs total");
    let hlog = std::fs::read_to_string(&hlog).unwrap();
    let lines = hlog
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"'))
        .count();
    assert_eq!(lines, doc.intervals.len(), "{name}: .hlog lines\n{hlog}");
    let csv = std::fs::read_to_string(&series).unwrap();
    assert_eq!(
        csv.lines().count(),
        doc.intervals.len() + 1,
        "{name}: series rows\n{csv}"
    );
    eprintln!(
        "{name} {args:?} SIGKILLed mid-run: harness run exit 1, end server_gone, \
         {} ok and {} failed kept over {} intervals ({:.1} s); stderr: {}",
        r.ok,
        r.failed,
        doc.intervals.len(),
        doc.outcome.duration_s,
        stderr.trim()
    );
}

#[test]
fn run_reports_an_event_loop_server_killed_mid_run() {
    run_reports_a_server_killed_mid_run("event-loop", &[]);
}

#[test]
fn run_reports_a_coroutine_server_killed_mid_run() {
    run_reports_a_server_killed_mid_run("coroutine", &["--workers", "2"]);
}

#[test]
fn run_reports_a_minihttp_coroutine_server_killed_mid_run() {
    run_reports_a_server_killed_mid_run("coroutine", &["--workers", "2", "--engine", "minihttp"]);
}

#[test]
fn run_reports_a_worker_pool_server_killed_mid_run() {
    run_reports_a_server_killed_mid_run("worker-pool", &["--workers", "8"]);
}
