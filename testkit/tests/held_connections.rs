//! `observe::held_connections` counts the sockets of a process; this test
//! is the only one in its binary, so no other test's sockets come and go
//! in the process it counts (its own).

use std::io::Read;
use std::net::{TcpListener, TcpStream};

use testkit::faults::reset;
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
    reset(clients.remove(0));
    let mut buf = [0u8; 1];
    assert!((&first).read(&mut buf).is_err(), "the reset has arrived");
    assert_eq!(held(), base + 2, "a reset connection is held until closed");
    drop(first);
    assert_eq!(held(), base + 1);
}
