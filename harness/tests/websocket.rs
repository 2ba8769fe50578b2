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
    // The worker pool's 20 workers hold the 3 connections, one each.
    for name in ["event-loop", "coroutine", "worker-pool"] {
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

/// A tiny WebSocket server of this file, each connection served by
/// `serve` on a thread of its own, until the test drops it.
struct TinyServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

type Serve = Arc<dyn Fn(TcpStream, &AtomicBool) + Send + Sync>;

impl TinyServer {
    fn start(serve: Serve) -> TinyServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (s, serve) = (s.clone(), serve.clone());
                        std::thread::spawn(move || {
                            stream
                                .set_read_timeout(Some(Duration::from_millis(20)))
                                .unwrap();
                            serve(stream, &s)
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        TinyServer {
            addr,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for TinyServer {
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

/// The upgrade request's head, read to its end: its `Sec-WebSocket-Key`.
fn read_upgrade(stream: &mut TcpStream, stop: &AtomicBool) -> Option<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.extend_from_slice(&read_exact(stream, 1, stop)?);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    Some(
        text.lines()
            .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
            .unwrap_or("")
            .trim()
            .to_string(),
    )
}

/// A client's frame (the engine's are under 64 KiB): its first byte (FIN
/// and opcode) and its payload, unmasked.
fn read_client_frame(stream: &mut TcpStream, stop: &AtomicBool) -> Option<(u8, Vec<u8>)> {
    let h = read_exact(stream, 2, stop)?;
    let len = match h[1] & 0x7f {
        126 => {
            let l = read_exact(stream, 2, stop)?;
            usize::from(u16::from_be_bytes([l[0], l[1]]))
        }
        127 => return None,
        n => usize::from(n),
    };
    let mask = read_exact(stream, 4, stop)?;
    let mut payload = read_exact(stream, len, stop)?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
    Some((h[0], payload))
}

/// A server's frame (unmasked) of `payload`, under 64 KiB.
fn server_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![first];
    if payload.len() < 126 {
        frame.push(payload.len() as u8);
    } else {
        frame.push(126);
        frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    frame.extend_from_slice(payload);
    frame
}

fn serve(mut stream: TcpStream, how: Misbehaviour, stop: &AtomicBool) {
    let Some(key) = read_upgrade(&mut stream, stop) else {
        return;
    };
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
    while let Some((first, mut payload)) = read_client_frame(&mut stream, stop) {
        if let Some(b) = payload.first_mut() {
            *b ^= 0x20;
        }
        if stream.write_all(&server_frame(first, &payload)).is_err() {
            return;
        }
    }
}

/// A server that misbehaves as `how` says.
fn misbehaving(how: Misbehaviour) -> TinyServer {
    TinyServer::start(Arc::new(move |s, stop| serve(s, how, stop)))
}

fn a_wrong_accept_and_a_changed_echo_are_caught(io: &str) {
    let tiny = misbehaving(Misbehaviour::WrongAccept);
    let url = format!("ws://{}/ws", tiny.addr);
    let v = run_json(
        &url,
        &["-c", "2", "-n", "50", "--io", io, "--pipeline", "2"],
    );
    assert_eq!(ok(&v), 0, "{v}");
    assert_eq!(v["failures"]["handshake"], 50, "{v}");

    let tiny = misbehaving(Misbehaviour::FlipByte);
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
    assert_eq!(v["status_codes"]["101"], 20, "{v}");
    // Upgraded in the warm-up, held through the measured time: opened.
    let v = run_json(
        &url,
        &["-c", "5", "-d", "1s", "--warmup", "1s", "--hold", "200ms"],
    );
    assert_eq!(v["connections"]["held"]["opened"], 5, "{v}");
    assert_eq!(v["connections"]["held"]["stayed_up"], 5, "{v}");
    assert_eq!(v["requests"]["failed"], 0, "{v}");
    assert!(ok(&v) >= 20, "{v}");

    let pool = two_worker_pool(&[]);
    let url = format!("ws://{}/ws", pool.addr);
    // A timeout longer than the run: the waiting connections just wait. A
    // thread per connection: a thread that closed its held connections at
    // its end freed a worker for a waiting one whose thread had not ended,
    // which counted a third connection opened (2 in 15 runs here, loaded).
    let v = run_json(
        &url,
        &[
            "-c",
            "4",
            "--threads",
            "4",
            "-d",
            "2s",
            "--hold",
            "500ms",
            "--timeout",
            "30s",
        ],
    );
    assert_eq!(v["connections"]["held"]["opened"], 2, "{v}");
    assert_eq!(v["connections"]["held"]["stayed_up"], 2, "{v}");
}

/// A worker pool of two workers (a WebSocket holds one each), `extra`
/// its other flags; /ws needs no database.
fn two_worker_pool(extra: &[&str]) -> ServerProcess {
    let bin = sibling_binary("worker-pool");
    let mut args = vec![
        "--workers",
        "2",
        "--mysql-url",
        "mysql://bench:bench@127.0.0.1:1/bench",
    ];
    args.extend_from_slice(extra);
    ServerProcess::start(bin.to_str().unwrap(), &args)
}

/// An upgrade refused with a status is a failure by status, and its
/// status is counted beside the `101`s: a worker pool with no queue
/// answers `503` to every handshake beyond its two workers.
#[test]
fn a_refused_upgrade_is_counted_with_its_status() {
    let pool = two_worker_pool(&["--queue", "0"]);
    let url = format!("ws://{}/ws", pool.addr);
    let v = run_json(
        &url,
        &["-c", "4", "-d", "1s", "--hold", "200ms", "--timeout", "30s"],
    );
    assert_eq!(v["connections"]["held"]["opened"], 2, "{v}");
    assert_eq!(v["status_codes"]["101"], 2, "{v}");
    let refused = v["status_codes"]["503"].as_u64().unwrap_or(0);
    assert!(refused > 0, "{v}");
    // One message in flight per connection (a hold's ping): a failure each.
    assert_eq!(v["failures"]["status"].as_u64(), Some(refused), "{v}");
}

/// Flags of a WebSocket run refuse what does not apply, in one line.
#[test]
fn websocket_flags_refuse_what_does_not_apply() {
    for (args, says) in [
        (
            &["run", "http://127.0.0.1:1/hello", "--ws-size", "10"][..],
            "--ws-size, --ws-text, --hold and --room are for ws://",
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
        (
            &["run", "ws://127.0.0.1:1/ws/room", "--room"][..],
            "give it one, e.g. ws://127.0.0.1:1/ws/room?name=lab",
        ),
        (
            &[
                "run",
                "ws://127.0.0.1:1/ws/room?name=r",
                "--room",
                "-c",
                "10",
                "--room-size",
                "4",
            ][..],
            "not a whole number of rooms",
        ),
        (
            &[
                "run",
                "ws://127.0.0.1:1/ws/room?name=r",
                "--room",
                "--ws-size",
                "10",
            ][..],
            "24-byte header",
        ),
        (
            &[
                "run",
                "ws://127.0.0.1:1/ws/room?name=r",
                "--room",
                "--hold",
                "1s",
            ][..],
            "--hold and --room are different runs",
        ),
    ] {
        let out = harness(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Room fan-out (`--room`): every message reaches every member of its
/// room; `-n` messages in rooms of K make exactly n × K deliveries, each
/// checked (bytes, its sender's order, the room's one order) and ok.
fn check_room_run(url: &str, io: &str, rooms: u64, k: u64, n: u64, extra: &[&str]) {
    let c = (rooms * k).to_string();
    let (k_s, n_s) = (k.to_string(), n.to_string());
    let mut args = vec![
        "-c",
        &c,
        "--room",
        "--room-size",
        &k_s,
        "-n",
        &n_s,
        "--io",
        io,
    ];
    args.extend_from_slice(extra);
    let v = run_json(url, &args);
    assert_eq!(v["requests"]["failed"], 0, "{url}: {v}");
    assert_eq!(ok(&v), n * k, "{url}: {v}");
    let room = &v["room"];
    assert_eq!(room["rooms"], rooms, "{v}");
    assert_eq!(room["members"], k, "{v}");
    assert_eq!(room["messages_sent"], n, "{v}");
    assert_eq!(room["messages_complete"], n, "{v}");
    assert_eq!(room["deliveries"], n * k, "{v}");
    assert_eq!(v["connections"]["opened"], rooms * k, "{v}");
}

fn every_room_server_delivers_every_message_to_every_member(io: &str) {
    for name in ["event-loop", "coroutine", "worker-pool"] {
        let server = reference_server(name, None);
        let url = format!("ws://{}/ws/room?name=t", server.addr);
        check_room_run(&url, io, 2, 4, 400, &["--pipeline", "4"]);
        check_room_run(&url, io, 1, 3, 150, &["--ws-text", "--ws-size", "3000"]);
    }
    if let Some(node) = crate::pipeline::node() {
        let url = format!("ws://{}/ws/room?name=t", node.addr);
        check_room_run(&url, io, 2, 4, 400, &["--pipeline", "4"]);
    }
}

/// Open loop: each delivery timed from its message's intended send.
fn room_messages_keep_an_open_loop_rate(io: &str) {
    let server = reference_server("event-loop", None);
    let url = format!("ws://{}/ws/room?name=t", server.addr);
    check_room_run(&url, io, 2, 3, 300, &["--rate", "1000", "--pipeline", "4"]);
}

/// A `wss://` room on the worker pool: its members' workers poll the
/// socket under a TLS session (input the session took in while writing
/// must not wait for the next poll), and still every message reaches every
/// member; 8 members hold 8 of its 20 workers.
fn a_wss_room_on_the_worker_pool_delivers_every_message(io: &str) {
    let lab = LabCert::new().unwrap();
    let server = reference_server("worker-pool", Some(&lab));
    let url = format!("wss://{}/ws/room?name=t", server.addr);
    let ca = lab.ca_path();
    let tls = ["--cacert", ca.to_str().unwrap()];
    check_room_run(
        &url,
        io,
        2,
        4,
        400,
        &[&tls[..], &["--pipeline", "4"]].concat(),
    );
    check_room_run(
        &url,
        io,
        1,
        3,
        150,
        &[&tls[..], &["--ws-text", "--ws-size", "3000"]].concat(),
    );
    // Each message four 16 KiB TLS records, for every member.
    check_room_run(
        &url,
        io,
        1,
        4,
        100,
        &[&tls[..], &["--ws-size", "60000"]].concat(),
    );
}

/// How the tiny room server misbehaves towards its first member.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RoomFault {
    /// Every fifth message of the room never reaches it.
    Drop,
    /// It gets each pair of messages in the other order.
    Swap,
    /// Like `Swap`, but only when the two come from different members:
    /// each sender's order is kept, the room's one order is not.
    Interleave,
}

#[derive(Default)]
struct Hub {
    members: Vec<TcpStream>,
    count: u64,
    /// A frame held back from member 0, and who sent it.
    held: Option<(usize, Vec<u8>)>,
}

/// A room server of one room, every connection a member, faulty as `fault`.
fn tiny_room(fault: RoomFault) -> TinyServer {
    let hub = Arc::new(std::sync::Mutex::new(Hub::default()));
    TinyServer::start(Arc::new(move |s, stop| serve_room(s, fault, &hub, stop)))
}

fn serve_room(
    mut stream: TcpStream,
    fault: RoomFault,
    hub: &std::sync::Mutex<Hub>,
    stop: &AtomicBool,
) {
    let Some(key) = read_upgrade(&mut stream, stop) else {
        return;
    };
    let accept = workloads::ws::accept_key(key.as_bytes());
    let me = {
        let mut hub = hub.lock().unwrap();
        hub.members.push(stream.try_clone().unwrap());
        hub.members.len() - 1
    };
    if stream
        .write_all(workloads::ws::switching_protocols(&accept).as_bytes())
        .is_err()
    {
        return;
    }
    while let Some((first, payload)) = read_client_frame(&mut stream, stop) {
        let frame = server_frame(first, &payload);
        let mut hub = hub.lock().unwrap();
        hub.count += 1;
        let count = hub.count;
        let hub = &mut *hub;
        for (m, member) in hub.members.iter_mut().enumerate() {
            if m != 0 {
                let _ = member.write_all(&frame);
                continue;
            }
            match fault {
                RoomFault::Drop if count.is_multiple_of(5) => {}
                RoomFault::Drop => {
                    let _ = member.write_all(&frame);
                }
                RoomFault::Swap | RoomFault::Interleave => match hub.held.take() {
                    None => hub.held = Some((me, frame.clone())),
                    Some((from, held)) if fault == RoomFault::Swap || from != me => {
                        let _ = member.write_all(&frame);
                        let _ = member.write_all(&held);
                    }
                    Some((_, held)) => {
                        let _ = member.write_all(&held);
                        hub.held = Some((me, frame.clone()));
                    }
                },
            }
        }
    }
}

/// `harness run --room` against a one-room server faulty as `fault`: `c`
/// members, `n` messages, 2 in flight, `timeout` per delivery.
fn run_faulty_room(fault: RoomFault, c: &str, n: &str, timeout: &str, io: &str) -> Value {
    let tiny = tiny_room(fault);
    let url = format!("ws://{}/ws/room?name=t", tiny.addr);
    let args = [
        "-c",
        c,
        "--room",
        "-n",
        n,
        "--pipeline",
        "2",
        "--timeout",
        timeout,
        "--io",
        io,
    ];
    run_json(&url, &args)
}

/// Where no delivery is lost, a timeout would only be the machine's load,
/// turning the order a case checks into a timeout.
const NO_LOSS_TIMEOUT: &str = "10s";

fn a_room_that_drops_or_reorders_is_caught(io: &str) {
    // A lost delivery fails as `order` when the sender's next message
    // arrives (or as a timeout at the end); every delivery is counted once.
    let v = run_faulty_room(RoomFault::Drop, "3", "300", "1s", io);
    let failed = v["requests"]["failed"].as_u64().unwrap();
    assert!(v["failures"]["order"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(ok(&v) + failed, 900, "{v}");
    assert!(ok(&v) < 900, "{v}");

    // One member alone, its own messages swapped: its sender's order.
    let v = run_faulty_room(RoomFault::Swap, "1", "100", NO_LOSS_TIMEOUT, io);
    assert!(v["failures"]["order"].as_u64().unwrap() >= 50, "{v}");
    assert!(ok(&v) <= 50, "{v}");

    // Each sender's order kept, the room's not: one member saw another
    // interleaving of three senders' messages than the others.
    let v = run_faulty_room(RoomFault::Interleave, "3", "300", NO_LOSS_TIMEOUT, io);
    assert_eq!(v["failures"]["order"], 0, "{v}");
    assert!(v["failures"]["interleave"].as_u64().unwrap() >= 1, "{v}");
}

mod room_epoll {
    #[test]
    fn every_room_server_delivers_every_message_to_every_member() {
        super::every_room_server_delivers_every_message_to_every_member("epoll")
    }
    #[test]
    fn room_messages_keep_an_open_loop_rate() {
        super::room_messages_keep_an_open_loop_rate("epoll")
    }
    #[test]
    fn a_room_that_drops_or_reorders_is_caught() {
        super::a_room_that_drops_or_reorders_is_caught("epoll")
    }
    #[test]
    fn a_wss_room_on_the_worker_pool_delivers_every_message() {
        super::a_wss_room_on_the_worker_pool_delivers_every_message("epoll")
    }
}

mod room_uring {
    #[test]
    fn every_room_server_delivers_every_message_to_every_member() {
        super::every_room_server_delivers_every_message_to_every_member("uring")
    }
    #[test]
    fn room_messages_keep_an_open_loop_rate() {
        super::room_messages_keep_an_open_loop_rate("uring")
    }
    #[test]
    fn a_room_that_drops_or_reorders_is_caught() {
        super::a_room_that_drops_or_reorders_is_caught("uring")
    }
    #[test]
    fn a_wss_room_on_the_worker_pool_delivers_every_message() {
        super::a_wss_room_on_the_worker_pool_delivers_every_message("uring")
    }
}
