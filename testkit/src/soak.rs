//! The soak (issue #20, item 3): a server at saturation for a while, its
//! resident memory, open descriptors and database connections sampled
//! every second; after a warm-up they must stay flat, and no request may
//! fail. CI runs it for [`DEFAULT_SECS`]; `BENCHLAB_SOAK_SECS=1800` makes
//! the 30-minute run of the closing note.
//!
//! The bounds, and why:
//! - **warm-up**: until RSS settles (10 samples within 128 KiB: a rate,
//!   not a level, so a slow machine's slow growth does not pass for
//!   settled), at least 5 s, at most 300 s (`BENCHLAB_SOAK_WARMUP_SECS`);
//!   then the judged stretch, `BENCHLAB_SOAK_SECS` long. A leak slower
//!   than 13 KiB/s settles, and shows in the 30-minute run.
//! - **RSS**: the end (median of the last 3 samples) at most
//!   max([`RSS_SLACK_KIB`], 10 %) above the start (median of the first 3
//!   after warm-up). jemalloc's caches and dirty-page decay (10 s) move a
//!   settled server's RSS by a few hundred KiB; a leak of 64 bytes per
//!   request shows as megabytes within a CI soak (tens of thousands of
//!   requests) and grows without end in a long one.
//! - **descriptors**: the end at most 2 above the start. The load's
//!   connections are kept alive, so a settled server holds a fixed set;
//!   one left behind per failure or per query would climb.
//! - **`Threads_connected`**: every sample after warm-up at most the
//!   server's pool (its `/config` `db_pool`) plus the sampler's own
//!   connection.

use std::time::{Duration, Instant};

use crate::db;
use crate::faults::{db_pool, Server};
use crate::load::{Counts, Load};

/// The CI soak's length per server.
pub const DEFAULT_SECS: u64 = 20;

/// RSS growth allowed at least, in KiB (see the module's bounds).
pub const RSS_SLACK_KIB: u64 = 2048;

/// Clients of the soak's load: saturation for a 2-core machine (a debug
/// build serves them all from its own CPUs' share).
const CLIENTS: usize = 16;

/// The soak's mix: no CPU-only, DB-only or combined path left out.
const TARGETS: &[&str] = &["/hello", "/db", "/work", "/cpu?n=1000"];

/// The soak's length: `BENCHLAB_SOAK_SECS`, else [`DEFAULT_SECS`] (at
/// least 10 s: enough samples to judge).
pub fn duration() -> Duration {
    let secs = std::env::var("BENCHLAB_SOAK_SECS")
        .ok()
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("BENCHLAB_SOAK_SECS={v:?}: whole seconds"))
        })
        .unwrap_or(DEFAULT_SECS);
    Duration::from_secs(secs.max(10))
}

/// One sample of the soak.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Duration,
    pub rss_kib: u64,
    pub fds: u64,
    pub db_connections: u64,
    pub counts: Counts,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// What a soak judged: start and end of each measure after warm-up.
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    pub rss_kib: (u64, u64),
    pub rss_max_kib: u64,
    pub fds: (u64, u64),
    pub db_connections: (u64, u64),
    pub db_connections_max: u64,
}

/// Judges the samples after the warm-up (at least 6): `Err` with why,
/// when a measure is not flat within its bound.
pub fn judge(settled: &[Sample], pool: u64) -> Result<Verdict, String> {
    if settled.len() < 6 {
        return Err(format!("{} samples after warm-up: too few", settled.len()));
    }
    let first = &settled[..3];
    let last = &settled[settled.len() - 3..];
    let start = |f: fn(&Sample) -> u64| median(first.iter().map(f).collect());
    let end = |f: fn(&Sample) -> u64| median(last.iter().map(f).collect());
    let v = Verdict {
        rss_kib: (start(|s| s.rss_kib), end(|s| s.rss_kib)),
        rss_max_kib: settled.iter().map(|s| s.rss_kib).max().unwrap_or(0),
        fds: (start(|s| s.fds), end(|s| s.fds)),
        db_connections: (start(|s| s.db_connections), end(|s| s.db_connections)),
        db_connections_max: settled.iter().map(|s| s.db_connections).max().unwrap_or(0),
    };
    let mut wrong = Vec::new();
    let rss_bound = RSS_SLACK_KIB.max(v.rss_kib.0 / 10);
    if v.rss_kib.1 > v.rss_kib.0 + rss_bound {
        wrong.push(format!(
            "RSS grew {} → {} KiB (bound +{rss_bound} KiB)",
            v.rss_kib.0, v.rss_kib.1
        ));
    }
    if v.fds.1 > v.fds.0 + 2 {
        wrong.push(format!(
            "open descriptors grew {} → {} (bound +2)",
            v.fds.0, v.fds.1
        ));
    }
    if v.db_connections_max > pool + 1 {
        wrong.push(format!(
            "Threads_connected reached {} (bound: pool {pool} + the sampler's 1)",
            v.db_connections_max
        ));
    }
    if wrong.is_empty() {
        Ok(v)
    } else {
        Err(wrong.join("; "))
    }
}

