//! The second way to run a stack: its compose image. RoadRunner, FrankenPHP
//! and Swoole have their official one (`compose/<stack>/Dockerfile` on the
//! projects' own bases); php-fpm and Node.js also have their Debian variant
//! (`Dockerfile.debian` on the lab's base, buildable without any registry:
//! what proves the mechanism here).
//!
//! Where the host has no binary or module, `harness compare` builds the
//! image (once, tagged by its inputs: [`ImageWay::tag`]) and runs the
//! server from it: a container on the host network (docker-host's
//! placement, the twin of bare: no bridge, no proxy, the CPUs shared as
//! bare shares them), labelled so in the table, the report and results.json
//! (`runs_in`), never as bare. `--from-image NAMES` asks for it where the
//! host way exists too. Where neither way works, the skip line says what
//! each lacked ([`status`]: nothing is pulled for `harness servers`; a
//! build, which may pull, runs only for a comparison).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::container::{Container, Network, PID_LABEL};
use super::{find_program, run_dir, Entry, Env, OnPort, Placement, Running, StartCtx};

/// A stack's image: its compose service, its Dockerfile (relative to
/// `compose/`), the port it listens on, and how it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageWay {
    pub service: &'static str,
    pub dockerfile: &'static str,
    /// The port its command listens on (on the host network here).
    pub port: u16,
    /// The variable that moves it (`PORT`), where the image has one.
    pub port_var: Option<&'static str>,
    /// Built by `compose/debian-compose.sh` on the lab's base (no registry),
    /// rather than `docker build` on the project's official base.
    pub debian: bool,
}

/// Kept for the callers that name the official images by these names.
pub type Official = ImageWay;

pub const ROADRUNNER: ImageWay = ImageWay {
    service: "roadrunner",
    dockerfile: "roadrunner/Dockerfile",
    port: 8081,
    port_var: None,
    debian: false,
};
pub const FRANKENPHP: ImageWay = ImageWay {
    service: "frankenphp",
    dockerfile: "frankenphp/Dockerfile",
    port: 8082,
    port_var: None,
    debian: false,
};
pub const SWOOLE: ImageWay = ImageWay {
    service: "swoole",
    dockerfile: "swoole/Dockerfile",
    port: 9501,
    port_var: Some("PORT"),
    debian: false,
};
pub const PHP_FPM_DEBIAN: ImageWay = ImageWay {
    service: "php-fpm",
    dockerfile: "php-fpm/Dockerfile.debian",
    port: 8080,
    port_var: None,
    debian: true,
};
pub const NODE_DEBIAN: ImageWay = ImageWay {
    service: "node",
    dockerfile: "node/Dockerfile.debian",
    port: 3000,
    port_var: Some("PORT"),
    debian: true,
};

/// The image way of a catalog entry, if it has one.
pub fn way_of(name: &str) -> Option<ImageWay> {
    match name {
        "roadrunner" => Some(ROADRUNNER),
        "frankenphp" => Some(FRANKENPHP),
        "swoole" => Some(SWOOLE),
        "php-fpm" => Some(PHP_FPM_DEBIAN),
        "node" => Some(NODE_DEBIAN),
        _ => None,
    }
}

