//! The engine's two I/O backends, behind one enum: the request loop
//! (`worker`) is the same for both; only how bytes move differs.
//!
//! - **epoll** (mio, edge-triggered): readiness. A socket is registered
//!   once; per request the loop `write`s and `read`s it itself, plus a
//!   share of an `epoll_wait`. The `--rate` schedule wakes through a
//!   timerfd (`timer`).
//! - **io_uring** (the `io-uring` crate): completions. Per connection one
//!   multishot receive into a ring of provided buffers, armed once; per
//!   request one `send` queued in the submission ring. Every queued
//!   operation goes to the kernel in the loop turn's one `io_uring_enter`,
//!   which also waits (to the nanosecond: the `--rate` schedule needs no
//!   timer). Closing a socket is queued too (`shutdown` hard-linked to
//!   `close`: the armed receive holds the socket until it ends). A
//!   `--rate` run of plain HTTP/1.1 *stamps* its receives (`recvmsg` with
//!   `SO_TIMESTAMPNS`) and sleeps from slot to slot, reaping answers at
//!   the next slot, timed at their kernel receive time
//!   ([`Uring::wait_for_slot`]): one wake-up per request, not two.
//!
//! [`Io::Uring`] falls back to epoll, with the reason, where io_uring is
//! unavailable or refused (`kernel.io_uring_disabled`, a seccomp filter as
//! Docker's default one, an old kernel): see [`resolve`].

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{BufRingEntry, Fd, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};
use mio::{Events, Poll};

use super::timer::{Timer, TIMER};

/// Which I/O backend the engine's threads use (`--io`).
///
/// The default is io_uring, by measurement (`harness/bench/engine-vs-wrk.sh`;
/// the figures are in docs/ARCHITECTURE.md, "The harness"): less CPU per
/// request than epoll through its gathering waits, at a higher RPS. Where
/// io_uring is refused, a run goes on epoll and says why ([`resolve`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Io {
    /// io_uring: batched submissions, multishot receive into provided
    /// buffers, gathering waits (falls back to epoll where refused).
    #[default]
    Uring,
    /// epoll through mio: a `write` and a `read` per request.
    Epoll,
}

impl Io {
    pub fn name(self) -> &'static str {
        match self {
            Io::Uring => "uring",
            Io::Epoll => "epoll",
        }
    }
}

/// The backend a run of `wanted` gets on this machine, why it is not the
/// one wanted (one line), if it is not, and whether its waits can gather
/// (io_uring's `min_wait`, kernel 6.13): a ring with a provided-buffer
/// ring is set up and torn down once, as each engine thread will.
pub fn resolve(wanted: Io) -> (Io, Option<String>, bool) {
    match wanted {
        Io::Epoll => (Io::Epoll, None, false),
        Io::Uring => match Uring::new(8, None, BUF_SIZE) {
            Ok(u) => (Io::Uring, None, u.ring.params().is_feature_min_timeout()),
            Err(e) => (
                Io::Epoll,
                Some(format!("io_uring is unavailable here ({e}): using epoll")),
                false,
            ),
        },
    }
}

/// What a loop turn brought, for the worker to act on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// epoll: connection `conn`'s socket is ready (readable, writable, or
    /// the peer closed it).
    Ready { conn: usize, closing: bool },
    /// io_uring: a `send` ended: bytes written, or `-errno`. `tag`: the
    /// connection's request sequence number it was queued under.
    Sent { conn: usize, tag: u32, res: i32 },
    /// io_uring: the receive delivered bytes into buffer `bid` (`res` of
    /// them), the end of file (0) or `-errno`; `more`: it stays armed.
    /// `tag`: the connection's epoch it was armed under. `stamp`: when
    /// the kernel received the bytes (`CLOCK_REALTIME`, ns; 0: not
    /// stamped), on a ring made `stamped` (see [`Uring::wait_for_slot`]).
    Received {
        conn: usize,
        tag: u32,
        res: i32,
        bid: Option<u16>,
        more: bool,
        stamp: u64,
    },
}

