//! Test helpers, kept apart so that they can move to `testkit`: the server
//! binary started on port 0, a raw HTTP/1 client, a private MariaDB.

#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A database URL nothing listens on: for tests that never reach the database.
pub const NO_DB: &str = "mysql://bench:bench@127.0.0.1:9/bench";

/// The server binary, started on a free port; killed when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts `worker-pool ARGS --addr 127.0.0.1:0` and waits for its
    /// `listening on ADDR` line.
    pub fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_worker-pool"))
            .args(args)
            .args(["--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start worker-pool");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .expect("an address");
        Server { child, addr }
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response as read off the wire.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// A raw HTTP/1 client on one connection.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends `GET target` (HTTP/1.1, keep-alive).
    pub fn get(&mut self, target: &str) {
        self.send(&format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n"));
    }

    pub fn send(&mut self, raw: &str) {
        self.stream.write_all(raw.as_bytes()).expect("send");
    }

    /// Reads one response, waiting at most `wait`. `Err(TimedOut)` when no
    /// complete response came in time; `Err(UnexpectedEof)` when the server
    /// closed first.
    pub fn response(&mut self, wait: Duration) -> io::Result<Response> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some((resp, used)) = parse_response(&self.buf) {
                self.buf.drain(..used);
                return Ok(resp);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(io::ErrorKind::TimedOut.into())
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `GET target` and its response, within `wait`.
    pub fn request(&mut self, target: &str, wait: Duration) -> Response {
        self.get(target);
        self.response(wait)
            .unwrap_or_else(|e| panic!("GET {target}: {e}"))
    }
}

fn parse_response(buf: &[u8]) -> Option<(Response, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head.get(9..12)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    if buf.len() < end + length {
        return None;
    }
    let body = String::from_utf8_lossy(&buf[end..end + length]).into_owned();
    Some((Response { status, head, body }, end + length))
}

/// A private, throwaway MariaDB: own datadir, socket and port; user
/// `bench`/`bench` and database `bench`. Stopped and removed when dropped.
pub struct MariaDb {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl MariaDb {
    pub fn start() -> MariaDb {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "worker-pool-db-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("data");
        let status = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("mariadb-install-db (install mariadb-server)");
        assert!(status.success(), "mariadb-install-db failed");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("mariadbd")
            .args([
                "--no-defaults",
                "--user=root",
                "--bind-address=127.0.0.1",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=16M",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        let db = MariaDb { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.try_sql("SELECT 1").is_none() {
            assert!(Instant::now() < deadline, "mariadbd did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        db.sql(
            "CREATE DATABASE bench; \
             CREATE USER 'bench'@'%' IDENTIFIED BY 'bench'; \
             CREATE USER 'bench'@'localhost' IDENTIFIED BY 'bench'; \
             GRANT ALL ON bench.* TO 'bench'@'%'; \
             GRANT ALL ON bench.* TO 'bench'@'localhost';",
        );
        db
    }

    pub fn url(&self) -> String {
        format!("mysql://bench:bench@127.0.0.1:{}/bench", self.port)
    }

    /// Runs SQL as root over the socket; the output, tab-separated, no headers.
    pub fn sql(&self, sql: &str) -> String {
        self.try_sql(sql)
            .unwrap_or_else(|| panic!("SQL failed: {sql}"))
    }

    fn try_sql(&self, sql: &str) -> Option<String> {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "-uroot", "-N", "-B"])
            .arg(format!("--socket={}", self.dir.join("sock").display()))
            .args(["-e", sql])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A global status counter, e.g. `Connections` or `Threads_connected`.
    pub fn status(&self, name: &str) -> u64 {
        let out = self.sql(&format!("SHOW GLOBAL STATUS LIKE '{name}'"));
        out.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("status {name}: {out:?}"))
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        // SIGTERM: a clean shutdown; then make sure it is gone.
        // SAFETY: kill(2) on our own child's PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
