//! The machine-readable report: one versioned JSON document per run, with
//! every counter, the percentiles, the per-second series and the latency
//! histogram itself. Its shape is `harness/schema/run.schema.json`; a test
//! checks the two agree. Units are in the field names.
//!
//! A mix of paths keeps every field as the run's totals and adds `paths`,
//! one entry per path; a single-path run has no `paths`, so its document is
//! the same as before mixes existed.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{check_kind, common_check, mix_spec, paths, run_check_kind, PathSummary};
use crate::engine::{Check, Pace, RunResult, Stop, TlsVersion, Trust};
use crate::stats::{
    FailureCounts, Percentiles, SecondPoint, HIST_HIGH_US, HIST_LOW_US, HIST_SIGFIG,
};
use crate::thresholds::Verdict;
use base64::Engine as _;

/// The schema identifier; bumped on any incompatible change.
pub const SCHEMA: &str = "harness.run/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    pub schema: String,
    pub harness_version: String,
    pub target: TargetDoc,
    pub settings: Settings,
    pub outcome: Outcome,
    pub requests: Requests,
    pub failures: FailureCounts,
    /// Responses by status code (`"0"`: codes outside 100..=599).
    pub status_codes: BTreeMap<String, u64>,
    pub transfer: Transfer,
    pub connections: Connections,
    pub server: Server,
    /// Successful requests, from their latency origin (see `outcome`).
    pub latency_us: Percentiles,
    /// From each request's write to its complete response.
    pub service_us: Percentiles,
    /// From each request's write to the response's first byte.
    pub waiting_us: Percentiles,
    /// Per connection opened.
    pub connect_us: Percentiles,
    /// `--rate`: how late each request left after its intended send time
    /// (the generator's delay, inside `latency_us`); absent in a closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lateness_us: Option<Percentiles>,
    pub series: Vec<SecondPoint>,
    /// The latency histogram (`latency_us`), bucket by bucket.
    pub histogram: HistogramDoc,
    /// Each path of a mix, in the order given; absent for a single path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathDoc>,
    /// How the run was recorded in time: interval, tag, `--start-at`
    /// (absent in documents written before interval histograms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<RecordingDoc>,
    /// Every interval with its full latency histogram: their sum is
    /// `histogram` (absent in documents written before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalDoc>,
    /// An https:// run: what was asked, what was negotiated, the
    /// handshakes (absent for plain HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsDoc>,
    /// A WebSocket room run (`--room`): the requests are its deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomDoc>,
    /// An HTTP/3 run (`--h3`): what its QUIC connections counted, packets
    /// sent and lost (absent for TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::stats::QuicCounts>,
    /// `--threshold`: each expression, PASS or FAIL, and what the run showed
    /// (absent without thresholds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<Verdict>,
}

/// What an https:// run spoke.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsDoc {
    /// The SNI name the certificate was checked against.
    pub server_name: String,
    /// `--tls-version`: `1.2` or `1.3`.
    pub version_asked: String,
    /// Session resumption offered (off with `--tls-no-resume`).
    pub resumption: bool,
    /// Which certificates were accepted: `public` (the built-in CAs),
    /// `cacert` (`--cacert`), `any` (`--insecure`).
    pub trust: String,
    /// What the first completed handshake negotiated (null: none completed).
    pub version: Option<String>,
    pub cipher_suite: Option<String>,
    pub key_exchange: Option<String>,
    pub alpn: Option<String>,
    pub handshakes_full: u64,
    pub handshakes_resumed: u64,
    /// From the ClientHello's send to the handshake's end, per handshake.
    pub handshake_us: Percentiles,
    /// `handshake_us`, bucket by bucket.
    pub handshake_histogram: HistogramDoc,
    /// Why the first failed handshake failed.
    pub error: Option<String>,
}

