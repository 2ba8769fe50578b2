//! A small MySQL/MariaDB client for [may] coroutines.
//!
//! Protocol packets are built and parsed with [`mysql_common`] and carried
//! over [`may::net::TcpStream`], so a query waiting on the database parks
//! its coroutine while the worker thread runs others — the analogue of
//! Swoole's coroutine hooks. It does what the benchmark servers need and no
//! more: connect and authenticate (`mysql_native_password`,
//! `caching_sha2_password` including RSA full authentication, auth switch),
//! run a text query and read one integer ([`Conn::query_scalar_i64`]),
//! [`Conn::ping`], and a bounded [`Pool`] that recovers by itself when the
//! database goes away and comes back.
//!
//! Every network operation is bounded: the connect and handshake by
//! [`Opts::connect_timeout`], each read and write by [`Opts::io_timeout`]
//! (may applies a socket timeout per blocking read or write call, not per
//! command), and the wait for a pooled connection by the pool's wait
//! timeout. No TLS, no prepared statements, no compression.
//!
//! ```no_run
//! # fn main() -> Result<(), may_mysql::Error> {
//! let pool = may_mysql::Pool::new(may_mysql::Opts::from_url("mysql://bench:bench@127.0.0.1:3306/bench")?, 20);
//! let h = may::go!(move || pool.get()?.query_scalar_i64("SELECT 1"));
//! assert_eq!(h.join().unwrap()?, Some(1));
//! # Ok(()) }
//! ```

mod auth;
mod conn;
mod error;
mod opts;
mod pool;

pub use conn::Conn;
pub use error::Error;
pub use opts::{Opts, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IO_TIMEOUT};
pub use pool::{Pool, PooledConn};
