//! The options every measuring command takes the same way, declared once
//! and flattened into each command's arguments.
//!
//! What stays with each command is what differs between them for a
//! reason: the load's shape (`compare` takes a list of concurrency levels,
//! `calibrate` one, `reproduce` the seeds' `-n` / `-t`, `models` its own
//! levels per experiment), `--target` (only `compare` and `reproduce` can
//! load a server they did not start: `models` meters a server's memory and
//! restarts it per experiment, `calibrate` places it), and the servers'
//! default list, which a command sets with `mut_arg("servers", …)`.

use std::path::PathBuf;

use clap::Args;

/// The session: which servers, which database, where the servers are
/// found and where the results go.
#[derive(Debug, Args, Clone)]
pub struct LabArgs {
    /// Servers from the catalog (`harness servers`), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub servers: Vec<String>,

    /// Run these servers from their compose image even where the host has
    /// their binary (RoadRunner, FrankenPHP and Swoole run from theirs
    /// anyway where it is missing; php-fpm and node have Debian variants):
    /// a container on the host network, labelled so.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub from_image: Vec<String>,

    /// Use this database instead of starting a private MariaDB.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// The repository (compose/ and target/); default: $BENCHLAB_REPO, else
    /// the tree the harness was built from.
    #[arg(long, value_name = "DIR")]
    pub repo_dir: Option<PathBuf>,

    /// Where each run's directory (<UTC time>…/) goes [default: results].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// The load engine's I/O backend: uring (falls back to epoll, saying
    /// why, where refused) or epoll.
    #[arg(long, value_enum, default_value_t = crate::engine::Io::default(), value_name = "BACKEND")]
    pub io: crate::engine::Io,

    /// io_uring, closed loop: how long a wait of the load engine may hold
    /// out for half the requests in flight (as `harness run --gather`);
    /// 0 turns it off; needs kernel 6.13 (`min_wait`), else off.
    #[arg(long, default_value = "400us", value_name = "DURATION", value_parser = crate::units::parse_duration)]
    pub gather: std::time::Duration,
}

impl LabArgs {
    /// `--out`, else `results` in the working directory.
    pub fn out_dir(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(|| PathBuf::from("results"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    #[command(mut_arg("servers", |a| a.default_value("a,b")))]
    struct Cmd {
        #[command(flatten)]
        lab: LabArgs,
    }

    #[test]
    fn a_command_sets_its_own_default_servers() {
        let c = Cmd::try_parse_from(["x"]).unwrap();
        assert_eq!(c.lab.servers, ["a", "b"]);
        assert_eq!(c.lab.out_dir(), PathBuf::from("results"));
        let c = Cmd::try_parse_from(["x", "--servers", "c", "--out", "/tmp/r"]).unwrap();
        assert_eq!(c.lab.servers, ["c"]);
        assert_eq!(c.lab.out_dir(), PathBuf::from("/tmp/r"));
    }
}