/// One engine thread's I/O.
// One per engine thread, made once and never moved on the hot path: the
// size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    Epoll(Epoll),
    Uring(Uring),
}

impl Backend {
    /// `conns`: the thread's connections; `paced`: a `--rate` run;
    /// `gather`: how long an io_uring wait may hold out for more
    /// completions (see [`Uring::wait`]), if it gathers: `Some` only where
    /// [`resolve`] found `min_wait` and the run is a closed loop;
    /// `response_max`: the largest response the run expects, in bytes (0:
    /// unknown), which sizes io_uring's receive buffers; `stamped`:
    /// io_uring receives carry the kernel's receive time (see
    /// [`Uring::wait_for_slot`]).
    pub(crate) fn new(
        io: Io,
        conns: usize,
        paced: bool,
        gather: Option<Duration>,
        response_max: usize,
        stamped: bool,
    ) -> io::Result<Backend> {
        Ok(match io {
            Io::Epoll => Backend::Epoll(Epoll::new(paced)?),
            Io::Uring => {
                let header = if stamped { STAMPED_AT } else { 0 };
                let mut u = Uring::new(conns, gather, buf_size(response_max + header))?;
                if stamped {
                    u.stamp_receives();
                }
                Backend::Uring(u)
            }
        })
    }

    /// Hands the queued operations to the kernel and waits up to `wait_ns`
    /// (until `due_ns` on the run's clock, to the microsecond or better:
    /// the `--rate` schedule's next slot) for something to happen; what did
    /// goes to `evs` (emptied first). `in_flight`: the requests awaiting a
    /// response; `awaiting`: the connections they are on, which a gathering
    /// wait asks half of (see [`gather_want`]). `for_slot`: a stamped
    /// ring sleeps the whole `wait_ns`, answers or not, and reaps after
    /// ([`Uring::wait_for_slot`]; epoll waits as ever).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn wait(
        &mut self,
        now_ns: u64,
        wait_ns: u64,
        due_ns: Option<u64>,
        in_flight: usize,
        awaiting: usize,
        for_slot: bool,
        evs: &mut Vec<Ev>,
    ) -> io::Result<()> {
        evs.clear();
        match self {
            Backend::Epoll(e) => e.wait(now_ns, wait_ns, due_ns, evs),
            Backend::Uring(u) if for_slot && u.stamped.is_some() => u.wait_for_slot(wait_ns, evs),
            Backend::Uring(u) => u.wait(wait_ns, in_flight, awaiting, evs),
        }
    }
}

/// The epoll backend: a mio poll, its events, and the `--rate` timer.
pub(crate) struct Epoll {
    pub(crate) poll: Poll,
    events: Events,
    timer: Option<Timer>,
}

const EVENTS: usize = 1024;

impl Epoll {
    fn new(paced: bool) -> io::Result<Epoll> {
        let poll = Poll::new()?;
        let timer = if paced {
            Some(Timer::new(poll.registry())?)
        } else {
            None
        };
        Ok(Epoll {
            poll,
            events: Events::with_capacity(EVENTS),
            timer,
        })
    }

    fn wait(
        &mut self,
        now_ns: u64,
        wait_ns: u64,
        due_ns: Option<u64>,
        evs: &mut Vec<Ev>,
    ) -> io::Result<()> {
        if let (Some(timer), Some(due)) = (&mut self.timer, due_ns) {
            timer.arm(due, now_ns);
        }
        self.poll
            .poll(&mut self.events, Some(Duration::from_nanos(wait_ns)))?;
        for ev in self.events.iter() {
            if ev.token() == TIMER {
                continue;
            }
            let closing = ev.is_read_closed() || ev.is_error();
            evs.push(Ev::Ready {
                conn: ev.token().0,
                closing,
            });
        }
        Ok(())
    }
}

