//! `event-loop`: the Node.js model (docs/ARCHITECTURE.md §3).
//!
//! One single-threaded event loop per `--workers` (default 1, like one
//! Node.js process; N is a Node cluster): each loop is a tokio
//! `current_thread` runtime on its own OS thread, with its own listener on
//! the shared port (`SO_REUSEPORT`: the kernel spreads connections), serving
//! HTTP/1 with hyper and querying MySQL through its own `mysql_async` pool.
//! The CPU work of `/cpu` and `/work` runs on the loop and blocks it, as in
//! Node.js; I/O waits (`/sleep`, the database) do not.
//!
//! ```text
//! cargo run --release -p event-loop -- --workers 1 --db-pool 20 \
//!     --mysql-url mysql://bench:bench@127.0.0.1:3306/bench
//! ```
//!
//! It prints `listening on ADDR` once it accepts; SIGTERM/SIGINT stop it
//! gracefully (exit 0).
//!
//! Modules: [`server`] (a loop: runtime, accept, hyper settings, shutdown),
//! [`service`] (a request: routing and workloads), [`db`] (pool,
//! `conn=new`, timeouts), [`io`] (the connection stream: completes hyper's
//! own 400/431 answers to meet the contract).

pub mod db;
pub mod h2;
pub mod io;
pub mod server;
pub mod service;
pub mod tls;
pub mod ws;

use std::sync::Arc;
use std::thread;

use anyhow::{Context, Result};
use clap::Parser;
use server_common::{listen, shutdown, CommonArgs};
use workloads::ServerConfig;

/// The `Server` header and `/config` name.
pub const SERVER_NAME: &str = "event-loop";

/// [`server_common::tls::DESCRIPTION`] with this server's ALPN.
pub const TLS_DESCRIPTION: &str = "rustls 0.23 (ring): TLS 1.3, 1.2; ALPN h2, http/1.1; resumption";

/// Command line of `event-loop`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "event-loop",
    version,
    about = "Benchmark reference server, Node.js model: one single-threaded event loop per worker"
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub tls: server_common::tls::TlsArgs,
}

/// The `/config` document. `db_pool` is the total the process may open:
/// `--db-pool` per loop × loops (each loop owns its pool, as each Node
/// cluster worker owns its mysql2 pool), so that it compares with the
/// connection counts the other servers report.
pub fn server_config(workers: u32, db_pool_per_loop: u32, tls: bool) -> ServerConfig {
    ServerConfig {
        server: SERVER_NAME.into(),
        model: "event-loop".into(),
        runtime: format!("rust {} tokio+hyper", server_common::RUSTC_VERSION),
        workers: Some(workers),
        db_pool: Some(db_pool_per_loop.saturating_mul(workers)),
        opcache: None,
        jit: None,
        debug: cfg!(debug_assertions),
        http_limits: Vec::new(),
        tls: tls.then(|| TLS_DESCRIPTION.to_string()),
        websocket: Some(ws::holding()),
        websocket_unsupported: None,
        // One port for both (crate::h2): h2c by prior knowledge in the
        // clear, h2 by ALPN over TLS.
        protocols: vec!["http/1.1".into(), if tls { "h2" } else { "h2c" }.into()],
        http2_unsupported: None,
    }
}

/// Runs the server until SIGTERM/SIGINT, then shuts it down gracefully.
pub fn run(args: Args) -> Result<()> {
    let workers = args.common.workers.unwrap_or(1);
    let db_opts = db::opts(&args.common.mysql_url, args.common.db_pool)?;
    // ALPN offers h2 first: the loop serves both (crate::h2).
    let tls = args.tls.config()?.map(|config| {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let config_json = server_config(workers, args.common.db_pool, tls.is_some()).leak_json();

    let listeners = listen::bind_many(args.common.addr, workers as usize)
        .with_context(|| format!("binding {}", args.common.addr))?;
    let local = listeners[0]
        .local_addr()
        .context("reading the bound address")?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    shutdown::on_signal(move || {
        let _ = stop_tx.send(true);
    })
    .context("installing the SIGTERM/SIGINT handler")?;

    let shared = Arc::new(server::Shared {
        config_json,
        db_opts,
        tls,
        rooms: Arc::new(workloads::ws::Rooms::new()),
    });
    let mut loops = Vec::with_capacity(listeners.len());
    for (i, listener) in listeners.into_iter().enumerate() {
        let shared = Arc::clone(&shared);
        let stop = stop_rx.clone();
        let handle = thread::Builder::new()
            .name(format!("loop-{i}"))
            .spawn(move || server::run_loop(listener, shared, stop))
            .context("spawning an event loop thread")?;
        loops.push(handle);
    }
    listen::announce(local);

    for (i, handle) in loops.into_iter().enumerate() {
        match handle.join() {
            Ok(result) => result.with_context(|| format!("event loop {i}"))?,
            Err(_) => anyhow::bail!("event loop {i} panicked"),
        }
    }
    Ok(())
}
