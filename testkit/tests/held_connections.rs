//! `observe::held_connections` counts the sockets of a process; this test
//! is the only one in its binary, so no other test's sockets come and go
//! in the process it counts (its own).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use testkit::observe::{accept_queue, held_connections, wait_for};

#[test]
fn held_connections_counts_what_was_accepted_until_closed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let me = std::process::id();
    // This process is the server and the clients: the clients' sockets are
    // connections it opened itself, not counted.
    let held = || held_connections(me, addr);
    let base = held();
    let mut clients: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Connected, not accepted: in the accept queue, no descriptor yet.
    wait_for("3 connections queued", || accept_queue(addr) == Some(3));
    assert_eq!(held(), base);
    let first = listener.accept().unwrap().0;
    let _second = listener.accept().unwrap().0;
    assert_eq!(held(), base + 2);
    // The peer resets the first: it leaves the kernel's tables, but its
    // descriptor is held until closed.
    let reset = clients.remove(0);
    reset_on_close(&reset);
    drop(reset);
    let mut buf = [0u8; 1];
    assert!((&first).read(&mut buf).is_err(), "the reset has arrived");
    assert_eq!(held(), base + 2, "a reset connection is held until closed");
    drop(first);
    assert_eq!(held(), base + 1);
}

/// Makes closing `s` send a reset (SO_LINGER with a zero timeout).
fn reset_on_close(s: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a local struct.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}