/// The provided-buffer group of every receive.
const BGID: u16 = 0;
/// The deferred completions the kernel runs per enter, at most, unless the
/// enter asks for more (`IO_LOCAL_TW_DEFAULT_MAX`).
const TASK_WORK_BATCH: usize = 20;
/// A stamped receive's control data: one `SCM_TIMESTAMPNS` (a `cmsghdr`,
/// 16 bytes on 64-bit Linux, and a `timespec`, 16).
const STAMP_CONTROL: usize = 32;
/// Where a stamped receive's bytes begin in its buffer: after the kernel's
/// `io_uring_recvmsg_out` (16 bytes), no name, the control data.
const STAMPED_AT: usize = 16 + STAMP_CONTROL;
/// One provided buffer: a small response in one completion, a large one in
/// several. 1 KiB, not 2: every buffer is touched as the ring turns, so
/// their size is a share of each held connection's RSS.
const BUF_SIZE: usize = 1024;
/// The largest provided buffer, for runs whose responses are large.
const BUF_SIZE_MAX: usize = 16 * 1024;

/// The provided buffers' size for responses of up to `response_max` bytes:
/// 1 KiB, or the response's size up to 16 KiB: a 64 KiB echo in 1 KiB
/// buffers took 64 completions, and the few buffers ran out with every
/// turn (each a receive armed again).
fn buf_size(response_max: usize) -> usize {
    response_max
        .next_power_of_two()
        .clamp(BUF_SIZE, BUF_SIZE_MAX)
}

/// What `user_data` carries: connection index (low 32 bits), the kind of
/// operation (8 bits), a 24-bit tag (the connection's epoch or request
/// sequence number) to tell a stale completion from a live one.
const KIND_SEND: u64 = 1;
const KIND_RECV: u64 = 2;
const KIND_NONE: u64 = 3;
const KIND_CLOSE: u64 = 4;
pub(crate) const TAG_MASK: u32 = 0xff_ffff;

fn user_data(conn: usize, kind: u64, tag: u32) -> u64 {
    (conn as u64 & 0xffff_ffff) | (kind << 32) | (u64::from(tag & TAG_MASK) << 40)
}

/// The io_uring backend: the ring, and the ring of provided buffers the
/// receives fill.
pub(crate) struct Uring {
    // Dropped first: the kernel cancels what is armed before the buffers go.
    ring: IoUring,
    bufs: BufRing,
    /// Closed loop, where the kernel has `min_wait`: how long a wait may
    /// hold out for a share of the requests in flight (µs).
    gather_us: Option<u32>,
    /// Closes queued and not yet completed.
    closing: usize,
    /// Stamped receives (`recvmsg` with `SO_TIMESTAMPNS`): the header they
    /// are armed with, which the kernel reads while they stay armed.
    stamped: Option<Box<libc::msghdr>>,
    /// Where a receive's bytes begin in its buffer (0, or [`STAMPED_AT`]).
    payload_at: usize,
}

/// A gathering wait asks for the connections awaiting answers divided by
/// this.
const GATHER_SHARE: usize = 2;
/// Below this many requests in flight, a wait asks for one completion: too
/// few to batch, and a latency-minded run (low -c) is not held back.
const GATHER_MIN_IN_FLIGHT: usize = 8;

/// The completions a gathering wait asks for, with `in_flight` requests on
/// `awaiting` connections; `None`: one completion ends it (too few
/// requests, or a share of one connection). Completions, not requests: a
/// connection's answers arrive in one receive however many are in flight
/// on it, so asking for half the requests of 4 connections pipelined 16
/// deep sat out the whole bound twice a round trip. Few connections with
/// many requests still gather (4 h2c connections of 100 streams wait for
/// 2). The figures: docs/ARCHITECTURE.md, "The harness".
fn gather_want(in_flight: usize, awaiting: usize) -> Option<usize> {
    let want = awaiting / GATHER_SHARE;
    (in_flight >= GATHER_MIN_IN_FLIGHT && want >= 2).then_some(want)
}

