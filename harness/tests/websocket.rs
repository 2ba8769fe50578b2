//! `harness run ws://` and `wss://` against real servers: the three
//! reference servers echo on `/ws`; every echo is compared byte for byte
//! with the message sent, on both I/O backends, binary and text, small and
//! large, several in flight, closed and open loop. A tiny server of this
//! file misbehaves on purpose: one answers the upgrade with a wrong
//! `Sec-WebSocket-Accept` (every message fails as a handshake failure), one
//! flips a byte of every echo (every message fails as a wrong body).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use labcert::LabCert;
use serde_json::Value;
use testkit::ServerProcess;

use crate::util::{harness, reference_server, sibling_binary};

/// `harness run URL ARGS --format json`, its document checked against
/// the schema.
fn run_json(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["run", url, "--format", "json"];
    all.extend_from_slice(args);
    let out = harness(&all);
    // A run with failures exits 1 after its report.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let value: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("the document does not match run.schema.json: {e}\n{text}");
    }
    value
}

fn ok(v: &Value) -> u64 {
    v["requests"]["ok"].as_u64().unwrap()
}

fn every_reference_server_echoes_every_message(io: &str) {
    for name in ["event-loop", "coroutine", "worker-pool"] {
        let server = reference_server(name, None);
        let url = format!("ws://{}/ws", server.addr);
        for (size, extra) in [("64", &[][..]), ("20000", &["--ws-text"][..])] {
            let mut args = vec!["-c", "4", "-n", "2000", "--pipeline", "8", "--io", io];
            args.extend_from_slice(&["--ws-size", size]);
            args.extend_from_slice(extra);
            let v = run_json(&url, &args);
            assert_eq!(ok(&v), 2000, "{name} {size}: {v}");
            assert_eq!(v["settings"]["protocol"], "websocket");
            assert_eq!(v["settings"]["pipeline"], 8);
            assert_eq!(
                v["settings"]["ws_message_bytes"],
                size.parse::<u64>().unwrap()
            );
            // One upgrade per connection, for the whole run.
            assert_eq!(v["connections"]["opened"], 4, "{name}: {v}");
        }
    }
}

/// Node.js (`ws`) echoes every message too.
#[test]
fn node_echoes_every_message() {
    let Some(node) = crate::pipeline::node() else {
        return;
    };
    let url = format!("ws://{}/ws", node.addr);
    for io in ["epoll", "uring"] {
        let v = run_json(
            &url,
            &["-c", "4", "-n", "2000", "--pipeline", "8", "--io", io],
        );
        assert_eq!(ok(&v), 2000, "{io}: {v}");
    }
}

/// Open loop: the rate is kept, each message timed from its intended send.
fn messages_keep_an_open_loop_rate(io: &str) {
    let server = reference_server("event-loop", None);
    let url = format!("ws://{}/ws", server.addr);
    let v = run_json(
        &url,
        &[
            "-c",
            "2",
            "-n",
            "400",
            "--rate",
            "2000",
            "--pipeline",
            "4",
            "--io",
            io,
        ],
    );
    assert_eq!(ok(&v), 400, "{v}");
    assert_eq!(v["outcome"]["latency_corrected"], true);
}

fn wss_goes_through_the_tls_transport(io: &str) {
    let lab = LabCert::new().unwrap();
    for name in ["event-loop", "coroutine"] {
        let server = reference_server(name, Some(&lab));
        let url = format!("wss://{}/ws", server.addr);
        let ca = lab.ca_path();
        let v = run_json(
            &url,
            &[
                "-c",
                "3",
                "-n",
                "900",
                "--pipeline",
                "4",
                "--io",
                io,
                "--cacert",
                ca.to_str().unwrap(),
            ],
        );
        assert_eq!(ok(&v), 900, "{name}: {v}");
    }
}

/// How the tiny WebSocket server misbehaves.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Answers the upgrade with an accept for another key.
    WrongAccept,
    /// Echoes every message with its first byte flipped.
    FlipByte,
}

