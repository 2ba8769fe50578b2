//! A private, throwaway MariaDB for tests: its own datadir, unix socket and
//! TCP port (127.0.0.1 only) under a temp dir, real authentication, and a
//! `bench`/`bench` user (mysql_native_password) owning database `bench`.
//! The server is stopped by PID and the directory removed on drop.
//!
//! Self-contained (std + libc) so that it can move to a shared test crate.
//! A copy of `servers/may-mysql/tests/private_mariadb` until `testkit`
//! provides one.

use std::fs;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long a start (or restart) may take before we give up.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGTERM shutdown may take before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

pub const USER: &str = "bench";
pub const PASSWORD: &str = "bench";
pub const DATABASE: &str = "bench";

pub struct MariaDb {
    dir: PathBuf,
    port: u16,
    mariadbd: PathBuf,
    client: PathBuf,
    child: Option<Child>,
}

impl MariaDb {
    /// Creates a datadir, starts the server on a free port, creates the
    /// `bench` user and database.
    pub fn start() -> io::Result<MariaDb> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let mariadbd = find_binary(&["mariadbd", "mysqld"])?;
        let install = find_binary(&["mariadb-install-db", "mysql_install_db"])?;
        let client = find_binary(&["mariadb", "mysql"])?;

        // Unix socket paths are limited to ~107 bytes: keep the dir short.
        let name = format!(
            "coroutine-db-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let mut dir = std::env::temp_dir().join(&name);
        if dir.as_os_str().len() > 80 {
            dir = Path::new("/tmp").join(&name);
        }
        fs::create_dir_all(&dir)?;
        let mut db = MariaDb {
            dir,
            port: 0,
            mariadbd,
            client,
            child: None,
        };

        let mut cmd = Command::new(&install);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", db.datadir().display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .arg("--skip-name-resolve");
        if is_root() {
            cmd.arg("--user=root");
        }
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "{} failed: {}{}",
                install.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }

        // A free port can be taken by someone else before mariadbd binds it:
        // try a few.
        let mut last_err = None;
        for _ in 0..3 {
            db.port = free_port()?;
            match db.spawn_and_wait() {
                Ok(()) => {
                    last_err = None;
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        if let Some(e) = last_err {
            return Err(e);
        }

        db.sql(&format!(
            "CREATE DATABASE {DATABASE};
             CREATE USER '{USER}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('{PASSWORD}');
             CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('{PASSWORD}');
             GRANT ALL ON {DATABASE}.* TO '{USER}'@'%';
             GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1';"
        ))?;
        Ok(db)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `mysql://bench:bench@127.0.0.1:PORT/bench`
    pub fn url(&self) -> String {
        format!(
            "mysql://{USER}:{PASSWORD}@127.0.0.1:{}/{DATABASE}",
            self.port
        )
    }

    /// The server's PID, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Runs SQL as root over the unix socket; returns the client's output
    /// (tab-separated, no headers).
    pub fn sql(&self, sql: &str) -> io::Result<String> {
        let out = Command::new(&self.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "mariadb client failed on {sql:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sends a signal to the server (e.g. SIGSTOP/SIGCONT to simulate a hang).
    pub fn signal(&self, sig: libc::c_int) -> io::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| io::Error::other("mariadbd is not running"))?;
        // SAFETY: kill(2) on the PID of our own child, which we have not
        // reaped yet (so the PID cannot have been reused).
        if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// SIGTERM and wait for exit (SIGKILL after a timeout).
    pub fn stop(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if child.try_wait()?.is_none() {
            // SAFETY: as in `signal`: our own, not yet reaped child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + STOP_TIMEOUT;
            while child.try_wait()?.is_none() {
                if Instant::now() > deadline {
                    child.kill()?;
                    child.wait()?;
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Starts the server again on the same port and datadir.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.spawn_and_wait()
    }

    fn datadir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("sock")
    }

    fn spawn_and_wait(&mut self) -> io::Result<()> {
        let log = self.dir.join("error.log");
        let mut cmd = Command::new(&self.mariadbd);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.datadir().display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!(
                "--pid-file={}",
                self.dir.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--port={}", self.port))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--innodb-buffer-pool-size=32M",
                "--max-connections=500",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("--user=root");
        }
        self.child = Some(cmd.spawn()?);

        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().transpose()) {
                self.child = None;
                let tail = fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(15).collect();
                return Err(io::Error::other(format!(
                    "mariadbd exited ({:?}) on port {}; error log tail:\n{}",
                    status?,
                    self.port,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )));
            }
            if self.socket().exists() && self.sql("SELECT 1").is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.stop()?;
                return Err(io::Error::other(format!(
                    "mariadbd not ready after {START_TIMEOUT:?}; see {}",
                    log.display()
                )));
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("stopping the private mariadbd: {e}");
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Looks in PATH, then in /usr/sbin and /usr/local/sbin (often not in PATH).
fn find_binary(names: &[&str]) -> io::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from))
        .collect();
    for name in names {
        for dir in &dirs {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("none of {names:?} found (install mariadb-server and mariadb-client)"),
    ))
}
