//! Node.js: `node compose/node/server.js` (HOST, PORT=0, DB_*, DB_POOL;
//! H2C_PORT when [`StartCtx::h2c`] asks), ready when it prints `listening
//! on ADDR` and `/hello` answers (and its h2c port accepts). Needs
//! `compose/node/node_modules` (`npm ci`, done by scripts/install-deps).

use std::net::SocketAddr;
use std::process::Command;

use super::supervise::{Child, Stdout};
use super::Placement;
use super::{
    find_program, run_dir, version_of, wait_announce, Availability, Entry, Env, Running, StartCtx,
    SEED_DB_POOL,
};

pub fn availability(env: &Env) -> Availability {
    let Some(node) = find_program(&["node", "nodejs"]) else {
        return Availability::Missing {
            reason: "node is not installed".into(),
            fix: "apt-get install nodejs npm (or scripts/install-deps)".into(),
        };
    };
    let app = env.compose().join("node");
    if !app.join("server.js").is_file() {
        return Availability::Missing {
            reason: format!("{} not found", app.join("server.js").display()),
            fix: "run from the repository or pass --repo-dir".into(),
        };
    }
    if !app.join("node_modules/mysql2").is_dir() {
        return Availability::Missing {
            reason: "compose/node/node_modules is not installed".into(),
            fix: "(cd compose/node && npm ci) or scripts/install-deps".into(),
        };
    }
    let v = version_of(&node, &["--version"]).unwrap_or_default();
    Availability::Ready(format!("{} {v}, {}", node.display(), app.display()))
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let node = find_program(&["node", "nodejs"])
        .ok_or_else(|| anyhow::anyhow!("node is not installed"))?;
    let dir = run_dir(&entry.name)?;
    let app = ctx.env.compose().join("node");
    let mut cmd = Command::new(&node);
    cmd.arg(app.join("server.js"))
        .current_dir(&app)
        .env("HOST", placement.listen_ip().to_string())
        .env("PORT", placement.port().unwrap_or(0).to_string())
        .env("DB_POOL", SEED_DB_POOL.to_string())
        .env("NODE_ENV", "production");
    if let Some(db) = ctx.db {
        cmd.envs(placement.db(db)?.env());
    }
    if let Some(tls) = ctx.tls {
        cmd.envs(tls.env());
    }
    // h2c on a port of its own (`H2C_PORT`): over plaintext, when asked.
    let h2c_port = match ctx.tls {
        None if ctx.h2c => Some(super::free_port()?),
        _ => None,
    };
    if let Some(port) = h2c_port {
        cmd.env("H2C_PORT", port.to_string());
    }
    let (mut child, rx) = Child::spawn_placed(
        &entry.name,
        cmd,
        placement,
        dir.path(),
        &dir.path().join("node.log"),
        Stdout::Announce("listening on "),
    )?;
    let addr = placement.reach(wait_announce(
        rx.expect("announce"),
        &mut child,
        ctx.interrupt,
    )?);
    let versions = version_of(&node, &["--version"])
        .map(|v| vec![format!("node {v}")])
        .unwrap_or_default();
    let mut running = Running::started(entry, addr, versions, child, Some(dir));
    if let Some(port) = h2c_port {
        let h2c = placement.reach(SocketAddr::new(placement.listen_ip(), port));
        running.wait_listening(h2c, ctx.interrupt)?;
        running.h2c = Some(h2c);
    }
    Ok(running)
}
