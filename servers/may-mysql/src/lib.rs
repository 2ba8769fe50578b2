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

/// The packet reader and the query answer's decoder over any byte source,
/// for the fuzz targets (`fuzz/`); not part of the client's API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use std::io::{self, Read};
    use std::time::Duration;

    use mysql_common::constants::CapabilityFlags;

    use crate::conn::{scalar_result, Packets};

    /// `input`, handed out in reads of the sizes `reads` gives in turn
    /// (cycled; 0 is taken as 1), then the end of file.
    pub struct Chunked<'a> {
        pub input: &'a [u8],
        pub reads: &'a [usize],
        pub at: usize,
        pub next: usize,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let size = if self.reads.is_empty() {
                usize::MAX
            } else {
                self.reads[self.next % self.reads.len()].max(1)
            };
            self.next += 1;
            let n = size.min(buf.len()).min(self.input.len() - self.at);
            buf[..n].copy_from_slice(&self.input[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// The packets `src` frames, in order, until the first error (its
    /// message last); and how many bytes were read but not consumed.
    pub fn packets(src: &mut Chunked<'_>, max: usize) -> (Vec<Result<Vec<u8>, String>>, usize) {
        let mut packets = Packets::new();
        let mut out = Vec::new();
        while out.len() < max {
            match packets.read(src, Duration::ZERO) {
                Ok(p) => out.push(Ok(p.to_vec())),
                Err(e) => {
                    out.push(Err(e.to_string()));
                    break;
                }
            }
        }
        (out, packets.unread())
    }

    /// The answer to a COM_QUERY read from `src` (sequence ids from 1, as
    /// after the command's packet 0), with CLIENT_PROTOCOL_41 and, if
    /// `deprecate_eof`, CLIENT_DEPRECATE_EOF. Outer `Err`: protocol state
    /// lost; inner: the query failed.
    pub fn scalar(
        src: &mut Chunked<'_>,
        deprecate_eof: bool,
    ) -> Result<Result<Option<i64>, String>, String> {
        let mut packets = Packets::new();
        packets.seq = 1;
        let mut caps = CapabilityFlags::CLIENT_PROTOCOL_41;
        if deprecate_eof {
            caps |= CapabilityFlags::CLIENT_DEPRECATE_EOF;
        }
        match scalar_result(&mut packets, src, Duration::ZERO, caps) {
            Ok(inner) => Ok(inner.map_err(|e| e.to_string())),
            Err(e) => Err(e.to_string()),
        }
    }
}
