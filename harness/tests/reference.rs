//! Against the real reference servers (built by `cargo build --workspace`;
//! these tests build nothing): the whole contract through `harness verify`,
//! and `/sleep?ms=20` latency through the engine.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use harness::engine::{End, Stop};
use harness::stats::Percentiles;
use testkit::contract::Subject;

use crate::util::{plan, run, sibling_binary};

/// The event-loop server against this test binary's private MariaDB,
/// started once and killed when the test process exits.
fn event_loop() -> Subject {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    static BIN: OnceLock<&'static str> = OnceLock::new();
    let bin = BIN.get_or_init(|| {
        let path = sibling_binary("event-loop");
        Box::leak(path.to_string_lossy().into_owned().into_boxed_str())
    });
    Subject::shared(&ADDR, bin, &[])
}

#[test]
fn verify_passes_every_row_against_the_event_loop_server() {
    let server = event_loop();
    let verdicts = harness::lab::contract::check_all(server.addr, Duration::from_secs(10));
    let failed: Vec<String> = verdicts
        .iter()
        .filter_map(|v| v.result.as_ref().err().map(|e| format!("{}: {e}", v.name)))
        .collect();
    assert!(failed.is_empty(), "rows failed:\n{}", failed.join("\n"));
}

#[test]
fn sleep_20ms_latency_is_the_sleep_on_the_event_loop_server() {
    let server = event_loop();
    let url = format!("http://{}/sleep?ms=20", server.addr);
    let r = run(&plan(&url, |p| {
        p.stop = Stop::Duration(Duration::from_secs(2));
        p.connections = 10;
    }));
    assert_eq!(r.end, End::Duration);
    assert_eq!(r.stats.failures.total(), 0, "{:?}", r.stats.failures);
    let l = Percentiles::of(&r.stats.latency_us);
    // Never shorter than the sleep; at the median one round trip, not two
    // (40 ms): the sleep plus wake-ups, about 5 ms on a 2-core machine
    // running CPU hogs and builds (p50 23-26 ms measured there).
    assert!(l.min >= 20_000, "min {} µs", l.min);
    assert!((20_000..40_000).contains(&l.p50), "p50 {} µs", l.p50);
}

#[test]
fn work_is_verified_exactly_on_the_event_loop_server() {
    let server = event_loop();
    let url = format!("http://{}/work", server.addr);
    let r = run(&plan(&url, |p| p.stop = Stop::Count(500)));
    assert_eq!(r.stats.ok, 500, "{:?}", r.stats.failures);
}

/// A stand-in for a server whose HTTP core is Go's `net/http` (RoadRunner,
/// FrankenPHP): a proxy in front of the event-loop server that answers the
/// first head of each connection as `conn.serve` would where Go's parser
/// refuses it (a bare `400 Bad Request: …` or `505 …: unsupported protocol
/// version` with only Content-Type and Connection: close), serves a 9 KiB
/// head (Go's limit is 1 MiB) by forwarding it without its big header, names
/// itself `frankenphp` or `roadrunner` at `/config`, and forwards
/// everything else as bytes. As `roadrunner` it also answers a chunked body
/// Go's chunked reader refuses as RoadRunner's http plugin does (v5.2.8
/// handler/handler.go: it reads the body before PHP runs and answers the
/// error with its own 500, no Server, then the close).
mod go_like {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::thread;

    fn go_error(code: u16, text: &str, detail: Option<&str>) -> Vec<u8> {
        // conn.serve: "HTTP/1.1 %d %s: %s" + errorHeaders + "%d %s: %s"
        let public = match detail {
            Some(d) => format!("{code} {text}: {d}"),
            None => format!("{code} {text}"),
        };
        format!(
            "HTTP/1.1 {public}\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n{public}"
        )
        .into_bytes()
    }

    /// Go's verdict on a request head, or `None` where it would serve it.
    fn refuse(head: &str) -> Option<Vec<u8>> {
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or("");
        let parts: Vec<&str> = line.split(' ').collect();
        if parts.len() != 3 || !parts[2].starts_with("HTTP/") {
            return Some(go_error(400, "Bad Request", Some("malformed HTTP request")));
        }
        if !matches!(parts[2], "HTTP/1.0" | "HTTP/1.1") {
            return Some(go_error(
                505,
                "HTTP Version Not Supported",
                Some("unsupported protocol version"),
            ));
        }
        if lines
            .take_while(|l| !l.is_empty())
            .any(|l| !l.contains(':'))
        {
            return Some(go_error(
                400,
                "Bad Request",
                Some("malformed MIME header line"),
            ));
        }
        None
    }

