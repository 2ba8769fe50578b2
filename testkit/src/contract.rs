//! The contract suite (DESIGN.md §2): every row, every bad input, the
//! database stopped and restarted, SIGTERM. Each function is one test;
//! [`contract_tests!`](crate::contract_tests) turns them into `#[test]`s for
//! a server binary. Responses are judged by `workloads::verify`.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use workloads::{expect, Expected};

use crate::client::{self, samples, Conn, RawResponse};
use crate::{db, ServerProcess};

/// How long the servers wait for a stalled request head (slowloris) before
/// dropping it; the suite allows a margin on top.
pub const SERVER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The server under test: a binary with its arguments, and one shared
/// instance (against the shared MariaDB) for the tests that do not need
/// their own.
#[derive(Clone)]
pub struct Subject {
    pub bin: &'static str,
    pub args: &'static [&'static str],
    pub addr: SocketAddr,
}

/// The shared instances: pid and stderr log, to stop and remove at exit.
static SHARED: std::sync::Mutex<Vec<(u32, std::path::PathBuf)>> = std::sync::Mutex::new(Vec::new());

extern "C" fn kill_shared_servers() {
    if let Ok(shared) = SHARED.lock() {
        for (pid, stderr_log) in shared.iter() {
            // SAFETY: signalling children we started; the process is exiting.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(*pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
            let _ = std::fs::remove_file(stderr_log);
        }
    }
}

impl Subject {
    /// The shared instance, started on first use and killed at exit.
    pub fn shared(
        cell: &'static OnceLock<SocketAddr>,
        bin: &'static str,
        args: &'static [&'static str],
    ) -> Subject {
        let addr = *cell.get_or_init(|| {
            let server = ServerProcess::start(bin, &with_db(args, db::shared()));
            let mut shared = SHARED.lock().unwrap();
            if shared.is_empty() {
                // SAFETY: registering a plain extern "C" fn.
                unsafe { libc::atexit(kill_shared_servers) };
            }
            let addr = server.addr;
            shared.push(server.leak());
            addr
        });
        Subject { bin, args, addr }
    }

    /// A private instance of the same server against `mysql_url`.
    pub fn start_own(&self, mysql_url: &str) -> ServerProcess {
        ServerProcess::start(self.bin, &with_db(self.args, mysql_url))
    }
}

fn with_db<'a>(args: &[&'a str], url: &'a str) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--mysql-url", url]);
    v
}

/// Requests `method target` on a fresh connection and verifies the answer.
fn check(addr: SocketAddr, method: &str, target: &str) -> RawResponse {
    let resp = client::request(addr, method, target)
        .unwrap_or_else(|e| panic!("{method} {target}: no response: {e}"));
    check_response(&resp, &expect(method, target), method, target);
    resp
}

fn check_response(resp: &RawResponse, expected: &Expected, method: &str, target: &str) {
    if let Err(m) = resp.verify(expected) {
        panic!(
            "{method} {target}: {m}\n  got {} {:?} {:?}",
            resp.status,
            headers_debug(resp),
            resp.body_str()
        );
    }
}

fn headers_debug(resp: &RawResponse) -> Vec<String> {
    resp.headers
        .iter()
        .map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v)))
        .collect()
}

pub fn hello(s: &Subject) {
    check(s.addr, "GET", "/");
    check(s.addr, "GET", "/hello");
}

pub fn cpu(s: &Subject) {
    for t in ["/cpu", "/cpu?n=1", "/cpu?n=250000"] {
        check(s.addr, "GET", t);
    }
}

pub fn db(s: &Subject) {
    for t in ["/db", "/db?sleep_ms=30", "/db?sleep_ms=0"] {
        check(s.addr, "GET", t);
    }
}

pub fn db_conn_new(s: &Subject) {
    for t in ["/db?conn=new", "/db?sleep_ms=5&conn=new"] {
        check(s.addr, "GET", t);
    }
}

pub fn work(s: &Subject) {
    for t in ["/work", "/work?n=10", "/work?n=1000"] {
        check(s.addr, "GET", t);
    }
}

pub fn work_conn_new(s: &Subject) {
    check(s.addr, "GET", "/work?conn=new");
}

pub fn sleep_waits(s: &Subject) {
    let t0 = Instant::now();
    check(s.addr, "GET", "/sleep?ms=50");
    assert!(
        t0.elapsed() >= Duration::from_millis(50),
        "answered in {:?}",
        t0.elapsed()
    );
    check(s.addr, "GET", "/sleep?ms=0");
}

