//! `harness diff` end to end: the real binary on result sets written by the
//! test as typed `compare` (and `models`) documents, so the files are what
//! those commands write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use harness::compare::results::{
    ContractCheck, Database, Fairness, LatencyDoc, Machine, Results, RowFailure, RowStatus, RunDoc,
    ServerDoc, ServerStatus, Settings, WorkloadDoc,
};
use harness::models::document::{Models, WaitCurve, WaitPoint};
use harness::reproduce::document::{Cell as ReproCell, Reproduction};
use harness::stats::FailureCounts;
use serde_json::Value;

use crate::util::{harness, stdout, tmp};

/// Run-to-run spread of a quiet machine: ±3%, in no particular order.
const SPREAD: [f64; 10] = [1.0, 0.98, 1.03, 0.99, 1.01, 0.97, 1.02, 1.005, 0.985, 1.015];

fn machine() -> Machine {
    Machine {
        cpu_model: "Test CPU".into(),
        cores: 2,
        kernel: "6.1.0".into(),
        os: "Debian GNU/Linux 12".into(),
        memory_bytes: 8 << 30,
        load_avg_1m: 0.5,
        sched_autogroup_enabled: Some(true),
        scheduling: "test".into(),
        harness_build: "release".into(),
    }
}

/// A server that ran, with its `/config` (`jit` for php-fpm) and contract.
fn server(name: &str, jit: Option<&str>, failing_rows: &[&str]) -> ServerDoc {
    ServerDoc {
        name: name.into(),
        model: "worker-pool".into(),
        language: "php".into(),
        status: ServerStatus::Ran,
        reason: None,
        detail: None,
        config: Some(workloads::ServerConfig {
            server: name.into(),
            model: "worker-pool".into(),
            runtime: "php 8.2.29".into(),
            workers: Some(20),
            db_pool: None,
            opcache: Some(true),
            jit: jit.map(String::from),
            debug: false,
            http_limits: Vec::new(),
            tls: None,
            websocket: None,
            websocket_unsupported: None,
            protocols: Vec::new(),
            http2_unsupported: None,
        }),
        versions: Vec::new(),
        same_autogroup: Some(true),
        notes: Vec::new(),
        runs_in: None,
        contract: Some(ContractCheck {
            rows: 38,
            passed: 38 - failing_rows.len() as u32,
            failed: failing_rows
                .iter()
                .map(|r| RowFailure {
                    row: r.to_string(),
                    why: "test".into(),
                })
                .collect(),
            known: Vec::new(),
        }),
        conformance: None,
        tls: None,
    }
}

fn run(rps: f64, p99_us: u64, outside_cpu_pct: f64) -> RunDoc {
    RunDoc {
        duration_s: 3.0,
        requests: (rps * 3.0) as u64,
        ok: (rps * 3.0) as u64,
        failed: 0,
        failures: FailureCounts::default(),
        status_codes: BTreeMap::from([("200".to_string(), (rps * 3.0) as u64)]),
        ok_per_s: rps,
        requests_per_s: rps,
        latency_us: LatencyDoc {
            mean: p99_us as f64 / 3.0,
            p50: p99_us / 3,
            p75: p99_us / 2,
            p90: p99_us * 2 / 3,
            p99: p99_us,
            p99_9: p99_us * 2,
            max: p99_us * 3,
        },
        server_cpu_pct: Some(95.0),
        server_rss_peak_bytes: Some(50 << 20),
        generator_cpu_pct: Some(60.0),
        db_cpu_pct: None,
        outside_cpu_pct: Some(outside_cpu_pct),
        path_cpu_pct: None,
        end: "duration".into(),
        message: None,
        series: Vec::new(),
        started_s: None,
        profile: None,
        tls: None,
        held: None,
        framing: None,
        room: None,
    }
}

/// One cell's row: `runs` runs around `rps` and `p99_us`, spread by SPREAD.
struct Cell {
    server: &'static str,
    workload: &'static str,
    rps: f64,
    p99_us: u64,
    runs: usize,
    outside_cpu_pct: f64,
}

impl Cell {
    fn new(server: &'static str, rps: f64, runs: usize) -> Cell {
        Cell {
            server,
            workload: "hello",
            rps,
            p99_us: 1500,
            runs,
            outside_cpu_pct: 1.0,
        }
    }
}

