//! Each seed's claims, judged from our cells. Pure functions of the
//! document, so a test can feed them numbers and watch the verdicts follow.

use super::document::{Cell, Finding, Reproduction, Verdict};
use super::FIXED_RATE;

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
    let swoole = doc.cells_of("swoole", "bare", "ab", SEED_CONDITION);
    let node = doc.cells_of("node", "bare", "ab", SEED_CONDITION);
    let rps = |cells: &[&Cell]| cells.iter().map(|c| c.rps).collect::<Vec<_>>();
    let p99 = |cells: &[&Cell]| cells.iter().map(|c| c.p99_ms).collect::<Vec<_>>();
    let claim = "Node.js serves about 16% more requests per second than Swoole (ab -c 100 -n 5000)";
    out.push(match Ratio::of(&rps(&swoole), &rps(&node)) {
        Some(r) => finding(
            claim,
            r.above_one(),
            format!(
                "under the seed's ab, Node.js {:.0} req/s and Swoole {:.0} (medians): Node.js/Swoole = {} \
                 (the seed: 1.16)",
                median(&rps(&node)),
                median(&rps(&swoole)),
                r.words()
            ),
        ),
        None => not_measured(claim, "Swoole or Node.js under the seed's ab"),
    });
    let claim = "Swoole has the better tail latency (p99 142 ms against 170 ms)";
    out.push(match Ratio::of(&p99(&node), &p99(&swoole)) {
        Some(r) => finding(
            claim,
            r.below_one(),
            format!(
                "p99 under the seed's ab: Swoole {:.1} ms, Node.js {:.1} ms (medians): Swoole/Node.js = {}",
                median(&p99(&swoole)),
                median(&p99(&node)),
                r.words()
            ),
        ),
        None => not_measured(claim, "Swoole or Node.js under the seed's ab (a p99 above 0 ms)"),
    });
    let swoole = swoole.first().copied();
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

/// `candidate / base` of two samples of runs: the Hodges-Lehmann estimate
/// of the ratio with its 95% interval, distribution-free (the interval of
/// `harness diff`); none with too few runs for one.
struct Ratio {
    estimate: f64,
    interval: Option<(f64, f64)>,
    runs: (usize, usize),
}

impl Ratio {
    /// Needs at least one positive value a side (ab prints whole ms: a p99
    /// of 0 has no ratio).
    fn of(base: &[f64], candidate: &[f64]) -> Option<Ratio> {
        if base.is_empty() || candidate.is_empty() {
            return None;
        }
        if base.iter().chain(candidate).any(|v| *v <= 0.0) {
            return None;
        }
        let shift = crate::ranks::hodges_lehmann(base, candidate, 0.05);
        Some(Ratio {
            estimate: shift.log_estimate.exp(),
            interval: shift.log_interval.map(|(lo, hi)| (lo.exp(), hi.exp())),
            runs: (base.len(), candidate.len()),
        })
    }

    /// Supported when the whole interval is above 1, not when it is below,
    /// undecided when it holds 1 (or there is none).
    fn above_one(&self) -> Verdict {
        match self.interval {
            Some((lo, _)) if lo > 1.0 => Verdict::Supported,
            Some((_, hi)) if hi < 1.0 => Verdict::NotSupported,
            _ => Verdict::Undecided,
        }
    }

    fn below_one(&self) -> Verdict {
        match self.above_one() {
            Verdict::Supported => Verdict::NotSupported,
            Verdict::NotSupported => Verdict::Supported,
            v => v,
        }
    }

