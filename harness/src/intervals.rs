//! Interval histograms: the run cut into equal intervals (`--interval`,
//! default 1 s), each with its own full latency histogram, so that intervals,
//! threads and machines add up exactly (HdrHistogram addition is exact).
//!
//! Each success is recorded once, into its thread's [`IntervalAcc`] (3
//! significant digits, the run histogram's bounds); a thread hands its
//! finished interval to the [`IntervalSink`] once per interval (a lock per
//! thread per interval, never per request). An interval every thread has
//! moved past is *settled*, then encoded by the thread watching the run and
//! kept only as V2-deflate bytes (the `.hlog` encoding, a few hundred bytes
//! to a few KiB instead of the 136 KiB of a live 3-digit histogram). The run's latency histogram is the
//! sum of its intervals ([`Interval::sum`]), so the two agree by construction.

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use crate::stats::{latency_histogram, Failure, FailureCounts};

/// One settled interval of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Its place in the run: it covers `[index × interval, (index + 1) × interval)`
    /// after measuring started.
    pub index: u32,
    /// Successful requests (the histogram's count).
    pub ok: u64,
    pub failures: FailureCounts,
    /// Its successes' latency (µs): what a chart point needs, computed
    /// once, when the histogram is at hand.
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    /// The latency of its successes, V2-deflate encoded (see [`encode`]).
    pub histogram_v2: Vec<u8>,
}

impl Interval {
    /// Interval `index` of `ok` successes timed in `latency_us`, and `failures`.
    pub fn of(
        index: u32,
        ok: u64,
        failures: FailureCounts,
        latency_us: &Histogram<u64>,
    ) -> Interval {
        let q = |q: f64| {
            if latency_us.is_empty() {
                0
            } else {
                latency_us.value_at_quantile(q)
            }
        };
        Interval {
            index,
            ok,
            failures,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            max_us: latency_us.max(),
            histogram_v2: encode(latency_us),
        }
    }

    /// Requests finished in it: successes and failures.
    pub fn requests(&self) -> u64 {
        self.ok + self.failures.total()
    }

    /// Its latency histogram.
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        decode(&self.histogram_v2)
    }

    /// The sum of the intervals' histograms: the run's latency histogram.
    pub fn sum(intervals: &[Interval]) -> Result<Histogram<u64>, String> {
        let mut total = latency_histogram();
        for i in intervals {
            add(&mut total, &i.histogram()?)?;
        }
        Ok(total)
    }
}

/// `into += h`, with an error rather than a panic when `h` holds values
/// beyond `into`'s bounds (a histogram read from a file).
pub fn add(into: &mut Histogram<u64>, h: &Histogram<u64>) -> Result<(), String> {
    into.add(h)
        .map_err(|e| format!("cannot add histograms: {e:?}"))?;
    counts_fit(into)
}

/// Refuses a histogram whose counts add up to 2^64 − 1 or more: hdrhistogram
/// 7.6 keeps its total with saturating additions, but its quantile scan
/// adds the counts plainly, which overflows (a panic where overflow is
/// checked, a wrong percentile where it is not). No run records that many
/// requests; a file that says so is corrupt. Found by fuzz/ (hlog).
pub fn counts_fit(h: &Histogram<u64>) -> Result<(), String> {
    if h.len() == u64::MAX {
        return Err(
            "its counts add up past 2^64 - 1 requests: not a histogram a run recorded".into(),
        );
    }
    Ok(())
}

/// The V2-deflate encoding of `h` (HdrHistogram's compressed form, as in
/// `.hlog` lines and the Java, Python and Go implementations).
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut out)
        .expect("serializing into memory cannot fail");
    out
}

/// The histogram back from [`encode`]'s bytes (or any V2 / V2-deflate
/// encoding), widened to the run histogram's bounds so that it adds to it.
pub fn decode(bytes: &[u8]) -> Result<Histogram<u64>, String> {
    if has_impossible_count(bytes) {
        return Err("not an HdrHistogram V2 encoding: a count out of range".into());
    }
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("not an HdrHistogram V2 encoding: {e:?}"))?;
    counts_fit(&h)?;
    let mut out = latency_histogram();
    add(&mut out, &h)?;
    Ok(out)
}

