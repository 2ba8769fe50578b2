//! The processes of a server started outside the lab (`compare --target`),
//! named by the user so its CPU and RSS are metered like a catalog
//! server's: a PID (`--target-pid NAME=PID`: that process, its children
//! and its process group) or a Docker container (`--target-container
//! NAME=ID`: every process of the container's cgroup, with their children).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

/// Where a `--target`'s processes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Processes {
    /// A process on this host (rr, php-fpm's master, Swoole's master).
    Pid(u32),
    /// A container's name or id, on this host's Docker.
    Container(String),
}

impl Processes {
    /// `NAME=PID` (`--target-pid`) → the target's name and its process.
    pub fn parse_pid(spec: &str) -> anyhow::Result<(String, Processes)> {
        let (name, pid) = split(spec, "--target-pid", "NAME=PID")?;
        let pid: u32 = pid
            .parse()
            .ok()
            .filter(|&p| p > 0)
            .with_context(|| format!("bad --target-pid {spec:?}: {pid:?} is not a PID"))?;
        Ok((name, Processes::Pid(pid)))
    }

    /// `NAME=ID` (`--target-container`) → the target's name and its container.
    pub fn parse_container(spec: &str) -> anyhow::Result<(String, Processes)> {
        let (name, id) = split(spec, "--target-container", "NAME=CONTAINER")?;
        Ok((name, Processes::Container(id)))
    }

    /// What is metered, in words, for the report.
    pub fn describe(&self) -> String {
        match self {
            Processes::Pid(p) => format!("process {p} and its children (--target-pid)"),
            Processes::Container(c) => {
                format!("the processes of container {c}'s cgroup (--target-container)")
            }
        }
    }

    /// The roots of its process trees now: the PID, or every process in
    /// the container's cgroup (read again each time: a `docker exec`'d
    /// process is not a child of the container's first one). An error
    /// when the process or the container is not there.
    pub fn roots(&self) -> anyhow::Result<Vec<u32>> {
        match self {
            Processes::Pid(p) => {
                if !Path::new(&format!("/proc/{p}")).exists() {
                    bail!("--target-pid: no process {p} on this host");
                }
                Ok(vec![*p])
            }
            Processes::Container(c) => {
                let docker = super::host::find_program(&["docker"])
                    .context("--target-container: no docker client installed")?;
                let init = container_init_pid(&docker, c).with_context(|| {
                    format!("--target-container: no running container {c:?} (docker inspect)")
                })?;
                let mut pids = cgroup_procs(init);
                if !pids.contains(&init) {
                    pids.push(init);
                }
                Ok(pids)
            }
        }
    }
}

fn split(spec: &str, option: &str, form: &str) -> anyhow::Result<(String, String)> {
    spec.split_once('=')
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .filter(|(n, v)| !n.is_empty() && !v.is_empty())
        .with_context(|| format!("bad {option} {spec:?}: expected {form}"))
}

/// The host PID of a running container's first process.
fn container_init_pid(docker: &Path, container: &str) -> Option<u32> {
    let out = Command::new(docker)
        .args([
            "inspect",
            "--format",
            "{{.State.Running}} {{.State.Pid}}",
            container,
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (running, pid) = text.trim().split_once(' ')?;
    let pid: u32 = pid.parse().ok()?;
    (out.status.success() && running == "true" && pid > 0).then_some(pid)
}

/// Every process in `pid`'s cgroup (cgroup v2's unified hierarchy, else
/// v1's `pids`, `cpuacct` or `memory` controller); empty when none can be
/// read.
fn cgroup_procs(pid: u32) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return Vec::new();
    };
    let mut candidates = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if path == "/" {
            continue; // the root cgroup holds the whole host
        }
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/cgroup.procs"));
        }
        for c in ["pids", "cpuacct", "memory"] {
            if controllers.split(',').any(|x| x == c) {
                candidates.push(format!("/sys/fs/cgroup/{controllers}{path}/cgroup.procs"));
                candidates.push(format!("/sys/fs/cgroup/{c}{path}/cgroup.procs"));
            }
        }
    }
    candidates
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| {
            t.lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .find(|pids| !pids.is_empty())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_or_say_what_is_wrong() {
        assert_eq!(
            Processes::parse_pid("rr=1234").unwrap(),
            ("rr".into(), Processes::Pid(1234))
        );
        assert_eq!(
            Processes::parse_container(" sw = benchlab-swoole ").unwrap(),
            ("sw".into(), Processes::Container("benchlab-swoole".into()))
        );
        for bad in ["rr", "rr=", "=12", "rr=abc", "rr=0", "rr=-3"] {
            let e = Processes::parse_pid(bad).unwrap_err().to_string();
            assert!(e.starts_with("bad --target-pid"), "{e}");
        }
        assert!(Processes::parse_container("x").is_err());
    }

    #[test]
    fn a_pid_is_its_own_root_and_a_missing_one_is_an_error() {
        let me = std::process::id();
        assert_eq!(Processes::Pid(me).roots().unwrap(), vec![me]);
        let e = Processes::Pid(u32::MAX - 1)
            .roots()
            .unwrap_err()
            .to_string();
        assert!(e.contains("no process"), "{e}");
    }
}