    fn words(&self) -> String {
        let (n1, n2) = self.runs;
        match self.interval {
            Some((lo, hi)) => format!(
                "{:.2} (95% interval {lo:.2}–{hi:.2}, {n2} and {n1} interleaved runs)",
                self.estimate
            ),
            None => format!(
                "{:.2} ({n2} and {n1} runs: too few for a 95% interval, at least 4 a side)",
                self.estimate
            ),
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    crate::ranks::median(xs).unwrap_or(0.0)
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
    out.push(bridge_latency(doc, &servers));
    out.push(migration_cost(doc, &servers));
    out
}

/// `candidate − base` of two samples of runs (ms): the Hodges-Lehmann
/// shift with its 95% interval, as [`Ratio`]'s but linear. The ranks work
/// on logs of positive values, and ln(exp(x)) = x turns their ratio into a
/// difference (values in seconds keep exp finite).
struct Difference {
    estimate_ms: f64,
    interval_ms: Option<(f64, f64)>,
    runs: (usize, usize),
}

impl Difference {
    fn of(base_ms: &[f64], candidate_ms: &[f64]) -> Option<Difference> {
        if base_ms.is_empty() || candidate_ms.is_empty() {
            return None;
        }
        let e = |xs: &[f64]| xs.iter().map(|ms| (ms / 1000.0).exp()).collect::<Vec<_>>();
        let shift = crate::ranks::hodges_lehmann(&e(base_ms), &e(candidate_ms), 0.05);
        Some(Difference {
            estimate_ms: shift.log_estimate * 1000.0,
            interval_ms: shift
                .log_interval
                .map(|(lo, hi)| (lo * 1000.0, hi * 1000.0)),
            runs: (base_ms.len(), candidate_ms.len()),
        })
    }

    /// Supported when the whole interval is at or above `ms`, not when it
    /// is below, undecided when it holds `ms` (or there is none).
    fn at_least(&self, ms: f64) -> Verdict {
        match self.interval_ms {
            Some((lo, _)) if lo >= ms => Verdict::Supported,
            Some((_, hi)) if hi < ms => Verdict::NotSupported,
            _ => Verdict::Undecided,
        }
    }

    fn words(&self) -> String {
        let (n1, n2) = self.runs;
        match self.interval_ms {
            Some((lo, hi)) => format!(
                "{:+.2} ms (95% interval {lo:+.2} to {hi:+.2}, {n2} and {n1} runs)",
                self.estimate_ms
            ),
            None => format!(
                "{:+.2} ms ({n2} and {n1} runs: too few for a 95% interval, at least 4 a side)",
                self.estimate_ms
            ),
        }
    }
}

/// Every server's verdict → the claim's: all the same, that; else undecided.
fn overall(verdicts: &[Verdict]) -> Verdict {
    match verdicts.first() {
        Some(&v) if verdicts.iter().all(|&x| x == v) => v,
        _ => Verdict::Undecided,
    }
}

/// The fixed-rate cells of `server` in `env`, with what they measured.
fn at_rate<'a>(doc: &'a Reproduction, server: &str, env: &str) -> Vec<&'a Cell> {
    doc.cells_of(server, env, "harness", FIXED_RATE)
        .into_iter()
        .filter(|c| c.ok() && c.requests > 0)
        .collect()
}