impl TlsDoc {
    fn of(r: &RunResult) -> Option<TlsDoc> {
        let t = r.plan.tls()?;
        let s = &r.stats;
        let n = s.tls.as_ref();
        Some(TlsDoc {
            server_name: t.server_name.clone(),
            version_asked: match t.version {
                TlsVersion::Tls12 => "1.2",
                TlsVersion::Tls13 => "1.3",
            }
            .to_string(),
            resumption: t.resume,
            trust: match t.trust {
                Trust::Public => "public",
                Trust::Cas(_) => "cacert",
                Trust::Any => "any",
            }
            .to_string(),
            version: n.map(|n| n.version.clone()),
            // Empty where the stack does not say (QUIC's).
            cipher_suite: n.map(|n| n.cipher_suite.clone()).filter(|c| !c.is_empty()),
            key_exchange: n.map(|n| n.key_exchange.clone()).filter(|k| !k.is_empty()),
            alpn: n.and_then(|n| n.alpn.clone()),
            handshakes_full: s.handshakes_full,
            handshakes_resumed: s.handshakes_resumed,
            handshake_us: Percentiles::of(&s.handshake_us),
            handshake_histogram: HistogramDoc::of(&s.handshake_us),
            error: s.tls_error.clone(),
        })
    }
}

/// How a run was placed in time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordingDoc {
    /// The length of each interval (`--interval`).
    pub interval_s: f64,
    /// `--tag`: this agent's name in a merge.
    pub tag: Option<String>,
    /// `--start-at`: when every agent was told to begin (Unix seconds).
    pub start_at_unix_s: Option<f64>,
    /// How long after `start_at_unix_s` the load actually began.
    pub late_s: Option<f64>,
    /// In a `harness merge`: the tags (or file names) of the runs merged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<String>,
}

/// One interval of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalDoc {
    /// Seconds since measuring started.
    pub start_s: f64,
    pub duration_s: f64,
    /// Finished in it: `ok` + failures.
    pub requests: u64,
    pub ok: u64,
    pub failures: FailureCounts,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// Its successes' latency histogram (µs), V2-deflate, base64: the
    /// encoding of an `.hlog` line.
    pub histogram_v2: String,
}

/// One path of a mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathDoc {
    /// What reports call it (the target, for `harness run --path`).
    pub label: String,
    /// Path and query, as sent.
    pub path: String,
    /// Its method; absent in documents written before a mix could mix them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The body its requests carried; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyDoc>,
    pub weight: u32,
    /// `weight` over the sum of the weights: the share asked for.
    pub weight_share: f64,
    /// Its part of the requests the run finished: the share sent.
    pub share: f64,
    pub requests: PathRequests,
    pub failures: FailureCounts,
    /// `exact`, `status` or `2xx`, as the run's `settings.check`.
    pub check: String,
    pub expected_status: Option<u16>,
    pub expected_body_bytes: Option<u64>,
    /// Its successful requests, from the run's latency origin.
    pub latency_us: Percentiles,
    pub histogram: HistogramDoc,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRequests {
    /// Finished: `ok + failed`.
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    pub per_s: f64,
    pub ok_per_s: f64,
}

impl PathDoc {
    fn of(p: &PathSummary) -> PathDoc {
        let (expected_status, expected_body_bytes) = expected(&p.route.check);
        PathDoc {
            label: p.route.label.clone(),
            path: p.route.request.target.clone(),
            method: Some(p.route.request.method.clone()),
            body: BodyDoc::of(&p.route.request),
            weight: p.route.weight,
            weight_share: p.weight_share,
            share: p.share,
            requests: PathRequests {
                total: p.stats.requests(),
                ok: p.stats.ok,
                failed: p.stats.failures.total(),
                per_s: p.per_s,
                ok_per_s: p.ok_per_s,
            },
            failures: p.stats.failures,
            check: check_kind(&p.route.check).to_string(),
            expected_status,
            expected_body_bytes,
            latency_us: p.latency,
            histogram: HistogramDoc::of(&p.stats.latency_us),
        }
    }
}

