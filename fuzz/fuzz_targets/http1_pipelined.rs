//! The servers' HTTP/1 codec on pipelined requests, read as a connection
//! reads them: the input is a stream of requests; the first byte seeds the
//! sizes of the reads it arrives in.
//!
//! Invariants: a connection loop (append what was read, take every complete
//! request, keep the rest) sees the same requests, in the same order, and
//! ends the same way (incomplete, or the same refusal) whatever the reads
//! were, as when the whole stream is there at once; every request consumes
//! at least one byte and never more than the buffer holds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server_common::http1::{self, ParseError};

fuzz_target!(|data: &[u8]| {
    let Some((&seed, stream)) = data.split_first() else {
        return;
    };
    let at_once = serve(stream, &[usize::MAX]);
    let sizes = benchlab_fuzz::read_sizes(seed, stream.len(), 64);
    assert_eq!(serve(stream, &sizes), at_once, "reads of {sizes:?}");
    assert_eq!(serve(stream, &[1]), at_once, "byte by byte");
});

/// What a connection made of the stream: each request (method, target,
/// HTTP/1.0, keep-alive, length), then how it ended.
#[derive(Debug, PartialEq, Eq)]
struct Served {
    requests: Vec<(String, String, bool, bool, usize)>,
    end: End,
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    /// This many bytes wait for more.
    Incomplete(usize),
    Refused(ParseError),
    /// A request that closes the connection (what follows is not read).
    Closed,
}

/// The connection loop of the servers (servers/coroutine/src/contract.rs,
/// worker-pool's inbox): `reads` are the sizes of the reads, cycled.
fn serve(stream: &[u8], reads: &[usize]) -> Served {
    let mut buf: Vec<u8> = Vec::new();
    let mut requests = Vec::new();
    let mut at = 0;
    let mut i = 0;
    loop {
        let n = reads[i % reads.len()].max(1).min(stream.len() - at);
        i += 1;
        buf.extend_from_slice(&stream[at..at + n]);
        at += n;
        loop {
            match http1::parse(&buf) {
                Ok(Some(r)) => {
                    assert!(r.len > 0 && r.len <= buf.len());
                    requests.push((
                        r.method.to_owned(),
                        r.target.to_owned(),
                        r.http10,
                        r.keep_alive,
                        r.len,
                    ));
                    let (len, keep_alive) = (r.len, r.keep_alive);
                    buf.drain(..len);
                    if !keep_alive {
                        return Served {
                            requests,
                            end: End::Closed,
                        };
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Served {
                        requests,
                        end: End::Refused(e),
                    }
                }
            }
        }
        if at == stream.len() {
            return Served {
                requests,
                end: End::Incomplete(buf.len()),
            };
        }
    }
}
