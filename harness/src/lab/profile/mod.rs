//! Where a run's CPU goes (`compare --profile`): `perf record` on the
//! server's process tree and the load generator (this process) during the
//! measured window, a software clock event (these machines expose no
//! hardware counters), the stacks collapsed and drawn as flame graphs by
//! `inferno`, and a breakdown per side: user against kernel, and within
//! the kernel the TCP path and the scheduler.
//!
//! Each sample of the `cpu-clock` event carries its period in nanoseconds
//! of CPU, and the folded stacks add periods, not samples: a stack's count
//! is the CPU time spent in it. Over the run's requests that is CPU per
//! request, the quantity the meter counts, split by where it went.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use inferno::collapse::perf::{Folder, Options as CollapseOptions};
use inferno::collapse::Collapse;
use serde::{Deserialize, Serialize};

pub mod programs;
mod run;
pub use programs::ProgramShare;
pub use run::Profiler;

/// Samples per second per CPU: prime, so it does not beat with the
/// servers' own periodic work, and low: at 499 Hz the call-graph samples
/// cost the event-loop server 40% of its /hello rate on 2 cores (php-fpm
/// 24%), measured side by side with and without `--profile`.
pub const FREQUENCY_HZ: u32 = 99;

/// How long perf may take to say it records, or to write its data once
/// told to stop: bounds for a perf that hangs, not expected times (both
/// ended by perf's own answer or exit).
const ACK_BOUND: Duration = Duration::from_secs(60);
const STOP_BOUND: Duration = Duration::from_secs(120);

/// Whether `perf record` can run here, and if not why.
pub fn availability() -> Result<(), String> {
    match Command::new("perf").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Err(format!(
                "`perf --version` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
        Err(_) => return Err("perf is not installed (Debian: apt-get install linux-perf)".into()),
    }
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    match paranoid {
        Some(p) if p > 1 && !root => Err(format!(
            "kernel.perf_event_paranoid is {p}: perf may not record other processes as a user \
             (run as root, or sysctl kernel.perf_event_paranoid=1)"
        )),
        _ => Ok(()),
    }
}

/// A `perf record` running on a set of processes.
pub struct Recording {
    child: Child,
    data: PathBuf,
    fifos: Vec<PathBuf>,
}

/// Starts recording `pids` (every thread of each) into `data`, and returns
/// once perf says it records: it starts with its events disabled (`-D -1`)
/// and enables them on `enable` through a control FIFO, answering `ack`
/// on a second one, so the run that follows is covered from its start.
pub fn start(pids: &[u32], data: &Path) -> anyhow::Result<Recording> {
    if pids.is_empty() {
        bail!("no process to profile");
    }
    let list = pids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let ctl = data.with_extension("ctl");
    let ack = data.with_extension("ack");
    for fifo in [&ctl, &ack] {
        let _ = std::fs::remove_file(fifo);
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes())
            .context("a FIFO path with a NUL")?;
        if unsafe { libc::mkfifo(path.as_ptr(), 0o600) } != 0 {
            bail!(
                "cannot make the FIFO {}: {}",
                fifo.display(),
                std::io::Error::last_os_error()
            );
        }
    }
    let child = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-g", "-D", "-1"])
        .args(["-F", &FREQUENCY_HZ.to_string()])
        .arg(format!(
            "--control=fifo:{},{}",
            ctl.display(),
            ack.display()
        ))
        .args(["-p", &list, "-o"])
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start perf record")?;
    let mut recording = Recording {
        child,
        data: data.to_path_buf(),
        fifos: vec![ctl.clone(), ack.clone()],
    };
    recording.enable(&ctl, &ack)?;
    Ok(recording)
}

