//! A private, throwaway MariaDB server: its own datadir, socket, pid file
//! and TCP port under a temp dir, never touching a system instance. The
//! harness's embedded database and the tests use it.
//!
//! ```no_run
//! let db = embedded_mariadb::MariaDb::start(embedded_mariadb::Options::default())?;
//! println!("{}", db.url()); // mysql://bench:bench@127.0.0.1:PORT/bench
//! # Ok::<(), embedded_mariadb::Error>(())
//! ```
//!
//! The `bench` database and the `bench`/`bench` user are created by an
//! `--init-file` run at every start, so a restart (`stop` then `restart`)
//! needs no client binary.

use std::fs::{self, File};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a fresh server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The SQL run at every start.
const INIT_SQL: &str = "\
CREATE DATABASE IF NOT EXISTS bench;
CREATE USER IF NOT EXISTS 'bench'@'%' IDENTIFIED BY 'bench';
CREATE USER IF NOT EXISTS 'bench'@'localhost' IDENTIFIED BY 'bench';
GRANT ALL ON bench.* TO 'bench'@'%';
GRANT ALL ON bench.* TO 'bench'@'localhost';
";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} not found (looked in PATH, /usr/sbin, /usr/local/sbin); install MariaDB: apt-get install mariadb-server")]
    NotInstalled(&'static str),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("mariadb-install-db failed ({status}):\n{output}")]
    InstallDb { status: String, output: String },
    #[error("SQL {sql:?} failed: {message}")]
    Sql { sql: String, message: String },
    #[error("mariadbd did not become ready within {timeout:?}; its log ends with:\n{log_tail}")]
    NotReady { timeout: Duration, log_tail: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Settings of a private server.
#[derive(Debug, Clone)]
pub struct Options {
    /// TCP port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
    /// `max_connections`: room for every server of a comparison and their pools.
    pub max_connections: u32,
    /// `--bind-address` (127.0.0.1; `0.0.0.0` for a server in a container
    /// that other containers reach).
    pub bind_address: String,
    /// Starts `mariadbd` some other way than as a child process (in a
    /// container); `mariadb-install-db` always runs here.
    pub launcher: Option<Launcher>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: None,
            max_connections: 1000,
            bind_address: "127.0.0.1".into(),
            launcher: None,
        }
    }
}

/// Turns the `mariadbd` command as built into the one to spawn (e.g. a
/// `docker run` of it). The spawned process must forward SIGTERM to the
/// server and exit with it, and the server must answer on 127.0.0.1:port.
#[derive(Clone)]
pub struct Launcher(pub std::sync::Arc<dyn Fn(Command) -> Command + Send + Sync>);

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Launcher(..)")
    }
}

/// A running (or stopped) private MariaDB. Dropping it stops the server and
/// removes its directory.
pub struct MariaDb {
    child: Option<Child>,
    port: u16,
    mariadbd: PathBuf,
    max_connections: u32,
    bind_address: String,
    launcher: Option<Launcher>,
    // Declared last: dropped after the server is stopped.
    dir: tempfile::TempDir,
}

/// Finds a program in PATH or in the sbin directories where Debian puts
/// server binaries (not in a normal user's PATH).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Whether a MariaDB server can be started here; the reason if not.
pub fn availability() -> Result<(), Error> {
    find_program("mariadbd").ok_or(Error::NotInstalled("mariadbd"))?;
    find_program("mariadb-install-db").ok_or(Error::NotInstalled("mariadb-install-db"))?;
    Ok(())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn free_port() -> Result<u16, Error> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(io("bind a free port"))?;
    Ok(l.local_addr().map_err(io("read the free port"))?.port())
}

