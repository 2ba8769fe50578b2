//! What /proc says about processes and the machine's CPU time: per process
//! CPU time, RSS, parent, group, session, autogroup; `/proc/stat`'s busy,
//! steal and total ticks. Used to sample a server's process tree during a run and to
//! check that stopped children are really gone.

use std::collections::{BTreeMap, BTreeSet};

/// One line of `/proc/PID/stat`, the fields we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub pid: i32,
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// cutime + cstime: the children it has waited for.
    pub children_cpu_ticks: u64,
    /// Start time after boot, in clock ticks (tells a reused pid apart).
    pub start_ticks: u64,
    /// Resident set size, in pages.
    pub rss_pages: u64,
}

/// Parses `/proc/PID/stat` (the command name may hold spaces and parens).
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let rest: Vec<&str> = text.get(close + 1..)?.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state).
    let f = |n: usize| rest.get(n - 3).copied();
    let num = |n: usize| f(n).and_then(|v| v.parse::<i64>().ok());
    Some(Stat {
        pid,
        state: f(3)?.bytes().next()?,
        ppid: num(4)? as i32,
        pgrp: num(5)? as i32,
        session: num(6)? as i32,
        cpu_ticks: (num(14)? + num(15)?) as u64,
        children_cpu_ticks: (num(16)? + num(17)?).max(0) as u64,
        start_ticks: num(22)? as u64,
        rss_pages: num(24)?.max(0) as u64,
    })
}

pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU time of every thread of `pid`, in nanoseconds: the first field of
/// each `/proc/PID/task/TID/schedstat`. Finer than [`Stat::cpu_ticks`]
/// (clock ticks, 10 ms each), for a process that does little per run
/// (docker-proxy over a short run).
pub fn cpu_ns(pid: i32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for t in tasks.filter_map(Result::ok) {
        let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        total += text
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

/// Every process on the machine (zombies included; see [`Stat::state`]).
pub fn all() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// Live (non-zombie) processes whose group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all()
        .into_iter()
        .filter(|s| s.pgrp == pgid && s.state != b'Z' && s.state != b'X')
        .map(|s| s.pid)
        .collect()
}

/// `roots`, their descendants (by parent pid) and the members of their
/// process groups: the whole tree a server started.
pub fn tree(roots: &[u32]) -> Vec<Stat> {
    let all = all();
    let roots: BTreeSet<i32> = roots.iter().map(|&p| p as i32).collect();
    let mut children: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, s) in all.iter().enumerate() {
        children.entry(s.ppid).or_default().push(i);
    }
    let mut picked = BTreeSet::new();
    let mut stack: Vec<i32> = roots.iter().copied().collect();
    while let Some(pid) = stack.pop() {
        if !picked.insert(pid) {
            continue;
        }
        for &i in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            stack.push(all[i].pid);
        }
    }
    all.into_iter()
        .filter(|s| s.state != b'Z' && (picked.contains(&s.pid) || roots.contains(&s.pgrp)))
        .collect()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// `/proc/PID/autogroup` (e.g. `/autogroup-42 nice 0`), the scheduler group
/// a process's CPU share is computed in when `kernel.sched_autogroup_enabled=1`.
pub fn autogroup(pid: i32) -> Option<String> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/autogroup")).ok()?;
    Some(t.split_whitespace().next()?.to_string())
}

/// The autogroup a process's CPU share is computed in, when autogroups are
/// in effect (`kernel.sched_autogroup_enabled=1`). Otherwise `None`: the
/// kernel has none (`CONFIG_SCHED_AUTOGROUP` off, or a sandbox that hides
/// them) or they are switched off, and a process that leaves its session
/// (`setsid()`) gets no larger share for it.
pub fn effective_autogroup(pid: i32) -> Option<String> {
    if sched_autogroup_enabled() == Some(true) {
        autogroup(pid)
    } else {
        None
    }
}

/// `kernel.sched_autogroup_enabled`, if the kernel has it.
pub fn sched_autogroup_enabled() -> Option<bool> {
    let t = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").ok()?;
    Some(t.trim() == "1")
}

/// `/proc/stat`'s first line, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is inside user).
    /// irq and softirq belong here: a task's stime in `/proc/PID/stat`
    /// includes the interrupts served on its time, which `/proc/stat` files
    /// under irq/softirq, not system. On loopback load that is a third of
    /// the run's CPU: without it the run's own ticks exceed "busy" and what
    /// other processes took reads as 0.
    pub busy: u64,
    pub steal: u64,
    /// Every field but guest/guest_nice (already in user/nice).
    pub total: u64,
}

/// Parses the `cpu ` line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal guest guest_nice
    Some(CpuTicks {
        busy: f(0) + f(1) + f(2) + f(5) + f(6),
        steal: f(7),
        total: (0..8).map(f).sum(),
    })
}

pub fn proc_stat() -> CpuTicks {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_spaces_in_the_name() {
        let line = "1234 (php-fpm: pool (x)) S 1 1234 99 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 1 0 777 123456789 2048 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            (s.pid, s.state, s.ppid, s.pgrp, s.session),
            (1234, b'S', 1, 1234, 99)
        );
        assert_eq!(s.cpu_ticks, 300);
        assert_eq!(s.children_cpu_ticks, 0);
        assert_eq!(s.start_ticks, 777);
        assert_eq!(s.rss_pages, 2048);
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn our_own_tree_contains_us() {
        let me = std::process::id();
        let t = tree(&[me]);
        assert!(t.iter().any(|s| s.pid == me as i32));
        assert!(ticks_per_s() > 0.0);
    }

    #[test]
    fn proc_stat_parses() {
        let t = "cpu  100 5 50 1000 10 3 7 20 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        let c = parse_proc_stat(t).unwrap();
        assert_eq!(c.busy, 165);
        assert_eq!(c.steal, 20);
        assert_eq!(c.total, 1195);
        assert!(parse_proc_stat("nothing").is_none());
        assert!(proc_stat().total > 0);
    }
}
