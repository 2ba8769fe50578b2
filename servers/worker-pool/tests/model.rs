//! What makes the worker pool a worker pool: work concurrency capped at
//! `--workers`, a bounded queue that overflows into `503 server busy`,
//! idle keep-alive connections that cost nothing in the front shape and
//! starve others in the `--per-connection` (prefork) shape, and one
//! persistent database connection per worker.
//!
//! Bounds are generous: they tell "waited for a worker" from "answered at
//! once" on a loaded 2-core machine, and are never speed assertions.

use std::thread;
use std::time::{Duration, Instant};

use testkit::client::{Conn, RawResponse};
use testkit::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_worker-pool");
/// A database URL nothing listens on: for tests that never reach the database.
const NO_DB: &str = "mysql://bench:bench@127.0.0.1:9/bench";
const WAIT: Duration = Duration::from_secs(10);

/// A client connection whose responses are waited for at most `WAIT`.
fn connect(server: &ServerProcess) -> Conn {
    let mut conn = Conn::connect(server.addr).expect("connect");
    conn.set_read_timeout(WAIT).unwrap();
    conn
}

fn get(conn: &mut Conn, target: &str) -> RawResponse {
    conn.get(target)
        .unwrap_or_else(|e| panic!("GET {target}: {e}"))
}

/// Sends `GET target` on a fresh connection from a thread; returns when the
/// response arrived, measured from `t0`.
fn timed_get(
    server: &ServerProcess,
    target: &'static str,
    t0: Instant,
) -> thread::JoinHandle<(u16, String, Duration)> {
    let mut conn = connect(server);
    thread::spawn(move || {
        let resp = get(&mut conn, target);
        (resp.status, resp.body_str(), t0.elapsed())
    })
}

#[test]
fn work_concurrency_is_capped_at_workers() {
    let server = ServerProcess::start(BIN, &["--workers", "2", "--mysql-url", NO_DB]);
    let t0 = Instant::now();
    let sleep_a = timed_get(&server, "/sleep?ms=1000", t0);
    let sleep_b = timed_get(&server, "/sleep?ms=1000", t0);
    thread::sleep(Duration::from_millis(150));
    let hello = timed_get(&server, "/hello", t0);

    let (status, body, hello_at) = hello.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "Hello World"));
    let (_, _, a_at) = sleep_a.join().unwrap();
    let (_, _, b_at) = sleep_b.join().unwrap();
    let first_sleep_done = a_at.min(b_at);
    assert!(
        first_sleep_done >= Duration::from_millis(1000),
        "{first_sleep_done:?}"
    );
    // /hello waited in the queue until a worker finished its sleep.
    assert!(
        hello_at >= Duration::from_millis(950),
        "/hello answered after {hello_at:?}, before a worker was free"
    );
    assert!(hello_at < Duration::from_secs(5), "{hello_at:?}");
}

#[test]
fn a_free_worker_answers_at_once() {
    // The control for the test above: one more worker, no wait.
    let server = ServerProcess::start(BIN, &["--workers", "3", "--mysql-url", NO_DB]);
    let t0 = Instant::now();
    let sleep_a = timed_get(&server, "/sleep?ms=1000", t0);
    let sleep_b = timed_get(&server, "/sleep?ms=1000", t0);
    thread::sleep(Duration::from_millis(150));
    let t1 = Instant::now();
    let hello = timed_get(&server, "/hello", t1);
    let (status, _, hello_took) = hello.join().unwrap();
    assert_eq!(status, 200);
    assert!(hello_took < Duration::from_millis(700), "{hello_took:?}");
    sleep_a.join().unwrap();
    sleep_b.join().unwrap();
}

