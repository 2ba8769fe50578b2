//! Command-line flags and the effective settings `/config` reports.

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};
use server_common::CommonArgs;
use workloads::ServerConfig;

/// Default number of workers: `pm.max_children = 20`, as the seed's php-fpm.
pub const DEFAULT_WORKERS: u32 = 20;

/// Default capacity of the queue between the front and the workers: a
/// listen backlog's order of magnitude (php-fpm's `listen.backlog` defaults
/// to 511; compose/php-fpm sets 4096). With one request in flight per
/// client connection, the queue never holds more requests than there are
/// connections, so it overflows only beyond ~512 + workers busy clients.
pub const DEFAULT_QUEUE: usize = 512;

/// The worker-pool server's flags.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "worker-pool",
    version,
    about = "The worker-pool reference server (nginx + PHP-FPM shape)."
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Capacity of the bounded queue between the front and the workers
    /// (requests waiting for a free worker; 0: hand over only to an idle
    /// worker). A request that finds it full is answered `503 server busy`
    /// at once, as an overflowing FPM backlog. Ignored with --per-connection,
    /// where the kernel's accept queue plays this role.
    #[arg(long, default_value_t = DEFAULT_QUEUE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1_000_000))]
    pub queue: usize,

    /// The Apache prefork shape: no front; each worker accepts a connection
    /// and owns it until it closes, so keep-alive connections beyond
    /// --workers wait in the accept queue.
    #[arg(long)]
    pub per_connection: bool,

    /// TLS, terminated by the front (not with --per-connection).
    #[command(flatten)]
    pub tls: server_common::tls::TlsArgs,

    /// Whether --db-pool was given on the command line (it cannot apply:
    /// each worker holds one connection).
    #[arg(skip)]
    pub db_pool_given: bool,
}

impl Args {
    /// Parses the process's arguments, remembering whether --db-pool was given.
    pub fn from_env() -> Args {
        Args::parse_from_args(std::env::args_os())
    }

    /// Parses `argv` (exits with clap's message on bad flags, as `parse` does).
    pub fn parse_from_args<I, T>(argv: I) -> Args
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Args::command().get_matches_from(argv);
        let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        args.db_pool_given = matches.value_source("db_pool") == Some(ValueSource::CommandLine);
        args
    }
}

/// What the server runs with, resolved from the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `worker-pool` or `worker-pool-per-connection`: `/config`'s `server`
    /// and the `Server` header.
    pub name: &'static str,
    pub workers: usize,
    pub queue: usize,
    pub per_connection: bool,
    pub mysql_url: String,
    /// The `/config` body, rendered once.
    pub config_json: &'static [u8],
}

impl Settings {
    pub fn from_args(args: &Args) -> Settings {
        let workers = args.common.workers.unwrap_or(DEFAULT_WORKERS);
        let (name, shape) = if args.per_connection {
            ("worker-pool-per-connection", "std threads")
        } else {
            ("worker-pool", "tokio front, std threads")
        };
        let config = ServerConfig {
            server: name.into(),
            model: "worker-pool".into(),
            runtime: format!(
                "rust {} {shape}, httparse, mysql",
                server_common::RUSTC_VERSION
            ),
            workers: Some(workers),
            // One persistent connection per worker, as a PHP-FPM child with a
            // persistent PDO: the pool is the workers.
            db_pool: Some(workers),
            opcache: None,
            jit: None,
            debug: cfg!(debug_assertions),
            http_limits: Vec::new(),
            tls: args
                .tls
                .tls_cert
                .is_some()
                .then(|| server_common::tls::DESCRIPTION.to_string()),
            websocket: Some(crate::ws::holding()),
            websocket_unsupported: None,
            protocols: vec!["http/1.1".into()],
            http2_unsupported: Some(crate::HTTP2_UNSUPPORTED.into()),
        };
        Settings {
            name,
            workers: workers as usize,
            queue: args.queue,
            per_connection: args.per_connection,
            mysql_url: args.common.mysql_url.clone(),
            config_json: config.leak_json(),
        }
    }

    /// A warning for flags that cannot apply, printed once at start-up.
    pub fn warnings(&self, args: &Args) -> Vec<String> {
        let mut warnings = Vec::new();
        if args.db_pool_given && args.common.db_pool as usize != self.workers {
            warnings.push(format!(
                "--db-pool {} ignored: each of the {} workers holds one database connection",
                args.common.db_pool, self.workers
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(argv: &[&str]) -> Args {
        Args::parse_from_args(std::iter::once("worker-pool").chain(argv.iter().copied()))
    }

    #[test]
    fn defaults_are_php_fpm_like() {
        let a = args(&[]);
        let s = Settings::from_args(&a);
        assert_eq!((s.workers, s.queue, s.per_connection), (20, 512, false));
        let v: serde_json::Value = serde_json::from_slice(s.config_json).unwrap();
        assert_eq!(v["server"], "worker-pool");
        assert_eq!(v["model"], "worker-pool");
        assert_eq!(
            (v["workers"].as_u64(), v["db_pool"].as_u64()),
            (Some(20), Some(20))
        );
        assert!(v["opcache"].is_null() && v["jit"].is_null());
        assert!(s.warnings(&a).is_empty());
    }

    #[test]
    fn db_pool_follows_workers_and_warns_only_when_given() {
        let a = args(&["--workers", "4"]);
        let s = Settings::from_args(&a);
        let v: serde_json::Value = serde_json::from_slice(s.config_json).unwrap();
        assert_eq!(v["db_pool"], 4);
        assert!(
            s.warnings(&a).is_empty(),
            "default --db-pool is not a user's choice"
        );
        let a = args(&["--workers", "4", "--db-pool", "8"]);
        assert_eq!(Settings::from_args(&a).warnings(&a).len(), 1);
    }

    #[test]
    fn per_connection_has_its_own_name() {
        let a = args(&["--per-connection", "--queue", "0"]);
        let s = Settings::from_args(&a);
        assert_eq!((s.name, s.queue), ("worker-pool-per-connection", 0));
    }
}
