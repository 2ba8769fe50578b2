//! `pinned`: the server's process tree and the load generator on disjoint
//! CPU sets. The split is taken from the CPUs this process may use: the
//! first half (at least one) for the load generator, the rest for the
//! server; with 2 cores, one each. Children are placed with
//! `sched_setaffinity` between fork and exec ([`super::Placement::apply`]),
//! the load generator by pinning the thread that spawns the engine's threads
//! ([`ThreadPin`]). Both are checked by reading `Cpus_allowed_list` from
//! `/proc/PID/status` (and `/proc/self/task/TID/status`).

use anyhow::{bail, Context};

use crate::catalog::cpu_set;

/// Disjoint CPU sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub load: Vec<usize>,
    pub server: Vec<usize>,
}

impl Split {
    /// Splits `cpus` (at least two) into the load's and the server's.
    pub fn of(cpus: &[usize]) -> Result<Split, String> {
        if cpus.len() < 2 {
            return Err(format!(
                "needs at least 2 CPUs for disjoint sets; this process may use {}",
                list(cpus)
            ));
        }
        let half = cpus.len() / 2;
        Ok(Split {
            load: cpus[..half].to_vec(),
            server: cpus[half..].to_vec(),
        })
    }

    /// The split of the CPUs this thread may run on.
    pub fn of_this_process() -> Result<Split, String> {
        Split::of(&current_thread_cpus().map_err(|e| format!("{e:#}"))?)
    }

    /// Every process of the tree on the server's CPUs, this thread on the load's.
    pub fn verify(&self, server_pids: &[u32]) -> anyhow::Result<Vec<String>> {
        let mut seen = Vec::new();
        for s in crate::procfs::tree(server_pids) {
            let cpus = cpus_allowed(&format!("/proc/{}/status", s.pid))
                .with_context(|| format!("cannot read the CPUs of server process {}", s.pid))?;
            if cpus != self.server {
                bail!(
                    "server process {} may run on CPUs {}, not {} as placed",
                    s.pid,
                    list(&cpus),
                    list(&self.server)
                );
            }
            seen.push(s.pid);
        }
        if seen.is_empty() {
            bail!("no server process to verify");
        }
        let me = current_thread_cpus()?;
        if me != self.load {
            bail!(
                "the load generator's thread may run on CPUs {}, not {}",
                list(&me),
                list(&self.load)
            );
        }
        Ok(vec![format!(
            "Cpus_allowed_list: server pids {seen:?} on {}, load generator on {}",
            list(&self.server),
            list(&self.load)
        )])
    }
}

/// The CPUs the calling thread may run on.
pub fn current_thread_cpus() -> anyhow::Result<Vec<usize>> {
    // SAFETY: as in cpu_set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid, correctly sized set for the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(std::io::Error::last_os_error()).context("sched_getaffinity");
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: c < CPU_SETSIZE.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

fn set_thread_cpus(cpus: &[usize]) -> anyhow::Result<()> {
    let set = cpu_set(cpus)?;
    // SAFETY: a valid set for the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("sched_setaffinity to CPUs {}", list(cpus)));
    }
    Ok(())
}

/// The calling thread pinned to some CPUs; the previous set comes back on drop.
pub struct ThreadPin {
    previous: Vec<usize>,
}

impl ThreadPin {
    pub fn to(cpus: &[usize]) -> anyhow::Result<ThreadPin> {
        let previous = current_thread_cpus()?;
        set_thread_cpus(cpus)?;
        Ok(ThreadPin { previous })
    }
}

impl Drop for ThreadPin {
    fn drop(&mut self) {
        let _ = set_thread_cpus(&self.previous);
    }
}

/// `Cpus_allowed_list` of a `/proc/.../status` file.
pub fn cpus_allowed(status_path: &str) -> anyhow::Result<Vec<usize>> {
    let text = std::fs::read_to_string(status_path)
        .with_context(|| format!("cannot read {status_path}"))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .with_context(|| format!("{status_path} has no Cpus_allowed_list"))?;
    parse_list(line.trim()).with_context(|| format!("{status_path}: bad Cpus_allowed_list"))
}

/// `0-2,5` → [0, 1, 2, 5].
pub fn parse_list(s: &str) -> anyhow::Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse()?, b.parse()?);
                if b < a || b - a > 65536 {
                    bail!("bad CPU range {part:?}");
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// [0, 1, 2, 5] → `0-2,5`.
pub fn list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip_and_split() {
        assert_eq!(parse_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert_eq!(list(&[0, 1, 2, 5]), "0-2,5");
        assert!(parse_list("3-1").is_err());
        assert!(parse_list("x").is_err());
        let s = Split::of(&[0, 1]).unwrap();
        assert_eq!((s.load, s.server), (vec![0], vec![1]));
        let s = Split::of(&[0, 1, 2, 3, 4]).unwrap();
        assert_eq!((s.load, s.server), (vec![0, 1], vec![2, 3, 4]));
        assert!(Split::of(&[0]).is_err());
    }

    #[test]
    fn a_thread_pin_shows_in_cpus_allowed_list_and_is_undone() {
        std::thread::spawn(|| {
            let before = current_thread_cpus().unwrap();
            let first = before[0];
            {
                let _pin = ThreadPin::to(&[first]).unwrap();
                // SAFETY: gettid has no preconditions.
                let tid = unsafe { libc::gettid() };
                let seen = cpus_allowed(&format!("/proc/self/task/{tid}/status")).unwrap();
                assert_eq!(seen, vec![first]);
            }
            assert_eq!(current_thread_cpus().unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
