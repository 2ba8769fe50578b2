//! The contract's `/echo` rows ([`rows`], each run by [`EchoProbe`]): bodies
//! of every size up to the bound and past it, framed by Content-Length and
//! chunked, and bodies that disagree with their framing.

use super::probe::EchoProbe;
use super::{BodyFraming, MAX_BYTES};
use crate::contract::row::{Exchange, Row};

fn echo_row(
    name: &str,
    why: &'static str,
    len: usize,
    framing: BodyFraming,
    then_hello: bool,
) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Echo(EchoProbe {
            len,
            framing,
            then_hello,
        }),
        conformance: None,
    }
}

fn refused(name: &str, why: &'static str, raw: String) -> Row {
    Row {
        name: name.to_string(),
        why,
        exchange: Exchange::Reject {
            raw: raw.into_bytes(),
            statuses: &[400],
        },
        conformance: None,
    }
}

/// The contract's `/echo` rows.
pub fn rows() -> Vec<Row> {
    use BodyFraming::*;
    let chunked = |raw_body: &str| {
        format!(
            "POST /echo HTTP/1.1\r\nHost: verify\r\nTransfer-Encoding: chunked\r\n\r\n{raw_body}"
        )
    };
    vec![
        echo_row(
            "POST /echo (11 bytes)",
            "a body framed by Content-Length is read and answered back, byte for byte",
            11,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (empty body)",
            "Content-Length: 0 is a body too: answered with an empty one",
            0,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (64 KiB, then GET /hello on the connection)",
            "the body ends where Content-Length says: the request after it is answered",
            64 << 10,
            Length,
            true,
        ),
        echo_row(
            "POST /echo (1 MiB exactly)",
            "the largest body the contract accepts is echoed whole",
            MAX_BYTES,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (chunked, 100 KiB in 4 KiB chunks)",
            "a chunked body is decoded, not refused: clients stream uploads this way",
            100 << 10,
            Chunked { chunk: 4096 },
            true,
        ),
        echo_row(
            "POST /echo (chunked, 1 MiB exactly)",
            "the bound is on the decoded body, whatever its framing",
            MAX_BYTES,
            Chunked { chunk: 64 << 10 },
            false,
        ),
        echo_row(
            "POST /echo (1 MiB + 1 byte) → 413, closed",
            "a body over 1 MiB is refused with 413, not read into memory without bound",
            MAX_BYTES + 1,
            Length,
            false,
        ),
        echo_row(
            "POST /echo (chunked, 1 MiB + 1 byte) → 413, closed",
            "the bound holds for a chunked body, whose length is known only as it comes",
            MAX_BYTES + 1,
            Chunked { chunk: 64 << 10 },
            false,
        ),
        refused(
            "POST /echo, chunk size not hex → 400, closed",
            "a body that disagrees with its framing is refused and the connection closed",
            chunked("zz\r\nhello\r\n0\r\n\r\n"),
        ),
        refused(
            "POST /echo, chunk longer than its size → 400, closed",
            "chunk data must end where its size says (CRLF after it): anything else is refused",
            chunked("3\r\nhello\r\n0\r\n\r\n"),
        ),
    ]
}
