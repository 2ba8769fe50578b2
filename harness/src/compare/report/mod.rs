//! Reports of a comparison, from [`Results`] alone (so `harness report`
//! re-renders them from results.json): the terminal table and report.md
//! ([`table`]), report.html with SVG charts ([`html`], [`charts`]), each
//! server's HTTP/1.1 conformance ([`conformance`]), where the CPU went
//! under `--profile` ([`profiles`]).

pub mod charts;
pub mod conformance;
pub mod html;
pub mod profiles;
pub mod rates;
pub mod settings;
pub mod table;

use std::path::Path;

use anyhow::Context;

use super::results::Results;

/// Writes results.json, report.md and report.html into `dir`.
pub fn write_all(dir: &Path, results: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write(dir, "results.json", results.to_json())?;
    write_reports(dir, results)
}

/// Writes report.md and report.html into `dir`, from `results` alone (what
/// `harness report` re-renders).
pub fn write_reports(dir: &Path, results: &Results) -> anyhow::Result<()> {
    write(
        dir,
        "report.md",
        table::markdown(results) + &rates::markdown(results),
    )?;
    rates::write_svgs(dir, results)?;
    write(dir, "report.html", html::render(results))
}

fn write(dir: &Path, name: &str, text: String) -> anyhow::Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
}
