//! Small deterministic HTTP/1.1 servers for the tests: std sockets on
//! 127.0.0.1:0, a thread per connection, each misbehaving in one known way.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use harness::engine::{self, Control, Plan, Request, RunResult, Stop};

#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// 200 `Hello World` with Content-Length; keep-alive honoured.
    Hello,
    /// 200 `Hello World` in two chunks.
    Chunked,
    /// Half a response head, then the connection is closed.
    CloseEarly,
    /// `Content-Length: 20` but an 11-byte body, then the close.
    WrongLength,
    /// 500 with a body.
    Status500,
    /// Reads requests, never answers.
    Stall,
    /// As `Hello`, but answering request number `at` (counted over the whole
    /// server) takes `pause`, and every other answer waits for it.
    PauseOnce { at: u64, pause: Duration },
    /// `/sleep?ms=M`: answers `slept M` after M ms.
    Sleep,
    /// 200 `{"sum":21097.455887,"db":"error"}`: the seed benchmark's answer
    /// when its database is down.
    DbError,
    /// Serves this many requests, then dies: listener and connections closed.
    DieAfter(u64),
    /// As `Hello`, but `Upgrade: h2c` is answered 101 and an HTTP/2
    /// SETTINGS frame, and the connection is then held open, unanswered,
    /// until the server stops (as RoadRunner holds it about 10 s).
    SwitchAndHold,
}

