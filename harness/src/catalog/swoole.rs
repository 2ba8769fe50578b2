//! Swoole: `php compose/swoole/server.php` (HOST, PORT, SWOOLE_WORKERS,
//! DB_POOL, DB_*). The module is the system's when `php -m` lists swoole,
//! else the one `scripts/install-deps` built into
//! `${XDG_CACHE_HOME:-~/.cache}/benchlab/swoole-6.2.2-phpX.Y/swoole.so`,
//! loaded with `-d extension=PATH`: the system's PHP configuration is never
//! edited. Swoole does not announce its port: it gets a free one and is
//! ready when `/hello` answers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::Placement;
use super::{
    find_program, free_port, run_dir, version_of, Availability, Entry, Env, OnPort, Running,
    StartCtx, SEED_DB_POOL, SEED_WORKERS,
};

/// The release `scripts/install-deps` provides.
pub const VERSION: &str = "6.2.2";

/// Where the swoole module comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Module {
    /// `php -m` lists it: the system's PHP loads it by itself.
    System,
    /// Not in the system's PHP: the module install-deps cached, loaded
    /// with `-d extension=PATH`.
    Cache(PathBuf),
}

impl Module {
    /// The `php` arguments that load it.
    pub fn php_args(&self) -> Vec<String> {
        match self {
            Module::System => Vec::new(),
            Module::Cache(so) => vec!["-d".into(), format!("extension={}", so.display())],
        }
    }

    /// Where it came from, in words.
    pub fn origin(&self) -> String {
        match self {
            Module::System => "the system's PHP (`php -m` lists it)".into(),
            Module::Cache(so) => format!("{} (built by scripts/install-deps)", so.display()),
        }
    }
}

/// `$XDG_CACHE_HOME/benchlab/swoole-VERSION-phpMM/swoole.so` (`~/.cache`
/// without it), as scripts/install-deps writes it; `mm` is `8.2`.
pub fn cache_path(mm: &str) -> Option<PathBuf> {
    cache_path_in(
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        mm,
    )
}

/// [`cache_path`] for these values of `XDG_CACHE_HOME` and `HOME`.
fn cache_path_in(
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
    mm: &str,
) -> Option<PathBuf> {
    let base = xdg_cache_home
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join(format!("benchlab/swoole-{VERSION}-php{mm}/swoole.so")))
}

/// `php ARGS -r CODE`'s stdout, if it ran.
fn php_eval(php: &Path, args: &[String], code: &str) -> Option<String> {
    let out = Command::new(php)
        .args(args)
        .args(["-r", code])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether `php -m` lists `module` (lower case).
fn php_has(modules: &str, module: &str) -> bool {
    modules.lines().any(|l| l.trim() == module)
}

/// The swoole module `php` can run with, or why there is none and what to do.
pub fn module(php: &Path) -> Result<Module, (String, String)> {
    let modules = Command::new(php)
        .arg("-m")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_lowercase())
        .unwrap_or_default();
    // Swoole's bundled PHP library calls mb_strpos when a pooled connection
    // fails (PDOProxy): without mbstring that is a fatal error that kills
    // the worker instead of a 503.
    if !php_has(&modules, "mbstring") {
        return Err((
            "`php -m` does not list mbstring, which Swoole's PDOPool needs".into(),
            "apt-get install php8.2-mbstring (scripts/install-deps does)".into(),
        ));
    }
    if php_has(&modules, "swoole") {
        return Ok(Module::System);
    }
    let fix = format!(
        "scripts/install-deps (builds swoole {VERSION} once into the cache; PECL or \
         SWOOLE_SRC=/path/swoole-src-{VERSION}.tar.gz), or run compose/ with Docker and \
         pass --target swoole=http://127.0.0.1:9501"
    );
    let Some(mm) = php_eval(php, &[], "echo PHP_MAJOR_VERSION, '.', PHP_MINOR_VERSION;") else {
        return Err((format!("{} does not run", php.display()), fix));
    };
    let Some(so) = cache_path(&mm) else {
        return Err((
            "`php -m` does not list swoole, and neither XDG_CACHE_HOME nor HOME is set".into(),
            fix,
        ));
    };
    if !so.is_file() {
        return Err((
            format!(
                "`php -m` does not list swoole and {} does not exist",
                so.display()
            ),
            fix,
        ));
    }
    let cached = Module::Cache(so);
    match php_eval(php, &cached.php_args(), "echo phpversion('swoole');") {
        Some(v) if !v.is_empty() => Ok(cached),
        _ => Err((
            format!(
                "{} does not load into {} (built for another PHP?)",
                cached.origin(),
                php.display()
            ),
            format!("remove it and run {fix}"),
        )),
    }
}

