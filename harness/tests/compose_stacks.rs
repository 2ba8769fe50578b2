//! The compose/ stacks that run here without Docker — Node.js, nginx +
//! php-fpm and Swoole (with the module scripts/install-deps provides) —
//! started by the catalog from the same files their images use, against a
//! real MariaDB: every contract row (`harness verify`; for Swoole, every row
//! but the known deviations of its core, each pinned with its reason), 503
//! while the database is down and recovery after it returns, ApacheBench
//! with 0 failed requests, `/config` read from the running process,
//! (Swoole) SIGTERM, and the conformance section (`harness verify
//! --conformance`): every row gets a verdict and each deviation its RFC
//! section; what they deviate in is reported, not pinned.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use harness::catalog::{catalog, Db, Env, Running, StartCtx};
use harness::procfs;
use testkit::client;
use workloads::{expect, Expected};

/// Starts a catalog entry against `db_url`; panics with the catalog's
/// reason if it cannot run here (scripts/install-deps installs both).
fn start(name: &str, db_url: &str) -> Running {
    let env = Env::discover(None);
    let entry = catalog()
        .into_iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{name} is not in the catalog"));
    let availability = entry.availability(&env);
    assert!(
        availability.is_ready(),
        "{name} cannot run here ({availability:?}); run scripts/install-deps"
    );
    let db = Db::parse(db_url).unwrap();
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
    entry
        .start(&ctx)
        .unwrap_or_else(|e| panic!("start {name}: {e:#}"))
}

/// A database that does not answer: a listener that never accepts, its
/// accept queue filled by the test, so that the kernel drops every further
/// SYN and a server's connect hangs until the server's own connect timeout
/// — a stopped container on a bridge network, a host that drops packets —
/// rather than being refused at once.
struct SilentDatabase {
    _listener: socket2::Socket,
    _queued: Vec<TcpStream>,
    url: String,
}

fn silent_database() -> SilentDatabase {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&any.into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    // Fill the accept queue: connects complete until it is full, then
    // one hangs (its SYN dropped) — the state every server connect meets.
    let mut queued = Vec::new();
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(c) => queued.push(c),
            Err(_) => break,
        }
        assert!(queued.len() < 64, "the listener's queue never filled");
    }
    SilentDatabase {
        _listener: listener,
        _queued: queued,
        url: format!("mysql://bench:bench@{addr}/bench"),
    }
}

