//! What every measuring command records about its run beside the numbers:
//! the machine, the database, and each server (what became of it, its
//! `/config`, its contract check). `compare`'s results.json and
//! `reproduce`'s hold the same shapes.

use serde::{Deserialize, Serialize};

/// What every results document begins with, declared once and flattened
/// into each (`compare`'s, `calibrate`'s, `models`', `reproduce`'s): which
/// document it is, which harness wrote it, when, whether it was cut short,
/// and the command line that made it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The document's schema identifier (`harness.compare/1`, …).
    pub schema: String,
    pub harness_version: String,
    /// `2026-11-30T02:40:00Z`.
    pub started_utc: String,
    pub finished_utc: String,
    /// Ctrl-C or SIGTERM stopped the run: the document covers what was measured.
    pub interrupted: bool,
    pub command: Vec<String>,
}

impl Header {
    /// A document of `schema` that starts now, by this harness and command line.
    pub fn start(schema: &str) -> Header {
        Header {
            schema: schema.into(),
            harness_version: env!("CARGO_PKG_VERSION").into(),
            started_utc: crate::units::now_utc(),
            finished_utc: String::new(),
            interrupted: false,
            command: std::env::args().collect(),
        }
    }

    /// Marks the document finished now (`interrupted`: cut short).
    pub fn finish(&mut self, interrupted: bool) {
        self.interrupted = interrupted;
        self.finished_utc = crate::units::now_utc();
    }

    /// The results directory's name: the start time, `:` made safe for
    /// every file system, and `suffix` (`-models`) if any.
    pub fn dir_name(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.started_utc.replace(':', "-"))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub cpu_model: String,
    pub cores: u32,
    pub kernel: String,
    pub os: String,
    pub memory_bytes: u64,
    pub load_avg_1m: f64,
    /// `kernel.sched_autogroup_enabled` (null: the kernel has no autogroups).
    pub sched_autogroup_enabled: Option<bool>,
    /// How the servers were placed for the scheduler.
    pub scheduling: String,
    /// The harness's own build profile (`release` or `debug`).
    pub harness_build: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    /// `embedded` (a private MariaDB the harness started), `external`
    /// (--mysql-url) or `none` (no workload needed one).
    pub kind: String,
    /// The URL, password hidden.
    pub url: Option<String>,
    pub version: Option<String>,
    pub max_connections: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerDoc {
    pub name: String,
    pub model: String,
    pub language: String,
    pub status: ServerStatus,
    pub reason: Option<String>,
    /// What was started (binary, command) or the URL of a --target.
    pub detail: Option<String>,
    /// Its `/config`, as read before loading.
    pub config: Option<workloads::ServerConfig>,
    /// Runtime versions found at start (`nginx 1.22.1`).
    pub versions: Vec<String>,
    /// Every process of its tree was in the harness's scheduler autogroup;
    /// `None` where autogroups are not in effect (or for servers started elsewhere).
    pub same_autogroup: Option<bool>,
    pub notes: Vec<String>,
    /// Where it ran when not as processes of this host: a server from its
    /// compose image runs in a container (`catalog::image`), and its rows
    /// say so, never "bare". Absent for every other server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_in: Option<String>,
    /// Every row of `harness verify`, run once before loading (absent in
    /// results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<ContractCheck>,
    /// The conformance section (`harness verify --conformance`), run once
    /// before loading (absent in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformance: Option<ConformanceCheck>,
    /// Over TLS (`compare --tls`): what one handshake with it negotiated,
    /// before loading (absent for a run over plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsDoc>,
}

/// What a handshake with a server negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsDoc {
    /// `TLSv1_3`, `TLSv1_2`.
    pub version: String,
    /// e.g. `TLS13_AES_256_GCM_SHA384`.
    pub cipher_suite: String,
    /// e.g. `X25519`.
    pub key_exchange: String,
    /// The ALPN protocol it chose, if it chose one.
    pub alpn: Option<String>,
}

impl TlsDoc {
    pub fn of(n: &crate::stats::Negotiated) -> TlsDoc {
        TlsDoc {
            version: n.version.clone(),
            cipher_suite: n.cipher_suite.clone(),
            key_exchange: n.key_exchange.clone(),
            alpn: n.alpn.clone(),
        }
    }

    /// `TLSv1_3 TLS13_AES_256_GCM_SHA384 X25519`.
    pub fn short(&self) -> String {
        format!(
            "{} {} {}",
            self.version, self.cipher_suite, self.key_exchange
        )
    }
}

