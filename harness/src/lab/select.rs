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

/// What can run (with what will be started) and what cannot.
pub type Split = (Vec<(Entry, String)>, Vec<Missing>);

/// The image way ([`catalog::image`]): each missing server that has an
/// image is built and run from it when an engine answers (else its reason
/// says what the build lacked, beside what the host lacked), and each
/// server `from_image` names is run from its image even where the host has
/// it (an error when it has none, or it does not build).
pub fn with_images(
    mut ready: Vec<(Entry, String)>,
    missing: Vec<Missing>,
    selected: &[Entry],
    from_image: &[String],
    paths: &Env,
    say: &dyn Fn(&str),
) -> anyhow::Result<Split> {
    for name in from_image
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        let way = catalog::image::way_of(name)
            .with_context(|| format!("--from-image {name}: it has no compose image"))?;
        if let Some(slot) = ready.iter_mut().find(|(e, _)| e.name == name) {
            let tag = way
                .build(paths, say)
                .map_err(|why| anyhow::anyhow!("--from-image {name}: {why}"))?;
            let entry = slot.0.from_image(way, tag);
            *slot = (entry.clone(), entry.runs_in().unwrap_or_default());
        } else if !missing.iter().any(|m| m.name == name) {
            bail!("--from-image {name}: not among the selected servers");
        }
    }
    let engine = catalog::find_program(&["docker"]).is_some_and(|d| {
        std::process::Command::new(d)
            .args(["info", "--format", "{{.ServerVersion}}"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let mut still = Vec::new();
    for m in missing {
        let entry = selected.iter().find(|e| e.name == m.name);
        let way = catalog::image::way_of(&m.name);
        let (Some(entry), Some(way), true) = (entry, way, engine) else {
            still.push(m);
            continue;
        };
        match way.build(paths, say) {
            Ok(tag) => {
                let entry = entry.from_image(way, tag);
                let detail = entry.runs_in().unwrap_or_default();
                ready.push((entry, detail));
            }
            Err(why) => {
                let host = m.reason.split("; image: ").next().unwrap_or("").to_string();
                still.push(Missing {
                    reason: format!("{host}; image: {why}"),
                    ..m
                });
            }
        }
    }
    // In the catalog's order, as the tables list them.
    ready.sort_by_key(|(e, _)| selected.iter().position(|s| s.name == e.name));
    Ok((ready, still))
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
