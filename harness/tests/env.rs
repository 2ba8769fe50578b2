//! `--env` and `harness calibrate`: pinned affinity verified from /proc;
//! the bridge environments built, a request served across them, and
//! nothing left behind (namespaces, links, the nftables table,
//! `route_localnet`) after success, failure, panic, an interrupted
//! calibrate (one signal: orderly; two: the emergency path); calibrate's
//! JSON against its schema. Bridge tests need root, `ip` and `nft`: where
//! the machine refuses, they print why and pass, except under `CI=true`
//! where they fail (scripts/install-deps provides both).

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use harness::catalog::{self, Entry, Running, StartCtx};
use harness::env::{bridge, pinned, Environment, Setup};
use serde_json::Value;

use crate::cli::validate;
use crate::util::{harness_bin, own_session, sibling_binary, skip_without, tmp, wait_exit};

/// The tests here share `route_localnet` and the CPU placement of whatever
/// runs (calibrate measures every environment it is given, and runs the
/// reference servers): one at a time, so each can check that what it found
/// is restored (models.rs's head-of-line test builds a bridge too).
pub(crate) static NET: Mutex<()> = Mutex::new(());

fn event_loop() -> Entry {
    sibling_binary("event-loop");
    catalog::catalog()
        .into_iter()
        .find(|e| e.name == "event-loop")
        .unwrap()
}

/// `calibrate --json`'s output: it succeeded, and its document parses and
/// matches calibrate.schema.json; the document and the text it came from.
fn calibrate_document(o: &std::process::Output) -> (Value, String) {
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    let schema: Value =
        serde_json::from_str(include_str!("../schema/calibrate.schema.json")).unwrap();
    let value: Value = serde_json::from_str(&text).expect("calibrate --json parses");
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("calibrate's JSON does not match calibrate.schema.json: {e}\n{text}");
    }
    (value, text)
}

fn route_localnet() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/conf/all/route_localnet")
        .unwrap()
        .trim()
        .to_string()
}

fn sh(program: &str, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Namespaces, links and nft tables whose names contain `fragment`.
fn leftovers(fragment: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (what, text) in [
        ("netns", sh("ip", &["netns", "list"])),
        ("link", sh("ip", &["-o", "link", "show"])),
        ("nft", sh("nft", &["list", "tables"])),
    ] {
        out.extend(
            text.lines()
                .filter(|l| l.contains(fragment))
                .map(|l| format!("{what}: {l}")),
        );
    }
    out
}

/// `GET /hello` on `running` answers 200 `Hello World`.
fn assert_hello(running: &Running) {
    let r = running.get("/hello", Duration::from_secs(5)).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello World"[..]));
}

/// Why the bridge environments cannot be built here (the test then
/// skips; under `CI=true` it fails: install-deps provides `ip` and `nft`,
/// and CI runs as root).
fn bridge_refused() -> Option<String> {
    let why = bridge::availability().err()?;
    skip_without(&format!(
        "the bridge environment is not available here: {why}"
    ));
    Some(why)
}

#[test]
fn pinned_puts_the_server_and_the_load_on_disjoint_cpus() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(why) = Environment::Pinned.availability() {
        // Two CPUs or more: the machine's, not something install-deps
        // provides, so this skips under CI=true too.
        crate::util::skip_visibly(&why);
        return;
    }
    let entry = event_loop();
    let env = catalog::Env::discover(None);
    let interrupt = AtomicBool::new(false);
    let setup = Setup::build(Environment::Pinned, None).unwrap();
    let placement = setup.placement().unwrap();
    let server_cpus = placement.cpus.clone().unwrap();
    let load_cpus = setup.load_cpus().unwrap().to_vec();
    assert!(server_cpus.iter().all(|c| !load_cpus.contains(c)));
    let ctx = StartCtx {
        env: &env,
        db: None,
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls: None,
        h2c: false,
        h3: false,
    };
    let running = entry.start_placed(&ctx, &placement).unwrap();
    // The load's side, on a thread of its own so the test runner's is untouched.
    std::thread::scope(|s| {
        s.spawn(|| {
            let _pin = setup.pin_load().unwrap().unwrap();
            let checks = setup.verify(&running.pids()).unwrap();
            assert!(checks[0].contains("Cpus_allowed_list"), "{checks:?}");
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let mine = pinned::cpus_allowed(&format!("/proc/self/task/{tid}/status")).unwrap();
            assert_eq!(mine, load_cpus);
        });
    });
    for pid in running.pids() {
        let theirs = pinned::cpus_allowed(&format!("/proc/{pid}/status")).unwrap();
        assert_eq!(theirs, server_cpus, "server pid {pid}");
    }
    assert_hello(&running);
}