/// What became of a server in a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerStatus {
    /// Started and loaded (its rows say how each cell went).
    Ran,
    /// Did not start, or did not answer the contract.
    Failed,
    /// Cannot run here, or not reached (interrupted); `reason` says which.
    Skipped,
}

impl ServerStatus {
    pub fn name(self) -> &'static str {
        match self {
            ServerStatus::Ran => "ran",
            ServerStatus::Failed => "failed",
            ServerStatus::Skipped => "skipped",
        }
    }
}

/// How one row (server × workload × c) went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractCheck {
    pub rows: u32,
    pub passed: u32,
    /// Rows that failed otherwise than the server's core is known to: ours.
    pub failed: Vec<RowFailure>,
    /// Rows that failed exactly as the server's core is known to
    /// ([`crate::catalog::deviations`]); `why` names the core and its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<RowFailure>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowFailure {
    pub row: String,
    pub why: String,
}

impl ContractCheck {
    /// The verdicts, read against the known deviations of the server's
    /// core, if it has one: a row the core is known to fail (with its
    /// symptom) is `known`, not `failed`; a listed row that fails otherwise,
    /// or now passes, is `failed` with a word on the list.
    pub fn from_verdicts(
        verdicts: &[super::contract::Verdict],
        core: Option<&crate::catalog::deviations::Core>,
    ) -> ContractCheck {
        use crate::catalog::deviations::{read, Reading};
        let (mut failed, mut known, mut passed) = (Vec::new(), Vec::new(), 0);
        for v in verdicts {
            let row = v.name.clone();
            match read(core, &v.name, &v.result) {
                Reading::Pass => passed += 1,
                Reading::Fail(why) => failed.push(RowFailure { row, why }),
                Reading::Known(d) => known.push(RowFailure {
                    row,
                    why: core.map(|c| c.explain(d)).unwrap_or_default(),
                }),
                Reading::KnownButOtherwise(d, why) => failed.push(RowFailure {
                    row,
                    why: format!("{why} (listed as the core's, as: {})", d.symptom),
                }),
                Reading::KnownNowPasses(_) => {
                    passed += 1;
                    failed.push(RowFailure {
                        row,
                        why: "passes, but is listed as a known deviation of the server's core: \
                              fixed upstream? update harness/src/catalog/deviations.rs"
                            .into(),
                    })
                }
            }
        }
        ContractCheck {
            rows: verdicts.len() as u32,
            passed,
            failed,
            known,
        }
    }
}

/// The core's explanation of a row it is listed to fail, when it failed
/// as listed (its symptom in what was found).
pub fn core_reason(
    core: Option<&crate::catalog::deviations::Core>,
    row: &str,
    found: &str,
) -> Option<String> {
    use crate::catalog::deviations::Reading;
    let core = core?;
    match core.read(row, &Err(found.to_string())) {
        Reading::Known(d) => Some(core.explain(d)),
        _ => None,
    }
}

/// The conformance section over one server: pass / warn / fail per group,
/// and every row that did not pass with its RFC section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformanceCheck {
    pub rows: u32,
    /// In the section's order of groups.
    pub groups: Vec<GroupTally>,
    pub deviations: Vec<ConformanceDeviation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupTally {
    /// `request line`, `header fields`, `bodies`, `connections`.
    pub group: String,
    pub pass: u32,
    pub warn: u32,
    pub fail: u32,
}

/// A conformance row a server did not pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformanceDeviation {
    pub row: String,
    pub group: String,
    /// `RFC 9112 §6.3 (Message Body Length)`.
    pub section: String,
    /// `MUST` or `SHOULD`.
    pub requirement: String,
    /// `fail` (a MUST) or `warn` (a SHOULD).
    pub outcome: String,
    /// What the server did, and what was expected.
    pub found: String,
    /// The row is a listed deviation of the server's HTTP core
    /// ([`crate::catalog::deviations::conformance_core_of`]), found as
    /// listed: the core's name and its reason. Still a fail or a warn (the
    /// server does not meet the RFC), but not our code's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<String>,
}