/// The first pair (candidate, base, label) of environments both measured
/// at the fixed rate for `server`.
fn rate_pair<'a>(
    doc: &'a Reproduction,
    server: &str,
    pairs: &[(&str, &str, &'static str)],
) -> Option<(Vec<&'a Cell>, Vec<&'a Cell>, &'static str)> {
    pairs.iter().find_map(|&(cand, base, label)| {
        let (c, b) = (at_rate(doc, server, cand), at_rate(doc, server, base));
        (!c.is_empty() && !b.is_empty()).then_some((c, b, label))
    })
}

/// Seed A: "the default bridge network can introduce 8–12 ms extra latency
/// compared to host mode", judged at a fixed rate below every
/// environment's knee: bridge − host at p50 and p99, per server.
fn bridge_latency(doc: &Reproduction, servers: &[String]) -> Finding {
    let claim = "The default bridge network adds 8-12 ms of latency against host networking";
    let pairs = [
        (
            "docker",
            "docker-host",
            "docker − docker-host (Docker Engine)",
        ),
        (
            "bridge-proxy",
            "bare",
            "bridge-proxy − bare (emulated, a userland proxy)",
        ),
        ("bridge", "bare", "bridge − bare (emulated, DNAT)"),
    ];
    let mut verdicts = Vec::new();
    let mut evidence = Vec::new();
    for s in servers {
        let Some((cand, base, label)) = rate_pair(doc, s, &pairs) else {
            continue;
        };
        let p =
            |cells: &[&Cell], f: fn(&Cell) -> f64| cells.iter().map(|c| f(c)).collect::<Vec<_>>();
        let (Some(d50), Some(d99)) = (
            Difference::of(&p(&base, |c| c.p50_ms), &p(&cand, |c| c.p50_ms)),
            Difference::of(&p(&base, |c| c.p99_ms), &p(&cand, |c| c.p99_ms)),
        ) else {
            continue;
        };
        verdicts.push(d99.at_least(8.0));
        evidence.push(format!(
            "{s}: {label} at {:.0} req/s: p50 {}, p99 {}",
            cand[0].offered_rps.unwrap_or(0.0),
            d50.words(),
            d99.words()
        ));
    }
    if verdicts.is_empty() {
        return not_measured(
            claim,
            "a bridge and a host environment at a fixed rate (docker and docker-host, or bare \
             and bridge)",
        );
    }
    finding(
        claim,
        overall(&verdicts),
        format!("{} (the seed: 8-12 ms)", evidence.join("; ")),
    )
}

/// Seed A: "CPU migration costs 10–30%", judged as the server's CPU per
/// request unpinned over pinned at the same fixed rate, per server.
fn migration_cost(doc: &Reproduction, servers: &[String]) -> Finding {
    let claim =
        "CPU migration costs 10-30% (the server's CPU per request, unpinned against pinned)";
    let pairs = [
        (
            "docker-host",
            "docker-host-pinned",
            "docker-host / docker-host-pinned (Docker Engine)",
        ),
        ("bare", "pinned", "bare / pinned (no container)"),
    ];
    let mut verdicts = Vec::new();
    let mut evidence = Vec::new();
    for s in servers {
        let Some((cand, base, label)) = rate_pair(doc, s, &pairs) else {
            continue;
        };
        let cpu = |cells: &[&Cell]| {
            cells
                .iter()
                .filter_map(|c| c.cpu_us_per_request)
                .collect::<Vec<_>>()
        };
        let (c, b) = (cpu(&cand), cpu(&base));
        let Some(r) = Ratio::of(&b, &c) else {
            continue;
        };
        verdicts.push(match r.interval {
            Some((lo, _)) if lo >= 1.10 => Verdict::Supported,
            Some((_, hi)) if hi < 1.10 => Verdict::NotSupported,
            _ => Verdict::Undecided,
        });
        evidence.push(format!(
            "{s}: {label}, CPU per request at {:.0} req/s: {:.0} µs against {:.0} µs (medians): {}",
            cand[0].offered_rps.unwrap_or(0.0),
            median(&c),
            median(&b),
            r.words()
        ));
    }
    if verdicts.is_empty() {
        return not_measured(
            claim,
            "a pinned and an unpinned environment at a fixed rate, metered (docker-host and \
             docker-host-pinned, or bare and pinned)",
        );
    }
    finding(
        claim,
        overall(&verdicts),
        format!("{} (the seed: 1.10-1.30)", evidence.join("; ")),
    )
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

    /// `runs` of `server` under the seed's ab, each at `rps` and `p99_ms`.
    fn runs(server: &str, points: &[(f64, f64)]) -> Vec<Cell> {
        points
            .iter()
            .enumerate()
            .map(|(k, &(rps, p99))| Cell {
                p99_ms: p99,
                repeat: Some(k as u32 + 1),
                ..cell(server, "bare", "ab", SEED, rps)
            })
            .collect()
    }

    /// The seed's claims on Node.js and Swoole read from intervals: clear
    /// when the runs separate, undecided when they straddle, and never
    /// decided from one run a side (the 0.71-then-1.06 of single ab runs).
    #[test]
    fn swoole_vs_node_verdicts_rest_on_the_interval_of_the_ratio() {
        let verdicts = |swoole: &[(f64, f64)], node: &[(f64, f64)]| {
            let cells = [runs("swoole", swoole), runs("node", node)].concat();
            let f = swoole_vs_node(&doc("swoole-vs-node", cells));
            (f[0].clone(), f[1].clone())
        };
        // Node.js faster in every run, Swoole's tail lower in every run.
        let s = [
            (10_000.0, 9.0),
            (10_400.0, 9.5),
            (9_800.0, 8.8),
            (10_100.0, 9.1),
            (10_200.0, 9.3),
        ];
        let n = [
            (12_000.0, 12.0),
            (12_300.0, 12.5),
            (11_900.0, 11.8),
            (12_100.0, 12.2),
            (12_400.0, 12.9),
        ];
        let (rps, tail) = verdicts(&s, &n);
        assert_eq!(rps.verdict, Verdict::Supported, "{}", rps.evidence);
        assert!(rps.evidence.contains("95% interval"), "{}", rps.evidence);
        assert_eq!(tail.verdict, Verdict::Supported, "{}", tail.evidence);
        // The runs straddle: one side ahead in some rounds, behind in others.
        let n = [
            (9_500.0, 8.0),
            (10_600.0, 10.0),
            (10_000.0, 9.0),
            (9_900.0, 9.6),
            (10_300.0, 8.7),
        ];
        let (rps, tail) = verdicts(&s, &n);
        assert_eq!(rps.verdict, Verdict::Undecided, "{}", rps.evidence);
        assert_eq!(tail.verdict, Verdict::Undecided, "{}", tail.evidence);
        // Node.js slower in every run: the claim is not supported.
        let n = [
            (7_000.0, 9.0),
            (7_100.0, 9.5),
            (6_900.0, 8.8),
            (7_200.0, 9.1),
            (7_050.0, 9.3),
        ];
        assert_eq!(verdicts(&s, &n).0.verdict, Verdict::NotSupported);
        // One run a side: whatever the ratio, no interval, no verdict.
        let (rps, _) = verdicts(&s[..1], &[(7_000.0, 9.0)]);
        assert_eq!(rps.verdict, Verdict::Undecided, "{}", rps.evidence);
        assert!(rps.evidence.contains("too few"), "{}", rps.evidence);
    }

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

    /// One run a side (as the seed, and this command before repeats) states
    /// the ratio and decides nothing.
    #[test]
    fn one_run_a_side_states_the_ratio_and_decides_nothing() {
        let mut d = doc(
            "swoole-vs-node",
            vec![
                cell("swoole", "bare", "ab", SEED, 3000.0),
                cell("node", "bare", "ab", SEED, 4000.0),
            ],
        );
        assert_eq!(swoole_vs_node(&d)[0].verdict, Verdict::Undecided);
        d.cells[0].rps = 5000.0;
        let f = &swoole_vs_node(&d)[0];
        assert_eq!(f.verdict, Verdict::Undecided);
        assert!(
            f.evidence.contains("= 0.80 (1 and 1 runs"),
            "{}",
            f.evidence
        );
    }

    fn at(env: &str, k: u32, p50_ms: f64, p99_ms: f64, cpu_us: f64) -> Cell {
        Cell {
            server: "php-fpm".into(),
            environment: env.into(),
            tool: "harness".into(),
            condition: format!("{FIXED_RATE}: the engine --rate 500"),
            requests: 2500,
            p50_ms,
            p99_ms,
            offered_rps: Some(500.0),
            cpu_us_per_request: Some(cpu_us),
            repeat: Some(k),
            ..Cell::default()
        }
    }

    #[test]
    fn the_latency_and_migration_claims_are_judged_at_a_fixed_rate() {
        let judged = |bridge_ms: f64, unpinned_us: f64| {
            let mut cells = vec![cell("php-fpm", "bare", "ab", SEED, 1000.0)];
            for k in 1..=5 {
                let j = f64::from(k) * 0.01;
                cells.push(at("docker-host", k, 0.3 + j, 0.8 + j, 100.0 + j));
                cells.push(at("docker", k, 0.4 + j, 0.8 + bridge_ms + j, 120.0 + j));
                cells.push(at("docker-host-pinned", k, 0.3 + j, 0.8 + j, 100.0 + j));
                cells.push(at("bare", k, 0.3 + j, 0.8 + j, unpinned_us + j));
            }
            let f = docker_vs_bare(&doc("docker-vs-bare", cells));
            let find = |start: &str| {
                f.iter()
                    .find(|x| x.claim.starts_with(start))
                    .unwrap()
                    .clone()
            };
            (
                find("The default bridge network adds"),
                find("CPU migration costs"),
            )
        };
        // 0.2 ms at p99 at 500 req/s: far below 8 ms; pinned saves nothing.
        let (latency, migration) = judged(0.2, 100.0);
        assert_eq!(latency.verdict, Verdict::NotSupported, "{latency:?}");
        assert!(
            latency
                .evidence
                .contains("docker − docker-host (Docker Engine)"),
            "{}",
            latency.evidence
        );
        assert!(
            latency.evidence.contains("p99 +0.20 ms (95% interval"),
            "{}",
            latency.evidence
        );
        assert!(
            latency.evidence.contains("the seed: 8-12 ms"),
            "{}",
            latency.evidence
        );
        assert_eq!(migration.verdict, Verdict::NotSupported, "{migration:?}");
        // The real engine's cells decide, over bare and pinned.
        assert!(
            migration
                .evidence
                .contains("docker-host / docker-host-pinned"),
            "{}",
            migration.evidence
        );
        // 10 ms, and docker-host's CPU 20% over pinned's: both supported.
        let mut cells = vec![cell("php-fpm", "bare", "ab", SEED, 1000.0)];
        for k in 1..=5 {
            let j = f64::from(k) * 0.01;
            cells.push(at("docker-host", k, 0.3 + j, 0.8 + j, 120.0 + j));
            cells.push(at("docker", k, 0.4 + j, 10.8 + j, 120.0 + j));
            cells.push(at("docker-host-pinned", k, 0.3 + j, 0.8 + j, 100.0 + j));
        }
        let f = docker_vs_bare(&doc("docker-vs-bare", cells));
        assert_eq!(f[3].verdict, Verdict::Supported, "{:?}", f[3]);
        assert_eq!(f[4].verdict, Verdict::Supported, "{:?}", f[4]);
        // Without fixed-rate cells: not measured, never a verdict.
        let f = docker_vs_bare(&doc(
            "docker-vs-bare",
            vec![cell("php-fpm", "bare", "ab", SEED, 1.0)],
        ));
        assert_eq!(
            (f[3].verdict, f[4].verdict),
            (Verdict::NotMeasured, Verdict::NotMeasured)
        );
        // Two runs a side: the difference is stated, nothing decided.
        let (latency, _) = {
            let mut cells = vec![cell("php-fpm", "bare", "ab", SEED, 1000.0)];
            cells.extend([
                at("bridge", 1, 1.0, 20.0, 1.0),
                at("bridge", 2, 1.0, 21.0, 1.0),
            ]);
            cells.extend([at("bare", 1, 1.0, 1.0, 1.0), at("bare", 2, 1.0, 1.0, 1.0)]);
            let f = docker_vs_bare(&doc("docker-vs-bare", cells));
            (f[3].clone(), ())
        };
        assert_eq!(latency.verdict, Verdict::Undecided, "{latency:?}");
        assert!(
            latency.evidence.contains("too few for a 95% interval"),
            "{}",
            latency.evidence
        );
    }
}
