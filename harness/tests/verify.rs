//! `harness verify`: a server outside the contract fails rows, and says why.

use std::process::Command;

use crate::util::{harness_bin, Behaviour, TestServer};

#[test]
fn verify_fails_the_rows_a_wrong_server_gets_wrong() {
    // Answers everything with 200 Hello World.
    let server = TestServer::start(Behaviour::Hello);
    let verdicts =
        harness::lab::contract::check_all(server.addr, std::time::Duration::from_secs(2));
    let get = |name: &str| {
        verdicts
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    assert!(get("GET /hello").result.is_ok(), "{:?}", get("GET /hello"));
    assert!(get("GET /").result.is_ok());
    let nope = get("GET /nope").result.clone().unwrap_err();
    assert!(nope.contains("status 200, expected 404"), "{nope}");
    let cpu = get("GET /cpu").result.clone().unwrap_err();
    assert!(cpu.contains("body"), "{cpu}");
    assert!(get("POST /hello").result.is_err());

    let out = Command::new(harness_bin())
        .args(["verify", &server.url("/"), "--timeout", "2s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PASS  GET /hello"), "{text}");
    assert!(text.contains("FAIL  GET /nope"), "{text}");
    assert!(text.contains("failed"), "{text}");
}

#[test]
fn verify_of_nothing_listening_is_an_error() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let out = Command::new(harness_bin())
        .args(["verify", &format!("http://{addr}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
}

#[test]
fn verify_conformance_prints_each_row_with_its_section_and_the_table() {
    // Answers every head with 200 Hello World: a 2xx to malformed requests.
    let server = TestServer::start(Behaviour::Hello);
    let out = Command::new(harness_bin())
        .args([
            "verify",
            "--conformance",
            &server.url("/"),
            "--timeout",
            "1s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a MUST row fails");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |fragment: &str| {
        text.lines()
            .find(|l| l.contains(fragment))
            .unwrap_or_else(|| panic!("no line with {fragment:?}:\n{text}"))
    };
    let no_host = line("HTTP/1.1 request without Host");
    assert!(
        no_host.starts_with("FAIL") && no_host.contains(" header fields "),
        "{no_host}"
    );
    assert!(
        no_host.contains("RFC 9112 §3.2 (Request Target) MUST")
            && no_host.ends_with("200 \"Hello World\"; expected 400"),
        "{no_host}"
    );
    let served = line("absolute-form target");
    assert!(served.starts_with("PASS"), "{served}");
    assert!(
        served.ends_with("200 \"Hello World\""),
        "says what it found: {served}"
    );
    let should = line("unknown method token (PURGE)");
    assert!(
        should.starts_with("WARN") && should.contains("SHOULD"),
        "{should}"
    );
    for group in [
        "request line",
        "header fields",
        "bodies",
        "connections",
        "all",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(group) && l.split_whitespace().count() >= 4),
            "no table line for {group}:\n{text}"
        );
    }
    assert!(text.contains("conformance rows:"), "{text}");

    let out = Command::new(harness_bin())
        .args(["verify", &server.url("/"), "--timeout", "1s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("conformance"), "not by default:\n{text}");
}

/// The WebSocket rows through `harness verify`'s own section, on the real
/// stacks: Node.js (`ws`) passes every one; php-fpm (a worker per
/// request) and nginx-static (static files) are reported as not serving
/// WebSocket with their /config's reason, `/ws` not upgraded, and that is
/// no failure.
#[test]
fn verify_runs_the_websocket_rows_or_says_why_a_server_cannot() {
    let env = harness::catalog::Env::discover(None);
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    let ctx = harness::catalog::StartCtx {
        env: &env,
        db: None,
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls: None,
        h2c: false,
        h3: false,
    };
    for name in ["node", "php-fpm", "nginx-static"] {
        let entry = harness::catalog::catalog()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap();
        if let harness::catalog::Availability::Missing { reason, .. } = entry.availability(&env) {
            assert!(crate::util::skip_without(&format!("{name}: {reason}")));
            continue;
        }
        let mut running = entry.start(&ctx).unwrap();
        let (text, failed) =
            harness::verify::websocket(running.addr, std::time::Duration::from_secs(10));
        running.stop();
        match name {
            "node" => {
                assert_eq!(failed, 0, "{text}");
                assert!(text.contains("9 WebSocket rows: 9 passed"), "{text}");
            }
            "php-fpm" => {
                assert_eq!(failed, 0, "{text}");
                assert!(
                    text.contains("NOT SERVED  php-fpm: a php-fpm worker serves one request"),
                    "{text}"
                );
                assert!(text.contains("not upgraded"), "{text}");
            }
            _ => {
                assert_eq!(failed, 0, "{text}");
                assert!(
                    text.contains("NOT SERVED  nginx-static: nginx-static serves static files"),
                    "{text}"
                );
            }
        }
    }
}

/// A server that switches to h2c with 101 and then holds the connection
/// open (as RoadRunner does, about 10 s): the 101 ends at its head, so the
/// "Upgrade: h2c" row passes on the 101 itself, in compare's pre-check
/// (the conformance rows at its 5 s) and in `harness verify --conformance`
/// alike (at 1 s, which keeps the whole section short). Read to the close instead, the row would wait out the timeout
/// and fail as silent: the server never closes while the test runs.
#[test]
fn a_101_that_holds_the_connection_passes_the_upgrade_row() {
    let server = TestServer::start(Behaviour::SwitchAndHold);
    let rows: Vec<_> = harness::lab::contract::conformance_rows()
        .into_iter()
        .filter(|r| r.name.starts_with("Upgrade: h2c"))
        .collect();
    assert_eq!(rows.len(), 1, "the Upgrade: h2c row");
    let verdicts =
        harness::lab::contract::check(server.addr, std::time::Duration::from_secs(5), rows);
    assert_eq!(verdicts[0].result, Ok(()), "{:?}", verdicts[0]);
    assert!(verdicts[0].found.contains("101"), "{:?}", verdicts[0]);

    let out = Command::new(harness_bin())
        .args([
            "verify",
            "--conformance",
            &server.url("/"),
            "--timeout",
            "1s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.contains("Upgrade: h2c"))
        .unwrap_or_else(|| panic!("no Upgrade: h2c row:\n{text}"));
    assert!(row.starts_with("PASS"), "{row}");
    assert!(row.contains("101"), "says what it found: {row}");
}