/// The warm-up lasts at least this long.
const MIN_WARMUP: Duration = Duration::from_secs(5);

/// The warm-up ends once the last this many samples' RSS lies within
/// [`SETTLE_KIB`]: a server whose allocator is still growing its caches
/// (worker-pool's grows for about a million requests, then stops) is
/// judged after it settles, not during.
const SETTLE_SAMPLES: usize = 10;
const SETTLE_KIB: u64 = 128;

/// The longest warm-up: `BENCHLAB_SOAK_WARMUP_SECS`, else 300 s. Memory
/// still rising after it fails the soak (a leak never settles).
pub fn max_warmup() -> Duration {
    let secs = std::env::var("BENCHLAB_SOAK_WARMUP_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(300);
    Duration::from_secs(secs).max(MIN_WARMUP)
}

/// The soak against `s`: its own server and database, [`CLIENTS`]
/// clients on [`TARGETS`], sampled every second: a warm-up until its RSS
/// settles (at most [`max_warmup`]), then [`duration`] judged.
pub fn soak_at_saturation_stays_flat(s: &Server) {
    let _one = crate::faults::one_at_a_time();
    let length = duration();
    let warmup_limit = max_warmup();
    let mariadb = db::private();
    let server = s.start(&mariadb.url());
    let pool = db_pool(&server);
    let load = Load::start(server.addr, TARGETS, CLIENTS);
    let t0 = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut tick = t0;
    let mut warmup: Option<Duration> = None;
    loop {
        let at = t0.elapsed();
        samples.push(Sample {
            at,
            rss_kib: server.rss_kib(),
            fds: server.open_fds() as u64,
            db_connections: mariadb.status("Threads_connected").unwrap_or(u64::MAX),
            counts: load.counts(),
        });
        match warmup {
            None => {
                let recent = &samples[samples.len().saturating_sub(SETTLE_SAMPLES)..];
                let span = recent.iter().map(|s| s.rss_kib).max().unwrap_or(0)
                    - recent.iter().map(|s| s.rss_kib).min().unwrap_or(0);
                if at >= MIN_WARMUP && recent.len() == SETTLE_SAMPLES && span <= SETTLE_KIB {
                    warmup = Some(at);
                } else if at >= warmup_limit {
                    let first = samples[0].rss_kib;
                    let last = samples[samples.len() - 1].rss_kib;
                    panic!(
                        "soak {}: RSS still rising after a warm-up of {warmup_limit:?}: \
                         {first} → {last} KiB ({} requests)",
                        s.name(),
                        load.counts().total()
                    );
                }
            }
            Some(w) if at >= w + length => break,
            Some(_) => {}
        }
        // Sampling, not ordering: one sample a second.
        tick += Duration::from_secs(1);
        std::thread::sleep(tick.saturating_duration_since(Instant::now()));
    }
    let warmup = warmup.expect("the loop ends after the warm-up");
    let warmup_requests = samples
        .iter()
        .find(|s| s.at >= warmup)
        .map_or(0, |s| s.counts.total());
    let tally = load.stop();
    let settled: Vec<Sample> = samples.iter().copied().filter(|s| s.at >= warmup).collect();
    let verdict = judge(&settled, pool);
    let series = |f: fn(&Sample) -> u64| {
        samples
            .iter()
            .map(|s| f(s).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    eprintln!(
        "soak {}: {:?} after a warm-up of {:?} ({warmup_requests} requests), {} requests \
         ({:.0}/s): {}\n  \
         RSS KiB:           {}\n  fds:               {}\n  Threads_connected: {}\n  \
         after warm-up: {verdict:?}",
        s.name(),
        length,
        warmup,
        tally.counts.total(),
        tally.counts.total() as f64 / t0.elapsed().as_secs_f64(),
        tally.counts,
        series(|s| s.rss_kib),
        series(|s| s.fds),
        series(|s| s.db_connections),
    );
    tally.assert_all_answered("the soak", false);
    if let Err(why) = verdict {
        panic!("soak {}: not flat after warm-up: {why}", s.name());
    }
}
