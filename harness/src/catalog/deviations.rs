//! Where a third-party server's own core departs from the contract: the
//! rows of `harness verify` that fail because of the HTTP layer the stack
//! is built on (Swoole's reactor, Go's `net/http` under RoadRunner and
//! FrankenPHP), not because of our PHP code; and, apart, the rows of the
//! conformance section a core fails (nginx under nginx-static and php-fpm:
//! [`NGINX`], [`conformance_core_of`]). Declared once, here: `harness
//! verify`, compare's pre-pass and table, the compose checks and the Swoole
//! tests all read this list, and compose/README.md's list of known
//! behaviours is held to it by a test.
//!
//! A known deviation is still reported (as the core's, with its reason),
//! never patched around and never counted as a failure of our code; a row
//! listed here that passes is reported too (fixed upstream? update the list).

/// One row a core fails, how (a fragment of the verdict), and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deviation {
    /// The row's name, as [`workloads::contract`] lists it.
    pub row: &'static str,
    /// A fragment of the failed row's verdict (`missing header Server`).
    pub symptom: &'static str,
    pub reason: &'static str,
}

/// The HTTP core a stack is built on, and where it departs from the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Core {
    /// `Go net/http`, `Swoole 6.2.2`.
    pub name: &'static str,
    /// Where the behaviour is written in the core's own source.
    pub source: &'static str,
    pub deviations: &'static [Deviation],
}

/// Swoole 6.2.2's reactor (`ext-src/swoole_http_server.cc`,
/// `src/protocol/http.cc`). The fifth known one, a body on HEAD, is the
/// app's to omit, and `compose/swoole/server.php` does.
pub const SWOOLE: Core = Core {
    name: "Swoole 6.2.2",
    source: "swoole-src 6.2.2: src/protocol/http.cc (the parser), include/swoole_config.h \
             (SW_HTTP_BAD_REQUEST_PACKET, SW_HTTP_HEADER_MAX_SIZE)",
    deviations: &[
        Deviation {
            row: "malformed request line → 400, closed",
            symptom: "no complete response",
            reason: "the reactor cannot tell a malformed request line from an incomplete one: \
                     it waits for more bytes, up to its 64 KiB head limit \
                     (SW_HTTP_HEADER_MAX_SIZE), and answers nothing before",
        },
        Deviation {
            row: "malformed header line → 400, closed",
            symptom: "missing header Server",
            reason: "the core's 400 is the bare `HTTP/1.1 400 Bad Request` head with no \
                     Server, Date, Content-Type or body, written before any PHP runs",
        },
        Deviation {
            row: "unknown HTTP version → 400 or 505, closed",
            symptom: "missing header Server",
            reason: "the same bare 400 of the core (no 505, no Server, no body)",
        },
        Deviation {
            row: "header over 8 KiB → 431, closed",
            symptom: "status 200, expected 431",
            reason: "the core has no 431 and no head limit below its receive buffer: \
                     a 9 KiB head reaches the app and is served",
        },
        Deviation {
            row: "pipelined: 8 requests in one write, answered in order",
            symptom: "answer 1 (GET /sleep?ms=30)",
            reason: "each pipelined request runs in a coroutine of its own and is answered \
                     when it finishes, so /hello overtakes /sleep?ms=30",
        },
    ],
};

/// The core's own 400, written by Swoole's reactor before any PHP runs.
pub const SWOOLE_BARE_400: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\r\n";

