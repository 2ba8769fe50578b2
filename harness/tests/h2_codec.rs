//! The engine's HTTP/2 codec (harness::engine::h2) over a real blocking
//! TcpStream against real servers: nginx (h2c by prior knowledge, the
//! catalog's own configuration) and the event-loop server (h2c on its one
//! port), hundreds of requests with 10 and 100 streams in flight, every
//! response's status, Content-Length, Content-Type and body verified; and
//! nginx's GOAWAY after its keepalive_requests reported with its code.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harness::engine::h2::{Config, Event, H2Client, Response, Template};

use crate::util::{own_session, skip_without};

/// What one connection saw.
#[derive(Debug, Default)]
struct Seen {
    responses: Vec<Response>,
    settings: Option<u32>,
    goaway: Option<(u32, u32)>,
    resets: Vec<(u32, u32)>,
    most_in_flight: usize,
}

/// Sends `total` requests (templates in turn) on one connection, as many
/// in flight as the codec allows, until all are answered, or the server
/// sends GOAWAY and closes.
fn drive(addr: SocketAddr, templates: Vec<Template>, total: usize, streams: u32) -> Seen {
    let n = templates.len();
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut c = H2Client::new(
        templates,
        Config {
            max_streams: streams,
            ..Config::default()
        },
    );
    let mut out = Vec::new();
    c.opening(&mut out);
    let mut seen = Seen::default();
    let mut sent = 0;
    let mut buf = vec![0u8; 64 << 10];
    let mut events = Vec::new();
    loop {
        while sent < total && c.can_open() && seen.goaway.is_none() {
            c.encode(sent % n, &mut out).unwrap();
            sent += 1;
        }
        seen.most_in_flight = seen.most_in_flight.max(c.in_flight());
        if !out.is_empty() {
            sock.write_all(&out).unwrap();
            out.clear();
        }
        let done = seen.responses.len() + seen.resets.len();
        if done == total || (seen.goaway.is_some() && c.in_flight() == 0) {
            return seen;
        }
        let got = sock.read(&mut buf).unwrap();
        if got == 0 {
            assert!(seen.goaway.is_some(), "closed without GOAWAY: {seen:?}");
            return seen;
        }
        c.feed(&buf[..got], &mut out, |e| events.push(e)).unwrap();
        for e in events.drain(..) {
            match e {
                Event::Response(r) => seen.responses.push(r),
                Event::Settings {
                    max_concurrent_streams,
                } => seen.settings = Some(max_concurrent_streams),
                Event::GoAway { last_stream, code } => seen.goaway = Some((last_stream, code)),
                Event::Reset { stream, code, .. } => seen.resets.push((stream, code)),
            }
        }
    }
}

fn hello(authority: &str, path: &str) -> Template {
    let mut t = Template::new("GET", "http", authority, path, b"", None);
    t.expected_body = Some(b"Hello World".to_vec());
    t.expected_content_type = Some(b"text/plain".to_vec());
    t
}

fn assert_verified(seen: &Seen, templates: &[Template], total: usize) {
    assert_eq!(seen.responses.len(), total, "{seen:?}");
    assert!(seen.resets.is_empty() && seen.goaway.is_none(), "{seen:?}");
    for r in &seen.responses {
        let want = templates[r.template].expected_body.as_ref().unwrap();
        assert_eq!(
            (r.status, r.content_length, r.body_len),
            (200, Some(want.len() as u64), want.len() as u64),
            "{r:?}"
        );
        assert!(r.body_ok && r.content_type_ok, "{r:?}");
    }
}