impl MariaDb {
    /// Creates a datadir under a new temp dir and starts the server on it.
    pub fn start(opts: Options) -> Result<MariaDb, Error> {
        let mariadbd = find_program("mariadbd").ok_or(Error::NotInstalled("mariadbd"))?;
        let install_db =
            find_program("mariadb-install-db").ok_or(Error::NotInstalled("mariadb-install-db"))?;
        let dir = tempfile::Builder::new()
            .prefix("benchlab-mariadb-")
            .tempdir()
            .map_err(io("create a temp dir"))?;
        let data = dir.path().join("data");
        // A private tmpdir too: the shared /tmp, busy with other tests, once
        // failed install-db's temporary tables.
        let tmp = dir.path().join("tmp");
        fs::create_dir_all(&tmp).map_err(io("create tmpdir"))?;
        let mut cmd = Command::new(&install_db);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg("--auth-root-authentication-method=socket")
            .arg("--skip-test-db");
        if is_root() {
            cmd.arg("--user=root");
        }
        let out = cmd
            .output()
            .map_err(io(format!("run {}", install_db.display())))?;
        if !out.status.success() {
            return Err(Error::InstallDb {
                status: out.status.to_string(),
                output: String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned(),
            });
        }
        fs::write(dir.path().join("init.sql"), INIT_SQL).map_err(io("write init.sql"))?;
        let mut db = MariaDb {
            child: None,
            port: 0,
            mariadbd,
            max_connections: opts.max_connections,
            bind_address: opts.bind_address.clone(),
            launcher: opts.launcher.clone(),
            dir,
        };
        // A free port can be taken between our probe and mariadbd's bind: retry.
        let mut last = None;
        for _ in 0..3 {
            db.port = match opts.port {
                Some(p) => p,
                None => free_port()?,
            };
            match db.restart() {
                Ok(()) => return Ok(db),
                Err(e) => last = Some(e),
            }
            if opts.port.is_some() {
                break;
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// `mysql://bench:bench@127.0.0.1:PORT/bench`.
    pub fn url(&self) -> String {
        format!("mysql://bench:bench@127.0.0.1:{}/bench", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's Unix socket (root may connect through it without a password).
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("mysqld.sock")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Runs SQL as root over the Unix socket with the `mariadb` client and
    /// returns its output (tab-separated, no column names).
    pub fn sql(&self, sql: &str) -> Result<String, Error> {
        let client = find_program("mariadb").ok_or(Error::NotInstalled("mariadb"))?;
        let out = Command::new(&client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(io(format!("run {}", client.display())))?;
        if !out.status.success() {
            return Err(Error::Sql {
                sql: sql.to_string(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A global status counter (`SHOW GLOBAL STATUS`), e.g. `Connections`
    /// (connection attempts since start) or `Threads_connected` (open now).
    /// Reading it opens one connection itself (counted in `Connections`).
    pub fn status(&self, name: &str) -> Result<u64, Error> {
        let sql = format!("SHOW GLOBAL STATUS LIKE '{name}'");
        let bad = |message: String| Error::Sql {
            sql: sql.clone(),
            message,
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(bad("not a status variable name".into()));
        }
        let out = self.sql(&sql)?;
        // One row: `Name\tValue`.
        out.split('\t')
            .nth(1)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| bad(format!("no integer value in {out:?}")))
    }

    /// Sends a signal to the server, e.g. SIGSTOP/SIGCONT to simulate a hang.
    pub fn signal(&self, sig: libc::c_int) -> Result<(), Error> {
        let pid = self.pid().ok_or_else(|| Error::Io {
            what: "signal mariadbd".into(),
            source: std::io::Error::other("not running"),
        })?;
        // SAFETY: kill(2) on our own child, not yet reaped (its pid cannot be reused).
        if unsafe { libc::kill(pid as libc::pid_t, sig) } != 0 {
            return Err(Error::Io {
                what: "signal mariadbd".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Starts the server again on the same datadir and port (after [`stop`](Self::stop)).
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.is_running() {
            return Ok(());
        }
        let d = self.dir.path();
        let log_path = d.join("mariadbd.log");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io("open mariadbd.log"))?;
        let mut cmd = Command::new(&self.mariadbd);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--tmpdir={}", d.join("tmp").display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--pid-file={}", d.join("mariadbd.pid").display()))
            .arg(format!("--init-file={}", d.join("init.sql").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--bind-address={}", self.bind_address))
            .arg(format!("--max-connections={}", self.max_connections))
            .arg("--skip-name-resolve")
            .arg("--skip-log-bin")
            .arg("--innodb-buffer-pool-size=64M")
            .arg("--max-allowed-packet=64M")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("dup log"))?)
            .stderr(log);
        if is_root() {
            cmd.arg("--user=root");
        }
        if let Some(Launcher(launch)) = &self.launcher {
            let launched = launch(cmd);
            cmd = launched;
            cmd.stdin(Stdio::null())
                .stdout(log_for_launcher(&log_path)?)
                .stderr(log_for_launcher(&log_path)?);
        }
        let child = cmd
            .spawn()
            .map_err(io(format!("start {}", self.mariadbd.display())))?;
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if !self.is_running() {
                self.child = None;
                return Err(self.not_ready());
            }
            if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                // The server speaks first: a handshake packet means it is up.
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut b = [0u8; 5];
                if s.read_exact(&mut b).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                self.stop();
                return Err(self.not_ready());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn not_ready(&self) -> Error {
        let log = fs::read_to_string(self.dir.path().join("mariadbd.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        Error::NotReady {
            timeout: READY_TIMEOUT,
            log_tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        }
    }

    /// Stops the server (SIGTERM, then SIGKILL after a timeout) and waits
    /// for it. A server hung with SIGSTOP is continued first, so that it
    /// shuts down cleanly instead of being killed after the timeout.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: signalling our own child, not yet reaped, by its pid.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The log file, opened again for a launched command's output.
fn log_for_launcher(path: &Path) -> Result<File, Error> {
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io("open mariadbd.log"))
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.stop();
    }
}