/// With a database that does not answer, `clients` concurrent clients
/// asking `/db` for a few seconds all get 503 within `bound`: a request
/// waiting on a pool must not outwait the connect that failed. (Swoole's
/// ConnectionPool made them wait the pool's whole 30 s; compose/swoole/
/// server.php's BenchPool::take is the fix.)
fn a_silent_database_under_load_is_503_within(name: &str, clients: usize, bound: Duration) {
    let silent = silent_database();
    let running = start(name, &silent.url);
    let addr = running.addr;
    let until = Instant::now() + Duration::from_secs(5);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while Instant::now() < until {
                    let t0 = Instant::now();
                    let answer = client::Conn::connect_within(
                        addr,
                        Duration::from_secs(5),
                        bound + Duration::from_secs(30),
                    )
                    .and_then(|mut c| c.request("GET", "/db"));
                    seen.push((
                        t0.elapsed(),
                        answer.map(|r| r.verify(&Expected::db_unavailable())),
                    ));
                }
                seen
            })
        })
        .collect();
    let mut worst = Duration::ZERO;
    let mut wrong = Vec::new();
    let mut answers = 0;
    for t in threads {
        for (took, answer) in t.join().unwrap() {
            answers += 1;
            worst = worst.max(took);
            match answer {
                Ok(Ok(())) if took <= bound => {}
                Ok(Ok(())) => wrong.push(format!("a 503 after {took:?}")),
                Ok(Err(m)) => wrong.push(format!("not a 503: {m}")),
                Err(e) => wrong.push(format!("no answer after {took:?}: {e}")),
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty() && answers >= clients,
        "{name}: {answers} answers, slowest {worst:?} (bound {bound:?}):\n{}",
        wrong.join("\n")
    );
    // and it still serves what needs no database
    let r = client::get(addr, "/hello").unwrap();
    r.verify(&expect("GET", "/hello")).unwrap();
}

fn every_contract_row_passes(name: &str) {
    let running = start(name, testkit::db::shared());
    let verdicts = harness::lab::contract::check_all(running.addr, Duration::from_secs(30));
    assert!(verdicts.len() >= 40, "only {} rows", verdicts.len());
    let failed: Vec<String> = verdicts
        .iter()
        .filter_map(|v| v.result.as_ref().err().map(|e| format!("{}: {e}", v.name)))
        .collect();
    assert!(
        failed.is_empty(),
        "{name} fails {} rows:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The conformance section over a third-party stack: every row gets a
/// verdict that says what was found, the table prints, and each deviation
/// carries its RFC section. Which rows deviate is theirs to change: printed
/// for the CI log, not pinned.
fn conformance_section_runs(name: &str) {
    let running = start(name, testkit::db::shared());
    let verdicts = harness::lab::contract::check_conformance(running.addr, Duration::from_secs(5));
    let rows = harness::lab::contract::conformance_rows();
    assert_eq!(verdicts.len(), rows.len(), "a verdict per row");
    for (v, row) in verdicts.iter().zip(&rows) {
        assert_eq!(v.name, row.name);
        assert!(v.conformance.is_some(), "{}", v.name);
        assert!(
            !v.found.is_empty(),
            "{}: the verdict says what was found",
            v.name
        );
    }
    let core = harness::catalog::deviations::conformance_core_of(name);
    let check = harness::lab::record::ConformanceCheck::from_verdicts(&verdicts, core);
    let (pass, warn, fail) = check.totals();
    assert_eq!(pass + warn + fail, check.rows);
    assert_eq!(check.deviations.len() as u32, warn + fail);
    for d in &check.deviations {
        assert!(
            d.section.starts_with("RFC 9") && d.section.contains('§'),
            "{}: {}",
            d.row,
            d.section
        );
    }
    let text = harness::verify::conformance_text(&verdicts, core);
    for group in ["request line", "header fields", "bodies", "connections"] {
        assert!(text.contains(group), "{text}");
    }
    eprintln!("{name}:\n{text}");
}

fn database_down_is_503_then_recovers(name: &str) {
    let mut mariadb = testkit::db::private();
    let running = start(name, &mariadb.url());
    let addr = running.addr;
    let ok = |t: &str| {
        let r = client::get(addr, t).unwrap();
        r.verify(&expect("GET", t))
            .unwrap_or_else(|m| panic!("{name} GET {t}: {m}"));
    };
    ok("/db");
    ok("/work");

    mariadb.stop();
    for t in ["/db", "/work", "/db?conn=new", "/work?conn=new"] {
        let t0 = Instant::now();
        let r = client::get(addr, t)
            .unwrap_or_else(|e| panic!("{name} {t} with the database down: {e}"));
        r.verify(&Expected::db_unavailable()).unwrap_or_else(|m| {
            panic!(
                "{name} GET {t} with the database down: {m}: {}",
                r.body_str()
            )
        });
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{name} {t}: 503 took {:?}",
            t0.elapsed()
        );
        ok("/hello");
    }

    mariadb.restart().expect("restart MariaDB");
    let deadline = Instant::now() + Duration::from_secs(30);
    while client::get(addr, "/db").unwrap().status != 200 {
        assert!(
            Instant::now() < deadline,
            "{name}: no recovery 30 s after the database returned"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for _ in 0..40 {
        ok("/work");
    }
}

/// What ApacheBench printed, with its counters by label.
struct AbReport {
    text: String,
}

impl AbReport {
    /// Runs `ab -q ARGS URL`; panics if ab itself fails.
    fn run(args: &[&str], url: &str) -> AbReport {
        let out = Command::new("ab")
            .arg("-q")
            .args(args)
            .arg(url)
            .output()
            .expect("ab is installed (apache2-utils)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "ab {args:?} {url}: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        AbReport { text }
    }

    /// ab completed `n` requests, none failed, none answered other than 2xx.
    fn assert_clean(&self, n: u64, what: &str) {
        let text = &self.text;
        assert_eq!(self.field("Complete requests:"), Some(n), "{what}:\n{text}");
        assert_eq!(self.field("Failed requests:"), Some(0), "{what}:\n{text}");
        assert_eq!(self.field("Non-2xx responses:"), None, "{what}:\n{text}");
    }

    /// The number after `label` (`"Failed requests:"`), if ab printed it.
    fn field(&self, label: &str) -> Option<u64> {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }
}

/// `ab -c 100 -n N`, with and without `-k`: ApacheBench's own verdict;
/// with `-k`, every request was a keep-alive one.
fn apachebench_counts_no_failure(name: &str, n: u64) {
    let running = start(name, testkit::db::shared());
    let count = n.to_string();
    for path in ["/hello", "/work"] {
        for keepalive in [false, true] {
            let url = format!("http://{}{path}", running.addr);
            let mut args = vec!["-c", "100", "-n", count.as_str()];
            if keepalive {
                args.push("-k");
            }
            let ab = AbReport::run(&args, &url);
            let (what, text) = (format!("{name} ab {args:?} {path}"), &ab.text);
            ab.assert_clean(n, &what);
            if keepalive {
                assert_eq!(ab.field("Keep-Alive requests:"), Some(n), "{what}:\n{text}");
            }
        }
    }
}

/// `/config` read by 10 clients at once while /hello is under load: every
/// answer is a 200 of the same length (the same document), and the server
/// keeps every worker. php-fpm's `fpm_get_status()` failed this (workers
/// crashed with SIGSEGV, and the pool size it reported wavered). Swoole's
/// document names the worker that answered (its pid and id), so its length
/// may vary: ab accepts that (`-l`), and 40 reads after check that every
/// worker reports the same counts.
fn config_holds_under_concurrent_reads(name: &str) {
    let per_worker = name == "swoole";
    let running = start(name, testkit::db::shared());
    if per_worker {
        // Started means every worker runs: Swoole's manager forks them one
        // by one after the first answers, and a compare once read 17 of 20.
        let r = client::get(running.addr, "/config").unwrap();
        let cfg = workloads::ServerConfig::from_json(&r.body).unwrap();
        assert_eq!(cfg.workers, Some(20), "right after start: {cfg:?}");
    }
    let hello = format!("http://{}/hello", running.addr);
    let config = format!("http://{}/config", running.addr);
    let load = std::thread::spawn(move || AbReport::run(&["-c", "10", "-n", "20000"], &hello));
    let mut args = vec!["-c", "10", "-n", "2000"];
    if per_worker {
        args.push("-l");
    }
    let ab = AbReport::run(&args, &config);
    ab.assert_clean(2000, &format!("{name} /config"));
    // The load beside it was not disturbed either.
    let hello = load.join().expect("the /hello load");
    hello.assert_clean(20000, &format!("{name} /hello beside it"));
    let reads = if per_worker { 40 } else { 1 };
    for _ in 0..reads {
        let r = client::get(running.addr, "/config").unwrap();
        let cfg = workloads::ServerConfig::from_json(&r.body).unwrap();
        if name == "php-fpm" || name == "swoole" {
            assert_eq!(cfg.workers, Some(20), "{cfg:?}");
        }
        if name == "swoole" {
            assert_eq!(cfg.db_pool, Some(20), "{cfg:?}");
        }
    }
}

#[test]
fn node_passes_every_contract_row() {
    every_contract_row_passes("node");
}

#[test]
fn php_fpm_passes_every_contract_row() {
    every_contract_row_passes("php-fpm");
}

#[test]
fn node_goes_through_the_conformance_section() {
    conformance_section_runs("node");
}

#[test]
fn php_fpm_goes_through_the_conformance_section() {
    conformance_section_runs("php-fpm");
}

#[test]
fn swoole_goes_through_the_conformance_section() {
    if !swoole_runs_here() {
        return;
    }
    conformance_section_runs("swoole");
}

#[test]
fn node_answers_503_while_the_database_is_down_and_recovers() {
    database_down_is_503_then_recovers("node");
}

#[test]
fn php_fpm_answers_503_while_the_database_is_down_and_recovers() {
    database_down_is_503_then_recovers("php-fpm");
}

#[test]
fn node_under_apachebench_has_no_failed_request() {
    apachebench_counts_no_failure("node", 5000);
}

#[test]
fn php_fpm_under_apachebench_has_no_failed_request() {
    apachebench_counts_no_failure("php-fpm", 5000);
}

#[test]
fn node_config_holds_under_concurrent_reads() {
    config_holds_under_concurrent_reads("node");
}

#[test]
fn php_fpm_config_holds_under_concurrent_reads() {
    config_holds_under_concurrent_reads("php-fpm");
}

/// Node's `/config` is read from the process: one process serving (no
/// cluster workers), the pool's limit, V8's JIT on (WebAssembly present),
/// the pid of the process the catalog started; what is only configured
/// says so.
#[test]
fn node_config_is_read_from_the_running_process() {
    let running = start("node", testkit::db::shared());
    let r = client::get(running.addr, "/config").unwrap();
    let c: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let cfg = workloads::ServerConfig::from_json(&r.body).unwrap();
    assert_eq!((cfg.workers, cfg.db_pool), (Some(1), Some(20)), "{c}");
    assert_eq!((cfg.jit.as_deref(), cfg.debug), (Some("v8"), false), "{c}");
    assert_eq!(c["node"]["pid"], running.pids()[0], "{c}");
    assert_eq!(c["node"]["cluster"], "primary", "{c}");
    for f in ["workers", "db_pool", "jit", "debug"] {
        assert!(
            c["source"][f].as_str().unwrap().starts_with("read:"),
            "{f}: {c}"
        );
    }
    assert_eq!(
        c["configured"],
        serde_json::json!(["node.uv_threadpool_size"]),
        "{c}"
    );
}

#[test]
fn php_fpm_runs_with_the_tracing_jit_as_the_seed_configured_it() {
    let running = start("php-fpm", testkit::db::shared());
    let r = client::get(running.addr, "/config").unwrap();
    let cfg = workloads::ServerConfig::from_json(&r.body).unwrap();
    assert_eq!(cfg.opcache, Some(true), "{cfg:?}");
    assert_eq!(cfg.jit.as_deref(), Some("tracing"), "{cfg:?}");
    assert_eq!(cfg.workers, Some(20), "{cfg:?}");
    assert!(!cfg.debug, "{cfg:?}");
}

// --- Swoole -----------------------------------------------------------------

/// Whether a Swoole module was found; if not, the test skips visibly
/// (under CI too: no registry here serves Swoole).
use crate::util::swoole_runs_here;

/// Where Swoole 6.2.2's own core departs from the contract is declared
/// once, in the catalog (`harness::catalog::deviations::SWOOLE`): not worked
/// around anywhere; the test fails when one disappears (an upstream fix to
/// notice) or changes.
use harness::catalog::deviations::{Reading, SWOOLE, SWOOLE_BARE_400};

/// Sends `raw` on a new connection and reads until the server closes it.
fn raw_exchange(addr: std::net::SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(raw).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got)
        .unwrap_or_else(|e| panic!("{raw:?}: not closed: {e} (read {got:?})"));
    got
}

#[test]
fn swoole_passes_every_contract_row_but_the_known_deviations_of_its_core() {
    if !swoole_runs_here() {
        return;
    }
    let running = start("swoole", testkit::db::shared());
    let verdicts = harness::lab::contract::check_all(running.addr, Duration::from_secs(30));
    assert!(verdicts.len() >= 40, "only {} rows", verdicts.len());
    let mut wrong = Vec::new();
    for v in &verdicts {
        match SWOOLE.read(&v.name, &v.result) {
            Reading::Pass | Reading::Known(_) => {}
            Reading::Fail(e) => wrong.push(format!("{}: {e}", v.name)),
            Reading::KnownNowPasses(d) => wrong.push(format!(
                "{}: now passes; it was a known deviation ({}): fixed upstream? \
                 remove it from harness/src/catalog/deviations.rs and compose/README.md",
                v.name, d.reason
            )),
            Reading::KnownButOtherwise(d, e) => wrong.push(format!(
                "{}: fails otherwise than known ({e}; known: {}, because {})",
                v.name, d.symptom, d.reason
            )),
        }
    }
    for d in SWOOLE.deviations {
        if !verdicts.iter().any(|v| v.name == d.row) {
            wrong.push(format!("{}: no such row in harness verify any more", d.row));
        }
    }
    // The 400s are exactly the core's bare packet, then the close.
    for raw in [
        &b"GET /hello HTTP/1.1\r\nBad Header Line\r\n\r\n"[..],
        &b"GET /hello HTTP/9.9\r\nHost: t\r\n\r\n"[..],
    ] {
        let got = raw_exchange(running.addr, raw);
        if got != SWOOLE_BARE_400 {
            wrong.push(format!(
                "{:?} is answered {:?}, not the core's bare 400 any more",
                String::from_utf8_lossy(raw),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "swoole against the contract:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn swoole_answers_503_within_the_connect_timeout_when_the_database_does_not_answer() {
    if swoole_runs_here() {
        a_silent_database_under_load_is_503_within("swoole", 40, Duration::from_secs(8));
    }
}

/// The same load on Node.js, which runs everywhere the tests do: the silent
/// database and the bound are what the Swoole test above holds Swoole to.
#[test]
fn node_answers_503_within_the_connect_timeout_when_the_database_does_not_answer() {
    a_silent_database_under_load_is_503_within("node", 40, Duration::from_secs(8));
}

#[test]
fn swoole_answers_503_while_the_database_is_down_and_recovers() {
    if swoole_runs_here() {
        database_down_is_503_then_recovers("swoole");
    }
}

#[test]
fn swoole_under_apachebench_has_no_failed_request() {
    if swoole_runs_here() {
        apachebench_counts_no_failure("swoole", 20000);
    }
}

#[test]
fn swoole_config_holds_under_concurrent_reads() {
    if swoole_runs_here() {
        config_holds_under_concurrent_reads("swoole");
    }
}

/// Sends a signal to a process the test's server runs.
fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: a process of the server this test started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// Polls `f` every 100 ms until it returns `Some`, for at most `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Swoole's `/config` as JSON, from whichever worker answers.
fn swoole_config(running: &Running) -> serde_json::Value {
    let r = client::get(running.addr, "/config").unwrap();
    assert_eq!(r.status, 200, "{}", r.body_str());
    serde_json::from_slice(&r.body).unwrap()
}

/// `/config` is what the running server has, seen inside a worker: the
/// worker that answered is one of the server's processes (not its
/// manager), OPcache and the tracing JIT are on there, and the worker count
/// follows the processes — a worker killed while the manager cannot
/// replace it is no longer counted, and counted again once it is replaced.
#[test]
fn swoole_config_is_read_from_the_running_workers() {
    if !swoole_runs_here() {
        return;
    }
    let running = start("swoole", testkit::db::shared());
    let manager = running.pids()[0] as i32;
    // All 20 workers are up (the first /hello answers before the last fork).
    let tree = wait_for(Duration::from_secs(30), "21 swoole processes", || {
        let t = procfs::tree(&running.pids());
        (t.len() == 21).then_some(t)
    });
    let c = swoole_config(&running);
    let cfg = workloads::ServerConfig::from_json(c.to_string().as_bytes()).unwrap();
    assert_eq!(
        (cfg.server.as_str(), cfg.model.as_str()),
        ("swoole", "coroutine"),
        "{c}"
    );
    assert_eq!((cfg.workers, cfg.db_pool), (Some(20), Some(20)), "{c}");
    assert_eq!(
        (cfg.opcache, cfg.jit.as_deref()),
        (Some(true), Some("tracing")),
        "{c}"
    );
    assert!(!cfg.debug, "{c}");
    let sw = &c["swoole"];
    assert_eq!(sw["version"], harness::catalog::swoole::VERSION, "{c}");
    assert_eq!(sw["mode"], "base", "{c}");
    assert_eq!(sw["reactor_threads"], 0, "{c}");
    assert!(sw["dispatch_mode"].is_null(), "{c}");
    assert_eq!(sw["log_level"], "warning", "{c}");
    assert_eq!(sw["manager_pid"], manager, "{c}");
    let worker = sw["worker_pid"].as_i64().unwrap() as i32;
    assert!(
        worker != manager && tree.iter().any(|p| p.pid == worker),
        "{worker} is not a worker of {tree:?}"
    );
    // How each field was obtained; what can only be configured says so.
    for f in ["workers", "db_pool", "opcache", "jit", "debug", "model"] {
        assert!(
            c["source"][f].as_str().unwrap().starts_with("read:"),
            "{f}: {c}"
        );
    }
    assert_eq!(
        c["configured"],
        serde_json::json!(["swoole.log_level"]),
        "{c}"
    );
    assert_eq!(c["php"]["ini"]["opcache.jit"], "tracing", "{c}");

    // The manager stopped, one worker killed: it stays a zombie, unreplaced.
    struct Resume(i32);
    impl Drop for Resume {
        fn drop(&mut self) {
            // SAFETY: the manager this test stopped.
            unsafe { libc::kill(self.0, libc::SIGCONT) };
        }
    }
    signal(manager, libc::SIGSTOP);
    let resume = Resume(manager);
    let victim = tree
        .iter()
        .find(|p| p.pid != manager && p.pid != worker)
        .unwrap();
    signal(victim.pid, libc::SIGKILL);
    wait_for(
        Duration::from_secs(30),
        "/config counting 19 workers",
        || {
            let c = swoole_config(&running);
            (c["workers"] == 19 && c["db_pool"] == 19).then_some(())
        },
    );
    drop(resume);
    wait_for(
        Duration::from_secs(30),
        "/config counting 20 workers again",
        || (swoole_config(&running)["workers"] == 20).then_some(()),
    );
}

/// SIGTERM: the request in flight is answered, then the manager and every
/// worker exit, with status 0; nothing answers after.
#[test]
fn swoole_answers_the_request_in_flight_on_sigterm_and_exits_0() {
    if !swoole_runs_here() {
        return;
    }
    // A private database: its process list shows when the request is in flight.
    let mariadb = testkit::db::private();
    let mut running = start("swoole", &mariadb.url());
    let addr = running.addr;
    let pids = running.pids();
    let mut c = client::Conn::connect(addr).unwrap();
    c.send_request("GET", "/db?sleep_ms=1500").unwrap();
    wait_for(
        Duration::from_secs(30),
        "the query in MariaDB's process list",
        || {
            let n = mariadb
                .sql(
                    "SELECT COUNT(*) FROM information_schema.processlist \
                 WHERE info LIKE '%SLEEP(1.500)%' AND info NOT LIKE '%processlist%'",
                )
                .unwrap();
            (n.trim() == "1").then_some(())
        },
    );
    signal(pids[0] as i32, libc::SIGTERM);
    let r = c
        .read_response(false)
        .expect("the request in flight is answered");
    r.verify(&expect("GET", "/db?sleep_ms=1500"))
        .unwrap_or_else(|m| panic!("/db?sleep_ms=1500 during shutdown: {m}"));
    let status = wait_for(Duration::from_secs(30), "swoole exited", || {
        running.check_alive().err().map(|e| format!("{e:#}"))
    });
    assert!(status.contains("exit status: 0"), "{status}");
    wait_for(Duration::from_secs(30), "every worker gone", || {
        procfs::tree(&pids).is_empty().then_some(())
    });
    assert!(
        client::get(addr, "/hello").is_err(),
        "still answering after exit"
    );
    assert!(running.stop().is_empty());
}

/// The PHP stacks' WebSocket handshake (`Bench\ws_accept`, `Bench\ws_route`
/// in compose/php/contract.php, which Swoole's onHandshake calls) agrees with
/// the contract's (`workloads::ws::accept`, `route`) on every case: the same
/// `Sec-WebSocket-Accept`, or the same reason for the 400. Swoole itself
/// cannot run here; this runs the PHP it calls, with php-cli.
#[test]
fn php_websocket_handshake_agrees_with_the_contract() {
    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ=="; // RFC 6455 §1.3's sample
    let ok: &[(&str, &str)] = &[
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", KEY),
    ];
    let with = |name: &str, value: Option<&str>| -> Vec<(String, String)> {
        let mut h: Vec<(String, String)> = ok
            .iter()
            .filter(|(n, _)| *n != name)
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        if let Some(v) = value {
            h.push((name.to_string(), v.to_string()));
        }
        h
    };
    let handshakes: Vec<(&str, Vec<(String, String)>)> = vec![
        ("GET", with("Upgrade", Some("websocket"))),
        ("GET", with("Upgrade", Some(" WebSocket "))),
        ("GET", with("Upgrade", None)),
        ("GET", with("Upgrade", Some("h2c"))),
        ("GET", with("Connection", Some("keep-alive, Upgrade"))),
        ("GET", with("Connection", Some("keep-alive"))),
        ("GET", with("Connection", None)),
        ("GET", with("Sec-WebSocket-Version", Some("8"))),
        ("GET", with("Sec-WebSocket-Version", None)),
        ("GET", with("Sec-WebSocket-Key", None)),
        ("GET", with("Sec-WebSocket-Key", Some("c2hvcnQ="))),
        ("GET", with("Sec-WebSocket-Key", Some("not base64 at all!"))),
        ("POST", with("Upgrade", Some("websocket"))),
    ];
    let long = format!("/ws/room?name={}", "a".repeat(65));
    let targets = [
        "/ws",
        "/ws?x=1",
        "/ws/room?name=lobby",
        "/ws/room?x=1&name=a-b_9",
        "/ws/room?name=",
        "/ws/room",
        "/ws/room?name=no!",
        "/ws/room?name=ok&name=no!",
        long.as_str(),
        "/hello",
        "/wsx",
    ];

    let input = serde_json::json!({
        "handshakes": handshakes.iter().map(|(m, h)| serde_json::json!({"method": m, "headers": h})).collect::<Vec<_>>(),
        "targets": targets,
    });
    let contract = concat!(env!("CARGO_MANIFEST_DIR"), "/../compose/php/contract.php");
    let script = format!(
        r#"require {contract:?};
        $in = json_decode(stream_get_contents(STDIN), true);
        $out = ['accept' => [], 'route' => []];
        foreach ($in['handshakes'] as $c) {{
            $h = [];
            foreach ($c['headers'] as [$n, $v]) {{ $h[strtolower($n)] = $v; }}
            try {{ $out['accept'][] = ['ok' => Bench\ws_accept($c['method'], $h)]; }}
            catch (Bench\BadRequest $e) {{ $out['accept'][] = ['err' => $e->getMessage()]; }}
        }}
        foreach ($in['targets'] as $t) {{ $out['route'][] = Bench\ws_route($t); }}
        echo json_encode($out);"#
    );
    let mut php = Command::new("php")
        .args(["-r", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("php-cli (scripts/install-deps installs php8.2-cli)");
    php.stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = php.wait_with_output().unwrap();
    assert!(out.status.success(), "php: {:?}", out.status);
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "php printed {:?}: {e}",
            String::from_utf8_lossy(&out.stdout)
        )
    });

    for (i, (method, headers)) in handshakes.iter().enumerate() {
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
        let want = match workloads::ws::accept(method, pairs) {
            Ok(accept) => serde_json::json!({ "ok": accept }),
            Err(reason) => serde_json::json!({ "err": reason }),
        };
        assert_eq!(got["accept"][i], want, "{method} {headers:?}");
    }
    assert_eq!(
        got["accept"][0]["ok"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
        "RFC 6455's sample"
    );
    for (i, target) in targets.iter().enumerate() {
        let want = match workloads::ws::route(target) {
            None => serde_json::Value::Null,
            Some(Ok(workloads::ws::WsRoute::Echo)) => serde_json::json!(["echo"]),
            Some(Ok(workloads::ws::WsRoute::Room(n))) => serde_json::json!(["room", n]),
            Some(Err(e)) => serde_json::json!(["error", e]),
        };
        assert_eq!(got["route"][i], want, "{target}");
    }
}

/// RoadRunner's worker (compose/roadrunner/worker.php) parses each request's
/// URI with nyholm/psr7 through `Bench\HostlessUriRequests`
/// (compose/php/request_uri.php). rr builds that URI as `http://` + Host +
/// target (its http plugin's `URI`), so an HTTP/1.0 request without Host
/// arrives as `http:///hello`, which nyholm refuses: the worker answered its
/// own 400 to the contract's HTTP/1.0 rows. Run here with php-cli and
/// Debian's php-nyholm-psr7 (scripts/install-deps), the same code the worker
/// runs: without Host the URI is the path and query, with one it is kept.
#[test]
fn roadrunner_worker_parses_the_uri_of_a_request_without_host() {
    let nyholm = "/usr/share/php/Nyholm/Psr7/autoload.php";
    if !std::path::Path::new(nyholm).is_file()
        && crate::util::skip_without("php-nyholm-psr7 (scripts/install-deps installs it)")
    {
        return;
    }
    let helper = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../compose/php/request_uri.php"
    );
    let script = format!(
        r#"require {nyholm:?};
        require {helper:?};
        $f = new Bench\HostlessUriRequests(new Nyholm\Psr7\Factory\Psr17Factory());
        foreach (json_decode(stream_get_contents(STDIN), true) as $uri) {{
            try {{
                $u = $f->createServerRequest('GET', $uri)->getUri();
                echo json_encode([$u->getHost(), $u->getPath(), $u->getQuery()]), "\n";
            }} catch (\Throwable $e) {{ echo json_encode(['refused', $e->getMessage()]), "\n"; }}
        }}
        // Unwrapped, nyholm itself refuses rr's URI (the bug this guards).
        try {{ (new Nyholm\Psr7\Factory\Psr17Factory())->createServerRequest('GET', 'http:///hello'); echo "parsed\n"; }}
        catch (\Throwable $e) {{ echo "refused\n"; }}"#
    );
    // What rr 2025.1.5 sends: `http://` + Host + the request target.
    let cases: &[(&str, [&str; 3])] = &[
        ("http:///hello", ["", "/hello", ""]),
        ("http:///cpu?n=1000", ["", "/cpu", "n=1000"]),
        ("http:///", ["", "/", ""]),
        ("https:///echo?a=1&b=2", ["", "/echo", "a=1&b=2"]),
        ("http://verify/hello", ["verify", "/hello", ""]),
        (
            "http://127.0.0.1:8081/sleep?ms=5",
            ["127.0.0.1", "/sleep", "ms=5"],
        ),
    ];
    let uris: Vec<&str> = cases.iter().map(|(u, _)| *u).collect();
    let mut php = Command::new("php")
        .args(["-r", &script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("php-cli (scripts/install-deps installs php8.2-cli)");
    php.stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&uris).unwrap().as_bytes())
        .unwrap();
    let out = php.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "php: {:?}\n{text}", out.status);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), cases.len() + 1, "{text}");
    for ((uri, want), line) in cases.iter().zip(&lines) {
        let got: Vec<String> = serde_json::from_str(line).unwrap();
        assert_eq!(got, want.to_vec(), "{uri}");
    }
    assert_eq!(
        lines[cases.len()],
        "refused",
        "nyholm parses http:///hello now?"
    );
}
