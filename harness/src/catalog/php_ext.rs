//! A PHP extension module handed to the lab as a file (`SWOOLE_SO`, or the
//! file the system's PHP loads it from), and what a server needs to load it
//! where it runs. Bare: `-d extension=PATH`. In a container of the lab's
//! image (Debian's PHP at the host's version, [`crate::env::docker::image`]):
//! the same, with the module mounted read-only at its own path and each
//! shared library it links (as the host's loader resolves it, `ldd`)
//! mounted at the name the loader asks for — the image has PHP, not every
//! library a module was built against (a PECL Swoole links libstdc++,
//! OpenSSL, curl, …). glibc's own libraries are the image's.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use super::Placement;

/// A module file, loaded with `-d extension=PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleFile(pub PathBuf);

/// glibc's libraries (and the vDSO): every image has its own, of the same
/// release; never mounted over.
const GLIBC: &[&str] = &[
    "linux-vdso.so",
    "libc.so",
    "libm.so",
    "libdl.so",
    "libpthread.so",
    "librt.so",
    "ld-linux",
];

impl ModuleFile {
    /// The `php` arguments that load it.
    pub fn php_args(&self) -> Vec<String> {
        vec!["-d".into(), format!("extension={}", self.0.display())]
    }

    /// The shared libraries it links, as (the host's real file, the path
    /// the loader resolves), glibc's left out.
    pub fn libraries(&self) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
        let out = Command::new("ldd")
            .arg(&self.0)
            .output()
            .context("cannot run ldd")?;
        if !out.status.success() {
            bail!(
                "ldd {} failed: {}",
                self.0.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut libs = Vec::new();
        for line in text.lines() {
            // `libicuuc.so.72 => /lib/x86_64-linux-gnu/libicuuc.so.72 (0x…)`
            let Some((name, rest)) = line.trim().split_once(" => ") else {
                continue;
            };
            if GLIBC.iter().any(|g| name.starts_with(g)) {
                continue;
            }
            let Some(path) = rest
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/'))
            else {
                bail!(
                    "{} needs {name}, which the host's loader does not find",
                    self.0.display()
                );
            };
            let resolved = Path::new(path);
            let real = std::fs::canonicalize(resolved)
                .with_context(|| format!("cannot resolve {path}"))?;
            // The target: the loader's name, in the real directory (`/lib`
            // is a link to `/usr/lib` on a merged-/usr system and in the image).
            let dir = resolved
                .parent()
                .and_then(|d| std::fs::canonicalize(d).ok())
                .unwrap_or_else(|| resolved.parent().unwrap_or(Path::new("/")).to_path_buf());
            let target = dir.join(resolved.file_name().unwrap_or_default());
            libs.push((real, target));
        }
        Ok(libs)
    }

    /// Makes it loadable where `placement` runs the server: in a container,
    /// the module and its libraries are mounted read-only; bare, nothing to do.
    pub fn mount_into(&self, placement: &mut Placement) -> anyhow::Result<()> {
        let Some(container) = placement.container.as_mut() else {
            return Ok(());
        };
        let real = std::fs::canonicalize(&self.0)
            .with_context(|| format!("cannot read the module {}", self.0.display()))?;
        container.files.push((real, self.0.clone()));
        container.files.extend(self.libraries()?);
        container.files.sort();
        container.files.dedup();
        Ok(())
    }
}

/// The file the system's `php` loads `name` from, when it is in PHP's
/// `extension_dir` as `name.so` (where Debian's packages and `pecl install`
/// put modules).
pub fn system_module(php: &Path, name: &str) -> Option<ModuleFile> {
    let out = Command::new(php)
        .args(["-r", "echo ini_get('extension_dir');"])
        .output()
        .ok()?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let so = Path::new(&dir).join(format!("{name}.so"));
    (out.status.success() && so.is_file()).then_some(ModuleFile(so))
}
