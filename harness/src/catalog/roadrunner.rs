//! RoadRunner: `rr serve -c compose/roadrunner/.rr.yaml` with the HTTP and
//! RPC addresses and the worker command overridden for a local run, when
//! `rr` is on PATH and the PHP dependencies of `compose/roadrunner` are
//! installed (`composer install`). Ready when `/hello` answers.

use std::process::Command;

use anyhow::Context;

use super::Placement;
use super::{
    find_program, free_port, run_dir, version_of, Availability, Entry, Env, OnPort, Running,
    StartCtx, SEED_DB_POOL,
};

/// What scripts/install-deps asked for and was refused (one line each,
/// kept beside Swoole's status): `go install` of rr, and `composer install`
/// of compose/roadrunner's packages. Empty where nothing was refused.
pub fn install_refusals() -> Vec<String> {
    let Some(dir) = super::swoole::install_status_path()
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf))
    else {
        return Vec::new();
    };
    ["roadrunner-install.txt", "roadrunner-vendor.txt"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .filter_map(|t| t.lines().next().map(|l| l.trim().to_string()))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The refusal install-deps recorded for `what` (`go install`,
/// `composer install`), as a parenthesis for a skip line.
fn refused(what: &str) -> String {
    install_refusals()
        .into_iter()
        .find(|l| l.starts_with(what))
        .map_or(String::new(), |l| format!(" (scripts/install-deps: {l})"))
}

pub fn availability(env: &Env) -> Availability {
    let Some(rr) = find_program(&["rr"]) else {
        return Availability::Missing {
            reason: format!(
                "binary: rr is not on PATH{}; {}",
                refused("go install"),
                super::image::status(env, &super::image::ROADRUNNER)
            ),
            fix: "install RoadRunner's rr binary (github.com/roadrunner-server/roadrunner releases), or run compose/ with Docker and pass --target roadrunner=http://127.0.0.1:8081".into(),
        };
    };
    let app = env.compose().join("roadrunner");
    if !app.join("vendor/autoload.php").is_file() {
        return Availability::Missing {
            reason: format!(
                "compose/roadrunner/vendor is not installed{}",
                refused("composer install")
            ),
            fix: "(cd compose/roadrunner && composer install)".into(),
        };
    }
    if find_program(&["php8.2", "php"]).is_none() {
        return Availability::Missing {
            reason: "php (CLI) is not installed".into(),
            fix: "apt-get install php8.2-cli php8.2-mysql".into(),
        };
    }
    Availability::Ready(format!(
        "{} serve -c {}",
        rr.display(),
        app.join(".rr.yaml").display()
    ))
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let rr = find_program(&["rr"]).context("rr is not on PATH")?;
    let php = find_program(&["php8.2", "php"]).context("php is not installed")?;
    let compose = ctx.env.compose();
    let app = compose.join("roadrunner");
    let dir = run_dir(&entry.name)?;
    let port = placement.port_or_free()?;
    let rpc = free_port()?;
    let worker = format!(
        "server.command={} -c {} {} {}",
        php.display(),
        compose.join("php/php.ini").display(),
        ctx.php_jit.ini_args().join(" "),
        app.join("worker.php").display()
    );
    let mut cmd = Command::new(&rr);
    cmd.arg("serve")
        .arg("-c")
        .arg(app.join(".rr.yaml"))
        .arg("-w")
        .arg(&app)
        .args(listen_overrides(ctx, placement.listen_ip(), port)?)
        .args(["-o", &format!("rpc.listen=tcp://127.0.0.1:{rpc}")])
        .args(["-o", &worker])
        .env("DB_POOL", SEED_DB_POOL.to_string());
    let versions = version_of(&rr, &["--version"]).into_iter().collect();
    OnPort {
        cmd,
        dir,
        log: "rr.log",
        port,
        versions,
    }
    .spawn(entry, ctx, placement)
}

/// Where it listens: plain HTTP on `port`, or with `compare --tls` its
/// own TLS there (`http.ssl`) and the plain listener on another free port.
fn listen_overrides(
    ctx: &StartCtx,
    ip: std::net::IpAddr,
    port: u16,
) -> anyhow::Result<Vec<String>> {
    Ok(match ctx.tls {
        Some(tls) => {
            tls.roadrunner_overrides(&format!("{ip}:{port}"), &format!("{ip}:{}", free_port()?))
        }
        None => vec!["-o".into(), format!("http.address={ip}:{port}")],
    })
}
