//! `harness run https://` against real servers over real TLS: the
//! event-loop reference server terminating TLS itself (tokio-rustls) with a
//! certificate the lab makes for the test (`labcert`), on both I/O
//! backends, and nginx (OpenSSL) with the same certificate. Only `/hello`:
//! no database is needed, and each run is a few hundred requests.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use harness::engine::{Io, Plan, ProtoPlan, RunResult, Stop, TlsPlan, TlsVersion, TransportPlan};
use labcert::LabCert;
use testkit::ServerProcess;

use crate::util::{harness, own_session, plan_on, run, sibling_binary};

/// The lab certificate and an event-loop server serving HTTPS with it,
/// made once for this test binary (the server is killed when it exits).
fn server() -> &'static (LabCert, SocketAddr) {
    static SERVER: OnceLock<(LabCert, SocketAddr)> = OnceLock::new();
    SERVER.get_or_init(|| start("event-loop"))
}

/// The same for the coroutine server (rustls over may's sockets) and the
/// worker pool (its front terminates TLS).
fn coroutine() -> &'static (LabCert, SocketAddr) {
    static SERVER: OnceLock<(LabCert, SocketAddr)> = OnceLock::new();
    SERVER.get_or_init(|| start("coroutine"))
}

fn worker_pool() -> &'static (LabCert, SocketAddr) {
    static SERVER: OnceLock<(LabCert, SocketAddr)> = OnceLock::new();
    SERVER.get_or_init(|| start("worker-pool"))
}

/// A lab certificate and the server `name` serving HTTPS with it, killed
/// (by its PID) when this test binary exits.
fn start(name: &str) -> (LabCert, SocketAddr) {
    {
        let lab = LabCert::new().expect("lab certificate");
        let bin = sibling_binary(name);
        let (cert, key) = (lab.cert_path(), lab.key_path());
        let server = ServerProcess::start(
            bin.to_str().unwrap(),
            &[
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                key.to_str().unwrap(),
                // /hello only: an unreachable database is never asked.
                "--mysql-url",
                "mysql://bench:bench@127.0.0.1:1/bench",
            ],
        );
        let addr = server.addr;
        // Shared by the tests of this binary: killed, by its PID, when the
        // binary exits (as testkit::contract's shared servers are).
        let (pid, _) = server.leak();
        let kept = SERVER_PIDS.iter().any(|slot| {
            slot.compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        });
        assert!(kept, "no slot left for the server's PID");
        // SAFETY: registering a plain extern "C" fn.
        unsafe { libc::atexit(kill_servers) };
        (lab, addr)
    }
}

/// The shared servers' PIDs (0: a free slot).
static SERVER_PIDS: [AtomicU32; 3] = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];

