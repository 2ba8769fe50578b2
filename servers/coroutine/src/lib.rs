//! The coroutine reference server (docs/ARCHITECTURE.md §3): the Swoole-with-coroutine-
//! hooks model. M:N stackful coroutines ([`may`]) on `--workers` worker
//! threads (default: the number of cores), one coroutine per connection. The
//! CPU work runs in the coroutine, on whichever worker thread carries it; a
//! `/sleep` timer or a database wait parks only the coroutine
//! (`may::coroutine::sleep`, MySQL through [`may_mysql`], whose socket I/O
//! yields), so the worker thread runs other connections meanwhile.
//!
//! Two engines, chosen with `--engine`:
//! - `contract` (default, [`contract`]): a connection loop on may's own
//!   coroutines and `may::net`, sharing the strict HTTP/1 codec of
//!   `server_common::http1`; it meets the whole contract.
//! - `minihttp` ([`minihttp`]): `may_minihttp` 0.1.11 itself, the TechEmpower
//!   reference, for keep-alive clients only (its deviations are listed there).
//!
//! ```text
//! cargo run --release -p coroutine -- --workers 2 --db-pool 20 \
//!     --mysql-url mysql://bench:bench@127.0.0.1:3306/bench [--engine minihttp]
//! ```
//!
//! It prints `listening on ADDR` once it accepts. SIGTERM/SIGINT: stop
//! accepting, let in-flight requests finish (at most
//! `server_common::shutdown::GRACE`), exit 0.

pub mod app;
pub mod contract;
pub mod db;
pub mod fatal;
pub mod minihttp;
pub mod ws;

use std::net::SocketAddr;
use std::sync::mpsc;

use anyhow::Context;
use server_common::shutdown::{self, Shutdown, GRACE};
use server_common::{listen, CommonArgs};
use workloads::ServerConfig;

use crate::app::App;
use crate::db::Db;

/// `/config`'s `http2_unsupported`: why this model serves HTTP/1.1 only.
pub const HTTP2_UNSUPPORTED: &str =
    "one coroutine per connection reads its requests in turn with the \
     shared HTTP/1 codec; HTTP/2's streams would need a demultiplexer per connection handing each \
     stream to a coroutine of its own, and may has no HTTP/2 stack: not served, so that the model \
     keeps its shape";

/// Coroutine stack size in machine words (may's unit): 8 Ki words = 64 KiB.
///
/// Why this size: measured with `--report-stack` (may prints each
/// coroutine's peak use when the size is odd), a connection serving every
/// endpoint peaks at about 12 KiB in release and 16 KiB in debug builds
/// (`/db?conn=new`: connect, authenticate, query), except the first
/// database connection of the process, which runs one-time initialisation
/// and peaks at about 34 KiB in release and 38 KiB in debug builds.
/// may_minihttp's TechEmpower entry uses 32 KiB (0x1000 words), which that
/// first connection would overflow. 64 KiB leaves headroom for code paths
/// not measured (RSA authentication, glibc's resolver for a host name in
/// the URL); a guard page below each stack turns an overflow into a crash,
/// never corruption. Stacks are mapped lazily and recycled by may's
/// coroutine pool, so only touched pages cost memory.
/// `tests/model.rs` checks the headroom.
pub const STACK_WORDS: usize = 0x2000;

/// Which HTTP implementation serves the connections.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Our connection loop on may coroutines: the whole contract.
    Contract,
    /// `may_minihttp` 0.1.11 as is: keep-alive clients only.
    Minihttp,
}

/// Command-line flags.
#[derive(clap::Parser, Debug, Clone)]
#[command(name = "coroutine", version, about = "M:N coroutine server (may)")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// The HTTP engine.
    #[arg(long, value_enum, default_value_t = Engine::Contract)]
    pub engine: Engine,

    /// TLS (the contract engine only: may_minihttp owns its sockets).
    #[command(flatten)]
    pub tls: server_common::tls::TlsArgs,

    /// Diagnostics: make may print each coroutine's stack usage when it ends
    /// (may does so when the stack size is odd). Not for benchmarks.
    #[arg(long, hide = true)]
    pub report_stack: bool,

    /// Diagnostics: once listening, read address 0x20 in a coroutine (a
    /// memory fault, as may's stale socket read was), to test that a fault
    /// is reported on stderr. Not for benchmarks.
    #[arg(long, hide = true)]
    pub fault_in_coroutine: bool,
}

