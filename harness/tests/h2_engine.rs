//! The engine over HTTP/2 (`harness run --h2c`, `--h2`) against real
//! servers: the event-loop server (h2c by prior knowledge and h2 by ALPN,
//! on both I/O backends) and nginx (h2c on a port of its own, its
//! `http2_max_concurrent_streams` set below `--streams`) answer every
//! stream of a mix whose paths have different exact bodies, so a response
//! handed to the wrong stream fails its check. A tiny server of this file
//! speaks raw frames: it advertises a stream limit and records how many
//! streams were ever open at once, resets some streams and ends each
//! connection with a GOAWAY that leaves the streams above it unprocessed;
//! each is counted once, by kind, and the totals add up to the requests
//! sent.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::engine::{Framing, TlsPlan};
use labcert::LabCert;
use serde_json::Value;
use testkit::ServerProcess;

use crate::util::{
    harness, own_session, reference_server, run, sibling_binary, stdout, two_path_plan,
};

fn h2c_on_the_event_loop_verifies_every_stream(io: harness::engine::Io) {
    let server = reference_server("event-loop", None);
    let url = format!("http://{}", server.addr);
    for streams in [10, 100] {
        let r = run(&two_path_plan(io, &url, Framing::H2c(streams), 4_000));
        assert_eq!(r.stats.ok, 4_000, "{streams}: {:?}", r.stats.failures);
        assert_eq!(r.stats.failures.total(), 0, "{streams}");
        assert!(r.stats.paths.iter().all(|p| p.ok > 1_000), "{streams}");
        // Multiplexed: the plan's connections, none reopened.
        assert_eq!(r.stats.connections, 4, "{streams}");
    }
}

fn h2_over_tls_verifies_every_stream(io: harness::engine::Io) {
    let lab = LabCert::new().unwrap();
    let server = reference_server("event-loop", Some(&lab));
    let url = format!("https://{}", server.addr);
    let mut p = two_path_plan(io, &url, Framing::H2(50), 3_000);
    let mut t = TlsPlan::new("127.0.0.1");
    t.trust = TlsPlan::cas_from_file(&lab.ca_path()).unwrap();
    // No `t.h2`: the engine offers h2 by ALPN because the protocol is HTTP/2.
    p.transport = harness::engine::TransportPlan::Tls(t);
    let r = run(&p);
    assert_eq!(r.stats.ok, 3_000, "{:?} {:?}", r.stats.failures, r.message);
    assert_eq!(r.stats.failures.total(), 0);
    assert_eq!(r.stats.connections, 4);
    let tls = r.stats.tls.as_ref().expect("a handshake completed");
    assert_eq!(tls.alpn.as_deref(), Some("h2"));
}

/// The tiny server's stream limit, below the engine's `--streams`.
const LIMIT: usize = 4;

/// A raw-frame HTTP/2 server: SETTINGS_MAX_CONCURRENT_STREAMS = [`LIMIT`];
/// per read, the streams opened in it are answered (`:status 200`, body
/// `hi`) in reverse order, except that every seventh from the third is
/// reset (CANCEL); after its twelfth stream a connection sends GOAWAY
/// naming it as the last, and processes no stream above. `max_open`: the
/// most streams ever open at once on a connection.
fn goaway_server(max_open: Arc<AtomicUsize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let max_open = Arc::clone(&max_open);
            std::thread::spawn(move || serve_frames(stream, &max_open));
        }
    });
    addr
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

