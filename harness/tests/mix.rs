//! Weighted mixes of paths (`--path`, `Plan::mixed`): each path gets its
//! share, is verified by its own check and timed in its own histogram; a run
//! without `--path` reports as before.

use std::time::Duration;

use harness::engine::{Pace, Plan, Route, RunResult, Stop};
use harness::report::json::Document;
use harness::stats::Percentiles;
use serde_json::Value;
use testkit::ServerProcess;

use crate::cli::validate;
use crate::util::{harness, run, sibling_binary, stdout, Behaviour, TestServer};

/// The workspace's event-loop server: the contract's answers for every path.
fn event_loop() -> ServerProcess {
    let bin = sibling_binary("event-loop");
    ServerProcess::start(bin.to_str().unwrap(), &["--workers", "1"])
}

/// A mixed plan of `paths` (target, weight) against `addr`, as another
/// command would build it.
fn mixed(addr: std::net::SocketAddr, paths: &[(&str, u32)], tune: impl FnOnce(&mut Plan)) -> Plan {
    let authority = addr.to_string();
    let routes = paths
        .iter()
        .map(|(t, w)| Route::get(t, &authority, *w, true))
        .collect();
    let mut p = Plan::mixed(&format!("http://{authority}"), addr, routes).unwrap();
    p.threads = 2;
    p.timeout = Duration::from_secs(10);
    tune(&mut p);
    p
}

/// Per path: the counts add up to the run's, and every success is timed.
fn assert_paths_add_up(r: &RunResult) {
    let s = &r.stats;
    assert_eq!(s.paths.len(), r.plan.mix.len());
    let sum = |f: fn(&harness::stats::PathStats) -> u64| s.paths.iter().map(f).sum::<u64>();
    assert_eq!(sum(|p| p.requests()), s.requests());
    assert_eq!(sum(|p| p.ok), s.ok);
    assert_eq!(sum(|p| p.failures.total()), s.failures.total());
    assert_eq!(sum(|p| p.latency_us.len()), s.latency_us.len());
    for p in &s.paths {
        assert_eq!(p.latency_us.len(), p.ok);
    }
}

#[test]
fn a_99_to_1_mix_sends_each_path_its_share_every_response_verified() {
    let server = event_loop();
    let (n, conns) = (5_000u64, 8usize);
    let p = mixed(server.addr, &[("/hello", 99), ("/cpu?n=1000", 1)], |p| {
        p.stop = Stop::Count(n);
        p.connections = conns;
    });
    let r = run(&p);
    assert_eq!(r.stats.requests(), n);
    assert_eq!(r.stats.ok, n, "{:?}", r.stats.failures);
    assert_paths_add_up(&r);
    // Each connection walks a fixed cycle (99 × /hello, 1 × /cpu): over any
    // stretch it is within one request of 1%, so the run within one per
    // connection.
    let heavy = r.stats.paths[1].requests();
    let want = n / 100;
    assert!(
        heavy.abs_diff(want) <= conns as u64,
        "/cpu got {heavy} of {n} requests, {want} ± {conns} expected"
    );
}

#[test]
fn a_path_answered_wrongly_fails_on_that_path_only() {
    // Answers `Hello World` to every path: right for /hello, wrong for /work.
    let server = TestServer::start(Behaviour::Hello);
    let p = mixed(server.addr, &[("/hello", 3), ("/work", 1)], |p| {
        p.stop = Stop::Count(400);
        p.connections = 4;
    });
    let r = run(&p);
    assert_paths_add_up(&r);
    let (hello, work) = (&r.stats.paths[0], &r.stats.paths[1]);
    assert_eq!(hello.failures.total(), 0, "{:?}", hello.failures);
    assert_eq!(hello.ok, hello.requests());
    assert_eq!(work.ok, 0);
    assert_eq!(work.failures.length + work.failures.body, work.requests());
    // 3:1 of 400 on 4 connections: 100, within one per connection.
    assert!(work.requests().abs_diff(100) <= 4, "{}", work.requests());
    assert_eq!(r.stats.failures.total(), work.requests());
}

