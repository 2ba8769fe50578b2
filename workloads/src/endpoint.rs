//! Request targets → endpoints with validated parameters.

/// Default `n` of `/cpu` and `/work`.
pub const CPU_N_DEFAULT: u32 = 1000;
/// Largest accepted `n` of `/cpu` and `/work`.
pub const CPU_N_MAX: u32 = 10_000_000;
/// Largest accepted `ms` of `/sleep` and `sleep_ms` of `/db`.
pub const SLEEP_MS_MAX: u32 = 10_000;

/// Which database connection a query runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnMode {
    /// A pooled or persistent connection (the default).
    Pooled,
    /// `conn=new`: a connection opened for this request and closed after it,
    /// as classic PHP does with `new PDO(...)` per request.
    New,
}

/// One endpoint of the contract, with its parameters validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /` and `GET /hello`.
    Hello,
    /// `GET /cpu?n=N`.
    Cpu { n: u32 },
    /// `GET /db[?sleep_ms=M][&conn=new]`.
    Db {
        sleep_ms: Option<u32>,
        conn: ConnMode,
    },
    /// `GET /work[?n=N][&conn=new]`: the sqrt loop, then `SELECT 1`.
    Work { n: u32, conn: ConnMode },
    /// `GET /sleep?ms=M`.
    Sleep { ms: u32 },
    /// `GET /config`.
    Config,
    /// `POST /echo`: the request's body, answered back ([`crate::echo`]).
    Echo,
}

impl Endpoint {
    /// Whether serving it needs the database.
    pub fn needs_db(&self) -> bool {
        matches!(self, Endpoint::Db { .. } | Endpoint::Work { .. })
    }
}

/// A routed request: the endpoint and whether the method was `HEAD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route {
    pub endpoint: Endpoint,
    pub head: bool,
}

/// Why a request is refused, with the contract's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// 404: no such path.
    NotFound,
    /// 405: a known path with a method it does not serve (GET and HEAD;
    /// POST for `/echo`).
    MethodNotAllowed,
    /// 400: a query value out of range or not a number; the reason is one line.
    BadQuery(String),
    /// 400: a request target no request line may carry
    /// ([`target_refusal`]); the reason is one line.
    BadTarget(&'static str),
    /// 501: CONNECT, which an origin server that is not a proxy does not
    /// implement (RFC 9110 §9.3.6, §15.6.2).
    NotImplemented,
}

impl Rejection {
    pub fn status(&self) -> u16 {
        match self {
            Rejection::NotFound => 404,
            Rejection::MethodNotAllowed => 405,
            Rejection::BadQuery(_) | Rejection::BadTarget(_) => 400,
            Rejection::NotImplemented => 501,
        }
    }
}

/// The `Allow` header value a 405 response carries (every path but `/echo`).
pub const ALLOW: &str = "GET, HEAD";

/// The path of `POST /echo` ([`crate::echo::PATH`]).
pub(crate) const ECHO_PATH: &str = "/echo";
/// The `Allow` value of `/echo`'s 405 ([`crate::echo::ALLOW`]).
pub(crate) const ECHO_ALLOW: &str = "POST";

/// Every path the router knows. A new route starts here; the contract's unit
/// tests fail until a row in [`crate::contract`] requests it.
pub const PATHS: &[&str] = &[
    "/", "/hello", "/cpu", "/db", "/work", "/sleep", "/config", "/echo",
];

/// Routes a request line's method and target (`/path?query`).
///
/// Unknown query parameters are ignored; known ones are validated strictly:
/// ASCII digits only, within range, or a 400 that says why. CONNECT is 501
/// and a target no request may carry 400 ([`target_refusal`]), whatever
/// the path.
pub fn route(method: &str, target: &str) -> Result<Route, Rejection> {
    if method == "CONNECT" {
        return Err(Rejection::NotImplemented);
    }
    if let Some(why) = target_refusal(method, target) {
        return Err(Rejection::BadTarget(why));
    }
    let target = origin_form(target);
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    if !PATHS.contains(&path) {
        return Err(Rejection::NotFound);
    }
    if path == ECHO_PATH {
        return route_echo(method);
    }
    let head = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err(Rejection::MethodNotAllowed),
    };
    let q = Query::new(query);
    let endpoint = match path {
        "/" | "/hello" => Endpoint::Hello,
        "/cpu" => Endpoint::Cpu {
            n: q.number("n", 1, CPU_N_MAX)?.unwrap_or(CPU_N_DEFAULT),
        },
        "/db" => Endpoint::Db {
            sleep_ms: q.number("sleep_ms", 0, SLEEP_MS_MAX)?,
            conn: q.conn()?,
        },
        "/work" => Endpoint::Work {
            n: q.number("n", 1, CPU_N_MAX)?.unwrap_or(CPU_N_DEFAULT),
            conn: q.conn()?,
        },
        "/sleep" => Endpoint::Sleep {
            ms: q
                .number("ms", 0, SLEEP_MS_MAX)?
                .ok_or_else(|| Rejection::BadQuery("missing query parameter ms".into()))?,
        },
        "/config" => Endpoint::Config,
        _ => unreachable!("path checked above"),
    };
    Ok(Route { endpoint, head })
}

