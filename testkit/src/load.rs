//! A small, bounded load for the fault and soak tests: `clients` threads,
//! each on its own kept-alive connection, sending `GET`s of a list of
//! targets in turn (closed loop) until stopped, every answer judged by the
//! contract (`workloads::expect`) and counted.
//!
//! Not the harness's engine (that crate's tests use this kit, so the kit
//! cannot use it): a thread per client, which on a loaded 2-core machine
//! saturates a debug-built server all the same. Every request is bounded
//! ([`REQUEST_LIMIT`]): one that gets no complete answer in time is
//! counted as hung, never waited for.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use workloads::{expect, Expected};

use crate::client::Conn;

/// How long one request may take before it counts as hung: far beyond
/// what a loaded machine needs for any answer of the contract (a 503 with
/// the database gone included), short enough that a test ends.
pub const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// How many failed requests a [`Tally`] keeps the details of.
const KEPT_FAILURES: usize = 20;

/// What the clients have counted so far (live: read it while they run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Answers that are exactly the contract's 200.
    pub ok: u64,
    /// Answers that are exactly the contract's `503 db unavailable`.
    pub unavailable: u64,
    /// Anything else: a wrong answer, a connection refused, reset or
    /// closed mid-answer.
    pub failed: u64,
    /// Requests without a complete answer within [`REQUEST_LIMIT`].
    pub hung: u64,
}

impl Counts {
    /// Every request that ended, however.
    pub fn total(&self) -> u64 {
        self.ok + self.unavailable + self.failed + self.hung
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ok, {} db unavailable, {} failed, {} hung",
            self.ok, self.unavailable, self.failed, self.hung
        )
    }
}

#[derive(Default)]
struct Live {
    ok: AtomicU64,
    unavailable: AtomicU64,
    failed: AtomicU64,
    hung: AtomicU64,
    /// The first failures, each as `target: what happened`.
    failures: Mutex<Vec<String>>,
}

impl Live {
    fn fail(&self, counter: &AtomicU64, what: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT_FAILURES {
            kept.push(what);
        }
    }
}

/// The load's end: its counts and the first failures' details.
#[derive(Clone, Debug)]
pub struct Tally {
    pub counts: Counts,
    pub failures: Vec<String>,
}

impl Tally {
    /// Panics unless every request was answered exactly as the contract
    /// says (a 200), or, with `allow_unavailable`, with its `503 db
    /// unavailable`.
    pub fn assert_all_answered(&self, what: &str, allow_unavailable: bool) {
        let c = self.counts;
        let bad = c.failed + c.hung + if allow_unavailable { 0 } else { c.unavailable };
        assert!(
            bad == 0 && c.ok > 0,
            "{what}: {c}; the first failures:\n  {}",
            self.failures.join("\n  ")
        );
    }
}

/// A running load; stopped when dropped (its threads end within a request).
pub struct Load {
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts `clients` connections to `addr`, each sending `targets` in
    /// turn (client `i` starts at target `i`, so every target is in flight
    /// at once).
    pub fn start(addr: SocketAddr, targets: &[&str], clients: usize) -> Load {
        assert!(!targets.is_empty() && clients > 0);
        let live = Arc::new(Live::default());
        let stop = Arc::new(AtomicBool::new(false));
        let routes: Arc<Vec<(String, Expected)>> = Arc::new(
            targets
                .iter()
                .map(|t| (t.to_string(), expect("GET", t)))
                .collect(),
        );
        let threads = (0..clients)
            .map(|i| {
                let (live, stop, routes) = (live.clone(), stop.clone(), routes.clone());
                std::thread::Builder::new()
                    .name(format!("load-{i}"))
                    .spawn(move || client(addr, &routes, i, &live, &stop))
                    .expect("spawn a load client")
            })
            .collect();
        Load {
            live,
            stop,
            threads,
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        let l = &self.live;
        Counts {
            ok: l.ok.load(Ordering::Relaxed),
            unavailable: l.unavailable.load(Ordering::Relaxed),
            failed: l.failed.load(Ordering::Relaxed),
            hung: l.hung.load(Ordering::Relaxed),
        }
    }

    /// The first failures so far.
    pub fn failures(&self) -> Vec<String> {
        self.live
            .failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until `n` more requests than at `since` were answered 200:
    /// proof by state that the server serves this load now.
    pub fn wait_for_ok(&self, since: Counts, n: u64, what: &str) {
        crate::observe::wait_for(&format!("{n} more 200s ({what})"), || {
            self.counts().ok >= since.ok + n
        });
    }

    /// Stops sending; every client finishes the request it is in (each is
    /// bounded) and the counts are final.
    pub fn stop(mut self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        Tally {
            counts: self.counts(),
            failures: self.failures(),
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One client's loop: a kept-alive connection (a new one after any
/// failure), one request at a time.
fn client(
    addr: SocketAddr,
    routes: &[(String, Expected)],
    first: usize,
    live: &Live,
    stop: &AtomicBool,
) {
    let mut conn: Option<Conn> = None;
    let mut next = first % routes.len();
    while !stop.load(Ordering::Relaxed) {
        let (target, expected) = &routes[next];
        next = (next + 1) % routes.len();
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Conn::connect_within(addr, Duration::from_secs(10), REQUEST_LIMIT) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    live.fail(&live.failed, format!("{target}: connect: {e}"));
                    // No tight loop against a server that refuses.
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
        };
        let answer = c
            .send_request("GET", target)
            .and_then(|()| c.read_response_within(false, REQUEST_LIMIT));
        match answer {
            Ok(r) => {
                if r.verify(expected).is_ok() {
                    live.ok.fetch_add(1, Ordering::Relaxed);
                } else if r.verify(&Expected::db_unavailable()).is_ok() {
                    live.unavailable.fetch_add(1, Ordering::Relaxed);
                } else {
                    let why = r.verify(expected).err().map(|m| m.to_string());
                    live.fail(
                        &live.failed,
                        format!(
                            "{target}: {} {:?}: {}",
                            r.status,
                            r.body_str(),
                            why.unwrap_or_default()
                        ),
                    );
                }
                if r.header("connection")
                    .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                {
                    conn = None;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                live.fail(&live.hung, format!("{target}: {e}"));
                conn = None;
            }
            Err(e) => {
                live.fail(&live.failed, format!("{target}: {e}"));
                conn = None;
            }
        }
    }
}
