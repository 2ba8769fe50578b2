//! Reports of a comparison, from [`Results`] alone (so `harness report`
//! re-renders them from results.json): the terminal table and report.md
//! ([`table`]), report.html with SVG charts ([`html`], [`charts`]).

pub mod charts;
pub mod html;
pub mod table;

use std::path::Path;

use anyhow::Context;

use super::results::Results;

/// Writes results.json, report.md and report.html into `dir`.
pub fn write_all(dir: &Path, results: &Results) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("results.json", results.to_json())?;
    write("report.md", table::markdown(results))?;
    write("report.html", html::render(results))?;
    Ok(())
}
