//! A closed-loop load on a started server, planned the same way for every
//! command, and metered while it runs.

use std::time::Duration;

use crate::catalog::Running;
use crate::engine::{Check, Io, Plan, Request, Stop};
use crate::lab::meter::{Meter, Sample};

/// How a closed-loop load is shaped (the same for every server of a run).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub connections: usize,
    pub threads: usize,
    pub keepalive: bool,
    /// Per request.
    pub timeout: Duration,
    /// The engine's I/O backend (the session's `--io`).
    pub io: Io,
    /// How long its io_uring waits may gather (the session's `--gather`).
    pub gather: Duration,
}

/// `GET path` on `running` for `length`, every response checked against
/// the contract.
pub fn plan(running: &Running, path: &str, shape: &Shape, length: Duration) -> Plan {
    let url = running.url(path);
    let request = Request::encode("GET", path, &running.authority, &[], shape.keepalive);
    let mut p = Plan::new(
        &url,
        running.addr,
        request,
        Check::for_request("GET", path, true),
    );
    p.connections = shape.connections;
    p.threads = shape.threads;
    p.keepalive = shape.keepalive;
    p.io = shape.io;
    p.gather = shape.gather;
    p.timeout = shape.timeout;
    p.stop = Stop::Duration(length);
    p.max_duration = length;
    p.tls.clone_from(&running.tls);
    p
}

/// Runs `load` while [`Meter`] watches the server's process tree (when the
/// harness started it: a `--target` has none to watch), `db_pid` and the
/// rest of the machine.
pub fn metered<T>(
    running: &Running,
    db_pid: Option<u32>,
    load: impl FnOnce() -> T,
) -> (T, Option<Sample>) {
    let meter = running
        .managed()
        .then(|| Meter::start(running.pids(), db_pid));
    let out = load();
    (out, meter.map(Meter::finish))
}
