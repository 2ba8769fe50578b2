//! Environments a server is measured in (docs/ARCHITECTURE.md §6): `bare` loopback,
//! `pinned` CPU sets, a Docker-like `bridge` (network namespace + veth +
//! Linux bridge + DNAT from 127.0.0.1), `bridge-direct` (the same reached
//! at the namespace's address, no NAT: what the DNAT adds is the difference)
//! and `bridge-proxy` (the same behind a userland TCP proxy, docker-proxy's
//! role for host-local clients); and the real Docker Engine ([`docker`]):
//! `docker` (its default bridge with a published port), `docker-host` and
//! `docker-host-pinned`.
//!
//! [`Setup::build`] makes an environment; dropping the [`Setup`] tears it
//! down (namespaces, links, the nftables table, `route_localnet`), also on
//! errors and panics; on a signal the catalog's emergency cleanup
//! ([`crate::catalog::supervise`]) calls [`bridge::teardown_all`].
//!
//! Starting a server is the environment's: [`Setup::start`] makes a
//! [`crate::catalog::Placement`] (which network namespace, which CPUs, or
//! which container; which address to listen on, where its database is),
//! the recipe applies it to each `Command` it spawns (entering the
//! namespace and CPU set, or becoming a `docker run` of itself), then the
//! setup checks that the placement took ([`Setup::verify`]) and publishes
//! the server ([`Setup::publish`]: the DNAT port, the proxy's, or the
//! container's published port). The load generator's side of `pinned` is
//! [`Setup::pin_load`].

pub mod bridge;
pub mod docker;
pub mod pinned;
pub mod proxy;
pub mod tls_proxy;

use std::net::SocketAddr;

use anyhow::{bail, Context};

use crate::catalog::{self, Db, Entry, Placement, Running, StartCtx};

/// One environment of `--env`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Environment {
    Bare,
    Pinned,
    BridgeDirect,
    Bridge,
    BridgeProxy,
    Docker,
    DockerHost,
    DockerHostPinned,
    TlsServer,
    TlsProxy,
}

impl Environment {
    pub const ALL: [Environment; 10] = [
        Environment::Bare,
        Environment::Pinned,
        Environment::BridgeDirect,
        Environment::Bridge,
        Environment::BridgeProxy,
        Environment::Docker,
        Environment::DockerHost,
        Environment::DockerHostPinned,
        Environment::TlsServer,
        Environment::TlsProxy,
    ];

    /// The real Docker Engine's environments.
    pub const DOCKER: [Environment; 3] = [
        Environment::Docker,
        Environment::DockerHost,
        Environment::DockerHostPinned,
    ];

    /// Whether it runs the server in a Docker container.
    pub fn is_docker(self) -> bool {
        Environment::DOCKER.contains(&self)
    }

    pub fn name(self) -> &'static str {
        match self {
            Environment::Bare => "bare",
            Environment::Pinned => "pinned",
            Environment::BridgeDirect => "bridge-direct",
            Environment::Bridge => "bridge",
            Environment::BridgeProxy => "bridge-proxy",
            Environment::Docker => "docker",
            Environment::DockerHost => "docker-host",
            Environment::DockerHostPinned => "docker-host-pinned",
            Environment::TlsServer => "tls-server",
            Environment::TlsProxy => "tls-proxy",
        }
    }

    /// What the environment is, in a line.
    pub fn describe(self) -> &'static str {
        match self {
            Environment::Bare => "loopback, no placement",
            Environment::Pinned => {
                "server and load generator on disjoint CPU sets (sched_setaffinity)"
            }
            Environment::BridgeDirect => {
                "server in a network namespace, veth + Linux bridge, reached at its own \
                 address, no NAT (a client on the same Docker network, or the container's IP)"
            }
            Environment::Bridge => {
                "server in a network namespace, veth + Linux bridge, port published by \
                 nftables DNAT from 127.0.0.1 (Docker bridge, userland-proxy: false)"
            }
            Environment::BridgeProxy => {
                "as bridge, reached through a userland TCP proxy (docker-proxy, the \
                 default for connections from the host itself)"
            }
            Environment::Docker => {
                "a Docker container on a bridge network of the lab's, its port published on \
                 127.0.0.1 (docker-proxy, as for connections from the host itself); the \
                 database in a container of the same network"
            }
            Environment::DockerHost => {
                "a Docker container with --network host; the database on the host's loopback"
            }
            Environment::DockerHostPinned => {
                "as docker-host, with --cpuset-cpus, the load generator on the other CPUs \
                 (the seed's production advice; pinned is its bare counterpart)"
            }
            Environment::TlsServer => {
                "loopback, the server terminating TLS itself with a certificate made for the \
                 run (as compare --tls): what TLS costs the server"
            }
            Environment::TlsProxy => {
                "loopback behind an nginx terminating TLS (a certificate made for the run), \
                 plain HTTP/1.1 to the server over kept-alive upstream connections; nginx's \
                 CPU is metered with the server's"
            }
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Environment> {
        let s = s.trim();
        Environment::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .with_context(|| {
                format!(
                    "unknown environment {s:?}; known: {}",
                    Environment::ALL.map(Environment::name).join(", ")
                )
            })
    }

    /// A comma list (already split by clap), without duplicates, in order.
    pub fn parse_list(specs: &[String]) -> anyhow::Result<Vec<Environment>> {
        let mut out = Vec::new();
        for s in specs.iter().filter(|s| !s.trim().is_empty()) {
            let e = Environment::parse(s)?;
            if !out.contains(&e) {
                out.push(e);
            }
        }
        if out.is_empty() {
            bail!("no environment given (--env bare,pinned,bridge-direct,bridge,bridge-proxy)");
        }
        Ok(out)
    }

    /// `Ok` if it can be built here, else why not (shown as "not available").
    pub fn availability(self) -> Result<(), String> {
        match self {
            Environment::Bare => Ok(()),
            Environment::Pinned => pinned::Split::of_this_process().map(|_| ()),
            Environment::BridgeDirect | Environment::Bridge | Environment::BridgeProxy => {
                bridge::availability()
            }
            Environment::Docker | Environment::DockerHost => docker::Engine::probe().map(|_| ()),
            Environment::DockerHostPinned => {
                docker::Engine::probe()?;
                pinned::Split::of_this_process().map(|_| ())
            }
            Environment::TlsServer => Ok(()),
            Environment::TlsProxy => tls_proxy::availability(),
        }
    }
}

