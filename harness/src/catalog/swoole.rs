//! Swoole: `php compose/swoole/server.php` (HOST, PORT, SWOOLE_WORKERS,
//! DB_POOL, DB_*). Swoole comes as users get it, never built by us: the
//! module is the system's when `php -m` lists swoole (a distribution's
//! package, or `pecl install` enabled), else the one `SWOOLE_SO` names, else
//! the `swoole.so` that `pecl install` leaves in PHP's `extension_dir`
//! without enabling it; the last two are loaded with `-d extension=PATH`, so
//! the system's PHP configuration is never edited. Swoole does not announce
//! its port: it gets a free one and is ready when `/hello` answers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::Placement;
use super::{
    find_program, run_dir, version_of, Availability, Entry, Env, OnPort, Running, StartCtx,
    SEED_DB_POOL, SEED_WORKERS,
};

/// The release `scripts/install-deps` asks PECL for.
pub const VERSION: &str = "6.2.2";

/// The variable that names a module of the user's own.
pub const SO_VAR: &str = "SWOOLE_SO";

/// How to get a Swoole module, for every "not runnable" line.
pub const HOW_TO_GET: &str = "pecl install swoole (scripts/install-deps tries it), your \
     distribution's php-swoole package, SWOOLE_SO=/path/swoole.so for a module you have, or \
     --target swoole=http://127.0.0.1:9501 to a Swoole started elsewhere (compose/, Docker)";

/// Where the swoole module comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Module {
    /// `php -m` lists it: the system's PHP loads it by itself.
    System,
    /// The module `SWOOLE_SO` names, loaded with `-d extension=PATH`.
    Named(PathBuf),
    /// `swoole.so` in PHP's `extension_dir`, where `pecl install` puts it
    /// (it does not enable it), loaded with `-d extension=PATH`.
    ExtensionDir(PathBuf),
}

impl Module {
    /// The `php` arguments that load it.
    pub fn php_args(&self) -> Vec<String> {
        match self {
            Module::System => Vec::new(),
            Module::Named(so) | Module::ExtensionDir(so) => {
                vec!["-d".into(), format!("extension={}", so.display())]
            }
        }
    }

    /// The module's file: the one named, or for the system's the
    /// `swoole.so` in PHP's `extension_dir` (what a container of the lab's
    /// image mounts and loads: its PHP has no Swoole of its own).
    pub fn file(&self, php: &Path) -> Option<super::php_ext::ModuleFile> {
        match self {
            Module::System => super::php_ext::system_module(php, "swoole"),
            Module::Named(so) | Module::ExtensionDir(so) => {
                Some(super::php_ext::ModuleFile(so.clone()))
            }
        }
    }

    /// Where it came from, in words.
    pub fn origin(&self) -> String {
        match self {
            Module::System => "the system's PHP (`php -m` lists it)".into(),
            Module::Named(so) => format!("{SO_VAR}={}", so.display()),
            Module::ExtensionDir(so) => format!(
                "{} (PHP's extension_dir, as pecl install leaves it)",
                so.display()
            ),
        }
    }
}