#[test]
fn a_full_queue_answers_503_server_busy_at_once() {
    let server = ServerProcess::start(
        BIN,
        &["--workers", "1", "--queue", "1", "--mysql-url", NO_DB],
    );
    let t0 = Instant::now();
    // The only worker sleeps...
    let busy = timed_get(&server, "/sleep?ms=2000", t0);
    thread::sleep(Duration::from_millis(300));
    // ...one request waits in the queue...
    let queued = timed_get(&server, "/sleep?ms=10", t0);
    thread::sleep(Duration::from_millis(300));
    // ...and the next one finds the queue full.
    let mut client = connect(&server);
    let t1 = Instant::now();
    let resp = get(&mut client, "/hello");
    let took = t1.elapsed();
    assert_eq!(
        (resp.status, resp.body_str().as_str()),
        (503, "server busy")
    );
    assert!(took < Duration::from_millis(1000), "503 took {took:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(1900),
        "answered before the worker was free"
    );

    let (status, body, busy_at) = busy.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "slept 2000"));
    let (status, body, queued_at) = queued.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "slept 10"));
    assert!(
        queued_at >= busy_at,
        "the queued request ran after the first"
    );
    // The connection that got 503 stays usable once a worker is free.
    let resp = get(&mut client, "/hello");
    assert_eq!(resp.status, 200);
}

/// Opens `n` keep-alive connections and makes each do one request.
fn idle_keep_alive(server: &ServerProcess, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|_| {
            let mut c = connect(server);
            assert_eq!(get(&mut c, "/hello").status, 200);
            c
        })
        .collect()
}

#[test]
fn per_connection_keep_alive_connections_starve_the_rest() {
    let server = ServerProcess::start(
        BIN,
        &["--per-connection", "--workers", "2", "--mysql-url", NO_DB],
    );
    let mut held = idle_keep_alive(&server, 2);
    // Both workers own an idle connection: a third connection is accepted by
    // the kernel but no worker reads it.
    let mut third = connect(&server);
    third.send_request("GET", "/hello").unwrap();
    let starved = third.read_response_within(false, Duration::from_millis(1500));
    assert!(
        matches!(&starved, Err(e) if e.kind() == std::io::ErrorKind::TimedOut),
        "{starved:?}"
    );
    // The held connections are still served by their workers.
    assert_eq!(get(&mut held[1], "/hello").status, 200);
    // One closes: its worker takes the waiting connection at once.
    drop(held.remove(0));
    let t = Instant::now();
    let resp = third
        .read_response_within(false, WAIT)
        .expect("answered after a close");
    assert_eq!(
        (resp.status, resp.body_str().as_str()),
        (200, "Hello World")
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn front_idle_keep_alive_connections_hold_no_worker() {
    // The same load as above in the front shape: the front owns the idle
    // connections, the workers are free.
    let server = ServerProcess::start(BIN, &["--workers", "2", "--mysql-url", NO_DB]);
    let _held = idle_keep_alive(&server, 2);
    let mut third = connect(&server);
    let t = Instant::now();
    assert_eq!(get(&mut third, "/hello").status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn each_worker_holds_one_persistent_connection_and_conn_new_closes_its_own() {
    // A private database: the counters below must see this server alone.
    let db = testkit::db::private();
    let url = db.url();
    let status = |name: &str| {
        db.status(name)
            .unwrap_or_else(|e| panic!("status {name}: {e}"))
    };
    let server = ServerProcess::start(BIN, &["--workers", "2", "--mysql-url", &url]);

    // Each status read is itself one connection.
    let before = status("Connections");
    let mut clients: Vec<Conn> = (0..4).map(|_| connect(&server)).collect();
    for _ in 0..10 {
        for c in &mut clients {
            let resp = get(c, "/db");
            assert_eq!((resp.status, resp.body_str().as_str()), (200, "1"));
        }
    }
    let opened = status("Connections") - before - 1;
    assert!(
        (1..=2).contains(&opened),
        "{opened} connections for 2 workers"
    );

    let connected = status("Threads_connected");
    let before = status("Connections");
    for _ in 0..5 {
        let resp = get(&mut clients[0], "/work?conn=new");
        assert_eq!(resp.status, 200, "{}", resp.body_str());
    }
    let opened = status("Connections") - before - 1;
    assert_eq!(opened, 5, "conn=new opens one connection per request");
    // ...and closes it after: back to the persistent ones (poll: the server
    // side notices the close asynchronously).
    let deadline = Instant::now() + Duration::from_secs(5);
    while status("Threads_connected") != connected {
        assert!(Instant::now() < deadline, "conn=new connections left open");
        thread::sleep(Duration::from_millis(100));
    }
}
