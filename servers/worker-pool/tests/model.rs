//! What makes the worker pool a worker pool: work concurrency capped at
//! `--workers`, a bounded queue that overflows into `503 server busy`,
//! idle keep-alive connections that cost nothing in the front shape and
//! starve others in the `--per-connection` (prefork) shape, and one
//! persistent database connection per worker.
//!
//! "Waited for a worker" and "answered at once" are told apart by state: a
//! request is sent once the workers are seen inside `/sleep` (in
//! `nanosleep`) or the front has read what came before, and the order of
//! answers is read from the sockets. The few time bounds left are
//! generous: seconds against milliseconds on a loaded 2-core machine.

use std::time::{Duration, Instant};

use testkit::client::{Conn, RawResponse};
use testkit::observe::wait_for;
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

/// How many worker threads are inside `/sleep` (blocked in `nanosleep`):
/// the state the tests wait for instead of giving requests a head start.
fn sleeping_workers(server: &ServerProcess) -> usize {
    server
        .threads()
        .iter()
        .filter(|t| is_worker(&t.name) && t.in_sleep())
        .count()
}

/// `worker-N`, a pool thread (not the `worker-pool` process's main thread).
fn is_worker(name: &str) -> bool {
    name.strip_prefix("worker-")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Sends `GET target` without waiting for the answer.
fn send(conn: &mut Conn, target: &str) {
    conn.send_request("GET", target)
        .unwrap_or_else(|e| panic!("sending GET {target}: {e}"));
}

fn read(conn: &mut Conn) -> (u16, String) {
    let resp = conn
        .read_response(false)
        .unwrap_or_else(|e| panic!("reading a response: {e}"));
    (resp.status, resp.body_str())
}

#[test]
fn work_concurrency_is_capped_at_workers() {
    let server = ServerProcess::start(BIN, &["--workers", "2", "--mysql-url", NO_DB]);
    let (mut sleep_a, mut sleep_b, mut hello) =
        (connect(&server), connect(&server), connect(&server));
    send(&mut sleep_a, "/sleep?ms=1000");
    send(&mut sleep_b, "/sleep?ms=1000");
    wait_for("both workers to be inside /sleep", || {
        sleeping_workers(&server) == 2
    });
    send(&mut hello, "/hello");
    assert_eq!(read(&mut hello), (200, "Hello World".into()));
    // /hello waited in the queue until a worker finished its sleep: that
    // sleep's answer went out first (the worker replied before it took
    // /hello; the front writes replies in the order they come back, and
    // loopback delivers a write before it returns).
    assert!(
        sleep_a.has_data() || sleep_b.has_data(),
        "/hello answered while both workers slept: not capped at 2"
    );
    assert_eq!(read(&mut sleep_a), (200, "slept 1000".into()));
    assert_eq!(read(&mut sleep_b), (200, "slept 1000".into()));
}

#[test]
fn a_free_worker_answers_at_once() {
    // The control for the test above: one more worker, no wait.
    let server = ServerProcess::start(BIN, &["--workers", "3", "--mysql-url", NO_DB]);
    let (mut sleep_a, mut sleep_b, mut hello) =
        (connect(&server), connect(&server), connect(&server));
    // 5 s: a loaded machine answers /hello within milliseconds. The test
    // does not wait for them (the server is killed).
    send(&mut sleep_a, "/sleep?ms=5000");
    send(&mut sleep_b, "/sleep?ms=5000");
    wait_for("two workers to be inside /sleep", || {
        sleeping_workers(&server) == 2
    });
    send(&mut hello, "/hello");
    assert_eq!(read(&mut hello), (200, "Hello World".into()));
    assert!(
        !sleep_a.has_data() && !sleep_b.has_data(),
        "/hello waited for a sleep although a worker was free"
    );
}

#[test]
fn a_full_queue_answers_503_server_busy_at_once() {
    let server = ServerProcess::start(
        BIN,
        &["--workers", "1", "--queue", "1", "--mysql-url", NO_DB],
    );
    // The only worker sleeps (it took the request: the queue is empty)...
    let mut busy = connect(&server);
    send(&mut busy, "/sleep?ms=2000");
    wait_for("the worker to be inside /sleep", || {
        sleeping_workers(&server) == 1
    });
    // ...one request waits in the queue (the front queues a request in the
    // same turn as it reads it: nothing unread, it is queued)...
    let mut queued = connect(&server);
    send(&mut queued, "/sleep?ms=10");
    server.wait_until_read();
    // ...and the next one finds the queue full: 503 at once, i.e. before
    // the worker is free (2 s of sleep; a loaded machine answers in ms).
    let mut client = connect(&server);
    let resp = get(&mut client, "/hello");
    assert_eq!(
        (resp.status, resp.body_str().as_str()),
        (503, "server busy")
    );
    assert!(
        !busy.has_data(),
        "503 came only after the worker was free: it waited for one"
    );

    assert_eq!(read(&mut queued), (200, "slept 10".into()));
    // The worker answered the first before it took the queued one.
    assert!(busy.has_data(), "the queued request ran before the first");
    assert_eq!(read(&mut busy), (200, "slept 2000".into()));
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
    // At once, not when an idle connection times out (READ_TIMEOUT, 10 s):
    // half of that is seconds more than a loaded machine needs.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
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
    // Held workers would leave it unanswered until an idle connection
    // timed out (10 s); a loaded machine answers in milliseconds.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
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
    wait_for("the conn=new connections to close", || {
        status("Threads_connected") == connected
    });
}

/// The model's limit on WebSocket, shown: each held connection is a
/// worker's for its lifetime, so with 2 workers a 3rd handshake gets no
/// `101` while both are held, and gets it (and its echo) once one closes.
#[test]
fn websockets_beyond_the_workers_wait_for_a_free_one() {
    use std::net::TcpStream;
    use tungstenite::Message;
    let server = ServerProcess::start(BIN, &["--workers", "2", "--mysql-url", NO_DB]);
    let url = format!("ws://{}/ws", server.addr);
    let open = || {
        let s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        tungstenite::client(url.as_str(), s).unwrap().0
    };
    let mut a = open();
    let mut b = open();
    for ws in [&mut a, &mut b] {
        ws.send(Message::text("held")).unwrap();
        assert_eq!(ws.read().unwrap(), Message::text("held"));
    }
    // The 3rd: its handshake sent, no 101 while both workers are held.
    let mut third = TcpStream::connect(server.addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    std::io::Write::write_all(
        &mut third,
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut byte = [0u8; 1];
    let waited = std::io::Read::read(&mut third, &mut byte);
    assert!(
        matches!(&waited, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "answered while both workers were held: {waited:?}"
    );
    // A worker freed: the waiting handshake is answered.
    a.close(None).unwrap();
    while a.read().is_ok() {}
    third
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let n = std::io::Read::read(&mut third, &mut byte).unwrap();
        assert_eq!(n, 1, "closed before its 101");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    let mut c =
        tungstenite::WebSocket::from_raw_socket(third, tungstenite::protocol::Role::Client, None);
    c.send(Message::text("my turn")).unwrap();
    assert_eq!(c.read().unwrap(), Message::text("my turn"));
}

/// A room member's worker waits in `poll(2)` on its socket and its room's
/// wake-up pipe (not in a read that times out every few milliseconds), and
/// a message from one member reaches the idle others through that wake-up:
/// told by state, the workers' system call, then the messages read.
#[test]
fn room_members_wait_in_poll_and_are_woken_by_their_room() {
    use std::net::TcpStream;
    use tungstenite::Message;
    let server = ServerProcess::start(BIN, &["--workers", "4", "--mysql-url", NO_DB]);
    let url = format!("ws://{}/ws/room?name=wake", server.addr);
    let open = || {
        let s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        tungstenite::client(url.as_str(), s).unwrap().0
    };
    let mut members = [open(), open(), open()];
    let in_poll = || {
        server
            .threads()
            .iter()
            .filter(|t| {
                is_worker(&t.name)
                    && matches!(t.syscall, Some(n) if n == libc::SYS_poll || n == libc::SYS_ppoll)
            })
            .count()
    };
    wait_for("three room members' workers in poll(2)", || in_poll() == 3);
    for round in 0..20 {
        let from = round % 3;
        let text = format!("round {round}");
        members[from].send(Message::text(text.clone())).unwrap();
        for m in members.iter_mut() {
            assert_eq!(
                m.read().unwrap(),
                Message::text(text.clone()),
                "round {round}"
            );
        }
    }
    wait_for("the idle members back in poll(2)", || in_poll() == 3);
}
