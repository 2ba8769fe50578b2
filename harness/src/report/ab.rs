//! ApacheBench's report layout (ab 2.3's `output_results`), so scripts that
//! read ab's output read ours: the same labels, units and number formats
//! (integer milliseconds in the tables, as ab prints them).
//!
//! Mapping: "Complete requests" counts every finished request, as ab's
//! `done`; "Failed requests" every failure, with ab's breakdown (Connect,
//! Receive, Length, Exceptions) and, when non-zero, ours (timeouts, status
//! and content mismatches against the contract). The Connection Times table
//! is built from the connect, service (Processing), first-byte (Waiting) and
//! latency (Total) histograms; reused keep-alive connections count 0 connect
//! time, as in ab.
//!
//! ab loads one path: for a mix, "Document Path" lists the paths as
//! `--path` takes them, every figure is over all of them, and a last line
//! says so.

use std::fmt::Write;

use hdrhistogram::Histogram;

use super::mix_spec;
use crate::engine::RunResult;

pub fn render(r: &RunResult) -> String {
    let s = &r.stats;
    let p = &r.plan;
    let mut out = String::new();
    let secs = r.duration.as_secs_f64().max(1e-9);
    let done = s.requests();
    let failed = s.failures.total();
    let f = &s.failures;

    let _ = writeln!(
        out,
        "harness {}: ApacheBench 2.3 report layout",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        out,
        "Benchmarking {} (be patient).....done\n\n",
        p.addr.ip()
    );
    let _ = writeln!(
        out,
        "Server Software:        {}",
        s.server_software.as_deref().unwrap_or("")
    );
    let _ = writeln!(out, "Server Hostname:        {}", p.addr.ip());
    let _ = writeln!(out, "Server Port:            {}\n", p.addr.port());
    let _ = writeln!(out, "Document Path:          {}", mix_spec(r));
    let _ = writeln!(
        out,
        "Document Length:        {} bytes\n",
        s.document_length.unwrap_or(0)
    );
    let _ = writeln!(out, "Concurrency Level:      {}", p.connections);
    let _ = writeln!(out, "Time taken for tests:   {secs:.3} seconds");
    let _ = writeln!(out, "Complete requests:      {done}");
    let _ = writeln!(out, "Failed requests:        {failed}");
    if failed > 0 {
        let _ = writeln!(
            out,
            "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {})",
            f.connect, f.receive, f.length, f.exception
        );
        if f.timeout + f.status + f.body > 0 {
            let _ = writeln!(
                out,
                "   (Timeouts: {}, Status: {}, Content: {})",
                f.timeout, f.status, f.body
            );
        }
    }
    if f.write > 0 {
        let _ = writeln!(out, "Write errors:           {}", f.write);
    }
    let non_2xx = s.status.non_2xx();
    if non_2xx > 0 {
        let _ = writeln!(out, "Non-2xx responses:      {non_2xx}");
    }
    if p.keepalive() {
        let _ = writeln!(out, "Keep-Alive requests:    {}", s.keepalive_responses);
    }
    let _ = writeln!(out, "Total transferred:      {} bytes", s.bytes_received);
    let _ = writeln!(out, "HTML transferred:       {} bytes", s.body_bytes);
    let done_f = (done.max(1)) as f64;
    let _ = writeln!(
        out,
        "Requests per second:    {:.2} [#/sec] (mean)",
        done as f64 / secs
    );
    let _ = writeln!(
        out,
        "Time per request:       {:.3} [ms] (mean)",
        p.connections as f64 * secs * 1000.0 / done_f
    );
    let _ = writeln!(
        out,
        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
        secs * 1000.0 / done_f
    );
    let _ = writeln!(
        out,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        s.bytes_received as f64 / 1024.0 / secs
    );

    // Reused connections connect in 0 ms, as ab counts them.
    let mut connect = s.connect_us.clone();
    let samples = s.latency_us.len();
    if connect.len() < samples {
        connect.saturating_record_n(0, samples - connect.len());
    }
    let _ = writeln!(out, "\nConnection Times (ms)");
    let _ = writeln!(out, "              min  mean[+/-sd] median   max");
    row(&mut out, "Connect:    ", &connect);
    row(&mut out, "Processing: ", &s.service_us);
    row(&mut out, "Waiting:    ", &s.waiting_us);
    row(&mut out, "Total:      ", &s.latency_us);

    let _ = writeln!(
        out,
        "\nPercentage of the requests served within a certain time (ms)"
    );
    for pct in [50u32, 66, 75, 80, 90, 95, 98, 99] {
        let v = ms(s.latency_us.value_at_percentile(f64::from(pct)));
        let _ = writeln!(out, " {pct:>3}%  {v:>5}");
    }
    let _ = writeln!(
        out,
        " 100%  {:>5} (longest request)",
        ms(s.latency_us.max())
    );
    if p.is_mixed() {
        let _ = writeln!(
            out,
            "\nNote: this run mixed {} paths; every figure above is over all of them \
             (--format text or json has each path's)",
            p.mix.len()
        );
    }
    out
}

/// µs → whole ms, truncated as ab does.
fn ms(us: u64) -> u64 {
    us / 1000
}

fn row(out: &mut String, label: &str, h: &Histogram<u64>) {
    let (min, mean, sd, median, max) = if h.is_empty() {
        (0, 0, 0.0, 0, 0)
    } else {
        (
            ms(h.min()),
            (h.mean() / 1000.0 + 0.5) as u64,
            h.stdev() / 1000.0,
            ms(h.value_at_quantile(0.5)),
            ms(h.max()),
        )
    };
    let _ = writeln!(
        out,
        "{label}{min:>5} {mean:>4} {sd:>5.1} {median:>6} {max:>7}"
    );
}
