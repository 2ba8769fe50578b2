//! Where a server's processes run and listen: the recipes apply a
//! [`Placement`] to their `Command` before the spawn, so that every process
//! of a server (nginx and php-fpm alike) is born in its network namespace
//! and on its CPUs. [`crate::env::Setup::placement`] makes one per
//! environment.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::process::CommandExt;
use std::process::Command;

use anyhow::{bail, Context};

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
    /// The database host as seen from inside (the bridge's host address).
    pub db_host: Option<String>,
    /// Variables its processes get beyond the database's (a reproduction's
    /// switches, such as the seed's error bodies).
    pub env: Vec<(String, String)>,
}

impl Placement {
    pub fn is_default(&self) -> bool {
        *self == Placement::default()
    }

    pub fn listen_ip(&self) -> IpAddr {
        IpAddr::V4(self.listen_ip.unwrap_or(Ipv4Addr::LOCALHOST))
    }

    /// The database as the placed server reaches it.
    pub fn db(&self, db: &Db) -> anyhow::Result<Db> {
        match &self.db_host {
            None => Ok(db.clone()),
            Some(host) => Db::parse(&format!(
                "mysql://{}:{}@{}:{}/{}",
                db.user, db.password, host, db.port, db.name
            )),
        }
    }

    /// Makes `cmd` enter the namespace and the CPU set in the child, between
    /// fork and exec (the pid is the server's own: no `ip netns exec`).
    pub fn apply(&self, cmd: &mut Command) -> anyhow::Result<()> {
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
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
            return Ok(());
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
        Ok(())
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
