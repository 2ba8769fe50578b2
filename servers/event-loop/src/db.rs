//! The database side of `/db` and `/work`: a `mysql_async` pool per event
//! loop, or a connection per request (`conn=new`), every step bounded in
//! time so that a dead or hung database answers 503 within seconds.

use std::time::Duration;

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row};
use tokio::time::{timeout, timeout_at, Instant};
use workloads::{ConnMode, Query};

/// How long a database request may take beyond its own `SLEEP()`: waiting
/// for a pooled connection or opening one, sending the query, reading the
/// answer. Past it the database counts as unavailable (503). mysql_async
/// has no connect or read timeout of its own, hence this deadline.
pub const DB_TIMEOUT: Duration = Duration::from_secs(3);

/// How long closing a connection may take (`COM_QUIT` and a TCP shutdown).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connection options from `--mysql-url` and `--db-pool` (per loop).
///
/// Chosen for a like-for-like comparison with PDO and mysql2: TCP as the
/// URL says (mysql_async would otherwise ask for `@@socket` and reconnect
/// over the Unix socket), no `SELECT @@max_allowed_packet, @@wait_timeout`
/// round trip after the handshake, and no `COM_RESET_CONNECTION` round trip
/// each time a connection returns to the pool. The pool keeps up to
/// `pool_size` idle connections (opened on demand, never pre-opened).
pub fn opts(url: &str, pool_size: u32) -> Result<Opts> {
    let parsed = Opts::from_url(url).with_context(|| format!("parsing --mysql-url {url:?}"))?;
    let size = pool_size as usize;
    let constraints = PoolConstraints::new(size, size).context("--db-pool must be at least 1")?;
    let pool_opts = PoolOpts::default()
        .with_constraints(constraints)
        .with_reset_connection(false);
    Ok(OptsBuilder::from_opts(parsed)
        .prefer_socket(false)
        .max_allowed_packet(Some(16 * 1024 * 1024))
        .wait_timeout(Some(28_800))
        .tcp_nodelay(true)
        .pool_opts(pool_opts)
        .into())
}

/// One event loop's database access.
pub struct Db {
    pool: Pool,
    opts: Opts,
}

impl Db {
    /// Must be called on the loop's runtime: the pool's background task
    /// (mysql_async's recycler) is spawned on the runtime that first uses it.
    pub fn new(opts: Opts) -> Db {
        Db {
            pool: Pool::new(opts.clone()),
            opts,
        }
    }

    /// Runs `query` and returns the first column of its first row, or
    /// `None` if the database could not answer in time (then 503).
    pub async fn run(&self, query: Query, mode: ConnMode) -> Option<i64> {
        let own = Duration::from_millis(u64::from(query.sleep_ms.unwrap_or(0)));
        let deadline = Instant::now() + own + DB_TIMEOUT;
        let sql = query.sql();
        match mode {
            ConnMode::Pooled => {
                let conn = timeout_at(deadline, self.pool.get_conn())
                    .await
                    .ok()?
                    .ok()?;
                // A healthy connection goes back to the pool as it drops here.
                query_first(conn, &sql, deadline).await.0
            }
            ConnMode::New => {
                let conn = timeout_at(deadline, Conn::new(self.opts.clone()))
                    .await
                    .ok()?
                    .ok()?;
                let (value, conn) = query_first(conn, &sql, deadline).await;
                if let Some(conn) = conn {
                    let _ = timeout(CLOSE_TIMEOUT, conn.disconnect()).await;
                }
                value
            }
        }
    }

    /// Closes the pool's connections (at shutdown).
    pub async fn close(self) {
        let _ = timeout(CLOSE_TIMEOUT, self.pool.disconnect()).await;
    }
}

/// Runs `sql` on `conn`. Returns the value, and the connection if it can
/// be reused: after a timeout or an I/O error its state is unknown (the
/// query may still be in flight), so it is closed here, in a task of its
/// own, and never returns to the pool.
async fn query_first(mut conn: Conn, sql: &str, deadline: Instant) -> (Option<i64>, Option<Conn>) {
    match timeout_at(deadline, conn.query_first::<Row, _>(sql)).await {
        Ok(Ok(row)) => (Some(first_value(row)), Some(conn)),
        // The server refused the query; the connection itself is fine.
        Ok(Err(mysql_async::Error::Server(_))) => (None, Some(conn)),
        Ok(Err(_)) | Err(_) => {
            tokio::spawn(async move {
                let _ = timeout(CLOSE_TIMEOUT, conn.disconnect()).await;
            });
            (None, None)
        }
    }
}

/// The first column of the first row as an integer. No row, or a value
/// that is not an integer, is a wrong answer (0: `finish` answers 500).
fn first_value(row: Option<Row>) -> i64 {
    row.and_then(|r| r.get_opt::<i64, usize>(0))
        .and_then(Result::ok)
        .unwrap_or(0)
}