pub fn availability(env: &Env) -> Availability {
    let Some(php) = find_program(&["php8.2", "php"]) else {
        return Availability::Missing {
            reason: "php (CLI) is not installed".into(),
            fix: "apt-get install php8.2-cli php8.2-mysql, then scripts/install-deps (swoole)"
                .into(),
        };
    };
    let module = match module(&php) {
        Ok(m) => m,
        Err((reason, fix)) => return Availability::Missing { reason, fix },
    };
    let server = env.compose().join("swoole/server.php");
    if !server.is_file() {
        return Availability::Missing {
            reason: format!("{} not found", server.display()),
            fix: "run from the repository or pass --repo-dir".into(),
        };
    }
    Availability::Ready(format!(
        "{} {}, swoole from {}",
        php.display(),
        server.display(),
        module.origin()
    ))
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let php = find_program(&["php8.2", "php"]).context("php is not installed")?;
    let module = module(&php).map_err(|(reason, fix)| anyhow::anyhow!("{reason}; {fix}"))?;
    let compose = ctx.env.compose();
    let dir = run_dir(&entry.name)?;
    let port = free_port()?;
    let mut cmd = Command::new(&php);
    cmd.arg("-c")
        .arg(compose.join("php/php.ini"))
        .args(module.php_args())
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
    let mut version_args = module.php_args();
    version_args.extend([
        "-r".to_string(),
        "echo 'php ', PHP_VERSION, ' swoole ', phpversion('swoole');".to_string(),
    ]);
    let version_args: Vec<&str> = version_args.iter().map(String::as_str).collect();
    let versions = version_of(&php, &version_args).into_iter().collect();
    let mut running = OnPort {
        cmd,
        dir,
        log: "swoole.log",
        port,
        versions,
    }
    .spawn(entry, ctx, placement)?;
    wait_for_workers(&mut running, SEED_WORKERS);
    Ok(running)
}

/// How long the workers may take to be forked after the first one answers.
const WORKERS_TIMEOUT: Duration = Duration::from_secs(20);

/// Ready means every worker runs, not only the first to answer `/hello`:
/// the manager forks them one by one, and `/config` counts the live ones,
/// so a server read too early reported 17 of 20 workers (and a diff of two
/// compares called the settings different). Waits until `/config` says
/// `workers` of them run; past the timeout, a note says how many did.
fn wait_for_workers(running: &mut Running, workers: u32) {
    let deadline = Instant::now() + WORKERS_TIMEOUT;
    loop {
        let seen = running.config().map(|c| c.workers);
        if seen == Ok(Some(workers)) {
            return;
        }
        if Instant::now() >= deadline || running.check_alive().is_err() {
            let seen = match seen {
                Ok(Some(n)) => format!("{n}"),
                Ok(None) => "no count".to_string(),
                Err(e) => e,
            };
            running.notes.push(format!(
                "swoole: /config reports {seen} of {workers} workers running {WORKERS_TIMEOUT:?} after it first answered"
            ));
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_path_is_the_one_install_deps_writes() {
        let p = |x: Option<&str>, h: Option<&str>| {
            cache_path_in(x.map(Into::into), h.map(Into::into), "8.2")
        };
        assert_eq!(
            p(Some("/c"), Some("/home/u")),
            Some(PathBuf::from("/c/benchlab/swoole-6.2.2-php8.2/swoole.so"))
        );
        // An empty XDG_CACHE_HOME counts as unset, as in the shell's ${X:-...}.
        assert_eq!(
            p(Some(""), Some("/home/u")),
            Some(PathBuf::from(
                "/home/u/.cache/benchlab/swoole-6.2.2-php8.2/swoole.so"
            ))
        );
        assert_eq!(p(None, None), None);
        let so = PathBuf::from("/c/swoole.so");
        assert_eq!(
            Module::Cache(so).php_args(),
            vec!["-d".to_string(), "extension=/c/swoole.so".to_string()]
        );
        assert!(Module::System.php_args().is_empty());
    }

    #[test]
    fn install_deps_builds_the_version_the_catalog_expects() {
        let script = include_str!("../../../scripts/install-deps");
        assert!(
            script.contains(&format!("SWOOLE_VERSION={VERSION}\n")),
            "scripts/install-deps and catalog::swoole::VERSION disagree"
        );
        assert!(script.contains("benchlab/swoole-$SWOOLE_VERSION-php$mm"));
    }
}
