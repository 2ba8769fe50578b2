//! The loop's WebSocket duties: messages framed and queued once the
//! upgrade is in, each echo or room delivery settled on its slot, and the
//! rooms (`ws_room`) coordinated across their members' connections — a
//! room's messages start once every member is upgraded, a delivery is
//! settled on its sender's slot, a member's failure fails its room's
//! deliveries once and the room rejoins.

use super::{us, Worker, CONNECT_RETRY_NS};
use crate::engine::conn::{Conn, Outcome, Received, State};
use crate::engine::framing::Slot;
use crate::engine::io::Backend;
use crate::engine::ws::WsFeed;
use crate::engine::ws_room::{self, Arrival};
use crate::engine::Pace;
use crate::stats::Failure;

impl Worker<'_> {
    /// The opcode of a WebSocket run's messages: binary or text.
    pub(super) fn opcode(&self) -> u8 {
        match self.shared.plan.ws() {
            Some(w) if w.hold() => 9,
            Some(w) if !w.binary => 1,
            _ => 2,
        }
    }

    /// A room message: its header (member, sequence, epoch), then the
    /// plan's message after the header's bytes, framed and queued.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn queue_room_frame(
        conn: &mut Conn,
        frame: &mut Vec<u8>,
        opcode: u8,
        message: &[u8],
        member: usize,
        seq: u32,
        epoch: u32,
        uring: bool,
    ) {
        let Some(ws) = conn.proto.ws_mut() else {
            return;
        };
        let header = ws_room::header(member as u32, seq, epoch);
        let rest = message.get(ws_room::HEADER..).unwrap_or(&[]);
        ws.frame_parts(frame, opcode, &header, rest);
        conn.queue(frame, uring);
    }

    /// WebSocket: connection `i`'s upgrade completed at `now`: the
    /// messages started meanwhile are sent, each timed from here (closed
    /// loop) or from its intended send (`--rate`). A room member's wait
    /// for the whole room (`room_in`).
    pub(super) fn upgraded(&mut self, i: usize, now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let opcode = self.opcode();
        let closed = matches!(self.pace, Pace::Closed);
        if self.ws_upgrade_measured(i, now) {
            self.stats.ws_upgraded += 1;
            self.stats.status.count(101);
        }
        let conn = &mut self.conns[i];
        if let Some(r) = i.checked_div(self.room_size) {
            conn.state = State::Reading;
            let room = &mut self.rooms[r];
            room.joined += 1;
            if room.joined == room.members {
                self.room_in(r, i, now);
            }
            return;
        }
        for k in 0..conn.ring.len() {
            let slot = conn.ring.nth_mut(k);
            slot.sent_ns = now;
            if closed {
                slot.origin_ns = now;
            }
            let path = slot.path;
            conn.queue_frame(
                &mut self.frame,
                opcode,
                self.wires[usize::from(path)].bytes,
                uring,
            );
        }
    }

    /// WebSocket: whether connection `i`'s upgrade, answered at `now`,
    /// counts: before the end, and for a hold whenever it came (a
    /// connection upgraded in the warm-up is held in the measured time, and
    /// "opened" must not read 0 beside "5 still up"); otherwise if its first
    /// message's start was measured (a room member's ring may be empty, so
    /// its time).
    pub(super) fn ws_upgrade_measured(&self, i: usize, now: u64) -> bool {
        let conn = &self.conns[i];
        if now >= self.shared.end_ns {
            false
        } else if conn.proto.ws().is_some_and(|w| w.pongs_answer) {
            true
        } else if self.room_size > 0 {
            now >= self.shared.measure_start_ns
        } else {
            !conn.ring.is_empty() && conn.ring.head().measured
        }
    }

    /// Every member of room `r` is upgraded (the last one is `i`, whose
    /// read flushes it): each sends the messages it started meanwhile.
    pub(super) fn room_in(&mut self, r: usize, i: usize, now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let opcode = self.opcode();
        let closed = matches!(self.pace, Pace::Closed);
        let (first, members, epoch) = {
            let room = &self.rooms[r];
            (room.first, room.members, room.epoch)
        };
        let conns = &self.conns[first..first + members];
        self.rooms[r].start(|s| {
            let ring = &conns[s].ring;
            ring.next_key().wrapping_sub(ring.len() as u32)
        });
        for m in 0..members {
            let j = first + m;
            let conn = &mut self.conns[j];
            for k in 0..conn.ring.len() {
                let slot = conn.ring.nth_mut(k);
                slot.sent_ns = now;
                slot.deadline_ns = now.saturating_add(self.timeout_ns);
                if closed {
                    slot.origin_ns = now;
                }
                let (path, key) = (slot.path, slot.key);
                let bytes = self.wires[usize::from(path)].bytes;
                Self::queue_room_frame(conn, &mut self.frame, opcode, bytes, m, key, epoch, uring);
            }
            if j != i {
                self.flush_out(j);
            }
        }
    }

    /// A room member's connection `i` failed: every delivery still owed
    /// in its room fails once, each member closes, and the room rejoins
    /// under a new epoch (through the wake-up queue: no recursion).
    pub(super) fn fail_room(&mut self, i: usize, failure: Failure, now: u64) {
        let r = i / self.room_size;
        let (first, members) = (self.rooms[r].first, self.rooms[r].members);
        self.rooms[r].reset();
        let end_ns = self.shared.end_ns;
        for j in first..first + members {
            let conn = &mut self.conns[j];
            conn.close(&mut self.io);
            conn.state = State::Idle;
            let (stats, interval) = (&mut self.stats, &mut self.interval);
            let mut failed = 0;
            conn.ring.drain(|slot| {
                failed += 1;
                if slot.measured && now >= end_ns {
                    stats.aborted += u64::from(slot.pending);
                } else if slot.measured {
                    for _ in 0..slot.pending {
                        stats.failures.count(failure);
                        stats.paths[usize::from(slot.path)].failures.count(failure);
                        interval.failed(failure);
                    }
                }
            });
            self.in_flight -= failed;
            let retry = if failure == Failure::Connect && j == i {
                CONNECT_RETRY_NS
            } else {
                0
            };
            self.wake(j, now + retry);
        }
    }

    /// A room delivery at `now`, of a message of `slot`'s: counted as a
    /// response, timed from the message's send (or intended send).
    pub(super) fn delivered(&mut self, slot: &Slot, verdict: Option<Failure>, now: u64) {
        if !slot.measured {
            return;
        }
        if now >= self.shared.end_ns {
            self.stats.aborted += 1;
            return;
        }
        let path = u16::from(slot.path);
        self.count_delivery(path, slot.origin_ns, slot.sent_ns, verdict, now);
    }

    pub(super) fn count_delivery(
        &mut self,
        path: u16,
        origin_ns: u64,
        sent_ns: u64,
        verdict: Option<Failure>,
        now: u64,
    ) {
        let s = &mut self.stats;
        s.responses += 1;
        let path = &mut s.paths[usize::from(path)];
        match verdict {
            None => {
                s.ok += 1;
                path.ok += 1;
                let latency = us(now.saturating_sub(origin_ns));
                self.interval.ok(latency);
                path.latency_us.saturating_record(latency);
                s.service_us
                    .saturating_record(us(now.saturating_sub(sent_ns)));
            }
            Some(f) => {
                s.failures.count(f);
                path.failures.count(f);
                self.interval.failed(f);
            }
        }
    }

    /// Room member `i` received a message at `now`, its header in the
    /// connection's `captured`, its bytes after it judged (`verdict`):
    /// settles the delivery (and those it shows skipped) on the sender's
    /// slot; a message all members now have ends, and its sender sends
    /// the next.
    pub(super) fn room_message(&mut self, i: usize, verdict: Option<Failure>, now: u64) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        let k = self.room_size;
        let (r, receiver) = (i / k, i % k);
        let header = self.conns[i]
            .proto
            .ws()
            .and_then(|w| w.member.as_ref().map(|m| m.captured));
        let parsed = header.as_ref().and_then(ws_room::parse);
        let measured = now >= self.shared.measure_start_ns && now < self.shared.end_ns;
        let Some((sender, seq, epoch)) = parsed else {
            // Not a member's message at all.
            if measured {
                self.count_delivery(0, now, now, Some(Failure::Body), now);
            }
            return;
        };
        let first = self.rooms[r].first;
        let sc = first + (sender as usize).min(k - 1);
        let ring = &self.conns[sc].ring;
        let head_key = ring.next_key().wrapping_sub(ring.len() as u32);
        let flight = (head_key, ring.len());
        match self.rooms[r].arrive(receiver, sender, seq, epoch, flight) {
            Arrival::Stale => {}
            Arrival::Extra => {
                if measured {
                    self.count_delivery(0, now, now, Some(Failure::Order), now);
                }
            }
            Arrival::Deliver { skipped_from, seq } => {
                let mut q = skipped_from;
                while q != seq {
                    let slot = self.conns[sc]
                        .ring
                        .nth_mut(q.wrapping_sub(head_key) as usize);
                    slot.pending = slot.pending.saturating_sub(1);
                    let slot = *slot;
                    self.delivered(&slot, Some(Failure::Order), now);
                    q = q.wrapping_add(1);
                }
                let in_order = self.rooms[r].in_room_order(receiver, sender, seq);
                let slot = self.conns[sc]
                    .ring
                    .nth_mut(seq.wrapping_sub(head_key) as usize);
                slot.pending = slot.pending.saturating_sub(1);
                let slot = *slot;
                let verdict = verdict.or((!in_order).then_some(Failure::Interleave));
                self.delivered(&slot, verdict, now);
                self.room_sent(sc, i, now);
            }
        }
    }

    /// Sender `sc`'s messages that every member now has end (in order: a
    /// receiver gets a sender's messages in order), and it sends the next;
    /// `i` is the connection whose read is being handled (flushed after it).
    pub(super) fn room_sent(&mut self, sc: usize, i: usize, now: u64) {
        let mut ended = 0;
        let conn = &mut self.conns[sc];
        while !conn.ring.is_empty() && conn.ring.head().pending == 0 {
            if let Some(slot) = conn.ring.pop() {
                if slot.measured && now < self.shared.end_ns {
                    self.stats.room_messages_complete += 1;
                }
            }
            ended += 1;
        }
        if ended == 0 {
            return;
        }
        self.in_flight -= ended;
        self.refused = 0;
        self.next(sc, now);
        if sc != i {
            self.flush_out(sc);
        }
    }

    /// WebSocket: the upgrade's `101`, then echoes, each its message's.
    pub(super) fn dispatch_ws(&mut self, i: usize, data: &[u8], now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let epoch = self.conns[i].epoch;
        let mut at = 0;
        while at < data.len() {
            let conn = &mut self.conns[i];
            let Some(ws) = conn.proto.ws_mut() else {
                return;
            };
            if conn.epoch != epoch || conn.stream.is_none() {
                return;
            }
            if !ws.upgraded {
                match ws.handshake(&data[at..]) {
                    Ok(None) => return,
                    Ok(Some(used)) => {
                        at += used;
                        self.upgraded(i, now);
                        continue;
                    }
                    Err(f) => {
                        let answered = ws.answered;
                        if answered != 0 && self.ws_upgrade_measured(i, now) {
                            self.stats.status.count(answered);
                        }
                        self.fail(i, f, now, false);
                        return;
                    }
                }
            }
            if self.room_size > 0 {
                // Every member's messages arrive here, its own among them.
                let want = self.wires[0].check.body();
                let reader = &mut conn.reader;
                let feed = ws.feed(&data[at..], want, &mut reader.body_len, &mut reader.verdict);
                if now >= self.shared.measure_start_ns {
                    let used = match feed {
                        WsFeed::Message { used, .. } | WsFeed::Control { used } => used,
                        _ => data.len() - at,
                    };
                    self.stats.bytes_received += used as u64;
                }
                match feed {
                    WsFeed::More => return,
                    WsFeed::Control { used } => {
                        at += used;
                        if let Some((payload, n)) = ws.take_ping() {
                            conn.queue_frame(&mut self.frame, 10, &payload[..n], uring);
                        }
                    }
                    WsFeed::Message { used, verdict, len } => {
                        at += used;
                        reader.body_len = 0;
                        reader.verdict = None;
                        if len < ws_room::HEADER as u64 {
                            // Too short to be any member's message.
                            if now >= self.shared.measure_start_ns && now < self.shared.end_ns {
                                self.count_delivery(0, now, now, Some(Failure::Length), now);
                            }
                        } else {
                            self.room_message(i, verdict, now);
                        }
                    }
                    WsFeed::Closed => {
                        self.fail(i, Failure::Receive, now, false);
                        return;
                    }
                    WsFeed::Fail(f) => {
                        self.fail(i, f, now, false);
                        return;
                    }
                }
                continue;
            }
            if conn.ring.is_empty() {
                // A message nobody sent: the connection is dropped.
                conn.close(&mut self.io);
                conn.state = State::Idle;
                return;
            }
            let want = self.wires[usize::from(conn.ring.head().path)].check.body();
            let reader = &mut conn.reader;
            let feed = ws.feed(&data[at..], want, &mut reader.body_len, &mut reader.verdict);
            let mut r = Received::new();
            r.now = now;
            match feed {
                WsFeed::More => {
                    r.bytes = (data.len() - at) as u64;
                    self.received(i, r);
                    return;
                }
                WsFeed::Control { used } => {
                    at += used;
                    if let Some((payload, n)) = ws.take_ping() {
                        conn.queue_frame(&mut self.frame, 10, &payload[..n], uring);
                    }
                }
                WsFeed::Message { used, .. } => {
                    at += used;
                    r.bytes = used as u64;
                    r.outcome = Outcome::Done { leftover: 0 };
                    self.received(i, r);
                }
                WsFeed::Closed => {
                    self.fail(i, Failure::Receive, now, false);
                    return;
                }
                WsFeed::Fail(f) => {
                    self.fail(i, f, now, false);
                    return;
                }
            }
        }
    }
}
