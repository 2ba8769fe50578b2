//! Reads a result set — a results directory or its results.json, written by
//! `compare` (`harness.compare/1`), `models` (`harness.models/1`) or
//! `reproduce` (`harness.reproduce/1`) — into one list of cells, each with
//! its per-run samples.
//!
//! The documents are read through small views of the fields `diff` judges,
//! not through the commands' own types: commands never use each other, and
//! the machine and server documents they share already live in
//! [`crate::lab::record`], which is used as is. The integration tests write
//! their inputs as real `compare` documents, so a view that drifts from the
//! schema fails there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::lab::record::{Machine, ServerDoc};

/// Which command wrote a result set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Compare,
    Models,
    Reproduce,
}

impl Kind {
    pub fn schema(self) -> &'static str {
        match self {
            Kind::Compare => "harness.compare/1",
            Kind::Models => "harness.models/1",
            Kind::Reproduce => "harness.reproduce/1",
        }
    }

    fn of_schema(schema: &str) -> Option<Kind> {
        [Kind::Compare, Kind::Models, Kind::Reproduce]
            .into_iter()
            .find(|k| k.schema() == schema)
    }
}

/// What identifies a cell on both sides.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, Deserialize)]
pub struct Key {
    pub server: String,
    /// The workload name (compare, with its framing when not plain
    /// HTTP/1.1: `hello h2c 16`), the path (models) or the condition
    /// (reproduce).
    pub workload: String,
    pub connections: u64,
    pub environment: String,
    /// `harness`, `ab`, `ab -k` or `wrk`.
    pub tool: String,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} c={} env={} tool={}",
            self.server, self.workload, self.connections, self.environment, self.tool
        )
    }
}

/// One cell's measurements: a value per run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// Verified responses per second.
    pub rps: Vec<f64>,
    /// The 99th percentile latency, µs.
    pub p99_us: Vec<f64>,
    /// The largest share of the machine other processes took during a run, %.
    pub outside_cpu_pct_max: Option<f64>,
    /// Why some or all runs are not counted (a failed row, an interrupted run).
    pub problems: Vec<String>,
}

/// The load settings of a comparison that change what a figure means.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LoadSettings {
    pub duration_s: f64,
    pub keepalive: bool,
    pub threads: u64,
}

/// One result set, whatever command wrote it.
#[derive(Clone, Debug)]
pub struct ResultSet {
    pub kind: Kind,
    /// The results.json read.
    pub file: PathBuf,
    pub machine: Machine,
    pub servers: Vec<ServerDoc>,
    /// `compare` only.
    pub load: Option<LoadSettings>,
    pub cells: BTreeMap<Key, Samples>,
}

impl ResultSet {
    pub fn server(&self, name: &str) -> Option<&ServerDoc> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// Reads `path` (a directory holding results.json, or the file).
pub fn read(path: &Path) -> anyhow::Result<ResultSet> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}{}", file.display(), results_below(path)))?;
    parse(&text, file)
}

/// A hint when `dir` is the `--out` of a command rather than one of its
/// results directories: the ones under it.
fn results_below(dir: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return String::new();
    };
    let mut found: Vec<String> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("results.json").is_file())
        .map(|p| p.display().to_string())
        .collect();
    found.sort();
    if found.is_empty() {
        String::new()
    } else {
        format!(" (results directories under it: {})", found.join(", "))
    }
}

/// Parses a results.json's text; `file` names it in errors.
pub fn parse(text: &str, file: PathBuf) -> anyhow::Result<ResultSet> {
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{} is not JSON", file.display()))?;
    let schema = value
        .get("schema")
        .and_then(|s| s.as_str())
        .map(str::to_string)
        .with_context(|| {
            format!(
                "{} has no \"schema\": not a harness result set",
                file.display()
            )
        })?;
    let Some(kind) = Kind::of_schema(&schema) else {
        bail!(
            "{} is a {schema} document; diff reads harness.compare/1, harness.models/1 and \
             harness.reproduce/1 (results.json of compare, models and reproduce)",
            file.display()
        );
    };
    let bad = |e: serde_json::Error| {
        anyhow::anyhow!("{} is not a valid {schema} document: {e}", file.display())
    };
    let set = match kind {
        Kind::Compare => {
            let doc: CompareView = serde_json::from_value(value).map_err(bad)?;
            let environment = doc.environment();
            ResultSet {
                kind,
                cells: cells(doc.rows.iter().map(|r| r.cell(&environment))),
                load: Some(doc.settings.load),
                machine: doc.machine,
                servers: doc.servers,
                file,
            }
        }
        Kind::Models => {
            let doc: ModelsView = serde_json::from_value(value).map_err(bad)?;
            ResultSet {
                kind,
                cells: cells(doc.waiting.iter().flat_map(WaitCurveView::cells)),
                load: None,
                machine: doc.machine,
                servers: doc.servers,
                file,
            }
        }
        Kind::Reproduce => {
            let doc: ReproduceView = serde_json::from_value(value).map_err(bad)?;
            ResultSet {
                kind,
                cells: cells(doc.cells.iter().map(ReproduceCellView::cell)),
                load: None,
                machine: doc.machine,
                servers: doc.servers,
                file,
            }
        }
    };
    Ok(set)
}

