//! A server's command run in a Docker container instead of as a process of
//! ours: the same program, arguments, variables and working directory,
//! `docker run --rm --init … IMAGE PROGRAM ARGS…`, with every host path it
//! reads mounted at the same place (the repository and the workspace's
//! binaries read-only, its run dir read-write), so that what differs from
//! the bare run is Docker alone. The recipes do not know: the environment
//! ([`crate::env`]) puts a [`Container`] in the [`super::Placement`], and
//! [`Container::wrap`] rewrites each command just before the spawn.
//!
//! A server of several processes (nginx + php-fpm) is one pod: its first
//! container owns the network (joins the lab's network and publishes the
//! port), the others join that container's network namespace
//! (`--network container:FIRST`), as a Kubernetes pod's do.
//!
//! The `docker run` client stays attached, as the spawned [`super::supervise::Child`]:
//! it forwards SIGTERM to the container (tini, `--init`, passes it on to the
//! program) and exits with it; `--rm` then removes the container. A client
//! that had to be killed leaves its container behind, so stopping a child
//! also removes its container by name ([`remove`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Docker's own label key for the lab's containers and networks: the
/// process that made them (`benchlab.pid`), so a later run can tell a
/// leftover of a killed harness from one of a live one.
pub const PID_LABEL: &str = "benchlab.pid";
/// The label naming the environment that made them (removed together).
pub const SETUP_LABEL: &str = "benchlab.setup";

/// How a container is networked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Network {
    /// On the lab's bridge network `network`, the server's port published
    /// on 127.0.0.1 at the same number (docker-proxy serves connections
    /// from the host itself, as the seed's `ab http://localhost:8080` went).
    Bridge { network: String, port: u16 },
    /// `--network host`: the host's interfaces, loopback included.
    Host,
}

/// The first container of a pod, once started (shared by the placement's clones).
#[derive(Clone, Debug, Default)]
pub struct Pod(Arc<Mutex<Option<String>>>);

impl PartialEq for Pod {
    fn eq(&self, other: &Pod) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Pod {}

/// Where and how a server's containers run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    /// The docker client.
    pub docker: PathBuf,
    /// The image every container of the server runs.
    pub image: String,
    pub network: Network,
    /// Container names start with it (`benchlab-<setup>-`).
    pub name_prefix: String,
    /// Labels every container gets ([`PID_LABEL`], [`SETUP_LABEL`]).
    pub labels: Vec<(String, String)>,
    /// Host paths mounted read-only at the same place (the repository,
    /// the workspace's binaries, programs the image does not provide).
    pub read_only: Vec<PathBuf>,
    /// Host files mounted read-only at another path (source, target): a
    /// shared library at the name the loader asks for (its soname), whose
    /// host path is a link to a versioned file.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// `--cpuset-cpus`.
    pub cpus: Option<Vec<usize>>,
    /// Run the image's own command as its own user (a stack's compose
    /// image, [`super::image`]) instead of the wrapped command's program,
    /// arguments, working directory and user; its variables still go in.
    pub image_command: bool,
    /// The port the program listens on inside, where it is not the
    /// published one (an image with a fixed port: RoadRunner's 8081).
    pub inner_port: Option<u16>,
    /// The pod the server's containers share.
    pub pod: Pod,
}