/// Go's `net/http` server, under RoadRunner's http plugin and FrankenPHP's
/// Caddy. A request it cannot parse never reaches PHP: `conn.serve` writes
/// `HTTP/1.1 <code> <text>` + `errorHeaders` (`Content-Type: text/plain;
/// charset=utf-8`, `Connection: close`) + the text itself — no Server, Date
/// or Content-Length. Its head limit is `DefaultMaxHeaderBytes`, 1 MiB,
/// unless the server sets `MaxHeaderBytes` (RoadRunner's http plugin does
/// not; the Caddyfile sets no limit).
pub const GO_NET_HTTP: Core = Core {
    name: "Go net/http",
    source: "Go's src/net/http/server.go: conn.serve (errorHeaders, statusError, \
             badRequestError), DefaultMaxHeaderBytes = 1 << 20; readRequest refuses \
             HTTP/9.9 with statusError{505, \"unsupported protocol version\"}",
    deviations: &[
        Deviation {
            row: "malformed request line → 400, closed",
            symptom: "missing header Server",
            reason: "conn.serve answers a request line it cannot parse with its own \
                     `400 Bad Request: malformed HTTP request` and errorHeaders: no \
                     Server, Date or Content-Length, before any PHP runs",
        },
        Deviation {
            row: "malformed header line → 400, closed",
            symptom: "missing header Server",
            reason: "the same bare 400 of conn.serve (`malformed MIME header line`)",
        },
        Deviation {
            row: "unknown HTTP version → 400 or 505, closed",
            symptom: "missing header Server",
            reason: "readRequest's statusError 505 (`unsupported protocol version`), \
                     written by conn.serve with errorHeaders only",
        },
        Deviation {
            row: "header over 8 KiB → 431, closed",
            symptom: "status 200, expected 431",
            reason: "the head limit is DefaultMaxHeaderBytes (1 MiB): neither RoadRunner's \
                     http plugin nor the Caddyfile sets MaxHeaderBytes, so a 9 KiB head \
                     reaches PHP and is served",
        },
    ],
};

/// Go's `net/http` with both Content-Length and Transfer-Encoding:
/// `fixLength` (src/net/http/transfer.go) drops the Content-Length and
/// frames the body as chunked, and nothing in `readTransfer` or the server
/// marks the connection to close, so the next request is read and
/// answered. Go's own, under RoadRunner and FrankenPHP alike: listed in
/// [`ROADRUNNER`], kept apart from [`GO_NET_HTTP`]'s list as it was
/// established against RoadRunner (rr 2025.1.5) only.
const GO_CL_WITH_TE: [Deviation; 2] = [
    Deviation {
        row: "Content-Length with Transfer-Encoding → one answer, closed",
        symptom: "404",
        reason: "Go's net/http (transfer.go, fixLength) drops the Content-Length, decodes the \
                 body as chunked and keeps the connection open: the request after the chunked \
                 body is read and answered (404), where RFC 9112 §6.1 wants the connection closed",
    },
    Deviation {
        row: "/echo: Content-Length with Transfer-Encoding → 400 or the chunked body, closed",
        symptom: "left open",
        reason: "Go's net/http (transfer.go, fixLength) echoes the chunked body, as the row \
                 allows, but keeps the connection open",
    },
];

/// RoadRunner's http plugin's own answer to a chunked body Go's chunked
/// reader refuses: v5.2.8 handler/handler.go, `ServeHTTP`, reads the whole
/// body (handler/request.go, `request`: `io.ReadAll(r.Body)`) before any
/// PHP runs; the read's error goes to `http.Error(w, "serve_http: " + err,
/// 500)`: its own 500 in text/plain, no Server header, and Go's server
/// closes the connection (server.go: the unread body's error sets
/// closeAfterReply).
const RR_PLUGIN: [Deviation; 7] = {
    const REASON: &str = "RoadRunner's http plugin (v5.2.8 handler/handler.go, ServeHTTP) reads \
                          the body before PHP runs and answers Go's chunked-reader error with its \
                          own 500 `serve_http: invalid byte in chunk length` (or `malformed \
                          chunked encoding`, `empty hex number for chunk length`), no Server \
                          header, then the close: refused, with 500 where the row wants 400";
    [
        Deviation {
            row: "POST /echo, chunk size not hex → 400, closed",
            symptom: "status 500",
            reason: REASON,
        },
        Deviation {
            row: "POST /echo, chunk longer than its size → 400, closed",
            symptom: "status 500",
            reason: REASON,
        },
        Deviation {
            row: "/echo: chunk size not hex (zz) → 4xx, closed",
            symptom: "500",
            reason: REASON,
        },
        Deviation {
            row: "/echo: chunk size with a 0x prefix → 4xx, closed",
            symptom: "500",
            reason: REASON,
        },
        Deviation {
            row: "/echo: negative chunk size → 4xx, closed",
            symptom: "500",
            reason: REASON,
        },
        Deviation {
            row: "/echo: empty chunk-size line → 4xx, closed",
            symptom: "500",
            reason: REASON,
        },
        Deviation {
            row: "/echo: chunk data longer than its size → 4xx, closed",
            symptom: "500",
            reason: REASON,
        },
    ]
};

