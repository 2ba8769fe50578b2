//! Swoole: `php compose/swoole/server.php` (HOST, PORT, SWOOLE_WORKERS,
//! DB_POOL, DB_*) when `php -m` lists the swoole extension. Swoole does not
//! announce its port: it gets a free one and is ready when `/hello` answers.

use std::process::Command;

use anyhow::Context;

use super::Placement;
use super::{
    find_program, free_port, run_dir, version_of, Availability, Entry, Env, OnPort, Running,
    StartCtx, SEED_DB_POOL, SEED_WORKERS,
};

pub fn availability(env: &Env) -> Availability {
    let Some(php) = find_program(&["php8.2", "php"]) else {
        return Availability::Missing {
            reason: "php (CLI) is not installed".into(),
            fix: "apt-get install php8.2-cli php8.2-mysql, then the swoole extension (pecl install swoole)".into(),
        };
    };
    let modules = Command::new(&php)
        .arg("-m")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_lowercase())
        .unwrap_or_default();
    if !modules.lines().any(|l| l.trim() == "swoole") {
        return Availability::Missing {
            reason: "`php -m` does not list swoole".into(),
            fix: "pecl install swoole (6.x) and enable it, or run compose/ with Docker and pass --target swoole=http://127.0.0.1:9501".into(),
        };
    }
    let server = env.compose().join("swoole/server.php");
    if !server.is_file() {
        return Availability::Missing {
            reason: format!("{} not found", server.display()),
            fix: "run from the repository or pass --repo-dir".into(),
        };
    }
    Availability::Ready(format!("{} {}", php.display(), server.display()))
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let php = find_program(&["php8.2", "php"]).context("php is not installed")?;
    let compose = ctx.env.compose();
    let dir = run_dir(&entry.name)?;
    let port = free_port()?;
    let mut cmd = Command::new(&php);
    cmd.arg("-c")
        .arg(compose.join("php/php.ini"))
        .args([
            "-d",
            "opcache.jit=tracing",
            "-d",
            "opcache.jit_buffer_size=128M",
        ])
        .arg(compose.join("swoole/server.php"))
        .env("HOST", placement.listen_ip().to_string())
        .env("PORT", port.to_string())
        .env("SWOOLE_WORKERS", SEED_WORKERS.to_string())
        .env("DB_POOL", SEED_DB_POOL.to_string());
    let versions = version_of(
        &php,
        &[
            "-r",
            "echo 'php ', PHP_VERSION, ' swoole ', phpversion('swoole');",
        ],
    )
    .into_iter()
    .collect();
    OnPort {
        cmd,
        dir,
        log: "swoole.log",
        port,
        versions,
    }
    .spawn(entry, ctx, placement)
}
