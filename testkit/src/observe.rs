//! What a running server is doing, read from outside (Linux `/proc` and the
//! process's CPU-time clock), so that a test proves an ordering by the
//! server's state instead of giving one request a head start in time: "the
//! server is inside `/cpu`" (its CPU time moves while nothing else is
//! outstanding), "it has read everything sent to it" (no unread bytes in
//! its sockets), "a worker thread is inside `/sleep`" (it sits in
//! `clock_nanosleep`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::ServerProcess;

/// How long [`wait_for`] polls before it gives up: a bound for a hang only,
/// far beyond what a loaded 2-core machine needs to reach any probed state.
pub const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// Polls `reached` every millisecond until it returns true; panics naming
/// `what` after [`PROBE_LIMIT`].
pub fn wait_for(what: &str, mut reached: impl FnMut() -> bool) {
    let deadline = Instant::now() + PROBE_LIMIT;
    while !reached() {
        assert!(
            Instant::now() < deadline,
            "waited {PROBE_LIMIT:?} for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One thread of a server process.
#[derive(Clone, Debug)]
pub struct Thread {
    pub tid: u32,
    /// Its name (`comm`), e.g. `worker-0`.
    pub name: String,
    /// The scheduler state: `R` running or runnable, `S` sleeping, ...
    pub state: char,
    /// The system call it is blocked in, if any (`/proc/…/syscall`).
    pub syscall: Option<i64>,
}

impl Thread {
    /// Blocked in `nanosleep`/`clock_nanosleep` (`std::thread::sleep`).
    pub fn in_sleep(&self) -> bool {
        matches!(self.syscall, Some(n) if n == libc::SYS_clock_nanosleep || n == libc::SYS_nanosleep)
    }

    /// Waiting for something (not running, not waiting for a CPU).
    pub fn blocked(&self) -> bool {
        self.state != 'R'
    }
}

impl ServerProcess {
    /// The CPU time (user + system, every thread) the server has used so far.
    pub fn cpu_time(&self) -> Duration {
        let mut clock: libc::clockid_t = 0;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: plain out-parameters; the pid is our running child.
        let ok = unsafe {
            libc::clock_getcpuclockid(self.pid() as libc::pid_t, &mut clock) == 0
                && libc::clock_gettime(clock, &mut ts) == 0
        };
        assert!(ok, "cannot read the CPU clock of pid {}", self.pid());
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// Bytes that clients sent to this server and that it has not read yet
    /// (in connections it accepted or not): 0 once it read every request
    /// sent so far. Loopback delivers a `write` into the receiving socket
    /// before the `write` returns, so a request just sent is counted.
    pub fn unread_bytes(&self) -> u64 {
        unread_bytes(self.addr)
    }

    /// The server's threads, as `/proc` sees them now.
    pub fn threads(&self) -> Vec<Thread> {
        let dir = format!("/proc/{}/task", self.pid());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let tid: u32 = e.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                // `tid (comm) state ...`: comm may hold spaces and parentheses.
                let open = stat.find('(')?;
                let close = stat.rfind(')')?;
                let name = stat[open + 1..close].to_string();
                let state = stat[close + 1..].trim_start().chars().next()?;
                let syscall = std::fs::read_to_string(e.path().join("syscall"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse().ok());
                Some(Thread {
                    tid,
                    name,
                    state,
                    syscall,
                })
            })
            .collect()
    }

    /// Waits until the server has read everything sent to it and every one
    /// of its threads is blocked: whatever it received it has acted on as
    /// far as it can go without waiting (a timer, the database, a client).
    pub fn wait_until_quiet(&self) {
        wait_for("the server to read its requests and block", || {
            self.unread_bytes() == 0 && self.threads().iter().all(Thread::blocked)
        });
    }
}

/// See [`ServerProcess::unread_bytes`]: the receive queues of the
/// connected sockets whose local address is `server` (IPv4, `/proc/net/tcp`).
pub fn unread_bytes(server: SocketAddr) -> u64 {
    let IpAddr::V4(ip) = server.ip() else {
        panic!("unread_bytes reads /proc/net/tcp: IPv4 only, not {server}")
    };
    let table = std::fs::read_to_string("/proc/net/tcp").expect("reading /proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local rem st tx_queue:rx_queue ...
            let f: Vec<&str> = line.split_whitespace().collect();
            let (addr, port) = f.get(1)?.split_once(':')?;
            // The kernel prints the address in memory (network) byte order
            // read as a host-order integer; the port in host order.
            let addr = Ipv4Addr::from(u32::from_str_radix(addr, 16).ok()?.to_ne_bytes());
            let port = u16::from_str_radix(port, 16).ok()?;
            let listening = *f.get(3)? == "0A";
            let rx = u64::from_str_radix(f.get(4)?.split_once(':')?.1, 16).ok()?;
            (addr == ip && port == server.port() && !listening).then_some(rx)
        })
        .sum()
}
