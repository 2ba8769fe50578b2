//! One engine thread: an edge-triggered event loop over its share of the
//! connections. This is the only request loop; [`Stop`] decides when it
//! ends and [`Pace`] when each connection sends its next request.
//!
//! Per-thread everything: the statistics (the totals and each path's), the
//! `-n` quota (no shared counter per request), the read buffer, the wake-up
//! queue of the `--rate` schedule. Across threads only the Ctrl-C/abort
//! flags (read once per loop turn), the progress counters (written once per
//! loop turn) and the interval sink (once per interval) are shared.
//!
//! The transport is a parameter, not a copy: over TLS the same loop runs,
//! each connection's bytes going through its session (`conn.tls`), and the
//! few places where TLS differs (io_uring sends of the connection's own
//! ciphertext, the handshake's end) branch on it here.
//!
//! Over 500 lines on purpose: it is the one request loop (connect, write,
//! read, judge, pace, stop); split, the hot path would no longer read as one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::Ordering;

use super::conn::{feed_chunk, Conn, Outcome, Received, State};
use super::framing::{Framing, Slot};
use super::h2::{self, Event as H2Event, H2Client};
use super::io::{Backend, Ev, TAG_MASK};
use super::timer;
use super::tls::{self, Handshake};
use super::ws::{WsConn, WsFeed};
use super::ws_room::{self, Arrival, Room};
use super::{ns, schedule, Clock, End, Pace, Share, Shared, Stop, Wire, DRAIN};
use crate::intervals::IntervalAcc;
use crate::stats::{Failure, PathStats, Stats};

/// The loop turns at least this often (Ctrl-C, deadlines, the time series).
const MAX_WAIT_NS: u64 = 100_000_000;
/// A failed connect is retried after this long (closed loop).
const CONNECT_RETRY_NS: u64 = 10_000_000;
/// This many refused connects in a row, with no response in between: the
/// server is gone and the run ends.
const REFUSED_LIMIT: u32 = 10;
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
    /// TLS: the thread's client (its configuration and session cache).
    tls: Option<tls::Client>,
    /// TLS: handshakes that failed in a row with none completed yet.
    handshake_fails: u32,
    handshakes_ok: u64,
    conns: Vec<Conn>,
    buf: Box<[u8]>,
    /// How requests are framed (see `framing`).
    framing: Framing,
    /// HTTP/2: each path's request, HPACK-encoded once, and the codec's
    /// configuration (a connection's codec is made from them per socket).
    h2_templates: Vec<h2::Template>,
    h2_config: h2::Config,
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
}

/// Runs one thread's share of the plan to its end.
pub(crate) fn run(shared: &Shared<'_>, share: Share) -> io::Result<Output> {
    let together = EndTogether::new(shared);
    let mut w = Worker::new(shared, &share)?;
    let end = w.run_loop();
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

/// Keeps a thread's connections open, at a timed end, until every
/// thread's loop has ended. A thread that closed its connections at its
/// own end would free the server for another thread still in its loop: a
/// worker-pool server whose workers held thread A's WebSockets answered
/// thread B's waiting upgrade in B's last moment, and B counted a
/// connection the server never held during the run. Arrives on drop too,
/// so an early error or a panic never leaves the other threads waiting.
struct EndTogether<'a> {
    ended: &'a std::sync::atomic::AtomicUsize,
    threads: usize,
    arrived: bool,
}

impl<'a> EndTogether<'a> {
    fn new(shared: &'a Shared<'_>) -> Self {
        EndTogether {
            ended: &shared.threads_ended,
            threads: shared.progress.len(),
            arrived: false,
        }
    }

    /// Arrives, and returns once every thread has.
    fn wait(mut self) {
        self.arrive();
    }

