//! One private MariaDB per test binary.

use std::sync::OnceLock;

use embedded_mariadb::{MariaDb, Options};

static SHARED_URL: OnceLock<String> = OnceLock::new();
static SHARED_PID: OnceLock<u32> = OnceLock::new();
static SHARED_DIR: OnceLock<std::path::PathBuf> = OnceLock::new();

extern "C" fn stop_shared_at_exit() {
    if let Some(&pid) = SHARED_PID.get() {
        // SAFETY: signalling the child we started; the test process is exiting.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
            let mut status = 0;
            libc::waitpid(pid as libc::pid_t, &mut status, 0);
        }
    }
    if let Some(dir) = SHARED_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The URL of this test binary's shared MariaDB, started on first use and
/// stopped when the test process exits. Tests that stop the database must
/// use their own [`MariaDb`] instead.
pub fn shared() -> &'static str {
    SHARED_URL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        // The instance lives on a parked thread for the rest of the process;
        // an atexit hook stops it (statics are never dropped).
        std::thread::Builder::new()
            .name("shared-mariadb".into())
            .spawn(move || {
                let db = MariaDb::start(Options::default());
                match db {
                    Ok(db) => {
                        let _ = SHARED_PID.set(db.pid().expect("running"));
                        let _ = SHARED_DIR.set(db.dir().to_path_buf());
                        // SAFETY: registering a plain extern "C" fn.
                        unsafe { libc::atexit(stop_shared_at_exit) };
                        tx.send(Ok(db.url())).unwrap();
                        // Keep `db` (and its temp dir) alive; leak on exit.
                        std::mem::forget(db);
                    }
                    Err(e) => tx.send(Err(e.to_string())).unwrap(),
                }
            })
            .expect("spawn thread");
        match rx.recv().expect("mariadb thread") {
            Ok(url) => url,
            Err(e) => panic!("cannot start the shared test MariaDB: {e}"),
        }
    })
}

/// A private MariaDB that a test may stop and restart.
pub fn private() -> MariaDb {
    MariaDb::start(Options::default())
        .unwrap_or_else(|e| panic!("cannot start a private MariaDB: {e}"))
}
