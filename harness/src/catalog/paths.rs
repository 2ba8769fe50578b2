//! Where the catalog finds what it starts: the repository (`compose/`) and
//! the workspace's server binaries.

use std::path::{Path, PathBuf};

/// Where things are found.
#[derive(Clone, Debug)]
pub struct Env {
    /// The repository (holds `compose/`).
    pub repo: PathBuf,
    /// Directories searched for the workspace binaries, in order.
    pub bin_dirs: Vec<PathBuf>,
}

impl Env {
    /// `--repo-dir`, else `$BENCHLAB_REPO`, else the source tree this
    /// harness was built from. Workspace binaries: next to the harness
    /// executable (or, for a test binary in `deps/`, in its profile
    /// directory), then `target/release`, then `target/debug`.
    pub fn discover(repo: Option<&Path>) -> Env {
        let repo = repo
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("BENCHLAB_REPO").map(PathBuf::from))
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .parent()
                    .unwrap_or(Path::new("."))
                    .to_path_buf()
            });
        let mut bin_dirs = Vec::new();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            // A test binary runs from `<target>/<profile>/deps`: the
            // workspace binaries of its build sit one level up, wherever
            // CARGO_TARGET_DIR put them.
            let profile_dir = (dir.file_name() == Some("deps".as_ref()))
                .then(|| dir.parent().map(Path::to_path_buf))
                .flatten();
            bin_dirs.push(dir);
            bin_dirs.extend(profile_dir);
        }
        bin_dirs.push(repo.join("target/release"));
        bin_dirs.push(repo.join("target/debug"));
        Env { repo, bin_dirs }
    }

    pub fn compose(&self) -> PathBuf {
        self.repo.join("compose")
    }

    /// A workspace binary, and whether it is a debug build.
    pub fn workspace_binary(&self, name: &str) -> Option<(PathBuf, bool)> {
        self.bin_dirs.iter().map(|d| d.join(name)).find_map(|p| {
            p.is_file().then(|| {
                let debug = p
                    .parent()
                    .and_then(|d| d.file_name())
                    .is_some_and(|n| n == "debug" || n == "deps");
                (p, debug)
            })
        })
    }
}
