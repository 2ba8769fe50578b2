//! The `harness` binary end to end: report formats, the JSON schema, exit
//! codes, help.

use std::process::Command;

use harness::report::json::Document;
use serde_json::Value;

use crate::util::{harness, harness_bin, stdout, Behaviour, TestServer};

#[test]
fn json_output_parses_round_trips_and_matches_the_schema() {
    let server = TestServer::start(Behaviour::Hello);
    let dir = std::env::temp_dir().join(format!("harness-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hgrm = dir.join("run.hgrm");
    let url = server.url("/hello");
    let out = harness(&[
        "run",
        &url,
        "-c",
        "4",
        "-n",
        "300",
        "--format",
        "json",
        "--hist",
        hgrm.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    // Silent when piped: no progress line on stderr.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let value: Value = serde_json::from_str(&text).expect("valid JSON");
    let schema: Value =
        serde_json::from_str(include_str!("../schema/run.schema.json")).expect("schema parses");
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("the document does not match run.schema.json: {e}\n{text}");
    }

    let doc: Document = serde_json::from_value(value.clone()).expect("typed document");
    assert_eq!(doc.schema, "harness.run/1");
    assert_eq!(doc.requests.total, 300);
    assert_eq!(doc.requests.ok, 300);
    assert_eq!(doc.status_codes.get("200"), Some(&300));
    assert_eq!(doc.settings.check, "exact");
    assert_eq!(doc.outcome.end, "count");
    assert!(!doc.outcome.latency_corrected);
    assert_eq!(doc.latency_us.count, 300);
    let h = doc.histogram.to_histogram().unwrap();
    assert_eq!(h.len(), 300);
    assert_eq!(h.value_at_quantile(0.99), doc.latency_us.p99);
    // Round trip: typed document → JSON → the same value.
    assert_eq!(serde_json::to_value(&doc).unwrap(), value);

    let dist = std::fs::read_to_string(&hgrm).unwrap();
    assert!(dist.contains("Percentile") && dist.contains("Total count    ="));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ab_format_has_the_sections_of_apachebench() {
    let server = TestServer::start(Behaviour::Hello);
    let url = server.url("/hello");
    let text = stdout(&harness(&[
        "run",
        &url,
        "-c",
        "5",
        "-n",
        "250",
        "--no-keepalive",
        "--format",
        "ab",
    ]));
    for line in [
        "Server Software:        test",
        "Server Hostname:        127.0.0.1",
        "Document Path:          /hello",
        "Document Length:        11 bytes",
        "Concurrency Level:      5",
        "Complete requests:      250",
        "Failed requests:        0",
        "HTML transferred:       2750 bytes",
        "Connection Times (ms)",
        "              min  mean[+/-sd] median   max",
        "Percentage of the requests served within a certain time (ms)",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    for prefix in [
        "Time taken for tests:   ",
        "Total transferred:      ",
        "Requests per second:    ",
        "Time per request:       ",
        "Transfer rate:          ",
        "Connect:    ",
        "Processing: ",
        "Waiting:    ",
        "Total:      ",
        "  50%  ",
        "  99%  ",
        " 100%  ",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(prefix)),
            "no line starting {prefix:?} in\n{text}"
        );
    }
    assert!(!text.contains("Keep-Alive requests"));
}

#[test]
fn ab_format_lists_failures_like_ab() {
    let server = TestServer::start(Behaviour::Status500);
    let url = server.url("/hello");
    let text = stdout(&harness(&[
        "run", &url, "-c", "2", "-n", "40", "--format", "ab",
    ]));
    assert!(text.contains("Failed requests:        40"), "{text}");
    assert!(
        text.contains("(Timeouts: 0, Status: 40, Content: 0)"),
        "{text}"
    );
    assert!(text.contains("Non-2xx responses:      40"), "{text}");
    assert!(text.contains("Keep-Alive requests:    40"), "{text}");
}

#[test]
fn text_csv_and_markdown_formats() {
    let server = TestServer::start(Behaviour::Hello);
    let url = server.url("/hello");
    let text = stdout(&harness(&["run", &url, "-c", "2", "-n", "50"]));
    assert!(text.contains("requests   50 in"), "{text}");
    assert!(text.contains("p99"), "{text}");
    assert!(text.contains("exact 11-byte body"), "{text}");

    let csv = stdout(&harness(&[
        "run", &url, "-c", "2", "-n", "50", "--format", "csv",
    ]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2);
    let header: Vec<&str> = lines[0].split(',').collect();
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(header.len(), row.len());
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(col("requests"), "50");
    assert_eq!(col("ok"), "50");

    let md = stdout(&harness(&[
        "run", &url, "-c", "2", "-n", "50", "--format", "markdown",
    ]));
    assert!(md.contains("| requests | ok |"), "{md}");
    assert!(md.contains("| total |"), "{md}");
}

#[test]
fn bad_input_is_an_error_with_context() {
    let out = harness(&["run", "ftp://127.0.0.1/", "-n", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad URL") && err.contains("https://"), "{err}");

    // TLS options on a plain URL are refused, not ignored; so is an
    // unreadable CA file.
    let out = harness(&["run", "http://127.0.0.1:1/", "--insecure", "-n", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("https://"));
    let out = harness(&[
        "run",
        "https://127.0.0.1:1/",
        "--cacert",
        "/nonexistent.pem",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read /nonexistent.pem"), "{err}");

    let out = harness(&["run", "http://127.0.0.1:1/", "-d", "ten"]);
    assert!(!out.status.success());

    // compare refuses WebSocket workloads it cannot run, in one line,
    // before it starts anything (over TLS it runs them: wss://).
    let out = harness(&[
        "compare",
        "--workloads",
        "hello,ws-echo",
        "--servers",
        "event-loop",
        "--load-tool=ab",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ws-echo") && err.contains("drop --load-tool") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn a_gone_server_exits_non_zero_after_its_report() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let out = harness(&["run", &format!("http://{addr}/hello"), "-d", "5s"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("server_gone"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused"), "{err}");
}

#[test]
fn help_teaches_with_examples() {
    let top = String::from_utf8(harness(&["--help"]).stdout).unwrap();
    assert!(
        top.contains("Examples:") && top.contains("harness verify"),
        "{top}"
    );
    let run = String::from_utf8(harness(&["run", "--help"]).stdout).unwrap();
    for word in [
        "--rate",
        "coordinated omission",
        "--no-keepalive",
        "--format",
        "Examples:",
    ] {
        assert!(run.contains(word), "run --help lacks {word}");
    }
}

/// A small JSON Schema validator: the keywords run.schema.json uses (type,
/// const, enum, properties, required, additionalProperties, items,
/// minItems, maxItems, minimum, maximum, $ref to #/$defs).
pub(crate) fn validate(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .ok_or(format!("unsupported $ref {r}"))?;
        return validate(root, &root["$defs"][name], v, at);
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type keyword")),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => false,
        });
        if !ok {
            return Err(format!("{at}: {v} is not of type {types:?}"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            return Err(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} not in {e:?}"));
        }
    }
    if let (Some(min), Some(x)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if x < min {
            return Err(format!("{at}: {x} < {min}"));
        }
    }
    if let (Some(max), Some(x)) = (schema.get("maximum").and_then(Value::as_f64), v.as_f64()) {
        if x > max {
            return Err(format!("{at}: {x} > {max}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{at}: missing required {r}"));
                }
            }
        }
        for (k, val) in obj {
            let path = format!("{at}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => validate(root, s, val, &path)?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => return Err(format!("{path}: not in the schema")),
                    Some(s @ Value::Object(_)) => validate(root, s, val, &path)?,
                    _ => {}
                },
            }
        }
        // Every schema property is documented by the code, too; one the
        // schema does not require (`paths`, of a mix only) may be absent.
        let required = |k: &str| match schema.get("required").and_then(Value::as_array) {
            Some(r) => r.iter().any(|x| x == k),
            None => true,
        };
        if let Some(p) = props {
            for k in p.keys() {
                if !obj.contains_key(k) && required(k) {
                    return Err(format!("{at}: schema property {k} is never emitted"));
                }
            }
        }
    }
    if let Some(arr) = v.as_array() {
        if let Some(n) = schema.get("minItems").and_then(Value::as_u64) {
            if (arr.len() as u64) < n {
                return Err(format!("{at}: fewer than {n} items"));
            }
        }
        if let Some(n) = schema.get("maxItems").and_then(Value::as_u64) {
            if (arr.len() as u64) > n {
                return Err(format!("{at}: more than {n} items"));
            }
        }
        if let Some(items) = schema.get("items") {
            for (i, item) in arr.iter().enumerate() {
                validate(root, items, item, &format!("{at}[{i}]"))?;
            }
        }
    }
    Ok(())
}

#[test]
fn the_schema_validator_rejects_what_it_should() {
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    let good = serde_json::json!({"count": 1, "min": 1, "mean": 1.0, "stdev": 0.0, "p50": 1,
        "p75": 1, "p90": 1, "p99": 1, "p99_9": 1, "p99_99": 1, "max": 1});
    let pct = &schema["$defs"]["percentiles"];
    validate(&schema, pct, &good, "$").unwrap();
    let mut extra = good.clone();
    extra["extra"] = 1.into();
    assert!(validate(&schema, pct, &extra, "$").is_err());
    let mut wrong = good.clone();
    wrong["p50"] = "1".into();
    assert!(validate(&schema, pct, &wrong, "$").is_err());
    let mut missing = good;
    missing.as_object_mut().unwrap().remove("max");
    assert!(validate(&schema, pct, &missing, "$").is_err());
}

#[test]
fn ctrl_c_stops_sending_and_prints_what_was_measured() {
    let server = TestServer::start(Behaviour::Hello);
    let child = Command::new(harness_bin())
        .args([
            "run",
            &server.url("/hello"),
            "-c",
            "4",
            "-d",
            "60s",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its handler is installed before the run starts: once the server has
    // answered, SIGINT reaches the handler, not the default action.
    testkit::observe::wait_for("the run to send requests", || server.requests() > 0);
    let t0 = std::time::Instant::now();
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    // Long before the 60 s: the interrupt ended it (the drain is 1 s; the
    // rest is slack for a loaded machine).
    let limit = std::time::Duration::from_secs(30);
    assert!(t0.elapsed() < limit, "{:?}", t0.elapsed());
    let doc: Document = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(doc.outcome.interrupted);
    assert_eq!(doc.outcome.end, "interrupted");
    assert!(doc.requests.ok > 0);
    assert!(
        doc.outcome.duration_s < limit.as_secs_f64(),
        "{}",
        doc.outcome.duration_s
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
}

/// Where RoadRunner, FrankenPHP or Swoole cannot run (no registry serves
/// their binaries or module here), `harness servers` — and compare's skip
/// lines, which print the same reason — says what was tried for each way
/// to run it: the host's binary or module, and the official image.
#[test]
fn a_third_party_server_that_cannot_run_says_what_each_way_lacks() {
    let env = harness::catalog::Env::discover(None);
    let out = crate::util::harness(&["servers"]);
    let text = crate::util::stdout(&out);
    for (name, host_way) in [
        ("roadrunner", "binary: "),
        ("frankenphp", "binary: "),
        ("swoole", "module: "),
    ] {
        let entry = harness::catalog::catalog()
            .into_iter()
            .find(|e| e.name == name)
            .unwrap();
        match entry.availability(&env) {
            harness::catalog::Availability::Ready(_) => continue,
            harness::catalog::Availability::Missing { reason, .. } => {
                assert!(
                    reason.starts_with(host_way) && reason.contains("; image: "),
                    "{name}: {reason}"
                );
                let line = text
                    .lines()
                    .find(|l| l.starts_with(name))
                    .unwrap_or_else(|| panic!("no {name} line:\n{text}"));
                assert!(line.contains(&reason), "{line}");
            }
        }
    }
}

/// What scripts/install-deps asked a registry for and was refused (`go
/// install` of rr, `composer install` of compose/roadrunner) is kept in its
/// cache dir, one line each; `harness servers` prints each line once under
/// its own heading, and RoadRunner's skip line says why rr is missing.
/// FrankenPHP's says precisely why it is compose-only here.
#[test]
fn harness_servers_prints_what_install_deps_was_refused() {
    let cache = crate::util::tmp("install-refusals");
    let dir = cache.path().join("benchlab");
    std::fs::create_dir_all(&dir).unwrap();
    let go = "go install github.com/roadrunner-server/roadrunner/v2025/cmd/rr@v2025.1.5: \
              https://proxy.golang.org answered 403 Forbidden: This module version is not available. (0 s)";
    let composer =
        "composer install in compose/roadrunner: The \"https://repo.packagist.org/packages.json\" \
                    file could not be downloaded (1 s)";
    std::fs::write(dir.join("roadrunner-install.txt"), format!("{go}\n")).unwrap();
    std::fs::write(dir.join("roadrunner-vendor.txt"), format!("{composer}\n")).unwrap();
    let out = std::process::Command::new(crate::util::harness_bin())
        .arg("servers")
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    let text = crate::util::stdout(&out);
    let (_, refused) = text
        .split_once("Asked by scripts/install-deps and refused:\n")
        .unwrap_or_else(|| panic!("no refusals heading:\n{text}"));
    let lines: Vec<&str> = refused.lines().take(2).map(str::trim).collect();
    assert_eq!(lines, [go, composer], "{text}");
    if harness::catalog::find_program(&["rr"]).is_none() {
        let line = text.lines().find(|l| l.starts_with("roadrunner")).unwrap();
        assert!(
            line.contains(&format!("(scripts/install-deps: {go})")),
            "{line}"
        );
    }
    if harness::catalog::find_program(&["frankenphp"]).is_none() {
        let line = text.lines().find(|l| l.starts_with("frankenphp")).unwrap();
        assert!(
            line.contains("refuses github.com/dunglas/frankenphp (403")
                && line.contains("libphp8.2-embed"),
            "{line}"
        );
    }
}

#[test]
fn thresholds_print_pass_or_fail_enter_the_json_and_exit_99_on_a_failure() {
    let server = TestServer::start(Behaviour::Hello);
    let url = server.url("/hello");
    // Bounds no run can miss and none can meet, so the verdicts are states.
    let pass = harness(&[
        "run",
        &url,
        "-c",
        "2",
        "-n",
        "200",
        "--threshold",
        "p(99)<60s",
        "--threshold",
        "rate<=0",
    ]);
    assert_eq!(pass.status.code(), Some(0));
    let text = stdout(&pass);
    assert!(
        text.contains("Thresholds:")
            && text.contains("PASS p(99)<60s")
            && text.contains("PASS rate<=0"),
        "{text}"
    );
    let fail = harness(&[
        "run",
        &url,
        "-c",
        "2",
        "-n",
        "200",
        "--format",
        "json",
        "--threshold",
        "p(99)<60s",
        "--threshold",
        "rps>1e12",
    ]);
    assert_eq!(fail.status.code(), Some(99));
    let value: Value =
        serde_json::from_str(&String::from_utf8_lossy(&fail.stdout)).expect("valid JSON");
    let schema: Value = serde_json::from_str(include_str!("../schema/run.schema.json")).unwrap();
    if let Err(e) = validate(&schema, &schema, &value, "$") {
        panic!("the document does not match run.schema.json: {e}");
    }
    let verdicts = value["thresholds"]
        .as_array()
        .expect("thresholds in the JSON");
    assert_eq!(verdicts.len(), 2);
    assert_eq!(verdicts[0]["threshold"], "p(99)<60s");
    assert_eq!(verdicts[0]["pass"], true);
    assert_eq!(verdicts[1]["pass"], false);
    assert!(verdicts[1]["observed"].as_f64().unwrap() > 0.0);
    let doc: Document = serde_json::from_value(value.clone()).expect("typed document");
    assert_eq!(serde_json::to_value(&doc).unwrap(), value);
}

#[test]
fn a_bad_threshold_is_one_line_and_exit_2() {
    let out = harness(&["run", "http://127.0.0.1:1/hello", "--threshold", "p99<20ms"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains("bad threshold \"p99<20ms\"") && first.contains("p(99)<20ms"),
        "{err}"
    );
}
