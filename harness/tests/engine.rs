//! The engine in-process against the misbehaving test servers: counts,
//! failure classes, stop conditions, latency and pacing.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use harness::engine::{self, Control, End, Pace, Request, Stop};
use harness::stats::Percentiles;

use crate::util::{plan, run, Behaviour, TestServer};

#[test]
fn count_is_exact_with_keepalive() {
    let server = TestServer::start(Behaviour::Hello);
    let p = plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(10_000);
        p.connections = 32;
    });
    let r = run(&p);
    assert_eq!(r.end, End::Count);
    assert_eq!(r.stats.requests(), 10_000);
    assert_eq!(r.stats.ok, 10_000, "{:?}", r.stats.failures);
    assert_eq!(r.stats.latency_us.len(), 10_000);
    // No overshoot: the server saw exactly as many requests.
    assert_eq!(server.requests(), 10_000);
    assert_eq!(server.connections.load(Ordering::Relaxed), 32);
    assert_eq!(r.stats.connections, 32);
    assert_eq!(r.stats.aborted, 0);
    assert_eq!(
        r.stats.status.seen().collect::<Vec<_>>(),
        vec![(200, 10_000)]
    );
    assert_eq!(r.stats.body_bytes, 110_000);
    assert_eq!(r.stats.server_software.as_deref(), Some("test"));
    assert_eq!(r.stats.document_length, Some(11));
}

#[test]
fn count_is_exact_with_a_connection_per_request() {
    let server = TestServer::start(Behaviour::Hello);
    let p = plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(1_000);
        p.connections = 10;
        p.keepalive = false;
    });
    let r = run(&p);
    assert_eq!(r.stats.ok, 1_000, "{:?}", r.stats.failures);
    assert_eq!(server.requests(), 1_000);
    assert_eq!(server.connections.load(Ordering::Relaxed), 1_000);
    assert_eq!(r.stats.connections, 1_000);
    assert_eq!(r.stats.connect_us.len(), 1_000);
    assert_eq!(r.stats.keepalive_responses, 0);
}

#[test]
fn fewer_requests_than_connections() {
    let server = TestServer::start(Behaviour::Hello);
    let p = plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(7);
        p.connections = 50;
    });
    let r = run(&p);
    assert_eq!((r.stats.ok, server.requests()), (7, 7));
}

#[test]
fn chunked_responses_are_read_and_verified() {
    let server = TestServer::start(Behaviour::Chunked);
    let r = run(&plan(&server.url("/hello"), |p| p.stop = Stop::Count(500)));
    assert_eq!(r.stats.ok, 500, "{:?}", r.stats.failures);
    assert_eq!(r.stats.body_bytes, 500 * 11);
}

#[test]
fn head_requests_read_no_body() {
    let server = TestServer::start(Behaviour::Hello);
    let mut p = plan(&server.url("/hello"), |p| p.stop = Stop::Count(200));
    p.request = Request::encode("HEAD", "/hello", "t", &[], true);
    p.check = harness::engine::Check::for_request("HEAD", "/hello", true);
    let r = run(&p);
    assert_eq!(r.stats.ok, 200, "{:?}", r.stats.failures);
    assert_eq!(r.stats.body_bytes, 0);
}

#[test]
fn a_server_closing_early_is_a_receive_failure() {
    let server = TestServer::start(Behaviour::CloseEarly);
    let r = run(&plan(&server.url("/hello"), |p| p.stop = Stop::Count(50)));
    assert_eq!(r.stats.requests(), 50);
    assert_eq!(r.stats.failures.receive, 50, "{:?}", r.stats.failures);
    assert_eq!(r.stats.ok, 0);
}

#[test]
fn a_wrong_content_length_is_a_length_failure() {
    let server = TestServer::start(Behaviour::WrongLength);
    // Without the contract's body to compare with: the announced length alone.
    let r = run(&plan(&server.url("/anything"), |p| {
        p.stop = Stop::Count(50)
    }));
    assert_eq!(r.stats.failures.length, 50, "{:?}", r.stats.failures);
    assert_eq!(r.stats.requests(), 50);
}

