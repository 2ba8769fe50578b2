//! Glue shared by the three reference servers: the common flags, binding
//! and announcing the listener, the HTTP/1 request parser and response
//! encoder used by the coroutine and worker-pool servers (the event loop uses
//! hyper, with [`chunks`] checking its chunked bodies first), the cached
//! `Date` header, and graceful-shutdown plumbing.
//!
//! The contract itself (routes, bodies, validation) is in `workloads`.

pub mod chunks;
pub mod date;
pub mod flags;
pub mod http1;
pub mod listen;
pub mod shutdown;
pub mod tls;

pub use flags::CommonArgs;

/// The `major.minor` version of the compiler that built the server (`1.95`),
/// for the `runtime` field of `/config`.
pub const RUSTC_VERSION: &str = env!("SERVER_COMMON_RUSTC_VERSION");
