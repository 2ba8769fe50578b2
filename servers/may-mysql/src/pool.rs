use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use may::sync::Blocker;

use crate::{Conn, Error, Opts};

/// How often, at most, the reaper thread of an idle pool looks at its
/// waiters (and notices that the pool is gone); see `reaper_tick`.
const REAPER_TICK_MAX: Duration = Duration::from_secs(1);
const REAPER_TICK_MIN: Duration = Duration::from_millis(10);

/// A bounded pool of connections, shared by coroutines on any worker thread
/// (clones share one pool).
///
/// Connections are opened on demand, up to `max_size`. A slot count and the
/// idle list sit behind one std mutex that is only held to take or give back
/// a slot, never across I/O.
///
/// Waiting for a slot parks the coroutine (or, outside a coroutine, the
/// thread) in a FIFO queue, without a timer: a release hands its slot
/// straight to the oldest waiter and unparks it. The wait is still bounded:
/// a per-pool reaper thread wakes the waiters whose deadline has passed and
/// they fail with [`Error::PoolTimeout`]. Why not a timed park: in may a
/// timed park arms and then cancels a timer of may's global timer thread,
/// waking that thread (a futex wake and a context switch) twice per wait.
/// With 100 clients sharing 20 connections nearly every `get` waits, and
/// that cost 4–7 µs of server CPU per request. The reaper instead sleeps
/// until the oldest waiter's deadline, a second at most, so it wakes about
/// once a second whatever the request rate.
///
/// Recovery: a connection that failed (see [`Conn::is_broken`]) is dropped
/// instead of returned; an idle one is checked with a non-blocking peek
/// before reuse, so connections killed by a server restart are discarded
/// without costing a failed query. A slot whose connect failed is given
/// back, so the next `get` tries again.
///
/// The peek runs on every `get`, also for a connection returned a moment
/// ago. It is one `recv(MSG_PEEK)` syscall, about 0.7 µs (3% of a `/work`
/// request's server CPU). Skipping it for recently returned connections was
/// considered and rejected: a connection killed (`KILL CONNECTION`, a
/// restart) within that window would cost its next caller a failed query
/// that the peek avoids, and "killed while idle costs no failed query" is
/// what this pool promises (tests/mariadb.rs,
/// `pool_discards_killed_connections`).
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

struct Inner {
    opts: Opts,
    max_size: usize,
    wait_timeout: Duration,
    state: Mutex<State>,
}

struct State {
    /// Slots neither lent out nor handed to a waiter.
    free: usize,
    idle: Vec<Conn>,
    /// Oldest first; deadlines are taken under the lock, so they never
    /// decrease along the queue.
    waiters: VecDeque<Arc<Waiter>>,
}

/// A `get` parked until it is handed a slot or its deadline passes. Its
/// outcome is decided once, under the pool's lock, by whoever removes it
/// from the queue.
struct Waiter {
    blocker: Blocker,
    deadline: Instant,
    outcome: AtomicU8,
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const TIMED_OUT: u8 = 2;

impl Waiter {
    /// Records the outcome: called under the pool's lock by whoever removed
    /// the waiter from the queue, who then unparks it outside the lock.
    fn decide(&self, outcome: u8) {
        self.outcome.store(outcome, Ordering::Release);
    }
}

impl Pool {
    /// A pool of at most `max_size` (at least 1) connections; [`Pool::get`]
    /// waits at most `opts.connect_timeout + opts.io_timeout` for a slot.
    pub fn new(opts: Opts, max_size: usize) -> Pool {
        let wait = opts.connect_timeout + opts.io_timeout;
        Pool::with_wait_timeout(opts, max_size, wait)
    }

    /// As [`Pool::new`], with an explicit bound on the wait for a free slot.
    ///
    /// Starts the pool's reaper thread, which ends within a second of the
    /// last clone of the pool being dropped.
    ///
    /// # Panics
    ///
    /// If the reaper thread cannot be spawned.
    pub fn with_wait_timeout(opts: Opts, max_size: usize, wait_timeout: Duration) -> Pool {
        let max_size = max_size.max(1);
        let inner = Arc::new(Inner {
            opts,
            max_size,
            wait_timeout,
            state: Mutex::new(State {
                free: max_size,
                idle: Vec::with_capacity(max_size),
                waiters: VecDeque::new(),
            }),
        });
        let weak = Arc::downgrade(&inner);
        let tick = reaper_tick(wait_timeout);
        std::thread::Builder::new()
            .name("may-mysql-pool".into())
            .spawn(move || reaper(weak, tick))
            .expect("spawn the pool's reaper thread");
        Pool { inner }
    }

    /// A connection: an idle one if one is alive, else a new one. Waits for a
    /// free slot at most the pool's wait timeout ([`Error::PoolTimeout`]);
    /// opening a connection is bounded by `connect_timeout`.
    pub fn get(&self) -> Result<PooledConn, Error> {
        let inner = &self.inner;
        let mut next = inner.acquire()?;
        // From here on we own a slot: `slot` gives it back on every exit path.
        let mut slot = PooledConn {
            conn: None,
            pool: inner.clone(),
        };
        while let Some(mut conn) = next {
            if conn.looks_alive() {
                slot.conn = Some(conn);
                return Ok(slot);
            }
            // Dead (server restarted, idle timeout): close it without COM_QUIT.
            conn.mark_broken();
            drop(conn);
            next = inner.lock_state().idle.pop();
        }
        slot.conn = Some(Conn::connect(&inner.opts)?);
        Ok(slot)
    }

