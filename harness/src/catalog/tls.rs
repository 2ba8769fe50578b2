//! `compare --tls`: every server terminates TLS itself with the lab's
//! certificate for the run ([`ServerTls`]), and each recipe's share of it —
//! the flags, variables or configuration lines that turn its listener into
//! an HTTPS one — is written here, once, so that a test can read what each
//! stack is given (Swoole, RoadRunner and FrankenPHP do not run here).
//!
//! What every server is held to is the client's side, the same for all: one
//! protocol version (the run's `--tls-version`), rustls' cipher-suite order
//! (the servers follow the client's order: nginx's and Node.js's OpenSSL
//! default, rustls' server default) and its X25519 key share. What each
//! server negotiated is read back by one handshake before loading and
//! printed in the settings table.

use std::path::PathBuf;

use crate::engine::{TlsPlan, TlsVersion, Trust};

use super::{Entry, Recipe};

/// The run's certificate as servers and clients are given it.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The server's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA clients trust (PEM).
    pub ca: PathBuf,
    /// How every client of the run speaks to the servers: the version
    /// asked for, resumption, trusting only the run's CA.
    pub client: TlsPlan,
}

impl ServerTls {
    /// For the lab certificate `cert`: clients speak `version` and trust
    /// only its CA, checking the name `127.0.0.1` (wherever the server is
    /// reached: a bridge's address is not on the certificate, the server
    /// is the same).
    pub fn new(cert: &labcert::LabCert, version: TlsVersion) -> Result<ServerTls, String> {
        let mut client = TlsPlan::new("127.0.0.1");
        client.version = version;
        client.trust = match TlsPlan::cas_from_file(&cert.ca_path())? {
            Trust::Cas(cas) => Trust::Cas(cas),
            other => other,
        };
        Ok(ServerTls {
            cert: cert.cert_path(),
            key: cert.key_path(),
            ca: cert.ca_path(),
            client,
        })
    }

    fn cert(&self) -> String {
        self.cert.display().to_string()
    }

    fn key(&self) -> String {
        self.key.display().to_string()
    }

