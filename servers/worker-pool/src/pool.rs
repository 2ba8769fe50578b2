//! The bounded queue between the front and the workers, and the worker
//! threads that drain it (PHP-FPM's listen backlog and its children).
//!
//! A crossbeam bounded channel: a worker that finds it empty spins and
//! yields briefly before it sleeps, so under load a worker that finishes
//! usually takes the next request without a futex round trip. (A
//! mutex + condvar queue that sleeps at once and wakes only sleeping
//! workers measured worse here: 28–35k vs 45k RPS on `/work`, 19 vs 9.6 µs
//! of server CPU per `/hello`.)

use std::io;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::oneshot;
use workloads::{Endpoint, Rejection, Response};

use crate::worker::Worker;

/// What a worker is handed.
pub enum Job {
    /// A request, its body (`/echo`'s; empty for the other routes), and
    /// where its response goes.
    Request {
        routed: Result<Endpoint, Rejection>,
        body: Vec<u8>,
        reply: oneshot::Sender<Response>,
    },
    /// A WebSocket connection, the worker's until it ends.
    WebSocket(crate::ws::Upgrade),
}

/// The front's end of the queue.
#[derive(Clone)]
pub struct Queue {
    tx: Sender<Job>,
}

impl Queue {
    /// Queues a request for the next free worker, or `None` if the queue is
    /// full (the caller answers `503 server busy`, an overflowing FPM backlog).
    pub fn submit(
        &self,
        routed: Result<Endpoint, Rejection>,
        body: Vec<u8>,
    ) -> Option<oneshot::Receiver<Response>> {
        let (reply, rx) = oneshot::channel();
        match self.tx.try_send(Job::Request {
            routed,
            body,
            reply,
        }) {
            Ok(()) => Some(rx),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => None,
        }
    }

    /// Queues a WebSocket connection for the next free worker; gives it
    /// back if the queue is full (the caller answers `503 server busy`).
    pub fn submit_websocket(&self, up: crate::ws::Upgrade) -> Result<(), crate::ws::Upgrade> {
        match self.tx.try_send(Job::WebSocket(up)) {
            Ok(()) => Ok(()),
            Err(
                TrySendError::Full(Job::WebSocket(up))
                | TrySendError::Disconnected(Job::WebSocket(up)),
            ) => Err(up),
            Err(_) => unreachable!("a WebSocket job comes back as one"),
        }
    }
}

/// Starts `workers` threads (one [`Worker`] each, made by `make`) serving a
/// queue of `capacity` waiting requests. The threads end when every
/// [`Queue`] handle is dropped.
pub fn start(
    workers: usize,
    capacity: usize,
    mut make: impl FnMut() -> Worker,
) -> io::Result<Queue> {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    for i in 0..workers {
        let worker = make();
        let rx = rx.clone();
        std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || work(worker, rx))?;
    }
    Ok(Queue { tx })
}

fn work(mut worker: Worker, rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        match job {
            // Its connection was dropped while it waited (the front went
            // away): nothing to answer, as an FPM child that reads a
            // FastCGI request nginx already abandoned.
            Job::Request { reply, .. } if reply.is_closed() => {}
            Job::Request {
                routed,
                body,
                reply,
            } => {
                let response = worker.serve(routed, body);
                let _ = reply.send(response);
            }
            Job::WebSocket(up) => crate::ws::run(up),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;

    fn queue(workers: usize, capacity: usize) -> Queue {
        let opts = crate::db::options("mysql://u:p@127.0.0.1:9/db").unwrap();
        start(workers, capacity, || {
            Worker::new(Db::new(opts.clone()), b"{}")
        })
        .unwrap()
    }

    #[test]
    fn answers_through_the_workers() {
        let q = queue(2, 4);
        let rx = q.submit(Ok(Endpoint::Cpu { n: 4 }), Vec::new()).unwrap();
        let resp = rx.blocking_recv().unwrap();
        assert_eq!(resp.body.as_bytes(), b"6.146264");
        let rx = q.submit(Err(Rejection::NotFound), Vec::new()).unwrap();
        assert_eq!(rx.blocking_recv().unwrap().status, 404);
    }

    #[test]
    fn refuses_beyond_capacity_while_workers_are_busy() {
        let q = queue(1, 1);
        // Let the worker fall asleep, then occupy it.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let busy = q
            .submit(Ok(Endpoint::Sleep { ms: 300 }), Vec::new())
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let queued = q.submit(Ok(Endpoint::Hello), Vec::new()).unwrap();
        assert!(
            q.submit(Ok(Endpoint::Hello), Vec::new()).is_none(),
            "queue full"
        );
        assert_eq!(busy.blocking_recv().unwrap().status, 200);
        assert_eq!(queued.blocking_recv().unwrap().status, 200);
        assert!(
            q.submit(Ok(Endpoint::Hello), Vec::new()).is_some(),
            "room again"
        );
    }
}
