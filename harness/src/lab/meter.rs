//! The one CPU meter of every measured run (`compare`, `calibrate`, and the
//! commands to come). CPU and memory of a server's process tree while it is
//! loaded, from /proc:
//! a thread samples every [`INTERVAL`], summing utime+stime and RSS over the
//! roots, their descendants and their process groups. CPU % = CPU time used
//! in the window / wall time (100% = one core); RSS is the peak of the
//! tree's sum (shared pages, e.g. OPcache's, count once per process).
//!
//! The window also charges the machine's busy time (/proc/stat) to the run
//! (server, generator, database, and the processes on the load's path
//! outside the server's tree, such as docker-proxy) or to everything else:
//! the CPU other processes took while the numbers were made
//! ("contamination"), and the steal time the hypervisor took.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::procfs::{self, proc_stat, CpuTicks};

pub const INTERVAL: Duration = Duration::from_millis(200);

/// Other processes taking this much of the machine (%) during a run
/// contaminate it: the same load gets visibly fewer requests through.
/// Below it is the floor of kernel work done outside any process (softirq
/// served from idle: 2–8% for nginx + php-fpm on a quiet machine here).
/// `compare` notes such rows; `diff` marks their cells not comparable.
pub const CONTAMINATED_PCT: f64 = 10.0;

/// What a window measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    pub wall_s: f64,
    pub server_cpu_s: f64,
    pub server_rss_peak_bytes: u64,
    /// The harness and the children it waited for in the window (ab, wrk).
    pub generator_cpu_s: f64,
    pub db_cpu_s: Option<f64>,
    /// The path's processes (tls-proxy's nginx, docker-proxy), when the
    /// run has any: the run's own CPU.
    pub path_cpu_s: Option<f64>,
    /// The part of `path_cpu_s` outside the server's tree (docker-proxy):
    /// in neither `server_cpu_s` nor `outside_cpu_pct` (the rest is in
    /// `server_cpu_s`).
    pub path_beside_server_cpu_s: Option<f64>,
    /// Busy CPU of processes outside the run, % of the whole machine.
    pub outside_cpu_pct: f64,
    /// Steal time, % of the whole machine.
    pub steal_pct: f64,
}

impl Sample {
    pub fn pct(cpu_s: f64, wall_s: f64) -> f64 {
        if wall_s > 0.0 {
            100.0 * cpu_s / wall_s
        } else {
            0.0
        }
    }
}

/// A process's CPU as two counters give it: clock ticks (the whole process,
/// its ended threads included, but 10 ms coarse) and the schedstat sum of
/// its live threads (exact to the nanosecond). A short window of a server
/// that does little (50 requests at 100/s) is 0 ticks; a thread that ended
/// in the window leaves the schedstat sum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Cpu {
    ticks: u64,
    ns: u64,
}

impl Cpu {
    fn of(s: &procfs::Stat) -> Cpu {
        Cpu {
            ticks: s.cpu_ticks,
            ns: procfs::cpu_ns(s.pid).unwrap_or(0),
        }
    }

    /// Seconds from `self` to `later`: the finer counter, unless the
    /// coarse one saw more (a thread ended in between).
    fn seconds_to(self, later: Cpu, ticks_per_s: f64) -> f64 {
        let by_ticks = later.ticks.saturating_sub(self.ticks) as f64 / ticks_per_s;
        let by_ns = later.ns.saturating_sub(self.ns) as f64 / 1e9;
        by_ticks.max(by_ns)
    }
}

/// Per (pid, start time): its CPU when first seen in the window (zero for
/// a process born inside it) and when last seen.
type Seen = BTreeMap<(i32, u64), (Cpu, Cpu)>;

fn observe(seen: &mut Seen, roots: &[u32], first: bool) -> u64 {
    let mut rss_pages = 0;
    for s in procfs::tree(roots) {
        rss_pages += s.rss_pages;
        let now = Cpu::of(&s);
        let e = seen
            .entry((s.pid, s.start_ticks))
            .or_insert((if first { now } else { Cpu::default() }, now));
        e.1 = now;
    }
    rss_pages
}

/// The harness's CPU ticks, with the children it has waited for (a load
/// tool run in the window is reaped before the window ends).
fn self_cpu_ticks() -> u64 {
    procfs::stat(std::process::id() as i32).map_or(0, |s| s.cpu_ticks + s.children_cpu_ticks)
}

/// A process on the load's path (`Meter::start`'s `path`).
struct PathProcess {
    pid: i32,
    /// Its CPU (ns) at the start of the window.
    ns_start: u64,
    /// Outside the server's tree (docker-proxy), so counted apart from it.
    beside: bool,
}

