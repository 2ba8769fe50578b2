//! FrankenPHP in worker mode: `frankenphp run --config
//! compose/frankenphp/Caddyfile`, the same Caddyfile its image runs, with
//! the app directory, address and port given by environment (APP_DIR, HOST,
//! PORT) and the shared php.ini by PHPRC. Runs when `frankenphp` is on PATH
//! (its static build embeds PHP with pdo_mysql and OPcache); ready when
//! `/hello` answers.

use std::process::Command;

use anyhow::Context;

use super::Placement;
use super::{
    find_program, run_dir, version_of, Availability, Entry, Env, OnPort, Running, StartCtx,
    SEED_WORKERS,
};

/// Why FrankenPHP is compose-only on a machine that reaches only the
/// project's registries: no binary can be fetched or built here.
pub const COMPOSE_ONLY: &str = "compose-only here: the Go module proxy refuses \
     github.com/dunglas/frankenphp (403 Forbidden, `This module version is not available`), and \
     building it needs a thread-safe (ZTS) libphp, which Debian's libphp8.2-embed is not (Debian \
     builds PHP without ZTS: PHP_ZTS = 0)";

pub fn availability(env: &Env) -> Availability {
    let Some(bin) = find_program(&["frankenphp"]) else {
        return Availability::Missing {
            reason: format!(
                "binary: frankenphp is not on PATH; {COMPOSE_ONLY}; {}",
                super::image::status(env, &super::image::FRANKENPHP)
            ),
            fix: "install the frankenphp binary (github.com/php/frankenphp releases), or run \
                  compose/ with Docker and pass --target frankenphp=http://127.0.0.1:8082"
                .into(),
        };
    };
    let caddyfile = env.compose().join("frankenphp/Caddyfile");
    if !caddyfile.is_file() {
        return Availability::Missing {
            reason: format!("{} not found", caddyfile.display()),
            fix: "run from the repository or pass --repo-dir".into(),
        };
    }
    Availability::Ready(format!(
        "{} run --config {}",
        bin.display(),
        caddyfile.display()
    ))
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let bin = find_program(&["frankenphp"]).context("frankenphp is not on PATH")?;
    let compose = ctx.env.compose();
    let app = compose.join("frankenphp");
    let dir = run_dir(&entry.name)?;
    let port = placement.port_or_free()?;
    let mut cmd = Command::new(&bin);
    cmd.arg("run")
        .arg("--config")
        .arg(app.join("Caddyfile"))
        .current_dir(dir.path())
        .env("APP_DIR", &app)
        .env("HOST", placement.listen_ip().to_string())
        .env("PORT", port.to_string())
        .env("BENCH_WORKERS", SEED_WORKERS.to_string())
        // PHPRC: the php.ini every PHP stack shares (OPcache + tracing JIT);
        // Caddy's own state stays in the run dir.
        .env("PHPRC", compose.join("php/php.ini"))
        .env("XDG_DATA_HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path());
    if let Some(tls) = ctx.tls {
        cmd.envs(tls.frankenphp_env());
    }
    let versions = version_of(&bin, &["version"]).into_iter().collect();
    OnPort {
        cmd,
        dir,
        log: "frankenphp.log",
        port,
        versions,
    }
    .spawn(entry, ctx, placement)
}
