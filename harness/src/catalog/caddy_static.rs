//! Caddy answering `Hello World` on `/` and `/hello`, as nginx-static
//! does: Go's `net/http` (HTTP/1.1, h2) and quic-go (h3), the core that
//! FrankenPHP is built on, serving nothing else but a `/config` document
//! describing itself. Over TLS (`compare --tls`) it serves HTTP/1.1 and h2
//! by ALPN on the TCP port and h3 on the UDP port of the same number; in
//! the clear, HTTP/1.1 and h2c on one port.
//!
//! Caddy comes from `scripts/install-deps`: `go install` at [`PINNED`]
//! where the Go module proxy answers, else Debian's `caddy` (2.6.2, 2022);
//! the row says which ([`source`]). Its admin endpoint is off, its data
//! and config dirs are the run dir's, and it manages no certificate: the
//! lab's own is given to it.

use std::path::Path;

use anyhow::{bail, Context};

use super::supervise::{Child, Stdout};
use super::Placement;
use super::{find_program, run_dir, Availability, Entry, Running, StartCtx};

/// The release `scripts/install-deps` installs with `go install`.
pub const PINNED: &str = "v2.11.9";

pub fn availability() -> Availability {
    match find_program(&["caddy"]) {
        Some(p) => Availability::Ready(format!("{} ({})", p.display(), describe(&p))),
        None => Availability::Missing {
            reason: "caddy is not installed".into(),
            fix: format!(
                "scripts/install-deps (go install github.com/caddyserver/caddy/v2/cmd/caddy@{PINNED}), \
                 or apt-get install caddy"
            ),
        },
    }
}

/// `caddy v2.11.9 (go install, go1.26.8)` or `caddy v2.6.2 (Debian's
/// package)`: its version, and where it came from.
pub fn describe(caddy: &Path) -> String {
    let info = std::process::Command::new(caddy)
        .arg("build-info")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    format!("caddy {} ({})", version(&info), source(caddy, &info))
}

/// Caddy's module version from `caddy build-info` (`caddy version` says
/// `unknown` for a `go install` build).
fn version(build_info: &str) -> String {
    build_info
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some("mod") && f.next() == Some("github.com/caddyserver/caddy/v2"))
                .then(|| f.next().map(str::to_string))
                .flatten()
        })
        .unwrap_or_else(|| "(version unknown)".into())
}

/// Where this caddy came from: Debian's package (under /usr/bin, built by
/// Debian's toolchain) or `go install`.
fn source(caddy: &Path, build_info: &str) -> String {
    let go = build_info
        .lines()
        .find_map(|l| l.strip_prefix("go\t").or_else(|| l.strip_prefix("go ")))
        .map(str::trim)
        .unwrap_or("go");
    if caddy.starts_with("/usr/bin") {
        format!("Debian's package, {go}")
    } else {
        format!("go install, {go}")
    }
}

/// The Caddyfile: `/`, `/hello` and `/config` on `listen`; TLS with the
/// certificate at `tls` (chain, key) when given, then h3 on UDP too.
pub fn caddyfile(dir: &str, listen: &str, version: &str, tls: Option<(&str, &str)>) -> String {
    let (scheme, protocols, tls_line, described) = match tls {
        Some((cert, key)) => (
            "https",
            "h1 h2 h3",
            format!("\ttls {cert} {key}\n"),
            vec![
                "http/1.1".to_string(),
                "h2".into(),
                format!("h3 on udp {listen}"),
            ],
        ),
        None => (
            "http",
            "h1 h2c",
            String::new(),
            vec!["http/1.1".to_string(), "h2c".into()],
        ),
    };
    let settings = workloads::ServerConfig {
        server: "caddy-static".into(),
        model: "event-loop".into(),
        runtime: version.to_string(),
        workers: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
        db_pool: None,
        opcache: None,
        jit: None,
        debug: false,
        http_limits: Vec::new(),
        tls: tls.map(|_| {
            format!("{version}: Go crypto/tls (TCP) and quic-go (QUIC), TLS 1.3, 1.2; tickets")
        }),
        websocket: None,
        websocket_unsupported: Some(
            "caddy-static serves static answers: it has no /ws endpoint".into(),
        ),
        protocols: described,
        http2_unsupported: None,
    };
    let json = String::from_utf8(settings.to_json()).expect("JSON is UTF-8");
    // Any Host (as nginx-static's one server block): the clients name the
    // address or `verify`; `bind` keeps the listener on `listen`'s address.
    let (host, port) = listen.rsplit_once(':').unwrap_or((listen, ""));
    format!(
        r#"{{
	admin off
	persist_config off
	auto_https off
	storage file_system {dir}/data
	servers {{
		protocols {protocols}
	}}
}}
{scheme}://:{port} {{
	bind {host}
{tls_line}	log {{
		output discard
	}}
	@hello path / /hello
	handle @hello {{
		header Content-Type "text/plain"
		respond "Hello World" 200
	}}
	handle /config {{
		header Content-Type "application/json"
		respond `{json}` 200
	}}
	handle {{
		header Content-Type "text/plain"
		respond "not found" 404
	}}
}}
"#
    )
}

