//! What both engines share: the contract's endpoints run in the calling
//! coroutine — CPU work on its worker thread, `/sleep` and database waits
//! parking only the coroutine.

use std::time::Duration;

use server_common::http1::RequestBody;
use server_common::shutdown::Shutdown;
use workloads::{finish, route, slept, start, Action, Response};

use crate::db::Db;

/// The server's state, leaked at start-up: every coroutine borrows it.
pub struct App {
    /// The `Server` header value (`coroutine`; may_minihttp sends `M`).
    pub server: &'static str,
    /// The `/config` body, rendered once.
    pub config_json: &'static [u8],
    pub db: Db,
    pub shutdown: Shutdown,
    /// `--tls-cert`: every connection of the contract engine is TLS.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// The WebSocket rooms of the process, for every coroutine.
    pub rooms: workloads::ws::Rooms,
}

impl App {
    /// The contract's answer to `method target` with `body`, computed in
    /// this coroutine.
    pub fn respond(&self, method: &str, target: &str, body: RequestBody<'_>) -> Response {
        let endpoint = match route(method, target) {
            Ok(r) => r.endpoint,
            Err(rejection) => return rejection.into_response(),
        };
        match start(endpoint, self.config_json) {
            Action::Respond(resp) => resp,
            Action::Echo => workloads::echo::echo(body.bytes().into_owned()),
            Action::Sleep { ms } => {
                // A may timer: parks the coroutine, the worker thread runs others.
                may::coroutine::sleep(Duration::from_millis(u64::from(ms)));
                slept(ms)
            }
            Action::Query { query, conn, then } => match self.db.query(query, conn) {
                Ok(Some(value)) => finish(then, Some(value)),
                // `SELECT 1` without a row or with NULL: a wrong answer, not an outage.
                Ok(None) => Response::text(500, b"unexpected database answer"),
                Err(_) => finish(then, None),
            },
        }
    }
}