/// Whether a V2 (or V2-deflate) encoding holds the one count hdrhistogram
/// 7.6 cannot read: a zig-zag varint of `u64::MAX` (i64::MIN), whose
/// negation overflows in its deserializer (a panic where overflow is
/// checked, as in debug builds). Found by fuzz/ (hlog); no encoder writes
/// it. Anything else malformed is left to hdrhistogram's own checks.
fn has_impossible_count(bytes: &[u8]) -> bool {
    use std::io::Read;
    const V2: u32 = 0x1c84_9313;
    const V2_DEFLATE: u32 = 0x1c84_9314;
    const HEADER: usize = 40;
    let word = |b: &[u8]| {
        b.get(..4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let inflated;
    let v2: &[u8] = match word(bytes) {
        Some(V2) => bytes,
        Some(V2_DEFLATE) => {
            let Some(len) = bytes.get(4..8).and_then(word) else {
                return false;
            };
            let body = &bytes[8..bytes.len().min(8 + len as usize)];
            let mut out = Vec::new();
            // Bounded: hdrhistogram reads no more than this either.
            let _ = flate2::read::ZlibDecoder::new(body)
                .take(64 << 20)
                .read_to_end(&mut out);
            inflated = out;
            &inflated
        }
        _ => return false,
    };
    let mut at = HEADER;
    while at < v2.len() {
        // LEB128-64b9B: 7 bits a byte, the 9th byte whole.
        let mut value = 0u64;
        let mut n = 0;
        for (k, &b) in v2[at..].iter().take(9).enumerate() {
            n = k + 1;
            if k == 8 {
                value |= u64::from(b) << 56;
                break;
            }
            value |= u64::from(b & 0x7f) << (7 * k);
            if b & 0x80 == 0 {
                break;
            }
        }
        if value == u64::MAX {
            return true;
        }
        at += n.max(1);
    }
    false
}

/// [`encode`], then base64: one `.hlog` histogram field.
pub fn encode_base64(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode(h))
}

/// The bytes of a base64 histogram field.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("the histogram is not base64: {e}"))
}

/// One thread's counts for the interval it is in.
pub(crate) struct IntervalAcc {
    index: u32,
    ok: u64,
    failures: FailureCounts,
    latency_us: Histogram<u64>,
}

impl IntervalAcc {
    pub(crate) fn new() -> IntervalAcc {
        IntervalAcc {
            index: 0,
            ok: 0,
            failures: FailureCounts::default(),
            latency_us: latency_histogram(),
        }
    }

    pub(crate) fn index(&self) -> u32 {
        self.index
    }

    #[inline]
    pub(crate) fn ok(&mut self, latency_us: u64) {
        self.ok += 1;
        self.latency_us.saturating_record(latency_us);
    }

    #[inline]
    pub(crate) fn failed(&mut self, failure: Failure) {
        self.failures.count(failure);
    }

    fn is_empty(&self) -> bool {
        self.ok == 0 && self.failures.total() == 0
    }
}

/// Where threads hand in their intervals. An interval every thread has
/// moved past is settled; [`IntervalSink::encode_settled`], called by the
/// thread that watches the run (not an engine thread), encodes it and
/// gives its emptied histogram back for a later interval: the engine's
/// threads neither compress nor, in the steady state, allocate.
pub(crate) struct IntervalSink {
    inner: Mutex<SinkInner>,
}

struct SinkInner {
    /// Per thread: every interval before this one has been handed in.
    through: Vec<u32>,
    pending: BTreeMap<u32, IntervalAcc>,
    /// Settled, not encoded yet.
    settled: Vec<IntervalAcc>,
    /// Emptied accumulators, for the next intervals.
    spare: Vec<IntervalAcc>,
    encoded: Vec<Interval>,
    /// The sum of the encoded intervals' histograms: the run's.
    total: Histogram<u64>,
}