impl Uring {
    /// A ring for `conns` connections, with about one provided buffer per
    /// two of them (64..=256; a receive that finds none ends with ENOBUFS
    /// and is armed again, nothing is lost).
    ///
    /// Both caps are for memory: the buffers (1 KiB each) and the rings
    /// are the harness's RSS. At 1,024 buffers and 4,096 entries a thread,
    /// 19,800 connections over 2 threads took 16.4 MiB (0.83 KiB each,
    /// epoll 0.57); more than 256 buffers only ever serve more than 256
    /// responses landing in one loop turn, and a turn handles 1,024 events
    /// at most (a full submission ring is flushed early).
    fn new(conns: usize, gather: Option<Duration>, buf_size: usize) -> io::Result<Uring> {
        // Each connection queues at most a send, a receive and a
        // shutdown + close in one turn; a full ring is flushed early.
        let entries = (conns * 2 + 16).next_power_of_two().clamp(64, 2048) as u32;
        let cq = (entries * 4).min(65_536);
        let ring = IoUring::builder()
            .setup_cqsize(cq)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(cq).build(entries))?;
        let count = (conns / 2).next_power_of_two().clamp(64, 256) as u16;
        let bufs = BufRing::new(&ring, count, buf_size)?;
        // Multishot receive needs 6.0: ask the kernel, not its version.
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::RecvMulti::CODE)
            || !probe.is_supported(opcode::Shutdown::CODE)
        {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring has no multishot receive",
            ));
        }
        // Whether to gather was decided once, from `resolve`'s probe of
        // this kernel and the plan (`engine::run`); here it is only units.
        let gather_us = gather.map(|g| g.as_micros().clamp(1, u128::from(u32::MAX)) as u32);
        Ok(Uring {
            ring,
            bufs,
            gather_us,
            closing: 0,
            stamped: None,
            payload_at: 0,
        })
    }

    /// From here on, receives are `recvmsg`s on sockets with
    /// `SO_TIMESTAMPNS`: each completion says when the kernel received its
    /// bytes, so they can be reaped late without their latency growing.
    fn stamp_receives(&mut self) {
        // SAFETY: a zeroed msghdr is a valid empty one.
        let mut h: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        h.msg_controllen = STAMP_CONTROL as _;
        self.stamped = Some(h);
        self.payload_at = STAMPED_AT;
    }

    fn push(&mut self, sqe: &squeue::Entry) {
        loop {
            // SAFETY: every buffer an entry points to (a request's bytes,
            // owned by the run's plan) outlives the ring: the ring is the
            // engine thread's and is dropped before the plan.
            if unsafe { self.ring.submission().push(sqe) }.is_ok() {
                return;
            }
            // Full: hand what is queued to the kernel now.
            let _ = self.ring.submit();
        }
    }

    /// Arms the multishot receive of connection `conn` (socket `fd`).
    pub(crate) fn recv(&mut self, conn: usize, epoch: u32, fd: RawFd) {
        let sqe = match &self.stamped {
            Some(h) => {
                let on: libc::c_int = 1;
                // SAFETY: a plain setsockopt on a socket we hold. If it
                // fails, receives carry no stamp and are timed when reaped.
                unsafe {
                    libc::setsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        libc::SO_TIMESTAMPNS,
                        (&on as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    );
                }
                opcode::RecvMsgMulti::new(Fd(fd), &**h as *const libc::msghdr, BGID).build()
            }
            None => opcode::RecvMulti::new(Fd(fd), BGID).build(),
        };
        self.push(&sqe.user_data(user_data(conn, KIND_RECV, epoch)));
    }

    /// Queues a send of `bytes` (which live as long as the run's plan).
    /// `quiet`: all of it or an error (MSG_WAITALL: the kernel finishes a
    /// short send itself), and only an error completes (no completion to
    /// reap per request on a kept-alive connection).
    pub(crate) fn send(&mut self, conn: usize, seq: u32, fd: RawFd, bytes: &[u8], quiet: bool) {
        let mut sqe = opcode::Send::new(Fd(fd), bytes.as_ptr(), bytes.len() as u32)
            .flags(libc::MSG_NOSIGNAL | if quiet { libc::MSG_WAITALL } else { 0 })
            .build()
            .user_data(user_data(conn, KIND_SEND, seq));
        if quiet {
            sqe = sqe.flags(squeue::Flags::SKIP_SUCCESS);
        }
        self.push(&sqe);
    }

    /// Queues the end of socket `fd` (owned from here on): `shutdown`,
    /// which ends the armed receive, hard-linked to its `close`.
    pub(crate) fn close(&mut self, fd: RawFd) {
        let shut = opcode::Shutdown::new(Fd(fd), libc::SHUT_RDWR)
            .build()
            .flags(squeue::Flags::IO_HARDLINK)
            .user_data(user_data(0, KIND_NONE, 0));
        let close = opcode::Close::new(Fd(fd))
            .build()
            .user_data(user_data(0, KIND_CLOSE, 0));
        self.closing += 1;
        // Both in one batch: a link cannot straddle a flush.
        let sq = self.ring.submission();
        let room = sq.capacity() - sq.len();
        drop(sq);
        if room < 2 {
            let _ = self.ring.submit();
        }
        self.push(&shut);
        self.push(&close);
    }

    /// The bytes a receive put in buffer `bid` (`len` of them, as its
    /// [`Ev::Received`] says).
    #[inline]
    pub(crate) fn buf(&self, bid: u16, len: usize) -> &[u8] {
        self.bufs.get(bid, self.payload_at, len)
    }

    /// Gives buffer `bid` back to the kernel.
    #[inline]
    pub(crate) fn recycle(&mut self, bid: Option<u16>) {
        if let Some(bid) = bid {
            self.bufs.put(bid);
        }
    }

    /// One `io_uring_enter` at most: it submits what is queued and, with
    /// `GETEVENTS`, runs the deferred task work that turns socket wake-ups
    /// into completions (`DEFER_TASKRUN`: nothing else runs it). Without
    /// `GETEVENTS` an enter only submits, and receives that arrived wait a
    /// turn: the crate sets it when the kernel's `IORING_SQ_TASKRUN` flag
    /// says work is pending (`TASKRUN_FLAG`), and the timed wait always
    /// does. With nothing to submit, no work pending and completions
    /// already in the ring, no syscall at all.
    ///
    /// A gathering wait (closed loop, `--gather`) asks for half the
    /// connections awaiting answers (`awaiting`; with one request in
    /// flight per connection, half the requests), but for at most
    /// `gather_us` (`min_wait`): after
    /// that one completion is enough: fewer context switches and less CPU
    /// per request (measured in docs/ARCHITECTURE.md); a response that
    /// lands first in a batch is read up to `gather_us` later, which its
    /// latency includes.
    fn wait(
        &mut self,
        wait_ns: u64,
        in_flight: usize,
        awaiting: usize,
        evs: &mut Vec<Ev>,
    ) -> io::Result<()> {
        let ready = !self.ring.completion().is_empty();
        let r = if ready || wait_ns == 0 {
            let sq = self.ring.submission();
            let idle = sq.is_empty() && !sq.taskrun();
            drop(sq);
            if idle {
                Ok(0)
            } else {
                self.ring.submit_and_wait(0)
            }
        } else {
            let ts = Timespec::new()
                .sec(wait_ns / 1_000_000_000)
                .nsec((wait_ns % 1_000_000_000) as u32);
            let args = SubmitArgs::new().timespec(&ts);
            match (self.gather_us, gather_want(in_flight, awaiting)) {
                (Some(us), Some(want)) => {
                    let args = args.min_wait_usec(us);
                    self.ring.submitter().submit_with_args(want, &args)
                }
                _ => self.ring.submitter().submit_with_args(1, &args),
            }
        };
        match r {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        self.reap(evs);
        Ok(())
    }

    /// A stamped ring's wait for the `--rate` schedule's next slot: one
    /// enter submits what is queued (the sends leave now) and takes in
    /// what landed since the last (its deferred task work run); if that
    /// brought nothing, the thread sleeps `wait_ns` whatever arrives (a
    /// plain `clock_nanosleep`: with `DEFER_TASKRUN` an answer landing
    /// meanwhile queues task work but wakes nobody, as no one waits in the
    /// ring), and the next turn's enter takes it in with that turn's sends.
    /// One wake-up and two syscalls per slot, not a wake-up for the send
    /// and one for its answer; each answer's latency ends at its kernel
    /// receive time ([`Ev::Received`]'s `stamp`), not when it was reaped.
    ///
    /// The kernel runs at most [`TASK_WORK_BATCH`] deferred completions
    /// per enter and keeps the rest for a later one, without flagging them
    /// pending, and an enter that does not wait skips them (it looks only
    /// for new work): left there, a backlog after a stall (a busy machine)
    /// was taken in a few at a time per answer arriving, and a 5,000/s run
    /// fell to 1,700/s for good. So the enter asks for completions with a
    /// zero timeout (it runs what is pending without sleeping), and while
    /// one brings a full batch, another asks for the next.
    fn wait_for_slot(&mut self, wait_ns: u64, evs: &mut Vec<Ev>) -> io::Result<()> {
        let zero = Timespec::new();
        let args = SubmitArgs::new().timespec(&zero);
        let mut want = 1;
        loop {
            let pending = self.ring.submission().taskrun();
            if pending || want > 1 {
                match self.ring.submitter().submit_with_args(want, &args) {
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                    r => ok_or_transient(r)?,
                }
            } else if !self.ring.submission().is_empty() {
                ok_or_transient(self.ring.submit())?;
            }
            let got = self.reap(evs);
            if got < TASK_WORK_BATCH || evs.len() >= evs.capacity() {
                break;
            }
            want = TASK_WORK_BATCH;
        }
        if evs.is_empty() && wait_ns > 0 {
            sleep_ns(wait_ns);
        }
        Ok(())
    }

    /// Hands the completions in the ring to `evs`, as many as it has room
    /// for; how many.
    fn reap(&mut self, evs: &mut Vec<Ev>) -> usize {
        let room = evs.capacity().saturating_sub(evs.len()).max(1);
        let (payload_at, size) = (self.payload_at, self.bufs.size);
        let before = evs.len();
        for cqe in self.ring.completion().take(room) {
            let ud = cqe.user_data();
            let conn = (ud & 0xffff_ffff) as usize;
            let tag = (ud >> 40) as u32;
            let mut res = cqe.result();
            match (ud >> 32) & 0xff {
                KIND_SEND => evs.push(Ev::Sent { conn, tag, res }),
                KIND_RECV => {
                    let mut bid = cqueue::buffer_select(cqe.flags());
                    let mut stamp = 0;
                    if let (Some(b), true) = (bid, payload_at > 0 && res > 0) {
                        let raw = self.bufs.get(b, 0, res as usize);
                        let (len, at) = stamped(raw);
                        res = len.min(size - payload_at) as i32;
                        stamp = at;
                        if res == 0 {
                            // The end of file: a header and no bytes.
                            self.bufs.put(b);
                            bid = None;
                        }
                    }
                    evs.push(Ev::Received {
                        conn,
                        tag,
                        res,
                        bid,
                        more: cqueue::more(cqe.flags()),
                        stamp,
                    });
                }
                KIND_CLOSE => self.closing = self.closing.saturating_sub(1),
                _ => {}
            }
        }
        evs.len() - before
    }
}

