//! The settings table (every server's `/config` side by side): one list of
//! columns, rendered by the terminal, report.md and report.html alike. The
//! terminal shows the servers that ran and the narrow columns; the report
//! files show every server and every column.

use super::super::results::{ServerDoc, ServerStatus};

/// Which output the table is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The terminal: servers that ran, narrow columns.
    Terminal,
    /// report.md and report.html: every server, every column.
    Report,
}

struct Column {
    header: &'static str,
    /// Too wide for a terminal line.
    wide: bool,
    cell: fn(&ServerDoc) -> String,
}

fn dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "—".into())
}

const COLUMNS: &[Column] = &[
    Column {
        header: "server",
        wide: false,
        cell: |s| s.name.clone(),
    },
    Column {
        header: "model",
        wide: true,
        cell: |s| s.model.clone(),
    },
    Column {
        header: "language",
        wide: true,
        cell: |s| s.language.clone(),
    },
    Column {
        // The reason of a skip is in the notes under the results table.
        header: "status",
        wide: true,
        cell: |s| s.status.name().to_string(),
    },
    Column {
        header: "runtime",
        wide: false,
        cell: |s| {
            s.config
                .as_ref()
                .map_or("(no /config)".into(), |c| c.runtime.clone())
        },
    },
    Column {
        header: "workers",
        wide: false,
        cell: |s| {
            dash(
                s.config
                    .as_ref()
                    .and_then(|c| c.workers)
                    .map(|v| v.to_string()),
            )
        },
    },
    Column {
        header: "db_pool",
        wide: false,
        cell: |s| {
            dash(
                s.config
                    .as_ref()
                    .and_then(|c| c.db_pool)
                    .map(|v| v.to_string()),
            )
        },
    },
    Column {
        header: "opcache",
        wide: false,
        cell: |s| {
            dash(
                s.config
                    .as_ref()
                    .and_then(|c| c.opcache)
                    .map(|v| v.to_string()),
            )
        },
    },
    Column {
        header: "jit",
        wide: false,
        cell: |s| dash(s.config.as_ref().and_then(|c| c.jit.clone())),
    },
    Column {
        header: "debug",
        wide: false,
        cell: |s| dash(s.config.as_ref().map(|c| c.debug.to_string())),
    },
    Column {
        // What one handshake negotiated before loading (`compare --tls`);
        // shown only when a server of the comparison spoke TLS.
        header: "tls",
        wide: false,
        cell: |s| dash(s.tls.as_ref().map(|t| t.short())),
    },
    Column {
        // Measured per server from /proc; "—" where autogroups are not in
        // effect or the server was started elsewhere.
        header: "autogroup",
        wide: false,
        cell: |s| {
            match s.same_autogroup {
                Some(true) => "harness's",
                Some(false) => "OWN (unfair)",
                None => "—",
            }
            .to_string()
        },
    },
    Column {
        header: "versions",
        wide: true,
        cell: |s| s.versions.join(", "),
    },
    Column {
        header: "started",
        wide: true,
        cell: |s| dash(s.detail.clone()),
    },
];

/// The header and one row per server, as `view` shows them.
pub fn rows(servers: &[ServerDoc], view: View) -> Vec<Vec<String>> {
    let any_tls = servers.iter().any(|s| s.tls.is_some());
    let columns: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| view == View::Report || !c.wide)
        .filter(|c| any_tls || c.header != "tls")
        .collect();
    let mut out = vec![columns.iter().map(|c| c.header.to_string()).collect()];
    for s in servers
        .iter()
        .filter(|s| view == View::Report || s.status == ServerStatus::Ran)
    {
        out.push(columns.iter().map(|c| (c.cell)(s)).collect());
    }
    out
}
