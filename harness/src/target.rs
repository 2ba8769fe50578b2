//! Target URLs: `http[s]://host[:port][/path][?query]`, resolved to a
//! socket address; any address is allowed (what is loaded is the user's
//! business).

use std::net::{SocketAddr, ToSocketAddrs};

/// A parsed and resolved URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// The `Host` header: host, and `:port` when it was given.
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// An https:// URL: the connection speaks TLS to `host`.
    pub tls: bool,
    /// Path and query, as sent on the request line (`/` at least).
    pub path: String,
    pub addr: SocketAddr,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("{0:?} is not an http:// or https:// URL")]
    Scheme(String),
    #[error("{0:?} has no host")]
    NoHost(String),
    #[error("{url:?}: bad port {port:?}")]
    Port { url: String, port: String },
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
}

impl Target {
    /// Parses `url` and resolves its host (IPv4 first).
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let scheme = |prefix: &str| {
            url.get(..prefix.len())
                .filter(|p| p.eq_ignore_ascii_case(prefix))
                .map(|_| &url[prefix.len()..])
        };
        let (rest, tls) = match (scheme("http://"), scheme("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(TargetError::Scheme(url.to_string())),
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        let path = path.split('#').next().unwrap_or("/").to_string();
        let (host, port) = split_host_port(authority, url, if tls { 443 } else { 80 })?;
        if host.is_empty() {
            return Err(TargetError::NoHost(url.to_string()));
        }
        let addr = resolve(&host, port)?;
        Ok(Target {
            url: url.to_string(),
            authority: authority.to_string(),
            host,
            port,
            tls,
            path,
            addr,
        })
    }
}

fn split_host_port(
    authority: &str,
    url: &str,
    default_port: u16,
) -> Result<(String, u16), TargetError> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| TargetError::NoHost(url.to_string()))?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) => p.parse().map_err(|_| TargetError::Port {
            url: url.to_string(),
            port: p.to_string(),
        })?,
    };
    Ok((host.to_string(), port))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, TargetError> {
    let err = |reason: String| TargetError::Resolve {
        host: host.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| err("no address".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_path_and_query() {
        let t = Target::parse("http://127.0.0.1:8082/sleep?ms=20").unwrap();
        assert_eq!(t.host, "127.0.0.1");
        assert_eq!(t.port, 8082);
        assert_eq!(t.path, "/sleep?ms=20");
        assert_eq!(t.authority, "127.0.0.1:8082");
        assert_eq!(t.addr, "127.0.0.1:8082".parse().unwrap());

        let t = Target::parse("http://127.0.0.1").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = Target::parse("HTTP://127.0.0.1:9?x=1#frag").unwrap();
        assert_eq!(t.path, "/?x=1");
        let t = Target::parse("http://[::1]:8080/a").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8080));
        let t = Target::parse("HTTPS://127.0.0.1/hello").unwrap();
        assert_eq!((t.tls, t.port, t.path.as_str()), (true, 443, "/hello"));
        assert!(!Target::parse("http://127.0.0.1").unwrap().tls);
        assert!(Target::parse("http://localhost:1/")
            .unwrap()
            .addr
            .ip()
            .is_loopback());
    }

    #[test]
    fn rejects_what_it_cannot_load() {
        assert!(matches!(
            Target::parse("ftp://127.0.0.1/"),
            Err(TargetError::Scheme(_))
        ));
        assert!(matches!(
            Target::parse("127.0.0.1:80"),
            Err(TargetError::Scheme(_))
        ));
        assert!(matches!(
            Target::parse("http://127.0.0.1:http/"),
            Err(TargetError::Port { .. })
        ));
        assert!(matches!(
            Target::parse("http:///x"),
            Err(TargetError::NoHost(_))
        ));
    }
}