/// The expected status and body length of `check`, where it has them.
fn expected(check: &Check) -> (Option<u16>, Option<u64>) {
    match check {
        Check::Success => (None, None),
        Check::Status(st) => (Some(*st), None),
        Check::Exact { status, body } => (Some(*status), Some(body.len() as u64)),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetDoc {
    pub url: String,
    pub addr: String,
    pub method: String,
    /// Path and query as sent; for a mix, its paths as `--path` takes them,
    /// space-separated (`/hello:99 /cpu?n=200000:1`).
    pub path: String,
    /// The body every request carried (`--body`, `--body-file`); absent
    /// without one, and in documents written before bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyDoc>,
}

/// A request body, as sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BodyDoc {
    /// Its length, decoded (the chunked framing not counted).
    pub bytes: u64,
    /// `content-length` or `chunked`.
    pub framing: String,
}

impl BodyDoc {
    fn of(request: &crate::engine::Request) -> Option<BodyDoc> {
        request.body_bytes.map(|n| BodyDoc {
            bytes: n as u64,
            framing: if request.chunked {
                "chunked"
            } else {
                "content-length"
            }
            .to_string(),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub connections: u64,
    pub threads: u64,
    /// The I/O backend used (`uring`, `epoll`); absent in documents
    /// written before there were two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
    /// Why it is not the one asked for (io_uring refused here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_note: Option<String>,
    /// How long an io_uring wait held out for more completions (`--gather`),
    /// if it did; absent where it did not (epoll, `--rate`, an old kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gather_us: Option<f64>,
    pub keepalive: bool,
    /// How requests were framed: `http/1.1` or `http/1.1-pipelined`;
    /// absent in documents written before there was a choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Requests in flight allowed per connection (`--pipeline`; 1 without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<u64>,
    /// HTTP/2 (`h2c`, `h2`) and HTTP/3 (`h3`): streams allowed in flight per connection
    /// (`--streams`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    /// A WebSocket run: each message's size in bytes (`--ws-size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_message_bytes: Option<u64>,
    /// A WebSocket run: `binary` or `text` messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_messages: Option<String>,
    /// `-n`, if the run was stopped by a count.
    pub requests: Option<u64>,
    /// `-d`, if the run was stopped by a duration.
    pub duration_s: Option<f64>,
    /// `--rate`, if the run was open-loop.
    pub rate_per_s: Option<f64>,
    pub timeout_s: f64,
    pub warmup_s: f64,
    /// `exact` (status and body), `status`, or `2xx`; `mixed` when the
    /// paths of a mix are judged differently (see `paths`).
    pub check: String,
    pub expected_status: Option<u16>,
    pub expected_body_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// `count`, `duration`, `interrupted`, `server_gone` or `deadline`.
    pub end: String,
    pub interrupted: bool,
    pub message: Option<String>,
    /// Latency counted from intended send times (`--rate`).
    pub latency_corrected: bool,
    pub started_unix_s: f64,
    /// The measured interval (warm-up excluded).
    pub duration_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    /// Finished: `ok + failed`.
    pub total: u64,
    pub ok: u64,
    pub failed: u64,
    /// Complete responses, whatever their status or body.
    pub responses: u64,
    /// In flight when the run stopped: neither ok nor failed.
    pub aborted: u64,
    pub per_s: f64,
    pub ok_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub body_bytes: u64,
    pub bytes_received_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connections {
    pub opened: u64,
    pub keepalive_responses: u64,
    /// `--hold` (WebSocket): connections upgraded, and still up at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
}

/// A room run: its rooms, the messages sent, and the deliveries (the
/// run's requests: `requests.ok`, `failures`) they made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomDoc {
    pub rooms: u64,
    /// Members per room: each message is owed this many deliveries.
    pub members: u64,
    pub messages_sent: u64,
    /// Messages every member of their room received (ok or not).
    pub messages_complete: u64,
    /// Deliveries counted (ok and failed; `requests.responses` plus
    /// failures without an arrival: lost, timed out).
    pub deliveries: u64,
    /// Deliveries ok per second of the measured stretch.
    pub deliveries_ok_per_s: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Held {
    pub opened: u64,
    pub stayed_up: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// The `Server` header of the first successful response.
    pub software: Option<String>,
    pub document_length: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramDoc {
    pub lowest_us: u64,
    pub highest_us: u64,
    pub significant_digits: u8,
    /// `[value_us, count]` per non-empty bucket, `value_us` being the
    /// bucket's highest equivalent value.
    pub buckets: Vec<[u64; 2]>,
}

impl HistogramDoc {
    pub fn of(h: &Histogram<u64>) -> HistogramDoc {
        HistogramDoc {
            lowest_us: HIST_LOW_US,
            highest_us: HIST_HIGH_US,
            significant_digits: HIST_SIGFIG,
            buckets: h
                .iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value()])
                .collect(),
        }
    }

    /// The histogram back, bucket for bucket.
    pub fn to_histogram(&self) -> Result<Histogram<u64>, String> {
        let mut h =
            Histogram::new_with_bounds(self.lowest_us, self.highest_us, self.significant_digits)
                .map_err(|e| format!("{e:?}"))?;
        for [value, count] in &self.buckets {
            h.record_n(*value, *count).map_err(|e| format!("{e:?}"))?;
        }
        crate::intervals::counts_fit(&h)?;
        Ok(h)
    }
}

/// The document for `r`.
pub fn document(r: &RunResult) -> Document {
    let s = &r.stats;
    let p = &r.plan;
    let (expected_status, expected_body_bytes) = common_check(r).map_or((None, None), expected);
    Document {
        schema: SCHEMA.to_string(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        target: TargetDoc {
            url: p.url.clone(),
            addr: p.addr.to_string(),
            method: p.request.method.clone(),
            path: mix_spec(r),
            body: BodyDoc::of(&p.request),
        },
        settings: Settings {
            connections: p.connections as u64,
            threads: r.threads as u64,
            io: Some(r.io.name().to_string()),
            io_note: r.io_note.clone(),
            gather_us: r.gather.map(|g| g.as_secs_f64() * 1e6),
            keepalive: p.keepalive(),
            protocol: Some(p.framing().protocol().to_string()),
            pipeline: Some(p.framing().depth() as u64),
            streams: p.framing().streams().map(|n| n as u64),
            ws_message_bytes: p.ws().map(|_| p.request.bytes.len() as u64),
            ws_messages: p
                .ws()
                .map(|w| if w.binary { "binary" } else { "text" }.to_string()),
            requests: match p.stop {
                Stop::Count(n) => Some(n),
                Stop::Duration(_) => None,
            },
            duration_s: match p.stop {
                Stop::Count(_) => None,
                Stop::Duration(d) => Some(d.as_secs_f64()),
            },
            rate_per_s: match p.pace {
                Pace::Closed => None,
                Pace::Rate(rate) => Some(rate),
            },
            timeout_s: p.timeout.as_secs_f64(),
            warmup_s: p.warmup.as_secs_f64(),
            check: run_check_kind(r).to_string(),
            expected_status,
            expected_body_bytes,
        },
        outcome: Outcome {
            end: r.end.name().to_string(),
            interrupted: r.interrupted(),
            message: r.message.clone(),
            latency_corrected: r.latency_corrected(),
            started_unix_s: r.started_unix_s,
            duration_s: r.duration.as_secs_f64(),
        },
        requests: Requests {
            total: s.requests(),
            ok: s.ok,
            failed: s.failures.total(),
            responses: s.responses,
            aborted: s.aborted,
            per_s: r.requests_per_s(),
            ok_per_s: r.ok_per_s(),
        },
        failures: s.failures,
        status_codes: s.status.seen().map(|(c, n)| (c.to_string(), n)).collect(),
        transfer: Transfer {
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            body_bytes: s.body_bytes,
            bytes_received_per_s: {
                let secs = r.duration.as_secs_f64();
                if secs > 0.0 {
                    s.bytes_received as f64 / secs
                } else {
                    0.0
                }
            },
        },
        connections: Connections {
            opened: s.connections,
            keepalive_responses: s.keepalive_responses,
            held: p.ws().filter(|w| w.hold()).map(|_| Held {
                opened: s.ws_upgraded,
                stayed_up: s.ws_up_at_end,
            }),
        },
        server: Server {
            software: s.server_software.clone(),
            document_length: s.document_length,
        },
        latency_us: Percentiles::of(&s.latency_us),
        service_us: Percentiles::of(&s.service_us),
        waiting_us: Percentiles::of(&s.waiting_us),
        connect_us: Percentiles::of(&s.connect_us),
        schedule_lateness_us: r
            .latency_corrected()
            .then(|| Percentiles::of(&s.schedule_lateness_us)),
        series: r.series.clone(),
        histogram: HistogramDoc::of(&s.latency_us),
        paths: paths(r).iter().map(PathDoc::of).collect(),
        recording: Some(RecordingDoc {
            interval_s: p.interval.as_secs_f64(),
            tag: p.tag.clone(),
            start_at_unix_s: p.start_at_unix_s,
            // The load began a warm-up before measuring did.
            late_s: p
                .start_at_unix_s
                .map(|at| r.started_unix_s - p.warmup.as_secs_f64() - at),
            merged: r.merged.clone(),
        }),
        intervals: r
            .intervals
            .iter()
            .map(|i| {
                let offset = p.interval * i.index;
                IntervalDoc {
                    start_s: offset.as_secs_f64(),
                    duration_s: r
                        .duration
                        .saturating_sub(offset)
                        .min(p.interval)
                        .as_secs_f64(),
                    requests: i.requests(),
                    ok: i.ok,
                    failures: i.failures,
                    p50_us: i.p50_us,
                    p90_us: i.p90_us,
                    p99_us: i.p99_us,
                    max_us: i.max_us,
                    histogram_v2: base64::engine::general_purpose::STANDARD.encode(&i.histogram_v2),
                }
            })
            .collect(),
        tls: TlsDoc::of(r),
        quic: s.quic,
        room: p.room().map(|room| RoomDoc {
            rooms: room.rooms as u64,
            members: room.size as u64,
            messages_sent: s.room_messages,
            messages_complete: s.room_messages_complete,
            deliveries: s.ok + s.failures.total(),
            deliveries_ok_per_s: {
                let secs = r.duration.as_secs_f64();
                if secs > 0.0 {
                    s.ok as f64 / secs
                } else {
                    0.0
                }
            },
        }),
        thresholds: Vec::new(),
    }
}

/// The document, pretty-printed.
pub fn render(r: &RunResult) -> String {
    render_with(r, Vec::new())
}

/// The document with its `--threshold` verdicts, pretty-printed.
pub fn render_with(r: &RunResult, thresholds: Vec<Verdict>) -> String {
    let mut doc = document(r);
    doc.thresholds = thresholds;
    let mut s = serde_json::to_string_pretty(&doc).expect("plain data serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency_histogram;

    #[test]
    fn histogram_round_trips_bucket_for_bucket() {
        let mut h = latency_histogram();
        for v in [1, 2, 3, 100, 1_000, 12_345, 1_000_000, 59_000_000] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let doc = HistogramDoc::of(&h);
        let back = doc.to_histogram().unwrap();
        assert_eq!(back.len(), h.len());
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q));
        }
        assert_eq!(HistogramDoc::of(&back), doc);
    }
}
