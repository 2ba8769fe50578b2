//! nginx answering `return 200 "Hello World"` on `/` and `/hello`: the
//! native ceiling for the `hello` workload (it serves nothing else but a
//! `/config` document describing itself). Foreground (`daemon off;`), one
//! worker per core, a process-group leader like every child.

use anyhow::{bail, Context};

use super::supervise::{Child, Stdout};
use super::Placement;
use super::{find_program, run_dir, version_of, Availability, Entry, Running, StartCtx};

pub fn availability() -> Availability {
    match find_program(&["nginx"]) {
        Some(p) => Availability::Ready(p.display().to_string()),
        None => Availability::Missing {
            reason: "nginx is not installed".into(),
            fix: "apt-get install nginx-light".into(),
        },
    }
}

/// The whole configuration: HTTP/1.1 on `listen`.
pub fn config(prefix: &str, listen: &str, workers: usize, version: &str) -> String {
    render(prefix, listen, workers, version, &["http/1.1"], None)
}

/// [`config`] with a second port, `h2c_listen`, serving HTTP/2 by prior
/// knowledge: nginx 1.22's `listen … http2` in the clear speaks h2c only,
/// so HTTP/1.1 keeps its own port.
pub fn config_h2c(
    prefix: &str,
    listen: &str,
    h2c_listen: &str,
    workers: usize,
    version: &str,
) -> String {
    let h2c = format!("h2c on {h2c_listen}");
    render(prefix, listen, workers, version, &["http/1.1", &h2c], None).replace(
        &format!("        listen {listen} backlog=4096;\n"),
        &format!(
            "        listen {listen} backlog=4096;\n        listen {h2c_listen} http2 backlog=4096;\n"
        ),
    )
}

/// The configuration, its `/config` document naming `protocols` and `tls`.
fn render(
    prefix: &str,
    listen: &str,
    workers: usize,
    version: &str,
    protocols: &[&str],
    tls: Option<String>,
) -> String {
    let settings = workloads::ServerConfig {
        server: "nginx-static".into(),
        model: "event-loop".into(),
        runtime: version.to_string(),
        workers: Some(workers as u32),
        db_pool: None,
        opcache: None,
        jit: None,
        debug: false,
        http_limits: Vec::new(),
        tls,
        websocket: None,
        websocket_unsupported: Some("nginx-static serves static files: it has no /ws endpoint (a proxy of WebSocket would measure its backend)".into()),
        protocols: protocols.iter().map(|p| p.to_string()).collect(),
        http2_unsupported: None,
    };
    let json = String::from_utf8(settings.to_json()).expect("JSON is UTF-8");
    format!(
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
    server {{
        listen {listen} backlog=4096;
        default_type text/plain;
        location = / {{ return 200 "Hello World"; }}
        location = /hello {{ return 200 "Hello World"; }}
        location = /config {{ default_type application/json; return 200 '{json}'; }}
        location / {{ return 404 "not found"; }}
    }}
}}
"#
    )
}

/// [`config`] serving HTTPS instead, with the certificate chain and key
/// at these paths (PEM): TLS 1.2 and 1.3, nginx's default session cache
/// and tickets (clients resume); HTTP/2 or HTTP/1.1 by ALPN.
pub fn config_tls(
    prefix: &str,
    listen: &str,
    workers: usize,
    version: &str,
    cert: &str,
    key: &str,
) -> String {
    let tls = format!("{version} (OpenSSL): TLS 1.3, 1.2; session cache and tickets");
    render(
        prefix,
        listen,
        workers,
        version,
        &["http/1.1", "h2"],
        Some(tls),
    )
    .replace(
        &format!("        listen {listen} backlog=4096;\n"),
        &format!(
            "        listen {listen} ssl http2 backlog=4096;\n        \
             ssl_certificate {cert};\n        ssl_certificate_key {key};\n        \
             ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_session_cache shared:tls:1m;\n"
        ),
    )
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let nginx = find_program(&["nginx"]).context("nginx is not installed")?;
    let dir = run_dir(&entry.name)?;
    let w = dir.path().to_path_buf();
    std::fs::create_dir_all(w.join("tmp")).context("cannot create the nginx temp dir")?;
    let version = version_of(&nginx, &["-v"])
        .and_then(|v| v.rsplit('/').next().map(|n| format!("nginx {n}")))
        .unwrap_or_else(|| "nginx".into());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut last = String::new();
    for _ in 0..3 {
        let listen = format!("{}:{}", placement.listen_ip(), placement.port_or_free()?);
        // h2c on a port of its own: over plaintext, when asked.
        let h2c_listen = match ctx.tls {
            None if ctx.h2c => Some(format!("{}:{}", placement.listen_ip(), super::free_port()?)),
            _ => None,
        };
        let prefix = w.display().to_string();
        let conf = match ctx.tls {
            Some(tls) => config_tls(
                &prefix,
                &listen,
                workers,
                &version,
                &tls.cert.display().to_string(),
                &tls.key.display().to_string(),
            ),
            None => match &h2c_listen {
                Some(h2c) => config_h2c(&prefix, &listen, h2c, workers, &version),
                None => config(&prefix, &listen, workers, &version),
            },
        };
        std::fs::write(w.join("nginx.conf"), conf).context("cannot write nginx.conf")?;
        let cmd = super::nginx_command(&nginx, &w);
        let (child, _) = Child::spawn_placed(
            &entry.name,
            cmd,
            placement,
            &w,
            &w.join("nginx.out"),
            Stdout::Log,
        )?;
        let addr = placement.reach(listen.parse().expect("addr"));
        let mut running = Running::started(entry, addr, vec![version.clone()], child, None);
        running.tls = ctx.tls.map(|t| t.client.clone());
        running.h2c = h2c_listen.map(|l| placement.reach(l.parse().expect("addr")));
        match super::wait_ready(
            &mut running,
            ctx.interrupt,
            std::time::Duration::from_secs(10),
        ) {
            Ok(()) => {
                running.dir = Some(dir);
                return Ok(running);
            }
            Err(e) => {
                running.stop();
                last = format!(
                    "{e:#}\n{}",
                    super::supervise::log_tail(&w.join("nginx-error.log"), 10)
                );
                if !last.contains("in use") {
                    break;
                }
            }
        }
    }
    bail!("nginx-static did not start: {last}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_answers_hello_and_describes_itself() {
        let c = super::config("/w", "127.0.0.1:1", 2, "nginx 1.22.1");
        assert!(c.contains("daemon off;"));
        assert!(c.contains(r#"location = /hello { return 200 "Hello World"; }"#));
        assert!(c.contains(r#""server":"nginx-static""#));
        assert!(c.contains("worker_processes 2;"));
        let t = super::config_tls("/w", "127.0.0.1:1", 2, "nginx", "/c.pem", "/k.pem");
        assert!(
            t.contains("listen 127.0.0.1:1 ssl http2 backlog=4096;"),
            "{t}"
        );
        assert!(t.contains("ssl_certificate /c.pem;"), "{t}");
        assert!(t.contains(r#""tls":"nginx (OpenSSL)"#), "{t}");
        assert!(t.contains(r#""protocols":["http/1.1","h2"]"#), "{t}");
        let h = super::config_h2c("/w", "127.0.0.1:1", "127.0.0.1:2", 1, "nginx");
        assert!(
            h.contains(
                "listen 127.0.0.1:1 backlog=4096;\n        listen 127.0.0.1:2 http2 backlog=4096;"
            ),
            "{h}"
        );
        assert!(
            h.contains(r#""protocols":["http/1.1","h2c on 127.0.0.1:2"]"#),
            "{h}"
        );
    }
}
