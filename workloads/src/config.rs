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
    /// How it holds WebSocket connections (`/ws`, `/ws/room`); `null`
    /// where it does not serve WebSocket.
    #[serde(default)]
    pub websocket: Option<WebSocketHolding>,
    /// Why it does not serve WebSocket, where it does not (from its model:
    /// php-fpm runs a worker per request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket_unsupported: Option<String>,
    /// The HTTP versions its port serves: `http/1.1`, `h2c` (HTTP/2 with
    /// prior knowledge over plaintext), `h2` (HTTP/2 by ALPN over TLS); one
    /// served on another port names it (`h2c on 127.0.0.1:8081`). Empty
    /// (absent from the JSON) where the server does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
    /// Why it does not serve HTTP/2, where it does not (from its model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2_unsupported: Option<String>,
}

/// How a server holds its WebSocket connections and its rooms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebSocketHolding {
    /// What holds one connection, e.g. `a tokio task on its worker's loop`,
    /// `a worker thread for the connection's lifetime`.
    pub connection: String,
    /// Where a room's members are kept.
    pub rooms: RoomScope,
    /// Whether one room holds members on every worker (false: only those
    /// that one worker accepted share it).
    pub room_spans_workers: bool,
}

/// Where a server keeps its rooms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoomScope {
    /// One process, one loop: every member is in it (Node.js).
    PerProcess,
    /// Each worker its own rooms.
    PerWorker,
    /// One map shared by every worker (a lock, a shared table).
    SharedAcrossWorkers,
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
            websocket: None,
            websocket_unsupported: None,
            protocols: Vec::new(),
            http2_unsupported: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
        assert_eq!(v["workers"], 1);
        assert!(v["opcache"].is_null());
        assert_eq!(v["debug"], false);
        let back: ServerConfig = serde_json::from_slice(&c.to_json()).unwrap();
        assert_eq!(back, c);
        assert!(v.get("http_limits").is_none(), "absent when empty");
        assert!(v["websocket"].is_null(), "null where not served");
        // A /config from before WebSocket still parses.
        let old = br#"{"server":"s","model":"m","runtime":"r","workers":null,"db_pool":null,"opcache":null,"jit":null,"debug":false}"#;
        assert_eq!(ServerConfig::from_json(old).unwrap().websocket, None);
        let ws = WebSocketHolding {
            connection: "a task".into(),
            rooms: RoomScope::SharedAcrossWorkers,
            room_spans_workers: true,
        };
        let j = serde_json::to_value(&ws).unwrap();
        assert_eq!(j["rooms"], "shared-across-workers");
    }
}