/// A stamped receive's buffer (`io_uring_recvmsg_out`, then
/// [`STAMP_CONTROL`] bytes of control data, then the bytes): how many
/// bytes it holds, and the kernel's receive time in ns (`CLOCK_REALTIME`;
/// 0 if it carries none).
fn stamped(raw: &[u8]) -> (usize, u64) {
    let word = |at: usize| {
        raw.get(at..at + 4)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let long = |at: usize| {
        raw.get(at..at + 8).map_or(0, |b| {
            i64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        })
    };
    let (controllen, payloadlen) = (word(4) as usize, word(8) as usize);
    // The cmsghdr: cmsg_len (8 bytes), level, type; then the timespec.
    let c = 16;
    let stamp = if controllen >= STAMP_CONTROL
        && word(c + 8) as i32 == libc::SOL_SOCKET
        && word(c + 12) as i32 == libc::SCM_TIMESTAMPNS
    {
        let (sec, nsec) = (long(c + 16), long(c + 24));
        u64::try_from(sec).map_or(0, |s| s * 1_000_000_000 + nsec as u64)
    } else {
        0
    };
    (payloadlen, stamp)
}

/// An enter's result, where an interrupted or busy one is no failure.
fn ok_or_transient(r: io::Result<usize>) -> io::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
        Err(e) => Err(e),
    }
}

