//! The real Docker Engine environments: every catalog server that runs
//! bare here is started by the environment in a container (`docker`: a
//! bridge network of the lab's, the port published on 127.0.0.1 through
//! docker-proxy, the database in a container of the same network;
//! `docker-host`: `--network host`, the database on the host's loopback),
//! passes every contract row through where the load goes, loses its
//! database inside Docker (503) and gets it back; and afterwards nothing
//! the tests made is left: no container, network or volume.
//!
//! Without an engine these tests skip, except under `CI=true`, where
//! scripts/install-deps installs docker.io and starts dockerd.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use harness::catalog::{catalog, Availability, Db, Entry, Env, StartCtx};
use harness::env::docker::Engine;
use harness::env::{Environment, Setup};
use testkit::client;
use workloads::{expect, Expected};

use crate::util::skip_without;

/// One Docker test at a time: each builds its own network and database
/// container, and the leftover check must see every one torn down.
static DOCKER: Mutex<()> = Mutex::new(());

/// The engine, or `None` after a visible skip (a failure under CI=true).
fn engine() -> Option<Engine> {
    match Engine::probe() {
        Ok(e) => Some(e),
        Err(why) => {
            skip_without(&format!("no Docker engine: {why}"));
            None
        }
    }
}

/// What a recipe's start needs: where servers are found, the test
/// binary's shared MariaDB, an interrupt flag that is never set.
struct Session {
    paths: Env,
    db: Db,
    interrupt: AtomicBool,
}

impl Session {
    fn new() -> Session {
        Session {
            paths: Env::discover(None),
            db: Db::parse(testkit::db::shared()).unwrap(),
            interrupt: AtomicBool::new(false),
        }
    }

    /// `environment` built for servers that reach the shared database.
    fn build(&self, environment: Environment) -> Setup {
        Setup::build_for(environment, Some(&self.db), &self.paths)
            .unwrap_or_else(|e| panic!("{}: {e:#}", environment.name()))
    }

    fn ctx(&self) -> StartCtx<'_> {
        StartCtx {
            env: &self.paths,
            db: Some(&self.db),
            interrupt: &self.interrupt,
            php_jit: Default::default(),
            tls: None,
            h2c: false,
            h3: false,
        }
    }
}

/// The catalog servers that run bare here and that an environment places
/// (every one but a `--target`).
fn runnable() -> Vec<Entry> {
    let env = Env::discover(None);
    catalog()
        .into_iter()
        .filter(|e| e.placeable() && matches!(e.availability(&env), Availability::Ready(_)))
        .collect()
}

/// What this process made that Docker still holds, by our pid label.
fn leftovers(engine: &Engine) -> Vec<String> {
    let filter = format!(
        "label={}={}",
        harness::catalog::container::PID_LABEL,
        std::process::id()
    );
    let mut left = Vec::new();
    for what in [
        &["ps", "-aq", "--filter", &filter][..],
        &["network", "ls", "-q", "--filter", &filter][..],
        &["volume", "ls", "-q", "--filter", &filter][..],
    ] {
        let out = engine.run(what).unwrap();
        left.extend(out.split_whitespace().map(|id| format!("{} {id}", what[0])));
    }
    left
}

