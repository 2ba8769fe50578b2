//! The loop's HTTP/1.1 pipelining duty: received plaintext fed to the
//! response being read (`proto::h1`), each complete response its oldest
//! request's, and what follows it the next one's.

use super::Worker;
use crate::engine::conn::{feed_chunk, Outcome, Received, State};

impl Worker<'_> {
    /// Pipelined HTTP/1.1, in order: feeds `data` to the response being
    /// read; each complete response is its request's, and what follows it
    /// the next one's.
    pub(super) fn dispatch_h1(&mut self, i: usize, data: &[u8], now: u64) {
        let epoch = self.conns[i].epoch;
        let mut at = 0;
        while at < data.len() {
            let conn = &mut self.conns[i];
            if conn.epoch != epoch {
                return; // closed and reopened: the rest was the old socket's
            }
            if conn.ring.is_empty() || conn.stream.is_none() {
                // A response nobody asked for: the connection is dropped.
                if conn.stream.is_some() {
                    conn.close(&mut self.io);
                    conn.state = State::Idle;
                }
                return;
            }
            let check = self.wires[usize::from(conn.ring.head().path)].check;
            let rest = &data[at..];
            let mut r = Received::new();
            let done = feed_chunk(
                &mut conn.reader,
                &mut conn.first_byte,
                rest,
                check,
                now,
                &mut r,
            );
            let leftover = match r.outcome {
                Outcome::Done { leftover } => leftover,
                Outcome::Failed(_) => {
                    self.received(i, r);
                    return;
                }
                Outcome::Pending => 0,
            };
            r.bytes = (rest.len() - leftover) as u64;
            self.received(i, r);
            if !done {
                return;
            }
            at = data.len() - leftover;
        }
    }
}
