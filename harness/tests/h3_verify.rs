//! `harness verify --h3` against real servers over real UDP sockets: the
//! event loop's `--h3` port (quinn + h3), and Caddy (`caddy-static`:
//! Go's net/http and quic-go) over HTTP/1.1, h2 and h3. Bad input: a port
//! with no QUIC listener, a certificate not trusted, an http:// target,
//! each one line and exit 1. No database runs here: the /db and /work rows
//! fail, and only they.

use harness::catalog::{self, Availability};

use crate::util::{
    caddy_static_over_tls, event_loop_h3, harness, skip_without, stderr_of as stderr,
};

/// What a verify printed, whatever its exit (the /db rows fail here, and
/// caddy-static serves only /hello).
fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn verify_h3_passes_the_event_loops_udp_port() {
    let lab = labcert::LabCert::new().unwrap();
    let server = event_loop_h3(&lab);
    let url = format!("https://{}", server.addr);
    let ca = lab.ca_path();
    let out = harness(&["verify", "--h3", &url, "--cacert", ca.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(text.contains("over HTTP/3 (QUIC, udp"), "{text}");
    let fails: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    for f in &fails {
        assert!(f.contains("/db") || f.contains("/work"), "{f}\n{text}");
    }
    for row in [
        "PASS  h3 GET /hello",
        "PASS  h3 HEAD /hello",
        "PASS  h3 GET /nope",
        "PASS  h3 GET /config",
        "PASS  h3 POST /echo (1048576 bytes)",
        "PASS  h3 POST /echo (1048577 bytes)",
        "PASS  h3 100 streams in flight",
    ] {
        assert!(text.contains(row), "{row}:\n{text}");
    }
}

#[test]
fn verify_h3_refuses_bad_input_in_one_line() {
    let lab = labcert::LabCert::new().unwrap();
    let ca = lab.ca_path();
    // A TLS server with no UDP listener: QUIC gets no answer.
    let bin = crate::util::sibling_binary("event-loop");
    let (c, k) = (lab.cert_path(), lab.key_path());
    let tcp_only = testkit::process::ServerProcess::start(
        bin.to_str().unwrap(),
        &[
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ],
    );
    let url = format!("https://{}", tcp_only.addr);
    let out = harness(&["verify", "--h3", &url, "--cacert", ca.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("no QUIC answer from {} within 2 s", tcp_only.addr)),
        "{err}"
    );

    // A certificate this client does not trust (the public CAs only).
    let server = event_loop_h3(&lab);
    let url = format!("https://{}", server.addr);
    let out = harness(&["verify", "--h3", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("refused"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // --h3 with http://.
    let out = harness(&["verify", "--h3", &format!("http://{}", server.addr)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("give an https:// target"), "{err}");
}

/// Caddy from the catalog, over TLS with the lab's certificate: its
/// `/hello` over HTTP/1.1, h2 and h3, its `/config` naming the UDP port.
#[test]
fn caddy_static_answers_hello_over_h1_h2_and_h3() {
    let Some((mut running, tls, _lab)) = caddy_static_over_tls() else {
        return;
    };
    let url = format!("https://{}", running.addr);
    let ca = tls.ca.to_str().unwrap();
    let h1 = stdout(&harness(&["verify", &url, "--cacert", ca]));
    assert!(h1.contains("PASS  GET /hello"), "{h1}");
    let h2 = stdout(&harness(&["verify", "--h2", &url, "--cacert", ca]));
    assert!(h2.contains("PASS  h2 GET /hello"), "{h2}");
    assert!(h2.contains("PASS  h2 HEAD /hello"), "{h2}");
    let h3 = stdout(&harness(&["verify", "--h3", &url, "--cacert", ca]));
    assert!(h3.contains("PASS  h3 GET /hello"), "{h3}");
    assert!(h3.contains("PASS  h3 HEAD /hello"), "{h3}");
    let config = running
        .get("/config", std::time::Duration::from_secs(5))
        .unwrap();
    let config = String::from_utf8_lossy(&config.body).into_owned();
    assert!(
        config.contains(&format!("h3 on udp {}", running.addr)),
        "{config}"
    );
    assert!(config.contains("caddy v2."), "{config}");
    running.stop();
}

/// Caddy's conformance row (in the clear, as the conformance section runs
/// anywhere): its /config names `caddy-static`, so verify reads the rows
/// Caddy's core is known to fail (deviations.rs, `CADDY`) as CORE, among
/// them the malformed request line that waits for the h2c preface's 24
/// bytes, which Go's own default answers with a bare 400.
#[test]
fn caddy_static_conformance_reads_as_caddys_core() {
    let entry = catalog::catalog()
        .into_iter()
        .find(|e| e.name == "caddy-static")
        .expect("caddy-static is in the catalog");
    let env = catalog::Env::discover(None);
    if let Availability::Missing { reason, fix } = entry.availability(&env) {
        if skip_without(&format!("caddy-static: {reason} ({fix})")) {
            return;
        }
    }
    let interrupt = std::sync::atomic::AtomicBool::new(false);
    let ctx = catalog::StartCtx {
        env: &env,
        db: None,
        interrupt: &interrupt,
        php_jit: Default::default(),
        tls: None,
        h2c: false,
        h3: false,
    };
    let mut running = entry.start(&ctx).expect("caddy-static starts");
    let url = format!("http://{}", running.addr);
    let out = harness(&["verify", "--conformance", "--timeout", "3s", &url]);
    let text = stdout(&out);
    running.stop();
    assert!(text.contains("built on Caddy v2.11"), "{text}");
    for row in [
        "malformed request line → 400, closed",
        "malformed header line → 400, closed",
        "unknown HTTP version → 400 or 505, closed",
        "header over 8 KiB → 431, closed",
        "Content-Length with Transfer-Encoding → one answer, closed",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(row))
            .unwrap_or_else(|| panic!("{row} missing:\n{text}"));
        assert!(line.starts_with("CORE"), "{line}\n{text}");
    }
}