impl ConformanceCheck {
    /// From the verdicts of the conformance rows (others are ignored),
    /// each deviation read against the listed ones of `core`, if any.
    pub fn from_verdicts(
        verdicts: &[super::contract::Verdict],
        core: Option<&crate::catalog::deviations::Core>,
    ) -> ConformanceCheck {
        use workloads::conformance::Group;
        use workloads::contract::Outcome;
        let rows: Vec<_> = verdicts
            .iter()
            .filter_map(|v| v.conformance.map(|c| (v, c)))
            .collect();
        let groups = Group::ALL
            .iter()
            .map(|&g| {
                let count = |o: Outcome| {
                    rows.iter()
                        .filter(|(v, c)| c.group == g && v.outcome == o)
                        .count() as u32
                };
                GroupTally {
                    group: g.name().into(),
                    pass: count(Outcome::Pass),
                    warn: count(Outcome::Warn),
                    fail: count(Outcome::Fail),
                }
            })
            .collect();
        let deviations = rows
            .iter()
            .filter(|(v, _)| v.outcome != Outcome::Pass)
            .map(|(v, c)| ConformanceDeviation {
                row: v.name.clone(),
                group: c.group.name().into(),
                section: c.section.to_string(),
                requirement: c.requirement.name().into(),
                outcome: v.outcome.name().to_ascii_lowercase(),
                found: v.found.clone(),
                core: core_reason(core, &v.name, &v.found),
            })
            .collect();
        ConformanceCheck {
            rows: rows.len() as u32,
            groups,
            deviations,
        }
    }

    /// MUST rows failed that are not listed as the core's: ours.
    pub fn own_failures(&self) -> usize {
        self.deviations
            .iter()
            .filter(|d| d.outcome == "fail" && d.core.is_none())
            .count()
    }

    /// The per-group table's header, then one line per group and the total:
    /// `group, pass, warn, fail`.
    pub fn tally_rows(&self) -> Vec<Vec<String>> {
        let mut rows = vec![["group", "pass", "warn", "fail"].map(String::from).to_vec()];
        for g in &self.groups {
            rows.push(vec![
                g.group.clone(),
                g.pass.to_string(),
                g.warn.to_string(),
                g.fail.to_string(),
            ]);
        }
        let (p, w, f) = self.totals();
        rows.push(vec![
            "all".into(),
            p.to_string(),
            w.to_string(),
            f.to_string(),
        ]);
        rows
    }

    /// `34 pass, 3 warn, 1 fail`.
    pub fn summary(&self) -> String {
        let (p, w, f) = self.totals();
        format!("{p} pass, {w} warn, {f} fail")
    }

    /// Pass, warn and fail over every group.
    pub fn totals(&self) -> (u32, u32, u32) {
        self.groups.iter().fold((0, 0, 0), |(p, w, f), g| {
            (p + g.pass, w + g.warn, f + g.fail)
        })
    }
}

/// The facts of this machine.
pub fn machine() -> Machine {
    use crate::machine;
    Machine {
        cpu_model: machine::cpu_model(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        kernel: machine::kernel(),
        os: machine::os(),
        memory_bytes: machine::memory_bytes(),
        load_avg_1m: machine::load_avg().first().copied().unwrap_or(0.0),
        sched_autogroup_enabled: crate::procfs::sched_autogroup_enabled(),
        scheduling: "every server process is started as a process-group leader in the \
                     harness's session (no setsid: nginx runs with daemon off, php-fpm's setsid \
                     fails); whether each server's processes stayed in the harness's scheduler \
                     autogroup is measured per server (the autogroup column)"
            .into(),
        harness_build: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .into(),
    }
}

impl Database {
    /// The session's database as the documents record it.
    pub fn of(db: &super::database::Database) -> Database {
        Database {
            kind: db.kind.name().into(),
            url: db.redacted_url(),
            version: db.version.clone(),
            max_connections: db.max_connections,
        }
    }
}

impl ServerDoc {
    /// One document per entry, in order: `ran` (so far) with what will be
    /// started, or `skipped` with why and what to install.
    pub fn of_selection(
        entries: &[crate::catalog::Entry],
        ready: &[(crate::catalog::Entry, String)],
        missing: &[super::select::Missing],
    ) -> Vec<ServerDoc> {
        entries
            .iter()
            .map(|e| {
                let m = missing.iter().find(|m| m.name == e.name);
                ServerDoc {
                    name: e.name.clone(),
                    model: e.model.into(),
                    language: e.language.into(),
                    status: if m.is_some() {
                        ServerStatus::Skipped
                    } else {
                        ServerStatus::Ran
                    },
                    reason: m.map(|m| format!("{}; to run it: {}", m.reason, m.fix)),
                    detail: ready
                        .iter()
                        .find(|(r, _)| r.name == e.name)
                        .map(|(_, d)| d.clone()),
                    config: None,
                    versions: Vec::new(),
                    same_autogroup: None,
                    notes: Vec::new(),
                    runs_in: ready
                        .iter()
                        .find(|(r, _)| r.name == e.name)
                        .and_then(|(r, _)| r.runs_in()),
                    contract: None,
                    conformance: None,
                    tls: None,
                }
            })
            .collect()
    }
}
