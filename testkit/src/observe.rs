//! What a running server is doing, read from outside (Linux `/proc`,
//! `sock_diag` netlink and the process's CPU-time clock), so that a test proves an ordering by the
//! server's state instead of giving one request a head start in time: "the
//! server is inside `/cpu`" (its CPU time moves while nothing else is
//! outstanding), "it has read everything sent to it" (no byte in flight to
//! it or unread in its sockets), "a worker thread is inside `/sleep`" (it
//! sits in `clock_nanosleep`).

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
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

    /// Bytes that clients sent to this server and that it has not read yet,
    /// whether still in flight or waiting in its sockets (accepted or not):
    /// 0 once it has read every request sent so far.
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

    /// Its resident memory (`VmRSS` of `/proc/PID/status`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_else(|e| panic!("cannot read /proc/{}/status: {e}", self.pid()));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in /proc/{}/status", self.pid()))
    }

    /// How many file descriptors it has open (`/proc/PID/fd`).
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap_or_else(|e| panic!("cannot list /proc/{}/fd: {e}", self.pid()))
            .count()
    }

    /// How many connections to `server` (its listening address) it holds
    /// open: its descriptors that are sockets accepted there. Unlike
    /// [`open_fds`](Self::open_fds), this leaves out what the server opens
    /// itself, e.g. a database pool that grows under load.
    pub fn held_connections(&self, server: SocketAddr) -> usize {
        held_connections(self.pid(), server)
    }

    /// Waits until the server has read every byte sent to it so far.
    pub fn wait_until_read(&self) {
        wait_for("the server to read what was sent to it", || {
            self.unread_bytes() == 0
        });
    }
}

/// See [`ServerProcess::unread_bytes`]: what the sockets connected to
/// `server` still hold on their way in. On the server's side, its receive
/// queues (bytes it has not read); on the clients' side, their unacknowledged
/// bytes (sent, but not yet in the server's socket: still in flight).
///
/// Read with `sock_diag` netlink (as `ss` does), which skips the other
/// sockets in the kernel: `/proc/net/tcp` prints every socket of the
/// machine, and with the TIME_WAIT sockets of load tests running beside
/// (a connection per request leaves one each) a single read takes seconds.
pub fn unread_bytes(server: SocketAddr) -> u64 {
    let SocketAddr::V4(server) = server else {
        panic!("unread_bytes: IPv4 only, not {server}")
    };
    tcp_sockets()
        .iter()
        .map(|s| {
            if s.local == server {
                u64::from(s.recv_queue)
            } else if s.remote == server {
                u64::from(s.send_queue)
            } else {
                0
            }
        })
        .sum()
}

/// See [`ServerProcess::held_connections`]: the socket descriptors of
/// process `pid` other than the TCP connections it opened itself (which
/// `sock_diag` shows with a local address other than `server`). What is
/// left is its listener, the connections accepted on it, and any socket
/// the kernel no longer lists by address: a connection reset by its peer
/// leaves the kernel's tables at once but holds its descriptor until the
/// server closes it, and must count as held.
pub fn held_connections(pid: u32, server: SocketAddr) -> usize {
    let SocketAddr::V4(server) = server else {
        panic!("held_connections: IPv4 only, not {server}")
    };
    const EVERY_STATE: u32 = 0xfff;
    // Descriptors first, then the kernel's table: a socket listed among
    // the descriptors was made before the table was read, so it is in it
    // unless it has no address at all (or was reset).
    let sockets: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap_or_else(|e| panic!("cannot list /proc/{pid}/fd: {e}"))
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_str()?.to_owned();
            link.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    let opened_itself: std::collections::HashSet<u32> = tcp_sockets_in(EVERY_STATE)
        .iter()
        .filter(|s| s.local != server)
        .map(|s| s.inode)
        .collect();
    sockets
        .into_iter()
        .filter(|inode| !opened_itself.contains(inode))
        .count()
}

/// One TCP socket as `sock_diag` reports it.
struct TcpSocket {
    local: SocketAddrV4,
    remote: SocketAddrV4,
    /// Bytes received and not read by the application.
    recv_queue: u32,
    /// Bytes written and not acknowledged by the peer.
    send_queue: u32,
    /// Its inode: `socket:[INODE]` in a process's `/proc/PID/fd`.
    inode: u32,
}

