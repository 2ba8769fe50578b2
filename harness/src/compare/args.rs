//! The command line of `compare`, `servers` and `report`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

pub use crate::catalog::php_jit::PhpJit;
pub use crate::lab::tools::LoadTool;

use crate::lab::args::LabArgs;
use crate::units::parse_duration;

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Every selected server that can run here is started on a free port (as its
own process group, in the harness's session), verified, warmed up, loaded
--runs times and stopped, for each workload and concurrency level. Servers
that cannot run are listed with the reason and skipped. Without
--mysql-url a private MariaDB is started under a temp dir and removed at
the end. Before loading, each server goes through every contract row
(harness verify: failing rows are reported beside its numbers; a workload
whose own answer fails is not loaded) and its /config is printed side by
side with the others, with warnings where settings differ (workers, DB
pool, JIT, debug).

RPS counts responses that matched the contract exactly (status and body):
a server that answers 200 with an error body gets failures, not speed.
CPU % is the server's process tree (user+sys, 100% = one core) over the
measured runs, RSS its peak; CPU µs/req is that CPU per verified response
(the figure HttpArena scores by). A --target (started elsewhere) is metered
the same way when its processes are named (--target-pid NAME=PID,
--target-container NAME=CONTAINER); otherwise its CPU cells read `not
measured`. Results go to results/<UTC time>/:
results.json, report.md and report.html (SVG charts). Ctrl-C stops
everything the harness started and writes what was measured.

Exit status: 0 when at least one cell was measured (servers that failed
are in the table and the JSON), 1 when none was, 99 when a --threshold
failed on some cell, 130 after Ctrl-C.

At your load (--rate, --slo): closed-loop numbers are a server at
saturation; latency there is the queue its connections build. A
fixed-rate cell offers a rate on an open loop and counts each request's
latency from when it was meant to be sent, so queueing and stalls show;
it holds the rate when ≥ 95% was achieved with nothing failed. --slo
searches each server's highest rate held within the SLO. Both run after
the closed-loop cells, each server started once for all its rates.

Workloads: hello (/hello), work (/work), cpu (/cpu), db (/db), sleep
(/sleep?ms=10), or any contract path: /cpu?n=5000, db?sleep_ms=10.

Protocols (--protocol, a row per framing, swept like -c): h1; h1-pipelined
(--pipeline N deep); h2c, HTTP/2 by prior knowledge (nginx-static, Node.js
and php-fpm's nginx get an h2c port of their own); h2, HTTP/2 by ALPN,
with --tls; h3, HTTP/3 over QUIC on the UDP port of the TCP one's number,
with --tls and --streams (event-loop, started with --h3, and caddy-static
serve it; nginx 1.22, php-fpm behind it, Node.js and the other Rust
servers do not, and their rows say so). Each server is checked over the
protocol first (h2 and h3: the contract's HTTP/2 rows, as harness verify
--h2 / --h3 runs them, and each workload's answer); one that does not
serve it is NOT SERVED with why. Each run records what it spoke, as
the engine saw it: the protocol and the streams the server's SETTINGS
allowed (`hello h2c ×16` in the table).

Examples:
  harness compare
  harness compare --servers coroutine,node,php-fpm --workloads work -c 100 -d 30s --runs 3 --baseline php-fpm
  harness compare --target swoole=http://127.0.0.1:9501 --target rr=http://127.0.0.1:8080 --mysql-url mysql://bench:bench@127.0.0.1:3306/bench
  harness compare --target rr=http://127.0.0.1:8080 --target-pid rr=$(pgrep -xo rr) --servers roadrunner
  harness compare --target sw=http://127.0.0.1:9501 --target-container sw=my-swoole
  harness compare -c 1,10,100,400 --workloads hello,db?sleep_ms=10
  harness compare --servers worker-pool,php-fpm --load-tool ab
  harness compare --servers php-fpm --php-jit off --out results/jit-off
  harness compare --env bridge --servers coroutine,php-fpm --workloads hello,work
  harness compare --tls --servers event-loop,nginx-static,php-fpm --workloads hello
  harness compare --servers event-loop,nginx-static,node,php-fpm --workloads hello --protocol h1,h2c -c 4 --streams 1,16,100
  harness compare --tls --protocol h2 --servers event-loop,nginx-static,php-fpm --workloads hello
  harness compare --tls --protocol h1,h2,h3 --streams 16 --servers event-loop,caddy-static,nginx-static --workloads hello
  harness compare --tls --servers event-loop,coroutine,node --workloads ws-echo,ws-hold,ws-room
  harness compare --servers event-loop,php-fpm,node --workloads hello,work --rate 25%,50%,75%
  harness compare --servers worker-pool,php-fpm --workloads 'sleep?ms=20' --slo 'p(99)<100ms' --runs 1
  harness compare --servers event-loop --workloads hello --threshold 'p(99)<20ms' --threshold 'rate<0.001'
  harness servers
  harness report results/2026-11-30T02-40-00Z")]
#[command(mut_arg("servers", |a| a.help(
    "Servers from the catalog (`harness servers`), comma-separated. \
     Default: every entry (those that cannot run here are listed and skipped)"
)))]
pub struct CompareArgs {
    #[command(flatten)]
    pub lab: LabArgs,

