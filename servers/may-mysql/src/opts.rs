use std::fmt;
use std::time::Duration;

use crate::Error;

/// Default TCP connect (and handshake step) timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Default per-read/per-write timeout once connected: above the contract's
/// longest query (`SLEEP(10)`), so that only a hung server trips it.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(15);

/// Connection settings.
#[derive(Clone, PartialEq, Eq)]
pub struct Opts {
    /// Host name or IP address (an IP literal avoids a blocking DNS lookup).
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub db: Option<String>,
    /// Bounds the TCP connect and each step of the handshake.
    pub connect_timeout: Duration,
    /// Bounds each socket read and write after the handshake.
    pub io_timeout: Duration,
}

impl fmt::Debug for Opts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opts")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("db", &self.db)
            .field("connect_timeout", &self.connect_timeout)
            .field("io_timeout", &self.io_timeout)
            .finish()
    }
}

impl Opts {
    /// Parses `mysql://user:pass@host:port/db`.
    ///
    /// User, password and database are percent-decoded; the port defaults to
    /// 3306; an IPv6 host goes in brackets (`[::1]`). Optional query
    /// parameters: `connect_timeout_ms`, `io_timeout_ms`.
    pub fn from_url(url: &str) -> Result<Opts, Error> {
        let bad = |why: &str| Error::Url(format!("{why} in {:?}", redact(url)));
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .ok_or_else(|| bad("expected the scheme mysql://"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            Some(ui) => match ui.split_once(':') {
                Some((u, p)) => (percent_decode(u)?, percent_decode(p)?),
                None => (percent_decode(ui)?, String::new()),
            },
            None => (String::new(), String::new()),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
            };
            (h, port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(bad("missing host"));
        }
        let port = match port {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
            None => 3306,
        };
        let db = match path.trim_end_matches('/') {
            "" => None,
            p => Some(percent_decode(p)?),
        };
        let mut opts = Opts {
            host: host.to_owned(),
            port,
            user,
            password,
            db,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            io_timeout: DEFAULT_IO_TIMEOUT,
        };
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let ms = || {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|&ms| ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| bad(&format!("{key} must be a positive number of ms")))
            };
            match key {
                "connect_timeout_ms" => opts.connect_timeout = ms()?,
                "io_timeout_ms" => opts.io_timeout = ms()?,
                _ => return Err(bad(&format!("unknown parameter {key:?}"))),
            }
        }
        Ok(opts)
    }
}

/// The URL with its password replaced, for error messages.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find(['/', '?'])
        .map_or(url.len(), |i| scheme_end + i);
    let authority = &url[scheme_end..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &authority[..colon],
            &url[scheme_end + at..]
        ),
        _ => url.to_owned(),
    }
}

fn percent_decode(s: &str) -> Result<String, Error> {
    if !s.contains('%') {
        return Ok(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::Url("bad percent-encoding in user, password or db".into()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| Error::Url("percent-decoded user, password or db is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_url() {
        let o = Opts::from_url("mysql://bench:s%40c%3Ar%2Ft@127.0.0.1:3307/bench").unwrap();
        assert_eq!(o.user, "bench");
        assert_eq!(o.password, "s@c:r/t");
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.port, 3307);
        assert_eq!(o.db.as_deref(), Some("bench"));
        assert_eq!(o.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(o.io_timeout, DEFAULT_IO_TIMEOUT);
    }

    #[test]
    fn defaults_and_variants() {
        let o = Opts::from_url("mysql://root@localhost").unwrap();
        assert_eq!((o.user.as_str(), o.password.as_str()), ("root", ""));
        assert_eq!((o.host.as_str(), o.port, o.db), ("localhost", 3306, None));

        let o = Opts::from_url("mysql://u:p@[::1]:3310/").unwrap();
        assert_eq!((o.host.as_str(), o.port, o.db), ("::1", 3310, None));

        let o =
            Opts::from_url("mysql://u:p@h/d?connect_timeout_ms=500&io_timeout_ms=20000").unwrap();
        assert_eq!(o.connect_timeout, Duration::from_millis(500));
        assert_eq!(o.io_timeout, Duration::from_secs(20));

        // '@' inside the password, unencoded: the last '@' separates the host.
        let o = Opts::from_url("mysql://u:p@ss@h:1/d").unwrap();
        assert_eq!((o.password.as_str(), o.host.as_str()), ("p@ss", "h"));
    }

    #[test]
    fn rejects_bad_urls_without_leaking_the_password() {
        for url in [
            "postgres://u:p@h/d",
            "mysql://u:secret@h:notaport/d",
            "mysql://u:secret@:3306/d",
            "mysql://u:secret@h/d?tls=1",
            "mysql://u:secret@h/d?io_timeout_ms=0",
            "mysql://u:%zz@h/d",
        ] {
            let err = Opts::from_url(url).unwrap_err();
            assert!(matches!(err, Error::Url(_)), "{url}: {err}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }

    #[test]
    fn debug_redacts_password() {
        let o = Opts::from_url("mysql://u:secret@h/d").unwrap();
        assert!(!format!("{o:?}").contains("secret"));
    }
}