/// `a` then `b`, in a constant (the RoadRunner list is Go's plus its own).
const fn joined<const N: usize>(a: &[Deviation], b: &[Deviation]) -> [Deviation; N] {
    assert!(a.len() + b.len() == N);
    let mut out = [a[0]; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

const RR_ROWS_LEN: usize = GO_NET_HTTP.deviations.len() + GO_CL_WITH_TE.len() + RR_PLUGIN.len();
const RR_GO_ROWS: [Deviation; GO_NET_HTTP.deviations.len() + GO_CL_WITH_TE.len()] =
    joined(GO_NET_HTTP.deviations, &GO_CL_WITH_TE);
const RR_ROWS: [Deviation; RR_ROWS_LEN] = joined(&RR_GO_ROWS, &RR_PLUGIN);

/// RoadRunner: Go's `net/http` rows (shared with FrankenPHP), Go's
/// Content-Length + Transfer-Encoding framing, and its http plugin's own
/// 500 for bad chunk framing. Established against rr 2025.1.5 (http plugin
/// v5.2.8) running compose/roadrunner.
pub const ROADRUNNER: Core = Core {
    name: "RoadRunner 2025.1.5 (http plugin v5.2.8 on Go net/http)",
    source: "roadrunner-server/http v5.2.8: handler/handler.go (ServeHTTP, its 500), \
             handler/request.go (request: io.ReadAll of the body); Go's src/net/http/server.go \
             (conn.serve, errorHeaders), transfer.go (fixLength), internal/chunked.go",
    deviations: &RR_ROWS,
};

/// Caddy v2.11.9 (`caddy-static`) as measured here with `harness verify
/// --conformance` in the clear: Go's `net/http` rows, with one exception
/// that is Caddy's configuration of Go rather than Go's default. Caddy's
/// `protocols h1 h2c` turns on Go's `Protocols.UnencryptedHTTP2`, and Go's
/// `conn.serve` (src/net/http/server.go, `maybeServeUnencryptedHTTP2`)
/// then `Peek`s 24 bytes, the length of the HTTP/2 preface, before it
/// parses any HTTP/1 request. `GARBAGE\r\n\r\n` is 11 bytes, so it gets no
/// answer until more bytes or the end of input come. The same Caddyfile
/// with `protocols h1` answers Go's bare 400 (measured). Also Go's: the
/// Content-Length + Transfer-Encoding rows, as under RoadRunner.
/// `caddy-static` has no `/echo` of its own, so its `respond` never reads a
/// body and its `/echo` rows show how it refuses: 404.
const CADDY_ROWS: [Deviation; 6] = [
    Deviation {
        row: "malformed request line → 400, closed",
        symptom: "no complete response",
        reason: "Caddy's `protocols … h2c` turns on Go's UnencryptedHTTP2, and conn.serve \
                 (maybeServeUnencryptedHTTP2) peeks 24 bytes, the HTTP/2 preface's length, \
                 before parsing HTTP/1: an 11-byte malformed request waits for more (with \
                 `protocols h1`, Go's bare 400)",
    },
    GO_NET_HTTP.deviations[1],
    GO_NET_HTTP.deviations[2],
    Deviation {
        row: "header over 8 KiB → 431, closed",
        symptom: "status 200, expected 431",
        reason: "Caddy leaves MaxHeaderBytes at Go's DefaultMaxHeaderBytes (1 MiB) unless the \
                 Caddyfile sets `max_header_size`: a 9 KiB head is served",
    },
    GO_CL_WITH_TE[0],
    GO_CL_WITH_TE[1],
];

/// Caddy v2.11.9 (`caddy-static`): Go's `net/http` core, with h2c on.
pub const CADDY: Core = Core {
    name: "Caddy v2.11.9 (Go net/http with h2c on)",
    source: "Go's src/net/http/server.go (conn.serve, maybeServeUnencryptedHTTP2's Peek of \
             the preface, errorHeaders), transfer.go (fixLength); caddy v2.11.9 \
             modules/caddyhttp/server.go (protocols)",
    deviations: &CADDY_ROWS,
};

/// Every core declared here, for the README check and `harness servers`.
pub const CORES: &[&Core] = &[&SWOOLE, &GO_NET_HTTP, &ROADRUNNER, &CADDY];

/// nginx 1.22.1 (Debian 12's), the HTTP layer of nginx-static and of
/// php-fpm's front: where it departs from the conformance section
/// ([`workloads::conformance`]), not from the contract. Its chunked parser
/// reads a size, then on `;`, SP or HTAB skips every byte to the line end
/// unread; its request-line parser lets bytes above 0x7F into the target
/// and takes no authority-form target. No nginx setting changes either.
pub const NGINX: Core = Core {
    name: "nginx 1.22.1",
    source: "nginx 1.22.1: src/http/ngx_http_parse.c, ngx_http_parse_chunked (sw_chunk_size \
             goes to sw_chunk_extension on ';', SP or HTAB; sw_chunk_extension skips to CR or \
             LF) and ngx_http_parse_request_line (sw_check_uri takes octets above 0x7F; a \
             target that is neither '/...' nor a scheme is 400)",
    deviations: &[
        Deviation {
            row: "/echo: bare `;` after the chunk size → 400, closed",
            symptom: "then nothing within",
            reason: "ngx_http_parse_chunked skips a chunk extension to its line end without \
                     reading it: the line is taken, the body read on (php-fpm echoes the chunk; \
                     nginx-static answers 404 and waits for the rest)",
        },
        Deviation {
            row: "/echo: chunk extension name not a token → 400, closed",
            symptom: "then nothing within",
            reason: "the same skip of sw_chunk_extension: the name is never read",
        },
        Deviation {
            row: "/echo: control character in a chunk extension → 400, closed",
            symptom: "then nothing within",
            reason: "the same skip of sw_chunk_extension: only CR and LF end it",
        },
        Deviation {
            row: "/echo: whitespace between chunk size and CRLF → 400, closed",
            symptom: "then nothing within",
            reason: "sw_chunk_size goes to sw_chunk_extension on SP or HTAB as on ';', and the \
                     rest of the line is skipped",
        },
        Deviation {
            row: "raw byte above 0x7F in the request target → 400",
            symptom: "404",
            reason: "ngx_http_parse_request_line takes octets above 0x7F in the target (UTF-8 \
                     paths); the file is looked up and not found",
        },
        Deviation {
            row: "CONNECT to an origin → 501 or 405",
            symptom: "400",
            reason: "ngx_http_parse_request_line takes no authority-form target (`verify:443`): \
                     400 before the method is looked at (a refusal all the same)",
        },
    ],
};

/// The cores whose deviations are rows of the conformance section, not of
/// the contract.
pub const CONFORMANCE_CORES: &[&Core] = &[&NGINX];

/// The core under a server's HTTP/1.1 layer whose conformance deviations
/// are listed, by its catalog name or the `server` of its `/config`.
pub fn conformance_core_of(server: &str) -> Option<&'static Core> {
    match server {
        "nginx-static" | "php-fpm" => Some(&NGINX),
        _ => None,
    }
}

/// The core a server is built on, by its catalog name or the `server` of
/// its `/config` (a `--target` reports its own): `swoole`, `roadrunner`,
/// `frankenphp`. Our own servers have none listed; nginx's are rows of
/// the conformance section ([`conformance_core_of`]).
pub fn core_of(server: &str) -> Option<&'static Core> {
    match server {
        "swoole" => Some(&SWOOLE),
        "roadrunner" => Some(&ROADRUNNER),
        "frankenphp" => Some(&GO_NET_HTTP),
        "caddy-static" => Some(&CADDY),
        _ => None,
    }
}

