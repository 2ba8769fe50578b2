//! What TLS costs each server beside what Docker costs it, in a sentence
//! per server and workload, computed from the rows: which of TLS at the
//! server, TLS at a proxy in front and Docker adds the most CPU per request
//! over bare, and why, from the profile where one was taken (the share of
//! the server's CPU in TLS and crypto code, in handshakes, in the proxy's
//! nginx) and from the meter (docker-proxy's CPU, the handshake rows).
//! Nothing here knows a server by name.

use super::report::{EnvDoc, EnvStatus, EnvWorkload, Tax};

/// The rows weighed against each other, and how a sentence names them.
const CANDIDATES: [(&str, &str); 4] = [
    ("tls-server", "TLS at the server"),
    ("tls-proxy", "TLS at a proxy in front"),
    ("docker", "Docker (docker-proxy)"),
    ("docker-host", "Docker (--network host)"),
];

fn row<'a>(envs: &'a [EnvDoc], name: &str, server: &str, path: &str) -> Option<&'a EnvWorkload> {
    envs.iter()
        .filter(|e| e.name == name && e.status == EnvStatus::Measured)
        .flat_map(|e| e.workloads.iter())
        .find(|w| w.server == server && w.path == path && w.error.is_none() && !w.runs.is_empty())
}

/// `, contaminated: 40% outside` where a row is.
fn taint(w: &EnvWorkload) -> String {
    if w.contaminated {
        format!(
            ", contaminated: other processes took up to {:.0}% of the machine",
            w.outside_cpu_pct_max
        )
    } else {
        String::new()
    }
}

/// `+12.3 µs of CPU per request (1.9× bare's CPU, 0.50× its req/s)`.
fn cost(w: &EnvWorkload) -> String {
    let rps = w
        .ratio_to_bare
        .map_or(String::new(), |r| format!("{r:.2}× its req/s"));
    match (w.cpu_us_over_bare, w.cpu_ratio_to_bare) {
        (Some(us), Some(r)) => format!(
            "{us:+.1} µs of CPU per request ({r:.2}× bare's CPU, {rps}{})",
            taint(w)
        ),
        _ => format!("{rps}, CPU not metered{}", taint(w)),
    }
}

/// One sentence per server and workload measured on bare and in at
/// least one of the candidates. `profiled`: `--profile` was given.
pub fn sentences(envs: &[EnvDoc], profiled: bool) -> Vec<Tax> {
    let mut out = Vec::new();
    let Some(bare) = envs
        .iter()
        .find(|e| e.name == "bare" && e.status == EnvStatus::Measured)
    else {
        return out;
    };
    for b in bare.workloads.iter().filter(|w| w.error.is_none()) {
        let (server, path) = (b.server.as_str(), b.path.as_str());
        let rows: Vec<(&str, &str, &EnvWorkload)> = CANDIDATES
            .iter()
            .filter_map(|&(name, words)| Some((name, words, row(envs, name, server, path)?)))
            .collect();
        if rows.is_empty() {
            continue;
        }
        out.push(one(envs, server, path, &rows, profiled));
    }
    out
}

/// The costliest of `rows` by CPU added per request (else by req/s), or
/// None when the top two are within twice their combined spread.
fn costliest<'a>(rows: &[(&'a str, &'a str, &EnvWorkload)]) -> Option<(&'a str, &'a str)> {
    let by_cpu = rows.iter().all(|(_, _, w)| w.cpu_us_over_bare.is_some());
    let key = |w: &EnvWorkload| {
        if by_cpu {
            w.cpu_us_over_bare.unwrap_or(0.0)
        } else {
            -w.ratio_to_bare.unwrap_or(1.0)
        }
    };
    let spread = |w: &EnvWorkload| {
        if by_cpu {
            w.cpu_us_per_request_sd.unwrap_or(0.0)
        } else {
            w.ratio_sd.unwrap_or(0.0)
        }
    };
    let mut sorted: Vec<_> = rows.to_vec();
    sorted.sort_by(|a, b| key(b.2).total_cmp(&key(a.2)));
    let top = sorted.first()?;
    if let Some(next) = sorted.get(1) {
        let noise = 2.0 * (spread(top.2).powi(2) + spread(next.2).powi(2)).sqrt();
        if key(top.2) - key(next.2) <= noise {
            return None;
        }
    }
    Some((top.0, top.1))
}

