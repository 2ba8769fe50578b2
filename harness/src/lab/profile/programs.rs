//! Which program a side's CPU went to (nginx against php-fpm, node, one
//! Rust binary), and for PHP the share in PHP itself, read from
//! `perf script`'s text, where each sample names its process and each
//! frame its binary (the folded stacks keep neither).
//!
//! PHP as Debian ships it is stripped of its static symbols and built
//! without frame pointers, so its stacks end one frame up and the Zend
//! engine cannot be told from php-fpm's own FastCGI code by function: they
//! are one binary. The split is therefore by the binary a sample's leaf
//! frame is in: PHP's binary, its extensions (opcache) and code without a
//! binary (the JIT's) count as PHP; libc and the kernel, where php-fpm's
//! FastCGI and socket I/O go, do not.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One program's share of a side's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramShare {
    /// The process's name (`/proc/PID/comm` when the profile was taken).
    pub program: String,
    pub pct: f64,
}

/// One sample of `perf script`: the process, the CPU it stands for, and
/// where its leaf frame was.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub pid: u32,
    /// The thread's name, for a process gone before it could be named.
    pub thread: String,
    /// ns of CPU (the cpu-clock event's period).
    pub period: u64,
    /// The binary of the leaf frame (`[kernel.kallsyms]`, a path, or
    /// `[unknown]`).
    pub leaf_dso: String,
}

impl Sample {
    fn leaf_in_kernel(&self) -> bool {
        self.leaf_dso.starts_with("[kernel")
    }

    /// The leaf is PHP's own code: its binary, an extension of it, or
    /// code with no binary (the opcache JIT's buffer).
    fn leaf_in_php(&self) -> bool {
        !self.leaf_in_kernel()
            && (self.leaf_dso.contains("/php")
                || self.leaf_dso == "[unknown]"
                || self.leaf_dso.starts_with("//anon"))
    }
}

/// The samples of `perf script -F +pid` output: a header line per sample
/// (`comm PID/TID time: period event:`, the comm may hold spaces), then its
/// frames, one per line (`addr symbol+off (dso)`), leaf first, then a
/// blank line. Lines that do not parse are skipped.
pub fn samples(script: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut current: Option<Sample> = None;
    for line in script.lines() {
        if line.trim().is_empty() {
            out.extend(current.take());
            continue;
        }
        if line.starts_with(|c: char| c.is_whitespace()) {
            if let Some(s) = current.as_mut().filter(|s| s.leaf_dso.is_empty()) {
                s.leaf_dso = frame_dso(line).unwrap_or("[unknown]").to_string();
            }
            continue;
        }
        out.extend(current.take());
        current = header(line);
    }
    out.extend(current);
    out
}

fn header(line: &str) -> Option<Sample> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let at = tokens.iter().position(|t| {
        t.split_once('/')
            .is_some_and(|(p, t)| p.parse::<u32>().is_ok() && t.parse::<u32>().is_ok())
    })?;
    let pid = tokens[at].split_once('/')?.0.parse().ok()?;
    // The period is the number before the event's name (`cpu-clock:`).
    let event = tokens
        .iter()
        .position(|t| t.ends_with(':') && t.contains("clock"))?;
    let period = tokens.get(event.checked_sub(1)?)?.parse().ok()?;
    Some(Sample {
        pid,
        thread: tokens[..at].join(" "),
        period,
        leaf_dso: String::new(),
    })
}

/// The binary in a frame line's last parentheses.
fn frame_dso(line: &str) -> Option<&str> {
    let open = line.rfind(" (")?;
    line[open + 2..].strip_suffix(')')
}

