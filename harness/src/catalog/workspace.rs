//! The workspace's Rust reference servers: `event-loop`, `coroutine`,
//! `worker-pool`. Started as `BIN --addr 127.0.0.1:0 --workers N
//! --db-pool P --mysql-url URL`; ready when they print `listening on ADDR`
//! and `/hello` answers.

use std::process::Command;

use super::supervise::{Child, Stdout};
use super::{run_dir, wait_announce, Availability, Entry, Env, Running, StartCtx};

pub fn availability(env: &Env, binary: &str) -> Availability {
    match env.workspace_binary(binary) {
        Some((path, false)) => Availability::Ready(path.display().to_string()),
        Some((path, true)) => Availability::Ready(format!(
            "{} (a debug build: its numbers are meaningless; cargo build --release)",
            path.display()
        )),
        None => Availability::Missing {
            reason: format!("{binary} is not built"),
            fix: format!("cargo build --release -p {binary}"),
        },
    }
}

/// Starts it listening on the placement's address, its process entering
/// the placement's namespace and CPUs before exec, its database URL as seen
/// from there.
pub fn start(
    entry: &Entry,
    ctx: &StartCtx,
    binary: &str,
    workers: u32,
    db_pool: u32,
    placement: &crate::catalog::Placement,
) -> anyhow::Result<Running> {
    let (path, debug) = ctx.env.workspace_binary(binary).ok_or_else(|| {
        anyhow::anyhow!("{binary} is not built (cargo build --release -p {binary})")
    })?;
    let dir = run_dir(&entry.name)?;
    // event-loop's --db-pool is per loop: keep the process's total at db_pool.
    let pool = if binary == "event-loop" {
        db_pool.div_ceil(workers.max(1))
    } else {
        db_pool
    };
    let mut cmd = Command::new(&path);
    let port = placement.port().unwrap_or(0);
    cmd.args(["--addr", &format!("{}:{port}", placement.listen_ip())])
        .args(["--workers", &workers.to_string()])
        .args(["--db-pool", &pool.to_string()]);
    if let Some(db) = ctx.db {
        cmd.args(["--mysql-url", &placement.db(db)?.url]);
    }
    if let Some(tls) = ctx.tls {
        cmd.args(tls.workspace_args());
        if ctx.h3 && binary == "event-loop" {
            cmd.arg("--h3");
        }
    }
    cmd.env_remove("BENCH_MYSQL_URL");
    let (mut child, rx) = Child::spawn_placed(
        &entry.name,
        cmd,
        placement,
        dir.path(),
        &dir.path().join("server.log"),
        Stdout::Announce("listening on "),
    )?;
    let addr = placement.reach(wait_announce(
        rx.expect("announce"),
        &mut child,
        ctx.interrupt,
    )?);
    let mut notes = Vec::new();
    if debug {
        notes.push(format!(
            "{} is a debug build ({}): its numbers are meaningless",
            entry.name,
            path.display()
        ));
    }
    let mut running = Running::started(entry, addr, Vec::new(), child, Some(dir));
    running.notes = notes;
    Ok(running)
}
