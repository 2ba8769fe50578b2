//! may-mysql's packet reader and the decoder of a query's answer, on what
//! a server (or anything at the database's address) may send. The first
//! byte picks DEPRECATE_EOF and seeds the read sizes; the rest is the
//! stream.
//!
//! Invariants:
//! - framing: each packet is exactly the payload its 3-byte length
//!   announces, at the place a reference framing of the stream puts it;
//!   sequence ids out of order are refused at the packet where they go
//!   wrong; no packet is made of bytes past the end of the input, and the
//!   reader never holds more than it was given;
//! - the same stream in other reads frames the same packets and decodes
//!   to the same answer;
//! - an integer the decoder returns is written, in decimal, in the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use may_mysql::fuzzing::{packets, scalar, Chunked};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let sizes = benchlab_fuzz::read_sizes(mode, stream.len(), 16);
    let src = |reads: &'static [usize]| Chunked {
        input: stream,
        reads,
        at: 0,
        next: 0,
    };

    let (framed, unread) = packets(&mut src(&[]), 64);
    let mut chunked = Chunked {
        input: stream,
        reads: &sizes,
        at: 0,
        next: 0,
    };
    let (framed_in_reads, _) = packets(&mut chunked, 64);
    assert!(chunked.at <= stream.len());
    assert_eq!(framed, framed_in_reads, "reads of {sizes:?}");
    reference_framing(stream, &framed, unread);

    let deprecate_eof = mode & 1 == 1;
    let answer = scalar(&mut src(&[]), deprecate_eof);
    let mut chunked = Chunked {
        input: stream,
        reads: &sizes,
        at: 0,
        next: 0,
    };
    assert_eq!(
        scalar(&mut chunked, deprecate_eof),
        answer,
        "reads of {sizes:?}"
    );
    assert_eq!(
        scalar(&mut src(&[1]), deprecate_eof),
        answer,
        "byte by byte"
    );
    if let Ok(Ok(Some(v))) = answer {
        let text = v.to_string();
        assert!(
            stream.windows(text.len()).any(|w| w == text.as_bytes()),
            "{v} is not in the input"
        );
    }
});

/// Frames `stream` independently (packets below 16 MiB: the input never
/// holds a larger one) and compares with what the reader framed.
fn reference_framing(stream: &[u8], framed: &[Result<Vec<u8>, String>], unread: usize) {
    let mut at = 0;
    let mut seq = 0u8;
    for (i, p) in framed.iter().enumerate() {
        let rest = &stream[at..];
        let len = rest
            .get(..3)
            .map(|h| usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16);
        match (p, len) {
            (Ok(payload), Some(len)) => {
                assert_eq!(rest[3], seq, "packet {i}: its sequence id");
                assert_eq!(payload.as_slice(), &rest[4..4 + len], "packet {i}");
                at += 4 + len;
                seq = seq.wrapping_add(1);
            }
            (Err(e), _) if e.contains("out of order") => {
                assert!(rest.len() >= 4 && rest[3] != seq, "packet {i}: {e}");
                return;
            }
            (Err(e), _) if e.contains("closed") => {
                let complete = len.is_some_and(|len| rest.len() >= 4 + len);
                assert!(!complete, "packet {i}: a complete packet refused: {e}");
                return;
            }
            (Err(e), _) => panic!("packet {i}: {e}"),
            (Ok(_), None) => panic!("packet {i}: framed from fewer than 4 bytes"),
        }
    }
    assert!(
        unread <= stream.len() - at,
        "holds {unread} of {} left",
        stream.len() - at
    );
}
