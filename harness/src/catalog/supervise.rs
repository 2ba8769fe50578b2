//! Children that are always stopped: on success, on error, on Ctrl-C and on
//! SIGTERM.
//!
//! - [`Child`]: one started process, its own process group leader
//!   (`process_group(0)`, never `setsid`: it stays in the harness's session
//!   and scheduler autogroup). Stopping it: SIGTERM to the leader, a wait,
//!   SIGKILL to the whole group after a timeout, a wait; then any process
//!   left in its group (nginx or php-fpm workers) is terminated too. `Drop`
//!   does the same.
//! - A process-wide registry of every live child's group and every temp dir
//!   ([`register_dir`]), so that a signal handler can clean up even when
//!   the main thread is stuck: [`install_signal_handlers`] sets the run's
//!   interrupt flag on the first SIGINT/SIGTERM (the main thread then stops
//!   what it started, in order) and, on a second signal or if the main
//!   thread has not finished within [`GRACE`], kills every registered group,
//!   removes every registered dir and exits.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

/// How long a child may take to exit after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the main thread has to clean up after the first signal.
pub const GRACE: Duration = Duration::from_secs(45);

#[derive(Default)]
struct Registry {
    /// Process group id → what it is (for messages).
    groups: BTreeMap<i32, String>,
    /// Single processes that are not group leaders (the embedded MariaDB).
    pids: BTreeMap<i32, String>,
    dirs: Vec<PathBuf>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn with_registry<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(g.get_or_insert_with(Registry::default))
}

/// Registers a temp dir to remove if the harness is interrupted.
pub fn register_dir(dir: &Path) {
    with_registry(|r| r.dirs.push(dir.to_path_buf()));
}

/// Forgets a temp dir (its owner removed it).
pub fn unregister_dir(dir: &Path) {
    with_registry(|r| r.dirs.retain(|d| d != dir));
}

/// Registers a process that is not a group leader of ours (the embedded
/// MariaDB) to terminate if the harness is interrupted.
pub fn register_pid(pid: u32, what: &str) {
    with_registry(|r| r.pids.insert(pid as i32, what.to_string()));
}

pub fn unregister_pid(pid: u32) {
    with_registry(|r| r.pids.remove(&(pid as i32)));
}

/// Whether any process of group `pgid` is alive (zombies waiting for a
/// reaper do not count).
fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks.
    let any = unsafe { libc::kill(-pgid, 0) == 0 };
    any && !crate::procfs::group_members(pgid).is_empty()
}

fn signal_group(pgid: i32, sig: libc::c_int) {
    // SAFETY: signalling a process group we created.
    unsafe { libc::kill(-pgid, sig) };
}

fn wait_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Terminates everything registered, removes every registered dir. Used by
/// the signal thread when the main thread cannot be trusted to finish.
pub fn emergency_cleanup() {
    let (groups, pids, dirs) = with_registry(|r| {
        (
            std::mem::take(&mut r.groups),
            std::mem::take(&mut r.pids),
            std::mem::take(&mut r.dirs),
        )
    });
    for &pgid in groups.keys() {
        signal_group(pgid, libc::SIGTERM);
    }
    for &pid in pids.keys() {
        // SAFETY: signalling a child we started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    wait_until(deadline, || {
        groups.keys().all(|&g| !group_alive(g))
            && pids.keys().all(|&p| {
                // SAFETY: reap if it is our child; check existence otherwise.
                unsafe {
                    libc::waitpid(p, std::ptr::null_mut(), libc::WNOHANG);
                    libc::kill(p, 0) != 0
                }
            })
    });
    for &pgid in groups.keys() {
        signal_group(pgid, libc::SIGKILL);
    }
    for &pid in pids.keys() {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    // After the processes: a namespace is only gone once nothing runs in it.
    let hooks = CLEANUPS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for hook in hooks {
        hook();
    }
}

/// Other things to undo on the emergency path (network environments,
/// [`crate::env`]), run by [`emergency_cleanup`] after the processes are gone.
static CLEANUPS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Registers `hook` (once) to run on the emergency path.
pub fn register_cleanup(hook: fn()) {
    let mut h = CLEANUPS.lock().unwrap_or_else(|e| e.into_inner());
    if !h.iter().any(|&f| f as usize == hook as usize) {
        h.push(hook);
    }
}