/// A compare results document of `cells` (servers from `servers`).
fn compare(servers: Vec<ServerDoc>, cells: &[Cell]) -> Results {
    let rows = cells
        .iter()
        .map(|c| harness::compare::results::Row {
            server: c.server.into(),
            model: "worker-pool".into(),
            workload: c.workload.into(),
            path: "/hello".into(),
            connections: 100,
            protocol: None,
            http2_front: None,
            tool: "harness".into(),
            bodies_verified: true,
            status: RowStatus::Ok,
            error: None,
            // The spread rotated by the row's rate, so two sides differ run by run.
            runs: (0..c.runs)
                .map(|i| {
                    let m = SPREAD[(i + c.rps as usize) % SPREAD.len()];
                    run(c.rps * m, (c.p99_us as f64 * m) as u64, c.outside_cpu_pct)
                })
                .collect(),
            summary: None,
            latency_curve: Vec::new(),
        })
        .collect();
    Results {
        header: harness::lab::record::Header {
            schema: "harness.compare/1".into(),
            harness_version: "0.1.0".into(),
            started_utc: "2026-11-30T02:40:00Z".into(),
            finished_utc: "2026-11-30T02:50:00Z".into(),
            interrupted: false,
            command: vec!["harness".into(), "compare".into()],
        },
        settings: Settings {
            workloads: vec![WorkloadDoc {
                name: "hello".into(),
                path: "/hello".into(),
            }],
            connections: vec![100],
            duration_s: 3.0,
            warmup_s: 1.0,
            runs: 10,
            keepalive: true,
            protocol: None,
            ws_in_flight: None,
            threads: 2,
            timeout_s: 10.0,
            load_tool: "harness".into(),
            baseline: None,
            environment: None,
            order: None,
            seed: None,
            io: None,
            io_note: None,
            gather_us: None,
            tls: None,
        },
        machine: machine(),
        database: no_database(),
        servers,
        fairness: Fairness {
            warnings: Vec::new(),
            db_pool_total: None,
            db_max_connections: None,
        },
        rows,
        at_rate: Default::default(),
    }
}

/// Writes `results` as `dir/name/results.json`; returns the directory.
fn write(dir: &Path, name: &str, results: &Results) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("results.json"), results.to_json()).unwrap();
    d
}

fn diff_json(base: &Path, candidate: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "diff",
        base.to_str().unwrap(),
        candidate.to_str().unwrap(),
        "--format",
        "json",
    ];
    args.extend(extra);
    let value: Value =
        serde_json::from_str(&stdout(&harness(&args))).expect("diff --format json is JSON");
    // Every diff the tests make matches its schema.
    let schema: Value =
        serde_json::from_str(include_str!("../schema/diff.schema.json")).expect("schema parses");
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("diff's JSON does not match diff.schema.json: {e}\n{value:#}");
    }
    value
}

fn php() -> Vec<ServerDoc> {
    vec![server("php-fpm", Some("tracing"), &[])]
}

#[test]
fn a_ten_percent_drop_in_ten_runs_is_worse_with_the_drop_inside_its_interval() {
    let dir = tmp("diff-shift");
    let base = write(
        dir.path(),
        "base",
        &compare(php(), &[Cell::new("php-fpm", 20_000.0, 10)]),
    );
    let cand = write(
        dir.path(),
        "cand",
        &compare(php(), &[Cell::new("php-fpm", 18_000.0, 10)]),
    );
    let d = diff_json(&base, &cand, &[]);
    assert_eq!(d["schema"], "harness.diff/1");
    let cell = &d["cells"][0];
    assert_eq!(cell["server"], "php-fpm");
    assert_eq!(cell["comparable"], true, "{cell:#}");
    assert_eq!(cell["rps"]["verdict"], "worse", "{cell:#}");
    let (lo, hi) = (
        cell["rps"]["ci_low_pct"].as_f64().unwrap(),
        cell["rps"]["ci_high_pct"].as_f64().unwrap(),
    );
    assert!(lo <= -10.0 && -10.0 <= hi, "interval {lo} .. {hi}");
    assert!(cell["rps"]["p_value"].as_f64().unwrap() < 0.05);
    assert_eq!(cell["rps"]["test"], "exact");
    assert_eq!(cell["rps"]["base"].as_array().unwrap().len(), 10);
    // The latency did not move.
    assert_eq!(cell["p99_us"]["verdict"], "~", "{cell:#}");
    assert_eq!(d["regressions"], 1);

    // The text table says the same; without --fail-on the exit is 0.
    let text = stdout(&harness(&[
        "diff",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
    ]));
    let row = text.lines().find(|l| l.starts_with("php-fpm")).unwrap();
    assert!(row.contains("worse") && row.contains("-10.0%"), "{text}");

    // --fail-on regression: exit 1 with the reason; the other way round, 0.
    let gate = harness(&[
        "diff",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--fail-on",
        "regression",
    ]);
    assert_eq!(gate.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gate.stderr).contains("significantly worse"));
    let improved = harness(&[
        "diff",
        cand.to_str().unwrap(),
        base.to_str().unwrap(),
        "--fail-on",
        "regression",
    ]);
    assert_eq!(improved.status.code(), Some(0));
    // A threshold above the change makes it "~", and the gate passes.
    let d = diff_json(&base, &cand, &["--threshold", "15%"]);
    assert_eq!(d["cells"][0]["rps"]["verdict"], "~");
}