pub fn start(entry: &Entry, ctx: &StartCtx, placement: &Placement) -> anyhow::Result<Running> {
    let caddy = find_program(&["caddy"]).context("caddy is not installed")?;
    let dir = run_dir(&entry.name)?;
    let w = dir.path().to_path_buf();
    let version = describe(&caddy);
    let mut last = String::new();
    for _ in 0..3 {
        let listen = format!("{}:{}", placement.listen_ip(), placement.port_or_free()?);
        let tls = ctx
            .tls
            .map(|t| (t.cert.display().to_string(), t.key.display().to_string()));
        let conf = caddyfile(
            &w.display().to_string(),
            &listen,
            &version,
            tls.as_ref().map(|(c, k)| (c.as_str(), k.as_str())),
        );
        std::fs::write(w.join("Caddyfile"), conf).context("cannot write the Caddyfile")?;
        let mut cmd = std::process::Command::new(&caddy);
        cmd.args(["run", "--adapter", "caddyfile", "--config"])
            .arg(w.join("Caddyfile"))
            .env("XDG_DATA_HOME", &w)
            .env("XDG_CONFIG_HOME", &w)
            .env("HOME", &w)
            .current_dir(&w);
        let (child, _) = Child::spawn_placed(
            &entry.name,
            cmd,
            placement,
            &w,
            &w.join("caddy.out"),
            Stdout::Log,
        )?;
        let addr = placement.reach(listen.parse().expect("addr"));
        let mut running = Running::started(entry, addr, vec![version.clone()], child, None);
        running.tls = ctx.tls.map(|t| t.client.clone());
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
                    super::supervise::log_tail(&w.join("caddy.out"), 10)
                );
                if !last.contains("in use") {
                    break;
                }
            }
        }
    }
    bail!("caddy-static did not start: {last}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_caddyfile_answers_hello_and_describes_itself() {
        let c = super::caddyfile("/w", "127.0.0.1:1", "caddy v2.11.9", None);
        assert!(c.contains("http://:1 {\n\tbind 127.0.0.1\n"), "{c}");
        assert!(c.contains("protocols h1 h2c"), "{c}");
        assert!(c.contains(r#""server":"caddy-static""#), "{c}");
        assert!(c.contains("admin off"), "{c}");
        let t = super::caddyfile("/w", "127.0.0.1:1", "caddy", Some(("/c.pem", "/k.pem")));
        assert!(t.contains("https://:1 {"), "{t}");
        assert!(t.contains("\ttls /c.pem /k.pem\n"), "{t}");
        assert!(t.contains("protocols h1 h2 h3"), "{t}");
        assert!(
            t.contains(r#""protocols":["http/1.1","h2","h3 on udp 127.0.0.1:1"]"#),
            "{t}"
        );
    }

    #[test]
    fn the_version_is_caddys_module_and_the_source_is_named() {
        let info = "go\tgo1.26.8\npath\tgithub.com/caddyserver/caddy/v2/cmd/caddy\n\
                    mod\tgithub.com/caddyserver/caddy/v2\tv2.11.9\th1:x=\n";
        assert_eq!(super::version(info), "v2.11.9");
        let p = std::path::Path::new("/usr/local/bin/caddy");
        assert_eq!(super::source(p, info), "go install, go1.26.8");
        let d = std::path::Path::new("/usr/bin/caddy");
        assert_eq!(super::source(d, info), "Debian's package, go1.26.8");
    }
}
