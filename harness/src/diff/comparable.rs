//! Whether two measurements of a cell measured the same thing the same way.
//! A cell stays in the table with its verdict, marked not comparable with
//! the reasons: a side contaminated by other processes, a different
//! contract outcome, different `/config` settings, different machine facts
//! or load settings.

use crate::lab::meter::CONTAMINATED_PCT;
use crate::lab::record::{Machine, ServerDoc};

use super::load::{LoadSettings, ResultSet, Samples};

/// Why no cell of the two sets is comparable: the machine or the load differ.
pub fn set_reasons(base: &ResultSet, candidate: &ResultSet) -> Vec<String> {
    let mut out = machine_differences(&base.machine, &candidate.machine);
    if let (Some(b), Some(c)) = (&base.load, &candidate.load) {
        out.extend(load_differences(b, c));
    }
    out
}

fn machine_differences(b: &Machine, c: &Machine) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, b: String, c: String| {
        if b != c {
            out.push(format!("machine {what}: {b} → {c}"));
        }
    };
    differ("CPU", b.cpu_model.clone(), c.cpu_model.clone());
    differ("cores", b.cores.to_string(), c.cores.to_string());
    differ("kernel", b.kernel.clone(), c.kernel.clone());
    let autogroup = |a: Option<bool>| match a {
        Some(true) => "on",
        Some(false) => "off",
        None => "absent",
    };
    differ(
        "sched_autogroup_enabled",
        autogroup(b.sched_autogroup_enabled).into(),
        autogroup(c.sched_autogroup_enabled).into(),
    );
    differ(
        "harness build",
        b.harness_build.clone(),
        c.harness_build.clone(),
    );
    out
}

fn load_differences(b: &LoadSettings, c: &LoadSettings) -> Vec<String> {
    let mut out = Vec::new();
    if b.duration_s != c.duration_s {
        out.push(format!(
            "run length: {} s → {} s",
            b.duration_s, c.duration_s
        ));
    }
    if b.keepalive != c.keepalive {
        out.push(format!("keep-alive: {} → {}", b.keepalive, c.keepalive));
    }
    if b.threads != c.threads {
        out.push(format!(
            "load generator threads: {} → {}",
            b.threads, c.threads
        ));
    }
    out
}

/// Why this cell is not comparable (empty: it is).
pub fn cell_reasons(
    server: &str,
    base: (&ResultSet, &Samples),
    candidate: (&ResultSet, &Samples),
) -> Vec<String> {
    let mut out = Vec::new();
    for (side, samples) in [("base", base.1), ("candidate", candidate.1)] {
        if let Some(pct) = samples
            .outside_cpu_pct_max
            .filter(|&p| p >= CONTAMINATED_PCT)
        {
            out.push(format!(
                "{side} contaminated: other processes took up to {pct:.0}% of the machine \
                 during its runs"
            ));
        }
    }
    if let (Some(b), Some(c)) = (base.0.server(server), candidate.0.server(server)) {
        out.extend(server_differences(b, c));
    }
    out
}

/// Differences between two documents of one server: its contract outcome,
/// its `/config` settings, its scheduler autogroup.
fn server_differences(b: &ServerDoc, c: &ServerDoc) -> Vec<String> {
    let mut out = Vec::new();
    // The same failing rows on both sides are the same server behaviour;
    // a row that fails on one side only means they did not serve the same.
    let failing = |d: &ServerDoc| -> Vec<String> {
        d.contract
            .as_ref()
            .map(|k| k.failed.iter().map(|f| f.row.clone()).collect())
            .unwrap_or_default()
    };
    let (fb, fc) = (failing(b), failing(c));
    if fb != fc {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        out.push(format!(
            "failing contract rows differ: base {}; candidate {}",
            list(&fb),
            list(&fc)
        ));
    }
    if let (Some(b), Some(c)) = (&b.config, &c.config) {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "null".into());
        let settings = [
            (
                "workers",
                opt(b.workers.map(|v| v.to_string())),
                opt(c.workers.map(|v| v.to_string())),
            ),
            (
                "db_pool",
                opt(b.db_pool.map(|v| v.to_string())),
                opt(c.db_pool.map(|v| v.to_string())),
            ),
            (
                "opcache",
                opt(b.opcache.map(|v| v.to_string())),
                opt(c.opcache.map(|v| v.to_string())),
            ),
            ("jit", opt(b.jit.clone()), opt(c.jit.clone())),
            ("debug", b.debug.to_string(), c.debug.to_string()),
        ];
        for (name, vb, vc) in settings {
            if vb != vc {
                out.push(format!("/config {name}: {vb} → {vc}"));
            }
        }
    }
    if b.same_autogroup != c.same_autogroup {
        let ag = |a: Option<bool>| match a {
            Some(true) => "in the harness's autogroup",
            Some(false) => "in an autogroup of its own",
            None => "not measured",
        };
        out.push(format!(
            "scheduler autogroup: base {}; candidate {}",
            ag(b.same_autogroup),
            ag(c.same_autogroup)
        ));
    }
    out
}

/// A difference worth saying that does not bar the comparison: the
/// runtime's version (a PHP upgrade is what one compares).
pub fn runtime_note(server: &str, base: &ResultSet, candidate: &ResultSet) -> Option<String> {
    let rt = |s: &ResultSet| s.server(server)?.config.as_ref().map(|c| c.runtime.clone());
    match (rt(base), rt(candidate)) {
        (Some(b), Some(c)) if b != c => Some(format!("runtime: {b} → {c}")),
        _ => None,
    }
}
