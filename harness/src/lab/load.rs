//! A closed-loop load on a started server, planned the same way for every
//! command, and metered while it runs.

use std::time::Duration;

use crate::catalog::Running;
use crate::engine::{Check, Io, Plan, ProtoPlan, Request, Stop, TransportPlan};
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
    p.proto = ProtoPlan::H1 {
        keepalive: shape.keepalive,
    };
    p.io = shape.io;
    p.gather = shape.gather;
    p.timeout = shape.timeout;
    p.stop = Stop::Duration(length);
    p.max_duration = length;
    p.transport = TransportPlan::from_tls(running.tls.clone());
    p
}

/// Runs `load` while [`Meter`] watches the server's process tree (when the
/// harness started it: a `--target` has none to watch), the processes on
/// the load's `path` to it (`Setup::path_pids`: docker-proxy), `db_pid`
/// and the rest of the machine.
pub fn metered<T>(
    running: &Running,
    path: &[u32],
    db_pid: Option<u32>,
    load: impl FnOnce() -> T,
) -> (T, Option<Sample>) {
    let meter = running
        .managed()
        .then(|| Meter::start(running.pids(), path, db_pid));
    let out = load();
    (out, meter.map(Meter::finish))
}

/// How a comparison loads a WebSocket server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsShape {
    /// Binary 64-byte messages echoed, `in_flight` per connection.
    Echo { in_flight: u16 },
    /// Connections upgraded and held, a ping on each every `every`.
    Hold { every: Duration },
    /// Room fan-out: rooms of `members` (dividing the connections), each
    /// member with `in_flight` messages not yet received by all.
    Room { in_flight: u16, members: usize },
}

/// The WebSocket echo (or hold, or room fan-out) on `path` of `running`
/// for `length`, each echo (or delivery) checked byte for byte, as
/// `harness run ws://…` does.
pub fn ws_plan(
    running: &Running,
    path: &str,
    shape: &Shape,
    ws: WsShape,
    length: Duration,
) -> Plan {
    use crate::engine::{ws, Pace};
    let payload = ws::message(ws::DEFAULT_MESSAGE);
    let request = Request {
        method: "GET".into(),
        target: path.to_string(),
        bytes: std::sync::Arc::from(payload.clone()),
        body_bytes: None,
        chunked: false,
    };
    let check = Check::Exact {
        status: 101,
        body: std::sync::Arc::from(payload),
    };
    // ws:// or wss://, as the server serves TLS (its session is the plan's).
    let url = running.url(path).replacen("http", "ws", 1);
    let mut p = Plan::new(&url, running.addr, request, check);
    p.transport = TransportPlan::from_tls(running.tls.clone());
    p.connections = shape.connections;
    p.threads = shape.threads;
    p.io = shape.io;
    p.gather = shape.gather;
    p.timeout = shape.timeout;
    p.stop = Stop::Duration(length);
    p.max_duration = length;
    p.authority.clone_from(&running.authority);
    let mode = match ws {
        WsShape::Echo { .. } => ws::WsMode::Echo,
        WsShape::Hold { .. } => ws::WsMode::Hold,
        WsShape::Room { members, .. } => ws::WsMode::Room(crate::engine::ws_room::RoomPlan {
            size: members,
            rooms: shape.connections / members.max(1),
        }),
    };
    let depth = match ws {
        WsShape::Echo { in_flight } | WsShape::Room { in_flight, .. } => in_flight,
        WsShape::Hold { every } => {
            p.pace = Pace::Rate(p.connections as f64 / every.as_secs_f64());
            1
        }
    };
    p.proto = ProtoPlan::Ws {
        depth,
        ws: ws::WsPlan {
            target: path.to_string(),
            host: running.authority.clone(),
            binary: true,
            mode,
        },
    };
    p
}
