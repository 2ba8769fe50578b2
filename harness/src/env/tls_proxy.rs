//! `tls-proxy`: TLS terminated by an nginx in front of the server, which
//! talks plain HTTP/1.1 to it on loopback over kept-alive upstream
//! connections — the common production shape (a TLS-terminating reverse
//! proxy before an application server). The server runs as on `bare`; the
//! load speaks TLS to nginx, trusting a CA made for the environment.
//! nginx's processes join the server's (`Running::add_front`): they are
//! metered with it, as the path's CPU, and stopped first.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::catalog::supervise::{Child, Stdout, TempDir};
use crate::catalog::tls::ServerTls;
use crate::catalog::{find_program, free_port, wait_ready, Placement, Running};
use crate::engine::TlsVersion;

/// A certificate made for an environment (`tls-server`, `tls-proxy`),
/// removed with it, and how servers and clients use it.
pub struct LabTls {
    _cert: labcert::LabCert,
    pub tls: ServerTls,
}

impl LabTls {
    pub fn new() -> anyhow::Result<LabTls> {
        let cert = labcert::LabCert::new()?;
        let tls = ServerTls::new(&cert, TlsVersion::Tls13).map_err(anyhow::Error::msg)?;
        Ok(LabTls { _cert: cert, tls })
    }
}

/// The `tls-proxy` environment's nginx: its certificate and workers.
pub struct TlsFront {
    lab: LabTls,
    workers: usize,
}

/// Whether it can be built here.
pub fn availability() -> Result<(), String> {
    find_program(&["nginx"])
        .map(drop)
        .ok_or_else(|| "nginx is not installed (apt-get install nginx-light)".into())
}

impl TlsFront {
    pub fn new() -> anyhow::Result<TlsFront> {
        availability().map_err(anyhow::Error::msg)?;
        Ok(TlsFront {
            lab: LabTls::new()?,
            // One worker per core, as nginx-static and php-fpm's nginx.
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    }

    /// Starts nginx on a free port of 127.0.0.1 in front of `running`
    /// (plain HTTP at its address), points `running` at it over TLS and
    /// waits until `/hello` answers through it. Returns the route in words.
    pub fn put_in_front(
        &self,
        running: &mut Running,
        interrupt: &AtomicBool,
    ) -> anyhow::Result<String> {
        if running.tls.is_some() {
            bail!("tls-proxy: the server already serves TLS (--tls): the proxy speaks plain HTTP to it");
        }
        let nginx = find_program(&["nginx"]).context("nginx is not installed")?;
        let dir = TempDir::new("benchlab-tls-proxy-")?;
        let w = dir.path().to_path_buf();
        std::fs::create_dir_all(w.join("tmp")).context("cannot create nginx's temp dir")?;
        let upstream = running.addr;
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let conf = config(
            &w.display().to_string(),
            &listen.to_string(),
            upstream,
            self.workers,
            &self.lab.tls,
        )
        .map_err(anyhow::Error::msg)?;
        std::fs::write(w.join("nginx.conf"), conf).context("cannot write nginx.conf")?;
        let mut cmd = Command::new(&nginx);
        cmd.arg("-p")
            .arg(&w)
            .arg("-e")
            .arg(w.join("nginx-error.log"))
            .arg("-c")
            .arg(w.join("nginx.conf"));
        let (child, _) = Child::spawn_placed(
            "tls-proxy nginx",
            cmd,
            &Placement::default(),
            &w,
            &w.join("nginx.out"),
            Stdout::Log,
        )?;
        running.add_front(child, dir);
        running.addr = listen;
        running.authority = listen.to_string();
        running.tls = Some(self.lab.tls.client.clone());
        wait_ready(running, interrupt, Duration::from_secs(10)).with_context(|| {
            format!(
                "tls-proxy: nginx did not answer over TLS in front of {upstream}:\n{}",
                crate::catalog::supervise::log_tail(&w.join("nginx-error.log"), 10)
            )
        })?;
        Ok(format!(
            "{listen} (TLS, nginx) → plain HTTP/1.1, kept-alive upstream → {upstream} (loopback)"
        ))
    }
}

/// The processes of the nginx [`TlsFront::put_in_front`] put before
/// `running` (its last child: fronts are started after the server).
pub fn front_pids(running: &Running) -> Vec<u32> {
    running
        .pids()
        .last()
        .map(|&root| {
            crate::procfs::tree(&[root])
                .iter()
                .map(|s| s.pid as u32)
                .collect()
        })
        .unwrap_or_default()
}

/// nginx terminating TLS on `listen` and proxying every request to
/// `upstream` over HTTP/1.1 with kept-alive connections; the upstream's
/// `Server` and `Date` headers passed on, bodies up to the contract's 1 MiB.
/// `/ws` and `/ws/room` pass the WebSocket upgrade on (nginx's documented
/// `Upgrade`/`Connection` pair), and an upgraded connection may idle for an
/// hour, as a held one does.
pub fn config(
    prefix: &str,
    listen: &str,
    upstream: SocketAddr,
    workers: usize,
    tls: &ServerTls,
) -> Result<String, String> {
    let listen_line = format!("        listen {listen} backlog=4096;");
    let plain = format!(
        r#"daemon off;
master_process on;
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    server_tokens off;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path {prefix}/tmp/client_body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        "" close;
    }}
    upstream backend {{
        server {upstream};
        keepalive 256;
        keepalive_requests 1000000;
    }}
    server {{
{listen_line}
        client_max_body_size 1m;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_pass_header Server;
            proxy_pass_header Date;
        }}
        location /ws {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_pass_header Server;
            proxy_pass_header Date;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }}
    }}
}}
"#
    );
    tls.nginx(&plain, &listen_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_terminates_tls_and_keeps_its_upstream_alive() {
        let cert = labcert::LabCert::new().unwrap();
        let tls = ServerTls::new(&cert, TlsVersion::Tls13).unwrap();
        let c = config(
            "/w",
            "127.0.0.1:8443",
            "127.0.0.1:9000".parse().unwrap(),
            2,
            &tls,
        )
        .unwrap();
        assert!(c.contains("listen 127.0.0.1:8443 ssl backlog=4096;"), "{c}");
        assert!(c.contains("server 127.0.0.1:9000;"), "{c}");
        assert!(c.contains("keepalive 256;"), "{c}");
        assert!(c.contains("proxy_set_header Connection \"\";"), "{c}");
        assert!(
            c.contains("location /ws {") && c.contains("proxy_set_header Upgrade $http_upgrade;"),
            "{c}"
        );
        assert!(c.contains(&format!("ssl_certificate {};", cert.cert_path().display())));
    }
}