/// Sleeps `ns` on the monotonic clock (a signal may end it early).
fn sleep_ns(ns: u64) {
    let t = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: plain syscall with a valid timespec; the remainder is unused.
    unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &t, std::ptr::null_mut());
    }
}

/// The real-time clock in ns: what a receive's stamp is read against.
pub(crate) fn realtime_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill (vDSO, no syscall).
    unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut t);
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Drop for Uring {
    fn drop(&mut self) {
        // The queued closes, awaited, so no socket outlives the run: a
        // close hard-linked after its shutdown is issued from task work,
        // which DEFER_TASKRUN runs only in an enter that waits; without
        // that the ring's teardown cancels it and the socket stays open
        // in this process (bounded: 1 s).
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while self.closing > 0 && std::time::Instant::now() < deadline {
            let ts = Timespec::new().nsec(10_000_000);
            let args = SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            let mut done = 0;
            for cqe in self.ring.completion() {
                if (cqe.user_data() >> 32) & 0xff == KIND_CLOSE {
                    done += 1;
                }
            }
            self.closing = self.closing.saturating_sub(done);
        }
    }
}

/// A ring of provided buffers (`IORING_REGISTER_PBUF_RING`): the entries
/// in page-aligned memory shared with the kernel, the buffers beside them.
struct BufRing {
    entries: *mut BufRingEntry,
    map_len: usize,
    count: u16,
    /// The tail we publish (the kernel consumes from the head).
    tail: u16,
    /// One buffer's bytes.
    size: usize,
    data: Box<[u8]>,
}

