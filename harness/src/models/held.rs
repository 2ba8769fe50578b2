//! Experiment 4, connections held: the server's RSS with 0, 1,000 and
//! 10,000 idle connections open, and why it holds fewer than asked.
//!
//! Every figure is a measurement or says why it is not one: an RSS that
//! cannot be read (the server's processes are gone) is `None`, never 0; a
//! delta that falls as connections are opened is no per-connection cost.
//! A server short of the target is told apart from the lab's own limits:
//! the harness out of descriptors, a crash, the accept queue left full
//! (with the server's descriptor limit or the line of its log that says
//! which of its settings stopped it), idle connections it closed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::document::{Memory, MemoryPoint};
use crate::catalog::Running;
use crate::lab::Lab;

/// Give up after this many connects in a row time out (a full accept queue
/// drops SYNs: each takes the connect timeout).
const TIMEOUTS_IN_A_ROW: usize = 20;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// Why [`hold`] stopped before its target.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stopped {
    /// `connect` failed with EMFILE/ENFILE in the harness: its own limit.
    HarnessDescriptors,
    /// Connects time out: the server no longer completes handshakes (its
    /// accept queue is full).
    TimedOut,
    /// Refused: nothing listens any more.
    Refused,
    Other(String),
}

/// Opens connections to `addr` until `held` has `target` of them, or says
/// why it could not.
fn hold(addr: SocketAddr, held: &mut Vec<TcpStream>, target: usize) -> Option<Stopped> {
    let mut timeouts = 0;
    while held.len() < target {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => {
                timeouts = 0;
                held.push(s)
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                return Some(Stopped::HarnessDescriptors)
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Some(Stopped::Refused)
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                timeouts += 1;
                if timeouts >= TIMEOUTS_IN_A_ROW {
                    return Some(Stopped::TimedOut);
                }
            }
            Err(e) => return Some(Stopped::Other(e.to_string())),
        }
    }
    None
}

/// How many of `held` the server has closed (end of stream or a reset,
/// seen without blocking and without consuming anything).
fn closed_by_server(held: &[TcpStream]) -> u64 {
    let mut byte = 0u8;
    held.iter()
        .filter(|s| {
            // SAFETY: a one-byte peek into a local on a socket we own.
            let n = unsafe {
                libc::recv(
                    s.as_raw_fd(),
                    (&mut byte as *mut u8).cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            n == 0
                || (n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN))
        })
        .count() as u64
}

/// The accept queue of the listening socket on `port` (`/proc/net/tcp`,
/// LISTEN state): connections the kernel completed that the server has
/// not accepted yet.
pub(super) fn accept_queue(port: u16) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = u16::from_str_radix(f.get(1)?.rsplit(':').next()?, 16).ok()?;
        if local_port != port || *f.get(3)? != "0A" {
            return None;
        }
        let rx = f.get(4)?.split(':').nth(1)?;
        u64::from_str_radix(rx, 16).ok()
    })
}

/// The RSS of the server's process tree, or why it cannot be read.
pub(super) fn rss(running: &Running) -> Result<u64, String> {
    if let Err(e) = std::fs::read_dir("/proc") {
        return Err(format!("/proc could not be read ({e})"));
    }
    let tree = crate::procfs::tree(&running.pids());
    if tree.is_empty() {
        return Err("none of the server's processes is left".into());
    }
    Ok(tree.iter().map(|s| s.rss_pages).sum::<u64>() * crate::procfs::page_size())
}

/// Descriptors open in process `pid` and its soft `RLIMIT_NOFILE`.
pub(super) fn descriptors(pid: i32) -> Option<(u64, u64)> {
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some((open, soft))
}

/// Descriptors open in this process and its soft limit.
pub(super) fn own_descriptors() -> Option<(u64, u64)> {
    descriptors(std::process::id() as i32)
}

/// Lines of a server's log that name the limit it hit.
pub(super) fn limit_lines(log: &str) -> Vec<String> {
    const SIGNS: [&str; 4] = [
        "worker_connections are not enough",
        "Too many open files",
        "EMFILE",
        "max_children",
    ];
    let mut out: Vec<String> = log
        .lines()
        .filter(|l| SIGNS.iter().any(|s| l.contains(s)))
        .map(|l| l.trim().to_string())
        .collect();
    out.dedup();
    if out.len() > 1 {
        let n = out.len();
        out.truncate(1);
        out[0] = format!("{} (and {} more such lines)", out[0], n - 1);
    }
    out
}

/// Its children's logs and the end of every `*.log` in its run dir (where
/// nginx writes its error log).
pub(super) fn server_logs(running: &Running) -> String {
    let mut text = running.logs();
    let files = running
        .run_dir()
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"));
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        let tail = &bytes[bytes.len().saturating_sub(64 << 10)..];
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(tail));
    }
    text
}