/// On the first SIGINT/SIGTERM: sets `interrupt` (the main thread stops what
/// it started and returns); after [`GRACE`], or on a second signal, cleans up
/// from the registry and exits with 130. Idempotent per process.
pub fn install_signal_handlers(interrupt: Arc<AtomicBool>) -> anyhow::Result<()> {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install the Ctrl-C handler")?;
    std::thread::Builder::new()
        .name("harness-signals".into())
        .spawn(move || {
            let mut first = true;
            for sig in signals.forever() {
                if first {
                    first = false;
                    interrupt.store(true, Ordering::SeqCst);
                    eprintln!(
                        "\nharness: {} received: stopping the servers and the database \
                         (again to force)",
                        if sig == signal_hook::consts::SIGINT {
                            "Ctrl-C"
                        } else {
                            "SIGTERM"
                        }
                    );
                    std::thread::spawn(|| {
                        std::thread::sleep(GRACE);
                        eprintln!("harness: cleanup takes too long: killing what is left");
                        emergency_cleanup();
                        std::process::exit(130);
                    });
                } else {
                    eprintln!("harness: killing what is left");
                    emergency_cleanup();
                    std::process::exit(130);
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// One started process, leader of its own process group.
pub struct Child {
    pub what: String,
    child: Option<std::process::Child>,
    pid: i32,
    /// Where its stderr (and stdout, unless piped) goes.
    pub log: PathBuf,
    /// When the process is a `docker run` client: its container.
    container: Option<InContainer>,
}

/// The container a `docker run` child runs (see [`super::container`]).
struct InContainer {
    docker: PathBuf,
    name: String,
    /// Its first process's host pid, once known.
    init_pid: std::sync::OnceLock<u32>,
}

/// What [`Child::spawn`] does with the child's stdout.
pub enum Stdout {
    /// Into the log file.
    Log,
    /// Read line by line: the first line starting with `prefix` is sent on
    /// the returned channel; everything is appended to the log.
    Announce(&'static str),
}

impl Child {
    /// Starts `cmd` as a process group leader, stdin from /dev/null, stderr
    /// into `log`, and registers its group.
    pub fn spawn(
        what: &str,
        mut cmd: Command,
        log: &Path,
        stdout: Stdout,
    ) -> anyhow::Result<(Child, Option<mpsc::Receiver<String>>)> {
        let file = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stderr(file.try_clone().context("dup log")?)
            .process_group(0);
        match stdout {
            Stdout::Log => cmd.stdout(file),
            Stdout::Announce(_) => cmd.stdout(Stdio::piped()),
        };
        let program = cmd.get_program().to_string_lossy().into_owned();
        // Hold the registry lock across the spawn so that a signal's
        // emergency cleanup cannot miss a child that is being born.
        let mut guard = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {what} ({program})"))?;
        let pid = child.id() as i32;
        guard
            .get_or_insert_with(Registry::default)
            .groups
            .insert(pid, what.to_string());
        drop(guard);
        let rx = match stdout {
            Stdout::Log => None,
            Stdout::Announce(prefix) => {
                let out = child.stdout.take().context("piped stdout")?;
                let (tx, rx) = mpsc::channel();
                let log = log.to_path_buf();
                // Forward the announcement, then keep draining so the child
                // never blocks on a full pipe.
                std::thread::spawn(move || {
                    let mut tx = Some(tx);
                    let mut file = File::options().append(true).open(log).ok();
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if let Some(f) = file.as_mut() {
                            use std::io::Write;
                            let _ = writeln!(f, "{line}");
                        }
                        if let Some(rest) = line.strip_prefix(prefix) {
                            if let Some(tx) = tx.take() {
                                let _ = tx.send(rest.trim().to_string());
                            }
                        }
                    }
                });
                Some(rx)
            }
        };
        Ok((
            Child {
                what: what.to_string(),
                child: Some(child),
                pid,
                log: log.to_path_buf(),
                container: None,
            },
            rx,
        ))
    }

    /// Starts `cmd` where `placement` says ([`Placement::apply`]: in its
    /// namespace and CPU set, or as a `docker run` of it), as
    /// [`Child::spawn`] does; `run_dir` is the server's own directory.
    pub fn spawn_placed(
        what: &str,
        mut cmd: Command,
        placement: &super::Placement,
        run_dir: &Path,
        log: &Path,
        stdout: Stdout,
    ) -> anyhow::Result<(Child, Option<mpsc::Receiver<String>>)> {
        let container = placement.apply(&mut cmd, run_dir)?;
        let (mut child, rx) = Child::spawn(what, cmd, log, stdout)?;
        if let (Some(name), Some(c)) = (container, &placement.container) {
            child.container = Some(InContainer {
                docker: c.docker.clone(),
                name,
                init_pid: std::sync::OnceLock::new(),
            });
        }
        Ok((child, rx))
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// The root of the process tree that does its work: its own pid, or for
    /// a `docker run` client the container's first process on the host
    /// (the client only relays its output). The client's pid until the
    /// container runs.
    pub fn tree_root(&self) -> u32 {
        match &self.container {
            None => self.pid(),
            Some(c) => {
                if let Some(&pid) = c.init_pid.get() {
                    return pid;
                }
                match super::container::init_pid(&c.docker, &c.name) {
                    Some(pid) => *c.init_pid.get_or_init(|| pid),
                    None => self.pid(),
                }
            }
        }
    }

    /// The container it runs, if it is a `docker run` client.
    pub fn container_name(&self) -> Option<&str> {
        self.container.as_ref().map(|c| c.name.as_str())
    }

    /// Whether it still runs; its exit status if not.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => None,
            Some(Ok(Some(status))) => Some(status.to_string()),
            Some(Err(e)) => Some(e.to_string()),
            None => Some("stopped".into()),
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// SIGTERM, wait up to `timeout`, SIGKILL to the group, wait; then
    /// terminates what is left of its group. Returns a note when it had to
    /// kill.
    pub fn stop(&mut self, timeout: Duration) -> Option<String> {
        let mut child = self.child.take()?;
        let mut note = None;
        if let Ok(None) = child.try_wait() {
            // SAFETY: signalling our own child, not yet reaped.
            unsafe { libc::kill(self.pid, libc::SIGTERM) };
            let deadline = Instant::now() + timeout;
            let exited = wait_until(deadline, || !matches!(child.try_wait(), Ok(None)));
            if !exited {
                note = Some(format!(
                    "{} ({}) ignored SIGTERM for {timeout:?}: killed",
                    self.what, self.pid
                ));
                signal_group(self.pid, libc::SIGKILL);
                let _ = child.wait();
            }
        }
        // Workers outlive a killed master: clear the group.
        if group_alive(self.pid) {
            signal_group(self.pid, libc::SIGTERM);
            if !wait_until(Instant::now() + Duration::from_secs(3), || {
                !group_alive(self.pid)
            }) {
                signal_group(self.pid, libc::SIGKILL);
                wait_until(Instant::now() + Duration::from_secs(2), || {
                    !group_alive(self.pid)
                });
            }
        }
        with_registry(|r| r.groups.remove(&self.pid));
        // A client that was killed leaves its container running.
        if let Some(c) = &self.container {
            super::container::remove(&c.docker, &c.name);
        }
        note
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop(STOP_TIMEOUT);
    }
}

/// The last `lines` lines of a file, for error messages.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// A temp dir removed on drop and registered for emergency cleanup.
pub struct TempDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl TempDir {
    pub fn new(prefix: &str) -> anyhow::Result<TempDir> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .context("cannot create a temp dir")?;
        let path = dir.path().to_path_buf();
        register_dir(&path);
        Ok(TempDir {
            dir: Some(dir),
            path,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let _ = d.close();
        }
        let _ = std::fs::remove_dir_all(&self.path);
        unregister_dir(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_ignores_sigterm_is_killed_with_its_group() {
        let dir = TempDir::new("benchlab-test-").unwrap();
        let mut cmd = Command::new("sh");
        // The shell ignores TERM and leaves a grandchild in its group.
        cmd.args(["-c", "trap '' TERM; sleep 30 & echo ready; wait"]);
        let (mut c, rx) = Child::spawn(
            "sh",
            cmd,
            &dir.path().join("sh.log"),
            Stdout::Announce("ready"),
        )
        .unwrap();
        rx.unwrap().recv_timeout(Duration::from_secs(5)).unwrap();
        let pgid = c.pid() as i32;
        assert!(group_alive(pgid));
        let note = c.stop(Duration::from_millis(200));
        assert!(note.is_some());
        assert!(!group_alive(pgid), "the group survived");
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }
}
