//! The `.hlog` reader (harness/src/report/hlog.rs) and `harness merge`'s
//! reader of one input (an `.hlog` or a run's JSON document), on any bytes
//! a user may hand it.
//!
//! Invariants: a log it reads has at least one interval, and each
//! interval's histogram survives the harness's own encoding (V2 deflate,
//! what `--hlog` writes) unchanged; merge finds one source per tag of such
//! a log, and its sources count exactly the requests of the log's
//! histograms; refusals are errors, never panics.
#![no_main]

use std::collections::BTreeSet;

use harness::intervals;
use harness::report::hlog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let logged = hlog::parse(data);
    if let Ok(logged) = &logged {
        assert!(!logged.is_empty());
        for l in logged {
            let again =
                intervals::decode(&intervals::encode(&l.histogram)).expect("our own encoding");
            assert_eq!(again, l.histogram);
            assert_eq!(
                intervals::decode_base64(&intervals::encode_base64(&l.histogram))
                    .map(|b| intervals::decode(&b).unwrap()),
                Ok(l.histogram.clone())
            );
        }
    }
    let merged = harness::fuzzing::merge_input(data);
    let is_json = data.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if let (Ok(logged), false) = (&logged, is_json) {
        if let Ok(sources) = &merged {
            let tags: BTreeSet<_> = logged.iter().map(|l| l.tag.clone()).collect();
            assert_eq!(sources.len(), tags.len(), "one source per tag");
            let requests: u64 = sources.iter().map(|s| s.1).sum();
            let logged_requests: u64 = logged.iter().map(|l| l.histogram.len()).sum();
            assert_eq!(requests, logged_requests);
        }
    }
    if let Ok(sources) = &merged {
        assert!(!sources.is_empty());
    }
});