/// A built environment; `Drop` tears it down.
pub struct Setup {
    pub env: Environment,
    /// Publications whose owner cannot hold them ([`Setup::publish_kept`]);
    /// dropped before the bridge.
    kept: std::sync::Mutex<Vec<Published>>,
    kind: Kind,
}

enum Kind {
    Bare,
    Pinned(pinned::Split),
    Bridge(bridge::Bridge, Reach),
    Docker(Box<docker::Docker>),
    /// The server terminates TLS itself with this certificate.
    TlsServer(tls_proxy::LabTls),
    TlsProxy(tls_proxy::TlsFront),
}

/// How the load reaches a server in the bridge.
#[derive(Clone, Copy)]
enum Reach {
    /// At the namespace's own address (`bridge-direct`).
    Direct,
    /// At a port of 127.0.0.1 DNAT'd to it (`bridge`).
    Dnat,
    /// Through a userland proxy in front of its address (`bridge-proxy`).
    Proxy,
}

/// A server started, placed and published by [`Setup::start`].
pub struct Started {
    /// Its `addr` is where the load goes (the published address).
    pub running: Running,
    /// How the load reaches it, in words (`127.0.0.1:P → DNAT → …`).
    pub route: String,
    /// What the placement check verified, in words.
    pub checks: Vec<String>,
}

/// How the load reaches a server; owns the proxy, if any.
pub struct Published {
    pub addr: SocketAddr,
    /// What the path is, for reports (`127.0.0.1:P → DNAT → 198.18.x.2:Q`).
    pub path: String,
    _proxy: Option<proxy::Proxy>,
}

impl Setup {
    /// Builds `env` here. `db_port`: the TCP port of a database on
    /// 127.0.0.1 that servers inside a namespace must reach. A Docker
    /// environment needs more: [`Setup::build_for`].
    pub fn build(env: Environment, db_port: Option<u16>) -> anyhow::Result<Setup> {
        let db = db_port
            .map(|p| Db::parse(&format!("mysql://bench:bench@127.0.0.1:{p}/bench")))
            .transpose()?;
        Setup::build_for(env, db.as_ref(), &catalog::Env::discover(None))
    }

    /// Builds `env` here for servers found in `paths` that must reach the
    /// session's database `db`.
    pub fn build_for(
        env: Environment,
        db: Option<&Db>,
        paths: &catalog::Env,
    ) -> anyhow::Result<Setup> {
        let db_port = db
            .filter(|d| d.host == "127.0.0.1" || d.host == "localhost")
            .map(|d| d.port);
        let kind = match env {
            Environment::Bare => Kind::Bare,
            Environment::Pinned => {
                Kind::Pinned(pinned::Split::of_this_process().map_err(anyhow::Error::msg)?)
            }
            Environment::BridgeDirect => {
                Kind::Bridge(bridge::Bridge::build(db_port)?, Reach::Direct)
            }
            Environment::Bridge => Kind::Bridge(bridge::Bridge::build(db_port)?, Reach::Dnat),
            Environment::BridgeProxy => Kind::Bridge(bridge::Bridge::build(db_port)?, Reach::Proxy),
            Environment::Docker | Environment::DockerHost | Environment::DockerHostPinned => {
                if let Err(why) = env.availability() {
                    bail!("{}: not available: {why}", env.name());
                }
                let mode = match env {
                    Environment::Docker => docker::Mode::Bridge,
                    Environment::DockerHost => docker::Mode::Host,
                    _ => docker::Mode::HostPinned(
                        pinned::Split::of_this_process().map_err(anyhow::Error::msg)?,
                    ),
                };
                Kind::Docker(Box::new(docker::Docker::build(mode, paths, db)?))
            }
            Environment::TlsServer => Kind::TlsServer(tls_proxy::LabTls::new()?),
            Environment::TlsProxy => Kind::TlsProxy(tls_proxy::TlsFront::new()?),
        };
        Ok(Setup {
            env,
            kept: std::sync::Mutex::new(Vec::new()),
            kind,
        })
    }

