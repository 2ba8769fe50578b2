//! The real Docker Engine as an environment: `docker` (a container on a
//! bridge network the lab creates, its port published on 127.0.0.1 through
//! docker-proxy), `docker-host` (`--network host`) and `docker-host-pinned`
//! (`--network host` + `--cpuset-cpus`, the load generator on the other
//! CPUs, as the seed's production advice).
//!
//! What runs inside is what runs bare: the same programs (our binaries and
//! the host's Node.js mounted read-only, Debian's php-fpm, nginx and MariaDB
//! at the host's own versions in the [`image`]), the same arguments and
//! configuration files (the repository mounted read-only at its own path),
//! so the difference measured is Docker's alone.
//!
//! The database crosses Docker's network as the clients' requests do: on the
//! bridge, a MariaDB container on the same network reached by name (the
//! embedded MariaDB's own settings, [`embedded_mariadb::Launcher`]); on the
//! host network, the host's loopback.
//!
//! Everything made is labelled with this process's pid and the setup's id
//! ([`crate::catalog::container::PID_LABEL`]) and removed on teardown, on
//! drop (errors, panics) and on the signal path ([`teardown_all`]); a later
//! run sweeps what a killed harness left ([`sweep_leftovers`]). Only the
//! cached images stay.

pub mod image;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};

use crate::catalog::container::{self, Container, Network, Pod, PID_LABEL, SETUP_LABEL};
use crate::catalog::{self, Db, Placement};
use crate::env::pinned;

/// A Docker Engine that answers.
#[derive(Clone, Debug)]
pub struct Engine {
    pub docker: PathBuf,
    /// The daemon's version (`20.10.24+dfsg1`).
    pub version: String,
    /// Its storage driver (`overlay2`).
    pub storage_driver: String,
    /// `cgroupfs v1`.
    pub cgroup: String,
}

impl Engine {
    /// The engine on the default socket, or why there is none.
    pub fn probe() -> Result<Engine, String> {
        let Some(docker) = catalog::find_program(&["docker"]) else {
            return Err("no docker client installed (apt-get install docker.io; \
                 scripts/install-deps does and starts dockerd)"
                .into());
        };
        let out = Command::new(&docker)
            .args([
                "info",
                "--format",
                "{{.ServerVersion}}\t{{.Driver}}\t{{.CgroupDriver}} v{{.CgroupVersion}}",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", docker.display()))?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let fields: Vec<&str> = text.split('\t').collect();
        if !out.status.success() || fields.len() != 3 || fields[0].is_empty() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!(
                "no Docker engine answers (`docker info`: {}); start one \
                 (scripts/install-deps starts dockerd)",
                first.trim()
            ));
        }
        Ok(Engine {
            docker,
            version: fields[0].to_string(),
            storage_driver: fields[1].to_string(),
            cgroup: fields[2].to_string(),
        })
    }

    /// `Docker Engine 20.10.24, overlay2, cgroupfs v1`.
    pub fn describe(&self) -> String {
        format!(
            "Docker Engine {}, {}, {}",
            self.version, self.storage_driver, self.cgroup
        )
    }

