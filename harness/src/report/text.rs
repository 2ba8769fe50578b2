//! The default report: a compact human summary.

use std::fmt::Write;

use super::{
    align, bytes, check_kind, describe_check, describe_latency_origin, describe_load,
    failure_kinds, failures_in_words, latencies, paths, percent, short_latencies, thousands,
};
use crate::engine::RunResult;
use crate::stats::Percentiles;

pub fn render(r: &RunResult) -> String {
    let s = &r.stats;
    let mut out = String::new();
    let secs = r.duration.as_secs_f64();
    let _ = write!(out, "{} {}", r.plan.request.method, r.plan.url);
    if let Some(n) = r.plan.request.body_bytes {
        let framing = if r.plan.request.chunked {
            "chunked"
        } else {
            "Content-Length"
        };
        let _ = write!(out, " with a {}-byte body ({framing})", thousands(n as u64));
    }
    if r.plan.is_mixed() {
        let _ = write!(out, ", a mix of {} paths", r.plan.mix.len());
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "  {}; measured {secs:.2}s, ended by {}",
        describe_load(r),
        r.end.name()
    );
    let requests = s.requests();
    let pct = |n: u64| {
        if requests == 0 {
            0.0
        } else {
            100.0 * n as f64 / requests as f64
        }
    };
    let _ = writeln!(
        out,
        "  requests   {} in {secs:.2}s = {:.1}/s; ok {} ({:.2}%), failed {}",
        thousands(requests),
        r.requests_per_s(),
        thousands(s.ok),
        pct(s.ok),
        thousands(s.failures.total()),
    );
    if s.failures.total() > 0 {
        let _ = writeln!(out, "  ok/s       {:.1}", r.ok_per_s());
    }
    line(&mut out, "latency", &Percentiles::of(&s.latency_us));
    let _ = writeln!(out, "             {}", describe_latency_origin(r));
    if r.latency_corrected() {
        line(&mut out, "service", &Percentiles::of(&s.service_us));
        let _ = writeln!(
            out,
            "             from each request's actual write (uncorrected)"
        );
        line(&mut out, "late", &Percentiles::of(&s.schedule_lateness_us));
        let _ = writeln!(
            out,
            "             the schedule's lateness: intended send time to the write (the generator's)"
        );
    }
    if !r.plan.keepalive() {
        line(&mut out, "connect", &Percentiles::of(&s.connect_us));
    }
    if let (Some(t), Some(q)) = (r.plan.tls(), &s.quic) {
        quic(&mut out, r, t, q);
    } else if let Some(t) = r.plan.tls() {
        let negotiated = match &s.tls {
            Some(n) => format!(
                "{} {} {}, ALPN {}",
                n.version,
                n.cipher_suite,
                n.key_exchange,
                n.alpn.as_deref().unwrap_or("none")
            ),
            None => "no handshake completed".to_string(),
        };
        let _ = writeln!(
            out,
            "  tls        {negotiated}; {} handshakes (full {}, resumed {}), server name {}{}",
            thousands(s.handshakes_full + s.handshakes_resumed),
            thousands(s.handshakes_full),
            thousands(s.handshakes_resumed),
            t.server_name,
            if t.resume { "" } else { ", resumption off" }
        );
        line(&mut out, "handshake", &Percentiles::of(&s.handshake_us));
        let _ = writeln!(
            out,
            "             per handshake: ClientHello sent to handshake done"
        );
    }
    per_path(&mut out, r);
    let _ = writeln!(
        out,
        "  transfer   {} received ({}/s), {} sent; {} connections opened",
        bytes(s.bytes_received),
        bytes((s.bytes_received as f64 / secs.max(1e-9)) as u64),
        bytes(s.bytes_sent),
        thousands(s.connections),
    );
    if let Some(room) = r.plan.room() {
        let _ = writeln!(
            out,
            "  room       {} messages sent, {} of them received by all {} members; {} deliveries ({} ok)",
            thousands(s.room_messages),
            thousands(s.room_messages_complete),
            room.size,
            thousands(s.ok + s.failures.total()),
            thousands(s.ok),
        );
    }
    if r.plan.ws().is_some_and(|w| w.hold()) {
        let _ = writeln!(
            out,
            "  held       {} WebSocket connections upgraded, {} still up at the end",
            thousands(s.ws_upgraded),
            thousands(s.ws_up_at_end),
        );
    }
    let statuses: Vec<String> = s
        .status
        .seen()
        .map(|(code, n)| {
            if code == 0 {
                format!("other ×{}", thousands(n))
            } else {
                format!("{code} ×{}", thousands(n))
            }
        })
        .collect();
    if !statuses.is_empty() {
        let _ = writeln!(out, "  status     {}", statuses.join(", "));
    }
    let failures = failure_kinds(&s.failures);
    if !failures.is_empty() {
        let _ = writeln!(out, "  failures   {}", failures.join(", "));
    }
    let _ = writeln!(out, "  checked    {}", describe_check(r));
    if s.aborted > 0 {
        let _ = writeln!(
            out,
            "  aborted    {} requests in flight at the end (neither ok nor failed)",
            thousands(s.aborted)
        );
    }
    if let Some(m) = &r.message {
        let _ = writeln!(out, "  note       {m}");
    }
    out
}

