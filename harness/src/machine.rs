//! The facts of this machine that every command reports the same way: CPU
//! model, kernel, OS, memory and load, read from /proc and /etc without
//! privileges. `compare` records them in results.json
//! ([`crate::compare::results::Machine`]), `calibrate` in its own document
//! ([`crate::calibrate::facts::Facts`]) beside what only it measures.

/// A file's text, empty when it cannot be read.
pub fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `model name` of /proc/cpuinfo.
pub fn cpu_model() -> String {
    model_name(&read("/proc/cpuinfo"))
}

/// `model name` of a /proc/cpuinfo text, `unknown` without one (some
/// architectures name it otherwise).
fn model_name(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_string())
}

/// `PRETTY_NAME` of /etc/os-release.
pub fn os() -> String {
    read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map_or("unknown".into(), |v| v.trim_matches('"').to_string())
}

/// The kernel release (`6.1.0-18-amd64`).
pub fn kernel() -> String {
    read("/proc/sys/kernel/osrelease").trim().to_string()
}

/// `MemTotal` of /proc/meminfo, in bytes.
pub fn memory_bytes() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The load averages over 1, 5 and 15 minutes.
pub fn load_avg() -> Vec<f64> {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect()
}

/// Raises the open-files limit to the hard limit (children inherit it).
pub fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(1 << 20);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facts_are_read() {
        assert_eq!(
            model_name("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"),
            "Intel(R) Xeon(R) CPU @ 2.20GHz"
        );
        assert_eq!(model_name("processor\t: 0\n"), "unknown");
        if read("/proc/cpuinfo").contains("model name") {
            assert_ne!(cpu_model(), "unknown");
        }
        assert!(!kernel().is_empty());
        assert!(memory_bytes() > 0);
        assert_eq!(load_avg().len(), 3);
    }
}