/// nginx with the catalog's h2c configuration, stopped on drop.
pub(crate) struct Nginx {
    child: Child,
    pub(crate) h2c: SocketAddr,
    pub(crate) h1: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SAFETY: our own child, by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn nginx(edit: impl Fn(String) -> String) -> Option<Nginx> {
    let Some(bin) = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        skip_without("nginx is not installed (apt-get install nginx-light)");
        return None;
    };
    let dir = crate::util::tmp("h2-nginx");
    let prefix = dir.path().to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.path().join("tmp")).unwrap();
    let (h1, h2c) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let conf = harness::catalog::nginx_static::config_h2c(&prefix, &h1, &h2c, 1, "nginx");
    assert!(conf.contains("h2c on 127.0.0.1:"), "its /config says so");
    std::fs::write(dir.path().join("nginx.conf"), edit(conf)).unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(["-p", &prefix, "-c", &format!("{prefix}/nginx.conf")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    own_session(&mut cmd);
    let server = Nginx {
        child: cmd.spawn().unwrap(),
        h2c: h2c.parse().unwrap(),
        h1: h1.parse().unwrap(),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(server.h2c).is_err() || TcpStream::connect(server.h1).is_err() {
        assert!(Instant::now() < deadline, "nginx did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

#[test]
fn the_codec_verifies_every_response_from_nginx_h2c() {
    let Some(server) = nginx(|c| c) else { return };
    let authority = server.h2c.to_string();
    let templates = vec![hello(&authority, "/hello"), hello(&authority, "/")];
    for streams in [10, 100] {
        let seen = drive(server.h2c, templates.clone(), 400, streams);
        assert_verified(&seen, &templates, 400);
        assert_eq!(
            seen.settings,
            Some(128),
            "nginx's http2_max_concurrent_streams"
        );
        assert_eq!(
            seen.most_in_flight, streams as usize,
            "the codec filled its streams"
        );
    }
}

#[test]
fn nginx_goaway_after_its_keepalive_requests_is_reported_with_its_code() {
    let Some(server) =
        nginx(|c| c.replace("keepalive_requests 1000000;", "keepalive_requests 50;"))
    else {
        return;
    };
    let authority = server.h2c.to_string();
    let seen = drive(server.h2c, vec![hello(&authority, "/hello")], 200, 20);
    let (last, code) = seen.goaway.expect("GOAWAY after 50 requests");
    assert_eq!(code, 0, "NO_ERROR");
    assert_eq!(last, 99, "the 50th stream");
    assert_eq!(seen.responses.len(), 50, "every stream up to it answered");
    assert!(seen.responses.iter().all(|r| r.body_ok && r.stream <= last));
    // The streams in flight above it: refused, never answered.
    assert!(
        seen.resets
            .iter()
            .all(|&(s, code)| s > last && code == harness::engine::h2::REFUSED_STREAM),
        "{seen:?}"
    );
}

#[test]
fn the_codec_sends_bodies_under_flow_control_to_the_event_loop() {
    let bin = crate::util::sibling_binary("event-loop");
    let server = testkit::process::ServerProcess::start(bin.to_str().unwrap(), &[]);
    let authority = server.addr.to_string();
    let echo = |len: usize| {
        let body = workloads::echo::pattern(len);
        let mut t = Template::new("POST", "http", &authority, "/echo", &body, None);
        t.expected_body = Some(body);
        t.expected_content_type = Some(b"application/octet-stream".to_vec());
        t
    };
    let mut cpu = Template::new("GET", "http", &authority, "/cpu?n=10", b"", None);
    cpu.expected_body = Some(workloads::format_sum(workloads::sqrt_sum(10)).into_bytes());
    cpu.expected_content_type = Some(b"text/plain".to_vec());
    // 100 KiB bodies exceed hyper's initial stream window (64 KiB): the
    // rest goes as its WINDOW_UPDATEs come.
    let templates = vec![
        hello(&authority, "/hello"),
        echo(4096),
        echo(100 << 10),
        cpu,
    ];
    for streams in [10, 100] {
        let seen = drive(server.addr, templates.clone(), 300, streams);
        assert_verified(&seen, &templates, 300);
        assert_eq!(seen.settings, Some(200), "hyper's max_concurrent_streams");
    }
}