/// Why a server that left connections in its accept queue stopped
/// accepting: a process at its descriptor limit, or its log's word.
pub(super) fn why_not_accepted(running: &Running, accepted: u64) -> String {
    let at_limit = crate::procfs::tree(&running.pids())
        .iter()
        .filter_map(|s| Some((s.pid, descriptors(s.pid)?)))
        .find(|(_, (open, soft))| *open + 8 >= *soft);
    let lines = limit_lines(&server_logs(running));
    let log = if lines.is_empty() {
        String::new()
    } else {
        format!("; its log: {}", lines.join(" | "))
    };
    match at_limit {
        Some((pid, (open, soft))) => format!(
            "it stopped accepting at {accepted}: process {pid} has {open} descriptors open, \
             its RLIMIT_NOFILE is {soft}{log}"
        ),
        None if !lines.is_empty() => {
            format!("it stopped accepting at {accepted}, its own limit{log}")
        }
        None => format!(
            "it stopped accepting at {accepted}, its own limit (no process of it is at its \
             descriptor limit and its log names none)"
        ),
    }
}

/// `GET /hello` on a new connection, within `timeout`.
fn hello_answers(addr: SocketAddr, timeout: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    if s.write_all(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    buf.starts_with(b"HTTP/1.1 200") && buf.ends_with(b"Hello World")
}

/// Experiment 4: RSS with 0 and each of `levels` idle connections held.
pub fn memory(lab: &Lab, running: &mut Running, model: &str, levels: &[usize]) -> Memory {
    let mut out = Memory {
        server: running.name.clone(),
        model: model.into(),
        ..Memory::default()
    };
    let addr = running.addr;
    let before = own_descriptors();
    let mut held: Vec<TcpStream> = Vec::new();
    // Every completed connection accepted by the server (or 10 s); then
    // the server's RSS, and what is still in the accept queue.
    let settle = |running: &Running| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while accept_queue(addr.port()).unwrap_or(0) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        (rss(running), accept_queue(addr.port()).unwrap_or(0))
    };
    let mut rss_errors = Vec::new();
    let (first, _) = settle(running);
    out.points.push(MemoryPoint {
        requested: 0,
        held: 0,
        not_accepted: 0,
        closed_by_server: 0,
        rss_bytes: first
            .map_err(|e| rss_errors.push(format!("at 0: {e}")))
            .ok(),
    });
    let mut stopped = None;
    for &n in levels {
        if lab.interrupted() {
            break;
        }
        stopped = hold(addr, &mut held, n);
        if stopped == Some(Stopped::HarnessDescriptors) {
            // Room to read /proc and ask for /hello: a few held ones let go.
            held.truncate(held.len().saturating_sub(16));
        }
        let (rss, not_accepted) = settle(running);
        let closed = closed_by_server(&held);
        let point = MemoryPoint {
            requested: n as u64,
            held: held.len() as u64,
            not_accepted,
            closed_by_server: closed,
            rss_bytes: rss
                .map_err(|e| rss_errors.push(format!("at {n}: {e}")))
                .ok(),
        };
        super::say(&format!(
            "  {}: {} of {n} connections accepted and held, RSS {}",
            running.name,
            point.accepted(),
            point.rss_bytes.map_or("not measured".into(), |b| format!(
                "{:.1} MiB",
                b as f64 / 1048576.0
            ))
        ));
        out.points.push(point);
        if stopped.is_some() {
            break;
        }
    }
    out.hello_answered_at_most = Some(hello_answers(addr, super::measure::TIMEOUT));
    let top = out.points.last().cloned();
    if let Some(top) = top.filter(|p| p.accepted() < p.requested) {
        out.short_of_target = Some(short_of_target(running, &top, stopped, before));
    }
    drop(held);
    out.kib_not_measured = None;
    match (out.points.first(), out.points.last()) {
        (Some(first), Some(last)) if last.requested > 0 => match kib_per_connection(first, last) {
            Ok(k) => out.kib_per_connection = Some(k),
            Err(why) => {
                out.kib_not_measured = Some(if rss_errors.is_empty() {
                    why
                } else {
                    format!("{why}: {}", rss_errors.join("; "))
                })
            }
        },
        _ => out.kib_not_measured = Some("no connections were held".into()),
    }
    out
}

/// KiB per accepted connection between two points, or why that is not a
/// measurement.
fn kib_per_connection(first: &MemoryPoint, last: &MemoryPoint) -> Result<f64, String> {
    let (Some(a), Some(b)) = (first.rss_bytes, last.rss_bytes) else {
        return Err("the server's RSS could not be read".into());
    };
    let accepted = last.accepted();
    if accepted == 0 {
        return Err("the server accepted none of the connections".into());
    }
    if b < a {
        return Err(format!(
            "its RSS fell from {:.1} to {:.1} MiB as {accepted} connections were opened \
             (memory released meanwhile, not a cost per connection)",
            a as f64 / 1048576.0,
            b as f64 / 1048576.0
        ));
    }
    Ok((b - a) as f64 / 1024.0 / accepted as f64)
}