/// A container's name, unique in this process.
fn next_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{prefix}{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Container {
    /// The port the server must listen on (bridge: the published one; host
    /// networking: any, so `None`).
    pub fn port(&self) -> Option<u16> {
        match self.network {
            Network::Bridge { port, .. } => Some(port),
            Network::Host => None,
        }
    }

    /// `cmd` as a `docker run` of the same program, arguments, variables and
    /// working directory; `run_dir` is mounted read-write at its own path.
    /// Returns the command and the container's name.
    pub fn wrap(&self, cmd: &Command, run_dir: &Path) -> (Command, String) {
        let name = next_name(&self.name_prefix);
        (self.wrap_as(cmd, run_dir, &name), name)
    }

    /// [`Container::wrap`] with the container's name given.
    pub fn wrap_as(&self, cmd: &Command, run_dir: &Path, name: &str) -> Command {
        let mut run = Command::new(&self.docker);
        run.args(["run", "--rm", "--init", "--name", name]);
        if !self.image_command {
            // As the same user as a bare run (root here gets php-fpm's -R, …).
            // SAFETY: getuid and getgid have no preconditions.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            run.arg("--user").arg(format!("{uid}:{gid}"));
        }
        for (k, v) in &self.labels {
            run.arg("--label").arg(format!("{k}={v}"));
        }
        let mut pod = self.pod.0.lock().unwrap_or_else(|e| e.into_inner());
        match (&self.network, pod.as_deref()) {
            (Network::Host, _) => {
                run.args(["--network", "host"]);
            }
            (Network::Bridge { .. }, Some(first)) => {
                run.arg("--network").arg(format!("container:{first}"));
            }
            (Network::Bridge { network, port }, None) => {
                run.args(["--network", network]).arg("-p").arg(format!(
                    "127.0.0.1:{port}:{}",
                    self.inner_port.unwrap_or(*port)
                ));
            }
        }
        if pod.is_none() {
            *pod = Some(name.to_string());
        }
        drop(pod);
        if let Some(cpus) = &self.cpus {
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            run.arg("--cpuset-cpus").arg(list.join(","));
        }
        let mut mounts: Vec<(PathBuf, PathBuf, &str)> = self
            .read_only
            .iter()
            .map(|p| (p.clone(), p.clone(), "ro"))
            .collect();
        mounts.extend(self.files.iter().map(|(s, t)| (s.clone(), t.clone(), "ro")));
        mounts.push((run_dir.to_path_buf(), run_dir.to_path_buf(), "rw"));
        for (source, target, mode) in mounts {
            let mut v = OsString::from(&source);
            v.push(":");
            v.push(&target);
            v.push(format!(":{mode}"));
            run.arg("-v").arg(v);
        }
        if let Some(dir) = cmd.get_current_dir().filter(|_| !self.image_command) {
            run.arg("-w").arg(dir);
        }
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                let mut kv = OsString::from(k);
                kv.push("=");
                kv.push(v);
                run.arg("-e").arg(kv);
            }
        }
        run.arg(&self.image);
        if !self.image_command {
            run.arg(cmd.get_program()).args(cmd.get_args());
        }
        run
    }
}

/// The host pid of the container's first process (`docker-init`), once it runs.
pub fn init_pid(docker: &Path, name: &str) -> Option<u32> {
    let out = Command::new(docker)
        .args(["inspect", "--format", "{{.State.Pid}}", name])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let pid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    (out.status.success() && pid > 0).then_some(pid)
}

/// Removes the container `name` if it still exists (`docker rm -f`); quiet
/// when it is gone already.
pub fn remove(docker: &Path, name: &str) {
    let _ = Command::new(docker)
        .args(["rm", "-f", "--volumes", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(network: Network) -> Container {
        Container {
            docker: "/usr/bin/docker".into(),
            image: "benchlab/lab:x".into(),
            network,
            name_prefix: "benchlab-t-".into(),
            labels: vec![(PID_LABEL.into(), "1".into())],
            read_only: vec!["/repo".into()],
            files: Vec::new(),
            image_command: false,
            inner_port: None,
            cpus: Some(vec![0]),
            pod: Pod::default(),
        }
    }

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The same program, arguments, variables and directory; the first
    /// container of a pod publishes, the second joins its namespace.
    #[test]
    fn a_command_becomes_a_docker_run_of_the_same_program() {
        let c = container(Network::Bridge {
            network: "benchlab-net".into(),
            port: 4000,
        });
        let mut cmd = Command::new("/repo/target/release/event-loop");
        cmd.args(["--addr", "0.0.0.0:4000"])
            .env("DB_HOST", "db")
            .current_dir("/repo/compose");
        let (run, first) = c.wrap(&cmd, Path::new("/tmp/run"));
        let a = args(&run);
        let joined = a.join(" ");
        assert!(
            joined.starts_with("run --rm --init --name benchlab-t-"),
            "{joined}"
        );
        for want in [
            "--label benchlab.pid=1",
            "--network benchlab-net -p 127.0.0.1:4000:4000",
            "--cpuset-cpus 0",
            "-v /repo:/repo:ro",
            "-v /tmp/run:/tmp/run:rw",
            "-w /repo/compose",
            "-e DB_HOST=db",
            "benchlab/lab:x /repo/target/release/event-loop --addr 0.0.0.0:4000",
        ] {
            assert!(joined.contains(want), "{want} not in {joined}");
        }
        assert!(joined.ends_with("--addr 0.0.0.0:4000"));
        let (second, name) = c.clone().wrap(&cmd, Path::new("/tmp/run"));
        let joined = args(&second).join(" ");
        assert_ne!(name, first);
        assert!(
            joined.contains(&format!("--network container:{first}")) && !joined.contains("-p "),
            "{joined}"
        );
        assert_eq!(c.port(), Some(4000));
    }

    #[test]
    fn host_networking_publishes_nothing() {
        let c = container(Network::Host);
        let (run, _) = c.wrap(&Command::new("/usr/sbin/nginx"), Path::new("/tmp/r"));
        let joined = args(&run).join(" ");
        assert!(
            joined.contains("--network host") && !joined.contains("-p "),
            "{joined}"
        );
        assert_eq!(c.port(), None);
    }
}