#[test]
fn each_path_has_its_own_latency_histogram() {
    let server = event_loop();
    let p = mixed(server.addr, &[("/hello", 4), ("/sleep?ms=20", 1)], |p| {
        p.stop = Stop::Count(500);
        p.connections = 10;
    });
    let r = run(&p);
    assert_eq!(r.stats.ok, 500, "{:?}", r.stats.failures);
    assert_paths_add_up(&r);
    let hello = Percentiles::of(&r.stats.paths[0].latency_us);
    let sleep = Percentiles::of(&r.stats.paths[1].latency_us);
    assert!(
        sleep.count.abs_diff(100) <= 10,
        "{} of 500 at 4:1",
        sleep.count
    );
    // A lower bound on the slow path only: no timing upper bound.
    assert!(sleep.min >= 20_000, "/sleep?ms=20 min {} µs", sleep.min);
    assert!(
        sleep.p50 > hello.p50,
        "/sleep p50 {} µs, /hello p50 {} µs",
        sleep.p50,
        hello.p50
    );
}

#[test]
fn an_open_loop_mix_times_each_path_from_its_intended_send_time() {
    // The server stalls for 1 s once; every answer waits for it.
    let server = TestServer::start(Behaviour::PauseOnce {
        at: 300,
        pause: Duration::from_secs(1),
    });
    let p = mixed(server.addr, &[("/hello", 1), ("/other", 1)], |p| {
        p.stop = Stop::Duration(Duration::from_secs(3));
        p.connections = 10;
        p.pace = Pace::Rate(1000.0);
    });
    let r = run(&p);
    assert!(r.latency_corrected());
    assert_paths_add_up(&r);
    // The requests the stall kept from being sent count on both paths.
    for (i, path) in r.stats.paths.iter().enumerate() {
        let l = Percentiles::of(&path.latency_us);
        assert!(l.p99 >= 500_000, "path {i}: p99 {} µs", l.p99);
        assert!(path.requests().abs_diff(r.stats.requests() / 2) <= 10);
    }
}

