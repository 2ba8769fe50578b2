//! The catalog of servers `harness compare` can start (DESIGN.md §5).
//!
//! Each [`Entry`] is a recipe: can it run here ([`Entry::availability`]),
//! how to start it on a free port and know it is ready ([`Entry::start`]:
//! its `/hello` answers the contract), how to stop it ([`Running::stop`], and
//! `Drop`). Every process is started as its own process group leader in the
//! harness's session ([`supervise`]): it stays in the harness's scheduler
//! autogroup and is always stopped, also on errors and signals.
//!
//! One file per kind of recipe: [`workspace`] (the Rust reference servers),
//! [`node`], [`php_fpm`] (nginx + php-fpm), [`nginx_static`], [`swoole`],
//! [`roadrunner`], [`frankenphp`]; `--target NAME=URL` servers are
//! [`Recipe::External`].

pub mod embedded;
pub mod frankenphp;
pub mod http;
pub mod nginx_static;
pub mod node;
pub mod php_fpm;
pub mod procfs;
pub mod roadrunner;
pub mod supervise;
pub mod swoole;
pub mod workspace;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use supervise::{Child, Stdout, TempDir};

/// How long a server may take to answer `/hello` after it was started.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How a catalog entry is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// A workspace binary: `--workers`, and `--db-pool` per worker (event-loop)
    /// or in total.
    Workspace {
        binary: &'static str,
        workers: u32,
        db_pool: u32,
    },
    Node,
    PhpFpm,
    NginxStatic,
    Swoole,
    RoadRunner,
    FrankenPhp,
    /// Started elsewhere (`--target NAME=URL`): only loaded, never started.
    External {
        url: String,
    },
}

/// One server of the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub model: &'static str,
    pub language: &'static str,
    pub recipe: Recipe,
}

/// Whether an entry can run here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Runnable; what will be started.
    Ready(String),
    /// Not runnable: why, and what to install or do.
    Missing { reason: String, fix: String },
}

impl Availability {
    pub fn is_ready(&self) -> bool {
        matches!(self, Availability::Ready(_))
    }
}

/// The workers and database connections every entry gets: the seed's 20.
pub const SEED_WORKERS: u32 = 20;
pub const SEED_DB_POOL: u32 = 20;

/// Every entry, in the order of the tables.
pub fn catalog() -> Vec<Entry> {
    let e = |name: &str, model, language, recipe| Entry {
        name: name.to_string(),
        model,
        language,
        recipe,
    };
    vec![
        e(
            "event-loop",
            "event-loop",
            "rust",
            Recipe::Workspace {
                binary: "event-loop",
                workers: 1,
                db_pool: SEED_DB_POOL,
            },
        ),
        e(
            "event-loop-x2",
            "event-loop",
            "rust",
            Recipe::Workspace {
                binary: "event-loop",
                workers: 2,
                db_pool: SEED_DB_POOL,
            },
        ),
        e(
            "coroutine",
            "coroutine",
            "rust",
            Recipe::Workspace {
                binary: "coroutine",
                workers: SEED_WORKERS,
                db_pool: SEED_DB_POOL,
            },
        ),
        e(
            "worker-pool",
            "worker-pool",
            "rust",
            Recipe::Workspace {
                binary: "worker-pool",
                workers: SEED_WORKERS,
                db_pool: SEED_DB_POOL,
            },
        ),
        e("node", "event-loop", "javascript", Recipe::Node),
        e("php-fpm", "worker-pool", "php", Recipe::PhpFpm),
        e("nginx-static", "event-loop", "c", Recipe::NginxStatic),
        e("swoole", "coroutine", "php", Recipe::Swoole),
        e("roadrunner", "worker-pool", "php+go", Recipe::RoadRunner),
        e("frankenphp", "worker-pool", "php+go", Recipe::FrankenPhp),
    ]
}