pub fn config(s: &Subject) {
    let resp = check(s.addr, "GET", "/config");
    let cfg = workloads::ServerConfig::from_json(&resp.body).expect("verified /config parses");
    assert!(
        !cfg.server.is_empty() && !cfg.model.is_empty() && !cfg.runtime.is_empty(),
        "{cfg:?}"
    );
    assert!(
        cfg.workers.is_some_and(|w| w > 0),
        "workers must be reported: {cfg:?}"
    );
    assert!(
        cfg.db_pool.is_some_and(|p| p > 0),
        "db_pool must be reported: {cfg:?}"
    );
}

pub fn head_has_headers_and_no_body(s: &Subject) {
    for &t in samples::HEAD_TARGETS {
        let head = check(s.addr, "HEAD", t);
        let get = client::get(s.addr, t).unwrap();
        assert_eq!(head.status, get.status, "HEAD {t}");
        assert_eq!(
            head.header("content-length"),
            get.header("content-length"),
            "HEAD {t} must announce the GET length"
        );
    }
}

pub fn not_found(s: &Subject) {
    for t in samples::NOT_FOUND_TARGETS {
        check(s.addr, "GET", t);
    }
}

pub fn method_not_allowed(s: &Subject) {
    for &(m, t) in samples::WRONG_METHODS {
        let mut c = Conn::connect(s.addr).unwrap();
        c.send(format!("{m} {t} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").as_bytes())
            .unwrap();
        let resp = c.read_response(false).unwrap();
        check_response(&resp, &expect(m, t), m, t);
        let allow = resp
            .header("allow")
            .unwrap_or_else(|| panic!("{m} {t}: 405 without Allow"));
        assert!(allow.contains("GET"), "Allow: {allow}");
    }
}

pub fn bad_query_values(s: &Subject) {
    for t in samples::BAD_QUERY_TARGETS {
        check(s.addr, "GET", t);
    }
}

fn expect_error_and_close(s: &Subject, raw: &[u8], status: u16) {
    let mut c = Conn::connect(s.addr).unwrap();
    c.send(raw).unwrap();
    let resp = c.read_response(false).unwrap_or_else(|e| {
        panic!(
            "no answer to {:?}: {e}",
            String::from_utf8_lossy(&raw[..raw.len().min(60)])
        )
    });
    assert_eq!(
        resp.status,
        status,
        "{:?}: {}",
        String::from_utf8_lossy(&raw[..raw.len().min(60)]),
        resp.body_str()
    );
    assert!(
        c.is_closed(Duration::from_secs(5)),
        "connection left open after {status}"
    );
}

pub fn malformed_request_is_400_and_closed(s: &Subject) {
    expect_error_and_close(s, b"GARBAGE\r\n\r\n", 400);
    expect_error_and_close(s, b"GET /hello HTTP/1.1\r\nBad Header Line\r\n\r\n", 400);
    expect_error_and_close(s, b"GET /hello HTTP/9.9\r\nHost: t\r\n\r\n", 400);
}

pub fn oversized_head_is_431_and_closed(s: &Subject) {
    let mut raw = b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 9000));
    raw.extend_from_slice(b"\r\n\r\n");
    expect_error_and_close(s, &raw, 431);
}

pub fn http10_without_keep_alive_is_closed(s: &Subject) {
    let mut c = Conn::connect(s.addr).unwrap();
    c.send(b"GET /hello HTTP/1.0\r\n\r\n").unwrap();
    let resp = c.read_response(false).unwrap();
    check_response(&resp, &expect("GET", "/hello"), "GET", "/hello (HTTP/1.0)");
    assert!(
        c.is_closed(Duration::from_secs(5)),
        "HTTP/1.0 without keep-alive must be closed"
    );
}

pub fn http10_keep_alive_is_kept(s: &Subject) {
    let mut c = Conn::connect(s.addr).unwrap();
    for _ in 0..3 {
        c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let resp = c.read_response(false).unwrap();
        check_response(
            &resp,
            &expect("GET", "/hello"),
            "GET",
            "/hello (HTTP/1.0 keep-alive)",
        );
        assert!(
            resp.header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("keep-alive")),
            "ApacheBench -k needs `Connection: keep-alive`, got {:?}",
            resp.header("connection")
        );
    }
}

pub fn keep_alive_serves_many(s: &Subject) {
    let mut c = Conn::connect(s.addr).unwrap();
    for t in ["/hello", "/cpu?n=3", "/db", "/work", "/nope", "/hello"] {
        let resp = c.request("GET", t).unwrap();
        check_response(&resp, &expect("GET", t), "GET", t);
    }
    let resp = c.request("HEAD", "/hello").unwrap();
    check_response(&resp, &expect("HEAD", "/hello"), "HEAD", "/hello");
    let resp = c.request("GET", "/hello").unwrap();
    check_response(&resp, &expect("GET", "/hello"), "GET", "/hello after HEAD");
}

