//! One engine thread: an event loop (epoll, edge-triggered, or io_uring)
//! over its share of the connections. This is the only request loop;
//! [`Stop`] decides when it ends and [`Pace`] when each connection sends
//! its next request. This file is the loop, its I/O and its pacing, and
//! the counting every protocol shares (`settle`, `fail`).
//!
//! Per-thread everything: the statistics (the totals and each path's), the
//! `-n` quota (no shared counter per request), the read buffer, the wake-up
//! queue of the `--rate` schedule. Across threads only the Ctrl-C/abort
//! flags (read once per loop turn), the progress counters (written once per
//! loop turn) and the interval sink (once per interval) are shared.
//!
//! A protocol (`engine::proto`) is met by a `match` on `Conn::proto` where
//! a request is encoded (`start_buffered`) and where received plaintext is
//! fed (`dispatch`); HTTP/2's and WebSocket's answers are applied in
//! `worker/h2.rs` and `worker/ws.rs` (which also coordinates rooms). The
//! transport (`engine::transport`) is met where bytes move: over TLS each
//! connection's bytes go through its session (`conn.tls`), and io_uring
//! sends a connection's own out buffer (`submit_out`, `send_out`,
//! `out_sent`) rather than the plan's bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::Ordering;

use super::conn::{Conn, Outcome, Received, State};
use super::framing::{Framing, Slot};
use super::h2::{Config as H2Config, Template};
use super::io::{Backend, Ev, TAG_MASK};
use super::proto::{self, Proto};
use super::timer;
use super::transport::Transport;
use super::ws::{Member, WsConn};
use super::ws_room::{self, Room};
use super::{ns, schedule, Clock, End, Pace, Share, Shared, Stop, Wire, DRAIN};
use crate::intervals::IntervalAcc;
use crate::stats::{Failure, PathStats, Stats};

mod h1;
mod h2;
mod h3;
mod settle;
mod together;
mod ws;

use together::EndTogether;

/// The loop turns at least this often (Ctrl-C, deadlines, the time series).
const MAX_WAIT_NS: u64 = 100_000_000;
/// A failed connect is retried after this long (closed loop).
const CONNECT_RETRY_NS: u64 = 10_000_000;
/// This many refused connects in a row, with no response in between: the
/// server is gone and the run ends.
const REFUSED_LIMIT: u32 = 10;
/// A stamped `--rate` run waits promptly for completions this long after
/// it starts a connect (the connect's completion, and the first request's
/// send behind it, must not wait for the next slot).
const PROMPT_AFTER_CONNECT_NS: u64 = 20_000_000;
/// The thread's read buffer, shared by its connections.
const READ_BUF: usize = 64 * 1024;
/// What one loop turn handles at most (the rest waits for the next turn).
const EVENTS: usize = 1024;
/// Connections a closed-loop run opens per loop turn as it starts. Between
/// batches the loop turns: it reaps completions, checks its deadline and
/// publishes progress. Opened all at once, 9,900 connections of a thread
/// were one burst of connects (minutes on a loaded machine) before the
/// thread's first turn: on io_uring nothing sent was reaped, so the run
/// ended with no connection counted and no response.
const OPEN_PER_TURN: usize = 256;

pub(crate) struct Output {
    pub stats: Stats,
    /// When the thread stopped.
    pub last_ns: u64,
    pub end: End,
}

struct Worker<'s> {
    shared: &'s Shared<'s>,
    thread: usize,
    clock: Clock,
    /// epoll or io_uring: how bytes move (everything else is shared).
    io: Backend,
    /// Plain TCP, or TLS (the thread's client and its handshakes).
    transport: Transport,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// How requests are framed (see `framing`).
    framing: Framing,
    /// HTTP/2: each path's request, HPACK-encoded once, and the codec's
    /// configuration (a connection's codec is made from them per socket).
    h2_templates: Vec<Template>,
    h2_config: H2Config,
    /// HTTP/3: each path's request as it goes on a stream, encoded once;
    /// the answers of one pump (reused); when the earliest QUIC timer
    /// (or handshake's wait) ends.
    h3_templates: Vec<Vec<u8>>,
    h3_answers: Vec<proto::h3::Answer>,
    h3_next_ns: u64,
    /// WebSocket: a frame is built here before it is queued (one per
    /// thread, the largest message's size; empty for other protocols).
    frame: Vec<u8>,
    /// TLS, a buffered framing: the plaintext of one read.
    plain: Vec<u8>,
    /// A buffered framing: requests started while a read is handed out
    /// are written together after it.
    deferring: bool,
    /// WebSocket rooms (`ws_room`): this thread's, each of `room_size`
    /// consecutive connections (none: 0).
    rooms: Vec<Room>,
    room_size: usize,
    /// The plan's paths, and the order each connection sends them in.
    wires: &'s [Wire<'s>],
    cycle: &'s [u16],
    keepalive: bool,
    pace: Pace,
    stats: Stats,
    /// The interval being recorded: every success's latency goes here once.
    interval: IntervalAcc,
    /// The length of an interval, and when the current one ends.
    interval_len_ns: u64,
    next_interval_ns: u64,
    /// This thread's remaining share of `-n`.
    permits: Option<u64>,
    /// Connections waiting for their `--rate` slot or a connect retry.
    wakes: BinaryHeap<Reverse<(u64, usize)>>,
    /// Closed loop: the connections below this have had their first
    /// request started (see [`OPEN_PER_TURN`]).
    opened: usize,
    in_flight: usize,
    /// False once interrupted: no new requests.
    sending: bool,
    drain_until_ns: u64,
    interval_ns: u64,
    timeout_ns: u64,
    sweep_every_ns: u64,
    next_sweep_ns: u64,
    refused: u32,
    /// `--rate` on io_uring, plain HTTP/1.1 kept alive: receives carry the
    /// kernel's receive time, so the loop sleeps from slot to slot and
    /// reaps answers there (`Uring::wait_for_slot`) rather than waking
    /// once for each send and once for each answer.
    stamped: bool,
    /// Stamped: until then, waits are prompt (a connect was started).
    prompt_until_ns: u64,
    /// Stamped: the real-time clock minus the run's, sampled each turn.
    realtime_offset_ns: u64,
    /// Stamped: when the kernel received the answer being handled, on the
    /// run's clock: its latency ends there, not when it was reaped.
    answered_ns: Option<u64>,
}

