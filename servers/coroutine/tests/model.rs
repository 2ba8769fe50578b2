//! Tests of what the coroutine model promises (the generic contract tests
//! live in `contract.rs`): coroutines are cheap, a timer or a database wait
//! parks the coroutine and never the worker thread, shutdown lets in-flight
//! requests finish, the stacks have headroom, and `--engine minihttp`
//! serves keep-alive clients.

use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use testkit::client::{get, Conn};
use testkit::db::{shared, shared_db};
use testkit::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_coroutine");

/// Starts the server against the shared private MariaDB.
fn start_with_db(args: &[&str]) -> ServerProcess {
    let mut all = vec!["--mysql-url", shared()];
    all.extend_from_slice(args);
    ServerProcess::start(BIN, &all)
}

fn connect(addr: std::net::SocketAddr) -> Conn {
    Conn::connect(addr).expect("connect")
}

#[test]
fn two_hundred_sleeps_overlap_on_one_worker_thread() {
    let server = ServerProcess::start(BIN, &["--workers", "1"]);
    let started = Instant::now();
    let mut clients: Vec<Conn> = (0..200).map(|_| connect(server.addr)).collect();
    for c in &mut clients {
        c.send_request("GET", "/sleep?ms=300").unwrap();
    }
    for c in &mut clients {
        let r = c.read_response(false).unwrap();
        assert_eq!((r.status, r.body_str().as_str()), (200, "slept 300"));
    }
    let elapsed = started.elapsed();
    // One at a time would take 60 s; all 200 sleep at once.
    assert!(
        elapsed < Duration::from_secs(5),
        "200 concurrent 300 ms sleeps took {elapsed:?}"
    );
}

#[test]
fn database_waits_park_the_coroutine_not_the_worker_thread() {
    let db = shared_db();
    let server = start_with_db(&["--workers", "1", "--db-pool", "20"]);
    assert_eq!(
        get(server.addr, "/db").unwrap().body_str(),
        "1",
        "database reachable"
    );

    let started = Instant::now();
    let mut clients: Vec<Conn> = (0..50).map(|_| connect(server.addr)).collect();
    for c in &mut clients {
        c.send_request("GET", "/db?sleep_ms=300").unwrap();
    }
    // Wait until the database runs a full pool of sleeps: 20 coroutines
    // are now parked on the only worker thread, waiting for MariaDB. (Only
    // this test's 300 ms sleeps count: other tests share the database.)
    let sleeping = "SELECT COUNT(*) FROM information_schema.processlist \
                    WHERE info LIKE 'SELECT 1 FROM (SELECT SLEEP(0.300))%'";
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n: usize = db.sql(sleeping).unwrap().trim().parse().unwrap();
        assert!(n <= 20, "{n} queries at once through a pool of 20");
        if n == 20 {
            break;
        }
        assert!(Instant::now() < deadline, "only {n} DB sleeps in flight");
        thread::sleep(Duration::from_millis(10));
    }
    // The worker thread still answers, before any of those queries ends.
    let hello = get(server.addr, "/hello").unwrap();
    assert_eq!(
        (hello.status, hello.body_str().as_str()),
        (200, "Hello World")
    );
    let answered = clients.iter().filter(|c| c.has_data()).count();
    assert_eq!(
        answered, 0,
        "/hello was answered only after {answered} DB answers: the worker thread was blocked"
    );

    for c in &mut clients {
        let r = c.read_response(false).unwrap();
        assert_eq!((r.status, r.body_str().as_str()), (200, "1"));
    }
    let elapsed = started.elapsed();
    // 50 queries through a pool of 20: three rounds of 300 ms, not 50.
    assert!(
        elapsed >= Duration::from_millis(850),
        "{elapsed:?}: more than 20 queries at once through a pool of 20?"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "50 DB sleeps of 300 ms through a pool of 20 took {elapsed:?}"
    );
}

