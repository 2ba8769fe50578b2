//! MariaDB for tests: one shared private instance per test binary, or a
//! private one per test.

use std::sync::OnceLock;

use embedded_mariadb::{MariaDb, Options};

static SHARED: OnceLock<MariaDb> = OnceLock::new();
static SHARED_URL: OnceLock<String> = OnceLock::new();

extern "C" fn stop_shared_at_exit() {
    let Some(db) = SHARED.get() else { return };
    if let Some(pid) = db.pid() {
        // SAFETY: signalling and reaping the child we started; the test
        // process is exiting and nothing else waits for it.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGCONT);
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
            let mut status = 0;
            libc::waitpid(pid as libc::pid_t, &mut status, 0);
        }
    }
    let _ = std::fs::remove_dir_all(db.dir());
}

/// This test binary's shared MariaDB, started on first use and stopped
/// (its directory removed) when the test process exits: its URL, and SQL
/// as root with [`MariaDb::sql`] (e.g. to watch `information_schema.processlist`).
/// Other tests use it at the same time: a test that stops the database, or
/// counts its connections ([`MariaDb::status`]), uses [`private`] instead.
pub fn shared_db() -> &'static MariaDb {
    SHARED.get_or_init(|| {
        let db = MariaDb::start(Options::default())
            .unwrap_or_else(|e| panic!("cannot start the shared test MariaDB: {e}"));
        // Statics are never dropped: an atexit hook stops the server.
        // SAFETY: registering a plain extern "C" fn, once.
        unsafe { libc::atexit(stop_shared_at_exit) };
        db
    })
}

/// The URL of [`shared_db`].
pub fn shared() -> &'static str {
    SHARED_URL.get_or_init(|| shared_db().url())
}

/// A private MariaDB that a test may stop and restart; stopped and removed
/// when dropped.
pub fn private() -> MariaDb {
    MariaDb::start(Options::default())
        .unwrap_or_else(|e| panic!("cannot start a private MariaDB: {e}"))
}
