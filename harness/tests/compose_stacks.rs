//! The compose/ stacks that run here without Docker — Node.js and nginx +
//! php-fpm — started by the catalog from the same files their images use,
//! against a real MariaDB: every contract row (`harness verify`), 503 while
//! the database is down and recovery after it returns, and ApacheBench
//! with 0 failed requests.

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use harness::catalog::{catalog, Db, Env, Running, StartCtx};
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
    };
    entry
        .start(&ctx)
        .unwrap_or_else(|e| panic!("start {name}: {e:#}"))
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

/// `ab -c 100 -n 5000`, with and without `-k`: ApacheBench's own verdict.
fn apachebench_counts_no_failure(name: &str) {
    let running = start(name, testkit::db::shared());
    for path in ["/hello", "/work"] {
        for keepalive in [false, true] {
            let url = format!("http://{}{path}", running.addr);
            let mut args = vec!["-c", "100", "-n", "5000"];
            if keepalive {
                args.push("-k");
            }
            let ab = AbReport::run(&args, &url);
            let (what, text) = (format!("{name} ab {args:?} {path}"), &ab.text);
            ab.assert_clean(5000, &what);
            if keepalive {
                assert_eq!(
                    ab.field("Keep-Alive requests:"),
                    Some(5000),
                    "{what}:\n{text}"
                );
            }
        }
    }
}

/// `/config` read by 10 clients at once while /hello is under load: every
/// answer is a 200 of the same length (the same document), and the server
/// keeps every worker. php-fpm's `fpm_get_status()` failed this (workers
/// crashed with SIGSEGV, and the pool size it reported wavered).
fn config_holds_under_concurrent_reads(name: &str) {
    let running = start(name, testkit::db::shared());
    let hello = format!("http://{}/hello", running.addr);
    let config = format!("http://{}/config", running.addr);
    let load = std::thread::spawn(move || AbReport::run(&["-c", "10", "-n", "20000"], &hello));
    let ab = AbReport::run(&["-c", "10", "-n", "2000"], &config);
    ab.assert_clean(2000, &format!("{name} /config"));
    // The load beside it was not disturbed either.
    let hello = load.join().expect("the /hello load");
    hello.assert_clean(20000, &format!("{name} /hello beside it"));
    let r = client::get(running.addr, "/config").unwrap();
    let cfg = workloads::ServerConfig::from_json(&r.body).unwrap();
    if name == "php-fpm" {
        assert_eq!(cfg.workers, Some(20), "{cfg:?}");
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
fn node_answers_503_while_the_database_is_down_and_recovers() {
    database_down_is_503_then_recovers("node");
}

#[test]
fn php_fpm_answers_503_while_the_database_is_down_and_recovers() {
    database_down_is_503_then_recovers("php-fpm");
}

#[test]
fn node_under_apachebench_has_no_failed_request() {
    apachebench_counts_no_failure("node");
}

#[test]
fn php_fpm_under_apachebench_has_no_failed_request() {
    apachebench_counts_no_failure("php-fpm");
}

#[test]
fn node_config_holds_under_concurrent_reads() {
    config_holds_under_concurrent_reads("node");
}

#[test]
fn php_fpm_config_holds_under_concurrent_reads() {
    config_holds_under_concurrent_reads("php-fpm");
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