#[test]
fn two_runs_a_side_are_warned_as_never_significant() {
    let dir = tmp("diff-few");
    let base = write(
        dir.path(),
        "base",
        &compare(php(), &[Cell::new("php-fpm", 20_000.0, 2)]),
    );
    let cand = write(
        dir.path(),
        "cand",
        &compare(php(), &[Cell::new("php-fpm", 10_000.0, 2)]),
    );
    let d = diff_json(&base, &cand, &[]);
    let cell = &d["cells"][0];
    // Half the throughput, yet two runs cannot show it.
    assert_eq!(cell["rps"]["verdict"], "~", "{cell:#}");
    assert!(cell["rps"]["ci_low_pct"].is_null());
    let warnings = cell["warnings"].to_string();
    assert!(
        warnings.contains("too few runs") && warnings.contains("at least 4 runs per side"),
        "{warnings}"
    );
    assert_eq!(d["min_runs_per_side"], 4);
}

#[test]
fn a_jit_off_candidate_and_a_contaminated_side_are_not_comparable() {
    let dir = tmp("diff-jit");
    let base = write(
        dir.path(),
        "base",
        &compare(php(), &[Cell::new("php-fpm", 20_000.0, 5)]),
    );
    let jit_off = vec![server("php-fpm", Some("off"), &[])];
    let cand = write(
        dir.path(),
        "cand",
        &compare(jit_off, &[Cell::new("php-fpm", 20_000.0, 5)]),
    );
    let d = diff_json(&base, &cand, &[]);
    let cell = &d["cells"][0];
    assert_eq!(cell["comparable"], false);
    assert_eq!(
        cell["not_comparable"],
        serde_json::json!(["/config jit: tracing → off"])
    );
    let text = stdout(&harness(&[
        "diff",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
    ]));
    assert!(text.contains("Not comparable:"), "{text}");
    assert!(text.contains("/config jit: tracing → off"), "{text}");

    // Other processes took 30% of the machine during the candidate's runs.
    let mut busy = Cell::new("php-fpm", 20_000.0, 5);
    busy.outside_cpu_pct = 30.0;
    let cand = write(dir.path(), "busy", &compare(php(), &[busy]));
    let cell = &diff_json(&base, &cand, &[])["cells"][0];
    assert_eq!(cell["comparable"], false);
    assert!(
        cell["not_comparable"][0]
            .as_str()
            .unwrap()
            .starts_with("candidate contaminated: other processes took up to 30%"),
        "{cell:#}"
    );

    // A contract row failing on one side only.
    let broken = vec![server("php-fpm", Some("tracing"), &["HEAD /hello"])];
    let cand = write(
        dir.path(),
        "broken",
        &compare(broken, &[Cell::new("php-fpm", 20_000.0, 5)]),
    );
    let cell = &diff_json(&base, &cand, &[])["cells"][0];
    assert!(cell["not_comparable"]
        .to_string()
        .contains("failing contract rows differ"));
}

#[test]
fn cells_on_one_side_only_are_listed_and_markdown_is_ready_for_a_comment() {
    let dir = tmp("diff-sides");
    let both = || {
        vec![
            server("php-fpm", Some("tracing"), &[]),
            server("swoole", None, &[]),
        ]
    };
    let base = write(
        dir.path(),
        "base",
        &compare(
            both(),
            &[
                Cell::new("php-fpm", 20_000.0, 5),
                Cell::new("swoole", 40_000.0, 5),
            ],
        ),
    );
    let mut only_cand = Cell::new("php-fpm", 20_000.0, 5);
    only_cand.workload = "work";
    let cand = write(
        dir.path(),
        "cand",
        &compare(both(), &[Cell::new("php-fpm", 20_500.0, 5), only_cand]),
    );
    let d = diff_json(&base, &cand, &[]);
    assert_eq!(d["cells"].as_array().unwrap().len(), 1);
    assert_eq!(d["only_in_base"][0]["server"], "swoole");
    assert_eq!(d["only_in_candidate"][0]["workload"], "work");

    let md = stdout(&harness(&[
        "diff",
        base.to_str().unwrap(),
        cand.to_str().unwrap(),
        "--format",
        "markdown",
    ]));
    assert!(md.starts_with("### harness diff"), "{md}");
    assert!(
        md.contains("| server | workload | c | env | tool | RPS base |"),
        "{md}"
    );
    assert!(md.contains("|---|"), "{md}");
    assert!(
        md.contains("**Only in base**\n\n- swoole hello c=100"),
        "{md}"
    );
    assert!(
        md.contains("**Only in candidate**\n\n- php-fpm work c=100"),
        "{md}"
    );
}

