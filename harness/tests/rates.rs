//! `harness compare --rate`, `--slo` and `--threshold` end to end, on the
//! reference worker pool (20 workers): at `/sleep?ms=20` Little's law caps
//! it at 20 × 1000 ÷ 20 = 1,000 req/s however fast the machine, so a rate
//! far above that cannot be held and no SLO capacity can exceed it.

use std::path::Path;
use std::process::{Command, Stdio};

use harness::compare::results::Results;
use serde_json::Value;

use crate::cli::validate;
use crate::compare::the_results_dir;
use crate::util::{harness_bin, tmp};

fn compare(args: &[&str], out: &Path) -> (Option<i32>, String, String) {
    let o = Command::new(harness_bin())
        .arg("compare")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_worker_pool_far_above_its_bound_does_not_hold_and_its_slo_capacity_stays_under_it() {
    let dir = tmp("rates");
    let (code, stdout, stderr) = compare(
        &[
            "--servers",
            "worker-pool",
            "--workloads",
            "sleep?ms=20",
            "-c",
            "20",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--rate",
            "8000,50%",
            "--rate-duration",
            "1s",
            "--slo",
            "p(99)<100ms",
            "--threshold",
            "p(99)<60s",
            "--threshold",
            "rps>1e9",
        ],
        dir.path(),
    );
    // rps>1e9 fails on every cell: exit 99, each failure named.
    assert_eq!(code, Some(99), "\n{stdout}\n{stderr}");
    assert!(stderr.contains("FAIL rps>1e9"), "{stderr}");
    assert!(
        stdout.contains("At fixed rates:") && stdout.contains("Capacity under SLO p(99)<100ms"),
        "{stdout}"
    );
    let results_dir = the_results_dir(dir.path());
    let text = std::fs::read_to_string(results_dir.join("results.json")).unwrap();
    let schema: Value =
        serde_json::from_str(include_str!("../schema/results.schema.json")).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("results.json does not match results.schema.json: {e}");
    }
    let results = Results::from_json(&text).unwrap();
    let a = &results.at_rate;
    assert_eq!(a.rates, ["8000/s", "50%"]);
    assert_eq!(a.cells.len(), 2, "{:?}", a.cells);
    for c in &a.cells {
        assert!(c.error.is_none(), "{c:?}");
        assert!((c.achieved_share - c.achieved_per_s / c.offered_per_s).abs() < 1e-9);
        assert_eq!(c.held, c.achieved_share >= 0.95 && c.failed == 0);
        assert_eq!(c.thresholds.len(), 2);
        assert!(!c.thresholds[1].pass, "{c:?}");
        assert!(c.server_rss_peak_bytes.is_some());
    }
    // Half its capacity: answered, judged, its CPU per request.
    let half = &a.cells[1];
    assert!(half.thresholds[0].pass, "{half:?}");
    assert!(half.server_cpu_us_per_request.is_some() && half.latency_curve.len() >= 2);
    // Far above: 400 connections on 20 workers that each hold one; the
    // queue may keep every request of the window from finishing in it.
    let far = &a.cells[0];
    assert_eq!(far.offered_per_s, 8000.0);
    assert!(
        !far.held && far.achieved_share < 0.5,
        "8,000/s on a 1,000/s pool: {far:?}"
    );
    // 50% of the closed-loop RPS measured first.
    let closed = results.rows[0].summary.as_ref().unwrap().rps_mean;
    assert!((a.cells[1].offered_per_s - closed / 2.0).abs() < 1e-6);
    // The search: at most the bound (5% tolerance), a failed step above.
    let cap = &a.capacity[0];
    assert_eq!(cap.closed_loop_rps, Some(closed));
    if let Some(c) = cap.capacity_per_s {
        assert!(c <= 1050.0, "capacity {c} above Little's bound: {cap:?}");
        assert!(cap.failed_at_per_s.is_some_and(|f| f > c));
        assert!(cap
            .steps
            .iter()
            .any(|s| s.held && s.within_slo == Some(true)));
    } else {
        assert!(cap.note.is_some(), "{cap:?}");
    }
    assert!(cap.steps.iter().all(|s| s.within_slo.is_some()));
    // The reports and the charts.
    let md = std::fs::read_to_string(results_dir.join("report.md")).unwrap();
    assert!(
        md.contains("## At fixed rates") && md.contains("## Capacity under SLO"),
        "{md}"
    );
    // The closed-loop rows' latency is labelled as the queue at saturation,
    // pointing at the fixed-rate tables, in the terminal and both reports.
    let note = "the queue c connections build at saturation (p50 ≈ c ÷ RPS); \
                latency at a held load is in the fixed-rate tables";
    assert!(stdout.contains(note) && md.contains(note), "{stdout}\n{md}");
    let html = std::fs::read_to_string(results_dir.join("report.html")).unwrap();
    assert!(html.contains("At fixed rates") && html.contains("<svg"));
    assert!(html.contains("the queue c connections build at saturation"));
    let svg = std::fs::read_to_string(results_dir.join("rate-latency-sleep_ms_20.svg")).unwrap();
    assert!(svg.contains("SLO 100 ms") && svg.contains("knee"), "{svg}");
    assert!(results_dir
        .join("rate-percentiles-sleep_ms_20-50_.svg")
        .exists());
}