extern "C" fn kill_servers() {
    for slot in &SERVER_PIDS {
        let pid = slot.swap(0, Ordering::Relaxed);
        if pid != 0 {
            // SAFETY: our own child, by its PID.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// A plan for `https://ADDR/hello` trusting the lab's CA.
fn tls_plan(io: Io, addr: SocketAddr, ca: &Path, tune: impl FnOnce(&mut Plan)) -> Plan {
    plan_on(io, &format!("https://{addr}/hello"), |p| {
        let mut t = TlsPlan::new(&addr.ip().to_string());
        t.trust = TlsPlan::cas_from_file(ca).unwrap();
        p.transport = TransportPlan::Tls(t);
        tune(p);
    })
}

fn handshakes(r: &RunResult) -> u64 {
    r.stats.handshakes_full + r.stats.handshakes_resumed
}

fn keepalive_is_one_handshake_per_connection(io: Io) {
    let (lab, addr) = server();
    let r = run(&tls_plan(io, *addr, &lab.ca_path(), |p| {
        p.connections = 4;
        p.stop = Stop::Count(400);
    }));
    assert_eq!(
        r.stats.ok, 400,
        "{:?} {:?}",
        r.stats.failures, r.stats.tls_error
    );
    assert_eq!(r.stats.connections, 4);
    assert_eq!(handshakes(&r), 4, "one handshake per connection");
    assert!(r.stats.handshake_us.len() == 4);
    let n = r.stats.tls.as_ref().expect("negotiated");
    assert_eq!(n.version, "TLSv1_3");
    assert_eq!(n.key_exchange, "X25519");
    assert_eq!(n.alpn.as_deref(), Some("http/1.1"));
    assert!(n.cipher_suite.starts_with("TLS13_"), "{n:?}");
}

fn no_keepalive_resumes_after_the_first_handshake(io: Io) {
    let (lab, addr) = server();
    let r = run(&tls_plan(io, *addr, &lab.ca_path(), |p| {
        p.connections = 1;
        p.proto = ProtoPlan::H1 { keepalive: false };
        p.stop = Stop::Count(50);
    }));
    assert_eq!(
        r.stats.ok, 50,
        "{:?} {:?}",
        r.stats.failures, r.stats.tls_error
    );
    assert_eq!(r.stats.connections, 50);
    // One connection at a time: the first has no ticket yet, each later
    // one resumes with the ticket of the one before.
    assert_eq!(
        (r.stats.handshakes_full, r.stats.handshakes_resumed),
        (1, 49)
    );
}

fn no_resume_makes_every_handshake_full(io: Io) {
    let (lab, addr) = server();
    let r = run(&tls_plan(io, *addr, &lab.ca_path(), |p| {
        p.connections = 2;
        p.proto = ProtoPlan::H1 { keepalive: false };
        p.stop = Stop::Count(40);
        if let TransportPlan::Tls(t) = &mut p.transport {
            t.resume = false;
            t.version = TlsVersion::Tls12;
        }
    }));
    assert_eq!(
        r.stats.ok, 40,
        "{:?} {:?}",
        r.stats.failures, r.stats.tls_error
    );
    assert_eq!(
        (r.stats.handshakes_full, r.stats.handshakes_resumed),
        (40, 0)
    );
    assert_eq!(r.stats.tls.as_ref().unwrap().version, "TLSv1_2");
}

fn a_refused_certificate_is_a_counted_failure(io: Io) {
    let (_, addr) = server();
    // The public CAs only: the lab's certificate is refused.
    let r = run(&plan_on(io, &format!("https://{addr}/hello"), |p| {
        p.transport = TransportPlan::Tls(TlsPlan::new("127.0.0.1"));
        p.connections = 2;
        p.stop = Stop::Count(6);
    }));
    assert_eq!(r.stats.ok, 0);
    assert_eq!(r.stats.failures.handshake, 6, "{:?}", r.stats.failures);
    assert_eq!(handshakes(&r), 0);
    let why = r.stats.tls_error.as_deref().unwrap_or("");
    assert!(
        why.contains("127.0.0.1") && why.contains("UnknownIssuer"),
        "{why}"
    );
}

fn the_coroutine_and_worker_pool_servers_serve_tls_with_and_without_keepalive(io: Io) {
    for (name, server) in [("coroutine", coroutine()), ("worker-pool", worker_pool())] {
        let (lab, addr) = server;
        for keepalive in [true, false] {
            let r = run(&tls_plan(io, *addr, &lab.ca_path(), |p| {
                p.connections = 2;
                p.proto = ProtoPlan::H1 { keepalive };
                p.stop = Stop::Count(100);
            }));
            let what = format!("{name}, keepalive {keepalive}");
            assert_eq!(
                r.stats.ok, 100,
                "{what}: {:?} {:?}",
                r.stats.failures, r.stats.tls_error
            );
            let expected = if keepalive { 2 } else { 100 };
            assert_eq!(handshakes(&r), expected, "{what}");
            if !keepalive {
                // Two threads, one connection at a time each: one full
                // handshake per thread, then resumed ones.
                assert_eq!(r.stats.handshakes_full, 2, "{what}");
            }
        }
    }
}

/// An open loop over TLS with a handshake per request: the schedule is
/// kept (every slot sent, latency from the intended send time, which the
/// handshake is inside of), and each request is its own handshake.
fn rate_with_a_handshake_per_request_keeps_the_schedule(io: Io) {
    let (lab, addr) = server();
    let r = run(&tls_plan(io, *addr, &lab.ca_path(), |p| {
        p.connections = 10;
        p.proto = ProtoPlan::H1 { keepalive: false };
        p.pace = harness::engine::Pace::Rate(200.0);
        p.stop = Stop::Count(100);
    }));
    assert!(r.latency_corrected());
    assert_eq!(
        r.stats.ok, 100,
        "{:?} {:?}",
        r.stats.failures, r.stats.tls_error
    );
    assert_eq!(handshakes(&r), 100);
    assert_eq!(r.stats.schedule_lateness_us.len(), 100);
    // 100 slots at 200/s end at 0.5 s; a busy machine may run late, but
    // the schedule, not the responses, sets the pace.
    assert!(r.duration >= Duration::from_millis(450), "{:?}", r.duration);
    // Latency counts from the slot: never below the handshake's own time.
    let min_handshake = r.stats.handshake_us.min();
    assert!(r.stats.latency_us.min() >= min_handshake);
}

/// More than rustls's default 64 KiB of plaintext in flight on one
/// connection: 8 pipelined 64 KiB POSTs, 16 h2 streams of them, 8 pipelined
/// 60,000-byte WebSocket messages. Each was a short write into rustls
/// that lost bytes: the pipelined POSTs stalled (0 answered in 1 s), every
/// h2 stream failed (GOAWAY), two thirds of the echoes failed.
fn more_than_64_kib_in_flight_arrives_whole(io: Io) {
    let (lab, addr) = server();
    let ca = lab.ca_path();
    let body = tempfile::NamedTempFile::new().unwrap();
    let bytes: Vec<u8> = (0..64 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(body.path(), &bytes).unwrap();
    let io = match io {
        Io::Epoll => "epoll",
        _ => "uring",
    };
    let echo = format!("https://{addr}/echo");
    let ws = format!("wss://{addr}/ws");
    for (url, extra) in [
        (&echo, &["--pipeline", "8", "--body-file"][..]),
        (&echo, &["--h2", "--streams", "16", "--body-file"][..]),
        (&ws, &["--pipeline", "8", "--ws-size", "60000"][..]),
    ] {
        let mut args = vec![
            "run",
            url,
            "--cacert",
            ca.to_str().unwrap(),
            "--io",
            io,
            "-c",
            "2",
            "-n",
            "64",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        if extra.last() == Some(&"--body-file") {
            args.push(body.path().to_str().unwrap());
        }
        let o = harness(&args);
        let json = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{extra:?}: {e}: {json}"));
        assert_eq!(v["requests"]["ok"], 64, "{extra:?}: {v}");
        assert_eq!(v["requests"]["failed"], 0, "{extra:?}: {v}");
    }
}

crate::on_both_backends!(
    more_than_64_kib_in_flight_arrives_whole,
    rate_with_a_handshake_per_request_keeps_the_schedule,
    the_coroutine_and_worker_pool_servers_serve_tls_with_and_without_keepalive,
    keepalive_is_one_handshake_per_connection,
    no_keepalive_resumes_after_the_first_handshake,
    no_resume_makes_every_handshake_full,
    a_refused_certificate_is_a_counted_failure,
);

/// The command line end to end: the report names what was negotiated, the
/// JSON matches its schema, and a certificate refused on every connection
/// ends the run with one line on stderr and exit status 1.
#[test]
fn harness_run_https_reports_tls_and_refuses_a_wrong_certificate_in_one_line() {
    let (lab, addr) = server();
    let url = format!("https://{addr}/hello");
    let ca = lab.ca_path();
    let ca = ca.to_str().unwrap();
    let o = harness(&["run", &url, "--cacert", ca, "-c", "2", "-n", "200"]);
    let text = crate::util::stdout(&o);
    assert!(text.contains("TLSv1_3"), "{text}");
    assert!(text.contains("2 handshakes (full 2, resumed 0)"), "{text}");

    let o = harness(&[
        "run",
        &url,
        "--cacert",
        ca,
        "-c",
        "1",
        "-n",
        "20",
        "--no-keepalive",
        "--format",
        "json",
    ]);
    let json = crate::util::stdout(&o);
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("the TLS run's document does not match run.schema.json: {e}\n{json}");
    }
    let tls = &value["tls"];
    assert_eq!(tls["trust"], "cacert");
    assert_eq!(tls["handshakes_full"], 1, "{tls}");
    assert_eq!(tls["handshakes_resumed"], 19, "{tls}");
    assert_eq!(tls["handshake_us"]["count"], 20, "{tls}");

    // Long enough to stop early (10 refusals in a row) and too short to.
    for n in ["1000", "3"] {
        let o = harness(&["run", &url, "-c", "1", "-n", n]);
        assert_eq!(o.status.code(), Some(1), "n = {n}");
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "n = {n}: one line, not {err:?}");
        assert!(
            lines[0].contains("the TLS handshake with 127.0.0.1 failed")
                && lines[0].contains("UnknownIssuer")
                && lines[0].contains("--cacert"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// nginx (OpenSSL) terminating TLS with the lab's certificate, answered by
/// `harness run https://` with every response verified.
#[test]
fn nginx_over_tls_is_loaded_and_verified() {
    let Some(nginx) = crate::util::nginx_or_skip() else {
        return;
    };
    let lab = LabCert::new().unwrap();
    let dir = crate::util::tmp("tls-nginx");
    let prefix = dir.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let conf = harness::catalog::nginx_static::config_tls(
        &prefix,
        &listen,
        1,
        "nginx",
        lab.cert_path().to_str().unwrap(),
        lab.key_path().to_str().unwrap(),
    );
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let mut cmd = Command::new(nginx);
    cmd.args(["-p", &prefix, "-c", &format!("{prefix}/nginx.conf")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    own_session(&mut cmd);
    let child = Nginx(cmd.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen: {}",
            std::fs::read_to_string(dir.path().join("nginx-error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("https://{listen}/hello");
    let ca = lab.ca_path();
    for extra in [&[][..], &["--no-keepalive", "-c", "1"][..]] {
        let mut args = vec!["run", &url, "--cacert", ca.to_str().unwrap(), "-n", "200"];
        args.extend_from_slice(extra);
        let text = crate::util::stdout(&harness(&args));
        assert!(text.contains("ok 200 (100.00%)"), "{extra:?}: {text}");
        assert!(text.contains("TLSv1_3"), "{text}");
        if !extra.is_empty() {
            // OpenSSL's tickets: resumed after the first.
            assert!(
                text.contains("200 handshakes (full 1, resumed 199)"),
                "{text}"
            );
        }
    }
    drop(child);
}

/// Stops nginx (its master, by PID; the workers follow it) on every exit
/// path of the test.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: our own child, by its PID.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `harness certs DIR` writes a CA and a server certificate a TLS run can
/// use, and refuses to overwrite them.
#[test]
fn harness_certs_writes_the_ca_and_server_certificate_once() {
    let dir = crate::util::tmp("tls-certs");
    let out = dir.path().join("lab");
    let o = harness(&["certs", out.to_str().unwrap()]);
    crate::util::stdout(&o);
    let trust = TlsPlan::cas_from_file(&out.join("ca.pem")).unwrap();
    assert!(matches!(trust, harness::engine::Trust::Cas(ref c) if c.len() == 1));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(out.join("key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the key is readable by others: {mode:o}");
    let again = harness(&["certs", out.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "overwrote the certificate");
}

/// `harness verify https://`: the contract's rows over TLS (through the
/// relay), and a refused certificate in one line before any row runs.
#[test]
fn harness_verify_runs_the_rows_over_tls() {
    let (lab, addr) = server();
    let url = format!("https://{addr}");
    let ca = lab.ca_path();
    // The test server has no database: the /db rows fail, the others pass.
    let o = harness(&[
        "verify",
        "--conformance",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "--timeout",
        "5s",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("PASS") && l.contains("GET /hello")),
        "{text}"
    );
    // Every row that needs no database passes over TLS as over plain HTTP:
    // the 1 MiB bodies (more than rustls holds before its handshake ends)
    // and the client's half-close (close_notify after the request) too.
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("FAIL") && !l.contains("/db") && !l.contains("/work"))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}\n{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("PASS") && l.contains("POST /echo (1 MiB exactly)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("PASS") && l.contains("request then half-close")),
        "{text}"
    );
    assert!(text.contains("verify https://"), "{text}");
    let o = harness(&["verify", &url]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("UnknownIssuer") && err.lines().count() == 1,
        "{err}"
    );
}

/// verify's relay over TLS carries bodies larger than rustls buffers
/// before its handshake ends (64 KiB, 1 MiB) and passes the client's
/// half-close on after the request, not ahead of it.
#[test]
fn the_verify_relay_carries_large_bodies_and_a_half_close() {
    use std::io::{Read, Write};
    let (lab, addr) = server();
    let mut plan = TlsPlan::new("127.0.0.1");
    plan.trust = TlsPlan::cas_from_file(&lab.ca_path()).unwrap();
    let relay = harness::lab::tls_relay::Relay::start(*addr, &plan).unwrap();
    for len in [64 * 1024, 1024 * 1024] {
        let body = vec![b'x'; len];
        let mut c = TcpStream::connect(relay.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let head = format!(
            "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        );
        c.write_all(head.as_bytes()).unwrap();
        c.write_all(&body).unwrap();
        let mut got = Vec::new();
        let r = c.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got[..got.len().min(200)]).into_owned();
        assert!(r.is_ok(), "{len}: {r:?} after {} bytes: {text}", got.len());
        assert!(text.starts_with("HTTP/1.1 200"), "{len}: {text}");
        assert!(got.ends_with(&body[..100]), "{len}: {} bytes", got.len());
    }
    // A request, then the client's half-close: still answered.
    let mut c = TcpStream::connect(relay.addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("Hello World"),
        "{text}"
    );
}
