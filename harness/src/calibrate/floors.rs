//! Floors and ceilings that do not depend on a server: the loopback TCP
//! round trip at one connection, and the database's raw `SELECT 1` rate
//! at 20 connections (the ceiling of every `/work` number).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::catalog::Db;

/// A latency summary in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// One byte there and back over 127.0.0.1, one connection, `TCP_NODELAY`,
/// for `length`: the kernel's loopback floor under any HTTP server.
pub fn loopback_rtt(length: Duration) -> anyhow::Result<Latency> {
    let listener = TcpListener::bind("127.0.0.1:0").context("the echo server cannot bind")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut b = [0u8; 1];
        loop {
            match s.read(&mut b)? {
                0 => return Ok(()),
                _ => s.write_all(&b)?,
            }
        }
    });
    let mut c = TcpStream::connect(addr).context("cannot connect to the echo server")?;
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .context("histogram")?;
    let end = Instant::now() + length;
    let mut b = [0u8; 1];
    while Instant::now() < end {
        let t = Instant::now();
        c.write_all(b"x").context("echo write")?;
        c.read_exact(&mut b).context("echo read")?;
        h.saturating_record(t.elapsed().as_nanos() as u64);
    }
    drop(c);
    let _ = echo.join();
    Ok(Latency {
        samples: h.len(),
        p50_us: h.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
    })
}

/// What the database can do on its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DbCeiling {
    /// `embedded`, `external` or `none`.
    pub kind: String,
    pub version: Option<String>,
    pub connections: u32,
    /// `SELECT 1` per second over `connections` clients (mariadb-slap),
    /// counted by the server's `Com_select`.
    pub select1_per_s: Option<f64>,
    pub note: Option<String>,
}

fn client(db: &Db, sql: &str) -> anyhow::Result<String> {
    let prog = crate::catalog::find_program(&["mariadb", "mysql"])
        .context("no mariadb/mysql client installed")?;
    let out = Command::new(prog)
        .args(["--no-defaults", "-h", &db.host, "-P", &db.port.to_string()])
        .args(["-u", &db.user, "--batch", "--skip-column-names"])
        .args(["--connect-timeout=5", "-e", sql])
        .env("MYSQL_PWD", &db.password)
        .stdin(Stdio::null())
        .output()
        .context("cannot run the mariadb client")?;
    if !out.status.success() {
        bail!("`{sql}`: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn com_select(db: &Db) -> anyhow::Result<u64> {
    let v = client(
        db,
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME = 'COM_SELECT'",
    )?;
    v.trim()
        .parse()
        .with_context(|| format!("Com_select is {v:?}"))
}

/// `SELECT 1` from `connections` clients for `queries` queries in total.
pub fn select1_rate(db: &Db, connections: u32, queries: u64) -> anyhow::Result<f64> {
    let slap = crate::catalog::find_program(&["mariadb-slap", "mysqlslap"])
        .context("mariadb-slap is not installed (apt-get install mariadb-client)")?;
    let before = com_select(db)?;
    let t = Instant::now();
    let out = Command::new(slap)
        .args(["--no-defaults", "-h", &db.host, "-P", &db.port.to_string()])
        .args(["-u", &db.user, "--create-schema", &db.name])
        .arg(format!("--concurrency={connections}"))
        .arg(format!("--number-of-queries={queries}"))
        .args(["--iterations=1", "--query=SELECT 1"])
        .env("MYSQL_PWD", &db.password)
        .stdin(Stdio::null())
        .output()
        .context("cannot run mariadb-slap")?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "mariadb-slap failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // "Average number of seconds to run all queries: 1.234 seconds"
    let secs = text
        .lines()
        .find(|l| l.contains("seconds to run all queries"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|&s| s > 0.0)
        .unwrap_or(wall);
    let done = com_select(db)?.saturating_sub(before).saturating_sub(1);
    if done == 0 {
        bail!("mariadb-slap ran no query");
    }
    Ok(done as f64 / secs)
}

/// The server's version string.
pub fn version(db: &Db) -> Option<String> {
    client(db, "SELECT VERSION()")
        .ok()
        .map(|v| format!("MariaDB/MySQL {v}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_loopback_floor_is_measured() {
        let l = super::loopback_rtt(std::time::Duration::from_millis(100)).unwrap();
        assert!(l.samples > 10);
        assert!(l.p50_us > 0.0 && l.p99_us >= l.p50_us);
    }
}