fn every_server_passes_its_contract_in(environment: Environment) {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    let session = Session::new();
    let setup = session.build(environment);
    let ctx = session.ctx();
    let entries = runnable();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    for must in [
        "event-loop",
        "coroutine",
        "worker-pool",
        "node",
        "php-fpm",
        "nginx-static",
    ] {
        assert!(names.contains(&must), "{must} does not run here: {names:?}");
    }
    for entry in &entries {
        let started = setup
            .start(entry, &ctx)
            .unwrap_or_else(|e| panic!("{} in {}: {e:#}", entry.name, environment.name()));
        let containers = started.running.containers();
        assert!(!containers.is_empty(), "{}: not in a container", entry.name);
        assert!(
            started
                .checks
                .iter()
                .any(|c| c.contains("Docker containers")),
            "{}: {:?}",
            entry.name,
            started.checks
        );
        let addr = started.running.addr;
        assert!(addr.ip().is_loopback(), "the load goes to {addr}");
        if environment == Environment::Docker {
            assert!(started.route.contains("docker-proxy"), "{}", started.route);
        }
        if !entry.serves_whole_contract() {
            let r = client::get(addr, "/hello").unwrap();
            r.verify(&expect("GET", "/hello")).unwrap();
            continue;
        }
        let verdicts = harness::lab::contract::check_all(addr, Duration::from_secs(30));
        let core = harness::catalog::deviations::core_of(&entry.name);
        let failed: Vec<String> = verdicts
            .iter()
            .filter(|v| harness::catalog::deviations::read(core, &v.name, &v.result).is_failure())
            .filter_map(|v| v.result.as_ref().err().map(|e| format!("{}: {e}", v.name)))
            .collect();
        assert!(verdicts.len() >= 40, "only {} rows", verdicts.len());
        assert!(
            failed.is_empty(),
            "{} in {} fails {} rows:\n{}",
            entry.name,
            environment.name(),
            failed.len(),
            failed.join("\n")
        );
        drop(started);
        // Stopped means gone: its containers were removed with it.
        for c in &containers {
            assert!(
                engine.run(&["inspect", c]).is_err(),
                "{c} outlived {}",
                entry.name
            );
        }
    }
    drop(setup);
    assert_eq!(leftovers(&engine), Vec::<String>::new());
}

#[test]
fn every_catalog_server_passes_its_contract_in_docker() {
    every_server_passes_its_contract_in(Environment::Docker);
}

#[test]
fn every_catalog_server_passes_its_contract_in_docker_host() {
    every_server_passes_its_contract_in(Environment::DockerHost);
}

