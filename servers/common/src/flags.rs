//! Flags every reference server takes (docs/ARCHITECTURE.md §3).

use std::net::SocketAddr;

/// The default database, as `.ci/run` and the harness's embedded MariaDB create it.
pub const DEFAULT_MYSQL_URL: &str = "mysql://bench:bench@127.0.0.1:3306/bench";

/// The flags common to `event-loop`, `coroutine` and `worker-pool`.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Address to listen on. Port 0 picks a free port; the bound address is
    /// printed on stdout as `listening on ADDR` once the server accepts.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,

    /// Number of workers: event loops (event-loop, default 1, like Node.js),
    /// may worker threads (coroutine, default: the number of cores), or
    /// blocking worker threads (worker-pool, default 20, like pm.max_children).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub workers: Option<u32>,

    /// The MySQL/MariaDB database for /db and /work.
    #[arg(long, env = "BENCH_MYSQL_URL", default_value = DEFAULT_MYSQL_URL)]
    pub mysql_url: String,

    /// Size of the database connection pool (per event loop for event-loop,
    /// shared for coroutine; worker-pool holds one connection per worker).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub db_pool: u32,
}

/// The number of CPUs this process may run on.
pub fn available_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}