/// A row's verdict, read against a core's known deviations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading<'a> {
    Pass,
    /// Failed otherwise than any known deviation: a failure of ours (or new).
    Fail(String),
    /// Failed as the core is known to.
    Known(&'a Deviation),
    /// Listed as the core's, but failed otherwise than known.
    KnownButOtherwise(&'a Deviation, String),
    /// Listed as the core's, but passed: fixed upstream?
    KnownNowPasses(&'a Deviation),
}

impl Reading<'_> {
    /// Whether it counts against the server (our code, or a changed core).
    pub fn is_failure(&self) -> bool {
        !matches!(self, Reading::Pass | Reading::Known(_))
    }
}

impl Core {
    /// How one verdict reads against this core's list.
    pub fn read<'a>(&'a self, name: &str, result: &Result<(), String>) -> Reading<'a> {
        let known = self.deviations.iter().find(|d| d.row == name);
        match (known, result) {
            (None, Ok(())) => Reading::Pass,
            (None, Err(e)) => Reading::Fail(e.clone()),
            (Some(d), Ok(())) => Reading::KnownNowPasses(d),
            (Some(d), Err(e)) if !e.contains(d.symptom) => Reading::KnownButOtherwise(d, e.clone()),
            (Some(d), Err(_)) => Reading::Known(d),
        }
    }

    /// The deviation's line as a report prints it.
    pub fn explain(&self, d: &Deviation) -> String {
        format!("{}'s core: {}", self.name, d.reason)
    }
}

