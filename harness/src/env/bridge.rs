//! `bridge`: the kernel path of Docker's default bridge network with
//! `userland-proxy: false`, built with `ip` and `nft`:
//!
//! ```text
//! netns bln<ID>: blp<ID> 198.18.K.2/24 ── veth ── blh<ID> ── bridge blb<ID> 198.18.K.1/24 (host)
//! nft table ip benchlab_<ID>:
//!   output      127.0.0.1:PUB  → dnat 198.18.K.2:PORT      (the published port)
//!   postrouting 127.0.0.0/8 out blb<ID> → masquerade        (so replies come back)
//!   prerouting  in blb<ID> 198.18.K.1:DB → dnat 127.0.0.1:DB (the database, from inside)
//! ```
//!
//! DNAT from and to 127.0.0.1 needs `net.ipv4.conf.all.route_localnet=1`:
//! set while any bridge of this process lives, the old value restored after
//! the last, across processes: the value found and the live holders are
//! kept in `/run/benchlab-route_localnet` under a `flock` of the sysctl
//! file, so parallel harnesses (and tests) never restore it under each
//! other; after a SIGKILL the next build removes the dead harness's links
//! and rules and restores the value it had found. Addresses come from 198.18.0.0/15 (RFC 2544, benchmarking),
//! one /24 per bridge. `<ID>` is the harness's pid in hex, `g`, a counter:
//! parallel runs never collide, and objects left by a dead harness (SIGKILL)
//! are recognised by their pid and removed by the next build.
//!
//! Teardown is idempotent (each object removed if present), runs on drop,
//! and every live bridge is registered so that the catalog's emergency
//! cleanup on a signal removes it too ([`teardown_all`]).
//!
//! Over 500 lines on purpose: one lifecycle (build, publish, verify,
//! tear down, sweep a dead run's leftovers) that must stay symmetric.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use anyhow::{bail, Context};

/// What the loss rules counted ([`Bridge::loss_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounters {
    /// Packets between host and namespace, both directions, dropped included.
    pub packets: u64,
    /// Packets the rules dropped.
    pub dropped: u64,
}

/// Each `counter packets N` of an `nft list` output, in order.
fn counter_packets(text: &str) -> Vec<u64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(3)
        .filter(|w| w[0] == "counter" && w[1] == "packets")
        .filter_map(|w| w[2].parse().ok())
        .collect()
}

/// What a teardown needs: names only, so that the signal thread can use it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Spec {
    netns: String,
    bridge: String,
    veth_host: String,
    table: String,
    /// This bridge holds a `route_localnet` reference.
    localnet: bool,
}

/// Live bridges of this process, by id.
static LIVE: Mutex<BTreeMap<String, Spec>> = Mutex::new(BTreeMap::new());
/// Held through a teardown, orderly or the signal path's: the signal path
/// exits the process right after its own, so it must wait for one under
/// way on the main thread, which has already taken its bridge out of
/// [`LIVE`]. Without it a second Ctrl-C during an orderly teardown exited
/// mid-way and left the namespace and the bridge behind.
static TEARING_DOWN: Mutex<()> = Mutex::new(());
/// `route_localnet`: how many bridges of this process need it (the value to
/// restore is kept across processes in [`LOCALNET_STATE`]).
static LOCALNET: Mutex<usize> = Mutex::new(0);
/// Subnets (third octet index, 0..512) in use by this process.
static SUBNETS: Mutex<Vec<u16>> = Mutex::new(Vec::new());
static COUNTER: AtomicU32 = AtomicU32::new(0);

const LOCALNET_PATH: &str = "/proc/sys/net/ipv4/conf/all/route_localnet";

/// The network environment, built; torn down on drop.
#[derive(Debug)]
pub struct Bridge {
    pub id: String,
    pub netns: String,
    pub bridge: String,
    pub veth_host: String,
    pub veth_ns: String,
    pub table: String,
    pub host_ip: Ipv4Addr,
    pub ns_ip: Ipv4Addr,
    subnet: u16,
    done: bool,
}

