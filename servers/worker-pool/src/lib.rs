//! The worker-pool reference server: the nginx + PHP-FPM shape (docs/ARCHITECTURE.md §3).
//!
//! A front ([`front`]: one tokio `current_thread` event loop, like one nginx
//! worker) owns every client connection, parses requests with the shared
//! HTTP/1 codec and routes them; every routed request goes through a bounded
//! queue ([`pool`], capacity `--queue`, default 512, like FPM's listen
//! backlog) to one of `--workers` blocking OS threads (default 20 =
//! `pm.max_children`). A worker ([`worker`]) runs the whole workload: the
//! sqrt loop, `/sleep` as `std::thread::sleep`, and the query on its own
//! persistent `mysql` connection ([`db`]); the front writes its response.
//! Work concurrency is capped at N; excess requests wait in the queue, and a
//! full queue answers `503 server busy`.
//!
//! `--per-connection` ([`per_connection`]) is the Apache prefork shape
//! instead: each worker accepts a connection and owns it until it closes, so
//! keep-alive connections beyond N starve in the accept queue.
//!
//! ```text
//! worker-pool [--addr 127.0.0.1:0] [--workers 20] [--queue 512] [--per-connection]
//!             [--mysql-url mysql://bench:bench@127.0.0.1:3306/bench]
//! ```
//! It prints `listening on ADDR` once it accepts; SIGTERM/SIGINT stop
//! accepting, let queued and in-flight requests finish (up to
//! `shutdown::GRACE`) and exit 0.

pub mod db;
pub mod front;
pub mod inbox;
pub mod per_connection;
pub mod pool;
pub mod settings;
pub mod worker;
pub mod ws;

/// `/config`'s `http2_unsupported`: why this model serves HTTP/1.1 only.
pub const HTTP2_UNSUPPORTED: &str =
    "its front parses HTTP/1 with the shared codec and --per-connection \
     workers own a connection each; an HTTP/2 front feeding the same queue (nginx's http2 before \
     php-fpm) would keep the model's shape, and is not built yet";

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use server_common::listen;
use server_common::shutdown::{self, Shutdown, GRACE};
use tokio::sync::Notify;

pub use settings::{Args, Settings};

use crate::db::Db;
use crate::worker::Worker;

/// A client must send a complete request within this time, counted from the
/// connection's start or the previous response: it drops a client that
/// stalls half-way through a request (slowloris) and an idle keep-alive one.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that does not read its response for this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the server until SIGTERM/SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::from_args(&args);
    for warning in settings.warnings(&args) {
        eprintln!("worker-pool: warning: {warning}");
    }
    let tls = args.tls.config()?;
    if tls.is_some() && settings.per_connection {
        anyhow::bail!(
            "--per-connection does not serve TLS (its workers own plain sockets): \
             without it the front terminates TLS"
        );
    }
    let opts = db::options(&settings.mysql_url)?;
    let make_worker = || Worker::new(Db::new(opts.clone()), settings.config_json);
    let listener = listen::bind(args.common.addr, false)
        .with_context(|| format!("cannot listen on {}", args.common.addr))?;
    let addr = listener.local_addr().context("listener address")?;
    let shutdown = Shutdown::new();

    if settings.per_connection {
        let listener = per_connection::start(
            listener,
            settings.workers,
            make_worker,
            settings.name,
            &shutdown,
        )
        .context("cannot start the workers")?;
        let (signalled, on_stop) = std::sync::mpsc::channel();
        shutdown::on_signal(move || {
            let _ = signalled.send(());
        })
        .context("cannot install the signal handler")?;
        listen::announce(addr);
        let _ = on_stop.recv();
        shutdown.begin();
        per_connection::stop_accepting(&listener);
        shutdown.wait_idle(GRACE);
    } else {
        let queue = pool::start(settings.workers, settings.queue, make_worker)
            .context("cannot start the workers")?;
        let stop = Arc::new(Notify::new());
        shutdown::on_signal({
            let shutdown = shutdown.clone();
            let stop = Arc::clone(&stop);
            move || {
                shutdown.begin();
                stop.notify_one();
            }
        })
        .context("cannot install the signal handler")?;
        listen::announce(addr);
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        front::run(listener, queue, settings.name, shutdown, stop, tls).context("front failed")?;
    }
    Ok(())
}
