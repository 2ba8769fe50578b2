//! What a reproduction writes (results.json, schema `harness.reproduce/1`):
//! the seed's figures, every cell we measured with the conditions named,
//! and each of the seed's claims judged from our numbers.

use serde::{Deserialize, Serialize};

use super::seeds::Seed;
use crate::lab::record::{Database, Header, Machine, ServerDoc};

pub const SCHEMA: &str = "harness.reproduce/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reproduction {
    #[serde(flatten)]
    pub header: Header,
    /// `swoole-vs-node` or `docker-vs-bare`.
    pub experiment: String,
    pub machine: Machine,
    pub database: Database,
    pub servers: Vec<ServerDoc>,
    pub seed: Seed,
    pub cells: Vec<Cell>,
    pub findings: Vec<Finding>,
}

/// One measured cell: a server, where it ran, how it was loaded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    pub server: String,
    pub environment: String,
    /// What the cell reproduces (`as the seed ran it`, `database unreachable`…).
    pub condition: String,
    /// `ab`, `ab -k` or `harness` (the built-in engine, every body checked).
    pub tool: String,
    pub connections: u64,
    pub requests: u64,
    pub failed: u64,
    /// Responses per second as the tool counts them.
    pub rps: f64,
    /// Responses that matched the contract, per second (the engine only:
    /// ab does not look at bodies).
    pub valid_rps: Option<f64>,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// ab's `Document Length`: the size of the body it timed.
    pub document_length_bytes: Option<u64>,
    /// Every body compared with the contract's.
    pub bodies_verified: bool,
    pub error: Option<String>,
    /// Which repeat of its condition this cell is (1-based; the repeats of
    /// every server are interleaved); absent where a condition ran once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// A fixed-rate cell's offered rate (requests per second): the engine's
    /// open loop, latency from each request's intended send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rps: Option<f64>,
    /// The server's CPU per valid response (µs): its process tree and the
    /// proxies on its path (docker-proxy); where the run was metered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
}

impl Cell {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// One of the seed's claims, judged from our numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub claim: String,
    pub verdict: Verdict,
    /// The numbers the verdict rests on, in a sentence.
    pub evidence: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Supported,
    NotSupported,
    /// The interval of the figure it rests on holds both answers (or there
    /// are too few runs for one): more runs, or a quieter machine, decide.
    Undecided,
    /// A cell it needs was not measured (a server or environment missing here).
    NotMeasured,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Supported => "supported by our data",
            Verdict::NotSupported => "NOT supported by our data",
            Verdict::Undecided => "undecided: the interval holds both answers",
            Verdict::NotMeasured => "not measured here",
        }
    }
}

impl Reproduction {
    /// The median RPS of [`Reproduction::cells_of`] (each repeat) and how
    /// many runs it is of; `None` where none was measured.
    pub fn median_rps(
        &self,
        server: &str,
        environment: &str,
        tool: &str,
        condition: &str,
    ) -> Option<(f64, usize)> {
        let rps: Vec<f64> = self
            .cells_of(server, environment, tool, condition)
            .iter()
            .map(|c| c.rps)
            .collect();
        crate::ranks::median(&rps).map(|m| (m, rps.len()))
    }

    /// Every measured cell (each repeat) of `server` in `environment`
    /// driven by `tool` under a condition starting with `condition`.
    pub fn cells_of(
        &self,
        server: &str,
        environment: &str,
        tool: &str,
        condition: &str,
    ) -> Vec<&Cell> {
        self.cells
            .iter()
            .filter(|c| {
                c.server == server
                    && c.environment == environment
                    && c.tool == tool
                    && c.condition.starts_with(condition)
                    && c.ok()
            })
            .collect()
    }

    /// The measured cell of `server` in `environment` driven by `tool`
    /// under a condition starting with `condition`.
    pub fn cell(
        &self,
        server: &str,
        environment: &str,
        tool: &str,
        condition: &str,
    ) -> Option<&Cell> {
        self.cells.iter().find(|c| {
            c.server == server
                && c.environment == environment
                && c.tool == tool
                && c.condition.starts_with(condition)
                && c.ok()
        })
    }

    pub fn from_json(text: &str) -> Result<Reproduction, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a reproduction serializes")
    }
}