/// Root, `ip` and `nft`; `Err` says what is missing.
pub fn availability() -> Result<(), String> {
    if !crate::catalog::is_root() {
        return Err("needs root (network namespaces, links and nftables rules)".into());
    }
    for (prog, pkg) in [("ip", "iproute2"), ("nft", "nftables")] {
        if crate::catalog::find_program(&[prog]).is_none() {
            return Err(format!("needs `{prog}` (apt-get install {pkg})"));
        }
    }
    if !std::path::Path::new(LOCALNET_PATH).exists() {
        return Err(format!("{LOCALNET_PATH} is missing (no IPv4?)"));
    }
    Ok(())
}

/// Runs a command; an error names it and carries its stderr.
fn run(program: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    let path = crate::catalog::find_program(&[program])
        .with_context(|| format!("`{program}` is not installed"))?;
    let mut cmd = Command::new(path);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let shown = format!("{program} {}", args.join(" "));
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .with_context(|| format!("cannot feed `{shown}`"))?;
    }
    let out = child
        .wait_with_output()
        .with_context(|| format!("`{shown}` did not finish"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> anyhow::Result<String> {
    run("ip", args, None)
}

fn link_exists(name: &str) -> bool {
    ip(&["link", "show", "dev", name]).is_ok()
}

fn netns_exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

fn table_exists(table: &str) -> bool {
    run("nft", &["list", "table", "ip", table], None).is_ok()
}

/// Who holds `route_localnet` across processes: `ORIGINAL\nPID\nPID…`,
/// read and written under an exclusive `flock` of the sysctl file itself
/// (which always exists); removed when the last holder lets go. Holders that
/// no longer run (SIGKILL) are dropped, and their ORIGINAL still restored.
const LOCALNET_STATE: &str = "/run/benchlab-route_localnet";

/// Runs `f(original, live holders)` under the lock; `f` returns the state
/// to write (`None`: remove it).
fn with_localnet_state(
    f: impl FnOnce(Option<String>, Vec<u32>) -> anyhow::Result<Option<(String, Vec<u32>)>>,
) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    let lock = std::fs::File::open(LOCALNET_PATH)
        .with_context(|| format!("cannot open {LOCALNET_PATH}"))?;
    // SAFETY: flock on a file descriptor we own; released when it closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot lock {LOCALNET_PATH}"));
    }
    let text = std::fs::read_to_string(LOCALNET_STATE).unwrap_or_default();
    let mut lines = text.lines();
    let original = lines
        .next()
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_string);
    let holders: Vec<u32> = lines
        .filter_map(|l| l.trim().parse().ok())
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    match f(original, holders)? {
        Some((original, holders)) => {
            let mut out = original;
            for p in holders {
                out.push_str(&format!("\n{p}"));
            }
            out.push('\n');
            std::fs::write(LOCALNET_STATE, out)
                .with_context(|| format!("cannot write {LOCALNET_STATE}"))?;
        }
        None => {
            let _ = std::fs::remove_file(LOCALNET_STATE);
        }
    }
    drop(lock);
    Ok(())
}

/// Sets `route_localnet=1` for this process (counted per process: the
/// first bridge of the process registers it with the other processes).
fn acquire_localnet() -> anyhow::Result<()> {
    let mut g = LOCALNET.lock().unwrap_or_else(|e| e.into_inner());
    if *g == 0 {
        let me = std::process::id();
        with_localnet_state(|original, mut holders| {
            let original = match original {
                Some(o) => o,
                None => std::fs::read_to_string(LOCALNET_PATH)
                    .with_context(|| format!("cannot read {LOCALNET_PATH}"))?
                    .trim()
                    .to_string(),
            };
            std::fs::write(LOCALNET_PATH, "1")
                .with_context(|| format!("cannot set {LOCALNET_PATH} to 1"))?;
            holders.retain(|&p| p != me);
            holders.push(me);
            Ok(Some((original, holders)))
        })?;
    }
    *g += 1;
    Ok(())
}

