//! A server binary running on a free port for the length of a test.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a (debug-built) server may take to print `listening on ADDR`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server process. Dropping it kills the process.
pub struct ServerProcess {
    child: Option<Child>,
    pub addr: SocketAddr,
    stderr_log: std::path::PathBuf,
    /// Lines printed on stdout after `listening on ADDR`.
    stdout: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts `bin args... --addr 127.0.0.1:0` and waits for its
    /// `listening on ADDR` line. Panics with the server's stderr on failure.
    pub fn start(bin: &str, args: &[&str]) -> ServerProcess {
        let stderr_log = std::env::temp_dir().join(format!(
            "testkit-{}-{}.stderr",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let stderr = std::fs::File::create(&stderr_log).expect("create stderr log");
        let mut child = Command::new(bin)
            .args(args)
            .args(["--addr", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        // Read the announcement, then keep reading stdout, so that the server
        // never blocks on a full pipe and tests can see what it printed.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let addr = line
                    .strip_prefix("listening on ")
                    .and_then(|a| a.trim().parse::<SocketAddr>().ok());
                if let Some(addr) = addr {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                        continue;
                    }
                }
                collected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        });
        let mut server = ServerProcess {
            child: Some(child),
            addr: "0.0.0.0:0".parse().unwrap(),
            stderr_log,
            stdout: lines,
        };
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(addr) => server.addr = addr,
            Err(_) => panic!(
                "{bin} {args:?} did not print `listening on ADDR` within {START_TIMEOUT:?}; stderr:\n{}",
                server.stderr()
            ),
        }
        server
    }

    /// The lines the server printed on stdout so far, after its `listening
    /// on ADDR` line (e.g. may's coroutine stack reports).
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends a signal to the server.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
    }

    /// Waits up to `timeout` for the server to exit; `None` if it did not.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Gives up ownership: the process is no longer killed on drop. Returns
    /// its pid and stderr log, which the caller stops and removes.
    pub fn leak(mut self) -> (u32, std::path::PathBuf) {
        let pid = self.pid();
        let log = std::mem::take(&mut self.stderr_log);
        // Dropping a `Child` neither kills nor waits: the process lives on.
        self.child = None;
        (pid, log)
    }

    /// SIGTERM, then wait for the exit.
    pub fn terminate(mut self, timeout: Duration) -> Option<ExitStatus> {
        self.signal(libc::SIGTERM);
        self.wait_exit(timeout)
    }
}

static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.stderr_log);
    }
}
