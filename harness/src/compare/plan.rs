//! What a comparison runs: workloads by name or path, the cells (server ×
//! workload × concurrency) and how long it will take.

use std::time::Duration;

use anyhow::{bail, Context};
use workloads::Endpoint;

/// A workload: a contract path under a short name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// As given: `hello`, `work`, `db?sleep_ms=10`, `/cpu?n=5000`.
    pub name: String,
    /// The request target: `/hello`.
    pub path: String,
    pub needs_db: bool,
    pub kind: Kind,
}

/// How a workload loads its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `GET path`, every response checked.
    Http,
    /// `ws-echo`: the WebSocket echo on `/ws`, 64-byte messages.
    WsEcho,
    /// `ws-hold`: connections upgraded and held, a ping each second.
    WsHold,
    /// `ws-room`: room fan-out on `/ws/room`, rooms of up to
    /// [`ROOM_MEMBERS`], each delivery timed and checked at its receiver.
    WsRoom,
}

/// `ws-room`'s members per room at most: the largest divisor of `-c` not
/// above it (c = 50: rooms of 10), so deliveries grow as c × K, not c².
pub const ROOM_MEMBERS: usize = 10;

/// `ws-room` at `c` connections: members per room.
pub fn room_size(c: usize) -> usize {
    (1..=ROOM_MEMBERS.min(c.max(1)))
        .rev()
        .find(|&k| c.is_multiple_of(k))
        .unwrap_or(1)
}

impl Kind {
    pub fn is_ws(self) -> bool {
        self != Kind::Http
    }
}

/// `hello` → `/hello`, `work` → `/work`, `cpu` → `/cpu`, `db` → `/db`,
/// `sleep` → `/sleep?ms=10`; `db?sleep_ms=10` → `/db?sleep_ms=10`; a path
/// as is. It must be a contract endpoint other than `/config`.
pub fn workload(spec: &str) -> anyhow::Result<Workload> {
    let spec = spec.trim();
    if spec.is_empty() {
        bail!("an empty workload name");
    }
    let ws = match spec {
        "ws-echo" => Some(Kind::WsEcho),
        "ws-hold" => Some(Kind::WsHold),
        "ws-room" => Some(Kind::WsRoom),
        _ => None,
    };
    if let Some(kind) = ws {
        return Ok(Workload {
            name: spec.to_string(),
            path: if kind == Kind::WsRoom {
                "/ws/room?name=compare".to_string()
            } else {
                "/ws".to_string()
            },
            needs_db: false,
            kind,
        });
    }
    let path = match spec {
        "hello" => "/hello".to_string(),
        "work" => "/work".to_string(),
        "cpu" => "/cpu".to_string(),
        "db" => "/db".to_string(),
        "sleep" => "/sleep?ms=10".to_string(),
        p if p.starts_with('/') => p.to_string(),
        p => format!("/{p}"),
    };
    let route = workloads::route("GET", &path).map_err(|r| {
        anyhow::anyhow!(
            "workload {spec:?}: GET {path} is not a contract endpoint ({}); \
             try hello, work, cpu, db, sleep, db?sleep_ms=10, /cpu?n=5000, ws-echo, ws-hold or ws-room",
            String::from_utf8_lossy(r.into_response().body.as_bytes()).trim()
        )
    })?;
    if route.endpoint == Endpoint::Config {
        bail!("workload {spec:?}: /config is not a workload");
    }
    Ok(Workload {
        name: spec.to_string(),
        path,
        needs_db: route.endpoint.needs_db(),
        kind: Kind::Http,
    })
}

pub fn workloads(specs: &[String]) -> anyhow::Result<Vec<Workload>> {
    let mut out: Vec<Workload> = Vec::new();
    for s in specs.iter().filter(|s| !s.trim().is_empty()) {
        let w = workload(s).context("bad --workloads")?;
        if !out.iter().any(|o| o.path == w.path && o.kind == w.kind) {
            out.push(w);
        }
    }
    if out.is_empty() {
        bail!("no workload given (--workloads hello,work)");
    }
    Ok(out)
}

/// Roughly how long `cells` cells take.
pub fn estimate(
    cells: usize,
    warmup: Duration,
    runs: u32,
    duration: Duration,
    turns_per_cell: u32,
) -> Duration {
    // Each turn: start + verify + stop ≈ 1.5 s and a warm-up; a short gap per run.
    let per_turn = warmup + Duration::from_millis(1500);
    let per = per_turn * turns_per_cell + (duration + Duration::from_millis(300)) * runs;
    per * cells as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_names_and_paths() {
        assert_eq!(workload("hello").unwrap().path, "/hello");
        let w = workload("work").unwrap();
        assert_eq!((w.path.as_str(), w.needs_db), ("/work", true));
        let w = workload("db?sleep_ms=10").unwrap();
        assert_eq!((w.path.as_str(), w.needs_db), ("/db?sleep_ms=10", true));
        assert_eq!(workload("/cpu?n=5000").unwrap().path, "/cpu?n=5000");
        assert!(!workload("cpu").unwrap().needs_db);
        assert!(workload("nope").is_err());
        assert!(workload("/cpu?n=abc").is_err());
        assert!(workload("/config").is_err());
        let (e, h) = (workload("ws-echo").unwrap(), workload("ws-hold").unwrap());
        assert_eq!((e.path.as_str(), e.kind), ("/ws", Kind::WsEcho));
        assert_eq!(h.kind, Kind::WsHold);
        let r = workload("ws-room").unwrap();
        assert_eq!(
            (r.path.as_str(), r.kind),
            ("/ws/room?name=compare", Kind::WsRoom)
        );
        assert_eq!([1, 7, 16, 50, 100, 13].map(room_size), [1, 7, 8, 10, 10, 1]);
        assert_eq!(
            workloads(&["ws-echo".into(), "ws-hold".into()])
                .unwrap()
                .len(),
            2
        );
        let ws = workloads(&["hello".into(), "/hello".into(), "work".into()]).unwrap();
        assert_eq!(ws.len(), 2);
        assert!(workloads(&[]).is_err());
    }

    #[test]
    fn estimates_add_up() {
        let e = estimate(2, Duration::from_secs(3), 3, Duration::from_secs(10), 1);
        assert_eq!(e, Duration::from_millis(2 * (3000 + 3 * 10_300 + 1500)));
        let e = estimate(2, Duration::from_secs(3), 3, Duration::from_secs(10), 3);
        assert_eq!(e, Duration::from_millis(2 * (3 * 4500 + 3 * 10_300)));
    }
}
