//! A started server: where it answers, its processes (stopped last to
//! first, also on drop), its `/config`, and [`wait_ready`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;

use super::supervise::{self, Child, TempDir};
use super::{http, Entry};

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
    pub(super) children: Vec<Child>,
    pub(super) dir: Option<TempDir>,
    /// How it is reached over TLS, when it terminates TLS (`compare
    /// --tls`): every probe, check and load then speaks TLS to it.
    pub tls: Option<crate::engine::TlsPlan>,
    /// The run dirs of processes put in front of it (`--env tls-proxy`).
    pub(super) fronts: Vec<TempDir>,
    /// Where it serves h2c on a listener of its own, beside HTTP/1.1 on
    /// `addr` ([`super::StartCtx::h2c`]); `None` where it was not asked,
    /// or where h2c shares `addr` (its `/config` lists `h2c`).
    pub h2c: Option<SocketAddr>,
    /// Where HTTP/2 (h2c, or h2 by ALPN) is terminated when not by the
    /// server's own code, whose `/config` then does not describe it:
    /// php-fpm's nginx, in front of the FastCGI pool.
    pub http2_front: Option<String>,
    /// A server started elsewhere whose processes the user named
    /// (`--target-pid`, `--target-container`): metered as if started here.
    pub(super) outside: Option<super::outside::Processes>,
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
            tls: None,
            fronts: Vec::new(),
            h2c: None,
            http2_front: None,
            outside: None,
        })
    }

    /// A server the harness started as one `child` answering on `addr`
    /// (also its `Host`), with its run dir.
    pub(super) fn started(
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
            tls: None,
            fronts: Vec::new(),
            h2c: None,
            http2_front: None,
            outside: None,
        }
    }

    /// `GET target` on a fresh connection (over TLS when it serves TLS),
    /// with its `Host`.
    pub fn get(&self, target: &str, timeout: Duration) -> std::io::Result<http::Response> {
        match &self.tls {
            Some(tls) => http::get_tls(self.addr, &self.authority, target, timeout, tls),
            None => http::get(self.addr, &self.authority, target, timeout),
        }
    }

    /// Its URL for `path`: `https://` when it serves TLS.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.authority)
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

    /// The roots of its process trees: each child's pid (the leader of its
    /// group), or for a child in a container the container's first process.
    pub fn pids(&self) -> Vec<u32> {
        let mut roots: Vec<u32> = self.children.iter().map(Child::tree_root).collect();
        if let Some(p) = &self.outside {
            roots.extend(p.roots().unwrap_or_default());
        }
        roots
    }

    /// The processes named for a server started elsewhere, if any.
    pub fn outside(&self) -> Option<&super::outside::Processes> {
        self.outside.as_ref()
    }

    /// The containers its processes run in (none outside Docker).
    pub fn containers(&self) -> Vec<String> {
        self.children
            .iter()
            .filter_map(|c| c.container_name().map(str::to_string))
            .collect()
    }

    /// Whether we can sample its processes: we started them, or they were
    /// named (`--target-pid`, `--target-container`).
    pub fn managed(&self) -> bool {
        !self.children.is_empty() || self.outside.is_some()
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

    /// Its run dir (configs and logs it writes there, nginx's error log),
    /// for a server the harness started.
    pub fn run_dir(&self) -> Option<&std::path::Path> {
        self.dir.as_ref().map(TempDir::path)
    }

    /// A process in front of it (an environment's TLS proxy), with its run
    /// dir: metered with it as the path's CPU, and stopped before it.
    pub fn add_front(&mut self, child: Child, dir: TempDir) {
        self.children.push(child);
        self.fronts.push(dir);
    }

    /// Waits until `addr` (a second listener of its own, such as
    /// [`Running::h2c`]) accepts a connection: a child that dies, an
    /// interrupt or [`super::READY_TIMEOUT`] ends the wait with an error.
    pub(super) fn wait_listening(
        &mut self,
        addr: SocketAddr,
        interrupt: &AtomicBool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + super::READY_TIMEOUT;
        loop {
            if interrupt.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            self.check_alive()?;
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => bail!(
                    "{} does not accept connections on {addr}: {e}\n{}",
                    self.name,
                    self.logs()
                ),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
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
        self.fronts.clear();
        notes
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
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