#[test]
fn status_500_is_counted_apart_and_listed_by_status() {
    let server = TestServer::start(Behaviour::Status500);
    for path in ["/hello", "/not-a-contract-path"] {
        let r = run(&plan(&server.url(path), |p| p.stop = Stop::Count(100)));
        assert_eq!(
            r.stats.failures.status, 100,
            "{path}: {:?}",
            r.stats.failures
        );
        assert_eq!(r.stats.failures.total(), 100);
        assert_eq!(r.stats.responses, 100);
        assert_eq!(r.stats.status.non_2xx(), 100);
        assert_eq!(r.stats.status.seen().collect::<Vec<_>>(), vec![(500, 100)]);
        // Failed requests are not in the latency histogram.
        assert_eq!(r.stats.latency_us.len(), 0);
    }
}

#[test]
fn a_db_error_answered_with_200_is_a_failure() {
    let server = TestServer::start(Behaviour::DbError);
    let r = run(&plan(&server.url("/work"), |p| p.stop = Stop::Count(100)));
    assert_eq!(r.stats.ok, 0);
    assert_eq!(r.stats.failures.length + r.stats.failures.body, 100);
    assert_eq!(r.ok_per_s(), 0.0);
    // --no-verify: only the status class.
    let mut p = plan(&server.url("/work"), |p| p.stop = Stop::Count(100));
    p.check = harness::engine::Check::for_request("GET", "/work", false);
    assert_eq!(run(&p).stats.ok, 100);
}

#[test]
fn a_stalled_server_times_out() {
    let server = TestServer::start(Behaviour::Stall);
    let t0 = Instant::now();
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(6);
        p.connections = 3;
        p.timeout = Duration::from_millis(300);
    }));
    assert_eq!(r.stats.failures.timeout, 6, "{:?}", r.stats.failures);
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[test]
fn duration_is_honoured() {
    let server = TestServer::start(Behaviour::Hello);
    let t0 = Instant::now();
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(1));
    }));
    let wall = t0.elapsed();
    assert_eq!(r.end, End::Duration);
    assert!(
        r.duration >= Duration::from_millis(990) && r.duration <= Duration::from_millis(1100),
        "{:?}",
        r.duration
    );
    assert!(wall < Duration::from_millis(1500), "{wall:?}");
    assert!(r.stats.ok > 100);
    // The time series covers the run and adds up.
    assert_eq!(r.series.len(), 1);
    let total: u64 = r.series.iter().map(|p| p.requests).sum();
    assert_eq!(total, r.stats.requests());
}

#[test]
fn series_has_a_point_per_second() {
    let server = TestServer::start(Behaviour::Hello);
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_millis(2500));
        p.pace = Pace::Rate(400.0);
    }));
    assert_eq!(r.series.len(), 3);
    let total: u64 = r.series.iter().map(|p| p.requests).sum();
    assert_eq!(total, r.stats.requests());
    for p in &r.series[..2] {
        assert!((200..=600).contains(&p.requests), "{p:?}");
        assert!(p.p99_us > 0);
    }
}

#[test]
fn sleep_latency_p50_is_within_20_to_25_ms() {
    let server = TestServer::start(Behaviour::Sleep);
    let r = run(&plan(&server.url("/sleep?ms=20"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(2));
        p.connections = 4;
    }));
    assert_eq!(r.stats.failures.total(), 0, "{:?}", r.stats.failures);
    let l = Percentiles::of(&r.stats.latency_us);
    assert!((20_000..=25_000).contains(&l.p50), "p50 {} µs", l.p50);
    assert!(l.min >= 20_000, "min {} µs", l.min);
}