impl IntervalSink {
    pub(crate) fn new(threads: usize) -> IntervalSink {
        IntervalSink {
            inner: Mutex::new(SinkInner {
                through: vec![0; threads],
                pending: BTreeMap::new(),
                settled: Vec::with_capacity(8),
                spare: Vec::new(),
                encoded: Vec::new(),
                total: latency_histogram(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SinkInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands in `acc`'s interval for `thread` and resets `acc` for `next`.
    pub(crate) fn hand_in(&self, thread: usize, acc: &mut IntervalAcc, next: u32) {
        let mut inner = self.lock();
        if !acc.is_empty() {
            let SinkInner { pending, spare, .. } = &mut *inner;
            let p = pending.entry(acc.index).or_insert_with(|| {
                let mut p = spare.pop().unwrap_or_else(IntervalAcc::new);
                p.index = acc.index;
                p
            });
            p.ok += acc.ok;
            p.failures += &acc.failures;
            p.latency_us.add(&acc.latency_us).expect("same bounds");
        }
        inner.through[thread] = next;
        let settled = inner.through.iter().copied().min().unwrap_or(0);
        inner.settle(settled);
        drop(inner);
        acc.index = next;
        acc.ok = 0;
        acc.failures = FailureCounts::default();
        acc.latency_us.reset();
    }

    /// Encodes the settled intervals, outside the lock.
    pub(crate) fn encode_settled(&self) {
        let batch: Vec<IntervalAcc> = {
            let mut inner = self.lock();
            if inner.settled.is_empty() {
                return;
            }
            inner.settled.drain(..).collect()
        };
        let done: Vec<Interval> = batch
            .iter()
            .map(|acc| Interval::of(acc.index, acc.ok, acc.failures, &acc.latency_us))
            .collect();
        let mut inner = self.lock();
        for mut acc in batch {
            inner.total.add(&acc.latency_us).expect("same bounds");
            acc.ok = 0;
            acc.failures = FailureCounts::default();
            acc.latency_us.reset();
            inner.spare.push(acc);
        }
        inner.encoded.extend(done);
    }

    /// Every interval `0..count`, once all threads have handed in their
    /// last one (quiet intervals, a stalled server, are there too, empty),
    /// and the sum of their histograms.
    pub(crate) fn finish(self, count: u32) -> (Vec<Interval>, Histogram<u64>) {
        self.lock().settle(u32::MAX);
        self.encode_settled();
        let inner = self.inner.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut by_index: BTreeMap<u32, Interval> =
            inner.encoded.into_iter().map(|i| (i.index, i)).collect();
        for index in 0..count {
            by_index.entry(index).or_insert_with(|| {
                Interval::of(index, 0, FailureCounts::default(), &latency_histogram())
            });
        }
        (by_index.into_values().collect(), inner.total)
    }
}

impl SinkInner {
    fn settle(&mut self, before: u32) {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() >= before {
                break;
            }
            self.settled.push(entry.remove());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/ (hlog): an `.hlog` line whose histogram holds the
    /// zig-zag count i64::MIN made hdrhistogram's deserializer panic
    /// (negation overflow) in debug builds. Refused now, in every build.
    #[test]
    fn a_count_hdrhistogram_cannot_negate_is_refused() {
        let field = "HISTFAAAAEJ42pNpmSzMwMAgxwABTBDKT3GBgdnNYMcCBvsPEBEWLj45FTExAT3p////////////////BSEBKa6U+AgBLoggedjfMMlwMDABAC0SCjM=";
        let bytes = decode_base64(field).unwrap();
        assert!(has_impossible_count(&bytes));
        assert!(decode(&bytes).is_err());
        let mut h = latency_histogram();
        h.record_n(250, 9).unwrap();
        assert!(!has_impossible_count(&encode(&h)), "our own encoding");
        assert_eq!(decode(&encode(&h)).unwrap(), h);
    }

    /// Found by fuzz/ (hlog): a log whose counts add up past u64::MAX
    /// decoded, then overflowed hdrhistogram's quantile scan
    /// (`value_at_quantile`: a panic with overflow checks, a wrong
    /// percentile without). Four counts of 2^62 encode as any other
    /// histogram does; decoding and adding refuse them, with the reason.
    #[test]
    fn counts_that_add_past_u64_are_refused() {
        let mut past = latency_histogram();
        for v in [100, 200, 300, 400] {
            past.record_n(v, 1 << 62).unwrap();
        }
        assert_eq!(past.len(), u64::MAX, "hdrhistogram saturates its total");
        let err = decode(&encode(&past)).unwrap_err();
        assert!(err.contains("past 2^64"), "{err}");
        let mut half = latency_histogram();
        half.record_n(100, 1 << 63).unwrap();
        let mut into = latency_histogram();
        add(&mut into, &half).unwrap();
        assert!(add(&mut into, &half).is_err(), "two halves overflow");
        let mut h = latency_histogram();
        h.record_n(250, 9).unwrap();
        assert!(counts_fit(&h).is_ok());
        assert_eq!(decode(&encode(&h)).unwrap(), h);
    }
    use crate::stats::Percentiles;

    #[test]
    fn the_encoding_round_trips_exactly() {
        let mut h = latency_histogram();
        for v in [1, 2, 3, 100, 1_000, 12_345, 1_000_000, 59_000_000] {
            h.record_n(v, v % 7 + 1).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back, h);
        let b64 = encode_base64(&h);
        assert_eq!(decode(&decode_base64(&b64).unwrap()).unwrap(), h);
        assert!(decode(b"not a histogram").is_err());
        assert!(decode_base64("%%%").is_err());
    }

    #[test]
    fn threads_add_up_per_interval_and_the_sum_is_every_sample() {
        let sink = IntervalSink::new(2);
        let mut t0 = IntervalAcc::new();
        let mut t1 = IntervalAcc::new();
        let mut all = latency_histogram();
        for v in 1..=99 {
            t0.ok(v * 10);
            all.record(v * 10).unwrap();
        }
        t1.ok(5000);
        all.record(5000).unwrap();
        t1.failed(Failure::Timeout);
        sink.hand_in(0, &mut t0, 1);
        // Thread 1 has not moved on: interval 0 is still open.
        assert!(sink.lock().settled.is_empty());
        sink.hand_in(1, &mut t1, 2);
        assert_eq!(sink.lock().settled.len(), 1);
        sink.encode_settled();
        let inner = sink.lock();
        assert_eq!((inner.encoded.len(), inner.spare.len()), (1, 1));
        drop(inner);
        t0.ok(7);
        all.record(7).unwrap();
        sink.hand_in(0, &mut t0, 3);
        let (intervals, total) = sink.finish(4);
        assert_eq!(total, all);
        assert_eq!(intervals.len(), 4);
        assert_eq!((intervals[0].ok, intervals[0].requests()), (100, 101));
        assert_eq!(intervals[0].failures.timeout, 1);
        assert_eq!((intervals[0].p50_us, intervals[0].max_us), (500, 5003));
        assert_eq!(intervals[1].ok, 1);
        assert_eq!(intervals[2].requests() + intervals[3].requests(), 0);
        let sum = Interval::sum(&intervals).unwrap();
        assert_eq!(sum, all);
        assert_eq!(Percentiles::of(&sum), Percentiles::of(&all));
    }
}
