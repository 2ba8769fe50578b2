//! Experiment 2: a stall in the CPU. `/hello` alone, then mostly `/hello`
//! with a share of `/cpu?n=N` requests sized so that one costs about
//! [`TARGET_MS`] on this server here, with latency per route from the
//! engine's weighted mix.

use std::time::{Duration, Instant};

use super::document::Stall;
use super::measure::{profiled, quiesce, run_path, stem};
use crate::catalog::Running;
use crate::engine::{self, Control, Plan, Route, Stop};
use crate::lab::profile::Profiler;
use crate::lab::Lab;
use crate::stats::Percentiles;

/// What one heavy request should cost.
pub const TARGET_MS: f64 = 50.0;
/// `/hello` : `/cpu`.
const WEIGHTS: (u32, u32) = (99, 1);
const CONNECTIONS: usize = 20;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// The time of one `GET /cpu?n=N` on an idle server.
fn time_cpu(running: &Running, n: u32) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let r = running.get(&format!("/cpu?n={n}"), Duration::from_secs(30))?;
    if r.status != 200 {
        anyhow::bail!("/cpu?n={n} answered {}", r.status);
    }
    Ok(t0.elapsed().as_secs_f64() * 1000.0)
}

/// The N whose `/cpu?n=N` costs about [`TARGET_MS`] here (warmed first: a
/// JIT compiles the loop on its first calls), and what it costs.
fn size_cpu(running: &Running) -> anyhow::Result<(u32, f64)> {
    for _ in 0..3 {
        time_cpu(running, 100_000)?;
    }
    let probe = 1_000_000;
    let t = time_cpu(running, probe)?.max(0.1);
    let n = ((f64::from(probe) * TARGET_MS / t) as u64).clamp(1000, u64::from(workloads::CPU_N_MAX))
        as u32;
    // The median of three, the machine being shared.
    let mut times = [
        time_cpu(running, n)?,
        time_cpu(running, n)?,
        time_cpu(running, n)?,
    ];
    times.sort_by(f64::total_cmp);
    Ok((n, times[1]))
}

/// The experiment; `profiler` records the mixed run.
pub fn measure(
    lab: &Lab,
    running: &Running,
    model: &str,
    length: Duration,
    profiler: Option<&Profiler>,
) -> Stall {
    let mut out = Stall {
        server: running.name.clone(),
        model: model.into(),
        mix: format!("/hello:{} + /cpu:{}", WEIGHTS.0, WEIGHTS.1),
        ..Stall::default()
    };
    if let Err(e) = stall(lab, running, length, profiler, &mut out) {
        out.error = Some(format!("{e:#}"));
    }
    super::say(&format!(
        "  {}: /hello p99 {:.1} ms alone, {:.1} ms among /cpu?n={} (≈ {:.0} ms each){}",
        out.server,
        out.hello_alone_p99_ms,
        out.hello_mixed_p99_ms,
        out.cpu_n,
        out.cpu_ms,
        out.error
            .as_deref()
            .map_or(String::new(), |e| format!(" — {e}"))
    ));
    out
}

/// The shortest stall run: long enough for every connection to reach its
/// heavy request (1 in 100) and see it answered on a shared machine.
const MIN_LENGTH: Duration = Duration::from_secs(3);

fn stall(
    lab: &Lab,
    running: &Running,
    length: Duration,
    profiler: Option<&Profiler>,
    out: &mut Stall,
) -> anyhow::Result<()> {
    let length = length.max(MIN_LENGTH);
    (out.cpu_n, out.cpu_ms) = size_cpu(running)?;
    let alone = run_path(lab, running, "/hello", CONNECTIONS, true, length)?;
    let p = Percentiles::of(&alone.stats.latency_us);
    (out.hello_alone_p50_ms, out.hello_alone_p99_ms) = (ms(p.p50), ms(p.p99));
    let routes = vec![
        Route::get("/hello", &running.authority, WEIGHTS.0, true),
        Route::get(
            &format!("/cpu?n={}", out.cpu_n),
            &running.authority,
            WEIGHTS.1,
            true,
        ),
    ];
    let url = format!("http://{}/hello", running.authority);
    let mut plan = Plan::mixed(&url, running.addr, routes)?;
    plan.io = lab.io;
    plan.connections = CONNECTIONS;
    plan.stop = Stop::Duration(length);
    plan.max_duration = length;
    let control = Control {
        interrupt: lab.interrupt.clone(),
    };
    quiesce(running);
    let stem = stem(&running.name, "stall", CONNECTIONS);
    let (mixed, profile) = profiled(
        running,
        profiler.map(|p| (p, stem.as_str())),
        "stall",
        || Ok(engine::run(&plan, &control, &mut |_| {})?),
    )?;
    out.mixed_profile = profile;
    out.mixed_rps = mixed.ok_per_s();
    out.failed = mixed.stats.failures.total();
    let hello = &mixed.stats.paths[0];
    let cpu = &mixed.stats.paths[1];
    let h = Percentiles::of(&hello.latency_us);
    (out.hello_mixed_p50_ms, out.hello_mixed_p99_ms) = (ms(h.p50), ms(h.p99));
    out.cpu_mixed_p99_ms = ms(Percentiles::of(&cpu.latency_us).p99);
    if hello.ok == 0 || cpu.ok == 0 {
        anyhow::bail!("the mix answered {} /hello and {} /cpu", hello.ok, cpu.ok);
    }
    Ok(())
}
