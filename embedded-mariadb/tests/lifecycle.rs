//! Starts a real private MariaDB, stops it, restarts it, and checks that
//! nothing is left behind.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use embedded_mariadb::{MariaDb, Options};

fn handshake(port: u16) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut b = vec![0u8; 64];
    let n = s.read(&mut b)?;
    b.truncate(n);
    Ok(b)
}

#[test]
fn starts_stops_restarts_and_cleans_up() {
    let mut db = MariaDb::start(Options::default()).expect("start MariaDB");
    let dir = db.dir().to_path_buf();
    let pid = db.pid().unwrap();
    assert!(db.url().starts_with("mysql://bench:bench@127.0.0.1:"));
    // Each status read is one connection of its own.
    let connections = db.status("Connections").unwrap();
    assert_eq!(db.status("Connections").unwrap(), connections + 1);
    assert!(db.status("Threads_connected").unwrap() >= 1);
    assert!(db.status("No_such_counter").is_err());
    assert!(db.status("x' OR 1 --").is_err());
    let hs = handshake(db.port()).unwrap();
    // Protocol version 10, then the server version string.
    assert_eq!(hs[4], 10);
    assert!(String::from_utf8_lossy(&hs).contains("MariaDB"), "{hs:?}");

    db.stop();
    assert!(
        handshake(db.port()).is_err(),
        "port still answers after stop"
    );
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());

    db.restart().expect("restart");
    assert_eq!(handshake(db.port()).unwrap()[4], 10);
    let pid = db.pid().unwrap();
    // A hung server (SIGSTOP) is still stopped cleanly, well within the
    // 30 s after which `stop` would kill it.
    db.signal(libc::SIGSTOP).unwrap();
    let t0 = Instant::now();
    drop(db);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "stopping a SIGSTOPped server took {:?}",
        t0.elapsed()
    );
    assert!(!dir.exists(), "temp dir left behind");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "mariadbd left running"
    );
}
