//! The database every server of a session shares: the one `--mysql-url`
//! names, or a private, throwaway MariaDB (own datadir, socket and port)
//! started here and removed when the session ends.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

use crate::catalog::embedded::Embedded;
use crate::catalog::{self, Db};

/// The private MariaDB's `max_connections`: room for any server's pool plus
/// `conn=new` bursts.
pub const EMBEDDED_MAX_CONNECTIONS: u32 = 1000;

/// Where the session's database comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No database: none was needed, or MariaDB is not installed.
    None,
    /// `--mysql-url`.
    External,
    /// A private MariaDB started by the harness.
    Embedded,
}

impl Kind {
    /// As results.json and calibrate.json spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::External => "external",
            Kind::Embedded => "embedded",
        }
    }
}

/// The session's database and what is known of it.
pub struct Database {
    pub db: Option<Db>,
    pub kind: Kind,
    /// `MariaDB 10.11.19`, when it could be asked.
    pub version: Option<String>,
    pub max_connections: Option<u64>,
    /// Why there is no database although one was asked for.
    pub unavailable: Option<String>,
    /// The private MariaDB, stopped and removed on drop.
    embedded: Embedded,
}

impl Database {
    pub fn none() -> Database {
        Database {
            db: None,
            kind: Kind::None,
            version: None,
            max_connections: None,
            unavailable: None,
            embedded: Embedded::default(),
        }
    }

    /// `mysql_url` if given (probed for its version, best effort), else a
    /// private MariaDB, retried once; without MariaDB installed, none, with
    /// the reason in [`Database::unavailable`].
    pub fn start(
        mysql_url: Option<&str>,
        interrupt: &AtomicBool,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<Database> {
        let mut out = Database::none();
        if let Some(url) = mysql_url {
            let d = Db::parse(url).context("bad --mysql-url")?;
            (out.version, out.max_connections) = probe_external(&d);
            out.kind = Kind::External;
            out.db = Some(d);
            return Ok(out);
        }
        if let Err(e) = embedded_mariadb::availability() {
            out.unavailable = Some(e.to_string());
            return Ok(out);
        }
        say("starting a private MariaDB ...");
        let opts = embedded_mariadb::Options {
            max_connections: EMBEDDED_MAX_CONNECTIONS,
            ..embedded_mariadb::Options::default()
        };
        // mariadb-install-db shares /tmp with whatever else runs: one retry.
        let m = match embedded_mariadb::MariaDb::start(opts.clone()) {
            Ok(m) => m,
            Err(e) if !interrupt.load(Ordering::Relaxed) => {
                let first = e.to_string();
                say(&format!(
                    "the private MariaDB did not start ({}); retrying once",
                    first.lines().next().unwrap_or("")
                ));
                embedded_mariadb::MariaDb::start(opts)
                    .with_context(|| format!("first attempt: {first}"))
                    .context("cannot start the private MariaDB")?
            }
            Err(e) => return Err(e).context("cannot start the private MariaDB"),
        };
        let (d, version) = out.embedded.adopt(m)?;
        out.kind = Kind::Embedded;
        out.version = version;
        out.max_connections = Some(u64::from(EMBEDDED_MAX_CONNECTIONS));
        out.db = Some(d);
        Ok(out)
    }

    /// The private `mariadbd`, while it runs (its CPU is the run's own).
    pub fn pid(&self) -> Option<u32> {
        self.embedded.pid()
    }

    /// The URL with the password hidden, for reports.
    pub fn redacted_url(&self) -> Option<String> {
        self.db.as_ref().map(Db::redacted)
    }

    /// The port of a database on this machine's loopback, which servers in a
    /// network namespace reach by DNAT.
    pub fn loopback_port(&self) -> Option<u16> {
        self.db
            .as_ref()
            .filter(|d| d.host == "127.0.0.1" || d.host == "localhost")
            .map(|d| d.port)
    }
}

/// `SELECT VERSION(), @@max_connections` through the `mariadb`/`mysql`
/// client, best effort (an external database).
fn probe_external(db: &Db) -> (Option<String>, Option<u64>) {
    let Some(client) = catalog::find_program(&["mariadb", "mysql"]) else {
        return (None, None);
    };
    let out = Command::new(client)
        .args([
            "--no-defaults",
            "-h",
            &db.host,
            "-P",
            &db.port.to_string(),
            "-u",
            &db.user,
        ])
        .args(["--batch", "--skip-column-names", "--connect-timeout=3"])
        .args(["-e", "SELECT VERSION(), @@max_connections"])
        .arg(&db.name)
        .env("MYSQL_PWD", &db.password)
        .stdin(std::process::Stdio::null())
        .output();
    parse_probe(out.ok().filter(|o| o.status.success()).map(|o| o.stdout))
}

fn parse_probe(out: Option<Vec<u8>>) -> (Option<String>, Option<u64>) {
    let Some(out) = out else { return (None, None) };
    let text = String::from_utf8_lossy(&out);
    let mut it = text.trim().split('\t');
    let version = it
        .next()
        .filter(|v| !v.is_empty())
        .map(|v| format!("MariaDB/MySQL {v}"));
    (version, it.next().and_then(|n| n.trim().parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_output_parses() {
        let (v, m) = parse_probe(Some(b"10.11.19-MariaDB-0+deb12u1\t151\n".to_vec()));
        assert_eq!(
            v.as_deref(),
            Some("MariaDB/MySQL 10.11.19-MariaDB-0+deb12u1")
        );
        assert_eq!(m, Some(151));
        assert_eq!(parse_probe(None), (None, None));
    }
}