/// Runs one thread's share of the plan to its end.
pub(crate) fn run(shared: &Shared<'_>, share: Share) -> io::Result<Output> {
    let together = EndTogether::new(shared);
    let mut w = Worker::new(shared, &share)?;
    let end = w.run_loop();
    w.h3_counts();
    let last_ns = w.clock.now();
    let next = w.interval.index() + 1;
    shared.sink.hand_in(w.thread, &mut w.interval, next);
    w.publish();
    let out = Output {
        stats: std::mem::take(&mut w.stats),
        last_ns,
        end,
    };
    // At `-d`'s end (or `-n`'s bound) every thread stops at one moment, and
    // closes only once all have. A thread that finished its `-n` share, or
    // drained after Ctrl-C, closes at once: its idle connections would
    // keep a server's workers from the threads still running.
    if !matches!(end, End::Duration | End::Deadline) {
        drop(w);
    }
    together.wait();
    Ok(out)
}

#[inline]
fn us(ns: u64) -> u64 {
    (ns + 500) / 1000
}

impl<'s> Worker<'s> {
    fn new(shared: &'s Shared<'s>, share: &Share) -> io::Result<Worker<'s>> {
        let plan = shared.plan;
        let interval_ns = match plan.pace {
            Pace::Rate(r) => (plan.connections as f64 * 1e9 / r) as u64,
            Pace::Closed => 0,
        };
        let request_max = shared
            .wires
            .iter()
            .map(|w| w.bytes.len())
            .max()
            .unwrap_or(0);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let framing = plan.framing();
        let mut conns: Vec<Conn> = (0..share.conns)
            .map(|j| {
                let proto = Proto::new(&plan.proto, request_max, |ws| {
                    let conn_seed =
                        seed ^ ((share.first_conn + j) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let mut w = WsConn::new(conn_seed);
                    w.pongs_answer = ws.hold();
                    if let Some(room) = ws.room() {
                        let k = (share.first_conn + j) / room.size;
                        w.member = Some(Box::new(Member {
                            target: ws_room::target(&ws.target, k, room.rooms),
                            captured: [0; ws_room::HEADER],
                        }));
                    }
                    w
                });
                Conn::new(proto, framing.capacity(), request_max, plan.tls().is_some())
            })
            .collect();
        if let Pace::Rate(r) = plan.pace {
            // Request k of the whole run is due at k / rate; connection j
            // takes requests j, j + c, j + 2c, ...
            for (j, c) in conns.iter_mut().enumerate() {
                c.due_ns = ((share.first_conn + j) as f64 * 1e9 / r) as u64;
            }
        }
        for (j, c) in conns.iter_mut().enumerate() {
            c.reader.want_server = true;
            c.cursor = schedule::start(share.first_conn + j, plan.connections, shared.cycle.len());
        }
        let timeout_ns = ns(plan.timeout);
        timer::precise_timers();
        let paced = matches!(plan.pace, Pace::Rate(_));
        // The largest answer expected: its body and room for its head.
        let response_max = shared
            .wires
            .iter()
            .filter_map(|w| w.check.body())
            .map(|b| b.len() + 512)
            .max()
            .unwrap_or(0);
        let stamped = paced
            && !prompt_reads_asked()
            && plan.tls().is_none()
            && !framing.buffered()
            && plan.keepalive()
            && plan.ws().is_none();
        let io = Backend::new(
            shared.io,
            share.conns,
            paced,
            shared.gather,
            response_max,
            stamped,
        )?;
        let stamped = stamped && matches!(io, Backend::Uring(_));
        let transport = Transport::new(&plan.transport, &plan.proto, shared.clock.now())?;
        let room_size = plan.room().map_or(0, |r| r.size);
        let rooms = (0..share.conns.checked_div(room_size).unwrap_or(0))
            .map(|k| Room::new(k * room_size, room_size, framing.capacity()))
            .collect();
        Ok(Worker {
            shared,
            thread: share.thread,
            clock: shared.clock,
            io,
            transport,
            conns,
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            framing,
            h2_templates: proto::h2::templates(plan),
            h2_config: H2Config {
                max_streams: framing.streams().unwrap_or(1) as u32,
                ..H2Config::default()
            },
            h3_templates: proto::h3::templates(plan),
            h3_answers: Vec::new(),
            h3_next_ns: u64::MAX,
            frame: Vec::with_capacity(if plan.ws().is_some() {
                request_max + 14
            } else {
                0
            }),
            plain: Vec::with_capacity(if framing.buffered() && plan.tls().is_some() {
                2 * READ_BUF
            } else {
                0
            }),
            deferring: false,
            rooms,
            room_size,
            wires: &shared.wires,
            cycle: &shared.cycle,
            keepalive: plan.keepalive(),
            pace: plan.pace,
            stats: Stats {
                paths: shared.wires.iter().map(|_| PathStats::default()).collect(),
                ..Stats::default()
            },
            interval: IntervalAcc::new(),
            interval_len_ns: ns(plan.interval),
            next_interval_ns: shared.measure_start_ns + ns(plan.interval),
            permits: share.permits,
            wakes: BinaryHeap::with_capacity(share.conns),
            opened: 0,
            in_flight: 0,
            sending: true,
            drain_until_ns: u64::MAX,
            interval_ns,
            timeout_ns,
            sweep_every_ns: (timeout_ns / 10).clamp(1_000_000, MAX_WAIT_NS),
            next_sweep_ns: 0,
            refused: 0,
            stamped,
            prompt_until_ns: 0,
            realtime_offset_ns: 0,
            answered_ns: None,
        })
    }