/// Where one side's samples went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Breakdown {
    /// CPU time in the profile, ns (the sum of the samples' periods).
    pub cpu_ns: u64,
    /// CPU per request, µs, in user space and in the kernel.
    pub user_us_per_request: f64,
    pub kernel_us_per_request: f64,
    /// Shares of the side's samples, %: the kernel's, and within it
    /// those under a TCP function and under the scheduler.
    pub kernel_pct: f64,
    pub kernel_tcp_pct: f64,
    pub kernel_sched_pct: f64,
    /// The profile's CPU time over the meter's for the same processes and
    /// run, %: perf starts and stops around the run, so it sees most of it,
    /// not all; the µs per request above are the meter's, split by the
    /// profile's shares. Absent where the run was not metered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_pct: Option<f64>,
    /// The side's samples by program (nginx and php-fpm, node, …), biggest
    /// first, % of its samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<ProgramShare>,
    /// Where a PHP process is among them: the share of the side's samples
    /// in PHP itself (its binary, extensions and JIT code; not libc, not
    /// the kernel), % ([`programs`] says why by binary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub php_pct: Option<f64>,
}

impl Breakdown {
    /// Takes CPU per request from the meter (`metered_us`, µs per request
    /// of the same processes over the same run) and keeps the profile's
    /// split of it.
    pub fn scale_to(&mut self, metered_us: f64) {
        let profiled = self.user_us_per_request + self.kernel_us_per_request;
        if metered_us <= 0.0 || profiled <= 0.0 {
            return;
        }
        self.coverage_pct = Some(100.0 * profiled / metered_us);
        self.kernel_us_per_request = metered_us * self.kernel_pct / 100.0;
        self.user_us_per_request = metered_us - self.kernel_us_per_request;
    }
}

/// A run's profile: the files written and each side's breakdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// The server's and the generator's flame graphs (SVG) and folded
    /// stacks, relative to the results directory.
    pub server_svg: Option<String>,
    pub generator_svg: Option<String>,
    pub server_folded: Option<String>,
    pub generator_folded: Option<String>,
    pub server: Breakdown,
    pub generator: Breakdown,
    /// Why there is no profile (perf missing, not permitted, failed).
    pub error: Option<String>,
}

impl Profile {
    pub fn failed(why: String) -> Profile {
        Profile {
            error: Some(why),
            ..Profile::default()
        }
    }
}

