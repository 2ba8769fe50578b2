//! The sequence every measuring command runs, written once: select the
//! servers (what runs here, what cannot and why), start the database,
//! place each environment, start each planned server in it and hand it to
//! the command's own measuring function, stop it, tear the environment
//! down. A command is left with its cells, its findings and its printers.
//!
//! ```text
//! Lab::open → Selection::of → Lab::start_database
//!   → Lab::each_environment(envs) → Placed::each(plan) → measure(entry, item, started)
//! ```

use anyhow::bail;

use super::record::ServerDoc;
use super::select::{self, Missing};
use super::{Lab, Started};
use crate::catalog::Entry;
use crate::env::{pinned::ThreadPin, Environment, Setup};

/// The servers a command selected, split into those that can run here and
/// those that cannot (with why and what to install).
pub struct Selection {
    /// Every selected entry, in order (the documents list them all).
    pub selected: Vec<Entry>,
    /// Those that can run here, with what will be started.
    pub ready: Vec<(Entry, String)>,
    pub missing: Vec<Missing>,
}

impl Selection {
    /// `names` from the catalog, then `targets` (`NAME=URL`, servers
    /// started elsewhere); see [`select::servers_and_targets`].
    pub fn of(lab: &Lab, names: &[String], targets: &[String]) -> anyhow::Result<Selection> {
        let selected = select::servers_and_targets(names, targets)?;
        let (ready, missing) = select::runnable(selected.clone(), &lab.paths);
        let (ready, missing) = select::with_images(
            ready,
            missing,
            &selected,
            &lab.from_image,
            &lab.paths,
            &|l| eprintln!("{l}"),
        )?;
        Ok(Selection {
            selected,
            ready,
            missing,
        })
    }

    /// Catalog entries by name only (no targets; empty is none).
    pub fn named(lab: &Lab, names: &[String]) -> anyhow::Result<Selection> {
        let selected = select::named(names)?;
        let (ready, missing) = select::runnable(selected.clone(), &lab.paths);
        Ok(Selection {
            selected,
            ready,
            missing,
        })
    }

    /// Names the processes of `--target`s started elsewhere
    /// (`--target-pid NAME=PID`, `--target-container NAME=ID`), so they are
    /// metered like the catalog's servers. An error for a name that is no
    /// `--target`, or one named twice.
    pub fn with_target_processes(
        mut self,
        pids: &[String],
        containers: &[String],
    ) -> anyhow::Result<Selection> {
        use crate::catalog::outside::Processes;
        use crate::catalog::Recipe;
        let specs = pids
            .iter()
            .map(|s| Processes::parse_pid(s).map(|p| ("--target-pid", p)))
            .chain(
                containers
                    .iter()
                    .map(|s| Processes::parse_container(s).map(|p| ("--target-container", p))),
            )
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (option, (name, processes)) in specs {
            let mut found = false;
            let entries = self
                .selected
                .iter_mut()
                .chain(self.ready.iter_mut().map(|(e, _)| e));
            for e in entries.filter(|e| e.name == name) {
                match &mut e.recipe {
                    Recipe::External { processes: p, .. } => {
                        if p.as_ref().is_some_and(|old| *old != processes) {
                            bail!("{option} {name}: its processes are named twice");
                        }
                        *p = Some(processes.clone());
                        found = true;
                    }
                    _ => bail!("{option} {name}: {name} is a catalog server, metered already"),
                }
            }
            if !found {
                bail!("{option} {name}: no --target {name}=URL to meter");
            }
        }
        Ok(self)
    }

    /// The entries that can run here.
    pub fn runnable(&self) -> Vec<Entry> {
        self.ready.iter().map(|(e, _)| e.clone()).collect()
    }

    /// One document per selected server: `ran` (so far) or `skipped` with why.
    pub fn docs(&self) -> Vec<ServerDoc> {
        ServerDoc::of_selection(&self.selected, &self.ready, &self.missing)
    }

    /// Says, for each server that cannot run here, why and what to do.
    pub fn say_missing(&self, say: &dyn Fn(&str)) {
        for m in &self.missing {
            say(&format!(
                "{}: cannot run here: {}; to run it: {}",
                m.name, m.reason, m.fix
            ));
        }
    }

    /// An error when nothing selected can run here.
    pub fn require_runnable(&self) -> anyhow::Result<()> {
        if self.ready.is_empty() {
            bail!("none of the selected servers can run here (see `harness servers`)");
        }
        Ok(())
    }
}

/// One environment, built and ready to start servers in: its setup (none
/// on bare loopback), this thread (so the engine's, and ab's or wrk's) on
/// the load generator's CPUs where the environment splits them, and the
/// number of engine threads that fits.
pub struct Placed {
    pub environment: Environment,
    /// `None` on bare loopback.
    pub setup: Option<Setup>,
    /// Engine threads: as asked, else the load generator's CPUs, else the cores.
    pub threads: usize,
    _pin: Option<ThreadPin>,
}