/// Lets go of `route_localnet`; the last holder of all processes restores it.
fn release_localnet() -> Option<String> {
    let mut g = LOCALNET.lock().unwrap_or_else(|e| e.into_inner());
    if *g == 0 {
        return None;
    }
    *g -= 1;
    if *g > 0 {
        return None;
    }
    let me = std::process::id();
    let r = with_localnet_state(|original, mut holders| {
        holders.retain(|&p| p != me);
        if !holders.is_empty() {
            return Ok(original.map(|o| (o, holders)));
        }
        if let Some(o) = original {
            std::fs::write(LOCALNET_PATH, &o)
                .with_context(|| format!("cannot restore {LOCALNET_PATH} to {o}"))?;
        }
        Ok(None)
    });
    r.err().map(|e| format!("{e:#}"))
}

/// After a harness was SIGKILLed while it held `route_localnet`: restores
/// the value it found, if no live process holds it any more.
fn restore_abandoned_localnet() -> Option<String> {
    if *LOCALNET.lock().unwrap_or_else(|e| e.into_inner()) > 0
        || !std::path::Path::new(LOCALNET_STATE).exists()
    {
        return None;
    }
    let mut restored = None;
    let r = with_localnet_state(|original, holders| {
        if !holders.is_empty() {
            return Ok(original.map(|o| (o, holders)));
        }
        if let Some(o) = original {
            std::fs::write(LOCALNET_PATH, &o)
                .with_context(|| format!("cannot restore {LOCALNET_PATH} to {o}"))?;
            restored = Some(format!(
                "restored {LOCALNET_PATH} to {o}, left at 1 by a harness that no longer runs"
            ));
        }
        Ok(None)
    });
    match r {
        Ok(()) => restored,
        Err(e) => Some(format!("{e:#}")),
    }
}

/// The /24 with index `k` (0..512) of 198.18.0.0/15.
fn subnet(k: u16) -> (Ipv4Addr, Ipv4Addr) {
    let b = 18 + (k / 256) as u8;
    let c = (k % 256) as u8;
    (Ipv4Addr::new(198, b, c, 1), Ipv4Addr::new(198, b, c, 2))
}

/// A /24 of 198.18.0.0/15 that no interface here uses yet.
fn pick_subnet(seed: u32) -> anyhow::Result<u16> {
    let addrs = ip(&["-o", "-4", "addr", "show"]).unwrap_or_default();
    let mut used = SUBNETS.lock().unwrap_or_else(|e| e.into_inner());
    for i in 0..512u32 {
        // Skip 198.18.0.0/24: the first address people pick by hand.
        let k = (1 + (seed.wrapping_mul(7919) + i) % 511) as u16;
        let (host, _) = subnet(k);
        let prefix = {
            let o = host.octets();
            format!(" {}.{}.{}.", o[0], o[1], o[2])
        };
        if !used.contains(&k) && !addrs.contains(&prefix) {
            used.push(k);
            return Ok(k);
        }
    }
    bail!("no free /24 left in 198.18.0.0/15")
}

/// Removes what a harness that no longer runs left behind (found by the pid
/// in the names). Returns what was removed.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let links = ip(&["-o", "link", "show", "type", "bridge"]).unwrap_or_default();
    let mut ids: Vec<String> = links
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .filter_map(|n| n.split('@').next())
        .filter_map(|n| n.strip_prefix("blb"))
        .map(str::to_string)
        .collect();
    if let Ok(dir) = std::fs::read_dir("/run/netns") {
        ids.extend(
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| n.strip_prefix("bln").map(str::to_string)),
        );
    }
    ids.sort();
    ids.dedup();
    for id in ids {
        let Some(pid) = id
            .split_once('g')
            .and_then(|(p, _)| u32::from_str_radix(p, 16).ok())
        else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let spec = Spec::for_id(&id);
        let errors = spec.teardown();
        removed.push(if errors.is_empty() {
            format!("removed the bridge {id} of a harness that no longer runs (pid {pid})")
        } else {
            format!("bridge {id} of pid {pid}: {}", errors.join("; "))
        });
    }
    removed.extend(restore_abandoned_localnet());
    removed
}

