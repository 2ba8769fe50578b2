//! The lab's image, without an image registry: a base made from Debian's
//! own packages (`debootstrap --variant=minbase` of the host's release from
//! the host's own apt mirror, then `docker import`), or a local
//! `debian:<release>-slim` where one was pulled; on it, the Debian packages
//! the catalog runs (php-fpm, nginx, MariaDB, …) at exactly the versions the
//! host runs bare, from the host's apt sources. Our binaries, the host's
//! Node.js and the repository's files are not copied in: they are mounted
//! read-only from the build ([`super::Docker`]), so there is one build of
//! each, inside and outside.
//!
//! The tag is a hash of the inputs (the base's id, the Dockerfile with its
//! pinned versions, the apt sources): built once, rebuilt only when one of
//! them changes. No image is ever pulled.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

use super::Engine;

/// The Debian packages the catalog's servers need inside, when the host has
/// them (each at the host's version): php-fpm + nginx, nginx-static, the
/// database container, and the C++ runtime the host's `node` links.
pub const PACKAGES: &[&str] = &[
    "php8.2-fpm",
    "php8.2-cli",
    "php8.2-mysql",
    "php8.2-opcache",
    "php8.2-mbstring",
    "nginx-light",
    "mariadb-server",
    "libstdc++6",
];

/// A lab image, ready.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// `benchlab/lab:<hash>`.
    pub tag: String,
    /// The base it was built on and whether it was built now, in words.
    pub origin: String,
    /// `name=version` of every pinned package.
    pub packages: Vec<String>,
    /// Seconds the builds took in this call (0 when cached).
    pub build_s: f64,
}

/// Makes (or finds, cached) the lab image; one build at a time per process.
pub fn lab_image(engine: &Engine) -> anyhow::Result<Image> {
    static BUILDING: Mutex<()> = Mutex::new(());
    let _one = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    // And one per machine: two harnesses (tests run several) would build
    // the same tag twice side by side.
    let _machine = MachineLock::take(&std::env::temp_dir().join("benchlab-image.lock"))?;
    let started = Instant::now();
    let (base, base_origin) = base_image(engine)?;
    let base_id = engine
        .run(&["image", "inspect", "--format", "{{.Id}}", &base])
        .with_context(|| format!("the base image {base} is not there"))?;
    let packages = pinned_packages();
    let sources = apt_sources()?;
    let dockerfile = dockerfile(&base, &packages);
    let mut h = Sha256::new();
    h.update(base_id.as_bytes());
    h.update(dockerfile.as_bytes());
    for (name, text) in &sources {
        h.update(name.as_bytes());
        h.update(text.as_bytes());
    }
    let hash: String = h
        .finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let tag = format!("benchlab/lab:{hash}");
    if image_exists(engine, &tag) {
        return Ok(Image {
            tag,
            origin: format!("cached, on {base} ({base_origin})"),
            packages,
            build_s: started.elapsed().as_secs_f64(),
        });
    }
    let ctx = tempfile::Builder::new()
        .prefix("benchlab-image-")
        .tempdir()
        .context("cannot create the image's build context")?;
    std::fs::create_dir_all(ctx.path().join("apt/sources.list.d"))?;
    for (name, text) in &sources {
        std::fs::write(ctx.path().join("apt/sources.list.d").join(name), text)
            .with_context(|| format!("cannot write {name} into the build context"))?;
    }
    std::fs::write(ctx.path().join("Dockerfile"), &dockerfile)?;
    eprintln!(
        "docker: building {tag} on {base}: {} from Debian's packages at the host's versions \
         (once; cached after) ...",
        packages.join(" ")
    );
    let t = Instant::now();
    let log = ctx.path().join("build.log");
    let status = Command::new(&engine.docker)
        .args(["build", "--label", "benchlab.image=lab", "-t", &tag])
        .arg(ctx.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(ctx.path().join("build.err"))?)
        .status()
        .context("cannot run docker build")?;
    if !status.success() {
        let out = std::fs::read_to_string(&log).unwrap_or_default()
            + &std::fs::read_to_string(ctx.path().join("build.err")).unwrap_or_default();
        let tail: Vec<&str> = out.lines().rev().take(15).collect();
        bail!(
            "docker build of {tag} failed ({status}):\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    eprintln!("docker: built {tag} in {:.0} s", t.elapsed().as_secs_f64());
    Ok(Image {
        tag,
        origin: format!(
            "built now in {:.0} s, on {base} ({base_origin})",
            t.elapsed().as_secs_f64()
        ),
        packages,
        build_s: started.elapsed().as_secs_f64(),
    })
}

/// An exclusive `flock` on a file, released on drop.
struct MachineLock(std::fs::File);

impl MachineLock {
    fn take(path: &Path) -> anyhow::Result<MachineLock> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!(
                "cannot lock {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(MachineLock(f))
    }
}

impl Drop for MachineLock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: as above.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn image_exists(engine: &Engine, tag: &str) -> bool {
    engine
        .run(&["image", "inspect", "--format", "{{.Id}}", tag])
        .is_ok()
}

/// The Dockerfile: the host's apt sources (copied into the build context's
/// `apt/sources.list.d/`, never empty: [`apt_sources`]) in place of the
/// base's, then the packages at their pinned versions.
pub fn dockerfile(base: &str, packages: &[String]) -> String {
    let install = if packages.is_empty() {
        String::new()
    } else {
        format!(
            "RUN rm -f /etc/apt/sources.list \\\n \
             && cp /tmp/apt/sources.list.d/* /etc/apt/sources.list.d/ \\\n \
             && apt-get update -qq \\\n \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {} \\\n \
             && rm -rf /var/lib/apt/lists/*\n",
            packages.join(" ")
        )
    };
    format!(
        "# benchlab's lab image: Debian's packages at the host's versions (harness/src/env/docker/image.rs)\n\
         FROM {base}\n\
         COPY apt/ /tmp/apt/\n\
         {install}"
    )
}

/// `name=version` for each of [`PACKAGES`] the host has installed.
pub fn pinned_packages() -> Vec<String> {
    PACKAGES
        .iter()
        .filter_map(|p| host_version(p).map(|v| format!("{p}={v}")))
        .collect()
}

/// The installed version of a Debian package on the host.
fn host_version(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}\t${Version}", package])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (status, version) = text.split_once('\t')?;
    (out.status.success() && status.ends_with("installed") && !version.is_empty())
        .then(|| version.to_string())
}

/// The host's Debian apt sources, as files for `/etc/apt/sources.list.d/`:
/// `sources.list`'s `deb` lines and each `*.list` / `*.sources` file signed
/// by Debian's archive keyring (or by no named key), so the image reaches
/// the same archive, suites and security updates as the host.
pub fn apt_sources() -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/etc/apt/sources.list") {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("deb "))
            .collect();
        if !lines.is_empty() {
            out.push(("host-sources.list".to_string(), lines.join("\n") + "\n"));
        }
    }
    let dir = Path::new("/etc/apt/sources.list.d");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for f in files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if !(name.ends_with(".list") || name.ends_with(".sources")) {
            continue;
        }
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        if debian_signed(&text) {
            out.push((name, text));
        }
    }
    if out.is_empty() {
        bail!(
            "docker: the host has no Debian apt source to build the lab image from \
             (/etc/apt/sources.list, /etc/apt/sources.list.d)"
        );
    }
    Ok(out)
}