/// `NAME=URL` → an external entry.
pub fn external(spec: &str) -> anyhow::Result<Entry> {
    let (name, url) = spec
        .split_once('=')
        .filter(|(n, u)| !n.trim().is_empty() && !u.trim().is_empty())
        .with_context(|| format!("bad --target {spec:?}: expected NAME=URL"))?;
    let url = url.trim().trim_end_matches('/').to_string();
    crate::target::Target::parse(&url).with_context(|| format!("bad --target {spec:?}"))?;
    Ok(Entry {
        name: name.trim().to_string(),
        model: "external",
        language: "?",
        recipe: Recipe::External { url },
    })
}

/// Where things are found.
#[derive(Clone, Debug)]
pub struct Env {
    /// The repository (holds `compose/`).
    pub repo: PathBuf,
    /// Directories searched for the workspace binaries, in order.
    pub bin_dirs: Vec<PathBuf>,
}

impl Env {
    /// `--repo-dir`, else `$BENCHLAB_REPO`, else the source tree this
    /// harness was built from. Workspace binaries: next to the harness
    /// executable, then `target/release`, then `target/debug`.
    pub fn discover(repo: Option<&Path>) -> Env {
        let repo = repo
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("BENCHLAB_REPO").map(PathBuf::from))
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .parent()
                    .unwrap_or(Path::new("."))
                    .to_path_buf()
            });
        let mut bin_dirs = Vec::new();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            bin_dirs.push(dir);
        }
        bin_dirs.push(repo.join("target/release"));
        bin_dirs.push(repo.join("target/debug"));
        Env { repo, bin_dirs }
    }

    pub fn compose(&self) -> PathBuf {
        self.repo.join("compose")
    }

    /// A workspace binary, and whether it is a debug build.
    pub fn workspace_binary(&self, name: &str) -> Option<(PathBuf, bool)> {
        self.bin_dirs.iter().map(|d| d.join(name)).find_map(|p| {
            p.is_file().then(|| {
                let debug = p
                    .parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|n| n == "debug" || n == "deps");
                (p, debug)
            })
        })
    }
}

/// The database the servers use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Db {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub name: String,
}

impl Db {
    /// Parses `mysql://user:pass@host:port/db`.
    pub fn parse(url: &str) -> anyhow::Result<Db> {
        let rest = url
            .strip_prefix("mysql://")
            .with_context(|| format!("{url:?} is not a mysql:// URL"))?;
        let (auth, hostpart) = rest.rsplit_once('@').unwrap_or(("", rest));
        let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
        let (hostport, name) = hostpart.split_once('/').unwrap_or((hostpart, "bench"));
        let name = name.split('?').next().unwrap_or("bench");
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .with_context(|| format!("bad port {p:?} in {url:?}"))?,
            ),
            None => (hostport, 3306),
        };
        if host.is_empty() {
            bail!("{url:?} has no host");
        }
        Ok(Db {
            url: url.to_string(),
            host: host.to_string(),
            port,
            user: if user.is_empty() { "bench" } else { user }.to_string(),
            password: password.to_string(),
            name: if name.is_empty() { "bench" } else { name }.to_string(),
        })
    }

    /// The URL with the password hidden, for reports.
    pub fn redacted(&self) -> String {
        format!(
            "mysql://{}:***@{}:{}/{}",
            self.user, self.host, self.port, self.name
        )
    }

    /// `DB_HOST`… as the PHP and Node.js apps read them.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DB_HOST", self.host.clone()),
            ("DB_PORT", self.port.to_string()),
            ("DB_USER", self.user.clone()),
            ("DB_PASSWORD", self.password.clone()),
            ("DB_NAME", self.name.clone()),
        ]
    }
}

/// How long a server may take to render `/config` (PHP's first request
/// compiles the script; a loaded 2-core machine stretches that).
const CONFIG_TIMEOUT: Duration = Duration::from_secs(10);