    /// The configured maximum number of connections.
    pub fn max_size(&self) -> usize {
        self.inner.max_size
    }

    /// Callers waiting for a connection right now.
    pub fn waiting_count(&self) -> usize {
        self.inner.lock_state().waiters.len()
    }

    /// Connections currently idle in the pool.
    pub fn idle_count(&self) -> usize {
        self.inner.lock_state().idle.len()
    }

    pub fn opts(&self) -> &Opts {
        &self.inner.opts
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (idle, waiting) = {
            let state = self.inner.lock_state();
            (state.idle.len(), state.waiters.len())
        };
        f.debug_struct("Pool")
            .field("opts", &self.inner.opts)
            .field("max_size", &self.inner.max_size)
            .field("idle", &idle)
            .field("waiting", &waiting)
            .finish()
    }
}

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent: ignore poison.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot, parking until one is handed over or the wait times
    /// out. Returns an idle connection, if any, to try first.
    fn acquire(&self) -> Result<Option<Conn>, Error> {
        let waiter = {
            let mut state = self.lock_state();
            if state.free > 0 {
                state.free -= 1;
                return Ok(state.idle.pop());
            }
            if self.wait_timeout.is_zero() {
                return Err(Error::PoolTimeout {
                    waited: Duration::ZERO,
                });
            }
            // `true`: ignore coroutine cancellation while parked, so that the
            // outcome is always read (a cancelled coroutine unwinds at its
            // next cancellation point, with its slot, if any, given back).
            let waiter = Arc::new(Waiter {
                blocker: Blocker::new(true),
                deadline: Instant::now() + self.wait_timeout,
                outcome: AtomicU8::new(WAITING),
            });
            state.waiters.push_back(waiter.clone());
            waiter
        };
        loop {
            match waiter.outcome.load(Ordering::Acquire) {
                GRANTED => return Ok(self.lock_state().idle.pop()),
                TIMED_OUT => {
                    return Err(Error::PoolTimeout {
                        waited: self.wait_timeout,
                    })
                }
                // Untimed, and cancellation is ignored: returns once unparked.
                _ => {
                    let _ = waiter.blocker.park(None);
                }
            }
        }
    }

    /// Gives a slot back (with its connection, if still usable): to the
    /// oldest waiter if there is one, else to the free count.
    fn release(&self, conn: Option<Conn>) {
        let (waiter, broken) = {
            let mut state = self.lock_state();
            let broken = match conn {
                Some(conn) if !conn.is_broken() => {
                    state.idle.push(conn);
                    None
                }
                other => other,
            };
            let waiter = state.waiters.pop_front();
            match &waiter {
                Some(w) => w.decide(GRANTED),
                None => state.free += 1,
            }
            (waiter, broken)
        };
        // Outside the lock: closing a broken connection, waking the waiter.
        drop(broken);
        if let Some(w) = waiter {
            w.blocker.unpark();
        }
    }

    /// Times out the waiters whose deadline has passed; returns how long
    /// the reaper may sleep before the next deadline (at most `tick`).
    fn expire_waiters(&self, tick: Duration) -> Duration {
        let mut expired = Vec::new();
        let sleep = {
            let mut state = self.lock_state();
            let now = Instant::now();
            while state.waiters.front().is_some_and(|w| w.deadline <= now) {
                let w = state.waiters.pop_front().expect("front exists");
                w.decide(TIMED_OUT);
                expired.push(w);
            }
            state
                .waiters
                .front()
                .map_or(tick, |w| (w.deadline - now).min(tick))
        };
        for w in expired {
            w.blocker.unpark();
        }
        sleep
    }
}

/// The reaper's longest sleep: short enough that a waiter queued just after
/// the reaper went to sleep is still timed out on time (a quarter of the
/// wait timeout), long enough to cost nothing (at most one wake a second).
/// For wait timeouts under 40 ms a waiter may give up up to 10 ms late.
fn reaper_tick(wait_timeout: Duration) -> Duration {
    (wait_timeout / 4).clamp(REAPER_TICK_MIN, REAPER_TICK_MAX)
}

/// Times out the pool's waiters when their deadline passes; ends once the
/// pool is gone. Holds the pool only while it looks at the queue.
fn reaper(pool: Weak<Inner>, tick: Duration) {
    while let Some(inner) = pool.upgrade() {
        let sleep = inner.expire_waiters(tick);
        drop(inner);
        std::thread::sleep(sleep);
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
        self.pool.release(self.conn.take());
    }
}

impl std::fmt::Debug for PooledConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PooledConn").field(&self.conn).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaper_tick_is_a_quarter_of_the_wait_within_bounds() {
        assert_eq!(
            reaper_tick(Duration::from_millis(300)),
            Duration::from_millis(75)
        );
        assert_eq!(reaper_tick(Duration::from_secs(17)), REAPER_TICK_MAX);
        assert_eq!(reaper_tick(Duration::from_millis(1)), REAPER_TICK_MIN);
    }
}
