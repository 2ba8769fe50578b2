//! The database the servers of a run use, as a URL and as the environment
//! variables the PHP and Node.js apps read.

use anyhow::{bail, Context};

/// The database the servers use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Db {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub name: String,
}

impl Db {
    /// Parses `mysql://user:pass@host:port/db`.
    pub fn parse(url: &str) -> anyhow::Result<Db> {
        let rest = url
            .strip_prefix("mysql://")
            .with_context(|| format!("{url:?} is not a mysql:// URL"))?;
        let (auth, hostpart) = rest.rsplit_once('@').unwrap_or(("", rest));
        let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
        let (hostport, name) = hostpart.split_once('/').unwrap_or((hostpart, "bench"));
        let name = name.split('?').next().unwrap_or("bench");
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse()
                    .with_context(|| format!("bad port {p:?} in {url:?}"))?,
            ),
            None => (hostport, 3306),
        };
        if host.is_empty() {
            bail!("{url:?} has no host");
        }
        Ok(Db {
            url: url.to_string(),
            host: host.to_string(),
            port,
            user: if user.is_empty() { "bench" } else { user }.to_string(),
            password: password.to_string(),
            name: if name.is_empty() { "bench" } else { name }.to_string(),
        })
    }

    /// The URL with the password hidden, for reports.
    pub fn redacted(&self) -> String {
        format!(
            "mysql://{}:***@{}:{}/{}",
            self.user, self.host, self.port, self.name
        )
    }

    /// `DB_HOST`… as the PHP and Node.js apps read them.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DB_HOST", self.host.clone()),
            ("DB_PORT", self.port.to_string()),
            ("DB_USER", self.user.clone()),
            ("DB_PASSWORD", self.password.clone()),
            ("DB_NAME", self.name.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_urls_parse() {
        let d = Db::parse("mysql://bench:secret@127.0.0.1:3307/bench").unwrap();
        assert_eq!(
            (
                d.host.as_str(),
                d.port,
                d.user.as_str(),
                d.password.as_str()
            ),
            ("127.0.0.1", 3307, "bench", "secret")
        );
        assert_eq!(d.redacted(), "mysql://bench:***@127.0.0.1:3307/bench");
        assert_eq!(Db::parse("mysql://u@h/x").unwrap().port, 3306);
        assert!(Db::parse("postgres://x").is_err());
        assert!(Db::parse("mysql://u:p@:1/x").is_err());
    }
}