    /// A server started elsewhere (Docker, another host's port): NAME=URL.
    /// Repeatable. With --target and no --servers, only the targets run.
    #[arg(long = "target", value_name = "NAME=URL")]
    pub targets: Vec<String>,

    /// The process of --target NAME, on this host: NAME=PID (rr's, php-fpm's
    /// master, Swoole's master). Its CPU, RSS and the machine's other load
    /// are then metered like a catalog server's, its children (rr's PHP
    /// workers, php-fpm's pool) and process group included. Repeatable.
    /// Without it (or --target-container), a target's CPU is not measured.
    #[arg(long = "target-pid", value_name = "NAME=PID")]
    pub target_pids: Vec<String>,

    /// The Docker container of --target NAME: NAME=CONTAINER (name or id).
    /// Every process of its cgroup is metered, with their children, as
    /// --target-pid does for one process. Repeatable.
    #[arg(long = "target-container", value_name = "NAME=CONTAINER")]
    pub target_containers: Vec<String>,

    /// Workloads, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "hello,work",
        value_name = "LIST"
    )]
    pub workloads: Vec<String>,

    /// Concurrency levels (connections), comma-separated: one row per level.
    #[arg(
        short = 'c',
        long = "connections",
        value_delimiter = ',',
        default_value = "100",
        value_name = "LIST"
    )]
    pub connections: Vec<usize>,

    /// Length of each measured run.
    #[arg(short = 'd', long, default_value = "8s", value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Measured runs per server, workload and level. 4 is the fewest with
    /// which `harness diff` of two comparisons can find a difference at all
    /// (its exact rank test at α = 0.05: 2 / C(8, 4) = 0.029; with 3 a side
    /// the smallest p is 0.1).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub runs: u32,

    /// Load before the measured runs of each turn (each start of a server),
    /// not counted.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub warmup: Duration,

    /// Ratios are to this server (default: php-fpm if it ran, else the first).
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,

    /// What drives the load: the built-in engine, or ab / wrk as a cross-check.
    #[arg(long, value_enum, default_value_t = LoadTool::Harness)]
    pub load_tool: LoadTool,

    /// A connection per request (as ab without -k).
    #[arg(long)]
    pub no_keepalive: bool,

    /// How the runs frame their requests, comma-separated, a row per
    /// protocol: HTTP/1.1 one at a time (h1), pipelined (h1-pipelined,
    /// `--pipeline`), HTTP/2 by prior knowledge in the clear (h2c,
    /// `--streams`; where a server needs a port of its own for it, it is
    /// given one), HTTP/2 by ALPN over TLS (h2, with --tls; a server
    /// whose TLS does not pick h2 is named as not serving it), or HTTP/3
    /// over QUIC (h3, with --tls, `--streams`; on the UDP port of the TCP
    /// one's number; a server that cannot serve it is named with why).
    /// Every server is checked over the protocol before it is loaded, and
    /// every run records the framing it really spoke.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "h1",
        value_name = "LIST"
    )]
    pub protocol: Vec<Protocol>,

    /// `--protocol h1-pipelined`: requests in flight per connection,
    /// comma-separated, a row per depth (default 16). `ws-echo`, `ws-room`:
    /// messages in flight per connection, one count (default 1), recorded
    /// in the settings.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub pipeline: Vec<u16>,

    /// h2c, h2 and h3: streams in flight per connection, comma-separated:
    /// a row per count (over HTTP/2, fewer if the server's SETTINGS allow
    /// fewer; the run records how many).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "100",
        value_name = "LIST"
    )]
    pub streams: Vec<u16>,

    /// Engine threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,

    /// A request without a complete response after this long fails.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Duration,

    /// The OPcache JIT of the PHP servers (php-fpm, Swoole, RoadRunner's
    /// workers): tracing (the seed's; `on` is PHP's name for it), function,
    /// or off. Each server's /config shows what it runs.
    #[arg(long, value_enum, default_value_t = PhpJit::Tracing, value_name = "MODE")]
    pub php_jit: PhpJit,

    /// Record each measured run with `perf record` (a software clock at
    /// 99 Hz, with call graphs): the server's process tree and the load
    /// generator, each a flame graph (profiles/ in the results directory)
    /// and a breakdown (user, kernel, its TCP path and scheduler, µs per
    /// request). Where perf cannot run, the runs go on and the report says
    /// why.
    #[arg(long)]
    pub profile: bool,

    /// How the measured runs are ordered: `interleaved` takes run k of
    /// every cell before run k+1 of any (each server restarted, re-verified
    /// and warmed up for each of its turns), so that whatever drifts — a
    /// neighbour's build, the database warming, the CPU's clock — lands on
    /// every server alike; `sequential` takes a cell's runs back to back.
    #[arg(long, value_enum, default_value_t = Order::Interleaved)]
    pub order: Order,

    /// Shuffle the cells of each interleaved round with this seed (recorded
    /// in results.json; default: the same order every round).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Where the servers run: bare, pinned, bridge-direct, bridge, bridge-proxy
    /// (emulated), or the real Docker Engine: docker, docker-host,
    /// docker-host-pinned (see `harness calibrate --help`); or tls-proxy (on
    /// loopback behind an nginx terminating TLS, metered with the server; it
    /// passes WebSocket upgrades on, so the ws-* workloads run as wss://). Every process of
    /// each server (nginx and php-fpm, node, the Rust servers) is placed; a
    /// --target server runs where it was started and is skipped with the reason.
    #[arg(long, default_value = "bare", value_name = "ENV")]
    pub env: String,

    /// Over TLS: every server terminates TLS itself (the Rust servers'
    /// --tls-cert, Node.js's https, nginx's `listen … ssl`) with a
    /// certificate made for the run (a private CA and an ECDSA P-256
    /// certificate; nothing from the system's trust store), verify and the
    /// conformance section run over TLS before loading, and the load speaks
    /// TLS trusting only that CA (`wss://` for the WebSocket workloads). A
    /// server that cannot is skipped with why.
    #[arg(long)]
    pub tls: bool,

    /// Fixed-rate cells, after the closed-loop ones: each server loaded at
    /// these offered rates on an open loop (latency from each request's
    /// intended send), comma-separated: per second (1000, 20k) or a share
    /// of the server's closed-loop RPS measured first in the same run (25%).
    /// Each cell says whether it held the rate (≥ 95% achieved, 0 failed),
    /// its p50…max, the server's CPU per request, cores and RSS, and the
    /// generator's own CPU and lateness. HTTP workloads (a cell per
    /// --protocol, 25% of that protocol's closed-loop RPS) and ws-echo
    /// (messages per second). The open loop sends on -c's largest level of
    /// connections, more where 50 ms of the rate needs them (up to 2,000).
    #[arg(long = "rate", value_delimiter = ',', value_name = "LIST",
          value_parser = super::rate_spec::RateSpec::parse)]
    pub rates: Vec<super::rate_spec::RateSpec>,

    /// Capacity under an SLO, k6's threshold syntax (repeatable: all must
    /// pass): per server, the highest offered rate it holds within it —
    /// a ramp from a quarter of its closed-loop RPS, doubling, then
    /// bisection to within 5%, each step a fixed-rate run (--rate-duration;
    /// a step that fails is run once more, and fails only twice) — beside
    /// its closed-loop RPS, with CPU per request and p99 at half
    /// that capacity. With --runs N > 1, N searches: their median and
    /// range. E.g. --slo 'p(99)<50ms' --slo 'rate<0.001'.
    #[arg(long = "slo", value_name = "EXPR", value_parser = crate::thresholds::parse_arg)]
    pub slo: Vec<crate::thresholds::Threshold>,

    /// Judged on every cell, closed-loop and fixed-rate, k6's syntax
    /// (repeatable): `p(99)<20ms`, `rate<0.01`, `rps>10000`. Each failure
    /// is listed after the table; the exit code is then 99.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = crate::thresholds::parse_arg)]
    pub thresholds: Vec<crate::thresholds::Threshold>,

    /// Length of each fixed-rate run (--rate, and each step of --slo),
    /// after 1 s at the rate uncounted (its connections opening).
    #[arg(long, default_value = "3s", value_parser = parse_duration, value_name = "DURATION")]
    pub rate_duration: Duration,

    /// --tls: the one protocol version every client speaks.
    #[arg(long, value_enum, default_value_t = crate::engine::TlsVersion::Tls13, value_name = "1.2|1.3", requires = "tls")]
    pub tls_version: crate::engine::TlsVersion,
}

/// The order of the measured runs (`--order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    Interleaved,
    Sequential,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Interleaved => "interleaved",
            Order::Sequential => "sequential",
        }
    }
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "\
Re-renders report.md and report.html of a comparison from its
results.json, and prints the table.

Example:
  harness report results/2026-11-30T02-40-00Z")]
pub struct ReportArgs {
    /// A results directory (or its results.json).
    pub dir: PathBuf,
}

/// `--protocol`: how a comparison's runs frame their requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    #[value(name = "h1")]
    H1,
    #[value(name = "h1-pipelined")]
    H1Pipelined,
    #[value(name = "h2c")]
    H2c,
    #[value(name = "h2")]
    H2,
    #[value(name = "h3")]
    H3,
}

impl CompareArgs {
    /// `--protocol h1-pipelined`'s depths, a row each.
    pub fn pipeline_depths(&self) -> Vec<u16> {
        if self.pipeline.is_empty() {
            vec![16]
        } else {
            self.pipeline.clone()
        }
    }

    /// WebSocket messages in flight per connection (`ws-echo`, `ws-room`):
    /// one count, checked when the arguments are.
    pub fn ws_in_flight(&self) -> u16 {
        self.pipeline.first().copied().unwrap_or(1)
    }
}
