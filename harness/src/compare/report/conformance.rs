//! The HTTP/1.1 conformance of each server (`harness verify --conformance`,
//! run in the pre-pass): one table of pass / warn / fail per group and
//! server, and every deviation with its RFC section. Third-party servers
//! are reported as they are, never patched around.

use super::super::results::ServerDoc;

/// The table's header: the server, then each group and the total.
fn header(servers: &[ServerDoc]) -> Vec<String> {
    let mut h = vec!["server".to_string()];
    if let Some(c) = checked(servers).next().and_then(|s| s.conformance.as_ref()) {
        h.extend(c.groups.iter().map(|g| g.group.clone()));
    }
    h.push("all".into());
    h
}

fn checked(servers: &[ServerDoc]) -> impl Iterator<Item = &ServerDoc> {
    servers.iter().filter(|s| s.conformance.is_some())
}

/// `35 / 2 / 1`: pass / warn / fail.
fn cell(pass: u32, warn: u32, fail: u32) -> String {
    format!("{pass} / {warn} / {fail}")
}

/// The table (header first), one line per server with a conformance
/// check; empty when no server has one (results written before it existed).
pub fn rows(servers: &[ServerDoc]) -> Vec<Vec<String>> {
    if checked(servers).next().is_none() {
        return Vec::new();
    }
    let mut rows = vec![header(servers)];
    for s in checked(servers) {
        let Some(c) = &s.conformance else { continue };
        let mut line = vec![s.name.clone()];
        line.extend(c.groups.iter().map(|g| cell(g.pass, g.warn, g.fail)));
        let (p, w, f) = c.totals();
        line.push(cell(p, w, f));
        rows.push(line);
    }
    rows
}

/// What the cells mean, in one line.
pub const LEGEND: &str = "each cell: rows passed / warned (a SHOULD not met) / failed (a MUST not met), \
     RFC 9112 (HTTP/1.1) and RFC 9110 (HTTP Semantics); `harness verify --conformance URL` shows every row";

/// Every deviation, one line each: server, verdict, group, row, RFC
/// section and requirement, what was found.
pub fn deviations(servers: &[ServerDoc]) -> Vec<String> {
    let mut out = Vec::new();
    for s in checked(servers) {
        let Some(c) = &s.conformance else { continue };
        for d in &c.deviations {
            out.push(format!(
                "{} {} [{}] {} — {} {}: found {}{}",
                s.name,
                d.outcome.to_ascii_uppercase(),
                d.group,
                d.row,
                d.section,
                d.requirement,
                d.found,
                d.core
                    .as_ref()
                    .map(|why| format!(" (listed: {why})"))
                    .unwrap_or_default()
            ));
        }
    }
    out
}

/// What each server says its HTTP layer does not do (`/config`'s
/// `http_limits`), one line per limit.
pub fn limits(servers: &[ServerDoc]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| {
            s.config
                .iter()
                .flat_map(|c| c.http_limits.iter())
                .map(move |l| format!("{} (its /config http_limits): {l}", s.name))
        })
        .collect()
}

/// One line per server for the notes under the results table.
pub fn summaries(servers: &[ServerDoc]) -> Vec<String> {
    checked(servers)
        .filter_map(|s| {
            let c = s.conformance.as_ref()?;
            Some(format!(
                "{} HTTP/1.1 conformance (RFC 9112/9110): {}",
                s.name,
                c.summary()
            ))
        })
        .collect()
}

/// The section of report.md: the table, its legend, the deviations.
pub fn markdown(servers: &[ServerDoc]) -> String {
    let rows = rows(servers);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## HTTP/1.1 conformance (`harness verify --conformance`)\n\n");
    out.push_str(&crate::report::page::md_table(&rows));
    out.push_str(&format!("\n{LEGEND}.\n"));
    let devs = deviations(servers);
    if !devs.is_empty() {
        out.push_str("\nDeviations:\n\n");
        for d in devs {
            out.push_str(&format!("- {d}\n"));
        }
    }
    let limits = limits(servers);
    if !limits.is_empty() {
        out.push_str("\nLimits the servers report themselves:\n\n");
        for l in limits {
            out.push_str(&format!("- {l}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::results::{
        ConformanceCheck, ConformanceDeviation, GroupTally, ServerStatus,
    };

    fn check(fail: u32) -> ConformanceCheck {
        ConformanceCheck {
            rows: 3 + fail,
            groups: vec![
                GroupTally {
                    group: "request line".into(),
                    pass: 2,
                    warn: 0,
                    fail: 0,
                },
                GroupTally {
                    group: "bodies".into(),
                    pass: 1,
                    warn: 0,
                    fail,
                },
            ],
            deviations: (0..fail)
                .map(|_| ConformanceDeviation {
                    row: "chunked body → decoded".into(),
                    group: "bodies".into(),
                    section: "RFC 9112 §7.1 (Chunked Transfer Coding)".into(),
                    requirement: "MUST".into(),
                    outcome: "fail".into(),
                    found: "400, then closed; expected 411".into(),
                    core: None,
                })
                .collect(),
        }
    }

    fn server(name: &str, conformance: Option<ConformanceCheck>) -> ServerDoc {
        ServerDoc {
            name: name.into(),
            model: "m".into(),
            language: "l".into(),
            status: ServerStatus::Ran,
            reason: None,
            detail: None,
            config: None,
            versions: vec![],
            same_autogroup: None,
            notes: vec![],
            runs_in: None,
            contract: None,
            conformance,
            tls: None,
        }
    }

    #[test]
    fn one_line_per_checked_server_and_its_deviations_with_the_section() {
        let mut servers = vec![
            server("ours", Some(check(0))),
            server("third-party", Some(check(1))),
            server("old", None),
        ];
        let rows = rows(&servers);
        assert_eq!(rows.len(), 3, "header, ours, third-party: {rows:?}");
        assert_eq!(rows[0], ["server", "request line", "bodies", "all"]);
        assert_eq!(
            rows[2],
            ["third-party", "2 / 0 / 0", "1 / 0 / 1", "3 / 0 / 1"]
        );
        let devs = deviations(&servers);
        assert_eq!(devs.len(), 1);
        assert!(
            devs[0].starts_with("third-party FAIL [bodies] chunked body → decoded — RFC 9112 §7.1"),
            "{}",
            devs[0]
        );
        let md = markdown(&servers);
        assert!(md.contains("| third-party | 2 / 0 / 0 |"), "{md}");
        assert!(md.contains("- third-party FAIL [bodies]"), "{md}");
        assert_eq!(
            summaries(&servers)[1],
            "third-party HTTP/1.1 conformance (RFC 9112/9110): 3 pass, 0 warn, 1 fail"
        );
        servers[0].config = Some(workloads::ServerConfig {
            server: "ours".into(),
            model: "m".into(),
            runtime: "r".into(),
            workers: None,
            db_pool: None,
            opcache: None,
            jit: None,
            debug: false,
            http_limits: vec!["no read timeout".into()],
            tls: None,
            websocket: None,
            websocket_unsupported: None,
            protocols: Vec::new(),
            http2_unsupported: None,
        });
        assert_eq!(
            limits(&servers),
            ["ours (its /config http_limits): no read timeout"]
        );
        assert!(markdown(&servers).contains("- ours (its /config http_limits): no read timeout"));
        servers.iter_mut().for_each(|s| s.conformance = None);
        assert!(markdown(&servers).is_empty(), "old results: no section");
    }
}