    /// Go's chunked reader (src/net/http/internal/chunked.go) over `body`:
    /// `Ok(true)` complete, `Ok(false)` incomplete, `Err` its error text.
    fn go_chunked(body: &[u8]) -> Result<bool, &'static str> {
        let mut pos = 0;
        loop {
            let Some(eol) = body[pos..].iter().position(|&b| b == b'\n') else {
                return Ok(false);
            };
            let line = String::from_utf8_lossy(&body[pos..pos + eol]);
            let hex = line.split(';').next().unwrap_or("").trim_end();
            if hex.is_empty() {
                return Err("empty hex number for chunk length");
            }
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("invalid byte in chunk length");
            }
            let size = usize::from_str_radix(hex, 16).map_err(|_| "http chunk length too large")?;
            pos += eol + 1;
            if size == 0 {
                return Ok(body[pos..].windows(2).any(|w| w == b"\r\n"));
            }
            if body.len() < pos + size + 2 {
                return Ok(false);
            }
            if &body[pos + size..pos + size + 2] != b"\r\n" {
                return Err("malformed chunked encoding");
            }
            pos += size + 2;
        }
    }

    /// The http plugin's answer to a body it could not read.
    fn plugin_500(err: &str) -> Vec<u8> {
        let text = format!("serve_http: {err}\n");
        format!(
            "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\n\
             X-Content-Type-Options: nosniff\r\nDate: {}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{text}",
            httpdate::fmt_http_date(std::time::SystemTime::now()),
            text.len()
        )
        .into_bytes()
    }

    fn serve(mut client: TcpStream, upstream: SocketAddr, config: &[u8], plugin: bool) {
        let mut head = Vec::new();
        let mut buf = [0u8; 16384];
        let end = loop {
            if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match client.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.len() > 1 << 20 {
                return;
            }
        };
        let text = String::from_utf8_lossy(&head[..end]).into_owned();
        if let Some(answer) = refuse(&text) {
            let _ = client.write_all(&answer);
            return;
        }
        if text.starts_with("GET /config ") {
            let mut answer = format!(
                "HTTP/1.1 200 OK\r\nServer: go\r\nDate: {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                httpdate::fmt_http_date(std::time::SystemTime::now()),
                config.len()
            )
            .into_bytes();
            answer.extend_from_slice(config);
            let _ = client.write_all(&answer);
            return;
        }
        let chunked = text.starts_with("POST ")
            && text
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked");
        if plugin && chunked {
            client
                .set_read_timeout(Some(std::time::Duration::from_millis(500)))
                .unwrap();
            loop {
                match go_chunked(&head[end..]) {
                    Ok(true) => break,
                    Err(e) => {
                        let _ = client.write_all(&plugin_500(e));
                        return;
                    }
                    Ok(false) => match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    },
                }
            }
            client.set_read_timeout(None).unwrap();
        }
        // Served whatever its size below 1 MiB: the big header is dropped
        // on the way, so the server behind answers as Go's would.
        let forwarded: Vec<u8> = if end > 8192 {
            text.split("\r\n")
                .filter(|l| l.len() < 4096)
                .collect::<Vec<_>>()
                .join("\r\n")
                .into_bytes()
        } else {
            head[..end].to_vec()
        };
        let Ok(mut up) = TcpStream::connect(upstream) else {
            return;
        };
        if up.write_all(&forwarded).is_err() || up.write_all(&head[end..]).is_err() {
            return;
        }
        let (mut c2, mut u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
        let back = thread::spawn(move || {
            let _ = std::io::copy(&mut u2, &mut c2);
            let _ = c2.shutdown(std::net::Shutdown::Write);
        });
        let _ = std::io::copy(&mut client, &mut up);
        let _ = up.shutdown(std::net::Shutdown::Write);
        let _ = back.join();
    }

    /// Listens on a free loopback port in front of `upstream`; the threads
    /// end with the test process.
    pub fn start(upstream: SocketAddr, name: &'static str) -> SocketAddr {
        let r = workloads::probe::get(upstream, "/config").unwrap();
        let mut cfg: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        cfg["server"] = name.into();
        let plugin = name == "roadrunner";
        let config = serde_json::to_vec(&cfg).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let config: &'static [u8] = Box::leak(config.into_boxed_slice());
        thread::spawn(move || {
            for c in listener.incoming().flatten() {
                thread::spawn(move || serve(c, upstream, config, plugin));
            }
        });
        addr
    }
}

