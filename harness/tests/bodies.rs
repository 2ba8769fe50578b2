//! Requests with bodies against a real server (event-loop): `POST /echo`
//! framed by Content-Length and chunked, every answer verified byte for
//! byte against the body sent, on both I/O backends; a check expecting
//! other bytes fails every answer (the comparison is real); `harness run
//! --body-file` records the body in its JSON and text.

use std::time::Duration;

use harness::engine::{Body, Check, Request, Stop};
use serde_json::Value;
use testkit::ServerProcess;

use crate::util::{harness, plan_on, run, sibling_binary, stdout};

/// The event-loop server, without a database (`/echo` needs none).
fn server() -> ServerProcess {
    let bin = sibling_binary("event-loop");
    ServerProcess::start(
        bin.to_str().unwrap(),
        &["--mysql-url", "mysql://bench:bench@127.0.0.1:1/bench"],
    )
}

fn body(len: usize, chunked: bool) -> Body {
    Body {
        bytes: workloads::echo::pattern(len),
        content_type: "application/octet-stream".into(),
        chunked,
    }
}

fn echo_run(
    io: harness::engine::Io,
    server: &ServerProcess,
    body: &Body,
    check: Check,
) -> harness::engine::RunResult {
    let url = format!("http://{}/echo", server.addr);
    let authority = server.addr.to_string();
    let plan = plan_on(io, &url, |p| {
        p.request = Request::encode_with_body("POST", "/echo", &authority, &[], true, Some(body));
        p.check = check;
        p.connections = 4;
        p.stop = Stop::Count(200);
        p.timeout = Duration::from_secs(10);
    });
    run(&plan)
}

fn echoes_are_verified_byte_for_byte(io: harness::engine::Io) {
    let server = server();
    for (len, chunked) in [(11, false), (64 << 10, false), (100 << 10, true), (0, true)] {
        let b = body(len, chunked);
        let check = Check::for_body("POST", "/echo", Some(&b), true);
        assert!(matches!(&check, Check::Exact { status: 200, body } if body.len() == len));
        let r = echo_run(io, &server, &b, check);
        assert_eq!(
            (r.stats.ok, r.stats.failures.total()),
            (200, 0),
            "{len} bytes, chunked {chunked}: {:?}",
            r.stats.failures
        );
        assert_eq!(r.stats.body_bytes, 200 * len as u64);
        assert!(r.stats.bytes_sent >= 200 * len as u64);
    }
    // The same bytes but one: every answer fails, as a body mismatch.
    let b = body(4096, false);
    let mut other = b.bytes.clone();
    other[4000] ^= 1;
    let check = Check::Exact {
        status: 200,
        body: other.into(),
    };
    let r = echo_run(io, &server, &b, check);
    assert_eq!(r.stats.ok, 0);
    assert_eq!(r.stats.failures.body, 200, "{:?}", r.stats.failures);
}

crate::on_both_backends!(echoes_are_verified_byte_for_byte);

#[test]
fn a_body_over_the_contract_bound_expects_413() {
    let b = body(workloads::echo::MAX_BYTES + 1, false);
    assert_eq!(
        Check::for_body("POST", "/echo", Some(&b), true),
        Check::Status(413)
    );
    assert_eq!(
        Check::for_body("POST", "/echo", Some(&b), false),
        Check::Success
    );
    assert_eq!(
        Check::for_body("POST", "/hello", Some(&b), true),
        Check::Success,
        "a request the contract refuses is judged as one outside it, as before bodies"
    );
}

#[test]
fn run_with_a_body_file_records_the_body_in_json_and_text() {
    let server = server();
    let dir = crate::util::tmp("bodies");
    let file = dir.path().join("body.bin");
    std::fs::write(&file, workloads::echo::pattern(5000)).unwrap();
    let url = format!("http://{}/echo", server.addr);
    let file = file.to_str().unwrap();
    let out = harness(&[
        "run",
        &url,
        "--body-file",
        file,
        "--chunked",
        "-c",
        "2",
        "-n",
        "50",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    let value: Value = serde_json::from_str(&text).unwrap();
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("the document does not match run.schema.json: {e}\n{text}");
    }
    assert_eq!(value["target"]["method"], "POST", "a body makes it a POST");
    assert_eq!(value["target"]["body"]["bytes"], 5000);
    assert_eq!(value["target"]["body"]["framing"], "chunked");
    assert_eq!(value["requests"]["ok"], 50);
    assert_eq!(value["settings"]["check"], "exact");
    assert_eq!(value["settings"]["expected_body_bytes"], 5000);

    let out = harness(&[
        "run", &url, "-m", "post", "--body", "hello", "-n", "20", "-c", "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("POST {url} with a 5-byte body (Content-Length)\n")),
        "{text}"
    );
    assert!(text.contains("ok 20 (100.00%)"), "{text}");

    // A mix: GETs of /hello beside POSTs of /echo with the body, each path
    // judged by its own answer.
    let base = format!("http://{}", server.addr);
    let out = harness(&[
        "run",
        &base,
        "--path",
        "/hello:3",
        "--path",
        "POST /echo:1",
        "--body",
        "hello",
        "-c",
        "2",
        "-n",
        "400",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &value, "$") {
        panic!("the mix does not match run.schema.json: {e}\n{text}");
    }
    assert_eq!(value["requests"]["ok"], 400, "{text}");
    assert_eq!(value["target"]["path"], "/hello:3 POST /echo:1");
    let paths = value["paths"].as_array().unwrap();
    assert_eq!(
        (&paths[0]["method"], &paths[0]["body"]),
        (&Value::from("GET"), &Value::Null)
    );
    assert_eq!(paths[1]["label"], "POST /echo");
    assert_eq!(paths[1]["body"]["bytes"], 5);
    assert_eq!(paths[1]["requests"]["ok"], 100);

    // A body no request carries, and a body flag without a body: one-line errors.
    let out = harness(&["run", &url, "-m", "GET", "--body", "x", "-n", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the body goes with no request"), "{err}");
    let out = harness(&["run", &url, "--chunked", "-n", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--chunked and -T/--content-type describe a body"),
        "{err}"
    );
}