/// Routes a request for [`ECHO_PATH`]: POST only.
fn route_echo(method: &str) -> Result<Route, Rejection> {
    match method {
        "POST" => Ok(Route {
            endpoint: Endpoint::Echo,
            head: false,
        }),
        _ => Err(Rejection::MethodNotAllowed),
    }
}

/// Why a request line's target is refused (400), if it is: the asterisk
/// form with a method other than OPTIONS (RFC 9112 §3.2.4), or a byte
/// above 0x7F, which no URI holds unencoded (RFC 3986 §2, RFC 9112 §3.2:
/// a proxy and an origin may read it differently).
pub fn target_refusal(method: &str, target: &str) -> Option<&'static str> {
    if target == "*" && method != "OPTIONS" {
        Some("the asterisk-form target is for OPTIONS only")
    } else if !target.is_ascii() {
        Some("a request target is ASCII: a raw byte above 0x7F is not a URI")
    } else {
        None
    }
}

/// The `Allow` value of a 405 for `target`: the methods its path serves
/// (`POST` for `/echo`, [`ALLOW`] for the others).
pub fn allow(target: &str) -> &'static str {
    let path = origin_form(target).split('?').next().unwrap_or("");
    if path == ECHO_PATH {
        ECHO_ALLOW
    } else {
        ALLOW
    }
}

/// The path and query of a target in absolute-form (`http://host/hello`),
/// which a server MUST accept (RFC 9112 §3.2.2); any other target as it is.
fn origin_form(target: &str) -> &str {
    // Compared as bytes: slicing the str could split a multi-byte character.
    let starts = |scheme: &[u8]| {
        target
            .as_bytes()
            .get(..scheme.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(scheme))
    };
    let scheme_len = if starts(b"http://") {
        7
    } else if starts(b"https://") {
        8
    } else {
        return target;
    };
    // The authority ends at the path or, with an empty path, at the query
    // (`http://host?x=1`: the root with a query); a target with no path
    // at all is the root.
    let rest = &target[scheme_len..];
    match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
        _ => "/",
    }
}

/// A query string, read without allocating.
struct Query<'a>(&'a str);

impl<'a> Query<'a> {
    fn new(query: &'a str) -> Self {
        Query(query)
    }

