//! Profiling one measured run of a server the lab started, as `compare
//! --profile` and `models --profile` do: perf on the server's process tree
//! and this process (the load engine's threads), files under the results
//! directory's `profiles/`, and where perf cannot run, the reason in place
//! of the profile.

use std::path::PathBuf;

use super::{availability, Profile, Recording};
use crate::catalog::Running;

/// Where a command's profiles go, or why none can be taken.
pub struct Profiler {
    dir: Result<PathBuf, String>,
}

impl Profiler {
    /// Profiles into `results_dir/profiles`, if perf can run here.
    pub fn new(results_dir: PathBuf) -> Profiler {
        Profiler {
            dir: availability().map(|()| results_dir.join("profiles")),
        }
    }

    /// Why no profile can be taken here, if so.
    pub fn unavailable(&self) -> Option<&str> {
        self.dir.as_ref().err().map(String::as_str)
    }

    /// Starts recording `running`'s process tree and this process, or says
    /// why it cannot.
    pub fn start(&self, running: &Running) -> Result<Recording, String> {
        let dir = self.dir.as_ref().map_err(Clone::clone)?;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut pids = tree(running);
        pids.push(std::process::id());
        let data = dir.join(format!(".perf-{}.data", std::process::id()));
        super::start(&pids, &data).map_err(|e| format!("{e:#}"))
    }

    /// Stops `recording` and writes the run's flame graphs and folded
    /// stacks as `profiles/<stem>.*` (paths relative to the results
    /// directory), or the reason there are none.
    pub fn finish(
        &self,
        recording: Result<Recording, String>,
        running: &Running,
        stem: &str,
        title: &str,
        requests: u64,
    ) -> Profile {
        let recording = match recording {
            Ok(r) => r,
            Err(why) => return Profile::failed(why),
        };
        let dir = match &self.dir {
            Ok(dir) => dir,
            Err(why) => return Profile::failed(why.clone()),
        };
        match recording.finish(dir, stem, title, &tree(running), requests) {
            Ok(mut p) => {
                for f in [
                    &mut p.server_svg,
                    &mut p.generator_svg,
                    &mut p.server_folded,
                    &mut p.generator_folded,
                ]
                .into_iter()
                .flatten()
                {
                    *f = format!("profiles/{f}");
                }
                p
            }
            Err(e) => Profile::failed(format!("{e:#}")),
        }
    }
}

/// The server's process tree, its pids.
fn tree(running: &Running) -> Vec<u32> {
    crate::procfs::tree(&running.pids())
        .iter()
        .map(|s| s.pid as u32)
        .collect()
}
