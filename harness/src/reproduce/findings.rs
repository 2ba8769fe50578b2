//! Each seed's claims, judged from our cells. Pure functions of the
//! document, so a test can feed them numbers and watch the verdicts follow.

use super::document::{Cell, Finding, Reproduction, Verdict};

const SEED_CONDITION: &str = "as the seed ran it";
const FAILING_DB: &str = "database unreachable";

fn finding(claim: &str, verdict: Verdict, evidence: String) -> Finding {
    Finding {
        claim: claim.into(),
        verdict,
        evidence,
    }
}

fn not_measured(claim: &str, what: &str) -> Finding {
    finding(
        claim,
        Verdict::NotMeasured,
        format!("{what} was not measured here"),
    )
}

/// Seed B's claims.
pub fn swoole_vs_node(doc: &Reproduction) -> Vec<Finding> {
    let mut out = Vec::new();
    let swoole = doc.cell("swoole", "bare", "ab", SEED_CONDITION);
    let node = doc.cell("node", "bare", "ab", SEED_CONDITION);
    let claim = "Node.js serves about 16% more requests per second than Swoole (ab -c 100 -n 5000)";
    out.push(match (swoole, node) {
        (Some(s), Some(n)) if s.rps > 0.0 => {
            let r = n.rps / s.rps;
            finding(
                claim,
                if r > 1.0 { Verdict::Supported } else { Verdict::NotSupported },
                format!(
                    "under the seed's ab, Node.js {:.0} req/s and Swoole {:.0}: Node.js/Swoole = {r:.2} (the seed: 1.16)",
                    n.rps, s.rps
                ),
            )
        }
        _ => not_measured(claim, "Swoole or Node.js under the seed's ab"),
    });
    let claim = "Swoole has the better tail latency (p99 142 ms against 170 ms)";
    out.push(match (swoole, node) {
        (Some(s), Some(n)) => finding(
            claim,
            if s.p99_ms < n.p99_ms {
                Verdict::Supported
            } else {
                Verdict::NotSupported
            },
            format!(
                "p99 under the seed's ab: Swoole {:.1} ms, Node.js {:.1} ms",
                s.p99_ms, n.p99_ms
            ),
        ),
        _ => not_measured(claim, "Swoole or Node.js under the seed's ab"),
    });
    let claim = "The Swoole figure measures \"Hello World\" answers";
    let verified = doc.cell("swoole", "bare", "harness", "");
    out.push(match (swoole, verified) {
        (Some(s), Some(v)) => finding(
            claim,
            Verdict::NotSupported,
            format!(
                "the seed's ab saw 0-byte documents; here Swoole's document is {} bytes under ab, and \
                 the engine verified {:.0} \"Hello World\" answers per second: the seed timed something else",
                s.document_length_bytes.map_or("?".into(), |b| b.to_string()),
                v.valid_rps.unwrap_or(0.0)
            ),
        ),
        _ => not_measured(claim, "Swoole"),
    });
    out
}

/// The bridge's cost for `server`: 1 - bridge/bare under ab, from the real
/// Docker Engine (`docker`) where it was measured, else from the emulation,
/// preferring `bridge-proxy` (what a client on the host goes through by
/// default); the environment is named with the figure.
fn bridge_cost(doc: &Reproduction, server: &str) -> Option<(f64, &'static str)> {
    let bare = doc.cell(server, "bare", "ab", SEED_CONDITION)?;
    [
        ("docker", "docker (Docker Engine)"),
        ("bridge-proxy", "bridge-proxy (emulated)"),
        ("bridge", "bridge (emulated)"),
    ]
    .into_iter()
    .find_map(|(env, label)| {
        let b = doc.cell(server, env, "ab", SEED_CONDITION)?;
        (bare.rps > 0.0).then(|| (1.0 - b.rps / bare.rps, label))
    })
}

/// Host networking + CPU pinning over bare under ab: the real Docker
/// Engine's `docker-host-pinned` where measured, else its bare counterpart
/// `pinned` (the same CPU split without a container).
fn pinned_gain(doc: &Reproduction, server: &str) -> Option<(f64, &'static str)> {
    let bare = doc.cell(server, "bare", "ab", SEED_CONDITION)?;
    [
        ("docker-host-pinned", "docker-host-pinned (Docker Engine)"),
        ("pinned", "pinned (no container)"),
    ]
    .into_iter()
    .find_map(|(env, label)| {
        let p = doc.cell(server, env, "ab", SEED_CONDITION)?;
        (bare.rps > 0.0).then(|| (p.rps / bare.rps, label))
    })
}

