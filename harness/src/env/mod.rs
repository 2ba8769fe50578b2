//! Environments a server is measured in (docs/ARCHITECTURE.md §6): `bare` loopback,
//! `pinned` CPU sets, a Docker-like `bridge` (network namespace + veth +
//! Linux bridge + DNAT from 127.0.0.1), `bridge-direct` (the same reached
//! at the namespace's address, no NAT: what the DNAT adds is the difference)
//! and `bridge-proxy` (the same behind a userland TCP proxy, docker-proxy's
//! role for host-local clients);
//! `docker-bridge` and `docker-host` are only detected.
//!
//! [`Setup::build`] makes an environment; dropping the [`Setup`] tears it
//! down (namespaces, links, the nftables table, `route_localnet`), also on
//! errors and panics; on a signal the catalog's emergency cleanup
//! ([`crate::catalog::supervise`]) calls [`bridge::teardown_all`].
//!
//! A server is placed by a [`crate::catalog::Placement`] (which network
//! namespace, which CPUs, which address to listen on, where its database
//! is) that [`Setup::placement`] makes and the recipes apply to their
//! `Command` before the spawn; the load generator's side of `pinned` is
//! [`Setup::pin_load`], and [`Setup::publish`] turns the server's address
//! into the one the load goes to (the DNAT port, or the proxy's).

pub mod bridge;
pub mod pinned;
pub mod proxy;

use std::net::SocketAddr;
use std::process::Command;

use anyhow::{bail, Context};

use crate::catalog::{Placement, Running};

/// One environment of `--env`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Environment {
    Bare,
    Pinned,
    BridgeDirect,
    Bridge,
    BridgeProxy,
    DockerBridge,
    DockerHost,
}

impl Environment {
    pub const ALL: [Environment; 7] = [
        Environment::Bare,
        Environment::Pinned,
        Environment::BridgeDirect,
        Environment::Bridge,
        Environment::BridgeProxy,
        Environment::DockerBridge,
        Environment::DockerHost,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Environment::Bare => "bare",
            Environment::Pinned => "pinned",
            Environment::BridgeDirect => "bridge-direct",
            Environment::Bridge => "bridge",
            Environment::BridgeProxy => "bridge-proxy",
            Environment::DockerBridge => "docker-bridge",
            Environment::DockerHost => "docker-host",
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
            Environment::DockerBridge => "compose/ with Docker's default bridge network",
            Environment::DockerHost => "compose/ with host networking and cpuset",
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
            Environment::DockerBridge | Environment::DockerHost => match docker_answers() {
                Ok(()) => Err("a Docker engine answers, but this harness does not drive \
                     compose/ yet: run compose/ and use `harness compare --target`"
                    .into()),
                Err(why) => Err(why),
            },
        }
    }
}

/// Whether `docker info` succeeds.
pub fn docker_answers() -> Result<(), String> {
    let Some(docker) = crate::catalog::find_program(&["docker"]) else {
        return Err("no Docker engine answers (no docker client installed)".into());
    };
    match Command::new(docker)
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(_) | Err(_) => Err("no Docker engine answers (`docker info` fails)".into()),
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

/// How the load reaches a server; owns the proxy, if any.
pub struct Published {
    pub addr: SocketAddr,
    /// What the path is, for reports (`127.0.0.1:P → DNAT → 198.18.x.2:Q`).
    pub path: String,
    _proxy: Option<proxy::Proxy>,
}

impl Setup {
    /// Builds `env` here. `db_port`: the TCP port of a database on
    /// 127.0.0.1 that servers inside a namespace must reach.
    pub fn build(env: Environment, db_port: Option<u16>) -> anyhow::Result<Setup> {
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
            Environment::DockerBridge | Environment::DockerHost => {
                bail!(
                    "{}: not available: {}",
                    env.name(),
                    env.availability().err().unwrap_or_default()
                )
            }
        };
        Ok(Setup {
            env,
            kept: std::sync::Mutex::new(Vec::new()),
            kind,
        })
    }

    /// Where the server goes.
    pub fn placement(&self) -> Placement {
        match &self.kind {
            Kind::Bare => Placement::default(),
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
        }
    }

    /// The load generator's threads: the CPUs it may use in this environment.
    pub fn load_cpus(&self) -> Option<&[usize]> {
        match &self.kind {
            Kind::Pinned(s) => Some(&s.load),
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
            Kind::Bare | Kind::Pinned(_) => Ok(Published {
                addr: server,
                path: format!("{server} (loopback)"),
                _proxy: None,
            }),
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
            Kind::Bare => Ok(Vec::new()),
            Kind::Pinned(s) => s.verify(server_pids),
            Kind::Bridge(b, _) => b.verify(server_pids),
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
        }
    }

    /// Tears down now (also done on drop); returns what could not be removed.
    pub fn teardown(&mut self) -> Vec<String> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
        match &mut self.kind {
            Kind::Bridge(b, _) => b.teardown(),
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
        assert!(Environment::parse("docker").is_err());
        assert!(Environment::parse_list(&[]).is_err());
        for e in Environment::ALL {
            assert_eq!(Environment::parse(e.name()).unwrap(), e);
        }
    }
}
