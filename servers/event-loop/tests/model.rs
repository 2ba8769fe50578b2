//! What makes this server the event-loop model, observed from outside:
//! CPU work blocks its loop, I/O waits do not, `--workers N` runs N loops
//! in parallel. Orderings of completion are asserted, never durations, and
//! each second request is sent only once the server is observed in the
//! state the test is about (inside `/cpu`, or having read the first request:
//! `testkit::observe`), never after a head start in time.
//! Plus regressions for what hyper does on its own (its answers to
//! unparseable requests, flushing before a close).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use testkit::client::{self, Conn, RawResponse, READ_TIMEOUT};
use testkit::observe::wait_for;
use testkit::ServerProcess;

const BIN: &str = env!("CARGO_BIN_EXE_event-loop");

/// The longest sqrt loop the contract allows: hundreds of ms of CPU in a
/// debug build.
const LONG_CPU: &str = "/cpu?n=10000000";

/// CPU time the server spends, with only `/cpu` outstanding, before the
/// test believes it is inside the sqrt loop: parsing and routing a request
/// take microseconds, so this much is the loop itself (and far from its end).
const INSIDE_CPU: Duration = Duration::from_millis(20);

/// A wait that must outlast the second request's round trip on a loaded
/// machine (milliseconds): 5 s is a margin of hundreds. The tests do not
/// wait for it to end (the server is killed).
const LONG_SLEEP: &str = "/sleep?ms=5000";

fn connect(addr: SocketAddr) -> Conn {
    Conn::connect(addr).expect("connecting")
}

/// A connection that has already been accepted and served once.
fn warm(addr: SocketAddr) -> Conn {
    let mut c = connect(addr);
    send_get(&mut c, "/hello");
    assert_eq!(read_reply(&mut c).status, 200);
    c
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

/// Sends [`LONG_CPU`] on `conn` and returns once the server is inside its
/// sqrt loop: its CPU time moved by [`INSIDE_CPU`] while nothing else was
/// outstanding (the caller's earlier requests are all answered).
fn start_long_cpu(server: &ServerProcess, conn: &mut Conn) {
    let before = server.cpu_time();
    send_get(conn, LONG_CPU);
    wait_for("the server to spend CPU time on /cpu", || {
        server.cpu_time() >= before + INSIDE_CPU
    });
    assert!(
        !conn.has_data(),
        "/cpu was answered before the test saw it run: {LONG_CPU} is too short for this build"
    );
}

#[test]
fn cpu_work_blocks_the_loop() {
    let server = ServerProcess::start(BIN, &["--workers", "1"]);
    let (mut cpu, mut hello) = (warm(server.addr), warm(server.addr));
    start_long_cpu(&server, &mut cpu);
    // The only loop is inside /cpu now: /hello waits for it to end.
    send_get(&mut hello, "/hello");
    assert_eq!(read_reply(&mut hello).status, 200);
    // The loop wrote /cpu's answer before it read /hello, and loopback puts
    // written bytes in the peer's socket before `write` returns: once
    // /hello's answer is here, /cpu's must be too (no clock compared).
    assert!(
        cpu.has_data(),
        "/hello answered while /cpu ran: the loop was not blocked"
    );
    let reply = read_reply(&mut cpu);
    assert_eq!(reply.status, 200, "{LONG_CPU}: {}", reply.body_str());
}

/// Sends `wait` (a timer or a database wait) on one connection, waits until
/// the server has read it, then asks `/hello` on another: it must be
/// answered while `wait` is still unanswered.
fn hello_is_answered_during(server: &ServerProcess, wait: &str, what: &str) {
    let (mut slow, mut hello) = (warm(server.addr), warm(server.addr));
    send_get(&mut slow, wait);
    // The loop reads a request and starts its handler in one poll of that
    // connection's task, on its only thread: once no byte is unread, the
    // wait has begun and /hello cannot be read before it.
    server.wait_until_read();
    send_get(&mut hello, "/hello");
    let reply = read_reply(&mut hello);
    assert_eq!(
        (reply.status, reply.body_str().as_str()),
        (200, "Hello World")
    );
    assert!(
        !slow.has_data(),
        "/hello waited for {wait}: {what} blocked the loop"
    );
}

#[test]
fn a_timer_does_not_block_the_loop() {
    let server = ServerProcess::start(BIN, &["--workers", "1"]);
    hello_is_answered_during(&server, LONG_SLEEP, "the timer");
}

#[test]
fn a_database_wait_does_not_block_the_loop() {
    let url = testkit::db::shared();
    let server = ServerProcess::start(BIN, &["--workers", "1", "--mysql-url", url]);
    assert_eq!(get(server.addr, "/db").body_str(), "1");
    hello_is_answered_during(&server, "/db?sleep_ms=5000", "the query");
}

#[test]
fn two_workers_are_two_loops_in_parallel() {
    let server = ServerProcess::start(BIN, &["--workers", "2"]);
    let addr = server.addr;
    // A single loop can never answer a /hello before the /cpu it is inside
    // (loopback puts /cpu's answer in our socket before the loop reads
    // anything else: see cpu_work_blocks_the_loop), so one try that sees a
    // /hello first proves two loops. A try can miss on a machine so busy
    // that the hellos' threads wait longer than the whole of /cpu: try again
    // rather than read a clock.
    for _ in 0..5 {
        // Block one loop with the sqrt loop...
        let mut busy = warm(addr);
        start_long_cpu(&server, &mut busy);
        // ...then say hello over new connections: SO_REUSEPORT hashes each
        // to one of the two loops, so some land on the free one (all 16
        // landing on the busy one has a chance of 1 in 65536).
        let (tx, rx) = mpsc::channel();
        for _ in 0..16 {
            let tx = tx.clone();
            thread::spawn(move || {
                let reply = get(addr, "/hello");
                let _ = tx.send(reply.status);
            });
        }
        drop(tx);
        assert_eq!(rx.recv().expect("a hello"), 200);
        let before_cpu = !busy.has_data();
        let answered: Vec<u16> = rx.iter().collect();
        assert_eq!(answered, [200; 15]);
        assert_eq!(read_reply(&mut busy).status, 200);
        if before_cpu {
            return;
        }
    }
    panic!("in 5 tries no /hello was answered while one loop ran /cpu: not two loops");
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
    // Accepted and read: the request is in flight (a connection still in
    // the accept queue, or with its request unread, is not).
    server.wait_until_read();
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
            b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n",
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

/// A room spans the loops (`/config`: shared-across-workers): with two
/// loops on SO_REUSEPORT, eight members land on both (all on one loop:
/// 1 in 128), and a message from one reaches every member, itself too.
#[test]
fn a_websocket_room_spans_the_loops() {
    use tungstenite::Message;
    let server = ServerProcess::start(BIN, &["--workers", "2"]);
    let url = format!("ws://{}/ws/room?name=span", server.addr);
    let mut members: Vec<_> = (0..8)
        .map(|_| {
            let s = std::net::TcpStream::connect(server.addr).unwrap();
            s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            tungstenite::client(url.as_str(), s).unwrap().0
        })
        .collect();
    members[3]
        .send(Message::text("to everyone, on every loop"))
        .unwrap();
    for (i, m) in members.iter_mut().enumerate() {
        let got = m.read().unwrap_or_else(|e| panic!("member {i}: {e}"));
        assert_eq!(
            got,
            Message::text("to everyone, on every loop"),
            "member {i}"
        );
    }
}