    fn run_loop(&mut self) -> End {
        let mut evs: Vec<Ev> = Vec::with_capacity(EVENTS);
        match self.pace {
            Pace::Closed => {}
            Pace::Rate(_) => {
                // Spread over time by the schedule: no burst to batch.
                for i in 0..self.conns.len() {
                    self.conns[i].wake_pending = true;
                    self.wakes.push(Reverse((self.conns[i].due_ns, i)));
                }
                self.opened = self.conns.len();
            }
        }
        loop {
            let now = self.clock.now();
            if self.opened < self.conns.len() && now < self.shared.end_ns {
                self.open_batch(now);
            }
            self.fire_due(now);
            // The transport's timers (QUIC's loss recovery, ACKs, idle).
            if matches!(self.transport, Transport::Quic(_)) {
                self.h3_next_ns = self.h3_timers(now);
            }
            if now >= self.next_sweep_ns {
                self.sweep(now);
            }
            if now >= self.next_interval_ns {
                self.roll(now);
            }
            self.publish();

            if self.shared.abort.load(Ordering::Relaxed) {
                self.abort_in_flight();
                return End::ServerGone;
            }
            if now >= self.shared.end_ns {
                self.abort_in_flight();
                return match self.shared.plan.stop {
                    Stop::Duration(_) => End::Duration,
                    Stop::Count(_) => End::Deadline,
                };
            }
            if self.sending && self.shared.interrupt.load(Ordering::Relaxed) {
                self.sending = false;
                self.drain_until_ns = now + ns(DRAIN);
            }
            if self.in_flight == 0 && !self.can_send() {
                self.count_up();
                return if self.sending {
                    End::Count
                } else {
                    End::Interrupted
                };
            }
            if now >= self.drain_until_ns {
                self.abort_in_flight();
                return End::Interrupted;
            }

            let due = self.wakes.peek().map(|Reverse((t, _))| *t);
            let wait = self.wait_ns(now);
            // A gathering wait counts completions, one receive per
            // connection however many of its requests are answered in it.
            let awaiting = self.in_flight.min(self.conns.len());
            let for_slot = self.stamped && self.slot_to_slot(now, due);
            if let Err(e) =
                self.io
                    .wait(now, wait, due, self.in_flight, awaiting, for_slot, &mut evs)
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    // The poller itself failed: nothing more can be measured.
                    self.shared
                        .abort_with(format!("the event loop failed: {e}"));
                }
                continue;
            }
            if self.stamped {
                self.realtime_offset_ns = super::io::realtime_ns().wrapping_sub(self.clock.now());
            }
            for ev in &evs {
                match *ev {
                    Ev::Ready { conn, closing } => self.on_event(conn, closing),
                    Ev::Sent { conn, tag, res } => self.on_sent(conn, tag, res),
                    Ev::Received {
                        conn,
                        tag,
                        res,
                        bid,
                        more,
                        stamp,
                    } => self.on_received(conn, tag, res, bid, more, stamp),
                }
            }
        }
    }

    /// Stamped: whether this turn sleeps to the next slot `due` (answers
    /// reaped there) rather than waking for the first answer. Not for a
    /// while after a connect, nor at the end (a spent -n, a drain: the last
    /// answers are waited for promptly), nor when the next slot is more
    /// than two slots' spacing away: then connections whose slot passed
    /// while their answer was out are missing from the wake-up queue, and
    /// only their answers let them send. Slept through, a burst after a
    /// stall made the next one, and a 10,000/s run fell seconds behind.
    fn slot_to_slot(&self, now: u64, due: Option<u64>) -> bool {
        let spacing = self.interval_ns / self.conns.len().max(1) as u64;
        now >= self.prompt_until_ns
            && self.can_send()
            && due.is_some_and(|t| t.saturating_sub(now) <= 2 * spacing)
    }

    /// Closed loop: starts the first request of the next [`OPEN_PER_TURN`]
    /// connections.
    fn open_batch(&mut self, now: u64) {
        let end = (self.opened + OPEN_PER_TURN).min(self.conns.len());
        for i in self.opened..end {
            self.next(i, now);
        }
        self.opened = end;
    }

    fn can_send(&self) -> bool {
        self.sending && self.permits != Some(0)
    }

    /// How long the poll may sleep: until the earliest of the wake-ups,
    /// the sweep, the interval's end, the run's end and the drain's, and
    /// QUIC's earliest timer (loss recovery, acknowledgements, idle, the
    /// handshake's wait: `h3_timers`); the loop needs nothing else.
    fn wait_ns(&self, now: u64) -> u64 {
        if self.opened < self.conns.len() {
            return 0; // more connections to open: reap, then open them
        }
        let mut until = now + MAX_WAIT_NS;
        if let Some(Reverse((t, _))) = self.wakes.peek() {
            until = until.min(*t);
        }
        until = until
            .min(self.next_sweep_ns)
            .min(self.next_interval_ns)
            .min(self.shared.end_ns)
            .min(self.drain_until_ns)
            .min(self.h3_next_ns);
        until.saturating_sub(now)
    }

    fn on_event(&mut self, i: usize, closing: bool) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if conn.proto.quic().is_some() {
            self.h3_readable(i);
            return;
        }
        if conn.buffered() && matches!(conn.state, State::Reading | State::Writing) {
            if conn.state == State::Writing {
                self.flush_out(i);
            }
            self.read_buffered(i, closing);
            return;
        }
        match conn.state {
            State::Reading => self.read(i, closing),
            State::Connecting => {
                let now = self.clock.now();
                self.connecting(i, now);
            }
            State::Writing => {
                let now = self.clock.now();
                self.send(i, now);
            }
            State::Idle => {
                if !conn.idle_event(&mut self.buf) {
                    conn.close(&mut self.io);
                }
            }
        }
    }

    /// io_uring: a send of connection `i` ended.
    fn on_sent(&mut self, i: usize, tag: u32, res: i32) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if self.transport.is_tls() || conn.buffered() {
            self.out_sent(i, res);
            return;
        }
        if conn.state == State::Idle || tag != conn.seq & TAG_MASK {
            return; // for a request that already ended
        }
        let now = self.clock.now();
        let connecting = conn.state == State::Connecting;
        if res >= 0 && conn.state == State::Reading {
            return; // a quiet send that was short, then failed: the receive tells
        }
        if res < 0 {
            let e = io::Error::from_raw_os_error(-res);
            if connecting {
                self.fail(i, Failure::Connect, now, refused(&e));
            } else {
                self.fail(i, Failure::Write, now, false);
            }
            return;
        }
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        conn.written += res as usize;
        if connecting {
            self.refused = 0;
            if conn.ring.head().measured {
                self.stats.connections += 1;
                self.stats
                    .connect_us
                    .saturating_record(us(now - conn.connect_ns));
            }
        }
        if conn.written < request.len() {
            conn.state = State::Writing;
            self.submit(i);
        } else {
            conn.state = State::Reading;
            if conn.ring.head().measured {
                self.stats.bytes_sent += request.len() as u64;
            }
        }
    }

    /// io_uring: connection `i`'s receive delivered bytes, the end of file
    /// or an error; `stamp`: when the kernel received them (real time, ns;
    /// 0: unknown).
    fn on_received(
        &mut self,
        i: usize,
        tag: u32,
        res: i32,
        bid: Option<u16>,
        more: bool,
        stamp: u64,
    ) {
        let Backend::Uring(u) = &mut self.io else {
            return;
        };
        let Some(conn) = self.conns.get_mut(i) else {
            u.recycle(bid);
            return;
        };
        if conn.stream.is_none() || tag != conn.epoch & TAG_MASK {
            u.recycle(bid); // for a socket already closed
            return;
        }
        let mut rearm = !more;
        if res == -libc::ENOBUFS {
            // No provided buffer was free: the bytes wait in the socket.
        } else if conn.state == State::Idle {
            // Bytes unasked for, the server's close, or an error: dropped
            // quietly, as on epoll. TLS records without plaintext (a
            // session ticket) are not unasked for.
            let kept = match (res > 0, bid) {
                (true, Some(b)) if conn.tls.is_some() => conn.idle_tls(u.buf(b, res as usize)),
                _ => false,
            };
            u.recycle(bid);
            if !kept {
                conn.close(&mut self.io);
                return;
            }
            self.send_out(i);
        } else if res > 0 && conn.buffered() {
            let n = res as usize;
            if let Some(b) = bid {
                self.buf[..n].copy_from_slice(u.buf(b, n));
            }
            u.recycle(bid);
            let buf = std::mem::take(&mut self.buf);
            self.deferring = true;
            let now = self.clock.now();
            self.absorb(i, &buf[..n], now);
            self.deferring = false;
            self.buf = buf;
            self.flush_out(i);
        } else if res > 0 {
            let check = self.wires[usize::from(conn.ring.head().path)].check;
            let mut r = Received::new();
            let data = match bid {
                Some(b) => u.buf(b, res as usize),
                None => &[][..],
            };
            let done = conn.chunk(data, check, self.clock.now(), &mut r);
            u.recycle(bid);
            debug_assert!(done || matches!(r.outcome, Outcome::Pending));
            if conn.tls.is_some() {
                // The handshake's next flight (with the request sealed in it).
                self.send_out(i);
            }
            if stamp != 0 {
                // Reaped at a slot, maybe long after it landed.
                let at = stamp.wrapping_sub(self.realtime_offset_ns).min(r.now);
                r.first_byte_ns = r.first_byte_ns.map(|t| t.min(at));
                self.answered_ns = Some(at);
            }
            self.received(i, r);
            self.answered_ns = None;
        } else {
            rearm = false;
            let mut r = Received::new();
            r.now = self.clock.now();
            r.outcome = if res == 0 && conn.buffered() {
                self.peer_closed(i, r.now);
                return;
            } else if res == 0 {
                let check = self.wires[usize::from(conn.ring.head().path)].check;
                conn.end_of_file(check)
            } else if conn.state == State::Reading {
                Outcome::Failed(Failure::Receive)
            } else {
                // Before the request was out: the connect's error.
                let e = io::Error::from_raw_os_error(-res);
                let now = r.now;
                self.fail(i, Failure::Connect, now, refused(&e));
                return;
            };
            self.received(i, r);
            // The peer is gone: whatever the response made of it, so is
            // the connection.
            let conn = &mut self.conns[i];
            if conn.stream.is_some() && conn.state == State::Idle {
                conn.close(&mut self.io);
            }
        }
        let conn = &mut self.conns[i];
        if rearm && conn.stream.is_some() && tag == conn.epoch & TAG_MASK {
            if let (Backend::Uring(u), Some(fd)) = (&mut self.io, conn.fd()) {
                u.recv(i, tag, fd);
            }
        }
    }

    /// Begins a request on connection `i`; `origin` is where its latency
    /// counts from. False if none may begin (no permit left, stopping).
    #[inline]
    fn start(&mut self, i: usize, now: u64, origin: u64) -> bool {
        let measured = origin >= self.shared.measure_start_ns;
        let conn = &mut self.conns[i];
        // A room member still receives the others' messages.
        let rests = conn.ring.is_empty() && (self.room_size == 0 || conn.stream.is_none());
        if !self.sending || now >= self.shared.end_ns {
            if rests {
                conn.state = State::Idle;
            }
            return false;
        }
        if measured {
            if let Some(p) = &mut self.permits {
                if *p == 0 {
                    if rests {
                        conn.state = State::Idle;
                    }
                    return false;
                }
                *p -= 1;
            }
            if self.room_size > 0 {
                self.stats.room_messages += 1;
            }
        }
        // The next path of this connection's walk through the cycle.
        let path = self.cycle[conn.cursor as usize];
        conn.cursor += 1;
        if conn.cursor as usize == self.cycle.len() {
            conn.cursor = 0;
        }
        if measured && self.interval_ns > 0 {
            self.stats
                .schedule_lateness_us
                .saturating_record(us(now.saturating_sub(origin)));
        }
        let first = conn.ring.is_empty();
        conn.ring.push(Slot {
            // Below `schedule::MAX_PATHS` (256): `schedule::cycle` refuses more.
            path: path as u8,
            origin_ns: origin,
            sent_ns: now,
            deadline_ns: now.saturating_add(self.timeout_ns),
            measured,
            key: 0,
            pending: self.room_size as u16,
        });
        // A room member's reader may be amid another member's message.
        if first && self.room_size == 0 {
            conn.first_byte = false;
            conn.reader.reset(self.wires[usize::from(path)].head);
        }
        self.in_flight += 1;
        if conn.buffered() {
            return self.start_buffered(i, now, path, measured);
        }
        conn.written = 0;
        if let Some(session) = &mut conn.tls {
            session.queued = false;
        }
        if conn.stream.is_some() {
            self.send(i, now);
            return true;
        }
        self.open(i, now);
        true
    }

    /// A buffered framing: the request goes into the connection's out
    /// buffer, written with the others started in the same turn.
    fn start_buffered(&mut self, i: usize, now: u64, path: u16, measured: bool) -> bool {
        if self.framing.is_h3() {
            return self.h3_start(i, now);
        }
        let uring = matches!(self.io, Backend::Uring(_));
        let opcode = self.opcode();
        let bytes = self.wires[usize::from(path)].bytes;
        let h2 = self.framing.is_h2();
        if measured && !h2 {
            self.stats.bytes_sent += bytes.len() as u64;
        }
        let conn = &mut self.conns[i];
        if conn.stream.is_none() {
            // Queued after the open: over TLS into the new session.
            conn.written = 0;
            if !self.open_socket(i, now) {
                return true;
            }
            // The protocol's opening, then the request.
            let conn = &mut self.conns[i];
            match &mut conn.proto {
                Proto::Ws(_) => {
                    // Messages wait for the upgrade (`upgraded`).
                    if let Some(plan) = self.shared.plan.ws() {
                        conn.queue_opening(plan, uring);
                    }
                }
                Proto::H2(h2) => {
                    // A new codec per socket; one stream until the server's
                    // SETTINGS say how many it takes.
                    h2.open(&self.h2_templates, self.h2_config);
                    conn.ring.set_limit(1);
                    if !self.h2_encode(i, path, measured, uring) {
                        return true;
                    }
                }
                Proto::H1 | Proto::Pipelined => conn.queue(bytes, uring),
                Proto::H3(_) => {} // `h3_start`
            }
            self.kick(i, now);
            return true;
        }
        match &mut conn.proto {
            Proto::Ws(ws) if !ws.upgraded => return true, // sent once upgraded
            Proto::Ws(_) if self.room_size > 0 => {
                let room = &self.rooms[i / self.room_size];
                if room.joined < room.members {
                    return true; // sent once the room is in (`upgraded`)
                }
                let newest = conn.ring.len() - 1;
                let key = conn.ring.nth(newest).key;
                Self::queue_room_frame(
                    conn,
                    &mut self.frame,
                    opcode,
                    bytes,
                    i % self.room_size,
                    key,
                    room.epoch,
                    uring,
                );
            }
            Proto::Ws(_) => conn.queue_frame(&mut self.frame, opcode, bytes, uring),
            Proto::H2(h2) => {
                h2.out.clear();
                if !self.h2_encode(i, path, measured, uring) {
                    return true;
                }
            }
            Proto::H1 | Proto::Pipelined => conn.queue(bytes, uring),
            Proto::H3(_) => {} // `h3_start`
        }
        let conn = &mut self.conns[i];
        if conn.state == State::Idle {
            conn.state = State::Reading;
        }
        if !self.deferring {
            self.flush_out(i);
        }
        true
    }

    /// Opens connection `i` for the request just started and writes it.
    fn open(&mut self, i: usize, now: u64) {
        if self.open_socket(i, now) {
            self.kick(i, now);
        }
    }

    /// Starts connection `i`'s connect; false if it failed (counted).
    fn open_socket(&mut self, i: usize, now: u64) -> bool {
        if self.stamped {
            self.prompt_until_ns = now + PROMPT_AFTER_CONNECT_NS;
        }
        let conn = &mut self.conns[i];
        conn.connect_ns = now;
        let tls = self.transport.client();
        match conn.open(self.shared.plan.addr, &mut self.io, i, self.keepalive, tls) {
            Ok(()) => {
                conn.state = State::Connecting;
                conn.ring.head_mut().sent_ns = now;
                true
            }
            Err(e) => {
                conn.close(&mut self.io);
                self.fail(i, Failure::Connect, now, refused(&e));
                false
            }
        }
    }

    /// The first write on a connection being established (its connect
    /// probe).
    fn kick(&mut self, i: usize, _now: u64) {
        if let Backend::Uring(_) = self.io {
            // Sent once the handshake is done, within this turn's
            // submission.
            self.submit(i);
            return;
        }
        // On loopback the handshake is usually complete when connect()
        // returns: try the write now, not after a poll.
        let now = self.clock.now();
        self.connecting(i, now);
    }

    /// A buffered framing: writes what connection `i` has queued (io_uring:
    /// sends it, unless a send of it is still out).
    fn flush_out(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if conn.stream.is_none() || conn.state == State::Connecting {
            return; // the connect's write takes it
        }
        if let Backend::Uring(_) = self.io {
            self.send_out(i);
            return;
        }
        match conn.write(&[]) {
            Ok(true) => {
                if !conn.ring.is_empty() {
                    conn.state = State::Reading;
                }
            }
            Ok(false) => conn.state = State::Writing,
            Err(_) => {
                let now = self.clock.now();
                self.fail(i, Failure::Write, now, false);
            }
        }
    }

    /// io_uring: queues (the rest of) connection `i`'s request. On an
    /// established connection the send is quiet (only a failure completes)
    /// and the request counts as written; a connecting one's completion
    /// times the connect.
    #[inline]
    fn submit(&mut self, i: usize) {
        if self.transport.is_tls() || self.framing.buffered() {
            self.submit_out(i);
            return;
        }
        let conn = &mut self.conns[i];
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        conn.seq = conn.seq.wrapping_add(1);
        let quiet = conn.state == State::Writing && conn.written == 0;
        if let (Backend::Uring(u), Some(fd)) = (&mut self.io, conn.fd()) {
            u.send(i, conn.seq & TAG_MASK, fd, &request[conn.written..], quiet);
        }
        if quiet {
            conn.state = State::Reading;
            if conn.ring.head().measured {
                self.stats.bytes_sent += request.len() as u64;
            }
        }
    }

    /// Writes the request on a connection being established: a write that
    /// would block with nothing written means the handshake is still going
    /// on; an error is the connect's (refused, unreachable).
    fn connecting(&mut self, i: usize, now: u64) {
        let conn = &mut self.conns[i];
        if !conn.buffered() {
            conn.ring.head_mut().sent_ns = now;
        }
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        match conn.write(request) {
            Ok(false) if conn.written == 0 => return,
            Ok(done) => {
                if let Some(session) = &mut conn.tls {
                    session.began_ns = now;
                }
                if conn.ring.head().measured {
                    self.stats.connections += 1;
                    self.stats
                        .connect_us
                        .saturating_record(us(now - conn.connect_ns));
                    if done && !conn.buffered() {
                        self.stats.bytes_sent += request.len() as u64;
                    }
                }
                conn.state = if done { State::Reading } else { State::Writing };
            }
            Err(e) => {
                self.fail(i, Failure::Connect, now, refused(&e));
                return;
            }
        }
        self.refused = 0;
    }

    /// Writes (the rest of) the request.
    #[inline]
    fn send(&mut self, i: usize, now: u64) {
        let conn = &mut self.conns[i];
        if conn.written == 0 {
            conn.ring.head_mut().sent_ns = now;
        }
        if let Backend::Uring(_) = self.io {
            conn.state = State::Writing;
            self.submit(i);
            return;
        }
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        match conn.write(request) {
            Ok(true) => {
                conn.state = State::Reading;
                if conn.ring.head().measured {
                    self.stats.bytes_sent += request.len() as u64;
                }
            }
            Ok(false) => conn.state = State::Writing,
            Err(_) => self.fail(i, Failure::Write, now, false),
        }
    }

    #[inline]
    fn read(&mut self, i: usize, closing: bool) {
        let conn = &mut self.conns[i];
        let check = self.wires[usize::from(conn.ring.head().path)].check;
        let r = conn.read(&mut self.buf, check, closing, &self.clock);
        self.received(i, r);
    }

    /// io_uring, TLS or a buffered framing: hands (the rest of) connection
    /// `i`'s request to its session (TLS) and sends what the connection's
    /// out buffer holds. The request counts as written once it is queued.
    fn submit_out(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        if let Some(session) = &mut conn.tls {
            session.queue(request);
        }
        if conn.state == State::Writing {
            conn.state = State::Reading;
            if conn.ring.head().measured && !conn.buffered() {
                self.stats.bytes_sent += request.len() as u64;
            }
        }
        self.send_out(i);
    }

    /// io_uring: sends what connection `i` has ready to go out (TLS: the
    /// session's ciphertext; a buffered framing: its queued requests),
    /// unless a send of its is still out (its completion sends the rest).
    fn send_out(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let (Backend::Uring(u), Some(fd)) = (&mut self.io, conn.fd()) else {
            return;
        };
        let Some(out) = conn.out.as_deref_mut() else {
            return;
        };
        if out.busy {
            return;
        }
        if let Some(session) = &mut conn.tls {
            if out.pending().is_empty() {
                session.fill(&mut out.bytes);
            }
        } else {
            out.unstage();
        }
        if out.pending().is_empty() {
            return;
        }
        conn.seq = conn.seq.wrapping_add(1);
        out.busy = true;
        out.epoch = conn.epoch;
        // The buffer is not touched until this send completes (`Outbox`).
        u.send(i, conn.seq & TAG_MASK, fd, out.pending(), false);
    }

    /// io_uring: a send of connection `i`'s out buffer ended.
    fn out_sent(&mut self, i: usize, res: i32) {
        let now = self.clock.now();
        let conn = &mut self.conns[i];
        let Some(out) = conn.out.as_deref_mut() else {
            return;
        };
        out.busy = false;
        if out.epoch != conn.epoch || conn.stream.is_none() {
            // For a socket already closed: its bytes are no longer wanted;
            // the socket open now may have its own waiting.
            out.bytes.clear();
            out.at = 0;
            self.send_out(i);
            return;
        }
        let connecting = conn.state == State::Connecting;
        if res < 0 {
            if conn.state == State::Idle {
                conn.close(&mut self.io);
                return;
            }
            let e = io::Error::from_raw_os_error(-res);
            if connecting {
                self.fail(i, Failure::Connect, now, refused(&e));
            } else {
                self.fail(i, Failure::Write, now, false);
            }
            return;
        }
        out.advance(res as usize);
        if connecting {
            // The ClientHello left: the connect is done, the handshake begins.
            self.refused = 0;
            if let Some(session) = &mut conn.tls {
                session.began_ns = now;
            }
            conn.state = State::Reading;
            if conn.ring.head().measured {
                self.stats.connections += 1;
                self.stats
                    .connect_us
                    .saturating_record(us(now - conn.connect_ns));
                if !conn.buffered() {
                    let request = self.wires[usize::from(conn.ring.head().path)].bytes;
                    self.stats.bytes_sent += request.len() as u64;
                }
            }
        }
        self.send_out(i);
    }

    /// Queues a wake-up of connection `i` at `at`, unless one is queued.
    #[inline]
    fn wake(&mut self, i: usize, at: u64) {
        let conn = &mut self.conns[i];
        if !conn.wake_pending {
            conn.wake_pending = true;
            self.wakes.push(Reverse((at, i)));
        }
    }

    /// Schedules connection `i`'s next requests: closed loop, as many as
    /// its framing lets be in flight; `--rate`, those whose time has come.
    #[inline]
    fn next(&mut self, i: usize, now: u64) {
        loop {
            let conn = &mut self.conns[i];
            if conn.ring.is_full() {
                return; // a completion calls again
            }
            if conn.proto.draining() {
                // HTTP/2 after a GOAWAY: once the last stream ends, the
                // socket closes (and stops draining) and the next request
                // opens a new one.
                if !conn.ring.is_empty() {
                    return;
                }
                conn.close(&mut self.io);
                conn.state = State::Idle;
            }
            let started = match self.pace {
                Pace::Closed => self.start(i, now, now),
                Pace::Rate(_) => {
                    let due = conn.due_ns;
                    if due > now {
                        self.wake(i, due);
                        return;
                    }
                    conn.due_ns += self.interval_ns;
                    self.start(i, now, due)
                }
            };
            if !started || !self.conns[i].is_open() {
                return; // no permit, stopping, or a failed connect (retried)
            }
        }
    }

    /// Starts the requests whose time has come.
    fn fire_due(&mut self, now: u64) {
        while let Some(&Reverse((t, i))) = self.wakes.peek() {
            if t > now {
                break;
            }
            self.wakes.pop();
            self.conns[i].wake_pending = false;
            // Its slot (or, after a connect retry, the next one).
            self.next(i, now);
        }
    }

    /// Fails the requests that passed their deadline.
    fn sweep(&mut self, now: u64) {
        self.next_sweep_ns = now + self.sweep_every_ns;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if !c.ring.is_empty() && c.ring.head().deadline_ns <= now {
                self.fail(i, Failure::Timeout, now, false);
            }
        }
    }

    /// Hands the finished interval to the sink.
    fn roll(&mut self, now: u64) {
        let start = self.shared.measure_start_ns;
        let index = (now.saturating_sub(start) / self.interval_len_ns) as u32;
        self.shared
            .sink
            .hand_in(self.thread, &mut self.interval, index);
        self.next_interval_ns = start + (u64::from(index) + 1) * self.interval_len_ns;
    }

    /// WebSocket: the connections still upgraded and open at the end.
    fn count_up(&mut self) {
        self.stats.ws_up_at_end = self
            .conns
            .iter()
            .filter(|c| c.stream.is_some() && c.proto.ws().is_some_and(|w| w.upgraded))
            .count() as u64;
    }

    /// Requests in flight when the run stops: dropped, counted as aborted.
    fn abort_in_flight(&mut self) {
        self.count_up();
        for c in &mut self.conns {
            let aborted = &mut self.stats.aborted;
            c.ring.drain(|slot| {
                if slot.measured {
                    // A room message: each delivery still owed.
                    *aborted += u64::from(slot.pending.max(1));
                }
            });
            c.state = State::Idle;
            c.close(&mut self.io);
        }
        self.in_flight = 0;
    }

    /// A buffered framing: reads what is there and hands every response in
    /// it to its request, then writes the requests that started meanwhile
    /// in one go.
    fn read_buffered(&mut self, i: usize, closing: bool) {
        use std::io::Read;
        self.deferring = true;
        loop {
            let conn = &mut self.conns[i];
            if conn.tls.as_ref().is_some_and(|s| s.wants_write()) && conn.flush_tls().is_err() {
                let now = self.clock.now();
                self.fail(i, Failure::Write, now, false);
                break;
            }
            let Some(mut stream) = conn.stream.as_ref() else {
                break;
            };
            let epoch = conn.epoch;
            let mut buf = std::mem::take(&mut self.buf);
            let res = stream.read(&mut buf);
            let now = self.clock.now();
            match res {
                Ok(0) => {
                    self.buf = buf;
                    self.peer_closed(i, now);
                    break;
                }
                Ok(n) => {
                    self.absorb(i, &buf[..n], now);
                    self.buf = buf;
                    let conn = &self.conns[i];
                    if conn.epoch != epoch
                        || conn.stream.is_none()
                        || (n < self.buf.len() && !closing)
                    {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.buf = buf;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.buf = buf,
                Err(_) => {
                    self.buf = buf;
                    self.fail(i, Failure::Receive, now, false);
                    break;
                }
            }
        }
        self.deferring = false;
        self.flush_out(i);
    }

    /// A buffered framing: bytes received on connection `i` at `now`
    /// (TLS: ciphertext, whose plaintext is handed on).
    fn absorb(&mut self, i: usize, data: &[u8], now: u64) {
        let Some(session) = &mut self.conns[i].tls else {
            self.dispatch(i, data, now);
            return;
        };
        let mut plain = std::mem::take(&mut self.plain);
        plain.clear();
        let handshaking = session.is_handshaking();
        let t = session.receive(data, |p| plain.extend_from_slice(p));
        if let Some(kind) = t.handshake {
            self.handshake_done(i, kind, now);
        }
        if let Some(e) = &t.error {
            if handshaking {
                self.handshake_failed(e);
                self.fail(i, Failure::Handshake, now, false);
            } else {
                self.fail(i, Failure::Receive, now, false);
            }
        } else {
            self.dispatch(i, &plain, now);
            if t.closed && self.conns[i].stream.is_some() {
                self.peer_closed(i, now);
            }
        }
        self.plain = plain;
    }

    /// A buffered framing: received plaintext goes to connection `i`'s
    /// protocol.
    fn dispatch(&mut self, i: usize, data: &[u8], now: u64) {
        match self.conns[i].proto {
            Proto::Ws(_) => self.dispatch_ws(i, data, now),
            Proto::H2(_) => self.dispatch_h2(i, data, now),
            Proto::H1 | Proto::Pipelined => self.dispatch_h1(i, data, now),
            Proto::H3(_) => {} // its bytes come through QUIC (`worker/h3.rs`)
        }
    }

    /// A buffered framing: the peer closed connection `i`. The response
    /// being read ends there (if the close delimits it); every other
    /// request in flight fails.
    fn peer_closed(&mut self, i: usize, now: u64) {
        if self.room_size > 0 {
            // A member gone: its room's deliveries cannot all arrive.
            self.fail(i, Failure::Receive, now, false);
            return;
        }
        let conn = &mut self.conns[i];
        if conn.ring.is_empty() {
            conn.close(&mut self.io);
            conn.state = State::Idle;
            return;
        }
        if self.framing.is_h2() {
            // No response ends at a close in HTTP/2: the rest fail.
            self.fail(i, Failure::Receive, now, false);
            return;
        }
        let check = self.wires[usize::from(conn.ring.head().path)].check;
        let mut r = Received::new();
        r.now = now;
        r.outcome = conn.end_of_file(check);
        // Nothing more comes on this connection: the rest fail in `complete`.
        conn.reader.close = true;
        self.received(i, r);
    }

    fn publish(&self) {
        let p = &self.shared.progress[self.thread];
        p.requests.store(self.stats.requests(), Ordering::Relaxed);
        p.errors
            .store(self.stats.failures.total(), Ordering::Relaxed);
    }
}

/// `--h2` to a server that does not pick h2 by ALPN, in one line.
#[cold]
fn no_h2(shared: &Shared<'_>) -> String {
    format!(
        "the server at {} did not pick h2 by ALPN (it serves no HTTP/2 over TLS): drop --h2",
        shared.plan.addr
    )
}

/// `HARNESS_PROMPT_READS=1`: a `--rate` run reads each answer the moment
/// it lands (a wake-up for each send and one for each answer), as before
/// stamped receives; for A/B benches (`harness/bench/rate-vs-k6.sh`).
fn prompt_reads_asked() -> bool {
    std::env::var_os("HARNESS_PROMPT_READS").is_some_and(|v| v == "1")
}

fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionRefused
}