/// Every file under `dir` (sorted), but what is built or installed there
/// (`node_modules`, `vendor`, `stage`).
fn inputs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if matches!(name, "node_modules" | "vendor" | "stage") {
            continue;
        }
        if p.is_dir() {
            inputs(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

impl ImageWay {
    /// `benchlab/stack-<service>:<12 hex digits of its inputs>`: the
    /// files of `compose/` (its build context and the shared PHP code),
    /// so that a change to any of them builds anew and nothing else does.
    pub fn tag(&self, env: &Env) -> String {
        let compose = env.compose();
        let mut files = Vec::new();
        inputs(&compose, &mut files);
        let mut h = Sha256::new();
        h.update(self.dockerfile.as_bytes());
        for f in files {
            h.update(
                f.strip_prefix(&compose)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .as_bytes(),
            );
            h.update(std::fs::read(&f).unwrap_or_default());
        }
        let hex: String = h
            .finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("benchlab/stack-{}:{hex}", self.service)
    }

    /// Builds the image unless its tag exists; returns the tag, or the
    /// reason it could not be built (the build's last words).
    pub fn build(&self, env: &Env, say: &dyn Fn(&str)) -> Result<String, String> {
        let docker = find_program(&["docker"]).ok_or("no docker client installed")?;
        if !docker_ok(&docker, &["info", "--format", "{{.ServerVersion}}"]) {
            return Err("no Docker engine answers".into());
        }
        let tag = self.tag(env);
        if docker_ok(&docker, &["image", "inspect", &tag]) {
            return Ok(tag);
        }
        let compose = env.compose();
        let log_dir = run_dir(&format!("image-{}", self.service)).map_err(|e| format!("{e:#}"))?;
        let log = log_dir.path().join("build.log");
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = file.try_clone().map_err(|e| e.to_string())?;
        let t = std::time::Instant::now();
        let status = if self.debian {
            say(&format!(
                "{}: building its image {tag} from compose/{} on the lab's base \
                 (compose/debian-compose.sh; once, cached after) ...",
                self.service, self.dockerfile
            ));
            let bins = env
                .bin_dirs
                .iter()
                .find(|d| d.join("event-loop").is_file())
                .cloned()
                .unwrap_or_else(|| env.repo.join("target/release"));
            Command::new(compose.join("debian-compose.sh"))
                .args(["-p", "benchlab-images", "build", self.service])
                .env("BENCH_RELEASE_DIR", bins)
                .stdin(Stdio::null())
                .stdout(file)
                .stderr(err)
                .status()
        } else {
            say(&format!(
                "{}: building its image {tag} from compose/{} on its official base \
                 (pulls the base the first time; once, cached after) ...",
                self.service, self.dockerfile
            ));
            Command::new(&docker)
                .args(["build", "--label", "benchlab.image=stack", "-t", &tag, "-f"])
                .arg(compose.join(self.dockerfile))
                .arg(&compose)
                .stdin(Stdio::null())
                .stdout(file)
                .stderr(err)
                .status()
        };
        let last = || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output")
                .trim()
                .to_string()
        };
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                return Err(format!(
                    "building compose/{} failed ({s}): {}",
                    self.dockerfile,
                    last()
                ))
            }
            Err(e) => return Err(format!("cannot run the build: {e}")),
        }
        if self.debian {
            let built = format!("benchlab/{}:0.1.0-debian", self.service);
            if !docker_ok(&docker, &["tag", &built, &tag]) {
                return Err(format!("the build made no image {built}"));
            }
        }
        say(&format!(
            "{}: image {tag} built in {:.0} s",
            self.service,
            t.elapsed().as_secs_f64()
        ));
        Ok(tag)
    }

    /// Where a server started from this image runs, in words (results.json's
    /// `runs_in`, the table, the report).
    pub fn runs_in(&self, tag: &str) -> String {
        format!(
            "a container of its image {tag} (compose/{}): on the host network in \
             compare's default run (docker-host's placement), the environment's own \
             container under --env docker*; not bare",
            self.dockerfile
        )
    }

    /// Starts the server from image `tag`: its own command, the contract's
    /// variables (HOST, PORT where it moves, the database as the server
    /// sees it), and waits as every recipe does. Unplaced (compare's default
    /// run): a container on the host network, docker-host's placement. In a
    /// Docker environment: that environment's container (its network, the
    /// published port mapped to the image's own, its CPUs, its labels).
    pub fn start(
        &self,
        tag: &str,
        entry: &Entry,
        ctx: &StartCtx,
        placement: &Placement,
    ) -> anyhow::Result<Running> {
        let docker = find_program(&["docker"]).context("no docker client installed")?;
        if placement.netns.is_some() {
            anyhow::bail!(
                "{} runs from its image: a container, not a network namespace of the lab's \
                 (the Docker environments place it)",
                entry.name
            );
        }
        let mut placement = placement.clone();
        let published = placement.port();
        let port = match (published, self.port_var) {
            (Some(p), _) => p,
            (None, Some(_)) => super::free_port()?,
            (None, None) => self.port,
        };
        let mut container = match placement.container.take() {
            Some(c) => c,
            None => Container {
                docker,
                image: String::new(),
                network: Network::Host,
                name_prefix: format!("benchlab-stack-{}-{}-", self.service, std::process::id()),
                labels: vec![(PID_LABEL.to_string(), std::process::id().to_string())],
                read_only: Vec::new(),
                files: Vec::new(),
                cpus: placement.cpus.take(),
                pod: Default::default(),
                image_command: true,
                inner_port: None,
            },
        };
        container.image = tag.to_string();
        container.image_command = true;
        // The image has what it runs: nothing of the host is mounted.
        container.read_only.clear();
        container.files.clear();
        container.inner_port = match self.port_var {
            Some(_) => None,
            None => Some(self.port),
        };
        let mut cmd = Command::new("image-command");
        cmd.env("HOST", placement.listen_ip().to_string());
        if let Some(var) = self.port_var {
            cmd.env(var, port.to_string());
        }
        placement.container = Some(container);
        let mut running = OnPort {
            cmd,
            dir: run_dir(&entry.name)?,
            log: "container.log",
            port,
            versions: vec![format!("image {tag}")],
        }
        .spawn(entry, ctx, &placement)?;
        running
            .notes
            .push(format!("{}: {}", entry.name, self.runs_in(tag)));
        Ok(running)
    }
}