fn serve_frames(mut s: TcpStream, max_open: &AtomicUsize) {
    let mut preface = [0u8; 24];
    if s.read_exact(&mut preface).is_err() {
        return;
    }
    let mut out = Vec::new();
    let mut settings = Vec::new();
    settings.extend_from_slice(&3u16.to_be_bytes());
    settings.extend_from_slice(&(LIMIT as u32).to_be_bytes());
    frame(&mut out, 0x4, 0, 0, &settings);
    if s.write_all(&out).is_err() {
        return;
    }
    let (mut buf, mut have) = (vec![0u8; 1 << 16], Vec::new());
    let (mut opened, mut going_away) = (0usize, false);
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        have.extend_from_slice(&buf[..n]);
        let mut new_streams = Vec::new();
        let mut at = 0;
        while have.len() >= at + 9 {
            let len = u32::from_be_bytes([0, have[at], have[at + 1], have[at + 2]]) as usize;
            if have.len() < at + 9 + len {
                break;
            }
            let (kind, flags) = (have[at + 3], have[at + 4]);
            let id = u32::from_be_bytes(have[at + 5..at + 9].try_into().unwrap()) & 0x7fff_ffff;
            match kind {
                0x1 => new_streams.push(id),
                0x4 if flags & 1 == 0 => {
                    out.clear();
                    frame(&mut out, 0x4, 1, 0, &[]);
                    let _ = s.write_all(&out);
                }
                _ => {}
            }
            at += 9 + len;
        }
        have.drain(..at);
        max_open.fetch_max(new_streams.len(), Ordering::Relaxed);
        let mut answers: Vec<Vec<u8>> = Vec::new();
        let mut goaway = None;
        for id in new_streams {
            if going_away {
                continue; // above the GOAWAY's last stream: never processed
            }
            opened += 1;
            let mut a = Vec::new();
            if opened % 7 == 3 {
                frame(&mut a, 0x3, 0, id, &8u32.to_be_bytes());
            } else {
                frame(&mut a, 0x1, 0x4, id, &[0x88]);
                frame(&mut a, 0x0, 0x1, id, b"hi");
            }
            answers.push(a);
            if opened == 12 {
                going_away = true;
                let mut g = Vec::new();
                g.extend_from_slice(&id.to_be_bytes());
                g.extend_from_slice(&0u32.to_be_bytes());
                goaway = Some(g);
            }
        }
        out.clear();
        for a in answers.iter().rev() {
            out.extend_from_slice(a);
        }
        if let Some(g) = goaway {
            frame(&mut out, 0x7, 0, 0, &g);
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// Resets and GOAWAY's refusals are failures by kind, each request counted
/// once (ok + reset + goaway = the requests sent), in text and JSON; each
/// GOAWAY ends its connection (a new one carries on); the server's stream
/// limit, below `--streams 100`, is never exceeded.
#[test]
fn resets_and_goaway_are_counted_by_kind_and_the_stream_limit_holds() {
    let max_open = Arc::new(AtomicUsize::new(0));
    let addr = goaway_server(Arc::clone(&max_open));
    let url = format!("http://{addr}/x");
    let json = stdout(&harness(&[
        "run",
        &url,
        "--h2c",
        "-n",
        "300",
        "-c",
        "2",
        "--no-verify",
        "--format",
        "json",
    ]));
    let v: Value = serde_json::from_str(&json).unwrap();
    let (ok, failures) = (&v["requests"]["ok"], &v["failures"]);
    let (ok, reset, goaway) = (
        ok.as_u64().unwrap(),
        failures["reset"].as_u64().unwrap(),
        failures["goaway"].as_u64().unwrap(),
    );
    assert!(ok > 0 && reset > 0 && goaway > 0, "{json}");
    assert_eq!(ok + reset + goaway, 300, "{json}");
    assert_eq!(v["settings"]["protocol"], "h2c", "{json}");
    assert_eq!(v["settings"]["streams"], 100, "{json}");
    // Ten answers per connection: 300 requests took many connections.
    assert!(v["connections"]["opened"].as_u64().unwrap() >= 20, "{json}");
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &v, "$") {
        panic!("the document does not match run.schema.json: {e}\n{json}");
    }
    let open = max_open.load(Ordering::Relaxed);
    assert!((1..=LIMIT).contains(&open), "{open} streams open at once");
    let text = stdout(&harness(&[
        "run",
        &url,
        "--h2c",
        "-n",
        "100",
        "-c",
        "1",
        "--no-verify",
    ]));
    assert!(text.contains("reset "), "{text}");
    assert!(text.contains("goaway "), "{text}");
}

/// nginx with `http2_max_concurrent_streams 8`, loaded with `--streams
/// 100` on its h2c port: every response verified, none refused (had the
/// engine opened a ninth stream, nginx would have reset it).
#[test]
fn nginx_h2c_respects_its_stream_limit() {
    let Some(nginx) = crate::util::nginx_or_skip() else {
        return;
    };
    let dir = crate::util::tmp("h2c-nginx");
    let prefix = dir.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
    let port = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (listen, h2c) = (
        format!("127.0.0.1:{}", port()),
        format!("127.0.0.1:{}", port()),
    );
    let conf = harness::catalog::nginx_static::config_h2c(&prefix, &listen, &h2c, 1, "nginx");
    let conf = conf.replacen("http {", "http {\n    http2_max_concurrent_streams 8;", 1);
    assert!(conf.contains("http2_max_concurrent_streams 8;"), "{conf}");
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new(nginx);
    cmd.args(["-p", &prefix, "-c", &format!("{prefix}/nginx.conf")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    own_session(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let _stop = OnDrop(Some(Box::new(move || {
        // SAFETY: our own child (nginx's master), by its PID.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let _ = child.wait();
    })));
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&h2c).is_err() {
        assert!(Instant::now() < deadline, "nginx did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{h2c}/hello");
    for io in ["epoll", "uring"] {
        let json = stdout(&harness(&[
            "run",
            &url,
            "--h2c",
            "--streams",
            "100",
            "-n",
            "3000",
            "-c",
            "2",
            "--io",
            io,
            "--format",
            "json",
        ]));
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["requests"]["ok"], 3000, "{io}: {json}");
        assert_eq!(v["failures"]["reset"], 0, "{io}: {json}");
        assert_eq!(v["failures"]["goaway"], 0, "{io}: {json}");
        assert_eq!(v["connections"]["opened"], 2, "{io}: {json}");
    }
}

struct OnDrop(Option<Box<dyn FnOnce()>>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// The combinations that cannot work are refused in one line each; `--h2`
/// to a server that does not pick h2 ends the run saying so.
#[test]
fn bad_h2_combinations_are_refused_in_one_line() {
    for (args, says) in [
        (
            &["--h2c", "https://127.0.0.1:1/"][..],
            "--h2c is HTTP/2 over plaintext",
        ),
        (
            &["--h2", "http://127.0.0.1:1/"][..],
            "--h2 is HTTP/2 over TLS",
        ),
        (
            &["--h2c", "--pipeline", "4", "http://127.0.0.1:1/"][..],
            "not --pipeline",
        ),
        (
            &["--h2c", "--no-keepalive", "http://127.0.0.1:1/"][..],
            "drop --no-keepalive",
        ),
        (
            &["--streams", "4", "http://127.0.0.1:1/"][..],
            "--streams is for HTTP/2",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        let o = harness(&all);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let lab = LabCert::new().unwrap();
    let bin = sibling_binary("coroutine");
    let server = ServerProcess::start(
        bin.to_str().unwrap(),
        &[
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:1/bench",
            "--tls-cert",
            lab.cert_path().to_str().unwrap(),
            "--tls-key",
            lab.key_path().to_str().unwrap(),
        ],
    );
    let url = format!("https://{}/hello", server.addr);
    let ca = lab.ca_path();
    let o = harness(&[
        "run",
        &url,
        "--h2",
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "50",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("did not pick h2 by ALPN"), "{err}");
}

crate::on_both_backends!(
    h2c_on_the_event_loop_verifies_every_stream,
    h2_over_tls_verifies_every_stream,
);