impl BufRing {
    fn new(ring: &IoUring, count: u16, size: usize) -> io::Result<BufRing> {
        let map_len = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping, owned by the BufRing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut b = BufRing {
            entries: ptr.cast(),
            map_len,
            count,
            tail: 0,
            size,
            data: vec![0u8; usize::from(count) * size].into_boxed_slice(),
        };
        // SAFETY: the mapping is page-aligned, `count` entries long (a
        // power of two) and lives until after the ring is unregistered or
        // gone (Drop order of Uring).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(ptr as u64, count, BGID, 0)?;
        }
        for bid in 0..count {
            b.put(bid);
        }
        Ok(b)
    }

    /// `len` bytes of buffer `bid` from `from` on (within the buffer).
    #[inline]
    fn get(&self, bid: u16, from: usize, len: usize) -> &[u8] {
        let at = usize::from(bid) * self.size + from.min(self.size);
        let end = usize::from(bid) * self.size + self.size;
        &self.data[at..(at + len).min(end)]
    }

    #[inline]
    fn put(&mut self, bid: u16) {
        let idx = usize::from(self.tail & (self.count - 1));
        let addr = self.data[usize::from(bid) * self.size..].as_ptr() as u64;
        // SAFETY: idx < count; the entry is ours until the tail passes it.
        unsafe {
            let e = &mut *self.entries.add(idx);
            e.set_addr(addr);
            e.set_len(self.size as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail field of the ring's first entry, shared with the
        // kernel: published with release ordering after the entry.
        unsafe {
            let tail = BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: our mapping; the ring that used it is gone (Uring's order).
        unsafe {
            libc::munmap(self.entries.cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    /// A stamped receive's buffer: the header's lengths, the timestamp in
    /// its `SCM_TIMESTAMPNS`; none where the control data is another's.
    #[test]
    fn a_stamped_buffer_gives_its_length_and_its_receive_time() {
        let mut raw = vec![0u8; STAMPED_AT + 11];
        raw[4..8].copy_from_slice(&(STAMP_CONTROL as u32).to_ne_bytes());
        raw[8..12].copy_from_slice(&11u32.to_ne_bytes());
        raw[16..24].copy_from_slice(&32u64.to_ne_bytes());
        raw[24..28].copy_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
        raw[28..32].copy_from_slice(&libc::SCM_TIMESTAMPNS.to_ne_bytes());
        raw[32..40].copy_from_slice(&1_700_000_000i64.to_ne_bytes());
        raw[40..48].copy_from_slice(&123i64.to_ne_bytes());
        raw[STAMPED_AT..].copy_from_slice(b"Hello World");
        assert_eq!(stamped(&raw), (11, 1_700_000_000_000_000_123));
        raw[28..32].copy_from_slice(&libc::SCM_RIGHTS.to_ne_bytes());
        assert_eq!(stamped(&raw), (11, 0));
        raw[4..8].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(stamped(&raw[..16]), (11, 0));
    }

    /// A gathering wait asks for half the connections awaiting answers,
    /// never for more completions than they can make: 4 connections
    /// pipelined 16 deep make 4 receives, and a wait that asked for 32
    /// (half the requests) sat out its whole bound every time.
    #[test]
    fn a_gathering_wait_asks_for_half_the_connections_awaiting() {
        // One request per connection (HTTP/1.1): half the requests, from 8.
        assert_eq!(gather_want(4, 4), None, "too few to gather");
        assert_eq!(gather_want(8, 8), Some(4));
        assert_eq!(gather_want(100, 100), Some(50));
        // Many per connection: half the connections, never the requests.
        assert_eq!(gather_want(64, 4), Some(2));
        assert_eq!(gather_want(32, 2), None, "one connection's answer ends it");
        assert_eq!(gather_want(400, 4), Some(2));
    }

    /// A gathering wait asks for half the connections awaiting, but once
    /// its bound has passed one completion ends it: with 16 awaiting and one
    /// answered it returns with that answer, not at its 10 s timeout.
    #[test]
    fn a_gathering_wait_ends_at_its_bound_with_fewer_completions_than_it_asked_for() {
        let Ok(mut u) = Uring::new(16, Some(Duration::from_micros(400)), BUF_SIZE) else {
            eprintln!("skipped: io_uring is unavailable here");
            return;
        };
        if !u.ring.params().is_feature_min_timeout() {
            eprintln!("skipped: this kernel's io_uring has no min_wait (6.13)");
            return;
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..16).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut servers: Vec<TcpStream> = (0..16).map(|_| listener.accept().unwrap().0).collect();
        for (i, c) in clients.iter().enumerate() {
            u.recv(i, 1, c.as_raw_fd());
        }
        let mut evs = Vec::with_capacity(64);
        u.wait(0, 16, 16, &mut evs).unwrap(); // submits the receives
        servers[3].write_all(b"answer").unwrap();
        let began = Instant::now();
        let mut got = None;
        while got.is_none() && began.elapsed() < Duration::from_secs(30) {
            evs.clear();
            u.wait(10_000_000_000, 16, 16, &mut evs).unwrap();
            got = evs.iter().find_map(|e| match *e {
                Ev::Received { conn, res, .. } => Some((conn, res)),
                _ => None,
            });
        }
        let waited = began.elapsed();
        assert_eq!(got, Some((3, 6)), "{evs:?}");
        assert!(
            waited < Duration::from_secs(5),
            "the wait held out {waited:?} for completions that never came"
        );
    }
}