/// The images a Dockerfile's `FROM` lines name (its own stages left out).
pub fn bases(dockerfile: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for line in dockerfile.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("FROM"))
        {
            continue;
        }
        let rest: Vec<&str> = words[1..]
            .iter()
            .copied()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let Some(image) = rest.first() else { continue };
        if !stages.iter().any(|s| s.eq_ignore_ascii_case(image))
            && !images.contains(&image.to_string())
        {
            images.push(image.to_string());
        }
        if rest.len() >= 3 && rest[1].eq_ignore_ascii_case("AS") {
            stages.push(rest[2].to_string());
        }
    }
    images
}

fn docker_ok(docker: &Path, args: &[&str]) -> bool {
    Command::new(docker)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What the image path needs and lacks here, in one clause (`image: …`),
/// without pulling or building anything.
pub fn status(env: &Env, official: &ImageWay) -> String {
    let path = env.compose().join(official.dockerfile);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return format!("image: {} not found", path.display());
    };
    let Some(docker) = find_program(&["docker"]) else {
        return format!(
            "image: compose/{} needs Docker (no docker client installed)",
            official.dockerfile
        );
    };
    if !docker_ok(&docker, &["info", "--format", "{{.ServerVersion}}"]) {
        return format!(
            "image: compose/{} needs a Docker engine, and none answers",
            official.dockerfile
        );
    }
    let missing: Vec<String> = bases(&text)
        .into_iter()
        .filter(|b| !docker_ok(&docker, &["image", "inspect", b]))
        .collect();
    if missing.is_empty() {
        format!(
            "image: its bases are in the local engine: harness compare builds it and runs \
             {} from it (a container on the host network)",
            official.service
        )
    } else {
        format!(
            "image: compose/{} builds on {}, not in the local engine (harness compare tries \
             the build, which pulls them where Docker Hub and ghcr.io answer)",
            official.dockerfile,
            missing.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_are_the_from_images_without_the_files_own_stages() {
        let d = "FROM ghcr.io/roadrunner-server/roadrunner:2025.1.5 AS roadrunner\n\
                 FROM composer:2.8.9 AS composer\nFROM php:8.2.28-cli-bookworm\n\
                 COPY --from=roadrunner /usr/bin/rr /usr/local/bin/rr\nFROM roadrunner\n";
        assert_eq!(
            bases(d),
            [
                "ghcr.io/roadrunner-server/roadrunner:2025.1.5",
                "composer:2.8.9",
                "php:8.2.28-cli-bookworm"
            ]
        );
        let env = Env::discover(None);
        for o in [ROADRUNNER, FRANKENPHP, SWOOLE] {
            let text = std::fs::read_to_string(env.compose().join(o.dockerfile)).unwrap();
            assert!(!bases(&text).is_empty(), "{}", o.dockerfile);
        }
    }
}
