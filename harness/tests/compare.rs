//! `harness compare`, `servers` and `report` end to end: the real binary,
//! real servers (worker-pool, nginx + php-fpm, Node.js), the embedded
//! MariaDB; the schema of results.json; report.html in headless Chromium;
//! and an interrupted comparison that must leave nothing behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::compare::results::{
    ConformanceCheck, ConformanceDeviation, ContractCheck, CurvePoint, Database, Fairness,
    GroupTally, LatencyDoc, Machine, Results, Row, RowFailure, RowStatus, RunDoc, ServerDoc,
    ServerStatus, Settings, Summary, WorkloadDoc,
};
use harness::procfs;
use harness::stats::{FailureCounts, SecondPoint};
use serde_json::Value;

use crate::cli::validate;
use crate::util::{harness_bin, own_session, sibling_binary, tmp, wait_exit, StderrLines};

pub(crate) fn the_results_dir(out: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one results dir expected: {dirs:?}");
    dirs.into_iter().next().unwrap()
}

fn check_schema(text: &str) {
    let schema: Value =
        serde_json::from_str(include_str!("../schema/results.schema.json")).expect("schema parses");
    let value: Value = serde_json::from_str(text).expect("results.json parses");
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("results.json does not match results.schema.json: {e}");
    }
}

/// `harness compare ARGS --out OUT`, which must succeed: its stdout and stderr.
/// `harness compare ARGS --out OUT`: its exit code, stdout and stderr.
fn compare_exit(args: &[&str], out: &Path) -> (Option<i32>, String, String) {
    let o = Command::new(harness_bin())
        .arg("compare")
        .args(args)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code(), stdout, stderr)
}

/// Short runs: 10 connections, 2 runs of 1 s, no warm-up.
const QUICK: [&str; 8] = ["-c", "10", "-d", "1s", "--runs", "2", "--warmup", "0"];

pub(crate) fn compare_ok(args: &[&str], out: &Path) -> (String, String) {
    let (code, stdout, stderr) = compare_exit(args, out);
    assert_eq!(code, Some(0), "\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The row of `server` on `workload`, from the table on stdout.
fn table_row<'a>(stdout: &'a str, server: &str, workload: &str) -> Option<&'a str> {
    stdout.lines().find(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.first() == Some(&server) && cols.get(3) == Some(&workload)
    })
}

#[test]
fn compare_two_servers_on_hello_and_work_end_to_end() {
    sibling_binary("worker-pool");
    let out = tmp("compare");
    let (stdout, stderr) = compare_ok(
        &[
            &[
                "--servers",
                "worker-pool,php-fpm",
                "--workloads",
                "hello,work",
                "--gather",
                "200us",
            ],
            &QUICK[..],
        ]
        .concat(),
        out.path(),
    );
    for server in ["worker-pool", "php-fpm"] {
        for w in ["hello", "work"] {
            let row = table_row(&stdout, server, w)
                .unwrap_or_else(|| panic!("no {server} {w} row:\n{stdout}\n{stderr}"));
            assert!(!row.contains("FAILED"), "{row}\n{stderr}");
        }
    }
    // The fairness audit was printed before loading.
    assert!(stderr.contains("settings (/config)"), "{stderr}");
    assert!(stderr.contains("tracing"), "php-fpm's JIT:\n{stderr}");

    let dir = the_results_dir(out.path());
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    assert_eq!(results.database.kind, "embedded");
    assert!(!results.header.interrupted);
    // The engine's I/O as `harness run` records it, --gather passed through.
    let (io, _, can_gather) = harness::engine::resolve_io(harness::engine::Io::Uring);
    assert_eq!(results.settings.io.as_deref(), Some(io.name()));
    let gathers = io == harness::engine::Io::Uring && can_gather;
    assert_eq!(results.settings.gather_us, gathers.then_some(200.0));
    assert!(stdout.contains("load: the engine on"), "{stdout}");
    // The closed loop's latency is labelled for what it is.
    assert!(
        stdout.contains("the queue c connections build at saturation")
            && stdout.contains("use --rate for latency at your load"),
        "{stdout}"
    );
    // Both pass every row of harness verify, run before loading.
    for s in &results.servers {
        let c = s.contract.as_ref().expect("a contract check");
        assert!(c.rows >= 40, "{}: {c:?}", s.name);
        assert_eq!((c.passed, &c.failed), (c.rows, &vec![]), "{}", s.name);
    }
    assert!(stderr.contains("contract (harness verify):"), "{stderr}");
    assert_eq!(results.rows.len(), 4);
    for r in &results.rows {
        let s = r.summary.as_ref().expect("summary");
        assert_eq!(r.status, RowStatus::Ok, "{r:?}");
        assert_eq!(s.failed, 0, "{} {}: {:?}", r.server, r.workload, s.failures);
        assert_eq!(r.runs.len(), 2);
        assert!(s.rps_mean > 0.0 && s.p50_us > 0);
        assert!(s.server_cpu_pct.is_some_and(|c| c > 0.0), "{r:?}");
        assert!(s.server_rss_peak_bytes.is_some_and(|b| b > 1 << 20));
        assert!(!r.latency_curve.is_empty());
        assert!(r.runs.iter().all(|run| run
            .outside_cpu_pct
            .is_some_and(|p| (0.0..=100.0).contains(&p))));
    }
    let fpm = results
        .servers
        .iter()
        .find(|s| s.name == "php-fpm")
        .unwrap();
    let cfg = fpm.config.as_ref().expect("php-fpm /config");
    assert_eq!(cfg.jit.as_deref(), Some("tracing"), "{cfg:?}");
    // Judged only where autogroups split CPU shares (CI's kernel has none).
    let autogroups_on = procfs::effective_autogroup(std::process::id() as i32).is_some();
    assert_eq!(
        fpm.same_autogroup,
        autogroups_on.then_some(true),
        "php-fpm escaped the harness's autogroup"
    );
    assert_eq!(results.settings.baseline.as_deref(), Some("php-fpm"));
    let base = results
        .rows
        .iter()
        .find(|r| r.server == "php-fpm" && r.workload == "work")
        .unwrap();
    assert_eq!(base.summary.as_ref().unwrap().ratio, Some(1.0));

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.matches("<svg").count() >= 4, "charts missing");
    assert!(!html.contains("chart failed"));
    assert!(!html.contains("<script"), "the report is static");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("| worker-pool | worker-pool | harness | work | 10 |"),
        "{md}"
    );
    assert!(md.contains("- closed loop: each of c connections"), "{md}");
    assert!(html.contains("the queue c connections build at saturation"));

    // `harness report` re-renders from results.json alone.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let o = Command::new(harness_bin())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(table_row(&String::from_utf8_lossy(&o.stdout), "php-fpm", "work").is_some());
    assert!(dir.join("report.html").exists());
}

/// The start of each run of `results`, as `(server, workload, run index, started_s)`,
/// in the order the runs were taken.
fn runs_in_order(results: &Results) -> Vec<(String, String, usize, f64)> {
    let mut runs: Vec<(String, String, usize, f64)> = results
        .rows
        .iter()
        .flat_map(|r| {
            r.runs.iter().enumerate().map(move |(i, run)| {
                let at = run.started_s.expect("every run says when it began");
                (r.server.clone(), r.workload.clone(), i + 1, at)
            })
        })
        .collect();
    runs.sort_by(|a, b| a.3.total_cmp(&b.3));
    runs
}

