//! What an answer or a failure counts, for every protocol: a read's bytes
//! and timings (`received`), a settled slot (`settle`: the response's
//! verdict, its latency, keep-alive or close, the next request), a failed
//! connection (`fail`: every slot in flight once), a failed slot alone
//! (`fail_one`, an HTTP/2 reset), and how each TLS handshake ended (the
//! transport decides whether failed ones end the run).

use std::sync::atomic::Ordering;

use super::{no_h2, us, Worker, CONNECT_RETRY_NS, REFUSED_LIMIT};
use crate::engine::conn::{Outcome, Received, State};
use crate::engine::framing::Slot;
use crate::engine::tls::Handshake;
use crate::engine::transport::{Transport, Verdict};
use crate::stats::Failure;

impl Worker<'_> {
    /// What a read brought, on either backend: counted, then acted on.
    #[inline]
    pub(super) fn received(&mut self, i: usize, r: Received) {
        let conn = &mut self.conns[i];
        let slot = conn.ring.head();
        if slot.measured {
            self.stats.bytes_received += r.bytes;
            if let Some(t) = r.first_byte_ns {
                self.stats
                    .waiting_us
                    .saturating_record(us(t.saturating_sub(slot.sent_ns)));
            }
        }
        if let Some(kind) = r.handshake {
            self.handshake_done(i, kind, r.now);
        }
        if let Some(e) = &r.tls_error {
            self.handshake_failed(e);
        }
        match r.outcome {
            Outcome::Pending => {}
            Outcome::Done { leftover } => self.complete(i, r.now, leftover),
            Outcome::Failed(f) => self.fail(i, f, r.now, false),
        }
    }

    /// TLS: connection `i`'s handshake ended at `now`.
    pub(super) fn handshake_done(&mut self, i: usize, kind: Handshake, now: u64) {
        let Transport::Tls(tls) = &mut self.transport else {
            return;
        };
        let conn = &self.conns[i];
        let Some(session) = &conn.tls else {
            return;
        };
        let (shared, measured) = (self.shared, conn.ring.head().measured);
        let took = now.saturating_sub(session.began_ns);
        let no_h2 = || no_h2(shared);
        match tls.completed(session, kind, took, measured, &mut self.stats, no_h2) {
            Verdict::Go => {}
            Verdict::Fail => self.fail(i, Failure::Handshake, now, false),
            Verdict::End(why) => {
                self.shared.abort_with(why);
                self.fail(i, Failure::Handshake, now, false);
            }
        }
    }

    /// TLS: a handshake failed for `e` (the request fails as `Handshake`,
    /// by the caller); the transport says whether the run ends.
    #[cold]
    pub(super) fn handshake_failed(&mut self, e: &rustls::Error) {
        let Transport::Tls(tls) = &mut self.transport else {
            return;
        };
        let shared = self.shared;
        let (verdict, refused) = tls.failed(e, &mut self.stats, || no_h2(shared));
        if refused {
            self.shared.tls_refused.store(true, Ordering::Relaxed);
        }
        if let Verdict::End(why) = verdict {
            self.shared.abort_with(why);
        }
    }

    /// A complete response to the oldest request in flight: count it, then
    /// send the next request.
    #[inline]
    pub(super) fn complete(&mut self, i: usize, now: u64, leftover: usize) {
        let Some(slot) = self.conns[i].ring.pop() else {
            return;
        };
        self.settle(i, slot, now, leftover);
    }

    /// A complete response to `slot`, taken from connection `i`'s ring
    /// (the oldest, or HTTP/2's by stream id), its verdict in
    /// `conn.reader`: count it, then send the next request.
    #[inline]
    pub(super) fn settle(&mut self, i: usize, slot: Slot, now: u64, leftover: usize) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        let conn = &mut self.conns[i];
        self.in_flight -= 1;
        // One request at a time: bytes after a complete response, unasked
        // for, mean the body was longer than announced. Pipelined, they are
        // the next response's.
        let unasked = leftover > 0 && !conn.buffered();
        let verdict = conn.reader.verdict.or(unasked.then_some(Failure::Length));
        let close = !self.keepalive || conn.reader.close || unasked;
        if slot.measured && now >= self.shared.end_ns {
            // Answered after the end: in flight at the end, as if aborted.
            self.stats.aborted += 1;
        } else if slot.measured {
            let s = &mut self.stats;
            s.responses += 1;
            if conn.proto.ws().is_none() {
                s.status.count(conn.reader.status);
            }
            s.body_bytes += conn.reader.body_len;
            let path = &mut s.paths[usize::from(slot.path)];
            match verdict {
                None => {
                    s.ok += 1;
                    path.ok += 1;
                    // Stamped (`--rate` on io_uring): the kernel's receive
                    // time, never before the send nor after now.
                    let now = self
                        .answered_ns
                        .map_or(now, |t| t.max(slot.sent_ns).min(now));
                    let latency = us(now.saturating_sub(slot.origin_ns));
                    // The run's histogram is the sum of the intervals'.
                    self.interval.ok(latency);
                    path.latency_us.saturating_record(latency);
                    s.service_us
                        .saturating_record(us(now.saturating_sub(slot.sent_ns)));
                    if s.document_length.is_none() {
                        s.document_length = Some(conn.reader.body_len);
                    }
                }
                Some(f) => {
                    s.failures.count(f);
                    path.failures.count(f);
                    self.interval.failed(f);
                }
            }
            if !close {
                s.keepalive_responses += 1;
            }
        }
        // The `Server` header is looked for in a connection's first
        // response only (the heads after it may then come from the
        // thread's memo, `proto::h1`).
        if conn.reader.want_server {
            conn.reader.want_server = false;
            if let Some(server) = conn.reader.server.take() {
                if self.stats.server_software.is_none() {
                    self.stats.server_software = Some(server.into());
                }
            }
        }
        self.refused = 0;
        if conn.ring.is_empty() {
            conn.state = State::Idle;
        } else {
            // The next response in line is the next request's.
            let head = self.wires[usize::from(conn.ring.head().path)].head;
            conn.reader.reset(head);
            conn.first_byte = false;
            if close {
                // The server closed with requests still in flight.
                self.fail(i, Failure::Receive, now, false);
                return;
            }
        }
        if close {
            conn.close(&mut self.io);
        }
        self.next(i, now);
    }

    /// A failed request: count it (and every other request in flight on
    /// the connection, once each), drop the connection, go on.
    pub(super) fn fail(&mut self, i: usize, failure: Failure, now: u64, refused: bool) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        if self.room_size > 0 {
            self.fail_room(i, failure, now);
            self.count_refused(refused);
            return;
        }
        let conn = &mut self.conns[i];
        conn.close(&mut self.io);
        conn.state = State::Idle;
        let (stats, interval) = (&mut self.stats, &mut self.interval);
        let end_ns = self.shared.end_ns;
        let mut failed = 0;
        conn.ring.drain(|slot| {
            failed += 1;
            if slot.measured && now >= end_ns {
                stats.aborted += 1;
            } else if slot.measured {
                stats.failures.count(failure);
                stats.paths[usize::from(slot.path)].failures.count(failure);
                interval.failed(failure);
            }
        });
        self.in_flight -= failed;
        self.count_refused(refused);
        if failure == Failure::Connect {
            // Through the wake-up queue: no tight retry loop, no recursion.
            self.wake(i, now + CONNECT_RETRY_NS);
        } else {
            self.next(i, now);
        }
    }

    /// A refused connect, counted: [`REFUSED_LIMIT`] in a row end the run.
    pub(super) fn count_refused(&mut self, refused: bool) {
        if refused {
            self.refused += 1;
            if self.refused >= REFUSED_LIMIT {
                self.shared.abort_with(format!(
                    "the server at {} refused {} connections in a row: it is gone (stopped or crashed?)",
                    self.shared.plan.addr, self.refused
                ));
            }
        }
    }

    /// HTTP/2: one request failed (its stream reset, or left unprocessed
    /// by a GOAWAY) while its connection goes on: count it, send the next.
    pub(super) fn fail_one(&mut self, i: usize, slot: Slot, failure: Failure, now: u64) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        self.in_flight -= 1;
        if slot.measured && now >= self.shared.end_ns {
            self.stats.aborted += 1;
        } else if slot.measured {
            self.stats.failures.count(failure);
            self.stats.paths[usize::from(slot.path)]
                .failures
                .count(failure);
            self.interval.failed(failure);
        }
        let conn = &mut self.conns[i];
        if conn.ring.is_empty() {
            conn.state = State::Idle;
        }
        self.next(i, now);
    }
}