impl Lab {
    /// Builds `environment` for this session's servers and database (after
    /// [`Lab::start_database`]: a namespace or a container reaches it).
    /// `threads`: the engine threads asked for, if any.
    pub fn place(
        &self,
        environment: Environment,
        threads: Option<usize>,
    ) -> anyhow::Result<Placed> {
        if let Err(why) = environment.availability() {
            bail!("not available here: {why}");
        }
        if environment == Environment::Bare && threads.is_none() {
            return Ok(self.loopback());
        }
        let setup = if environment == Environment::Bare {
            None
        } else {
            Some(self.environment(environment)?)
        };
        let pin = setup.as_ref().map(Setup::pin_load).transpose()?.flatten();
        let threads = threads.unwrap_or_else(|| {
            setup
                .as_ref()
                .and_then(Setup::load_cpus)
                .map_or_else(crate::engine::default_threads, <[usize]>::len)
        });
        Ok(Placed {
            environment,
            setup,
            threads,
            _pin: pin,
        })
    }

    /// Bare loopback: no setup, nothing pinned, the engine on every core.
    pub fn loopback(&self) -> Placed {
        Placed {
            environment: Environment::Bare,
            setup: None,
            threads: crate::engine::default_threads(),
            _pin: None,
        }
    }

    /// Each of `environments` in turn, until interrupted: placed and handed
    /// to `visit` (which measures in it and then drops or
    /// [`closes`](Placed::close) it), or the reason it could not be.
    pub fn each_environment(
        &self,
        environments: &[Environment],
        threads: Option<usize>,
        mut visit: impl FnMut(Environment, anyhow::Result<Placed>),
    ) {
        for &environment in environments {
            if self.interrupted() {
                break;
            }
            visit(environment, self.place(environment, threads));
        }
    }
}

impl Placed {
    /// Whether `entry` can run here ([`placeable_in`]).
    pub fn can_place(&self, entry: &Entry) -> bool {
        placeable_in(entry, self.environment).is_ok()
    }

    /// Starts `entry` here (the environment decides how) and waits until
    /// its `/hello` answers.
    pub fn start(&self, lab: &Lab, entry: &Entry) -> anyhow::Result<Started> {
        lab.start(entry, self.setup.as_ref())
    }

    /// The driver's loop: each `(entry, item)` of `plan` that can be placed
    /// here, until interrupted, is started afresh and handed to `measure`
    /// with its item; it is stopped when `measure` drops it. An entry that
    /// does not start is handed its error once and not started again for
    /// the rest of the plan.
    pub fn each<T>(
        &self,
        lab: &Lab,
        plan: &[(Entry, T)],
        mut measure: impl FnMut(&Entry, &T, anyhow::Result<Started>),
    ) {
        let mut failed: Vec<&str> = Vec::new();
        for (entry, item) in plan.iter().filter(|(e, _)| self.can_place(e)) {
            if lab.interrupted() {
                break;
            }
            if failed.contains(&entry.name.as_str()) {
                continue;
            }
            let started = self.start(lab, entry);
            if started.is_err() {
                failed.push(&entry.name);
            }
            measure(entry, item, started);
        }
    }

    /// What the environment is, in words (`None` on bare loopback).
    pub fn detail(&self) -> Option<String> {
        self.setup.as_ref().map(Setup::detail)
    }

    /// Tears the environment down now; returns what could not be removed.
    pub fn close(mut self) -> Vec<String> {
        self.setup.as_mut().map(Setup::teardown).unwrap_or_default()
    }
}

/// Whether `entry` can be placed in `environment`, or why not: anything on
/// bare loopback, elsewhere only what the harness starts itself (not a
/// `--target`); a server from its compose image runs in a container, so
/// only a Docker environment places it (in compare's default run it is a
/// container on the host network, labelled so; a reproduction never counts
/// it as bare).
pub fn placeable_in(entry: &Entry, environment: Environment) -> Result<(), String> {
    if entry.runs_in().is_some() {
        return if environment.is_docker() {
            Ok(())
        } else {
            Err(format!(
                "it runs from its compose image (a container): only the Docker environments \
                 place it, not {}",
                environment.name()
            ))
        };
    }
    if environment == Environment::Bare || entry.placeable() {
        Ok(())
    } else {
        Err(format!(
            "a server started elsewhere (--target) cannot be placed in {}",
            environment.name()
        ))
    }
}

/// Every entry with nothing more to say: a plan of servers alone.
pub fn servers_only(entries: &[Entry]) -> Vec<(Entry, ())> {
    entries.iter().map(|e| (e.clone(), ())).collect()
}