fn one(
    envs: &[EnvDoc],
    server: &str,
    path: &str,
    rows: &[(&str, &str, &EnvWorkload)],
    profiled: bool,
) -> Tax {
    let costliest = costliest(rows);
    let mut s = format!("{server} {path}: ");
    let list = |skip: Option<&str>| {
        rows.iter()
            .filter(|(n, ..)| Some(*n) != skip)
            .map(|(_, words, w)| format!("{words} {}", cost(w)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    match costliest {
        Some((name, words)) if rows.len() > 1 => {
            let w = rows.iter().find(|(n, ..)| *n == name).map(|r| r.2);
            s += &format!(
                "{words} costs it most: {}; against {}.",
                w.map(cost).unwrap_or_default(),
                list(Some(name))
            );
        }
        _ if rows.len() > 1 => {
            s += &format!(
                "no one of these costs it clearly most (within twice their spread): {}.",
                list(None)
            );
        }
        _ => s += &format!("{}.", list(None)),
    }
    let mut why = Vec::new();
    let tls_server = rows.iter().find(|(n, ..)| *n == "tls-server").map(|r| r.2);
    let mut tls_us = None;
    if let Some(w) = tls_server {
        match w.profile.as_ref() {
            Some(p) if p.error.is_none() => {
                tls_us = Some(p.tls_us_per_request);
                why.push(format!(
                    "with TLS at the server {:.0}% of its CPU is TLS and crypto code ({:.1} µs a request) and {:.0}% handshakes",
                    p.tls_pct, p.tls_us_per_request, p.handshake_pct
                ));
            }
            Some(p) => why.push(format!(
                "no profile of TLS at the server: {}",
                p.error.as_deref().unwrap_or("")
            )),
            None => {}
        }
    }
    if let Some(w) = rows.iter().find(|(n, ..)| *n == "tls-proxy").map(|r| r.2) {
        let front = w
            .runs
            .iter()
            .filter_map(|r| r.proxy_cpu_us_per_request)
            .collect::<Vec<_>>();
        let front_us = (!front.is_empty()).then(|| front.iter().sum::<f64>() / front.len() as f64);
        match (w.profile.as_ref().filter(|p| p.error.is_none()), front_us) {
            (Some(p), _) => why.push(format!(
                "with TLS at a proxy its nginx takes {:.0}% of the CPU and {:.0}% of the whole is TLS and crypto code ({:.1} µs a request)",
                p.front_pct.unwrap_or(0.0),
                p.tls_pct,
                p.tls_us_per_request
            )),
            (None, Some(us)) => why.push(format!(
                "the proxy's nginx takes {us:.1} µs a request (metered)"
            )),
            _ => {}
        }
    }
    if let Some(w) = rows.iter().find(|(n, ..)| *n == "docker").map(|r| r.2) {
        let proxy: Vec<f64> = w
            .runs
            .iter()
            .filter_map(|r| r.proxy_cpu_us_per_request)
            .collect();
        if !proxy.is_empty() {
            let us = proxy.iter().sum::<f64>() / proxy.len() as f64;
            let pct = w
                .cpu_us_per_request
                .filter(|&c| c > 0.0)
                .map_or(String::new(), |c| {
                    format!(", {:.0}% of the CPU", 100.0 * us / c)
                });
            why.push(format!(
                "docker-proxy takes {us:.1} µs a request (metered{pct})"
            ));
        }
    }
    for (name, words) in [
        ("tls-server/new-conn", "resumed"),
        ("tls-server/new-conn-full", "full"),
    ] {
        let Some(w) = row(envs, name, server, path) else {
            continue;
        };
        let (Some(hs), Some(per)) = (w.handshakes_per_s, w.cpu_us_per_handshake) else {
            continue;
        };
        let over = w.cpu_us_over_bare.map_or(String::new(), |o| {
            format!(", {o:+.0} µs over a plaintext connection")
        });
        let in_hs = w
            .profile
            .as_ref()
            .filter(|p| p.error.is_none())
            .map_or(String::new(), |p| {
                format!(
                    ", {:.0}% of it in handshakes by the profile",
                    p.handshake_pct
                )
            });
        why.push(format!(
            "a {words} handshake per request runs {hs:.0}/s at {per:.0} µs of server CPU each{over}{in_hs}{}",
            taint(w)
        ));
    }
    if !profiled {
        s += " No profile was taken (--profile): from CPU per request alone";
        s += &if why.is_empty() {
            ".".to_string()
        } else {
            format!(", {}.", why.join("; "))
        };
    } else if !why.is_empty() {
        s += &format!(" Why: {}.", why.join("; "));
    }
    if let Some(p) = protocols(envs, server, path) {
        s += &format!(" {p}.");
    }
    Tax {
        server: server.into(),
        path: path.into(),
        cpu_us_over_bare: rows
            .iter()
            .filter_map(|(n, _, w)| Some((n.to_string(), w.cpu_us_over_bare?)))
            .collect(),
        costliest: costliest.map(|(n, _)| n.to_string()),
        tls_us_per_request: tls_us,
        sentence: s,
    }
}

/// With TLS at the server, what h2 and h3 cost against HTTP/1.1 over TLS,
/// where they were measured: `Over TLS, h2 (16 streams) takes 9.1 µs of
/// CPU a request (0.80× HTTP/1.1's over TLS); h3 (16 streams) 20.3 µs
/// (1.79×)`, and a protocol the server does not serve with why.
fn protocols(envs: &[EnvDoc], server: &str, path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for e in envs
        .iter()
        .filter(|e| e.protocol.is_some() && e.status == EnvStatus::Measured)
    {
        let Some(w) = e
            .workloads
            .iter()
            .find(|w| w.server == server && w.path == path)
        else {
            continue;
        };
        let proto = e.protocol.as_deref().unwrap_or("");
        if let Some(why) = &w.not_served {
            parts.push(format!("{proto} is not served ({why})"));
            continue;
        }
        if !w.measured() || w.runs.is_empty() {
            continue;
        }
        let streams = e
            .streams
            .map_or(String::new(), |n| format!(" ({n} streams)"));
        let against = w.versus.as_ref().and_then(|v| v.cpu_ratio);
        parts.push(match (w.cpu_us_per_request, against) {
            (Some(c), Some(r)) => format!(
                "{proto}{streams} takes {c:.1} µs of CPU a request ({r:.2}× HTTP/1.1's over TLS{})",
                taint(w)
            ),
            (Some(c), None) => format!("{proto}{streams} takes {c:.1} µs of CPU a request"),
            (None, _) => format!("{proto}{streams}: its CPU was not metered"),
        });
    }
    (!parts.is_empty()).then(|| format!("Over TLS, {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::report::RunDoc;

    fn workload(server: &str, cpu: &[f64], rps: f64, outside: f64) -> EnvWorkload {
        let runs = cpu
            .iter()
            .map(|&c| RunDoc {
                rps,
                requests: 1000,
                cpu_us_per_request: Some(c),
                outside_cpu_pct: outside,
                ..RunDoc::default()
            })
            .collect();
        let mut w = EnvWorkload {
            runs,
            ..EnvWorkload::new(server, "/hello")
        };
        crate::calibrate::summarize(&mut w);
        w
    }

    fn env(name: &str, workloads: Vec<EnvWorkload>) -> EnvDoc {
        EnvDoc::measured(name, workloads)
    }

    #[test]
    fn the_costliest_is_named_from_the_figures_and_a_tie_is_said() {
        let mut envs = vec![
            env("bare", vec![workload("a", &[10.0, 10.0], 100.0, 0.0)]),
            env("tls-server", vec![workload("a", &[20.0, 20.2], 60.0, 0.0)]),
            env("tls-proxy", vec![workload("a", &[30.0, 30.2], 40.0, 0.0)]),
            env("docker", vec![workload("a", &[15.0, 15.2], 80.0, 45.0)]),
        ];
        crate::calibrate::apply_ratios(&mut envs);
        let t = sentences(&envs, false);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].costliest.as_deref(), Some("tls-proxy"));
        let s = &t[0].sentence;
        assert!(
            s.starts_with("a /hello: TLS at a proxy in front costs it most: +20.1 µs"),
            "{s}"
        );
        assert!(
            s.contains("contaminated: other processes took up to 45%"),
            "{s}"
        );
        assert!(s.contains("No profile was taken"), "{s}");
        // Two rows within their spread: neither is named.
        envs[2] = env("tls-proxy", vec![workload("a", &[18.0, 22.4], 40.0, 0.0)]);
        crate::calibrate::apply_ratios(&mut envs);
        let t = sentences(&envs, false);
        assert_eq!(t[0].costliest, None, "{}", t[0].sentence);
        assert!(t[0]
            .sentence
            .contains("no one of these costs it clearly most"));
    }

    #[test]
    fn the_sentence_says_what_h2_and_h3_cost_beside_http1_over_tls() {
        let proto = |name: &str, p: &str, w: EnvWorkload| EnvDoc {
            protocol: Some(p.into()),
            streams: Some(16),
            also_against: Some("tls-server".into()),
            ..env(name, vec![w])
        };
        let mut h3 = EnvWorkload::new("a", "/hello");
        h3.not_served = Some("no QUIC here".into());
        let mut envs = vec![
            env("bare", vec![workload("a", &[10.0, 10.0], 100.0, 0.0)]),
            env("tls-server", vec![workload("a", &[20.0, 20.0], 60.0, 0.0)]),
            proto(
                "tls-server/h2",
                "h2",
                workload("a", &[30.0, 30.0], 50.0, 0.0),
            ),
            proto("tls-server/h3", "h3", h3),
        ];
        crate::calibrate::apply_ratios(&mut envs);
        let s = &sentences(&envs, false)[0].sentence;
        assert!(
            s.ends_with(
                "Over TLS, h2 (16 streams) takes 30.0 µs of CPU a request (1.50× HTTP/1.1's \
                 over TLS); h3 is not served (no QUIC here)."
            ),
            "{s}"
        );
    }
}