/// Connections waiting in the accept queue of the listener on `server`
/// (accepted by the kernel, not yet by the server); `None` when nothing
/// listens there.
pub fn accept_queue(server: SocketAddr) -> Option<u64> {
    let SocketAddr::V4(server) = server else {
        panic!("accept_queue: IPv4 only, not {server}")
    };
    const LISTEN: u32 = 1 << 10;
    // For a listener, sock_diag's receive queue is its accept queue.
    let listeners: Vec<TcpSocket> = tcp_sockets_in(LISTEN)
        .into_iter()
        .filter(|s| s.local.port() == server.port())
        .collect();
    (!listeners.is_empty()).then(|| listeners.iter().map(|s| u64::from(s.recv_queue)).sum())
}

/// The connected IPv4 TCP sockets of this network namespace (every state
/// but LISTEN, SYN_RECV and TIME_WAIT).
fn tcp_sockets() -> Vec<TcpSocket> {
    // ESTABLISHED, SYN_SENT, FIN_WAIT1, FIN_WAIT2, CLOSE, CLOSE_WAIT,
    // LAST_ACK, CLOSING (linux/tcp_states.h).
    const STATES: u32 =
        (1 << 1) | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 11);
    tcp_sockets_in(STATES)
}

/// The IPv4 TCP sockets of this network namespace in `states` (a bit per
/// state of linux/tcp_states.h).
fn tcp_sockets_in(states: u32) -> Vec<TcpSocket> {
    const NETLINK_SOCK_DIAG: libc::c_int = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;

    // nlmsghdr (16 bytes) + inet_diag_req_v2 (56 bytes).
    let mut req = Vec::with_capacity(72);
    req.extend_from_slice(&72u32.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    req.extend_from_slice(&flags.to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // seq
    req.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel
    req.extend_from_slice(&[libc::AF_INET as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    req.extend_from_slice(&states.to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]); // inet_diag_sockid: any

    // SAFETY: a netlink socket we own and close; buffers outlive the calls.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    assert!(
        fd >= 0,
        "sock_diag socket: {}",
        std::io::Error::last_os_error()
    );
    let fd = FdGuard(fd);
    // SAFETY: as above.
    let sent = unsafe { libc::send(fd.0, req.as_ptr().cast(), req.len(), 0) };
    assert_eq!(
        sent,
        72,
        "sock_diag request: {}",
        std::io::Error::last_os_error()
    );

    let mut sockets = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: as above.
        let n = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert!(
            n >= 0,
            "sock_diag reply: {}",
            std::io::Error::last_os_error()
        );
        let mut msgs = &buf[..n as usize];
        while msgs.len() >= 16 {
            let len = u32::from_ne_bytes(msgs[0..4].try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(msgs[4..6].try_into().unwrap());
            match kind {
                NLMSG_DONE => return sockets,
                NLMSG_ERROR => panic!("sock_diag: the kernel answered an error"),
                _ => {}
            }
            assert!(
                len >= 16 && len <= msgs.len(),
                "sock_diag: a truncated message"
            );
            // inet_diag_msg: family, state, timer, retrans, then the
            // sockid (ports and addresses in network order), expires,
            // rqueue, wqueue, uid, inode.
            let m = &msgs[16..len];
            if m.len() >= 72 {
                let port = |at: usize| u16::from_be_bytes([m[at], m[at + 1]]);
                let ip = |at: usize| Ipv4Addr::new(m[at], m[at + 1], m[at + 2], m[at + 3]);
                let u32_at = |at: usize| u32::from_ne_bytes(m[at..at + 4].try_into().unwrap());
                sockets.push(TcpSocket {
                    local: SocketAddrV4::new(ip(8), port(4)),
                    remote: SocketAddrV4::new(ip(24), port(6)),
                    recv_queue: u32_at(56),
                    send_queue: u32_at(60),
                    inode: u32_at(68),
                });
            }
            // Messages are 4-byte aligned.
            let next = (len + 3) & !3;
            msgs = &msgs[next.min(msgs.len())..];
        }
    }
}

/// Closes a file descriptor on drop.
struct FdGuard(libc::c_int);

impl Drop for FdGuard {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn unread_bytes_counts_what_the_server_has_not_read() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(unread_bytes(addr), 0);
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        // Not accepted yet, in the accept queue's socket (counted twice
        // while also unacknowledged: hence a wait, not an equality).
        wait_for("18 unread bytes", || unread_bytes(addr) == 18);
        let (mut served, _) = listener.accept().unwrap();
        let mut buf = [0u8; 10];
        served.read_exact(&mut buf).unwrap();
        wait_for("8 unread bytes", || unread_bytes(addr) == 8);
        served.read_exact(&mut buf[..8]).unwrap();
        wait_for("the client's bytes to be acknowledged", || {
            unread_bytes(addr) == 0
        });
    }
}
