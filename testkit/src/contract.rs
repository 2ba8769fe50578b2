//! The contract suite (docs/ARCHITECTURE.md §2): every row of [`workloads::contract`]
//! (the list `harness verify` runs too), then what rows cannot express: the
//! database stopped and restarted, a stalled request, SIGTERM. Each function
//! is one test; [`contract_tests!`](crate::contract_tests) turns them into
//! `#[test]`s for a server binary.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use workloads::contract::Outcome;
use workloads::{contract, expect, Expected};

use crate::client::{self, Conn, RawResponse};
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

/// How long each step of a row (connect, write, read) may wait.
const ROW_TIMEOUT: Duration = client::READ_TIMEOUT;

/// Every row of [`workloads::contract::rows`], in order, the conformance
/// section included: fails with each failing row's name (a contract row,
/// or a MUST of the conformance section), why it is there, what differed
/// and what came. A SHOULD of the conformance section not met is printed,
/// not failed.
pub fn every_row(s: &Subject) {
    let rows = contract::rows();
    let mut failures = Vec::new();
    for row in &rows {
        let checked = row.check(s.addr, ROW_TIMEOUT);
        match checked.outcome {
            Outcome::Pass => {}
            Outcome::Warn => eprintln!("WARN {}: {}", row.name, checked.found),
            Outcome::Fail => failures.push(failure(row, &checked)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} contract rows fail:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// A failed row's report: its name, what differed, why it is there, its
/// RFC section (a conformance row) and what came.
fn failure(row: &contract::Row, checked: &contract::Checked) -> String {
    let got = checked
        .response
        .as_ref()
        .map(|r| {
            format!(
                "\n    got:  {} {:?} {:?}",
                r.status,
                headers_debug(r),
                r.body_str()
            )
        })
        .unwrap_or_default();
    let section = row
        .conformance
        .map(|c| format!("\n    rfc:  {} {}", c.section, c.requirement.name()))
        .unwrap_or_default();
    format!(
        "{}: {}\n    why:  {}{section}{got}",
        row.name, checked.found, row.why
    )
}

/// Beyond the contract's `/config` row: a Rust reference server reports
/// its worker count and database pool (PHP stacks may not know theirs).
pub fn config_reports_workers_and_db_pool(s: &Subject) {
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

/// The WebSocket rows ([`workloads::ws::rows`]) on a server whose
/// `/config` says it serves WebSocket, every one passing; a server that
/// does not must say why in its `/config` and must not upgrade `/ws`.
pub fn websocket_rows(s: &Subject) {
    let resp = check(s.addr, "GET", "/config");
    let cfg = workloads::ServerConfig::from_json(&resp.body).expect("verified /config parses");
    if let Err(why) = workloads::ws::rows::served(&cfg) {
        assert!(
            cfg.websocket_unsupported.is_some(),
            "neither serves WebSocket nor says why in /config: {why}"
        );
        workloads::ws::rows::not_upgraded(s.addr, ROW_TIMEOUT)
            .unwrap_or_else(|e| panic!("GET /ws on a server without WebSocket: {e}"));
        return;
    }
    let rows = workloads::ws::rows::rows();
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.run(s.addr, ROW_TIMEOUT)
                .err()
                .map(|e| format!("{}: {e}\n    why:  {}", r.name, r.why))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} WebSocket rows fail:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
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

/// The request pipelined behind a HEAD in [`head_answer_has_no_content`]:
/// it ends the exchange, whether the server answers it or closes first.
const HELLO_THEN_CLOSE: &[u8] = b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

/// Sends `request` (a HEAD) with a `GET /hello` + `Connection: close`
/// pipelined behind it, and checks that the answer to the HEAD has one of
/// `statuses` and no content (RFC 9110 §9.3.2, error responses included):
/// what follows its head is the next answer (`200 Hello World`) or the
/// close. Content after the head would be read as the start of the next
/// answer, which is what a client does.
pub fn head_answer_has_no_content(
    addr: SocketAddr,
    request: &[u8],
    statuses: &[u16],
) -> Result<(), String> {
    let shown = String::from_utf8_lossy(&request[..request.len().min(60)]).into_owned();
    let mut c = Conn::connect(addr).map_err(|e| format!("{shown:?}: connect: {e}"))?;
    c.send(&[request, HELLO_THEN_CLOSE].concat())
        .map_err(|e| format!("{shown:?}: send: {e}"))?;
    let head = c
        .read_response(true)
        .map_err(|e| format!("{shown:?}: no answer: {e}"))?;
    if !statuses.contains(&head.status) {
        return Err(format!(
            "{shown:?}: {} (expected one of {statuses:?})",
            head.status
        ));
    }
    let rest = c.read_until_close(Duration::from_secs(20)).map_err(|e| {
        format!(
            "{shown:?}: {} answered with content (RFC 9110 §9.3.2): after its head, {e}",
            head.status
        )
    })?;
    match rest.as_slice() {
        [] => Ok(()),
        [next] if next.status == 200 && next.body == b"Hello World" => Ok(()),
        other => Err(format!(
            "{shown:?}: after the {} to HEAD came {:?}",
            head.status,
            other
                .iter()
                .map(|r| (r.status, r.body_str()))
                .collect::<Vec<_>>()
        )),
    }
}

/// HEAD requests the server refuses or cannot route, each answered without
/// content. The first is the one a third-party corpus found answered with
/// its 17-byte reason: `HEAD /url HTTP/1.1` without Host.
pub fn head_error_answers_have_no_content(s: &Subject) {
    let pad = "a".repeat(9000);
    let cases: Vec<(String, &[u16])> = vec![
        ("HEAD /url HTTP/1.1\r\n\r\n".into(), &[400]),
        ("\r\nHEAD /url HTTP/1.1\r\n\r\n".into(), &[400]),
        ("HEAD /nope HTTP/1.1\r\nHost: t\r\n\r\n".into(), &[404]),
        ("HEAD /cpu?n=abc HTTP/1.1\r\nHost: t\r\n\r\n".into(), &[400]),
        (
            "HEAD /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into(),
            &[400],
        ),
        (
            "HEAD /hello HTTP/1.1\r\nHost: t\r\nX-Test : 1\r\n\r\n".into(),
            &[400],
        ),
        (
            format!("HEAD /hello HTTP/1.1\r\nHost: t\r\nX-Pad: {pad}\r\n\r\n"),
            &[431],
        ),
        (
            "HEAD /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
                .into(),
            &[400],
        ),
        // Chunked: decoded and served by the shared codec and hyper (200), declined
        // with 501 where a server cannot frame it; another coding 501 (or 400).
        (
            "HEAD /hello HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".into(),
            &[501, 200],
        ),
        (
            "HEAD /hello HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
                .into(),
            &[501, 400, 200],
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(raw, statuses)| {
            head_answer_has_no_content(s.addr, raw.as_bytes(), statuses).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A valid `GET` asking for a WebSocket upgrade, with the new protocol's
/// first frame (a masked text frame, "Hello") right behind it in the same
/// write, as a client that hopes for the upgrade sends it.
pub const UPGRADE_THEN_FRAME: &[u8] = b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58";

/// A server that does not upgrade ignores Upgrade (RFC 9110 §7.8): the GET,
/// which came first and is valid, is answered `200 Hello World` before
/// anything is done about the bytes after it (refused, or the connection
/// closed after the answer).
pub fn upgrade_request_then_other_bytes_is_answered(s: &Subject) {
    let mut c = Conn::connect(s.addr).unwrap();
    c.send(UPGRADE_THEN_FRAME).unwrap();
    let r = c
        .read_response(false)
        .expect("the GET before the new protocol's bytes is answered");
    assert_eq!((r.status, r.body_str().as_str()), (200, "Hello World"));
    // Then an error answer for the frame, or the close; never a hang.
    let rest = c
        .read_until_close(Duration::from_secs(30))
        .expect("closed after the bytes that are not HTTP");
    assert!(
        rest.iter().all(|r| r.status >= 400),
        "after the answer: {:?}",
        rest.iter().map(|r| r.status).collect::<Vec<_>>()
    );
}

pub fn sigterm_finishes_in_flight_and_exits_0(s: &Subject) {
    const TARGET: &str = "/sleep?ms=2000";
    let mut server = s.start_own(db::shared());
    let addr = server.addr;
    let mut c = Conn::connect(addr).unwrap();
    c.send_request("GET", TARGET).unwrap();
    // In flight means read by the server: wait for that state rather than
    // for a head start in time. A request not yet read could rightly be
    // dropped with the listening socket.
    let client_addr = c.local_addr().unwrap();
    wait_until_read(addr, client_addr, Duration::from_secs(30));
    assert!(
        !c.has_data(),
        "{TARGET} was answered before SIGTERM could be sent: nothing to test"
    );
    server.signal(libc::SIGTERM);
    let resp = c
        .read_response(false)
        .expect("the in-flight request is answered");
    check_response(
        &resp,
        &expect("GET", TARGET),
        "GET",
        &format!("{TARGET} during shutdown"),
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

/// Waits until the server end of the connection `server`↔`client` is
/// established and its receive queue is empty: the server process has read
/// everything the client sent. Panics after `within`.
///
/// Sound where a delay is not: on loopback the bytes reach the server's
/// socket at once, and its `rx_queue` in `/proc/net/tcp` (bytes received
/// but not yet read by the application) drops to 0 only when the server
/// reads them, however busy the machine is.
fn wait_until_read(server: SocketAddr, client: SocketAddr, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match unread_bytes(server, client) {
            Ok(Some(0)) => return,
            Ok(_) => {}
            Err(e) => panic!("cannot read the socket table: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "the server did not read the request within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The receive queue of the server's established socket for the connection
/// from `client`, per `/proc/net/tcp{,6}`; `None` while there is none.
fn unread_bytes(server: SocketAddr, client: SocketAddr) -> std::io::Result<Option<u64>> {
    let table = if server.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    let text = std::fs::read_to_string(table)?;
    Ok(text
        .lines()
        .skip(1)
        .find_map(|line| rx_queue(line, server.port(), client.port())))
}

/// From one line of `/proc/net/tcp`: the rx_queue of an ESTABLISHED socket
/// with this local and remote port.
fn rx_queue(line: &str, local_port: u16, remote_port: u16) -> Option<u64> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let port = |addr: &str| {
        addr.rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    const ESTABLISHED: &str = "01";
    if f.len() < 5 || port(f[1])? != local_port || port(f[2])? != remote_port || f[3] != ESTABLISHED
    {
        return None;
    }
    u64::from_str_radix(f[4].split_once(':')?.1, 16).ok()
}

/// Generates the contract's `#[test]`s for a server binary: one that runs
/// every row of [`workloads::contract`], and the tests that are not rows
/// (`/config`'s Rust-only fields, a stalled request, the database down,
/// SIGTERM):
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
                every_row, config_reports_workers_and_db_pool, stalled_request_is_dropped,
                database_down_is_503_then_recovers, sigterm_finishes_in_flight_and_exits_0,
                head_error_answers_have_no_content, upgrade_request_then_other_bytes_is_answered,
                websocket_rows
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// Answers every request on a connection with `200 Hello World`, then closes.
    fn hello_everywhere() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = conn.read(&mut [0u8; 64 * 1024]);
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nServer: t\r\nDate: Mon, 30 Nov 2026 01:57:30 GMT\r\n\
                          Content-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\n\
                          Hello World",
                    );
                });
            }
        });
        addr
    }

    #[test]
    fn a_failing_row_fails_with_its_name_why_and_answer() {
        let subject = Subject {
            bin: "unused",
            args: &[],
            addr: hello_everywhere(),
        };
        let panic = std::panic::catch_unwind(|| every_row(&subject)).unwrap_err();
        let msg = panic.downcast_ref::<String>().expect("a formatted message");
        assert!(
            msg.contains(
                "GET /nope: status 200, expected 404\n    why:  only the contract's paths exist"
            ),
            "{msg}"
        );
        assert!(msg.contains("\n    got:  200 "), "{msg}");
        assert!(
            !msg.contains("\nGET /hello:"),
            "GET /hello is answered right: {msg}"
        );
    }

    #[test]
    fn parses_a_proc_net_tcp_line() {
        let line = "   3: 0100007F:1F90 0100007F:C350 01 00000000:0000001A 00:00000000 00000000  1000        0 12345 1 0000000000000000 20 4 30 10 -1";
        assert_eq!(rx_queue(line, 0x1F90, 0xC350), Some(26));
        assert_eq!(rx_queue(line, 0xC350, 0x1F90), None, "the other end");
        let listening = line.replace(" 01 ", " 0A ");
        assert_eq!(rx_queue(&listening, 0x1F90, 0xC350), None);
    }

    #[test]
    fn unread_bytes_drop_to_zero_when_the_server_reads() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(server).unwrap();
        let client_addr = client.local_addr().unwrap();
        client.write_all(b"0123456789").unwrap();
        // Not accepted, not read: the bytes wait in the server's socket.
        let deadline = Instant::now() + Duration::from_secs(10);
        while unread_bytes(server, client_addr).unwrap() != Some(10) {
            assert!(Instant::now() < deadline, "the 10 bytes never showed");
            std::thread::sleep(Duration::from_millis(5));
        }
        let (mut accepted, _) = listener.accept().unwrap();
        assert_eq!(unread_bytes(server, client_addr).unwrap(), Some(10));
        accepted.read_exact(&mut [0u8; 10]).unwrap();
        assert_eq!(unread_bytes(server, client_addr).unwrap(), Some(0));
        wait_until_read(server, client_addr, Duration::from_secs(1));
    }
}
