//! `/config`: a server's effective settings, as it reports them.

use serde::{Deserialize, Serialize};

/// The settings a server reports at `/config`, read from the running process.
/// Fields that do not apply are `None` (JSON `null`). The harness prints them
/// side by side and warns where servers of one comparison differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerConfig {
    /// Name of the server, e.g. `php-fpm`, `event-loop`.
    pub server: String,
    /// Concurrency model: `event-loop`, `coroutine`, `worker-pool`, ...
    pub model: String,
    /// Runtime and version, e.g. `php 8.2.36`, `rust 1.95 tokio+hyper`.
    pub runtime: String,
    pub workers: Option<u32>,
    pub db_pool: Option<u32>,
    pub opcache: Option<bool>,
    pub jit: Option<String>,
    pub debug: bool,
    /// What the server's HTTP layer is known not to do (RFC 9112 / 9110
    /// requirements it leaves unmet, each with its section), for a server
    /// that knows its own gaps; empty (and absent from the JSON) otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_limits: Vec<String>,
    /// How the server terminates TLS when it does (library, versions), e.g.
    /// `rustls 0.23 (ring): TLS 1.3, 1.2`; absent from the JSON when it
    /// serves plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
}

impl ServerConfig {
    /// The JSON body, rendered once.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("ServerConfig serializes")
    }

    /// Parses a `/config` body.
    pub fn from_json(body: &[u8]) -> Result<ServerConfig, serde_json::Error> {
        serde_json::from_slice(body)
    }

    /// The JSON body with a `'static` lifetime, for servers that render it
    /// once at start-up and serve it for the life of the process.
    pub fn leak_json(&self) -> &'static [u8] {
        Box::leak(self.to_json().into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nulls_for_fields_that_do_not_apply() {
        let c = ServerConfig {
            server: "event-loop".into(),
            model: "event-loop".into(),
            runtime: "rust".into(),
            workers: Some(1),
            db_pool: Some(20),
            opcache: None,
            jit: None,
            debug: false,
            http_limits: Vec::new(),
            tls: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
        assert_eq!(v["workers"], 1);
        assert!(v["opcache"].is_null());
        assert_eq!(v["debug"], false);
        let back: ServerConfig = serde_json::from_slice(&c.to_json()).unwrap();
        assert_eq!(back, c);
        assert!(v.get("http_limits").is_none(), "absent when empty");
    }
}