/// `$XDG_CACHE_HOME/benchlab/swoole-install.txt` (`~/.cache` without it):
/// what scripts/install-deps tried when it found no module, in one line.
pub fn install_status_path() -> Option<PathBuf> {
    install_status_path_in(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

/// [`install_status_path`] for these values of `XDG_CACHE_HOME` and `HOME`.
fn install_status_path_in(
    xdg_cache_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let base = xdg_cache_home
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("benchlab/swoole-install.txt"))
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

/// The swoole version `php` reports with `module` loaded, if it loads.
fn loads(php: &Path, module: &Module) -> Option<String> {
    php_eval(php, &module.php_args(), "echo phpversion('swoole');").filter(|v| !v.is_empty())
}

/// The swoole module `php` can run with, or why there is none and what to do.
pub fn module(php: &Path) -> Result<Module, (String, String)> {
    module_with(php, std::env::var_os(SO_VAR).filter(|v| !v.is_empty()))
}

/// [`module`] with this value of `SWOOLE_SO`.
fn module_with(php: &Path, named: Option<std::ffi::OsString>) -> Result<Module, (String, String)> {
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
    // The system's wins over SWOOLE_SO: PHP cannot load the module twice.
    if php_has(&modules, "swoole") {
        return Ok(Module::System);
    }
    if let Some(so) = named {
        let named = Module::Named(PathBuf::from(so));
        return match loads(php, &named) {
            Some(_) => Ok(named),
            None => Err((
                format!(
                    "{} does not load into {} (missing, or built for another PHP)",
                    named.origin(),
                    php.display()
                ),
                format!("point {SO_VAR} at a swoole.so built for this PHP, or unset it"),
            )),
        };
    }
    if let Some(dir) = php_eval(php, &[], "echo ini_get('extension_dir');") {
        let so = Path::new(&dir).join("swoole.so");
        if so.is_file() {
            let pecl = Module::ExtensionDir(so);
            if loads(php, &pecl).is_some() {
                return Ok(pecl);
            }
        }
    }
    let mut reason = format!("no Swoole module (php -m lacks swoole, {SO_VAR} unset");
    let tried = install_status_path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    match tried {
        Some(t) => reason.push_str(&format!("; {t})")),
        None => reason.push(')'),
    }
    Err((reason, HOW_TO_GET.into()))
}

pub fn availability(env: &Env) -> Availability {
    let Some(php) = find_program(&["php8.2", "php"]) else {
        return Availability::Missing {
            reason: "php (CLI) is not installed".into(),
            fix: format!(
                "apt-get install php8.2-cli php8.2-mysql php8.2-mbstring, then {HOW_TO_GET}"
            ),
        };
    };
    let module = match module(&php) {
        Ok(m) => m,
        Err((reason, fix)) => {
            return Availability::Missing {
                reason: format!(
                    "module: {reason}; {}",
                    super::image::status(env, &super::image::SWOOLE)
                ),
                fix,
            }
        }
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
    // In a container the host's module goes in with the server: mounted
    // with the libraries it links, loaded by the image's PHP (the host's
    // own Debian build, at its version).
    let mut placement = placement.clone();
    let load = if placement.container.is_some() {
        let file = module.file(&php).with_context(|| {
            format!(
                "swoole in a container: {} loads it, but its file is not in PHP's \
                 extension_dir as swoole.so; name it with {SO_VAR}=/path/swoole.so",
                module.origin()
            )
        })?;
        file.mount_into(&mut placement)?;
        file.php_args()
    } else {
        module.php_args()
    };
    let placement = &placement;
    let compose = ctx.env.compose();
    let dir = run_dir(&entry.name)?;
    let port = placement.port_or_free()?;
    let mut cmd = Command::new(&php);
    cmd.arg("-c")
        .arg(compose.join("php/php.ini"))
        .args(&load)
        .args(ctx.php_jit.ini_args())
        .arg(compose.join("swoole/server.php"))
        .env("HOST", placement.listen_ip().to_string())
        .env("PORT", port.to_string())
        .env("SWOOLE_WORKERS", SEED_WORKERS.to_string())
        .env("DB_POOL", SEED_DB_POOL.to_string());
    if let Some(tls) = ctx.tls {
        // SWOOLE_SSL on the listener (compose/swoole/server.php).
        cmd.envs(tls.env());
    }
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
    fn the_status_path_is_the_one_install_deps_writes() {
        let p = |x: Option<&str>, h: Option<&str>| {
            install_status_path_in(x.map(Into::into), h.map(Into::into))
        };
        assert_eq!(
            p(Some("/c"), Some("/home/u")),
            Some(PathBuf::from("/c/benchlab/swoole-install.txt"))
        );
        // An empty XDG_CACHE_HOME counts as unset, as in the shell's ${X:-...}.
        assert_eq!(
            p(Some(""), Some("/home/u")),
            Some(PathBuf::from("/home/u/.cache/benchlab/swoole-install.txt"))
        );
        assert_eq!(p(None, None), None);
        let script = include_str!("../../../scripts/install-deps");
        assert!(script.contains("/benchlab/swoole-install.txt\""));
    }

    #[test]
    fn a_named_or_pecl_module_is_loaded_by_argument_never_by_configuration() {
        let so = PathBuf::from("/c/swoole.so");
        let arg = vec!["-d".to_string(), "extension=/c/swoole.so".to_string()];
        assert_eq!(Module::Named(so.clone()).php_args(), arg);
        assert_eq!(Module::ExtensionDir(so).php_args(), arg);
        assert!(Module::System.php_args().is_empty());
        assert_eq!(
            Module::Named("/m/swoole.so".into()).origin(),
            "SWOOLE_SO=/m/swoole.so"
        );
    }

    /// A SWOOLE_SO that does not load is named as the reason, with what to
    /// do about it (not silently passed over for another module).
    #[test]
    fn a_swoole_so_that_does_not_load_says_so() {
        let Some(php) = find_program(&["php8.2", "php"]) else {
            eprintln!("skipped: no php CLI");
            return;
        };
        let modules = Command::new(&php).arg("-m").output().unwrap();
        let modules = String::from_utf8_lossy(&modules.stdout).to_lowercase();
        if php_has(&modules, "swoole") || !php_has(&modules, "mbstring") {
            eprintln!("skipped: the system's PHP lists swoole, or lacks mbstring");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let bogus = dir.path().join("swoole.so");
        std::fs::write(&bogus, b"not a module").unwrap();
        let (reason, fix) = module_with(&php, Some(bogus.clone().into_os_string())).unwrap_err();
        assert!(
            reason.contains(&format!("SWOOLE_SO={}", bogus.display()))
                && reason.contains("does not load"),
            "{reason}"
        );
        assert!(fix.contains("SWOOLE_SO"), "{fix}");
    }

    #[test]
    fn install_deps_asks_pecl_for_the_version_the_catalog_expects() {
        let script = include_str!("../../../scripts/install-deps");
        assert!(
            script.contains(&format!("SWOOLE_VERSION={VERSION}\n")),
            "scripts/install-deps and catalog::swoole::VERSION disagree"
        );
        assert!(script.contains("pecl install -f \"swoole-$SWOOLE_VERSION\""));
    }
}
