//! Picking servers from the catalog by name, and sorting out what can run
//! here from what cannot (with why, and what to install).

use anyhow::{bail, Context};

use crate::catalog::{self, Availability, Entry, Env};

/// Catalog entries by name, in the order given, without duplicates; an
/// unknown name is an error that lists the catalog.
pub fn named(names: &[String]) -> anyhow::Result<Vec<Entry>> {
    let all = catalog::catalog();
    let mut out: Vec<Entry> = Vec::new();
    for n in names.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let e = all.iter().find(|e| e.name == n).with_context(|| {
            format!("unknown server {n:?}; the catalog has: {}", names_of(&all))
        })?;
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    Ok(out)
}

/// `--servers` (every entry when empty or `all`, unless `--target`s alone
/// are given) then `--target NAME=URL`s; a name that a target gives is
/// selected by the target.
pub fn servers_and_targets(names: &[String], targets: &[String]) -> anyhow::Result<Vec<Entry>> {
    let targets = targets
        .iter()
        .map(|t| catalog::external(t))
        .collect::<anyhow::Result<Vec<Entry>>>()?;
    let names: Vec<String> = names
        .iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let all_of_them = names == ["all"] || (names.is_empty() && targets.is_empty());
    let mut out = if all_of_them {
        catalog::catalog()
    } else {
        let not_targets: Vec<String> = names
            .into_iter()
            .filter(|n| !targets.iter().any(|t| t.name == *n))
            .collect();
        named(&not_targets)?
    };
    for e in targets {
        if out.iter().any(|o| o.name == e.name) {
            bail!("--target {}: the name is already taken", e.name);
        }
        out.push(e);
    }
    if out.is_empty() {
        bail!("no server selected");
    }
    Ok(out)
}

/// A server that cannot run here: why, and what to install or do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    pub name: String,
    pub reason: String,
    pub fix: String,
}

/// Splits `entries` into those that can run here (with what will be
/// started) and those that cannot.
pub fn runnable(entries: Vec<Entry>, paths: &Env) -> (Vec<(Entry, String)>, Vec<Missing>) {
    let mut ready = Vec::new();
    let mut missing = Vec::new();
    for e in entries {
        match e.availability(paths) {
            Availability::Ready(detail) => ready.push((e, detail)),
            Availability::Missing { reason, fix } => missing.push(Missing {
                name: e.name.clone(),
                reason,
                fix,
            }),
        }
    }
    (ready, missing)
}

fn names_of(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_select_in_order_without_duplicates() {
        let got = named(&strings(&["node", " coroutine", "node", ""])).unwrap();
        let names: Vec<&str> = got.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["node", "coroutine"]);
        let err = named(&strings(&["nope"])).unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("php-fpm"), "{err}");
    }

    #[test]
    fn no_names_is_every_entry_and_targets_come_last() {
        let all = servers_and_targets(&[], &[]).unwrap();
        assert_eq!(all.len(), catalog::catalog().len());
        let t = servers_and_targets(&[], &strings(&["x=http://127.0.0.1:1"])).unwrap();
        assert_eq!(t.len(), 1, "targets alone select only themselves");
        let both = servers_and_targets(
            &strings(&["node", "swoole"]),
            &strings(&["swoole=http://127.0.0.1:9501"]),
        )
        .unwrap();
        let names: Vec<&str> = both.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["node", "swoole"]);
        assert_eq!(both[1].model, "external");
        assert!(servers_and_targets(
            &[],
            &strings(&["node=http://127.0.0.1:1", "node=http://127.0.0.1:2"])
        )
        .is_err());
    }
}
