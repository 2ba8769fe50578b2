//! The end of a timed run, together across the engine's threads.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::engine::Shared;

/// Keeps a thread's connections open, at a timed end, until every
/// thread's loop has ended. A thread that closed its connections at its
/// own end would free the server for another thread still in its loop: a
/// worker-pool server whose workers held thread A's WebSockets answered
/// thread B's waiting upgrade in B's last moment, and B counted a
/// connection the server never held during the run. Arrives on drop too,
/// so an early error or a panic never leaves the other threads waiting.
pub(super) struct EndTogether<'a> {
    ended: &'a AtomicUsize,
    threads: usize,
    arrived: bool,
}

impl<'a> EndTogether<'a> {
    pub(super) fn new(shared: &'a Shared<'_>) -> Self {
        EndTogether {
            ended: &shared.threads_ended,
            threads: shared.progress.len(),
            arrived: false,
        }
    }

    /// Arrives, and returns once every thread has.
    pub(super) fn wait(mut self) {
        self.arrive();
    }

    fn arrive(&mut self) {
        if std::mem::replace(&mut self.arrived, true) {
            return;
        }
        self.ended.fetch_add(1, Ordering::AcqRel);
        while self.ended.load(Ordering::Acquire) < self.threads {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

impl Drop for EndTogether<'_> {
    fn drop(&mut self) {
        self.arrive();
    }
}