    fn arrive(&mut self) {
        if std::mem::replace(&mut self.arrived, true) {
            return;
        }
        self.ended.fetch_add(1, Ordering::AcqRel);
        while self.ended.load(Ordering::Acquire) < self.threads {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

impl Drop for EndTogether<'_> {
    fn drop(&mut self) {
        self.arrive();
    }
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
        let mut conns: Vec<Conn> = (0..share.conns)
            .map(|j| {
                let mut c = Conn::new(plan.framing, request_max);
                if let Some(ws) = &plan.ws {
                    let conn_seed =
                        seed ^ ((share.first_conn + j) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let mut w = WsConn::new(request_max, conn_seed);
                    w.pongs_answer = ws.hold;
                    if let Some(room) = &ws.room {
                        let k = (share.first_conn + j) / room.size;
                        w.target = Some(ws_room::target(&ws.target, k, room.rooms));
                        w.capture = ws_room::HEADER;
                    }
                    c.ws = Some(Box::new(w));
                }
                c
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
        let io = Backend::new(shared.io, share.conns, paced, shared.gather, response_max)?;
        let tls = plan.tls.as_ref().map(tls::Client::new).transpose()?;
        let room_size = plan.room().map_or(0, |r| r.size);
        let rooms = (0..share.conns.checked_div(room_size).unwrap_or(0))
            .map(|k| Room::new(k * room_size, room_size, plan.framing.capacity()))
            .collect();
        Ok(Worker {
            shared,
            thread: share.thread,
            clock: shared.clock,
            io,
            tls,
            handshake_fails: 0,
            handshakes_ok: 0,
            conns,
            buf: vec![0u8; READ_BUF].into_boxed_slice(),
            framing: plan.framing,
            h2_templates: h2_templates(plan),
            h2_config: h2::Config {
                max_streams: plan.framing.streams().unwrap_or(1) as u32,
                ..h2::Config::default()
            },
            plain: Vec::with_capacity(if plan.framing.buffered() && plan.tls.is_some() {
                2 * READ_BUF
            } else {
                0
            }),
            deferring: false,
            rooms,
            room_size,
            wires: &shared.wires,
            cycle: &shared.cycle,
            keepalive: plan.keepalive,
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
            if let Err(e) = self
                .io
                .wait(now, wait, due, self.in_flight, awaiting, &mut evs)
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    // The poller itself failed: nothing more can be measured.
                    self.shared
                        .abort_with(format!("the event loop failed: {e}"));
                }
                continue;
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
                    } => self.on_received(conn, tag, res, bid, more),
                }
            }
        }
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

    /// How long the poll may sleep.
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
            .min(self.drain_until_ns);
        until.saturating_sub(now)
    }

    fn on_event(&mut self, i: usize, closing: bool) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        if conn.buffered && matches!(conn.state, State::Reading | State::Writing) {
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
        if self.tls.is_some() || conn.buffered {
            self.tls_sent(i, res);
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
    /// or an error.
    fn on_received(&mut self, i: usize, tag: u32, res: i32, bid: Option<u16>, more: bool) {
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
            self.tls_pump(i);
        } else if res > 0 && conn.buffered {
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
                self.tls_pump(i);
            }
            self.received(i, r);
        } else {
            rearm = false;
            let mut r = Received::new();
            r.now = self.clock.now();
            r.outcome = if res == 0 && conn.buffered {
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
            path,
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
        if conn.buffered {
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
            let conn = &mut self.conns[i];
            if let Some(plan) = &self.shared.plan.ws {
                // Messages wait for the upgrade (`upgraded`).
                conn.queue_opening(plan, uring);
            } else if h2 {
                // A new codec per socket; one stream until the server's
                // SETTINGS say how many it takes.
                let mut codec = H2Client::new(self.h2_templates.clone(), self.h2_config);
                conn.h2_out.clear();
                codec.opening(&mut conn.h2_out);
                conn.h2 = Some(Box::new(codec));
                conn.ring.set_limit(1);
                conn.draining = false;
                if !self.h2_encode(i, path, measured, uring) {
                    return true;
                }
            } else {
                conn.queue(bytes, uring);
            }
            self.kick(i, now);
            return true;
        }
        match &conn.ws {
            Some(ws) if !ws.upgraded => return true, // sent once upgraded
            Some(_) if self.room_size > 0 => {
                let room = &self.rooms[i / self.room_size];
                if room.joined < room.members {
                    return true; // sent once the room is in (`upgraded`)
                }
                let newest = conn.ring.len() - 1;
                let key = conn.ring.nth(newest).key;
                Self::queue_room_frame(
                    conn,
                    opcode,
                    bytes,
                    i % self.room_size,
                    key,
                    room.epoch,
                    uring,
                );
            }
            Some(_) => conn.queue_frame(opcode, bytes, uring),
            None if h2 => {
                conn.h2_out.clear();
                if !self.h2_encode(i, path, measured, uring) {
                    return true;
                }
            }
            None => conn.queue(bytes, uring),
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

    /// HTTP/2: encodes the newest request in flight on connection `i` (of
    /// path `path`) after whatever `h2_out` holds, keys its slot by its
    /// stream id and queues the bytes. False if the codec refused it (the
    /// connection failed).
    fn h2_encode(&mut self, i: usize, path: u16, measured: bool, uring: bool) -> bool {
        let conn = &mut self.conns[i];
        let Some(codec) = conn.h2.as_mut() else {
            return false;
        };
        match codec.encode(usize::from(path), &mut conn.h2_out) {
            Ok(stream) => {
                let newest = conn.ring.len() - 1;
                conn.ring.nth_mut(newest).key = stream;
                if measured {
                    self.stats.bytes_sent += conn.h2_out.len() as u64;
                }
                let out = std::mem::take(&mut conn.h2_out);
                conn.queue(&out, uring);
                conn.h2_out = out;
                true
            }
            Err(_) => {
                let now = self.clock.now();
                self.fail(i, Failure::Exception, now, false);
                false
            }
        }
    }

    /// The opcode of a WebSocket run's messages: binary or text.
    fn opcode(&self) -> u8 {
        match &self.shared.plan.ws {
            Some(w) if w.hold => 9,
            Some(w) if !w.binary => 1,
            _ => 2,
        }
    }

    /// A room message: its header (member, sequence, epoch), then the
    /// plan's message after the header's bytes, framed and queued.
    fn queue_room_frame(
        conn: &mut super::conn::Conn,
        opcode: u8,
        message: &[u8],
        member: usize,
        seq: u32,
        epoch: u32,
        uring: bool,
    ) {
        let Some(ws) = conn.ws.as_mut() else {
            return;
        };
        let header = ws_room::header(member as u32, seq, epoch);
        let rest = message.get(ws_room::HEADER..).unwrap_or(&[]);
        ws.frame_parts(opcode, &header, rest);
        let scratch = std::mem::take(&mut ws.scratch);
        conn.queue(&scratch, uring);
        if let Some(ws) = conn.ws.as_mut() {
            ws.scratch = scratch;
        }
    }

    /// WebSocket: connection `i`'s upgrade completed at `now`: the
    /// messages started meanwhile are sent, each timed from here (closed
    /// loop) or from its intended send (`--rate`). A room member's wait
    /// for the whole room (`room_in`).
    fn upgraded(&mut self, i: usize, now: u64) {
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
            conn.queue_frame(opcode, self.wires[usize::from(path)].bytes, uring);
        }
    }

    /// WebSocket: whether connection `i`'s upgrade, answered at `now`,
    /// counts: before the end, and for a hold whenever it came (a
    /// connection upgraded in the warm-up is held in the measured time, and
    /// "opened" must not read 0 beside "5 still up"); otherwise if its first
    /// message's start was measured (a room member's ring may be empty, so
    /// its time).
    fn ws_upgrade_measured(&self, i: usize, now: u64) -> bool {
        let conn = &self.conns[i];
        if now >= self.shared.end_ns {
            false
        } else if conn.ws.as_ref().is_some_and(|w| w.pongs_answer) {
            true
        } else if self.room_size > 0 {
            now >= self.shared.measure_start_ns
        } else {
            !conn.ring.is_empty() && conn.ring.head().measured
        }
    }

    /// Every member of room `r` is upgraded (the last one is `i`, whose
    /// read flushes it): each sends the messages it started meanwhile.
    fn room_in(&mut self, r: usize, i: usize, now: u64) {
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
                Self::queue_room_frame(conn, opcode, bytes, m, key, epoch, uring);
            }
            if j != i {
                self.flush_out(j);
            }
        }
    }

    /// Opens connection `i` for the request just started and writes it.
    fn open(&mut self, i: usize, now: u64) {
        if self.open_socket(i, now) {
            self.kick(i, now);
        }
    }

    /// Starts connection `i`'s connect; false if it failed (counted).
    fn open_socket(&mut self, i: usize, now: u64) -> bool {
        let conn = &mut self.conns[i];
        conn.connect_ns = now;
        let tls = self.tls.as_ref();
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
            self.tls_pump(i);
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
        if self.tls.is_some() || self.framing.buffered() {
            self.tls_submit(i);
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
        if !conn.buffered {
            conn.ring.head_mut().sent_ns = now;
        }
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        match conn.write(request) {
            Ok(false) if conn.written == 0 => return,
            Ok(done) => {
                conn.handshake_ns = now;
                if conn.ring.head().measured {
                    self.stats.connections += 1;
                    self.stats
                        .connect_us
                        .saturating_record(us(now - conn.connect_ns));
                    if done && !conn.buffered {
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

    /// What a read brought, on either backend: counted, then acted on.
    #[inline]
    fn received(&mut self, i: usize, r: Received) {
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
    fn handshake_done(&mut self, i: usize, kind: Handshake, now: u64) {
        let conn = &self.conns[i];
        if self.framing.is_h2() && !conn.tls.as_ref().is_some_and(|s| s.picked_h2()) {
            // `--h2`: a server that does not speak it ends the run.
            self.shared.abort_with(self.no_h2());
            self.fail(i, Failure::Handshake, now, false);
            return;
        }
        self.handshakes_ok += 1;
        self.handshake_fails = 0;
        let conn = &self.conns[i];
        if conn.ring.head().measured {
            let s = &mut self.stats;
            match kind {
                Handshake::Full => s.handshakes_full += 1,
                Handshake::Resumed => s.handshakes_resumed += 1,
            }
            s.handshake_us
                .saturating_record(us(now.saturating_sub(conn.handshake_ns)));
        }
        if self.stats.tls.is_none() {
            if let Some(session) = &conn.tls {
                self.stats.tls = Some(session.negotiated());
            }
        }
    }

    /// `--h2` to a server that does not pick h2 by ALPN, in one line.
    #[cold]
    fn no_h2(&self) -> String {
        format!(
            "the server at {} did not pick h2 by ALPN (it serves no HTTP/2 over TLS): drop --h2",
            self.shared.plan.addr
        )
    }

    /// TLS: a handshake failed for `e` (the request fails as `Handshake`).
    /// Counted like any failure; but when every handshake so far failed,
    /// [`REFUSED_LIMIT`] of them in a row end the run with the reason.
    #[cold]
    fn handshake_failed(&mut self, e: &rustls::Error) {
        let name = self
            .shared
            .plan
            .tls
            .as_ref()
            .map_or("", |t| t.server_name.as_str());
        let no_h2 = self.framing.is_h2()
            && matches!(
                e,
                rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
            );
        if no_h2 {
            // `--h2` offered only h2 and the server refused it.
            self.stats.tls_error = Some(self.no_h2());
            self.shared.abort_with(self.no_h2());
            return;
        }
        if self.stats.tls_error.is_none() {
            self.stats.tls_error = Some(tls::explain(name, e));
        }
        self.handshake_fails += 1;
        if self.handshakes_ok == 0 && self.handshake_fails >= REFUSED_LIMIT {
            self.shared.tls_refused.store(true, Ordering::Relaxed);
            self.shared.abort_with(format!(
                "{} ({} connections in a row, none established)",
                tls::explain(name, e),
                self.handshake_fails
            ));
        }
    }

    /// TLS, io_uring: hands (the rest of) connection `i`'s request to its
    /// session and sends what the session has to send. The request counts
    /// as written once the session has it.
    fn tls_submit(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let request = self.wires[usize::from(conn.ring.head().path)].bytes;
        if let Some(session) = &mut conn.tls {
            session.queue(request);
        }
        if conn.state == State::Writing {
            conn.state = State::Reading;
            if conn.ring.head().measured && !conn.buffered {
                self.stats.bytes_sent += request.len() as u64;
            }
        }
        self.tls_pump(i);
    }

    /// TLS, io_uring: sends the ciphertext connection `i`'s session has
    /// ready, unless a send of its is still out (its completion sends the
    /// rest).
    fn tls_pump(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let (Backend::Uring(u), Some(fd)) = (&mut self.io, conn.fd()) else {
            return;
        };
        if conn.out.busy {
            return;
        }
        if let Some(session) = &mut conn.tls {
            if conn.out.pending().is_empty() {
                session.fill(&mut conn.out.bytes);
            }
        } else {
            conn.unstage();
        }
        if conn.out.pending().is_empty() {
            return;
        }
        conn.seq = conn.seq.wrapping_add(1);
        conn.out.busy = true;
        conn.out.epoch = conn.epoch;
        // The buffer is not touched until this send completes (`Out`).
        u.send(i, conn.seq & TAG_MASK, fd, conn.out.pending(), false);
    }

    /// TLS, io_uring: a send of connection `i`'s ciphertext ended.
    fn tls_sent(&mut self, i: usize, res: i32) {
        let now = self.clock.now();
        let conn = &mut self.conns[i];
        conn.out.busy = false;
        if conn.out.epoch != conn.epoch || conn.stream.is_none() {
            // For a socket already closed: its bytes are no longer wanted;
            // the socket open now may have its own waiting.
            conn.out.bytes.clear();
            conn.out.at = 0;
            self.tls_pump(i);
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
        conn.out.advance(res as usize);
        if connecting {
            // The ClientHello left: the connect is done, the handshake begins.
            self.refused = 0;
            conn.handshake_ns = now;
            conn.state = State::Reading;
            if conn.ring.head().measured {
                self.stats.connections += 1;
                self.stats
                    .connect_us
                    .saturating_record(us(now - conn.connect_ns));
                if !conn.buffered {
                    let request = self.wires[usize::from(conn.ring.head().path)].bytes;
                    self.stats.bytes_sent += request.len() as u64;
                }
            }
        }
        self.tls_pump(i);
    }

    /// A complete response to the oldest request in flight: count it, then
    /// send the next request.
    #[inline]
    fn complete(&mut self, i: usize, now: u64, leftover: usize) {
        let Some(slot) = self.conns[i].ring.pop() else {
            return;
        };
        self.settle(i, slot, now, leftover);
    }

    /// A complete response to `slot`, taken from connection `i`'s ring
    /// (the oldest, or HTTP/2's by stream id), its verdict in
    /// `conn.reader`: count it, then send the next request.
    #[inline]
    fn settle(&mut self, i: usize, slot: Slot, now: u64, leftover: usize) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        let conn = &mut self.conns[i];
        self.in_flight -= 1;
        // One request at a time: bytes after a complete response, unasked
        // for, mean the body was longer than announced. Pipelined, they are
        // the next response's.
        let unasked = leftover > 0 && !conn.buffered;
        let verdict = conn.reader.verdict.or(unasked.then_some(Failure::Length));
        let close = !self.keepalive || conn.reader.close || unasked;
        if slot.measured && now >= self.shared.end_ns {
            // Answered after the end: in flight at the end, as if aborted.
            self.stats.aborted += 1;
        } else if slot.measured {
            let s = &mut self.stats;
            s.responses += 1;
            if conn.ws.is_none() {
                s.status.count(conn.reader.status);
            }
            s.body_bytes += conn.reader.body_len;
            let path = &mut s.paths[usize::from(slot.path)];
            match verdict {
                None => {
                    s.ok += 1;
                    path.ok += 1;
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
        if let Some(server) = conn.reader.server.take() {
            conn.reader.want_server = false;
            if self.stats.server_software.is_none() {
                self.stats.server_software = Some(server);
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
    fn fail(&mut self, i: usize, failure: Failure, now: u64, refused: bool) {
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
    fn count_refused(&mut self, refused: bool) {
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

    /// A room member's connection `i` failed: every delivery still owed
    /// in its room fails once, each member closes, and the room rejoins
    /// under a new epoch (through the wake-up queue: no recursion).
    fn fail_room(&mut self, i: usize, failure: Failure, now: u64) {
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
    fn delivered(&mut self, slot: &Slot, verdict: Option<Failure>, now: u64) {
        if !slot.measured {
            return;
        }
        if now >= self.shared.end_ns {
            self.stats.aborted += 1;
            return;
        }
        self.count_delivery(slot.path, slot.origin_ns, slot.sent_ns, verdict, now);
    }

    fn count_delivery(
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
    fn room_message(&mut self, i: usize, verdict: Option<Failure>, now: u64) {
        if now >= self.next_interval_ns {
            self.roll(now);
        }
        let k = self.room_size;
        let (r, receiver) = (i / k, i % k);
        let header = self.conns[i].ws.as_ref().map(|w| w.captured);
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
    fn room_sent(&mut self, sc: usize, i: usize, now: u64) {
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

    /// HTTP/2: one request failed (its stream reset, or left unprocessed
    /// by a GOAWAY) while its connection goes on: count it, send the next.
    fn fail_one(&mut self, i: usize, slot: Slot, failure: Failure, now: u64) {
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
            if conn.draining {
                // HTTP/2 after a GOAWAY: once the last stream ends, the
                // socket closes and the next request opens a new one.
                if !conn.ring.is_empty() {
                    return;
                }
                conn.close(&mut self.io);
                conn.state = State::Idle;
                conn.draining = false;
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
            if !started || self.conns[i].stream.is_none() {
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
            .filter(|c| c.stream.is_some() && c.ws.as_ref().is_some_and(|w| w.upgraded))
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

    /// A buffered framing, in order: feeds `data` to the response being
    /// read; each complete response is its request's, and what follows it
    /// the next one's.
    fn dispatch(&mut self, i: usize, data: &[u8], now: u64) {
        if self.conns[i].ws.is_some() {
            self.dispatch_ws(i, data, now);
            return;
        }
        if self.framing.is_h2() {
            self.dispatch_h2(i, data, now);
            return;
        }
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

    /// HTTP/2: feeds `data` to the connection's codec, queues what it owes
    /// the server, and hands each event to its request: a response to the
    /// slot of its stream id (judged by the path's check), a reset or a
    /// GOAWAY's refusal fails that slot alone, the server's SETTINGS set
    /// how many streams may be in flight, a GOAWAY drains the socket.
    fn dispatch_h2(&mut self, i: usize, data: &[u8], now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let conn = &mut self.conns[i];
        let epoch = conn.epoch;
        let (Some(codec), true) = (conn.h2.as_mut(), conn.stream.is_some()) else {
            return;
        };
        if !conn.ring.is_empty() && conn.ring.head().measured {
            self.stats.bytes_received += data.len() as u64;
        }
        let mut events = std::mem::take(&mut conn.h2_events);
        events.clear();
        conn.h2_out.clear();
        let fed = codec.feed(data, &mut conn.h2_out, |e| events.push(e));
        if !conn.h2_out.is_empty() {
            let out = std::mem::take(&mut conn.h2_out);
            conn.queue(&out, uring);
            conn.h2_out = out;
        }
        // A GOAWAY stops new streams before the responses ahead of it in
        // this read start any (the codec would refuse them).
        if events.iter().any(|e| matches!(e, H2Event::GoAway { .. })) {
            conn.draining = true;
        }
        let mut after_goaway = false;
        for e in events.iter() {
            let conn = &mut self.conns[i];
            if conn.epoch != epoch {
                break; // the socket closed: the rest were its streams'
            }
            match *e {
                H2Event::Response(r) => {
                    let Some(slot) = conn.ring.take(r.stream) else {
                        continue;
                    };
                    let check = self.wires[usize::from(slot.path)].check;
                    let reader = &mut conn.reader;
                    reader.status = r.status;
                    reader.body_len = r.body_len;
                    reader.close = false;
                    reader.verdict = if !check.status_ok(r.status) {
                        Some(Failure::Status)
                    } else if r.content_length.is_some_and(|n| n != r.body_len) {
                        Some(Failure::Length)
                    } else if !r.body_ok {
                        Some(Failure::Body)
                    } else {
                        None
                    };
                    self.settle(i, slot, now, 0);
                }
                H2Event::Reset { stream, code, .. } => {
                    let Some(slot) = conn.ring.take(stream) else {
                        continue;
                    };
                    let failure = if after_goaway && code == h2::REFUSED_STREAM {
                        Failure::GoAway
                    } else {
                        Failure::Reset
                    };
                    self.fail_one(i, slot, failure, now);
                }
                H2Event::Settings {
                    max_concurrent_streams,
                } => {
                    let streams = self.framing.capacity().min(max_concurrent_streams as usize);
                    conn.ring.set_limit(streams);
                    let allowed = streams as u32;
                    self.stats.h2_streams =
                        Some(self.stats.h2_streams.map_or(allowed, |s| s.min(allowed)));
                    self.next(i, now);
                }
                H2Event::GoAway { .. } => after_goaway = true,
            }
        }
        self.conns[i].h2_events = events;
        let conn = &mut self.conns[i];
        if conn.epoch != epoch {
            return;
        }
        if fed.is_err() {
            self.fail(i, Failure::Exception, now, false);
        } else if conn.draining && conn.ring.is_empty() {
            self.next(i, now);
        }
    }

    /// WebSocket: the upgrade's `101`, then echoes, each its message's.
    fn dispatch_ws(&mut self, i: usize, data: &[u8], now: u64) {
        let uring = matches!(self.io, Backend::Uring(_));
        let epoch = self.conns[i].epoch;
        let mut at = 0;
        while at < data.len() {
            let conn = &mut self.conns[i];
            let Some(ws) = conn.ws.as_mut() else {
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
                            conn.queue_frame(10, &payload[..n], uring);
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
                        conn.queue_frame(10, &payload[..n], uring);
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

/// HTTP/2: each path of the plan as a request template, judged as its
/// check says (its exact body, when it has one). Empty for HTTP/1.1.
fn h2_templates(plan: &super::Plan) -> Vec<h2::Template> {
    if !plan.framing.is_h2() {
        return Vec::new();
    }
    let scheme = if plan.tls.is_some() { "https" } else { "http" };
    plan.routes()
        .iter()
        .map(|r| {
            let (content_type, body) = split_body(&r.request.bytes);
            let mut t = h2::Template::new(
                &r.request.method,
                scheme,
                &plan.authority,
                &r.request.target,
                body,
                content_type,
            );
            t.expected_body = r.check.body().map(<[u8]>::to_vec);
            t
        })
        .collect()
}

/// An encoded HTTP/1.1 request's Content-Type value and body (not
/// chunked: an HTTP/2 run refuses `--chunked`).
fn split_body(request: &[u8]) -> (Option<&str>, &[u8]) {
    let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (None, &[]);
    };
    let head = std::str::from_utf8(&request[..end]).unwrap_or("");
    let content_type = head.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-type")
            .then_some(value.trim())
    });
    (content_type, &request[end + 4..])
}

fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::ConnectionRefused
}