#[test]
fn the_bridge_serves_directly_across_dnat_and_through_the_proxy_and_is_torn_down() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if bridge_refused().is_some() {
        return;
    }
    let before = route_localnet();
    let entry = event_loop();
    let env = catalog::Env::discover(None);
    let interrupt = AtomicBool::new(false);
    for kind in [
        Environment::BridgeDirect,
        Environment::Bridge,
        Environment::BridgeProxy,
    ] {
        let setup = Setup::build(kind, None).unwrap();
        let id = setup.bridge().unwrap().id.clone();
        // The namespace, the bridge, the veth, the nft table.
        assert!(leftovers(&id).len() >= 4, "{:?}", leftovers(&id));
        assert_eq!(route_localnet(), "1");
        let placement = setup.placement().unwrap();
        let ip = placement.listen_ip.unwrap().octets();
        assert_eq!(&ip[..2], &[198, if ip[1] == 18 { 18 } else { 19 }]);
        let ctx = StartCtx {
            env: &env,
            db: None,
            interrupt: &interrupt,
            php_jit: Default::default(),
            tls: None,
            h2c: false,
            h3: false,
        };
        let mut running = entry.start_placed(&ctx, &placement).unwrap();
        setup.verify(&running.pids()).unwrap();
        let published = setup.publish(running.addr).unwrap();
        if kind == Environment::BridgeDirect {
            // The namespace's own address, across the bridge.
            assert_eq!(published.addr, running.addr);
            assert_eq!(
                published.addr.ip(),
                IpAddr::V4(placement.listen_ip.unwrap())
            );
        } else {
            assert!(published.addr.ip().is_loopback());
        }
        Setup::redirect(&mut running, &published);
        assert_hello(&running);
        drop(published);
        drop(running);
        drop(setup);
        assert!(leftovers(&id).is_empty(), "{:?}", leftovers(&id));
        assert_eq!(route_localnet(), before);
    }
}

/// A stack of several programs is placed whole: nginx, the php-fpm master
/// and its 20 workers all enter the namespace (and, pinned, the server's
/// CPUs), and `/work` through the DNAT reaches the database from inside.
#[test]
fn php_fpm_and_nginx_are_placed_whole() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    let entry = catalog::catalog()
        .into_iter()
        .find(|e| e.name == "php-fpm")
        .unwrap();
    let env = catalog::Env::discover(None);
    assert!(entry.placeable());
    let db = catalog::Db::parse(testkit::db::shared()).unwrap();
    let interrupt = AtomicBool::new(false);
    let ctx = StartCtx {
        env: &env,
        db: Some(&db),
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls: None,
        h2c: false,
        h3: false,
    };
    let mut kinds = vec![Environment::Pinned];
    if bridge_refused().is_none() {
        kinds.push(Environment::Bridge);
    }
    for kind in kinds {
        let setup = Setup::build(kind, Some(db.port)).unwrap();
        let mut running = entry
            .start_placed(&ctx, &setup.placement().unwrap())
            .unwrap();
        let tree = harness::procfs::tree(&running.pids());
        // nginx master + worker(s), php-fpm master + 20 workers
        assert!(tree.len() >= 23, "{kind:?}: {} processes", tree.len());
        // verify() also checks the caller is on the load's CPUs: a thread
        // of its own, so the test runner's is untouched.
        let checked = std::thread::scope(|s| {
            s.spawn(|| {
                let _pin = setup.pin_load().unwrap();
                setup.verify(&running.pids()).unwrap()
            })
            .join()
            .unwrap()
        });
        assert!(!checked.is_empty(), "{kind:?}");
        if kind == Environment::Pinned {
            let cpus = setup.placement().unwrap().cpus.unwrap();
            for p in &tree {
                let theirs = pinned::cpus_allowed(&format!("/proc/{}/status", p.pid)).unwrap();
                assert_eq!(theirs, cpus, "pid {}", p.pid);
            }
        }
        setup.publish_kept(&mut running).unwrap();
        let r = running.get("/work", Duration::from_secs(10)).unwrap();
        let expected = workloads::expect("GET", "/work");
        workloads::verify(&expected, r.status, &r.header_refs(), &r.body)
            .unwrap_or_else(|m| panic!("{kind:?}: /work {m:?}"));
        drop(running);
    }
}

#[test]
fn nothing_is_left_after_a_failure_or_a_panic() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if bridge_refused().is_some() {
        return;
    }
    let before = route_localnet();
    let mut id = String::new();
    let failed = (|| -> anyhow::Result<()> {
        let setup = Setup::build(Environment::Bridge, Some(3306))?;
        id = setup.bridge().unwrap().id.clone();
        anyhow::bail!("a step after the build fails")
    })();
    assert!(failed.is_err());
    assert!(!id.is_empty());
    assert!(leftovers(&id).is_empty(), "{:?}", leftovers(&id));
    let caught = std::panic::catch_unwind(|| {
        let setup = Setup::build(Environment::BridgeProxy, None).unwrap();
        let id = setup.bridge().unwrap().id.clone();
        std::panic::panic_any(id);
    });
    let id = *caught.unwrap_err().downcast::<String>().unwrap();
    assert!(leftovers(&id).is_empty(), "{:?}", leftovers(&id));
    // Teardown is idempotent.
    let mut setup = Setup::build(Environment::Bridge, None).unwrap();
    let id = setup.bridge().unwrap().id.clone();
    let first = setup.teardown();
    assert!(first.is_empty(), "{first:?}");
    let second = setup.teardown();
    assert!(second.is_empty(), "{second:?}");
    drop(setup);
    assert!(leftovers(&id).is_empty());
    assert_eq!(route_localnet(), before);
}