/// Whether every key a sources file names is Debian's archive keyring
/// (deb822 `Signed-By:`, one-line `[signed-by=…]`); none named counts.
fn debian_signed(text: &str) -> bool {
    let mut keys = Vec::new();
    for l in text.lines().map(str::trim) {
        if let Some(k) = l.strip_prefix("Signed-By:") {
            keys.push(k.trim().to_string());
        }
        if let Some(i) = l.find("signed-by=") {
            let rest = &l[i + "signed-by=".len()..];
            keys.extend(
                rest.split(|c: char| c == ']' || c.is_whitespace())
                    .next()
                    .map(str::to_string),
            );
        }
    }
    keys.iter().all(|k| k.contains("debian-archive-keyring"))
}

/// The host's release codename (`bookworm`).
pub fn host_release() -> anyhow::Result<String> {
    let text = std::fs::read_to_string("/etc/os-release").context("cannot read /etc/os-release")?;
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
        .context("/etc/os-release names no VERSION_CODENAME: not a Debian release")
}

/// The host's Debian mirror: the first URI of a source that serves `release`.
pub fn host_mirror(release: &str, sources: &[(String, String)]) -> Option<String> {
    for (_, text) in sources {
        // deb822: URIs: and Suites: fields in one stanza.
        for stanza in text.split("\n\n") {
            let field = |name: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
            };
            if let (Some(uris), Some(suites)) = (field("URIs:"), field("Suites:")) {
                if suites.split_whitespace().any(|s| s == release) {
                    return uris.split_whitespace().next().map(str::to_string);
                }
            }
        }
        // One-line style: deb [opts] URI SUITE COMPONENTS...
        for l in text.lines() {
            let words: Vec<&str> = l
                .split_whitespace()
                .filter(|w| !w.starts_with('[') && !w.ends_with(']'))
                .collect();
            if words.len() >= 3 && words[0] == "deb" && words[2] == release {
                return Some(words[1].to_string());
            }
        }
    }
    None
}

