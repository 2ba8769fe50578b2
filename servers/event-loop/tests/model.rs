//! What makes this server the event-loop model, observed from outside:
//! CPU work blocks its loop, I/O waits do not, `--workers N` runs N loops
//! in parallel. Orderings of completion are asserted, never durations.
//! Plus regressions for what hyper does on its own (its answers to
//! unparseable requests, flushing before a close).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use testkit::client::{self, Conn, RawResponse, READ_TIMEOUT};
use testkit::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_event-loop");

/// The longest sqrt loop the contract allows: hundreds of ms in a debug build.
const LONG_CPU: &str = "/cpu?n=10000000";

/// Time for the first request to reach the loop before the second is sent.
/// If the loop is slower than that to wake, it still finds the first
/// request first (readiness events and tokio's run queue are FIFO).
const HEAD_START: Duration = Duration::from_millis(20);

fn connect(addr: SocketAddr) -> Conn {
    Conn::connect(addr).expect("connecting")
}

fn send_get(conn: &mut Conn, target: &str) {
    conn.send_request("GET", target)
        .unwrap_or_else(|e| panic!("sending GET {target}: {e}"));
}

fn read_reply(conn: &mut Conn) -> RawResponse {
    conn.read_response(false)
        .unwrap_or_else(|e| panic!("reading a response: {e}"))
}

/// One `GET` on a fresh connection.
fn get(addr: SocketAddr, target: &str) -> RawResponse {
    client::get(addr, target).unwrap_or_else(|e| panic!("GET {target}: {e}"))
}

/// Writes raw bytes on a fresh connection and reads every response until
/// the server closes it; each must be framed by a Content-Length.
fn exchange_until_close(addr: SocketAddr, raw: &[u8]) -> Vec<RawResponse> {
    let mut conn = connect(addr);
    conn.send(raw).expect("sending");
    let replies = conn
        .read_until_close(READ_TIMEOUT)
        .unwrap_or_else(|e| panic!("the server closes after all its answers: {e}"));
    for r in &replies {
        assert!(
            r.header("content-length").is_some(),
            "no Content-Length in {r:?}"
        );
    }
    replies
}

/// Sends `first` on one connection and, [`HEAD_START`] later, `second` on
/// another (both connections already accepted and warm). Returns the
/// instants at which each response had fully arrived.
fn race(addr: SocketAddr, first: &'static str, second: &'static str) -> (Instant, Instant) {
    let mut a = connect(addr);
    let mut b = connect(addr);
    for s in [&mut a, &mut b] {
        send_get(s, "/hello");
        assert_eq!(read_reply(s).status, 200);
    }
    // Sent from this thread, so that it surely leaves before the second.
    send_get(&mut a, first);
    let first_thread = thread::spawn(move || {
        let reply = read_reply(&mut a);
        let done = Instant::now();
        assert_eq!(reply.status, 200, "{first}: {}", reply.body_str());
        done
    });
    thread::sleep(HEAD_START);
    send_get(&mut b, second);
    let reply = read_reply(&mut b);
    let second_done = Instant::now();
    assert_eq!(reply.status, 200, "{second}: {}", reply.body_str());
    let first_done = first_thread.join().expect("first request");
    (first_done, second_done)
}

#[test]
fn cpu_work_blocks_the_loop() {
    let server = ServerProcess::start(BIN, &["--workers", "1"]);
    let (cpu_done, hello_done) = race(server.addr, LONG_CPU, "/hello");
    assert!(
        hello_done > cpu_done,
        "/hello answered while /cpu ran: the loop was not blocked"
    );
}

#[test]
fn a_timer_does_not_block_the_loop() {
    let server = ServerProcess::start(BIN, &["--workers", "1"]);
    let (sleep_done, hello_done) = race(server.addr, "/sleep?ms=500", "/hello");
    assert!(
        hello_done < sleep_done,
        "/hello waited for /sleep: the timer blocked the loop"
    );
}

#[test]
fn a_database_wait_does_not_block_the_loop() {
    let url = testkit::db::shared();
    let server = ServerProcess::start(BIN, &["--workers", "1", "--mysql-url", url]);
    assert_eq!(get(server.addr, "/db").body_str(), "1");
    let (db_done, hello_done) = race(server.addr, "/db?sleep_ms=500", "/hello");
    assert!(
        hello_done < db_done,
        "/hello waited for the database: the query blocked the loop"
    );
}