/// Runs `harness calibrate --env bridge`, sends it `signal` `times` times
/// as soon as its bridge exists, and checks that nothing is left (after a
/// SIGKILL: once the next build has swept what the dead harness left).
fn interrupt_calibrate(signal: libc::c_int, times: usize) {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if bridge_refused().is_some() {
        return;
    }
    sibling_binary("event-loop");
    let before = route_localnet();
    let tmpdir = tmp("env");
    let mut cmd = Command::new(harness_bin());
    cmd.env("TMPDIR", tmpdir.path())
        .args(["calibrate", "--env", "bridge", "--servers", "event-loop"])
        .args([
            "-d",
            "1s",
            "--runs",
            "3",
            "--noise-runs",
            "2",
            "--warmup",
            "0s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Its own session keeps the signal away from the test runner.
    own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let fragment = format!("blb{:x}g", child.id());
    let stderr = child.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let deadline = Instant::now() + Duration::from_secs(180);
    while leftovers(&fragment).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the bridge never appeared ({fragment})"
        );
        if child.try_wait().unwrap().is_some() {
            panic!("calibrate ended early: {:?}", log.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the server start and the load begin.
    std::thread::sleep(Duration::from_millis(700));
    for _ in 0..times {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "calibrate did not stop",
    );
    let log = log.join().unwrap();
    let id = fragment.trim_start_matches("blb");
    if signal == libc::SIGKILL {
        assert!(!leftovers(id).is_empty(), "a SIGKILL leaves the bridge");
        // What it started and no one stopped: the database, by its session.
        crate::util::kill_session(child.id());
        let swept = bridge::sweep_stale();
        assert!(
            swept.iter().any(|l| l.contains(id)),
            "{swept:?} does not mention {id}"
        );
    } else {
        assert_eq!(status.code(), Some(130), "{log:?}");
    }
    assert!(leftovers(id).is_empty(), "{:?}\n{log:?}", leftovers(id));
    assert_eq!(route_localnet(), before);
}

#[test]
fn an_interrupted_calibrate_leaves_no_namespace_link_or_rule() {
    interrupt_calibrate(libc::SIGINT, 1);
}

#[test]
fn a_twice_interrupted_calibrate_cleans_up_on_the_emergency_path() {
    interrupt_calibrate(libc::SIGINT, 2);
}

#[test]
fn a_killed_calibrate_is_swept_by_the_next_build_and_route_localnet_restored() {
    interrupt_calibrate(libc::SIGKILL, 1);
}

/// calibrate at a fixed rate (issue 44): every keep-alive row carries a
/// fixed-rate figure at one offered rate per server and workload (10% of
/// bare's closed-loop req/s, rounded), the same in every environment,
/// read against bare's at that rate; the handshake rows carry none.
#[test]
fn calibrate_reads_each_environment_against_bare_at_one_fixed_rate() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    sibling_binary("event-loop");
    let out = tmp("calibrate-rate");
    let o = Command::new(harness_bin())
        .args(["calibrate", "--json", "--servers", "event-loop"])
        .args(["--out", out.path().to_str().unwrap()])
        .args([
            "--env",
            "pinned,tls-server,bare",
            "--env-servers",
            "event-loop",
        ])
        .args([
            "-d",
            "300ms",
            "--runs",
            "2",
            "--noise-runs",
            "2",
            "--warmup",
            "0s",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (value, _) = calibrate_document(&o);
    assert!(
        value["settings"]["fixed_rate"]
            .as_str()
            .unwrap()
            .contains("10%"),
        "{}",
        value["settings"]
    );
    let envs = value["environments"].as_array().unwrap();
    // Bare first, whatever --env's order: the share is of its figure.
    assert_eq!(envs[0]["name"], "bare");
    let bare = &envs[0];
    for env in envs {
        let name = env["name"].as_str().unwrap();
        assert_eq!(env["status"], "measured", "{env}");
        for w in env["workloads"].as_array().unwrap() {
            let f = &w["fixed_rate"];
            if name.contains("/new-conn") {
                assert!(
                    f.is_null(),
                    "{name}: a handshake row has no fixed rate: {w}"
                );
                continue;
            }
            assert!(w["error"].is_null(), "{name}: {w}");
            let b = bare["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["server"] == w["server"] && b["path"] == w["path"])
                .unwrap();
            let offered = f["offered_per_s"].as_f64().unwrap();
            // One rate per server and workload in every environment: a
            // tenth of bare's closed-loop figure, to two digits.
            assert_eq!(
                offered,
                b["fixed_rate"]["offered_per_s"].as_f64().unwrap(),
                "{name}: {w}"
            );
            let tenth = b["rps_mean"].as_f64().unwrap() / 10.0;
            assert!(
                (offered - tenth).abs() <= 0.06 * tenth,
                "{name}: {offered} against {tenth}"
            );
            let runs = f["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 2, "{name}: {w}");
            for r in runs {
                assert!(
                    r["p50_us"].as_u64().unwrap() <= r["p99_us"].as_u64().unwrap(),
                    "{r}"
                );
            }
            // held is what its runs say.
            let held = runs.iter().all(|r| {
                r["failures"] == 0 && r["achieved_per_s"].as_f64().unwrap() >= 0.95 * offered
            });
            assert_eq!(f["held"].as_bool().unwrap(), held, "{name}: {f}");
            let below = offered <= 0.5 * w["rps_mean"].as_f64().unwrap();
            assert_eq!(f["below_knee"].as_bool().unwrap(), below, "{name}: {f}");
            // Added latency is the difference from bare's at that rate.
            let bf = &b["fixed_rate"];
            for (p, added) in [("p50_us", "p50_added_us"), ("p99_us", "p99_added_us")] {
                let want = f[p].as_f64().unwrap() - bf[p].as_f64().unwrap();
                assert_eq!(f[added].as_f64().unwrap(), want, "{name} {added}: {f}");
            }
            if name == "bare" {
                assert_eq!(f["p99_added_us"].as_f64().unwrap(), 0.0);
            }
            assert!(f["cpu_us_per_request"].as_f64().is_some(), "{name}: {f}");
        }
    }
    // The text report's table of them, beside the saturation ratios.
    let dir = std::fs::read_dir(out.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let report = std::fs::read_to_string(dir.join("calibration.txt")).unwrap();
    assert!(report.contains("at a fixed rate (--rate 10%"), "{report}");
    assert!(report.contains("sat ×"), "{report}");
}

/// A fixed rate of 0 (or past 100% of bare's) is refused in one line
/// with clap's exit code 2, before anything starts.
#[test]
fn a_zero_fixed_rate_is_refused_before_anything_starts() {
    for args in [
        &["calibrate", "--rate", "0"][..],
        &["calibrate", "--rate", "150%"],
        &["reproduce", "docker-vs-bare", "--rate", "0"],
        &["reproduce", "docker-vs-bare", "--rate=-3"],
    ] {
        let o = Command::new(harness_bin())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let first = err.lines().next().unwrap_or("");
        assert!(
            first.contains("--rate") && first.contains("positive"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn calibrate_json_matches_its_schema() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    sibling_binary("event-loop");
    let out = tmp("calibrate-out");
    let o = Command::new(harness_bin())
        .args(["calibrate", "--json", "--servers", "event-loop"])
        .args(["--out", out.path().to_str().unwrap()])
        .args([
            "--env",
            "bare,pinned,bridge-proxy,docker,tls-server,tls-proxy",
        ])
        .args(["--env-servers", "nginx-static,event-loop"])
        .args([
            "-d",
            "200ms",
            "--runs",
            "2",
            "--noise-runs",
            "2",
            "--warmup",
            "0s",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (value, _) = calibrate_document(&o);
    // --out: the same document, and the text report, in one directory.
    let dirs: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|d| d.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(
        dirs[0].to_string_lossy().ends_with("-calibrate"),
        "{dirs:?}"
    );
    let written = std::fs::read_to_string(dirs[0].join("calibration.json")).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), value);
    let report = std::fs::read_to_string(dirs[0].join("calibration.txt")).unwrap();
    assert!(report.contains("bare"), "{report}");
    let envs = value["environments"].as_array().unwrap();
    let bare = envs.iter().find(|e| e["name"] == "bare").unwrap();
    assert_eq!(bare["status"], "measured");
    assert_eq!(bare["workloads"][0]["ratio_to_bare"], 1.0);
    // --env-servers: each server on each workload it serves (nginx-static
    // serves /hello only), in every measured environment, each read
    // against its own bare figure.
    assert_eq!(value["settings"]["env_servers"][0], "nginx-static");
    for name in ["bare", "pinned"] {
        let env = envs.iter().find(|e| e["name"] == name).unwrap();
        let pairs: Vec<(String, String)> = env["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                assert!(w["error"].is_null(), "{name}: {w}");
                assert!(w["ratio_to_bare"].as_f64().unwrap() > 0.0, "{name}: {w}");
                (w["server"].to_string(), w["path"].to_string())
            })
            .collect();
        let want = [
            ("nginx-static", "/hello"),
            ("event-loop", "/hello"),
            ("event-loop", "/work"),
        ]
        .map(|(s, p)| (format!("{s:?}"), format!("{p:?}")));
        assert_eq!(pairs, want, "{name}");
    }
    // The TLS tax beside Docker's: each server over TLS, terminated by
    // itself and by an nginx in front, read against its own plaintext
    // figure on bare. (A 200 ms run of a debug build at c = 100 on a busy
    // machine may end before its handshakes do: its ratio may be 0, never
    // an error; compare's TLS tests count the handshakes.)
    for name in ["tls-server", "tls-proxy"] {
        let env = envs.iter().find(|e| e["name"] == name).unwrap();
        assert_eq!(env["status"], "measured", "{env}");
        let workloads = env["workloads"].as_array().unwrap();
        assert_eq!(workloads.len(), 3, "{env}");
        for w in workloads {
            assert!(w["error"].is_null(), "{name}: {w}");
            assert!(w["ratio_to_bare"].as_f64().unwrap() >= 0.0, "{name}: {w}");
            assert!(w["route"].as_str().unwrap().contains("TLS"), "{name}: {w}");
            assert_eq!(w["runs"].as_array().unwrap().len(), 2, "{name}: {w}");
            // CPU per request beside RPS where a request was answered,
            // and the row's contamination.
            let answered = w["runs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["requests"].as_u64().unwrap() > 0);
            assert_eq!(
                w["cpu_us_per_request"].as_f64().is_some(),
                answered,
                "{name}: {w}"
            );
            assert!(w["contaminated"].is_boolean(), "{name}: {w}");
            if name == "tls-proxy" {
                // The nginx in front is metered as the path (and counted
                // in the server's tree: the meter's ticks and the path's
                // schedstat ns differ too much in a 200 ms run to compare).
                for r in w["runs"].as_array().unwrap() {
                    if r["requests"].as_u64().unwrap() > 0 {
                        assert!(r["proxy_cpu_us_per_request"].as_f64().unwrap() > 0.0, "{r}");
                    }
                }
            }
        }
    }
    // tls-server brings its handshake-per-request rows, read against
    // plaintext with a connection per request.
    for name in [
        "bare/new-conn",
        "tls-server/new-conn",
        "tls-server/new-conn-full",
    ] {
        let env = envs.iter().find(|e| e["name"] == name).unwrap();
        assert_eq!(env["workloads"].as_array().unwrap().len(), 3, "{env}");
        assert_eq!(env["baseline"], "bare/new-conn");
    }
    assert_eq!(value["tax"].as_array().unwrap().len(), 3);
    let docker = envs.iter().find(|e| e["name"] == "docker").unwrap();
    if docker["status"] == "not_available" {
        assert!(docker["reason"].as_str().unwrap().contains("Docker engine"));
        crate::util::skip_without(&format!("its Docker half: {}", docker["reason"]));
    } else {
        // Real Docker beside the emulation: a sentence per server and
        // workload, and docker-proxy's CPU metered as a part of the path.
        assert_eq!(docker["status"], "measured", "{docker}");
        let emulation = value["emulation"].as_array().unwrap();
        assert_eq!(emulation.len(), 3, "{emulation:?}");
        for p in emulation {
            let s = p["sentence"].as_str().unwrap();
            assert!(s.contains("bridge-proxy predicts"), "{s}");
            assert!(p["proxy_cpu_us_per_request"].as_f64().unwrap() > 0.0, "{p}");
        }
        assert!(value["docker_engine"]
            .as_str()
            .unwrap()
            .starts_with("Docker Engine"));
    }
    assert!(value["noise"]["cv_pct"].as_f64().is_some());
}

/// calibrate's TLS section over h2 and h3 (issue 42, item 4): with
/// tls-server, each server that serves h2 (by ALPN) and h3 (event-loop,
/// started with --h3, and caddy-static) has a tls-server/h2 and a
/// tls-server/h3 row, loaded with --streams per connection, every
/// response verified, read against plaintext HTTP/1.1 on bare and
/// against HTTP/1.1 over TLS, with a fixed-rate figure at the same
/// offered rate; worker-pool (HTTP/1.1 only) gets both rows not served,
/// with why, and no ratio. No timing is asserted.
#[test]
fn calibrate_reads_h2_and_h3_over_tls_beside_http1() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    sibling_binary("event-loop");
    sibling_binary("worker-pool");
    let env = catalog::Env::discover(None);
    let caddy = catalog::catalog()
        .into_iter()
        .find(|e| e.name == "caddy-static")
        .expect("caddy-static is in the catalog")
        .availability(&env);
    let mut servers = "event-loop,worker-pool".to_string();
    if let catalog::Availability::Missing { reason, fix } = caddy {
        if skip_without(&format!("caddy-static: {reason} ({fix})")) {
            return;
        }
    } else {
        servers.push_str(",caddy-static");
    }
    let o = Command::new(harness_bin())
        .args(["calibrate", "--json", "--servers", "event-loop"])
        .args(["--env", "bare,tls-server", "--env-servers", &servers])
        .args(["-c", "8", "--streams", "4", "-d", "500ms", "--runs", "1"])
        .args(["--noise-runs", "2", "--warmup", "0s", "--rate", "100"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (value, text) = calibrate_document(&o);
    assert_eq!(value["settings"]["streams"], 4);
    let envs = value["environments"].as_array().unwrap();
    let row = |name: &str| {
        envs.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} row in {text}"))
    };
    for (name, proto) in [("tls-server/h2", "h2"), ("tls-server/h3", "h3")] {
        let e = row(name);
        assert_eq!(e["status"], "measured", "{e}");
        assert_eq!(e["protocol"], proto, "{e}");
        assert_eq!(e["streams"], 4, "{e}");
        assert_eq!(e["baseline"], "bare", "{e}");
        assert_eq!(e["also_against"], "tls-server", "{e}");
        // Every server and workload of HTTP/1.1 over TLS has a row here:
        // measured, or not served with why; never a silent gap.
        let tls = row("tls-server")["workloads"].as_array().unwrap();
        let workloads = e["workloads"].as_array().unwrap();
        assert_eq!(workloads.len(), tls.len(), "{e}");
        for w in workloads {
            let server = w["server"].as_str().unwrap();
            assert!(w["error"].is_null(), "{name}: {w}");
            let serves = server != "worker-pool";
            if !serves {
                // HTTP/1.1 only: the row says so, in the server's or the
                // catalog's words, and has no figure at all.
                let why = w["not_served"].as_str().unwrap_or_else(|| panic!("{w}"));
                let expected = if proto == "h3" {
                    "QUIC is built into the event loop alone"
                } else {
                    "parses HTTP/1"
                };
                assert!(why.contains(expected), "{name}: {why}");
                assert!(w["runs"].as_array().unwrap().is_empty(), "{w}");
                assert!(w["ratio_to_bare"].is_null(), "{w}");
                assert!(w["cpu_ratio_to_bare"].is_null(), "{w}");
                assert!(w["versus"].is_null() && w["fixed_rate"].is_null(), "{w}");
                continue;
            }
            assert!(w["not_served"].is_null(), "{name}: {w}");
            let runs = w["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 1, "{name}: {w}");
            for r in runs {
                assert!(r["requests"].as_u64().unwrap() > 0, "{name}: {r}");
                assert_eq!(r["failures"], 0, "{name}: {r}");
                // Kept alive: a handshake per connection at most (QUIC's
                // are its own), never one per request.
                let hs = r["handshakes_full"].as_u64().unwrap()
                    + r["handshakes_resumed"].as_u64().unwrap();
                assert!(hs <= 8 * 2, "{name}: {r}");
            }
            for k in ["ratio_to_bare", "cpu_ratio_to_bare", "cpu_us_per_request"] {
                assert!(w[k].as_f64().unwrap() > 0.0, "{name} {k}: {w}");
            }
            let v = &w["versus"];
            assert_eq!(v["row"], "tls-server", "{w}");
            assert!(v["ratio"].as_f64().unwrap() > 0.0, "{w}");
            assert!(v["cpu_ratio"].as_f64().unwrap() > 0.0, "{w}");
            // The same offered rate as HTTP/1.1's rows, its runs verified.
            let f = &w["fixed_rate"];
            assert_eq!(f["offered_per_s"], 100.0, "{w}");
            for r in f["runs"].as_array().unwrap() {
                assert_eq!(r["failures"], 0, "{name}: {r}");
                assert!(r["requests"].as_u64().unwrap() > 0, "{name}: {r}");
            }
            assert!(f["cpu_ratio_to_bare"].as_f64().unwrap() > 0.0, "{w}");
        }
        let served: Vec<&str> = workloads
            .iter()
            .filter(|w| w["not_served"].is_null())
            .map(|w| w["server"].as_str().unwrap())
            .collect();
        assert!(served.contains(&"event-loop"), "{name}: {served:?}");
        assert_eq!(
            served.contains(&"caddy-static"),
            servers.contains("caddy-static"),
            "{name}: {served:?}"
        );
    }
    // The TLS sentence names h2 and h3 beside HTTP/1.1 over TLS.
    for t in value["tax"].as_array().unwrap() {
        let s = t["sentence"].as_str().unwrap();
        if s.starts_with("worker-pool") {
            assert!(s.contains("Over TLS, h2 is not served ("), "{s}");
            assert!(s.contains("h3 is not served (HTTP/1.1 only"), "{s}");
        } else {
            assert!(s.contains("Over TLS, h2 (4 streams) takes"), "{s}");
            assert!(s.contains("h3 (4 streams) takes"), "{s}");
        }
    }
}

/// The namespace check of the bridge holds while the server forks and
/// reaps processes all the time (as Swoole's master does while it starts
/// its workers after the first one answers, and a shell here does without
/// end), and still fails for a live process of the server's group that is
/// outside the namespace.
#[test]
fn the_namespace_check_holds_while_the_server_forks_and_catches_an_outsider() {
    use std::os::unix::process::CommandExt;
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if bridge_refused().is_some() {
        return;
    }
    let setup = Setup::build(Environment::Bridge, None).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do /bin/true & /bin/true & wait; done"])
        .stdin(Stdio::null())
        .process_group(0);
    setup
        .placement()
        .unwrap()
        .apply(&mut cmd, std::path::Path::new("/tmp"))
        .unwrap();
    let mut forker = cmd.spawn().unwrap();
    let pgid = forker.id() as i32;
    let stop = |forker: &mut std::process::Child| {
        // SAFETY: the group this test created (the shell, its children and
        // the outsider that joined it).
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = forker.wait();
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let pids = [forker.id()];
        let t0 = Instant::now();
        let mut passes = 0;
        while passes < 100 || t0.elapsed() < Duration::from_secs(2) {
            let checked = setup
                .verify(&pids)
                .unwrap_or_else(|e| panic!("pass {passes}: {e:#}"));
            assert!(checked[0].contains("in netns"), "{checked:?}");
            passes += 1;
            if t0.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        // A live process of the group, started outside the namespace.
        let mut outsider = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .process_group(pgid)
            .spawn()
            .unwrap();
        let err = format!("{:#}", setup.verify(&pids).unwrap_err());
        // SAFETY: our child.
        unsafe { libc::kill(outsider.id() as i32, libc::SIGKILL) };
        let _ = outsider.wait();
        assert!(
            err.contains(&format!("server process {} ", outsider.id())),
            "{err}"
        );
    }));
    stop(&mut forker);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Swoole in the bridge, checked the moment its first worker answers, as
/// calibrate does: its master is still forking the other workers then (the
/// check used to report one of them outside the namespace), and `/work`
/// reaches the database from inside through the DNAT.
#[test]
fn swoole_is_placed_whole_while_it_still_forks_its_workers() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    if bridge_refused().is_some() {
        return;
    }
    let entry = catalog::catalog()
        .into_iter()
        .find(|e| e.name == "swoole")
        .unwrap();
    let env = catalog::Env::discover(None);
    if !crate::util::swoole_runs_here() {
        return;
    }
    let db = catalog::Db::parse(testkit::db::shared()).unwrap();
    let interrupt = AtomicBool::new(false);
    let ctx = StartCtx {
        env: &env,
        db: Some(&db),
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls: None,
        h2c: false,
        h3: false,
    };
    let setup = Setup::build(Environment::Bridge, Some(db.port)).unwrap();
    for round in 0..3 {
        let mut running = entry
            .start_placed(&ctx, &setup.placement().unwrap())
            .unwrap();
        let checked = setup
            .verify(&running.pids())
            .unwrap_or_else(|e| panic!("round {round}: {e:#}"));
        assert!(checked[0].contains("in netns"), "{checked:?}");
        setup.publish_kept(&mut running).unwrap();
        let r = running.get("/work", Duration::from_secs(10)).unwrap();
        let expected = workloads::expect("GET", "/work");
        workloads::verify(&expected, r.status, &r.header_refs(), &r.body)
            .unwrap_or_else(|m| panic!("round {round}: /work {m:?}"));
        // Once every worker runs, all 21 processes are found inside.
        let deadline = Instant::now() + Duration::from_secs(30);
        while harness::procfs::tree(&running.pids()).len() < 21 {
            assert!(Instant::now() < deadline, "20 workers within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let checked = setup.verify(&running.pids()).unwrap();
        assert!(
            checked[0].starts_with("21 server process(es)"),
            "{checked:?}"
        );
    }
}

/// Two CPU burners the test starts and stops by pid, killed on every path
/// out of the test.
struct Burners(Vec<std::process::Child>);

impl Burners {
    fn start(n: usize) -> Burners {
        Burners(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }

    /// Their CPU time so far, ns.
    fn cpu_ns(&self) -> u64 {
        self.0
            .iter()
            .map(|c| harness::procfs::cpu_ns(c.id() as i32).unwrap_or(0))
            .sum()
    }

    fn stop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A short calibrate while two CPU burners of the test's own take the
/// machine: every row whose runs had other processes at 10% or more is
/// marked contaminated, in the JSON and in the text, and no other; the
/// handshake-per-request rows count a handshake per request (full with
/// resumption off), the keep-alive TLS row far fewer, plaintext none.
#[test]
fn calibrate_marks_contaminated_rows_and_counts_a_handshake_per_request() {
    let _net = NET.lock().unwrap_or_else(|e| e.into_inner());
    sibling_binary("event-loop");
    let out = tmp("calibrate-tax");
    let mut burners = Burners::start(2);
    // The burners run before calibrate does: their CPU time moves.
    let t0 = burners.cpu_ns();
    let bound = Instant::now() + Duration::from_secs(120);
    while burners.cpu_ns() < t0 + 50_000_000 {
        assert!(Instant::now() < bound, "the burners got no CPU in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = burners.cpu_ns();
    let o = Command::new(harness_bin())
        .args(["calibrate", "--json", "--servers", "event-loop"])
        .args(["--out", out.path().to_str().unwrap()])
        .args(["--env", "bare,tls-server", "--env-servers", "event-loop"])
        .args(["-c", "20", "-d", "1s", "--runs", "1", "--noise-runs", "2"])
        .args(["--warmup", "0s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let burned = burners.cpu_ns() - before;
    burners.stop();
    let (value, _) = calibrate_document(&o);
    // They ran through the calibration: at least a second of CPU.
    assert!(burned > 1_000_000_000, "the burners took {burned} ns");
    let dir = std::fs::read_dir(out.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let report = std::fs::read_to_string(dir.join("calibration.txt")).unwrap();
    let envs = value["environments"].as_array().unwrap();
    let names: Vec<&str> = envs.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "bare",
            "bare/new-conn",
            "tls-server",
            "tls-server/h2",
            "tls-server/h3",
            "tls-server/new-conn",
            "tls-server/new-conn-full"
        ]
    );
    let mut marked = 0;
    for e in envs {
        let name = e["name"].as_str().unwrap();
        assert_eq!(e["status"], "measured", "{e}");
        let base = if name.contains("/new-conn") {
            "bare/new-conn"
        } else {
            "bare"
        };
        assert_eq!(e["baseline"], base);
        for w in e["workloads"].as_array().unwrap() {
            assert!(w["error"].is_null(), "{name}: {w}");
            let runs = w["runs"].as_array().unwrap();
            let outside = runs
                .iter()
                .map(|r| r["outside_cpu_pct"].as_f64().unwrap())
                .fold(0.0, f64::max);
            assert_eq!(w["outside_cpu_pct_max"].as_f64().unwrap(), outside);
            let contaminated = outside >= harness::lab::meter::CONTAMINATED_PCT;
            assert_eq!(w["contaminated"], contaminated, "{name}: {w}");
            // The text marks the same rows.
            let line = report
                .lines()
                .find(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 3 && f[0] == name && f[1] == w["path"] && f[2] == w["server"]
                })
                .unwrap_or_else(|| panic!("no row {name} {} in:\n{report}", w["path"]));
            assert_eq!(line.contains("% !"), contaminated, "{line}");
            marked += usize::from(contaminated);
            // CPU per request, metered, and its ratio to the baseline's.
            assert!(
                w["cpu_us_per_request"].as_f64().unwrap() > 0.0,
                "{name}: {w}"
            );
            assert!(
                w["cpu_ratio_to_bare"].as_f64().unwrap() > 0.0,
                "{name}: {w}"
            );
            for r in runs {
                let requests = r["requests"].as_u64().unwrap();
                let (full, resumed) = (
                    r["handshakes_full"].as_u64().unwrap(),
                    r["handshakes_resumed"].as_u64().unwrap(),
                );
                let most = requests + r["failures"].as_u64().unwrap() + 20;
                assert!(requests > 0, "{name}: {r}");
                match name {
                    "bare" | "bare/new-conn" => assert_eq!(full + resumed, 0, "{name}: {r}"),
                    // One handshake per connection, 20 connections.
                    "tls-server" | "tls-server/h2" | "tls-server/h3" => {
                        assert!(full + resumed <= 20 * 2, "{name}: {r}")
                    }
                    // A connection, so a handshake, per request: resumed
                    // after each connection's first.
                    "tls-server/new-conn" => {
                        assert!((requests..=most).contains(&(full + resumed)), "{name}: {r}");
                        assert!(resumed > 0, "{name}: {r}");
                    }
                    _ => {
                        assert!((requests..=most).contains(&full), "{name}: {r}");
                        assert_eq!(resumed, 0, "{name}: {r}");
                    }
                }
            }
            if name.contains("tls-server/new-conn") {
                assert!(w["handshakes_per_s"].as_f64().unwrap() > 0.0, "{w}");
                assert!(w["cpu_us_per_handshake"].as_f64().unwrap() > 0.0, "{w}");
            }
        }
    }
    // The burners took two cores' worth of runnable threads: some row saw them.
    assert!(marked > 0, "no row marked contaminated:\n{report}");
    // A computed sentence per server and workload; no profile was asked for.
    let tax = value["tax"].as_array().unwrap();
    assert_eq!(
        tax.len(),
        value["environments"][0]["workloads"]
            .as_array()
            .unwrap()
            .len()
    );
    for t in tax {
        let s = t["sentence"].as_str().unwrap();
        assert!(s.starts_with("event-loop /"), "{s}");
        assert!(
            s.contains("TLS at the server") && s.contains("No profile was taken"),
            "{s}"
        );
        assert!(s.contains("handshake per request runs"), "{s}");
        assert!(report.contains(s), "{report}");
    }
}
