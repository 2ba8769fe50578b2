//! `harness reproduce`, end to end with short runs: both experiments run
//! here on the real servers, and their reports hold the seed's figures and
//! ours, and the verdicts that follow from ours.

use std::process::Command;

use harness::reproduce::document::{Reproduction, Verdict};

use crate::util::{harness_bin, skip_visibly, swoole_missing, swoole_runs_here, tmp};

fn reproduce(args: &[&str], out: &std::path::Path) -> (Reproduction, String, String) {
    let output = Command::new(harness_bin())
        .arg("reproduce")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let dir = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("a results directory");
    let doc = Reproduction::from_json(&std::fs::read_to_string(dir.join("results.json")).unwrap())
        .unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(dir.join("report.md").is_file());
    (doc, html, stdout)
}

#[test]
fn swoole_vs_node_shows_document_lengths_and_the_seed_beside_ours() {
    if !swoole_runs_here() {
        return;
    }
    let out = tmp("reproduce-b");
    let (doc, html, stdout) = reproduce(&["swoole-vs-node", "-n", "300", "-c", "20"], out.path());
    for server in ["swoole", "node"] {
        for tool in ["ab", "ab -k", "harness"] {
            let c = doc
                .cells
                .iter()
                .find(|c| c.server == server && c.tool == tool)
                .unwrap_or_else(|| panic!("no {server} {tool} cell:\n{stdout}"));
            assert!(c.ok() && c.failed == 0 && c.requests == 300, "{c:?}");
            if tool.starts_with("ab") {
                // "Hello World": what ab timed, unlike the seed's 0 bytes.
                assert_eq!(c.document_length_bytes, Some(11), "{c:?}");
            } else {
                assert!(c.bodies_verified && c.valid_rps.unwrap() > 0.0, "{c:?}");
            }
        }
    }
    assert_eq!(doc.findings.len(), 3);
    assert_eq!(
        doc.findings[2].verdict,
        Verdict::NotSupported,
        "{:?}",
        doc.findings[2]
    );
    assert!(
        doc.findings[..2]
            .iter()
            .all(|f| f.verdict != Verdict::NotMeasured),
        "{:?}",
        doc.findings
    );
    for text in ["3543", "4116", "the seed"] {
        assert!(html.contains(text), "{text} is not in report.html");
    }
    assert!(stdout.contains("doc bytes"), "{stdout}");
}

#[test]
fn docker_vs_bare_runs_the_matrix_and_shows_what_ab_cannot_see() {
    // php-fpm always; Swoole's half where a module was found (else that
    // half is listed as skipped).
    let servers: &[&str] = match swoole_missing() {
        None => &["php-fpm", "swoole"],
        Some(why) => {
            skip_visibly(&format!("its Swoole half (php-fpm's runs): {why}"));
            &["php-fpm"]
        }
    };
    // Swoole is asked for either way: without a module its cells are
    // missing, and each must say why.
    let server_list = "php-fpm,swoole";
    // The real engine beside the emulation where one answers (CI starts one).
    let docker = harness::env::docker::Engine::probe().is_ok()
        || !crate::util::skip_without("its Docker cells: no Docker engine answers");
    let env_list = if docker {
        "bare,pinned,docker,docker-host"
    } else {
        "bare,pinned"
    };
    let out = tmp("reproduce-a");
    let (doc, html, stdout) = reproduce(
        &[
            "docker-vs-bare",
            "-d",
            "1s",
            "-c",
            "20",
            "--env",
            env_list,
            "--servers",
            server_list,
            "--rate",
            "100",
            "--rate-runs",
            "2",
            "--rate-duration",
            "500ms",
        ],
        out.path(),
    );
    // The fixed-rate cells: --rate-runs of them per server and
    // environment, at the offered rate, metered; the two claims they
    // judge, stated with two runs a side and decided by neither.
    for &server in servers {
        for env in env_list.split(',') {
            let cells = doc.cells_of(server, env, "harness", "at a fixed rate");
            assert_eq!(cells.len(), 2, "{server} in {env}:\n{stdout}");
            for (k, c) in cells.iter().enumerate() {
                assert!(c.ok() && c.requests > 0, "{c:?}");
                assert_eq!(
                    (c.offered_rps, c.repeat),
                    (Some(100.0), Some(k as u32 + 1)),
                    "{c:?}"
                );
                assert!(c.p50_ms <= c.p99_ms && c.p99_ms <= c.max_ms, "{c:?}");
                assert!(c.cpu_us_per_request.unwrap() > 0.0, "{c:?}");
            }
        }
    }
    for (claim, pair) in [
        (
            "The default bridge network adds",
            if docker { "docker − docker-host" } else { "" },
        ),
        ("CPU migration costs", "bare / pinned"),
    ] {
        let f = doc
            .findings
            .iter()
            .find(|f| f.claim.starts_with(claim))
            .unwrap();
        if pair.is_empty() {
            assert_eq!(f.verdict, Verdict::NotMeasured, "{f:?}");
            continue;
        }
        assert_eq!(f.verdict, Verdict::Undecided, "{f:?}");
        assert!(
            f.evidence.contains(pair) && f.evidence.contains("too few for a 95% interval"),
            "{f:?}"
        );
    }
    assert!(stdout.contains("CPU µs/req"), "{stdout}");
    for &server in servers {
        let valid = doc
            .cell(server, "bare", "harness", "as the seed ran it")
            .unwrap_or_else(|| panic!("no {server} engine cell:\n{stdout}"));
        assert!(
            valid.valid_rps.unwrap() > 0.0 && valid.failed == 0,
            "{valid:?}"
        );
        assert!(
            doc.cell(server, "bare", "ab", "as the seed ran it")
                .is_some(),
            "{stdout}"
        );
        // The seed's failure mode: ab sees answers and no failure; the
        // engine sees that none of them is the contract's.
        let ab = doc
            .cell(server, "bare", "ab", "database unreachable")
            .expect("failing-db ab cell");
        let engine = doc
            .cell(server, "bare", "harness", "database unreachable")
            .expect("failing-db engine cell");
        assert!(ab.rps > 0.0 && ab.failed == 0, "{ab:?}");
        assert_eq!(engine.valid_rps, Some(0.0), "{engine:?}");
        assert!(engine.failed > 0, "{engine:?}");
    }
    for env in env_list.split(',') {
        if !servers.contains(&"swoole") {
            let why = doc
                .cells
                .iter()
                .find(|c| c.server == "swoole" && c.environment == env && c.tool.is_empty())
                .and_then(|c| c.error.clone())
                .unwrap_or_else(|| panic!("no reason for swoole's missing {env} cell:\n{stdout}"));
            assert!(why.contains("Swoole module"), "{env}: {why}");
            assert!(
                stdout.contains(&format!("swoole in {env}: not measured: ")),
                "{stdout}"
            );
        }
    }
    if docker {
        for &server in servers {
            let c = doc
                .cell(server, "docker", "harness", "as the seed ran it")
                .unwrap_or_else(|| panic!("no {server} docker cell:\n{stdout}"));
            assert!(c.valid_rps.unwrap() > 0.0 && c.failed == 0, "{c:?}");
        }
        let bridge = &doc.findings[0];
        assert!(
            bridge.evidence.contains("docker (Docker Engine)"),
            "{bridge:?}"
        );
    }
    let failing = doc
        .findings
        .iter()
        .find(|f| f.claim.contains("working requests"))
        .unwrap();
    assert_eq!(failing.verdict, Verdict::NotSupported, "{failing:?}");
    for text in ["9700", "5543", "ours"] {
        assert!(html.contains(text), "{text} is not in report.html");
    }
}