/// Runs the server until SIGTERM/SIGINT, then exits the process with 0.
pub fn run(args: Args) -> anyhow::Result<()> {
    let workers = args
        .common
        .workers
        .unwrap_or_else(server_common::flags::available_cores);
    let stack_words = if args.report_stack {
        STACK_WORDS | 1
    } else {
        STACK_WORDS
    };
    may::config()
        .set_workers(workers as usize)
        .set_stack_size(stack_words);
    // A memory fault prints a line before the process dies ([`fatal`]).
    fatal::report_memory_faults();

    let server = match args.engine {
        Engine::Contract => "coroutine",
        Engine::Minihttp => "coroutine-minihttp",
    };
    let tls = args.tls.config()?;
    if tls.is_some() && args.engine == Engine::Minihttp {
        anyhow::bail!(
            "--engine minihttp cannot serve TLS (may_minihttp owns its sockets): \
             use the default engine with --tls-cert"
        );
    }
    let config = ServerConfig {
        server: server.into(),
        model: "coroutine".into(),
        runtime: format!("rust {} may 0.3", server_common::RUSTC_VERSION),
        workers: Some(workers),
        db_pool: Some(args.common.db_pool),
        opcache: None,
        jit: None,
        debug: cfg!(debug_assertions),
        http_limits: match args.engine {
            Engine::Contract => Vec::new(),
            Engine::Minihttp => minihttp::HTTP_LIMITS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        },
        tls: tls
            .is_some()
            .then(|| server_common::tls::DESCRIPTION.to_string()),
        websocket: match args.engine {
            Engine::Contract => Some(ws::holding()),
            Engine::Minihttp => None,
        },
        websocket_unsupported: match args.engine {
            Engine::Contract => None,
            Engine::Minihttp => Some(
                "may_minihttp has no upgrade: it owns the connection and answers every \
                 request itself"
                    .into(),
            ),
        },
        protocols: vec!["http/1.1".into()],
        http2_unsupported: Some(HTTP2_UNSUPPORTED.into()),
    };
    let db = Db::new(&args.common.mysql_url, args.common.db_pool as usize)
        .context("cannot configure the database")?;
    let app: &'static App = Box::leak(Box::new(App {
        server,
        config_json: config.leak_json(),
        db,
        shutdown: Shutdown::new(),
        tls,
        rooms: workloads::ws::Rooms::new(),
    }));

    let (signalled, signal) = mpsc::channel();
    shutdown::on_signal(move || {
        let _ = signalled.send(());
    })
    .context("cannot install the signal handler")?;

    let (addr, stop): (SocketAddr, Box<dyn FnOnce()>) = match args.engine {
        Engine::Contract => {
            let listener = listen::bind(args.common.addr, false).context("cannot listen")?;
            let server = contract::start(listener, app).context("cannot start the server")?;
            (server.addr(), Box::new(move || server.stop_accepting()))
        }
        Engine::Minihttp => {
            let server =
                minihttp::start(args.common.addr, app).context("cannot start may_minihttp")?;
            (server.addr(), Box::new(move || server.stop_accepting()))
        }
    };
    listen::announce(addr);
    if args.fault_in_coroutine {
        may::go!(|| {
            // SAFETY: none; a fault on purpose (the flag's test).
            let x = unsafe { std::ptr::read_volatile(0x20 as *const usize) };
            eprintln!("coroutine: read {x} at 0x20, no fault");
        });
    }

    // Block the main thread (not a may worker) until a signal arrives.
    let _ = signal.recv();
    app.shutdown.begin();
    stop();
    app.shutdown.wait_idle(GRACE);
    std::process::exit(0)
}
