//! A missed prediction's evidence (`models --profile`): where the CPU went
//! in the run that missed, from its profile, and what that says — the
//! machine's cores all in use (the bound cannot hold here), or CPU left
//! idle (the limit is a wait, a lock or a queue, not the CPU).

use super::document::{Evidence, Finding, WaitPoint};
use crate::lab::profile::Profile;

/// Cores in use at or above this share of the machine's: saturated.
pub const SATURATED_SHARE: f64 = 0.9;

/// The evidence of a run of `rps` verified requests per second that was
/// profiled (`None` without a profile, or where perf failed).
pub fn of_run(run: &str, profile: Option<&Profile>, rps: f64, cores: u32) -> Option<Evidence> {
    let p = profile.filter(|p| p.error.is_none() && p.server.cpu_ns > 0)?;
    let s = &p.server;
    let server_us = s.user_us_per_request + s.kernel_us_per_request;
    let generator_us = p.generator.user_us_per_request + p.generator.kernel_us_per_request;
    let server_cores = server_us * rps / 1e6;
    let generator_cores = generator_us * rps / 1e6;
    let used = server_cores + generator_cores;
    let programs = if s.programs.len() > 1 || s.php_pct.is_some() {
        let list: Vec<String> = s
            .programs
            .iter()
            .filter(|p| p.pct >= 0.5)
            .map(|p| format!("{} {:.0}%", p.program, p.pct))
            .collect();
        let php = s
            .php_pct
            .map_or(String::new(), |x| format!(", PHP itself {x:.0}%"));
        format!("; by program {}{php}", list.join(", "))
    } else {
        String::new()
    };
    let reading = if used >= SATURATED_SHARE * f64::from(cores) {
        format!(
            "the machine's CPU was saturated ({used:.1} of {cores} cores with the load generator's \
             {generator_cores:.1}): the prediction's bound needs more CPU than this machine has"
        )
    } else {
        format!(
            "CPU was left idle ({used:.1} of {cores} cores in use with the load generator's \
             {generator_cores:.1}): what limits it is a wait, a lock or a queue, not the CPU"
        )
    };
    let sentence = format!(
        "at {run} the server used {server_cores:.2} cores: {:.1} µs user and {:.1} µs kernel per \
         request ({:.0}% kernel, {:.0}% under TCP, {:.0}% under the scheduler){programs}; {reading}",
        s.user_us_per_request,
        s.kernel_us_per_request,
        s.kernel_pct,
        s.kernel_tcp_pct,
        s.kernel_sched_pct,
    );
    Some(Evidence {
        run: run.to_string(),
        server: s.clone(),
        server_cores,
        generator_us_per_request: generator_us,
        flame_graph: p.server_svg.clone(),
        sentence,
    })
}

/// What a missed finding says when its runs were profiled but no profile
/// holds a sample of the server (an idle server's short run at 99 Hz).
pub const TOO_FEW_SAMPLES: &str =
    "its profile caught too few samples of the server to say where the CPU went";

/// Whether a run was profiled and perf ran (its samples may still be none).
pub fn profiled(profile: Option<&Profile>) -> bool {
    profile.is_some_and(|p| p.error.is_none())
}

/// Sets a missed finding's evidence; where there is none although its runs
/// were profiled, the sentence says so instead of leaving the miss bare.
pub fn attach(f: &mut Finding, evidence: Option<Evidence>, profiled: bool) {
    if evidence.is_none() && profiled {
        f.sentence = format!("{} ({TOO_FEW_SAMPLES})", f.sentence);
    }
    f.evidence = evidence;
}

/// The evidence of a wait curve's point.
pub fn of_point(point: &WaitPoint, cores: u32) -> Option<Evidence> {
    of_run(
        &format!("c = {}", point.connections),
        point.profile.as_ref(),
        point.rps,
        cores,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::profile::{Breakdown, ProgramShare};

    fn profile(server_us: f64, generator_us: f64) -> Profile {
        Profile {
            server_svg: Some("profiles/x.server.svg".into()),
            server: Breakdown {
                cpu_ns: 1,
                user_us_per_request: server_us * 0.6,
                kernel_us_per_request: server_us * 0.4,
                kernel_pct: 40.0,
                kernel_tcp_pct: 20.0,
                kernel_sched_pct: 5.0,
                programs: vec![
                    ProgramShare {
                        program: "php-fpm8.2".into(),
                        pct: 70.0,
                    },
                    ProgramShare {
                        program: "nginx".into(),
                        pct: 30.0,
                    },
                ],
                php_pct: Some(45.0),
                ..Breakdown::default()
            },
            generator: Breakdown {
                cpu_ns: 1,
                user_us_per_request: generator_us,
                ..Breakdown::default()
            },
            ..Profile::default()
        }
    }

    #[test]
    fn a_saturated_run_says_the_cpu_ran_out() {
        // 1,000 req/s × (1,700 + 200) µs = 1.9 cores of 2.
        let e = of_run("c = 200", Some(&profile(1700.0, 200.0)), 1000.0, 2).unwrap();
        assert!((e.server_cores - 1.7).abs() < 1e-9, "{e:?}");
        assert!(
            e.sentence.contains("saturated (1.9 of 2 cores"),
            "{}",
            e.sentence
        );
        assert!(e.sentence.contains("PHP itself 45%"), "{}", e.sentence);
        assert_eq!(e.flame_graph.as_deref(), Some("profiles/x.server.svg"));
    }

    #[test]
    fn an_idle_run_says_the_limit_is_not_the_cpu() {
        // 300 req/s × 1,000 µs = 0.3 cores.
        let e = of_run("c = 20", Some(&profile(900.0, 100.0)), 300.0, 2).unwrap();
        assert!(
            e.sentence.contains("left idle (0.3 of 2 cores"),
            "{}",
            e.sentence
        );
        // No profile, or a failed one: no evidence.
        assert!(of_run("c = 20", None, 300.0, 2).is_none());
        let failed = Profile::failed("perf is not installed".into());
        assert!(of_run("c = 20", Some(&failed), 300.0, 2).is_none());
    }
}
