//! Graceful shutdown: SIGTERM/SIGINT stop accepting, in-flight requests
//! finish, the process exits 0.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How long in-flight requests get to finish after a shutdown signal.
pub const GRACE: Duration = Duration::from_secs(10);

/// Runs `on_signal` once, on a dedicated thread, when SIGTERM or SIGINT
/// arrives. Installing the handler replaces the default "die" action, so
/// the server decides how it ends.
pub fn on_signal(on_signal: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                on_signal();
            }
        })?;
    Ok(())
}

/// Shared state of a server's shutdown: whether it is stopping, and how
/// many requests are being served.
#[derive(Clone, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    stopping: AtomicBool,
    in_flight: AtomicUsize,
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    pub fn begin(&self) {
        self.inner.stopping.store(true, Ordering::SeqCst);
    }

    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::Relaxed)
    }

    /// Marks one request in flight until the guard drops.
    pub fn request(&self) -> InFlight {
        self.inner.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(&self.inner))
    }

    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// Blocks until no request is in flight or `grace` has passed; returns
    /// whether everything finished.
    pub fn wait_idle(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        while self.in_flight() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

/// A request in flight; dropping it ends it. It may move to another thread
/// with the request (the worker pool hands requests to workers).
pub struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