/// The base image: `benchlab/base:<release>` made here from Debian's
/// packages, or a local `debian:<release>-slim`; with where it came from.
fn base_image(engine: &Engine) -> anyhow::Result<(String, String)> {
    let release = host_release()?;
    let slim = format!("debian:{release}-slim");
    if image_exists(engine, &slim) {
        return Ok((slim, "Debian's image, present locally".into()));
    }
    let tag = format!("benchlab/base:{release}");
    if image_exists(engine, &tag) {
        return Ok((tag, "debootstrap, cached".into()));
    }
    let sources = apt_sources()?;
    let mirror = host_mirror(&release, &sources).with_context(|| {
        format!("no apt source of the host serves {release}: cannot debootstrap a base image")
    })?;
    let debootstrap = crate::catalog::find_program(&["debootstrap"]).context(
        "no image registry is used and debootstrap is not installed to make a base image \
         (apt-get install debootstrap; scripts/install-deps does)",
    )?;
    if !crate::catalog::is_root() {
        bail!("making the base image needs root (debootstrap); run once as root, or `docker pull {slim}` where a registry answers");
    }
    let dir = tempfile::Builder::new()
        .prefix("benchlab-debootstrap-")
        .tempdir_in("/var/tmp")
        .context("cannot create a directory for debootstrap")?;
    let root = dir.path().join("root");
    eprintln!(
        "docker: making the base image {tag}: debootstrap --variant=minbase {release} from the \
         host's mirror, then docker import (once; about a minute) ..."
    );
    let t = Instant::now();
    let out = Command::new(&debootstrap)
        .args(["--variant=minbase", &release])
        .arg(&root)
        .arg(&mirror)
        .stdin(Stdio::null())
        .output()
        .context("cannot run debootstrap")?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = text.lines().rev().take(10).collect();
        bail!(
            "debootstrap {release} failed ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let tar = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot run tar")?;
    let import = Command::new(&engine.docker)
        .args(["import", "--change", "LABEL benchlab.image=base", "-", &tag])
        .stdin(tar.stdout.context("tar's stdout")?)
        .stdout(Stdio::null())
        .output()
        .context("cannot run docker import")?;
    if !import.status.success() {
        bail!(
            "docker import of {tag} failed: {}",
            String::from_utf8_lossy(&import.stderr).trim()
        );
    }
    eprintln!("docker: made {tag} in {:.0} s", t.elapsed().as_secs_f64());
    Ok((
        tag,
        format!(
            "debootstrap, made now in {:.0} s",
            t.elapsed().as_secs_f64()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_read_from_either_style_of_apt_source() {
        let deb822 = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\nTypes: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\n";
        let one_line = "deb [arch=amd64] http://other.example/debian bookworm main\n";
        let s = |t: &str| vec![("x".to_string(), t.to_string())];
        assert_eq!(
            host_mirror("bookworm", &s(deb822)).as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(
            host_mirror("bookworm", &s(one_line)).as_deref(),
            Some("http://other.example/debian")
        );
        assert_eq!(host_mirror("trixie", &s(deb822)), None);
    }

    #[test]
    fn only_debian_signed_sources_are_copied() {
        assert!(debian_signed(
            "Types: deb\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        ));
        assert!(debian_signed("deb http://x/debian bookworm main\n"));
        assert!(!debian_signed(
            "Types: deb\nSigned-By: /usr/share/keyrings/vendor.gpg\n"
        ));
        assert!(!debian_signed(
            "deb [signed-by=/usr/share/keyrings/vendor.gpg] http://x/ nodistro main\n"
        ));
    }

    /// The versions are pinned, so the image runs what the host runs; a
    /// change of version, source or base is a new tag.
    #[test]
    fn the_dockerfile_pins_versions_and_uses_the_host_sources() {
        let d = dockerfile("benchlab/base:bookworm", &["nginx-light=1.22.1-9".into()]);
        assert!(d.contains("FROM benchlab/base:bookworm\n"), "{d}");
        assert!(d.contains("apt-get install -y -qq --no-install-recommends nginx-light=1.22.1-9"));
        assert!(d.contains("cp /tmp/apt/sources.list.d/* /etc/apt/sources.list.d/"));
        assert!(d.contains("RUN rm -f /etc/apt/sources.list \\\n"), "{d}");
    }
}