pub fn pipelined_requests_in_order(s: &Subject) {
    let targets = samples::PIPELINED_TARGETS;
    let mut raw = Vec::new();
    for t in targets {
        raw.extend_from_slice(format!("GET {t} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    let mut c = Conn::connect(s.addr).unwrap();
    c.send(&raw).unwrap();
    for t in targets {
        let resp = c
            .read_response(false)
            .unwrap_or_else(|e| panic!("pipelined {t}: {e}"));
        check_response(&resp, &expect("GET", t), "GET", t);
    }
}

pub fn date_is_fresh(s: &Subject) {
    let resp = client::get(s.addr, "/hello").unwrap();
    let date = resp.header("date").expect("Date");
    let t = parse_http_date(date);
    let skew = SystemTime::now()
        .duration_since(t)
        .unwrap_or_else(|e| e.duration());
    assert!(
        skew <= Duration::from_secs(2),
        "Date {date} is {skew:?} off"
    );
}

fn parse_http_date(s: &str) -> SystemTime {
    workloads::parse_http_date(s).unwrap_or_else(|| panic!("bad Date {s}"))
}

pub fn stalled_request_is_dropped(s: &Subject) {
    let mut stalled = Conn::connect(s.addr).unwrap();
    stalled.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n").unwrap();
    // Other clients are served meanwhile.
    check(s.addr, "GET", "/hello");
    let t0 = Instant::now();
    let closed = stalled.is_closed(SERVER_READ_TIMEOUT + Duration::from_secs(10));
    assert!(
        closed,
        "a stalled request head kept its connection for {:?}",
        t0.elapsed()
    );
}

pub fn database_down_is_503_then_recovers(s: &Subject) {
    let mut mariadb = db::private();
    let server = s.start_own(&mariadb.url());
    let addr = server.addr;
    check(addr, "GET", "/db");
    check(addr, "GET", "/work");

    mariadb.stop();
    let bound = Duration::from_secs(10);
    for t in [
        "/db",
        "/work",
        "/db?conn=new",
        "/work?conn=new",
        "/db?sleep_ms=10",
    ] {
        let t0 = Instant::now();
        let resp =
            client::get(addr, t).unwrap_or_else(|e| panic!("{t} with the database down: {e}"));
        check_response(&resp, &Expected::db_unavailable(), "GET", t);
        assert!(t0.elapsed() < bound, "{t}: 503 took {:?}", t0.elapsed());
        check(addr, "GET", "/hello");
    }

    mariadb.restart().expect("restart MariaDB");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let resp = client::get(addr, "/db").unwrap();
        if resp.status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery 30 s after the database returned: {}",
            resp.status
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Every pooled connection must be usable again, not just one.
    for _ in 0..40 {
        check(addr, "GET", "/work");
    }
    check(addr, "GET", "/db?conn=new");
}

pub fn sigterm_finishes_in_flight_and_exits_0(s: &Subject) {
    let mut server = s.start_own(db::shared());
    let addr = server.addr;
    let mut c = Conn::connect(addr).unwrap();
    c.send_request("GET", "/sleep?ms=1000").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    server.signal(libc::SIGTERM);
    let resp = c
        .read_response(false)
        .expect("the in-flight request is answered");
    check_response(
        &resp,
        &expect("GET", "/sleep?ms=1000"),
        "GET",
        "/sleep?ms=1000 during shutdown",
    );
    let status = server
        .wait_exit(Duration::from_secs(15))
        .expect("server exits after SIGTERM");
    assert!(status.success(), "exit status {status}");
    assert!(
        client::get(addr, "/hello").is_err(),
        "still answering after exit"
    );
}

/// Generates one `#[test]` per contract row for a server binary:
///
/// ```ignore
/// testkit::contract_tests!(env!("CARGO_BIN_EXE_coroutine"), "--workers", "2");
/// ```
#[macro_export]
macro_rules! contract_tests {
    ($bin:expr $(, $arg:expr)* $(,)?) => {
        mod contract {
            fn subject() -> $crate::contract::Subject {
                static ADDR: ::std::sync::OnceLock<::std::net::SocketAddr> = ::std::sync::OnceLock::new();
                const ARGS: &[&str] = &[$($arg),*];
                $crate::contract::Subject::shared(&ADDR, $bin, ARGS)
            }
            $crate::__contract_cases!(
                hello, cpu, db, db_conn_new, work, work_conn_new, sleep_waits, config,
                head_has_headers_and_no_body, not_found, method_not_allowed, bad_query_values,
                malformed_request_is_400_and_closed, oversized_head_is_431_and_closed,
                http10_without_keep_alive_is_closed, http10_keep_alive_is_kept,
                keep_alive_serves_many, pipelined_requests_in_order, date_is_fresh,
                stalled_request_is_dropped, database_down_is_503_then_recovers,
                sigterm_finishes_in_flight_and_exits_0
            );
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __contract_cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::contract::$case(&subject())
            }
        )*
    };
}