fn measured_servers(doc: &Reproduction) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for c in doc
        .cells
        .iter()
        .filter(|c| c.ok() && c.condition.starts_with(SEED_CONDITION))
    {
        if !names.contains(&c.server) {
            names.push(c.server.clone());
        }
    }
    names
}

/// Seed A's claims.
pub fn docker_vs_bare(doc: &Reproduction) -> Vec<Finding> {
    let mut out = Vec::new();
    let servers = measured_servers(doc);
    let claim = "Docker's bridge network costs 35-60% of the throughput, for every server";
    let costs: Vec<(String, f64, &str)> = servers
        .iter()
        .filter_map(|s| bridge_cost(doc, s).map(|(c, env)| (s.clone(), c, env)))
        .collect();
    out.push(if costs.is_empty() {
        not_measured(
            claim,
            "a bridge environment (a Docker engine, or root and nft for the emulation)",
        )
    } else {
        let all_in = costs.iter().all(|(_, c, _)| (0.35..=0.60).contains(c));
        finding(
            claim,
            if all_in {
                Verdict::Supported
            } else {
                Verdict::NotSupported
            },
            costs
                .iter()
                .map(|(s, c, env)| format!("{s}: {env} costs {:.0}%", 100.0 * c))
                .collect::<Vec<_>>()
                .join("; "),
        )
    });
    let claim = "Host networking with CPU pinning beats bare metal (1.86-1.95x)";
    let gains: Vec<(String, f64, &str)> = servers
        .iter()
        .filter_map(|s| pinned_gain(doc, s).map(|(g, env)| (s.clone(), g, env)))
        .collect();
    out.push(if gains.is_empty() {
        not_measured(claim, "the pinned environment")
    } else {
        // "Beats" means more than the run-to-run noise of such runs (a few %).
        let all_beat = gains.iter().all(|(_, g, _)| *g > 1.10);
        finding(
            claim,
            if all_beat {
                Verdict::Supported
            } else {
                Verdict::NotSupported
            },
            gains
                .iter()
                .map(|(s, g, env)| format!("{s}: {env}/bare = {g:.2}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    });
    let claim = "Its figures count working requests (ab would show a failing database)";
    let failing: Vec<(&Cell, &Cell)> = servers
        .iter()
        .filter_map(|s| {
            Some((
                doc.cell(s, "bare", "ab", FAILING_DB)?,
                doc.cell(s, "bare", "harness", FAILING_DB)?,
            ))
        })
        .collect();
    out.push(if failing.is_empty() {
        not_measured(claim, "the failing-database run")
    } else {
        let invisible = failing
            .iter()
            .any(|(ab, engine)| ab.failed == 0 && ab.rps > 0.0 && engine.valid_rps.unwrap_or(0.0) < 1.0);
        finding(
            claim,
            if invisible { Verdict::NotSupported } else { Verdict::Supported },
            failing
                .iter()
                .map(|(ab, engine)| {
                    format!(
                        "{}: with the database unreachable, ab {:.0} req/s with {} failed; the engine {:.0} valid req/s",
                        ab.server,
                        ab.rps,
                        ab.failed,
                        engine.valid_rps.unwrap_or(0.0)
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        )
    });
    out
}

#[cfg(test)]
mod tests {
    use super::super::document::SCHEMA;
    use super::super::seeds;
    use super::*;
    use crate::lab::record::{Database, Machine};

    fn cell(server: &str, env: &str, tool: &str, condition: &str, rps: f64) -> Cell {
        Cell {
            server: server.into(),
            environment: env.into(),
            tool: tool.into(),
            condition: condition.into(),
            rps,
            ..Cell::default()
        }
    }

    fn doc(experiment: &str, cells: Vec<Cell>) -> Reproduction {
        Reproduction {
            header: crate::lab::record::Header {
                schema: SCHEMA.into(),
                harness_version: "t".into(),
                started_utc: "t".into(),
                finished_utc: "t".into(),
                interrupted: false,
                command: Vec::new(),
            },
            experiment: experiment.into(),
            machine: Machine {
                cpu_model: "c".into(),
                cores: 2,
                kernel: "k".into(),
                os: "o".into(),
                memory_bytes: 1,
                load_avg_1m: 0.0,
                sched_autogroup_enabled: None,
                scheduling: "s".into(),
                harness_build: "debug".into(),
            },
            database: Database {
                kind: "none".into(),
                url: None,
                version: None,
                max_connections: None,
            },
            servers: Vec::new(),
            seed: seeds::docker_vs_bare(),
            cells,
            findings: Vec::new(),
        }
    }

    const SEED: &str = "as the seed ran it: ab";

    /// Where the real engine was measured, its cells decide, and the
    /// evidence names which environment it read.
    #[test]
    fn the_real_docker_cells_decide_over_the_emulated_ones() {
        let d = doc(
            "docker-vs-bare",
            vec![
                cell("php-fpm", "bare", "ab", SEED, 1000.0),
                cell("php-fpm", "bridge-proxy", "ab", SEED, 900.0),
                cell("php-fpm", "docker", "ab", SEED, 640.0),
                cell("php-fpm", "pinned", "ab", SEED, 1500.0),
                cell("php-fpm", "docker-host-pinned", "ab", SEED, 870.0),
            ],
        );
        let f = docker_vs_bare(&d);
        assert_eq!(f[0].verdict, Verdict::Supported, "{:?}", f[0]);
        assert!(
            f[0].evidence.contains("docker (Docker Engine) costs 36%"),
            "{}",
            f[0].evidence
        );
        assert_eq!(f[1].verdict, Verdict::NotSupported, "{:?}", f[1]);
        assert!(
            f[1].evidence
                .contains("docker-host-pinned (Docker Engine)/bare = 0.87"),
            "{}",
            f[1].evidence
        );
    }

    #[test]
    fn the_bridge_verdict_follows_the_numbers() {
        let d = doc(
            "docker-vs-bare",
            vec![
                cell("php-fpm", "bare", "ab", SEED, 1000.0),
                cell("php-fpm", "bridge-proxy", "ab", SEED, 500.0),
            ],
        );
        assert_eq!(docker_vs_bare(&d)[0].verdict, Verdict::Supported);
        let d = doc(
            "docker-vs-bare",
            vec![
                cell("php-fpm", "bare", "ab", SEED, 1000.0),
                cell("php-fpm", "bridge-proxy", "ab", SEED, 900.0),
            ],
        );
        let f = &docker_vs_bare(&d)[0];
        assert_eq!(f.verdict, Verdict::NotSupported);
        assert!(f.evidence.contains("costs 10%"), "{}", f.evidence);
        assert_eq!(docker_vs_bare(&d)[1].verdict, Verdict::NotMeasured);
    }

    #[test]
    fn a_failing_database_invisible_to_ab_refutes_the_figures() {
        let mut ab = cell(
            "swoole",
            "bare",
            "ab",
            "database unreachable (refused)",
            4000.0,
        );
        ab.failed = 0;
        let mut engine = cell(
            "swoole",
            "bare",
            "harness",
            "database unreachable (refused)",
            4000.0,
        );
        engine.valid_rps = Some(0.0);
        let mut d = doc(
            "docker-vs-bare",
            vec![cell("swoole", "bare", "ab", SEED, 3000.0), ab, engine],
        );
        assert_eq!(docker_vs_bare(&d)[2].verdict, Verdict::NotSupported);
        // An honest server (503) shows in ab's failures: then the claim stands.
        d.cells[1].failed = 4000;
        assert_eq!(docker_vs_bare(&d)[2].verdict, Verdict::Supported);
    }

    #[test]
    fn which_server_is_faster_decides_the_seed_b_verdict() {
        let mut d = doc(
            "swoole-vs-node",
            vec![
                cell("swoole", "bare", "ab", SEED, 3000.0),
                cell("node", "bare", "ab", SEED, 4000.0),
            ],
        );
        assert_eq!(swoole_vs_node(&d)[0].verdict, Verdict::Supported);
        d.cells[0].rps = 5000.0;
        let f = &swoole_vs_node(&d)[0];
        assert_eq!(f.verdict, Verdict::NotSupported);
        assert!(f.evidence.contains("= 0.80"), "{}", f.evidence);
    }
}
