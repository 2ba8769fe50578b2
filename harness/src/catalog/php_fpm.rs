//! nginx + php-fpm from the distribution, as `compose/php-fpm/run-local.sh`
//! starts them, from the same templates (`php-fpm.conf`, `nginx.conf`;
//! placeholders `@PREFIX@ @LISTEN@ @APP_DIR@ @USER@ @GROUP@`):
//!
//! ```text
//! php-fpm8.2 --nodaemonize --fpm-config W/php-fpm.conf -c compose/php/php.ini \
//!     -d opcache.jit=tracing -d opcache.jit_buffer_size=128M [-R as root]
//!     (the JIT as `compare --php-jit` asks: tracing unless told)
//! # wait for W/php-fpm.sock
//! nginx -p W -e W/nginx-error.log -c W/nginx.conf      # daemon off; in the template
//! ```
//!
//! Both are process-group leaders (`process_group(0)`): php-fpm's `setsid()`
//! then fails and it stays in the harness's session and scheduler autogroup;
//! nginx does not daemonize. `-d opcache.jit=tracing` because Debian's
//! `conf.d/10-opcache.ini` sets `opcache.jit=off` after php.ini; `/config`
//! (from `opcache_get_status()`) is checked at start-up.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::php_jit::PhpJit;
use super::supervise::{Child, Stdout, TempDir};
use super::Placement;
use super::{
    find_program, is_root, run_dir, user_and_group, version_of, wait_ready, Availability, Entry,
    Env, Running, StartCtx, READY_TIMEOUT,
};

const FPM_NAMES: &[&str] = &["php-fpm8.2", "php-fpm"];
const INSTALL: &str = "apt-get install php8.2-fpm php8.2-mysql php8.2-opcache nginx-light";

pub fn availability(env: &Env) -> Availability {
    let missing = |reason: String| Availability::Missing {
        reason,
        fix: INSTALL.into(),
    };
    let Some(fpm) = find_program(FPM_NAMES) else {
        return missing("php-fpm is not installed".into());
    };
    let Some(nginx) = find_program(&["nginx"]) else {
        return missing("nginx is not installed".into());
    };
    let dir = env.compose().join("php-fpm");
    for f in ["php-fpm.conf", "nginx.conf", "index.php"] {
        if !dir.join(f).is_file() {
            return Availability::Missing {
                reason: format!("{} not found", dir.join(f).display()),
                fix: "run from the repository or pass --repo-dir".into(),
            };
        }
    }
    let modules = Command::new(&fpm)
        .arg("-m")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_lowercase())
        .unwrap_or_default();
    for (module, what) in [
        ("pdo_mysql", "php8.2-mysql"),
        ("zend opcache", "php8.2-opcache"),
    ] {
        if !modules.contains(module) {
            return missing(format!("php-fpm lacks the {module} extension ({what})"));
        }
    }
    Availability::Ready(format!("{} + {}", fpm.display(), nginx.display()))
}

/// `template` with the placeholders replaced.
pub fn render(
    template: &str,
    prefix: &Path,
    listen: &str,
    app_dir: &Path,
) -> anyhow::Result<String> {
    let (user, group) = user_and_group();
    let out = template
        .replace("@PREFIX@", &prefix.display().to_string())
        .replace("@LISTEN@", listen)
        .replace("@APP_DIR@", &app_dir.display().to_string())
        .replace("@USER@", &user)
        .replace("@GROUP@", &group);
    if let Some(name) = placeholders(&out).next() {
        bail!("unrendered placeholder @{name}@");
    }
    Ok(out)
}

/// Every `@NAME@` (upper case and `_`) in `text`, wherever it stands.
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    let at: Vec<usize> = text.match_indices('@').map(|(i, _)| i).collect();
    let names: Vec<&str> = at.windows(2).map(|w| &text[w[0] + 1..w[1]]).collect();
    names.into_iter().filter(|name| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
    })
}

