//! Test support, kept apart so that it ports to `testkit` as is: the server
//! binary started on port 0 (its `listening on ADDR` line read from
//! stdout), a private MariaDB shared by the tests of this binary, and a
//! small raw HTTP/1.1 client.

#![allow(dead_code)]

mod mariadb;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub use mariadb::MariaDb;

/// How long a server may take to print `listening on`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client waits for a response.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// One MariaDB shared by the tests of this binary: started on first use,
/// stopped (and its directory removed) when the test process exits.
pub fn shared_db() -> Arc<MariaDb> {
    static SHARED: Mutex<Option<Arc<MariaDb>>> = Mutex::new(None);
    extern "C" fn stop_shared_db() {
        let db = SHARED.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(db);
    }
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(db) = &*shared {
        return db.clone();
    }
    let db = Arc::new(MariaDb::start().expect("starting a private MariaDB"));
    // SAFETY: registers a plain `extern "C" fn()`; it runs at exit, after
    // the tests, when nothing else uses SHARED.
    unsafe { libc::atexit(stop_shared_db) };
    *shared = Some(db.clone());
    db
}

/// A server binary running on a free port; killed on drop if still running.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    /// Lines the server printed on stdout after `listening on`.
    stdout: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts `bin` with `--addr 127.0.0.1:0` and `args`, and waits for its
    /// `listening on ADDR` line.
    pub fn start(bin: &str, args: &[&str]) -> ServerProcess {
        let mut child = Command::new(bin)
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let collected = stdout.clone();
        thread::spawn(move || {
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                } else {
                    collected.lock().unwrap().push(line);
                }
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => addr.parse().expect("a socket address"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{bin} did not print `listening on` within {START_TIMEOUT:?}");
            }
        };
        ServerProcess {
            child,
            addr,
            stdout,
        }
    }

    /// The lines printed on stdout since start (besides `listening on`).
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child, not reaped yet.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill: {}", io::Error::last_os_error());
    }

    /// Waits for the process to exit, at most `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

/// A client connection (keep-alive unless the request says otherwise).
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            reader: BufReader::new(stream),
        }
    }

    /// Whether a response (or a close) has arrived and is waiting to be read.
    pub fn has_data(&self) -> bool {
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let stream = self.reader.get_ref();
        stream.set_nonblocking(true).unwrap();
        let ready =
            !matches!(stream.peek(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        stream.set_nonblocking(false).unwrap();
        ready
    }

    /// Sends `GET target` (HTTP/1.1) without waiting for the answer.
    pub fn send_get(&mut self, target: &str) {
        let req = format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n");
        self.reader.get_mut().write_all(req.as_bytes()).unwrap();
    }

    /// Reads one response whose body is framed by `Content-Length`.
    pub fn read_response(&mut self) -> Response {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header line");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').expect("a header");
            headers.push((n.to_owned(), v.trim().to_owned()));
        }
        let mut resp = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let len: usize = resp
            .header("content-length")
            .expect("Content-Length")
            .parse()
            .unwrap();
        resp.body.resize(len, 0);
        self.reader.read_exact(&mut resp.body).expect("body");
        resp
    }

    pub fn get(&mut self, target: &str) -> Response {
        self.send_get(target);
        self.read_response()
    }
}

/// `GET target` on a new connection.
pub fn get(addr: SocketAddr, target: &str) -> Response {
    Client::connect(addr).get(target)
}