/// SIGTERM: the listener closes, a request in flight still gets its
/// answer, the process exits 0.
fn sigterm_finishes_in_flight_requests(engine: &str) {
    let mut server = ServerProcess::start(BIN, &["--engine", engine]);
    let mut client = connect(server.addr);
    client.send_request("GET", "/sleep?ms=600").unwrap();
    thread::sleep(Duration::from_millis(150));
    server.signal(libc::SIGTERM);
    thread::sleep(Duration::from_millis(150));
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "{engine}: still accepting after SIGTERM"
    );
    let r = client.read_response(false).unwrap();
    assert_eq!(
        (r.status, r.body_str().as_str()),
        (200, "slept 600"),
        "{engine}"
    );
    let status = server
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("{engine}: did not exit after SIGTERM"));
    assert!(status.success(), "{engine}: exited with {status}");
}

#[test]
fn sigterm_finishes_in_flight_requests_contract() {
    sigterm_finishes_in_flight_requests("contract");
}

#[test]
fn sigterm_finishes_in_flight_requests_minihttp() {
    sigterm_finishes_in_flight_requests("minihttp");
}

#[test]
fn coroutine_stacks_have_headroom() {
    let server = start_with_db(&["--report-stack"]);
    let targets = [
        "/work?conn=new",
        "/db?conn=new",
        "/work",
        "/db?sleep_ms=1",
        "/cpu?n=100000",
        "/sleep?ms=1",
        "/config",
        "/nope",
    ];
    for target in targets {
        // One connection each: its coroutine ends (and reports) on close.
        let r = get(server.addr, target).unwrap();
        assert!(r.status == 200 || r.status == 404, "{target}: {r:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let reports = loop {
        let lines = server.stdout_lines();
        let reports: Vec<(usize, usize)> = lines.iter().filter_map(|l| parse_report(l)).collect();
        if reports.len() >= targets.len() || Instant::now() > deadline {
            break reports;
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert!(reports.len() >= targets.len(), "stack reports: {reports:?}");
    let (size, used) = reports
        .iter()
        .copied()
        .max_by_key(|&(_, used)| used)
        .unwrap();
    assert!(
        used * 4 < size * 3,
        "a coroutine used {used} of {size} stack words: less than a quarter left"
    );
}

/// may's report: `coroutine name = None, stack size = S,  used size = U`.
fn parse_report(line: &str) -> Option<(usize, usize)> {
    let size = line.split("stack size = ").nth(1)?.split(',').next()?;
    let used = line.split("used size = ").nth(1)?;
    Some((size.trim().parse().ok()?, used.trim().parse().ok()?))
}

#[test]
fn minihttp_engine_serves_keep_alive_clients() {
    let server = start_with_db(&["--engine", "minihttp"]);
    let mut c = connect(server.addr);
    let r = c.get("/hello").unwrap();
    assert_eq!((r.status, r.body_str().as_str()), (200, "Hello World"));
    assert_eq!(r.header("server"), Some("M"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert!(r.header("date").is_some());
    let r = c.get("/work").unwrap();
    assert_eq!(
        (r.status, r.body_str().as_str()),
        (200, r#"{"sum":21097.455887,"db":1}"#)
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    let r = c.get("/cpu?n=abc").unwrap();
    assert_eq!(r.status, 400);
    let r = c.get("/config").unwrap();
    assert!(
        r.body_str().contains(r#""server":"coroutine-minihttp""#),
        "{}",
        r.body_str()
    );
    assert!(
        r.body_str().contains(r#""model":"coroutine""#),
        "{}",
        r.body_str()
    );
    // Pipelined, on the same connection.
    c.send_request("GET", "/sleep?ms=20").unwrap();
    c.send_request("GET", "/hello").unwrap();
    assert_eq!(c.read_response(false).unwrap().body_str(), "slept 20");
    assert_eq!(c.read_response(false).unwrap().body_str(), "Hello World");
}
