//! The harness's module graph, read from its own `crate::` and `super::`
//! paths: no circle between its files, and every arrow between its
//! top-level modules points down the layers of docs/ARCHITECTURE.md. The
//! `workloads` crate is read the same way: no circle between its files.
//! `cargo test -p harness --test integration layers -- --nocapture` prints
//! the top-level graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first: a module may use modules of its own layer's
/// lower neighbours, never one above it, and commands never use each other.
const LAYERS: &[&[&str]] = &[
    &["cli", "fuzzing"],
    &[
        "run",
        "verify",
        "servers_cmd",
        "compare",
        "calibrate",
        "reproduce",
        "models",
        "diff",
        "merge",
        "certs",
    ],
    // verify_h2, verify_h3: verify's HTTP/2 client (the h2 crate) and
    // HTTP/3 client (quinn + h3), helpers of the command, on the engine's
    // TLS plan.
    &["lab", "verify_h2", "verify_h3"],
    &["env"],
    &["catalog"],
    &["engine", "report"],
    &[
        "stats",
        "ranks",
        "intervals",
        "procfs",
        "machine",
        "target",
        "thresholds",
        "capacity",
        "units",
    ],
];

fn layer_of(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("module {module} is in no layer of LAYERS: place it"))
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every source file as its module path (`compare::report::html`).
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<Vec<String>, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            let mut p = prefix.to_vec();
            p.push(name);
            modules(&path, &p, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let mut p = prefix.to_vec();
            if !matches!(name.as_str(), "mod" | "lib" | "main") {
                p.push(name);
            }
            out.insert(p, path);
        }
    }
}

/// The code of a file without its `#[cfg(test)] mod tests` and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names from its crate: `crate::a::b`, `super::c`, and
/// each member of a `use super::{x, y}` or `use crate::a::{b, c}` group.
fn named_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for (start, word) in [("crate::", 0usize), ("super::", 1)] {
        let mut rest = code;
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            rest = &rest[i + start.len()..];
            if before.is_some_and(|c| ident(c) || c == ':') {
                continue;
            }
            let mut base: Vec<String> = if word == 0 {
                Vec::new()
            } else {
                // `super::` from a file: its parent module (mod.rs files are
                // already their directory's module).
                module[..module.len().saturating_sub(1)].to_vec()
            };
            let mut s = rest;
            while let Some(tail) = s.strip_prefix("super::") {
                base.pop();
                s = tail;
            }
            let path: String = s.chars().take_while(|&c| ident(c) || c == ':').collect();
            let mut segs: Vec<String> = path
                .split("::")
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect();
            let after = &s[path.len()..];
            let mut full = base.clone();
            full.append(&mut segs);
            if after.starts_with('{') {
                let group = &after[1..after.find('}').unwrap_or(after.len())];
                for member in group.split(',') {
                    let m: String = member.trim().chars().take_while(|&c| ident(c)).collect();
                    if !m.is_empty() && m != "self" {
                        let mut p = full.clone();
                        p.push(m);
                        out.push(p);
                    }
                }
            }
            out.push(full);
        }
    }
    out
}

/// The harness's file-level arrows.
fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    graph_of(&src())
}

/// File-level arrows of the crate whose sources are under `src`: for each
/// named path, the longest module it starts with.
fn graph_of(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = BTreeMap::new();
    modules(src, &[], &mut files);
    files.retain(|m, _| !m.is_empty());
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, path) in &files {
        let code = code(path);
        for p in named_paths(module, &code) {
            let target = (1..=p.len())
                .rev()
                .map(|n| p[..n].to_vec())
                .find(|prefix| files.contains_key(prefix));
            if let Some(t) = target {
                // A module naming its own child is the declaration, not an arrow back.
                if t != *module && !t.starts_with(module) {
                    edges.entry(module.clone()).or_default().insert(t);
                }
            }
        }
        edges.entry(module.clone()).or_default();
    }
    edges
}

#[test]
fn no_circle_between_the_harness_files() {
    assert_no_circle(&graph());
}

#[test]
fn no_circle_between_the_workloads_files() {
    let workloads = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/src");
    let g = graph_of(&workloads);
    // The reader sees the files it must order (a renamed crate fails here).
    for m in [
        "contract",
        "contract::row",
        "echo",
        "echo::rows",
        "conformance::bodies",
    ] {
        let m: Vec<String> = m.split("::").map(String::from).collect();
        assert!(g.contains_key(&m), "workloads::{} not read", m.join("::"));
    }
    assert_no_circle(&g);
}

/// Panics naming the first circle of imports in `g`, if there is one.
fn assert_no_circle(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) {
    // Depth-first search for a back edge.
    fn visit(
        n: &Vec<String>,
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| s == m).unwrap();
                    let mut circle = stack[from..].to_vec();
                    circle.push(m.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                let names: Vec<String> = c.iter().map(|m| m.join("::")).collect();
                panic!("a circle of imports: {}", names.join(" -> "));
            }
        }
    }
}

#[test]
fn arrows_point_down_the_layers() {
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in graph() {
        for to in tos {
            if from[0] != to[0] {
                top.entry(from[0].clone())
                    .or_default()
                    .insert(to[0].clone());
            }
        }
    }
    let mut wrong = Vec::new();
    for (from, tos) in &top {
        println!(
            "{from} -> {}",
            tos.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        for to in tos {
            let (a, b) = (layer_of(from), layer_of(to));
            if b < a || (a == b && a == 1) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(wrong.is_empty(), "arrows against the layers: {wrong:?}");
}

#[test]
fn the_reader_sees_groups_and_super() {
    let m = vec!["compare".to_string(), "runner".to_string()];
    let paths = named_paths(
        &m,
        "use super::results::{Row, RunDoc};\nuse crate::lab::{load, Lab};\nlet x = crate::units::now_utc();",
    );
    let names: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    for want in [
        "compare::results::Row",
        "lab::load",
        "lab::Lab",
        "units::now_utc",
    ] {
        assert!(names.contains(&want.to_string()), "{want} in {names:?}");
    }
}