/// A server whose core answers as RoadRunner's does (Go's net/http under
/// its http plugin, which answers a chunked body Go's reader refuses with
/// its own 500 and closes): `harness verify` marks the plugin's rows CORE
/// with the plugin's reason, the contract's and the conformance section's
/// alike, beside Go's four, and fails none of them; compare's record of the
/// contract lists all six as `known`.
#[test]
fn roadrunners_http_plugin_rows_are_reported_as_its_own_not_as_failures() {
    let server = event_loop();
    let standin = go_like::start(server.addr, "roadrunner");
    let out = std::process::Command::new(crate::util::harness_bin())
        .args([
            "verify",
            "--conformance",
            &format!("http://{standin}"),
            "--timeout",
            "2s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let plugin_rows = [
        "POST /echo, chunk size not hex → 400, closed",
        "POST /echo, chunk longer than its size → 400, closed",
        "/echo: chunk size not hex (zz) → 4xx, closed",
        "/echo: chunk size with a 0x prefix → 4xx, closed",
        "/echo: negative chunk size → 4xx, closed",
        "/echo: empty chunk-size line → 4xx, closed",
        "/echo: chunk data longer than its size → 4xx, closed",
    ];
    for row in plugin_rows {
        let line = text
            .lines()
            .find(|l| l.contains(row))
            .unwrap_or_else(|| panic!("no {row} line:\n{text}"));
        assert!(
            line.starts_with("CORE") && line.contains("http plugin"),
            "{line}"
        );
    }
    assert!(
        text.contains("0 failed, 6 known deviations of RoadRunner"),
        "{text}"
    );
    let verdicts = harness::lab::contract::check_all(standin, Duration::from_secs(10));
    let check = harness::lab::record::ContractCheck::from_verdicts(
        &verdicts,
        harness::catalog::deviations::core_of("roadrunner"),
    );
    assert!(check.failed.is_empty(), "{check:?}");
    assert_eq!(check.known.len(), 6, "{check:?}");
}

/// A server whose core answers as Go's net/http does: `harness verify`
/// marks exactly the four rows the catalog declares for Go net/http as the
/// core's (CORE, with the reason), fails none, exits 0; compare's record of
/// the same verdicts lists them as `known`, not `failed`.
#[test]
fn a_go_net_http_core_is_reported_as_its_known_deviations_not_as_failures() {
    let server = event_loop();
    let standin = go_like::start(server.addr, "frankenphp");
    let out = std::process::Command::new(crate::util::harness_bin())
        .args(["verify", &format!("http://{standin}"), "--timeout", "10s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let go = &harness::catalog::deviations::GO_NET_HTTP;
    for d in go.deviations {
        assert!(
            text.lines()
                .any(|l| l.starts_with("CORE") && l.contains(d.row) && l.contains(d.reason)),
            "{}: not reported as the core's\n{text}",
            d.row
        );
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with("CORE")).count(),
        4,
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("FAIL")), "{text}");
    assert!(
        text.contains("0 failed, 4 known deviations of Go net/http's core"),
        "{text}"
    );

    let verdicts = harness::lab::contract::check_all(standin, Duration::from_secs(10));
    let check = harness::lab::record::ContractCheck::from_verdicts(
        &verdicts,
        harness::catalog::deviations::core_of("frankenphp"),
    );
    assert!(check.failed.is_empty(), "{check:?}");
    assert_eq!(check.known.len(), 4, "{check:?}");
    // The same answers from a server with no core listed are failures.
    let plain = harness::lab::record::ContractCheck::from_verdicts(&verdicts, None);
    assert_eq!(plain.failed.len(), 4, "{plain:?}");
}