/// A started server: its address, its processes, its run dir.
pub struct Running {
    pub name: String,
    pub addr: SocketAddr,
    /// The `Host` header to send.
    pub authority: String,
    /// Runtime versions found at start (`nginx 1.22.1`, `node v20.20.2`).
    pub versions: Vec<String>,
    /// Things the report should say (a debug build, a port retry).
    pub notes: Vec<String>,
    /// Stopped last to first.
    children: Vec<Child>,
    dir: Option<TempDir>,
}

impl Running {
    /// A server started elsewhere.
    pub fn external(name: &str, url: &str) -> anyhow::Result<Running> {
        let t = crate::target::Target::parse(url)?;
        Ok(Running {
            name: name.to_string(),
            addr: t.addr,
            authority: t.authority,
            versions: Vec::new(),
            notes: Vec::new(),
            children: Vec::new(),
            dir: None,
        })
    }

    /// A server the harness started as one `child` answering on `addr`
    /// (also its `Host`), with its run dir.
    fn started(
        entry: &Entry,
        addr: SocketAddr,
        versions: Vec<String>,
        child: Child,
        dir: Option<TempDir>,
    ) -> Running {
        Running {
            name: entry.name.clone(),
            addr,
            authority: addr.to_string(),
            versions,
            notes: Vec::new(),
            children: vec![child],
            dir,
        }
    }

    /// `GET target` on a fresh connection, with its `Host`.
    pub fn get(&self, target: &str, timeout: Duration) -> std::io::Result<http::Response> {
        http::get(self.addr, &self.authority, target, timeout)
    }

    /// Its `/config` document, or why there is none (the status, the
    /// transport error or the JSON error, with the start of the body).
    pub fn config(&self) -> Result<workloads::ServerConfig, String> {
        let r = self
            .get("/config", CONFIG_TIMEOUT)
            .map_err(|e| format!("GET /config: {e}"))?;
        let head = || String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned();
        if r.status != 200 {
            return Err(format!("GET /config answered {}: {}", r.status, head()));
        }
        workloads::ServerConfig::from_json(&r.body)
            .map_err(|e| format!("GET /config: not a settings document ({e}): {}", head()))
    }

