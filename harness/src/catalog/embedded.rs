//! The private MariaDB that `compare` and `calibrate` start when no
//! `--mysql-url` is given: registered with [`supervise`] while it runs (so
//! the emergency path can kill it and remove its directory), stopped and
//! removed on drop.

use super::{supervise, Db};

/// The embedded database, if one was started.
#[derive(Default)]
pub struct Embedded(Option<embedded_mariadb::MariaDb>);

impl Embedded {
    /// Takes a started MariaDB: registers it, and returns how servers reach
    /// it and its version (`MariaDB 10.11.6`).
    pub fn adopt(&mut self, m: embedded_mariadb::MariaDb) -> anyhow::Result<(Db, Option<String>)> {
        if let Some(pid) = m.pid() {
            supervise::register_pid(pid, "mariadbd");
        }
        supervise::register_dir(m.dir());
        let d = Db::parse(&m.url())?;
        let version = m
            .sql("SELECT VERSION()")
            .ok()
            .map(|v| format!("MariaDB {}", v.trim()));
        self.0 = Some(m);
        Ok((d, version))
    }

    /// The `mariadbd` process, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.0.as_ref().and_then(|m| m.pid())
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        if let Some(mut db) = self.0.take() {
            let pid = db.pid();
            let dir = db.dir().to_path_buf();
            db.stop();
            drop(db);
            if let Some(pid) = pid {
                supervise::unregister_pid(pid);
            }
            supervise::unregister_dir(&dir);
        }
    }
}
