//! The readers of results.json that `harness diff` and `harness report`
//! take from users (harness/src/diff/load.rs, compare/results.rs), and what
//! they render from it.
//!
//! Invariants: whatever the text, a refusal is an error, never a panic; a
//! result set `diff` reads, compared with itself, has no regression; a
//! compare document `report` reads renders every report.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((_cells, regressions)) = harness::fuzzing::diff_self(text) {
        assert_eq!(regressions, 0, "a result set is worse than itself");
    }
    let _ = harness::fuzzing::report(text);
});