    /// Where the next server goes (each call a new one: a container
    /// placement holds the port it publishes).
    pub fn placement(&self) -> anyhow::Result<Placement> {
        Ok(match &self.kind {
            Kind::Bare | Kind::TlsServer(_) | Kind::TlsProxy(_) => Placement::default(),
            Kind::Pinned(s) => Placement {
                cpus: Some(s.server.clone()),
                ..Placement::default()
            },
            Kind::Bridge(b, _) => Placement {
                netns: Some(b.netns.clone()),
                listen_ip: Some(b.ns_ip),
                db_host: Some(b.host_ip.to_string()),
                ..Placement::default()
            },
            Kind::Docker(d) => d.placement()?,
        })
    }

    /// Starts `entry` here: placed as this environment places servers,
    /// ready (its `/hello` answers), checked (every process where the
    /// placement says) and published (where the load goes).
    pub fn start(&self, entry: &Entry, ctx: &StartCtx) -> anyhow::Result<Started> {
        if let Kind::TlsServer(lab) = &self.kind {
            crate::catalog::tls::support(entry).map_err(anyhow::Error::msg)?;
            let ctx = StartCtx {
                env: ctx.env,
                db: ctx.db,
                interrupt: ctx.interrupt,
                php_jit: ctx.php_jit,
                tls: Some(&lab.tls),
                h2c: ctx.h2c,
                h3: ctx.h3,
            };
            let running = entry.start_placed(&ctx, &Placement::default())?;
            let route = format!("{} (loopback, TLS terminated by the server)", running.addr);
            return Ok(Started {
                running,
                route,
                checks: Vec::new(),
            });
        }
        let mut running = entry.start_placed(ctx, &self.placement()?)?;
        let checks = self.verify(&running.pids())?;
        if let Kind::TlsProxy(front) = &self.kind {
            let route = front.put_in_front(&mut running, ctx.interrupt)?;
            return Ok(Started {
                running,
                route,
                checks,
            });
        }
        let route = self.publish_kept(&mut running)?;
        Ok(Started {
            running,
            route,
            checks,
        })
    }

    /// The load generator's threads: the CPUs it may use in this environment.
    pub fn load_cpus(&self) -> Option<&[usize]> {
        match &self.kind {
            Kind::Pinned(s) => Some(&s.load),
            Kind::Docker(d) => d.load_cpus(),
            _ => None,
        }
    }

    /// The process of the database the servers of this environment use,
    /// where it is the environment's own (Docker's bridge: a container).
    pub fn db_pid(&self) -> Option<u32> {
        match &self.kind {
            Kind::Docker(d) => d.db_pid(),
            _ => None,
        }
    }

    /// Processes of the path between the load and `running` that are
    /// neither (docker-proxy on Docker's bridge), to meter.
    pub fn path_pids(&self, running: &Running) -> Vec<u32> {
        match &self.kind {
            Kind::Docker(d) => d.proxy_pids(running.addr.port()),
            _ => Vec::new(),
        }
    }

    /// The environment's own database (Docker's bridge), to stop and restart.
    pub fn own_database(&mut self) -> Option<&mut embedded_mariadb::MariaDb> {
        match &mut self.kind {
            Kind::Docker(d) => d.database(),
            _ => None,
        }
    }

    /// The Docker environment, in `docker`, `docker-host` and `docker-host-pinned`.
    pub fn docker(&self) -> Option<&docker::Docker> {
        match &self.kind {
            Kind::Docker(d) => Some(d),
            _ => None,
        }
    }

    /// Pins the calling thread to the load generator's CPUs (threads it
    /// spawns afterwards, the engine's, inherit them) until the guard drops.
    pub fn pin_load(&self) -> anyhow::Result<Option<pinned::ThreadPin>> {
        self.load_cpus().map(pinned::ThreadPin::to).transpose()
    }

