//! HTTP/1.1 pipelining (`--pipeline N`) against real servers: the three
//! reference servers and nginx answer every pipelined request, matched in
//! order and verified (a mix of two paths with different exact bodies, so a
//! response given to the wrong request fails its check), plain and over
//! TLS, on both I/O backends, closed and open loop. Two tiny servers of
//! this file misbehave on purpose: one answers each pair of pipelined
//! requests in swapped order (caught as wrong bodies), one closes the
//! connection with requests in flight (each counted failed once: the
//! totals add up to the requests sent, no more, no less).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::engine::{Check, Framing, Pace, Plan, Request, Route, Stop, TlsPlan};
use labcert::LabCert;
use serde_json::Value;

use crate::util::{
    harness, own_session, plan_on, reference_server, run, skip_without, stdout, two_path_plan,
};

fn every_reference_server_answers_pipelined_requests_in_order(io: harness::engine::Io) {
    for name in ["event-loop", "coroutine", "worker-pool"] {
        let server = reference_server(name, None);
        let url = format!("http://{}", server.addr);
        let r = run(&two_path_plan(io, &url, Framing::pipelined(16), 3_000));
        assert_eq!(r.stats.ok, 3_000, "{name}: {:?}", r.stats.failures);
        assert_eq!(r.stats.failures.total(), 0, "{name}");
        assert!(r.stats.paths.iter().all(|p| p.ok > 1_000), "{name}");
        // Pipelined: the connections opened are the plan's, not one per batch.
        assert_eq!(r.stats.connections, 4, "{name}");
    }
}

fn pipelining_over_tls_is_verified(io: harness::engine::Io) {
    let lab = LabCert::new().unwrap();
    let server = reference_server("event-loop", Some(&lab));
    let url = format!("https://{}", server.addr);
    let mut p = two_path_plan(io, &url, Framing::pipelined(8), 2_000);
    let mut t = TlsPlan::new("127.0.0.1");
    t.trust = TlsPlan::cas_from_file(&lab.ca_path()).unwrap();
    p.transport = harness::engine::TransportPlan::Tls(t);
    let r = run(&p);
    assert_eq!(
        r.stats.ok, 2_000,
        "{:?} {:?}",
        r.stats.failures, r.stats.tls_error
    );
    assert_eq!(r.stats.handshakes_full + r.stats.handshakes_resumed, 4);
}

/// Open loop: every request is timed from its intended send, and the rate
/// is kept with several requests in flight per connection.
fn pipelining_keeps_an_open_loop_rate(io: harness::engine::Io) {
    let server = reference_server("event-loop", None);
    let url = format!("http://{}", server.addr);
    let mut p = two_path_plan(io, &url, Framing::pipelined(4), 600);
    p.pace = Pace::Rate(2_000.0);
    p.connections = 2;
    let r = run(&p);
    assert_eq!(r.stats.ok, 600, "{:?}", r.stats.failures);
    assert!(r.latency_corrected());
    assert_eq!(r.stats.connections, 2);
}

/// How a tiny server of this file misbehaves.
#[derive(Clone, Copy)]
enum Misbehaviour {
    /// Answers each pair of requests in swapped order.
    Swap,
    /// Closes the connection instead of answering every `n`th request
    /// (counted over the server), unanswered requests still in flight.
    CloseAt(u64),
    /// Spoils every `n`th answer (counted over the server), in turn with a
    /// wrong body of the right length under the usual head, and with the
    /// right body under status 500.
    Spoil(u64),
}

