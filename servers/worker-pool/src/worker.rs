//! Running one request in a worker: what a PHP-FPM child does with a
//! request. Used by both shapes (the queue's workers and the per-connection
//! workers).

use std::time::Duration;

use workloads::{finish, slept, Action, Endpoint, Rejection, Response};

use crate::db::Db;

/// One worker's state: its database connection and the `/config` body.
pub struct Worker {
    db: Db,
    config_json: &'static [u8],
}

impl Worker {
    pub fn new(db: Db, config_json: &'static [u8]) -> Worker {
        Worker { db, config_json }
    }

    /// Serves a routed request on this thread, blocking it for the whole
    /// workload: the sqrt loop, `/sleep`'s timer (as PHP's `usleep` holds an
    /// FPM child), the database round trip. Requests the router refused
    /// (404, 405, a bad query value) are answered here too, as nginx hands
    /// every request under `location /` to PHP.
    pub fn serve(&mut self, routed: Result<Endpoint, Rejection>, body: Vec<u8>) -> Response {
        let endpoint = match routed {
            Ok(endpoint) => endpoint,
            Err(rejection) => return rejection.into_response(),
        };
        match workloads::start(endpoint, self.config_json) {
            Action::Respond(response) => response,
            Action::Echo => workloads::echo::echo(body),
            Action::Sleep { ms } => {
                std::thread::sleep(Duration::from_millis(u64::from(ms)));
                slept(ms)
            }
            Action::Query { query, conn, then } => finish(then, self.db.query(query, conn)),
        }
    }
}