/// How a verdict reads for a server with or without a known core.
pub fn read<'a>(core: Option<&'a Core>, name: &str, result: &Result<(), String>) -> Reading<'a> {
    match core {
        Some(c) => c.read(name, result),
        None => match result {
            Ok(()) => Reading::Pass,
            Err(e) => Reading::Fail(e.clone()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_row_is_a_row_of_the_contract() {
        let rows: Vec<String> = workloads::contract::rows()
            .into_iter()
            .map(|r| r.name)
            .collect();
        for core in CORES {
            for d in core.deviations {
                assert!(rows.iter().any(|r| r == d.row), "{}: {}", core.name, d.row);
            }
        }
    }

    #[test]
    fn every_listed_conformance_row_is_a_row_of_the_section() {
        let rows: Vec<String> = workloads::conformance::rows()
            .into_iter()
            .map(|r| r.name)
            .collect();
        for core in CONFORMANCE_CORES {
            for d in core.deviations {
                assert!(rows.iter().any(|r| r == d.row), "{}: {}", core.name, d.row);
            }
        }
        assert_eq!(conformance_core_of("php-fpm"), Some(&NGINX));
        assert_eq!(conformance_core_of("event-loop"), None);
    }

    #[test]
    fn a_listed_row_reads_as_the_cores_only_with_its_symptom() {
        let row = "header over 8 KiB → 431, closed";
        let ok: Result<(), String> = Ok(());
        let known = Err("status 200, expected 431".to_string());
        let other = Err("missing header Date".to_string());
        assert!(matches!(GO_NET_HTTP.read(row, &known), Reading::Known(_)));
        assert!(GO_NET_HTTP.read(row, &other).is_failure());
        assert!(matches!(
            GO_NET_HTTP.read(row, &ok),
            Reading::KnownNowPasses(_)
        ));
        assert!(GO_NET_HTTP.read("GET /hello", &other).is_failure());
        assert_eq!(
            read(None, row, &known),
            Reading::Fail("status 200, expected 431".into())
        );
        assert_eq!(core_of("frankenphp"), Some(&GO_NET_HTTP));
        // RoadRunner: Go's rows, then its http plugin's own.
        let rr = core_of("roadrunner").unwrap();
        assert!(matches!(rr.read(row, &known), Reading::Known(_)));
        let chunk = "POST /echo, chunk size not hex → 400, closed";
        let plugin_500 = Err("status 500, expected 400".to_string());
        assert!(matches!(rr.read(chunk, &plugin_500), Reading::Known(_)));
        assert!(
            GO_NET_HTTP.read(chunk, &plugin_500).is_failure(),
            "the plugin's, not Go's"
        );
        assert_eq!(core_of("php-fpm"), None);
        // Caddy: Go's rows, but the malformed request line waits (h2c's peek).
        let caddy = core_of("caddy-static").unwrap();
        let waits = Err("no complete response within 3s".to_string());
        let bare = "malformed request line → 400, closed";
        assert!(matches!(caddy.read(bare, &waits), Reading::Known(_)));
        assert!(GO_NET_HTTP.read(bare, &waits).is_failure());
    }

    /// compose/README.md's "Known behaviours" names every row of every
    /// core declared here, so the list users read is this one.
    #[test]
    fn the_compose_readme_lists_every_known_deviation() {
        let readme = include_str!("../../../compose/README.md");
        let section = readme
            .split("Known behaviours of the third-party servers")
            .nth(1)
            .expect("compose/README.md has its Known behaviours section");
        for core in CORES {
            assert!(
                section.contains(core.name),
                "{} not in the section",
                core.name
            );
            for d in core.deviations {
                assert!(
                    section.contains(d.row),
                    "compose/README.md's Known behaviours does not name `{}` ({})",
                    d.row,
                    core.name
                );
            }
        }
    }
}