struct Tiny {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Tiny {
    fn start(how: Misbehaviour) -> Tiny {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let s = s.clone();
                        std::thread::spawn(move || serve(stream, how, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Tiny {
            addr,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for Tiny {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// Reads exactly `n` bytes, or none if the peer or the test is gone.
fn read_exact(stream: &mut TcpStream, n: usize, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut got = 0;
    while got < n {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match stream.read(&mut buf[got..]) {
            Ok(0) => return None,
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return None,
        }
    }
    Some(buf)
}

fn serve(mut stream: TcpStream, how: Misbehaviour, stop: &AtomicBool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let Some(b) = read_exact(&mut stream, 1, stop) else {
            return;
        };
        head.extend_from_slice(&b);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap_or("")
        .trim()
        .to_string();
    let accept = match how {
        Misbehaviour::WrongAccept => workloads::ws::accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        Misbehaviour::FlipByte => workloads::ws::accept_key(key.as_bytes()),
    };
    if stream
        .write_all(workloads::ws::switching_protocols(&accept).as_bytes())
        .is_err()
    {
        return;
    }
    loop {
        let Some(h) = read_exact(&mut stream, 2, stop) else {
            return;
        };
        let len = match h[1] & 0x7f {
            126 => {
                let Some(l) = read_exact(&mut stream, 2, stop) else {
                    return;
                };
                usize::from(u16::from_be_bytes([l[0], l[1]]))
            }
            127 => return,
            n => usize::from(n),
        };
        let Some(key) = read_exact(&mut stream, 4, stop) else {
            return;
        };
        let Some(mut payload) = read_exact(&mut stream, len, stop) else {
            return;
        };
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= key[i & 3];
        }
        if let Some(first) = payload.first_mut() {
            *first ^= 0x20;
        }
        let mut frame = vec![h[0]];
        if len < 126 {
            frame.push(len as u8);
        } else {
            frame.push(126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        frame.extend_from_slice(&payload);
        if stream.write_all(&frame).is_err() {
            return;
        }
    }
}

fn a_wrong_accept_and_a_changed_echo_are_caught(io: &str) {
    let tiny = Tiny::start(Misbehaviour::WrongAccept);
    let url = format!("ws://{}/ws", tiny.addr);
    let v = run_json(
        &url,
        &["-c", "2", "-n", "50", "--io", io, "--pipeline", "2"],
    );
    assert_eq!(ok(&v), 0, "{v}");
    assert_eq!(v["failures"]["handshake"], 50, "{v}");

    let tiny = Tiny::start(Misbehaviour::FlipByte);
    let url = format!("ws://{}/ws", tiny.addr);
    let v = run_json(
        &url,
        &["-c", "2", "-n", "200", "--io", io, "--pipeline", "4"],
    );
    assert_eq!(ok(&v), 0, "{v}");
    assert_eq!(v["failures"]["body"], 200, "{v}");
    // --no-verify: the echo's bytes are not compared, only that it came.
    let v = run_json(&url, &["-c", "2", "-n", "200", "--io", io, "--no-verify"]);
    assert_eq!(ok(&v), 200, "{v}");
}

mod epoll {
    #[test]
    fn every_reference_server_echoes_every_message() {
        super::every_reference_server_echoes_every_message("epoll")
    }
    #[test]
    fn messages_keep_an_open_loop_rate() {
        super::messages_keep_an_open_loop_rate("epoll")
    }
    #[test]
    fn wss_goes_through_the_tls_transport() {
        super::wss_goes_through_the_tls_transport("epoll")
    }
    #[test]
    fn a_wrong_accept_and_a_changed_echo_are_caught() {
        super::a_wrong_accept_and_a_changed_echo_are_caught("epoll")
    }
}

mod uring {
    #[test]
    fn every_reference_server_echoes_every_message() {
        super::every_reference_server_echoes_every_message("uring")
    }
    #[test]
    fn messages_keep_an_open_loop_rate() {
        super::messages_keep_an_open_loop_rate("uring")
    }
    #[test]
    fn wss_goes_through_the_tls_transport() {
        super::wss_goes_through_the_tls_transport("uring")
    }
    #[test]
    fn a_wrong_accept_and_a_changed_echo_are_caught() {
        super::a_wrong_accept_and_a_changed_echo_are_caught("uring")
    }
}

/// `--hold`: connections upgraded and kept with a ping each interval. The
/// event loop holds all of them; a pool of two workers holds two (a worker
/// per connection for its life), the others waiting unanswered.
#[test]
fn hold_reports_the_connections_opened_and_still_up() {
    let server = reference_server("event-loop", None);
    let url = format!("ws://{}/ws", server.addr);
    let v = run_json(&url, &["-c", "20", "-d", "2s", "--hold", "500ms"]);
    assert_eq!(v["connections"]["held"]["opened"], 20, "{v}");
    assert_eq!(v["connections"]["held"]["stayed_up"], 20, "{v}");
    assert_eq!(v["requests"]["failed"], 0, "{v}");
    assert!(ok(&v) >= 20, "{v}");

    let bin = sibling_binary("worker-pool");
    let pool = ServerProcess::start(
        bin.to_str().unwrap(),
        &[
            "--workers",
            "2",
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:1/bench",
        ],
    );
    let url = format!("ws://{}/ws", pool.addr);
    // A timeout longer than the run: the waiting connections just wait.
    let v = run_json(
        &url,
        &["-c", "4", "-d", "2s", "--hold", "500ms", "--timeout", "30s"],
    );
    assert_eq!(v["connections"]["held"]["opened"], 2, "{v}");
    assert_eq!(v["connections"]["held"]["stayed_up"], 2, "{v}");
}

/// Flags of a WebSocket run refuse what does not apply, in one line.
#[test]
fn websocket_flags_refuse_what_does_not_apply() {
    for (args, says) in [
        (
            &["run", "http://127.0.0.1:1/hello", "--ws-size", "10"][..],
            "--ws-size, --ws-text and --hold are for ws://",
        ),
        (
            &["run", "ws://127.0.0.1:1/ws", "--ws-size", "70000"][..],
            "over the contract's",
        ),
        (
            &["run", "ws://127.0.0.1:1/ws", "--no-keepalive"][..],
            "drop --no-keepalive",
        ),
        (
            &["run", "ws://127.0.0.1:1/ws", "--body", "x"][..],
            "--path and --body do not apply",
        ),
    ] {
        let out = harness(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