/// Cells by key; two entries with one key pool their runs.
fn cells(entries: impl Iterator<Item = (Key, Samples)>) -> BTreeMap<Key, Samples> {
    let mut out: BTreeMap<Key, Samples> = BTreeMap::new();
    for (key, s) in entries {
        let cell = out.entry(key).or_default();
        cell.rps.extend(s.rps);
        cell.p99_us.extend(s.p99_us);
        cell.problems.extend(s.problems);
        cell.outside_cpu_pct_max = match (cell.outside_cpu_pct_max, s.outside_cpu_pct_max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    out
}

// --- harness.compare/1 -------------------------------------------------

#[derive(Deserialize)]
struct CompareView {
    settings: CompareSettingsView,
    machine: Machine,
    servers: Vec<ServerDoc>,
    rows: Vec<RowView>,
}

#[derive(Deserialize)]
struct CompareSettingsView {
    #[serde(flatten)]
    load: LoadSettings,
    /// Absent from documents written before it was recorded.
    #[serde(default)]
    environment: Option<String>,
}

impl CompareView {
    /// The `--env` of the comparison: recorded in its settings, or (in
    /// older documents) in the note `environment NAME: …` it put on every
    /// server it placed; bare when neither is there.
    fn environment(&self) -> String {
        if let Some(e) = &self.settings.environment {
            return e.clone();
        }
        self.servers
            .iter()
            .flat_map(|s| &s.notes)
            .find_map(|n| n.strip_prefix("environment ")?.split(':').next())
            .unwrap_or("bare")
            .to_string()
    }
}

#[derive(Deserialize)]
struct RowView {
    server: String,
    workload: String,
    /// `--protocol`'s framing when not plain HTTP/1.1 (`h2c 100`): a cell
    /// of its own, never pooled with the same workload's other framings.
    #[serde(default)]
    protocol: Option<String>,
    connections: u64,
    tool: String,
    status: String,
    error: Option<String>,
    runs: Vec<RunView>,
}

#[derive(Deserialize)]
struct RunView {
    ok_per_s: f64,
    latency_us: LatencyView,
    #[serde(default)]
    outside_cpu_pct: Option<f64>,
    end: String,
}

#[derive(Deserialize)]
struct LatencyView {
    p99: u64,
}

impl RowView {
    fn cell(&self, environment: &str) -> (Key, Samples) {
        let workload = match &self.protocol {
            Some(framing) => format!("{} {framing}", self.workload),
            None => self.workload.clone(),
        };
        let key = Key {
            server: self.server.clone(),
            workload,
            connections: self.connections,
            environment: environment.to_string(),
            tool: self.tool.clone(),
        };
        let mut s = Samples::default();
        if self.status != "ok" {
            s.problems.push(format!(
                "row {}{}",
                self.status,
                self.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ));
        }
        for (i, run) in self.runs.iter().enumerate() {
            // A run cut short (interrupted, server gone) is not a sample of
            // the same thing as a full one.
            if !matches!(run.end.as_str(), "duration" | "count") {
                s.problems.push(format!(
                    "run {} not counted: it ended by {}",
                    i + 1,
                    run.end
                ));
                continue;
            }
            if run.ok_per_s <= 0.0 || run.latency_us.p99 == 0 {
                s.problems
                    .push(format!("run {} not counted: no verified response", i + 1));
                continue;
            }
            s.rps.push(run.ok_per_s);
            s.p99_us.push(run.latency_us.p99 as f64);
            if let Some(o) = run.outside_cpu_pct {
                s.outside_cpu_pct_max = Some(s.outside_cpu_pct_max.map_or(o, |m: f64| m.max(o)));
            }
        }
        (key, s)
    }
}

// --- harness.models/1 --------------------------------------------------

#[derive(Deserialize)]
struct ModelsView {
    machine: Machine,
    servers: Vec<ServerDoc>,
    /// The waiting curves: the only experiment with a figure per
    /// concurrency level for both RPS and p99.
    waiting: Vec<WaitCurveView>,
}

#[derive(Deserialize)]
struct WaitCurveView {
    server: String,
    path: String,
    points: Vec<WaitPointView>,
}

#[derive(Deserialize)]
struct WaitPointView {
    connections: u64,
    rps: f64,
    p99_ms: f64,
}

impl WaitCurveView {
    fn cells(&self) -> impl Iterator<Item = (Key, Samples)> + '_ {
        self.points.iter().map(|p| {
            let key = Key {
                server: self.server.clone(),
                workload: self.path.clone(),
                connections: p.connections,
                environment: "bare".into(),
                tool: "harness".into(),
            };
            (key, one_sample(p.rps, p.p99_ms, None))
        })
    }
}

// --- harness.reproduce/1 -----------------------------------------------

#[derive(Deserialize)]
struct ReproduceView {
    machine: Machine,
    servers: Vec<ServerDoc>,
    cells: Vec<ReproduceCellView>,
}

#[derive(Deserialize)]
struct ReproduceCellView {
    server: String,
    environment: String,
    condition: String,
    tool: String,
    connections: u64,
    rps: f64,
    valid_rps: Option<f64>,
    p99_ms: f64,
    error: Option<String>,
}

impl ReproduceCellView {
    fn cell(&self) -> (Key, Samples) {
        let key = Key {
            server: self.server.clone(),
            workload: self.condition.clone(),
            connections: self.connections,
            environment: self.environment.clone(),
            tool: self.tool.clone(),
        };
        // The engine's verified rate where there is one: ab counts bodies unseen.
        let rps = self.valid_rps.unwrap_or(self.rps);
        (key, one_sample(rps, self.p99_ms, self.error.as_deref()))
    }
}

/// A figure measured once (models and reproduce keep no per-run values).
fn one_sample(rps: f64, p99_ms: f64, error: Option<&str>) -> Samples {
    let mut s = Samples::default();
    if let Some(e) = error {
        s.problems.push(format!("not measured: {e}"));
    } else if rps > 0.0 && p99_ms > 0.0 {
        s.rps.push(rps);
        s.p99_us.push(p99_ms * 1000.0);
    } else {
        s.problems.push("no verified response".into());
    }
    s
}