/// A side's programs, biggest first, and the share of its samples in PHP
/// itself (None when no PHP process is among them). `name` names a pid.
pub fn shares(
    samples: &[&Sample],
    name: impl Fn(u32) -> Option<String>,
) -> (Vec<ProgramShare>, Option<f64>) {
    let total: u64 = samples.iter().map(|s| s.period).sum();
    if total == 0 {
        return (Vec::new(), None);
    }
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut by_program: BTreeMap<String, u64> = BTreeMap::new();
    let (mut php_seen, mut in_php) = (false, 0u64);
    for s in samples {
        let program = names
            .entry(s.pid)
            .or_insert_with(|| name(s.pid).unwrap_or_else(|| s.thread.clone()))
            .clone();
        if program.starts_with("php") {
            php_seen = true;
            if s.leaf_in_php() {
                in_php += s.period;
            }
        }
        *by_program.entry(program).or_default() += s.period;
    }
    let pct = |x: u64| 100.0 * x as f64 / total as f64;
    let mut programs: Vec<ProgramShare> = by_program
        .into_iter()
        .map(|(program, n)| ProgramShare {
            program,
            pct: pct(n),
        })
        .collect();
    programs.sort_by(|a, b| b.pct.total_cmp(&a.pct));
    (programs, php_seen.then(|| pct(in_php)))
}

/// A live process's name.
pub fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = "\
php-fpm8.2 21312/21312 21761.713321:   10101010 cpu-clock: 
\t    55d1c0a3b2c1 zend_hash_find+0x21 (/usr/sbin/php-fpm8.2)
\t    7ffc1beb9ce0 [unknown] ([unknown])

php-fpm8.2 21312/21312 21761.723321:   10101010 cpu-clock: 
\tffffffff82260f74 tcp_sendmsg+0x114 ([kernel.kallsyms])
\t          172503 __libc_write+0x93 (/usr/lib/x86_64-linux-gnu/libc.so.6)

php-fpm8.2 21313/21313 21761.733321:   10101010 cpu-clock: 
\t    7f00deadbeef [unknown] ([unknown])

V8 DefaultWorke 900/903 21761.743321:   20202020 cpu-clock: 
\t          172503 __memset+0x93 (/usr/lib/x86_64-linux-gnu/libc.so.6)

nginx 21331/21331 21761.753321:   30303030 cpu-clock: 
\tffffffff82260f74 do_epoll_wait+0x14 ([kernel.kallsyms])
";

    #[test]
    fn samples_are_read_with_their_process_period_and_leaf_binary() {
        let s = samples(SCRIPT);
        assert_eq!(s.len(), 5);
        assert_eq!(s[0].pid, 21312);
        assert_eq!(s[0].period, 10101010);
        assert_eq!(s[0].leaf_dso, "/usr/sbin/php-fpm8.2");
        assert_eq!(s[1].leaf_dso, "[kernel.kallsyms]");
        // A comm with a space, a thread of another pid.
        assert_eq!((s[3].pid, s[3].thread.as_str()), (900, "V8 DefaultWorke"));
        // The last sample has no blank line after it.
        assert_eq!(s[4].leaf_dso, "[kernel.kallsyms]");
    }

    #[test]
    fn programs_are_shared_out_and_php_counts_its_binary_and_jit_code() {
        let s = samples(SCRIPT);
        let php_and_nginx: Vec<&Sample> = s.iter().filter(|s| s.pid != 900).collect();
        let (programs, php) = shares(&php_and_nginx, |pid| {
            (pid != 21313).then(|| if pid == 21331 { "nginx" } else { "php-fpm8.2" }.into())
        });
        // nginx 3 of 6 periods; php-fpm 2, and the worker that exited is
        // named by its thread.
        assert_eq!(programs[0].program, "nginx");
        assert!((programs[0].pct - 50.0).abs() < 1e-9, "{programs:?}");
        assert_eq!(programs.len(), 2, "{programs:?}");
        assert!((programs[1].pct - 50.0).abs() < 1e-9);
        // PHP itself: the zend frame and the JIT frame, not the kernel's.
        assert!((php.unwrap() - 100.0 / 3.0).abs() < 1e-6, "{php:?}");
        // No PHP process: no PHP share.
        let node: Vec<&Sample> = s.iter().filter(|s| s.pid == 900).collect();
        let (programs, php) = shares(&node, |_| Some("node".into()));
        assert_eq!((programs.len(), php), (1, None));
        assert_eq!(programs[0].pct, 100.0);
    }
}
