//! How well the emulated bridge predicts the real Docker Engine: for each
//! server and workload measured in `docker` and in an emulated
//! environment (`bridge-proxy`, `bridge`), the two ratios to bare side by
//! side, with a verdict that rests on their spread: "within noise" when the
//! difference is under twice the combined run-to-run spread, else how far
//! and which way the emulation is off. docker-proxy's own CPU per request
//! (metered in the `docker` runs) goes beside it: a part of the path that
//! the emulation's proxy (a thread of the harness) cannot show.

use super::report::{EnvDoc, EnvStatus, EnvWorkload, Prediction};

/// The emulated environments compared with `docker`, closest first.
const EMULATED: [&str; 2] = ["bridge-proxy", "bridge"];

fn measured<'a>(
    envs: &'a [EnvDoc],
    name: &str,
    server: &str,
    path: &str,
) -> Option<&'a EnvWorkload> {
    envs.iter()
        .filter(|e| e.name == name && e.status == EnvStatus::Measured)
        .flat_map(|e| e.workloads.iter())
        .find(|w| {
            w.server == server && w.path == path && w.error.is_none() && w.ratio_to_bare.is_some()
        })
}

/// Every prediction the environments allow (none without a measured `docker`).
pub fn predictions(envs: &[EnvDoc]) -> Vec<Prediction> {
    let Some(docker) = envs
        .iter()
        .find(|e| e.name == "docker" && e.status == EnvStatus::Measured)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in docker.workloads.iter().filter(|w| w.error.is_none()) {
        let (Some(dr), Some(dsd)) = (d.ratio_to_bare, d.ratio_sd) else {
            continue;
        };
        let emulated: Vec<(String, f64, f64)> = EMULATED
            .iter()
            .filter_map(|&n| {
                let w = measured(envs, n, &d.server, &d.path)?;
                Some((n.to_string(), w.ratio_to_bare?, w.ratio_sd.unwrap_or(0.0)))
            })
            .collect();
        let proxy: Vec<f64> = d
            .runs
            .iter()
            .filter_map(|r| r.proxy_cpu_us_per_request)
            .collect();
        let proxy = (!proxy.is_empty()).then(|| proxy.iter().sum::<f64>() / proxy.len() as f64);
        let sentence = sentence(&d.server, &d.path, dr, dsd, &emulated, proxy);
        out.push(Prediction {
            server: d.server.clone(),
            path: d.path.clone(),
            docker_ratio: dr,
            docker_ratio_sd: dsd,
            emulated,
            proxy_cpu_us_per_request: proxy,
            sentence,
        });
    }
    out
}

/// How one emulated ratio reads against Docker's.
fn verdict(docker: f64, docker_sd: f64, emulated: f64, emulated_sd: f64) -> String {
    let noise = 2.0 * (docker_sd.powi(2) + emulated_sd.powi(2)).sqrt();
    let off = (emulated - docker) / docker * 100.0;
    if (emulated - docker).abs() <= noise {
        format!("within noise ({off:+.0}%)")
    } else if emulated > docker {
        format!("{off:.0}% too kind")
    } else {
        format!("{:.0}% too harsh", -off)
    }
}

fn sentence(
    server: &str,
    path: &str,
    docker: f64,
    docker_sd: f64,
    emulated: &[(String, f64, f64)],
    proxy: Option<f64>,
) -> String {
    let mut s = format!(
        "{server} {path}: Docker's bridge (a published port, docker-proxy) runs it at \
         {docker:.2} ± {docker_sd:.2} × bare"
    );
    if emulated.is_empty() {
        s.push_str("; no emulated environment was measured beside it");
    } else {
        let parts: Vec<String> = emulated
            .iter()
            .map(|(n, r, sd)| {
                format!(
                    "{n} predicts {r:.2} ± {sd:.2} ({})",
                    verdict(docker, docker_sd, *r, *sd)
                )
            })
            .collect();
        s.push_str(&format!("; the emulation: {}", parts.join(", ")));
    }
    if let Some(us) = proxy {
        s.push_str(&format!(
            "; docker-proxy itself took {us:.1} µs of CPU per request"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::report::RunDoc;

    fn env(name: &str, ratio: f64, sd: f64, proxy: Option<f64>) -> EnvDoc {
        EnvDoc::measured(
            name,
            vec![EnvWorkload {
                runs: vec![RunDoc {
                    rps: 1.0,
                    proxy_cpu_us_per_request: proxy,
                    ..RunDoc::default()
                }],
                rps_mean: 1.0,
                ratio_to_bare: Some(ratio),
                ratio_sd: Some(sd),
                ..EnvWorkload::new("event-loop", "/hello")
            }],
        )
    }

    #[test]
    fn the_emulation_is_judged_against_docker_with_the_spread_of_both() {
        let envs = [
            env("bare", 1.0, 0.01, None),
            env("bridge", 0.82, 0.02, None),
            env("bridge-proxy", 0.35, 0.02, None),
            env("docker", 0.33, 0.01, Some(15.0)),
        ];
        let p = predictions(&envs);
        assert_eq!(p.len(), 1);
        let s = &p[0].sentence;
        assert!(s.starts_with("event-loop /hello: Docker's bridge"), "{s}");
        // 0.35 vs 0.33 with a combined 2σ of 0.045: within noise.
        assert!(
            s.contains("bridge-proxy predicts 0.35 ± 0.02 (within noise (+6%))"),
            "{s}"
        );
        // 0.82 vs 0.33: far off, and kinder than the real thing.
        assert!(
            s.contains("bridge predicts 0.82 ± 0.02 (148% too kind)"),
            "{s}"
        );
        assert!(s.contains("docker-proxy itself took 15.0 µs"), "{s}");
        assert_eq!(p[0].proxy_cpu_us_per_request, Some(15.0));
    }

    #[test]
    fn without_a_measured_docker_there_is_no_prediction() {
        let mut docker = env("docker", 0.3, 0.01, None);
        docker.status = EnvStatus::NotAvailable;
        assert!(predictions(&[env("bridge", 0.8, 0.0, None), docker]).is_empty());
        assert_eq!(
            verdict(0.5, 0.01, 0.4, 0.01),
            "20% too harsh",
            "an emulation harsher than Docker says so"
        );
    }
}
