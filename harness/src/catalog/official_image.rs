//! The second way to run RoadRunner, FrankenPHP and Swoole: their official
//! images (`compose/<stack>/Dockerfile` on the projects' own bases). Where
//! the host has no binary or module, the skip line says what the image path
//! needs and whether this machine has it, so that "skipped" always names
//! everything that was tried. Nothing is pulled here (a look-up must not
//! download hundreds of MiB): the bases are looked for in the local engine.
//!
//! `harness compare` does not start a server from its image yet; with the
//! bases at hand the line says how to run it with compose and `--target`.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{find_program, Env};

/// A stack's official image: its Dockerfile (relative to `compose/`), its
/// compose service and the port it publishes there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Official {
    pub service: &'static str,
    pub dockerfile: &'static str,
    pub port: u16,
}

pub const ROADRUNNER: Official = Official {
    service: "roadrunner",
    dockerfile: "roadrunner/Dockerfile",
    port: 8081,
};
pub const FRANKENPHP: Official = Official {
    service: "frankenphp",
    dockerfile: "frankenphp/Dockerfile",
    port: 8082,
};
pub const SWOOLE: Official = Official {
    service: "swoole",
    dockerfile: "swoole/Dockerfile",
    port: 9501,
};

/// The images a Dockerfile's `FROM` lines name (its own stages left out).
pub fn bases(dockerfile: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for line in dockerfile.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !words.first().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let rest: Vec<&str> = words[1..]
            .iter()
            .copied()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let Some(image) = rest.first() else { continue };
        if !stages.iter().any(|s| s.eq_ignore_ascii_case(image)) && !images.contains(&image.to_string()) {
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

/// What the image path needs and lacks here, in one clause (`image: …`).
pub fn status(env: &Env, official: &Official) -> String {
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
            "image: its bases are in the local engine, but compare does not start servers \
             from images yet: `docker compose -f compose/docker-compose.yml up -d --build mysql {}` \
             and --target {}=http://127.0.0.1:{}",
            official.service, official.service, official.port
        )
    } else {
        format!(
            "image: compose/{} builds on {}, not in the local engine (no registry was asked: \
             `docker pull` them where Docker Hub and ghcr.io answer, or run compose/check.sh --official)",
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
