//! `/db` and `/work` queries through `may_mysql`: the socket I/O yields the
//! coroutine, so a query in flight parks only its coroutine.

use std::sync::atomic::{AtomicBool, Ordering};

use may::sync::Semphore;
use may_mysql::{Conn, Error, Opts, Pool};
use workloads::{ConnMode, Query};

/// The database side of the server: one pool shared by all coroutines on
/// all worker threads, and the settings for `conn=new` connections.
///
/// Waiting for a pooled connection happens at [`Db::slots`], not inside
/// `Pool::get`. `Pool::get` bounds its wait with a timed park, and a timed
/// park in may arms and then cancels a timer of may's global timer thread,
/// waking that thread each time (a futex wake and a context switch): with
/// 100 clients sharing 20 connections every request waits, and that cost
/// was about 4–7 µs of server CPU per `/work` request, a fifth of it. An
/// untimed wait is a plain coroutine park. It is still bounded: each slot
/// holder's database work is bounded by may-mysql's connect and I/O
/// timeouts, and a database that is down fails connects at once.
pub struct Db {
    pool: Pool,
    opts: Opts,
    /// One permit per pool connection: a coroutine holding one always finds
    /// a free slot in the pool, so `Pool::get` never waits.
    slots: Semphore,
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
        let pool_size = pool_size.max(1);
        Ok(Db {
            pool: Pool::new(opts.clone(), pool_size),
            opts,
            slots: Semphore::new(pool_size),
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
            ConnMode::Pooled => {
                let _slot = Slot::take(&self.slots);
                // The connection goes back to the pool (end of the closure)
                // before the slot is given back.
                self.pool
                    .get()
                    .and_then(|mut conn| conn.query_scalar_i64(&sql))
            }
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

/// A permit of [`Db::slots`], given back on drop (also when unwinding).
struct Slot<'a>(&'a Semphore);

impl<'a> Slot<'a> {
    fn take(slots: &'a Semphore) -> Slot<'a> {
        slots.wait();
        Slot(slots)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.post();
    }
}
