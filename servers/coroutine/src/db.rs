//! `/db` and `/work` queries through `may_mysql`: the socket I/O yields the
//! coroutine, so a query in flight parks only its coroutine.

use std::sync::atomic::{AtomicBool, Ordering};

use may_mysql::{Conn, Error, Opts, Pool};
use workloads::{ConnMode, Query};

/// The database side of the server: one pool shared by all coroutines on
/// all worker threads, and the settings for `conn=new` connections.
///
/// With 100 clients sharing 20 connections nearly every request waits for a
/// pooled connection: `Pool::get` parks the coroutine without arming a may
/// timer (see `may_mysql::Pool`), so that wait costs no trip through may's
/// timer thread.
pub struct Db {
    pool: Pool,
    opts: Opts,
    /// Whether the last query succeeded: the state is logged when it changes
    /// (once per outage, not per request).
    healthy: AtomicBool,
}

impl Db {
    /// A pool of at most `pool_size` connections to `url`, opened on demand
    /// (a database that is down at start-up is not an error: `/db` answers
    /// 503 until it is up).
    pub fn new(url: &str, pool_size: usize) -> Result<Db, Error> {
        let opts = Opts::from_url(url)?;
        Ok(Db {
            pool: Pool::new(opts.clone(), pool_size),
            opts,
            healthy: AtomicBool::new(true),
        })
    }

    /// Runs `query` and returns the first column of its first row.
    ///
    /// Pooled: a connection that failed is discarded when it goes back to
    /// the pool, so the pool recovers by itself after a database restart.
    /// `conn=new`: a connection opened for this request, closed when dropped.
    pub fn query(&self, query: Query, mode: ConnMode) -> Result<Option<i64>, Error> {
        let result = self.run(query, mode);
        self.observe(&result);
        result
    }

    fn run(&self, query: Query, mode: ConnMode) -> Result<Option<i64>, Error> {
        let sql = query.sql();
        match mode {
            ConnMode::Pooled => self
                .pool
                .get()
                .and_then(|mut conn| conn.query_scalar_i64(&sql)),
            ConnMode::New => Conn::connect(&self.opts)?.query_scalar_i64(&sql),
        }
    }

    /// Logs the first failure after a success and the first success after
    /// a failure; the hot path is one relaxed load.
    fn observe(&self, result: &Result<Option<i64>, Error>) {
        let ok = result.is_ok();
        if self.healthy.load(Ordering::Relaxed) == ok
            || self.healthy.swap(ok, Ordering::Relaxed) == ok
        {
            return;
        }
        match result {
            Ok(_) => eprintln!("coroutine: the database answers again"),
            Err(e) => {
                eprintln!("coroutine: database unavailable, answering 503 until it is back: {e}")
            }
        }
    }
}
