//! What each endpoint does and answers.

use std::borrow::Cow;

use crate::endpoint::{ConnMode, Endpoint, Rejection};
use crate::{format_sum, sqrt_sum};

/// The content type of an echoed body ([`crate::echo::CONTENT_TYPE`]).
pub(crate) const ECHO_CONTENT_TYPE: &str = "application/octet-stream";

/// A response body: static for the fixed answers, owned for computed ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Static(&'static [u8]),
    Owned(Vec<u8>),
}

impl Body {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Static(b) => b,
            Body::Owned(v) => v,
        }
    }

    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A response as the contract defines it; servers add `Server`, `Date`,
/// `Content-Length` and `Connection`, and drop the body for HEAD.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Body,
}

impl Response {
    pub fn text(status: u16, body: &'static [u8]) -> Response {
        Response {
            status,
            content_type: "text/plain",
            body: Body::Static(body),
        }
    }

    /// 503 `db unavailable`: the database could not answer.
    pub fn db_unavailable() -> Response {
        Response::text(503, b"db unavailable")
    }

    /// 503 `server busy`: a worker-pool queue is full (an overflowing FPM backlog).
    pub fn busy() -> Response {
        Response::text(503, b"server busy")
    }

    /// The canonical reason phrase of the statuses the contract uses.
    pub fn reason(status: u16) -> &'static str {
        match status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            411 => "Length Required",
            413 => "Content Too Large",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            _ => "Unknown",
        }
    }
}

/// The database query of a `/db` or `/work` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    /// `Some(M)`: `SELECT 1 FROM (SELECT SLEEP(M/1000)) t`; `None`: `SELECT 1`.
    pub sleep_ms: Option<u32>,
}

impl Query {
    /// The SQL text to send.
    pub fn sql(&self) -> Cow<'static, str> {
        match self.sleep_ms {
            None => Cow::Borrowed("SELECT 1"),
            Some(ms) => Cow::Owned(format!(
                "SELECT 1 FROM (SELECT SLEEP({}.{:03})) t",
                ms / 1000,
                ms % 1000
            )),
        }
    }
}

/// What to answer once the query has run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AfterQuery {
    /// `/db`: the value as the body.
    DbValue,
    /// `/work`: the JSON with the sum already computed.
    Work { sum: f64 },
}

/// What a server must do to serve an endpoint, in its own runtime.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Answer now.
    Respond(Response),
    /// Wait `ms` without holding a CPU (a timer), then answer [`slept`].
    Sleep { ms: u32 },
    /// Run the query on a connection of the given mode, then answer
    /// [`finish`] with its result.
    Query {
        query: Query,
        conn: ConnMode,
        then: AfterQuery,
    },
    /// Answer the request's body back: [`crate::echo::echo`] with it.
    Echo,
}

impl Rejection {
    /// The response a server sends for this rejection.
    pub fn into_response(self) -> Response {
        let status = self.status();
        let body = match self {
            Rejection::NotFound => Body::Static(b"not found"),
            Rejection::MethodNotAllowed => Body::Static(b"method not allowed"),
            Rejection::BadQuery(reason) => Body::Owned(reason.into_bytes()),
            Rejection::BadTarget(reason) => Body::Static(reason.as_bytes()),
            Rejection::NotImplemented => Body::Static(b"method not implemented"),
        };
        Response {
            status,
            content_type: "text/plain",
            body,
        }
    }
}

/// Starts serving an endpoint. CPU work (the sqrt loop of `/cpu` and `/work`)
/// runs here, on the caller's thread: on the event loop, in the coroutine, in
/// the worker — wherever the server's model runs it.
///
/// `config_json` is the server's `/config` body, rendered once at start-up
/// by [`crate::ServerConfig::to_json`].
pub fn start(endpoint: Endpoint, config_json: &'static [u8]) -> Action {
    match endpoint {
        Endpoint::Hello => Action::Respond(Response::text(200, b"Hello World")),
        Endpoint::Cpu { n } => Action::Respond(Response {
            status: 200,
            content_type: "text/plain",
            body: Body::Owned(format_sum(sqrt_sum(n)).into_bytes()),
        }),
        Endpoint::Db { sleep_ms, conn } => Action::Query {
            query: Query { sleep_ms },
            conn,
            then: AfterQuery::DbValue,
        },
        Endpoint::Work { n, conn } => Action::Query {
            query: Query { sleep_ms: None },
            conn,
            then: AfterQuery::Work { sum: sqrt_sum(n) },
        },
        Endpoint::Sleep { ms } => Action::Sleep { ms },
        Endpoint::Config => Action::Respond(Response {
            status: 200,
            content_type: "application/json",
            body: Body::Static(config_json),
        }),
        Endpoint::Echo => Action::Echo,
    }
}

/// The answer after a query: `db_value` is the first column of the first
/// row, or `None` if the database failed (then 503 `db unavailable`). Any
/// value but 1 is a wrong answer from the database: 500, never a 200.
pub fn finish(then: AfterQuery, db_value: Option<i64>) -> Response {
    match db_value {
        None => Response::db_unavailable(),
        Some(1) => match then {
            AfterQuery::DbValue => Response::text(200, b"1"),
            AfterQuery::Work { sum } => Response {
                status: 200,
                content_type: "application/json",
                body: Body::Owned(format!("{{\"sum\":{},\"db\":1}}", format_sum(sum)).into_bytes()),
            },
        },
        Some(_) => Response::text(500, b"unexpected database answer"),
    }
}

/// The answer after `/sleep?ms=M`.
pub fn slept(ms: u32) -> Response {
    Response {
        status: 200,
        content_type: "text/plain",
        body: Body::Owned(format!("slept {ms}").into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route;

    fn action(target: &str) -> Action {
        start(
            route("GET", target).unwrap().endpoint,
            b"{\"server\":\"t\"}",
        )
    }

    #[test]
    fn fixed_bodies() {
        let Action::Respond(r) = action("/hello") else {
            panic!()
        };
        assert_eq!(
            (r.status, r.content_type, r.body.as_bytes()),
            (200, "text/plain", &b"Hello World"[..])
        );
        let Action::Respond(r) = action("/cpu") else {
            panic!()
        };
        assert_eq!(r.body.as_bytes(), b"21097.455887");
        let Action::Respond(r) = action("/config") else {
            panic!()
        };
        assert_eq!(
            (r.content_type, r.body.as_bytes()),
            ("application/json", &b"{\"server\":\"t\"}"[..])
        );
    }

    #[test]
    fn db_and_work_bodies() {
        let Action::Query { query, conn, then } = action("/work") else {
            panic!()
        };
        assert_eq!(query.sql(), "SELECT 1");
        assert_eq!(conn, ConnMode::Pooled);
        let r = finish(then, Some(1));
        assert_eq!(r.content_type, "application/json");
        assert_eq!(r.body.as_bytes(), br#"{"sum":21097.455887,"db":1}"#);

        let Action::Query { query, then, .. } = action("/db?sleep_ms=1250") else {
            panic!()
        };
        assert_eq!(query.sql(), "SELECT 1 FROM (SELECT SLEEP(1.250)) t");
        assert_eq!(finish(then, Some(1)).body.as_bytes(), b"1");
        assert_eq!(finish(then, None), Response::db_unavailable());
        assert_eq!(finish(then, Some(0)).status, 500);
    }

    #[test]
    fn sleep_body() {
        assert_eq!(action("/sleep?ms=20"), Action::Sleep { ms: 20 });
        assert_eq!(slept(20).body.as_bytes(), b"slept 20");
    }
}