/// A running meter; [`Meter::finish`] ends the window.
pub struct Meter {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(Seen, u64)>,
    roots: Vec<u32>,
    start: Instant,
    generator_start: u64,
    db: Option<(i32, u64)>,
    /// The path's processes, with their CPU (ns) at the start and whether
    /// they are outside the server's tree.
    path: Vec<PathProcess>,
    machine_start: CpuTicks,
}

impl Meter {
    /// Starts a window over the trees of `roots`, `db_pid`'s own CPU and
    /// that of `path`, the processes the load passes through (docker-proxy;
    /// those in the trees of `roots`, such as tls-proxy's nginx, are counted
    /// there once).
    pub fn start(roots: Vec<u32>, path: &[u32], db_pid: Option<u32>) -> Meter {
        let stop = Arc::new(AtomicBool::new(false));
        let mut seen = Seen::new();
        let mut peak = observe(&mut seen, &roots, true);
        let path = path
            .iter()
            .map(|&p| p as i32)
            .filter_map(|pid| {
                procfs::cpu_ns(pid).map(|ns_start| PathProcess {
                    pid,
                    ns_start,
                    beside: !seen.keys().any(|(p, _)| *p == pid),
                })
            })
            .collect();
        let db = db_pid.and_then(|p| procfs::stat(p as i32).map(|s| (p as i32, s.cpu_ticks)));
        let generator_start = self_cpu_ticks();
        let machine_start = proc_stat();
        let start = Instant::now();
        let handle = {
            let stop = stop.clone();
            let roots = roots.clone();
            std::thread::Builder::new()
                .name("harness-meter".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(INTERVAL);
                        peak = peak.max(observe(&mut seen, &roots, false));
                    }
                    (seen, peak)
                })
                .expect("spawn the sampler thread")
        };
        Meter {
            stop,
            handle,
            roots,
            start,
            generator_start,
            db,
            path,
            machine_start,
        }
    }

    /// Ends the window.
    pub fn finish(self) -> Sample {
        let wall_s = self.start.elapsed().as_secs_f64();
        let machine_end = proc_stat();
        let generator_end = self_cpu_ticks();
        let db_end = self
            .db
            .and_then(|(p, t0)| procfs::stat(p).map(|s| s.cpu_ticks.saturating_sub(t0)));
        // Each path process read once: (all of them, those beside the tree).
        let (path_all_ns, path_beside_ns) = if self.path.is_empty() {
            (None, None)
        } else {
            let (all, beside) = self.path.iter().fold((0, 0), |(all, beside), p| {
                let ns = procfs::cpu_ns(p.pid).map_or(0, |ns| ns.saturating_sub(p.ns_start));
                (all + ns, beside + if p.beside { ns } else { 0 })
            });
            (Some(all), Some(beside))
        };
        self.stop.store(true, Ordering::Relaxed);
        let (mut seen, mut peak) = self.handle.join().unwrap_or_default();
        peak = peak.max(observe(&mut seen, &self.roots, false));
        let tick = procfs::ticks_per_s();
        let server_cpu_s: f64 = seen.values().map(|(a, b)| a.seconds_to(*b, tick)).sum();
        let server_ticks = (server_cpu_s * tick) as u64;
        let generator_ticks = generator_end.saturating_sub(self.generator_start);
        let path_ticks = path_beside_ns.map_or(0, |ns| (ns as f64 * tick / 1e9) as u64);
        let own = server_ticks + generator_ticks + db_end.unwrap_or(0) + path_ticks;
        let busy = machine_end.busy.saturating_sub(self.machine_start.busy);
        let total = machine_end
            .total
            .saturating_sub(self.machine_start.total)
            .max(1);
        Sample {
            wall_s,
            server_cpu_s,
            server_rss_peak_bytes: peak * procfs::page_size(),
            generator_cpu_s: generator_ticks as f64 / tick,
            db_cpu_s: db_end.map(|t| t as f64 / tick),
            path_cpu_s: path_all_ns.map(|ns| ns as f64 / 1e9),
            path_beside_server_cpu_s: path_beside_ns.map(|ns| ns as f64 / 1e9),
            outside_cpu_pct: 100.0 * busy.saturating_sub(own) as f64 / total as f64,
            steal_pct: 100.0 * machine_end.steal.saturating_sub(self.machine_start.steal) as f64
                / total as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window in which the server does less than a clock tick of work
    /// (a fixed-rate cell of 50 requests at 100/s) still shows it: the
    /// ticks alone read 0 µs per request there.
    #[test]
    fn less_than_a_tick_of_work_is_metered() {
        use std::io::{BufRead, Write};
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while read l; do [ \"$l\" = end ] && echo done; done"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let ticks_before = procfs::stat(pid).map_or(0, |s| s.cpu_ticks);
        let meter = Meter::start(vec![child.id()], &[], None);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        stdin.write_all("x\n".repeat(200).as_bytes()).unwrap();
        stdin.write_all(b"end\n").unwrap();
        // Until the child has read every line (the state it reports).
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "done\n");
        let sample = meter.finish();
        let ticks = procfs::stat(pid).map_or(0, |s| s.cpu_ticks) - ticks_before;
        drop(stdin);
        let _ = child.kill();
        let _ = child.wait();
        assert!(sample.server_cpu_s > 0.0, "{ticks} ticks: {sample:?}");
    }

    #[test]
    fn a_busy_child_shows_its_cpu_and_memory() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let s = Meter::start(vec![child.id()], &[], None);
        // Until the child has run 10 ticks of its own (the state, not a
        // head start: on a machine busy with other work 600 ms may hold
        // none of its CPU), at most 60 s.
        let pid = child.id() as i32;
        let ticks = || procfs::stat(pid).map_or(0, |s| s.cpu_ticks);
        let t0 = std::time::Instant::now();
        while ticks() < 10 && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let seen = ticks();
        let sample = s.finish();
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen >= 10, "the child never ran: {seen} ticks");
        assert!(sample.server_cpu_s > 0.05, "{sample:?}");
        assert!(sample.server_rss_peak_bytes > 0);
    }

    /// A process on the load's path outside the server's tree (docker-proxy)
    /// is the run's: its CPU is reported, and it is not counted as other
    /// processes' (which marked a quiet machine's Docker rows contaminated
    /// at 27-51%, docker-proxy's own share).
    #[test]
    fn the_path_is_the_runs_own_cpu_not_other_processes() {
        let spinner = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let server = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        let pid = spinner.id() as i32;
        let ns = || procfs::cpu_ns(pid).unwrap_or(0);
        let with_path = Meter::start(vec![server.id()], &[spinner.id()], None);
        let without = Meter::start(vec![server.id()], &[], None);
        // In the server's tree (tls-proxy's nginx): metered as the path and
        // counted once, as the server's.
        let in_tree = Meter::start(vec![spinner.id()], &[spinner.id()], None);
        // Until the spinner has run 300 ms of its own in the window (the
        // state, not a head start), at most 60 s.
        let (ns0, t0) = (ns(), std::time::Instant::now());
        while ns() - ns0 < 300_000_000 && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let (a, b, t) = (with_path.finish(), without.finish(), in_tree.finish());
        for mut c in [spinner, server] {
            let _ = c.kill();
            let _ = c.wait();
        }
        let path_s = a.path_cpu_s.expect("the path is metered");
        assert!(path_s >= 0.25, "{a:?}");
        assert_eq!(a.path_beside_server_cpu_s, a.path_cpu_s, "{a:?}");
        assert_eq!(b.path_cpu_s, None);
        assert!(t.path_cpu_s.unwrap() >= 0.25, "{t:?}");
        assert_eq!(t.path_beside_server_cpu_s, Some(0.0), "{t:?}");
        assert!(t.server_cpu_s >= 0.2, "{t:?}");
        assert!(a.server_cpu_s < 0.05, "the path is not the server's: {a:?}");
        // The same window, less the spinner's share of the machine (its
        // CPU over the window's CPU time on every core), give or take ticks.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let share = 100.0 * path_s / (a.wall_s * cores);
        assert!(
            b.outside_cpu_pct - a.outside_cpu_pct >= share / 2.0,
            "with the path {a:?}, without {b:?}, its share {share:.1}%"
        );
    }

    /// The run's own ticks must fit in the machine's busy ticks when the
    /// CPUs are saturated (as in every measured run) by loopback TCP, which
    /// is a third softirq: else contamination reads 0. (Measured here: own
    /// 280 ticks; user+nice+system 169; with irq+softirq 286.)
    #[test]
    fn saturating_loopback_traffic_of_our_own_fits_in_busy() {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        use std::time::Duration;
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for _ in 0..2 {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            threads.push(std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut b = vec![0u8; 64 * 1024];
                while matches!(s.read(&mut b), Ok(n) if n > 0) {}
            }));
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                let chunk = vec![b'x'; 16 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    c.write_all(&chunk).unwrap();
                }
            }));
        }
        std::thread::sleep(Duration::from_millis(200));
        let (busy_start, own_start) = (proc_stat().busy, self_cpu_ticks());
        // Until the traffic has taken 100 ticks of our own (on a machine
        // busy with other work, 1.5 s may hold few), at most 60 s.
        let t0 = std::time::Instant::now();
        while self_cpu_ticks() - own_start < 100 && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let (busy, own) = (proc_stat().busy - busy_start, self_cpu_ticks() - own_start);
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        assert!(own > 50, "too little traffic to tell: {own} ticks");
        // Slack for tick sampling (NOHZ idle misses some busy ticks when a
        // CPU is not saturated): 1/8 and two ticks per core. The old
        // definition missed by half.
        assert!(own <= busy + own / 8 + 4, "own {own} ticks > busy {busy}");
    }
}
