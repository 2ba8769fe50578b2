//! The lab layer: what every measuring command (`compare`, `calibrate`, and
//! the commands to come) stands on, so that each command is a short
//! description of *what* it measures.
//!
//! A [`Lab`] is one session: Ctrl-C handling (the run stops, every child is
//! stopped in order, the database removed), the place the servers are
//! found, the database every server of the session shares ([`database`]),
//! and [`Lab::start`], which starts a catalog entry, places it in an
//! environment, checks that the placement took and publishes it. Beside it:
//! [`driver`] runs the sequence every measuring command shares (select,
//! database, environments, start, hand to the command's measuring
//! function), [`args`] the options they share, [`record`] what their
//! documents share; [`select`] picks entries from the catalog, [`load`]
//! plans a closed-loop load on a started server, [`protocol`] says where
//! it serves HTTP/2 and HTTP/3, [`meter`] charges a run's CPU time.
//!
//! Arrows point one way: commands → lab → catalog / env / engine → contract.

pub mod args;
pub mod contract;
pub mod database;
pub mod driver;
pub mod load;
pub mod meter;
pub mod profile;
pub mod protocol;
pub mod record;
pub mod select;
pub mod tls_relay;
pub mod tools;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::catalog::php_jit::PhpJit;
use crate::catalog::{self, supervise, Db, Entry, Placement, Running, StartCtx};
use crate::env::Setup;
use database::Database;

/// One measuring session.
pub struct Lab {
    /// Where the servers' binaries and `compose/` are found.
    pub paths: catalog::Env,
    /// Set by the first SIGINT/SIGTERM: stop what runs, report what was measured.
    pub interrupt: Arc<AtomicBool>,
    /// The database of the session (none until [`Lab::start_database`]).
    pub database: Database,
    /// The OPcache JIT the PHP servers run (`compare --php-jit`).
    pub php_jit: PhpJit,
    /// The load engine's I/O backend (`--io`), for every load of the session.
    pub io: crate::engine::Io,
    /// `--from-image`: servers to run from their compose image.
    pub from_image: Vec<String>,
    /// How long its io_uring waits may gather (`--gather`).
    pub gather: std::time::Duration,
    /// `--tls`: the run's certificate (removed with the session) and how
    /// servers and clients use it.
    pub tls: Option<(labcert::LabCert, catalog::tls::ServerTls)>,
    /// `compare --protocol h2c`: servers also serve h2c where it needs a
    /// listener of its own ([`StartCtx::h2c`]).
    pub h2c: bool,
    /// `compare --protocol h3`: servers that serve HTTP/3 only when asked
    /// serve it ([`StartCtx::h3`]).
    pub h3: bool,
}

pub use crate::env::Started;

impl Lab {
    /// Opens a session: the signal handlers, the open-files limit (raised
    /// for the servers and the load alike), where the servers are found.
    pub fn open(args: &crate::lab::args::LabArgs) -> anyhow::Result<Lab> {
        let repo_dir = args.repo_dir.as_deref();
        let interrupt = Arc::new(AtomicBool::new(false));
        supervise::install_signal_handlers(interrupt.clone())?;
        crate::machine::raise_nofile();
        Ok(Lab {
            paths: catalog::Env::discover(repo_dir),
            interrupt,
            database: Database::none(),
            php_jit: PhpJit::default(),
            io: args.io,
            from_image: args.from_image.clone(),
            gather: args.gather,
            tls: None,
            h2c: false,
            h3: false,
        })
    }

    /// Every server of the session terminates TLS with a certificate made
    /// for it (one private CA, an ECDSA P-256 server certificate), and
    /// every client speaks `version` to it, trusting only that CA.
    pub fn use_tls(&mut self, version: crate::engine::TlsVersion) -> anyhow::Result<()> {
        let cert = labcert::LabCert::new()?;
        let server = catalog::tls::ServerTls::new(&cert, version).map_err(anyhow::Error::msg)?;
        self.tls = Some((cert, server));
        Ok(())
    }

    /// The session's TLS, if it has one.
    pub fn server_tls(&self) -> Option<&catalog::tls::ServerTls> {
        self.tls.as_ref().map(|(_, t)| t)
    }

    pub fn interrupted(&self) -> bool {
        self.interrupt.load(Ordering::Relaxed)
    }

    /// `--mysql-url` if given, else a private MariaDB started here (one
    /// retry: `mariadb-install-db` shares /tmp with whatever else runs).
    /// Without MariaDB installed the session has no database, and says why.
    pub fn start_database(
        &mut self,
        mysql_url: Option<&str>,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        self.database = Database::start(mysql_url, &self.interrupt, say)?;
        Ok(())
    }

    pub fn db(&self) -> Option<&Db> {
        self.database.db.as_ref()
    }

    /// Starts `entry` (placed in `setup`'s environment, if any: the
    /// environment decides how, [`Setup::start`]) and waits until its
    /// `/hello` answers; on loopback without one.
    pub fn start(&self, entry: &Entry, setup: Option<&Setup>) -> anyhow::Result<Started> {
        let ctx = self.start_ctx();
        let Some(setup) = setup else {
            let running = entry.start(&ctx)?;
            let route = format!("{} (loopback)", running.addr);
            return Ok(Started {
                running,
                route,
                checks: Vec::new(),
            });
        };
        setup.start(entry, &ctx)
    }

    /// Builds `environment` for this session's servers and database.
    pub fn environment(&self, environment: crate::env::Environment) -> anyhow::Result<Setup> {
        Setup::build_for(environment, self.db(), &self.paths)
    }

    /// The database process the servers in `setup` use (an environment's
    /// own, or the session's), for metering.
    pub fn db_pid(&self, setup: Option<&Setup>) -> Option<u32> {
        setup
            .and_then(Setup::db_pid)
            .or_else(|| self.database.pid())
    }

    /// Starts `entry` on loopback with `placement`'s changes (its database
    /// host, extra variables) and waits until its `/hello` answers.
    pub fn start_with(&self, entry: &Entry, placement: &Placement) -> anyhow::Result<Running> {
        entry.start_placed(&self.start_ctx(), placement)
    }

    fn start_ctx(&self) -> StartCtx<'_> {
        StartCtx {
            env: &self.paths,
            db: self.db(),
            interrupt: &self.interrupt,
            php_jit: self.php_jit,
            tls: self.server_tls(),
            h2c: self.h2c,
            h3: self.h3,
        }
    }
}