impl Spec {
    fn for_id(id: &str) -> Spec {
        Spec {
            netns: format!("bln{id}"),
            bridge: format!("blb{id}"),
            veth_host: format!("blh{id}"),
            table: format!("benchlab_{id}"),
            localnet: false,
        }
    }

    /// Removes each object if present; returns what failed.
    fn teardown(&self) -> Vec<String> {
        let mut errors = Vec::new();
        let mut check = |r: anyhow::Result<String>| {
            if let Err(e) = r {
                errors.push(format!("{e:#}"));
            }
        };
        if table_exists(&self.table) {
            check(run("nft", &["delete", "table", "ip", &self.table], None));
        }
        if netns_exists(&self.netns) {
            // Anything still inside is ours (a server that outlived its stop).
            if let Ok(pids) = ip(&["netns", "pids", &self.netns]) {
                for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                    // SAFETY: a process in a namespace this harness made.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        // The veth pair before the namespace: deleting the namespace
        // destroys its end, and with it ours, asynchronously, so a later
        // `link delete` could race the kernel and find nothing.
        if link_exists(&self.veth_host) {
            check(ip(&["link", "delete", &self.veth_host]).or_else(|e| {
                if link_exists(&self.veth_host) {
                    Err(e)
                } else {
                    Ok(String::new())
                }
            }));
        }
        if netns_exists(&self.netns) {
            check(ip(&["netns", "delete", &self.netns]));
        }
        if link_exists(&self.bridge) {
            check(ip(&["link", "delete", &self.bridge]));
        }
        if self.localnet {
            errors.extend(release_localnet());
        }
        errors
    }
}

/// Tears down every live bridge of this process (the signal path).
pub fn teardown_all() {
    let _serial = TEARING_DOWN.lock().unwrap_or_else(|e| e.into_inner());
    let specs: Vec<(String, Spec)> = {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *live).into_iter().collect()
    };
    for (id, spec) in specs {
        for e in spec.teardown() {
            eprintln!("harness: bridge {id}: {e}");
        }
    }
    // The process exits right after this hook: give back this process's
    // whole hold on route_localnet now, whatever any count says (a later
    // release then finds none).
    if let Some(e) = release_all_localnet() {
        eprintln!("harness: {e}");
    }
}

/// Gives back every hold of this process on `route_localnet` at once.
fn release_all_localnet() -> Option<String> {
    {
        let mut g = LOCALNET.lock().unwrap_or_else(|e| e.into_inner());
        if *g == 0 {
            return None;
        }
        *g = 1;
    }
    release_localnet()
}

/// A namespace file's identity: the device and inode `stat` gives
/// (`/run/netns/NAME` is a bind mount of the namespace's nsfs file, the same
/// one `/proc/PID/ns/net` of each of its processes refers to).
fn ns_identity(path: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Where one process of a server's tree is.
#[derive(Debug, PartialEq, Eq)]
enum Placed {
    Inside,
    /// Alive (the same process that was listed) in another namespace.
    Outside,
    /// Exited since it was listed: gone, a zombie, or its pid reused.
    Exited,
    /// Alive, yet its namespace could not be read for a whole second.
    Unreadable(String),
}

/// The process `listed` (as the tree was read) against the namespace `ns`.
fn placement_of(listed: &crate::procfs::Stat, ns: (u64, u64)) -> Placed {
    let path = format!("/proc/{}/ns/net", listed.pid);
    // Still the process that was listed, and not yet a zombie?
    let alive = || {
        crate::procfs::stat(listed.pid).is_some_and(|now| {
            now.start_ticks == listed.start_ticks && now.state != b'Z' && now.state != b'X'
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let seen = ns_identity(std::path::Path::new(&path));
        // Read after the namespace: if it is the same live process now, the
        // namespace read was that process's.
        if !alive() {
            return Placed::Exited;
        }
        match seen {
            Ok(id) if id == ns => return Placed::Inside,
            Ok(_) => return Placed::Outside,
            // An exiting process drops its namespaces before it turns into
            // a zombie: wait for that, briefly.
            Err(e) if std::time::Instant::now() >= deadline => {
                return Placed::Unreadable(e.to_string())
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

impl Bridge {
    /// Builds it; on any failure, removes what was made and says which step failed.
    pub fn build(db_port: Option<u16>) -> anyhow::Result<Bridge> {
        availability().map_err(|why| anyhow::anyhow!("the bridge environment {why}"))?;
        crate::catalog::supervise::register_cleanup(teardown_all);
        for note in sweep_stale() {
            eprintln!("harness: {note}");
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let id = format!("{:x}g{n:x}", std::process::id());
        let k = pick_subnet(std::process::id() ^ (n << 16))?;
        let (host_ip, ns_ip) = subnet(k);
        // route_localnet first: a teardown (also the signal path's) then
        // always has it to give back.
        acquire_localnet()?;
        let spec = Spec {
            localnet: true,
            ..Spec::for_id(&id)
        };
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), spec.clone());
        let mut b = Bridge {
            veth_ns: format!("blp{id}"),
            netns: spec.netns.clone(),
            bridge: spec.bridge.clone(),
            veth_host: spec.veth_host.clone(),
            table: spec.table.clone(),
            id,
            host_ip,
            ns_ip,
            subnet: k,
            done: false,
        };
        match b.make(db_port) {
            Ok(()) => Ok(b),
            Err(e) => {
                let errors = b.teardown();
                if errors.is_empty() {
                    Err(e.context("cannot build the bridge environment (removed what was made)"))
                } else {
                    Err(e.context(format!(
                        "cannot build the bridge environment; cleaning up also failed: {}",
                        errors.join("; ")
                    )))
                }
            }
        }
    }

    fn make(&mut self, db_port: Option<u16>) -> anyhow::Result<()> {
        let host_cidr = format!("{}/24", self.host_ip);
        let ns_cidr = format!("{}/24", self.ns_ip);
        let (ns, br, vh, vn) = (
            self.netns.as_str(),
            self.bridge.as_str(),
            self.veth_host.as_str(),
            self.veth_ns.as_str(),
        );
        ip(&["netns", "add", ns])?;
        ip(&["link", "add", br, "type", "bridge"])?;
        ip(&["addr", "add", &host_cidr, "dev", br])?;
        ip(&["link", "set", br, "up"])?;
        ip(&["link", "add", vh, "type", "veth", "peer", "name", vn])?;
        ip(&["link", "set", vn, "netns", ns])?;
        ip(&["link", "set", vh, "master", br])?;
        ip(&["link", "set", vh, "up"])?;
        ip(&["-n", ns, "addr", "add", &ns_cidr, "dev", vn])?;
        ip(&["-n", ns, "link", "set", vn, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        let db_rule = db_port.map_or(String::new(), |p| {
            format!(
                "\t\tiifname \"{br}\" ip daddr {} tcp dport {p} dnat to 127.0.0.1:{p}\n",
                self.host_ip
            )
        });
        let rules = format!(
            "table ip {t} {{\n\
             \tchain output {{\n\t\ttype nat hook output priority -100;\n\t}}\n\
             \tchain prerouting {{\n\t\ttype nat hook prerouting priority -100;\n{db_rule}\t}}\n\
             \tchain postrouting {{\n\t\ttype nat hook postrouting priority 100;\n\
             \t\toifname \"{br}\" ip saddr 127.0.0.0/8 masquerade\n\t}}\n\
             }}\n",
            t = self.table
        );
        run("nft", &["-f", "-"], Some(&rules)).context("cannot add the NAT rules")?;
        Ok(())
    }

    /// Publishes `server` (an address in the namespace) on a free port of
    /// 127.0.0.1 by DNAT; returns that address.
    pub fn publish(&self, server: SocketAddr) -> anyhow::Result<SocketAddr> {
        let port = crate::catalog::free_port()?;
        let rule = format!(
            "add rule ip {} output ip daddr 127.0.0.1 tcp dport {port} dnat to {server}\n",
            self.table
        );
        run("nft", &["-f", "-"], Some(&rule))
            .with_context(|| format!("cannot publish {server} on 127.0.0.1:{port}"))?;
        Ok(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Drops `per_mille` ‰ of the IPv4 packets between the host and the
    /// namespace, each direction on its own (`numgen random mod 1000 < N`
    /// in this bridge's own table: an `output` chain for what the host
    /// sends into the bridge, an `input` chain for what comes back; TCP and
    /// UDP alike). Each call replaces the last one's rules, so their
    /// counters start again at 0; 0 ‰ keeps the rules, dropping nothing.
    /// Removed with the table at teardown.
    pub fn set_loss(&self, per_mille: u32) -> anyhow::Result<()> {
        if per_mille > 1000 {
            bail!("a loss of {per_mille}‰ is more than all packets");
        }
        let (t, br) = (&self.table, &self.bridge);
        let mut rules = String::new();
        for (chain, hook, dir) in [
            ("loss_out", "output", "oifname"),
            ("loss_in", "input", "iifname"),
        ] {
            rules += &format!(
                "add chain ip {t} {chain} {{ type filter hook {hook} priority 0; }}\n\
                 flush chain ip {t} {chain}\n\
                 add rule ip {t} {chain} {dir} \"{br}\" counter\n\
                 add rule ip {t} {chain} {dir} \"{br}\" numgen random mod 1000 < {per_mille} counter drop\n"
            );
        }
        run("nft", &["-f", "-"], Some(&rules))
            .with_context(|| format!("cannot set a loss of {per_mille}‰ on {br}"))?;
        Ok(())
    }

    /// The loss rules' counters since the last [`Bridge::set_loss`]: the
    /// packets that crossed between host and namespace, both directions,
    /// and those dropped.
    pub fn loss_counters(&self) -> anyhow::Result<LossCounters> {
        let mut c = LossCounters::default();
        for chain in ["loss_out", "loss_in"] {
            let text = run("nft", &["list", "chain", "ip", &self.table, chain], None)?;
            let counts = counter_packets(&text);
            let [seen, dropped] = counts[..] else {
                bail!(
                    "nft list chain {} {chain}: expected 2 counters, found {}",
                    self.table,
                    counts.len()
                );
            };
            c.packets += seen;
            c.dropped += dropped;
        }
        Ok(c)
    }

    /// Every process of the server's tree is in the namespace.
    ///
    /// The tree moves while it is checked: a multi-process server forks
    /// its workers after its first one answers (Swoole's master does), and
    /// processes exit. Each process is therefore checked on its own, by
    /// comparing `/proc/PID/ns/net` with the namespace (no separate listing
    /// of the namespace to race against), and the tree is re-read for the
    /// processes born meanwhile. A process that exited between the listing
    /// and its check (gone, a zombie, its pid reused) is left out; a live
    /// process outside the namespace always fails the check.
    pub fn verify(&self, server_pids: &[u32]) -> anyhow::Result<Vec<String>> {
        let path = std::path::Path::new("/run/netns").join(&self.netns);
        let ns = ns_identity(&path)
            .with_context(|| format!("cannot read the namespace {}", path.display()))?;
        let mut inside: BTreeMap<i32, u64> = BTreeMap::new();
        let mut exited = 0usize;
        // The first listing, then up to 3 more for the processes born while
        // the previous one was checked (they inherit their parent's
        // namespace; re-reading catches one that left it).
        for _ in 0..4 {
            let fresh: Vec<_> = crate::procfs::tree(server_pids)
                .into_iter()
                .filter(|s| inside.get(&s.pid) != Some(&s.start_ticks))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for s in fresh {
                match placement_of(&s, ns) {
                    Placed::Inside => {
                        inside.insert(s.pid, s.start_ticks);
                    }
                    Placed::Exited => exited += 1,
                    Placed::Outside => bail!(
                        "server process {} is not in the namespace {}",
                        s.pid,
                        self.netns
                    ),
                    Placed::Unreadable(e) => bail!(
                        "server process {} runs, but its namespace cannot be read: {e}",
                        s.pid
                    ),
                }
            }
        }
        let Some(first) = inside.keys().next() else {
            bail!("no server process to verify");
        };
        let gone = if exited > 0 {
            format!(", {exited} exited while checked")
        } else {
            String::new()
        };
        Ok(vec![format!(
            "{} server process(es) (pids {first}..) in netns {}{gone}",
            inside.len(),
            self.netns
        )])
    }

    /// Removes everything it made (idempotent); returns what failed.
    pub fn teardown(&mut self) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let _serial = TEARING_DOWN.lock().unwrap_or_else(|e| e.into_inner());
        let spec = LIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        let errors = match spec {
            Some(s) => s.teardown(),
            // Already torn down by the signal path.
            None => Vec::new(),
        };
        SUBNETS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&k| k != self.subnet);
        errors
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        for e in self.teardown() {
            eprintln!("harness: bridge {}: {e}", self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_placed_by_its_namespace_file_and_an_exited_one_is_left_out() {
        use crate::procfs;
        let me = procfs::stat(std::process::id() as i32).unwrap();
        let mine = ns_identity(std::path::Path::new("/proc/self/ns/net")).unwrap();
        assert_eq!(placement_of(&me, mine), Placed::Inside);
        assert_eq!(placement_of(&me, (mine.0, mine.1 + 1)), Placed::Outside);
        // A child listed, then reaped: it exited between listing and check.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let listed = procfs::stat(child.id() as i32);
        child.wait().unwrap();
        if let Some(listed) = listed {
            assert_eq!(placement_of(&listed, mine), Placed::Exited);
        }
        // A pid now held by another process (same pid, other start time).
        let reused = procfs::Stat {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert_eq!(placement_of(&reused, mine), Placed::Exited);
    }

    #[test]
    fn loss_counters_are_read_in_rule_order() {
        let text = "table ip benchlab_1g0 {\n\tchain loss_out {\n\t\ttype filter hook output priority filter; policy accept;\n\
                    \t\toifname \"blb1g0\" counter packets 1200 bytes 99000\n\
                    \t\toifname \"blb1g0\" numgen random mod 1000 < 20 counter packets 25 bytes 2000 drop\n\t}\n}\n";
        assert_eq!(counter_packets(text), vec![1200, 25]);
        assert!(counter_packets("chain x { }").is_empty());
    }

    #[test]
    fn subnets_stay_in_the_benchmarking_range() {
        for k in [0u16, 1, 255, 256, 511] {
            let (h, n) = subnet(k);
            let o = h.octets();
            assert_eq!(o[0], 198);
            assert!(o[1] == 18 || o[1] == 19);
            assert_eq!(n.octets()[3], 2);
        }
        let s = Spec::for_id("1f2eg3");
        assert!(s.bridge.len() <= 15 && s.veth_host.len() <= 15);
        assert_eq!(s.table, "benchlab_1f2eg3");
    }
}