    /// The process ids of its children (each the leader of its group).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::pid).collect()
    }

    /// Whether we started (and so can sample) its processes.
    pub fn managed(&self) -> bool {
        !self.children.is_empty()
    }

    /// An error if a child has exited, with its log.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for c in &mut self.children {
            if let Some(status) = c.exited() {
                bail!(
                    "{} exited ({status}); its log ends with:\n{}",
                    c.what,
                    c.log_tail(15)
                );
            }
        }
        Ok(())
    }

    /// The last lines of every child's log.
    pub fn logs(&self) -> String {
        self.children
            .iter()
            .map(|c| format!("--- {}:\n{}", c.what, c.log_tail(15)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Stops every child (last started first) and removes the run dir.
    /// Returns notes (a child that had to be killed).
    pub fn stop(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        while let Some(mut c) = self.children.pop() {
            notes.extend(c.stop(supervise::STOP_TIMEOUT));
        }
        self.dir = None;
        notes
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a recipe's `start` gets.
pub struct StartCtx<'a> {
    pub env: &'a Env,
    pub db: Option<&'a Db>,
    pub interrupt: &'a AtomicBool,
}

impl Entry {
    /// Whether it can run here, and if not why and what to install.
    pub fn availability(&self, env: &Env) -> Availability {
        match &self.recipe {
            Recipe::Workspace { binary, .. } => workspace::availability(env, binary),
            Recipe::Node => node::availability(env),
            Recipe::PhpFpm => php_fpm::availability(env),
            Recipe::NginxStatic => nginx_static::availability(),
            Recipe::Swoole => swoole::availability(env),
            Recipe::RoadRunner => roadrunner::availability(env),
            Recipe::FrankenPhp => frankenphp::availability(env),
            Recipe::External { url } => Availability::Ready(format!("started elsewhere: {url}")),
        }
    }

    /// Whether it serves `path` at all (nginx-static serves only `/hello`).
    pub fn serves(&self, path: &str) -> bool {
        match self.recipe {
            Recipe::NginxStatic => matches!(
                workloads::route("GET", path).map(|r| r.endpoint),
                Ok(workloads::Endpoint::Hello)
            ),
            _ => true,
        }
    }

    /// Whether it implements the whole contract (nginx-static answers
    /// `/hello` only: it is a ceiling, not a contender).
    pub fn serves_whole_contract(&self) -> bool {
        !matches!(self.recipe, Recipe::NginxStatic)
    }

    /// Whether [`Entry::start_placed`] can place it in an environment other
    /// than `bare` (`--env`, [`crate::env`]): every recipe the harness
    /// starts itself; a `--target` runs where it was started.
    pub fn placeable(&self) -> bool {
        !matches!(self.recipe, Recipe::External { .. })
    }

    /// Starts it where `placement` says (a network namespace, CPUs, the
    /// address to listen on, the database as seen from there; every process
    /// of the server, nginx and php-fpm alike, enters them before exec) and
    /// waits until its `/hello` answers the contract.
    pub fn start_placed(
        &self,
        ctx: &StartCtx,
        placement: &crate::env::Placement,
    ) -> anyhow::Result<Running> {
        let mut running = match &self.recipe {
            Recipe::Workspace {
                binary,
                workers,
                db_pool,
            } => workspace::start(self, ctx, binary, *workers, *db_pool, placement)?,
            Recipe::Node => node::start(self, ctx, placement)?,
            Recipe::PhpFpm => php_fpm::start(self, ctx, placement)?,
            Recipe::NginxStatic => nginx_static::start(self, ctx, placement)?,
            Recipe::Swoole => swoole::start(self, ctx, placement)?,
            Recipe::RoadRunner => roadrunner::start(self, ctx, placement)?,
            Recipe::FrankenPhp => frankenphp::start(self, ctx, placement)?,
            Recipe::External { url } => {
                if !placement.is_default() {
                    bail!(
                        "{}: a server started elsewhere ({url}) cannot be placed",
                        self.name
                    );
                }
                // Started elsewhere: it must answer, the contract is judged later.
                let running = Running::external(&self.name, url)?;
                running
                    .get("/hello", Duration::from_secs(5))
                    .with_context(|| format!("{} ({url}) does not answer", self.name))?;
                return Ok(running);
            }
        };
        wait_ready(&mut running, ctx.interrupt, READY_TIMEOUT)?;
        Ok(running)
    }

    /// Starts it on loopback, unplaced, and waits until `/hello` answers.
    pub fn start(&self, ctx: &StartCtx) -> anyhow::Result<Running> {
        self.start_placed(ctx, &crate::env::Placement::default())
    }
}

/// Polls `GET /hello` until it answers `200 Hello World`, a child dies,
/// the run is interrupted or `timeout` passes.
pub fn wait_ready(
    running: &mut Running,
    interrupt: &AtomicBool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut last;
    loop {
        if interrupt.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        running.check_alive()?;
        match running.get("/hello", Duration::from_secs(2)) {
            Ok(r) if r.status == 200 && r.body == b"Hello World" => return Ok(()),
            Ok(r) => {
                last = format!(
                    "/hello answered {} {:?}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                )
            }
            Err(e) => last = format!("/hello: {e}"),
        }
        if Instant::now() >= deadline {
            bail!(
                "{} was not ready within {timeout:?} ({last})\n{}",
                running.name,
                running.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free TCP port on 127.0.0.1 (free when probed: the caller retries if
/// something takes it before its server binds).
pub fn free_port() -> anyhow::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(l.local_addr()?.port())
}

/// A program in PATH or in the sbin directories.
pub fn find_program(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|n| embedded_mariadb::find_program(n))
}

/// The first line of `program args` (stdout, else stderr), for versions.
pub fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let s = String::from_utf8_lossy(&text);
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The current user's and group's names (for php-fpm's pool and nginx's `user`).
pub fn user_and_group() -> (String, String) {
    // SAFETY: getpwuid/getgrgid return pointers into static storage, read
    // immediately on this thread.
    unsafe {
        let name =
            |p: *const libc::c_char| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
        let pw = libc::getpwuid(libc::geteuid());
        let user = if pw.is_null() {
            "nobody".to_string()
        } else {
            name((*pw).pw_name)
        };
        let gr = libc::getgrgid(libc::getegid());
        let group = if gr.is_null() {
            "nogroup".to_string()
        } else {
            name((*gr).gr_name)
        };
        (user, group)
    }
}

/// A run dir for one server.
fn run_dir(name: &str) -> anyhow::Result<TempDir> {
    TempDir::new(&format!("benchlab-{name}-"))
}

/// A server command already told to listen on `port` at the placement's
/// address, with its run dir, its log's name there and the versions found:
/// what the recipes that pick their port up front (Swoole, RoadRunner,
/// FrankenPHP) prepare before [`OnPort::spawn`].
struct OnPort {
    cmd: Command,
    dir: TempDir,
    log: &'static str,
    port: u16,
    versions: Vec<String>,
}

impl OnPort {
    /// Points it at the database as seen from the placement, places and
    /// spawns it; readiness is [`wait_ready`]'s.
    fn spawn(
        mut self,
        entry: &Entry,
        ctx: &StartCtx,
        placement: &crate::env::Placement,
    ) -> anyhow::Result<Running> {
        if let Some(db) = ctx.db {
            self.cmd.envs(placement.db(db)?.env());
        }
        placement.apply(&mut self.cmd)?;
        let log = self.dir.path().join(self.log);
        let (child, _) = Child::spawn(&entry.name, self.cmd, &log, Stdout::Log)?;
        let addr = SocketAddr::new(placement.listen_ip(), self.port);
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
fn nginx_command(nginx: &Path, dir: &Path) -> Command {
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
fn wait_announce(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_parse() {
        let d = Db::parse("mysql://bench:secret@127.0.0.1:3307/bench").unwrap();
        assert_eq!(
            (
                d.host.as_str(),
                d.port,
                d.user.as_str(),
                d.password.as_str()
            ),
            ("127.0.0.1", 3307, "bench", "secret")
        );
        assert_eq!(d.redacted(), "mysql://bench:***@127.0.0.1:3307/bench");
        assert_eq!(Db::parse("mysql://u@h/x").unwrap().port, 3306);
        assert!(Db::parse("postgres://x").is_err());
        assert!(Db::parse("mysql://u:p@:1/x").is_err());
    }

    #[test]
    fn targets_parse_and_nginx_static_serves_hello_only() {
        let e = external("swoole=http://127.0.0.1:9501/").unwrap();
        assert_eq!(e.name, "swoole");
        assert_eq!(
            e.recipe,
            Recipe::External {
                url: "http://127.0.0.1:9501".into()
            }
        );
        assert!(external("nourl").is_err());
        assert!(external("=http://x").is_err());
        let ns = catalog()
            .into_iter()
            .find(|e| e.name == "nginx-static")
            .unwrap();
        assert!(ns.serves("/hello") && ns.serves("/"));
        assert!(!ns.serves("/work"));
        let names: Vec<String> = catalog().into_iter().map(|e| e.name).collect();
        for n in [
            "event-loop",
            "event-loop-x2",
            "coroutine",
            "worker-pool",
            "node",
            "php-fpm",
            "nginx-static",
            "swoole",
            "roadrunner",
            "frankenphp",
        ] {
            assert!(names.contains(&n.to_string()), "{n}");
        }
    }
}