    /// `docker ARGS`, its stdout if it succeeded, else an error with its stderr.
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(&self.docker)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run docker {}", args.join(" ")))?;
        if !out.status.success() {
            bail!(
                "docker {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// How the server's containers are networked and placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Bridge,
    Host,
    /// Host networking, the server on `server` CPUs, the load on `load`.
    HostPinned(pinned::Split),
}

/// A built Docker environment; `Drop` removes what it made.
pub struct Docker {
    pub engine: Engine,
    pub image: image::Image,
    pub mode: Mode,
    /// `<pid>-<n>`: names and labels of what this setup made.
    id: String,
    /// The lab's bridge network (bridge mode).
    network: Option<String>,
    /// The database container (bridge mode, when servers need one).
    db: Option<DbContainer>,
    /// Host paths the containers read (mounted read-only).
    read_only: Vec<PathBuf>,
    torn_down: bool,
}

/// The bridge mode's MariaDB, in a container of the lab's network.
struct DbContainer {
    /// The embedded MariaDB whose `mariadbd` runs in the container.
    mariadb: embedded_mariadb::MariaDb,
    /// The container's name: the host name the servers reach it at.
    name: String,
}

fn next_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Docker {
    /// Builds the environment: the engine, the image (built once, cached),
    /// the network and, on the bridge, the database container. `db`: the
    /// session's database, which servers must reach.
    pub fn build(mode: Mode, paths: &catalog::Env, db: Option<&Db>) -> anyhow::Result<Docker> {
        let engine = Engine::probe().map_err(anyhow::Error::msg)?;
        sweep_leftovers(&engine);
        catalog::supervise::register_cleanup(teardown_all);
        let image = image::lab_image(&engine)?;
        let id = next_id();
        let mut read_only: Vec<PathBuf> = vec![paths.repo.clone()];
        read_only.extend(paths.bin_dirs.iter().filter(|d| d.is_dir()).cloned());
        // The host's Node.js is not always Debian's (here: another vendor's
        // build): the same program is mounted rather than another installed.
        read_only.extend(catalog::find_program(&["node", "nodejs"]).map(|p| real_path(&p)));
        // Caddy comes from `go install` (no Debian package at its version):
        // caddy-static runs the host's program, mounted the same way.
        read_only.extend(catalog::find_program(&["caddy"]).map(|p| real_path(&p)));
        read_only.sort();
        read_only.dedup();
        let mut docker = Docker {
            engine,
            image,
            mode,
            id,
            network: None,
            db: None,
            read_only,
            torn_down: false,
        };
        if docker.mode == Mode::Bridge {
            let name = format!("benchlab-{}", docker.id);
            docker
                .engine
                .run(&[
                    "network",
                    "create",
                    "--driver",
                    "bridge",
                    "--label",
                    &format!("{PID_LABEL}={}", std::process::id()),
                    "--label",
                    &format!("{SETUP_LABEL}={}", docker.id),
                    &name,
                ])
                .context("cannot create the lab's bridge network")?;
            docker.network = Some(name);
            if let Some(db) = db {
                docker.db = Some(docker.start_database(db)?);
            }
        }
        Ok(docker)
    }

    /// The labels every container and network of this setup gets.
    fn labels(&self) -> Vec<(String, String)> {
        vec![
            (PID_LABEL.into(), std::process::id().to_string()),
            (SETUP_LABEL.into(), self.id.clone()),
        ]
    }

    /// A MariaDB with the embedded database's settings in a container on the
    /// lab's network (port published on 127.0.0.1 for the harness's own
    /// readiness check and probes; the servers reach it by name).
    fn start_database(&self, session: &Db) -> anyhow::Result<DbContainer> {
        if (
            session.user.as_str(),
            session.password.as_str(),
            session.name.as_str(),
        ) != ("bench", "bench", "bench")
        {
            bail!(
                "docker: the servers on Docker's bridge reach a database container of the \
                 lab's (bench/bench@…/bench, as the private MariaDB); --mysql-url {} is \
                 another database: use docker-host, or leave out --mysql-url",
                session.url
            );
        }
        let name = format!("benchlab-{}-db", self.id);
        let port = catalog::free_port()?;
        let c = Container {
            docker: self.engine.docker.clone(),
            image: self.image.tag.clone(),
            network: Network::Bridge {
                network: self.network.clone().expect("bridge network"),
                port,
            },
            name_prefix: String::new(),
            labels: self.labels(),
            read_only: Vec::new(),
            files: Vec::new(),
            image_command: false,
            inner_port: None,
            cpus: None,
            pod: Pod::default(),
        };
        let fixed_name = name.clone();
        let launcher = embedded_mariadb::Launcher(Arc::new(move |cmd: Command| {
            // Its one read-write mount: the temp dir that holds the datadir,
            // socket, pid file and init file (`--datadir=DIR/data`).
            let dir = cmd
                .get_args()
                .filter_map(|a| a.to_str())
                .find_map(|a| a.strip_prefix("--datadir="))
                .and_then(|d| Path::new(d).parent().map(Path::to_path_buf))
                .unwrap_or_default();
            // Each start is a container of its own (a restart is a new
            // `docker run`, not one that joins the last one's network).
            let fresh = Container {
                pod: Pod::default(),
                ..c.clone()
            };
            fresh.wrap_as(&cmd, &dir, &fixed_name)
        }));
        let opts = embedded_mariadb::Options {
            port: Some(port),
            bind_address: "0.0.0.0".into(),
            launcher: Some(launcher),
            ..embedded_mariadb::Options::default()
        };
        eprintln!("docker: starting the database container {name} (MariaDB from the image)");
        let mariadb = embedded_mariadb::MariaDb::start(opts)
            .context("the database container did not start")?;
        Ok(DbContainer { mariadb, name })
    }

    /// Where a server goes: its container, network, CPUs and database.
    pub fn placement(&self) -> anyhow::Result<Placement> {
        let (network, cpus, listen_ip) = match &self.mode {
            Mode::Bridge => (
                Network::Bridge {
                    network: self.network.clone().expect("bridge network"),
                    port: catalog::free_port()?,
                },
                None,
                Some(std::net::Ipv4Addr::UNSPECIFIED),
            ),
            Mode::Host => (Network::Host, None, None),
            Mode::HostPinned(s) => (Network::Host, Some(s.server.clone()), None),
        };
        let mut p = Placement {
            listen_ip,
            container: Some(Container {
                docker: self.engine.docker.clone(),
                image: self.image.tag.clone(),
                network,
                name_prefix: format!("benchlab-{}-", self.id),
                labels: self.labels(),
                read_only: self.read_only.clone(),
                files: Vec::new(),
                image_command: false,
                inner_port: None,
                cpus,
                pod: Pod::default(),
            }),
            ..Placement::default()
        };
        if let Some(db) = &self.db {
            p.db_host = Some(db.name.clone());
            p.db_port = Some(db.mariadb.port());
        }
        Ok(p)
    }

    /// The database container's `mariadbd`, for metering (bridge mode).
    pub fn db_pid(&self) -> Option<u32> {
        let db = self.db.as_ref()?;
        let init = container::init_pid(&self.engine.docker, &db.name)?;
        crate::procfs::tree(&[init])
            .into_iter()
            .find(|s| s.pid as u32 != init)
            .map(|s| s.pid as u32)
    }

    /// The docker-proxy processes that relay the published `port` (bridge
    /// mode): a part of the path, metered like the database.
    pub fn proxy_pids(&self, port: u16) -> Vec<u32> {
        if self.mode != Mode::Bridge {
            return Vec::new();
        }
        docker_proxies(port)
    }

    /// The database container's MariaDB (to stop and restart it).
    pub fn database(&mut self) -> Option<&mut embedded_mariadb::MariaDb> {
        self.db.as_mut().map(|d| &mut d.mariadb)
    }

    /// Checks that every process of the server runs in a container of this
    /// setup: in a cgroup of Docker's, in the bridge's network namespace or
    /// the host's, on the cpuset. Returns what was checked, in words.
    pub fn verify(&self, server_pids: &[u32]) -> anyhow::Result<Vec<String>> {
        let host_net = std::fs::read_link("/proc/self/ns/net")
            .context("cannot read this process's network namespace")?;
        let mut seen = Vec::new();
        for s in crate::procfs::tree(server_pids) {
            let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", s.pid))
                .with_context(|| format!("cannot read the cgroup of server process {}", s.pid))?;
            if !cgroup.contains("docker") {
                bail!(
                    "server process {} is not in a Docker container (cgroup {})",
                    s.pid,
                    cgroup.lines().next().unwrap_or("")
                );
            }
            let net = std::fs::read_link(format!("/proc/{}/ns/net", s.pid))
                .with_context(|| format!("cannot read the netns of server process {}", s.pid))?;
            let on_host = net == host_net;
            match self.mode {
                Mode::Bridge if on_host => {
                    bail!(
                        "server process {} shares the host's network namespace",
                        s.pid
                    )
                }
                Mode::Host | Mode::HostPinned(_) if !on_host => bail!(
                    "server process {} is not on the host network ({})",
                    s.pid,
                    net.display()
                ),
                _ => {}
            }
            seen.push(s.pid);
        }
        if seen.is_empty() {
            bail!("no server process to verify");
        }
        let mut checks = vec![format!(
            "server pids {seen:?} in Docker containers ({}), {}",
            self.image.tag,
            match self.mode {
                Mode::Bridge => "each in the bridge network's namespace",
                _ => "on the host network",
            }
        )];
        if let Mode::HostPinned(split) = &self.mode {
            checks.extend(split.verify(server_pids)?);
        }
        Ok(checks)
    }

    /// A line about what was built.
    pub fn detail(&self) -> String {
        let how = match &self.mode {
            Mode::Bridge => format!(
                "network {} (bridge), ports published on 127.0.0.1 (docker-proxy){}",
                self.network.as_deref().unwrap_or("?"),
                self.db
                    .as_ref()
                    .map(|d| format!(", database container {}", d.name))
                    .unwrap_or_default()
            ),
            Mode::Host => "--network host, the database on the host's loopback".into(),
            Mode::HostPinned(s) => format!(
                "--network host, --cpuset-cpus {} (load generator on CPUs {})",
                pinned::list(&s.server),
                pinned::list(&s.load)
            ),
        };
        format!(
            "{}; image {} ({}); {how}",
            self.engine.describe(),
            self.image.tag,
            self.image.origin
        )
    }

    /// The load generator's CPUs (`docker-host-pinned`).
    pub fn load_cpus(&self) -> Option<&[usize]> {
        match &self.mode {
            Mode::HostPinned(s) => Some(&s.load),
            _ => None,
        }
    }

    /// Removes every container and the network this setup made; returns
    /// what could not be removed.
    pub fn teardown(&mut self) -> Vec<String> {
        if self.torn_down {
            return Vec::new();
        }
        self.torn_down = true;
        // The database first (a clean shutdown of mariadbd), then whatever
        // container of ours is left, then the network.
        self.db = None;
        // The network is labelled too: removed with the containers.
        let left = remove_labelled(&self.engine, &format!("{SETUP_LABEL}={}", self.id));
        self.network = None;
        left
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        for l in self.teardown() {
            eprintln!("docker: not removed: {l}");
        }
    }
}

/// The `docker-proxy` processes whose `-host-port` is `port`.
pub fn docker_proxies(port: u16) -> Vec<u32> {
    let port = port.to_string();
    crate::procfs::all()
        .into_iter()
        .filter_map(|s| {
            let cmdline = std::fs::read(format!("/proc/{}/cmdline", s.pid)).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            let is_proxy = args.first().is_some_and(|a| a.ends_with(b"docker-proxy"));
            let on_port = args
                .windows(2)
                .any(|w| w[0] == b"-host-port" && w[1] == port.as_bytes());
            (is_proxy && on_port).then_some(s.pid as u32)
        })
        .collect()
}

/// Resolves symlinks (a mounted program must be the file, not a link to it).
fn real_path(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Removes the containers and networks labelled `label`; returns errors.
fn remove_labelled(engine: &Engine, label: &str) -> Vec<String> {
    let mut left = Vec::new();
    let filter = format!("label={label}");
    match engine.run(&["ps", "-aq", "--filter", &filter]) {
        Ok(ids) => {
            let ids: Vec<&str> = ids.split_whitespace().collect();
            if !ids.is_empty() {
                let mut args = vec!["rm", "-f", "--volumes"];
                args.extend(ids);
                if let Err(e) = engine.run(&args) {
                    left.push(format!("{e:#}"));
                }
            }
        }
        Err(e) => left.push(format!("{e:#}")),
    }
    if let Ok(nets) = engine.run(&["network", "ls", "-q", "--filter", &filter]) {
        for n in nets.split_whitespace() {
            if let Err(e) = engine.run(&["network", "rm", n]) {
                left.push(format!("{e:#}"));
            }
        }
    }
    left
}

/// The signal path: removes every container and network of this process.
pub fn teardown_all() {
    if let Ok(engine) = Engine::probe() {
        remove_labelled(&engine, &format!("{PID_LABEL}={}", std::process::id()));
    }
}

/// Removes containers and networks that a harness which no longer runs
/// left behind (killed with SIGKILL: nothing of it could clean up).
pub fn sweep_leftovers(engine: &Engine) {
    let Ok(pids) = engine.run(&[
        "ps",
        "-a",
        "--filter",
        &format!("label={PID_LABEL}"),
        "--format",
        &format!("{{{{.Label \"{PID_LABEL}\"}}}}"),
    ]) else {
        return;
    };
    let mut dead: Vec<&str> = pids
        .split_whitespace()
        .filter(|p| {
            p.parse::<i32>()
                // SAFETY: kill(2) with signal 0 only checks for existence.
                .is_ok_and(|pid| unsafe { libc::kill(pid, 0) } != 0)
        })
        .collect();
    dead.sort_unstable();
    dead.dedup();
    for pid in dead {
        eprintln!("docker: removing what harness {pid} (no longer running) left");
        remove_labelled(engine, &format!("{PID_LABEL}={pid}"));
    }
}
