//! The catalog of servers `harness compare` can start (docs/ARCHITECTURE.md §5).
//!
//! Each [`Entry`] is a recipe: can it run here ([`Entry::availability`]),
//! how to start it on a free port and know it is ready ([`Entry::start`]:
//! its `/hello` answers the contract), how to stop it ([`Running::stop`], and
//! `Drop`). Every process is started as its own process group leader in the
//! harness's session ([`supervise`]): it stays in the harness's scheduler
//! autogroup and is always stopped, also on errors and signals.
//!
//! One file per kind of recipe: [`workspace`] (the Rust reference servers),
//! [`node`], [`php_fpm`] (nginx + php-fpm), [`nginx_static`], [`caddy_static`], [`swoole`],
//! [`roadrunner`], [`frankenphp`]; `--target NAME=URL` servers are
//! [`Recipe::External`]. Where a third-party core departs from the
//! contract, [`deviations`] says so, once. Beside them, one file per concern the recipes
//! share: where things are found (`paths`), the database URL (`db`), where
//! a server runs ([`Placement`]), a started server ([`Running`]), this
//! machine's ports, programs and user (`host`), the spawn plumbing
//! (`spawn`), process supervision ([`supervise`]) and the private MariaDB
//! ([`embedded`]).

pub mod caddy_static;
pub mod container;
mod db;
pub mod deviations;
pub mod embedded;
pub mod frankenphp;
mod host;
pub mod http;
pub mod image;
pub mod nginx_static;
pub mod node;
pub mod outside;
mod paths;
pub mod php_ext;
pub mod php_fpm;
pub mod php_jit;
mod placement;
pub mod roadrunner;
mod running;
mod spawn;
pub mod supervise;
pub mod swoole;
pub mod tls;
pub mod workspace;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context};

pub use db::Db;
pub use host::{find_program, free_port, is_root, user_and_group, version_of};
pub use paths::Env;
pub use placement::{cpu_set, Placement};
pub use running::{wait_ready, Running};
use spawn::{nginx_command, run_dir, wait_announce, OnPort};

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
    /// Caddy's static answer (Go net/http, quic-go): HTTP/1.1, h2, h3.
    CaddyStatic,
    Swoole,
    RoadRunner,
    FrankenPhp,
    /// Started elsewhere (`--target NAME=URL`): only loaded, never started;
    /// metered where its processes are named (`--target-pid`,
    /// `--target-container`).
    External {
        url: String,
        processes: Option<outside::Processes>,
    },
    /// From its compose image `tag` ([`image`]): where the host has no
    /// binary or module for it, or `--from-image` asks.
    Image {
        way: image::ImageWay,
        tag: String,
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
        e("caddy-static", "event-loop", "go", Recipe::CaddyStatic),
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
    let target =
        crate::target::Target::parse(&url).with_context(|| format!("bad --target {spec:?}"))?;
    if target.tls {
        anyhow::bail!("bad --target {spec:?}: compare loads http:// targets only (not yet https)");
    }
    Ok(Entry {
        name: name.trim().to_string(),
        model: "external",
        language: "?",
        recipe: Recipe::External {
            url,
            processes: None,
        },
    })
}

/// What a recipe's `start` gets.
pub struct StartCtx<'a> {
    pub env: &'a Env,
    pub db: Option<&'a Db>,
    pub interrupt: &'a AtomicBool,
    /// The OPcache JIT of the PHP servers.
    pub php_jit: php_jit::PhpJit,
    /// `compare --tls`: the certificate every server terminates TLS with.
    pub tls: Option<&'a tls::ServerTls>,
    /// `compare --protocol h2c`: a server whose h2c cannot share its
    /// HTTP/1.1 port (nginx's `listen … http2` in the clear speaks only
    /// h2c, node:http2's cleartext server has no HTTP/1.1 fallback) serves
    /// it on a second listener too, [`Running::h2c`]. Servers that take
    /// h2c on their one port (the Rust servers) need nothing.
    pub h2c: bool,
    /// `compare --protocol h3`: a server that serves HTTP/3 only when asked
    /// (event-loop's `--h3`, with TLS) serves it too, on the UDP port of
    /// its TCP one's number. caddy-static serves h3 whenever it has TLS.
    pub h3: bool,
}

impl Entry {
    /// Whether it can run here, and if not why and what to install.
    pub fn availability(&self, env: &Env) -> Availability {
        match &self.recipe {
            Recipe::Workspace { binary, .. } => workspace::availability(env, binary),
            Recipe::Node => node::availability(env),
            Recipe::PhpFpm => php_fpm::availability(env),
            Recipe::NginxStatic => nginx_static::availability(),
            Recipe::CaddyStatic => caddy_static::availability(),
            Recipe::Swoole => swoole::availability(env),
            Recipe::RoadRunner => roadrunner::availability(env),
            Recipe::FrankenPhp => frankenphp::availability(env),
            Recipe::External { url, processes } => Availability::Ready(match processes {
                Some(p) => format!("started elsewhere: {url}, metered: {}", p.describe()),
                None => format!("started elsewhere: {url}"),
            }),
            Recipe::Image { way, tag } => Availability::Ready(way.runs_in(tag)),
        }
    }

    /// Whether it serves `path` at all (nginx-static serves only `/hello`).
    pub fn serves(&self, path: &str) -> bool {
        match self.recipe {
            Recipe::NginxStatic | Recipe::CaddyStatic => matches!(
                workloads::route("GET", path).map(|r| r.endpoint),
                Ok(workloads::Endpoint::Hello)
            ),
            _ => true,
        }
    }

