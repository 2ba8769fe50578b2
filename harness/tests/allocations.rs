//! The engine allocates nothing per request: the allocations made on the
//! engine's threads (named `harness-N`) do not grow with the request count.
//! Its own test binary, because it installs a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

#[allow(dead_code)]
#[path = "util.rs"]
mod util;

use harness::engine::{Io, Route, Stop};
use util::{plan_on, run, Behaviour, TestServer};

struct Counting;

static ENGINE_ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// 0: not known yet, 1: being found out, 2: an engine thread, 3: another.
    static KIND: Cell<u8> = const { Cell::new(0) };
}

fn on_engine_thread() -> bool {
    KIND.try_with(|k| match k.get() {
        2 => true,
        1 | 3 => false,
        _ => {
            k.set(1);
            let engine = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("harness-"));
            k.set(if engine { 2 } else { 3 });
            engine
        }
    })
    .unwrap_or(false)
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if on_engine_thread() {
            ENGINE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if on_engine_thread() {
            ENGINE_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations on the engine's threads during one run of `requests` on
/// backend `io`, of `/hello` alone or of a 3:1 mix with another path.
fn engine_allocations(io: Io, requests: u64, keepalive: bool, mixed: bool) -> u64 {
    let server = TestServer::start(Behaviour::Hello);
    let authority = server.addr.to_string();
    let p = plan_on(io, &server.url("/hello"), |p| {
        p.stop = Stop::Count(requests);
        p.connections = 8;
        p.keepalive = keepalive;
        if mixed {
            p.mix = vec![
                Route::get("/hello", &authority, 3, keepalive),
                Route::get("/other", &authority, 1, keepalive),
            ];
        }
    });
    let before = ENGINE_ALLOCS.load(Ordering::Relaxed);
    let r = run(&p);
    assert_eq!(r.stats.ok, requests);
    ENGINE_ALLOCS.load(Ordering::Relaxed) - before
}

/// On each I/O backend.
#[test]
fn no_allocation_per_request() {
    for io in [Io::Epoll, Io::Uring] {
        for (keepalive, mixed) in [(true, false), (false, false), (true, true)] {
            let small = engine_allocations(io, 1_000, keepalive, mixed);
            let large = engine_allocations(io, 20_000, keepalive, mixed);
            // A few per second of run time (the time series), none per request.
            assert!(
                large <= small + 16,
                "{io:?} keepalive={keepalive} mixed={mixed}: {small} allocations for \
                 1,000 requests, {large} for 20,000"
            );
        }
    }
}