impl Recording {
    /// Sends `enable` and waits for perf's `ack`. Both FIFOs are opened
    /// read-write, which never blocks whether or not perf has opened its
    /// ends yet. The wait is ended by the ack or perf's exit; its bound
    /// (60 s) is only for a perf that hangs: on a busy machine perf took
    /// over 10 s to start.
    fn enable(&mut self, ctl: &Path, ack: &Path) -> anyhow::Result<()> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let open = |p: &Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p)
                .with_context(|| format!("cannot open {}", p.display()))
        };
        let (mut ctl, mut ack) = (open(ctl)?, open(ack)?);
        ctl.write_all(b"enable\n")
            .context("cannot write to perf's control FIFO")?;
        let deadline = Instant::now() + ACK_BOUND;
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        // perf writes `ack\n` and its C string's NUL.
        while !got.windows(4).any(|w| w == b"ack\n") {
            if let Some(status) = self.child.try_wait()? {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                bail!(
                    "perf record exited with {status} before recording: {}",
                    err.trim()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "perf record did not acknowledge `enable` within {} s",
                    ACK_BOUND.as_secs()
                );
            }
            match ack.read(&mut buf) {
                Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        Ok(())
    }

    /// Stops the recording and writes `<stem>.server.{folded,svg}` and
    /// `<stem>.generator.{folded,svg}` under `dir`: the samples of
    /// `server_pids` on one side, this process's on the other. `requests`:
    /// the run's, for CPU per request.
    pub fn finish(
        mut self,
        dir: &Path,
        stem: &str,
        title: &str,
        server_pids: &[u32],
        requests: u64,
    ) -> anyhow::Result<Profile> {
        // perf record writes its data when interrupted.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + STOP_BOUND;
        loop {
            if let Some(status) = self.child.try_wait()? {
                // perf writes its data, then raises the signal again.
                use std::os::unix::process::ExitStatusExt;
                if !status.success() && status.signal() != Some(libc::SIGINT) {
                    let mut err = String::new();
                    if let Some(mut e) = self.child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    bail!("perf record exited with {status}: {}", err.trim());
                }
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!(
                    "perf record did not stop within {} s of SIGINT",
                    STOP_BOUND.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // `+pid`: each sample says its process and its thread (`comm
        // PID/TID`), so threads are counted to their process.
        let script = Command::new("perf")
            .args(["script", "-F", "+pid", "-i"])
            .arg(&self.data)
            .stderr(Stdio::null())
            .output()
            .context("cannot run perf script")?;
        if !script.status.success() {
            bail!("perf script failed on {}", self.data.display());
        }
        let _ = std::fs::remove_file(&self.data);
        let text = String::from_utf8_lossy(&script.stdout);
        let samples = programs::samples(&text);
        let me = std::process::id();
        let (generator_samples, server_samples): (Vec<_>, Vec<_>) =
            samples.iter().partition(|s| s.pid == me);
        let mut options = CollapseOptions::default();
        options.include_pid = true;
        options.annotate_kernel = true;
        let mut folded = Vec::new();
        Folder::from(options)
            .collapse(&script.stdout[..], &mut folded)
            .context("cannot collapse perf's stacks")?;
        let folded = String::from_utf8_lossy(&folded);
        let (mut server, mut generator) = (Vec::new(), Vec::new());
        for line in folded.lines() {
            match pid_of(line) {
                Some(p) if p == me => generator.push(line),
                Some(p) if server_pids.contains(&p) => server.push(line),
                // A process of the tree that perf followed (a worker it
                // forked): the server's.
                Some(_) => server.push(line),
                None => {}
            }
        }
        let mut profile = Profile::default();
        for (side, lines, samples, which) in [
            ("server", &server, &server_samples, &mut profile.server),
            (
                "generator",
                &generator,
                &generator_samples,
                &mut profile.generator,
            ),
        ] {
            *which = breakdown(lines, requests);
            (which.programs, which.php_pct) = programs::shares(samples, programs::process_name);
            if lines.is_empty() {
                continue;
            }
            let folded_name = format!("{stem}.{side}.folded");
            let svg_name = format!("{stem}.{side}.svg");
            std::fs::write(dir.join(&folded_name), lines.join("\n") + "\n")
                .with_context(|| format!("cannot write {folded_name}"))?;
            let mut svg = Vec::new();
            let mut opts = inferno::flamegraph::Options::default();
            opts.title = format!("{title}: {side}");
            opts.count_name = "ns of CPU".into();
            inferno::flamegraph::from_lines(&mut opts, lines.iter().copied(), &mut svg)
                .context("cannot draw the flame graph")?;
            std::fs::File::create(dir.join(&svg_name))
                .and_then(|mut f| f.write_all(&svg))
                .with_context(|| format!("cannot write {svg_name}"))?;
            match side {
                "server" => {
                    profile.server_svg = Some(svg_name);
                    profile.server_folded = Some(folded_name);
                }
                _ => {
                    profile.generator_svg = Some(svg_name);
                    profile.generator_folded = Some(folded_name);
                }
            }
        }
        Ok(profile)
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.data);
        for f in &self.fifos {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// The pid of a folded line `comm-PID;frame;… count` (inferno's
/// `include_pid`; a comm may itself hold dashes).
fn pid_of(line: &str) -> Option<u32> {
    let first = line.split(';').next()?;
    first.rsplit('-').next()?.trim().parse().ok()
}

/// One side's breakdown from its folded lines.
pub fn breakdown(lines: &[&str], requests: u64) -> Breakdown {
    let (mut total, mut kernel, mut tcp, mut sched) = (0u64, 0u64, 0u64, 0u64);
    for line in lines {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(n) = count.trim().parse::<u64>() else {
            continue;
        };
        total += n;
        let frames: Vec<&str> = stack.split(';').collect();
        let leaf_in_kernel = frames.last().is_some_and(|f| f.ends_with("_[k]"));
        if !leaf_in_kernel {
            continue;
        }
        kernel += n;
        let kernel_frames = || frames.iter().filter(|f| f.ends_with("_[k]"));
        if kernel_frames().any(|f| f.starts_with("tcp_") || f.starts_with("__tcp_")) {
            tcp += n;
        }
        if kernel_frames().any(|f| {
            let f = f.trim_end_matches("_[k]");
            matches!(
                f,
                "schedule" | "__schedule" | "finish_task_switch" | "pick_next_task"
            ) || f.starts_with("finish_task_switch")
        }) {
            sched += n;
        }
    }
    let pct = |x: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * x as f64 / total as f64
        }
    };
    let us = |x: u64| {
        if requests == 0 {
            0.0
        } else {
            x as f64 / 1000.0 / requests as f64
        }
    };
    Breakdown {
        cpu_ns: total,
        user_us_per_request: us(total - kernel),
        kernel_us_per_request: us(kernel),
        kernel_pct: pct(kernel),
        kernel_tcp_pct: pct(tcp),
        kernel_sched_pct: pct(sched),
        coverage_pct: None,
        programs: Vec::new(),
        php_pct: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `perf record` of a busy process: its samples are the
    /// server's, the flame graph is drawn. Skipped where perf cannot run.
    #[test]
    fn a_busy_process_is_recorded_drawn_and_broken_down() {
        if let Err(why) = availability() {
            eprintln!("skipped: {why}");
            return;
        }
        /// The busy shell, killed on every path out of the test.
        struct Busy(Child);
        impl Drop for Busy {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let busy = Busy(
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let busy = &busy.0;
        let dir = tempfile::tempdir().unwrap();
        let rec = start(&[busy.id()], &dir.path().join("p.data")).unwrap();
        // Wait for samples by state: the shell's CPU time moving 0.3 s.
        let ticks = || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", busy.id())).unwrap();
            let f: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .collect();
            f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
        };
        // Counted from when perf acknowledged recording: the shell spun
        // while perf started.
        let from = ticks();
        // A bound only so that a broken case fails instead of hanging: the
        // ordering is the shell's CPU time, however busy the machine.
        let bound = Instant::now() + Duration::from_secs(120);
        while ticks() < from + 30 {
            assert!(Instant::now() < bound, "the busy shell got no CPU in 120 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        let p = rec
            .finish(dir.path(), "t", "busy", &[busy.id()], 1000)
            .unwrap();
        // At least 0.1 s of the shell's CPU was sampled, all of it the shell's.
        assert!(p.server.cpu_ns > 100_000_000, "{p:?}");
        assert_eq!(p.server.programs.len(), 1, "{p:?}");
        assert_eq!(p.server.programs[0].program, "sh");
        assert_eq!(p.server.php_pct, None);
        let svg = std::fs::read_to_string(dir.path().join(p.server_svg.unwrap())).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("busy: server"),
            "{}",
            &svg[..200]
        );
    }

    #[test]
    fn folded_lines_split_into_user_kernel_tcp_and_scheduler() {
        // Counts are ns of CPU (the samples' periods, added).
        let lines = [
            "event-loop-42;main;handle 60000",
            "event-loop-42;main;write;tcp_sendmsg_[k];__tcp_transmit_skb_[k] 30000",
            "event-loop-42;main;epoll_wait;__schedule_[k] 10000",
        ];
        assert_eq!(pid_of(lines[0]), Some(42));
        assert_eq!(pid_of("tokio-rt-w-7;x 1"), Some(7));
        let b = breakdown(&lines, 10);
        assert_eq!(b.cpu_ns, 100_000);
        assert_eq!(b.kernel_pct, 40.0);
        assert_eq!(b.kernel_tcp_pct, 30.0);
        assert_eq!(b.kernel_sched_pct, 10.0);
        // 60 µs in user space over 10 requests; 40 µs in the kernel.
        assert_eq!((b.user_us_per_request, b.kernel_us_per_request), (6.0, 4.0));
        // The meter saw 20 µs a request: the profile saw half; its split stays.
        let mut b = b;
        b.scale_to(20.0);
        assert_eq!(b.coverage_pct, Some(50.0));
        assert_eq!(
            (b.user_us_per_request, b.kernel_us_per_request),
            (12.0, 8.0)
        );
    }
}
