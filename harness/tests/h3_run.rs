//! The engine over QUIC (`harness run --h3`) against real servers over
//! real UDP sockets: the event loop's `--h3` port (quinn + h3) with a mix
//! whose paths have different exact bodies (a response handed to the
//! wrong stream fails its check), the CLI's JSON against its schema, and
//! Caddy (`caddy-static`: quic-go). Bad input, each one line: `--h3` with
//! http://, a port with no QUIC listener, a certificate not trusted.

use harness::engine::{Framing, Io, TlsPlan};
use labcert::LabCert;
use serde_json::Value;

use crate::util::{
    caddy_static_over_tls, event_loop_h3, harness, run, sibling_binary, stderr_of as stderr,
    stdout, two_path_plan,
};

#[test]
fn h3_on_the_event_loop_verifies_every_stream_of_a_mix() {
    let lab = LabCert::new().unwrap();
    let server = event_loop_h3(&lab);
    let url = format!("https://{}", server.addr);
    for streams in [1, 32] {
        let mut p = two_path_plan(Io::Epoll, &url, Framing::H3(streams), 3_000);
        let mut t = TlsPlan::new("127.0.0.1");
        t.trust = TlsPlan::cas_from_file(&lab.ca_path()).unwrap();
        p.transport = harness::engine::TransportPlan::Tls(t);
        p.threads = 2;
        let r = run(&p);
        let s = &r.stats;
        assert_eq!(s.ok, 3_000, "{streams}: {:?} {:?}", s.failures, r.message);
        assert_eq!(s.failures.total(), 0, "{streams}");
        assert!(s.paths.iter().all(|p| p.ok > 1_000), "{streams}");
        // Multiplexed: the plan's connections, each one handshake.
        assert_eq!(s.connections, 4, "{streams}");
        assert_eq!(s.handshakes_full, 4, "{streams}");
        let tls = s.tls.as_ref().expect("a handshake completed");
        assert_eq!(tls.alpn.as_deref(), Some("h3"));
        let quic = s.quic.expect("QUIC's counts");
        assert!(quic.sent_packets > 0, "{quic:?}");
    }
}

#[test]
fn run_h3_reports_its_counts_in_json_that_matches_the_schema() {
    let lab = LabCert::new().unwrap();
    let server = event_loop_h3(&lab);
    let url = format!("https://{}/hello", server.addr);
    let ca = lab.ca_path();
    let out = harness(&[
        "run",
        "--h3",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "-c",
        "3",
        "--streams",
        "10",
        "--threads",
        "2",
        "-n",
        "2000",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["requests"]["ok"], 2000, "{json}");
    assert_eq!(v["settings"]["protocol"], "h3", "{json}");
    assert_eq!(v["settings"]["streams"], 10, "{json}");
    assert_eq!(v["connections"]["opened"], 3, "{json}");
    assert_eq!(v["tls"]["alpn"], "h3", "{json}");
    assert_eq!(v["tls"]["handshakes_full"], 3, "{json}");
    assert!(v["quic"]["sent_packets"].as_u64().unwrap() > 0, "{json}");
    assert!(v["quic"]["lost_packets"].is_u64(), "{json}");
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = crate::cli::validate(&schema, &schema, &v, "$") {
        panic!("the document does not match run.schema.json: {e}\n{json}");
    }
}

#[test]
fn run_h3_refuses_bad_input_in_one_line() {
    let lab = LabCert::new().unwrap();
    let ca = lab.ca_path();
    let ca = ca.to_str().unwrap();

    // --h3 with http://: refused before anything is sent (usage: exit 2,
    // or 1 as the rest of run's refusals).
    let out = harness(&["run", "--h3", "http://127.0.0.1:9/hello", "-n", "1"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("use an https:// URL"), "{err}");

    // A TLS server with no UDP listener: QUIC gets no answer.
    let bin = sibling_binary("event-loop");
    let (c, k) = (lab.cert_path(), lab.key_path());
    let tcp_only = testkit::ServerProcess::start(
        bin.to_str().unwrap(),
        &[
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ],
    );
    let url = format!("https://{}/hello", tcp_only.addr);
    let out = harness(&["run", "--h3", &url, "--cacert", ca, "-c", "2", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("no QUIC answer from {} within 2 s", tcp_only.addr)),
        "{err}"
    );

    // A certificate this client does not trust (the public CAs only).
    let server = event_loop_h3(&lab);
    let url = format!("https://{}/hello", server.addr);
    let out = harness(&["run", "--h3", &url, "-c", "1", "-n", "20"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("certificate was refused"), "{err}");
    assert!(err.contains("--cacert"), "{err}");
}

/// Caddy from the catalog over the lab's certificate: every request over
/// h3 answered and verified, by quic-go.
#[test]
fn run_h3_loads_caddy_static() {
    let Some((mut running, tls, _lab)) = caddy_static_over_tls() else {
        return;
    };
    let url = format!("https://{}/hello", running.addr);
    let out = harness(&[
        "run",
        "--h3",
        &url,
        "--cacert",
        tls.ca.to_str().unwrap(),
        "-c",
        "2",
        "--streams",
        "8",
        "-n",
        "1000",
        "--format",
        "json",
    ]);
    running.stop();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["requests"]["ok"], 1000, "{json}");
    assert_eq!(v["connections"]["opened"], 2, "{json}");
    assert_eq!(v["tls"]["alpn"], "h3", "{json}");
}

/// A body of 1 MiB (the contract's largest echo: more than one flight,
/// written as the stream's credit allows) comes back byte for byte, and a
/// HEAD's Content-Length, which announces a GET's body, is not a length
/// failure.
#[test]
fn run_h3_echoes_a_mebibyte_and_answers_head() {
    let lab = LabCert::new().unwrap();
    let server = event_loop_h3(&lab);
    let ca = lab.ca_path();
    let ca = ca.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    let bytes: Vec<u8> = (0..1_048_576u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&body, bytes).unwrap();
    let echo = format!("https://{}/echo", server.addr);
    let out = harness(&[
        "run",
        "--h3",
        &echo,
        "--cacert",
        ca,
        "-c",
        "2",
        "--streams",
        "2",
        "-n",
        "6",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["requests"]["ok"], 6, "{json}");

    let hello = format!("https://{}/hello", server.addr);
    let out = harness(&[
        "run", "--h3", &hello, "--cacert", ca, "-c", "1", "-n", "50", "-m", "HEAD", "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["requests"]["ok"], 50, "{json}");
}

/// An open loop over h3 (`--rate`): each request leaves at its time on a
/// connection's free stream, and every one is answered and verified.
#[test]
fn run_h3_paces_an_open_loop() {
    let lab = LabCert::new().unwrap();
    let server = event_loop_h3(&lab);
    let url = format!("https://{}/hello", server.addr);
    let ca = lab.ca_path();
    let out = harness(&[
        "run",
        "--h3",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "-c",
        "4",
        "--streams",
        "4",
        "--rate",
        "1000",
        "-n",
        "500",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json = stdout(&out);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["requests"]["ok"], 500, "{json}");
    assert_eq!(v["connections"]["opened"], 4, "{json}");
}
