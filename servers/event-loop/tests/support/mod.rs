//! Test support, kept apart so that it ports to `testkit` in one move: the
//! server binary on a free port, a raw HTTP/1 exchange over std
//! `TcpStream`, and a private MariaDB for this test binary.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long any single exchange in these tests may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The server binary, running on a free port; stopped (SIGTERM, then
/// SIGKILL) when dropped.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `event-loop --addr 127.0.0.1:0 ARGS` and waits for its
    /// `listening on ADDR` line.
    pub fn start(args: &[&str]) -> ServerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_event-loop"))
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting event-loop");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reading the server's stdout");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .expect("a socket address");
        ServerProcess { child, addr }
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        signal(self.child.id(), "TERM");
        self.child.wait().expect("waiting for the server")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            signal(self.child.id(), "TERM");
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn signal(pid: u32, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status();
}

/// A parsed response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Opens a connection with the test's timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connecting");
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Sends `GET target` (HTTP/1.1, keep-alive) on `s`.
pub fn send_get(s: &mut TcpStream, target: &str) {
    write!(s, "GET {target} HTTP/1.1\r\nHost: test\r\n\r\n").expect("sending");
}

/// Reads one response (Content-Length framed) from `s`; `buf` keeps bytes
/// read past it (pipelining).
pub fn read_reply(s: &mut TcpStream, buf: &mut Vec<u8>) -> Reply {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).expect("reading a response");
        assert!(n > 0, "connection closed before a full head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let mut reply = Reply {
        status,
        head,
        body: Vec::new(),
    };
    let len: usize = reply
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {:?}", reply.head));
    while buf.len() < head_end + len {
        let n = s.read(&mut chunk).expect("reading a body");
        assert!(n > 0, "connection closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    reply.body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    reply
}

/// One `GET` on a fresh connection.
pub fn get(addr: SocketAddr, target: &str) -> Reply {
    let mut s = connect(addr);
    send_get(&mut s, target);
    read_reply(&mut s, &mut Vec::new())
}

/// Writes raw bytes on a fresh connection and reads until the server
/// closes it (or [`IO_TIMEOUT`]); `None` if it was not closed in time.
pub fn exchange_until_close(addr: SocketAddr, raw: &[u8]) -> Option<Vec<u8>> {
    let mut s = connect(addr);
    s.write_all(raw).expect("sending");
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Some(out),
        Err(_) => None,
    }
}

/// A private MariaDB for this test binary, started on first use on a
/// free port, with user `bench`/`bench` and database `bench`. It lives in a
/// temporary directory and is stopped, and the directory removed, when this
/// test process exits (a shell watchdog waits for our end of a pipe to close).
pub fn mariadb_url() -> &'static str {
    static DB: OnceLock<(String, Mutex<Child>)> = OnceLock::new();
    &DB.get_or_init(start_mariadb).0
}

fn start_mariadb() -> (String, Mutex<Child>) {
    let dir = std::env::temp_dir().join(format!("event-loop-test-db-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the database directory");
    let data: PathBuf = dir.join("data");
    let status = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=root", "--skip-test-db"])
        .arg(format!("--datadir={}", data.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running mariadb-install-db (is MariaDB installed?)");
    assert!(status.success(), "mariadb-install-db failed");
    let port = free_port();
    let sock = dir.join("sock");
    // The watchdog: mariadbd runs in the background; `read` returns when
    // this process's end of stdin closes (we exited, however), then the
    // server is stopped and its directory removed.
    let script = format!(
        "mariadbd --no-defaults --datadir='{data}' --socket='{sock}' --port={port} \
         --bind-address=127.0.0.1 --user=root --skip-log-bin --skip-name-resolve \
         --max-connections=500 --innodb-buffer-pool-size=16M >'{dir}/log' 2>&1 & pid=$!; \
         read x; kill $pid; wait $pid; rm -rf '{dir}'",
        data = data.display(),
        sock = sock.display(),
        dir = dir.display(),
    );
    // The child (and its stdin, our end of the watchdog's pipe) lives as
    // long as this process.
    let child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .expect("starting mariadbd");
    let deadline = Instant::now() + Duration::from_secs(30);
    let setup = "CREATE DATABASE IF NOT EXISTS bench; \
                 CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED BY 'bench'; \
                 GRANT ALL ON bench.* TO 'bench'@'%';";
    loop {
        let ok = Command::new("mariadb")
            .args(["--no-defaults", "-uroot"])
            .arg(format!("--socket={}", sock.display()))
            .args(["-e", setup])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            break;
        }
        assert!(Instant::now() < deadline, "mariadbd did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    (
        format!("mysql://bench:bench@127.0.0.1:{port}/bench"),
        Mutex::new(child),
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Splits a complete byte stream of responses (as read until the close).
pub fn split_replies(mut bytes: &[u8]) -> Vec<Reply> {
    let mut out = Vec::new();
    while let Some(i) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..i + 4]).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line in {head:?}"));
        let mut reply = Reply {
            status,
            head,
            body: Vec::new(),
        };
        let len: usize = reply
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no Content-Length in {:?}", reply.head));
        let end = (i + 4 + len).min(bytes.len());
        reply.body = bytes[i + 4..end].to_vec();
        bytes = &bytes[end..];
        out.push(reply);
    }
    assert!(bytes.is_empty(), "trailing bytes {bytes:?}");
    out
}