/// Why the server holds fewer than `top.requested`, the lab's own limits
/// told apart from the server's.
fn short_of_target(
    running: &mut Running,
    top: &MemoryPoint,
    stopped: Option<Stopped>,
    before: Option<(u64, u64)>,
) -> String {
    if let Err(e) = running.check_alive() {
        let e = format!("{e:#}");
        return format!("the server crashed: {}", e.lines().next().unwrap_or(""));
    }
    let mut why = Vec::new();
    match stopped {
        Some(Stopped::HarnessDescriptors) => why.push(match before {
            Some((open, soft)) => format!(
                "the harness ran out of descriptors (its RLIMIT_NOFILE is {soft}; {open} were \
                 already open before it began holding): a limit of the lab's, not the server's"
            ),
            None => "the harness ran out of descriptors: a limit of the lab's".into(),
        }),
        Some(Stopped::Refused) => why.push("it stopped listening (connections refused)".into()),
        Some(Stopped::Other(e)) => why.push(format!("connect failed: {e}")),
        Some(Stopped::TimedOut) | None => {}
    }
    if top.not_accepted > 0 {
        why.push(format!(
            "{}; {} completed connections wait in its accept queue",
            why_not_accepted(running, top.accepted()),
            top.not_accepted
        ));
    }
    if top.closed_by_server > 0 {
        let lines = limit_lines(&server_logs(running));
        why.push(if lines.is_empty() {
            format!(
                "it closed {} of the idle connections (an idle or header timeout)",
                top.closed_by_server
            )
        } else {
            format!(
                "it closed {} of the connections it accepted; its log: {}",
                top.closed_by_server,
                lines.join(" | ")
            )
        });
    }
    if why.is_empty() {
        why.push("connects timed out with its accept queue empty".into());
    }
    why.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(held: u64, not_accepted: u64, rss: Option<u64>) -> MemoryPoint {
        MemoryPoint {
            requested: 10_000,
            held,
            not_accepted,
            closed_by_server: 0,
            rss_bytes: rss,
        }
    }

    #[test]
    fn a_listening_socket_shows_its_accept_queue() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(accept_queue(port), Some(0));
        let _a = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _b = TcpStream::connect(("127.0.0.1", port)).unwrap();
        // Completed by the kernel, not accepted: both wait in the queue.
        assert_eq!(accept_queue(port), Some(2));
        let _accepted = l.accept().unwrap();
        assert_eq!(accept_queue(port), Some(1));
    }

    #[test]
    fn a_fall_in_rss_or_an_unread_rss_is_not_a_cost() {
        let zero = MemoryPoint {
            requested: 0,
            ..point(0, 0, Some(50 << 20))
        };
        let k = kib_per_connection(&zero, &point(10_000, 0, Some((50 << 20) + 10_000 * 4096)));
        assert_eq!(k, Ok(4.0));
        let fell = kib_per_connection(&zero, &point(10_000, 0, Some(40 << 20))).unwrap_err();
        assert!(fell.contains("fell from 50.0 to 40.0 MiB"), "{fell}");
        let gone = kib_per_connection(&zero, &point(10_000, 0, None)).unwrap_err();
        assert!(gone.contains("could not be read"), "{gone}");
        let none = kib_per_connection(&zero, &point(4096, 4096, Some(60 << 20))).unwrap_err();
        assert!(none.contains("accepted none"), "{none}");
    }

    #[test]
    fn connections_the_peer_closed_are_told_from_open_ones() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let held: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut accepted: Vec<TcpStream> = (0..3).map(|_| l.accept().unwrap().0).collect();
        assert_eq!(closed_by_server(&held), 0);
        accepted.truncate(1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while closed_by_server(&held) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(closed_by_server(&held), 2);
    }

    #[test]
    fn a_servers_log_names_its_limit() {
        let log = "--- nginx:\n2026/12/02 [alert] 42#0: 4096 worker_connections are not enough\n\
                   2026/12/02 [alert] 42#0: 4096 worker_connections are not enough\nok\n";
        assert_eq!(
            limit_lines(log),
            ["2026/12/02 [alert] 42#0: 4096 worker_connections are not enough"]
        );
        assert!(limit_lines("all fine\n").is_empty());
    }

    #[test]
    fn this_process_reports_its_descriptors() {
        let (open, soft) = own_descriptors().unwrap();
        assert!(open > 0 && soft >= open, "{open} of {soft}");
    }
}