#[test]
fn a_zero_rate_or_a_bad_slo_is_one_line_and_exit_2() {
    let dir = tmp("rates-bad");
    for args in [
        ["--rate", "0"],
        ["--rate", "0%"],
        ["--slo", "p99<50ms"],
        ["--threshold", "latency<5"],
    ] {
        let (code, stdout, stderr) = compare(&args, dir.path());
        assert_eq!(code, Some(2), "{args:?}\n{stdout}\n{stderr}");
        let first = stderr.lines().next().unwrap_or("");
        assert!(
            first.contains("--rate") || first.contains("bad threshold"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn models_rate_states_littles_law_first_and_finds_no_more_than_it() {
    let dir = tmp("models-rate");
    let o = Command::new(harness_bin())
        .args([
            "models",
            "--servers",
            "worker-pool",
            "--experiments",
            "rate",
            "-d",
            "1s",
            "--out",
        ])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "\n{stdout}\n{stderr}");
    assert!(stdout.contains("6. Waiting at fixed rates"), "{stdout}");
    let results_dir = the_results_dir(dir.path());
    let text = std::fs::read_to_string(results_dir.join("results.json")).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../schema/models.schema.json")).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("results.json does not match models.schema.json: {e}");
    }
    let run = &value["waiting_at_rate"][0];
    assert_eq!(run["predicted_per_s"], 1000.0, "{run}");
    assert!(run["prediction"]
        .as_str()
        .unwrap()
        .contains("holds 1000 req/s and no more"));
    // However fast the machine: 20 workers × 50/s, within the search's 5%.
    if let Some(c) = run["capacity_per_s"].as_f64() {
        assert!(c <= 1050.0, "{run}");
    }
    let steps = run["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    // A step far above the bound never holds.
    for s in steps {
        if s["offered_per_s"].as_f64().unwrap() > 1500.0 {
            assert_eq!(s["held"], false, "{s}");
        }
    }
    let finding = value["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["experiment"] == "waiting at a rate")
        .expect("a finding for the search");
    assert!(finding["matches_prediction"].is_boolean(), "{finding}");
}

#[test]
fn a_sigterm_between_fixed_rate_cells_writes_what_was_measured() {
    use std::time::Duration;
    let out = tmp("rates-sigterm");
    let mut cmd = Command::new(harness_bin());
    cmd.args([
        "compare",
        "--servers",
        "worker-pool",
        "--workloads",
        "hello",
        "-c",
        "4",
        "-d",
        "1s",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--rate",
        "200,300",
        "--rate-duration",
        "4s",
        "--out",
    ])
    .arg(out.path())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    crate::util::own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut stderr = crate::util::StderrLines::of(&mut child);
    // The second cell under way: the first is complete.
    stderr.wait_for("at 300/s (300/s) ...", Duration::from_secs(120));
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = crate::util::wait_exit(
        &mut child,
        Duration::from_secs(60),
        "harness did not exit after SIGTERM",
    );
    assert_eq!(status.code(), Some(130), "{}", stderr.text());
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    assert!(results.header.interrupted);
    let first = &results.at_rate.cells[0];
    assert_eq!(first.offered_per_s, 200.0);
    assert!(first.error.is_none() && first.requests > 0, "{first:?}");
    // The cell the signal cut short is written too, and not called held.
    if let Some(cut) = results.at_rate.cells.get(1) {
        assert!(!cut.held, "{cut:?}");
    }
}

#[test]
fn fixed_rate_cells_run_over_websocket_and_over_tls() {
    for extra in [
        &["--workloads", "ws-echo"][..],
        &["--workloads", "hello", "--tls"][..],
    ] {
        let dir = tmp("rates-ws-tls");
        let mut args = vec![
            "--servers",
            "event-loop",
            "-c",
            "4",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--rate",
            "200",
            "--rate-duration",
            "1s",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = compare(&args, dir.path());
        assert_eq!(code, Some(0), "{extra:?}\n{stdout}\n{stderr}");
        let text =
            std::fs::read_to_string(the_results_dir(dir.path()).join("results.json")).unwrap();
        let results = Results::from_json(&text).unwrap();
        let cell = &results.at_rate.cells[0];
        assert_eq!(cell.workload, extra[1]);
        assert_eq!(cell.offered_per_s, 200.0);
        assert!(
            cell.error.is_none() && cell.requests > 0,
            "{extra:?}: {cell:?}"
        );
    }
}

#[test]
fn fixed_rate_cells_run_per_protocol_each_at_its_own_closed_loop_share() {
    let dir = tmp("rates-protocols");
    let (code, stdout, stderr) = compare(
        &[
            "--servers",
            "event-loop",
            "--workloads",
            "hello",
            "--protocol",
            "h1,h2c",
            "--streams",
            "4",
            "-c",
            "4",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--rate",
            "200,25%",
            "--rate-duration",
            "1s",
        ],
        dir.path(),
    );
    assert_eq!(code, Some(0), "\n{stdout}\n{stderr}");
    let results_dir = the_results_dir(dir.path());
    let text = std::fs::read_to_string(results_dir.join("results.json")).unwrap();
    let schema: Value =
        serde_json::from_str(include_str!("../schema/results.schema.json")).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("results.json does not match results.schema.json: {e}");
    }
    let results = Results::from_json(&text).unwrap();
    let cells = &results.at_rate.cells;
    // A cell per protocol and rate, HTTP/1.1's first, as the rows.
    let got: Vec<(Option<&str>, &str)> = cells
        .iter()
        .map(|c| (c.protocol.as_deref(), c.asked.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (None, "200/s"),
            (None, "25%"),
            (Some("h2c 4"), "200/s"),
            (Some("h2c 4"), "25%")
        ],
        "{cells:?}"
    );
    for c in cells {
        assert!(c.error.is_none() && c.requests > 0, "{c:?}");
        // 25% of the closed-loop RPS of the same protocol's row.
        if c.asked == "25%" {
            let row = results
                .rows
                .iter()
                .find(|r| r.protocol == c.protocol)
                .unwrap();
            let rps = row.summary.as_ref().unwrap().rps_mean;
            assert!((c.offered_per_s - rps / 4.0).abs() < 1e-6, "{c:?} {row:?}");
        }
    }
    assert!(stdout.contains("hello h2c 4"), "{stdout}");
    assert!(results_dir.join("rate-latency-hello.svg").exists());
    assert!(results_dir.join("rate-latency-hello_h2c_4.svg").exists());
}