    /// The first value of `name`, if present.
    fn get(&self, name: &str) -> Option<&'a str> {
        self.0.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == name).then_some(v)
        })
    }

    fn number(&self, name: &str, min: u32, max: u32) -> Result<Option<u32>, Rejection> {
        let Some(raw) = self.get(name) else {
            return Ok(None);
        };
        let bad = || Rejection::BadQuery(format!("{name} must be an integer in {min}..={max}"));
        if raw.is_empty() || raw.len() > 10 || !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let value: u64 = raw.parse().map_err(|_| bad())?;
        if value < u64::from(min) || value > u64::from(max) {
            return Err(bad());
        }
        Ok(Some(value as u32))
    }

    fn conn(&self) -> Result<ConnMode, Rejection> {
        match self.get("conn") {
            None | Some("pool") | Some("pooled") => Ok(ConnMode::Pooled),
            Some("new") => Ok(ConnMode::New),
            Some(_) => Err(Rejection::BadQuery("conn must be new or pooled".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(target: &str) -> Endpoint {
        route("GET", target).unwrap().endpoint
    }

    #[test]
    fn routes_every_endpoint() {
        assert_eq!(ep("/"), Endpoint::Hello);
        assert_eq!(ep("/hello"), Endpoint::Hello);
        assert_eq!(ep("/cpu"), Endpoint::Cpu { n: 1000 });
        assert_eq!(ep("/cpu?n=7"), Endpoint::Cpu { n: 7 });
        assert_eq!(
            ep("/db"),
            Endpoint::Db {
                sleep_ms: None,
                conn: ConnMode::Pooled
            }
        );
        assert_eq!(
            ep("/db?sleep_ms=10&conn=new"),
            Endpoint::Db {
                sleep_ms: Some(10),
                conn: ConnMode::New
            }
        );
        assert_eq!(
            ep("/work?conn=new"),
            Endpoint::Work {
                n: 1000,
                conn: ConnMode::New
            }
        );
        assert_eq!(ep("/sleep?ms=0"), Endpoint::Sleep { ms: 0 });
        assert_eq!(ep("/config"), Endpoint::Config);
        assert_eq!(ep("/hello?cachebuster=1"), Endpoint::Hello);
    }

    /// RFC 9112 §3.2.4, RFC 3986 §2, RFC 9110 §9.3.6: what no path
    /// makes right is refused before the path is looked at.
    #[test]
    fn bad_targets_and_connect_are_refused_whatever_the_path() {
        let status = |m: &str, t: &str| route(m, t).map_err(|r| r.status()).err();
        assert_eq!(status("GET", "*"), Some(400));
        assert_eq!(status("HEAD", "*"), Some(400));
        assert_eq!(status("OPTIONS", "*"), Some(404), "OPTIONS * is valid");
        assert_eq!(status("GET", "/hello\u{e9}"), Some(400));
        assert_eq!(status("GET", "/h\u{e9}llo?x=1"), Some(400));
        assert_eq!(status("POST", "/echo?\u{ff}"), Some(400));
        assert_eq!(status("CONNECT", "verify:443"), Some(501));
        assert_eq!(status("CONNECT", "/hello"), Some(501));
        assert_eq!(
            status("GET", "/hello%C3%A9"),
            Some(404),
            "percent-encoded is ASCII"
        );
        let r = Rejection::BadTarget("why").into_response();
        assert_eq!((r.status, r.body.as_bytes()), (400, &b"why"[..]));
    }

    #[test]
    fn absolute_form_targets_route_by_their_path() {
        assert!(route("GET", "http://verify/hello").is_ok());
        assert!(route("GET", "HTTP://verify:80/cpu?n=3").is_ok());
        assert!(route("GET", "https://verify").is_ok(), "the root");
        assert!(
            route("GET", "http://verify?n=3").is_ok(),
            "the root, with a query"
        );
        assert_eq!(
            allow("http:/\u{e9}/hello"),
            crate::ALLOW,
            "a multi-byte character where the scheme ends is no panic"
        );
        assert_eq!(
            route("GET", "http://verify/nope").map(|_| ()),
            Err(Rejection::NotFound)
        );
        assert_eq!(
            route("GET", "verify:443").map(|_| ()),
            Err(Rejection::NotFound)
        );
    }

    #[test]
    fn head_is_routed_as_head() {
        let r = route("HEAD", "/hello").unwrap();
        assert!(r.head);
        assert_eq!(r.endpoint, Endpoint::Hello);
    }

    #[test]
    fn rejections_carry_contract_statuses() {
        assert_eq!(route("GET", "/nope").unwrap_err().status(), 404);
        assert_eq!(route("GET", "/hello/").unwrap_err().status(), 404);
        assert_eq!(route("POST", "/hello").unwrap_err().status(), 405);
        assert_eq!(route("DELETE", "/nope").unwrap_err().status(), 404);
        for bad in [
            "/cpu?n=abc",
            "/cpu?n=0",
            "/cpu?n=10000001",
            "/cpu?n=-1",
            "/cpu?n=1e3",
            "/cpu?n=",
            "/cpu?n=99999999999999999999",
            "/db?sleep_ms=10001",
            "/db?conn=maybe",
            "/sleep",
            "/sleep?ms=x",
        ] {
            let rej = route("GET", bad).unwrap_err();
            assert_eq!(rej.status(), 400, "{bad}");
        }
    }

    #[test]
    fn rejection_responses_say_why() {
        let resp = route("GET", "/cpu?n=abc").unwrap_err().into_response();
        assert_eq!(resp.status, 400);
        assert_eq!(
            resp.body.as_bytes(),
            b"n must be an integer in 1..=10000000"
        );
        let resp = Rejection::NotFound.into_response();
        assert_eq!(
            (resp.status, resp.body.as_bytes()),
            (404, &b"not found"[..])
        );
        let resp = Rejection::MethodNotAllowed.into_response();
        assert_eq!(resp.status, 405);
    }
}