#[test]
fn two_workers_are_two_loops_in_parallel() {
    let server = ServerProcess::start(BIN, &["--workers", "2"]);
    let addr = server.addr;
    // Block one loop with the sqrt loop...
    let mut busy = connect(addr);
    send_get(&mut busy, LONG_CPU);
    let cpu = thread::spawn(move || {
        let reply = read_reply(&mut busy);
        assert_eq!(reply.status, 200);
        Instant::now()
    });
    thread::sleep(HEAD_START);
    // ...then say hello over new connections: SO_REUSEPORT hashes each to
    // one of the two loops, so some land on the free one (all 16 landing
    // on the busy one has a chance of 1 in 65536).
    let (tx, rx) = mpsc::channel();
    for _ in 0..16 {
        let tx = tx.clone();
        thread::spawn(move || {
            let reply = get(addr, "/hello");
            assert_eq!(reply.status, 200);
            let _ = tx.send(Instant::now());
        });
    }
    drop(tx);
    let first_hello = rx.recv().expect("a hello");
    let cpu_done = cpu.join().expect("the cpu request");
    assert!(
        first_hello < cpu_done,
        "no /hello was answered while one loop ran /cpu: not two loops"
    );
    let answered = 1 + rx.iter().count();
    assert_eq!(answered, 16);
}

#[test]
fn config_reports_loops_and_the_total_pool() {
    let server = ServerProcess::start(BIN, &["--workers", "2", "--db-pool", "3"]);
    let reply = get(server.addr, "/config");
    assert_eq!(reply.status, 200);
    let config = workloads::ServerConfig::from_json(&reply.body).expect("/config parses");
    assert_eq!(config.server, "event-loop");
    assert_eq!(config.model, "event-loop");
    assert_eq!(config.workers, Some(2));
    assert_eq!(config.db_pool, Some(6), "3 per loop × 2 loops");
    assert!(config.runtime.starts_with("rust 1."), "{}", config.runtime);
    assert_eq!(config.debug, cfg!(debug_assertions));
}

#[test]
fn sigterm_stops_every_loop_after_in_flight_requests() {
    let server = ServerProcess::start(BIN, &["--workers", "2"]);
    let mut slow = connect(server.addr);
    send_get(&mut slow, "/sleep?ms=500");
    thread::sleep(HEAD_START);
    let status = thread::scope(|scope| {
        let reader = scope.spawn(|| read_reply(&mut slow));
        // A bound for a hung shutdown only: what is asserted is the order.
        let status = server
            .terminate(Duration::from_secs(60))
            .expect("the server exits after SIGTERM");
        let reply = reader.join().expect("the in-flight request");
        assert_eq!(reply.body_str(), "slept 500");
        status
    });
    assert!(status.success(), "exit status {status}");
}

/// hyper answers unparseable requests itself with a bare head; the
/// contract's headers and reason must come out instead (see src/io.rs).
#[test]
fn hypers_own_error_answers_meet_the_contract() {
    let server = ServerProcess::start(BIN, &[]);
    let big = format!(
        "GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(9 * 1024)
    );
    let bad = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\nGARBAGE\r\n\r\n";
    for (raw, statuses) in [(big.as_bytes(), &[431][..]), (&bad[..], &[200, 400][..])] {
        let replies = exchange_until_close(server.addr, raw);
        let got: Vec<u16> = replies.iter().map(|r| r.status).collect();
        assert_eq!(got, statuses);
        let last = replies.last().expect("a reply");
        for name in ["server", "date", "content-type", "content-length"] {
            assert!(last.header(name).is_some(), "no {name} in {last:?}");
        }
        assert_eq!(last.header("connection"), Some("close"));
        assert!(!last.body.is_empty(), "a one-line reason");
    }
}

/// hyper's `pipeline_flush` drops the responses it holds back when the
/// connection closes with requests still unread; it stays off.
#[test]
fn pipelined_answers_before_a_close_are_all_sent() {
    let server = ServerProcess::start(BIN, &[]);
    let cases: [(&[u8], usize); 2] = [
        (
            b"GET /hello HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\n\r\n",
            2,
        ),
        (
            b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /hello HTTP/1.0\r\n\r\nGET /hello HTTP/1.0\r\n\r\n",
            2,
        ),
    ];
    for (raw, answers) in cases {
        let replies = exchange_until_close(server.addr, raw);
        assert_eq!(replies.len(), answers, "{replies:?}");
        assert!(replies.iter().all(|r| r.body_str() == "Hello World"));
    }
    let mut s = connect(server.addr);
    s.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let reply = read_reply(&mut s);
    assert_eq!(reply.header("connection"), Some("keep-alive"));
}
