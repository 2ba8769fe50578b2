//! Plumbing the recipes share to start a server process: its run dir, a
//! command already told its port ([`OnPort`]), nginx's command line, and
//! waiting for a `listening on ADDR` announcement.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::supervise::{Child, Stdout, TempDir};
use super::{Entry, Placement, Running, StartCtx, READY_TIMEOUT};

/// A run dir for one server.
pub(super) fn run_dir(name: &str) -> anyhow::Result<TempDir> {
    TempDir::new(&format!("benchlab-{name}-"))
}

/// A server command already told to listen on `port` at the placement's
/// address, with its run dir, its log's name there and the versions found:
/// what the recipes that pick their port up front (Swoole, RoadRunner,
/// FrankenPHP) prepare before [`OnPort::spawn`].
pub(super) struct OnPort {
    pub(super) cmd: Command,
    pub(super) dir: TempDir,
    pub(super) log: &'static str,
    pub(super) port: u16,
    pub(super) versions: Vec<String>,
}

impl OnPort {
    /// Points it at the database as seen from the placement, places and
    /// spawns it; readiness is [`wait_ready`]'s.
    pub(super) fn spawn(
        mut self,
        entry: &Entry,
        ctx: &StartCtx,
        placement: &Placement,
    ) -> anyhow::Result<Running> {
        if let Some(db) = ctx.db {
            self.cmd.envs(placement.db(db)?.env());
        }
        let log = self.dir.path().join(self.log);
        let (child, _) = Child::spawn_placed(
            &entry.name,
            self.cmd,
            placement,
            self.dir.path(),
            &log,
            Stdout::Log,
        )?;
        let addr = placement.reach(SocketAddr::new(placement.listen_ip(), self.port));
        Ok(Running::started(
            entry,
            addr,
            self.versions,
            child,
            Some(self.dir),
        ))
    }
}

/// `nginx -p DIR -e DIR/nginx-error.log -c DIR/nginx.conf`.
pub(super) fn nginx_command(nginx: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(nginx);
    cmd.arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("nginx-error.log"))
        .arg("-c")
        .arg(dir.join("nginx.conf"));
    cmd
}

/// Waits for a child's `listening on ADDR` announcement.
pub(super) fn wait_announce(
    rx: std::sync::mpsc::Receiver<String>,
    child: &mut Child,
    interrupt: &AtomicBool,
) -> anyhow::Result<SocketAddr> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if interrupt.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(addr) => {
                return addr
                    .parse()
                    .with_context(|| format!("{} announced a bad address {addr:?}", child.what))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(100));
                let status = child.exited().unwrap_or_default();
                bail!(
                    "{} exited before it listened ({status}); its log ends with:\n{}",
                    child.what,
                    child.log_tail(15)
                );
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "{} did not print `listening on ADDR` within {READY_TIMEOUT:?}; its log:\n{}",
                child.what,
                child.log_tail(15)
            );
        }
    }
}
