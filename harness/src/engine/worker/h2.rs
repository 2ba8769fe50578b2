//! The loop's HTTP/2 duties: a request's frames queued on its connection,
//! and each answer of the codec (`proto::h2`) applied to its slot — a
//! response settles it by stream id, a reset fails it alone, SETTINGS set
//! the ring's limit, a GOAWAY drains the socket.

use super::Worker;
use crate::engine::io::Backend;
use crate::engine::proto::h2::{answers, verdict, Answer};
use crate::stats::Failure;

impl Worker<'_> {
    /// Encodes the newest request in flight on connection `i` (of path
    /// `path`) after whatever the connection's HTTP/2 out buffer holds,
    /// keys its slot by its stream id and queues the bytes. False if the
    /// codec refused it (the connection failed).
    pub(super) fn h2_encode(&mut self, i: usize, path: u16, measured: bool, uring: bool) -> bool {
        let conn = &mut self.conns[i];
        let Some(h2) = conn.proto.h2_mut() else {
            return false;
        };
        let Some(stream) = h2.encode(path) else {
            let now = self.clock.now();
            self.fail(i, Failure::Exception, now, false);
            return false;
        };
        let out = std::mem::take(&mut h2.out);
        let newest = conn.ring.len() - 1;
        conn.ring.nth_mut(newest).key = stream;
        if measured {
            self.stats.bytes_sent += out.len() as u64;
        }
        conn.queue(&out, uring);
        if let Some(h2) = conn.proto.h2_mut() {
            h2.out = out;
        }
        true
    }

    /// Feeds `data` to connection `i`'s codec, queues what it owes the
    /// server, and applies each of its answers in order.
    pub(super) fn dispatch_h2(&mut self, i: usize, data: &[u8], now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let conn = &mut self.conns[i];
        let epoch = conn.epoch;
        if conn.stream.is_none() {
            return;
        }
        if !conn.ring.is_empty() && conn.ring.head().measured {
            self.stats.bytes_received += data.len() as u64;
        }
        let Some(h2) = conn.proto.h2_mut() else {
            return;
        };
        let fed = h2.feed(data);
        let out = std::mem::take(&mut h2.out);
        let events = h2.take_events();
        if !out.is_empty() {
            conn.queue(&out, uring);
        }
        if let Some(h2) = conn.proto.h2_mut() {
            h2.out = out;
        }
        for answer in answers(&events) {
            let conn = &mut self.conns[i];
            if conn.epoch != epoch {
                break; // the socket closed: the rest were its streams'
            }
            match answer {
                Answer::Response(r) => {
                    let Some(slot) = conn.ring.take(r.stream) else {
                        continue;
                    };
                    let wire = &self.wires[usize::from(slot.path)];
                    let reader = &mut conn.reader;
                    reader.status = r.status;
                    reader.body_len = r.body_len;
                    reader.close = false;
                    reader.verdict = verdict(wire.check, &r, wire.head);
                    self.settle(i, slot, now, 0);
                }
                Answer::Failed { stream, failure } => {
                    let Some(slot) = conn.ring.take(stream) else {
                        continue;
                    };
                    self.fail_one(i, slot, failure, now);
                }
                Answer::Limit(max_concurrent_streams) => {
                    let streams = self.framing.capacity().min(max_concurrent_streams as usize);
                    conn.ring.set_limit(streams);
                    let allowed = streams as u32;
                    self.stats.h2_streams =
                        Some(self.stats.h2_streams.map_or(allowed, |s| s.min(allowed)));
                    self.next(i, now);
                }
            }
        }
        let conn = &mut self.conns[i];
        if let Some(h2) = conn.proto.h2_mut() {
            h2.give_back(events);
        }
        if conn.epoch != epoch {
            return;
        }
        if !fed {
            self.fail(i, Failure::Exception, now, false);
        } else if conn.proto.draining() && conn.ring.is_empty() {
            self.next(i, now);
        }
    }
}