pub struct TestServer {
    pub addr: SocketAddr,
    /// Requests answered (or, for `Stall`, received).
    pub requests: Arc<AtomicU64>,
    /// Connections accepted.
    pub connections: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

struct State {
    behaviour: Behaviour,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Every answer takes it: a pause holding it stalls the whole server.
    gate: Mutex<()>,
    dead: AtomicBool,
}

impl TestServer {
    pub fn start(behaviour: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(State {
            behaviour,
            requests: requests.clone(),
            stop: stop.clone(),
            gate: Mutex::new(()),
            dead: AtomicBool::new(false),
        });
        let conns = connections.clone();
        let accept = std::thread::spawn(move || {
            while !state.stop.load(Ordering::Relaxed) && !state.dead.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        conns.fetch_add(1, Ordering::Relaxed);
                        let state = state.clone();
                        std::thread::spawn(move || serve(stream, &state));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            // Dropping the listener: new connects are refused.
        });
        TestServer {
            addr,
            requests,
            connections,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn serve(mut stream: TcpStream, state: &State) {
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if state.stop.load(Ordering::Relaxed) || state.dead.load(Ordering::Relaxed) {
            return;
        }
        // Answer every complete request in the buffer.
        while let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let method = head.split(' ').next().unwrap_or("GET").to_string();
            let target = head.split(' ').nth(1).unwrap_or("/").to_string();
            let lower = head.to_ascii_lowercase();
            let close = lower.contains("connection: close");
            if matches!(state.behaviour, Behaviour::SwitchAndHold) && lower.contains("upgrade: h2c")
            {
                switch_and_hold(&mut stream, state);
                return;
            }
            if !answer(&mut stream, state, &method, &target, close) || close {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

const DATE: &str = "Date: Mon, 30 Nov 2026 02:00:00 GMT\r\n";

/// Writes the answer; `false` when the connection must end.
fn answer(stream: &mut TcpStream, state: &State, method: &str, target: &str, close: bool) -> bool {
    let n = state.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let conn = if close { "Connection: close\r\n" } else { "" };
    let ok = |body: &str, ct: &str| {
        format!(
            "HTTP/1.1 200 OK\r\nServer: test\r\n{DATE}Content-Type: {ct}\r\nContent-Length: {}\r\n{conn}\r\n{}",
            body.len(),
            if method == "HEAD" { "" } else { body }
        )
    };
    let response = match state.behaviour {
        Behaviour::Hello | Behaviour::SwitchAndHold => ok("Hello World", "text/plain"),
        Behaviour::Chunked => format!(
            "HTTP/1.1 200 OK\r\nServer: test\r\n{DATE}Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n{conn}\r\n5\r\nHello\r\n6;x=y\r\n World\r\n0\r\n\r\n"
        ),
        Behaviour::CloseEarly => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Le");
            return false;
        }
        Behaviour::WrongLength => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nServer: test\r\nContent-Length: 20\r\n\r\nHello World",
            );
            return false;
        }
        Behaviour::Status500 => format!(
            "HTTP/1.1 500 Internal Server Error\r\nServer: test\r\nContent-Length: 4\r\n{conn}\r\noops"
        ),
        Behaviour::Stall => {
            while !state.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
            return false;
        }
        Behaviour::PauseOnce { at, pause } => {
            let _gate = state.gate.lock().unwrap();
            if n == at {
                std::thread::sleep(pause);
            }
            ok("Hello World", "text/plain")
        }
        Behaviour::Sleep => {
            let ms: u64 = target
                .split("ms=")
                .nth(1)
                .and_then(|v| v.split('&').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            std::thread::sleep(Duration::from_millis(ms));
            ok(&format!("slept {ms}"), "text/plain")
        }
        Behaviour::DbError => ok(r#"{"sum":21097.455887,"db":"error"}"#, "application/json"),
        Behaviour::DieAfter(limit) => {
            if n > limit {
                state.dead.store(true, Ordering::Relaxed);
                return false;
            }
            ok("Hello World", "text/plain")
        }
    };
    stream.write_all(response.as_bytes()).is_ok()
}

/// 101 to h2c, the server's (empty) SETTINGS frame, then silence with the
/// connection open until the server stops.
fn switch_and_hold(stream: &mut TcpStream, state: &State) {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let _ = stream.write_all(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n\0\0\0\x04\0\0\0\0\0",
    );
    while !state.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A reference server (`event-loop`, `coroutine`, `worker-pool`) without a
/// database (`/hello`, `/cpu`, `/echo` and `/ws` need none), serving TLS
/// with `tls`'s certificate when given.
pub fn reference_server(name: &str, tls: Option<&labcert::LabCert>) -> testkit::ServerProcess {
    let bin = sibling_binary(name);
    let mut args = vec![
        "--mysql-url".to_string(),
        "mysql://bench:bench@127.0.0.1:1/bench".to_string(),
    ];
    if let Some(lab) = tls {
        args.push("--tls-cert".into());
        args.push(lab.cert_path().to_str().unwrap().into());
        args.push("--tls-key".into());
        args.push(lab.key_path().to_str().unwrap().into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    testkit::ServerProcess::start(bin.to_str().unwrap(), &args)
}

/// A plan of `n` requests on 4 connections framed by `framing`, over a 1:1
/// mix of `/hello` and `/cpu?n=10`, whose exact bodies differ: a response
/// given to the wrong request fails its check.
pub fn two_path_plan(
    io: harness::engine::Io,
    url: &str,
    framing: harness::engine::Framing,
    n: u64,
) -> Plan {
    let target = harness::target::Target::parse(url).unwrap();
    plan_on(io, url, |p| {
        p.mix = vec![
            harness::engine::Route::get("/hello", &target.authority, 1, true),
            harness::engine::Route::get("/cpu?n=10", &target.authority, 1, true),
        ];
        p.proto =
            harness::engine::ProtoPlan::from_framing(framing).expect("not a WebSocket framing");
        p.connections = 4;
        p.stop = Stop::Count(n);
        // HTTP/2's :authority (HTTP/1.1 carries it in the encoded Host).
        p.authority.clone_from(&target.authority);
    })
}

/// Debian's nginx, or `None` after saying the test skips without it
/// (under `CI=true`, install-deps provides it and `skip_without` fails).
pub fn nginx_or_skip() -> Option<&'static str> {
    let found = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if found.is_none() {
        skip_without("nginx is not installed (apt-get install nginx-light)");
    }
    found
}

/// A plan against `url` with the CLI's checks, tuned by `tune`.
pub fn plan(url: &str, tune: impl FnOnce(&mut Plan)) -> Plan {
    plan_on(harness::engine::Io::default(), url, tune)
}

/// [`plan`] on the I/O backend `io`.
pub fn plan_on(io: harness::engine::Io, url: &str, tune: impl FnOnce(&mut Plan)) -> Plan {
    let target = harness::target::Target::parse(url).unwrap();
    let mut p = Plan::new(
        url,
        target.addr,
        Request::encode("GET", &target.path, &target.authority, &[], true),
        harness::engine::Check::for_request("GET", &target.path, true),
    );
    p.connections = 8;
    p.threads = 2;
    p.stop = Stop::Count(100);
    p.timeout = Duration::from_secs(5);
    p.io = io;
    tune(&mut p);
    if !p.keepalive() {
        p.request = Request::encode("GET", &target.path, &target.authority, &[], false);
    }
    p
}

pub fn run(plan: &Plan) -> RunResult {
    let r = engine::run(plan, &Control::default(), &mut |_| {}).expect("run");
    // Ran on the backend asked for, unless this machine refuses it.
    assert_eq!(r.io, engine::resolve_io(plan.io).0, "{:?}", r.io_note);
    r
}

/// `$name(io)` as a test on each I/O backend: `epoll::$name`, `uring::$name`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod epoll {
            $(#[test]
            fn $name() {
                super::$name(harness::engine::Io::Epoll)
            })*
        }
        mod uring {
            $(#[test]
            fn $name() {
                super::$name(harness::engine::Io::Uring)
            })*
        }
    };
}

/// A workspace binary next to this test's executable (target/<profile>/NAME).
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap(); // deps/
    let bin = dir.parent().unwrap().join(name);
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build -p {name}` first (or `cargo test --workspace`)",
        bin.display()
    );
    bin
}

/// The harness binary.
pub fn harness_bin() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// A temp dir named `harness-test-NAME-…`, removed on drop.
pub fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("harness-test-{name}-"))
        .tempdir()
        .unwrap()
}

/// Makes `cmd` start in a session of its own: whatever it starts (and does
/// not setsid) is found by its session id afterwards, even once orphaned,
/// and a signal sent to it never reaches the test runner.
pub fn own_session(cmd: &mut Command) {
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// SIGKILLs every process of session `sid` (one a child made with
/// [`own_session`]): what a killed harness started and no one stopped.
pub fn kill_session(sid: u32) {
    for p in harness::procfs::all()
        .iter()
        .filter(|p| p.session == sid as i32)
    {
        // SAFETY: a process of the session our own child made.
        unsafe { libc::kill(p.pid, libc::SIGKILL) };
    }
}

/// Waits for `child` to exit, for at most `limit`; panics with `what` after.
pub fn wait_exit(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether this is CI (`CI=true`), where scripts/install-deps has provided
/// every prerequisite a test may otherwise skip without (nft, ab,
/// chromium), all but Swoole, which no registry here serves.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// For a test whose prerequisite is missing (`why`): prints that it is
/// skipped and returns `true` — except under `CI=true`, where install-deps
/// must have provided it, so the test fails instead of passing unseen.
pub fn skip_without(why: &str) -> bool {
    assert!(
        !in_ci(),
        "CI=true, and a prerequisite scripts/install-deps provides is missing: {why}"
    );
    skip_visibly(why)
}

/// Skips the running test, under CI too, where its prerequisite is
/// something no one here can provide (two CPUs, a Swoole module): prints
/// `skipped: WHY` and appends `TEST: WHY` to the file `BENCHLAB_SKIPPED`
/// names (scripts/test sets it and lists the file at the end, so a green
/// run never hides what did not run). Returns `true`.
pub fn skip_visibly(why: &str) -> bool {
    eprintln!("skipped: {why}");
    if let Some(path) = std::env::var_os("BENCHLAB_SKIPPED").filter(|p| !p.is_empty()) {
        // libtest names each test's thread after the test.
        let test = std::thread::current()
            .name()
            .unwrap_or("(unnamed test)")
            .to_string();
        // The test binary as cargo names it (`integration-<hash>` on disk).
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .map(|s| {
                s.rsplit_once('-')
                    .map_or(s.clone(), |(name, _)| name.to_string())
            })
            .unwrap_or_else(|| "?".into());
        let line = format!("--test {binary} {test}: {}\n", why.replace('\n', " "));
        // One write of a short line to an O_APPEND file: lines of tests
        // running in parallel do not interleave.
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot record the skip in {}: {e}", path.to_string_lossy());
        }
    }
    true
}

/// Why Swoole cannot run here (`None`: a module was found, so every Swoole
/// test runs): the catalog's reason, `no Swoole module (...)`.
pub fn swoole_missing() -> Option<String> {
    let entry = harness::catalog::catalog()
        .into_iter()
        .find(|e| e.name == "swoole")
        .expect("swoole is in the catalog");
    match entry.availability(&harness::catalog::Env::discover(None)) {
        harness::catalog::Availability::Missing { reason, .. } => Some(reason),
        _ => None,
    }
}

/// `true` when a Swoole module was found; otherwise skips the running test
/// visibly ([`skip_visibly`]), under CI too: no registry here serves Swoole.
pub fn swoole_runs_here() -> bool {
    match swoole_missing() {
        None => true,
        Some(why) => !skip_visibly(&why),
    }
}

/// `harness ARGS`, run to the end.
pub fn harness(args: &[&str]) -> std::process::Output {
    std::process::Command::new(harness_bin())
        .args(args)
        .output()
        .expect("run harness")
}

/// The stdout of a run that must have succeeded (its stderr otherwise).
pub fn stdout(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "harness failed: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A child's stderr, line by line, read on a thread of its own: a test
/// waits for the line that says the child reached a state, with every line
/// so far kept for its failure message.
pub struct StderrLines {
    rx: std::sync::mpsc::Receiver<String>,
    pub log: Vec<String>,
}

impl StderrLines {
    /// Takes `child`'s piped stderr.
    pub fn of(child: &mut Child) -> StderrLines {
        use std::io::{BufRead, BufReader};
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        StderrLines {
            rx,
            log: Vec::new(),
        }
    }

    /// Until a line contains `needle`, for at most `limit`; panics with
    /// the lines so far if the child exits first or the time runs out.
    pub fn wait_for(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.log.iter().any(|l| l.contains(needle)) {
            match self.rx.recv_timeout(Duration::from_secs(1)) {
                Ok(line) => self.log.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => panic!("exited before {needle:?}:\n{}", self.text()),
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} within {limit:?}:\n{}",
                self.text()
            );
        }
    }

    /// Takes the lines that have arrived, without waiting for more.
    pub fn drain(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            self.log.push(line);
        }
    }

    /// Every line so far.
    pub fn text(&self) -> String {
        self.log.join("\n")
    }
}

/// What a command printed on stderr, whatever its exit.
pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The event loop over TLS with `--h3` (QUIC on the TCP port's number),
/// with the lab's certificate; its database unreachable (no /db rows).
pub fn event_loop_h3(lab: &labcert::LabCert) -> testkit::ServerProcess {
    let bin = sibling_binary("event-loop");
    let (c, k) = (lab.cert_path(), lab.key_path());
    testkit::ServerProcess::start(
        bin.to_str().unwrap(),
        &[
            "--mysql-url",
            "mysql://bench:bench@127.0.0.1:1/bench",
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
            "--h3",
        ],
    )
}

/// caddy-static from the catalog, started (over `tls` if given); `None`
/// where Caddy is missing (said as a skip).
pub fn caddy_static(
    tls: Option<&harness::catalog::tls::ServerTls>,
) -> Option<harness::catalog::Running> {
    use harness::catalog::{self, Availability};
    let entry = catalog::catalog()
        .into_iter()
        .find(|e| e.name == "caddy-static")
        .expect("caddy-static is in the catalog");
    let env = catalog::Env::discover(None);
    if let Availability::Missing { reason, fix } = entry.availability(&env) {
        if skip_without(&format!("caddy-static: {reason} ({fix})")) {
            return None;
        }
    }
    let interrupt = AtomicBool::new(false);
    let ctx = catalog::StartCtx {
        env: &env,
        db: None,
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls,
        h2c: false,
        h3: false,
    };
    Some(entry.start(&ctx).expect("caddy-static starts"))
}

/// caddy-static over TLS 1.3 with a fresh lab certificate, with the
/// certificate's files (`tls.ca` for the client; they live as long as the
/// `LabCert`); `None` where Caddy is missing (said as a skip).
pub fn caddy_static_over_tls() -> Option<(
    harness::catalog::Running,
    harness::catalog::tls::ServerTls,
    labcert::LabCert,
)> {
    let lab = labcert::LabCert::new().unwrap();
    let tls =
        harness::catalog::tls::ServerTls::new(&lab, harness::engine::TlsVersion::Tls13).unwrap();
    let running = caddy_static(Some(&tls))?;
    Some((running, tls, lab))
}