/// The database container stopped inside Docker's network: the servers
/// answer 503 while it is down and serve again once it is back.
#[test]
fn the_database_goes_away_and_back_inside_docker() {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    let session = Session::new();
    let mut setup = session.build(Environment::Docker);
    let ctx = session.ctx();
    let servers: Vec<Entry> = runnable()
        .into_iter()
        .filter(|e| ["worker-pool", "php-fpm", "node"].contains(&e.name.as_str()))
        .collect();
    assert_eq!(servers.len(), 3, "{servers:?}");
    let started: Vec<_> = servers
        .iter()
        .map(|e| setup.start(e, &ctx).unwrap())
        .collect();
    for s in &started {
        let r = client::get(s.running.addr, "/db").unwrap();
        r.verify(&expect("GET", "/db"))
            .unwrap_or_else(|m| panic!("{} /db: {m}", s.running.name));
    }
    setup.own_database().expect("a database container").stop();
    for s in &started {
        let r = client::get(s.running.addr, "/db").unwrap();
        r.verify(&Expected::db_unavailable())
            .unwrap_or_else(|m| panic!("{} /db with the database down: {m}", s.running.name));
    }
    setup.own_database().unwrap().restart().unwrap();
    for s in &started {
        // Pools reconnect on their own schedule: wait for it, by state.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = client::get(s.running.addr, "/db").unwrap();
            if r.verify(&expect("GET", "/db")).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not recover: {} {:?}",
                s.running.name,
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    drop(started);
    drop(setup);
    assert_eq!(leftovers(&engine), Vec::<String>::new());
}

/// The pinned Docker environment: every process of the server on its
/// cpuset, the load generator's thread on the other CPUs.
#[test]
fn docker_host_pinned_puts_the_container_on_its_cpuset() {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    if Environment::DockerHostPinned.availability().is_err() {
        if engine().is_some() {
            crate::util::skip_visibly("docker-host-pinned needs 2 CPUs or more");
        }
        return;
    }
    let Some(engine) = engine() else { return };
    let session = Session::new();
    let setup = session.build(Environment::DockerHostPinned);
    let ctx = session.ctx();
    let entry = runnable()
        .into_iter()
        .find(|e| e.name == "php-fpm")
        .expect("php-fpm runs here");
    let _pin = setup.pin_load().unwrap();
    let started = setup.start(&entry, &ctx).unwrap();
    assert!(
        started
            .checks
            .iter()
            .any(|c| c.contains("Cpus_allowed_list")),
        "{:?}",
        started.checks
    );
    let r = client::get(started.running.addr, "/work").unwrap();
    r.verify(&expect("GET", "/work")).unwrap();
    drop(started);
    drop(setup);
    assert_eq!(leftovers(&engine), Vec::<String>::new());
}

/// What Docker holds labelled with harness `pid`.
fn held_by(engine: &Engine, pid: u32) -> Vec<String> {
    let filter = format!("label={}={pid}", harness::catalog::container::PID_LABEL);
    let mut held = Vec::new();
    for what in [
        &["ps", "-aq", "--filter", &filter][..],
        &["network", "ls", "-q", "--filter", &filter][..],
    ] {
        held.extend(
            engine
                .run(what)
                .unwrap()
                .split_whitespace()
                .map(String::from),
        );
    }
    held
}

/// A compare in `docker` stopped by `signal` while its server's container
/// runs: on SIGINT it removes everything itself; after SIGKILL, nothing of
/// it could, and the next Docker environment built sweeps it.
fn interrupted_compare_leaves_nothing(signal: libc::c_int) {
    use std::process::{Command, Stdio};
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    crate::util::sibling_binary("worker-pool");
    let out = crate::util::tmp("docker-interrupt");
    // Its temp dirs (run dirs, its private MariaDB's) under ours, removed
    // with it even after a SIGKILL.
    let tmpdir = crate::util::tmp("docker-interrupt-tmp");
    let mut cmd = Command::new(crate::util::harness_bin());
    cmd.env("TMPDIR", tmpdir.path())
        .args(["compare", "--env", "docker", "--servers", "worker-pool"])
        .args([
            "--workloads",
            "work",
            "-d",
            "60s",
            "--runs",
            "1",
            "--warmup",
            "0",
        ])
        .arg("--out")
        .arg(out.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    crate::util::own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    // By state: the server's own container (not only the database's) runs.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let names = engine
            .run(&[
                "ps",
                "--filter",
                &format!("label={}={pid}", harness::catalog::container::PID_LABEL),
                "--format",
                "{{.Names}}",
            ])
            .unwrap();
        if names.lines().any(|n| !n.ends_with("-db")) {
            break;
        }
        assert!(Instant::now() < deadline, "no server container appeared");
        assert!(child.try_wait().unwrap().is_none(), "compare ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, signal) };
    crate::util::wait_exit(&mut child, Duration::from_secs(90), "compare did not stop");
    if signal == libc::SIGKILL {
        assert!(
            !held_by(&engine, pid).is_empty(),
            "a killed harness cleans nothing"
        );
        // What it started and no one stopped (its private MariaDB, the
        // docker clients), by the session our child made.
        crate::util::kill_session(pid);
        let paths = Env::discover(None);
        drop(Setup::build_for(Environment::DockerHost, None, &paths).unwrap());
    }
    assert_eq!(held_by(&engine, pid), Vec::<String>::new());
}

#[test]
fn a_compare_in_docker_stopped_by_ctrl_c_removes_its_containers_and_network() {
    interrupted_compare_leaves_nothing(libc::SIGINT);
}

#[test]
fn what_a_killed_compare_left_in_docker_is_swept_by_the_next_environment() {
    interrupted_compare_leaves_nothing(libc::SIGKILL);
}

/// The module a test hands to the lab the way `SWOOLE_SO` is: one of
/// Debian's PHP extensions that the lab's image does not carry
/// (scripts/install-deps installs php8.2-intl on the host), linking
/// libraries the image lacks too (ICU, libstdc++), as a PECL Swoole does.
const FOREIGN_MODULE: &str = "intl";

/// A host module, mounted and loaded the way the Swoole recipe does it
/// (`swoole::Module::file`, `ModuleFile::mount_into`, `-d extension=`), is
/// loaded by the PHP inside the lab's container in every Docker environment:
/// `php -m` there lists it, and the image alone does not.
#[test]
fn a_host_php_module_loads_inside_the_labs_container_in_every_docker_environment() {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    let php = harness::catalog::find_program(&["php8.2", "php"]).expect("php is installed");
    let Some(module) = harness::catalog::php_ext::system_module(&php, FOREIGN_MODULE) else {
        crate::util::skip_without(&format!(
            "no {FOREIGN_MODULE}.so in PHP's extension_dir (apt-get install php8.2-{FOREIGN_MODULE}; \
             scripts/install-deps does)"
        ));
        return;
    };
    let session = Session::new();
    let mut environments = vec![Environment::Docker, Environment::DockerHost];
    if Environment::DockerHostPinned.availability().is_ok() {
        environments.push(Environment::DockerHostPinned);
    }
    let run_dir = crate::util::tmp("php-module");
    for environment in environments {
        let setup = session.build(environment);
        let php_m = |load: bool| {
            let mut placement = setup.placement().unwrap();
            let mut cmd = std::process::Command::new(&php);
            if load {
                module.mount_into(&mut placement).unwrap();
                cmd.args(module.php_args());
            }
            cmd.arg("-m");
            let container = placement.container.expect("a container placement");
            let (mut run, _name) = container.wrap(&cmd, run_dir.path());
            let out = run.output().unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).to_lowercase(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (ok, without, err) = php_m(false);
        assert!(
            ok,
            "{}: php -m failed in the container: {err}",
            environment.name()
        );
        assert!(
            !without.lines().any(|l| l.trim() == FOREIGN_MODULE),
            "{}: the image has {FOREIGN_MODULE} itself, so the test proves nothing:\n{without}",
            environment.name()
        );
        let (ok, with, err) = php_m(true);
        assert!(
            ok && with.lines().any(|l| l.trim() == FOREIGN_MODULE),
            "{}: the host's {} is not loaded inside (stderr: {err}):\n{with}",
            environment.name(),
            module.0.display()
        );
        assert!(
            !err.contains("Unable to load"),
            "{}: {err}",
            environment.name()
        );
        drop(setup);
    }
    assert_eq!(leftovers(&engine), Vec::<String>::new());
}

/// One short run of each cell: 10 connections, 1 s, no warm-up.
const ONE_RUN: [&str; 8] = ["-c", "10", "-d", "1s", "--runs", "1", "--warmup", "0"];

/// The image way, with an image that builds here: `--from-image node`
/// builds compose/node/Dockerfile.debian on the lab's base (tagged by its
/// inputs) and runs Node.js from it in the default run. The server passes
/// its contract there, its row is labelled as a container, and results.json
/// says where it ran (`runs_in`), never bare; nothing is left behind.
/// (RoadRunner, FrankenPHP and Swoole take the same path from their
/// official images where a registry serves their bases.)
#[test]
fn compare_runs_a_server_from_its_compose_image_and_says_where_it_ran() {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    let out = crate::util::tmp("compare-image");
    let (stdout, stderr) = crate::compare::compare_ok(
        &[
            &[
                "--servers",
                "node",
                "--from-image",
                "node",
                "--workloads",
                "hello,work",
            ][..],
            &ONE_RUN[..],
        ]
        .concat(),
        out.path(),
    );
    assert!(
        !engine
            .run(&["image", "ls", "-q", "benchlab/stack-node"])
            .unwrap()
            .is_empty(),
        "no benchlab/stack-node image:\n{stderr}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("node [container]") && l.contains("work")),
        "no node [container] row:\n{stdout}"
    );
    assert!(
        stdout.contains("node ran in a container of its image benchlab/stack-node:"),
        "{stdout}"
    );
    let dir = crate::compare::the_results_dir(out.path());
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let node = results["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "node")
        .unwrap();
    assert!(
        node["runs_in"]
            .as_str()
            .is_some_and(|w| w.contains("container") && w.contains("not bare")),
        "{node}"
    );
    assert_eq!(node["contract"]["failed"], serde_json::json!([]), "{node}");
    let rows = results["rows"].as_array().unwrap();
    assert!(
        rows.iter()
            .filter(|r| r["server"] == "node")
            .all(|r| r["status"] == "ok"),
        "{rows:?}"
    );
    // the containers were labelled with the harness's pid, which is gone
    let left = engine
        .run(&["ps", "-aq", "--filter", "name=benchlab-stack-node-"])
        .unwrap();
    assert_eq!(left, "", "containers left behind");

    // The same image placed by a Docker environment: its bridge network and
    // published port, the database in the environment's container.
    let out = crate::util::tmp("compare-image-docker");
    let (stdout, _) = crate::compare::compare_ok(
        &[
            &[
                "--env",
                "docker",
                "--servers",
                "node",
                "--from-image",
                "node",
            ][..],
            &["--workloads", "work"][..],
            &ONE_RUN[..],
        ]
        .concat(),
        out.path(),
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("node [container]") && l.contains("work")),
        "{stdout}"
    );
    assert!(!stdout.contains("node failed"), "{stdout}");
}

/// A server started in a Docker container outside the lab, named by its
/// container (`--target-container`): every process of the container's
/// cgroup is metered, so its row has CPU, CPU per request and RSS like a
/// catalog server's. The container (the lab image running the workspace's
/// worker-pool, on the host's network) is removed whatever happens.
#[test]
fn a_target_in_a_container_is_metered_by_its_cgroup() {
    let _one = DOCKER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(engine) = engine() else { return };
    let image = harness::env::docker::image::lab_image(&engine).expect("the lab image");
    let bin = crate::util::sibling_binary("worker-pool");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let name = format!("benchlab-test-target-{}", std::process::id());
    struct Removed<'a>(&'a Engine, String);
    impl Drop for Removed<'_> {
        fn drop(&mut self) {
            let _ = self.0.run(&["rm", "-f", &self.1]);
        }
    }
    let label = format!(
        "{}={}",
        harness::catalog::container::PID_LABEL,
        std::process::id()
    );
    let mount = format!("{}:/lab/worker-pool:ro", bin.display());
    let addr = format!("127.0.0.1:{port}");
    engine
        .run(&[
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &label,
            "--network",
            "host",
            "-v",
            &mount,
            &image.tag,
            "/lab/worker-pool",
            "--addr",
            &addr,
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:9/bench",
        ])
        .expect("docker run");
    let _removed = Removed(&engine, name.clone());
    let up = Instant::now();
    while client::get(addr.parse().unwrap(), "/hello").is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(30),
            "the container's server never answered: {}",
            engine.run(&["logs", &name]).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = crate::util::tmp("target-container");
    let (stdout, stderr) = crate::compare::compare_ok(
        &[
            &[
                "--workloads",
                "hello",
                "--mysql-url",
                "mysql://bench:bench@127.0.0.1:9/bench",
                "--target",
                &format!("boxed=http://{addr}"),
                "--target-container",
                &format!("boxed={name}"),
            ][..],
            &ONE_RUN[..],
        ]
        .concat(),
        out.path(),
    );
    let results = harness::compare::results::Results::from_json(
        &std::fs::read_to_string(crate::compare::the_results_dir(out.path()).join("results.json"))
            .unwrap(),
    )
    .unwrap();
    let run = &results.rows[0].runs[0];
    assert!(run.server_cpu_pct.is_some(), "{run:?}\n{stdout}\n{stderr}");
    assert!(run.server_rss_peak_bytes.is_some_and(|b| b > 0), "{run:?}");
    assert!(!stdout.contains("not measured"), "{stdout}");
    assert!(
        stdout.contains(&format!("container {name}'s cgroup")),
        "the metered processes are named:\n{stdout}"
    );
    drop(_removed);
    assert_eq!(leftovers(&engine), Vec::<String>::new());
}