    /// Where the load goes to reach `server` (its own address on bare,
    /// pinned and bridge-direct; a DNAT'd port on 127.0.0.1; a userland
    /// proxy's port).
    pub fn publish(&self, server: SocketAddr) -> anyhow::Result<Published> {
        match &self.kind {
            Kind::Bare | Kind::Pinned(_) | Kind::TlsServer(_) | Kind::TlsProxy(_) => {
                Ok(Published {
                    addr: server,
                    path: format!("{server} (loopback)"),
                    _proxy: None,
                })
            }
            Kind::Bridge(b, Reach::Direct) => Ok(Published {
                addr: server,
                path: format!("{server} via {} (no NAT)", b.bridge),
                _proxy: None,
            }),
            Kind::Bridge(b, Reach::Dnat) => {
                let addr = b.publish(server)?;
                Ok(Published {
                    addr,
                    path: format!("{addr} → DNAT → {server} via {}", b.bridge),
                    _proxy: None,
                })
            }
            Kind::Bridge(b, Reach::Proxy) => {
                let p = proxy::Proxy::start(server)?;
                Ok(Published {
                    addr: p.addr,
                    path: format!("{} → userland proxy → {server} via {}", p.addr, b.bridge),
                    _proxy: Some(p),
                })
            }
            Kind::Docker(d) => Ok(Published {
                addr: server,
                path: match d.mode {
                    docker::Mode::Bridge => format!(
                        "{server} → docker-proxy → container :{} on a bridge network",
                        server.port()
                    ),
                    _ => format!("{server} (loopback, --network host)"),
                },
                _proxy: None,
            }),
        }
    }

    /// Publishes `running` and points its address at the publication, which
    /// lives as long as the setup (a proxy keeps its thread until teardown):
    /// for callers that keep only the [`Running`] (`compare`).
    pub fn publish_kept(&self, running: &mut Running) -> anyhow::Result<String> {
        let p = self.publish(running.addr)?;
        Setup::redirect(running, &p);
        let route = p.path.clone();
        if p._proxy.is_some() {
            self.kept.lock().unwrap_or_else(|e| e.into_inner()).push(p);
        }
        Ok(route)
    }

    /// Points a started server's address (and `Host`) at `published`.
    pub fn redirect(running: &mut Running, published: &Published) {
        running.addr = published.addr;
        running.authority = published.addr.to_string();
    }

    /// Checks that the placement took: every process of the server's tree
    /// on the server's CPUs, this thread on the load's, disjoint; a server
    /// in the namespace. Returns what was checked, in words.
    pub fn verify(&self, server_pids: &[u32]) -> anyhow::Result<Vec<String>> {
        match &self.kind {
            Kind::Bare | Kind::TlsServer(_) | Kind::TlsProxy(_) => Ok(Vec::new()),
            Kind::Pinned(s) => s.verify(server_pids),
            Kind::Bridge(b, _) => b.verify(server_pids),
            Kind::Docker(d) => d.verify(server_pids),
        }
    }

    /// The bridge, in `bridge-direct`, `bridge` and `bridge-proxy`.
    pub fn bridge(&self) -> Option<&bridge::Bridge> {
        match &self.kind {
            Kind::Bridge(b, _) => Some(b),
            _ => None,
        }
    }

    /// A line about what was built.
    pub fn detail(&self) -> String {
        match &self.kind {
            Kind::Bare => "127.0.0.1".into(),
            Kind::Pinned(s) => format!(
                "server on CPUs {}, load generator on CPUs {} (the database is not placed)",
                pinned::list(&s.server),
                pinned::list(&s.load)
            ),
            Kind::Bridge(b, _) => format!(
                "netns {} ({}) ↔ veth {} ↔ bridge {} ({}); nft table ip {}",
                b.netns, b.ns_ip, b.veth_host, b.bridge, b.host_ip, b.table
            ),
            Kind::Docker(d) => d.detail(),
            Kind::TlsServer(_) => "127.0.0.1, TLS 1.3 terminated by the server".into(),
            Kind::TlsProxy(_) => "127.0.0.1 behind nginx terminating TLS 1.3/1.2 \
                                  (its processes metered with the server's)"
                .into(),
        }
    }

    /// Tears down now (also done on drop); returns what could not be removed.
    pub fn teardown(&mut self) -> Vec<String> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
        match &mut self.kind {
            Kind::Bridge(b, _) => b.teardown(),
            Kind::Docker(d) => d.teardown(),
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environments_parse_by_name() {
        let l = Environment::parse_list(&[
            "bare".into(),
            " bridge-proxy".into(),
            "bare".into(),
            "".into(),
        ])
        .unwrap();
        assert_eq!(l, vec![Environment::Bare, Environment::BridgeProxy]);
        assert!(Environment::parse("docker-bridge").is_err());
        assert!(Environment::parse_list(&[]).is_err());
        for e in Environment::ALL {
            assert_eq!(Environment::parse(e.name()).unwrap(), e);
        }
    }
}