    /// The Rust reference servers' flags.
    pub fn workspace_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert(),
            "--tls-key".into(),
            self.key(),
        ]
    }

    /// compose/node/server.js and compose/swoole/server.php: `https` /
    /// `SWOOLE_SSL` when these are set.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("TLS_CERT".into(), self.cert()),
            ("TLS_KEY".into(), self.key()),
        ]
    }

    /// nginx (nginx-static, php-fpm's front): `listen … ssl` on the same
    /// listener, TLS 1.2 and 1.3, its session cache and tickets. `conf`
    /// must hold `listen_line` (the plaintext listener) once.
    pub fn nginx(&self, conf: &str, listen_line: &str) -> Result<String, String> {
        if conf.matches(listen_line).count() != 1 {
            return Err(format!(
                "nginx configuration: expected the line {listen_line:?} once"
            ));
        }
        let ssl = if listen_line.contains(" backlog=") {
            listen_line.replacen(" backlog=", " ssl backlog=", 1)
        } else {
            listen_line.replacen(';', " ssl;", 1)
        };
        let indent: String = listen_line
            .chars()
            .take_while(|c| c.is_whitespace())
            .collect();
        let directives = format!(
            "{ssl}\n{indent}ssl_certificate {};\n{indent}ssl_certificate_key {};\n\
             {indent}ssl_protocols TLSv1.2 TLSv1.3;\n{indent}ssl_session_cache shared:tls:1m;",
            self.cert(),
            self.key()
        );
        Ok(conf.replacen(listen_line, &directives, 1))
    }

    /// RoadRunner: its HTTP plugin's own TLS (`http.ssl`, Go's crypto/tls)
    /// on `listen`, the one the harness loads; RoadRunner keeps its plain
    /// `http.address` too, given `plain` (another loopback port, never
    /// loaded). `-o` overrides of .rr.yaml.
    pub fn roadrunner_overrides(&self, listen: &str, plain: &str) -> Vec<String> {
        [
            format!("http.address={plain}"),
            format!("http.ssl.address={listen}"),
            "http.ssl.redirect=false".into(),
            format!("http.ssl.cert={}", self.cert()),
            format!("http.ssl.key={}", self.key()),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    /// FrankenPHP (Caddy): compose/frankenphp/Caddyfile's site is
    /// `{$SCHEME}://…` with a `{$TLS_DIRECTIVE}` line, here `https` and
    /// `tls CERT KEY` (Caddy's own TLS, Go's crypto/tls; automatic HTTPS
    /// stays off).
    pub fn frankenphp_env(&self) -> Vec<(String, String)> {
        vec![
            ("SCHEME".into(), "https".into()),
            (
                "TLS_DIRECTIVE".into(),
                format!("tls {} {}", self.cert(), self.key()),
            ),
        ]
    }
}

/// Whether `entry` can terminate TLS itself in a comparison; `Err` says why
/// not (its row says so: never silently plaintext).
pub fn support(entry: &Entry) -> Result<(), String> {
    match &entry.recipe {
        Recipe::External { .. } => Err(
            "--tls: a --target is loaded as it was given (http://); its TLS is not the lab's"
                .into(),
        ),
        Recipe::Image { .. } => Err(
            "--tls: a server from its compose image is not given the lab's certificate yet".into(),
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls() -> (labcert::LabCert, ServerTls) {
        let cert = labcert::LabCert::new().unwrap();
        let tls = ServerTls::new(&cert, TlsVersion::Tls13).unwrap();
        (cert, tls)
    }

    #[test]
    fn every_stack_is_given_the_same_certificate() {
        let (cert, tls) = tls();
        let c = cert.cert_path().display().to_string();
        let k = cert.key_path().display().to_string();
        assert_eq!(tls.workspace_args(), ["--tls-cert", &c, "--tls-key", &k]);
        assert!(tls.env().contains(&("TLS_CERT".into(), c.clone())));
        let conf = "x\n        listen 127.0.0.1:1 backlog=4096;\ny\n";
        let out = tls
            .nginx(conf, "        listen 127.0.0.1:1 backlog=4096;")
            .unwrap();
        assert!(
            out.contains("        listen 127.0.0.1:1 ssl backlog=4096;\n"),
            "{out}"
        );
        assert!(
            out.contains(&format!("        ssl_certificate {c};")),
            "{out}"
        );
        assert!(tls.nginx(conf, "listen 9;").is_err());
        // RoadRunner: TLS on the loaded address, the plain one elsewhere.
        let rr = tls.roadrunner_overrides("127.0.0.1:8443", "127.0.0.1:9000");
        assert_eq!(rr.iter().filter(|a| *a == "-o").count(), 5);
        assert!(rr.contains(&"http.ssl.address=127.0.0.1:8443".to_string()));
        assert!(rr.contains(&format!("http.ssl.cert={c}")));
        assert!(rr.contains(&"http.address=127.0.0.1:9000".to_string()));
        let fp = tls.frankenphp_env();
        assert!(fp.contains(&("SCHEME".into(), "https".into())));
        assert!(fp.contains(&("TLS_DIRECTIVE".into(), format!("tls {c} {k}"))));
        // The stacks' own files read exactly the variables given.
        let compose = crate::catalog::Env::discover(None).compose();
        let read = |f: &str| std::fs::read_to_string(compose.join(f)).unwrap();
        let caddy = read("frankenphp/Caddyfile");
        for (var, _) in &fp {
            assert!(
                caddy.contains(&format!("{{${var}")),
                "Caddyfile lacks {var}"
            );
        }
        for f in ["swoole/server.php", "node/server.js"] {
            let text = read(f);
            for (var, _) in tls.env() {
                assert!(
                    text.contains(&format!("getenv('{var}')"))
                        || text.contains(&format!("process.env.{var} ")),
                    "{f} does not read {var}"
                );
            }
        }
        assert!(read("swoole/server.php").contains("SWOOLE_SSL"));
        // Clients trust only the run's CA.
        assert!(matches!(tls.client.trust, Trust::Cas(ref c) if c.len() == 1));
    }

    #[test]
    fn servers_started_elsewhere_say_why_they_are_not_over_tls() {
        let e = super::super::external("x=http://127.0.0.1:1").unwrap();
        assert!(support(&e).unwrap_err().contains("--target"));
        for e in super::super::catalog() {
            support(&e).unwrap();
        }
    }
}