    /// Whether it implements the whole contract (nginx-static answers
    /// `/hello` only: it is a ceiling, not a contender).
    pub fn serves_whole_contract(&self) -> bool {
        !matches!(self.recipe, Recipe::NginxStatic | Recipe::CaddyStatic)
    }

    /// HTTP/3: how it serves it (`Ok`), or why it does not (`Err`), for
    /// `harness servers` (`harness verify --h3` checks one that does).
    pub fn http3(&self) -> Result<&'static str, &'static str> {
        match &self.recipe {
            Recipe::Workspace {
                binary: "event-loop",
                ..
            } => Ok("event-loop --h3 (with --tls-cert): quinn + h3 on the UDP port of the TCP one's number"),
            Recipe::Workspace { .. } => {
                Err("HTTP/1.1 only: QUIC is built into the event loop alone")
            }
            Recipe::CaddyStatic => Ok("over TLS: quic-go on the UDP port of the TCP one's number"),
            Recipe::NginxStatic => {
                Err("nginx 1.22 has no QUIC module (ngx_http_v3_module came with 1.25)")
            }
            Recipe::PhpFpm => Err("php-fpm sits behind nginx 1.22, which has no QUIC module"),
            Recipe::Node => Err("Node.js has no stable HTTP/3 (node:quic is experimental)"),
            Recipe::Swoole => Err("Swoole's HTTP server speaks HTTP/1.1 and HTTP/2 only"),
            Recipe::RoadRunner => Err("RoadRunner's http plugin serves no HTTP/3"),
            Recipe::FrankenPhp => Err(
                "Caddy's quic-go where its Caddyfile lists h3; not served by compose/frankenphp's (h1 h2 h2c)",
            ),
            Recipe::External { .. } | Recipe::Image { .. } => {
                Err("started elsewhere: ask it (harness verify --h3)")
            }
        }
    }

    /// Whether [`Entry::start_placed`] can place it in an environment other
    /// than `bare` (`--env`, [`crate::env`]): every recipe the harness
    /// starts itself; a `--target` runs where it was started.
    pub fn placeable(&self) -> bool {
        !matches!(self.recipe, Recipe::External { .. } | Recipe::Image { .. })
    }

    /// Where it runs when it is not a process of this host, in words (a
    /// server from its image: a container), for results.json's `runs_in`.
    pub fn runs_in(&self) -> Option<String> {
        match &self.recipe {
            Recipe::Image { way, tag } => Some(way.runs_in(tag)),
            _ => None,
        }
    }

    /// The same server, run from its compose image `tag`.
    pub fn from_image(&self, way: image::ImageWay, tag: String) -> Entry {
        Entry {
            recipe: Recipe::Image { way, tag },
            ..self.clone()
        }
    }

    /// Starts it where `placement` says (a network namespace, CPUs, the
    /// address to listen on, the database as seen from there; every process
    /// of the server, nginx and php-fpm alike, enters them before exec) and
    /// waits until its `/hello` answers the contract.
    pub fn start_placed(&self, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
        let mut running = match &self.recipe {
            Recipe::Workspace {
                binary,
                workers,
                db_pool,
            } => workspace::start(self, ctx, binary, *workers, *db_pool, placement)?,
            Recipe::Node => node::start(self, ctx, placement)?,
            Recipe::PhpFpm => php_fpm::start(self, ctx, placement)?,
            Recipe::NginxStatic => nginx_static::start(self, ctx, placement)?,
            Recipe::CaddyStatic => caddy_static::start(self, ctx, placement)?,
            Recipe::Swoole => swoole::start(self, ctx, placement)?,
            Recipe::RoadRunner => roadrunner::start(self, ctx, placement)?,
            Recipe::FrankenPhp => frankenphp::start(self, ctx, placement)?,
            Recipe::Image { way, tag } => way.start(tag, self, ctx, placement)?,
            Recipe::External { url, processes } => {
                if !placement.is_default() {
                    bail!(
                        "{}: a server started elsewhere ({url}) cannot be placed",
                        self.name
                    );
                }
                // Started elsewhere: it must answer, the contract is judged later.
                let mut running = Running::external(&self.name, url)?;
                running
                    .get("/hello", Duration::from_secs(5))
                    .with_context(|| format!("{} ({url}) does not answer", self.name))?;
                if let Some(p) = processes {
                    let roots = p
                        .roots()
                        .with_context(|| format!("--target {}", self.name))?;
                    running.notes.push(format!(
                        "{}: started elsewhere; its CPU and RSS are those of {} ({} process \
                         tree{} at its start)",
                        self.name,
                        p.describe(),
                        roots.len(),
                        if roots.len() == 1 { "" } else { "s" }
                    ));
                    running.outside = Some(p.clone());
                }
                return Ok(running);
            }
        };
        running.tls = ctx.tls.map(|t| t.client.clone());
        wait_ready(&mut running, ctx.interrupt, READY_TIMEOUT)?;
        Ok(running)
    }

    /// Starts it on loopback, unplaced, and waits until `/hello` answers.
    pub fn start(&self, ctx: &StartCtx) -> anyhow::Result<Running> {
        self.start_placed(ctx, &Placement::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_nginx_static_serves_hello_only() {
        let e = external("swoole=http://127.0.0.1:9501/").unwrap();
        assert_eq!(e.name, "swoole");
        assert_eq!(
            e.recipe,
            Recipe::External {
                url: "http://127.0.0.1:9501".into(),
                processes: None,
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
            "caddy-static",
            "swoole",
            "roadrunner",
            "frankenphp",
        ] {
            assert!(names.contains(&n.to_string()), "{n}");
        }
    }
}