#[test]
fn bad_input_is_a_clear_error_never_a_panic() {
    let dir = tmp("diff-bad");
    let base = write(
        dir.path(),
        "base",
        &compare(php(), &[Cell::new("php-fpm", 1.0, 3)]),
    );
    let fail = |args: &[&str], expect: &str| {
        let o = harness(args);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(expect), "expected {expect:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    let b = base.to_str().unwrap();
    let missing = dir.path().join("nowhere");
    fail(
        &["diff", b, missing.to_str().unwrap()],
        "CANDIDATE: cannot read",
    );
    // The --out of a compare, not one of its results directories: named.
    fail(
        &["diff", dir.path().to_str().unwrap(), b],
        &format!("(results directories under it: {b})"),
    );

    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"schema": "harness.run/1"}"#).unwrap();
    fail(
        &["diff", b, other.to_str().unwrap()],
        "is a harness.run/1 document",
    );
    std::fs::write(&other, "[1, 2").unwrap();
    fail(&["diff", other.to_str().unwrap(), b], "is not JSON");
    std::fs::write(&other, r#"{"schema": "harness.compare/1", "rows": 3}"#).unwrap();
    fail(
        &["diff", b, other.to_str().unwrap()],
        "not a valid harness.compare/1 document",
    );

    let models = models(Vec::new());
    std::fs::write(&other, models.to_json()).unwrap();
    fail(
        &["diff", b, other.to_str().unwrap()],
        "diff compares two result sets of one kind",
    );
    // A bad flag is clap's usage error (exit 2), with the reason.
    let o = harness(&["diff", b, b, "--alpha", "1.5"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("strictly between 0 and 1"));
}

#[test]
fn the_environment_is_part_of_a_cell_even_in_results_from_before_it_was_recorded() {
    let dir = tmp("diff-env");
    let cells = || [Cell::new("php-fpm", 20_000.0, 5)];
    let mut bare = compare(php(), &cells());
    bare.settings.environment = Some("bare".into());
    let mut bridge = compare(php(), &cells());
    bridge.settings.environment = Some("bridge".into());
    // Written before settings.environment: compare's note on each server.
    let mut old_bridge = compare(php(), &cells());
    old_bridge.servers[0]
        .notes
        .push("environment bridge: veth + Linux bridge, DNAT from 127.0.0.1".into());
    let (bare, bridge, old_bridge) = (
        write(dir.path(), "bare", &bare),
        write(dir.path(), "bridge", &bridge),
        write(dir.path(), "old", &old_bridge),
    );
    let d = diff_json(&bare, &bridge, &[]);
    assert_eq!(d["cells"].as_array().unwrap().len(), 0);
    assert_eq!(d["only_in_base"][0]["environment"], "bare");
    assert_eq!(d["only_in_candidate"][0]["environment"], "bridge");
    let d = diff_json(&old_bridge, &bridge, &[]);
    assert_eq!(d["cells"][0]["environment"], "bridge", "{d:#}");
}

/// A comparison swept over `--protocol h1,h2c` has a row per framing of
/// one workload: each is a cell of its own, never pooled into one sample.
#[test]
fn each_framing_of_a_workload_is_a_cell_of_its_own() {
    let dir = tmp("diff-protocol");
    let sweep = || {
        let mut r = compare(
            php(),
            &[
                Cell::new("php-fpm", 20_000.0, 5),
                Cell::new("php-fpm", 30_000.0, 5),
            ],
        );
        r.rows[1].protocol = Some("h2c 16".into());
        r
    };
    let (base, candidate) = (
        write(dir.path(), "base", &sweep()),
        write(dir.path(), "candidate", &sweep()),
    );
    let d = diff_json(&base, &candidate, &[]);
    let cells = d["cells"].as_array().unwrap();
    let mut workloads: Vec<&str> = cells
        .iter()
        .map(|c| c["workload"].as_str().unwrap())
        .collect();
    workloads.sort_unstable();
    assert_eq!(workloads, ["hello", "hello h2c 16"], "{d:#}");
    for c in cells {
        assert_eq!(
            c["rps"]["verdict"], "~",
            "the same figures on both sides: {d:#}"
        );
    }
}

fn no_database() -> Database {
    Database {
        kind: "none".into(),
        url: None,
        version: None,
        max_connections: None,
    }
}

fn models(waiting: Vec<WaitCurve>) -> Models {
    Models {
        header: harness::lab::record::Header {
            schema: "harness.models/1".into(),
            harness_version: "0.1.0".into(),
            started_utc: String::new(),
            finished_utc: String::new(),
            interrupted: false,
            command: Vec::new(),
        },
        quick: true,
        machine: machine(),
        database: no_database(),
        servers: php(),
        waiting,
        stall: Vec::new(),
        connection_cost: Vec::new(),
        memory: Vec::new(),
        websocket_held: Vec::new(),
        multiplexing: Vec::new(),
        waiting_at_rate: Vec::new(),
        head_of_line: Vec::new(),
        findings: Vec::new(),
    }
}

fn wait_curve(rps: f64) -> WaitCurve {
    WaitCurve {
        server: "php-fpm".into(),
        model: "worker-pool".into(),
        path: "/sleep?ms=20".into(),
        wait_ms: 20,
        in_flight: Some(20),
        in_flight_source: "workers".into(),
        points: [1u64, 50]
            .iter()
            .map(|&c| WaitPoint {
                connections: c,
                rps: rps * c.min(20) as f64,
                p50_ms: 21.0,
                p99_ms: 25.0,
                failed: 0,
                predicted_rps: 50.0 * c.min(20) as f64,
                profile: None,
            })
            .collect(),
    }
}

fn reproduction(rps: f64) -> Reproduction {
    let cell = |tool: &str, valid_rps: Option<f64>, error: Option<&str>| ReproCell {
        server: "php-fpm".into(),
        environment: "bare".into(),
        condition: "as the seed ran it".into(),
        tool: tool.into(),
        connections: 100,
        requests: 10_000,
        rps,
        valid_rps,
        p99_ms: 30.0,
        bodies_verified: valid_rps.is_some(),
        error: error.map(String::from),
        ..ReproCell::default()
    };
    Reproduction {
        header: harness::lab::record::Header {
            schema: "harness.reproduce/1".into(),
            harness_version: "0.1.0".into(),
            started_utc: String::new(),
            finished_utc: String::new(),
            interrupted: false,
            command: Vec::new(),
        },
        experiment: "swoole-vs-node".into(),
        machine: machine(),
        database: no_database(),
        servers: php(),
        seed: harness::reproduce::seeds::swoole_vs_node(),
        cells: vec![
            cell("ab", None, None),
            cell("harness", Some(rps * 0.5), None),
            cell("ab -k", None, Some("ab is not installed")),
        ],
        findings: Vec::new(),
    }
}

#[test]
fn models_and_reproduce_results_are_diffed_cell_by_cell_with_one_figure_each() {
    let dir = tmp("diff-kinds");
    let file = |name: &str, json: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, json).unwrap();
        p
    };
    let base = file("models-a.json", models(vec![wait_curve(50.0)]).to_json());
    let cand = file("models-b.json", models(vec![wait_curve(40.0)]).to_json());
    let d = diff_json(&base, &cand, &[]);
    assert_eq!(d["base"]["schema"], "harness.models/1");
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{d:#}");
    assert_eq!(cells[0]["workload"], "/sleep?ms=20");
    assert_eq!(cells[0]["connections"], 1);
    // One figure a side: the change is their ratio, never significant.
    let change = cells[0]["rps"]["change_pct"].as_f64().unwrap();
    assert!((change + 20.0).abs() < 1e-9, "{change}");
    assert_eq!(cells[0]["rps"]["verdict"], "~");
    assert!(cells[0]["warnings"].to_string().contains("too few runs"));

    let base = file("repro-a.json", reproduction(1000.0).to_json());
    let cand = file("repro-b.json", reproduction(1100.0).to_json());
    let d = diff_json(&base, &cand, &[]);
    let tools: Vec<&str> = d["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["ab", "ab -k", "harness"]);
    let engine = &d["cells"][2];
    // The engine's verified rate, not the tool's count.
    assert_eq!(engine["rps"]["base"], serde_json::json!([500.0]));
    let failed = &d["cells"][1];
    assert_eq!(failed["rps"]["verdict"], "unmeasured");
    assert!(failed["warnings"]
        .to_string()
        .contains("ab is not installed"));
}
