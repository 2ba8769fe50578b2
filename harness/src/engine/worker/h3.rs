//! The loop's HTTP/3 duties over QUIC: a connection opened (a UDP socket
//! and a QUIC handshake, `engine::quic`), a request started onto it, its
//! socket readable, its timers due; after each, the connection is pumped
//! — what QUIC says happened (established, lost, streams readable) is
//! read, waiting requests go on streams (`proto::h3`), datagrams go out —
//! and each answer is applied to its slot through `settle.rs`.

use std::sync::atomic::Ordering;

use quinn_proto::{Dir, Event, StreamEvent};

use super::{us, Worker};
use crate::engine::conn::State;
use crate::engine::io::Backend;
use crate::engine::proto::h2::verdict;
use crate::engine::proto::h3::Answer;
use crate::engine::proto::Proto;
use crate::engine::quic::{self, HANDSHAKE_WAIT};
use crate::engine::transport::{Transport, HANDSHAKE_FAIL_LIMIT};
use crate::engine::{h2, ns};
use crate::stats::{Failure, Negotiated, QuicCounts};

impl Worker<'_> {
    /// `start_buffered` for HTTP/3: the newest slot of connection `i`
    /// waits for a stream; a connection without QUIC opens one first.
    pub(super) fn h3_start(&mut self, i: usize, now: u64) -> bool {
        let conn = &mut self.conns[i];
        let newest = *conn.ring.nth(conn.ring.len() - 1);
        let Some(h3) = conn.proto.h3_mut() else {
            return false;
        };
        h3.requests.unsent.push((newest.key, newest.path));
        let pumping = h3.requests.pumping;
        if h3.quic.is_none() && !self.h3_open(i, now) {
            return true; // failed (counted), retried
        }
        if !pumping {
            self.h3_pump(i, now);
        }
        true
    }

    /// Opens connection `i`'s QUIC connection; false if that failed
    /// (counted as a connect failure).
    fn h3_open(&mut self, i: usize, now: u64) -> bool {
        let (Transport::Quic(quic), Backend::Epoll(e)) = (&mut self.transport, &self.io) else {
            return false;
        };
        let conn = &mut self.conns[i];
        conn.connect_ns = now;
        match quic.connect(self.shared.plan.addr, e.poll.registry(), i, now) {
            Ok(q) => {
                if let Some(h3) = conn.proto.h3_mut() {
                    h3.quic = Some(Box::new(q));
                }
                conn.state = State::Connecting;
                true
            }
            Err(_) => {
                self.fail(i, Failure::Connect, now, false);
                false
            }
        }
    }

    /// Connection `i`'s socket is readable: its datagrams go in, then the
    /// connection is pumped.
    pub(super) fn h3_readable(&mut self, i: usize) {
        let now = self.clock.now();
        let conn = &mut self.conns[i];
        let (Transport::Quic(quic), Some(q)) = (&mut self.transport, conn.proto.quic_mut()) else {
            return;
        };
        let bytes = quic.receive(q, now);
        if !conn.ring.is_empty() && conn.ring.head().measured {
            self.stats.bytes_received += bytes;
        }
        self.h3_pump(i, now);
    }

    /// Fires the QUIC timers that are due, ends the run when no handshake
    /// got an answer within [`HANDSHAKE_WAIT`] and none ever completed,
    /// and returns when the earliest timer left is due.
    pub(super) fn h3_timers(&mut self, now: u64) -> u64 {
        let mut next = u64::MAX;
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            let (Transport::Quic(quic), Some(q)) = (&mut self.transport, conn.proto.quic_mut())
            else {
                continue;
            };
            // Before any handshake completed, silence for 2 s means no
            // server (QUIC has no refusal); after, a slow handshake is
            // the server's load, timed out by --timeout like any request.
            let waiting = !q.established && quic.completed == 0;
            if waiting && now.saturating_sub(q.started_ns) >= ns(HANDSHAKE_WAIT) {
                self.shared.abort_with(format!(
                    "no QUIC answer from {} within {} s (is an HTTP/3 server listening on that UDP port?)",
                    self.shared.plan.addr,
                    HANDSHAKE_WAIT.as_secs()
                ));
                self.fail(i, Failure::Handshake, now, false);
                continue;
            }
            let mut due = quic.timer_ns(q);
            if due.is_some_and(|t| t <= now) {
                quic.expire(q, now);
                self.h3_pump(i, now);
                let (Transport::Quic(quic), Some(q)) =
                    (&mut self.transport, self.conns[i].proto.quic_mut())
                else {
                    continue;
                };
                due = quic.timer_ns(q);
            }
            if let Some(t) = due {
                next = next.min(t);
            }
            let completed = matches!(&self.transport, Transport::Quic(q) if q.completed > 0);
            if let Some(q) = self.conns[i].proto.quic() {
                if !q.established && !completed {
                    next = next.min(q.started_ns + ns(HANDSHAKE_WAIT));
                }
            }
        }
        next
    }

    /// Reads what connection `i`'s QUIC connection says happened, puts
    /// waiting requests on streams, sends, and applies the answers; again
    /// while answering started new requests.
    fn h3_pump(&mut self, i: usize, now: u64) {
        let wires = self.wires;
        let mut answers = std::mem::take(&mut self.h3_answers);
        loop {
            answers.clear();
            let measured = {
                let c = &self.conns[i];
                !c.ring.is_empty() && c.ring.head().measured
            };
            let conn = &mut self.conns[i];
            let (Transport::Quic(quic), Proto::H3(link)) = (&mut self.transport, &mut conn.proto)
            else {
                break;
            };
            let (Some(q), h3) = (link.quic.as_deref_mut(), &mut link.requests) else {
                break;
            };
            h3.pumping = true;
            let mut lost = None;
            let mut connected = false;
            while let Some(ev) = q.conn.poll() {
                match ev {
                    Event::Connected => connected = true,
                    Event::ConnectionLost { reason } => lost = Some(reason),
                    Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                        h3.accept_uni(&mut q.conn);
                    }
                    Event::Stream(StreamEvent::Readable { id }) => {
                        // Bytes counted as datagrams (`h3_readable`).
                        h3.read(
                            &mut q.conn,
                            id,
                            |p| wires[usize::from(p)].check.body(),
                            &mut answers,
                        );
                    }
                    // STOP_SENDING on a request already finished asks for
                    // nothing more: a response may still come (a refused
                    // request's stream is reset, which its read finds).
                    _ => {}
                }
            }
            if let Some(reason) = lost {
                h3.pumping = false;
                let established = q.established;
                let why = quic::explain(&quic.server_name, &reason);
                self.h3_lost(i, established, why, now);
                break;
            }
            if connected {
                q.established = true;
                let took = now.saturating_sub(q.started_ns);
                quic.fails = 0;
                quic.completed += 1;
                conn.state = State::Reading;
                if measured {
                    self.stats.connections += 1;
                    self.stats.handshakes_full += 1;
                    self.stats.handshake_us.saturating_record(us(took));
                    self.stats.connect_us.saturating_record(us(took));
                }
                if self.stats.tls.is_none() {
                    self.stats.tls = Some(Negotiated {
                        version: "TLSv1_3".to_string(),
                        // quinn-proto does not say which.
                        cipher_suite: String::new(),
                        key_exchange: String::new(),
                        alpn: Some("h3".to_string()),
                    });
                }
            }
            if q.established {
                let sent = h3.send(&mut q.conn, &self.h3_templates);
                if measured {
                    self.stats.bytes_sent += sent;
                }
            }
            quic.transmit(q, now);
            if answers.is_empty() {
                h3.pumping = false;
                break;
            }
            let epoch = conn.epoch;
            for a in answers.drain(..) {
                let conn = &mut self.conns[i];
                if conn.epoch != epoch {
                    break; // the connection closed: the rest were its streams'
                }
                match a {
                    Answer::Response {
                        key,
                        status,
                        content_length,
                        body_len,
                        body_ok,
                    } => {
                        let Some(slot) = conn.ring.take(key) else {
                            continue;
                        };
                        let wire = &wires[usize::from(slot.path)];
                        let response = h2::Response {
                            stream: 0,
                            template: usize::from(slot.path),
                            status,
                            content_length,
                            content_type_ok: true,
                            body_len,
                            body_ok,
                        };
                        let reader = &mut conn.reader;
                        reader.status = status;
                        reader.body_len = body_len;
                        reader.close = false;
                        reader.verdict = verdict(wire.check, &response, wire.head);
                        self.settle(i, slot, now, 0);
                    }
                    Answer::Failed { key, failure } => {
                        let Some(slot) = conn.ring.take(key) else {
                            continue;
                        };
                        self.fail_one(i, slot, failure, now);
                    }
                }
            }
            let conn = &mut self.conns[i];
            if conn.epoch != epoch {
                break;
            }
            if let Some(h3) = conn.proto.h3_mut() {
                h3.requests.pumping = false;
            }
            // Answers started new requests: put them on streams now.
        }
        self.h3_answers = answers;
    }

    /// Connection `i`'s QUIC connection was lost (`why`): before it was
    /// established, a failed handshake, which ends the run once
    /// [`HANDSHAKE_FAIL_LIMIT`] fail in a row with none ever established;
    /// after, every request on it fails as a receive.
    #[cold]
    fn h3_lost(&mut self, i: usize, established: bool, why: String, now: u64) {
        if established {
            self.fail(i, Failure::Receive, now, false);
            return;
        }
        if self.stats.tls_error.is_none() {
            self.stats.tls_error = Some(why.clone());
        }
        if let Transport::Quic(quic) = &mut self.transport {
            quic.fails += 1;
            if quic.completed == 0 && quic.fails >= HANDSHAKE_FAIL_LIMIT {
                if why.contains("certificate") {
                    self.shared.tls_refused.store(true, Ordering::Relaxed);
                }
                self.shared.abort_with(format!(
                    "{why} ({} connections in a row, none established)",
                    quic.fails
                ));
            }
        }
        self.fail(i, Failure::Handshake, now, false);
    }

    /// What this thread's QUIC connections counted: those closed, and
    /// those still open.
    pub(super) fn h3_counts(&mut self) {
        if !self.framing.is_h3() {
            return;
        }
        let mut total = QuicCounts::default();
        for c in &self.conns {
            if let Proto::H3(h3) = &c.proto {
                total += &h3.requests.counts;
                if let Some(q) = &h3.quic {
                    quic::count(&mut total, &q.conn);
                }
            }
        }
        if let Transport::Quic(quic) = &self.transport {
            total.send_dropped = quic.send_dropped;
        }
        self.stats.quic = Some(total);
    }
}
