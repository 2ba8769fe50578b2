//! `--tls-cert FILE --tls-key FILE`: the loop terminates TLS itself, as a
//! Node.js `https` server does, with tokio-rustls over the configuration
//! every reference server shares (`server_common::tls`). The handshake is a
//! task of the loop like the connection it precedes.

use std::time::Duration;

/// A client that does not finish its handshake within this long is dropped
/// (as a head not finished within the header timeout is).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