/// The per-path table of a mix: what each path was asked (weight) and
/// got (share of the requests), and its own latency and failures.
fn per_path(out: &mut String, r: &RunResult) {
    let paths = paths(r);
    if paths.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  per path   weight asked vs. share of the requests sent; latency of each path's successes"
    );
    let mut rows = vec![[
        "path", "weight", "share", "requests", "req/s", "p50", "p90", "p99", "max", "check",
        "failed",
    ]
    .map(String::from)
    .to_vec()];
    for p in &paths {
        let mut row = vec![
            p.route.label.clone(),
            format!("{} ({})", p.route.weight, percent(p.weight_share)),
            percent(p.share),
            thousands(p.stats.requests()),
            format!("{:.1}", p.per_s),
        ];
        row.extend(short_latencies(&p.latency));
        row.push(check_kind(&p.route.check).to_string());
        row.push(failures_in_words(&p.stats.failures));
        rows.push(row);
    }
    for row in align(&rows, &[2, 3, 4, 5, 6, 7, 8]).lines() {
        let _ = writeln!(out, "    {row}");
    }
}

fn line(out: &mut String, name: &str, p: &Percentiles) {
    if p.count == 0 {
        let _ = writeln!(out, "  {name:<10} no samples");
        return;
    }
    let [p50, p75, p90, p99, p99_9, max, mean, stdev] = latencies(p);
    let _ = writeln!(
        out,
        "  {name:<10} p50 {p50}  p75 {p75}  p90 {p90}  p99 {p99}  p99.9 {p99_9}  max {max}  (mean {mean} ± {stdev})"
    );
}

/// An HTTP/3 run: its QUIC handshakes (quinn-proto does not tell a
/// resumed one from a full one) and the packets its connections sent and
/// declared lost.
fn quic(out: &mut String, r: &RunResult, t: &crate::engine::TlsPlan, q: &crate::stats::QuicCounts) {
    let s = &r.stats;
    let negotiated = match &s.tls {
        Some(n) => format!(
            "{} inside QUIC, ALPN {}",
            n.version,
            n.alpn.as_deref().unwrap_or("none")
        ),
        None => "no handshake completed".to_string(),
    };
    let _ = writeln!(
        out,
        "  quic       {negotiated}; {} handshakes, server name {}",
        thousands(s.handshakes_full + s.handshakes_resumed),
        t.server_name,
    );
    line(out, "handshake", &Percentiles::of(&s.handshake_us));
    let _ = writeln!(
        out,
        "             per handshake: first Initial sent to handshake done"
    );
    let lost_share = if q.sent_packets == 0 {
        0.0
    } else {
        100.0 * q.lost_packets as f64 / q.sent_packets as f64
    };
    let _ = writeln!(
        out,
        "  packets    {} sent, {} lost ({lost_share:.2}%, {} bytes; their frames resent), {} congestion events, {} dropped by the generator (its socket buffer full)",
        thousands(q.sent_packets),
        thousands(q.lost_packets),
        thousands(q.lost_bytes),
        thousands(q.congestion_events),
        thousands(q.send_dropped),
    );
}
