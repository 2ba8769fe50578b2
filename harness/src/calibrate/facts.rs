//! What the machine is and what else it is doing: CPU, cores, governor,
//! kernel, memory, load, steal time, timer resolution, perf counters, the
//! scheduler's autogroups. What a run's CPU went to is [`crate::lab::meter`]'s.

use serde::{Deserialize, Serialize};

use crate::machine;
use crate::procfs::{self, proc_stat, CpuTicks};

/// Whether `perf` hardware counters can be used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Perf {
    pub hardware_counters: bool,
    /// `kernel.perf_event_paranoid`.
    pub paranoid: Option<i64>,
    pub note: String,
}

pub fn perf() -> Perf {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists()
        || std::path::Path::new("/sys/bus/event_source/devices/cpu_core").exists();
    let root = crate::catalog::is_root();
    let hardware_counters = pmu && (root || paranoid.is_some_and(|p: i64| p <= 2));
    let note = if !pmu {
        "no hardware PMU exposed (no /sys/bus/event_source/devices/cpu: a VM without vPMU): \
         `perf stat` counts only software events"
            .to_string()
    } else if hardware_counters {
        "hardware counters available (perf stat -e cycles,instructions)".to_string()
    } else {
        format!(
            "a PMU exists but perf_event_paranoid={} forbids it to this user",
            paranoid.unwrap_or(-99)
        )
    };
    Perf {
        hardware_counters,
        paranoid,
        note,
    }
}

/// Which processes of the run share which scheduler autogroup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Autogroup {
    pub group: String,
    pub processes: Vec<String>,
}

/// `(label, pid, autogroup)` of a process of the run, read while it lives.
pub fn member(label: &str, pid: i32) -> (String, i32, String) {
    (
        label.to_string(),
        pid,
        procfs::autogroup(pid).unwrap_or_else(|| "unknown".into()),
    )
}

/// Groups the run's processes by autogroup.
pub fn autogroups(processes: &[(String, i32, String)]) -> Vec<Autogroup> {
    let mut out: Vec<Autogroup> = Vec::new();
    for (label, pid, group) in processes {
        let name = format!("{label} ({pid})");
        match out.iter_mut().find(|g| g.group == *group) {
            Some(g) => {
                if !g.processes.contains(&name) {
                    g.processes.push(name)
                }
            }
            None => out.push(Autogroup {
                group: group.clone(),
                processes: vec![name],
            }),
        }
    }
    out
}

/// The machine, as far as it can be read without privileges.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    pub cpu_model: String,
    pub cores_online: u32,
    /// `Cpus_allowed_list` of the harness.
    pub cpus_allowed: String,
    /// `scaling_governor` of cpu0, if the kernel shows it.
    pub governor: Option<String>,
    pub kernel: String,
    pub os: String,
    pub memory_bytes: u64,
    /// 1, 5, 15 minutes.
    pub load_avg_before: Vec<f64>,
    pub load_avg_after: Vec<f64>,
    /// Steal time since boot, % of all CPU time (before the run).
    pub steal_pct_since_boot: f64,
    /// Steal time during calibrate, % of all CPU time.
    pub steal_pct_during: f64,
    /// `clock_getres(CLOCK_MONOTONIC)`.
    pub timer_resolution_ns: u64,
    /// How late a 100 µs sleep wakes up (median): the real timer granularity.
    pub sleep_overshoot_us_p50: f64,
    pub perf: Perf,
    pub sched_autogroup_enabled: Option<bool>,
    /// Which processes of the run shared which autogroup.
    pub autogroups: Vec<Autogroup>,
}

fn timer_resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the kernel to fill.
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) } == 0 {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        0
    }
}

fn sleep_overshoot_us() -> f64 {
    let want = std::time::Duration::from_micros(100);
    let mut late: Vec<f64> = (0..100)
        .map(|_| {
            let t = std::time::Instant::now();
            std::thread::sleep(want);
            (t.elapsed().saturating_sub(want)).as_secs_f64() * 1e6
        })
        .collect();
    late.sort_by(f64::total_cmp);
    late[late.len() / 2]
}

/// The facts read before the run (`load_avg_after`, `steal_pct_during` and
/// `autogroups` are filled in at the end).
pub fn before() -> (Facts, CpuTicks) {
    // SAFETY: sysconf has no preconditions; it answers -1 when it cannot tell.
    let online = match unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } {
        n if n > 0 => n as u32,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    };
    let cpus_allowed = crate::env::pinned::current_thread_cpus()
        .map(|c| crate::env::pinned::list(&c))
        .unwrap_or_default();
    let governor = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        .ok()
        .map(|g| g.trim().to_string());
    let ticks = proc_stat();
    let facts = Facts {
        cpu_model: machine::cpu_model(),
        cores_online: online,
        cpus_allowed,
        governor,
        kernel: machine::kernel(),
        os: machine::os(),
        memory_bytes: machine::memory_bytes(),
        load_avg_before: machine::load_avg(),
        load_avg_after: Vec::new(),
        steal_pct_since_boot: 100.0 * ticks.steal as f64 / ticks.total.max(1) as f64,
        steal_pct_during: 0.0,
        timer_resolution_ns: timer_resolution_ns(),
        sleep_overshoot_us_p50: sleep_overshoot_us(),
        perf: perf(),
        sched_autogroup_enabled: procfs::sched_autogroup_enabled(),
        autogroups: Vec::new(),
    };
    (facts, ticks)
}

/// Fills in what is known only at the end.
pub fn after(facts: &mut Facts, start: CpuTicks) {
    let now = proc_stat();
    facts.load_avg_after = machine::load_avg();
    facts.steal_pct_during = 100.0 * now.steal.saturating_sub(start.steal) as f64
        / now.total.saturating_sub(start.total).max(1) as f64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_read_and_we_share_our_own_group() {
        let (f, _) = before();
        // Online CPUs are among the present ones /proc/cpuinfo lists.
        let present = machine::read("/proc/cpuinfo")
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count() as u32;
        assert!(
            (1..=present.max(1)).contains(&f.cores_online),
            "{} online of {present}",
            f.cores_online
        );
        assert!(f.timer_resolution_ns > 0);
        let me = std::process::id() as i32;
        let g = autogroups(&[member("a", me), member("b", me)]);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].processes.len(), 2);
    }
}
