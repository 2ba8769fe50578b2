use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use may::sync::Semphore;

use crate::{Conn, Error, Opts};

/// A bounded pool of connections, shared by coroutines on any worker thread
/// (clones share one pool).
///
/// Connections are opened on demand, up to `max_size`. A semaphore holds
/// one permit per connection slot: waiting for a slot parks the coroutine
/// (may's `Semphore`), never the worker thread. The idle list sits behind a
/// std mutex that is only held to push or pop, never across I/O.
///
/// Recovery: a connection that failed (see [`Conn::is_broken`]) is dropped
/// instead of returned; an idle one is checked with a non-blocking peek
/// before reuse, so connections killed by a server restart are discarded
/// without costing a failed query. A slot whose connect failed is given
/// back, so the next `get` tries again.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    opts: Opts,
    max_size: usize,
    wait_timeout: Duration,
    permits: Semphore,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// A pool of at most `max_size` (at least 1) connections; [`Pool::get`]
    /// waits at most `opts.connect_timeout + opts.io_timeout` for a slot.
    pub fn new(opts: Opts, max_size: usize) -> Pool {
        let wait = opts.connect_timeout + opts.io_timeout;
        Pool::with_wait_timeout(opts, max_size, wait)
    }

    /// As [`Pool::new`], with an explicit bound on the wait for a free slot.
    pub fn with_wait_timeout(opts: Opts, max_size: usize, wait_timeout: Duration) -> Pool {
        let max_size = max_size.max(1);
        Pool {
            inner: Arc::new(Inner {
                opts,
                max_size,
                wait_timeout,
                permits: Semphore::new(max_size),
                idle: Mutex::new(Vec::with_capacity(max_size)),
            }),
        }
    }

    /// A connection: an idle one if one is alive, else a new one. Waits for a
    /// free slot at most the pool's wait timeout ([`Error::PoolTimeout`]);
    /// opening a connection is bounded by `connect_timeout`.
    pub fn get(&self) -> Result<PooledConn, Error> {
        let inner = &self.inner;
        if !inner.permits.wait_timeout(inner.wait_timeout) {
            return Err(Error::PoolTimeout {
                waited: inner.wait_timeout,
            });
        }
        // From here on we own a slot: `slot` gives it back on every exit path.
        let mut slot = PooledConn {
            conn: None,
            pool: inner.clone(),
        };
        while let Some(conn) = inner.pop_idle() {
            if conn.looks_alive() {
                slot.conn = Some(conn);
                return Ok(slot);
            }
            // Dead (server restarted, idle timeout): close it without COM_QUIT.
            let mut conn = conn;
            conn.mark_broken();
        }
        slot.conn = Some(Conn::connect(&inner.opts)?);
        Ok(slot)
    }

    /// The configured maximum number of connections.
    pub fn max_size(&self) -> usize {
        self.inner.max_size
    }

    /// Connections currently idle in the pool.
    pub fn idle_count(&self) -> usize {
        self.inner.lock_idle().len()
    }

    pub fn opts(&self) -> &Opts {
        &self.inner.opts
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("opts", &self.inner.opts)
            .field("max_size", &self.inner.max_size)
            .field("idle", &self.idle_count())
            .finish()
    }
}

impl Inner {
    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        // Pushing or popping cannot leave the Vec inconsistent: ignore poison.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pop_idle(&self) -> Option<Conn> {
        self.lock_idle().pop()
    }
}

/// A connection borrowed from a [`Pool`]; derefs to [`Conn`]. Dropping it
/// returns the connection to the pool, unless it is broken, in which case it
/// is closed and its slot freed for a new connection.
pub struct PooledConn {
    /// `None` only while [`Pool::get`] is still looking for a connection.
    conn: Option<Conn>,
    pool: Arc<Inner>,
}

impl PooledConn {
    /// Closes this connection instead of returning it to the pool.
    pub fn discard(mut self) {
        if let Some(conn) = self.conn.as_mut() {
            conn.mark_broken();
        }
    }
}

impl Deref for PooledConn {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn.as_ref().expect("PooledConn holds a connection")
    }
}

impl DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("PooledConn holds a connection")
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if !conn.is_broken() {
                self.pool.lock_idle().push(conn);
            }
            // A broken conn is dropped here (closing the socket), outside the lock.
        }
        self.pool.permits.post();
    }
}

impl std::fmt::Debug for PooledConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PooledConn").field(&self.conn).finish()
    }
}
