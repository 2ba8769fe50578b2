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