/// A server answering `GET /a` with `a` and `GET /b` with `b`, misbehaving
/// in one way; counts the responses it wrote.
struct Tiny {
    addr: SocketAddr,
    answered: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Tiny {
    fn start(how: Misbehaviour) -> Tiny {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let answered = Arc::new(AtomicU64::new(0));
        let received = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (answered.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (a, r, s) = (a.clone(), received.clone(), s.clone());
                        std::thread::spawn(move || serve(stream, how, &a, &r, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        Tiny {
            addr,
            answered,
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

fn serve(
    mut stream: TcpStream,
    how: Misbehaviour,
    answered: &AtomicU64,
    received: &AtomicU64,
    stop: &AtomicBool,
) {
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut pending: Vec<String> = Vec::new();
    let answer = |stream: &mut TcpStream, path: &str| {
        let n = answered.fetch_add(1, Ordering::SeqCst) + 1;
        let mut body = path.trim_start_matches('/');
        let mut status = 200;
        if let Misbehaviour::Spoil(every) = how {
            if n.is_multiple_of(every) && (n / every).is_multiple_of(2) {
                status = 500;
            } else if n.is_multiple_of(every) {
                body = if body == "a" { "b" } else { "a" };
            }
        }
        let r = format!(
            "HTTP/1.1 {status} OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(r.as_bytes()).is_ok()
    };
    while !stop.load(Ordering::Relaxed) {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let path = head.split(' ').nth(1).unwrap_or("/").to_string();
            let n = received.fetch_add(1, Ordering::SeqCst) + 1;
            match how {
                Misbehaviour::CloseAt(every) if n.is_multiple_of(every) => {
                    // A FIN, not a reset (which a close with requests still
                    // unread would send, and which can discard answers the
                    // client has not read yet): what was answered arrives.
                    let _ = stream.shutdown(std::net::Shutdown::Write);
                    while !stop.load(Ordering::Relaxed) {
                        match stream.read(&mut chunk) {
                            Ok(0) => return,
                            Err(e)
                                if !matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) =>
                            {
                                return
                            }
                            _ => {}
                        }
                    }
                    return;
                }
                Misbehaviour::CloseAt(_) | Misbehaviour::Spoil(_) => {
                    if !answer(&mut stream, &path) {
                        return;
                    }
                }
                Misbehaviour::Swap => pending.push(path),
            }
        }
        if pending.len() >= 2 {
            let (first, second) = (pending.remove(0), pending.remove(0));
            if !answer(&mut stream, &second) || !answer(&mut stream, &first) {
                return;
            }
            continue;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // Nothing more came: a lone request is answered as it is.
                if let Some(path) = pending.pop() {
                    if !answer(&mut stream, &path) {
                        return;
                    }
                }
            }
            Err(_) => return,
        }
    }
}

/// A plan of `/a` and `/b` (1:1), each checked for its own body.
fn tiny_plan(io: harness::engine::Io, tiny: &Tiny, depth: u16, n: u64) -> Plan {
    let authority = tiny.addr.to_string();
    let route = |path: &str| {
        Route::new(
            Request::encode("GET", path, &authority, &[], true),
            Check::Exact {
                status: 200,
                body: Arc::from(path.trim_start_matches('/').as_bytes()),
            },
            1,
        )
    };
    plan_on(io, &format!("http://{authority}"), |p| {
        p.mix = vec![route("/a"), route("/b")];
        p.proto = harness::engine::ProtoPlan::http1(depth, true);
        p.connections = 2;
        p.stop = Stop::Count(n);
        p.timeout = Duration::from_secs(5);
    })
}

fn a_server_answering_out_of_order_is_caught(io: harness::engine::Io) {
    let tiny = Tiny::start(Misbehaviour::Swap);
    let r = run(&tiny_plan(io, &tiny, 8, 400));
    assert_eq!(r.stats.requests(), 400);
    // Each swapped pair is two wrong bodies; only a lone request (the
    // server saw no second one) can be right.
    assert!(
        r.stats.failures.body >= 300,
        "swapped answers went unnoticed: {:?}, ok {}",
        r.stats.failures,
        r.stats.ok
    );
    assert_eq!(r.stats.failures.body + r.stats.ok, 400);
}

fn a_server_dropping_responses_fails_each_request_in_flight_once(io: harness::engine::Io) {
    let tiny = Tiny::start(Misbehaviour::CloseAt(50));
    let r = run(&tiny_plan(io, &tiny, 8, 1_000));
    // Every request is counted once: answered ones are ok, the others
    // (the dropped one, and those in flight behind it) failed.
    assert_eq!(r.stats.requests(), 1_000, "{:?}", r.stats.failures);
    assert_eq!(r.stats.ok, tiny.answered.load(Ordering::SeqCst));
    assert!(r.stats.failures.receive >= 10, "{:?}", r.stats.failures);
    assert_eq!(r.stats.failures.total(), r.stats.failures.receive);
    assert_eq!(r.stats.ok + r.stats.failures.receive, 1_000);
}

/// A spoiled answer amid a pipelined batch fails alone, as what it is: a
/// wrong body under a head identical to the others' (which the engine
/// reads from its memo of the last head, `proto::h1`), a wrong status
/// under a head that differs from it by one byte. The answers around it
/// pass.
fn a_spoiled_answer_amid_a_batch_fails_alone(io: harness::engine::Io) {
    let tiny = Tiny::start(Misbehaviour::Spoil(7));
    let r = run(&tiny_plan(io, &tiny, 16, 1_400));
    assert_eq!(r.stats.requests(), 1_400, "{:?}", r.stats.failures);
    assert_eq!(tiny.answered.load(Ordering::SeqCst), 1_400);
    assert_eq!(r.stats.failures.body, 100, "{:?}", r.stats.failures);
    assert_eq!(r.stats.failures.status, 100, "{:?}", r.stats.failures);
    assert_eq!(r.stats.failures.total(), 200, "{:?}", r.stats.failures);
    assert_eq!(r.stats.ok, 1_200);
}

crate::on_both_backends!(
    a_spoiled_answer_amid_a_batch_fails_alone,
    every_reference_server_answers_pipelined_requests_in_order,
    pipelining_over_tls_is_verified,
    pipelining_keeps_an_open_loop_rate,
    a_server_answering_out_of_order_is_caught,
    a_server_dropping_responses_fails_each_request_in_flight_once,
    node_answers_pipelined_requests_in_order,
);

/// nginx answers pipelined requests in order (`/hello` and a 404 with its
/// own body), through `harness run --pipeline`, whose JSON records the
/// protocol and depth and matches its schema.
#[test]
fn nginx_is_loaded_pipelined_through_the_cli() {
    let Some(nginx) = crate::util::nginx_or_skip() else {
        return;
    };
    let dir = crate::util::tmp("pipeline-nginx");
    let prefix = dir.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let conf = harness::catalog::nginx_static::config(&prefix, &listen, 1, "nginx");
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new(nginx);
    cmd.args(["-p", &prefix, "-c", &format!("{prefix}/nginx.conf")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let _stop = scopeguard(move || {
        // SAFETY: our own child (nginx's master), by its PID.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&listen).is_err() {
        assert!(Instant::now() < deadline, "nginx did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{listen}/hello");
    let text = stdout(&harness(&[
        "run",
        &url,
        "-n",
        "3000",
        "-c",
        "4",
        "--pipeline",
        "16",
    ]));
    assert!(text.contains("ok 3,000 (100.00%)"), "{text}");
    assert!(text.contains("HTTP/1.1 pipelined 16 deep"), "{text}");
    let json = stdout(&harness(&[
        "run",
        &url,
        "-n",
        "500",
        "-c",
        "2",
        "--pipeline",
        "8",
        "--format",
        "json",
    ]));
    let value: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        value["settings"]["protocol"], "http/1.1-pipelined",
        "{json}"
    );
    assert_eq!(value["settings"]["pipeline"], 8, "{json}");
    assert_eq!(value["requests"]["ok"], 500, "{json}");
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("the document does not match run.schema.json: {e}\n{json}");
    }
    let plain = stdout(&harness(&["run", &url, "-n", "10", "--format", "json"]));
    let plain: Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(plain["settings"]["protocol"], "http/1.1");
    assert_eq!(plain["settings"]["pipeline"], 1);
    let out = harness(&["run", &url, "-n", "10", "--pipeline", "4", "--no-keepalive"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--pipeline needs kept-alive"), "{err}");
}

/// Runs `f` when dropped (on every exit path of a test).
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// Node.js (`compose/node/server.js`, plain `http` and `ws`), started on a
/// free port of 127.0.0.1 and killed by its PID when dropped; `None` (the
/// test skipped) where node or the app's packages are missing.
pub(crate) struct Node {
    pub addr: String,
    child: std::process::Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn node() -> Option<Node> {
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compose/node");
    if Command::new("node").arg("--version").output().is_err() {
        skip_without("node is not installed (scripts/install-deps)");
        return None;
    }
    if !app.join("node_modules").is_dir() {
        skip_without("compose/node has no node_modules: (cd compose/node && npm ci)");
        return None;
    }
    let mut child = Command::new("node")
        .arg("server.js")
        .current_dir(&app)
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("DB_PORT", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("node said {line:?}"))
        .to_string();
    Some(Node { addr, child })
}

fn node_answers_pipelined_requests_in_order(io: harness::engine::Io) {
    let Some(node) = node() else {
        return;
    };
    let r = run(&two_path_plan(
        io,
        &format!("http://{}", node.addr),
        Framing::pipelined(16),
        2_000,
    ));
    assert_eq!(r.stats.ok, 2_000, "{:?}", r.stats.failures);
    assert_eq!(r.stats.connections, 4);
}