/// The error of a run that must not start: a clear message, not a panic.
fn refused(args: &[&str]) -> String {
    let out = harness(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} ran");
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_paths_are_clear_errors() {
    let url = "http://127.0.0.1:1";
    for (path, says) in [
        ("/hello:0", "positive integer"),
        ("/hello:-2", "positive integer"),
        ("/hello:1.5", "positive integer"),
        ("/hello:99999999999", "positive integer"),
        ("hello:3", "must start with /"),
    ] {
        let err = refused(&["run", url, "--path", path, "-n", "1"]);
        assert!(err.contains(says), "--path {path}: {err}");
    }
    let err = refused(&[
        "run",
        "http://127.0.0.1:1/hello",
        "--path",
        "/cpu",
        "-n",
        "1",
    ]);
    assert!(err.contains("has a path"), "{err}");
    let err = refused(&[
        "run",
        url,
        "--path",
        "/a:100000",
        "--path",
        "/b:1",
        "-n",
        "1",
    ]);
    assert!(err.contains("65536"), "{err}");
}

#[test]
fn the_cli_mix_reports_each_path_in_text_and_json() {
    let server = event_loop();
    let base = format!("http://{}", server.addr);
    let run = |format: &str| {
        stdout(&harness(&[
            "run",
            &base,
            "-c",
            "4",
            "-n",
            "1000",
            "--format",
            format,
            "--path",
            "/hello:3",
            "--path",
            "/cpu?n=1000:1",
        ]))
    };

    let text = run("text");
    assert!(text.contains("a mix of 2 paths"), "{text}");
    assert!(text.contains("per path"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("/cpu?n=1000 ")),
        "{text}"
    );

    let json = run("json");
    let value: Value = serde_json::from_str(&json).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("the mix does not match run.schema.json: {e}\n{json}");
    }
    let doc: Document = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(serde_json::to_value(&doc).unwrap(), value);
    assert_eq!(doc.requests.total, 1_000);
    assert_eq!(doc.requests.ok, 1_000);
    assert_eq!(doc.target.path, "/hello:3 /cpu?n=1000:1");
    assert_eq!(doc.settings.check, "mixed");
    let paths: Vec<(&str, u32, u64)> = doc
        .paths
        .iter()
        .map(|p| (p.path.as_str(), p.weight, p.requests.total))
        .collect();
    assert_eq!(paths.len(), 2);
    assert_eq!((paths[0].0, paths[0].1), ("/hello", 3));
    assert_eq!((paths[1].0, paths[1].1), ("/cpu?n=1000", 1));
    assert_eq!(paths[0].2 + paths[1].2, 1_000);
    assert!(paths[1].2.abs_diff(250) <= 4, "{paths:?}");
    assert!((doc.paths[1].weight_share - 0.25).abs() < 1e-9);
    assert!((doc.paths[1].share - 0.25).abs() <= 0.004);
    for p in &doc.paths {
        assert_eq!(p.check, "exact");
        assert_eq!(p.latency_us.count, p.requests.ok);
        assert_eq!(p.histogram.to_histogram().unwrap().len(), p.requests.ok);
    }

    let csv = run("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "header, the run, 2 paths:\n{csv}");
    assert!(
        lines[3].starts_with(&format!("{base}/cpu?n=1000,")),
        "{csv}"
    );

    let ab = run("ab");
    assert!(ab.contains("Complete requests:      1000"), "{ab}");
    assert!(ab.contains("this run mixed 2 paths"), "{ab}");

    let md = run("markdown");
    assert!(md.contains("| `/cpu?n=1000` | 1 (25.00%) |"), "{md}");
}

/// The top-level keys of `harness run --format json` of a single path: those
/// before mixes existed, and what came after for every run.
const KEYS: &[&str] = &[
    "schema",
    "harness_version",
    "target",
    "settings",
    "outcome",
    "requests",
    "failures",
    "status_codes",
    "transfer",
    "connections",
    "server",
    "latency_us",
    "service_us",
    "waiting_us",
    "connect_us",
    "series",
    "histogram",
    // Added since, by interval histograms (issue 10): every run has them.
    "recording",
    "intervals",
];

#[test]
fn without_path_the_reports_are_as_before() {
    let server = TestServer::start(Behaviour::Hello);
    let url = server.url("/hello");
    let run = |format: &str| {
        stdout(&harness(&[
            "run", &url, "-c", "2", "-n", "50", "--format", format,
        ]))
    };

    let value: Value = serde_json::from_str(&run("json")).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut before = KEYS.to_vec();
    keys.sort_unstable();
    before.sort_unstable();
    assert_eq!(keys, before, "no `paths`, nothing else mix-specific");
    assert_eq!(value["target"]["path"], "/hello");
    assert_eq!(value["settings"]["check"], "exact");

    let text = run("text");
    assert!(text.starts_with(&format!("GET {url}\n")), "{text}");
    assert!(
        !text.contains("per path") && !text.contains("mix"),
        "{text}"
    );
    assert_eq!(run("csv").lines().count(), 2);
    let ab = run("ab");
    assert!(ab.contains("Document Path:          /hello\n"), "{ab}");
    assert!(!ab.contains("mixed"), "{ab}");
    assert!(!run("markdown").contains("| path |"));

    // One --path is the URL with that path.
    let base = format!("http://{}", server.addr);
    let one = stdout(&harness(&[
        "run", &base, "--path", "/hello", "-c", "2", "-n", "50", "--format", "json",
    ]));
    let value: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(value.as_object().unwrap().len(), KEYS.len());
    assert_eq!(value["target"]["url"], url.as_str());
    assert_eq!(value["target"]["path"], "/hello");
}