fn nginx_version(nginx: &Path) -> Option<String> {
    // "nginx version: nginx/1.22.1"
    let v = version_of(nginx, &["-v"])?;
    Some(
        v.rsplit('/')
            .next()
            .map_or(v.clone(), |n| format!("nginx {n}")),
    )
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let fpm_bin = find_program(FPM_NAMES).context("php-fpm is not installed")?;
    let nginx_bin = find_program(&["nginx"]).context("nginx is not installed")?;
    let compose = ctx.env.compose();
    let app_dir = compose.join("php-fpm");
    let php_ini = compose.join("php/php.ini");
    let dir = run_dir(&entry.name)?;
    let w = dir.path().to_path_buf();
    std::fs::create_dir_all(w.join("tmp")).context("cannot create the nginx temp dir")?;

    let fpm_conf = std::fs::read_to_string(app_dir.join("php-fpm.conf"))
        .context("cannot read compose/php-fpm/php-fpm.conf")?;
    std::fs::write(w.join("php-fpm.conf"), render(&fpm_conf, &w, "", &app_dir)?)
        .context("cannot write php-fpm.conf")?;

    let mut cmd = Command::new(&fpm_bin);
    cmd.arg("--nodaemonize")
        .arg("--fpm-config")
        .arg(w.join("php-fpm.conf"))
        .arg("-c")
        .arg(&php_ini)
        .args(ctx.php_jit.ini_args());
    if is_root() {
        cmd.arg("-R");
    }
    if let Some(db) = ctx.db {
        cmd.envs(placement.db(db)?.env());
    }
    let (mut fpm, _) = Child::spawn_placed(
        "php-fpm",
        cmd,
        placement,
        &w,
        &w.join("php-fpm.out"),
        Stdout::Log,
    )?;
    let sock = w.join("php-fpm.sock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        if let Some(status) = fpm.exited() {
            bail!(
                "php-fpm exited during start-up ({status}):\n{}\n{}",
                fpm.log_tail(15),
                super::supervise::log_tail(&w.join("php-fpm.log"), 15)
            );
        }
        if Instant::now() > deadline {
            bail!(
                "php-fpm's socket did not appear within 10 s:\n{}",
                fpm.log_tail(15)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    let nginx_conf = std::fs::read_to_string(app_dir.join("nginx.conf"))
        .context("cannot read compose/php-fpm/nginx.conf")?;
    let mut versions = vec![version_of(&fpm_bin, &["-v"])
        .and_then(|v| v.split(" (").next().map(str::to_string))
        .unwrap_or_else(|| "php-fpm".into())];
    versions.extend(nginx_version(&nginx_bin));
    let mut running = start_nginx(
        entry,
        ctx,
        &nginx_bin,
        &nginx_conf,
        &app_dir,
        placement,
        dir,
        fpm,
        versions,
    )?;
    wait_ready(&mut running, ctx.interrupt, READY_TIMEOUT)?;
    check_jit(&mut running, ctx.php_jit);
    running.http2_front = http2_front(&running, ctx);
    Ok(running)
}

/// Starts nginx on a free port (retrying if the port was taken meanwhile)
/// in front of the running php-fpm; the [`Running`] owns both.
#[allow(clippy::too_many_arguments)]
fn start_nginx(
    entry: &Entry,
    ctx: &StartCtx,
    nginx_bin: &Path,
    template: &str,
    app_dir: &Path,
    placement: &Placement,
    dir: TempDir,
    fpm: Child,
    versions: Vec<String>,
) -> anyhow::Result<Running> {
    let w = dir.path().to_path_buf();
    let mut running = Running {
        name: entry.name.clone(),
        addr: "127.0.0.1:0".parse().expect("addr"),
        authority: String::new(),
        versions,
        notes: Vec::new(),
        children: vec![fpm],
        dir: Some(dir),
        tls: ctx.tls.map(|t| t.client.clone()),
        fronts: Vec::new(),
        h2c: None,
        http2_front: None,
        outside: None,
    };
    let mut last_err = None;
    for _ in 0..3 {
        let port = placement.port_or_free()?;
        let listen = format!("{}:{port}", placement.listen_ip());
        let mut conf = render(template, &w, &listen, app_dir)?;
        let listen_line = format!("        listen {listen} backlog=4096;");
        let mut h2c = None;
        if let Some(tls) = ctx.tls {
            conf = http2_by_alpn(&tls.nginx(&conf, &listen_line).map_err(anyhow::Error::msg)?);
        } else if ctx.h2c {
            let h2c_listen = SocketAddr::new(placement.listen_ip(), super::free_port()?);
            conf = with_h2c(&conf, &listen_line, h2c_listen).map_err(anyhow::Error::msg)?;
            h2c = Some(placement.reach(h2c_listen));
        }
        std::fs::write(w.join("nginx.conf"), conf).context("cannot write nginx.conf")?;
        let cmd = super::nginx_command(nginx_bin, &w);
        let (nginx, _) = Child::spawn_placed(
            "nginx",
            cmd,
            placement,
            &w,
            &w.join("nginx.out"),
            Stdout::Log,
        )?;
        running.children.push(nginx);
        running.addr = placement.reach(SocketAddr::new(placement.listen_ip(), port));
        running.authority = running.addr.to_string();
        running.h2c = h2c;
        // nginx binds at once or exits: give it a moment to say which.
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut failed = false;
        while Instant::now() < deadline {
            if ctx.interrupt.load(std::sync::atomic::Ordering::Relaxed) {
                bail!("interrupted");
            }
            if running.check_alive().is_err() {
                failed = true;
                break;
            }
            if std::net::TcpStream::connect(running.addr).is_ok() {
                return Ok(running);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !failed {
            return Ok(running);
        }
        let log = super::supervise::log_tail(&w.join("nginx-error.log"), 10);
        if let Some(mut n) = running.children.pop() {
            n.stop(Duration::from_secs(2));
        }
        if !log.contains("in use") {
            bail!("nginx did not start:\n{log}");
        }
        last_err = Some(log);
    }
    bail!(
        "nginx could not bind a free port:\n{}",
        last_err.unwrap_or_default()
    )
}

/// `conf` with a second listener after `listen_line`: h2c (HTTP/2 by prior
/// knowledge) on `h2c` in front of the same FastCGI pool. A port of its
/// own: nginx 1.22's `listen … http2` in the clear speaks only h2c.
fn with_h2c(conf: &str, listen_line: &str, h2c: SocketAddr) -> Result<String, String> {
    if conf.matches(listen_line).count() != 1 {
        return Err(format!(
            "nginx configuration: expected the line {listen_line:?} once"
        ));
    }
    Ok(conf.replacen(
        listen_line,
        &format!("{listen_line}\n        listen {h2c} http2 backlog=4096;"),
        1,
    ))
}

/// nginx over TLS ([`super::tls::ServerTls::nginx`]) offering HTTP/2 by
/// ALPN beside HTTP/1.1: `listen … ssl http2`. A client that offers no
/// ALPN, or only `http/1.1`, still speaks HTTP/1.1.
fn http2_by_alpn(conf: &str) -> String {
    conf.replacen(" ssl backlog=", " ssl http2 backlog=", 1)
}

/// Where HTTP/2 ends for this server ([`Running::http2_front`]): nginx, in
/// front of PHP, whose `/config` describes PHP and not the front; `None`
/// where it serves no HTTP/2 (plaintext without [`StartCtx::h2c`]).
fn http2_front(running: &Running, ctx: &StartCtx) -> Option<String> {
    let nginx = running
        .versions
        .iter()
        .find(|v| v.starts_with("nginx"))
        .map_or("nginx", String::as_str);
    (ctx.tls.is_some() || running.h2c.is_some()).then(|| {
        format!(
            "{nginx} in front of the FastCGI pool (each stream one FastCGI request; \
             PHP's /config does not describe it)"
        )
    })
}

/// Records a note when OPcache is off, or its JIT is not the mode asked for.
fn check_jit(running: &mut Running, jit: PhpJit) {
    match running.config() {
        Ok(c)
            if c.opcache == Some(true)
                && c.jit.as_deref().is_some_and(|j| jit.is_reported_as(j)) => {}
        Ok(c) => running.notes.push(format!(
            "php-fpm: OPcache {}, JIT {} although -d opcache.jit={} was given",
            match c.opcache {
                Some(true) => "on",
                Some(false) => "off",
                None => "not reported",
            },
            c.jit.as_deref().unwrap_or("not reported"),
            jit.name()
        )),
        Err(why) => running.notes.push(format!("php-fpm: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_render_every_placeholder() {
        let t = "pid @PREFIX@/x.pid;\nlisten @LISTEN@;\nroot @APP_DIR@;\nuser @USER@ @GROUP@;\n";
        let out = render(t, Path::new("/w"), "127.0.0.1:1", Path::new("/app")).unwrap();
        assert!(out.contains("pid /w/x.pid;"));
        assert!(out.contains("listen 127.0.0.1:1;"));
        assert!(!out.contains("@USER@"));
        assert!(render("x @NEW_THING@ y", Path::new("/w"), "", Path::new("/a")).is_err());
        // e-mail-like text is not a placeholder, and does not hide one after it
        render("a@b.c", Path::new("/w"), "", Path::new("/a")).unwrap();
        assert!(render("a@b.c @NEW@", Path::new("/w"), "", Path::new("/a")).is_err());
        assert!(render(
            "@PREFIX@ then @LATER@",
            Path::new("/w"),
            "",
            Path::new("/a")
        )
        .is_err());
    }

    #[test]
    fn http2_is_a_second_listener_in_the_clear_and_alpn_over_tls() {
        let env = Env::discover(None);
        let dir = env.compose().join("php-fpm");
        let t = std::fs::read_to_string(dir.join("nginx.conf")).unwrap();
        let conf = render(&t, Path::new("/w"), "127.0.0.1:1", &dir).unwrap();
        let line = "        listen 127.0.0.1:1 backlog=4096;";
        let h2c = with_h2c(&conf, line, "127.0.0.1:2".parse().unwrap()).unwrap();
        assert!(
            h2c.contains(&format!(
                "{line}\n        listen 127.0.0.1:2 http2 backlog=4096;\n"
            )),
            "{h2c}"
        );
        assert!(with_h2c(&conf, "        listen 9;", "127.0.0.1:2".parse().unwrap()).is_err());
        let tls = conf.replacen(line, "        listen 127.0.0.1:1 ssl backlog=4096;", 1);
        assert!(http2_by_alpn(&tls).contains("listen 127.0.0.1:1 ssl http2 backlog=4096;"));
    }

    #[test]
    fn the_repository_templates_render() {
        let env = Env::discover(None);
        let dir = env.compose().join("php-fpm");
        for f in ["php-fpm.conf", "nginx.conf"] {
            let t = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(
                placeholders(&t).count() > 0,
                "{f} has no placeholder to render"
            );
            let out = render(&t, Path::new("/w"), "127.0.0.1:1", &dir).unwrap();
            assert_eq!(
                placeholders(&out).collect::<Vec<_>>(),
                Vec::<&str>::new(),
                "{f}"
            );
            assert!(out.contains("/w"), "{f}: the prefix was not rendered in");
        }
    }
}
