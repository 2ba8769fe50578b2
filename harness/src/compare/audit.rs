//! The fairness audit: every server's `/config` (its effective settings,
//! read from the running process) side by side, and warnings where the
//! servers of one comparison differ or run handicapped — the first thing
//! people dispute in any public benchmark.

use workloads::ServerConfig;

use super::results::{Fairness, ServerDoc, ServerStatus};

/// The side-by-side table (plain text, aligned), as the terminal shows it.
pub fn table(servers: &[ServerDoc]) -> String {
    let rows = super::report::settings::rows(servers, super::report::settings::View::Terminal);
    crate::report::align(&rows, &[])
}

/// The warnings for `servers`, and the DB connection budget.
pub fn audit(servers: &[ServerDoc], db_max_connections: Option<u64>) -> Fairness {
    let ran: Vec<&ServerDoc> = servers
        .iter()
        .filter(|s| s.status == ServerStatus::Ran)
        .collect();
    let configs: Vec<(&str, &ServerConfig)> = ran
        .iter()
        .filter_map(|s| s.config.as_ref().map(|c| (s.name.as_str(), c)))
        .collect();
    let mut warnings = Vec::new();
    for s in &ran {
        if s.config.is_none()
            && s.detail
                .as_deref()
                .is_some_and(|d| !d.starts_with("started elsewhere"))
        {
            warnings.push(format!(
                "{}: no /config document: its settings are unknown",
                s.name
            ));
        }
        if s.same_autogroup == Some(false) {
            warnings.push(format!(
                "{}: a process runs in its own scheduler autogroup (setsid): it gets as much \
                 CPU as the whole load generator",
                s.name
            ));
        }
        warnings.extend(s.notes.iter().cloned());
    }
    let differ = |what: &str, f: &dyn Fn(&ServerConfig) -> Option<u32>| {
        let vals: Vec<(&str, u32)> = configs
            .iter()
            .filter_map(|(n, c)| f(c).map(|v| (*n, v)))
            .collect();
        let first = vals.first().map(|v| v.1);
        if vals.iter().any(|v| Some(v.1) != first) {
            Some(format!(
                "{what} differ: {}",
                vals.iter()
                    .map(|(n, v)| format!("{n} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        } else {
            None
        }
    };
    if let Some(w) = differ("workers", &|c| c.workers) {
        warnings.push(format!(
            "{w} (the models differ by design; compare like with like)"
        ));
    }
    if let Some(w) = differ("DB pool sizes", &|c| c.db_pool) {
        warnings.push(w);
    }
    // PHP's patch level differs between stacks built on other bases
    // (Debian's php8.2 for php-fpm, the official images' for RoadRunner,
    // Swoole, FrankenPHP): a difference to state beside the numbers.
    let php: Vec<(&str, &str)> = configs
        .iter()
        .filter_map(|(n, c)| c.runtime.strip_prefix("php ").map(|v| (*n, v.trim())))
        .collect();
    if php.iter().any(|(_, v)| *v != php[0].1) {
        warnings.push(format!(
            "PHP versions differ: {}",
            php.iter()
                .map(|(n, v)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for (name, c) in &configs {
        if c.opcache == Some(false) {
            warnings.push(format!("{name}: OPcache is off"));
        }
        if c.opcache.is_some()
            && !matches!(c.jit.as_deref(), Some(j) if j != "off" && !j.is_empty())
        {
            warnings.push(format!(
                "{name}: the JIT is off (the seed ran the tracing JIT)"
            ));
        }
        if c.debug {
            warnings.push(format!("{name}: debug is on"));
        }
    }
    let pools: Vec<u64> = configs
        .iter()
        .filter_map(|(_, c)| c.db_pool.map(u64::from))
        .collect();
    let db_pool_total = (!pools.is_empty()).then(|| pools.iter().sum());
    if let (Some(max), Some(&biggest)) = (db_max_connections, pools.iter().max()) {
        if biggest > max {
            warnings.push(format!(
                "a server's DB pool ({biggest}) exceeds the database's max_connections ({max})"
            ));
        }
    }
    warnings.dedup();
    Fairness {
        warnings,
        db_pool_total,
        db_max_connections,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(
        name: &str,
        workers: u32,
        pool: u32,
        opcache: Option<bool>,
        jit: Option<&str>,
    ) -> ServerDoc {
        ServerDoc {
            runs_in: None,
            contract: None,
            conformance: None,
            name: name.into(),
            model: "m".into(),
            language: "l".into(),
            status: ServerStatus::Ran,
            reason: None,
            detail: Some("x".into()),
            config: Some(ServerConfig {
                server: name.into(),
                model: "m".into(),
                runtime: "r 1".into(),
                workers: Some(workers),
                db_pool: Some(pool),
                opcache,
                jit: jit.map(String::from),
                debug: false,
                http_limits: Vec::new(),
                tls: None,
                websocket: None,
                websocket_unsupported: None,
                protocols: Vec::new(),
                http2_unsupported: None,
            }),
            versions: vec![],
            same_autogroup: Some(true),
            notes: vec![],
        }
    }

    #[test]
    fn warns_where_settings_differ_or_the_jit_is_off() {
        let servers = vec![
            doc("a", 20, 20, None, None),
            doc("b", 1, 20, None, None),
            doc("php", 20, 10, Some(true), None),
        ];
        let f = audit(&servers, Some(15));
        let all = f.warnings.join("\n");
        assert!(all.contains("workers differ: a 20, b 1, php 20"), "{all}");
        assert!(all.contains("DB pool sizes differ"), "{all}");
        assert!(all.contains("php: the JIT is off"), "{all}");
        assert!(
            all.contains("exceeds the database's max_connections (15)"),
            "{all}"
        );
        assert_eq!(f.db_pool_total, Some(50));
        let same = audit(
            &[
                doc("a", 20, 20, Some(true), Some("tracing")),
                doc("b", 20, 20, None, None),
            ],
            Some(100),
        );
        assert!(same.warnings.is_empty(), "{:?}", same.warnings);
        assert!(table(&servers).contains("php"));
    }

    #[test]
    fn warns_where_the_php_stacks_run_different_php_versions() {
        let php = |name: &str, version: &str| {
            let mut d = doc(name, 20, 20, Some(true), Some("tracing"));
            d.config.as_mut().unwrap().runtime = format!("php {version}");
            d
        };
        let f = audit(
            &[
                php("php-fpm", "8.2.28"),
                php("swoole", "8.2.32"),
                doc("rust", 20, 20, None, None),
            ],
            None,
        );
        assert!(
            f.warnings
                .iter()
                .any(|w| w == "PHP versions differ: php-fpm 8.2.28, swoole 8.2.32"),
            "{:?}",
            f.warnings
        );
        let same = audit(
            &[php("php-fpm", "8.2.28"), php("roadrunner", "8.2.28")],
            None,
        );
        assert!(same.warnings.is_empty(), "{:?}", same.warnings);
    }
}
