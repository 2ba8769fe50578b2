//! A worker's database connection: one persistent, blocking `mysql`
//! connection, opened lazily, discarded when broken and reopened by the next
//! query (a PHP-FPM child with a persistent PDO); `conn=new` opens one for
//! the request and closes it after (`new PDO(...)` per request).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

use anyhow::Context;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};
use mysql_common::proto::codec::error::PacketCodecError;
use workloads::{ConnMode, Query};

/// Bound on opening a TCP connection to the database.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on each read or write on a database connection (plus `sleep_ms`
/// for `/db?sleep_ms=M`): a stopped or hung database answers 503 in seconds.
pub const IO_TIMEOUT: Duration = Duration::from_secs(3);
/// `max_allowed_packet` assumed when the URL does not set one, so that
/// opening a connection costs no extra `SELECT @@max_allowed_packet` round
/// trip (PDO and mysql2 do not ask either). Our queries are tiny.
const MAX_ALLOWED_PACKET: usize = 16 * 1024 * 1024;

/// Connection options for every worker: from the URL, plus timeouts.
pub fn options(url: &str) -> anyhow::Result<Opts> {
    let opts = Opts::from_url(url).with_context(|| format!("bad --mysql-url {url:?}"))?;
    let packet = opts.get_max_allowed_packet().unwrap_or(MAX_ALLOWED_PACKET);
    Ok(OptsBuilder::from_opts(opts)
        .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
        .read_timeout(Some(IO_TIMEOUT))
        .write_timeout(Some(IO_TIMEOUT))
        .tcp_nodelay(true)
        // Stay on TCP as the URL says (the driver would otherwise look up
        // @@socket on a loopback address and switch to the Unix socket, which
        // the other servers of a comparison do not use).
        .prefer_socket(false)
        .max_allowed_packet(Some(packet))
        .stmt_cache_size(0)
        .into())
}

/// One worker's database access.
pub struct Db {
    opts: Opts,
    /// The persistent connection, `None` until first used or after a failure.
    conn: Option<Conn>,
}

impl Db {
    pub fn new(opts: Opts) -> Db {
        Db { opts, conn: None }
    }

    /// Runs `query` and returns the first column of its first row, or `None`
    /// if the database could not answer (the caller answers 503).
    pub fn query(&mut self, query: Query, mode: ConnMode) -> Option<i64> {
        match mode {
            ConnMode::New => {
                let mut conn = Conn::new(self.opts.clone()).ok()?;
                run(&mut conn, query).ok()?
                // `conn` drops here: COM_QUIT, then the socket closes.
            }
            ConnMode::Pooled => self.pooled(query),
        }
    }

    fn pooled(&mut self, query: Query) -> Option<i64> {
        let reused = self.conn.is_some();
        match run(self.connection()?, query) {
            Ok(value) => value,
            Err(e) => {
                self.conn = None;
                // A connection that sat idle may have been closed by a
                // database restart: retry once on a fresh one, unless the
                // failure was a timeout (retrying would double the wait).
                if reused && !is_timeout(&e) {
                    run(self.connection()?, query).unwrap_or_else(|_| {
                        self.conn = None;
                        None
                    })
                } else {
                    None
                }
            }
        }
    }

    /// The persistent connection, opened if needed.
    fn connection(&mut self) -> Option<&mut Conn> {
        if self.conn.is_none() {
            self.conn = Some(Conn::new(self.opts.clone()).ok()?);
        }
        self.conn.as_mut()
    }
}

/// Runs `query` on `conn`. A `SLEEP` query may take its `sleep_ms` on top of
/// the usual I/O bound, so the socket's read timeout is widened around it.
fn run(conn: &mut Conn, query: Query) -> mysql::Result<Option<i64>> {
    match query.sleep_ms {
        None => conn.query_first(query.sql()),
        Some(ms) => {
            let widened = IO_TIMEOUT + Duration::from_millis(u64::from(ms));
            set_read_timeout(conn, widened)?;
            let value = conn.query_first(query.sql())?;
            set_read_timeout(conn, IO_TIMEOUT)?;
            Ok(value)
        }
    }
}

fn set_read_timeout(conn: &Conn, timeout: Duration) -> std::io::Result<()> {
    // SAFETY: the descriptor belongs to `conn`, which outlives this borrow.
    let fd = unsafe { BorrowedFd::borrow_raw(conn.as_raw_fd()) };
    socket2::SockRef::from(&fd).set_read_timeout(Some(timeout))
}

fn is_timeout(e: &mysql::Error) -> bool {
    let io = match e {
        mysql::Error::IoError(io) => io,
        mysql::Error::CodecError(PacketCodecError::Io(io)) => io,
        _ => return false,
    };
    matches!(
        io.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