#[test]
fn runs_are_interleaved_round_by_round_or_taken_back_to_back() {
    sibling_binary("worker-pool");
    sibling_binary("event-loop");
    let shape = [
        "--servers",
        "event-loop,worker-pool",
        "--workloads",
        "hello",
        "-c",
        "4",
        "-d",
        "300ms",
        "--runs",
        "3",
        "--warmup",
        "0",
    ];
    // The default: round k takes run k of every cell, in the cells' order.
    let out = tmp("interleaved");
    compare_ok(&shape, out.path());
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    assert_eq!(results.settings.order.as_deref(), Some("interleaved"));
    let taken: Vec<(String, usize)> = runs_in_order(&results)
        .into_iter()
        .map(|(s, _, i, _)| (s, i))
        .collect();
    let want: Vec<(String, usize)> = (1..=3)
        .flat_map(|i| {
            [
                ("event-loop".to_string(), i),
                ("worker-pool".to_string(), i),
            ]
        })
        .collect();
    assert_eq!(taken, want);

    // --order sequential: each cell's runs back to back.
    let out = tmp("sequential");
    compare_ok(
        &[&shape[..], &["--order", "sequential"]].concat(),
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    assert_eq!(results.settings.order.as_deref(), Some("sequential"));
    let servers: Vec<String> = runs_in_order(&results)
        .into_iter()
        .map(|(s, ..)| s)
        .collect();
    assert_eq!(
        servers,
        [
            "event-loop",
            "event-loop",
            "event-loop",
            "worker-pool",
            "worker-pool",
            "worker-pool"
        ]
    );

    // --seed: recorded, and every round still holds one run of each cell.
    let out = tmp("seeded");
    compare_ok(&[&shape[..], &["--seed", "7"]].concat(), out.path());
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    assert_eq!(results.settings.seed, Some(7));
    let rounds: Vec<usize> = runs_in_order(&results)
        .into_iter()
        .map(|(_, _, i, _)| i)
        .collect();
    assert_eq!(rounds, [1, 1, 2, 2, 3, 3]);
}

/// `--php-jit off`: php-fpm runs OPcache without its JIT, its /config
/// says so, and no note claims it was asked for the tracing JIT.
#[test]
fn php_jit_off_is_what_php_fpm_runs_and_reports() {
    let out = tmp("php-jit");
    compare_ok(
        &[
            "--servers",
            "php-fpm",
            "--workloads",
            "hello",
            "--php-jit",
            "off",
            "-c",
            "4",
            "-d",
            "300ms",
            "--runs",
            "1",
            "--warmup",
            "0",
        ],
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    let php = &results.servers[0];
    let config = php.config.as_ref().expect("php-fpm's /config");
    assert_eq!(config.jit.as_deref(), Some("off"), "{config:?}");
    assert_eq!(config.opcache, Some(true), "{config:?}");
    assert!(
        !php.notes.iter().any(|n| n.contains("JIT")),
        "{:?}",
        php.notes
    );
}

/// `--profile`: each measured run gets the server's and the generator's
/// flame graphs and CPU breakdown, linked from report.html, with the
/// server's programs (nginx and php-fpm for PHP, and PHP's own share);
/// where perf cannot run here, the runs go on and say why.
#[test]
fn profile_draws_each_runs_flame_graphs_and_breakdown() {
    sibling_binary("event-loop");
    let out = tmp("profile");
    let (_, stderr) = compare_ok(
        &[
            "--servers",
            "event-loop,php-fpm",
            "--workloads",
            "hello",
            "--profile",
            "-c",
            "10",
            "-d",
            "1s",
            "--runs",
            "2",
            "--warmup",
            "0",
        ],
        out.path(),
    );
    let dir = the_results_dir(out.path());
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Where the CPU went"), "no profile section");
    let row = |server: &str| {
        results
            .rows
            .iter()
            .find(|r| r.server == server)
            .unwrap_or_else(|| panic!("no {server} row"))
    };
    let runs = &row("event-loop").runs;
    assert_eq!(runs.len(), 2);
    if let Err(why) = harness::lab::profile::availability() {
        assert!(crate::util::skip_without(&format!(
            "perf cannot run here: {why}"
        )));
        for run in runs {
            let p = run.profile.as_ref().expect("a profile entry, with why");
            assert!(p.error.is_some(), "{p:?}");
        }
        assert!(stderr.contains("--profile: no profiles"), "{stderr}");
        return;
    }
    for run in runs {
        let p = run.profile.as_ref().expect("a profile");
        assert!(p.error.is_none(), "{p:?}");
        assert!(p.server.cpu_ns > 0 && p.generator.cpu_ns > 0, "{p:?}");
        assert!(p.server.user_us_per_request + p.server.kernel_us_per_request > 0.0);
        for f in [&p.server_svg, &p.generator_svg, &p.server_folded] {
            let f = f.as_ref().expect("a file");
            let body = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(!body.is_empty(), "{f}");
            assert!(
                html.contains(f.as_str()) || f.ends_with(".folded"),
                "{f} not linked"
            );
        }
        // One program, ours, and no PHP in it.
        let programs: Vec<&str> = p
            .server
            .programs
            .iter()
            .map(|p| p.program.as_str())
            .collect();
        assert_eq!(programs, ["event-loop"], "{p:?}");
        assert_eq!(p.server.php_pct, None);
    }
    // PHP: nginx and php-fpm's workers, and a share in PHP itself, shown.
    // A run's programs rest on its samples (99 Hz: on a busy machine a 1 s
    // run may catch only a few), so each program must appear in one of the
    // two runs, and nothing but them in any.
    let (mut nginx, mut fpm) = (false, false);
    for run in &row("php-fpm").runs {
        let p = run.profile.as_ref().expect("a profile");
        assert!(p.error.is_none(), "{p:?}");
        for s in &p.server.programs {
            assert!(s.pct > 0.0, "{p:?}");
            nginx |= s.program.starts_with("nginx");
            fpm |= s.program.starts_with("php-fpm");
            assert!(
                s.program.starts_with("nginx") || s.program.starts_with("php-fpm"),
                "{p:?}"
            );
        }
        // PHP's own share is there wherever a php-fpm process was sampled
        // (its size may be 0 on a few samples), and the shares add up.
        let sampled_fpm = p
            .server
            .programs
            .iter()
            .any(|s| s.program.starts_with("php-fpm"));
        assert_eq!(p.server.php_pct.is_some(), sampled_fpm, "{p:?}");
        if let Some(php) = p.server.php_pct {
            assert!((0.0..=100.0).contains(&php), "{p:?}");
        }
        if !p.server.programs.is_empty() {
            let total: f64 = p.server.programs.iter().map(|s| s.pct).sum();
            assert!((total - 100.0).abs() < 1e-6, "{p:?}");
        }
    }
    assert!(nginx && fpm, "nginx and php-fpm each sampled in some run");
    assert!(html.contains("PHP itself"), "no PHP share in the report");
}

#[test]
fn ab_drives_the_same_runs_into_the_same_table() {
    if harness::catalog::find_program(&["ab"]).is_none()
        && crate::util::skip_without(
            "ab (apt-get install apache2-utils; scripts/install-deps does)",
        )
    {
        return;
    }
    sibling_binary("worker-pool");
    let out = tmp("ab");
    let (stdout, _) = compare_ok(
        &[
            "--servers",
            "worker-pool",
            "--workloads",
            "hello",
            "--load-tool",
            "ab",
            "-c",
            "10",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
        ],
        out.path(),
    );
    let row = table_row(&stdout, "worker-pool", "hello").expect("row");
    assert!(row.contains(" ab "), "{row}");
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let r = Results::from_json(&text).unwrap();
    let row = &r.rows[0];
    assert_eq!((row.tool.as_str(), row.bodies_verified), ("ab", false));
    let s = row.summary.as_ref().unwrap();
    assert!(s.rps_mean > 100.0 && s.failed == 0, "{s:?}");
    assert!(stdout.contains("do not check bodies"), "{stdout}");
}

/// A CPU hog in a session of its own (its own scheduler autogroup: half
/// the machine) during a compare: the row's note says so.
#[test]
fn other_work_on_the_machine_is_named_beside_the_figures() {
    struct Hog(std::process::Child);
    impl Drop for Hog {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    sibling_binary("worker-pool");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]).stdin(Stdio::null());
    own_session(&mut cmd);
    let hog = Hog(cmd.spawn().unwrap());
    let out = tmp("contaminated");
    let (stdout, stderr) = compare_ok(
        &[
            &["--servers", "worker-pool", "--workloads", "hello"],
            &QUICK[..],
        ]
        .concat(),
        out.path(),
    );
    drop(hog);
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    let s = results.rows[0].summary.as_ref().unwrap();
    let outside = s.outside_cpu_pct_max.expect("outside CPU measured");
    assert!(
        outside >= harness::compare::report::table::CONTAMINATED_PCT,
        "the hog went unseen: {outside:.1}%\n{stderr}"
    );
    assert!(
        stdout.contains("worker-pool hello c=10: other processes took up to"),
        "{stdout}"
    );
}

/// The README's main command, shortened: `harness compare` on its defaults
/// runs every server this machine has (CI installs nginx, php-fpm and Node),
/// each passing every verify row, and both workloads with 0 failed.
#[test]
fn the_default_compare_runs_every_server_installed_here() {
    for bin in ["event-loop", "coroutine", "worker-pool"] {
        sibling_binary(bin);
    }
    let out = tmp("defaults");
    let (stdout, stderr) = compare_ok(
        &["-c", "10", "-d", "1s", "--runs", "1", "--warmup", "0"],
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    // Every catalog entry but those whose servers no registry here ships:
    // RoadRunner and FrankenPHP never, Swoole where no module was found
    // (PECL answers on a user's machine, not here).
    let swoole_missing = crate::util::swoole_missing();
    let mut not_installable = vec!["roadrunner", "frankenphp"];
    if swoole_missing.is_some() {
        not_installable.push("swoole");
    }
    let catalog = harness::catalog::catalog();
    let expected: Vec<String> = catalog
        .iter()
        .map(|e| e.name.clone())
        .filter(|n| !not_installable.contains(&n.as_str()))
        .collect();
    // The static servers (nginx-static, caddy-static) answer /hello only:
    // no contract check, no /work row.
    let whole_contract = |name: &str| {
        catalog
            .iter()
            .any(|e| e.name == name && e.serves_whole_contract())
    };
    assert!(expected.len() >= 6, "{expected:?}");
    // Without a module, Swoole is the skip line that says how to get one,
    // and what its image lacked (here: a registry for its base, the build
    // was tried); RoadRunner and FrankenPHP say what binary and image lacked.
    if let Some(why) = &swoole_missing {
        let s = results.servers.iter().find(|s| s.name == "swoole").unwrap();
        let reason = s.reason.as_deref().unwrap_or_default();
        let module = why.split("; image: ").next().unwrap();
        assert_eq!(s.status, ServerStatus::Skipped, "{s:?}");
        assert!(
            reason.starts_with(module)
                && reason.contains("; image: ")
                && reason.contains("pecl install swoole")
                && reason.contains("SWOOLE_SO="),
            "{reason}"
        );
        for name in ["roadrunner", "frankenphp"] {
            let s = results.servers.iter().find(|s| s.name == name).unwrap();
            let reason = s.reason.as_deref().unwrap_or_default();
            assert!(
                s.status == ServerStatus::Ran
                    || (reason.starts_with("binary: ") && reason.contains("; image: ")),
                "{name}: {reason}"
            );
        }
        let skip_line = format!("swoole skipped: {module}; image: ");
        assert!(
            stdout.contains(&skip_line) || stderr.contains(&skip_line),
            "no skip line `{skip_line}`:\n{stdout}\n{stderr}"
        );
        crate::util::skip_visibly(&format!(
            "its Swoole row (the skip line was checked): {why}"
        ));
    }
    for name in expected.iter().map(String::as_str) {
        let s = results
            .servers
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} is not in the catalog"));
        assert_eq!(
            s.status,
            ServerStatus::Ran,
            "{name}: {:?}\n{stderr}",
            s.reason
        );
        if whole_contract(name) {
            let c = s.contract.as_ref().expect("a contract check");
            // Swoole's core deviates on known rows (the catalog's list,
            // each with its reason): recorded as the core's, not failed;
            // every other server passes them all.
            let mut known: Vec<&str> = c.known.iter().map(|f| f.row.as_str()).collect();
            known.sort_unstable();
            let mut expected: Vec<&str> = if name == "swoole" {
                harness::catalog::deviations::SWOOLE
                    .deviations
                    .iter()
                    .map(|d| d.row)
                    .collect()
            } else {
                Vec::new()
            };
            expected.sort_unstable();
            assert!(
                c.rows >= 40 && c.failed.is_empty() && known == expected,
                "{name}: {c:?}"
            );
        }
        // Every server went through the conformance section; the Rust
        // reference servers fail none of its MUST rows.
        let conformance = s.conformance.as_ref().expect("a conformance check");
        assert!(conformance.rows >= 30, "{name}: {conformance:?}");
        if s.language == "rust" {
            assert_eq!(conformance.totals().2, 0, "{name}: {conformance:?}");
        }
        let workloads: &[&str] = if whole_contract(name) {
            &["hello", "work"]
        } else {
            &["hello"]
        };
        for w in workloads {
            let row = results
                .rows
                .iter()
                .find(|r| r.server == name && r.workload == *w)
                .unwrap_or_else(|| panic!("no {name} {w} row:\n{stdout}"));
            let summary = row.summary.as_ref().expect("a summary");
            assert_eq!(row.status, RowStatus::Ok, "{row:?}");
            assert!(
                summary.failed == 0 && summary.rps_mean > 0.0,
                "{name} {w}: {summary:?}"
            );
            assert!(table_row(&stdout, name, w).is_some(), "{stdout}");
        }
    }
    // What cannot run here is listed with what to install, never dropped.
    for s in &results.servers {
        if !expected.contains(&s.name) {
            assert!(
                s.status == ServerStatus::Ran
                    || (s.status == ServerStatus::Skipped && s.reason.is_some()),
                "{s:?}"
            );
        }
    }
    assert_eq!(
        results.rows.len(),
        results
            .servers
            .iter()
            .filter(|s| s.status == ServerStatus::Ran)
            .map(|s| if whole_contract(&s.name) { 2 } else { 1 })
            .sum::<usize>(),
        "hello and work for each server, hello alone for the static ones"
    );
}

#[test]
fn websocket_workloads_echo_hold_and_name_who_cannot_serve_them() {
    let out = tmp("compare-ws");
    let (stdout, _) = compare_ok(
        &[
            "--servers",
            "event-loop,php-fpm,worker-pool",
            "--workloads",
            "ws-echo,ws-hold,ws-room",
            "--pipeline",
            "2",
            "-c",
            "30",
            // ws-hold counts the upgrades made while it measures: 1 s once
            // opened 11 of 30 on a machine busy with builds and other tests.
            "-d",
            "2s",
            "--runs",
            "1",
            "--warmup",
            "0",
        ],
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results: Results = serde_json::from_str(&text).unwrap();
    let row = |server: &str, workload: &str| {
        results
            .rows
            .iter()
            .find(|r| r.server == server && r.workload == workload)
            .unwrap_or_else(|| panic!("no {server} {workload} row\n{stdout}"))
    };
    for w in ["ws-echo", "ws-hold", "ws-room"] {
        let fpm = row("php-fpm", w);
        assert_eq!(fpm.status, RowStatus::NotServed, "{stdout}");
        assert!(fpm.error.as_deref().unwrap().contains("FastCGI"), "{fpm:?}");
        assert!(
            table_row(&stdout, "php-fpm", w)
                .unwrap()
                .contains("NOT SERVED"),
            "{stdout}"
        );
    }
    let echo = row("event-loop", "ws-echo");
    assert_eq!(echo.status, RowStatus::Ok, "{stdout}");
    let s = echo.summary.as_ref().unwrap();
    assert!(s.requests > 0 && s.failed == 0, "{s:?}");
    let hold = row("event-loop", "ws-hold");
    let held = hold.runs[0].held.as_ref().unwrap();
    assert_eq!((held.opened, held.stayed_up), (30, 30), "{stdout}");
    assert!(held.waiting_note.is_none(), "{held:?}");
    assert!(
        held.rss_per_held_bytes
            .map_or(held.rss_note.is_some(), |b| b > 0.0),
        "{held:?}"
    );
    // 20 workers, a worker per connection: the rest wait, and that is no failure.
    let pool = row("worker-pool", "ws-hold");
    assert_eq!(pool.status, RowStatus::Ok, "{stdout}");
    let held = pool.runs[0].held.as_ref().unwrap();
    assert!(held.stayed_up > 0 && held.stayed_up < 30, "{held:?}");
    let note = held.waiting_note.as_deref().unwrap();
    assert!(
        note.contains("of 30 held (the rest wait: a worker per connection)"),
        "{note}"
    );
    assert!(stdout.contains(note), "{stdout}");
    // Echo on the same pool: the connections beyond its workers waited for
    // their 101 all run, and the table says the figures are the others'.
    let echo = row("worker-pool", "ws-echo");
    let upgraded = echo.runs[0].status_codes.get("101").copied().unwrap_or(0);
    assert!(upgraded > 0 && upgraded < 30, "{echo:?}");
    assert!(
        stdout.contains(&format!(
            "worker-pool ws-echo websocket ×2 c=30: {upgraded} of 30 connections upgraded"
        )),
        "{stdout}"
    );
    // --pipeline: messages in flight per connection, in the settings.
    assert_eq!(results.settings.ws_in_flight, Some(2), "{stdout}");
    // ws-room: 30 connections in rooms of 10, every delivery ok, the
    // deliveries counted beside the messages (10 per message, less those
    // in flight at the end).
    let room = row("event-loop", "ws-room");
    assert_eq!(room.status, RowStatus::Ok, "{stdout}");
    let run = &room.runs[0];
    let doc = run.room.as_ref().unwrap();
    assert_eq!((doc.rooms, doc.members), (3, 10), "{doc:?}");
    assert!(run.ok > 0 && run.failed == 0, "{run:?}");
    assert_eq!(doc.deliveries, run.ok, "{doc:?}");
    assert!(doc.deliveries <= doc.messages_sent * 10, "{doc:?}");
    assert!(
        doc.deliveries + 30 * 2 * 10 >= doc.messages_sent * 10,
        "{doc:?}"
    );
    assert!(doc.spans_note.is_none(), "{doc:?}");
    assert!(
        stdout.contains("rooms of 10: 10 deliveries per message"),
        "{stdout}"
    );
}

/// `compare --protocol h2c` on every server here that can serve it, two
/// stream counts swept: the Rust event-loop on its one port, nginx-static,
/// Node.js and php-fpm's nginx each on an h2c port of its own; coroutine
/// and worker-pool named as not serving it, with their reasons. A run
/// counts as h2c only where the engine got the server's SETTINGS back: an
/// HTTP/1.1 run (event-loop answers both on one port) fails this test.
#[test]
fn protocol_h2c_loads_every_server_that_serves_it_and_names_the_others() {
    for b in ["event-loop", "coroutine", "worker-pool"] {
        sibling_binary(b);
    }
    let out = tmp("compare-h2c");
    let (stdout, stderr) = compare_ok(
        &[
            "--servers",
            "event-loop,coroutine,worker-pool,node,nginx-static,php-fpm",
            "--workloads",
            "hello",
            "--protocol",
            "h2c",
            "--streams",
            "1,8",
            "-c",
            "4",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
        ],
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results: Results = serde_json::from_str(&text).unwrap();
    assert_eq!(results.settings.protocol.as_deref(), Some("h2c 1, h2c 8"));
    for s in &results.servers {
        assert_eq!(
            s.status,
            ServerStatus::Ran,
            "{}: {:?}\n{stderr}",
            s.name,
            s.reason
        );
    }
    assert_eq!(results.rows.len(), 12, "{stdout}");
    for r in &results.rows {
        let streams: u32 = match r.protocol.as_deref() {
            Some("h2c 1") => 1,
            Some("h2c 8") => 8,
            other => panic!("{}: protocol {other:?}", r.server),
        };
        match r.server.as_str() {
            "coroutine" | "worker-pool" => {
                assert_eq!(r.status, RowStatus::NotServed, "{r:?}");
                let why = r.error.as_deref().unwrap();
                assert!(why.starts_with("does not serve h2c: "), "{why}");
                // Their own words, from /config's http2_unsupported.
                assert!(why.len() > 60, "{why}");
                assert!(r.runs.is_empty(), "{r:?}");
            }
            _ => {
                assert_eq!(r.status, RowStatus::Ok, "{r:?}\n{stdout}");
                let run = &r.runs[0];
                assert!(run.ok > 0 && run.failed == 0, "{}: {run:?}", r.server);
                let f = run.framing.as_ref().expect("the run's framing");
                assert_eq!(f.protocol, "h2c", "{}: {f:?}", r.server);
                assert_eq!(f.in_flight, streams, "{}: {f:?}", r.server);
                assert_eq!(f.streams_asked, Some(streams), "{}", r.server);
                assert_eq!(
                    r.http2_front.is_some(),
                    r.server == "php-fpm",
                    "{}: {:?}",
                    r.server,
                    r.http2_front
                );
            }
        }
    }
    let front = results
        .rows
        .iter()
        .find_map(|r| r.http2_front.as_deref())
        .unwrap();
    assert!(
        front.starts_with("nginx ") && front.contains("FastCGI"),
        "{front}"
    );
    // Each server was checked over h2c before it was loaded.
    for s in ["node", "php-fpm"] {
        let line = stderr
            .lines()
            .skip_while(|l| !l.starts_with(&format!("starting {s} ")))
            .find(|l| l.contains("(harness verify --h2c)"))
            .unwrap_or_else(|| panic!("{s}: no h2c rows\n{stderr}"));
        assert!(line.contains("rows pass"), "{line}");
    }
    let el = table_row(&stdout, "event-loop", "hello").unwrap();
    assert!(el.contains("hello h2c ×1"), "{stdout}");
    assert!(stdout.contains("hello h2c ×8"), "{stdout}");
    assert!(
        table_row(&stdout, "coroutine", "hello")
            .unwrap()
            .contains("NOT SERVED"),
        "{stdout}"
    );
    assert!(
        stdout.contains("php-fpm hello h2c ×8 c=4: HTTP/2 terminated by nginx"),
        "{stdout}"
    );
}

/// `compare --tls --protocol h1,h3`: event-loop (started with --h3) and
/// caddy-static are checked over HTTP/3 and loaded over it, each run
/// recorded as h3 with verified responses and none failed; nginx-static
/// gets its h3 row NOT SERVED with the catalog's reason (nginx 1.22 has no
/// QUIC module), beside its HTTP/1.1 row over TLS, which runs.
#[test]
fn protocol_h3_loads_the_servers_that_serve_it_and_names_the_others() {
    sibling_binary("event-loop");
    let out = tmp("compare-h3");
    let mut servers = "event-loop,nginx-static".to_string();
    let env = harness::catalog::Env::discover(None);
    let caddy = harness::catalog::catalog()
        .into_iter()
        .find(|e| e.name == "caddy-static")
        .expect("caddy-static is in the catalog")
        .availability(&env);
    let caddy = match caddy {
        harness::catalog::Availability::Ready(_) => {
            servers.push_str(",caddy-static");
            true
        }
        harness::catalog::Availability::Missing { reason, fix } => {
            if crate::util::skip_without(&format!("caddy-static: {reason} ({fix})")) {
                return;
            }
            false
        }
    };
    let (stdout, stderr) = compare_ok(
        &[
            "--tls",
            "--servers",
            &servers,
            "--workloads",
            "hello",
            "--protocol",
            "h1,h3",
            "--streams",
            "8",
            "-c",
            "2",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--rate",
            "500",
            "--rate-duration",
            "1s",
        ],
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results: Results = serde_json::from_str(&text).unwrap();
    assert_eq!(results.settings.protocol.as_deref(), Some("h1, h3 8"));
    // The open loop takes h3 too: a fixed-rate cell over it per server
    // that serves it, with answers (not judged held: a busy machine).
    let rated: Vec<_> = results
        .at_rate
        .cells
        .iter()
        .filter(|c| c.protocol.as_deref() == Some("h3 8"))
        .collect();
    assert_eq!(rated.len(), h3_servers(caddy), "{stdout}");
    for c in rated {
        if c.server == "nginx-static" {
            let why = c.error.as_deref().unwrap_or("");
            assert!(why.starts_with("does not serve h3: "), "{c:?}");
        } else {
            assert!(c.error.is_none() && c.requests > 0, "{c:?}\n{stdout}");
        }
    }
    let h3_rows: Vec<_> = results
        .rows
        .iter()
        .filter(|r| r.protocol.as_deref() == Some("h3 8"))
        .collect();
    assert_eq!(h3_rows.len(), h3_servers(caddy), "{stdout}");
    for r in &h3_rows {
        if r.server == "nginx-static" {
            assert_eq!(r.status, RowStatus::NotServed, "{r:?}");
            let why = r.error.as_deref().unwrap();
            assert!(why.starts_with("does not serve h3: "), "{why}");
            assert!(why.contains("no QUIC module"), "{why}");
            assert!(r.runs.is_empty(), "{r:?}");
            continue;
        }
        assert_eq!(r.status, RowStatus::Ok, "{r:?}\n{stdout}\n{stderr}");
        let run = &r.runs[0];
        assert!(run.ok > 0 && run.failed == 0, "{}: {run:?}", r.server);
        let f = run.framing.as_ref().expect("the run's framing");
        assert_eq!(f.protocol, "h3", "{}: {f:?}", r.server);
        assert_eq!(f.in_flight, 8, "{}: {f:?}", r.server);
    }
    // Their HTTP/1.1 rows over TLS ran, nginx-static's included.
    for r in results.rows.iter().filter(|r| r.protocol.is_none()) {
        assert_eq!(r.status, RowStatus::Ok, "{r:?}\n{stdout}");
    }
    // nginx-static's h3 row is in the table with its reason.
    let nginx = stdout
        .lines()
        .find(|l| l.starts_with("nginx-static") && l.contains("NOT SERVED"))
        .unwrap_or_else(|| panic!("no NOT SERVED row for nginx-static\n{stdout}"));
    assert!(nginx.contains("h3"), "{nginx}");
    assert!(stdout.contains("no QUIC module"), "{stdout}");
    // Each server that serves it was checked over HTTP/3 before loading.
    let line = stderr
        .lines()
        .skip_while(|l| !l.starts_with("starting event-loop "))
        .find(|l| l.contains("(harness verify --h3)"))
        .unwrap_or_else(|| panic!("event-loop: no h3 rows\n{stderr}"));
    assert!(line.contains("rows pass"), "{line}");
}

/// The servers of the h3 test: caddy-static where it is installed.
fn h3_servers(caddy: bool) -> usize {
    if caddy {
        3
    } else {
        2
    }
}

/// A protocol that cannot run as asked is refused in one line, before
/// anything starts: h2 is by ALPN over TLS, h2c in the clear, h3 over
/// QUIC (always TLS 1.3).
#[test]
fn protocols_that_cannot_run_as_asked_are_refused_in_one_line() {
    let out = tmp("compare-h2-refused");
    for (args, says) in [
        (&["--protocol", "h2"][..], "add --tls"),
        (&["--protocol", "h1,h2c", "--tls"][..], "use --protocol h2"),
        (&["--protocol", "h1,h3"][..], "always encrypted: add --tls"),
        (
            &["--protocol", "h3", "--tls", "--tls-version", "1.2"][..],
            "QUIC carries TLS 1.3 only",
        ),
        (
            &["--protocol", "h2c", "--streams", "8,0"][..],
            "--streams counts of 1 to 1024",
        ),
    ] {
        let mut all = vec!["--servers", "event-loop", "--workloads", "hello"];
        all.extend_from_slice(args);
        let (code, _, stderr) = compare_exit(&all, out.path());
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn servers_lists_the_catalog_with_reasons() {
    let o = Command::new(harness_bin()).arg("servers").output().unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    // Every entry (the catalog's unit test checks which entries there are).
    for e in harness::catalog::catalog() {
        let name = e.name.as_str();
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(name)),
            "{name} missing:\n{text}"
        );
    }
    let o = Command::new(harness_bin())
        .args(["compare", "--servers", "no-such-server"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown server"));
}

/// Every process whose session is `sid` or whose environment holds `marker`.
fn leftovers(sid: i32, marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Some(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| harness::procfs::parse_stat(&t))
        else {
            continue;
        };
        if stat.state == b'Z' {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let marked = env.windows(marker.len()).any(|w| w == marker.as_bytes());
        if stat.session == sid || marked {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            found.push(format!(
                "{pid} {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    found
}

#[test]
fn an_interrupted_compare_leaves_no_process_and_no_temp_dir() {
    sibling_binary("worker-pool");
    let tmpdir = tmp("sigterm-tmp");
    let out = tmp("sigterm-out");
    let marker = format!("BENCHLAB_TEST_MARK={}", std::process::id());
    let mut cmd = Command::new(harness_bin());
    cmd.args([
        "compare",
        "--servers",
        "php-fpm,worker-pool,node",
        "--workloads",
        "work",
    ])
    .args(["-c", "10", "-d", "30s", "--runs", "1", "--warmup", "0"])
    .arg("--out")
    .arg(out.path())
    .env("TMPDIR", tmpdir.path())
    .env("BENCHLAB_TEST_MARK", std::process::id().to_string())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    // Its own session: whatever it starts (and does not setsid) is found by
    // its session id afterwards, even once orphaned.
    own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let sid = child.id() as i32;
    let mut stderr = StderrLines::of(&mut child);
    // Wait for the first measured run to be under way.
    stderr.wait_for("run 1/1 ...", Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(1500));
    // While it runs, its children are in its session.
    assert!(
        leftovers(sid, &marker).len() >= 3,
        "the harness, a server and MariaDB should be running"
    );
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "harness did not exit after SIGTERM",
    );
    stderr.drain();
    assert_eq!(status.code(), Some(130), "{}", stderr.text());
    // Give init a moment to reap what was killed.
    std::thread::sleep(Duration::from_millis(300));
    let left = leftovers(sid, &marker);
    assert!(left.is_empty(), "left running: {left:?}\n{}", stderr.text());
    let files: Vec<_> = std::fs::read_dir(tmpdir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(files.is_empty(), "temp files left: {files:?}");
    // What was measured is written, marked as interrupted.
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    assert!(Results::from_json(&text).unwrap().header.interrupted);
}

/// A server SIGKILLed in the middle of a compare's run (issue #20): the
/// row fails with how it died (the signal), the run measured until then
/// is kept in results.json (`end: server_gone`, its answers counted), and
/// compare exits 1, nothing else having been measured.
#[test]
fn a_server_killed_mid_run_is_reported_with_its_signal_and_its_run_kept() {
    sibling_binary("worker-pool");
    let out = tmp("killed-out");
    let stdout_file = out.path().join("stdout");
    let results_dir = out.path().join("results");
    let mut cmd = Command::new(harness_bin());
    cmd.args(["compare", "--servers", "worker-pool", "--workloads", "work"])
        .args(["-c", "4", "-d", "300s", "--runs", "1", "--warmup", "0"])
        .arg("--out")
        .arg(&results_dir)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_file).unwrap())
        .stderr(Stdio::piped());
    own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let sid = child.id() as i32;
    let mut stderr = StderrLines::of(&mut child);
    stderr.wait_for("run 1/1 ...", Duration::from_secs(180));
    // The server of the run, in the compare's session; killed once it
    // has served the run for a while (its CPU time moved).
    let comm = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let server = procfs::all()
        .into_iter()
        .find(|p| p.session == sid && comm(p.pid).trim() == "worker-pool")
        .unwrap_or_else(|| panic!("no worker-pool in the session:\n{}", stderr.text()));
    let ticks = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| procfs::parse_stat(&t))
            .map_or(0, |s| s.cpu_ticks)
    };
    let start = ticks(server.pid);
    testkit::observe::wait_for("the server to serve the run", || {
        ticks(server.pid) >= start + 30
    });
    // SAFETY: a process of the session our own child made.
    unsafe { libc::kill(server.pid, libc::SIGKILL) };
    let status = wait_exit(
        &mut child,
        Duration::from_secs(120),
        "compare did not end after its server was killed",
    );
    stderr.drain();
    let stdout = std::fs::read_to_string(&stdout_file).unwrap();
    assert_eq!(status.code(), Some(1), "{stdout}\n{}", stderr.text());
    let row = table_row(&stdout, "worker-pool", "work").expect("a row");
    assert!(row.contains("FAILED"), "{row}");
    let text = std::fs::read_to_string(the_results_dir(&results_dir).join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    assert!(!results.header.interrupted);
    let r = &results.rows[0];
    assert_eq!(r.status, RowStatus::Failed);
    let error = r.error.as_deref().unwrap_or("");
    assert!(
        error.contains("SIGKILL") && error.contains("refused"),
        "the row says how the server died: {error}"
    );
    assert_eq!(r.runs.len(), 1, "the run measured until the kill is kept");
    let run = &r.runs[0];
    assert_eq!(run.end, "server_gone");
    assert!(
        run.ok > 0 && run.failed > 0,
        "{} ok, {} failed",
        run.ok,
        run.failed
    );
    eprintln!(
        "compare, worker-pool SIGKILLed mid-run: exit 1, row FAILED ({}), its run kept: \
         {} ok, {} failed in {:.1} s",
        error.lines().next().unwrap_or(""),
        run.ok,
        run.failed,
        run.duration_s
    );
}

/// A two-server, two-workload comparison, made up.
fn synthetic() -> Results {
    let server = |name: &str| ServerDoc {
        name: name.into(),
        model: "worker-pool".into(),
        language: "rust".into(),
        status: ServerStatus::Ran,
        reason: None,
        detail: Some("/bin/x".into()),
        config: None,
        versions: vec![],
        same_autogroup: Some(true),
        notes: vec![],
        // b gets a HEAD row wrong: reported under the table, still loaded
        runs_in: None,
        contract: Some(ContractCheck {
            rows: 49,
            passed: if name == "b" { 48 } else { 49 },
            failed: if name == "b" {
                vec![RowFailure {
                    row: "HEAD /hello".into(),
                    why: "a body was sent".into(),
                }]
            } else {
                vec![]
            },
            // a fails one row as its core is known to: listed, not failed
            known: if name == "a" {
                vec![RowFailure {
                    row: "header over 8 KiB → 431, closed".into(),
                    why: "Go net/http's core: the head limit is 1 MiB".into(),
                }]
            } else {
                vec![]
            },
        }),
        // b deviates from one MUST row of the conformance section.
        conformance: Some(ConformanceCheck {
            rows: 2,
            groups: vec![GroupTally {
                group: "header fields".into(),
                pass: if name == "b" { 1 } else { 2 },
                warn: 0,
                fail: if name == "b" { 1 } else { 0 },
            }],
            deviations: if name == "b" {
                vec![ConformanceDeviation {
                    row: "two Host fields → 400".into(),
                    group: "header fields".into(),
                    section: "RFC 9112 §3.2 (Request Target)".into(),
                    requirement: "MUST".into(),
                    outcome: "fail".into(),
                    found: "200 \"Hello World\"; expected 400".into(),
                    core: None,
                }]
            } else {
                vec![]
            },
        }),
        tls: None,
    };
    let row = |server: &str, workload: &str, rps: f64| {
        // Something else ran during b's hello runs.
        let outside = if (server, workload) == ("b", "hello") {
            23.0
        } else {
            0.5
        };
        let run = RunDoc {
            duration_s: 10.0,
            requests: (rps * 10.0) as u64,
            ok: (rps * 10.0) as u64,
            failed: 0,
            failures: FailureCounts::default(),
            status_codes: [("200".to_string(), (rps * 10.0) as u64)].into(),
            ok_per_s: rps,
            requests_per_s: rps,
            latency_us: LatencyDoc {
                mean: 1000.0,
                p50: 900,
                p75: 1100,
                p90: 1500,
                p99: 4000,
                p99_9: 9000,
                max: 20_000,
            },
            server_cpu_pct: Some(150.0),
            server_rss_peak_bytes: Some(30 << 20),
            generator_cpu_pct: Some(40.0),
            db_cpu_pct: None,
            outside_cpu_pct: Some(outside),
            // a's hello ran through docker-proxy (--env docker), which the
            // meter counts as the run's own, not as other processes'.
            path_cpu_pct: ((server, workload) == ("a", "hello")).then_some(97.0),
            end: "duration".into(),
            message: None,
            // A warm-up (seconds 0-1) and a stall (second 6): what the
            // over-time charts are for.
            series: (0..10u32)
                .map(|second| SecondPoint {
                    second,
                    requests: (rps * if second < 2 { 0.5 } else { 1.0 }) as u64,
                    errors: 0,
                    p50_us: 900,
                    p99_us: if second == 6 { 40_000 } else { 4000 },
                    max_us: 20_000,
                })
                .collect(),
            started_s: None,
            profile: None,
            tls: None,
            held: None,
            framing: None,
            room: None,
        };
        Row {
            server: server.into(),
            model: "worker-pool".into(),
            workload: workload.into(),
            path: format!("/{workload}"),
            connections: 100,
            protocol: None,
            http2_front: None,
            tool: "harness".into(),
            bodies_verified: true,
            status: RowStatus::Ok,
            error: None,
            runs: vec![run.clone(), run],
            summary: Some(Summary {
                rps_mean: rps,
                rps_sd: rps * 0.03,
                rps_min: rps * 0.96,
                rps_max: rps * 1.04,
                p50_us: 900,
                p99_us: 4000,
                max_us: 20_000,
                requests: (rps * 20.0) as u64,
                failed: 0,
                failures: FailureCounts::default(),
                server_cpu_pct: Some(150.0),
                server_rss_peak_bytes: Some(30 << 20),
                generator_cpu_pct: Some(40.0),
                outside_cpu_pct_max: Some(outside),
                ratio: None,
            }),
            latency_curve: [
                (0.0, 100),
                (50.0, 900),
                (90.0, 1500),
                (99.0, 4000),
                (99.9, 9000),
                (100.0, 20_000),
            ]
            .iter()
            .map(|&(p, v)| CurvePoint {
                percentile: p,
                latency_us: (v as f64 * 20_000.0 / rps) as u64,
            })
            .collect(),
        }
    };
    let mut r = Results {
        header: harness::lab::record::Header {
            schema: harness::compare::results::SCHEMA.into(),
            harness_version: "0.1.0".into(),
            started_utc: "2026-11-30T02:40:00Z".into(),
            finished_utc: "2026-11-30T02:41:00Z".into(),
            interrupted: false,
            command: vec!["harness".into(), "compare".into()],
        },
        settings: Settings {
            workloads: vec![
                WorkloadDoc {
                    name: "hello".into(),
                    path: "/hello".into(),
                },
                WorkloadDoc {
                    name: "work".into(),
                    path: "/work".into(),
                },
            ],
            connections: vec![100],
            duration_s: 10.0,
            warmup_s: 3.0,
            runs: 2,
            keepalive: true,
            protocol: None,
            ws_in_flight: None,
            threads: 2,
            timeout_s: 10.0,
            load_tool: "harness".into(),
            baseline: Some("b".into()),
            environment: Some("bare".into()),
            order: Some("sequential".into()),
            seed: None,
            io: Some("uring".into()),
            io_note: None,
            gather_us: Some(400.0),
            tls: None,
        },
        machine: Machine {
            cpu_model: "CPU".into(),
            cores: 2,
            kernel: "6".into(),
            os: "Debian".into(),
            memory_bytes: 1 << 30,
            load_avg_1m: 0.5,
            sched_autogroup_enabled: Some(true),
            scheduling: "process groups".into(),
            harness_build: "release".into(),
        },
        database: Database {
            kind: "embedded".into(),
            url: Some("mysql://bench:***@127.0.0.1:1/bench".into()),
            version: Some("MariaDB 10.11".into()),
            max_connections: Some(1000),
        },
        servers: vec![server("a"), server("b")],
        fairness: Fairness {
            warnings: vec!["workers differ: a 1, b 20".into()],
            db_pool_total: Some(40),
            db_max_connections: Some(1000),
        },
        rows: vec![
            row("a", "hello", 50_000.0),
            row("b", "hello", 14_000.0),
            row("a", "work", 20_000.0),
            row("b", "work", 8_000.0),
        ],
        at_rate: Default::default(),
    };
    harness::compare::apply_ratios(&mut r);
    r
}

#[test]
fn synthetic_results_match_the_schema_and_render() {
    let r = synthetic();
    check_schema(&r.to_json());
    assert_eq!(Results::from_json(&r.to_json()).unwrap(), r);
    let ratio = r.rows[0].summary.as_ref().unwrap().ratio.unwrap();
    assert!((ratio - 50_000.0 / 14_000.0).abs() < 1e-9);
    let html = harness::compare::report::html::render(&r);
    assert_eq!(
        html.matches("<svg").count(),
        8,
        "2 workloads × (bars, curves, requests/s over time, p99 over time)"
    );
    assert!(!html.contains("chart failed"));
    // One server alone, and a sweep over two levels.
    let mut one = r.clone();
    one.rows.retain(|x| x.server == "a");
    let html = harness::compare::report::html::render(&one);
    assert_eq!(html.matches("<svg").count(), 8);
    assert!(!html.contains("chart failed"));
    let mut sweep = r.clone();
    sweep.settings.connections = vec![10, 100];
    let mut low: Vec<Row> = r.rows.clone();
    for x in &mut low {
        x.connections = 10;
        x.summary.as_mut().unwrap().rps_mean /= 2.0;
    }
    sweep.rows.extend(low);
    let html = harness::compare::report::html::render(&sweep);
    assert_eq!(html.matches("<svg").count(), 18, "2 × 2 × 4 + 2 sweeps");
    assert!(!html.contains("chart failed"));
    if let Ok(keep) = std::env::var("HARNESS_KEEP_SWEEP") {
        std::fs::write(keep, &html).unwrap();
    }
    let table = harness::compare::report::table::terminal(&r);
    assert!(table.contains("50,000 ± 1,500"), "{table}");
    assert!(
        table.contains("b fails 1 of 49 contract rows (harness verify): HEAD /hello"),
        "{table}"
    );
    assert!(!table.contains("a fails"), "{table}");
    assert!(
        table.contains(
            "a: 1 of 49 contract rows fail as its core is known to, not by our code: \
             header over 8 KiB → 431, closed"
        ),
        "{table}"
    );
    assert!(
        table.contains("b hello c=100: other processes took up to 23% of the machine"),
        "{table}"
    );
    assert!(!table.contains("a hello c=100: other"), "{table}");
    assert!(
        table
            .contains("a hello c=100: docker-proxy, on the path to the server, took 97% of a core"),
        "{table}"
    );
    assert!(!table.contains("b hello c=100: docker-proxy"), "{table}");
    assert!(table.contains("3.57×"), "{table}");
    assert!(
        table.contains("load: the engine on io_uring, gathering 400 µs"),
        "the engine's I/O under the table: {table}"
    );
    assert!(
        table.contains("b HTTP/1.1 conformance (RFC 9112/9110): 1 pass, 0 warn, 1 fail"),
        "{table}"
    );
    let md = harness::compare::report::table::markdown(&r);
    assert!(md.contains("| b | 1 / 0 / 1 | 1 / 0 / 1 |"), "{md}");
    assert!(
        md.contains(
            "- b FAIL [header fields] two Host fields → 400 — RFC 9112 §3.2 (Request Target) MUST"
        ),
        "{md}"
    );
    let html = harness::compare::report::html::render(&r);
    assert!(
        html.contains("HTTP/1.1 conformance"),
        "the table beside the numbers"
    );
    // Results written before the section existed read and render without it.
    let mut old: Value = serde_json::from_str(&r.to_json()).unwrap();
    for s in old["servers"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("conformance");
    }
    let old = Results::from_json(&old.to_string()).unwrap();
    assert!(!harness::compare::report::table::markdown(&old).contains("HTTP/1.1 conformance"));
}

/// Debian's chromium, if installed.
fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| harness::catalog::find_program(&[n]))
}

#[test]
fn the_html_report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        crate::util::skip_without("chromium (apt-get install chromium; scripts/install-deps does)");
        return;
    };
    let dir = tmp("chromium");
    let html = dir.path().join("report.html");
    // A skipped server with a long reason and a started one with a long
    // command: the wide settings table must scroll in its box, not the page.
    let mut results = synthetic();
    let mut skipped = results.servers[0].clone();
    skipped.name = "swoole".into();
    skipped.status = ServerStatus::Skipped;
    skipped.reason = Some("`php -m` does not list swoole; to run it: pecl install swoole (6.x) and enable it, or run compose/ with Docker and pass --target swoole=http://127.0.0.1:9501".into());
    skipped.detail = None;
    results.servers.push(skipped);
    results.servers[0].detail = Some(
        "/work/main/target/release/worker-pool --addr=127.0.0.1:40000 --workers=20 \
         --mysql-url=mysql://bench:bench@127.0.0.1:3306/bench"
            .into(),
    );
    // A profiled run: the breakdown's row, its bar and its flame graph link.
    let mut profile = harness::lab::profile::Profile::default();
    profile.server.cpu_ns = 2_000_000_000;
    profile.server.user_us_per_request = 30.0;
    profile.server.kernel_us_per_request = 20.0;
    profile.server.kernel_pct = 40.0;
    profile.server.programs = vec![
        harness::lab::profile::ProgramShare {
            program: "php-fpm8.2".into(),
            pct: 70.0,
        },
        harness::lab::profile::ProgramShare {
            program: "nginx".into(),
            pct: 30.0,
        },
    ];
    profile.server.php_pct = Some(41.0);
    profile.server_svg = Some("profiles/worker-pool-hello-c100-run1.server.svg".into());
    results.rows[0].runs[0].profile = Some(profile);
    let report = harness::compare::report::html::render(&results);
    assert_eq!(
        report.matches("pecl install swoole").count(),
        1,
        "the reason once, in the notes"
    );
    std::fs::write(&html, &report).unwrap();
    // The same page with a probe that records whether it fits the window.
    let probe = dir.path().join("probe.html");
    std::fs::write(
        &probe,
        report.replace(
            "</body>",
            "<script>document.body.dataset.fits = \
             document.documentElement.scrollWidth <= window.innerWidth;</script></body>",
        ),
    )
    .unwrap();
    let profile = dir.path().join("profile");
    let common = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .stdin(Stdio::null());
    };
    let url = format!("file://{}", html.display());
    let mut dump = Command::new(&browser);
    common(&mut dump);
    let o = dump.arg("--dump-dom").arg(&url).output().unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "chromium failed: {log}");
    assert!(
        dom.matches("<svg").count() >= 4,
        "the charts did not survive:\n{dom}"
    );
    assert!(dom.contains("workers differ"), "fairness warnings missing");
    for profiled in [
        "Where the CPU went",
        "php-fpm8.2 70% · nginx 30% (PHP itself 41%)",
        "profiles/worker-pool-hello-c100-run1.server.svg",
    ] {
        assert!(dom.contains(profiled), "profile section: no {profiled:?}");
    }
    for chart in [
        "requests/s over time at c=100",
        "p99 latency over time at c=100",
    ] {
        assert!(dom.contains(chart), "no chart {chart:?}");
    }
    assert!(!log.contains(":CONSOLE("), "console messages: {log}");
    let mut fits = Command::new(&browser);
    common(&mut fits);
    let o = fits
        .arg("--window-size=1200,2400")
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(
        dom.contains("data-fits=\"true\""),
        "the page scrolls sideways at 1200 px: {}",
        &dom[..dom.len().min(300)]
    );
    let png = dir.path().join("report.png");
    let mut shot = Command::new(&browser);
    common(&mut shot);
    let o = shot
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2400")
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{} bytes",
        bytes.len()
    );
    if let Ok(keep) = std::env::var("HARNESS_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

#[test]
fn a_server_answering_200_with_a_db_error_is_reported_not_benchmarked() {
    // The seed's code answers {"db":"error"} with 200 when its database is
    // down: a throughput tool would time it as a success.
    let server = crate::util::TestServer::start(crate::util::Behaviour::DbError);
    let out = tmp("dberror");
    let (code, stdout, stderr) = compare_exit(
        &[
            // a --target name selects it like a catalog name
            "--servers",
            "seed",
            "--workloads",
            "work",
            "-c",
            "4",
            "-d",
            "1s",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:9/bench",
            "--target",
            &format!("seed={}", server.url("")),
        ],
        out.path(),
    );
    // Nothing was measured: the run says so in its exit status.
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("nothing was measured"), "{stderr}");
    let row = table_row(&stdout, "seed", "work").expect("a row");
    assert!(row.contains("FAILED"), "{row}");
    let r = Results::from_json(
        &std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(r.rows[0].status, RowStatus::Failed);
    assert!(
        r.rows[0]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("does not answer the contract"),
        "{:?}",
        r.rows[0].error
    );
    assert!(r.rows[0].summary.is_none(), "it must not get a speed");
    // Its /work row fails the contract check too, and the table says so.
    let c = r.servers[0].contract.as_ref().expect("a contract check");
    assert!(c.failed.iter().any(|f| f.row.contains("/work")), "{c:?}");
    assert!(stdout.contains("seed fails"), "{stdout}");
}

/// `compare --tls`: every server that runs here terminates TLS itself with
/// the run's certificate, passes the contract over TLS before loading
/// (through verify's relay), says what it negotiated, and is loaded over
/// TLS (handshakes counted); a server that cannot is skipped with why.
/// `--protocol h1,h2` in the same comparison: each server also loaded over
/// HTTP/2 where ALPN picks h2 (event-loop, Node.js, both nginx), the
/// others named as not serving it.
#[test]
fn compare_tls_runs_every_server_over_tls_end_to_end() {
    for b in ["event-loop", "coroutine", "worker-pool"] {
        sibling_binary(b);
    }
    let out = tmp("compare-tls");
    let (stdout, stderr) = compare_ok(
        &[
            "--tls",
            "--protocol",
            "h1,h2",
            "--streams",
            "8",
            "--servers",
            "event-loop,coroutine,worker-pool,node,nginx-static,php-fpm",
            "--target",
            "plain=http://127.0.0.1:1",
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
        ],
        out.path(),
    );
    let dir = the_results_dir(out.path());
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    let tls = results.settings.tls.as_ref().expect("settings.tls");
    assert_eq!((tls.version.as_str(), tls.resume), ("1.3", true));
    // The settings table has the negotiated parameters, like workers and JIT.
    assert!(stderr.contains("settings (/config)"), "{stderr}");
    let table = stderr.split("settings (/config)").nth(1).unwrap();
    assert!(
        table.lines().nth(1).is_some_and(|h| h.contains("tls")),
        "{table}"
    );
    let mut suites = Vec::new();
    for s in &results.servers {
        if s.name == "plain" {
            assert_eq!(s.status, ServerStatus::Skipped, "{s:?}");
            assert!(s.reason.as_deref().unwrap().contains("--tls"), "{s:?}");
            continue;
        }
        assert_eq!(
            s.status,
            ServerStatus::Ran,
            "{}: {:?}\n{stderr}",
            s.name,
            s.reason
        );
        let t = s
            .tls
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no TLS", s.name));
        assert_eq!(t.version, "TLSv1_3", "{}", s.name);
        assert_eq!(t.key_exchange, "X25519", "{}", s.name);
        assert_eq!(t.alpn.as_deref(), Some("http/1.1"), "{}", s.name);
        suites.push(t.cipher_suite.clone());
        if let Some(c) = &s.contract {
            assert_eq!(c.failed, vec![], "{} over TLS", s.name);
            assert!(c.rows >= 40, "{}: {c:?}", s.name);
        }
        assert!(s.conformance.is_some(), "{}", s.name);
    }
    suites.dedup();
    assert_eq!(suites.len(), 1, "one cipher suite for all: {suites:?}");
    assert!(
        !results.fairness.warnings.iter().any(|w| w.contains("TLS")),
        "{:?}",
        results.fairness.warnings
    );
    assert_eq!(results.settings.protocol.as_deref(), Some("h1, h2 8"));
    assert_eq!(results.rows.len(), 12, "{stdout}");
    for r in &results.rows {
        let h2 = r.protocol.as_deref() == Some("h2 8");
        assert!(h2 || r.protocol.is_none(), "{r:?}");
        if h2 && ["coroutine", "worker-pool"].contains(&r.server.as_str()) {
            assert_eq!(r.status, RowStatus::NotServed, "{r:?}");
            let why = r.error.as_deref().unwrap();
            assert!(why.starts_with("does not serve h2: "), "{why}");
            assert!(why.contains("by ALPN"), "{why}");
            continue;
        }
        assert_eq!(r.status, RowStatus::Ok, "{r:?}");
        let run = &r.runs[0];
        let f = run.framing.as_ref().expect("the run's framing");
        if h2 {
            assert_eq!(
                (f.protocol.as_str(), f.in_flight),
                ("h2", 8),
                "{}",
                r.server
            );
            assert_eq!(f.alpn.as_deref(), Some("h2"), "{}", r.server);
        } else {
            assert_eq!(f.protocol, "http/1.1", "{}", r.server);
            assert_eq!(f.alpn.as_deref(), Some("http/1.1"), "{}", r.server);
        }
        assert_eq!(run.failed, 0, "{} {:?}", r.server, run.failures);
        assert!(run.ok > 0, "{}", r.server);
        let t = run.tls.expect("handshakes counted");
        assert!(
            t.handshakes_full + t.handshakes_resumed >= 1,
            "{}: {t:?}",
            r.server
        );
        assert!(t.handshake_p50_us > 0, "{}: {t:?}", r.server);
    }
}

/// `--env tls-proxy`: the server as on bare, behind an nginx terminating
/// TLS; the load speaks TLS to nginx (handshakes counted), nginx plain
/// HTTP to the server, and nginx's processes are metered with the server.
#[test]
fn compare_in_tls_proxy_loads_the_server_through_nginx_over_tls() {
    sibling_binary("worker-pool");
    let out = tmp("compare-tls-proxy");
    let (_, stderr) = compare_ok(
        &[
            &[
                "--env",
                "tls-proxy",
                "--servers",
                "worker-pool",
                "--workloads",
                "hello",
            ],
            &["-c", "4", "-d", "1s", "--runs", "1", "--warmup", "0"][..],
        ]
        .concat(),
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    assert_eq!(results.settings.environment.as_deref(), Some("tls-proxy"));
    // --tls is the servers' own TLS: not set, the proxy's is the path's.
    assert!(results.settings.tls.is_none());
    let s = &results.servers[0];
    assert_eq!(s.status, ServerStatus::Ran, "{s:?}\n{stderr}");
    // The handshake before loading was with nginx, and /config is the server's.
    assert_eq!(s.tls.as_ref().map(|t| t.version.as_str()), Some("TLSv1_3"));
    assert_eq!(s.config.as_ref().unwrap().server, "worker-pool");
    assert!(
        s.config.as_ref().unwrap().tls.is_none(),
        "the server speaks plain HTTP"
    );
    let c = s.contract.as_ref().unwrap();
    assert!(c.passed > 0, "{c:?}");
    let r = &results.rows[0];
    assert_eq!(r.status, RowStatus::Ok, "{r:?}");
    let run = &r.runs[0];
    assert!(run.ok > 0 && run.failed == 0, "{run:?}");
    let t = run.tls.expect("handshakes counted");
    assert!(t.handshakes_full + t.handshakes_resumed >= 1, "{t:?}");
    assert!(run.server_cpu_pct.is_some_and(|c| c > 0.0));
    // Both at once is refused in one line.
    let (code, _, err) = compare_exit(&["--tls", "--env", "tls-proxy"], out.path());
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not both"), "{err}");
}

/// The WebSocket workloads over TLS, both ways a deployment puts it:
/// `--tls` (each server terminates it: `wss://` straight to event-loop,
/// Node.js and the worker pool) and `--env tls-proxy` (nginx terminates
/// it and passes the upgrade on to the plain server). Every run upgraded
/// over TLS (its
/// handshakes counted, one per connection), every echo and delivery
/// verified, and the held connections all held.
#[test]
fn websocket_workloads_run_over_tls_at_the_server_and_through_a_proxy() {
    for b in ["event-loop", "worker-pool"] {
        sibling_binary(b);
    }
    let out = tmp("compare-wss");
    let quick = ["-c", "20", "-d", "1s", "--runs", "1", "--warmup", "0"];
    // ws-hold requires all 20 held: 2 s, as websocket_workloads_echo_hold… learned
    // (1 s once opened 11 of 30 on a machine busy with builds), here with
    // a TLS handshake through the proxy before each upgrade.
    let held = ["-c", "20", "-d", "2s", "--runs", "1", "--warmup", "0"];
    let check = |results: &Results, stdout: &str, expect: &[(&str, &str)]| {
        for (server, workload) in expect {
            let r = results
                .rows
                .iter()
                .find(|r| r.server == *server && r.workload == *workload)
                .unwrap_or_else(|| panic!("no {server} {workload} row\n{stdout}"));
            assert_eq!(r.status, RowStatus::Ok, "{r:?}\n{stdout}");
            let run = &r.runs[0];
            assert!(
                run.ok > 0 && run.failed == 0,
                "{server} {workload}: {run:?}"
            );
            let t = run
                .tls
                .expect("a WebSocket run over TLS counts its handshakes");
            assert!(
                t.handshakes_full + t.handshakes_resumed >= 20,
                "{server} {workload}: {t:?}"
            );
            let framing = run.framing.as_ref().expect("what the run spoke");
            assert_eq!(framing.protocol, "websocket", "{framing:?}");
            if let Some(held) = &run.held {
                assert_eq!((held.opened, held.stayed_up), (20, 20), "{held:?}");
            }
            if let Some(room) = &run.room {
                assert_eq!(room.deliveries, run.ok, "{room:?}");
            }
        }
    };

    let (stdout, _) = compare_ok(
        &[
            &[
                "--tls",
                "--servers",
                "event-loop,node,worker-pool",
                "--workloads",
                "ws-echo,ws-room",
            ][..],
            &quick[..],
        ]
        .concat(),
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    check_schema(&text);
    let results = Results::from_json(&text).unwrap();
    assert!(results.settings.tls.is_some(), "{stdout}");
    check(
        &results,
        &stdout,
        &[
            ("event-loop", "ws-echo"),
            ("event-loop", "ws-room"),
            ("node", "ws-echo"),
            ("node", "ws-room"),
            // Its 20 workers hold the 20 connections, each its session.
            ("worker-pool", "ws-echo"),
            ("worker-pool", "ws-room"),
        ],
    );

    let out = tmp("compare-wss-proxy");
    let (stdout, _) = compare_ok(
        &[
            &[
                "--env",
                "tls-proxy",
                "--servers",
                "event-loop",
                "--workloads",
                "ws-hold,ws-room",
            ][..],
            &held[..],
        ]
        .concat(),
        out.path(),
    );
    let text = std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap();
    let results = Results::from_json(&text).unwrap();
    check(
        &results,
        &stdout,
        &[("event-loop", "ws-hold"), ("event-loop", "ws-room")],
    );
}

/// A server started outside the lab, named by its PID (`--target-pid`), is
/// metered as a catalog server is: CPU, CPU per request, RSS and the
/// machine's other load, its children included; the same server under a
/// second `--target` name without a PID says plainly that its CPU was not
/// measured; and the catalog's own worker-pool beside them has its CPU per
/// request too. (Figures are not compared: a busy machine decides them.)
#[test]
fn a_target_named_by_its_pid_is_metered_like_a_catalog_server() {
    let server = crate::util::reference_server("worker-pool", None);
    let url = format!("http://{}", server.addr);
    let out = tmp("target-pid");
    let (code, stdout, stderr) = compare_exit(
        &[
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
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:9/bench",
            "--target",
            &format!("outside={url}"),
            "--target-pid",
            &format!("outside={}", server.pid()),
            "--target",
            &format!("unnamed={url}"),
        ],
        out.path(),
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let r = Results::from_json(
        &std::fs::read_to_string(the_results_dir(out.path()).join("results.json")).unwrap(),
    )
    .unwrap();
    let row = |name: &str| {
        r.rows
            .iter()
            .find(|row| row.server == name)
            .unwrap_or_else(|| panic!("no {name} row:\n{stdout}"))
    };
    for name in ["outside", "worker-pool"] {
        let run = &row(name).runs[0];
        assert!(run.server_cpu_pct.is_some(), "{name}: {run:?}");
        assert!(
            run.server_rss_peak_bytes.is_some_and(|b| b > 0),
            "{name}: {run:?}"
        );
        let line = table_row(&stdout, name, "hello").expect("a table row");
        assert!(!line.contains("not measured"), "{line}");
    }
    let bare = &row("unnamed").runs[0];
    assert!(bare.server_cpu_pct.is_none() && bare.server_rss_peak_bytes.is_none());
    let line = table_row(&stdout, "unnamed", "hello").expect("a table row");
    assert!(line.contains("not measured"), "{line}");
    assert!(
        stdout.contains("unnamed: started elsewhere, its CPU, RSS and the machine's other load were not measured"),
        "{stdout}"
    );
    assert!(stdout.contains("CPU µs/req"), "{stdout}");
    assert!(
        stdout.contains(&format!("process {} and its children", server.pid())),
        "the metered processes are named:\n{stdout}\n{stderr}"
    );

    // A PID that names no process, or a name that is no --target: one line.
    let (code, _, stderr) = compare_exit(
        &[
            "--target",
            &format!("outside={url}"),
            "--target-pid",
            "other=1",
        ],
        out.path(),
    );
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("--target-pid other: no --target other=URL to meter"),
        "{stderr}"
    );
}
