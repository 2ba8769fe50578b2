//! The two published benchmarks this lab redoes, in figures: what each
//! measured, how, and what it claimed. The reports print them beside our
//! own runs, as ratios where absolute numbers from other machines mean
//! little.

use serde::{Deserialize, Serialize};

/// One published figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedFigure {
    pub server: String,
    /// Our environment name it corresponds to (`bare`, `pinned`, `bridge`).
    pub environment: String,
    /// As the publication names it.
    pub published_as: String,
    pub rps: f64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub document_length_bytes: Option<u64>,
    /// Derived by us from the publication's ratios, not printed by it.
    pub derived: bool,
}

/// A publication: how it measured, its figures, its caveats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seed {
    pub title: String,
    pub setup: String,
    pub load: String,
    pub figures: Vec<SeedFigure>,
    pub caveats: Vec<String>,
}

#[allow(clippy::too_many_arguments)]
fn figure(
    server: &str,
    environment: &str,
    published_as: &str,
    rps: f64,
    latency_ms: [Option<f64>; 4],
    document_length_bytes: Option<u64>,
    derived: bool,
) -> SeedFigure {
    let [mean_ms, p50_ms, p99_ms, max_ms] = latency_ms;
    SeedFigure {
        server: server.into(),
        environment: environment.into(),
        published_as: published_as.into(),
        rps,
        mean_ms,
        p50_ms,
        p99_ms,
        max_ms,
        document_length_bytes,
        derived,
    }
}

/// Seed B: "PHP Swoole vs Node.js: ab test" (a Chinese-language blog post).
pub fn swoole_vs_node() -> Seed {
    Seed {
        title: "PHP Swoole vs Node.js: ab test".into(),
        setup: "macOS laptop, Intel i7 2.7 GHz, 16 GB; both servers answer \"Hello World\", no database".into(),
        load: "ab -c 100 -n 5000 (no keep-alive)".into(),
        figures: vec![
            figure(
                "swoole",
                "bare",
                "Swoole (port 8000)",
                3543.00,
                [Some(28.225), Some(26.0), Some(142.0), Some(143.0)],
                Some(0),
                false,
            ),
            figure(
                "node",
                "bare",
                "Node.js (port 1337)",
                4116.49,
                [Some(24.293), Some(21.0), Some(170.0), Some(175.0)],
                Some(12),
                false,
            ),
        ],
        caveats: vec![
            "Swoole ran with --debug (heavy logging), without OPcache, workers untuned (the post's own caveats)".into(),
            "Swoole's Document Length was 0 bytes: its figure timed answers that were not \"Hello World\"".into(),
        ],
    }
}

/// Seed A: "PHP-FPM vs RoadRunner vs Swoole: Docker vs Bare Metal" (June 2026).
pub fn docker_vs_bare() -> Seed {
    let none = [None; 4];
    Seed {
        title: "PHP-FPM vs RoadRunner vs Swoole: Docker vs Bare Metal".into(),
        setup: "4 vCPU, 8 GB, Ubuntu 22.04; PHP 8.5.7, OPcache + tracing JIT; MySQL 8.4 on the \
                same host; 20 workers in every server; 1000 sqrt iterations + SELECT 1 per request"
            .into(),
        load: "ab -c 100 -t 60, 3 or more runs, mean RPS".into(),
        figures: vec![
            figure("swoole", "bridge", "Docker bridge", 2012.0, none, None, false),
            figure("swoole", "pinned", "host network + cpuset 0,1", 9700.0, none, None, false),
            figure("swoole", "bare", "bare metal", 4970.0, none, None, true),
            figure("php-fpm", "bridge", "Docker bridge", 1944.0, none, None, false),
            figure("php-fpm", "pinned", "host network + cpuset 0,1", 5543.0, none, None, false),
            figure("php-fpm", "bare", "bare metal", 2980.0, none, None, true),
            figure("roadrunner", "bridge", "Docker bridge", 1230.0, none, None, false),
            figure("roadrunner", "pinned", "host network + cpuset 0,1", 2838.0, none, None, false),
            figure("roadrunner", "bare", "bare metal", 2591.0, none, None, false),
        ],
        caveats: vec![
            "its table did not survive; the figures are those its text states, bare metal for Swoole and PHP-FPM derived from its ratios (1.95x, 1.86x)".into(),
            "its handlers open a new PDO per request and answer HTTP 200 {\"db\":\"error\"} when the query fails".into(),
            "its compose files keep host=mysql, a name that does not resolve under network_mode: host: its host-mode runs most likely timed a failing database call, which ab counts as success".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_hold_their_published_figures() {
        let b = swoole_vs_node();
        let swoole = b.figures.iter().find(|f| f.server == "swoole").unwrap();
        assert_eq!(
            (swoole.rps, swoole.document_length_bytes),
            (3543.0, Some(0))
        );
        let a = docker_vs_bare();
        assert_eq!(a.figures.len(), 9);
        // The derived bare-metal figures follow the stated ratios.
        let f = |s: &str, e: &str| {
            a.figures
                .iter()
                .find(|x| x.server == s && x.environment == e)
                .unwrap()
                .rps
        };
        assert!((f("swoole", "pinned") / f("swoole", "bare") - 1.95).abs() < 0.01);
        assert!((f("php-fpm", "pinned") / f("php-fpm", "bare") - 1.86).abs() < 0.01);
    }
}
