//! A Markdown summary: one table of the headline numbers, one of latency,
//! and for a mix one of its paths.

use std::fmt::Write;

use super::{
    check_kind, describe_check, describe_latency_origin, describe_load, failure_kinds,
    failures_in_words, latencies, paths, percent, short_latencies, thousands,
};
use crate::engine::RunResult;
use crate::stats::Percentiles;

pub fn render(r: &RunResult) -> String {
    let s = &r.stats;
    let mut out = String::new();
    if r.plan.is_mixed() {
        let _ = writeln!(
            out,
            "### `{} {}`, a mix of {} paths\n",
            r.plan.request.method,
            r.plan.url,
            r.plan.mix.len()
        );
    } else {
        let _ = writeln!(out, "### `{} {}`\n", r.plan.request.method, r.plan.url);
    }
    let _ = writeln!(out, "{}; ended by {}.\n", describe_load(r), r.end.name());
    let _ = writeln!(out, "| requests | ok | failed | req/s | ok/s | duration |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| {} | {} | {} | {:.1} | {:.1} | {:.2} s |\n",
        thousands(s.requests()),
        thousands(s.ok),
        thousands(s.failures.total()),
        r.requests_per_s(),
        r.ok_per_s(),
        r.duration.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| latency | p50 | p75 | p90 | p99 | p99.9 | max | mean | stdev |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut row = |name: &str, p: Percentiles| {
        let _ = writeln!(out, "| {name} | {} |", latencies(&p).join(" | "));
    };
    row("total", Percentiles::of(&s.latency_us));
    if r.latency_corrected() {
        row("service", Percentiles::of(&s.service_us));
    }
    if !r.plan.keepalive() {
        row("connect", Percentiles::of(&s.connect_us));
    }
    let paths = paths(r);
    if !paths.is_empty() {
        let _ = writeln!(
            out,
            "\n| path | weight | share sent | requests | req/s | p50 | p90 | p99 | max | check | failed |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
        for p in &paths {
            let _ = writeln!(
                out,
                "| `{}` | {} ({}) | {} | {} | {:.1} | {} | {} | {} |",
                p.route.label.replace('|', "\\|"),
                p.route.weight,
                percent(p.weight_share),
                percent(p.share),
                thousands(p.stats.requests()),
                p.per_s,
                short_latencies(&p.latency).join(" | "),
                check_kind(&p.route.check),
                failures_in_words(&p.stats.failures),
            );
        }
    }
    let _ = writeln!(out, "\nLatency is measured {}.", describe_latency_origin(r));
    let _ = writeln!(out, "Responses checked: {}.", describe_check(r));
    let failures = failure_kinds(&s.failures);
    if !failures.is_empty() {
        let _ = writeln!(out, "Failures: {}.", failures.join(", "));
    }
    if let Some(m) = &r.message {
        let _ = writeln!(out, "\n> {m}");
    }
    out
}