#[test]
fn open_loop_shows_a_stall_that_closed_loop_hides() {
    let pause = Behaviour::PauseOnce {
        at: 300,
        pause: Duration::from_secs(1),
    };
    let closed = {
        let server = TestServer::start(pause);
        run(&plan(&server.url("/hello"), |p| {
            p.stop = Stop::Duration(Duration::from_secs(3));
            p.connections = 10;
        }))
    };
    let open = {
        let server = TestServer::start(pause);
        run(&plan(&server.url("/hello"), |p| {
            p.stop = Stop::Duration(Duration::from_secs(3));
            p.connections = 10;
            p.pace = Pace::Rate(1000.0);
        }))
    };
    let c = Percentiles::of(&closed.stats.latency_us);
    let o = Percentiles::of(&open.stats.latency_us);
    // Both saw the stall...
    assert!(c.max >= 900_000, "closed max {} µs", c.max);
    assert!(o.max >= 900_000, "open max {} µs", o.max);
    // ...but only the open loop counts the requests it could not send.
    assert!(c.p99 < 200_000, "closed p99 {} µs", c.p99);
    assert!(o.p99 >= 500_000, "open p99 {} µs", o.p99);
    assert!(!closed.latency_corrected() && open.latency_corrected());
    // The service time (from the actual write) hides it again.
    assert!(Percentiles::of(&open.stats.service_us).p99 < 200_000);
}

#[test]
fn rate_is_held() {
    let server = TestServer::start(Behaviour::Hello);
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(2));
        p.connections = 10;
        p.pace = Pace::Rate(500.0);
    }));
    let n = r.stats.requests();
    assert!((950..=1010).contains(&n), "{n} requests at 500/s for 2 s");
    assert_eq!(server.requests(), n + r.stats.aborted);
}

#[test]
fn rate_with_a_count_is_exact() {
    let server = TestServer::start(Behaviour::Hello);
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(300);
        p.connections = 7;
        p.pace = Pace::Rate(1000.0);
    }));
    assert_eq!((r.stats.ok, server.requests()), (300, 300));
    assert!(r.duration >= Duration::from_millis(280), "{:?}", r.duration);
}

#[test]
fn a_server_dying_mid_run_ends_the_run_with_what_was_measured() {
    let server = TestServer::start(Behaviour::DieAfter(2_000));
    let t0 = Instant::now();
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(10));
    }));
    assert_eq!(r.end, End::ServerGone);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(r.stats.ok >= 1_900 && r.stats.ok <= 2_000, "{}", r.stats.ok);
    let m = r.message.as_deref().unwrap_or("");
    assert!(m.contains("refused"), "{m}");
}

#[test]
fn nothing_listening_ends_at_once() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let t0 = Instant::now();
    let r = run(&plan(&format!("http://{addr}/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(10));
    }));
    assert_eq!(r.end, End::ServerGone);
    assert!(r.stats.failures.connect > 0);
    assert!(t0.elapsed() < Duration::from_secs(2));
}

#[test]
fn interrupt_stops_and_reports_partial_results() {
    let server = TestServer::start(Behaviour::Hello);
    let p = plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_secs(10));
    });
    let control = Control::default();
    let flag = control.interrupt.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, Ordering::Relaxed);
    });
    let t0 = Instant::now();
    let r = engine::run(&p, &control, &mut |_| {}).unwrap();
    assert_eq!(r.end, End::Interrupted);
    assert!(r.interrupted());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(r.stats.ok > 0);
    // Drained: what was sent was answered.
    assert_eq!(r.stats.aborted, 0);
    assert_eq!(server.requests(), r.stats.requests());
}

#[test]
fn warmup_is_not_counted() {
    let server = TestServer::start(Behaviour::Hello);
    let r = run(&plan(&server.url("/hello"), |p| {
        p.stop = Stop::Count(100);
        p.warmup = Duration::from_millis(300);
        p.pace = Pace::Rate(1000.0);
    }));
    assert_eq!(r.stats.requests(), 100);
    let warmup_requests = server.requests() - 100;
    assert!((250..=310).contains(&warmup_requests), "{warmup_requests}");
}

#[test]
fn progress_is_reported_while_running() {
    let server = TestServer::start(Behaviour::Hello);
    let p = plan(&server.url("/hello"), |p| {
        p.stop = Stop::Duration(Duration::from_millis(1200));
    });
    let mut snaps = Vec::new();
    let r = engine::run(&p, &Control::default(), &mut |s| snaps.push(*s)).unwrap();
    assert!((3..=5).contains(&snaps.len()), "{}", snaps.len());
    let last = snaps.last().unwrap();
    assert!(last.requests > 0 && last.requests <= r.stats.requests());
}
