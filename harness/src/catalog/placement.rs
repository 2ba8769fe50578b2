//! Where a server's processes run and listen: the recipes apply a
//! [`Placement`] to their `Command` before the spawn, so that every process
//! of a server (nginx and php-fpm alike) is born in its network namespace
//! and on its CPUs. [`crate::env::Setup::placement`] makes one per
//! environment.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

use super::container::Container;
use super::Db;

/// Where a server's processes run and listen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// A network namespace name (`/run/netns/NAME`) to enter before exec.
    pub netns: Option<String>,
    /// CPUs the server's processes may run on.
    pub cpus: Option<Vec<usize>>,
    /// The address to listen on (default 127.0.0.1).
    pub listen_ip: Option<Ipv4Addr>,
    /// The database host as seen from inside (the bridge's host address,
    /// a database container's name).
    pub db_host: Option<String>,
    /// The database port as seen from inside, where it differs.
    pub db_port: Option<u16>,
    /// Variables its processes get beyond the database's (a reproduction's
    /// switches, such as the seed's error bodies).
    pub env: Vec<(String, String)>,
    /// Run each of its processes in a Docker container ([`Container`]) instead.
    pub container: Option<Container>,
}

impl Placement {
    pub fn is_default(&self) -> bool {
        *self == Placement::default()
    }

    pub fn listen_ip(&self) -> IpAddr {
        IpAddr::V4(self.listen_ip.unwrap_or(Ipv4Addr::LOCALHOST))
    }

    /// The port the server must listen on, where the environment fixes it
    /// (a published container port); `None`: any free one.
    pub fn port(&self) -> Option<u16> {
        self.container.as_ref().and_then(Container::port)
    }

    /// [`Placement::port`], else a free port of this host.
    pub fn port_or_free(&self) -> anyhow::Result<u16> {
        match self.port() {
            Some(p) => Ok(p),
            None => super::free_port(),
        }
    }

    /// Where the harness reaches a server that listens on `listen` here: a
    /// container's published port is on 127.0.0.1, whatever it listens on
    /// inside; otherwise the address itself.
    pub fn reach(&self, listen: std::net::SocketAddr) -> std::net::SocketAddr {
        match self.container.as_ref().map(|c| &c.network) {
            Some(super::container::Network::Bridge { .. }) => {
                std::net::SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), listen.port())
            }
            _ => listen,
        }
    }

    /// The database as the placed server reaches it.
    pub fn db(&self, db: &Db) -> anyhow::Result<Db> {
        if self.db_host.is_none() && self.db_port.is_none() {
            return Ok(db.clone());
        }
        Db::parse(&format!(
            "mysql://{}:{}@{}:{}/{}",
            db.user,
            db.password,
            self.db_host.as_deref().unwrap_or(&db.host),
            self.db_port.unwrap_or(db.port),
            db.name
        ))
    }

    /// Makes `cmd` enter the namespace and the CPU set in the child, between
    /// fork and exec (the pid is the server's own: no `ip netns exec`); or,
    /// with a [`Container`], turns it into the `docker run` of itself and
    /// returns the container's name. `run_dir` is the server's own
    /// directory (mounted read-write into a container).
    pub fn apply(&self, cmd: &mut Command, run_dir: &Path) -> anyhow::Result<Option<String>> {
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(c) = &self.container {
            let (run, name) = c.wrap(cmd, run_dir);
            *cmd = run;
            return Ok(Some(name));
        }
        let ns = match &self.netns {
            Some(name) => {
                let path = format!("/run/netns/{name}");
                Some(
                    std::fs::File::open(&path)
                        .with_context(|| format!("cannot open the network namespace {path}"))?,
                )
            }
            None => None,
        };
        let set = self.cpus.as_deref().map(cpu_set).transpose()?;
        if ns.is_none() && set.is_none() {
            return Ok(None);
        }
        // SAFETY: the closure only makes two syscalls (async-signal-safe) on
        // values prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                use std::os::fd::AsRawFd;
                if let Some(f) = &ns {
                    if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if let Some(set) = &set {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        Ok(None)
    }
}

/// A `cpu_set_t` holding `cpus`.
pub fn cpu_set(cpus: &[usize]) -> anyhow::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpus.is_empty() {
        bail!("an empty CPU set");
    }
    for &c in cpus {
        if c >= max {
            bail!("CPU {c} is out of range");
        }
        // SAFETY: c < CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_rewrites_the_database_host() {
        let db = Db::parse("mysql://bench:pw@127.0.0.1:3307/bench").unwrap();
        let p = Placement {
            db_host: Some("198.18.4.1".into()),
            ..Placement::default()
        };
        let d = p.db(&db).unwrap();
        assert_eq!((d.host.as_str(), d.port), ("198.18.4.1", 3307));
        assert_eq!(d.password, "pw");
        assert!(Placement::default().is_default());
        assert_eq!(
            Placement::default().listen_ip(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }
}
